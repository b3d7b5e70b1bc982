// The transport core with many QPs to one peer, both ends on one thread:
// what a data packet costs the core (requester and responder together,
// acks included) at 16, 1,000 and 4,000 QPs (issue 18: the cost must not
// grow with the QPs). Time is virtual (the benchmark's own clock, not the
// CPU's), so the protocol behaves the same however busy the machine is;
// only the CPU time it takes is measured.
//
// The wire: per plane and direction a FIFO of kWireFrames frames drained at
// a fixed rate (a bottleneck link with a queue, like a memif ring between
// two workers); a sender whose FIFO is full is held back as the dataplane
// holds it back when its port's TX queue is full. Every QP keeps two 64 KiB
// WRITEs posted, as mrc_write_bw -t 2 does through mrcd.
//
// Reported per data packet: CPU ns (the benchmark's time per item), control
// packets from the responder (acks, probe replies), and the simulated
// goodput (payload bytes over virtual time).
#include <benchmark/benchmark.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "core/endpoint.h"
#include "qp_pairs.h"
#include "wire/mrc.h"

namespace mrc {
namespace {

constexpr uint8_t kPlanes = 2;
constexpr uint32_t kPayloadBytes = 1424;  // a 1500-byte IP MTU
constexpr uint32_t kMsgBytes = 64 << 10;
constexpr uint32_t kDepth = 2;          // WRITEs posted per QP
constexpr uint32_t kWireFrames = 1024;  // queue of one plane and direction
constexpr uint64_t kTickNs = 1000;      // virtual time per loop
constexpr uint32_t kFramesPerTick = 2;  // drain rate of each FIFO (~24 Gb/s a plane)
constexpr uint32_t kBurst = 32;

struct Frame {
    std::vector<uint8_t> bytes;
    uint8_t plane = 0;
};

// One direction of the wire: a FIFO per plane.
struct Wire {
    std::deque<Frame> q[kPlanes];
    std::vector<Frame> spare;  // recycled buffers: no allocation once warm

    uint8_t room_mask() const {
        uint8_t m = 0;
        for (uint8_t p = 0; p < kPlanes; ++p)
            if (q[p].size() < kWireFrames) m |= uint8_t(1u << p);
        return m;
    }
    void push(const TxPacket &t) {
        Frame f;
        if (!spare.empty()) {
            f = std::move(spare.back());
            spare.pop_back();
        }
        f.bytes.resize(t.hdr_len + t.payload_len);
        std::memcpy(f.bytes.data(), t.hdr, t.hdr_len);
        if (t.payload_len) std::memcpy(f.bytes.data() + t.hdr_len, t.payload, t.payload_len);
        f.plane = t.plane;
        q[t.plane].push_back(std::move(f));
    }
    // Delivers up to kFramesPerTick frames of each plane; returns how many.
    uint32_t deliver(Endpoint &to, uint64_t now_ns) {
        uint32_t n = 0;
        for (uint8_t p = 0; p < kPlanes; ++p)
            for (uint32_t i = 0; i < kFramesPerTick && !q[p].empty(); ++i, ++n) {
                Frame &f = q[p].front();
                to.on_packet(f.bytes.data(), uint32_t(f.bytes.size()), p, now_ns);
                spare.push_back(std::move(f));
                q[p].pop_front();
            }
        return n;
    }
};

// Sends from `from` onto `w` while the wire has room; returns the frames.
uint32_t send(Endpoint &from, Wire &w, TxPacket *tx, uint64_t now_ns) {
    uint32_t total = 0;
    for (;;) {
        const uint8_t room = w.room_mask();
        if (room == 0) break;
        const uint32_t k = from.poll_tx(tx, kBurst, now_ns, room);
        for (uint32_t i = 0; i < k; ++i)
            w.push(tx[i]);
        total += k;
        if (k < kBurst) break;
    }
    return total;
}

void BM_ManyQpsWrite(benchmark::State &state) {
    const auto n = uint32_t(state.range(0));
    EndpointConfig ec;
    ec.planes = kPlanes;
    ec.max_qps = n;
    Endpoint a(ec);
    ec.qpn_base = 1u << 16;
    Endpoint b(ec);
    QpConfig cfg;
    cfg.mtu_payload_bytes = kPayloadBytes;
    cfg.cc.nscc.line_rate_gbps = 25;
    std::vector<Qp *> qa, qb;
    if (!bench::connect_pairs(a, b, n, cfg, kPlanes, &qa, &qb)) {
        state.SkipWithError("QP set-up failed");
        return;
    }
    // Every QP writes the same target (what lands there is not checked here).
    std::vector<uint8_t> target(kMsgBytes), src(kMsgBytes, 0x5a);
    const uint32_t rkey =
        b.mrs()
            .register_region(target.data(), target.size(), kAccessRemoteWrite, LoopbackPair::kPd)
            .value();
    auto post = [&](Qp &q) {
        while (q.outstanding_wrs() < kDepth) {
            WriteRequest w;
            w.local = src.data();
            w.length = kMsgBytes;
            w.remote_addr = reinterpret_cast<uint64_t>(target.data());
            w.rkey = rkey;
            if (q.post_write(w) != PostResult::kOk) return;
        }
    };
    for (Qp *q : qa)
        post(*q);
    uint8_t hdrs[kBurst][wire::kMaxHdrBytes];
    TxPacket tx[kBurst];
    for (uint32_t i = 0; i < kBurst; ++i)
        tx[i].hdr = hdrs[i];
    Wire ab, ba;
    uint32_t notified[64];
    SendCompletion sc[8];
    uint64_t now = 1'000'000, data = 0, control = 0, completed = 0, failed = 0;
    auto loop = [&] {
        now += kTickNs;
        a.on_time(now);
        b.on_time(now);
        data += send(a, ab, tx, now);  // data, resends and probes
        ab.deliver(b, now);
        control += send(b, ba, tx, now);
        ba.deliver(a, now);
        for (uint32_t k; (k = a.take_notified(notified, 64)) > 0;)
            for (uint32_t i = 0; i < k; ++i) {
                Qp &q = *a.qp(notified[i]);
                for (uint32_t c; (c = q.poll_send_cq(sc, 8)) > 0;)
                    for (uint32_t j = 0; j < c; ++j) {
                        ++completed;
                        failed += sc[j].status != WcStatus::kSuccess;
                    }
                post(q);
            }
    };
    // Out of the measurement: every QP past its first RTTs.
    for (int i = 0; i < 20000; ++i)
        loop();
    // What the frames were, summed over the QPs: before and after.
    auto sum = [](const std::vector<Qp *> &qs, uint64_t QpCounters::*c) {
        uint64_t t = 0;
        for (const Qp *q : qs)
            t += q->counters().*c;
        return t;
    };
    struct Kind {
        const char *name;
        const std::vector<Qp *> *qs;
        uint64_t QpCounters::*c;
        uint64_t before;
    } kinds[] = {{"data", &qa, &QpCounters::tx_data_pkts, 0},
                 {"retx", &qa, &QpCounters::tx_retx_pkts, 0},
                 {"sacks", &qb, &QpCounters::tx_sacks, 0},
                 {"rev_probes", &qb, &QpCounters::tx_reverse_probes, 0},
                 {"probe_replies", &qa, &QpCounters::tx_probe_replies, 0},
                 {"rev_replaced", &qb, &QpCounters::reverse_evs_replaced, 0}};
    for (Kind &k : kinds)
        k.before = sum(*k.qs, k.c);
    const uint64_t data0 = data, control0 = control, t0 = now;
    for (auto _ : state)
        loop();
    const double new_data = double(sum(qa, &QpCounters::tx_data_pkts) - kinds[0].before);
    for (const Kind &k : kinds)
        if (k.c != &QpCounters::tx_data_pkts)
            state.counters[std::string(k.name) + "_per_data"] =
                new_data > 0 ? double(sum(*k.qs, k.c) - k.before) / new_data : 0;
    uint64_t errored = 0;
    for (Qp *q : qa)
        errored += q->state() != QpState::kRts;
    if (failed != 0 || errored != 0) state.SkipWithError("QPs failed");
    const uint64_t d = data - data0;
    state.SetItemsProcessed(int64_t(d));
    state.counters["ctl_per_data"] = d ? double(control - control0) / double(d) : 0;
    state.counters["sim_gbps"] = now > t0 ? double(d) * kPayloadBytes * 8 / double(now - t0) : 0;
    state.counters["completions"] = double(completed);
}
BENCHMARK(BM_ManyQpsWrite)->Arg(16)->Arg(1000)->Arg(4000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mrc
