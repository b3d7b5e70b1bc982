// Simulator speed: simulated packets (data and acks, both hosts) per
// second of wall time, on one core, for the default fabric (4 planes x 8
// paths, 100 Gb/s) at three MTUs. Target: 5 M packets per wall second.
#include <benchmark/benchmark.h>

#include "sim/sim.h"

namespace {

void BM_SimPacketsPerSecond(benchmark::State &state) {
    mrc::sim::SimConfig c;
    c.work.qps = 4;
    c.work.msg_bytes = 256 * 1024;
    c.work.total_bytes = 128ull << 20;
    c.qp.mtu_payload_bytes = uint32_t(state.range(0));
    uint64_t pkts = 0;
    for (auto _ : state) {
        const auto r = mrc::sim::run(c);
        if (!r.verified) state.SkipWithError("simulation did not verify");
        pkts += r.packets_sent;
    }
    state.counters["sim_pkts_per_s"] =
        benchmark::Counter(double(pkts), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimPacketsPerSecond)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace
