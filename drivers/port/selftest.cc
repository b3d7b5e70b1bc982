#include "port/selftest.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "common/sleep.h"

namespace mrc::drivers {

namespace {

constexpr uint32_t kMagic = 0x4d524353;  // "MRCS"
constexpr uint8_t kDirRequest = 0;
constexpr uint8_t kDirReply = 1;
constexpr uint16_t kBurst = 32;
constexpr uint32_t kLingerMs = 2000;
constexpr wire::MacAddr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

struct TestHdr {
    wire::be32 magic;
    wire::be32 seq;
    wire::be16 payload_bytes;
    uint8_t dir;
    uint8_t stream;  // which direction of a pair, so crossed streams are caught
};
static_assert(sizeof(TestHdr) == 12);

uint8_t pattern_byte(uint32_t seq, uint8_t stream, size_t i) {
    return static_cast<uint8_t>(seq * 131u + i * 7u + stream * 29u + (i >> 8));
}

uint16_t payload_len_for(uint32_t seq, const SelftestOptions &o) {
    const uint32_t lo = std::max<uint32_t>(o.min_payload_bytes, sizeof(TestHdr));
    const uint32_t hi = std::max<uint32_t>(o.max_payload_bytes, lo);
    return static_cast<uint16_t>(lo + (seq * 7919u) % (hi - lo + 1));
}

using Clock = std::chrono::steady_clock;

// One direction of traffic: what was sent and what came back.
struct Stream {
    const Port *tx = nullptr;
    wire::UdpFrameSpec spec;
    uint8_t id = 0;
    uint32_t next_seq = 0;
    std::vector<uint8_t> seen;
    SelftestStats st;
};

Result<rte_mbuf *> build_frame(rte_mempool *pool, const Port &port, const Stream &s, uint32_t seq,
                               const SelftestOptions &o) {
    const uint16_t len = payload_len_for(seq, o);
    rte_mbuf *m = rte_pktmbuf_alloc(pool);
    if (m == nullptr) return Error{"self-test: mbuf pool exhausted"};
    auto *buf = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, wire::kEthIpv4UdpBytes + len));
    if (buf == nullptr) {
        rte_pktmbuf_free(m);
        return Error{fmt::format("self-test: {} byte payload does not fit an mbuf", len)};
    }
    wire::UdpFrameSpec spec = s.spec;
    spec.ip_id = static_cast<uint16_t>(seq);
    wire::write_eth_ipv4_udp(buf, spec, len);
    auto *h = reinterpret_cast<TestHdr *>(buf + wire::kEthIpv4UdpBytes);
    h->magic.set(kMagic);
    h->seq.set(seq);
    h->payload_bytes.set(len);
    h->dir = kDirRequest;
    h->stream = s.id;
    uint8_t *p = buf + wire::kEthIpv4UdpBytes;
    for (size_t i = sizeof(TestHdr); i < len; ++i)
        p[i] = pattern_byte(seq, s.id, i);
    port.prepare_tx_cksum(m, sizeof(wire::EthHdr), false);
    return m;
}

enum class Check { kOk, kForeign, kBadCksum, kBadPayload };

struct Checked {
    Check result = Check::kForeign;
    uint32_t seq = 0;
    uint8_t dir = 0;
    uint8_t stream = 0;
    uint16_t payload_bytes = 0;
};

// Checks one received frame; `scratch` holds a linear copy when the frame is
// segmented.
Checked check_frame(const rte_mbuf *m, const SelftestOptions &o, std::vector<uint8_t> &scratch,
                    SelftestStats &st) {
    Checked c;
    if (scratch.size() < m->pkt_len) scratch.resize(m->pkt_len);
    const auto *data =
        static_cast<const uint8_t *>(rte_pktmbuf_read(m, 0, m->pkt_len, scratch.data()));
    if (data == nullptr) return c;
    const RxCksum hw = Port::rx_cksum(m);
    wire::UdpView v;
    wire::NetError e = wire::parse_eth_ipv4_udp(data, m->pkt_len, &v, wire::Checksums::kSkip);
    if (e != wire::NetError::kOk || v.udp->dst_port.get() != o.udp_port) return c;
    if (v.payload_bytes < sizeof(TestHdr)) return c;
    const auto *h = reinterpret_cast<const TestHdr *>(v.payload);
    if (h->magic.get() != kMagic) return c;
    // From here on the frame claims to be ours: every defect counts.
    if (hw == RxCksum::kBad) {
        c.result = Check::kBadCksum;
        return c;
    }
    if (hw == RxCksum::kGood) {
        ++st.hw_cksum_checked;
    } else {
        ++st.sw_cksum_checked;
        e = wire::parse_eth_ipv4_udp(data, m->pkt_len, &v, wire::Checksums::kVerify);
        if (e != wire::NetError::kOk || v.udp->checksum.get() == 0) {
            c.result = Check::kBadCksum;
            return c;
        }
    }
    c.seq = h->seq.get();
    c.dir = h->dir;
    c.stream = h->stream;
    c.payload_bytes = v.payload_bytes;
    if (h->payload_bytes.get() != v.payload_bytes || v.payload_bytes != payload_len_for(c.seq, o)) {
        c.result = Check::kBadPayload;
        return c;
    }
    for (size_t i = sizeof(TestHdr); i < v.payload_bytes; ++i) {
        if (v.payload[i] != pattern_byte(c.seq, c.stream, i)) {
            c.result = Check::kBadPayload;
            return c;
        }
    }
    c.result = Check::kOk;
    return c;
}

void count(const Checked &c, SelftestStats &st) {
    switch (c.result) {
        case Check::kForeign:
            ++st.foreign;
            break;
        case Check::kBadCksum:
            ++st.bad_cksum;
            break;
        case Check::kBadPayload:
            ++st.bad_payload;
            break;
        case Check::kOk:
            break;
    }
}

// Records an intact frame of stream `s`; a sequence number never sent
// counts as a bad payload, one seen before as a duplicate.
void record(Stream &s, const Checked &c) {
    if (c.seq >= s.next_seq) {
        ++s.st.bad_payload;
        return;
    }
    if (s.seen[c.seq]) {
        ++s.st.duplicates;
        return;
    }
    s.seen[c.seq] = 1;
    ++s.st.received;
    s.st.payload_bytes += c.payload_bytes;
}

// Sends as many new frames of `s` as the window allows; returns an error only
// when frames cannot be built.
Result<void> send_window(Stream &s, rte_mempool *pool, const SelftestOptions &o) {
    rte_mbuf *burst[kBurst];
    while (s.next_seq < o.frames && s.next_seq - s.st.received < o.window_frames) {
        uint16_t n = 0;
        while (n < kBurst && s.next_seq + n < o.frames &&
               s.next_seq + n - s.st.received < o.window_frames) {
            auto m = build_frame(pool, *s.tx, s, s.next_seq + n, o);
            if (!m) {
                rte_pktmbuf_free_bulk(burst, n);
                return m.error();
            }
            burst[n++] = *m;
        }
        const uint16_t sent = s.tx->try_tx_burst(o.queue, burst, n);
        if (sent < n) rte_pktmbuf_free_bulk(burst + sent, n - sent);
        s.next_seq += sent;
        s.st.sent += sent;
        if (sent < n) break;  // device ring full: try again after the next receive
    }
    return {};
}

Stream make_stream(const Port &tx, uint8_t id, const wire::MacAddr &dst_mac,
                   const SelftestOptions &o, bool swap_ips) {
    Stream s;
    s.tx = &tx;
    s.id = id;
    s.spec.src_mac = tx.mac();
    s.spec.dst_mac = dst_mac;
    s.spec.src_ip = swap_ips ? o.dst_ip : o.src_ip;
    s.spec.dst_ip = swap_ips ? o.src_ip : o.dst_ip;
    s.spec.src_port = o.udp_port;
    s.spec.dst_port = o.udp_port;
    s.seen.assign(o.frames, 0);
    return s;
}

Result<void> check_options(const SelftestOptions &o, const Port &p) {
    const uint32_t max_payload =
        uint32_t{p.mtu_bytes()} - sizeof(wire::Ipv4Hdr) - sizeof(wire::UdpHdr);
    if (o.max_payload_bytes > max_payload)
        return Error{
            fmt::format("self-test payload of {} bytes exceeds port '{}' MTU {} (at most {})",
                        o.max_payload_bytes, p.name(), p.mtu_bytes(), max_payload)};
    if (o.window_frames == 0) return Error{"self-test window must be at least 1 frame"};
    return {};
}

}  // namespace

Result<PairStats> selftest_pair(const Port &a, const Port &b, rte_mempool *pool,
                                const SelftestOptions &o) {
    for (const Port *p : {&a, &b})
        if (auto r = check_options(o, *p); !r) return r.error();
    Stream s[2] = {make_stream(a, 0, o.dst_mac.value_or(b.mac()), o, false),
                   make_stream(b, 1, o.dst_mac.value_or(a.mac()), o, true)};
    const Port *rx_port[2] = {&b, &a};  // stream i is received on rx_port[i]
    std::vector<uint8_t> scratch;
    rte_mbuf *burst[kBurst];
    auto last_progress = Clock::now();
    while (s[0].st.received < o.frames || s[1].st.received < o.frames) {
        for (auto &st : s)
            if (auto r = send_window(st, pool, o); !r) return r.error();
        bool progress = false;
        for (int i = 0; i < 2; ++i) {
            const uint16_t n = rx_port[i]->rx_burst(o.queue, burst, kBurst);
            for (uint16_t k = 0; k < n; ++k) {
                Checked c = check_frame(burst[k], o, scratch, s[i].st);
                if (c.result == Check::kOk && c.stream == s[i].id && c.dir == kDirRequest) {
                    record(s[i], c);
                    progress = true;
                } else if (c.result == Check::kOk) {
                    ++s[i].st.bad_payload;  // a frame of the other stream arrived here
                } else {
                    count(c, s[i].st);
                }
            }
            rte_pktmbuf_free_bulk(burst, n);
        }
        if (progress) {
            last_progress = Clock::now();
        } else if (Clock::now() - last_progress > std::chrono::milliseconds(o.idle_timeout_ms)) {
            break;
        }
    }
    return PairStats{s[0].st, s[1].st};
}

Result<SelftestStats> selftest_echo(const Port &port, rte_mempool *, const SelftestOptions &o) {
    if (auto r = check_options(o, port); !r) return r.error();
    SelftestStats st;
    std::vector<uint8_t> scratch;
    rte_mbuf *burst[kBurst];
    rte_mbuf *replies[kBurst];
    auto last_progress = Clock::now();
    // After the last request, keep the port open until the peer goes away or
    // a linger time passes: a device like memif drops what is still in its
    // rings when one side closes.
    for (;;) {
        if (st.received >= o.frames) {
            // Stop polling first: memif unmaps its rings when the peer leaves.
            const auto done_at = Clock::now();
            while (port.link().up && Clock::now() - done_at < std::chrono::milliseconds(kLingerMs))
                mrc::sleep_for_steady(std::chrono::milliseconds(5));
            break;
        }
        const uint16_t n = port.rx_burst(o.queue, burst, kBurst);
        uint16_t nr = 0;
        for (uint16_t k = 0; k < n; ++k) {
            rte_mbuf *m = burst[k];
            Checked c = check_frame(m, o, scratch, st);
            if (c.result != Check::kOk || c.dir != kDirRequest) {
                if (c.result == Check::kOk) ++st.bad_payload;
                count(c, st);
                rte_pktmbuf_free(m);
                continue;
            }
            ++st.received;
            st.payload_bytes += c.payload_bytes;
            // Reply in place: swap addresses, flip the direction, recompute checksums.
            if (rte_pktmbuf_linearize(m) != 0) {
                rte_pktmbuf_free(m);
                continue;
            }
            auto *eth = rte_pktmbuf_mtod(m, wire::EthHdr *);
            std::swap(eth->src, eth->dst);
            eth->src = port.mac();
            auto *ip = reinterpret_cast<wire::Ipv4Hdr *>(eth + 1);
            std::swap(ip->src, ip->dst);
            auto *udp = reinterpret_cast<wire::UdpHdr *>(ip + 1);
            std::swap(udp->src_port, udp->dst_port);
            reinterpret_cast<TestHdr *>(udp + 1)->dir = kDirReply;
            m->ol_flags = 0;
            port.prepare_tx_cksum(m, sizeof(wire::EthHdr), false);
            replies[nr++] = m;
        }
        uint16_t sent = 0;
        for (int tries = 0; sent < nr && tries < 1000; ++tries)
            sent += port.try_tx_burst(o.queue, replies + sent, nr - sent);
        if (sent < nr) rte_pktmbuf_free_bulk(replies + sent, nr - sent);
        st.sent += sent;
        if (nr > 0) {
            last_progress = Clock::now();
        } else if (Clock::now() - last_progress > std::chrono::milliseconds(o.idle_timeout_ms)) {
            break;
        }
    }
    return st;
}

Result<SelftestStats> selftest_ping(const Port &port, rte_mempool *pool, const SelftestOptions &o) {
    if (auto r = check_options(o, port); !r) return r.error();
    Stream s = make_stream(port, 0, o.dst_mac.value_or(kBroadcast), o, false);
    std::vector<uint8_t> scratch;
    rte_mbuf *burst[kBurst];
    auto last_progress = Clock::now();
    while (s.st.received < o.frames) {
        if (auto r = send_window(s, pool, o); !r) return r.error();
        const uint16_t n = port.rx_burst(o.queue, burst, kBurst);
        bool progress = false;
        for (uint16_t k = 0; k < n; ++k) {
            Checked c = check_frame(burst[k], o, scratch, s.st);
            if (c.result == Check::kOk && c.dir == kDirReply && c.stream == s.id) {
                record(s, c);
                progress = true;
            } else if (c.result == Check::kOk) {
                ++s.st.foreign;  // our own request looped back by a hub-like device
            } else {
                count(c, s.st);
            }
        }
        rte_pktmbuf_free_bulk(burst, n);
        if (progress) {
            last_progress = Clock::now();
        } else if (Clock::now() - last_progress > std::chrono::milliseconds(o.idle_timeout_ms)) {
            break;
        }
    }
    return s.st;
}

}  // namespace mrc::drivers
