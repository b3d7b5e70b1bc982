#include "sim/sim.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "common/rng.h"
#include "core/endpoint.h"
#include "sim/radix_heap.h"
#include "wire/mrc.h"

namespace mrc::sim {

namespace {

constexpr uint32_t kWireOverheadBytes = 24;  // preamble, inter-frame gap, FCS

enum class Ev : uint8_t {
    kPath,
    kCore,
    kLastHop,
    kDeliver,
    kHostTx,
    kTimer,
    kScore,
    kLink,
    kSample,
    kStart
};

struct Event {
    uint32_t arg;  // packet index or host
    Ev kind;
};

struct Pkt {
    uint8_t hdr[wire::kMaxHdrBytes];
    uint16_t hdr_len = 0;
    const uint8_t *payload = nullptr;
    uint32_t payload_len = 0;
    uint8_t plane = 0;
    uint16_t src = 0;  // sending host
    uint16_t dst = 0;  // receiving host
    uint16_t path = 0;
    bool data = false;
    uint64_t extra_delay_ps = 0;
};

struct PathState {
    uint64_t busy_until_ps = 0;
    bool burst_bad = false;
    Impairment imp;
};

struct QueueState {
    uint64_t busy_until_ps = 0;
};

struct QpApp {
    uint32_t sender = 0;  // host index of the requester
    Qp *a = nullptr;      // requester on a sender
    Qp *b = nullptr;      // responder on B
    uint32_t rkey = 0;
    uint8_t *dst = nullptr;  // B's region: depth message slots
    const uint8_t *src = nullptr;
    uint64_t msgs_total = 0;
    uint64_t posted = 0;
    uint64_t completed = 0;
    uint64_t next_wr_expected = 0;
    uint64_t next_msn_expected = 0;
    uint64_t start_ps = 0;
    uint64_t last_completion_ps = 0;
    bool victim = false;
    bool done = false;
    bool errored = false;
};

// Whether failure `f` holds at t_ns, and when that next changes after t_ns
// (UINT64_MAX: never).
bool failure_active(const Failure &f, uint64_t t_ns) {
    if (t_ns < f.at_ns) return false;
    if (f.period_ns) return (t_ns - f.at_ns) % f.period_ns < f.for_ns;
    return f.for_ns == 0 || t_ns < f.at_ns + f.for_ns;
}
uint64_t failure_next_change(const Failure &f, uint64_t t_ns) {
    if (t_ns < f.at_ns) return f.at_ns;
    if (f.period_ns) {
        const uint64_t k = (t_ns - f.at_ns) / f.period_ns;
        const uint64_t phase = (t_ns - f.at_ns) % f.period_ns;
        return phase < f.for_ns ? f.at_ns + k * f.period_ns + f.for_ns
                                : f.at_ns + (k + 1) * f.period_ns;
    }
    if (f.for_ns && t_ns < f.at_ns + f.for_ns) return f.at_ns + f.for_ns;
    return UINT64_MAX;
}

// Reads the big-endian 24-bit QPN from a frame this simulator built.
uint32_t frame_qpn(const uint8_t *hdr) {
    const uint8_t *q = hdr + wire::kEthIpv4UdpBytes + offsetof(wire::BaseHdr, dst_qpn);
    return (uint32_t{q[0]} << 16) | (uint32_t{q[1]} << 8) | q[2];
}
uint32_t frame_psn(const uint8_t *hdr) {
    const uint8_t *q = hdr + wire::kEthIpv4UdpBytes + offsetof(wire::BaseHdr, psn);
    return (uint32_t{q[0]} << 16) | (uint32_t{q[1]} << 8) | q[2];
}

class Simulator {
  public:
    explicit Simulator(const SimConfig &c) : cfg_(c), rng_(c.seed) {}
    SimResult run();

  private:
    // Rates are link_gbps_ or path_gbps_, whose reciprocals are kept: no
    // division per packet.
    uint64_t ser_ps(uint32_t bytes, double gbps) const {
        return static_cast<uint64_t>(double(bytes + kWireOverheadBytes) * 8000.0 * inv(gbps));
    }
    uint64_t backlog_bytes(uint64_t busy_until_ps, uint64_t t_ps, double gbps) const {
        return busy_until_ps > t_ps
                   ? static_cast<uint64_t>(double(busy_until_ps - t_ps) * gbps * (1.0 / 8000.0))
                   : 0;
    }
    double inv(double gbps) const { return gbps == path_gbps_ ? inv_path_gbps_ : inv_link_gbps_; }
    void push(uint64_t t_ps, Ev kind, uint32_t arg) { heap_.push(t_ps, Event{arg, kind}); }
    uint32_t alloc_pkt() {
        if (free_pkts_.empty()) {
            pkts_.emplace_back();
            return static_cast<uint32_t>(pkts_.size() - 1);
        }
        const uint32_t i = free_pkts_.back();
        free_pkts_.pop_back();
        return i;
    }
    void free_pkt(uint32_t i) { free_pkts_.push_back(i); }
    PathState &path(int dir, uint32_t plane, uint32_t k) {
        return paths_[(size_t(dir) * cfg_.fabric.planes + plane) * cfg_.fabric.paths_per_plane + k];
    }
    QueueState &last_hop(uint32_t host, uint32_t plane) {
        return last_hop_[size_t(host) * cfg_.fabric.planes + plane];
    }
    bool is_receiver(uint32_t h) const { return h == receiver_; }

    void setup();
    void kick_tx(uint32_t h, uint64_t t_ps);
    void ensure_timer(uint32_t h, uint64_t t_ps);
    void host_tx(uint32_t h, uint64_t t_ps);
    void through_path(uint32_t pi, uint64_t t_ps);
    void through_core(uint32_t pi, uint64_t t_ps);
    void last_hop_arrive(uint32_t pi, uint64_t t_ps);
    bool admit(Pkt &p, uint64_t backlog, uint64_t trim_bytes, bool last_hop);
    void mark_ce(Pkt &p);
    void note_setup(const Result<void> &r) {
        if (!r && r_.setup_error.empty()) r_.setup_error = r.error().message;
    }
    void score(uint64_t t_ps);
    void link_event(uint32_t fi, uint64_t t_ps);
    void sample(uint64_t t_ps);
    void report();
    bool path_down(int dir, uint32_t plane, uint32_t k, uint64_t t_ps) const;
    void drop(const Pkt &p);
    void deliver(uint32_t pi, uint64_t t_ps);
    void app_qp(uint32_t qi);
    void final_check();
    void note_fate(const Pkt &p, uint8_t bit);
    static constexpr uint8_t kArrived = 1, kHeldBack = 2, kDuplicated = 4;
    static constexpr size_t kGuardBytes = 4096;
    static constexpr uint8_t kGuardByte = 0xa5;
    void post_more(QpApp &q);
    bool all_done() const { return done_qps_ == apps_.size(); }

    SimConfig cfg_;
    Rng rng_;
    uint32_t receiver_ = 1;  // host index of B; senders are 0 .. receiver_ - 1
    std::vector<std::unique_ptr<Endpoint>> ep_;
    std::vector<uint8_t> tx_scheduled_;
    std::vector<uint64_t> timer_at_;  // per host: when its timer event is due (UINT64_MAX: none)
    std::vector<std::vector<QueueState>> nic_;
    std::vector<std::vector<uint32_t>> apps_of_host_;
    std::vector<PathState> paths_;
    std::vector<QueueState> last_hop_;
    std::vector<QueueState> core_;     // per (dir, plane) with a PlaneLimit
    std::vector<int> limit_of_;        // (dir, plane) -> index into plane_limits, or -1
    std::vector<PathScorer> scorers_;  // per host: its control thread
    uint64_t series_prev_bytes_ = 0;
    uint64_t series_max_queue_ = 0;  // deepest queue in the current bucket
    std::vector<uint64_t> series_prev_tx_;
    RadixHeap<Event> heap_;
    std::vector<Pkt> pkts_;
    std::vector<uint32_t> free_pkts_;
    std::vector<QpApp> apps_;
    std::vector<std::vector<uint32_t>> app_of_qpn_;  // per host: QPN -> app index
    std::vector<uint8_t> src_buf_;
    std::vector<std::vector<uint8_t>> dst_bufs_;
    // (app, PSN) -> how often a transmission of that PSN, or the ack or
    // NACK it triggered, was dropped: what a retry budget is spent on.
    std::unordered_map<uint64_t, uint32_t> drops_of_psn_;
    std::unordered_map<uint64_t, uint8_t> fate_;  // (app, PSN) -> kArrived | kHeldBack | ...
    size_t done_qps_ = 0;
    double path_gbps_ = 0;
    double inv_path_gbps_ = 0;
    double inv_link_gbps_ = 0;
    uint64_t now_ps_ = 0;
    uint64_t last_completion_ps_ = 0;
    SimResult r_;
    SendCompletion sc_buf_[16];
    RecvCompletion rc_buf_[16];
    TxPacket tx_buf_[8];
    uint8_t tx_hdr_[8][wire::kMaxHdrBytes];
};

void Simulator::setup() {
    const FabricConfig &f = cfg_.fabric;
    path_gbps_ = f.path_gbps > 0 ? f.path_gbps : f.link_gbps;
    inv_path_gbps_ = 1.0 / path_gbps_;
    inv_link_gbps_ = 1.0 / f.link_gbps;
    const WorkloadConfig &w = cfg_.work;
    const uint32_t nqps = w.qps + w.victims;
    receiver_ = w.senders + w.victims;
    const uint32_t hosts = receiver_ + 1;
    ep_.resize(hosts);
    nic_.resize(hosts);
    app_of_qpn_.resize(hosts);
    apps_of_host_.resize(hosts);
    tx_scheduled_.assign(hosts, 0);
    timer_at_.assign(hosts, UINT64_MAX);
    for (uint32_t h = 0; h < hosts; ++h) {
        EndpointConfig ec;
        ec.planes = static_cast<uint8_t>(f.planes);
        ec.max_qps = nqps + 1;
        ec.max_mrs = nqps + 1;
        ec.timer_tick_ns = cfg_.timer_tick_ns;
        ep_[h] = std::make_unique<Endpoint>(ec);
        nic_[h].assign(f.planes, QueueState{});
        app_of_qpn_[h].assign(nqps + 2, UINT32_MAX);
        if (cfg_.run_scorer) scorers_.emplace_back(cfg_.scorer, static_cast<uint8_t>(f.planes));
    }
    limit_of_.assign(size_t(2) * f.planes, -1);
    core_.assign(size_t(2) * f.planes, QueueState{});
    for (size_t i = 0; i < f.plane_limits.size(); ++i)
        limit_of_[size_t(f.plane_limits[i].dir) * f.planes + f.plane_limits[i].plane] = int(i);
    paths_.assign(size_t(2) * f.planes * f.paths_per_plane, PathState{});
    last_hop_.assign(size_t(hosts) * f.planes, QueueState{});
    for (int dir = 0; dir < 2; ++dir)
        for (uint32_t p = 0; p < f.planes; ++p)
            for (uint32_t k = 0; k < f.paths_per_plane; ++k) {
                PathState &ps = path(dir, p, k);
                for (const Impairment &im : f.impairments) {
                    if ((im.plane >= 0 && uint32_t(im.plane) != p) ||
                        (im.path >= 0 && uint32_t(im.path) != k) || (im.dir >= 0 && im.dir != dir))
                        continue;
                    ps.imp = im;  // the last matching impairment wins
                }
            }

    // Source data: one random buffer; message m of QP q reads a slice of it
    // at an offset of its own, so misplaced bytes never compare equal.
    const uint64_t msg = cfg_.work.msg_bytes;
    src_buf_.resize(std::max<uint64_t>(msg * 4, 1u << 20));
    for (auto &b : src_buf_)
        b = static_cast<uint8_t>(rng_.next());
    const uint64_t per_qp = w.total_bytes / w.qps;
    const uint64_t msgs = std::max<uint64_t>(1, per_qp / msg);
    const uint64_t victim_msgs = std::max<uint64_t>(1, w.victim_bytes / msg);
    apps_.resize(nqps);
    dst_bufs_.resize(nqps);
    r_.expected_bytes = (msgs * w.qps + victim_msgs * w.victims) * msg;
    QpConfig qc_base = cfg_.qp;
    if (cfg_.derive_cc) {
        // An unloaded round trip: a data frame through NIC, path and last
        // hop, an ack frame back the same way, propagation both ways.
        const uint32_t data = cfg_.qp.mtu_payload_bytes + uint32_t(wire::kMaxHdrBytes);
        const uint32_t ack = uint32_t(wire::kSackBytes);
        const uint64_t rtt_ps = 2 * ser_ps(data, f.link_gbps) + ser_ps(data, path_gbps_) +
                                2 * ser_ps(ack, f.link_gbps) + ser_ps(ack, path_gbps_) +
                                2 * f.delay_ns * 1000;
        qc_base.cc.nscc.base_rtt_ns = std::max<uint64_t>(1, rtt_ps / 1000);
        qc_base.cc.nscc.base_rtt_known = true;
        qc_base.cc.nscc.line_rate_gbps = f.link_gbps * f.planes;
    }
    for (uint32_t i = 0; i < nqps; ++i) {
        QpApp &q = apps_[i];
        QpConfig qc = qc_base;
        qc.ev.seed = cfg_.seed * 1315423911u + i;
        qc.max_send_wr = std::max(qc.max_send_wr, w.depth);
        q.victim = i >= w.qps;
        q.sender = q.victim ? w.senders + (i - w.qps) : i % w.senders;
        q.start_ps = q.victim ? w.victim_start_ns * 1000 : 0;
        q.a = ep_[q.sender]->create_qp(qc).value();
        q.b = ep_[receiver_]->create_qp(qc).value();
        note_setup(q.a->to_init(1));
        note_setup(q.b->to_init(1));
        QpPeer pa, pb;
        pa.dst_qpn = q.b->qpn();
        pb.dst_qpn = q.a->qpn();
        pa.planes = pb.planes = static_cast<uint8_t>(f.planes);
        for (uint32_t p = 0; p < f.planes; ++p) {
            wire::MrcAddr a2b;
            a2b.src_mac =
                wire::MacAddr{{2, 0, 0, uint8_t(q.sender >> 8), uint8_t(q.sender), uint8_t(p)}};
            a2b.dst_mac = wire::MacAddr{{2, 0, 0, 0xff, 0xff, uint8_t(p)}};
            a2b.src_ip =
                wire::ipv4(10, uint8_t(p), uint8_t(q.sender >> 8), uint8_t(1 + q.sender % 250));
            a2b.dst_ip = wire::ipv4(10, uint8_t(p), 255, 254);
            wire::MrcAddr b2a = a2b;
            std::swap(b2a.src_mac, b2a.dst_mac);
            std::swap(b2a.src_ip, b2a.dst_ip);
            pa.path[p] = a2b;
            pb.path[p] = b2a;
        }
        const Psn start_a(
            static_cast<uint32_t>(rng_.next()));  // random start PSNs: wrap gets exercised
        const Psn start_b(static_cast<uint32_t>(rng_.next()));
        note_setup(q.a->to_rtr(pa, start_b));
        note_setup(q.b->to_rtr(pb, start_a));
        note_setup(q.a->to_rts(start_a));
        note_setup(q.b->to_rts(start_b));
        // The region, with a guard on each side that nothing may write.
        dst_bufs_[i].assign(msg * cfg_.work.depth + 2 * kGuardBytes, kGuardByte);
        std::fill(dst_bufs_[i].begin() + kGuardBytes, dst_bufs_[i].end() - kGuardBytes, 0);
        q.dst = dst_bufs_[i].data() + kGuardBytes;
        q.rkey = ep_[receiver_]
                     ->mrs()
                     .register_region(q.dst, msg * cfg_.work.depth, kAccessRemoteWrite, 1)
                     .value();
        q.src = src_buf_.data();
        q.msgs_total = q.victim ? victim_msgs : msgs;
        app_of_qpn_[q.sender][q.a->qpn()] = i;
        app_of_qpn_[receiver_][q.b->qpn()] = i;
        apps_of_host_[q.sender].push_back(i);
        apps_of_host_[receiver_].push_back(i);
    }
    r_.per_plane_tx_packets.assign(f.planes, 0);
    series_prev_tx_.assign(f.planes, 0);
    pkts_.reserve(4096);
}

uint64_t src_offset(uint32_t qi, uint64_t m, uint64_t msg, uint64_t src_size) {
    return ((qi * 7919ull + m * 104729ull) * 61ull) % (src_size - msg + 1);
}

// After the run, independently of the completions: every QP's region holds
// exactly the last message written to each of its slots, and the guards
// around it are untouched.
void Simulator::final_check() {
    const uint64_t msg = cfg_.work.msg_bytes;
    const uint64_t depth = cfg_.work.depth;
    for (uint32_t qi = 0; qi < apps_.size(); ++qi) {
        const QpApp &q = apps_[qi];
        const std::vector<uint8_t> &buf = dst_bufs_[qi];
        for (size_t i = 0; i < kGuardBytes; ++i) {
            r_.guard_bytes_changed += buf[i] != kGuardByte;
            r_.guard_bytes_changed += buf[buf.size() - 1 - i] != kGuardByte;
        }
        if (q.errored) continue;  // an errored QP's slots may hold part of a message
        for (uint64_t slot = 0; slot < depth && slot < q.msgs_total; ++slot) {
            // The last message that went to this slot.
            const uint64_t m = slot + (q.msgs_total - 1 - slot) / depth * depth;
            const uint8_t *want = q.src + src_offset(qi, m, msg, src_buf_.size());
            r_.final_slots_checked++;
            if (std::memcmp(want, q.dst + slot * msg, msg) != 0) ++r_.final_slot_mismatches;
        }
    }
}

void Simulator::post_more(QpApp &q) {
    if (q.errored || now_ps_ < q.start_ps) return;
    const uint32_t qi = static_cast<uint32_t>(&q - apps_.data());
    const uint64_t msg = cfg_.work.msg_bytes;
    while (q.posted < q.msgs_total && q.posted - q.completed < cfg_.work.depth) {
        WriteRequest wr;
        wr.wr_id = q.posted;
        wr.local = q.src + src_offset(qi, q.posted, msg, src_buf_.size());
        wr.length = static_cast<uint32_t>(msg);
        wr.remote_addr = reinterpret_cast<uint64_t>(q.dst) + (q.posted % cfg_.work.depth) * msg;
        wr.rkey = q.rkey;
        wr.with_imm = cfg_.work.write_imm;
        wr.imm = static_cast<uint32_t>(q.posted * 2654435761u);
        if (q.a->post_write(wr) != PostResult::kOk) break;
        ++q.posted;
    }
}

// Completions of one QP: check order and bytes, post more.
void Simulator::app_qp(uint32_t qi) {
    QpApp &q = apps_[qi];
    if (q.done) return;
    SendCompletion *sc = sc_buf_;  // member buffers: no per-call initialisation
    RecvCompletion *rc = rc_buf_;
    uint32_t n;
    const uint64_t msg = cfg_.work.msg_bytes;
    while ((n = q.a->poll_send_cq(sc, 16)) > 0) {
        for (uint32_t i = 0; i < n; ++i) {
            if (sc[i].wr_id != q.next_wr_expected) r_.completions_in_order = false;
            q.next_wr_expected = sc[i].wr_id + 1;
            if (sc[i].status != WcStatus::kSuccess) continue;
            const uint8_t *want = q.src + src_offset(qi, sc[i].wr_id, msg, src_buf_.size());
            const uint8_t *got = q.dst + (sc[i].wr_id % cfg_.work.depth) * msg;
            if (std::memcmp(want, got, msg) != 0)
                ++r_.verify_errors;
            else
                r_.delivered_bytes += msg;
            ++q.completed;
            ++r_.messages;
            last_completion_ps_ = now_ps_;
            q.last_completion_ps = now_ps_;
        }
    }
    while ((n = q.b->poll_recv_cq(rc, 16)) > 0) {
        for (uint32_t i = 0; i < n; ++i) {
            if (rc[i].msn < q.next_msn_expected) ++r_.duplicate_deliveries;
            if (rc[i].msn != q.next_msn_expected) r_.completions_in_order = false;
            if (rc[i].imm != static_cast<uint32_t>(rc[i].msn * 2654435761u) || rc[i].bytes != msg)
                ++r_.verify_errors;
            q.next_msn_expected = rc[i].msn + 1;
            ++r_.imm_delivered;
        }
    }
    if (!q.errored && (q.a->state() == QpState::kError || q.b->state() == QpState::kError)) {
        q.errored = true;
        ++r_.qp_errors;
        Qp *e = q.a->state() == QpState::kError ? q.a : q.b;
        r_.qp_error_causes.push_back(to_string(e->error_cause()));
        if (e == q.a && e->error_cause() == WcStatus::kRetryExceeded) {
            const uint64_t key = (uint64_t{qi} << 24) | e->error_psn().value();
            const auto it = drops_of_psn_.find(key);
            r_.error_psn_drops.push_back(it == drops_of_psn_.end() ? 0 : it->second);
        }
    }
    post_more(q);
    const bool imm_done = !cfg_.work.write_imm || q.next_msn_expected == q.msgs_total;
    if (q.errored || (q.completed == q.msgs_total && imm_done)) {
        q.done = true;
        ++done_qps_;
    }
}

void Simulator::kick_tx(uint32_t h, uint64_t t_ps) {
    if (tx_scheduled_[h] || !ep_[h]->tx_pending()) return;
    tx_scheduled_[h] = true;
    push(t_ps, Ev::kHostTx, h);
}

// Schedules host h's timer event at its endpoint's next deadline (not at
// every tick: idle stretches cost nothing).
void Simulator::ensure_timer(uint32_t h, uint64_t t_ps) {
    const uint64_t d_ns = ep_[h]->next_timer_ns();
    if (d_ns == UINT64_MAX) return;
    const uint64_t when = std::max(d_ns * 1000, t_ps);
    if (when >= timer_at_[h]) return;
    timer_at_[h] = when;
    push(when, Ev::kTimer, h);
}

void Simulator::host_tx(uint32_t h, uint64_t t_ps) {
    tx_scheduled_[h] = false;
    const double gbps = cfg_.fabric.link_gbps;
    // Like a NIC's TX rings, one per port: new data goes only to planes
    // whose NIC has less than two MTU frames queued.
    const uint64_t limit_ps = 2 * ser_ps(cfg_.qp.mtu_payload_bytes + wire::kMaxHdrBytes, gbps);
    TxPacket *tx = tx_buf_;
    for (;;) {
        uint8_t room = 0;
        uint64_t next_room_ps = UINT64_MAX;
        for (uint32_t p = 0; p < nic_[h].size(); ++p) {
            const uint64_t busy = nic_[h][p].busy_until_ps;
            if (busy <= t_ps + limit_ps)
                room |= static_cast<uint8_t>(1u << p);
            else
                next_room_ps = std::min(next_room_ps, busy - limit_ps);
        }
        auto retry_later = [&] {
            if (next_room_ps == UINT64_MAX) return;
            tx_scheduled_[h] = true;
            push(next_room_ps, Ev::kHostTx, h);
        };
        if (room == 0) {
            retry_later();
            break;
        }
        for (int i = 0; i < 8; ++i)
            tx[i].hdr = tx_hdr_[i];
        const uint32_t n = ep_[h]->poll_tx(tx, 8, t_ps / 1000, room);
        if (n == 0) {
            // Work may be waiting for a plane whose NIC is full.
            if (ep_[h]->tx_pending()) retry_later();
            break;
        }
        for (uint32_t i = 0; i < n; ++i) {
            const uint32_t pi = alloc_pkt();
            Pkt &p = pkts_[pi];
            std::memcpy(p.hdr, tx[i].hdr, tx[i].hdr_len);
            p.hdr_len = tx[i].hdr_len;
            p.payload = tx[i].payload;
            p.payload_len = tx[i].payload_len;
            p.plane = tx[i].plane;
            p.src = static_cast<uint16_t>(h);
            // Data goes to the receiver; the receiver's acks to the QP's sender.
            p.dst = static_cast<uint16_t>(is_receiver(h) ? apps_[app_of_qpn_[h][tx[i].qpn]].sender
                                                         : receiver_);
            p.data = tx[i].payload_len > 0;
            p.extra_delay_ps = 0;
            // ECMP: the path is a hash of the UDP source port (the EV).
            const uint16_t ev = static_cast<uint16_t>((p.hdr[34] << 8) | p.hdr[35]);
            p.path = static_cast<uint16_t>(((uint32_t{ev} * 0x9e3779b1u) >> 16) %
                                           cfg_.fabric.paths_per_plane);
            QueueState &nq = nic_[h][p.plane];
            const uint64_t depart =
                std::max(t_ps, nq.busy_until_ps) + ser_ps(p.hdr_len + p.payload_len, gbps);
            nq.busy_until_ps = depart;
            ++r_.packets_sent;
            if (!is_receiver(h) && p.data) {
                ++r_.data_packets_sent;
                ++r_.per_plane_tx_packets[p.plane];
            }
            // With one sender, its NIC is the only feeder of its plane's
            // paths: they see packets in NIC order, so the path is handled
            // right away. Several senders share the paths: an event each.
            if (cfg_.work.senders == 1 || is_receiver(h))
                through_path(pi, depart);
            else
                push(depart, Ev::kPath, pi);
        }
    }
    ensure_timer(h, t_ps);
}

void Simulator::drop(const Pkt &p) {
    ++r_.packets_dropped_by_fabric;
    // Charge the drop to the PSN whose retry budget it costs.
    const uint32_t qpn = frame_qpn(p.hdr);
    uint32_t psn = frame_psn(p.hdr);
    const auto op = static_cast<wire::Opcode>(p.hdr[wire::kEthIpv4UdpBytes]);
    if (op == wire::Opcode::kSack) {
        const auto *s = reinterpret_cast<const wire::SackHdr *>(p.hdr + wire::kEthIpv4UdpBytes +
                                                                sizeof(wire::BaseHdr));
        psn = s->trigger_psn.get();
    }
    const uint32_t app = app_of_qpn_[p.dst][qpn];
    if (!is_receiver(p.src) && p.data) ++r_.data_packets_dropped;
    if (app != UINT32_MAX) ++drops_of_psn_[(uint64_t{app} << 24) | psn];
}

bool Simulator::path_down(int dir, uint32_t plane, uint32_t k, uint64_t t_ps) const {
    for (const Failure &fl : cfg_.fabric.failures) {
        if (uint32_t(fl.plane) != plane || (fl.path >= 0 && uint32_t(fl.path) != k)) continue;
        if (fl.dir >= 0 && fl.dir != dir) continue;
        if (failure_active(fl, t_ps / 1000)) return true;
    }
    return false;
}

// A packet enters its path's switch queue at t_ps: impairments, then the
// queue, then propagation to the last hop.
void Simulator::through_path(uint32_t pi, uint64_t t_ps) {
    Pkt &p = pkts_[pi];
    const int dir = is_receiver(p.src) ? 1 : 0;
    const FabricConfig &f = cfg_.fabric;
    PathState &ps = path(dir, p.plane, p.path);
    const Impairment &im = ps.imp;
    if (path_down(dir, p.plane, p.path, t_ps)) {
        drop(p);
        return free_pkt(pi);
    }
    if (im.burst_enter > 0) {
        if (!ps.burst_bad && rng_.chance(im.burst_enter))
            ps.burst_bad = true;
        else if (ps.burst_bad && rng_.chance(im.burst_exit))
            ps.burst_bad = false;
        if (ps.burst_bad) {
            drop(p);
            return free_pkt(pi);
        }
    }
    if (rng_.chance(im.loss) || rng_.chance(f.loss)) {
        drop(p);
        return free_pkt(pi);
    }
    const uint64_t backlog = backlog_bytes(ps.busy_until_ps, t_ps, path_gbps_);
    if (!admit(p, backlog, im.trim_bytes, false)) return free_pkt(pi);
    if (im.ecn_bytes && backlog > im.ecn_bytes) mark_ce(p);
    const bool dup = rng_.chance(im.duplicate);
    p.extra_delay_ps = rng_.chance(im.reorder) ? im.reorder_ns * 1000 : 0;
    if (p.extra_delay_ps) note_fate(p, kHeldBack);
    if (dup) note_fate(p, kDuplicated);
    const uint64_t depart =
        std::max(t_ps, ps.busy_until_ps) + ser_ps(p.hdr_len + p.payload_len, path_gbps_);
    ps.busy_until_ps = depart;
    // A plane with a PlaneLimit: its core queue next; otherwise on to the last hop.
    const bool core = limit_of_[size_t(dir) * f.planes + p.plane] >= 0;
    if (core)
        push(depart, Ev::kCore, pi);
    else
        push(depart + f.delay_ns * 1000 + p.extra_delay_ps, Ev::kLastHop, pi);
    if (dup) {
        const uint32_t di = alloc_pkt();
        pkts_[di] = pkts_[pi];
        pkts_[di].extra_delay_ps = 0;
        ++r_.packets_duplicated;
        const uint64_t d2 = depart + ser_ps(pkts_[di].hdr_len + pkts_[di].payload_len, path_gbps_);
        ps.busy_until_ps = d2;
        if (core)
            push(d2, Ev::kCore, di);
        else
            push(d2 + f.delay_ns * 1000, Ev::kLastHop, di);
    }
}

void Simulator::mark_ce(Pkt &p) {
    auto *ip = reinterpret_cast<wire::Ipv4Hdr *>(p.hdr + sizeof(wire::EthHdr));
    if (wire::mark_ce(*ip)) ++r_.packets_ecn_marked;
}

// The core of a plane with a PlaneLimit: one queue at its rate for every
// path of the plane, marking ECN above its threshold.
void Simulator::through_core(uint32_t pi, uint64_t t_ps) {
    Pkt &p = pkts_[pi];
    const int dir = is_receiver(p.src) ? 1 : 0;
    const FabricConfig &f = cfg_.fabric;
    const PlaneLimit &lim = f.plane_limits[size_t(limit_of_[size_t(dir) * f.planes + p.plane])];
    QueueState &q = core_[size_t(dir) * f.planes + p.plane];
    const uint64_t backlog =
        q.busy_until_ps > t_ps
            ? static_cast<uint64_t>(double(q.busy_until_ps - t_ps) * lim.gbps * (1.0 / 8000.0))
            : 0;
    if (!admit(p, backlog, 0, false)) return free_pkt(pi);
    if (lim.ecn_bytes && backlog > lim.ecn_bytes) mark_ce(p);
    const uint64_t ser = static_cast<uint64_t>(
        double(p.hdr_len + p.payload_len + kWireOverheadBytes) * 8000.0 / lim.gbps);
    const uint64_t depart = std::max(t_ps, q.busy_until_ps) + ser;
    q.busy_until_ps = depart;
    push(depart + f.delay_ns * 1000 + p.extra_delay_ps, Ev::kLastHop, pi);
}

// Queue admission with `backlog` bytes queued: a data packet is trimmed
// above trim_bytes (when set), any packet dropped above the queue limit.
// False when dropped.
bool Simulator::admit(Pkt &p, uint64_t backlog, uint64_t trim_bytes, bool last_hop) {
    r_.max_queue_bytes = std::max(r_.max_queue_bytes, backlog);
    series_max_queue_ = std::max(series_max_queue_, backlog);
    if (last_hop) r_.max_lasthop_queue_bytes = std::max(r_.max_lasthop_queue_bytes, backlog);
    if (p.data && trim_bytes && backlog > trim_bytes) {
        if (wire::trim_data_headers(p.hdr, p.hdr_len, p.payload_len, last_hop)) {
            p.payload = nullptr;
            p.payload_len = 0;
            p.data = false;
            ++r_.packets_trimmed;
        }
        return true;
    }
    if (backlog > uint64_t{cfg_.fabric.queue_kb} * 1024) {
        drop(p);
        return false;
    }
    return true;
}

// The last hop: the receiving host's link, shared by every path of the plane.
void Simulator::last_hop_arrive(uint32_t pi, uint64_t t_ps) {
    Pkt &p = pkts_[pi];
    const FabricConfig &f = cfg_.fabric;
    QueueState &lq = last_hop(p.dst, p.plane);
    const uint64_t backlog = backlog_bytes(lq.busy_until_ps, t_ps, f.link_gbps);
    if (!admit(p, backlog, uint64_t{f.lasthop_trim_kb} * 1024, true)) return free_pkt(pi);
    if (f.lasthop_ecn_kb && p.data && backlog > uint64_t{f.lasthop_ecn_kb} * 1024) mark_ce(p);
    const uint64_t depart =
        std::max(t_ps, lq.busy_until_ps) + ser_ps(p.hdr_len + p.payload_len, f.link_gbps);
    lq.busy_until_ps = depart;
    push(depart, Ev::kDeliver, pi);
}

// What the fabric did to a data packet's PSN, for the accounting of
// resends: one that arrives twice must have been held back or duplicated.
void Simulator::note_fate(const Pkt &p, uint8_t bit) {
    if (!p.data || is_receiver(p.src)) return;
    const uint32_t app = app_of_qpn_[p.dst][frame_qpn(p.hdr)];
    if (app != UINT32_MAX) fate_[(uint64_t{app} << 24) | frame_psn(p.hdr)] |= bit;
}

void Simulator::deliver(uint32_t pi, uint64_t t_ps) {
    const Pkt &p = pkts_[pi];
    const uint32_t h = p.dst;
    const uint32_t qpn = frame_qpn(p.hdr);
    if (p.data && !is_receiver(p.src)) {
        const uint32_t app = app_of_qpn_[h][qpn];
        if (app != UINT32_MAX) {
            uint8_t &f = fate_[(uint64_t{app} << 24) | frame_psn(p.hdr)];
            if (f & kArrived) {
                ++r_.data_arrived_again;
                if (!(f & (kHeldBack | kDuplicated))) ++r_.needless_resends;
            }
            f |= kArrived;
        }
    }
    ep_[h]->on_packet(p.hdr, p.hdr_len, p.payload, p.payload_len, p.plane, t_ps / 1000);
    free_pkt(pi);
    if (qpn < app_of_qpn_[h].size() && app_of_qpn_[h][qpn] != UINT32_MAX) {
        const uint32_t app = app_of_qpn_[h][qpn];
        app_qp(app);
        kick_tx(apps_[app].sender, t_ps);  // a completion may have posted more
    }
    kick_tx(h, t_ps);
    ensure_timer(h, t_ps);
}

void Simulator::score(uint64_t t_ps) {
    const uint64_t now_ns = t_ps / 1000;
    for (uint32_t h = 0; h < ep_.size(); ++h) {
        Endpoint &ep = *ep_[h];
        ep.apply_path_table(
            scorers_[h].update(now_ns, ep.plane_counters(), ep.ev_gauges(), ep.link_up_mask()),
            now_ns);
        kick_tx(h, t_ps);
        ensure_timer(h, t_ps);
    }
    push(t_ps + cfg_.scorer.period_ns * 1000, Ev::kScore, 0);
}

// A port failure: the hosts on its side see the link go down or up.
void Simulator::link_event(uint32_t fi, uint64_t t_ps) {
    const Failure &fl = cfg_.fabric.failures[fi];
    const uint64_t now_ns = t_ps / 1000;
    const bool up = !failure_active(fl, now_ns);
    for (uint32_t h = 0; h < ep_.size(); ++h) {
        if ((fl.link == 1) != is_receiver(h)) continue;
        ep_[h]->set_plane_up(static_cast<uint8_t>(fl.plane), up);
        kick_tx(h, t_ps);
        ensure_timer(h, t_ps);
    }
    const uint64_t next = failure_next_change(fl, now_ns);
    if (next != UINT64_MAX) push(next * 1000, Ev::kLink, fi);
}

void Simulator::sample(uint64_t t_ps) {
    uint64_t placed = 0;
    for (const QpApp &q : apps_)
        placed += q.b->counters().rx_data_bytes;
    r_.series_goodput_gbps.push_back(double(placed - series_prev_bytes_) * 8 /
                                     double(cfg_.series_ns));
    series_prev_bytes_ = placed;
    std::vector<uint64_t> tx(cfg_.fabric.planes);
    for (uint32_t p = 0; p < cfg_.fabric.planes; ++p) {
        tx[p] = r_.per_plane_tx_packets[p] - series_prev_tx_[p];
        series_prev_tx_[p] = r_.per_plane_tx_packets[p];
    }
    r_.series_plane_tx.push_back(std::move(tx));
    r_.series_max_queue_bytes.push_back(series_max_queue_);
    series_max_queue_ = 0;
    push(t_ps + cfg_.series_ns * 1000, Ev::kSample, 0);
}

void Simulator::report() {
    const uint32_t planes = cfg_.fabric.planes;
    const uint64_t now_ns = now_ps_ / 1000;
    r_.planes.assign(planes, PlaneReport{});
    for (uint32_t h = 0; h < receiver_; ++h)
        for (uint32_t p = 0; p < planes; ++p)
            r_.planes[p].counters += ep_[h]->plane_counters()[p];
    if (!scorers_.empty())
        for (uint32_t p = 0; p < planes; ++p) {
            r_.planes[p].score = scorers_[0].score(uint8_t(p));
            r_.planes[p].state = r_.planes[p].score.state;
        }
    for (uint32_t qi = 0; qi < apps_.size(); ++qi) {
        const QpApp &q = apps_[qi];
        QpReport qr;
        qr.victim = q.victim;
        qr.bytes = q.completed * cfg_.work.msg_bytes;
        qr.start_ns = q.start_ps / 1000;
        qr.done_ns = q.last_completion_ps / 1000;
        if (qr.done_ns > qr.start_ns)
            qr.goodput_gbps = double(qr.bytes) * 8 / double(qr.done_ns - qr.start_ns);
        r_.qps.push_back(qr);
        for (const EvEntry &e : q.a->evs().entries()) {
            EvReport er;
            er.qp = qi;
            er.ev = e.ev;
            er.plane = e.plane;
            er.path = path_of(e.ev, cfg_.fabric.paths_per_plane);
            er.state = e.state;
            if (er.state == EvState::kSkip && now_ns >= e.skip_until_ns) er.state = EvState::kGood;
            er.active = e.active;
            er.failures = e.failures;
            er.revivals = e.revivals;
            er.min_bad_ns = e.min_bad_ns;
            er.probe_need = e.probe_need;
            r_.evs.push_back(er);
            ++r_.planes[e.plane].evs.state[uint32_t(er.state)];
            ++r_.ev_states.state[uint32_t(er.state)];
        }
    }
}

SimResult Simulator::run() {
    setup();
    for (auto &q : apps_)
        post_more(q);
    for (uint32_t h = 0; h < receiver_; ++h)
        kick_tx(h, 0);
    for (uint32_t i = 0; i < apps_.size(); ++i)
        if (apps_[i].start_ps > 0) push(apps_[i].start_ps, Ev::kStart, i);
    for (uint32_t i = 0; i < cfg_.fabric.failures.size(); ++i)
        if (cfg_.fabric.failures[i].link >= 0)
            push(cfg_.fabric.failures[i].at_ns * 1000, Ev::kLink, i);
    if (!scorers_.empty()) push(cfg_.scorer.period_ns * 1000, Ev::kScore, 0);
    if (cfg_.series_ns) {
        r_.series_ns = cfg_.series_ns;
        push(cfg_.series_ns * 1000, Ev::kSample, 0);
    }
    const uint64_t max_ps = cfg_.max_sim_ns * 1000;
    while (!heap_.empty() && !all_done()) {
        uint64_t t_ps;
        const Event e = heap_.pop(&t_ps);
        if (t_ps > max_ps) {
            r_.timed_out = true;
            break;
        }
        now_ps_ = t_ps;
        ++r_.events;
        switch (e.kind) {
            case Ev::kPath:
                through_path(e.arg, t_ps);
                break;
            case Ev::kCore:
                through_core(e.arg, t_ps);
                break;
            case Ev::kScore:
                score(t_ps);
                break;
            case Ev::kLink:
                link_event(e.arg, t_ps);
                break;
            case Ev::kSample:
                sample(t_ps);
                break;
            case Ev::kStart:
                post_more(apps_[e.arg]);
                kick_tx(apps_[e.arg].sender, t_ps);
                break;
            case Ev::kLastHop:
                last_hop_arrive(e.arg, t_ps);
                break;
            case Ev::kDeliver:
                deliver(e.arg, t_ps);
                break;
            case Ev::kHostTx:
                host_tx(e.arg, t_ps);
                break;
            case Ev::kTimer: {
                const uint32_t h = e.arg;
                if (t_ps != timer_at_[h]) break;  // superseded by an earlier one
                timer_at_[h] = UINT64_MAX;
                ep_[h]->on_time(t_ps / 1000);
                for (const uint32_t i : apps_of_host_[h]) {
                    app_qp(i);
                    kick_tx(apps_[i].sender, t_ps);
                }
                kick_tx(h, t_ps);
                ensure_timer(h, t_ps);
                break;
            }
        }
    }
    if (!all_done() && !r_.timed_out) r_.timed_out = true;  // nothing left to do, yet not finished
    report();
    final_check();
    for (auto &q : apps_) {
        r_.requester += q.a->counters();
        r_.responder += q.b->counters();
    }
    r_.retransmissions = r_.requester.tx_retx_pkts;
    // Placements beyond one per PSN sent would be duplicates.
    if (r_.responder.rx_data_pkts > r_.requester.tx_data_pkts)
        r_.duplicate_deliveries += r_.responder.rx_data_pkts - r_.requester.tx_data_pkts;
    r_.sim_time_ns = last_completion_ps_ / 1000;
    if (r_.sim_time_ns > 0)
        r_.goodput_gbps = double(r_.delivered_bytes) * 8 / double(r_.sim_time_ns);
    const uint64_t imm_expected = cfg_.work.write_imm ? r_.expected_bytes / cfg_.work.msg_bytes : 0;
    r_.verified = r_.verify_errors == 0 && r_.delivered_bytes == r_.expected_bytes &&
                  r_.qp_errors == 0 && r_.duplicate_deliveries == 0 && r_.completions_in_order &&
                  r_.imm_delivered == imm_expected && !r_.timed_out &&
                  r_.final_slot_mismatches == 0 && r_.guard_bytes_changed == 0 &&
                  r_.setup_error.empty();
    return r_;
}

}  // namespace

SimResult run(const SimConfig &cfg) {
    Simulator s(cfg);
    return s.run();
}

}  // namespace mrc::sim
