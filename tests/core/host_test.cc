// Scope: what a host answers for its own plane address (lib/wire/host.h):
// ARP requests for it, ICMP echo requests to it, what it learns from its
// neighbours' ARP, and that nothing malformed, truncated or not its own
// gets an answer.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "wire/host.h"

namespace mrc::wire {
namespace {

const MacAddr kMe{{0x02, 0, 0, 0, 0, 0x0a}};
const MacAddr kPeer{{0x02, 0, 0, 0, 0, 0x0b}};
const uint32_t kMyIp = ipv4(10, 7, 0, 2);
const uint32_t kPeerIp = ipv4(10, 7, 0, 1);

std::vector<uint8_t> arp(uint16_t op, const MacAddr &sha, uint32_t spa, uint32_t tpa) {
    std::vector<uint8_t> f(kArpFrameBytes, 0);
    write_arp_request(f.data(), sha, spa, tpa);
    ArpHdr a;
    std::memcpy(&a, f.data() + sizeof(EthHdr), sizeof a);
    a.oper.set(op);
    std::memcpy(f.data() + sizeof(EthHdr), &a, sizeof a);
    return f;
}

// An echo request from the peer to `dst` with `data_bytes` of data (and,
// with `options`, a 4-byte IP option).
std::vector<uint8_t> echo(uint32_t dst, uint32_t data_bytes, bool options = false) {
    const uint32_t ihl = options ? 24 : 20;
    std::vector<uint8_t> f(sizeof(EthHdr) + ihl + 8 + data_bytes, 0);
    auto *eth = reinterpret_cast<EthHdr *>(f.data());
    eth->dst = kMe;
    eth->src = kPeer;
    eth->ether_type.set(kEtherTypeIpv4);
    auto *ip = reinterpret_cast<Ipv4Hdr *>(f.data() + sizeof(EthHdr));
    ip->version_ihl = uint8_t(0x40 | ihl / 4);
    ip->total_length.set(uint16_t(ihl + 8 + data_bytes));
    ip->id.set(0x1234);
    ip->ttl = 63;
    ip->protocol = kIpProtoIcmp;
    ip->src.set(kPeerIp);
    ip->dst.set(dst);
    if (options) f[sizeof(EthHdr) + 20] = 1;  // NOPs
    if (options) f[sizeof(EthHdr) + 21] = 1;
    ip->checksum.set(ipv4_header_checksum(*ip));
    uint8_t *icmp = f.data() + sizeof(EthHdr) + ihl;
    icmp[0] = kIcmpEchoRequest;
    icmp[4] = 0xab;  // identifier
    icmp[5] = 0xcd;
    icmp[7] = 3;  // sequence
    for (uint32_t i = 0; i < data_bytes; ++i)
        icmp[8 + i] = uint8_t(i * 13);
    const auto c = static_cast<uint16_t>(~csum_fold(csum_add(0, icmp, 8 + data_bytes)));
    icmp[2] = uint8_t(c >> 8);
    icmp[3] = uint8_t(c);
    return f;
}

struct Out {
    std::vector<uint8_t> buf = std::vector<uint8_t>(kMaxHostAnswerBytes);
    uint32_t len = 0;
    ArpFrom from;
    HostAnswer of(const std::vector<uint8_t> &f, uint32_t n = UINT32_MAX) {
        return answer_host(f.data(), std::min<uint32_t>(n, uint32_t(f.size())), kMe, kMyIp,
                           buf.data(), uint32_t(buf.size()), &len, &from);
    }
};

TEST(Host, AnArpRequestForTheAddressGetsAReplyAndTeachesTheSender) {
    Out o;
    ASSERT_EQ(o.of(arp(kArpOpRequest, kPeer, kPeerIp, kMyIp)), HostAnswer::kArpReply);
    ASSERT_EQ(o.len, kArpFrameBytes);
    const auto *eth = reinterpret_cast<const EthHdr *>(o.buf.data());
    EXPECT_EQ(eth->dst, kPeer);
    EXPECT_EQ(eth->src, kMe);
    EXPECT_EQ(eth->ether_type.get(), kEtherTypeArp);
    ArpHdr r;
    std::memcpy(&r, o.buf.data() + sizeof(EthHdr), sizeof r);
    EXPECT_EQ(r.oper.get(), kArpOpReply);
    EXPECT_EQ(r.sha, kMe);
    EXPECT_EQ(r.spa.get(), kMyIp);
    EXPECT_EQ(r.tha, kPeer);
    EXPECT_EQ(r.tpa.get(), kPeerIp);
    EXPECT_EQ(o.from.ip, kPeerIp);
    EXPECT_EQ(o.from.mac, kPeer);
}

TEST(Host, OtherArpTeachesOrIsIgnoredAndIsNeverAnswered) {
    Out o;
    // A request for another address, a reply to someone: learned, not answered.
    EXPECT_EQ(o.of(arp(kArpOpRequest, kPeer, kPeerIp, ipv4(10, 7, 0, 9))), HostAnswer::kArpLearned);
    EXPECT_EQ(o.len, 0u);
    EXPECT_EQ(o.from.ip, kPeerIp);
    EXPECT_FALSE(o.from.reply);
    EXPECT_EQ(o.of(arp(kArpOpReply, kPeer, kPeerIp, kMyIp)), HostAnswer::kArpLearned);
    EXPECT_TRUE(o.from.reply);
    EXPECT_EQ(o.len, 0u) << "a reply is never answered";
    // Nothing to learn: someone claiming this host's address, an address
    // probe (sender 0.0.0.0), a multicast sender MAC.
    EXPECT_EQ(o.of(arp(kArpOpReply, kPeer, kMyIp, kMyIp)), HostAnswer::kNone);
    EXPECT_EQ(o.of(arp(kArpOpRequest, kPeer, 0, ipv4(10, 7, 0, 9))), HostAnswer::kNone);
    const MacAddr mcast{{0x01, 0, 0x5e, 0, 0, 1}};
    EXPECT_EQ(o.of(arp(kArpOpReply, mcast, kPeerIp, kMyIp)), HostAnswer::kNone);
    // A probe for this host's address is answered (RFC 5227 conflict detection).
    EXPECT_EQ(o.of(arp(kArpOpRequest, kPeer, 0, kMyIp)), HostAnswer::kArpReply);
    // Another operation, another hardware or protocol type.
    EXPECT_EQ(o.of(arp(3, kPeer, kPeerIp, kMyIp)), HostAnswer::kMalformed);
    auto f = arp(kArpOpRequest, kPeer, kPeerIp, kMyIp);
    f[sizeof(EthHdr) + 1] = 6;  // htype 6 (IEEE 802)
    EXPECT_EQ(o.of(f), HostAnswer::kNone);
    f = arp(kArpOpRequest, kPeer, kPeerIp, kMyIp);
    f[sizeof(EthHdr) + 2] = 0x86;  // ptype IPv6
    EXPECT_EQ(o.of(f), HostAnswer::kNone);
    // A host with no address on the plane answers nothing.
    uint32_t n = 0;
    ArpFrom from;
    const auto q = arp(kArpOpRequest, kPeer, kPeerIp, 0);
    EXPECT_NE(answer_host(q.data(), uint32_t(q.size()), kMe, 0, o.buf.data(), 100, &n, &from),
              HostAnswer::kArpReply);
}

TEST(Host, EchoRequestsToTheAddressAreTurnedAround) {
    for (const bool options : {false, true}) {
        for (const uint32_t data : {0u, 56u, 1472u}) {
            Out o;
            const auto req = echo(kMyIp, data, options);
            ASSERT_EQ(o.of(req), HostAnswer::kEchoReply) << data;
            ASSERT_EQ(o.len, sizeof(EthHdr) + 20 + 8 + data) << "IP options are not echoed";
            const auto *eth = reinterpret_cast<const EthHdr *>(o.buf.data());
            EXPECT_EQ(eth->dst, kPeer);
            EXPECT_EQ(eth->src, kMe);
            const auto *ip = reinterpret_cast<const Ipv4Hdr *>(o.buf.data() + sizeof(EthHdr));
            EXPECT_EQ(ip->version_ihl, 0x45);
            EXPECT_EQ(ip->src.get(), kMyIp);
            EXPECT_EQ(ip->dst.get(), kPeerIp);
            EXPECT_EQ(ip->protocol, kIpProtoIcmp);
            EXPECT_EQ(ip->total_length.get(), 20 + 8 + data);
            EXPECT_EQ(ip->checksum.get(), ipv4_header_checksum(*ip));
            const uint8_t *icmp = o.buf.data() + sizeof(EthHdr) + 20;
            EXPECT_EQ(icmp[0], kIcmpEchoReply);
            EXPECT_EQ(csum_fold(csum_add(0, icmp, 8 + data)), 0xffff) << "ICMP checksum";
            const uint8_t *in = req.data() + sizeof(EthHdr) + (options ? 24 : 20);
            EXPECT_EQ(std::memcmp(icmp + 4, in + 4, 4 + data), 0) << "id, sequence, data";
        }
    }
}

TEST(Host, NothingElseGetsAnAnswer) {
    Out o;
    EXPECT_EQ(o.of(echo(ipv4(10, 7, 0, 9), 8)), HostAnswer::kNone) << "another host's";
    auto f = echo(kMyIp, 8);
    f[sizeof(EthHdr) + 20] = 13;  // a timestamp request
    f[sizeof(EthHdr) + 22] = f[sizeof(EthHdr) + 23] = 0;
    {
        const auto c =
            static_cast<uint16_t>(~csum_fold(csum_add(0, f.data() + sizeof(EthHdr) + 20, 16)));
        f[sizeof(EthHdr) + 22] = uint8_t(c >> 8);
        f[sizeof(EthHdr) + 23] = uint8_t(c);
    }
    EXPECT_EQ(o.of(f), HostAnswer::kNone);
    f = echo(kMyIp, 8);
    f.back() ^= 1;  // the ICMP checksum no longer holds
    EXPECT_EQ(o.of(f), HostAnswer::kMalformed);
    f = echo(kMyIp, 8);
    f[sizeof(EthHdr) + 10] ^= 1;  // nor the IP header's
    EXPECT_EQ(o.of(f), HostAnswer::kMalformed);
    f = echo(kMyIp, 8);
    auto *ip = reinterpret_cast<Ipv4Hdr *>(f.data() + sizeof(EthHdr));
    ip->frag.set(kIpv4MoreFragments);
    ip->checksum.set(ipv4_header_checksum(*ip));
    EXPECT_EQ(o.of(f), HostAnswer::kNone) << "fragments are not reassembled";
    f = echo(kMyIp, 8);
    f[12] = 0x86;  // IPv6 ethertype
    f[13] = 0xdd;
    EXPECT_EQ(o.of(f), HostAnswer::kNone);
    // Every truncation of a request: never an answer (and never a read past the end).
    const auto a = arp(kArpOpRequest, kPeer, kPeerIp, kMyIp);
    const auto e = echo(kMyIp, 100);
    for (uint32_t n = 0; n < sizeof(EthHdr) + sizeof(ArpHdr); ++n) {
        const std::vector<uint8_t> t(a.begin(), a.begin() + n);
        EXPECT_NE(o.of(t), HostAnswer::kArpReply) << n;
    }
    for (uint32_t n = 0; n < e.size(); ++n) {
        const std::vector<uint8_t> t(e.begin(), e.begin() + n);
        EXPECT_NE(o.of(t), HostAnswer::kEchoReply) << n;
    }
    // No room for the answer: none written.
    uint32_t n = 0;
    ArpFrom from;
    EXPECT_EQ(answer_host(e.data(), uint32_t(e.size()), kMe, kMyIp, o.buf.data(), 64, &n, &from),
              HostAnswer::kNone);
    EXPECT_EQ(n, 0u);
}

TEST(Host, AGratuitousArpAnnouncesTheAddress) {
    std::vector<uint8_t> f(kArpFrameBytes);
    ASSERT_EQ(write_arp_request(f.data(), kMe, kMyIp, kMyIp), kArpFrameBytes);
    const auto *eth = reinterpret_cast<const EthHdr *>(f.data());
    EXPECT_EQ(eth->dst, (MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}));
    ArpHdr a;
    std::memcpy(&a, f.data() + sizeof(EthHdr), sizeof a);
    EXPECT_EQ(a.oper.get(), kArpOpRequest);
    EXPECT_EQ(a.spa.get(), kMyIp);
    EXPECT_EQ(a.tpa.get(), kMyIp);
    EXPECT_EQ(a.sha, kMe);
    // A neighbour hears it as news of this host (and does not answer it).
    Out o;
    uint32_t n = 0;
    ArpFrom from;
    EXPECT_EQ(answer_host(f.data(), uint32_t(f.size()), kPeer, kPeerIp, o.buf.data(),
                          uint32_t(o.buf.size()), &n, &from),
              HostAnswer::kArpLearned);
    EXPECT_EQ(from.ip, kMyIp);
    EXPECT_EQ(from.mac, kMe);
}

TEST(Host, IsArpLooksAtTheEthertypeOnly) {
    std::vector<uint8_t> f = arp(kArpOpRequest, kPeer, kPeerIp, kMyIp);
    EXPECT_TRUE(is_arp(f.data(), uint32_t(f.size())));
    EXPECT_TRUE(is_arp(f.data(), sizeof(EthHdr)));
    EXPECT_FALSE(is_arp(f.data(), sizeof(EthHdr) - 1));  // too short to have one
    f[13] = 0x00;                                        // IPv4
    EXPECT_FALSE(is_arp(f.data(), uint32_t(f.size())));
    f[12] = 0x06;  // the bytes swapped
    f[13] = 0x08;
    EXPECT_FALSE(is_arp(f.data(), uint32_t(f.size())));
}

}  // namespace
}  // namespace mrc::wire
