// The simulator's configuration checks: what run() needs to hold before it
// starts (mrc-sim reports the error as a usage error).
#include <string>

#include "sim/sim.h"

namespace mrc::sim {

Result<void> validate(const SimConfig &c) {
    const FabricConfig &f = c.fabric;
    if (f.planes < 1 || f.planes > kMaxPlanes)
        return Error{"planes must be in [1, " + std::to_string(kMaxPlanes) + "]"};
    if (f.paths_per_plane < 1 || f.paths_per_plane > 4096)
        return Error{"paths-per-plane must be in [1, 4096]"};
    if (!(f.link_gbps > 0) || f.link_gbps > 10000) return Error{"link-gbps must be in (0, 10000]"};
    if (f.path_gbps < 0) return Error{"path-gbps must not be negative"};
    if (c.work.qps < 1 || c.work.qps > 4096) return Error{"qps must be in [1, 4096]"};
    if (c.work.senders < 1 || c.work.senders > c.work.qps)
        return Error{"senders must be in [1, qps]"};
    if (c.work.msg_bytes < 1 || c.work.msg_bytes > (1ull << 30))
        return Error{"msg-bytes must be in [1, 2^30]"};
    if (c.work.total_bytes < c.work.msg_bytes * c.work.qps)
        return Error{"total-bytes must be at least msg-bytes * qps"};
    if (c.work.depth < 1 || c.work.depth > 4096) return Error{"depth must be in [1, 4096]"};
    if (c.work.msg_bytes * c.work.depth * c.work.qps > (8ull << 30))
        return Error{"msg-bytes * depth * qps exceeds 8 GiB of receive buffers"};
    if (c.qp.mtu_payload_bytes < 1 || c.qp.mtu_payload_bytes > 9000)
        return Error{"mtu must be in [1, 9000]"};
    if (!(f.loss >= 0 && f.loss <= 1)) return Error{"loss must be in [0, 1]"};
    for (const auto &im : f.impairments) {
        if (im.plane >= int(f.planes))
            return Error{"impairment names plane " + std::to_string(im.plane) +
                         " that does not exist"};
        if (im.path >= int(f.paths_per_plane))
            return Error{"impairment names path " + std::to_string(im.path) +
                         " that does not exist"};
        for (double p : {im.loss, im.duplicate, im.reorder, im.burst_enter, im.burst_exit})
            if (!(p >= 0 && p <= 1)) return Error{"impairment probabilities must be in [0, 1]"};
    }
    for (const auto &fl : f.failures) {
        if (fl.plane < 0 || fl.plane >= int(f.planes))
            return Error{"failure names plane " + std::to_string(fl.plane) +
                         " that does not exist"};
        if (fl.path >= int(f.paths_per_plane))
            return Error{"failure names path " + std::to_string(fl.path) + " that does not exist"};
        if (fl.period_ns && (fl.for_ns == 0 || fl.for_ns >= fl.period_ns))
            return Error{"a flapping failure needs 0 < for_us < period_us"};
        if (fl.link < -1 || fl.link > 1)
            return Error{"failure link must be 0 (senders) or 1 (receiver)"};
        if (fl.link >= 0 && fl.path >= 0)
            return Error{"a link failure takes a whole plane: no path"};
    }
    for (const auto &pl : f.plane_limits) {
        if (pl.plane < 0 || pl.plane >= int(f.planes))
            return Error{"plane limit names plane " + std::to_string(pl.plane) +
                         " that does not exist"};
        if (pl.dir < 0 || pl.dir > 1) return Error{"plane limit dir must be 0 or 1"};
        if (!(pl.gbps > 0)) return Error{"plane limit gbps must be positive"};
    }
    for (size_t i = 0; i < f.plane_limits.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (f.plane_limits[i].plane == f.plane_limits[j].plane &&
                f.plane_limits[i].dir == f.plane_limits[j].dir)
                return Error{"two plane limits for plane " +
                             std::to_string(f.plane_limits[i].plane)};
    if (c.work.victims > 64) return Error{"victims must be at most 64"};
    if (c.work.victims && c.work.victim_bytes < c.work.msg_bytes)
        return Error{"victim-bytes must be at least msg-bytes"};
    if (c.run_scorer && c.scorer.period_ns == 0) return Error{"the scorer period must be positive"};
    if (c.series_ns && c.series_ns < 100) return Error{"series buckets must be at least 100 ns"};
    return ok();
}

}  // namespace mrc::sim
