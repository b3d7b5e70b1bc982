// Micro-benchmarks of the transport core's per-packet paths, in ns per
// packet (Google Benchmark reports time per iteration; each iteration is one
// packet unless the name says otherwise). Budgets (checked by reading the
// medians, see docs/performance.md):
//   responder, one data packet (parse + place + bitmap + ack decision):
//     < 100 ns excluding the payload memcpy
//   requester, ack processing: < 50 ns per acknowledged packet
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "core/cc_nscc.h"
#include "core/endpoint.h"
#include "core/ev.h"
#include "core/loopback.h"
#include "qp_pairs.h"
#include "wire/mrc.h"

namespace mrc {

// The friend seam qp.h declares, for reaching inside a QP from here.
struct QpTestPeer {
    static void emit_sack(Qp &q, TxPacket &t) { q.emit_sack(t, q.advertised_status()); }
};

namespace {

// One requester/responder pair and a target region on b.
struct Pair : LoopbackPair {
    std::vector<uint8_t> mem = std::vector<uint8_t>(64 << 20);
    std::vector<uint8_t> src = std::vector<uint8_t>(16 << 20, 0x5a);
    uint32_t rkey = 0;

    explicit Pair(QpConfig c = {}) : LoopbackPair(c) {
        rkey = b->mrs().register_region(mem.data(), mem.size(), kAccessRemoteWrite, kPd).value();
    }

    // A data frame for PSN 0 with `payload` bytes, as the requester builds it.
    std::vector<uint8_t> data_frame(uint32_t payload, uint8_t flags = 0) const {
        std::vector<uint8_t> f(wire::kMaxHdrBytes + payload);
        wire::MrcAddr ad;
        ad.src_ip = a_ip(0);
        ad.dst_ip = b_ip(0);
        wire::DataFields d;
        d.flags = flags;
        d.msg_offset = payload;  // a packet from the middle of a message
        d.dst_qpn = qb->qpn();
        d.remote_addr = reinterpret_cast<uint64_t>(mem.data());
        d.rkey = rkey;
        const uint16_t h = wire::write_data(f.data(), ad, 5000, d, payload);
        f.resize(h + payload);
        return f;
    }
};

void set_psn(std::vector<uint8_t> &f, uint32_t psn) {
    reinterpret_cast<wire::BaseHdr *>(f.data() + wire::kEthIpv4UdpBytes)->psn.set(psn);
}
void set_addr(std::vector<uint8_t> &f, uint64_t addr) {
    reinterpret_cast<wire::Reth *>(f.data() + wire::kEthIpv4UdpBytes + sizeof(wire::BaseHdr) +
                                   sizeof(wire::DataHdr))
        ->remote_addr.set(addr);
}

void BM_ParseDataPacket(benchmark::State &state) {
    Pair p;
    auto f = p.data_frame(4096);
    for (auto _ : state) {
        wire::MrcPacket m;
        benchmark::DoNotOptimize(
            wire::parse_mrc(f.data(), uint32_t(f.size()), wire::kDefaultMrcPort, &m));
        benchmark::DoNotOptimize(m);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseDataPacket);

// The payload copy on its own, to subtract from the responder's figures.
void BM_Memcpy(benchmark::State &state) {
    const auto n = size_t(state.range(0));
    std::vector<uint8_t> s(n, 1), d(64 << 20);
    size_t off = 0;
    for (auto _ : state) {
        std::memcpy(d.data() + off, s.data(), n);
        benchmark::ClobberMemory();
        off = (off + n) % (d.size() - n);
    }
    state.SetBytesProcessed(int64_t(state.iterations() * n));
}
BENCHMARK(BM_Memcpy)->Arg(64)->Arg(4096);

// Responder, in order: parse, checks, place, bitmap, epsn advance, ack
// decision. Payload 64 B (the copy costs ~nothing) and 4 KiB.
void BM_ResponderInOrder(benchmark::State &state) {
    QpConfig c;
    c.ack_every_bytes = 1u << 30;  // the ack decision runs; SACK building is measured apart
    Pair p(c);
    const auto payload = uint32_t(state.range(0));
    auto f = p.data_frame(payload);
    const uint64_t base = reinterpret_cast<uint64_t>(p.mem.data());
    const uint64_t span = p.mem.size() / payload * payload;
    uint32_t psn = 0;
    uint64_t off = 0;
    for (auto _ : state) {
        set_psn(f, psn++);
        set_addr(f, base + off);
        off = off + payload == span ? 0 : off + payload;
        p.b->on_packet(f.data(), uint32_t(f.size()), 0, 1000);
    }
    if (p.qb->counters().rx_data_pkts != uint64_t(state.iterations()))
        state.SkipWithError("packets were not placed");
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ResponderInOrder)->Arg(64)->Arg(4096);

// Responder, out of order: each block of 64 PSNs arrives shuffled, and the
// SACKs the gaps trigger are built and sent (poll_tx) once per block.
void BM_ResponderOutOfOrder(benchmark::State &state) {
    QpConfig c;
    c.ack_every_bytes = 1u << 30;
    Pair p(c);
    const auto payload = uint32_t(state.range(0));
    auto f = p.data_frame(payload);
    std::vector<uint32_t> perm(64);
    std::iota(perm.begin(), perm.end(), 0u);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
    const uint64_t base = reinterpret_cast<uint64_t>(p.mem.data());
    uint8_t hdrs[16][wire::kMaxHdrBytes];
    TxPacket tx[16];
    for (int i = 0; i < 16; ++i)
        tx[i].hdr = hdrs[i];
    uint32_t block = 0, i = 0;
    for (auto _ : state) {
        const uint32_t k = perm[i];
        set_psn(f, block * 64 + k);
        set_addr(f, base + uint64_t((block % 256) * 64 + k) * payload);
        p.b->on_packet(f.data(), uint32_t(f.size()), 0, 1000);
        if (++i == 64) {
            i = 0;
            ++block;
            while (p.b->poll_tx(tx, 16, 1000) > 0) {
            }
        }
    }
    if (p.qb->counters().rx_data_pkts != uint64_t(state.iterations()))
        state.SkipWithError("packets were not placed");
    state.SetItemsProcessed(state.iterations());
    state.counters["sacks_per_pkt"] =
        double(p.qb->counters().tx_sacks) / double(state.iterations());
}
BENCHMARK(BM_ResponderOutOfOrder)->Arg(64)->Arg(4096);

// Building one SACK with a bitmap of scattered arrivals.
void BM_SackGeneration(benchmark::State &state) {
    Pair p;
    auto f = p.data_frame(64);
    for (uint32_t psn : {1u, 3u, 4u, 9u, 20u, 33u, 40u, 63u}) {
        set_psn(f, psn);
        p.b->on_packet(f.data(), uint32_t(f.size()), 0, 1000);
    }
    uint8_t hdr[wire::kMaxHdrBytes];
    TxPacket t;
    t.hdr = hdr;
    for (auto _ : state) {
        QpTestPeer::emit_sack(*p.qb, t);
        benchmark::DoNotOptimize(hdr);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SackGeneration);

// Requester: one iteration = 1024 packets sent (untimed) then acknowledged
// by 64 SACKs of 16 packets each, cumulative (arg 0) or by bitmap with the
// cumulative point held back (arg 1). Reported per acknowledged packet.
void BM_RequesterAckProcessing(benchmark::State &state) {
    QpConfig c;
    c.mtu_payload_bytes = 64;
    c.max_inflight_pkts = 2048;
    c.mpr_units = 16;
    Pair p(c);
    const bool by_bitmap = state.range(0) == 1;
    uint8_t hdrs[64][wire::kMaxHdrBytes];
    TxPacket tx[64];
    std::vector<std::vector<uint8_t>> sacks(64, std::vector<uint8_t>(wire::kSackBytes));
    wire::MrcAddr ad;
    ad.src_ip = wire::ipv4(10, 0, 0, 2);
    ad.dst_ip = wire::ipv4(10, 0, 0, 1);
    uint64_t acked = 0, wr = 0;
    for (auto _ : state) {
        state.PauseTiming();
        const Psn first = p.qa->send_next();
        WriteRequest w;
        w.wr_id = wr++;
        w.local = p.src.data();
        w.length = 1024 * 64;
        w.remote_addr = reinterpret_cast<uint64_t>(p.mem.data());
        w.rkey = p.rkey;
        (void)p.qa->post_write(w);
        for (int i = 0; i < 64; ++i)
            tx[i].hdr = hdrs[i];
        uint32_t sent = 0;
        while (sent < 1024)
            sent += p.a->poll_tx(tx, 64, 1000);
        for (uint32_t k = 0; k < 64; ++k) {
            wire::SackFields s;
            s.dst_qpn = p.qa->qpn();
            s.rwnd_units = 16;
            if (!by_bitmap || k == 63) {
                s.cum_psn = first + 16 * (k + 1);
            } else {
                s.cum_psn = first;
                s.sack_offset = uint16_t(16 * k);
                s.bitmap = 0xffff;
            }
            s.trigger_psn = first + 16 * k;
            wire::write_sack(sacks[k].data(), ad, 4000, s);
        }
        state.ResumeTiming();
        for (auto &s : sacks)
            p.a->on_packet(s.data(), uint32_t(s.size()), 0, 2000);
        SendCompletion sc[4];
        state.PauseTiming();
        while (p.qa->poll_send_cq(sc, 4) > 0) {
        }
        acked += 1024;
        state.ResumeTiming();
    }
    const auto &ctr = p.qa->counters();
    if (ctr.acked_pkts + ctr.sacked_pkts != acked)
        state.SkipWithError("not every packet was acknowledged");
    state.SetItemsProcessed(int64_t(acked));
    state.counters["ns_per_acked_pkt"] = benchmark::Counter(
        double(acked), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RequesterAckProcessing)->Arg(0)->Arg(1);

EvConfig bench_ev_config() {
    EvConfig c;
    c.evs = 256;
    c.backup_per_plane = 16;
    c.min_active = 16;
    c.skip_ns = 1'000'000'000;  // marks last the whole benchmark
    return c;
}

// EV choice for a new packet with health filtering. Arg: 0 every EV GOOD;
// 1 a quarter of the active EVs in SKIP and a tenth retired; 2 as 1 with
// one plane of four out of use; 3 every active EV in SKIP (the fallback).
void BM_EvChoose(benchmark::State &state) {
    EvSet s;
    s.init(bench_ev_config(), 4, 1);
    const int mode = int(state.range(0));
    Rng r(7);
    if (mode >= 1) {
        for (uint32_t k = 0; k < s.active_size(); ++k) {
            const uint32_t i = s.active_entry(uint8_t(k % 4), k / 4);
            if (mode == 3 || r.below(4) == 0)
                (void)s.on_ecn(i, 1);
            else if (r.below(10) == 0)
                (void)s.on_timeout(i, 1);
        }
    }
    const uint8_t planes = mode == 2 ? 0b1011 : 0b1111;
    uint64_t now = 2;
    for (auto _ : state) {
        benchmark::DoNotOptimize(s.choose(now, planes));
        ++now;
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EvChoose)->Arg(0)->Arg(1)->Arg(2)->Arg(3);

// EV choice for a retransmission: random, GOOD, not the failed EV, off its plane.
void BM_EvChooseRetx(benchmark::State &state) {
    EvSet s;
    s.init(bench_ev_config(), 4, 1);
    uint32_t last = 0;
    for (auto _ : state) {
        last = s.choose_retx(1, last, uint8_t(1u << s.entry(last).plane), 0b1111);
        benchmark::DoNotOptimize(last);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EvChooseRetx);

// The lookup every ack makes: echoed EV -> entry.
void BM_EvFind(benchmark::State &state) {
    EvSet s;
    s.init(bench_ev_config(), 4, 1);
    std::vector<uint16_t> evs;
    for (const EvEntry &e : s.entries())
        evs.push_back(e.ev);
    size_t k = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(s.find(evs[k]));
        k = k + 1 == evs.size() ? 0 : k + 1;
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EvFind);

// NSCC's ack update: a mix of the four quadrants (RTTs around the target,
// one ack in eight with ECN), 16 KiB acknowledged per ack.
void BM_NsccOnAck(benchmark::State &state) {
    NsccConfig c;
    c.base_rtt_ns = 8000;
    NsccCc cc(c, 4096);
    Rng r(3);
    std::vector<AckSample> acks(1024);
    uint64_t t = 0;
    for (auto &a : acks) {
        t += 300;
        a.now_ns = t;
        a.acked_bytes = 16384;
        a.rtt_ns = uint32_t(8000 + r.below(12000));
        a.ecn = r.below(8) == 0;
    }
    size_t k = 0;
    uint64_t base = 0;
    for (auto _ : state) {
        AckSample a = acks[k];
        a.now_ns += base;
        benchmark::DoNotOptimize(cc.on_ack(a));
        if (++k == acks.size()) {
            k = 0;
            base += t;
        }
    }
    benchmark::DoNotOptimize(cc.window_bytes());
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NsccOnAck);

// Requester, sending: segmentation, EV choice, header building (no payload
// copy). Every 1024 packets one cumulative SACK (built untimed) reopens the
// window; its processing, ~10 ns per packet, is included.
void BM_RequesterEmit(benchmark::State &state) {
    QpConfig c;
    c.mtu_payload_bytes = 4096;
    c.max_inflight_pkts = 2048;
    c.mpr_units = 16;
    Pair p(c);
    uint8_t hdrs[32][wire::kMaxHdrBytes];
    TxPacket tx[32];
    for (int i = 0; i < 32; ++i)
        tx[i].hdr = hdrs[i];
    std::vector<uint8_t> sack(wire::kSackBytes);
    wire::MrcAddr ad;
    ad.src_ip = wire::ipv4(10, 0, 0, 2);
    ad.dst_ip = wire::ipv4(10, 0, 0, 1);
    uint64_t n = 0, since_ack = 0;
    SendCompletion sc[8];
    for (auto _ : state) {
        if (p.qa->outstanding_wrs() < 2) {
            WriteRequest w;
            w.local = p.src.data();
            w.length = 4096u * 4096u;
            w.remote_addr = reinterpret_cast<uint64_t>(p.mem.data());
            w.rkey = p.rkey;
            (void)p.qa->post_write(w);
        }
        const uint32_t k = p.a->poll_tx(tx, 32, 1000);
        n += k;
        since_ack += k;
        if (since_ack >= 1024 || k == 0) {
            state.PauseTiming();
            wire::SackFields f;
            f.dst_qpn = p.qa->qpn();
            f.cum_psn = p.qa->send_next();
            f.trigger_psn = p.qa->send_next() - 1;
            f.rwnd_units = 16;
            wire::write_sack(sack.data(), ad, 4000, f);
            state.ResumeTiming();
            p.a->on_packet(sack.data(), uint32_t(sack.size()), 0, 2000);
            while (p.qa->poll_send_cq(sc, 8) > 0) {
            }
            since_ack = 0;
        }
    }
    state.SetItemsProcessed(int64_t(n));
}
BENCHMARK(BM_RequesterEmit);

// What an idle worker's loop asks of the core, with `range(0)` connected,
// idle QPs to one peer: timers (on_time), the send round (poll_tx) and the
// completion notices (take_notified), 2 us of time a loop; the frames that
// come out (keepalives, their answers) are carried both ways, so liveness
// runs as it does in a daemon. The cost per loop must not grow with the
// number of idle QPs (issue 18): compare /10 with /4000.
void BM_IdleLoop(benchmark::State &state) {
    const auto n = uint32_t(state.range(0));
    EndpointConfig ec;
    ec.planes = 2;
    ec.max_qps = n;
    Endpoint a(ec);
    ec.qpn_base = 1u << 16;
    Endpoint b(ec);
    if (!bench::connect_pairs(a, b, n, QpConfig{}, 2)) {
        state.SkipWithError("QP set-up failed");
        return;
    }
    uint8_t hdrs[32][wire::kMaxHdrBytes];
    TxPacket tx[32];
    for (int i = 0; i < 32; ++i)
        tx[i].hdr = hdrs[i];
    uint32_t notified[64];
    uint64_t now = 1'000'000, frames = 0;
    auto carry = [&](Endpoint &from, Endpoint &to) {
        const uint32_t k = from.poll_tx(tx, 32, now);
        for (uint32_t i = 0; i < k; ++i)
            to.on_packet(tx[i].hdr, tx[i].hdr_len, tx[i].payload, tx[i].payload_len, tx[i].plane,
                         now);
        frames += k;
        return k;
    };
    for (auto _ : state) {
        now += 2'000;
        a.on_time(now);
        carry(a, b);
        b.on_time(now);
        carry(b, a);
        benchmark::DoNotOptimize(a.take_notified(notified, 64));
    }
    uint32_t failed = 0;
    for (uint32_t q = 1; q <= n; ++q)
        failed += a.qp(q)->state() != QpState::kRts;
    if (failed != 0) state.SkipWithError("idle QPs failed (liveness)");
    state.counters["armed_timers"] = double(a.armed_timers());
    state.counters["frames_per_s_simulated"] = double(frames) / (double(now - 1'000'000) / 1e9);
}
BENCHMARK(BM_IdleLoop)->Arg(10)->Arg(1000)->Arg(4000);

}  // namespace
}  // namespace mrc
