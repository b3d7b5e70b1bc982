// The simulator's inside, shared by its files (not an interface):
//   sim.cc       set-up, the applications, the hosts' transmit, the run loop
//   network.cc   the fabric: paths, a plane's core, the last hop, delivery,
//                failures, ECN and trimming
//   validate.cc  the configuration checks
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "common/rng.h"
#include "core/endpoint.h"
#include "sim/radix_heap.h"
#include "sim/sim.h"
#include "wire/mrc.h"

namespace mrc::sim::detail {

inline constexpr uint32_t kWireOverheadBytes = 24;  // preamble, inter-frame gap, FCS

enum class Ev : uint8_t {
    kPath,
    kCore,
    kLastHop,
    kDeliver,
    kHostTx,
    kTimer,
    kTimerCheck,
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
    Psn first_psn;  // of the requester's data
    // Per data PSN, from first_psn on: what the fabric did to it (kArrived,
    // kHeldBack, kDuplicated); one byte per packet the QP sent.
    std::vector<uint8_t> fate;
    bool victim = false;
    bool done = false;
    bool errored = false;
};

// Whether failure `f` holds at t_ns, and when that next changes after t_ns
// (UINT64_MAX: never).
inline bool failure_active(const Failure &f, uint64_t t_ns) {
    if (t_ns < f.at_ns) return false;
    if (f.period_ns) return (t_ns - f.at_ns) % f.period_ns < f.for_ns;
    return f.for_ns == 0 || t_ns < f.at_ns + f.for_ns;
}
inline uint64_t failure_next_change(const Failure &f, uint64_t t_ns) {
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

// Frames this simulator built: IPv6 when the ether type says so, never
// with extension headers or VLAN tags.
inline bool frame_ipv6(const uint8_t *hdr) {
    return hdr[12] == 0x86 && hdr[13] == 0xdd;
}
// Where the MRC headers start.
inline size_t frame_mrc(const uint8_t *hdr) {
    return frame_ipv6(hdr) ? wire::kEthIpv6UdpBytes : wire::kEthIpv4UdpBytes;
}
// Reads the big-endian 24-bit QPN.
inline uint32_t frame_qpn(const uint8_t *hdr) {
    const uint8_t *q = hdr + frame_mrc(hdr) + offsetof(wire::BaseHdr, dst_qpn);
    return (uint32_t{q[0]} << 16) | (uint32_t{q[1]} << 8) | q[2];
}
inline uint32_t frame_psn(const uint8_t *hdr) {
    const uint8_t *q = hdr + frame_mrc(hdr) + offsetof(wire::BaseHdr, psn);
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
    void check_timer(uint32_t h, uint64_t t_ps);
    void on_timer(uint32_t h, uint64_t t_ps);
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
    uint8_t &fate_of(uint32_t app, uint32_t psn) {
        std::vector<uint8_t> &f = apps_[app].fate;
        const uint32_t i = (psn - apps_[app].first_psn.value()) & Psn::kMask;
        if (i >= f.size()) f.resize(std::max<size_t>(size_t(i) + 1, 2 * f.size()), 0);
        return f[i];
    }
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
    std::vector<uint64_t>
        check_at_;          // per host: when its next timer check is due (UINT64_MAX: none)
    uint64_t tick_ps_ = 1;  // the endpoints' timer tick
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

}  // namespace mrc::sim::detail
