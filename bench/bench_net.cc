// Micro-benchmarks of the Internet checksum and the Ethernet/IPv4/UDP parser.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "wire/net.h"

namespace {

using namespace mrc::wire;

void BM_ChecksumBytes(benchmark::State &state) {
    std::vector<uint8_t> d(static_cast<size_t>(state.range(0)), 0x5a);
    for (auto _ : state)
        benchmark::DoNotOptimize(csum_fold(csum_add(0, d.data(), d.size())));
    state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_ChecksumBytes)->Arg(64)->Arg(1500)->Arg(4096);

// The transmit path's payload: copy then checksum, against both in one pass.
void BM_CopyThenChecksum(benchmark::State &state) {
    std::vector<uint8_t> s(static_cast<size_t>(state.range(0)), 0x5a), d(s.size());
    for (auto _ : state) {
        std::memcpy(d.data(), s.data(), s.size());
        benchmark::DoNotOptimize(csum_fold(csum_add(0, d.data(), d.size())));
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_CopyThenChecksum)->Arg(1424);

void BM_CopyAndChecksum(benchmark::State &state) {
    std::vector<uint8_t> s(static_cast<size_t>(state.range(0)), 0x5a), d(s.size());
    for (auto _ : state) {
        benchmark::DoNotOptimize(csum_fold(csum_copy(d.data(), s.data(), s.size(), 0)));
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_CopyAndChecksum)->Arg(1424);

void BM_ParseUdp(benchmark::State &state) {
    std::vector<uint8_t> f(kEthIpv4UdpBytes + 1024, 0x11);
    UdpFrameSpec spec;
    spec.src_ip = ipv4(10, 0, 0, 1);
    spec.dst_ip = ipv4(10, 0, 0, 2);
    spec.dst_port = 4797;
    write_eth_ipv4_udp(f.data(), spec, 1024);
    fill_udp_checksum(f.data());
    const auto mode = state.range(0) ? Checksums::kVerify : Checksums::kSkip;
    for (auto _ : state) {
        UdpView v;
        benchmark::DoNotOptimize(parse_eth_ipv4_udp(f.data(), f.size(), &v, mode));
        benchmark::DoNotOptimize(v);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseUdp)->Arg(0)->Arg(1);

}  // namespace
