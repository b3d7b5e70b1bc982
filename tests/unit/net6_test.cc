// Scope: IPv6 in lib/wire (issue 20 item 3, the wire layer): the header,
// the UDP checksum over its pseudo header, the frame writer with the EV in
// the flow label, the two-family parser with its extension-header walk
// (every truncation, every refusal), CE marking, and the address text forms.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "wire/addr.h"
#include "wire/net.h"

namespace mrc::wire {
namespace {

const Ipv6Addr kSrc = *parse_ipv6("2001:db8:0:1::a");
const Ipv6Addr kDst = *parse_ipv6("2001:db8:0:2::b");

std::vector<uint8_t> make_frame6(uint16_t payload, uint16_t ev = 0xc123, uint8_t tc = 0x2a) {
    std::vector<uint8_t> f(kEthIpv6UdpBytes + payload);
    for (size_t i = kEthIpv6UdpBytes; i < f.size(); ++i)
        f[i] = static_cast<uint8_t>(i * 7 + 3);
    Udp6FrameSpec s;
    s.src_mac = {{2, 0, 0, 0, 0, 1}};
    s.dst_mac = {{2, 0, 0, 0, 0, 2}};
    s.src_ip = kSrc;
    s.dst_ip = kDst;
    s.src_port = ev;
    s.dst_port = 4797;
    s.traffic_class = tc;
    s.flow_label = flow_label_of_ev(ev);
    write_eth_ipv6_udp(f.data(), s, payload);
    fill_udp_checksum(f.data());
    return f;
}

// RFC 1071 over 16-bit big-endian words, as the IPv4 tests' reference.
uint16_t reference_sum(const std::vector<uint8_t> &d) {
    uint64_t s = 0;
    for (size_t i = 0; i < d.size(); i += 2)
        s += uint16_t(d[i] << 8 | (i + 1 < d.size() ? d[i + 1] : 0));
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return static_cast<uint16_t>(s);
}

// Inserts extension headers (each: next header, length, padding to its
// size) between the IPv6 header and UDP, fixing next headers and lengths.
std::vector<uint8_t> with_ext(const std::vector<uint8_t> &f,
                              const std::vector<std::pair<uint8_t, uint8_t>> &exts) {
    const size_t at = sizeof(EthHdr) + sizeof(Ipv6Hdr);
    std::vector<uint8_t> out(f.begin(), f.begin() + long(at));
    std::vector<uint8_t> chain;
    uint8_t first = kIpProtoUdp;
    for (size_t k = 0; k < exts.size(); ++k) {
        const auto [type, units] = exts[k];
        if (k == 0) first = type;
        const uint8_t next = k + 1 < exts.size() ? exts[k + 1].first : kIpProtoUdp;
        std::vector<uint8_t> h((size_t(units) + 1) * 8, 0);
        h[0] = next;
        h[1] = units;
        if (h.size() > 2) h[2] = 1;  // a PadN option's type, harmless here
        chain.insert(chain.end(), h.begin(), h.end());
    }
    out.insert(out.end(), chain.begin(), chain.end());
    out.insert(out.end(), f.begin() + long(at), f.end());
    auto *ip = reinterpret_cast<Ipv6Hdr *>(out.data() + sizeof(EthHdr));
    ip->next_header = first;
    ip->payload_length.set(static_cast<uint16_t>(ip->payload_length.get() + chain.size()));
    return out;
}

TEST(Ipv6, FrameRoundTripsWithTheEvInTheFlowLabel) {
    for (uint16_t payload : {0, 1, 2, 17, 1000, 1452, 8948}) {
        const auto f = make_frame6(payload, 0xd00d, 0x2a);
        UdpView v;
        ASSERT_EQ(parse_eth_ip_udp(f.data(), f.size(), f.size(), &v, Checksums::kVerify),
                  NetError::kOk)
            << payload;
        ASSERT_TRUE(v.is_ipv6());
        EXPECT_EQ(v.ip, nullptr);
        EXPECT_EQ(ipv6_version(*v.ip6), 6);
        EXPECT_EQ(ipv6_traffic_class(*v.ip6), 0x2a);
        EXPECT_EQ(ipv6_flow_label(*v.ip6), 0xd00du);
        EXPECT_EQ(v.ip6->src, kSrc);
        EXPECT_EQ(v.ip6->dst, kDst);
        EXPECT_EQ(v.ip6->hop_limit, 64);
        EXPECT_EQ(v.udp->src_port.get(), 0xd00d);
        EXPECT_EQ(v.udp->dst_port.get(), 4797);
        EXPECT_EQ(v.payload_bytes, payload);
        EXPECT_EQ(v.payload, f.data() + kEthIpv6UdpBytes);
        EXPECT_EQ(v.l3_bytes, sizeof(Ipv6Hdr));
        EXPECT_EQ(v.ext_headers, 0);
    }
}

TEST(Ipv6, UdpChecksumMatchesTheReferenceOverThePseudoHeader) {
    for (uint16_t payload : {0, 1, 33, 1000}) {
        const auto f = make_frame6(payload);
        const uint16_t udp_len = static_cast<uint16_t>(sizeof(UdpHdr) + payload);
        // Source, destination, 32-bit length, 3 zero bytes, next header 17.
        std::vector<uint8_t> d(kSrc.b, kSrc.b + 16);
        d.insert(d.end(), kDst.b, kDst.b + 16);
        d.insert(d.end(), {0, 0, uint8_t(udp_len >> 8), uint8_t(udp_len), 0, 0, 0, 17});
        d.insert(d.end(), f.begin() + long(sizeof(EthHdr) + sizeof(Ipv6Hdr)), f.end());
        const size_t field = 32 + 8 + 6;  // the checksum inside d
        const uint16_t sent = uint16_t(d[field] << 8 | d[field + 1]);
        d[field] = d[field + 1] = 0;
        uint16_t want = static_cast<uint16_t>(~reference_sum(d));
        if (want == 0) want = 0xffff;
        EXPECT_EQ(sent, want) << payload;
        EXPECT_NE(sent, 0) << "never zero over IPv6";
    }
}

TEST(Ipv6, EveryTruncationIsRejected) {
    const auto plain = make_frame6(40);
    const auto ext = with_ext(plain, {{kIpv6HopByHop, 0}, {kIpv6DestOpts, 1}});
    for (const auto *f : {&plain, &ext}) {
        for (size_t len = 0; len < f->size(); ++len) {
            std::vector<uint8_t> cut(f->begin(), f->begin() + long(len));
            UdpView v;
            EXPECT_NE(parse_eth_ip_udp(cut.data(), cut.size(), cut.size(), &v, Checksums::kVerify),
                      NetError::kOk)
                << "length " << len;
            // Headers cut short while the frame's remaining bytes are elsewhere.
            if (len < f->size())
                (void)parse_eth_ip_udp(cut.data(), cut.size(), f->size(), &v, Checksums::kSkip);
        }
    }
}

TEST(Ipv6, ExtensionHeadersAreWalkedPastAndCounted) {
    const auto f = make_frame6(64);
    const auto e = with_ext(f, {{kIpv6HopByHop, 0}, {kIpv6Routing, 2}, {kIpv6DestOpts, 0}});
    // The UDP checksum does not cover extension headers: still valid.
    UdpView v;
    ASSERT_EQ(parse_eth_ip_udp(e.data(), e.size(), e.size(), &v, Checksums::kVerify),
              NetError::kOk);
    EXPECT_EQ(v.ext_headers, 3);
    EXPECT_EQ(v.l3_bytes, sizeof(Ipv6Hdr) + 8 + 24 + 8);
    EXPECT_EQ(v.payload_bytes, 64);
    EXPECT_EQ(0, std::memcmp(v.payload, f.data() + kEthIpv6UdpBytes, 64));
    // The headers in the first part, the payload elsewhere.
    const size_t head = sizeof(EthHdr) + v.l3_bytes + sizeof(UdpHdr);
    ASSERT_EQ(parse_eth_ip_udp(e.data(), head, e.size(), &v), NetError::kOk);
    EXPECT_EQ(v.payload_bytes, 64);
}

TEST(Ipv6, RefusesWhatMrcDoesNotTake) {
    const auto f = make_frame6(16);
    UdpView v;
    auto parse = [&](const std::vector<uint8_t> &x) {
        return parse_eth_ip_udp(x.data(), x.size(), x.size(), &v, Checksums::kVerify);
    };
    EXPECT_EQ(parse(with_ext(f, {{kIpv6Fragment, 0}})), NetError::kFragment);
    EXPECT_EQ(parse(with_ext(f, {{kIpv6DestOpts, 0}, {kIpv6Fragment, 0}})), NetError::kFragment);
    EXPECT_EQ(parse(with_ext(f, {{kIpv6Esp, 0}})), NetError::kIpv6ExtRefused);
    EXPECT_EQ(parse(with_ext(f, {{kIpv6Auth, 0}})), NetError::kIpv6ExtRefused);
    EXPECT_EQ(parse(with_ext(f, {{253, 0}})), NetError::kIpv6ExtRefused) << "an unknown header";
    EXPECT_EQ(parse(with_ext(f, {{kIpv6DestOpts, 0}, {kIpv6HopByHop, 0}})),
              NetError::kIpv6ExtRefused)
        << "hop-by-hop only first";
    std::vector<std::pair<uint8_t, uint8_t>> many(kIpv6MaxExtHeaders, {kIpv6DestOpts, 0});
    EXPECT_EQ(parse(with_ext(f, many)), NetError::kOk);
    many.push_back({kIpv6DestOpts, 0});
    EXPECT_EQ(parse(with_ext(f, many)), NetError::kIpv6ExtRefused) << "too many";

    auto x = f;
    reinterpret_cast<Ipv6Hdr *>(x.data() + sizeof(EthHdr))->next_header = kIpv6NoNext;
    EXPECT_EQ(parse(x), NetError::kNotUdp);
    x = f;
    reinterpret_cast<Ipv6Hdr *>(x.data() + sizeof(EthHdr))->next_header = 6;  // TCP
    EXPECT_EQ(parse(x), NetError::kNotUdp);
    x = f;
    x[sizeof(EthHdr)] = 0x46;  // version 4 in an IPv6 ether type
    EXPECT_EQ(parse(x), NetError::kBadIpv6Header);
    x = f;
    auto *ip = reinterpret_cast<Ipv6Hdr *>(x.data() + sizeof(EthHdr));
    ip->payload_length.set(uint16_t(ip->payload_length.get() + 1));  // past the frame
    EXPECT_EQ(parse(x), NetError::kTruncated);
    x = with_ext(f, {{kIpv6DestOpts, 0}});
    x[sizeof(EthHdr) + sizeof(Ipv6Hdr) + 1] = 200;  // its length past the payload
    EXPECT_EQ(parse(x), NetError::kBadIpv6Header);
    x = f;
    x[sizeof(EthHdr) + sizeof(Ipv6Hdr) + 5] = 9;  // UDP length shorter than the payload
    EXPECT_EQ(parse(x), NetError::kBadUdpLength);
    x = f;
    x[12] = 0x88;  // neither family
    x[13] = 0x47;
    EXPECT_EQ(parse(x), NetError::kNotIp);
}

TEST(Ipv6, ZeroOrWrongUdpChecksumIsRefusedWhenVerifying) {
    auto f = make_frame6(30);
    const size_t c = sizeof(EthHdr) + sizeof(Ipv6Hdr) + 6;
    UdpView v;
    auto z = f;
    z[c] = z[c + 1] = 0;
    EXPECT_EQ(parse_eth_ip_udp(z.data(), z.size(), z.size(), &v, Checksums::kVerify),
              NetError::kBadUdpChecksum)
        << "zero is invalid over IPv6 (RFC 8200 8.1)";
    EXPECT_EQ(parse_eth_ip_udp(z.data(), z.size(), z.size(), &v, Checksums::kSkip), NetError::kOk);
    // Every bit of the addresses, the UDP header and the payload is covered.
    size_t caught = 0, tried = 0;
    for (size_t byte = sizeof(EthHdr) + 8; byte < f.size(); ++byte) {
        if (byte == c - 2 || byte == c - 1) continue;  // UDP length: fails its own check
        for (int bit = 0; bit < 8; ++bit) {
            auto x = f;
            x[byte] ^= uint8_t(1u << bit);
            ++tried;
            caught += parse_eth_ip_udp(x.data(), x.size(), x.size(), &v, Checksums::kVerify) !=
                      NetError::kOk;
        }
    }
    EXPECT_EQ(caught, tried);
}

TEST(Ipv6, VlanTaggedAndIpv4FramesGoThroughTheSameParser) {
    const auto f = make_frame6(20);
    std::vector<uint8_t> t(f.begin(), f.begin() + 12);
    t.insert(t.end(), {0x81, 0x00, 0x00, 0x07, 0x86, 0xdd});
    t.insert(t.end(), f.begin() + 14, f.end());
    UdpView v;
    ASSERT_EQ(parse_eth_ip_udp(t.data(), t.size(), t.size(), &v, Checksums::kVerify),
              NetError::kOk);
    EXPECT_EQ(v.l2_bytes, 18);
    EXPECT_EQ(v.payload_bytes, 20);

    std::vector<uint8_t> f4(kEthIpv4UdpBytes + 12, 0x5a);
    UdpFrameSpec s4;
    s4.src_ip = ipv4(10, 0, 0, 1);
    s4.dst_ip = ipv4(10, 0, 0, 2);
    s4.dst_port = 4797;
    write_eth_ipv4_udp(f4.data(), s4, 12);
    fill_udp_checksum(f4.data());
    ASSERT_EQ(parse_eth_ip_udp(f4.data(), f4.size(), f4.size(), &v, Checksums::kVerify),
              NetError::kOk);
    EXPECT_FALSE(v.is_ipv6());
    EXPECT_EQ(v.ip->dst.get(), ipv4(10, 0, 0, 2));
    EXPECT_EQ(v.payload_bytes, 12);
    // The IPv4-only parser still says what an IPv6 frame is to it.
    EXPECT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v), NetError::kNotIpv4);
}

TEST(Ipv6, CeMarkingKeepsTheFlowLabelAndLeavesNonEctAlone) {
    auto f = make_frame6(8, 0xbeef, 0x28 | kEcnEct0);
    auto *ip = reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr));
    EXPECT_TRUE(mark_ce(*ip));
    EXPECT_EQ(ipv6_traffic_class(*ip), 0x28 | kEcnCe);
    EXPECT_EQ(ipv6_flow_label(*ip), 0xbeefu);
    EXPECT_EQ(ipv6_version(*ip), 6);
    EXPECT_FALSE(mark_ce(*ip)) << "already marked";
    UdpView v;
    EXPECT_EQ(parse_eth_ip_udp(f.data(), f.size(), f.size(), &v, Checksums::kVerify), NetError::kOk)
        << "no header checksum to mend";
    auto n = make_frame6(8, 1, 0x28);
    EXPECT_FALSE(mark_ce(*reinterpret_cast<Ipv6Hdr *>(n.data() + sizeof(EthHdr))));
}

TEST(Ipv6Text, TakesTheRfc4291FormsAndPrintsRfc5952) {
    const struct {
        const char *in, *out;
    } ok[] = {
        {"::", "::"},
        {"::1", "::1"},
        {"1::", "1::"},
        {"fe80::1", "fe80::1"},
        {"2001:DB8:0:0:8:800:200C:417A", "2001:db8::8:800:200c:417a"},
        {"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
        {"1:0:0:2:0:0:0:3", "1:0:0:2::3"},       // the longest run
        {"1:0:0:2:0:0:3:4", "1::2:0:0:3:4"},     // the first of equal runs
        {"1:2:3:4:5:6:0:8", "1:2:3:4:5:6:0:8"},  // one zero group stays
        {"1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"},
        {"::ffff:10.0.0.1", "::ffff:a00:1"},
        {"64:ff9b::192.0.2.33", "64:ff9b::c000:221"},
    };
    for (const auto &c : ok) {
        const auto a = parse_ipv6(c.in);
        ASSERT_TRUE(a.has_value()) << c.in;
        EXPECT_EQ(ipv6_string(*a), c.out) << c.in;
        EXPECT_EQ(parse_ipv6(ipv6_string(*a)), a) << "its own output parses back: " << c.in;
    }
    EXPECT_EQ(parse_ipv6("2001:db8::1")->b[0], 0x20);
    EXPECT_EQ(parse_ipv6("2001:db8::1")->b[15], 1);
    for (const char *bad : {"",
                            ":",
                            ":::",
                            "1",
                            "1:",
                            ":1",
                            "1::2::3",
                            "12345::",
                            "g::",
                            "1:2:3:4:5:6:7:8:9",
                            "1:2:3:4:5:6:7",
                            "1::2:3:4:5:6:7:8",
                            "::1.2.3",
                            "::1.2.3.4:5",
                            "1.2.3.4",
                            " ::1",
                            "::1 ",
                            "fe80::1%eth0",
                            "2001:db8::/64",
                            "1:2:3:4:5:6:7:8::",
                            "::ffff:256.0.0.1"})
        EXPECT_FALSE(parse_ipv6(bad).has_value()) << "'" << bad << "'";
}

}  // namespace
}  // namespace mrc::wire
