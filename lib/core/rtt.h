// What a QP knows about the round-trip times of one plane: the smoothed
// RTT and its variation (RFC 6298: gains 1/8 and 1/4), the smallest RTT
// seen, the spread of recent RTTs, and the lateness of packets that
// arrived after packets sent later (the reorder window of loss detection,
// docs/loss-recovery.md).
//
// Pure arithmetic on samples the QP hands in; no clock of its own.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mrc {

class PlaneRtt {
  public:
    bool has_sample() const { return srtt_ns_ != 0; }
    uint64_t srtt_ns() const { return srtt_ns_; }
    uint64_t rttvar_ns() const { return rttvar_ns_; }
    // UINT64_MAX until the first sample.
    uint64_t min_ns() const { return min_ns_; }
    uint32_t samples() const { return samples_; }

    // One RTT sample. `for_min` false: the sample includes a wait that is
    // not the path's (a delayed ack): it counts for the smoothed RTT (the
    // timeout has to cover such waits) but not for the minimum.
    void sample(uint64_t rtt_ns, bool for_min) {
        rtt_ns = std::max<uint64_t>(rtt_ns, 1);
        if (for_min) {
            min_ns_ = std::min(min_ns_, rtt_ns);
            max_cur_ns_ = std::max(max_cur_ns_, rtt_ns);
        }
        ++samples_;
        if (srtt_ns_ == 0) {
            srtt_ns_ = rtt_ns;
            rttvar_ns_ = rtt_ns / 2;
            return;
        }
        const uint64_t err = rtt_ns > srtt_ns_ ? rtt_ns - srtt_ns_ : srtt_ns_ - rtt_ns;
        rttvar_ns_ = rttvar_ns_ - rttvar_ns_ / 4 + err / 4;
        srtt_ns_ = srtt_ns_ - srtt_ns_ / 8 + rtt_ns / 8;
        if (srtt_ns_ == 0) srtt_ns_ = 1;
    }

    // Lateness: a packet acknowledged `late_ns` after the time the plane's
    // RTT said it was due, while a packet sent after it was already
    // acknowledged. Lateness and the largest RTT are kept for the current
    // and the previous epoch (each `epoch_ns` long): what was seen recently
    // counts, what was seen long ago fades.
    void lateness(uint64_t late_ns, uint64_t now_ns, uint64_t epoch_ns) {
        roll(now_ns, epoch_ns);
        reo_cur_ns_ = std::max(reo_cur_ns_, late_ns);
    }
    uint64_t reorder_seen_ns(uint64_t now_ns, uint64_t epoch_ns) const {
        roll(now_ns, epoch_ns);
        return std::max(reo_cur_ns_, reo_prev_ns_);
    }
    // The spread of recent RTTs: the largest recent sample minus the
    // minimum (0 before the first sample).
    uint64_t spread_ns(uint64_t now_ns, uint64_t epoch_ns) const {
        roll(now_ns, epoch_ns);
        const uint64_t mx = std::max(max_cur_ns_, max_prev_ns_);
        return min_ns_ != UINT64_MAX && mx > min_ns_ ? mx - min_ns_ : 0;
    }

  private:
    // Epoch bookkeeping: a read may move the epoch on (hence mutable).
    void roll(uint64_t now_ns, uint64_t epoch_ns) const {
        if (now_ns - reo_epoch_ns_ < epoch_ns) return;
        // More than two epochs idle: nothing recent is left.
        const bool recent = now_ns - reo_epoch_ns_ < 2 * epoch_ns;
        reo_prev_ns_ = recent ? reo_cur_ns_ : 0;
        max_prev_ns_ = recent ? max_cur_ns_ : 0;
        reo_cur_ns_ = max_cur_ns_ = 0;
        reo_epoch_ns_ = now_ns;
    }

    uint64_t srtt_ns_ = 0;
    uint64_t rttvar_ns_ = 0;
    uint64_t min_ns_ = UINT64_MAX;
    uint32_t samples_ = 0;
    mutable uint64_t reo_cur_ns_ = 0;
    mutable uint64_t reo_prev_ns_ = 0;
    mutable uint64_t reo_epoch_ns_ = 0;
    mutable uint64_t max_cur_ns_ = 0;
    mutable uint64_t max_prev_ns_ = 0;
};

}  // namespace mrc
