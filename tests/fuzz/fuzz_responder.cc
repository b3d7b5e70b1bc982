// libFuzzer target: a responder (and its requester peer) fed arbitrary
// packets. The input is a sequence of records: [1 byte plane][2 bytes
// length][length bytes of MRC header and payload]; each record is wrapped
// in valid Ethernet/IPv4/UDP headers from the peer (so the fuzzer spends
// its time on MRC, not on IP checksums) and delivered to both endpoints,
// with time moving on. Invariants checked after every input:
//   - no byte outside the registered region changed (guard zones);
//   - the QPs' PSN state stays consistent;
//   - the requester's per-plane bytes in flight add up to its total, every
//     plane keeps a window of at least one MTU, and the EV gauges stay
//     within [0, total] (hostile acks, NACKs, probe replies and
//     plane-status bits included).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/endpoint.h"
#include "core/loopback.h"
#include "wire/mrc.h"

using namespace mrc;

namespace {

constexpr size_t kGuard = 4096;
constexpr size_t kRegion = 64 * 1024;

QpConfig fuzz_config() {
    QpConfig qc;
    qc.mtu_payload_bytes = 512;
    qc.mpr_units = 1;
    qc.max_inflight_pkts = 128;
    qc.max_pending_imm = 4;
    qc.retry.timeout_exp = 3;
    qc.retry.limit = 3;
    return qc;
}

struct World : LoopbackPair {
    std::vector<uint8_t> mem = std::vector<uint8_t>(kGuard + kRegion + kGuard, 0xa5);
    std::vector<uint8_t> src = std::vector<uint8_t>(kRegion, 0x3c);
    uint32_t rkey = 0;
    uint64_t now = 1000;

    // Start PSNs just below the 24-bit wrap.
    World() : LoopbackPair(fuzz_config(), 2, Psn(0xfffff0), Psn(0xfffff0)) {
        rkey =
            b->mrs().register_region(mem.data() + kGuard, kRegion, kAccessRemoteWrite, kPd).value();
    }
};

void deliver(Endpoint &ep, const uint8_t *mrc, size_t len, uint32_t src_ip, uint32_t dst_ip,
             uint8_t plane, uint64_t now) {
    std::vector<uint8_t> f(wire::kEthIpv4UdpBytes + len);
    wire::UdpFrameSpec s;
    s.src_ip = src_ip;
    s.dst_ip = dst_ip;
    s.src_port = 4242;
    s.dst_port = wire::kDefaultMrcPort;
    wire::write_eth_ipv4_udp(f.data(), s, uint16_t(len));
    std::memcpy(f.data() + wire::kEthIpv4UdpBytes, mrc, len);
    ep.on_packet(f.data(), uint32_t(f.size()), plane, now);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    World w;  // fresh per input: reproducible
    // Some real traffic to be in the middle of.
    WriteRequest wr;
    wr.local = w.src.data();
    wr.length = 4000;
    wr.remote_addr = reinterpret_cast<uint64_t>(w.mem.data() + kGuard);
    wr.rkey = w.rkey;
    wr.with_imm = size & 1;
    (void)w.qa->post_write(wr);
    uint8_t hdrs[16][wire::kMaxHdrBytes];
    TxPacket tx[16];
    size_t off = 0;
    while (off + 3 <= size) {
        const uint8_t plane = data[off] & 3;
        const size_t len =
            std::min<size_t>(size - off - 3, size_t(data[off + 1]) << 8 | data[off + 2]);
        const uint8_t *rec = data + off + 3;
        off += 3 + len;
        if (len > 1400) continue;
        deliver(*w.b, rec, len, wire::ipv4(10, plane & 1, 0, 1), wire::ipv4(10, plane & 1, 0, 2),
                plane, w.now);
        deliver(*w.a, rec, len, wire::ipv4(10, plane & 1, 0, 2), wire::ipv4(10, plane & 1, 0, 1),
                plane, w.now);
        w.now += 700;
        w.a->on_time(w.now);
        w.b->on_time(w.now);
        for (Endpoint *ep : {w.a.get(), w.b.get()}) {
            for (int i = 0; i < 16; ++i)
                tx[i].hdr = hdrs[i];
            const uint32_t n = ep->poll_tx(tx, 16, w.now);
            for (uint32_t i = 0; i < n; ++i) {
                Endpoint *to = ep == w.a.get() ? w.b.get() : w.a.get();
                std::vector<uint8_t> f(tx[i].hdr, tx[i].hdr + tx[i].hdr_len);
                if (tx[i].payload_len)
                    f.insert(f.end(), tx[i].payload, tx[i].payload + tx[i].payload_len);
                to->on_packet(f.data(), uint32_t(f.size()), tx[i].plane, w.now);
            }
        }
        SendCompletion sc[8];
        RecvCompletion rc[8];
        while (w.qa->poll_send_cq(sc, 8)) {
        }
        while (w.qb->poll_recv_cq(rc, 8)) {
        }
    }
    for (size_t i = 0; i < kGuard; ++i)
        if (w.mem[i] != 0xa5 || w.mem[kGuard + kRegion + i] != 0xa5)
            abort();  // wrote outside the region
    if (distance(w.qa->send_una(), w.qa->send_next()) < 0) abort();
    if (distance(Psn(0xfffff0), w.qb->expected_psn()) < 0) abort();
    uint64_t by_plane = 0;
    for (uint8_t p = 0; p < 2; ++p) {
        by_plane += w.qa->plane_inflight_bytes(p);
        if (w.qa->state() == QpState::kRts &&
            w.qa->cc(p).window_bytes() < w.qa->config().mtu_payload_bytes)
            abort();
        const EvGauges &g = w.a->ev_gauges();
        if (g.assumed_bad[p] < 0 || g.denied[p] < 0 || g.assumed_bad[p] > g.total[p]) abort();
    }
    if (by_plane != w.qa->inflight_bytes()) abort();
    return 0;
}
