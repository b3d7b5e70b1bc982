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
#include <vector>

#include "common/result.h"
#include "core/counters.h"
#include "core/memory.h"
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
    // wire::kMaxHdrBytes. Returns how many were filled.
    uint32_t poll_tx(TxPacket *out, uint32_t max, uint64_t now_ns);
    // Runs the timers due at now_ns (ack timeouts, delayed acks, delayed
    // retransmissions).
    void on_time(uint64_t now_ns);

    // ---- state for the driver ----
    bool tx_pending() const { return !ready_.empty(); }
    uint32_t armed_timers() const { return timers_.armed_count(); }
    // When on_time() next has work (UINT64_MAX: no timer armed). O(QPs):
    // for drivers that sleep until then, like the simulator.
    uint64_t next_timer_ns() const { return timers_.next_fire_ns(); }
    uint8_t plane_status() const { return plane_status_; }
    void set_plane_up(uint8_t plane, bool up);
    const EndpointCounters &counters() const { return ctr_; }

  private:
    friend class Qp;
    void mark_ready(Qp &q);
    void arm_timer(Qp &q, uint64_t deadline_ns) { timers_.arm(q.qpn(), deadline_ns); }
    void arm_timer_earlier(Qp &q, uint64_t deadline_ns) {
        timers_.arm_earlier(q.qpn(), deadline_ns);
    }
    void cancel_timer(Qp &q) { timers_.cancel(q.qpn()); }

    EndpointConfig cfg_;
    std::vector<std::unique_ptr<Qp>> qps_;  // index = QPN; 0 unused
    std::vector<uint32_t> free_qpns_;
    MrTable mrs_;
    TimerWheel timers_;
    Ring<uint32_t> ready_;
    uint8_t plane_status_ = 0;
    EndpointCounters ctr_;
};

}  // namespace mrc
