// The fabric most simulator tests start from: 4 planes x 8 paths at
// 100 Gb/s, 2 us one way, 4 QPs writing 256 KiB messages 8 deep, and a
// retransmission timeout of 33 us before the first RTT sample (about
// 6.5 us); after it the timeout adapts, never below its 1 ms floor, and
// losses are found from acks within about an RTT.
#pragma once

#include "sim/sim.h"

namespace mrc::sim {

inline SimConfig fabric4x8(uint64_t total_bytes) {
    SimConfig c;
    c.fabric.planes = 4;
    c.fabric.paths_per_plane = 8;
    c.fabric.link_gbps = 100;
    c.fabric.delay_ns = 2000;
    c.work.qps = 4;
    c.work.msg_bytes = 256 * 1024;
    c.work.total_bytes = total_bytes;
    c.work.depth = 8;
    c.qp.retry.timeout_exp = 5;
    return c;
}

}  // namespace mrc::sim
