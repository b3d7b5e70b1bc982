// The transport core as the dataplane and the simulator drive it.
//
// One Endpoint is one thread's share of a host: its QPs, the memory regions
// they may write, and their timers. It is driven by three calls and nothing
// else: a packet arrived (on_packet), give me packets to send (poll_tx),
// time is now T (on_time). It includes no DPDK, creates no threads, reads
// no clock and does not allocate after setup.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "core/counters.h"
#include "core/memory.h"
#include "core/path.h"
#include "core/qp.h"
#include "core/ring.h"
#include "core/timer_wheel.h"
#include "wire/mrc.h"

namespace mrc {

struct EndpointConfig {
    uint16_t mrc_port = wire::kDefaultMrcPort;
    uint8_t planes = 1;
    uint32_t max_qps = 256;
    uint32_t max_mrs = 1024;
    uint64_t timer_tick_ns = 1000;
    uint32_t timer_slots = 4096;  // power of two; one revolution = slots * tick
    uint32_t qp_tx_burst = 16;    // packets one QP may emit before the next QP's turn
    wire::Checksums checksums = wire::Checksums::kSkip;  // the port layer checks them
    // The QPN peers use for local QP n is qpn_base + n: endpoints that
    // share ports (one per worker) take disjoint ranges, so the dataplane
    // finds a packet's owner from its QPN alone. qpn_base + max_qps must
    // fit the 24-bit wire QPN (the dataplane checks it).
    uint32_t qpn_base = 0;
};

class Endpoint {
  public:
    explicit Endpoint(const EndpointConfig &cfg);
    ~Endpoint();
    Endpoint(const Endpoint &) = delete;
    Endpoint &operator=(const Endpoint &) = delete;

    const EndpointConfig &config() const { return cfg_; }

    // ---- setup ----
    // Creates a QP in RESET; QPNs start at 1.
    Result<Qp *> create_qp(const QpConfig &cfg);
    Result<void> destroy_qp(uint32_t qpn);
    Qp *qp(uint32_t qpn) { return qpn < qps_.size() ? qps_[qpn].get() : nullptr; }
    // The QPN peers send to (and path-table denials name) for a local QP,
    // and back.
    uint32_t wire_qpn(const Qp &q) const { return cfg_.qpn_base + q.qpn(); }
    Qp *qp_by_wire(uint32_t wire_qpn) {
        return wire_qpn < cfg_.qpn_base ? nullptr : qp(wire_qpn - cfg_.qpn_base);
    }
    // A frame for `wire_qpn` comes soon (the caller is a packet or two
    // ahead in its burst): its QP's first lines are brought near.
    void prefetch_qp(uint32_t wire_qpn) {
        if (const Qp *q = qp_by_wire(wire_qpn)) q->prefetch();
    }
    MrTable &mrs() { return mrs_; }
    const MrTable &mrs() const { return mrs_; }

    // ---- the three calls ----
    // A frame arrived on `plane`: headers in head; payload after them in
    // head, or (when tail is not null) all of it in tail.
    void on_packet(const uint8_t *head, uint32_t head_len, const uint8_t *tail, uint32_t tail_len,
                   uint8_t plane, uint64_t now_ns);
    void on_packet(const uint8_t *frame, uint32_t len, uint8_t plane, uint64_t now_ns) {
        on_packet(frame, len, nullptr, 0, plane, now_ns);
    }
    // Fills up to `max` packets; each out[i].hdr must point to a buffer of
    // wire::kMaxHdrBytes. Returns how many were filled. New data goes only
    // to planes in `tx_planes` (bit p: plane p's port has room in its TX
    // queue); retransmissions and control packets, few and urgent, go
    // where they must.
    uint32_t poll_tx(TxPacket *out, uint32_t max, uint64_t now_ns, uint8_t tx_planes = 0xff);
    // Runs the timers due at now_ns (ack timeouts, delayed acks, delayed
    // retransmissions).
    void on_time(uint64_t now_ns);

    // ---- state for the driver ----
    bool tx_pending() const { return !ready_.empty(); }
    // The QPs that got new completions (send or receive) or entered ERROR
    // since they were last taken, each once, as local QPNs: a driver that
    // hands completions on (mrcd's workers) looks at these, never at every
    // QP. Returns how many it wrote (up to max); call until 0.
    uint32_t take_notified(uint32_t *qpns, uint32_t max);
    uint32_t armed_timers() const { return timers_.armed_count(); }
    // When on_time() next has work (UINT64_MAX: no timer armed). Cost: the
    // wheel slots up to the earliest timer (see TimerWheel::next_fire_ns).
    uint64_t next_timer_ns() const { return timers_.next_fire_ns(); }
    const EndpointCounters &counters() const { return ctr_; }

    // ---- planes ----
    // The link of `plane` went down or came up (the port layer's link
    // state). QPs stop using a plane at once when it goes down, and probe
    // it before using it again when it comes back.
    void set_plane_up(uint8_t plane, bool up);
    uint8_t link_up_mask() const { return link_up_mask_; }
    // Applies what the path scorer published (core/path.h): planes it took
    // down, planes and EVs the operator denied. Cheap when nothing changed.
    void apply_path_table(const PathTable &t, uint64_t now_ns);
    uint8_t table_down_mask() const { return table_down_mask_; }
    uint8_t denied_mask() const { return denied_mask_; }
    // Moves whenever one of the three masks above changes.
    uint32_t plane_generation() const { return plane_gen_; }
    // What the scorer reads: per-plane counters and EV gauges.
    const PlaneCounters *plane_counters() const { return plane_ctr_; }
    // The EV gauges, with every EV of a plane the operator denied counted
    // as DENIED (its EVs are out of use, whatever their own state).
    EvGauges ev_gauges() const;
    // The latest time any of the three calls brought (what set-up calls,
    // which carry no time, take as now).
    uint64_t now_ns() const { return now_ns_; }
    // One plane probe per probe interval for a plane the table took down,
    // shared by all QPs of the endpoint: true when this caller may send it.
    bool take_plane_probe_token(uint8_t plane, uint64_t now_ns, uint64_t interval_ns);

    // Paths with shared congestion state (CcConfig::per_peer), and their QPs.
    size_t shared_paths() const { return path_cc_.size(); }
    // Peers with shared liveness state (one per peer host of any QP).
    size_t peer_links() const { return peer_links_.size(); }
    uint32_t max_qps() const { return cfg_.max_qps; }

  private:
    friend class Qp;
    PathCc *acquire_path_cc(uint64_t key, const QpConfig &cfg, uint8_t planes);
    void release_path_cc(PathCc *c);
    PeerLink *acquire_peer_link(uint64_t key, const LivenessConfig &live);
    void release_peer_link(PeerLink *l);
    // A QP's liveness starts (its first timer in RTS) or ends (error,
    // reconnect, destroy): the link watches it, or no longer.
    void link_join(Qp &q, uint64_t now_ns);
    void link_leave(Qp &q);
    void on_link_timer(PeerLink &l, uint64_t now_ns);
    static void set_floor(PathCc &c);
    void mark_ready(Qp &q);
    void notify(Qp &q);
    void arm_timer(Qp &q, uint64_t deadline_ns) { timers_.arm(q.qpn(), deadline_ns); }
    void arm_timer_earlier(Qp &q, uint64_t deadline_ns) {
        timers_.arm_earlier(q.qpn(), deadline_ns);
    }
    void cancel_timer(Qp &q) { timers_.cancel(q.qpn()); }

    EndpointConfig cfg_;
    // Before qps_: QPs' EV sets update the gauges when they are destroyed.
    EvGauges ev_gauges_;
    PlaneCounters plane_ctr_[kMaxPlanes];
    // Before qps_ too: a QP lets go of its path's state when destroyed.
    std::unordered_map<uint64_t, std::unique_ptr<PathCc>> path_cc_;
    std::unordered_map<uint64_t, std::unique_ptr<PeerLink>> peer_links_;
    std::vector<PeerLink *> link_by_timer_;  // timer id - (max_qps + 1) -> link
    std::vector<uint32_t> free_link_timers_;
    std::vector<std::unique_ptr<Qp>> qps_;  // index = QPN; 0 unused
    std::vector<uint32_t> free_qpns_;
    MrTable mrs_;
    TimerWheel timers_;
    Ring<uint32_t> ready_;
    Ring<uint32_t> notified_;
    uint8_t link_up_mask_ = 0;
    uint8_t table_down_mask_ = 0;
    uint8_t denied_mask_ = 0;
    uint32_t plane_gen_ = 0;
    uint64_t table_generation_ = 0;
    std::vector<EvDenial> applied_denials_;
    uint64_t plane_probe_next_ns_[kMaxPlanes] = {};
    uint64_t now_ns_ = 0;
    bool destroying_ = false;
    EndpointCounters ctr_;
};

}  // namespace mrc
