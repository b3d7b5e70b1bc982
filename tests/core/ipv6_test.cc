// Scope: MRC over IPv6 in the wire format and the core (issue 20 item 3):
// every packet type built on an IPv6 path and parsed back, the EV in the
// flow label, the traffic classes, trimming (the checksum UDP over IPv6
// needs is recomputed), every truncation refused; and a QP pair whose
// planes are IPv6 moving data through loss, refusing frames of the other
// family or from another address.
#include <gtest/gtest.h>

#include <vector>

#include "harness.h"
#include "wire/addr.h"
#include "wire/mrc.h"

namespace mrc::test {
namespace {

using namespace wire;

MrcAddr addr6() {
    MrcAddr a;
    a.src_mac = {{2, 0, 0, 0, 0, 1}};
    a.dst_mac = {{2, 0, 0, 0, 0, 2}};
    a.ipv6 = true;
    a.src_ip6 = *parse_ipv6("2001:db8:1::a");
    a.dst_ip6 = *parse_ipv6("2001:db8:2::b");
    a.dscp = 26;
    a.dscp_control = 46;
    return a;
}

std::vector<uint8_t> data6(uint32_t payload, bool imm, uint16_t ev = 0xc0de) {
    std::vector<uint8_t> f(kMaxHdrBytes + payload);
    DataFields d;
    d.opcode = imm ? Opcode::kWriteImm : Opcode::kWrite;
    d.flags = kFlagFirst | kFlagLast;
    d.dst_qpn = 0x123456;
    d.psn = Psn(0xabcdef);
    d.msn = 9;
    d.remote_addr = 0x1122334455667788ull;
    d.rkey = 77;
    d.imm = 0xcafe;
    d.msg_bytes = payload;
    const uint16_t h = write_data(f.data(), addr6(), ev, d, payload);
    f.resize(h + payload);
    for (uint32_t i = 0; i < payload; ++i)
        f[h + i] = uint8_t(i * 13);
    fill_udp_checksum(f.data());  // what the port layer does
    return f;
}

TEST(MrcIpv6, EveryPacketTypeRoundTripsWithTheEvInTheFlowLabel) {
    for (const bool imm : {false, true}) {
        const auto f = data6(700, imm);
        EXPECT_EQ(f.size(), (imm ? kDataImmHdrBytes : kDataHdrBytes) + kIpv6ExtraBytes + 700);
        MrcPacket p;
        ASSERT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p, Checksums::kVerify),
                  MrcError::kOk);
        ASSERT_TRUE(p.udp.is_ipv6());
        EXPECT_EQ(p.ev, 0xc0de);
        EXPECT_EQ(ipv6_flow_label(*p.udp.ip6), 0xc0deu);
        EXPECT_EQ(ipv6_traffic_class(*p.udp.ip6), (26 << 2) | kEcnEct0);
        EXPECT_EQ(p.udp.ip6->src, addr6().src_ip6);
        EXPECT_EQ(p.dst_qpn, 0x123456u);
        EXPECT_EQ(p.psn, Psn(0xabcdef));
        EXPECT_EQ(p.reth->length.get(), 700u);
        EXPECT_EQ(p.payload_bytes, 700u);
        EXPECT_EQ(p.payload, f.data() + p.hdr_bytes);
        EXPECT_EQ(p.payload[5], uint8_t(5 * 13));
        EXPECT_EQ(imm, p.imm != nullptr);
        EXPECT_FALSE(p.ecn_ce);
    }
    std::vector<uint8_t> f(kMaxHdrBytes);
    SackFields s;
    s.dst_qpn = 42;
    s.cum_psn = Psn(10);
    s.bitmap = 5;
    s.ev_echo = 0xc0de;
    f.resize(write_sack(f.data(), addr6(), 0xd00d, s));
    EXPECT_EQ(f.size(), kSackBytes + kIpv6ExtraBytes);
    fill_udp_checksum(f.data());
    MrcPacket p;
    ASSERT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p, Checksums::kVerify),
              MrcError::kOk);
    EXPECT_EQ(p.sack->bitmap.get(), 5u);
    EXPECT_EQ(ipv6_flow_label(*p.udp.ip6), 0xd00du);
    EXPECT_EQ(ipv6_traffic_class(*p.udp.ip6), (46 << 2) | kEcnEct0) << "the control class";
    f.assign(kMaxHdrBytes, 0);
    NackFields n;
    n.dst_qpn = 42;
    n.psn = Psn(3);
    f.resize(write_nack(f.data(), addr6(), 0xd00e, n));
    EXPECT_EQ(f.size(), kNackBytes + kIpv6ExtraBytes);
    ASSERT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p), MrcError::kOk);
    EXPECT_EQ(p.psn, Psn(3));
    f.assign(kMaxHdrBytes, 0);
    ProbeFields pr;
    pr.dst_qpn = 42;
    pr.probe_id = 7;
    pr.ev = 0xd00f;
    f.resize(write_probe(f.data(), addr6(), 0xd00f, pr));
    EXPECT_EQ(f.size(), kProbeBytes + kIpv6ExtraBytes);
    ASSERT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p), MrcError::kOk);
    EXPECT_EQ(p.probe->probe_id.get(), 7u);
    EXPECT_EQ(ipv6_flow_label(*p.udp.ip6), 0xd00fu);
}

TEST(MrcIpv6, EveryTruncationIsRefused) {
    for (const auto &f : {data6(64, false), data6(64, true)})
        for (size_t len = 0; len < f.size(); ++len) {
            std::vector<uint8_t> cut(f.begin(), f.begin() + long(len));
            MrcPacket p;
            EXPECT_NE(parse_mrc(cut.data(), uint32_t(cut.size()), kDefaultMrcPort, &p),
                      MrcError::kOk)
                << len;
        }
}

TEST(MrcIpv6, TrimKeepsTheHeadersAndAValidChecksum) {
    auto f = data6(3000, true);
    const uint32_t l = trim_data_packet(f.data(), uint32_t(f.size()), false);
    ASSERT_EQ(l, kDataImmHdrBytes + kIpv6ExtraBytes);
    f.resize(l);
    MrcPacket p;
    ASSERT_EQ(parse_mrc(f.data(), l, kDefaultMrcPort, &p, Checksums::kVerify), MrcError::kOk)
        << "over IPv6 a trimmed packet still needs a UDP checksum, and gets one";
    EXPECT_TRUE(p.trimmed());
    EXPECT_EQ(p.payload_bytes, 0u);
    EXPECT_EQ(p.reth->length.get(), 3000u);
    EXPECT_EQ(p.udp.ip6->payload_length.get(), l - kEthIpv6UdpBytes + sizeof(UdpHdr));
    // CE marking over IPv6 is seen by the parser.
    auto *ip6 = reinterpret_cast<Ipv6Hdr *>(f.data() + sizeof(EthHdr));
    ASSERT_TRUE(mark_ce(*ip6));
    ASSERT_EQ(parse_mrc(f.data(), l, kDefaultMrcPort, &p, Checksums::kVerify), MrcError::kOk);
    EXPECT_TRUE(p.ecn_ce);
}

TEST(QpIpv6, DataMovesOverIpv6PlanesThroughLossAndEveryFrameIsIpv6) {
    Harness h(Harness::small_config(), Psn(1000), Psn(5000), 2, true);
    ASSERT_EQ(h.write(16 * 1024, 0, 1), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(data_frames(d).size(), 16u);
    for (const auto &f : d) {
        const MrcPacket p = f.parse();
        ASSERT_TRUE(p.udp.is_ipv6());
        EXPECT_EQ(ipv6_flow_label(*p.udp.ip6), p.ev) << "the EV in the flow label";
        EXPECT_EQ(p.udp.ip6->src, LoopbackPair::ip6(f.plane, 1));
        EXPECT_EQ(p.udp.ip6->dst, LoopbackPair::ip6(f.plane, 2));
    }
    // Lose one in the middle: the later ones' acks find it, it is resent.
    d.erase(d.begin() + 5);
    h.deliver_all(h.b, d);
    auto acks = h.drain(h.b);
    for (const auto &f : acks)
        EXPECT_TRUE(f.parse().udp.is_ipv6());
    h.deliver_all(h.a, acks);
    for (int round = 0; round < 20 && h.completions().empty(); ++round) {
        h.advance(100'000);
        h.deliver_all(h.b, h.drain(h.a));
        h.deliver_all(h.a, h.drain(h.b));
    }
    EXPECT_TRUE(h.placed(16 * 1024));
    EXPECT_GE(h.a.qp->counters().tx_retx_pkts, 1u);
    EXPECT_EQ(h.b.ep->counters().rx_wrong_peer, 0u);
}

TEST(QpIpv6, FramesOfTheOtherFamilyOrAnotherAddressAreRefused) {
    Harness h6(Harness::small_config(), Psn(1000), Psn(5000), 2, true);
    Harness h4(Harness::small_config(), Psn(1000), Psn(5000), 2, false);
    ASSERT_EQ(h4.write(1024), PostResult::kOk);
    ASSERT_EQ(h6.write(1024), PostResult::kOk);
    const auto v4 = data_frames(h4.drain(h4.a));
    auto v6 = data_frames(h6.drain(h6.a));
    ASSERT_EQ(v4.size(), 1u);
    ASSERT_EQ(v6.size(), 1u);
    // The same QPN and PSN, from the peer's IPv4 address: not this QP's peer.
    h6.deliver(h6.b, v4[0]);
    EXPECT_EQ(h6.b.ep->counters().rx_wrong_peer, 1u);
    h4.deliver(h4.b, v6[0]);
    EXPECT_EQ(h4.b.ep->counters().rx_wrong_peer, 1u);
    // Another IPv6 source address.
    Frame other = v6[0];
    reinterpret_cast<Ipv6Hdr *>(other.bytes.data() + sizeof(EthHdr))->src.b[15] ^= 0x40;
    h6.deliver(h6.b, other);
    EXPECT_EQ(h6.b.ep->counters().rx_wrong_peer, 2u);
    EXPECT_TRUE(h6.recv_completions().empty());
    // The real one is taken.
    h6.deliver(h6.b, v6[0]);
    EXPECT_EQ(h6.b.ep->counters().rx_wrong_peer, 2u);
    EXPECT_TRUE(h6.placed(1024));
}

}  // namespace
}  // namespace mrc::test
