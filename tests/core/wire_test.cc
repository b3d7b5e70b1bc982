// Scope: the MRC headers of lib/wire/mrc.h: each packet type built and
// parsed back field by field, every truncation and every corrupted field
// refused with its typed error, trimming.
#include <gtest/gtest.h>

#include <vector>

#include "wire/mrc.h"

namespace mrc::wire {
namespace {

MrcAddr addr() {
    MrcAddr a;
    a.src_mac = {{2, 0, 0, 0, 0, 1}};
    a.dst_mac = {{2, 0, 0, 0, 0, 2}};
    a.src_ip = ipv4(10, 0, 0, 1);
    a.dst_ip = ipv4(10, 0, 0, 2);
    a.dscp = 26;
    a.dscp_control = 46;
    return a;
}

std::vector<uint8_t> data_frame(uint32_t payload, bool imm = false,
                                uint8_t flags = kFlagFirst | kFlagLast) {
    std::vector<uint8_t> f(kMaxHdrBytes + payload, 0);
    DataFields d;
    d.opcode = imm ? Opcode::kWriteImm : Opcode::kWrite;
    d.flags = flags;
    d.dst_qpn = 0x123456;
    d.psn = Psn(0xabcdef);
    d.msn = 77;
    d.msg_offset = 0;
    d.tx_ts = 0xdeadbeef;
    d.remote_addr = 0x1122334455667788ull;
    d.rkey = 0x0badf00d;
    d.imm = 0xcafe;
    d.msg_bytes = payload;
    const uint16_t h = write_data(f.data(), addr(), 0xc123, d, payload);
    f.resize(h + payload);
    for (uint32_t i = 0; i < payload; ++i)
        f[h + i] = uint8_t(i);
    return f;
}

TEST(MrcWire, DataRoundTrip) {
    auto f = data_frame(1000);
    MrcPacket p;
    ASSERT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p, Checksums::kVerify),
              MrcError::kOk);
    EXPECT_EQ(p.opcode, Opcode::kWrite);
    EXPECT_EQ(p.dst_qpn, 0x123456u);
    EXPECT_EQ(p.psn, Psn(0xabcdef));
    EXPECT_EQ(p.ev, 0xc123);
    EXPECT_EQ(p.udp.udp->dst_port.get(), kDefaultMrcPort);
    EXPECT_EQ(p.udp.ip->tos, (26 << 2) | kEcnEct0);
    EXPECT_EQ(p.data->msn.get(), 77u);
    EXPECT_EQ(p.data->tx_ts.get(), 0xdeadbeefu);
    EXPECT_EQ(p.reth->remote_addr.get(), 0x1122334455667788ull);
    EXPECT_EQ(p.reth->rkey.get(), 0x0badf00du);
    EXPECT_EQ(p.reth->length.get(), 1000u);
    EXPECT_EQ(p.imm, nullptr);
    EXPECT_EQ(p.payload_bytes, 1000u);
    EXPECT_EQ(p.payload, f.data() + kDataHdrBytes);
    EXPECT_EQ(p.hdr_bytes, kDataHdrBytes);
}

TEST(MrcWire, ImmediateOnlyOnTheLastPacket) {
    auto last = data_frame(64, true);
    MrcPacket p;
    ASSERT_EQ(parse_mrc(last.data(), uint32_t(last.size()), kDefaultMrcPort, &p), MrcError::kOk);
    ASSERT_NE(p.imm, nullptr);
    EXPECT_EQ(p.imm->imm.get(), 0xcafeu);
    EXPECT_EQ(p.imm->msg_bytes.get(), 64u);
    EXPECT_EQ(p.hdr_bytes, kDataImmHdrBytes);
    auto mid = data_frame(64, true, kFlagFirst);
    ASSERT_EQ(parse_mrc(mid.data(), uint32_t(mid.size()), kDefaultMrcPort, &p), MrcError::kOk);
    EXPECT_EQ(p.imm, nullptr);
    EXPECT_EQ(p.hdr_bytes, kDataHdrBytes);
}

TEST(MrcWire, SackNackProbeRoundTrip) {
    std::vector<uint8_t> f(kMaxHdrBytes);
    SackFields s;
    s.dst_qpn = 42;
    s.cum_psn = Psn(0xfffff0);
    s.trigger_psn = Psn(5);
    s.sack_offset = 3;
    s.ev_echo = 0xbeef;
    s.bitmap = 0x8000000000000001ull;
    s.ts_echo = 1234;
    s.rwnd_units = 8;
    s.flags = kAckEcnEcho;
    s.plane_status = 0x0b;
    f.resize(write_sack(f.data(), addr(), 999, s));
    EXPECT_EQ(f.size(), kSackBytes);
    MrcPacket p;
    ASSERT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p, Checksums::kVerify),
              MrcError::kOk);
    ASSERT_NE(p.sack, nullptr);
    EXPECT_EQ(p.psn, Psn(0xfffff0));
    EXPECT_EQ(p.sack->trigger_psn.get(), 5u);
    EXPECT_EQ(p.sack->sack_offset.get(), 3u);
    EXPECT_EQ(p.sack->ev_echo.get(), 0xbeef);
    EXPECT_EQ(p.sack->bitmap.get(), 0x8000000000000001ull);
    EXPECT_EQ(p.sack->ts_echo.get(), 1234u);
    EXPECT_EQ(p.sack->rwnd_units.get(), 8u);
    EXPECT_EQ(p.sack->flags, kAckEcnEcho);
    EXPECT_EQ(p.sack->plane_status, 0x0b);
    EXPECT_EQ(p.udp.ip->tos, (46 << 2) | kEcnEct0) << "the control class, ECN-capable";

    f.assign(kMaxHdrBytes, 0);
    NackFields n;
    n.dst_qpn = 42;
    n.psn = Psn(17);
    n.reason = NackReason::kTrimmedLastHop;
    n.ev_echo = 0x1234;
    n.cum_psn = Psn(10);
    n.ts_echo = 99;
    n.rwnd_units = 2;
    f.resize(write_nack(f.data(), addr(), 999, n));
    ASSERT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p, Checksums::kVerify),
              MrcError::kOk);
    ASSERT_NE(p.nack, nullptr);
    EXPECT_EQ(p.psn, Psn(17));
    EXPECT_EQ(p.nack->reason, uint8_t(NackReason::kTrimmedLastHop));
    EXPECT_EQ(p.nack->cum_psn.get(), 10u);
    EXPECT_EQ(p.nack->ev_echo.get(), 0x1234);
    EXPECT_EQ(p.udp.ip->tos, (46 << 2) | kEcnEct0);

    f.assign(kMaxHdrBytes, 0);
    ProbeFields pr;
    pr.reply = true;
    pr.dst_qpn = 42;
    pr.probe_id = 7;
    pr.ev = 4444;
    pr.ts = 5555;
    f.resize(write_probe(f.data(), addr(), 4444, pr));
    ASSERT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p), MrcError::kOk);
    EXPECT_EQ(p.opcode, Opcode::kProbeReply);
    EXPECT_EQ(p.probe->probe_id.get(), 7u);
    EXPECT_EQ(p.probe->ev.get(), 4444);
    EXPECT_EQ(p.udp.ip->tos, (46 << 2) | kEcnEct0);
}

TEST(MrcWire, EveryTruncationIsRefused) {
    for (auto f : {data_frame(300), data_frame(300, true)}) {
        for (size_t len = 0; len < f.size(); ++len) {
            std::vector<uint8_t> cut(f.begin(), f.begin() + long(len));
            MrcPacket p;
            EXPECT_NE(parse_mrc(cut.data(), uint32_t(cut.size()), kDefaultMrcPort, &p),
                      MrcError::kOk)
                << len;
        }
    }
}

TEST(MrcWire, FieldsAreValidated) {
    struct Case {
        size_t offset;
        uint8_t value;
        MrcError want;
    };
    const size_t b = kEthIpv4UdpBytes;
    const Case cases[] = {
        {b + 2, 2, MrcError::kBadVersion},
        {b + 0, 0x55, MrcError::kBadOpcode},
        {b + 1, kFlagFirst | kFlagLast | 0x20, MrcError::kBadFlags},  // undefined flag bit
        {b + 1, kFlagFirst | kFlagLast | kFlagTrimLastHop,
         MrcError::kBadFlags},  // last hop without trimmed
        {b + 3, 1, MrcError::kReservedNonZero},
        {b + 8, 1, MrcError::kReservedNonZero},
    };
    for (const Case &c : cases) {
        auto f = data_frame(100);
        f[c.offset] = c.value;
        MrcPacket p;
        EXPECT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p), c.want)
            << "offset " << c.offset;
    }
    auto f = data_frame(100);
    f[b + 5] = f[b + 6] = f[b + 7] = 0;  // QPN 0
    MrcPacket p;
    EXPECT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p), MrcError::kBadQpn);
    f = data_frame(100);
    reinterpret_cast<Reth *>(f.data() + b + sizeof(BaseHdr) + sizeof(DataHdr))->length.set(99);
    EXPECT_EQ(parse_mrc(f.data(), uint32_t(f.size()), kDefaultMrcPort, &p), MrcError::kBadLength);
    f = data_frame(100);
    EXPECT_EQ(parse_mrc(f.data(), uint32_t(f.size()), 4791, &p), MrcError::kNotMrc)
        << "another UDP port";
    EXPECT_EQ(parse_mrc(f.data(), uint32_t(f.size()), 0, &p), MrcError::kOk) << "port 0: any";

    std::vector<uint8_t> n(kMaxHdrBytes);
    NackFields nf;
    nf.dst_qpn = 1;
    n.resize(write_nack(n.data(), addr(), 1, nf));
    n[b + sizeof(BaseHdr)] = 0x77;  // unknown reason
    EXPECT_EQ(parse_mrc(n.data(), uint32_t(n.size()), kDefaultMrcPort, &p),
              MrcError::kBadNackReason);
    n.push_back(0);  // a control packet with trailing bytes
    n[b + sizeof(BaseHdr)] = uint8_t(NackReason::kTrimmed);
    auto *ip = reinterpret_cast<Ipv4Hdr *>(n.data() + sizeof(EthHdr));
    auto *udp = reinterpret_cast<UdpHdr *>(n.data() + sizeof(EthHdr) + sizeof(Ipv4Hdr));
    ip->total_length.set(uint16_t(ip->total_length.get() + 1));
    udp->length.set(uint16_t(udp->length.get() + 1));
    EXPECT_EQ(parse_mrc(n.data(), uint32_t(n.size()), kDefaultMrcPort, &p), MrcError::kBadLength);
}

TEST(MrcWire, TrimKeepsHeadersAndMarksThePacket) {
    auto f = data_frame(4000, true);
    const uint32_t l = trim_data_packet(f.data(), uint32_t(f.size()), true);
    ASSERT_EQ(l, kDataImmHdrBytes);
    f.resize(l);
    MrcPacket p;
    ASSERT_EQ(parse_mrc(f.data(), l, kDefaultMrcPort, &p, Checksums::kVerify), MrcError::kOk);
    EXPECT_TRUE(p.trimmed());
    EXPECT_TRUE(p.flags & kFlagTrimLastHop);
    EXPECT_EQ(p.payload_bytes, 0u);
    EXPECT_EQ(p.reth->length.get(), 4000u) << "the RETH still says what was sent";
    EXPECT_EQ(p.psn, Psn(0xabcdef));
    // Not a data packet: nothing to trim.
    std::vector<uint8_t> s(kMaxHdrBytes);
    SackFields sf;
    sf.dst_qpn = 1;
    s.resize(write_sack(s.data(), addr(), 1, sf));
    EXPECT_EQ(trim_data_packet(s.data(), uint32_t(s.size()), false), 0u);
}

TEST(MrcWire, SplitFramePayloadByReference) {
    auto f = data_frame(500);
    std::vector<uint8_t> payload(f.begin() + kDataHdrBytes, f.end());
    MrcPacket p;
    ASSERT_EQ(parse_mrc(f.data(), uint32_t(kDataHdrBytes), payload.data(), uint32_t(payload.size()),
                        kDefaultMrcPort, &p),
              MrcError::kOk);
    EXPECT_EQ(p.payload, payload.data());
    EXPECT_EQ(p.payload_bytes, 500u);
    // Headers split across the two parts are refused.
    EXPECT_NE(parse_mrc(f.data(), uint32_t(kDataHdrBytes - 4), f.data() + kDataHdrBytes - 4, 504,
                        kDefaultMrcPort, &p),
              MrcError::kOk);
}

}  // namespace
}  // namespace mrc::wire
