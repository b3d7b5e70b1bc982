#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_ring.h>
#include <rte_telemetry.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "client/sock.h"
#include "common/sleep.h"
#include "mrc/mrc.h"

namespace mrc::mrcd {

using nlohmann::json;

namespace {

int logtype() {
    static const int t = [] {
        const int r = rte_log_register_type_and_pick_level("mrcd", RTE_LOG_INFO);
        return r < 0 ? int(RTE_LOGTYPE_USER1) : r;
    }();
    return t;
}

template <typename... A>
void log(uint32_t level, fmt::format_string<A...> f, A &&...a) {
    const std::string s = fmt::format(f, std::forward<A>(a)...);
    rte_log(level, uint32_t(logtype()), "mrcd: %s\n", s.c_str());
}

uint64_t mono_ns() {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count());
}

constexpr uint32_t kMaxMsgBytes = 1u << 30;
constexpr uint16_t kCmEv = 0xc0de;  // UDP source port of CM frames (not a QP's EV)
constexpr uint32_t kCmInCap = 256;
constexpr uint64_t kAnsweredKeepNs = 60'000'000'000ull;
constexpr size_t kMaxAcceptBacklog = 64;

uint8_t wc_status(WcStatus s) {
    switch (s) {
        case WcStatus::kSuccess:
            return MRC_WC_SUCCESS;
        case WcStatus::kRetryExceeded:
            return MRC_WC_RETRY_EXCEEDED;
        case WcStatus::kNackRetryExceeded:
            return MRC_WC_NACK_RETRY_EXCEEDED;
        case WcStatus::kRemoteAccessError:
            return MRC_WC_REMOTE_ACCESS_ERROR;
        case WcStatus::kRemoteProtocolError:
            return MRC_WC_REMOTE_PROTOCOL_ERROR;
        case WcStatus::kFlushed:
            return MRC_WC_FLUSHED;
        case WcStatus::kPeerUnreachable:
            return MRC_WC_PEER_UNREACHABLE;
    }
    return MRC_WC_FLUSHED;
}

// What DPDK telemetry's /mrcd/status shows: a copy the server thread
// refreshes, read by the telemetry thread under the lock.
struct TelemetryView {
    std::mutex mu;
    bool live = false;
    DaemonCounters c;
    uint64_t clients = 0, qps = 0, listeners = 0, regions = 0;
};
TelemetryView g_tel;

int tel_status(const char *, const char *, rte_tel_data *d) {
    std::lock_guard<std::mutex> g(g_tel.mu);
    rte_tel_data_start_dict(d);
    if (!g_tel.live) {
        rte_tel_data_add_dict_string(d, "error", "mrcd is not serving");
        return 0;
    }
    const DaemonCounters &c = g_tel.c;
    rte_tel_data_add_dict_u64(d, "clients", g_tel.clients);
    rte_tel_data_add_dict_u64(d, "qps", g_tel.qps);
    rte_tel_data_add_dict_u64(d, "listeners", g_tel.listeners);
    rte_tel_data_add_dict_u64(d, "regions", g_tel.regions);
#define MRCD_TEL(f) rte_tel_data_add_dict_u64(d, #f, c.f)
    MRCD_TEL(clients_accepted);
    MRCD_TEL(clients_refused);
    MRCD_TEL(clients_released);
    MRCD_TEL(requests);
    MRCD_TEL(bad_requests);
    MRCD_TEL(connects_sent);
    MRCD_TEL(connects_received);
    MRCD_TEL(accepts);
    MRCD_TEL(rejects_sent);
    MRCD_TEL(disconnects_sent);
    MRCD_TEL(disconnects_received);
    MRCD_TEL(cm_bad);
    MRCD_TEL(cm_duplicates);
    MRCD_TEL(cm_dropped);
#undef MRCD_TEL
    return 0;
}

}  // namespace

// ---- what the server asks a worker to do ----------------------------------

struct Daemon::Command {
    enum Kind : uint8_t {
        kRegMr,
        kDeregMr,
        kAddCq,
        kDelCq,
        kCreateQp,
        kConnectQp,
        kDestroyQp,
        kErrorQp,
        kSendCm,
        kOutstanding,
        kShutdown,
    };
    Kind kind = kOutstanding;
    uint32_t client = 0;
    uint32_t key = 0;  // MR key, CQ id, or wire QPN
    uint8_t *base = nullptr;
    uint64_t length = 0;
    uint64_t remote_base = 0;
    uint32_t access = 0;
    uint32_t pd = 0;
    uint32_t cq_id = 0;
    ipc::RingHdr *ring = nullptr;
    QpConfig qcfg;
    QpPeer peer;
    uint32_t epsn = 0, spsn = 0;
    uint8_t status = 0;
    bool force = false;  // kDeregMr: the owner is gone (its QPs are destroyed first)
    std::vector<std::pair<uint8_t, std::vector<uint8_t>>> frames;  // (plane, frame)
    // Answers.
    std::atomic<bool> done{false};
    bool ok = true;
    std::string error;
    uint64_t out = 0;
};

struct Daemon::CmIn {
    uint8_t frame[wire::kCmBytes + 64];
    uint32_t len = 0;
    uint8_t plane = 0;
};

// ---- the worker side ------------------------------------------------------

class Agent final : public dp::WorkerApp {
  public:
    Agent(Daemon *d, dp::Worker *w, uint32_t max_mrs) : d_(d), w_(w), mrs_(max_mrs) {
        const std::string name = fmt::format("mrcd_cmd{}", w->index());
        cmds_ = rte_ring_create(name.c_str(), 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    }
    ~Agent() override {
        if (cmds_ != nullptr) rte_ring_free(cmds_);
    }
    bool ok() const { return cmds_ != nullptr; }
    rte_ring *commands() { return cmds_; }

    uint32_t poll(dp::Worker &w, uint64_t now_ns) override;
    void on_cm_frame(dp::Worker &w, const uint8_t *frame, uint32_t len, uint8_t plane,
                     uint64_t now_ns) override;

  private:
    struct CqB {
        uint32_t id = 0;
        ipc::RingHdr *h = nullptr;
        ipc::Cqe *e = nullptr;
        uint32_t mask = 0;
        uint32_t prod = 0;
        uint32_t space() const {
            const uint32_t used = prod - h->cons.load(std::memory_order_acquire);
            return used > mask + 1 ? 0 : mask + 1 - used;  // a hostile index: no room
        }
        void push(const ipc::Cqe &c) {
            e[prod & mask] = c;
            ++prod;
        }
        void publish() { h->prod.store(prod, std::memory_order_release); }
    };
    struct LocalMr {
        uint8_t *base = nullptr;
        uint64_t length = 0;
        uint32_t key = 0;
        uint32_t client = 0;
        bool live = false;
        uint32_t inflight = 0;  // work requests in the core that read it
    };
    struct QpB {
        Qp *qp = nullptr;
        uint32_t wire = 0;
        uint32_t client = 0;
        ipc::RingHdr *h = nullptr;
        ipc::Sqe *e = nullptr;
        uint32_t mask = 0;
        uint32_t cons = 0;
        CqB *cq = nullptr;
        uint8_t event_status = 0;  // why the QP errored, when not the core's reason
        bool event_sent = false;
        bool shutdown = false;
        // The region (key slot) of every work request the core holds, in
        // posting order (the core completes in that order): a region is
        // not let go while a request may still read it.
        std::vector<uint32_t> uses;
        uint32_t uses_head = 0, uses_tail = 0;
        void use(std::vector<LocalMr> &mrs, uint32_t slot) {
            uses[uses_tail++ & (uses.size() - 1)] = slot;
            ++mrs[slot].inflight;
        }
        void done(std::vector<LocalMr> &mrs) {
            if (uses_head != uses_tail) --mrs[uses[uses_head++ & (uses.size() - 1)]].inflight;
        }
        void release_all(std::vector<LocalMr> &mrs) {
            while (uses_head != uses_tail)
                done(mrs);
        }
    };
    void execute(Daemon::Command &c, uint64_t now_ns);
    uint32_t service(QpB &q);
    QpB *find(uint32_t wire) {
        for (auto &q : qps_)
            if (q->wire == wire) return q.get();
        return nullptr;
    }

    Daemon *d_;
    dp::Worker *w_;
    rte_ring *cmds_ = nullptr;
    std::vector<std::unique_ptr<CqB>> cqs_;
    std::vector<std::unique_ptr<QpB>> qps_;
    std::vector<LocalMr> mrs_;  // by key slot
    SendCompletion sc_[32];
    RecvCompletion rc_[32];
};

uint32_t Agent::poll(dp::Worker &, uint64_t now_ns) {
    uint32_t work = 0;
    void *objs[8];
    const unsigned n = rte_ring_sc_dequeue_burst(cmds_, objs, 8, nullptr);
    for (unsigned i = 0; i < n; ++i) {
        auto *c = static_cast<Daemon::Command *>(objs[i]);
        execute(*c, now_ns);
        c->done.store(true, std::memory_order_release);
    }
    work += n;
    for (auto &q : qps_)
        work += service(*q);
    for (auto &cq : cqs_)
        cq->publish();
    return work;
}

void Agent::on_cm_frame(dp::Worker &, const uint8_t *frame, uint32_t len, uint8_t plane, uint64_t) {
    // The server parses it; here it is only copied out (bounded: a flood of
    // CM frames costs a full ring and a counter, nothing else).
    if (len > wire::kCmBytes + 64) {
        d_->cm_oversize_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    auto *m = new (std::nothrow) Daemon::CmIn;
    if (m == nullptr) return;
    std::memcpy(m->frame, frame, len);
    m->len = len;
    m->plane = plane;
    if (rte_ring_sp_enqueue(d_->cm_in_, m) != 0) {
        delete m;
        d_->cm_overflow_.fetch_add(1, std::memory_order_relaxed);
    }
}

uint32_t Agent::service(QpB &q) {
    Qp &qp = *q.qp;
    CqB &cq = *q.cq;
    uint32_t space = cq.space();
    uint32_t work = 0;
    // Completions first: they make room in the core for more work.
    if (space) {
        const uint32_t n = qp.poll_send_cq(sc_, std::min<uint32_t>(space, 32));
        for (uint32_t i = 0; i < n; ++i) {
            q.done(mrs_);
            ipc::Cqe c{};
            c.wr_id = sc_[i].wr_id;
            c.qp_num = q.wire;
            c.opcode = MRC_WC_WRITE;
            c.status = sc_[i].status == WcStatus::kFlushed && q.shutdown
                           ? uint8_t(MRC_WC_DAEMON_SHUTDOWN)
                           : wc_status(sc_[i].status);
            c.byte_len = sc_[i].bytes;
            cq.push(c);
        }
        space -= n;
        work += n;
    }
    if (space) {
        const uint32_t n = qp.poll_recv_cq(rc_, std::min<uint32_t>(space, 32));
        for (uint32_t i = 0; i < n; ++i) {
            ipc::Cqe c{};
            c.qp_num = q.wire;
            c.opcode = MRC_WC_RECV_WRITE_IMM;
            c.status = MRC_WC_SUCCESS;
            c.byte_len = rc_[i].bytes;
            c.imm = rc_[i].imm;
            cq.push(c);
        }
        space -= n;
        work += n;
    }
    const QpState st = qp.state();
    if (st != QpState::kRts && st != QpState::kError) return work;  // not connected yet
    const uint32_t prod = q.h->prod.load(std::memory_order_acquire);
    uint32_t avail = prod - q.cons;
    if (avail > q.mask + 1) {
        // The application wrote an index no ring can have: stop trusting it.
        if (st == QpState::kRts) {
            q.event_status = MRC_WC_BAD_REQUEST;
            qp.to_error(WcStatus::kFlushed);
        }
        avail = 0;
    }
    if (st == QpState::kRts) {
        const uint32_t budget = std::min<uint32_t>(avail, 32);
        for (uint32_t i = 0; i < budget; ++i) {
            // One copy: every field is read once, after which the
            // application can change the slot without effect.
            ipc::Sqe s;
            std::memcpy(&s, &q.e[q.cons & q.mask], sizeof s);
            uint8_t bad = 0;
            const uint32_t slot = s.lkey >> 8;
            const LocalMr *mr = slot < mrs_.size() ? &mrs_[slot] : nullptr;
            if (s.opcode != MRC_WR_WRITE && s.opcode != MRC_WR_WRITE_WITH_IMM)
                bad = MRC_WC_BAD_REQUEST;
            else if (s.length == 0 || s.length > kMaxMsgBytes)
                bad = MRC_WC_BAD_REQUEST;
            else if (mr == nullptr || !mr->live || mr->key != s.lkey || mr->client != q.client ||
                     s.local_offset > mr->length || s.length > mr->length - s.local_offset)
                bad = MRC_WC_LOCAL_PROTECTION_ERROR;
            if (bad) {
                if (space == 0) break;
                ipc::Cqe c{};
                c.wr_id = s.wr_id;
                c.qp_num = q.wire;
                c.opcode = MRC_WC_WRITE;
                c.status = bad;
                cq.push(c);
                --space;
                ++q.cons;
                q.event_status = bad;
                qp.to_error(WcStatus::kFlushed);
                break;
            }
            WriteRequest wr;
            wr.wr_id = s.wr_id;
            wr.local = mr->base + s.local_offset;
            wr.length = s.length;
            wr.remote_addr = s.remote_addr;
            wr.rkey = s.rkey;
            wr.with_imm = s.opcode == MRC_WR_WRITE_WITH_IMM;
            wr.imm = s.imm;
            if (qp.post_write(wr) != PostResult::kOk) break;  // full: the rest waits in the ring
            q.use(mrs_, slot);
            ++q.cons;
            ++work;
        }
    } else {
        // In the error state: what is still in the ring completes flushed.
        const uint8_t why = q.shutdown ? uint8_t(MRC_WC_DAEMON_SHUTDOWN) : uint8_t(MRC_WC_FLUSHED);
        while (avail && space) {
            ipc::Cqe c{};
            c.wr_id = q.e[q.cons & q.mask].wr_id;
            c.qp_num = q.wire;
            c.opcode = MRC_WC_WRITE;
            c.status = why;
            cq.push(c);
            ++q.cons;
            --avail;
            --space;
            ++work;
        }
        q.h->state.store(q.shutdown ? ipc::kRingShutdown : ipc::kRingError,
                         std::memory_order_release);
        // In the error state the core sends nothing and holds no request.
        if (qp.outstanding_wrs() == 0) q.release_all(mrs_);
        if (!q.event_sent && avail == 0 && qp.outstanding_wrs() == 0 && space) {
            ipc::Cqe c{};
            c.qp_num = q.wire;
            c.opcode = MRC_WC_QP_EVENT;
            c.status = q.shutdown       ? uint8_t(MRC_WC_DAEMON_SHUTDOWN)
                       : q.event_status ? q.event_status
                                        : wc_status(qp.error_cause());
            cq.push(c);
            q.event_sent = true;
            ++work;
        }
    }
    q.h->cons.store(q.cons, std::memory_order_release);
    return work;
}

void Agent::execute(Daemon::Command &c, uint64_t) {
    Endpoint &ep = w_->endpoint();
    using K = Daemon::Command;
    switch (c.kind) {
        case K::kRegMr: {
            auto r =
                ep.mrs().register_with_key(c.key, c.base, c.length, c.access, c.pd, c.remote_base);
            if (!r) {
                c.ok = false;
                c.error = r.error().message;
                return;
            }
            LocalMr &m = mrs_[c.key >> 8];
            m = LocalMr{c.base, c.length, c.key, c.client, true};
            return;
        }
        case K::kDeregMr: {
            const uint32_t slot = c.key >> 8;
            if (!c.force && slot < mrs_.size() && mrs_[slot].live && mrs_[slot].key == c.key &&
                mrs_[slot].inflight) {
                c.ok = false;
                c.error = fmt::format("region {:#x} is the source of {} work requests in progress",
                                      c.key, mrs_[slot].inflight);
                return;
            }
            ep.mrs().deregister(c.key);
            if (slot < mrs_.size()) mrs_[slot] = LocalMr{};
            return;
        }
        case K::kAddCq: {
            auto b = std::make_unique<CqB>();
            b->id = c.cq_id;
            b->h = c.ring;
            b->e = ipc::ring_entries<ipc::Cqe>(c.ring);
            b->mask = c.ring->entries - 1;
            b->prod = c.ring->prod.load(std::memory_order_relaxed);
            cqs_.push_back(std::move(b));
            return;
        }
        case K::kDelCq: {
            cqs_.erase(std::remove_if(cqs_.begin(), cqs_.end(),
                                      [&](const auto &b) { return b->id == c.cq_id; }),
                       cqs_.end());
            return;
        }
        case K::kCreateQp: {
            CqB *cq = nullptr;
            for (auto &b : cqs_)
                if (b->id == c.cq_id) cq = b.get();
            if (cq == nullptr) {
                c.ok = false;
                c.error = "no such CQ on this worker";
                return;
            }
            auto q = ep.create_qp(c.qcfg);
            if (!q) {
                c.ok = false;
                c.error = q.error().message;
                return;
            }
            auto b = std::make_unique<QpB>();
            b->qp = *q;
            b->wire = ep.wire_qpn(**q);
            b->client = c.client;
            b->h = c.ring;
            b->e = ipc::ring_entries<ipc::Sqe>(c.ring);
            b->mask = c.ring->entries - 1;
            b->cq = cq;
            // As deep as the core's send queue (a power of two at least
            // max_send_wr): one entry per request it can hold.
            uint32_t depth = 1;
            while (depth < c.qcfg.max_send_wr)
                depth <<= 1;
            b->uses.assign(depth, 0);
            c.out = b->wire;
            qps_.push_back(std::move(b));
            return;
        }
        case K::kConnectQp: {
            QpB *q = find(c.key);
            if (q == nullptr) {
                c.ok = false;
                c.error = "no such QP";
                return;
            }
            Result<void> r = q->qp->to_init(c.pd);
            if (r) r = q->qp->to_rtr(c.peer, Psn(c.epsn));
            if (r) r = q->qp->to_rts(Psn(c.spsn));
            if (!r) {
                c.ok = false;
                c.error = r.error().message;
            }
            return;
        }
        case K::kDestroyQp: {
            for (auto it = qps_.begin(); it != qps_.end(); ++it) {
                if ((*it)->wire != c.key) continue;
                (*it)->release_all(mrs_);
                const uint32_t local = (*it)->qp->qpn();
                qps_.erase(it);
                if (auto r = ep.destroy_qp(local); !r) {
                    c.ok = false;
                    c.error = r.error().message;
                }
                return;
            }
            c.ok = false;
            c.error = "no such QP";
            return;
        }
        case K::kErrorQp: {
            QpB *q = find(c.key);
            if (q == nullptr) return;
            if (q->qp->state() != QpState::kError) {
                q->event_status = c.status;
                q->qp->to_error(WcStatus::kFlushed);
            }
            return;
        }
        case K::kSendCm: {
            uint64_t sent = 0;
            for (const auto &[plane, f] : c.frames)
                sent += w_->send_frame(plane, f.data(), uint32_t(f.size()));
            c.out = sent;
            return;
        }
        case K::kOutstanding: {
            uint64_t n = 0;
            for (auto &q : qps_) {
                if (q->qp->state() == QpState::kRts) {
                    n += q->qp->outstanding_wrs();
                    const uint32_t avail = q->h->prod.load(std::memory_order_acquire) - q->cons;
                    n += avail <= q->mask + 1 ? avail : 0;
                } else if (q->qp->state() == QpState::kError && !q->event_sent) {
                    ++n;  // its flushes have not all reached the CQ yet
                }
            }
            c.out = n;
            return;
        }
        case K::kShutdown: {
            for (auto &q : qps_) {
                q->shutdown = true;
                if (q->qp->state() == QpState::kRts || q->qp->state() == QpState::kRtr)
                    q->qp->to_error(WcStatus::kFlushed);
                else if (q->qp->state() != QpState::kError)
                    q->h->state.store(ipc::kRingShutdown, std::memory_order_release);
            }
            return;
        }
    }
}

// ---- the server side ------------------------------------------------------

struct Daemon::MrRec {
    uint32_t key = 0;
    uint8_t *base = nullptr;
    uint64_t map_bytes = 0;
    uint64_t length = 0;
    uint64_t remote_base = 0;
    uint32_t access = 0;
    uint32_t service = 0;
};
struct Daemon::CqRec {
    uint32_t id = 0;
    uint32_t worker = 0;
    ipc::RingHdr *ring = nullptr;
    uint64_t map_bytes = 0;
    uint32_t entries = 0;
};
struct Daemon::QpRec {
    uint32_t wire = 0;
    uint32_t client = 0;
    uint32_t worker = 0;
    uint32_t cq_id = 0;
    ipc::RingHdr *ring = nullptr;
    uint64_t map_bytes = 0;
    uint32_t entries = 0;
    int memfd = -1;  // until handed to the application (accept)
    bool connected = false;
    uint32_t service = 0;
    uint32_t peer_qpn = 0;
    uint8_t peer_planes = 0;
    uint32_t peer_ip[kMaxPlanes] = {};
    wire::MacAddr peer_mac[kMaxPlanes] = {};
    uint64_t connected_ns = 0;
};
struct Daemon::Listener {
    uint32_t client = 0;
    uint32_t cq_id = 0;
    uint32_t sq_depth = 0;
    std::deque<uint32_t> ready;  // accepted QPs the application has not taken yet
};
struct Daemon::Pending {
    enum Kind : uint8_t { kConnect, kAccept } kind = kConnect;
    uint32_t client = 0;
    uint32_t seq = 0;
    uint64_t deadline_ns = 0;
    // connect
    uint64_t conn_id = 0;
    uint32_t qpn = 0;
    uint32_t service = 0;
    uint32_t peer_ip = 0;
    uint32_t psn = 0;
    uint64_t next_send_ns = 0;
};
struct Daemon::Client {
    uint32_t id = 0;
    int fd = -1;
    pid_t pid = 0;
    uid_t uid = 0;
    std::string name;
    bool hello = false;
    std::map<uint32_t, MrRec> mrs;
    std::map<uint32_t, CqRec> cqs;
    std::vector<uint32_t> qps;
    std::vector<uint32_t> listens;
    std::unique_ptr<Pending> waiting;  // a connect or accept in progress (one at a time)
    uint64_t requests = 0;
};

Daemon::Daemon(const DaemonConfig &cfg, dp::Dataplane *dp)
    : cfg_(cfg), dp_(dp), rng_(std::random_device{}()) {}

Daemon::~Daemon() {
    for (auto &[id, c] : clients_)
        if (c->fd >= 0) ::close(c->fd);
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
        ::unlink(socket_path_.c_str());
    }
    for (auto &a : agents_)
        dp_->worker(uint32_t(&a - &agents_[0])).set_app(nullptr);
    if (cm_in_ != nullptr) {
        void *m;
        while (rte_ring_sc_dequeue(cm_in_, &m) == 0)
            delete static_cast<CmIn *>(m);
        rte_ring_free(cm_in_);
    }
}

Result<std::unique_ptr<Daemon>> Daemon::create(const DaemonConfig &cfg, dp::Dataplane *dp) {
    std::unique_ptr<Daemon> d(new Daemon(cfg, dp));
    if (cfg.plane_ip.size() != dp->planes())
        return Error{fmt::format("the config gives {} [[plane]] addresses for {} ports",
                                 cfg.plane_ip.size(), dp->planes())};
    d->cm_in_ =
        rte_ring_create("mrcd_cm_in", kCmInCap, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (d->cm_in_ == nullptr)
        return Error{fmt::format("cannot create the CM ring: {}", rte_strerror(rte_errno))};
    for (uint32_t w = 0; w < dp->workers(); ++w) {
        d->agents_.push_back(
            std::make_unique<Agent>(d.get(), &dp->worker(w), dp->config().max_mrs));
        if (!d->agents_.back()->ok())
            return Error{fmt::format("cannot create worker {}'s command ring: {}", w,
                                     rte_strerror(rte_errno))};
        dp->worker(w).set_app(d->agents_.back().get());
    }
    d->mr_gen_.assign(dp->config().max_mrs, 0);
    for (uint32_t i = dp->config().max_mrs; i-- > 0;)
        d->mr_free_.push_back(i);
    if (auto r = d->open_socket(); !r) return r.error();
    static bool registered = false;
    if (!registered) {
        rte_telemetry_register_cmd("/mrcd/status", tel_status,
                                   "mrcd: clients, QPs, connection-management counters");
        registered = true;
    }
    return d;
}

Result<void> Daemon::open_socket() {
    socket_path_ = cfg_.socket;
    const size_t slash = socket_path_.rfind('/');
    if (slash != std::string::npos && slash > 0) {
        const std::string dir = socket_path_.substr(0, slash);
        if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
            return Error{fmt::format("cannot create {}: {}", dir, std::strerror(errno))};
    }
    // A socket file left by a daemon that died: take it over only if nobody answers on it.
    const int probe = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, socket_path_.data(), socket_path_.size());
    if (probe >= 0) {
        const bool live = ::connect(probe, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
        ::close(probe);
        if (live)
            return Error{fmt::format("another mrcd serves {} (stop it, or set [daemon] socket)",
                                     socket_path_)};
    }
    ::unlink(socket_path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd_ < 0) return Error{fmt::format("socket: {}", std::strerror(errno))};
    // Created with no permissions for anyone else, then opened up to the
    // configured mode: there is no moment at which it is wider.
    const mode_t old = ::umask(0177);
    const int br = ::bind(listen_fd_, reinterpret_cast<sockaddr *>(&a), sizeof a);
    const int be = errno;
    ::umask(old);
    if (br != 0) return Error{fmt::format("bind {}: {}", socket_path_, std::strerror(be))};
    if (!cfg_.socket_group.empty()) {
        const group *g = ::getgrnam(cfg_.socket_group.c_str());
        if (g == nullptr)
            return Error{fmt::format("[daemon] socket_group: no group '{}'", cfg_.socket_group)};
        if (::chown(socket_path_.c_str(), uid_t(-1), g->gr_gid) != 0)
            return Error{fmt::format("chown {}: {}", socket_path_, std::strerror(errno))};
    }
    if (::chmod(socket_path_.c_str(), cfg_.socket_mode) != 0)
        return Error{fmt::format("chmod {}: {}", socket_path_, std::strerror(errno))};
    if (::listen(listen_fd_, 64) != 0)
        return Error{fmt::format("listen: {}", std::strerror(errno))};
    return {};
}

void Daemon::run_on(uint32_t worker, Command &cmd) {
    cmd.done.store(false, std::memory_order_relaxed);
    rte_ring *r = agents_[worker]->commands();
    while (rte_ring_sp_enqueue(r, &cmd) != 0)
        std::this_thread::yield();
    uint64_t spins = 0;
    while (!cmd.done.load(std::memory_order_acquire)) {
        if (++spins < 1000)
            std::this_thread::yield();
        else
            mrc::sleep_for_steady(std::chrono::microseconds(20));
    }
}

Result<std::pair<int, ipc::RingHdr *>> Daemon::make_ring(uint32_t entries, size_t entry_bytes,
                                                         const char *name) {
    const size_t bytes = ipc::ring_bytes(entries, entry_bytes);
    const int fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return Error{fmt::format("memfd_create: {}", std::strerror(errno))};
    if (::ftruncate(fd, off_t(bytes)) != 0 ||
        ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        const int e = errno;
        ::close(fd);
        return Error{fmt::format("ring memory: {}", std::strerror(e))};
    }
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        return Error{fmt::format("mmap of a ring: {}", std::strerror(e))};
    }
    auto *h = new (p) ipc::RingHdr;
    h->prod.store(0);
    h->cons.store(0);
    h->entries = entries;
    h->entry_bytes = uint32_t(entry_bytes);
    h->state.store(ipc::kRingOk);
    return std::make_pair(fd, h);
}

uint32_t Daemon::pd_of(uint32_t client, uint32_t service) {
    auto [it, fresh] = pds_.try_emplace({client, service}, 0);
    if (fresh) it->second = next_pd_++;
    return it->second;
}

// ---- clients --------------------------------------------------------------

void Daemon::accept_clients() {
    for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        ucred cred{};
        socklen_t len = sizeof cred;
        if (draining_ || clients_.size() >= cfg_.max_clients ||
            ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            ++ctr_.clients_refused;
            ipc::RepHdr h{};
            h.magic = ipc::kMagic;
            h.version = ipc::kVersion;
            h.status = draining_ ? MRC_EDAEMON : MRC_ENOMEM;
            std::snprintf(
                h.message, sizeof h.message, "%s",
                draining_
                    ? "mrcd is shutting down"
                    : fmt::format("mrcd serves at most {} applications", cfg_.max_clients).c_str());
            ipc::send_msg(fd, &h, sizeof h);
            ::close(fd);
            continue;
        }
        auto c = std::make_unique<Client>();
        c->id = next_client_++;
        c->fd = fd;
        c->pid = cred.pid;
        c->uid = cred.uid;
        ++ctr_.clients_accepted;
        clients_.emplace(c->id, std::move(c));
    }
}

void Daemon::reply(Client &c, uint16_t op, uint32_t seq, int status, const std::string &msg,
                   const void *body, size_t len, int fd) {
    std::vector<uint8_t> out(sizeof(ipc::RepHdr) + len);
    ipc::RepHdr h{};
    h.magic = ipc::kMagic;
    h.version = ipc::kVersion;
    h.op = op;
    h.seq = seq;
    h.status = status;
    h.body_bytes = uint32_t(len);
    std::snprintf(h.message, sizeof h.message, "%s", msg.c_str());
    std::memcpy(out.data(), &h, sizeof h);
    if (len) std::memcpy(out.data() + sizeof h, body, len);
    if (status != MRC_OK) ++ctr_.bad_requests;
    // A client that does not read its replies loses them (non-blocking
    // socket): the daemon never waits for one application.
    ipc::send_msg(c.fd, out.data(), out.size(), fd);
}

void Daemon::on_client(Client &c) {
    std::vector<uint8_t> buf(ipc::kMaxMessageBytes);
    for (int round = 0; round < 16; ++round) {
        int fd = -1;
        const ssize_t n = ipc::recv_msg(c.fd, buf.data(), buf.size(), &fd);
        if (n == -EAGAIN || n == -EWOULDBLOCK) return;
        if (n == 0 || (n < 0 && n != -EMSGSIZE)) {
            release(c);
            return;
        }
        ++ctr_.requests;
        ++c.requests;
        struct Closer {
            int &fd;
            ~Closer() {
                if (fd >= 0) ::close(fd);
            }
        } closer{fd};
        if (n == -EMSGSIZE) {
            reply(c, 0, 0, MRC_EINVAL, "request longer than 64 KiB");
            continue;
        }
        ipc::ReqHdr h;
        if (size_t(n) < sizeof h) {
            reply(c, 0, 0, MRC_EINVAL, fmt::format("short request ({} bytes)", n));
            continue;
        }
        std::memcpy(&h, buf.data(), sizeof h);
        if (h.magic != ipc::kMagic) {
            reply(c, h.op, h.seq, MRC_EINVAL, "not an mrcd request (bad magic): closing");
            release(c);
            return;
        }
        if (h.version != ipc::kVersion) {
            reply(c, h.op, h.seq, MRC_EVERSION,
                  fmt::format("the application speaks API version {}, mrcd speaks {}: rebuild it "
                              "against this libmrc",
                              h.version, ipc::kVersion));
            release(c);
            return;
        }
        if (h.body_bytes != size_t(n) - sizeof h) {
            reply(c, h.op, h.seq, MRC_EINVAL, "body length disagrees with the message");
            continue;
        }
        const uint8_t *b = buf.data() + sizeof h;
        const size_t len = h.body_bytes;
        const auto op = static_cast<ipc::Op>(h.op);
        if (draining_ && op != ipc::Op::kAdmin) {
            reply(c, h.op, h.seq, MRC_EDAEMON, "mrcd is shutting down");
            continue;
        }
        if (!c.hello && op != ipc::Op::kHello && op != ipc::Op::kAdmin) {
            reply(c, h.op, h.seq, MRC_ESTATE, "say hello first (mrc_open)");
            continue;
        }
        if (c.waiting && op != ipc::Op::kAdmin) {
            reply(c, h.op, h.seq, MRC_EBUSY, "a connect or accept of this context is in progress");
            continue;
        }
        switch (op) {
            case ipc::Op::kHello:
                do_hello(c, h.seq, b, len);
                break;
            case ipc::Op::kRegMr: {
                const int f = fd;
                fd = -1;  // do_reg_mr owns it
                do_reg_mr(c, h.seq, b, len, f);
                break;
            }
            case ipc::Op::kDeregMr:
                do_dereg_mr(c, h.seq, b, len);
                break;
            case ipc::Op::kCreateCq:
                do_create_cq(c, h.seq, b, len);
                break;
            case ipc::Op::kDestroyCq:
                do_destroy_cq(c, h.seq, b, len);
                break;
            case ipc::Op::kCreateQp:
                do_create_qp(c, h.seq, b, len);
                break;
            case ipc::Op::kDestroyQp:
                do_destroy_qp(c, h.seq, b, len);
                break;
            case ipc::Op::kConnect:
                do_connect(c, h.seq, b, len);
                break;
            case ipc::Op::kListen:
                do_listen(c, h.seq, b, len);
                break;
            case ipc::Op::kAccept:
                do_accept(c, h.seq, b, len);
                break;
            case ipc::Op::kAdmin:
                do_admin(c, h.seq, b, len);
                break;
            default:
                reply(c, h.op, h.seq, MRC_EINVAL, fmt::format("unknown request {}", h.op));
        }
        if (c.fd < 0) return;  // released while handling
    }
}

#define BODY(T, var)                                                               \
    T var;                                                                         \
    if (n != sizeof(T)) {                                                          \
        reply(c, op, seq, MRC_EINVAL,                                              \
              fmt::format("request body of {} bytes, expected {}", n, sizeof(T))); \
        return;                                                                    \
    }                                                                              \
    std::memcpy(&var, b, sizeof(T))

void Daemon::do_hello(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kHello);
    BODY(ipc::HelloReq, req);
    if (req.api_version != MRC_API_VERSION) {
        reply(c, op, seq, MRC_EVERSION,
              fmt::format("the application speaks API version {}, mrcd speaks {}", req.api_version,
                          MRC_API_VERSION));
        release(c);
        return;
    }
    req.name[sizeof req.name - 1] = 0;
    c.name.clear();
    for (const char *p = req.name; *p; ++p)  // printable ASCII only: it goes into JSON and logs
        c.name += (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    c.hello = true;
    ipc::HelloRep rep{};
    rep.api_version = MRC_API_VERSION;
    rep.planes = dp_->planes();
    rep.max_msg_bytes = kMaxMsgBytes;
    rep.mtu_payload_bytes = dp_->max_payload_bytes();
    for (uint8_t p = 0; p < dp_->planes(); ++p)
        rep.local_ip[p] = cfg_.plane_ip[p];
    std::snprintf(rep.daemon, sizeof rep.daemon, "mrcd 0.1 (pid %d)", int(::getpid()));
    log(RTE_LOG_INFO, "client {} ({} pid {} uid {}) connected", c.id, c.name, c.pid, c.uid);
    reply(c, op, seq, MRC_OK, "", &rep, sizeof rep);
}

void Daemon::do_reg_mr(Client &c, uint32_t seq, const uint8_t *b, size_t n, int fd) {
    constexpr auto op = uint16_t(ipc::Op::kRegMr);
    struct Closer {
        int fd;
        ~Closer() {
            if (fd >= 0) ::close(fd);
        }
    } closer{fd};
    BODY(ipc::RegMrReq, req);
    if (fd < 0) return reply(c, op, seq, MRC_EINVAL, "no memory descriptor came with the request");
    if (req.length == 0 || req.length > cfg_.max_region_bytes)
        return reply(
            c, op, seq, MRC_EINVAL,
            fmt::format("region of {} bytes: allowed 1 .. {}", req.length, cfg_.max_region_bytes));
    if (req.access & ~uint32_t(MRC_ACCESS_REMOTE_WRITE))
        return reply(c, op, seq, MRC_EINVAL, fmt::format("unknown access bits {:#x}", req.access));
    if (req.client_addr == 0 || req.client_addr + req.length < req.client_addr)
        return reply(c, op, seq, MRC_EINVAL, "region address out of range");
    if (c.mrs.size() >= cfg_.max_mrs_per_client)
        return reply(c, op, seq, MRC_ENOMEM,
                     fmt::format("at most {} regions per application", cfg_.max_mrs_per_client));
    if (mr_free_.empty()) return reply(c, op, seq, MRC_ENOMEM, "mrcd's region table is full");
    // Only sealed shared memory: a file the application could shrink would
    // fault the daemon when a packet lands past its new end.
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return reply(c, op, seq, MRC_EINVAL,
                     "region memory must be a memfd sealed with F_SEAL_SHRINK (use mrc_alloc_mr)");
    struct stat st {};
    const uint64_t map_bytes = (req.length + 4095) / 4096 * 4096;
    if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) < map_bytes)
        return reply(c, op, seq, MRC_EINVAL, "region memory is smaller than the length given");
    void *p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return reply(c, op, seq, MRC_ENOMEM, fmt::format("mmap: {}", std::strerror(errno)));
    const uint32_t slot = mr_free_.back();
    mr_free_.pop_back();
    const uint8_t gen = uint8_t(mr_gen_[slot] + 1);
    mr_gen_[slot] = gen ? gen : 1;  // generation 0 is never a valid key
    const uint32_t key = slot << 8 | mr_gen_[slot];
    const bool remote = req.access & MRC_ACCESS_REMOTE_WRITE;
    for (uint32_t w = 0; w < agents_.size(); ++w) {
        Command cmd;
        cmd.kind = Command::kRegMr;
        cmd.client = c.id;
        cmd.key = key;
        cmd.base = static_cast<uint8_t *>(p);
        cmd.length = req.length;
        cmd.remote_base = req.client_addr;
        cmd.access = remote ? kAccessRemoteWrite : 0;
        cmd.pd = remote ? pd_of(c.id, req.service) : 0;
        run_on(w, cmd);
        if (!cmd.ok) {
            for (uint32_t u = 0; u < w; ++u) {
                Command d;
                d.kind = Command::kDeregMr;
                d.key = key;
                run_on(u, d);
            }
            ::munmap(p, map_bytes);
            mr_free_.push_back(slot);
            return reply(c, op, seq, MRC_ENOMEM, cmd.error);
        }
    }
    c.mrs[key] =
        MrRec{key, static_cast<uint8_t *>(p), map_bytes, req.length, req.access, req.service};
    ipc::RegMrRep rep{key, 0};
    reply(c, op, seq, MRC_OK, "", &rep, sizeof rep);
}

void Daemon::do_dereg_mr(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kDeregMr);
    BODY(ipc::KeyReq, req);
    auto it = c.mrs.find(req.id);
    if (it == c.mrs.end())
        return reply(c, op, seq, MRC_ENOENT, fmt::format("no region with key {:#x}", req.id));
    const MrRec &m = it->second;
    for (uint32_t w = 0; w < agents_.size(); ++w) {
        Command cmd;
        cmd.kind = Command::kDeregMr;
        cmd.key = req.id;
        run_on(w, cmd);
        if (!cmd.ok) {
            // Still read by work requests: put it back where it was taken out.
            for (uint32_t u = 0; u < w; ++u) {
                Command back;
                back.kind = Command::kRegMr;
                back.client = c.id;
                back.key = m.key;
                back.base = m.base;
                back.length = m.length;
                back.remote_base = m.remote_base;
                back.access = m.access & MRC_ACCESS_REMOTE_WRITE ? kAccessRemoteWrite : 0;
                back.pd = m.access & MRC_ACCESS_REMOTE_WRITE ? pd_of(c.id, m.service) : 0;
                run_on(u, back);
            }
            return reply(c, op, seq, MRC_EBUSY, cmd.error + ": wait for their completions");
        }
    }
    ::munmap(it->second.base, it->second.map_bytes);
    mr_free_.push_back(req.id >> 8);
    c.mrs.erase(it);
    reply(c, op, seq, MRC_OK, "");
}

void Daemon::do_create_cq(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kCreateCq);
    BODY(ipc::CreateCqReq, req);
    if (req.depth == 0 || req.depth > ipc::kMaxRingEntries)
        return reply(
            c, op, seq, MRC_EINVAL,
            fmt::format("CQ depth {} out of range (1 .. {})", req.depth, ipc::kMaxRingEntries));
    if (c.cqs.size() >= cfg_.max_qps_per_client)
        return reply(c, op, seq, MRC_ENOMEM, "too many CQs");
    uint32_t entries = 1;
    while (entries < req.depth)
        entries <<= 1;
    auto ring = make_ring(entries, sizeof(ipc::Cqe), "mrc-cq");
    if (!ring) return reply(c, op, seq, MRC_ENOMEM, ring.error().message);
    CqRec r;
    r.id = next_cq_++;
    r.worker = next_worker_++ % uint32_t(agents_.size());
    r.ring = ring->second;
    r.entries = entries;
    r.map_bytes = ipc::ring_bytes(entries, sizeof(ipc::Cqe));
    Command cmd;
    cmd.kind = Command::kAddCq;
    cmd.cq_id = r.id;
    cmd.ring = r.ring;
    run_on(r.worker, cmd);
    c.cqs[r.id] = r;
    ipc::RingRep rep{r.id, entries, r.map_bytes, 0, r.id};
    reply(c, op, seq, MRC_OK, "", &rep, sizeof rep, ring->first);
    ::close(ring->first);
}

void Daemon::do_destroy_cq(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kDestroyCq);
    BODY(ipc::KeyReq, req);
    auto it = c.cqs.find(req.id);
    if (it == c.cqs.end()) return reply(c, op, seq, MRC_ENOENT, fmt::format("no CQ {}", req.id));
    for (uint32_t q : c.qps)
        if (qps_.at(q)->cq_id == req.id)
            return reply(c, op, seq, MRC_EBUSY, fmt::format("CQ {} still has QP {}", req.id, q));
    for (const auto &[svc, l] : listeners_)
        if (l.client == c.id && l.cq_id == req.id)
            return reply(c, op, seq, MRC_EBUSY,
                         fmt::format("CQ {} takes the connections of service {}", req.id, svc));
    Command cmd;
    cmd.kind = Command::kDelCq;
    cmd.cq_id = req.id;
    run_on(it->second.worker, cmd);
    ::munmap(it->second.ring, it->second.map_bytes);
    c.cqs.erase(it);
    reply(c, op, seq, MRC_OK, "");
}

Result<Daemon::QpRec *> Daemon::new_qp(Client &c, uint32_t cq_id, uint32_t sq_depth) {
    auto cq = c.cqs.find(cq_id);
    if (cq == c.cqs.end()) return Error{fmt::format("no CQ {}", cq_id)};
    if (sq_depth == 0 || sq_depth > ipc::kMaxRingEntries)
        return Error{
            fmt::format("sq_depth {} out of range (1 .. {})", sq_depth, ipc::kMaxRingEntries)};
    if (c.qps.size() >= cfg_.max_qps_per_client)
        return Error{fmt::format("at most {} QPs per application", cfg_.max_qps_per_client)};
    uint32_t entries = 1;
    while (entries < sq_depth)
        entries <<= 1;
    auto ring = make_ring(entries, sizeof(ipc::Sqe), "mrc-sq");
    if (!ring) return ring.error();
    Command cmd;
    cmd.kind = Command::kCreateQp;
    cmd.client = c.id;
    cmd.cq_id = cq_id;
    cmd.ring = ring->second;
    cmd.qcfg = cfg_.qp;
    cmd.qcfg.mtu_payload_bytes = dp_->max_payload_bytes();
    cmd.qcfg.ev.evs = cfg_.evs_per_plane * dp_->planes();
    cmd.qcfg.ev.min_active = std::min<uint32_t>(cmd.qcfg.ev.min_active, cmd.qcfg.ev.evs);
    cmd.qcfg.ev.seed = rng_();
    run_on(cq->second.worker, cmd);
    const size_t bytes = ipc::ring_bytes(entries, sizeof(ipc::Sqe));
    if (!cmd.ok) {
        ::munmap(ring->second, bytes);
        ::close(ring->first);
        return Error{cmd.error};
    }
    auto q = std::make_unique<QpRec>();
    q->wire = uint32_t(cmd.out);
    q->client = c.id;
    q->worker = cq->second.worker;
    q->cq_id = cq_id;
    q->ring = ring->second;
    q->map_bytes = bytes;
    q->entries = entries;
    q->memfd = ring->first;
    QpRec *raw = q.get();
    qps_[q->wire] = std::move(q);
    c.qps.push_back(raw->wire);
    return raw;
}

void Daemon::do_create_qp(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kCreateQp);
    BODY(ipc::CreateQpReq, req);
    auto q = new_qp(c, req.cq_id, req.sq_depth);
    if (!q) return reply(c, op, seq, MRC_EINVAL, q.error().message);
    QpRec &r = **q;
    ipc::RingRep rep{r.wire, r.entries, r.map_bytes, 0, r.cq_id};
    reply(c, op, seq, MRC_OK, "", &rep, sizeof rep, r.memfd);
    ::close(r.memfd);
    r.memfd = -1;
}

void Daemon::destroy_qp(Client &c, uint32_t qpn, bool tell_peer) {
    auto it = qps_.find(qpn);
    if (it == qps_.end()) return;
    QpRec &q = *it->second;
    if (tell_peer && q.connected) {
        wire::CmFields f = my_addrs();
        f.op = wire::CmOp::kDisconnect;
        f.src_qpn = q.wire;
        f.dst_qpn = q.peer_qpn;
        uint8_t mask = 0;
        for (uint8_t p = 0; p < std::min<uint8_t>(q.peer_planes, dp_->planes()); ++p)
            mask |= uint8_t(1u << p);
        // Twice: one lost frame should not leave the peer waiting for timeouts.
        for (int i = 0; i < 2; ++i)
            send_cm(f, mask, q.peer_ip, q.peer_mac);
        ++ctr_.disconnects_sent;
    }
    Command cmd;
    cmd.kind = Command::kDestroyQp;
    cmd.key = qpn;
    run_on(q.worker, cmd);
    if (q.memfd >= 0) ::close(q.memfd);
    ::munmap(q.ring, q.map_bytes);
    c.qps.erase(std::remove(c.qps.begin(), c.qps.end(), qpn), c.qps.end());
    for (auto &[svc, l] : listeners_)
        l.ready.erase(std::remove(l.ready.begin(), l.ready.end(), qpn), l.ready.end());
    for (auto p = connecting_.begin(); p != connecting_.end();)
        p = p->second->qpn == qpn ? connecting_.erase(p) : std::next(p);
    for (auto a = answered_.begin(); a != answered_.end();)
        a = a->second.qpn == qpn ? answered_.erase(a) : std::next(a);
    qps_.erase(it);
}

void Daemon::do_destroy_qp(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kDestroyQp);
    BODY(ipc::KeyReq, req);
    if (std::find(c.qps.begin(), c.qps.end(), req.id) == c.qps.end())
        return reply(c, op, seq, MRC_ENOENT, fmt::format("no QP {} in this context", req.id));
    destroy_qp(c, req.id, true);
    reply(c, op, seq, MRC_OK, "");
}

void Daemon::do_connect(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kConnect);
    BODY(ipc::ConnectReq, req);
    if (std::find(c.qps.begin(), c.qps.end(), req.qpn) == c.qps.end())
        return reply(c, op, seq, MRC_ENOENT, fmt::format("no QP {} in this context", req.qpn));
    QpRec &q = *qps_.at(req.qpn);
    if (q.connected) return reply(c, op, seq, MRC_ESTATE, "QP already connected");
    if (req.peer_ip == 0 || req.peer_ip == 0xffffffff)
        return reply(c, op, seq, MRC_EINVAL, "peer address 0.0.0.0 / broadcast");
    auto p = std::make_unique<Pending>();
    p->kind = Pending::kConnect;
    p->client = c.id;
    p->seq = seq;
    p->deadline_ns =
        mono_ns() + uint64_t(std::clamp<uint32_t>(req.timeout_ms, 1, 600'000)) * 1'000'000;
    p->conn_id = rng_();
    p->qpn = req.qpn;
    p->service = req.service;
    p->peer_ip = req.peer_ip;
    p->psn = uint32_t(rng_()) & wire::kQpnMask;
    q.service = req.service;
    send_connect(*p);
    c.waiting = std::make_unique<Pending>(*p);
    connecting_[p->conn_id] = std::move(p);
}

void Daemon::do_listen(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kListen);
    BODY(ipc::ListenReq, req);
    if (!c.cqs.count(req.cq_id))
        return reply(c, op, seq, MRC_ENOENT, fmt::format("no CQ {} in this context", req.cq_id));
    if (req.sq_depth == 0 || req.sq_depth > ipc::kMaxRingEntries)
        return reply(c, op, seq, MRC_EINVAL, "sq_depth out of range");
    auto it = listeners_.find(req.service);
    if (it != listeners_.end())
        return reply(c, op, seq, MRC_EBUSY,
                     fmt::format("service {} already has a listener{}", req.service,
                                 it->second.client == c.id ? " (this context)" : ""));
    Listener l;
    l.client = c.id;
    l.cq_id = req.cq_id;
    l.sq_depth = req.sq_depth;
    listeners_[req.service] = l;
    c.listens.push_back(req.service);
    reply(c, op, seq, MRC_OK, "");
}

void Daemon::complete_accept(Client &c, const Listener &, QpRec &q) {
    ipc::RingRep rep{q.wire, q.entries, q.map_bytes, q.peer_ip[0], q.cq_id};
    reply(c, uint16_t(ipc::Op::kAccept), c.waiting->seq, MRC_OK, "", &rep, sizeof rep, q.memfd);
    ::close(q.memfd);
    q.memfd = -1;
    c.waiting.reset();
}

void Daemon::do_accept(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    constexpr auto op = uint16_t(ipc::Op::kAccept);
    BODY(ipc::AcceptReq, req);
    auto it = listeners_.find(req.service);
    if (it == listeners_.end() || it->second.client != c.id)
        return reply(c, op, seq, MRC_ENOENT,
                     fmt::format("this context does not listen on service {}", req.service));
    auto p = std::make_unique<Pending>();
    p->kind = Pending::kAccept;
    p->client = c.id;
    p->seq = seq;
    p->service = req.service;
    p->deadline_ns =
        mono_ns() + uint64_t(std::clamp<uint32_t>(req.timeout_ms, 1, 600'000)) * 1'000'000;
    c.waiting = std::move(p);
    Listener &l = it->second;
    if (!l.ready.empty()) {
        const uint32_t qpn = l.ready.front();
        l.ready.pop_front();
        complete_accept(c, l, *qps_.at(qpn));
    }
}

// ---- release ---------------------------------------------------------------

void Daemon::release(Client &c) {
    if (c.fd < 0) return;
    log(RTE_LOG_INFO, "client {} ({} pid {}) gone: releasing {} QPs, {} CQs, {} regions", c.id,
        c.name, c.pid, c.qps.size(), c.cqs.size(), c.mrs.size());
    // QPs first (nothing posts from or lands in the regions after), then
    // CQs, then regions; the peers of connected QPs are told.
    while (!c.qps.empty())
        destroy_qp(c, c.qps.back(), true);
    for (uint32_t svc : c.listens)
        listeners_.erase(svc);
    for (auto &[id, cq] : c.cqs) {
        Command cmd;
        cmd.kind = Command::kDelCq;
        cmd.cq_id = id;
        run_on(cq.worker, cmd);
        ::munmap(cq.ring, cq.map_bytes);
    }
    for (auto &[key, mr] : c.mrs) {
        for (uint32_t w = 0; w < agents_.size(); ++w) {
            Command cmd;
            cmd.kind = Command::kDeregMr;
            cmd.key = key;
            cmd.force = true;
            run_on(w, cmd);
        }
        ::munmap(mr.base, mr.map_bytes);
        mr_free_.push_back(key >> 8);
    }
    for (auto it = pds_.begin(); it != pds_.end();)
        it = it->first.first == c.id ? pds_.erase(it) : std::next(it);
    ::close(c.fd);
    c.fd = -1;
    ++ctr_.clients_released;
}

// ---- connection management ---------------------------------------------------

wire::MacAddr Daemon::neighbor_mac(uint32_t ip) const {
    for (const Neighbor &n : cfg_.neighbors)
        if (n.ip == ip) return n.mac;
    return wire::MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
}

wire::CmFields Daemon::my_addrs() const {
    wire::CmFields f;
    f.planes = dp_->planes();
    for (uint8_t p = 0; p < f.planes; ++p) {
        f.mac[p] = dp_->port(p).mac();
        f.ip[p] = cfg_.plane_ip[p];
    }
    return f;
}

void Daemon::send_cm(const wire::CmFields &f, uint8_t plane_mask, const uint32_t *dst_ip,
                     const wire::MacAddr *dst_mac) {
    Command cmd;
    cmd.kind = Command::kSendCm;
    const uint8_t up = dp_->link_up_mask();
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        if (!(plane_mask & (1u << p)) || !(up & (1u << p))) continue;
        wire::MrcAddr a;
        a.src_mac = dp_->port(p).mac();
        a.dst_mac = dst_mac[p];
        a.src_ip = cfg_.plane_ip[p];
        a.dst_ip = dst_ip[p];
        a.dst_port = dp_->config().mrc_port;
        std::vector<uint8_t> frame(wire::kCmBytes);
        wire::write_cm(frame.data(), a, kCmEv, f);
        cmd.frames.emplace_back(p, std::move(frame));
    }
    if (!cmd.frames.empty()) run_on(0, cmd);
}

void Daemon::send_connect(Pending &p) {
    wire::CmFields f = my_addrs();
    f.op = wire::CmOp::kConnect;
    f.conn_id = p.conn_id;
    f.service = p.service;
    f.src_qpn = p.qpn;
    f.psn = p.psn;
    // On every plane that is up, to the one address the application gave:
    // the first copy through wins, a plane that is down does not matter.
    uint32_t ips[kMaxPlanes];
    wire::MacAddr macs[kMaxPlanes];
    for (uint8_t i = 0; i < kMaxPlanes; ++i) {
        ips[i] = p.peer_ip;
        macs[i] = neighbor_mac(p.peer_ip);
    }
    send_cm(f, 0xff, ips, macs);
    ++ctr_.connects_sent;
    p.next_send_ns = mono_ns() + uint64_t(cfg_.connect_resend_ms) * 1'000'000;
}

void Daemon::disconnect_stray(const wire::CmFields &accept, uint32_t ip, const wire::MacAddr &mac) {
    wire::CmFields f = my_addrs();
    f.op = wire::CmOp::kDisconnect;
    f.src_qpn = accept.dst_qpn;  // the QP it was meant for
    f.dst_qpn = accept.src_qpn;
    uint32_t ips[kMaxPlanes];
    wire::MacAddr macs[kMaxPlanes];
    uint8_t mask = 0;
    for (uint8_t p = 0; p < std::min<uint8_t>(accept.planes, dp_->planes()); ++p) {
        ips[p] = accept.ip[p];
        macs[p] = accept.mac[p];
        mask |= uint8_t(1u << p);
    }
    if (mask == 0) {
        ips[0] = ip;
        macs[0] = mac;
        mask = 1;
    }
    send_cm(f, mask, ips, macs);
    ++ctr_.disconnects_sent;
}

// Records the peer's addresses from its CONNECT or ACCEPT in `r` and
// makes the command that brings the QP up towards it (PSNs left to fill).
void Daemon::connect_command(Command &cmd, QpRec &r, const wire::CmFields &f, uint32_t pd) {
    r.peer_qpn = f.src_qpn;
    r.peer_planes = std::min<uint8_t>(f.planes, dp_->planes());
    for (uint8_t p = 0; p < f.planes; ++p) {
        r.peer_ip[p] = f.ip[p];
        r.peer_mac[p] = f.mac[p];
    }
    cmd.kind = Command::kConnectQp;
    cmd.key = r.wire;
    cmd.pd = pd;
    cmd.peer.dst_qpn = f.src_qpn;
    cmd.peer.planes = r.peer_planes;
    for (uint8_t p = 0; p < r.peer_planes; ++p) {
        wire::MrcAddr &a = cmd.peer.path[p];
        a.src_mac = dp_->port(p).mac();
        a.dst_mac = f.mac[p];
        a.src_ip = cfg_.plane_ip[p];
        a.dst_ip = f.ip[p];
        a.dst_port = dp_->config().mrc_port;
    }
}

void Daemon::poll_cm() {
    void *objs[32];
    const unsigned n = rte_ring_sc_dequeue_burst(cm_in_, objs, 32, nullptr);
    for (unsigned i = 0; i < n; ++i) {
        auto *m = static_cast<CmIn *>(objs[i]);
        on_cm(m->frame, m->len, m->plane);
        delete m;
    }
    ctr_.cm_dropped =
        cm_overflow_.load(std::memory_order_relaxed) + cm_oversize_.load(std::memory_order_relaxed);
}

void Daemon::on_cm(const uint8_t *frame, uint32_t len, uint8_t plane) {
    wire::CmFields f;
    wire::MacAddr from_mac;
    uint32_t from_ip = 0;
    const wire::CmError e =
        wire::parse_cm(frame, len, dp_->config().mrc_port, &f, &from_mac, &from_ip);
    if (e != wire::CmError::kOk) {
        ++ctr_.cm_bad;
        return;
    }
    const uint64_t now = mono_ns();
    switch (f.op) {
        case wire::CmOp::kConnect: {
            ++ctr_.connects_received;
            wire::CmFields ans = my_addrs();
            ans.conn_id = f.conn_id;
            uint32_t ips[kMaxPlanes];
            wire::MacAddr macs[kMaxPlanes];
            for (uint8_t i = 0; i < kMaxPlanes; ++i) {
                ips[i] = from_ip;
                macs[i] = from_mac;
            }
            const uint8_t back = uint8_t(1u << plane);
            // A repeat of a CONNECT already taken (another plane's copy, or a
            // resend): the same answer again. Keyed by the requester's
            // plane-0 address, the same in every copy.
            auto done = answered_.find({f.ip[0], f.conn_id});
            if (done != answered_.end()) {
                auto q = qps_.find(done->second.qpn);
                if (q != qps_.end()) {
                    ans.op = wire::CmOp::kAccept;
                    ans.src_qpn = q->second->wire;
                    ans.dst_qpn = f.src_qpn;
                    ans.psn = done->second.psn;
                    send_cm(ans, back, ips, macs);
                }
                return;
            }
            auto reject = [&](wire::CmReject why) {
                ans.op = wire::CmOp::kReject;
                ans.reason = why;
                send_cm(ans, back, ips, macs);
                ++ctr_.rejects_sent;
            };
            auto l = listeners_.find(f.service);
            if (l == listeners_.end() || draining_) return reject(wire::CmReject::kNoListener);
            // A listener that does not accept holds a ring per waiting QP:
            // bounded, so remote CONNECTs cannot use up the daemon's files.
            if (l->second.ready.size() >= kMaxAcceptBacklog)
                return reject(wire::CmReject::kNoResources);
            Client &c = *clients_.at(l->second.client);
            auto q = new_qp(c, l->second.cq_id, l->second.sq_depth);
            if (!q) {
                log(RTE_LOG_WARNING, "CONNECT for service {}: {}", f.service, q.error().message);
                return reject(wire::CmReject::kNoResources);
            }
            QpRec &r = **q;
            r.service = f.service;
            Command cmd;
            connect_command(cmd, r, f, pd_of(c.id, f.service));
            cmd.epsn = f.psn;
            cmd.spsn = uint32_t(rng_()) & wire::kQpnMask;
            run_on(r.worker, cmd);
            if (!cmd.ok) {
                log(RTE_LOG_WARNING, "CONNECT for service {}: {}", f.service, cmd.error);
                destroy_qp(c, r.wire, false);
                return reject(wire::CmReject::kBadRequest);
            }
            r.connected = true;
            r.connected_ns = now;
            answered_[{f.ip[0], f.conn_id}] = Answer{r.wire, cmd.spsn, now};
            ans.op = wire::CmOp::kAccept;
            ans.src_qpn = r.wire;
            ans.dst_qpn = f.src_qpn;
            ans.psn = cmd.spsn;
            send_cm(ans, back, ips, macs);
            ++ctr_.accepts;
            log(RTE_LOG_INFO, "QP {} accepted for client {} on service {} from {} QP {}", r.wire,
                c.id, f.service, ip_string(from_ip), f.src_qpn);
            Listener &lis = l->second;
            if (c.waiting && c.waiting->kind == Pending::kAccept && c.waiting->service == f.service)
                complete_accept(c, lis, r);
            else
                lis.ready.push_back(r.wire);
            return;
        }
        case wire::CmOp::kAccept:
        case wire::CmOp::kReject: {
            auto it = connecting_.find(f.conn_id);
            if (it == connecting_.end()) {
                // A repeat of an answer already taken, or nobody asked.
                bool repeat = false;
                for (const auto &[n, q] : qps_)
                    repeat = repeat ||
                             (q->connected && q->peer_qpn == f.src_qpn && q->wire == f.dst_qpn);
                ++(repeat ? ctr_.cm_duplicates : ctr_.cm_bad);
                return;
            }
            Pending &p = *it->second;
            auto cl = clients_.find(p.client);
            if (cl == clients_.end() || !qps_.count(p.qpn)) {
                connecting_.erase(it);
                return;
            }
            Client &c = *cl->second;
            QpRec &r = *qps_.at(p.qpn);
            const uint32_t seq = p.seq;
            if (f.op == wire::CmOp::kReject) {
                connecting_.erase(it);
                c.waiting.reset();
                return reply(c, uint16_t(ipc::Op::kConnect), seq, MRC_EREFUSED,
                             fmt::format("{} refused the connection: {}", ip_string(from_ip),
                                         wire::to_string(f.reason)));
            }
            if (f.dst_qpn != p.qpn) {
                ++ctr_.cm_bad;
                return;
            }
            Command cmd;
            connect_command(cmd, r, f, pd_of(c.id, p.service));
            cmd.epsn = f.psn;
            cmd.spsn = p.psn;
            const uint32_t service = p.service;
            run_on(r.worker, cmd);
            connecting_.erase(it);  // p is gone from here on
            c.waiting.reset();
            if (!cmd.ok) {
                disconnect_stray(f, from_ip, from_mac);
                return reply(c, uint16_t(ipc::Op::kConnect), seq, MRC_EINVAL,
                             "cannot bring the QP up: " + cmd.error);
            }
            r.connected = true;
            r.connected_ns = now;
            ++ctr_.accepts;
            log(RTE_LOG_INFO, "QP {} of client {} connected to {} QP {} (service {})", r.wire, c.id,
                ip_string(from_ip), f.src_qpn, service);
            return reply(c, uint16_t(ipc::Op::kConnect), seq, MRC_OK, "");
        }
        case wire::CmOp::kDisconnect: {
            ++ctr_.disconnects_received;
            auto it = qps_.find(f.dst_qpn);
            // Only the peer this QP is connected to may take it down.
            if (it == qps_.end() || it->second->peer_qpn != f.src_qpn) {
                ++ctr_.cm_bad;
                return;
            }
            if (!it->second->connected) {
                ++ctr_.cm_duplicates;  // another copy of a DISCONNECT already taken
                return;
            }
            bool known = false;
            for (uint8_t p = 0; p < it->second->peer_planes; ++p)
                known = known || it->second->peer_ip[p] == from_ip;
            if (!known) {
                ++ctr_.cm_bad;
                return;
            }
            it->second->connected = false;
            Command cmd;
            cmd.kind = Command::kErrorQp;
            cmd.key = f.dst_qpn;
            cmd.status = MRC_WC_PEER_DISCONNECTED;
            run_on(it->second->worker, cmd);
            log(RTE_LOG_INFO, "QP {}: the peer ({} QP {}) disconnected", f.dst_qpn,
                ip_string(from_ip), f.src_qpn);
            return;
        }
    }
}

void Daemon::timeouts() {
    const uint64_t now = mono_ns();
    for (auto it = connecting_.begin(); it != connecting_.end();) {
        Pending &p = *it->second;
        auto cl = clients_.find(p.client);
        if (cl == clients_.end() || cl->second->fd < 0) {
            it = connecting_.erase(it);
            continue;
        }
        if (now >= p.deadline_ns) {
            Client &c = *cl->second;
            const uint32_t seq = p.seq;
            const uint32_t ip = p.peer_ip;
            it = connecting_.erase(it);
            c.waiting.reset();
            reply(c, uint16_t(ipc::Op::kConnect), seq, MRC_ETIMEDOUT,
                  fmt::format("no answer from {} (is mrcd running there, on the same MRC port?)",
                              ip_string(ip)));
            continue;
        }
        if (now >= p.next_send_ns) send_connect(p);
        ++it;
    }
    for (auto &[id, c] : clients_) {
        if (c->fd < 0 || !c->waiting || c->waiting->kind != Pending::kAccept) continue;
        if (now >= c->waiting->deadline_ns) {
            const uint32_t seq = c->waiting->seq;
            const uint32_t svc = c->waiting->service;
            c->waiting.reset();
            reply(*c, uint16_t(ipc::Op::kAccept), seq, MRC_ETIMEDOUT,
                  fmt::format("no connection on service {} in time", svc));
        }
    }
    for (auto it = answered_.begin(); it != answered_.end();)
        it = now - it->second.at_ns > kAnsweredKeepNs ? answered_.erase(it) : std::next(it);
}

// ---- shutdown ----------------------------------------------------------------

uint64_t Daemon::outstanding() {
    uint64_t n = 0;
    for (uint32_t w = 0; w < agents_.size(); ++w) {
        Command cmd;
        cmd.kind = Command::kOutstanding;
        run_on(w, cmd);
        n += cmd.out;
    }
    return n;
}

void Daemon::shutdown_qps() {
    for (uint32_t w = 0; w < agents_.size(); ++w) {
        Command cmd;
        cmd.kind = Command::kShutdown;
        run_on(w, cmd);
    }
}

void Daemon::run(const std::atomic<bool> &stop) {
    started_ns_ = mono_ns();
    log(RTE_LOG_INFO, "serving on {} ({} planes, {} workers)", socket_path_, dp_->planes(),
        dp_->workers());
    uint64_t drain_deadline = 0, next_check = 0;
    std::vector<pollfd> fds;
    std::vector<uint32_t> ids;
    for (;;) {
        const uint64_t now = mono_ns();
        if (stop.load() && !draining_) {
            draining_ = true;
            drain_deadline = now + uint64_t(cfg_.drain_ms) * 1'000'000;
            log(RTE_LOG_INFO, "stopping: letting in-flight work finish (up to {} ms)",
                cfg_.drain_ms);
            for (auto &[id, c] : clients_) {
                if (c->fd >= 0 && c->waiting) {
                    const auto op = c->waiting->kind == Pending::kConnect ? ipc::Op::kConnect
                                                                          : ipc::Op::kAccept;
                    reply(*c, uint16_t(op), c->waiting->seq, MRC_EDAEMON, "mrcd is shutting down");
                    c->waiting.reset();
                }
            }
            connecting_.clear();
        }
        if (draining_ && now >= next_check) {
            next_check = now + 10'000'000;
            if (now >= drain_deadline || outstanding() == 0) break;
        }
        fds.clear();
        ids.clear();
        fds.push_back({listen_fd_, POLLIN, 0});
        for (auto &[id, c] : clients_) {
            fds.push_back({c->fd, POLLIN, 0});
            ids.push_back(id);
        }
        const int r = ::poll(fds.data(), fds.size(), 1);
        if (r > 0) {
            if (fds[0].revents & POLLIN) accept_clients();
            for (size_t i = 1; i < fds.size(); ++i)
                if (fds[i].revents) on_client(*clients_.at(ids[i - 1]));
        }
        for (auto it = clients_.begin(); it != clients_.end();)
            it = it->second->fd < 0 ? clients_.erase(it) : std::next(it);
        poll_cm();
        timeouts();
        {
            std::lock_guard<std::mutex> g(g_tel.mu);
            g_tel.live = true;
            g_tel.c = ctr_;
            g_tel.clients = clients_.size();
            g_tel.qps = qps_.size();
            g_tel.listeners = listeners_.size();
            uint64_t regions = 0;
            for (const auto &[id, c] : clients_)
                regions += c->mrs.size();
            g_tel.regions = regions;
        }
    }
    {
        std::lock_guard<std::mutex> g(g_tel.mu);
        g_tel.live = false;
    }
    // What did not finish fails with DAEMON_SHUTDOWN; give the workers a
    // moment to write those completions, then close every client.
    shutdown_qps();
    const uint64_t until = mono_ns() + 500'000'000;
    while (mono_ns() < until && outstanding() != 0)
        mrc::sleep_for_steady(std::chrono::milliseconds(5));
    for (auto &[id, c] : clients_) {
        for (auto &[cq_id, cq] : c->cqs)  // an application polling an empty CQ learns of it
            cq.ring->state.store(ipc::kRingShutdown, std::memory_order_release);
        if (c->fd >= 0) {
            ::close(c->fd);
            c->fd = -1;
        }
    }
    log(RTE_LOG_INFO, "stopped");
}

// ---- mrcctl ------------------------------------------------------------------

void Daemon::do_admin(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    const std::string req(reinterpret_cast<const char *>(b), n);
    std::string out = admin(req, c);
    if (out.size() > ipc::kMaxMessageBytes - sizeof(ipc::RepHdr))
        out = json{{"error", fmt::format("the answer ({} bytes) is larger than one message; read "
                                         "/mrc/qps over DPDK telemetry instead",
                                         out.size())}}
                  .dump();
    reply(c, uint16_t(ipc::Op::kAdmin), seq, MRC_OK, "", out.data(), out.size());
}

std::string Daemon::admin(const std::string &text, const Client &c) {
    json req = json::parse(text, nullptr, false);
    json out;
    auto err = [&](const std::string &m) {
        json e;
        e["error"] = m;
        ++ctr_.bad_requests;
        return e.dump(-1, ' ', false, json::error_handler_t::replace);
    };
    if (req.is_discarded() || !req.is_object() || !req.contains("cmd") || !req["cmd"].is_string())
        return err("expected a JSON object with a \"cmd\" string");
    const std::string cmd = req["cmd"];
    const uint64_t now_ns = mono_ns();
    if (cmd == "status") {
        const dp::WorkerSnapshot s = dp_->totals();
        const dp::QpSummary q = dp_->qp_totals();
        out["daemon"] = {
            {"pid", ::getpid()},         {"uptime_s", double(now_ns - started_ns_) / 1e9},
            {"socket", socket_path_},    {"planes", dp_->planes()},
            {"workers", dp_->workers()}, {"clients", clients_.size()},
            {"qps", qps_.size()},        {"listeners", listeners_.size()},
            {"draining", draining_}};
        out["counters"] = {{"clients_accepted", ctr_.clients_accepted},
                           {"clients_refused", ctr_.clients_refused},
                           {"clients_released", ctr_.clients_released},
                           {"requests", ctr_.requests},
                           {"bad_requests", ctr_.bad_requests},
                           {"connects_sent", ctr_.connects_sent},
                           {"connects_received", ctr_.connects_received},
                           {"accepts", ctr_.accepts},
                           {"rejects_sent", ctr_.rejects_sent},
                           {"disconnects_sent", ctr_.disconnects_sent},
                           {"disconnects_received", ctr_.disconnects_received},
                           {"cm_bad", ctr_.cm_bad},
                           {"cm_duplicates", ctr_.cm_duplicates},
                           {"cm_dropped", ctr_.cm_dropped}};
        out["traffic"] = {
            {"tx_packets", s.worker.tx_packets}, {"rx_packets", s.worker.rx_packets},
            {"tx_bytes", s.worker.tx_bytes},     {"rx_bytes", s.worker.rx_bytes},
            {"qps_in_error", q.qps_error},       {"retransmissions", q.sum.tx_retx_pkts}};
        json cl = json::array();
        for (const auto &[id, x] : clients_)
            cl.push_back({{"id", id},
                          {"name", x->name},
                          {"pid", x->pid},
                          {"uid", x->uid},
                          {"qps", x->qps.size()},
                          {"cqs", x->cqs.size()},
                          {"regions", x->mrs.size()},
                          {"requests", x->requests}});
        out["clients"] = cl;
        return out.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    if (cmd == "ports") {
        dp::ControlSnapshot cs;
        const bool have = dp_->control_snapshot(&cs);
        const dp::WorkerSnapshot s = dp_->totals();
        json ports = json::array();
        for (uint8_t p = 0; p < dp_->planes(); ++p) {
            const auto pc = dp_->port_counters(p);
            std::string health = "up";
            if (!((dp_->link_up_mask() >> p) & 1))
                health = "link down";
            else if ((dp_->denied_planes() >> p) & 1)
                health = "denied";
            else if (have && ((cs.down_mask >> p) & 1))
                health = "failed (scorer)";
            ports.push_back({{"plane", p},
                             {"port", dp_->port(p).name()},
                             {"driver", dp_->port(p).driver()},
                             {"ip", ip_string(cfg_.plane_ip[p])},
                             {"link", ((dp_->link_up_mask() >> p) & 1) ? "up" : "down"},
                             {"health", health},
                             {"denied", bool((dp_->denied_planes() >> p) & 1)},
                             {"tx_packets", s.port_tx_pkts[p]},
                             {"rx_packets", s.port_rx_pkts[p]},
                             {"tx_data_pkts", s.planes[p].tx_data_pkts},
                             {"tx_retx_pkts", s.planes[p].tx_retx_pkts},
                             {"lost_pkts", s.planes[p].lost_pkts},
                             {"ack_timeouts", s.planes[p].ack_timeouts},
                             {"rtt_us_mean", s.planes[p].rtt_samples
                                                 ? double(s.planes[p].rtt_sum_ns) /
                                                       double(s.planes[p].rtt_samples) / 1000
                                                 : 0.0},
                             {"evs_total", s.gauges.total[p]},
                             {"evs_assumed_bad", s.gauges.assumed_bad[p]},
                             {"evs_denied", s.gauges.denied[p]},
                             {"device_rx_missed", pc.rx_missed}});
            if (const auto x = dp_->port(p).xdp_info())
                ports.back()["xdp"] = {
                    {"iface", x->iface},         {"mode", x->mode},
                    {"prog_id", x->prog_id},     {"steered", x->steered},
                    {"no_socket", x->no_socket}, {"other_address", x->other_address},
                    {"to_kernel", x->to_kernel}};
        }
        out["ports"] = ports;
        return out.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    if (cmd == "qps" || cmd == "evs") {
        json qs = json::array();
        uint64_t ev_totals[kEvStates] = {};
        for (uint32_t w = 0; w < dp_->workers(); ++w) {
            for (uint32_t i = 1; i <= dp_->config().max_qps_per_worker; ++i) {
                dp::QpSnapshot s;
                if (!dp_->worker(w).qp_snapshot(i, &s) || !s.live) continue;
                auto rec = qps_.find(s.wire_qpn);
                json e;
                for (uint32_t k = 0; k < kEvStates; ++k) {
                    e[to_string(EvState(k))] = s.ev_states[k];
                    ev_totals[k] += s.ev_states[k];
                }
                json j = {{"qpn", s.wire_qpn},
                          {"worker", w},
                          {"state", to_string(QpState(s.state))},
                          {"usable_planes", s.usable_planes},
                          {"window_bytes", s.window_bytes},
                          {"inflight_bytes", s.inflight_bytes},
                          {"evs", e},
                          {"tx_data_pkts", s.c.tx_data_pkts},
                          {"tx_retx_pkts", s.c.tx_retx_pkts},
                          {"losses_detected", s.c.losses_detected},
                          {"tail_probes", s.c.tail_probes},
                          {"ack_timeouts", s.c.ack_timeouts},
                          {"retx_spurious", s.c.retx_spurious},
                          {"rx_data_bytes", s.c.rx_data_bytes},
                          {"wrs_completed", s.c.wr_completed}};
                if (QpState(s.state) == QpState::kError)
                    j["error"] = to_string(WcStatus(s.error_cause));
                if (rec != qps_.end()) {
                    j["client"] = rec->second->client;
                    j["service"] = rec->second->service;
                    j["connected"] = rec->second->connected;
                    if (rec->second->peer_planes) {
                        j["peer"] = ip_string(rec->second->peer_ip[0]);
                        j["peer_qpn"] = rec->second->peer_qpn;
                    }
                }
                qs.push_back(j);
            }
        }
        if (cmd == "qps") {
            out["qps"] = qs;
        } else {
            json t;
            for (uint32_t k = 0; k < kEvStates; ++k)
                t[to_string(EvState(k))] = ev_totals[k];
            out["ev_states"] = t;
            json d = json::array();
            for (const EvDenial &x : dp_->denied_evs())
                d.push_back({{"qpn", x.qpn}, {"ev", x.ev}});
            out["denied_evs"] = d;
        }
        return out.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    if (cmd == "deny" || cmd == "allow") {
        if (c.uid != 0 && c.uid != ::geteuid())
            return err("deny/allow: only root or mrcd's own user may change paths");
        const bool deny = cmd == "deny";
        if (req.contains("plane")) {
            if (!req["plane"].is_number_unsigned() || req["plane"].get<uint64_t>() >= dp_->planes())
                return err(fmt::format("plane must be 0 .. {}", dp_->planes() - 1));
            dp_->deny_plane(uint8_t(req["plane"].get<uint64_t>()), deny);
            log(RTE_LOG_NOTICE, "operator: {} plane {}", cmd, req["plane"].get<uint64_t>());
            out["ok"] = true;
            return out.dump(-1, ' ', false, json::error_handler_t::replace);
        }
        if (req.contains("qpn") && req.contains("ev")) {
            if (!req["qpn"].is_number_unsigned() || !req["ev"].is_number_unsigned() ||
                req["ev"].get<uint64_t>() > 65535)
                return err("qpn and ev must be whole numbers (ev 0 .. 65535)");
            const auto qpn = uint32_t(req["qpn"].get<uint64_t>());
            if (!qps_.count(qpn)) return err(fmt::format("no QP {}", qpn));
            dp_->deny_ev(qpn, uint16_t(req["ev"].get<uint64_t>()), deny);
            log(RTE_LOG_NOTICE, "operator: {} EV {} of QP {}", cmd, req["ev"].get<uint64_t>(), qpn);
            out["ok"] = true;
            return out.dump(-1, ' ', false, json::error_handler_t::replace);
        }
        return err("deny/allow need \"plane\", or \"qpn\" and \"ev\"");
    }
    return err("unknown command '" + cmd + "' (status, ports, qps, evs, deny, allow)");
}

}  // namespace mrc::mrcd
