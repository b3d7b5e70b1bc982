// Micro-benchmarks of the impairment fabric's per-frame work (lib/fabric):
// ingress (classify, path hash, impairments) plus egress through the delay
// line, per frame, with nothing configured, with a rate limit and delay,
// and with every impairment on. A frame is re-used: trimming is off here
// (it would shrink the frame once and for all).
#include <benchmark/benchmark.h>

#include <vector>

#include "fabric/fabric.h"
#include "wire/mrc.h"

namespace {

using namespace mrc;
using namespace mrc::fabric;

std::vector<uint8_t> frame(uint16_t ev, uint32_t payload) {
    wire::MrcAddr a;
    a.src_ip = wire::ipv4(10, 0, 0, 1);
    a.dst_ip = wire::ipv4(10, 0, 0, 2);
    wire::DataFields f;
    f.dst_qpn = 5;
    std::vector<uint8_t> fr(wire::kMaxHdrBytes + payload);
    fr.resize(wire::write_data(fr.data(), a, ev, f, payload) + payload);
    return fr;
}

void run(benchmark::State &state, std::vector<const char *> specs) {
    FabricConfig c;
    c.planes = 1;
    c.paths = 8;
    c.delay_slots = 4096;
    for (const char *s : specs)
        c.settings.push_back(parse_setting(s).value());
    Fabric f = Fabric::create(c).value();
    std::vector<std::vector<uint8_t>> frames;
    for (uint16_t ev = 0; ev < 64; ++ev)
        frames.push_back(frame(uint16_t(20000 + ev * 7), 1400));
    uint64_t now = 0, handle = 0;
    DelayLine::Item out[32];
    for (auto _ : state) {
        auto &fr = frames[handle & 63];
        uint32_t len = uint32_t(fr.size());
        benchmark::DoNotOptimize(f.ingress(0, kAtoB, fr.data(), &len, ++handle, now));
        now += 120;  // 1482-byte frames at about 100 Gb/s
        if ((handle & 15) == 0) benchmark::DoNotOptimize(f.egress(0, kAtoB, now, out, 32));
    }
    state.SetItemsProcessed(int64_t(state.iterations()));
}

void BM_FabricClean(benchmark::State &state) {
    run(state, {});
}
BENCHMARK(BM_FabricClean);

void BM_FabricRateAndDelay(benchmark::State &state) {
    run(state, {"rate_gbps=200,queue_bytes=1000000,delay_us=2"});
}
BENCHMARK(BM_FabricRateAndDelay);

void BM_FabricEverything(benchmark::State &state) {
    run(state, {"loss=0.01,burst_enter=0.001,rate_gbps=200,queue_bytes=1000000,ecn_bytes=1000,"
                "delay_us=2,jitter_us=1,reorder=0.01,reorder_us=5,duplicate=0.01"});
}
BENCHMARK(BM_FabricEverything);

}  // namespace
