#include "core/cc_nscc.h"

#include <algorithm>

namespace mrc {

NsccCc::NsccCc(const NsccConfig &cfg, uint32_t mtu_bytes) : cfg_(cfg), mtu_bytes_(mtu_bytes) {
    set_base_rtt(cfg.base_rtt_ns);
    // Gb/s x ns / 8 = bytes.
    const double bdp_bytes = cfg_.line_rate_gbps * double(base_rtt_ns_) / 8.0;
    cwnd_bytes_ = cfg_.init_cwnd_bdps * bdp_bytes;
    clamp();
}

void NsccCc::set_base_rtt(uint64_t ns) {
    base_rtt_ns_ = std::max<uint64_t>(ns, 1);
    target_ns_ =
        std::max<uint64_t>(1, static_cast<uint64_t>(cfg_.target_delay_rtts * double(base_rtt_ns_)));
    qa_threshold_ns_ = static_cast<uint64_t>(cfg_.qa_threshold_targets * double(target_ns_));
    const double bdp_bytes = cfg_.line_rate_gbps * double(base_rtt_ns_) / 8.0;
    max_cwnd_bytes_ = std::max(cfg_.max_cwnd_bdps * bdp_bytes, double(mtu_bytes_));
}

void NsccCc::clamp() {
    cwnd_bytes_ = std::clamp(cwnd_bytes_, double(mtu_bytes_), max_cwnd_bytes_);
}

void NsccCc::roll_epoch(uint64_t now_ns) {
    const uint64_t period = base_rtt_ns_ + target_ns_;
    if (!epoch_started_) {
        epoch_started_ = true;
        epoch_start_ns_ = now_ns;
        return;
    }
    const uint64_t age = now_ns - epoch_start_ns_;
    if (age < period) return;
    prev_epoch_bytes_ = age >= 2 * period ? 0 : epoch_bytes_;
    epoch_bytes_ = 0;
    epoch_start_ns_ = now_ns;
}

uint8_t NsccCc::quick_adapt(uint64_t now_ns) {
    if (!epoch_started_) return kCcNone;  // no delivery history yet
    if (qa_done_ && now_ns - last_qa_ns_ < base_rtt_ns_ + target_ns_) return kCcNone;
    roll_epoch(now_ns);
    const uint64_t delivered = std::max(prev_epoch_bytes_, epoch_bytes_);
    if (double(delivered) >= cfg_.qa_max_cwnd_ratio * max_cwnd_bytes_) return kCcNone;
    cwnd_bytes_ = double(delivered);
    pending_inc_bytes_ = 0;
    last_qa_ns_ = now_ns;
    qa_done_ = true;
    clamp();
    return kCcQuickAdapt;
}

uint8_t NsccCc::on_ack(const AckSample &a) {
    uint8_t verdict = kCcNone;
    const uint64_t now = a.now_ns;
    roll_epoch(now);
    epoch_bytes_ += a.acked_bytes;
    uint64_t delay = last_delay_ns_;
    if (a.rtt_ns != 0) {
        if ((!have_rtt_ && !cfg_.base_rtt_known) || a.rtt_ns < base_rtt_ns_) set_base_rtt(a.rtt_ns);
        have_rtt_ = true;
        delay = a.rtt_ns - base_rtt_ns_;
        last_delay_ns_ = delay;
    }
    if (delay > qa_threshold_ns_) verdict |= quick_adapt(now);
    if (!a.ecn) {
        if (delay < target_ns_)
            pending_inc_bytes_ += cfg_.pi_gain * double(a.acked_bytes) *
                                  double(target_ns_ - delay) / double(target_ns_);
        else
            pending_inc_bytes_ +=
                cfg_.fi_mtus * double(mtu_bytes_) * double(a.acked_bytes) / cwnd_bytes_;
    } else if (delay >= target_ns_) {
        if (!md_done_ || now - last_md_ns_ >= base_rtt_ns_) {
            const double f = 1.0 - cfg_.md_gamma * double(delay - target_ns_) / double(delay);
            cwnd_bytes_ *= std::max(f, cfg_.md_floor);
            pending_inc_bytes_ = 0;
            last_md_ns_ = now;
            md_done_ = true;
            verdict |= kCcDecreased;
        }
    } else {
        verdict |= kCcRepath;
    }
    acked_since_adjust_bytes_ += a.acked_bytes;
    if (acked_since_adjust_bytes_ >= uint64_t{cfg_.adjust_mtus} * mtu_bytes_ ||
        now - last_adjust_ns_ >= base_rtt_ns_) {
        cwnd_bytes_ += pending_inc_bytes_;
        pending_inc_bytes_ = 0;
        acked_since_adjust_bytes_ = 0;
        last_adjust_ns_ = now;
    }
    clamp();
    return verdict;
}

uint8_t NsccCc::on_trim_nack(uint64_t now_ns, uint32_t bytes, bool /*last_hop*/) {
    cwnd_bytes_ -= bytes;
    clamp();
    return quick_adapt(now_ns);
}

uint8_t NsccCc::on_timeout(uint64_t now_ns, uint32_t /*bytes*/) {
    return quick_adapt(now_ns);
}

}  // namespace mrc
