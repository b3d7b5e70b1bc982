// The applications' requests on the socket: one function per IPC op
// (client/ipc.h), and the objects they make (regions, CQs, QPs, rings).
// A request is checked in this order: the message (magic, version, body
// length), the moment (stopping, hello first, one connect or accept at a
// time), then its body (decode: exactly the op's struct), then its fields.
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_set>

#include "client/sock.h"
#include "daemon.h"
#include "mrc/mrc.h"
#include "records.h"
#include "support.h"

namespace mrc::mrcd {

namespace {

// Closes a descriptor that came with a request once it has been handled
// (a region's memory stays mapped).
struct FdCloser {
    int fd;
    ~FdCloser() {
        if (fd >= 0) ::close(fd);
    }
};

uint32_t round_up_pow2(uint32_t n) {
    uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

uint64_t deadline_after_ms(uint32_t timeout_ms) {
    return mono_ns() + uint64_t(std::clamp<uint32_t>(timeout_ms, 1, 600'000)) * 1'000'000;
}

}  // namespace

// ---- reading requests -------------------------------------------------------

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
        const FdCloser closer{fd};
        if (n == -EMSGSIZE)
            reply(c, 0, 0, MRC_EINVAL, "request longer than 64 KiB");
        else
            on_request(c, buf.data(), size_t(n), fd);
        if (c.fd < 0) return;  // released while handling
    }
}

void Daemon::on_request(Client &c, const uint8_t *msg, size_t n, int fd) {
    ipc::ReqHdr h;
    if (n < sizeof h) return reply(c, 0, 0, MRC_EINVAL, fmt::format("short request ({} bytes)", n));
    std::memcpy(&h, msg, sizeof h);
    if (refuse_header(c, h, n) || refuse_now(c, h)) return;
    dispatch(c, h, msg + sizeof h, fd);
}

// Answers (and for a foreign or outdated client, releases) a message whose
// header is wrong; false when the header is good.
bool Daemon::refuse_header(Client &c, const ipc::ReqHdr &h, size_t n) {
    if (h.magic != ipc::kMagic) {
        reply(c, h.op, h.seq, MRC_EINVAL, "not an mrcd request (bad magic): closing");
        release(c);
        return true;
    }
    if (h.version != ipc::kVersion) {
        reply(c, h.op, h.seq, MRC_EVERSION,
              fmt::format("the application speaks API version {}, mrcd speaks {}: rebuild it "
                          "against this libmrc",
                          h.version, ipc::kVersion));
        release(c);
        return true;
    }
    if (h.body_bytes != n - sizeof h) {
        reply(c, h.op, h.seq, MRC_EINVAL, "body length disagrees with the message");
        return true;
    }
    return false;
}

// Answers a request that cannot be served now; false when it can. mrcctl's
// requests are always served.
bool Daemon::refuse_now(Client &c, const ipc::ReqHdr &h) {
    const auto op = static_cast<ipc::Op>(h.op);
    if (op == ipc::Op::kAdmin) return false;
    if (draining_) {
        reply(c, h.op, h.seq, MRC_EDAEMON, "mrcd is shutting down");
        return true;
    }
    if (!c.hello && op != ipc::Op::kHello) {
        reply(c, h.op, h.seq, MRC_ESTATE, "say hello first (mrc_open)");
        return true;
    }
    if (c.waiting) {
        reply(c, h.op, h.seq, MRC_EBUSY, "a connect or accept of this context is in progress");
        return true;
    }
    return false;
}

// The body as the op's request struct, or (answered) nothing when its size
// is not exactly that struct's.
template <typename Req>
std::optional<Req> Daemon::decode(Client &c, const ipc::ReqHdr &h, const uint8_t *body) {
    if (h.body_bytes != sizeof(Req)) {
        reply(c, h.op, h.seq, MRC_EINVAL,
              fmt::format("request body of {} bytes, expected {}", size_t(h.body_bytes),
                          sizeof(Req)));
        return std::nullopt;
    }
    Req r;
    std::memcpy(&r, body, sizeof r);
    return r;
}

void Daemon::dispatch(Client &c, const ipc::ReqHdr &h, const uint8_t *b, int fd) {
    const uint32_t seq = h.seq;
    switch (static_cast<ipc::Op>(h.op)) {
        case ipc::Op::kHello:
            if (auto r = decode<ipc::HelloReq>(c, h, b)) do_hello(c, seq, *r);
            return;
        case ipc::Op::kRegMr:
            if (auto r = decode<ipc::RegMrReq>(c, h, b)) do_reg_mr(c, seq, *r, fd);
            return;
        case ipc::Op::kDeregMr:
            if (auto r = decode<ipc::KeyReq>(c, h, b)) do_dereg_mr(c, seq, *r);
            return;
        case ipc::Op::kCreateCq:
            if (auto r = decode<ipc::CreateCqReq>(c, h, b)) do_create_cq(c, seq, *r);
            return;
        case ipc::Op::kDestroyCq:
            if (auto r = decode<ipc::KeyReq>(c, h, b)) do_destroy_cq(c, seq, *r);
            return;
        case ipc::Op::kCreateQp:
            if (auto r = decode<ipc::CreateQpReq>(c, h, b)) do_create_qp(c, seq, *r);
            return;
        case ipc::Op::kDestroyQp:
            if (auto r = decode<ipc::KeyReq>(c, h, b)) do_destroy_qp(c, seq, *r);
            return;
        case ipc::Op::kConnect:
            if (auto r = decode<ipc::ConnectReq>(c, h, b)) do_connect(c, seq, *r);
            return;
        case ipc::Op::kConnectMany:
            do_connect_many(c, seq, b, h.body_bytes);
            return;
        case ipc::Op::kListen:
            if (auto r = decode<ipc::ListenReq>(c, h, b)) do_listen(c, seq, *r);
            return;
        case ipc::Op::kAccept:
            if (auto r = decode<ipc::AcceptReq>(c, h, b)) do_accept(c, seq, *r);
            return;
        case ipc::Op::kAdmin:
            return do_admin(c, seq, b, h.body_bytes);
    }
    reply(c, h.op, h.seq, MRC_EINVAL, fmt::format("unknown request {}", h.op));
}

void Daemon::reply(Client &c, uint16_t op, uint32_t seq, int status, const std::string &msg,
                   const void *body, size_t len, int fd, int fd2) {
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
    ipc::send_msg(c.fd, out.data(), out.size(), fd, fd2);
}

// ---- hello ------------------------------------------------------------------

void Daemon::do_hello(Client &c, uint32_t seq, ipc::HelloReq req) {
    constexpr auto op = uint16_t(ipc::Op::kHello);
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
    rep.workers = dp_->workers();
    rep.wake_stride = uint32_t(dp::Dataplane::kWakeStride);
    log(RTE_LOG_INFO, "client {} ({} pid {} uid {}) connected", c.id, c.name, c.pid, c.uid);
    reply(c, op, seq, MRC_OK, "", &rep, sizeof rep, dp_->wake_page_fd());
}

// ---- regions ----------------------------------------------------------------

// Why a region cannot be registered (status, message), or nothing.
std::optional<std::pair<int, std::string>> Daemon::check_reg_mr(const Client &c,
                                                                const ipc::RegMrReq &req,
                                                                int fd) const {
    auto no = [](int status, std::string m) { return std::make_pair(status, std::move(m)); };
    if (fd < 0) return no(MRC_EINVAL, "no memory descriptor came with the request");
    if (req.length == 0 || req.length > cfg_.max_region_bytes)
        return no(MRC_EINVAL, fmt::format("region of {} bytes: allowed 1 .. {}", req.length,
                                          cfg_.max_region_bytes));
    if (req.access & ~uint32_t(MRC_ACCESS_REMOTE_WRITE))
        return no(MRC_EINVAL, fmt::format("unknown access bits {:#x}", req.access));
    if (req.client_addr == 0 || req.client_addr + req.length < req.client_addr)
        return no(MRC_EINVAL, "region address out of range");
    if (c.mrs.size() >= cfg_.max_mrs_per_client)
        return no(MRC_ENOMEM,
                  fmt::format("at most {} regions per application", cfg_.max_mrs_per_client));
    if (mr_free_.empty()) return no(MRC_ENOMEM, "mrcd's region table is full");
    // Only sealed shared memory: a file the application could shrink would
    // fault the daemon when a packet lands past its new end.
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return no(MRC_EINVAL,
                  "region memory must be a memfd sealed with F_SEAL_SHRINK (use mrc_alloc_mr)");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) < map_bytes_of(req.length))
        return no(MRC_EINVAL, "region memory is smaller than the length given");
    return std::nullopt;
}

uint64_t Daemon::map_bytes_of(uint64_t length) {
    return (length + 4095) / 4096 * 4096;
}

uint32_t Daemon::take_mr_key() {
    const uint32_t slot = mr_free_.back();
    mr_free_.pop_back();
    const uint8_t gen = uint8_t(mr_gen_[slot] + 1);
    mr_gen_[slot] = gen ? gen : 1;  // generation 0 is never a valid key
    return slot << 8 | mr_gen_[slot];
}

// The command that registers `m` in a worker's table.
cmd::RegMr Daemon::reg_mr_command(uint32_t client, const MrRec &m) {
    const bool remote = m.access & MRC_ACCESS_REMOTE_WRITE;
    return cmd::RegMr{.client = client,
                      .key = m.key,
                      .base = m.base,
                      .length = m.length,
                      .remote_base = m.remote_base,
                      .access = remote ? kAccessRemoteWrite : 0,
                      .pd = remote ? pd_of(client, m.service) : 0};
}

// Takes region `key` out of the tables of workers 0 .. workers-1.
void Daemon::dereg_everywhere(uint32_t key, uint32_t workers, bool force) {
    for (uint32_t w = 0; w < workers; ++w)
        run_on(w, cmd::DeregMr{.key = key, .force = force});
}

void Daemon::do_reg_mr(Client &c, uint32_t seq, const ipc::RegMrReq &req, int fd) {
    constexpr auto op = uint16_t(ipc::Op::kRegMr);
    if (auto no = check_reg_mr(c, req, fd)) return reply(c, op, seq, no->first, no->second);
    const uint64_t map_bytes = map_bytes_of(req.length);
    void *p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return reply(c, op, seq, MRC_ENOMEM, fmt::format("mmap: {}", std::strerror(errno)));
    const MrRec m{.key = take_mr_key(),
                  .base = static_cast<uint8_t *>(p),
                  .map_bytes = map_bytes,
                  .length = req.length,
                  .remote_base = req.client_addr,
                  .access = req.access,
                  .service = req.service};
    for (uint32_t w = 0; w < agents_.size(); ++w) {
        const CommandAnswer a = run_on(w, reg_mr_command(c.id, m));
        if (!a.ok) {
            dereg_everywhere(m.key, w, false);
            ::munmap(p, map_bytes);
            mr_free_.push_back(m.key >> 8);
            return reply(c, op, seq, MRC_ENOMEM, a.error);
        }
    }
    c.mrs[m.key] = m;
    ipc::RegMrRep rep{m.key, 0};
    reply(c, op, seq, MRC_OK, "", &rep, sizeof rep);
}

void Daemon::do_dereg_mr(Client &c, uint32_t seq, const ipc::KeyReq &req) {
    constexpr auto op = uint16_t(ipc::Op::kDeregMr);
    auto it = c.mrs.find(req.id);
    if (it == c.mrs.end())
        return reply(c, op, seq, MRC_ENOENT, fmt::format("no region with key {:#x}", req.id));
    const MrRec &m = it->second;
    for (uint32_t w = 0; w < agents_.size(); ++w) {
        const CommandAnswer a = run_on(w, cmd::DeregMr{.key = req.id});
        if (!a.ok) {
            // Still read by work requests: put it back where it was taken out.
            for (uint32_t u = 0; u < w; ++u)
                run_on(u, reg_mr_command(c.id, m));
            return reply(c, op, seq, MRC_EBUSY, a.error + ": wait for their completions");
        }
    }
    ::munmap(m.base, m.map_bytes);
    mr_free_.push_back(req.id >> 8);
    c.mrs.erase(it);
    reply(c, op, seq, MRC_OK, "");
}

// ---- CQs --------------------------------------------------------------------

void Daemon::do_create_cq(Client &c, uint32_t seq, const ipc::CreateCqReq &req) {
    constexpr auto op = uint16_t(ipc::Op::kCreateCq);
    if (req.depth == 0 || req.depth > ipc::kMaxRingEntries)
        return reply(
            c, op, seq, MRC_EINVAL,
            fmt::format("CQ depth {} out of range (1 .. {})", req.depth, ipc::kMaxRingEntries));
    if (c.cqs.size() >= cfg_.max_qps_per_client)
        return reply(c, op, seq, MRC_ENOMEM, "too many CQs");
    const uint32_t entries = round_up_pow2(req.depth);
    // A doorbell bit for every QP the application may have.
    const uint32_t bells = cfg_.max_qps_per_client;
    auto ring = make_ring(entries, sizeof(ipc::Cqe), "mrc-cq", bells);
    if (!ring) return reply(c, op, seq, MRC_ENOMEM, ring.error().message);
    CqRec r;
    r.id = next_cq_++;
    r.worker = next_worker_++ % uint32_t(agents_.size());
    r.ring = ring->second;
    r.entries = entries;
    r.map_bytes = ipc::ring_bytes(entries, sizeof(ipc::Cqe), bells);
    run_on(r.worker, cmd::AddCq{.cq_id = r.id, .ring = r.ring, .bells = bells});
    c.cqs[r.id] = r;
    ipc::RingRep rep{r.id, entries, r.map_bytes, 0, r.id, r.worker, 0};
    reply(c, op, seq, MRC_OK, "", &rep, sizeof rep, ring->first, dp_->worker(r.worker).wake_fd());
    ::close(ring->first);
}

void Daemon::do_destroy_cq(Client &c, uint32_t seq, const ipc::KeyReq &req) {
    constexpr auto op = uint16_t(ipc::Op::kDestroyCq);
    auto it = c.cqs.find(req.id);
    if (it == c.cqs.end()) return reply(c, op, seq, MRC_ENOENT, fmt::format("no CQ {}", req.id));
    for (uint32_t q : c.qps)
        if (qps_.at(q)->cq_id == req.id)
            return reply(c, op, seq, MRC_EBUSY, fmt::format("CQ {} still has QP {}", req.id, q));
    for (const auto &[svc, l] : listeners_)
        if (l.client == c.id && l.cq_id == req.id)
            return reply(c, op, seq, MRC_EBUSY,
                         fmt::format("CQ {} takes the connections of service {}", req.id, svc));
    run_on(it->second.worker, cmd::DelCq{.cq_id = req.id});
    ::munmap(it->second.ring, it->second.map_bytes);
    c.cqs.erase(it);
    reply(c, op, seq, MRC_OK, "");
}

// ---- QPs --------------------------------------------------------------------

Result<Daemon::QpRec *> Daemon::new_qp(Client &c, uint32_t cq_id, uint32_t sq_depth, int *status) {
    *status = MRC_EINVAL;
    auto cq = c.cqs.find(cq_id);
    if (cq == c.cqs.end()) return Error{fmt::format("no CQ {}", cq_id)};
    if (sq_depth == 0 || sq_depth > ipc::kMaxRingEntries)
        return Error{
            fmt::format("sq_depth {} out of range (1 .. {})", sq_depth, ipc::kMaxRingEntries)};
    // From here on the request is good and what is missing is room.
    *status = MRC_ENOMEM;
    if (c.qps.size() >= cfg_.max_qps_per_client)
        return Error{fmt::format("at most {} QPs per application", cfg_.max_qps_per_client)};
    const uint32_t entries = round_up_pow2(sq_depth);
    auto ring = make_ring(entries, sizeof(ipc::Sqe), "mrc-sq");
    if (!ring) return ring.error();
    CqRec &cr = cq->second;
    uint32_t bell = cr.next_bell;
    if (!cr.free_bells.empty()) bell = cr.free_bells.back();
    ring->second->bell = bell;
    cmd::CreateQp create{
        .client = c.id, .cq_id = cq_id, .sq_ring = ring->second, .bell = bell, .config = cfg_.qp};
    QpConfig &qc = create.config;
    qc.mtu_payload_bytes = dp_->max_payload_bytes();
    qc.ev.evs = cfg_.evs_per_plane * dp_->planes();
    qc.ev.min_active = std::min<uint32_t>(qc.ev.min_active, qc.ev.evs);
    qc.ev.seed = rng_();
    const CommandAnswer a = run_on(cq->second.worker, create);
    const size_t bytes = ipc::ring_bytes(entries, sizeof(ipc::Sqe));
    if (!a.ok) {
        ::munmap(ring->second, bytes);
        ::close(ring->first);
        return Error{a.error};
    }
    if (cr.free_bells.empty())
        ++cr.next_bell;
    else
        cr.free_bells.pop_back();
    auto q = std::make_unique<QpRec>();
    q->wire_qpn = create.wire_qpn;
    q->bell = bell;
    q->client = c.id;
    q->worker = cq->second.worker;
    q->cq_id = cq_id;
    q->ring = ring->second;
    q->map_bytes = bytes;
    q->entries = entries;
    q->memfd = ring->first;
    QpRec *raw = q.get();
    qps_[q->wire_qpn] = std::move(q);
    c.qps.push_back(raw->wire_qpn);
    return raw;
}

void Daemon::do_create_qp(Client &c, uint32_t seq, const ipc::CreateQpReq &req) {
    constexpr auto op = uint16_t(ipc::Op::kCreateQp);
    int status = MRC_OK;
    auto q = new_qp(c, req.cq_id, req.sq_depth, &status);
    if (!q) return reply(c, op, seq, status, q.error().message);
    QpRec &r = **q;
    ipc::RingRep rep{r.wire_qpn, r.entries, r.map_bytes, 0, r.cq_id, 0, 0};
    reply(c, op, seq, MRC_OK, "", &rep, sizeof rep, r.memfd);
    ::close(r.memfd);
    r.memfd = -1;
}

void Daemon::destroy_qp(Client &c, uint32_t qpn, bool tell_peer) {
    auto it = qps_.find(qpn);
    if (it == qps_.end()) return;
    QpRec &q = *it->second;
    if (tell_peer && q.connected) send_disconnect(q);
    run_on(q.worker, cmd::DestroyQp{.wire_qpn = qpn});
    if (auto cq = c.cqs.find(q.cq_id); cq != c.cqs.end()) cq->second.free_bells.push_back(q.bell);
    if (q.memfd >= 0) ::close(q.memfd);
    ::munmap(q.ring, q.map_bytes);
    c.qps.erase(std::remove(c.qps.begin(), c.qps.end(), qpn), c.qps.end());
    for (auto &[svc, l] : listeners_)
        l.ready.erase(std::remove(l.ready.begin(), l.ready.end(), qpn), l.ready.end());
    for (auto p = connecting_.begin(); p != connecting_.end();)
        p = p->second->qpn == qpn ? connecting_.erase(p) : std::next(p);
    if (q.answered)
        if (auto a = answered_.find(q.answer_key); a != answered_.end() && a->second.qpn == qpn)
            answered_.erase(a);
    qps_.erase(it);
}

void Daemon::do_destroy_qp(Client &c, uint32_t seq, const ipc::KeyReq &req) {
    constexpr auto op = uint16_t(ipc::Op::kDestroyQp);
    if (std::find(c.qps.begin(), c.qps.end(), req.id) == c.qps.end())
        return reply(c, op, seq, MRC_ENOENT, fmt::format("no QP {} in this context", req.id));
    destroy_qp(c, req.id, true);
    reply(c, op, seq, MRC_OK, "");
}

// ---- connect, listen, accept ----------------------------------------------------

// Sends the first CONNECT; the answer (cm.cc) or a timeout replies.
void Daemon::do_connect(Client &c, uint32_t seq, const ipc::ConnectReq &req) {
    constexpr auto op = uint16_t(ipc::Op::kConnect);
    if (std::find(c.qps.begin(), c.qps.end(), req.qpn) == c.qps.end())
        return reply(c, op, seq, MRC_ENOENT, fmt::format("no QP {} in this context", req.qpn));
    QpRec &q = *qps_.at(req.qpn);
    if (q.connected) return reply(c, op, seq, MRC_ESTATE, "QP already connected");
    if (req.peer_ip == 0 || req.peer_ip == 0xffffffff)
        return reply(c, op, seq, MRC_EINVAL, "peer address 0.0.0.0 / broadcast");
    if (const std::string why = no_route(req.peer_ip); !why.empty())
        return reply(c, op, seq, MRC_EINVAL, why);
    Pending &p =
        start_connect(c, seq, req.qpn, req.service, req.peer_ip, deadline_after_ms(req.timeout_ms));
    c.waiting = std::make_unique<Pending>(p);
}

Daemon::Pending &Daemon::start_connect(Client &c, uint32_t seq, uint32_t qpn, uint32_t service,
                                       uint32_t peer_ip, uint64_t deadline_ns) {
    auto p = std::make_unique<Pending>();
    p->kind = Pending::kConnect;
    p->client = c.id;
    p->seq = seq;
    p->deadline_ns = deadline_ns;
    do {
        p->conn_id = rng_();
    } while (connecting_.count(p->conn_id));
    p->qpn = qpn;
    p->service = service;
    p->peer_ip = peer_ip;
    p->psn = uint32_t(rng_()) & wire::kQpnMask;
    qps_.at(qpn)->service = service;
    send_connect(*p);
    Pending &ref = *p;
    connecting_[ref.conn_id] = std::move(p);
    return ref;
}

// Many QPs of one context to one peer service: their CONNECTs go out
// together (kConnectWindow at a time) and one reply carries every status.
void Daemon::do_connect_many(Client &c, uint32_t seq, const uint8_t *body, uint32_t len) {
    constexpr auto op = uint16_t(ipc::Op::kConnectMany);
    ipc::ConnectManyReq req;
    if (len < sizeof req) return reply(c, op, seq, MRC_EINVAL, "short connect-many request");
    std::memcpy(&req, body, sizeof req);
    if (req.count == 0 || req.count > ipc::kMaxConnectMany)
        return reply(
            c, op, seq, MRC_EINVAL,
            fmt::format("{} QPs in one request (1 .. {})", req.count, ipc::kMaxConnectMany));
    if (len != sizeof req + size_t{req.count} * sizeof(uint32_t))
        return reply(c, op, seq, MRC_EINVAL, "request body disagrees with its QP count");
    if (req.peer_ip == 0 || req.peer_ip == 0xffffffff)
        return reply(c, op, seq, MRC_EINVAL, "peer address 0.0.0.0 / broadcast");
    if (const std::string why = no_route(req.peer_ip); !why.empty())
        return reply(c, op, seq, MRC_EINVAL, why);
    std::vector<uint32_t> qpns(req.count);
    std::memcpy(qpns.data(), body + sizeof req, qpns.size() * sizeof qpns[0]);
    // Each QP this context's, not connected, named once.
    std::unordered_set<uint32_t> mine(c.qps.begin(), c.qps.end()), seen;
    for (const uint32_t n : qpns) {
        if (!mine.count(n))
            return reply(c, op, seq, MRC_ENOENT, fmt::format("no QP {} in this context", n));
        if (!seen.insert(n).second)
            return reply(c, op, seq, MRC_EINVAL, fmt::format("QP {} named twice", n));
        if (qps_.at(n)->connected)
            return reply(c, op, seq, MRC_ESTATE, fmt::format("QP {} already connected", n));
    }
    auto b = std::make_unique<Pending>();
    b->kind = Pending::kConnectMany;
    b->client = c.id;
    b->seq = seq;
    b->deadline_ns = deadline_after_ms(req.timeout_ms);
    b->service = req.service;
    b->peer_ip = req.peer_ip;
    b->batch_qpns = std::move(qpns);
    b->batch_status.assign(req.count, MRC_ETIMEDOUT);
    b->batch_left = req.count;
    c.waiting = std::move(b);
    send_batch(c);
}

void Daemon::send_batch(Client &c) {
    // Enough in flight to cover the round trip, few enough for the peer's
    // CM inbox (two planes' copies each).
    constexpr uint32_t kConnectWindow = 64;
    Pending &b = *c.waiting;
    const uint64_t now = mono_ns();
    begin_cm_batch();
    while (b.batch_next < b.batch_qpns.size() && b.batch_open < kConnectWindow) {
        const uint32_t i = b.batch_next++;
        const uint32_t qpn = b.batch_qpns[i];
        if (now >= b.deadline_ns || !qps_.count(qpn)) {
            b.batch_status[i] = qps_.count(qpn) ? MRC_ETIMEDOUT : MRC_ENOENT;
            if (b.batch_error.empty())
                b.batch_error = fmt::format("QP {}: {}", qpn,
                                            qps_.count(qpn) ? "no time left" : "the QP is gone");
            --b.batch_left;
            continue;
        }
        ++b.batch_open;
        Pending &p = start_connect(c, b.seq, qpn, b.service, b.peer_ip, b.deadline_ns);
        p.in_batch = true;
        p.index = i;
    }
    end_cm_batch();
    if (b.batch_left != 0) return;
    // The body: every QP's status, then the first failure's text (whole:
    // the header's message field is short).
    std::vector<uint8_t> out(b.batch_status.size() * sizeof(int32_t) + b.batch_error.size());
    std::memcpy(out.data(), b.batch_status.data(), b.batch_status.size() * sizeof(int32_t));
    std::memcpy(out.data() + b.batch_status.size() * sizeof(int32_t), b.batch_error.data(),
                b.batch_error.size());
    const std::string err = std::move(b.batch_error);
    const uint32_t seq = b.seq;
    c.waiting.reset();
    reply(c, uint16_t(ipc::Op::kConnectMany), seq, MRC_OK, err, out.data(), out.size());
}

void Daemon::do_listen(Client &c, uint32_t seq, const ipc::ListenReq &req) {
    constexpr auto op = uint16_t(ipc::Op::kListen);
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

// Hands an accepted QP to the application waiting in accept.
void Daemon::complete_accept(Client &c, QpRec &q) {
    ipc::RingRep rep{q.wire_qpn, q.entries, q.map_bytes, q.peer_ip[0], q.cq_id};
    reply(c, uint16_t(ipc::Op::kAccept), c.waiting->seq, MRC_OK, "", &rep, sizeof rep, q.memfd);
    ::close(q.memfd);
    q.memfd = -1;
    c.waiting.reset();
}

// Takes a connection already accepted, or waits for one (cm.cc) or the timeout.
void Daemon::do_accept(Client &c, uint32_t seq, const ipc::AcceptReq &req) {
    constexpr auto op = uint16_t(ipc::Op::kAccept);
    auto it = listeners_.find(req.service);
    if (it == listeners_.end() || it->second.client != c.id)
        return reply(c, op, seq, MRC_ENOENT,
                     fmt::format("this context does not listen on service {}", req.service));
    auto p = std::make_unique<Pending>();
    p->kind = Pending::kAccept;
    p->client = c.id;
    p->seq = seq;
    p->service = req.service;
    p->deadline_ns = deadline_after_ms(req.timeout_ms);
    c.waiting = std::move(p);
    Listener &l = it->second;
    if (!l.ready.empty()) {
        const uint32_t qpn = l.ready.front();
        l.ready.pop_front();
        complete_accept(c, *qps_.at(qpn));
    }
}

// ---- shared objects ---------------------------------------------------------------

uint32_t Daemon::pd_of(uint32_t client, uint32_t service) {
    auto [it, fresh] = pds_.try_emplace({client, service}, 0);
    if (fresh) it->second = next_pd_++;
    return it->second;
}

Result<std::pair<int, ipc::RingHdr *>> Daemon::make_ring(uint32_t entries, size_t entry_bytes,
                                                         const char *name, uint32_t bell_bits) {
    const size_t bytes = ipc::ring_bytes(entries, entry_bytes, bell_bits);
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
    h->bell = bell_bits;
    h->bell_offset = bell_bits ? uint32_t(ipc::bell_offset(entries, entry_bytes)) : 0;
    h->armed.store(0);
    h->rung.store(0);
    return std::make_pair(fd, h);
}

}  // namespace mrc::mrcd
