// Connection-management frames (wire/cm.h) and caller-chosen region keys
// (MrTable::register_with_key), the two pieces of the core mrcd builds on.
#include <gtest/gtest.h>

#include <vector>

#include "core/memory.h"
#include "wire/cm.h"

namespace mrc::wire {
namespace {

MrcAddr addr() {
    MrcAddr a;
    a.src_mac = MacAddr{{2, 0, 0, 0, 0, 1}};
    a.dst_mac = MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
    a.src_ip = ipv4(10, 0, 0, 1);
    a.dst_ip = ipv4(10, 0, 0, 2);
    a.dst_port = kDefaultMrcPort;
    return a;
}

CmFields connect_fields() {
    CmFields f;
    f.op = CmOp::kConnect;
    f.conn_id = 0x0123456789abcdefull;
    f.service = 18515;
    f.src_qpn = 0x10005;
    f.psn = 0xabcdef;
    f.planes = 2;
    f.mtu_payload = 8924;
    for (uint8_t p = 0; p < 2; ++p) {
        f.mac[p] = MacAddr{{2, 0, 0, 0, p, 1}};
        f.ip[p] = ipv4(10, 0, p, 1);
    }
    return f;
}

TEST(CmWire, ConnectRoundTrip) {
    std::vector<uint8_t> buf(kCmBytes);
    MrcAddr a = addr();
    a.dscp = 48;  // the connection manager's class
    ASSERT_EQ(write_cm(buf.data(), a, 0xc0de, connect_fields()), kCmBytes);
    EXPECT_EQ(buf[sizeof(EthHdr) + 1], 48 << 2) << "its DSCP, not ECN-capable";
    CmFields g;
    MacAddr from{};
    uint32_t from_ip = 0;
    ASSERT_EQ(parse_cm(buf.data(), uint32_t(buf.size()), kDefaultMrcPort, &g, &from, &from_ip),
              CmError::kOk);
    const CmFields f = connect_fields();
    EXPECT_EQ(g.op, CmOp::kConnect);
    EXPECT_EQ(g.conn_id, f.conn_id);
    EXPECT_EQ(g.service, f.service);
    EXPECT_EQ(g.src_qpn, f.src_qpn);
    EXPECT_EQ(g.psn, f.psn);
    EXPECT_EQ(g.mtu_payload, 8924);
    ASSERT_EQ(g.planes, 2);
    for (uint8_t p = 0; p < 2; ++p) {
        EXPECT_EQ(g.mac[p], f.mac[p]);
        EXPECT_EQ(g.ip[p], f.ip[p]);
    }
    EXPECT_EQ(from, addr().src_mac);
    EXPECT_EQ(from_ip, addr().src_ip);
    // Not ECN-capable: CM frames are not congestion-controlled traffic.
    EXPECT_EQ(buf[15] & 3, 0);
}

TEST(CmWire, EveryTruncationIsRefused) {
    std::vector<uint8_t> buf(kCmBytes);
    write_cm(buf.data(), addr(), 1, connect_fields());
    for (uint32_t len = 0; len < kCmBytes; ++len) {
        std::vector<uint8_t> t(buf.begin(), buf.begin() + len);
        CmFields g;
        EXPECT_NE(parse_cm(t.data(), len, kDefaultMrcPort, &g), CmError::kOk) << len;
    }
}

TEST(CmWire, FieldsAreValidated) {
    auto parse = [](CmFields f, auto &&edit) {
        std::vector<uint8_t> b(kCmBytes);
        write_cm(b.data(), addr(), 1, f);
        edit(b.data() + kEthIpv4UdpBytes);
        CmFields g;
        return parse_cm(b.data(), uint32_t(b.size()), kDefaultMrcPort, &g);
    };
    const auto none = [](uint8_t *) {};
    EXPECT_EQ(parse(connect_fields(), none), CmError::kOk);
    EXPECT_EQ(parse(connect_fields(), [](uint8_t *m) { m[2] = 2; }), CmError::kBadVersion);
    EXPECT_EQ(parse(connect_fields(), [](uint8_t *m) { m[7] = 1; }), CmError::kNotCm);  // QPN != 0
    EXPECT_EQ(parse(connect_fields(), [](uint8_t *m) { m[0] = 0x01; }), CmError::kNotCm);
    EXPECT_EQ(parse(connect_fields(), [](uint8_t *m) { m[0] = 0x34; }), CmError::kNotCm);
    EXPECT_EQ(parse(connect_fields(), [](uint8_t *m) { m[1] = kFlagSyn; }), CmError::kBadFields);
    EXPECT_EQ(parse(connect_fields(), [](uint8_t *m) { m[12 + 24] = 9; }), CmError::kBadFields);
    EXPECT_EQ(parse(connect_fields(), [](uint8_t *m) { m[12 + 24] = 0; }), CmError::kBadFields);
    // Bytes 26-27: the sender's payload size, in CONNECT and ACCEPT only.
    EXPECT_EQ(parse(connect_fields(), [](uint8_t *m) { m[12 + 27] = 1; }), CmError::kOk);
    CmFields a = connect_fields();
    a.op = CmOp::kAccept;
    EXPECT_EQ(parse(a, none), CmError::kBadFields);  // an ACCEPT names the requester's QP
    a.dst_qpn = 7;
    EXPECT_EQ(parse(a, none), CmError::kOk);
    CmFields r;
    r.op = CmOp::kReject;
    EXPECT_EQ(parse(r, none), CmError::kBadFields);  // a REJECT says why
    r.reason = CmReject::kNoListener;
    EXPECT_EQ(parse(r, none), CmError::kOk);
    EXPECT_EQ(parse(r, [](uint8_t *m) { m[12 + 26] = 0x23; }), CmError::kBadFields);
    r.mtu_payload = 1000;  // not written into a REJECT
    EXPECT_EQ(parse(r, none), CmError::kOk);
    CmFields d;
    d.op = CmOp::kDisconnect;
    EXPECT_EQ(parse(d, none), CmError::kBadFields);
    d.dst_qpn = 3;
    EXPECT_EQ(parse(d, none), CmError::kOk);
    EXPECT_EQ(parse(d, [](uint8_t *m) { m[12 + 27] = 1; }), CmError::kBadFields);
    // Another port: not ours.
    std::vector<uint8_t> b(kCmBytes);
    write_cm(b.data(), addr(), 1, connect_fields());
    CmFields g;
    EXPECT_EQ(parse_cm(b.data(), kCmBytes, 4791, &g), CmError::kNotMrc);
}

}  // namespace
}  // namespace mrc::wire

namespace mrc {
namespace {

TEST(MrTable, KeysChosenByTheCaller) {
    MrTable t(4);
    std::vector<uint8_t> mem(4096);
    const uint32_t key = (2u << 8) | 7;
    ASSERT_TRUE(t.register_with_key(key, mem.data(), mem.size(), kAccessRemoteWrite, 3, 0x1000));
    EXPECT_EQ(t.resolve_write(key, 0x1000 + 100, 50, 3), mem.data() + 100);
    EXPECT_EQ(t.resolve_write(key, 0x1000 + 4090, 50, 3), nullptr);         // leaves the region
    EXPECT_EQ(t.resolve_write(key, 0x1000, 50, 4), nullptr);                // another pd
    EXPECT_EQ(t.resolve_write((2u << 8) | 6, 0x1000, 50, 3), nullptr);      // stale generation
    EXPECT_FALSE(t.register_with_key(key, mem.data(), 1, 0, 0));            // slot live
    EXPECT_FALSE(t.register_with_key((9u << 8) | 1, mem.data(), 1, 0, 0));  // no such slot
    EXPECT_FALSE(t.register_with_key(3u << 8, mem.data(), 1, 0, 0));        // generation 0
    // The slot is taken: ordinary registrations use the others.
    std::vector<uint32_t> keys;
    for (int i = 0; i < 3; ++i) {
        auto k = t.register_region(mem.data(), 1, 0, 0);
        ASSERT_TRUE(k);
        EXPECT_NE(*k >> 8, 2u);
        keys.push_back(*k);
    }
    EXPECT_FALSE(t.register_region(mem.data(), 1, 0, 0));  // full
    EXPECT_TRUE(t.deregister(key));
    EXPECT_EQ(t.resolve_write(key, 0x1000, 1, 3), nullptr);
    EXPECT_EQ(t.live(), 3u);
}

}  // namespace
}  // namespace mrc
