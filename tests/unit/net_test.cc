// Scope: Ethernet/IPv4/UDP headers, the Internet checksum and the validating
// parser in lib/wire/net.h. No DPDK.
#include <gtest/gtest.h>

#include <algorithm>

#include <random>
#include <vector>

#include "wire/addr.h"
#include "wire/net.h"

namespace mrc::wire {
namespace {

// Straightforward RFC 1071 reference: 16-bit big-endian words, carries folded.
uint16_t reference_sum(const std::vector<uint8_t> &d) {
    uint64_t s = 0;  // wide enough for any test buffer
    for (size_t i = 0; i < d.size(); i += 2) {
        uint16_t w = static_cast<uint16_t>(d[i] << 8);
        if (i + 1 < d.size()) w |= d[i + 1];
        s += w;
    }
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return static_cast<uint16_t>(s);
}

TEST(Checksum, MatchesReferenceForEveryLength) {
    std::mt19937 rng(7);
    for (size_t len = 0; len < 300; ++len) {
        std::vector<uint8_t> d(len);
        for (auto &b : d)
            b = static_cast<uint8_t>(rng());
        const uint16_t fast = csum_fold(csum_add(0, d.data(), d.size()));
        ASSERT_EQ(fast, reference_sum(d)) << "length " << len;
    }
}

TEST(Checksum, CopyAndSumInOnePassMatchesEveryLengthAndOffset) {
    std::mt19937 rng(11);
    for (size_t len = 0; len < 200; ++len)
        for (size_t off = 0; off < 3; ++off) {
            std::vector<uint8_t> src(len + off), dst(len + 8, 0xee);
            for (auto &b : src)
                b = static_cast<uint8_t>(rng());
            const uint64_t start = rng();  // a running sum from earlier buffers
            const uint64_t got = csum_copy(dst.data(), src.data() + off, len, start);
            ASSERT_EQ(csum_fold(got), csum_fold(csum_add(start, src.data() + off, len)))
                << "length " << len << " offset " << off;
            ASSERT_TRUE(std::equal(src.begin() + long(off), src.end(), dst.begin()));
            ASSERT_EQ(dst[len], 0xee) << "wrote past the end";
        }
}

TEST(Checksum, LongRunsOfOnesDoNotOverflowTheAccumulators) {
    std::vector<uint8_t> d(1 << 20, 0xff);
    EXPECT_EQ(csum_fold(csum_add(0, d.data(), d.size())), 0xffff);
    d[12345] = 0x01;
    std::vector<uint8_t> small(d.begin(), d.end());
    EXPECT_EQ(csum_fold(csum_add(0, d.data(), d.size())), reference_sum(small));
}

TEST(Checksum, AllOnesCarriesFold) {
    std::vector<uint8_t> d(64, 0xff);
    EXPECT_EQ(csum_fold(csum_add(0, d.data(), d.size())), 0xffff);
}

TEST(Checksum, KnownIpv4Header) {
    // Example header from RFC 1071 discussions / Wikipedia: checksum 0xb861.
    const uint8_t hdr[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                             0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    EXPECT_EQ(ipv4_header_checksum(*reinterpret_cast<const Ipv4Hdr *>(hdr)), 0xb861);
}

std::vector<uint8_t> make_frame(uint16_t payload, uint8_t fill = 0xab) {
    std::vector<uint8_t> f(kEthIpv4UdpBytes + payload, fill);
    UdpFrameSpec spec;
    spec.src_mac = {{2, 0, 0, 0, 0, 1}};
    spec.dst_mac = {{2, 0, 0, 0, 0, 2}};
    spec.src_ip = ipv4(10, 0, 0, 1);
    spec.dst_ip = ipv4(10, 0, 0, 2);
    spec.src_port = 0xc001;
    spec.dst_port = 4797;
    write_eth_ipv4_udp(f.data(), spec, payload);
    fill_udp_checksum(f.data());
    return f;
}

TEST(Parse, RoundTripWithChecksums) {
    for (uint16_t payload : {0, 1, 2, 17, 1000, 1472}) {
        auto f = make_frame(payload);
        UdpView v;
        ASSERT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v, Checksums::kVerify), NetError::kOk);
        EXPECT_EQ(v.payload_bytes, payload);
        EXPECT_EQ(v.udp->dst_port.get(), 4797);
        EXPECT_EQ(v.udp->src_port.get(), 0xc001);
        EXPECT_EQ(v.ip->src.get(), ipv4(10, 0, 0, 1));
        EXPECT_EQ(v.payload, f.data() + kEthIpv4UdpBytes);
    }
}

TEST(Parse, EveryTruncationIsRejected) {
    auto f = make_frame(100);
    for (size_t len = 0; len < f.size(); ++len) {
        // A copy of exactly `len` bytes, so a read past the end is visible to ASan.
        std::vector<uint8_t> cut(f.begin(), f.begin() + static_cast<long>(len));
        UdpView v;
        EXPECT_NE(parse_eth_ipv4_udp(cut.data(), cut.size(), &v, Checksums::kVerify), NetError::kOk)
            << "length " << len;
    }
}

TEST(Parse, EthernetPaddingIsIgnored) {
    auto f = make_frame(4);
    f.resize(60, 0);  // minimum Ethernet frame
    UdpView v;
    ASSERT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v, Checksums::kVerify), NetError::kOk);
    EXPECT_EQ(v.payload_bytes, 4);
}

TEST(Parse, SingleBitFlipsAreCaughtByChecksums) {
    auto good = make_frame(64);
    // Flip each bit of the IP header (after the length fields, which fail
    // earlier checks) and of the payload.
    size_t caught = 0, tried = 0;
    for (size_t byte = sizeof(EthHdr); byte < good.size(); ++byte) {
        for (int bit = 0; bit < 8; ++bit) {
            auto f = good;
            f[byte] ^= static_cast<uint8_t>(1u << bit);
            UdpView v;
            ++tried;
            if (parse_eth_ipv4_udp(f.data(), f.size(), &v, Checksums::kVerify) != NetError::kOk)
                ++caught;
        }
    }
    EXPECT_EQ(caught, tried);
}

TEST(Parse, RejectsWhatMrcNeverSends) {
    UdpView v;
    auto f = make_frame(10);
    f[12] = 0x86;  // IPv6 ether type
    f[13] = 0xdd;
    EXPECT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v), NetError::kNotIpv4);

    f = make_frame(10);
    f[sizeof(EthHdr) + 9] = 6;  // TCP
    EXPECT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v), NetError::kNotUdp);

    f = make_frame(10);
    f[sizeof(EthHdr) + 6] = 0x20;  // more fragments
    EXPECT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v), NetError::kFragment);

    f = make_frame(10);
    f[sizeof(EthHdr)] = 0x44;  // IHL 4
    EXPECT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v), NetError::kBadIpHeader);

    f = make_frame(10);
    f[sizeof(EthHdr) + sizeof(Ipv4Hdr) + 5] = 9;  // UDP length shorter than the datagram
    EXPECT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v), NetError::kBadUdpLength);

    f = make_frame(10);
    f[sizeof(EthHdr) + 3] = 0xff;  // IP total length beyond the frame
    EXPECT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v), NetError::kTruncated);
}

TEST(Parse, OneVlanTag) {
    auto f = make_frame(20);
    std::vector<uint8_t> t(f.begin(), f.begin() + 12);
    t.insert(t.end(), {0x81, 0x00, 0x00, 0x05});
    t.insert(t.end(), f.begin() + 12, f.end());
    UdpView v;
    ASSERT_EQ(parse_eth_ipv4_udp(t.data(), t.size(), &v, Checksums::kVerify), NetError::kOk);
    EXPECT_EQ(v.l2_bytes, 18);
    EXPECT_EQ(v.payload_bytes, 20);
}

TEST(Parse, ZeroUdpChecksumMeansNone) {
    auto f = make_frame(30);
    f[sizeof(EthHdr) + sizeof(Ipv4Hdr) + 6] = 0;
    f[sizeof(EthHdr) + sizeof(Ipv4Hdr) + 7] = 0;
    UdpView v;
    EXPECT_EQ(parse_eth_ipv4_udp(f.data(), f.size(), &v, Checksums::kVerify), NetError::kOk);
}

TEST(Parse, PseudoHeaderSumCompletesToFullChecksum) {
    // What an offloading NIC does: start from the pseudo-header sum in the
    // field and add the UDP header and payload.
    auto f = make_frame(77);
    auto *ip = reinterpret_cast<Ipv4Hdr *>(f.data() + sizeof(EthHdr));
    auto *udp = reinterpret_cast<UdpHdr *>(f.data() + sizeof(EthHdr) + sizeof(Ipv4Hdr));
    const uint16_t full = udp->checksum.get();
    udp->checksum.set(ipv4_udp_pseudo_sum(*ip, udp->length.get()));
    const uint16_t nic = static_cast<uint16_t>(~csum_fold(csum_add(0, udp, udp->length.get())));
    EXPECT_EQ(nic == 0 ? 0xffff : nic, full);
}

}  // namespace
}  // namespace mrc::wire

namespace mrc::wire {
namespace {

TEST(AddrText, Ipv4TakesExactlyADottedQuad) {
    EXPECT_EQ(parse_ipv4("10.0.1.2"), ipv4(10, 0, 1, 2));
    EXPECT_EQ(parse_ipv4("255.255.255.255"), 0xffffffffu);
    EXPECT_EQ(parse_ipv4("0.0.0.0"), 0u);
    for (const char *bad :
         {"", "10.0.1", "10.0.1.2.3", "10.0.1.256", "10.0.1.2x", " 10.0.1.2", "10.0.1.2 ",
          "10..1.2", "+1.0.1.2", "10.0.1.0002", "a.b.c.d", "10.0.1."})
        EXPECT_FALSE(parse_ipv4(bad)) << bad;
    for (uint32_t ip : {0u, 1u, 0x0a000102u, 0xc0a80001u, 0xffffffffu})
        EXPECT_EQ(parse_ipv4(ipv4_string(ip)), ip);
}

TEST(AddrText, MacTakesSixHexGroupsAndNothingElse) {
    auto m = parse_mac("02:00:0a:FF:7:e");
    ASSERT_TRUE(m);
    EXPECT_EQ(mac_string(*m), "02:00:0a:ff:07:0e");
    for (const char *bad : {"", "02:00:0a:ff:07", "02:00:0a:ff:07:0e:01", "02:00:0a:ff:07:0e ",
                            "02:00:0a:ff:07:0ex", "02:00:0a:ff:07:100", "02-00-0a-ff-07-0e",
                            "0x2:00:0a:ff:07:0e", "02:00::ff:07:0e", " 02:00:0a:ff:07:0e"})
        EXPECT_FALSE(parse_mac(bad)) << bad;
    EXPECT_EQ(parse_mac(mac_string(*m)), m);
}

}  // namespace
}  // namespace mrc::wire
