// NSCC: UET's network-signalled, sender-based congestion control, as MRC
// uses it ("uet-1.0-nscc"). The window moves on two signals every ack
// carries: an ECN echo, and the queueing delay (RTT minus base RTT).
//
//   ECN | delay vs target | window                                 | EV
//   ----+-----------------+----------------------------------------+------------
//   no  | below           | proportional increase: + pi_gain x     | -
//       |                 | acked x (target - delay) / target      |
//   no  | at or above     | fair increase: + fi_mtus MTUs per      | -
//       |                 | window of acked bytes (per RTT)        |
//   yes | at or above     | multiplicative decrease, at most once  | -
//       |                 | per base RTT: x max(1 - gamma (delay - |
//       |                 | target) / delay, md_floor)             |
//   yes | below           | unchanged                              | re-path
//
// Increases collect and are applied every adjust_mtus MTUs acked or once
// per base RTT. A trimmed-packet NACK takes the trimmed bytes off the
// window. QuickAdapt, after a NACK, an ack timeout or a delay above
// qa_threshold_targets targets, and at most once per (base RTT + target):
// when what the QP delivered in the last such period is below
// qa_max_cwnd_ratio of the ceiling, the window becomes that amount (the
// incast case: the window drops to the QP's share at once). The window
// stays in [1 MTU, max_cwnd_bdps x line rate x base RTT]. The base RTT is
// the configured one until the first sample, then the smallest seen.
#pragma once

#include "core/cc.h"

namespace mrc {

class NsccCc final : public CongestionControl {
  public:
    NsccCc(const NsccConfig &cfg, uint32_t mtu_bytes);
    const char *name() const override { return "nscc"; }
    size_t state_bytes() const override { return sizeof(*this); }
    uint64_t window_bytes() const override { return static_cast<uint64_t>(cwnd_bytes_); }
    uint8_t on_ack(const AckSample &a) override;
    uint8_t on_trim_nack(uint64_t now_ns, uint32_t bytes, bool last_hop) override;
    uint8_t on_timeout(uint64_t now_ns, uint32_t bytes) override;

    uint64_t base_rtt_ns() const { return base_rtt_ns_; }
    uint64_t target_delay_ns() const { return target_ns_; }
    uint64_t max_window_bytes() const { return static_cast<uint64_t>(max_cwnd_bytes_); }
    uint64_t min_window_bytes() const { return mtu_bytes_; }

  private:
    void set_base_rtt(uint64_t ns);
    void roll_epoch(uint64_t now_ns);
    uint8_t quick_adapt(uint64_t now_ns);
    void clamp();

    NsccConfig cfg_;
    uint32_t mtu_bytes_;
    double cwnd_bytes_ = 0;
    double max_cwnd_bytes_ = 0;
    double pending_inc_bytes_ = 0;  // collected increases, applied in batches
    uint64_t base_rtt_ns_ = 0;
    uint64_t target_ns_ = 0;
    uint64_t qa_threshold_ns_ = 0;
    uint64_t last_delay_ns_ = 0;  // for acks without an RTT sample
    bool have_rtt_ = false;
    uint64_t acked_since_adjust_bytes_ = 0;
    uint64_t last_adjust_ns_ = 0;
    uint64_t last_md_ns_ = 0;
    bool md_done_ = false;
    uint64_t last_qa_ns_ = 0;
    bool qa_done_ = false;
    // Bytes acknowledged per QuickAdapt period (base RTT + target).
    bool epoch_started_ = false;
    uint64_t epoch_start_ns_ = 0;
    uint64_t epoch_bytes_ = 0;
    uint64_t prev_epoch_bytes_ = 0;
};

}  // namespace mrc
