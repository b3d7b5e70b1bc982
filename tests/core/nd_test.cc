// Scope: IPv6 neighbour discovery and ICMPv6 echo for a plane's own address
// (lib/wire/host.h answer_host6, write_nd_solicit, write_nd_announce) and
// the IPv6 plane route (wire/neighbor.h Route6): a solicitation for the
// address gets a solicited advert naming the port's MAC, a duplicate-address
// probe an advert to all nodes, adverts and other solicitations teach, and
// everything RFC 4861 7.1 calls invalid (hop limit, code, checksum,
// options, multicast target, every truncation) is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "wire/addr.h"
#include "wire/host.h"
#include "wire/neighbor.h"

namespace mrc::wire {
namespace {

const MacAddr kMe{{0x02, 0, 0, 0, 0, 0x0a}};
const MacAddr kPeer{{0x02, 0, 0, 0, 0, 0x0b}};
const Ipv6Addr kMyIp = *parse_ipv6("2001:db8:1::1");
const Ipv6Addr kPeerIp = *parse_ipv6("2001:db8:1::fe");
const Ipv6Addr kLinkLocal = *parse_ipv6("fe80::2:ff:fe00:b");

const Ipv6Hdr &ip6_of(const std::vector<uint8_t> &f) {
    return *reinterpret_cast<const Ipv6Hdr *>(f.data() + sizeof(EthHdr));
}
uint8_t *icmp_of(std::vector<uint8_t> &f) {
    return f.data() + sizeof(EthHdr) + sizeof(Ipv6Hdr);
}
// Stores the ICMPv6 checksum again after a test changed the message.
void recompute(std::vector<uint8_t> &f) {
    uint8_t *icmp = icmp_of(f);
    const uint32_t n = ip6_of(f).payload_length.get();
    icmp[2] = icmp[3] = 0;
    const uint16_t c = icmp6_checksum(ip6_of(f).src, ip6_of(f).dst, icmp, n);
    icmp[2] = uint8_t(c >> 8);
    icmp[3] = uint8_t(c);
}

// A solicitation for `target` from the peer at `src` (source option set).
std::vector<uint8_t> solicit(const Ipv6Addr &src, const Ipv6Addr &target) {
    std::vector<uint8_t> f(kNdFrameBytes);
    EXPECT_EQ(write_nd_solicit(f.data(), kPeer, src, target), kNdFrameBytes);
    return f;
}

// An echo request from the peer to `dst` with `data` bytes of data.
std::vector<uint8_t> echo6(const Ipv6Addr &dst, uint32_t data) {
    std::vector<uint8_t> f(sizeof(EthHdr) + sizeof(Ipv6Hdr) + 8 + data, 0);
    auto *eth = reinterpret_cast<EthHdr *>(f.data());
    eth->dst = kMe;
    eth->src = kPeer;
    eth->ether_type.set(kEtherTypeIpv6);
    auto *ip = reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr));
    ipv6_set_vtc_flow(*ip, 0, 0x12345);
    ip->payload_length.set(uint16_t(8 + data));
    ip->next_header = kIpProtoIcmpv6;
    ip->hop_limit = 64;
    ip->src = kPeerIp;
    ip->dst = dst;
    uint8_t *icmp = icmp_of(f);
    icmp[0] = kIcmp6EchoRequest;
    icmp[4] = 0x12;  // identifier
    icmp[5] = 0x34;
    icmp[7] = 9;  // sequence
    for (uint32_t i = 0; i < data; ++i)
        icmp[8 + i] = uint8_t(i * 7 + 1);
    recompute(f);
    return f;
}

struct Out {
    std::vector<uint8_t> buf = std::vector<uint8_t>(kMaxHostAnswerBytes);
    uint32_t len = 0;
    NdFrom from;
    HostAnswer of(const std::vector<uint8_t> &f, uint32_t n = UINT32_MAX) {
        return answer_host6(f.data(), std::min<uint32_t>(n, uint32_t(f.size())), kMe, kMyIp,
                            buf.data(), uint32_t(buf.size()), &len, &from);
    }
    std::vector<uint8_t> answer() const { return {buf.begin(), buf.begin() + len}; }
};

TEST(Nd, ASolicitationWrittenHereIsWellFormed) {
    const auto f = solicit(kPeerIp, kMyIp);
    const auto *eth = reinterpret_cast<const EthHdr *>(f.data());
    // To the target's solicited-node group (ff02::1:ff00:1), on its MAC.
    EXPECT_EQ(ipv6_string(ip6_of(f).dst), "ff02::1:ff00:1");
    EXPECT_EQ(mac_string(eth->dst), "33:33:ff:00:00:01");
    EXPECT_EQ(eth->ether_type.get(), kEtherTypeIpv6);
    EXPECT_EQ(ip6_of(f).hop_limit, 255);
    EXPECT_EQ(ip6_of(f).next_header, kIpProtoIcmpv6);
    EXPECT_EQ(ip6_of(f).payload_length.get(), 32);
    auto g = f;
    EXPECT_EQ(icmp6_checksum(ip6_of(g).src, ip6_of(g).dst, icmp_of(g), 32), 0) << "checksum";
    EXPECT_EQ(icmp_of(g)[0], kNdNeighborSolicit);
    EXPECT_EQ(std::memcmp(icmp_of(g) + 8, kMyIp.b, 16), 0) << "target";
    EXPECT_EQ(icmp_of(g)[24], kNdOptSourceLinkAddr);
    EXPECT_EQ(std::memcmp(icmp_of(g) + 26, kPeer.b, 6), 0);
}

TEST(Nd, ASolicitationForTheAddressGetsASolicitedAdvertAndTeachesTheSender) {
    for (const Ipv6Addr &src : {kPeerIp, kLinkLocal}) {
        Out o;
        ASSERT_EQ(o.of(solicit(src, kMyIp)), HostAnswer::kNdAdvert);
        ASSERT_EQ(o.len, kNdFrameBytes);
        EXPECT_TRUE(o.from.valid);
        EXPECT_FALSE(o.from.advert);
        EXPECT_EQ(o.from.ip, src);
        EXPECT_EQ(o.from.mac, kPeer);
        auto a = o.answer();
        const auto *eth = reinterpret_cast<const EthHdr *>(a.data());
        EXPECT_EQ(eth->dst, kPeer);
        EXPECT_EQ(eth->src, kMe);
        EXPECT_EQ(ip6_of(a).src, kMyIp);
        EXPECT_EQ(ip6_of(a).dst, src);
        EXPECT_EQ(ip6_of(a).hop_limit, 255);
        EXPECT_EQ(icmp6_checksum(ip6_of(a).src, ip6_of(a).dst, icmp_of(a), 32), 0);
        EXPECT_EQ(icmp_of(a)[0], kNdNeighborAdvert);
        EXPECT_EQ(icmp_of(a)[4], kNdFlagSolicited | kNdFlagOverride) << "not a router";
        EXPECT_EQ(std::memcmp(icmp_of(a) + 8, kMyIp.b, 16), 0);
        EXPECT_EQ(icmp_of(a)[24], kNdOptTargetLinkAddr);
        EXPECT_EQ(std::memcmp(icmp_of(a) + 26, kMe.b, 6), 0);
        // The advert, received by the peer, teaches it this host's MAC.
        NdFrom learned;
        uint32_t n = 0;
        std::vector<uint8_t> scratch(kMaxHostAnswerBytes);
        EXPECT_EQ(answer_host6(a.data(), uint32_t(a.size()), kPeer, src, scratch.data(),
                               uint32_t(scratch.size()), &n, &learned),
                  HostAnswer::kNdLearned);
        EXPECT_TRUE(learned.advert && learned.solicited);
        EXPECT_EQ(learned.ip, kMyIp);
        EXPECT_EQ(learned.mac, kMe);
        EXPECT_EQ(n, 0u);
    }
}

TEST(Nd, ADuplicateAddressProbeIsAnsweredToAllNodes) {
    // From ::, to the solicited-node group, no source option (RFC 4862 5.4.2).
    auto f = solicit(kPeerIp, kMyIp);
    std::memset(reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr))->src.b, 0, 16);
    reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr))->payload_length.set(24);
    f.resize(f.size() - 8);
    recompute(f);
    Out o;
    ASSERT_EQ(o.of(f), HostAnswer::kNdAdvert);
    EXPECT_FALSE(o.from.valid) << "nothing to learn from the unspecified address";
    auto a = o.answer();
    EXPECT_EQ(ipv6_string(ip6_of(a).dst), "ff02::1");
    EXPECT_EQ(mac_string(reinterpret_cast<const EthHdr *>(a.data())->dst), "33:33:00:00:00:01");
    EXPECT_EQ(icmp_of(a)[4], kNdFlagOverride) << "not solicited";
    // A probe with a source option is invalid (RFC 4861 7.1.1).
    auto g = solicit(kPeerIp, kMyIp);
    std::memset(reinterpret_cast<Ipv6Hdr *>(g.data() + sizeof(EthHdr))->src.b, 0, 16);
    recompute(g);
    EXPECT_EQ(o.of(g), HostAnswer::kMalformed);
}

TEST(Nd, OtherNdTeachesOrIsIgnoredAndIsNeverAnswered) {
    Out o;
    // A solicitation for another address: its sender is learned, no answer.
    EXPECT_EQ(o.of(solicit(kPeerIp, *parse_ipv6("2001:db8:1::9"))), HostAnswer::kNdLearned);
    EXPECT_EQ(o.len, 0u);
    EXPECT_EQ(o.from.ip, kPeerIp);
    // An unsolicited advert (a neighbour announcing a new MAC).
    std::vector<uint8_t> ann(kNdFrameBytes);
    ASSERT_EQ(write_nd_announce(ann.data(), kPeer, kPeerIp), kNdFrameBytes);
    EXPECT_EQ(ipv6_string(ip6_of(ann).dst), "ff02::1");
    ASSERT_EQ(o.of(ann), HostAnswer::kNdLearned);
    EXPECT_TRUE(o.from.advert);
    EXPECT_FALSE(o.from.solicited);
    EXPECT_EQ(o.from.ip, kPeerIp);
    EXPECT_EQ(o.from.mac, kPeer);
    EXPECT_EQ(o.len, 0u);
    // A solicited advert to a multicast group is invalid (RFC 4861 7.1.2).
    auto bad = ann;
    icmp_of(bad)[4] |= kNdFlagSolicited;
    recompute(bad);
    EXPECT_EQ(o.of(bad), HostAnswer::kMalformed);
    // An advert of this host's own address (someone else has it): not learned.
    std::vector<uint8_t> dup(kNdFrameBytes);
    write_nd_announce(dup.data(), kPeer, kMyIp);
    EXPECT_EQ(o.of(dup), HostAnswer::kNone);
    EXPECT_FALSE(o.from.valid);
    // An advert without the target option: nothing to learn.
    auto bare = ann;
    reinterpret_cast<Ipv6Hdr *>(bare.data() + sizeof(EthHdr))->payload_length.set(24);
    bare.resize(bare.size() - 8);
    recompute(bare);
    EXPECT_EQ(o.of(bare), HostAnswer::kNone);
    // A multicast link address in the option is not learned.
    auto mc = ann;
    icmp_of(mc)[26] |= 1;
    recompute(mc);
    EXPECT_EQ(o.of(mc), HostAnswer::kNone);
    // No address on the plane: a solicitation is never answered.
    uint32_t n = 0;
    NdFrom from;
    const auto s = solicit(kPeerIp, Ipv6Addr{});
    EXPECT_NE(answer_host6(s.data(), uint32_t(s.size()), kMe, Ipv6Addr{}, o.buf.data(),
                           uint32_t(o.buf.size()), &n, &from),
              HostAnswer::kNdAdvert);
    EXPECT_EQ(n, 0u);
}

TEST(Nd, InvalidNdIsRefusedWhoeverItIsFor) {
    const auto good = solicit(kPeerIp, kMyIp);
    struct Case {
        const char *what;
        void (*spoil)(std::vector<uint8_t> &);
    } cases[] = {
        {"hop limit 254 (from off the link)",
         [](std::vector<uint8_t> &f) {
             reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr))->hop_limit = 254;
         }},
        {"code 1", [](std::vector<uint8_t> &f) { icmp_of(f)[1] = 1; }},
        {"a multicast target", [](std::vector<uint8_t> &f) { icmp_of(f)[8] = 0xff; }},
        {"an option of length 0", [](std::vector<uint8_t> &f) { icmp_of(f)[25] = 0; }},
        {"an option past the end", [](std::vector<uint8_t> &f) { icmp_of(f)[25] = 2; }},
        {"shorter than a target",
         [](std::vector<uint8_t> &f) {
             reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr))->payload_length.set(20);
         }},
    };
    for (const Case &c : cases) {
        auto f = good;
        c.spoil(f);
        recompute(f);
        Out o;
        EXPECT_EQ(o.of(f), HostAnswer::kMalformed) << c.what;
        EXPECT_EQ(o.len, 0u) << c.what;
        EXPECT_FALSE(o.from.valid) << c.what;
    }
    auto f = good;
    f.back() ^= 1;  // the checksum no longer holds
    Out o;
    EXPECT_EQ(o.of(f), HostAnswer::kMalformed);
    // A payload length past the frame.
    f = good;
    reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr))->payload_length.set(40);
    EXPECT_EQ(o.of(f), HostAnswer::kMalformed);
    // Not ICMPv6, or a version that is not 6: not for this file.
    f = good;
    reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr))->next_header = kIpProtoUdp;
    EXPECT_EQ(o.of(f), HostAnswer::kNone);
    f = good;
    f[sizeof(EthHdr)] = 0x45;
    EXPECT_EQ(o.of(f), HostAnswer::kNone);
    // Every truncation: never an answer, never a read past the end (ASan).
    const auto e = echo6(kMyIp, 100);
    for (uint32_t n = 0; n < good.size(); ++n)
        EXPECT_NE(o.of(good, n), HostAnswer::kNdAdvert) << n;
    for (uint32_t n = 0; n < e.size(); ++n)
        EXPECT_NE(o.of(e, n), HostAnswer::kEchoReply) << n;
    // No room for the answer: none written.
    uint32_t n = 0;
    NdFrom from;
    EXPECT_EQ(
        answer_host6(good.data(), uint32_t(good.size()), kMe, kMyIp, o.buf.data(), 60, &n, &from),
        HostAnswer::kNone);
    EXPECT_EQ(n, 0u);
}

TEST(Nd, EchoRequestsToTheAddressAreTurnedAround) {
    for (const uint32_t data : {0u, 56u, 1452u}) {
        Out o;
        auto req = echo6(kMyIp, data);
        ASSERT_EQ(o.of(req), HostAnswer::kEchoReply) << data;
        auto a = o.answer();
        ASSERT_EQ(a.size(), req.size());
        const auto *eth = reinterpret_cast<const EthHdr *>(a.data());
        EXPECT_EQ(eth->dst, kPeer);
        EXPECT_EQ(eth->src, kMe);
        EXPECT_EQ(ip6_of(a).src, kMyIp);
        EXPECT_EQ(ip6_of(a).dst, kPeerIp);
        EXPECT_EQ(ip6_of(a).payload_length.get(), 8 + data);
        EXPECT_EQ(icmp_of(a)[0], kIcmp6EchoReply);
        EXPECT_EQ(icmp6_checksum(kMyIp, kPeerIp, icmp_of(a), 8 + data), 0) << "checksum";
        EXPECT_EQ(std::memcmp(icmp_of(a) + 4, icmp_of(req) + 4, 4 + data), 0)
            << "identifier, sequence, data";
    }
    Out o;
    EXPECT_EQ(o.of(echo6(kPeerIp, 8)), HostAnswer::kNone) << "another host's";
    auto f = echo6(kMyIp, 8);
    f.back() ^= 1;
    EXPECT_EQ(o.of(f), HostAnswer::kMalformed) << "bad checksum";
    f = echo6(kMyIp, 8);
    icmp_of(f)[0] = kIcmp6EchoReply;  // a reply is not answered
    recompute(f);
    EXPECT_EQ(o.of(f), HostAnswer::kNone);
}

TEST(Route6, APeerOffTheSubnetGoesToTheGatewayAndLinkLocalIsAlwaysOnLink) {
    Route6 r;
    r.ip = *parse_ipv6("2001:db8:1:0::1");
    EXPECT_TRUE(r.on_link(*parse_ipv6("2001:db8:2::1"))) << "no prefix: one segment";
    r.prefix_len = 64;
    r.gateway = *parse_ipv6("2001:db8:1::fe");
    EXPECT_EQ(r.next_hop(*parse_ipv6("2001:db8:1::77")), *parse_ipv6("2001:db8:1::77"));
    EXPECT_EQ(r.next_hop(*parse_ipv6("2001:db8:2::1")), r.gateway);
    EXPECT_EQ(r.next_hop(*parse_ipv6("fe80::1")), *parse_ipv6("fe80::1"));
    // Prefixes that do not end on a byte.
    r.prefix_len = 60;
    EXPECT_TRUE(r.on_link(*parse_ipv6("2001:db8:1:f::1")));
    EXPECT_FALSE(r.on_link(*parse_ipv6("2001:db8:1:10::1")));
    r.prefix_len = 128;
    EXPECT_TRUE(r.on_link(r.ip));
    EXPECT_FALSE(r.on_link(*parse_ipv6("2001:db8:1::2")));
    r.prefix_len = 0;
    EXPECT_TRUE(r.on_link(*parse_ipv6("2001:db9::1")));
    r.prefix_len = 64;
    r.gateway = Ipv6Addr{};
    EXPECT_FALSE(r.next_hop(*parse_ipv6("2001:db8:2::1")).has_value()) << "unreachable";
}

}  // namespace
}  // namespace mrc::wire
