// Scope: protocol regressions as a diff of packets. A recorded client
// session (tests/data/replay/session.pcap: one QP writing three messages,
// with a reordered, a lost and a duplicated packet, plus a stray ARP frame,
// a frame for an unknown QP, a truncated MRC frame and one with a bad UDP
// checksum) is fed into a dataplane server through net_pcap's rx_pcap. The
// acks it writes to tx_pcap are decoded packet by packet (cumulative PSN,
// SACK offset and bitmap, echoed EV and timestamp, trigger PSN, flags) and
// compared with tests/data/replay/acks.txt. The server's memory and counters
// are checked too.
//
// MRC_UPDATE_GOLDEN=1 rewrites both files from the current core (the
// session from a client Endpoint, the acks from this run): review the diff.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "core/endpoint.h"
#include "dpdk/dataplane.h"
#include "support/wait.h"
#include "wire/mrc.h"

#ifndef MRC_SOURCE_DIR
#error "MRC_SOURCE_DIR must be defined"
#endif

namespace mrc::dp {
namespace {

constexpr uint32_t kPd = 1;
constexpr uint32_t kMsgBytes = 8192;
constexpr uint32_t kMessages = 3;
constexpr uint32_t kClientPsn = 1000;
const uint32_t kClientIp = wire::ipv4(10, 9, 0, 1);
const uint32_t kServerIp = wire::ipv4(10, 9, 0, 2);
const wire::MacAddr kClientMac{{0x02, 0, 0, 0, 0, 0x01}};
const wire::MacAddr kServerMac{{0x02, 0, 0, 0, 0, 0x02}};

// The server's region, as peers address it (0 would mean "its own address").
constexpr uint64_t kRemoteBase = 0x100000;
const std::string kDir = std::string(MRC_SOURCE_DIR) + "/tests/data/replay";

// ---- pcap files (the classic format, microsecond timestamps) ----

std::vector<std::vector<uint8_t>> read_pcap(const std::string &path) {
    std::vector<std::vector<uint8_t>> out;
    std::ifstream f(path, std::ios::binary);
    char gh[24];
    if (!f.read(gh, 24)) return out;
    for (;;) {
        uint32_t rec[4];
        if (!f.read(reinterpret_cast<char *>(rec), 16)) break;
        std::vector<uint8_t> frame(rec[2]);
        if (!f.read(reinterpret_cast<char *>(frame.data()), std::streamsize(frame.size()))) break;
        out.push_back(std::move(frame));
    }
    return out;
}

void write_pcap(const std::string &path, const std::vector<std::vector<uint8_t>> &frames) {
    std::ofstream f(path, std::ios::binary);
    const uint32_t gh[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
    f.write(reinterpret_cast<const char *>(gh), 24);
    uint32_t t = 0;
    for (const auto &fr : frames) {
        const uint32_t rec[4] = {1767225600, t++, uint32_t(fr.size()), uint32_t(fr.size())};
        f.write(reinterpret_cast<const char *>(rec), 16);
        f.write(reinterpret_cast<const char *>(fr.data()), std::streamsize(fr.size()));
    }
}

// ---- the session, made by a client Endpoint of the core ----

uint8_t pattern(uint64_t i) {
    return uint8_t(i * 37 + (i >> 8) * 11 + 5);
}

std::vector<std::vector<uint8_t>> make_session() {
    EndpointConfig ec;
    ec.planes = 1;
    ec.max_qps = 4;
    Endpoint client(ec);
    QpConfig qc;
    qc.mtu_payload_bytes = 1024;
    qc.ev.evs = 8;
    qc.ev.backup_per_plane = 2;
    qc.ev.min_active = 2;
    qc.cc.algo = CcAlgo::kFixed;
    Qp *q = client.create_qp(qc).value();
    EXPECT_TRUE(q->to_init(kPd).ok());
    QpPeer peer;
    peer.dst_qpn = 1;  // the server's first QP on worker 0
    peer.planes = 1;
    peer.path[0].src_ip = kClientIp;
    peer.path[0].dst_ip = kServerIp;
    peer.path[0].src_mac = kClientMac;
    peer.path[0].dst_mac = kServerMac;
    EXPECT_TRUE(q->to_rtr(peer, Psn(5000)).ok());
    EXPECT_TRUE(q->to_rts(Psn(kClientPsn)).ok());
    // The server registers one region at kRemoteBase: its key is the first
    // a fresh table hands out.
    static std::vector<uint8_t> scratch(16);
    MrTable t(1024);
    const uint32_t rkey =
        t.register_region(scratch.data(), 16, kAccessRemoteWrite, kPd, kRemoteBase).value();
    static std::vector<uint8_t> src(kMsgBytes * kMessages);
    for (size_t i = 0; i < src.size(); ++i)
        src[i] = pattern(i);
    for (uint32_t m = 0; m < kMessages; ++m) {
        WriteRequest w;
        w.wr_id = m;
        w.local = src.data() + m * kMsgBytes;
        w.length = kMsgBytes;
        w.remote_addr = kRemoteBase + uint64_t{m} * kMsgBytes;
        w.rkey = rkey;
        w.with_imm = m == kMessages - 1;
        w.imm = 0xabc;
        EXPECT_EQ(q->post_write(w), PostResult::kOk);
    }
    std::vector<std::vector<uint8_t>> data;
    uint8_t hdr[16][wire::kMaxHdrBytes];
    TxPacket tx[16];
    uint64_t now = 1'000'000;
    for (;;) {
        for (int i = 0; i < 16; ++i)
            tx[i].hdr = hdr[i];
        const uint32_t n = client.poll_tx(tx, 16, now);
        if (n == 0) break;
        for (uint32_t i = 0; i < n; ++i) {
            std::vector<uint8_t> f(tx[i].hdr, tx[i].hdr + tx[i].hdr_len);
            f.insert(f.end(), tx[i].payload, tx[i].payload + tx[i].payload_len);
            wire::fill_udp_checksum(f.data());
            data.push_back(std::move(f));
        }
        now += 1000;
    }
    EXPECT_EQ(data.size(), kMsgBytes * kMessages / 1024);
    // The network's doing: 3 and 5 swapped, 10 lost, 12 twice.
    std::swap(data[3], data[5]);
    std::vector<std::vector<uint8_t>> s;
    for (size_t i = 0; i < data.size(); ++i) {
        if (i == 10) continue;
        s.push_back(data[i]);
        if (i == 12) s.push_back(data[i]);
    }
    // Strangers: an ARP request, a frame for QPN 77, a truncated MRC frame,
    // a frame whose UDP checksum is wrong.
    std::vector<uint8_t> arp(60, 0);
    std::memset(arp.data(), 0xff, 6);
    std::memcpy(arp.data() + 6, kClientMac.b, 6);
    arp[12] = 0x08;
    arp[13] = 0x06;
    s.insert(s.begin() + 2, arp);
    std::vector<uint8_t> other = data[0];
    other[wire::kEthIpv4UdpBytes + 7] = 77;
    wire::fill_udp_checksum(other.data());
    s.insert(s.begin() + 4, other);
    std::vector<uint8_t> cut(data[1].begin(), data[1].begin() + 70);
    s.insert(s.begin() + 6, cut);
    std::vector<uint8_t> bad = data[2];
    bad[bad.size() - 1] ^= 0x40;
    s.insert(s.begin() + 8, bad);
    return s;
}

std::string describe(const std::vector<uint8_t> &f) {
    wire::MrcPacket p;
    const auto e = wire::parse_mrc(f.data(), uint32_t(f.size()), wire::kDefaultMrcPort, &p,
                                   wire::Checksums::kVerify);
    if (e != wire::MrcError::kOk) return std::string("unparsable: ") + wire::to_string(e);
    char b[256];
    if (p.sack) {
        std::snprintf(b, sizeof b,
                      "SACK qpn=%u cum=%u trigger=%u off=%u bitmap=%016llx ev=%u ts=%u rwnd=%u "
                      "flags=%02x planes=%02x",
                      p.dst_qpn, p.psn.value(), p.sack->trigger_psn.get(),
                      p.sack->sack_offset.get(), (unsigned long long)p.sack->bitmap.get(),
                      p.sack->ev_echo.get(), p.sack->ts_echo.get(), p.sack->rwnd_units.get(),
                      p.sack->flags, p.sack->plane_status);
    } else if (p.nack) {
        std::snprintf(b, sizeof b, "NACK qpn=%u psn=%u reason=%02x cum=%u ev=%u flags=%02x",
                      p.dst_qpn, p.psn.value(), p.nack->reason, p.nack->cum_psn.get(),
                      p.nack->ev_echo.get(), p.nack->flags);
    } else {
        std::snprintf(b, sizeof b, "opcode=%02x qpn=%u psn=%u", unsigned(p.opcode), p.dst_qpn,
                      p.psn.value());
    }
    return b;
}

std::string read_text(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

TEST(Replay, RecordedSessionGivesTheRecordedAcks) {
    const bool update = std::getenv("MRC_UPDATE_GOLDEN") != nullptr;
    if (update) write_pcap(kDir + "/session.pcap", make_session());
    const auto session = read_pcap(kDir + "/session.pcap");
    ASSERT_GT(session.size(), 20u) << "missing or unreadable " << kDir << "/session.pcap";

    const std::string out = "/tmp/mrc-replay-" + std::to_string(getpid()) + "-acks.pcap";
    DataplaneConfig c;
    c.ports = {"net_pcap_replay,rx_pcap=" + kDir + "/session.pcap,tx_pcap=" + out};
    c.worker_lcores = {1};
    c.max_qps_per_worker = 4;
    c.idle = IdleMode::kSleep;
    c.ecn_full_bursts = 0;  // a file delivers full bursts: that is not congestion
    c.burst = 1;            // one frame per loop: each packet's ack goes out before the next
    c.run_scorer = false;
    c.name = "replay";
    auto dp = Dataplane::create(c);
    ASSERT_TRUE(dp.ok()) << dp.error().message;
    Endpoint &ep = (*dp)->worker(0).endpoint();
    std::vector<uint8_t> mem(kMsgBytes * kMessages, 0);
    ASSERT_TRUE(ep.mrs()
                    .register_region(mem.data(), mem.size(), kAccessRemoteWrite, kPd, kRemoteBase)
                    .ok());
    QpConfig qc;
    qc.mtu_payload_bytes = 1024;
    qc.ev.evs = 8;
    qc.ev.backup_per_plane = 2;
    qc.ev.min_active = 2;
    qc.ack_every_bytes = 1;               // an ack for every data packet...
    qc.ack_delay_ns = 60'000'000'000ull;  // ...and never one from a timer: the acks depend
                                          // on the packets alone, not on timing
    Qp *q = ep.create_qp(qc).value();
    ASSERT_EQ(ep.wire_qpn(*q), 1u);
    ASSERT_TRUE(q->to_init(kPd).ok());
    QpPeer peer;
    peer.dst_qpn = 1;
    peer.planes = 1;
    peer.path[0].src_ip = kServerIp;
    peer.path[0].dst_ip = kClientIp;
    peer.path[0].src_mac = kServerMac;
    peer.path[0].dst_mac = kClientMac;
    ASSERT_TRUE(q->to_rtr(peer, Psn(kClientPsn)).ok());
    ASSERT_TRUE(q->to_rts(Psn(5000)).ok());
    // Stopped once every recorded frame is in and every recorded ack is
    // out (rewriting the golden file: once nothing more goes out).
    const std::string want = update ? "" : read_text(kDir + "/acks.txt");
    const size_t want_acks = size_t(std::count(want.begin(), want.end(), '\n'));
    ASSERT_TRUE(update || want_acks > 0) << "missing " << kDir << "/acks.txt";
    ASSERT_TRUE((*dp)->start().ok());
    uint64_t sent = 0, quiet = 0;
    EXPECT_TRUE(mrc::test::wait_until(
        [&] {
            WorkerSnapshot w;
            if (!(*dp)->worker(0).snapshot(&w) || w.worker.rx_packets < session.size())
                return false;
            quiet = w.port_tx_pkts[0] == sent ? quiet + 1 : 0;
            sent = w.port_tx_pkts[0];
            return update ? quiet >= 10 : sent >= want_acks;
        },
        std::chrono::seconds(10)))
        << sent << " of " << want_acks << " acks sent";
    (*dp)->stop();
    const WorkerSnapshot s = (*dp)->totals();
    const QpCounters qcnt = q->counters();
    dp->reset();  // closes the port: tx_pcap is complete

    EXPECT_EQ(s.worker.rx_packets, session.size());
    EXPECT_EQ(s.endpoint.rx_wrong_peer, 0u);
    EXPECT_EQ(s.endpoint.rx_qp_not_ready, 0u);
    EXPECT_EQ(qcnt.rx_access_errors, 0u);
    EXPECT_EQ(s.endpoint.rx_malformed, 0u);
    EXPECT_EQ(s.worker.rx_stray, 1u) << "the ARP frame";
    EXPECT_EQ(s.worker.rx_bad_cksum, 1u);
    EXPECT_EQ(s.endpoint.rx_unknown_qpn, 1u);
    EXPECT_EQ(s.worker.rx_truncated, 1u) << "the truncated frame";
    EXPECT_EQ(qcnt.rx_duplicates, 1u);
    EXPECT_EQ(qcnt.rx_data_pkts, kMsgBytes * kMessages / 1024 - 1) << "all but the lost one";
    // Placed where they belong: all but the lost packet's KiB.
    for (size_t i = 0; i < mem.size(); ++i) {
        const bool lost = i / 1024 == 10;
        ASSERT_EQ(mem[i], lost ? 0 : pattern(i)) << "byte " << i;
    }

    const auto acks = read_pcap(out);
    std::remove(out.c_str());
    std::string got;
    for (const auto &a : acks)
        got += describe(a) + "\n";
    if (update) {
        std::ofstream(kDir + "/acks.txt") << got;
        return;
    }
    EXPECT_EQ(got, want) << "the acks differ from the recorded ones (MRC_UPDATE_GOLDEN=1 "
                            "rewrites them: review the diff)";
}

}  // namespace
}  // namespace mrc::dp
