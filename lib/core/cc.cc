#include "core/cc.h"

#include <string>

#include "core/cc_fixed.h"
#include "core/cc_nscc.h"

namespace mrc {

const char *to_string(CcAlgo a) {
    switch (a) {
        case CcAlgo::kFixed:
            return "fixed";
        case CcAlgo::kNscc:
            return "nscc";
    }
    return "?";
}

namespace {
NsccConfig per_plane(NsccConfig n, uint32_t planes) {
    n.line_rate_gbps /= planes;
    return n;
}
uint64_t per_plane_fixed(uint64_t window_bytes, uint32_t planes) {
    return (window_bytes + planes - 1) / planes;
}
}  // namespace

Result<void> check_cc(const CcConfig &c, uint32_t mtu_bytes, uint32_t planes) {
    if (planes == 0) return Error{"no planes"};
    if (c.algo == CcAlgo::kFixed) {
        if (c.fixed_window_bytes != 0 && per_plane_fixed(c.fixed_window_bytes, planes) < mtu_bytes)
            return Error{"fixed window of " + std::to_string(c.fixed_window_bytes) +
                         " bytes over " + std::to_string(planes) +
                         " planes is smaller than one MTU (" + std::to_string(mtu_bytes) +
                         " bytes) per plane"};
        return ok();
    }
    const NsccConfig &n = c.nscc;
    if (!(n.line_rate_gbps > 0)) return Error{"nscc: line_rate_gbps must be positive"};
    if (n.base_rtt_ns == 0) return Error{"nscc: base_rtt_ns must be positive"};
    const double max_bytes =
        n.max_cwnd_bdps * n.line_rate_gbps / planes * double(n.base_rtt_ns) / 8.0;
    if (max_bytes < mtu_bytes)
        return Error{
            "nscc: the window ceiling of a plane (max_cwnd_bdps x line rate / planes x base "
            "RTT = " +
            std::to_string(static_cast<uint64_t>(max_bytes)) + " bytes) is smaller than one MTU (" +
            std::to_string(mtu_bytes) + " bytes)"};
    if (!(n.init_cwnd_bdps > 0) || n.init_cwnd_bdps > n.max_cwnd_bdps)
        return Error{"nscc: init_cwnd_bdps must be in (0, max_cwnd_bdps]"};
    if (!(n.target_delay_rtts > 0)) return Error{"nscc: target_delay_rtts must be positive"};
    if (!(n.md_gamma > 0 && n.md_gamma <= 1)) return Error{"nscc: md_gamma must be in (0, 1]"};
    if (!(n.md_floor > 0 && n.md_floor < 1)) return Error{"nscc: md_floor must be in (0, 1)"};
    if (!(n.pi_gain >= 0) || !(n.fi_mtus >= 0))
        return Error{"nscc: increase gains must not be negative"};
    if (!(n.qa_threshold_targets > 1)) return Error{"nscc: qa_threshold_targets must be above 1"};
    if (!(n.qa_max_cwnd_ratio >= 0 && n.qa_max_cwnd_ratio <= 1))
        return Error{"nscc: qa_max_cwnd_ratio must be in [0, 1]"};
    if (n.adjust_mtus == 0) return Error{"nscc: adjust_mtus must be at least 1"};
    return ok();
}

std::unique_ptr<CongestionControl> make_cc(const CcConfig &c, uint32_t mtu_bytes, uint32_t planes) {
    if (c.algo == CcAlgo::kNscc)
        return std::make_unique<NsccCc>(per_plane(c.nscc, planes), mtu_bytes);
    return std::make_unique<FixedWindowCc>(
        c.fixed_window_bytes ? per_plane_fixed(c.fixed_window_bytes, planes) : UINT64_MAX);
}

}  // namespace mrc
