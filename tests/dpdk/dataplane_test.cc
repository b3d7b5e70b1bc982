// Scope: the dataplane library in one process, over net_ring port pairs
// (EAL under --no-huge, five lcores shared by the machine's CPUs). Two
// dataplanes, A and B, each with two workers and two planes:
//   - A's QP on worker 0 writes to B's QP on worker 1: frames reach B's
//     worker 0 (queue 0) and go to worker 1 over the hand-off ring; acks
//     come back the same way. Every byte is checked.
//   - stray frames (not MRC) are counted and dropped;
//   - DPDK telemetry answers /mrc/stats and /mrc/planes with live counters;
//   - a port cut mid-transfer: the transfer completes on the other plane.
#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dpdk/dataplane.h"
#include "port/eal.h"
#include "support/wait.h"

namespace mrc::dp {
namespace {

using test::wait_until;

constexpr uint32_t kPd = 1;

// The port pair of plane p: A's end "<tag>a<p>", B's end "<tag>b<p>", each
// with two queues (one per worker): A's TX queue q feeds B's RX queue q.
// (Closing a ring port frees it: every test makes its own.)
void make_ring_ports(const std::string &tag, uint32_t planes) {
    for (uint32_t p = 0; p < planes; ++p) {
        rte_ring *ab[2], *ba[2];
        for (int q = 0; q < 2; ++q) {
            const std::string n1 = tag + "ab" + std::to_string(p) + std::to_string(q);
            const std::string n2 = tag + "ba" + std::to_string(p) + std::to_string(q);
            ab[q] = rte_ring_create(n1.c_str(), 2048, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
            ba[q] = rte_ring_create(n2.c_str(), 2048, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
            ASSERT_NE(ab[q], nullptr);
            ASSERT_NE(ba[q], nullptr);
        }
        ASSERT_GE(rte_eth_from_rings((tag + "a" + std::to_string(p)).c_str(), ba, 2, ab, 2,
                                     SOCKET_ID_ANY),
                  0);
        ASSERT_GE(rte_eth_from_rings((tag + "b" + std::to_string(p)).c_str(), ab, 2, ba, 2,
                                     SOCKET_ID_ANY),
                  0);
    }
}

// Writes `messages` messages of `bytes` from A's QP to B's region and
// records completions; runs on A's worker.
class Writer final : public WorkerApp {
  public:
    Qp *qp = nullptr;
    const uint8_t *src = nullptr;
    uint64_t dst = 0;
    uint32_t rkey = 0, bytes = 0, messages = 0;
    std::atomic<uint32_t> done{0}, failed{0};
    uint32_t posted = 0;
    uint32_t poll(Worker &, uint64_t) override {
        if (qp == nullptr) return 0;
        SendCompletion c[16];
        const uint32_t n = qp->poll_send_cq(c, 16);
        for (uint32_t i = 0; i < n; ++i)
            (c[i].status == WcStatus::kSuccess ? done : failed).fetch_add(1);
        uint32_t work = n;
        while (posted < messages && posted - done.load() - failed.load() < 4) {
            WriteRequest w;
            w.wr_id = posted;
            w.local = src + uint64_t{posted} * bytes;
            w.length = bytes;
            w.remote_addr = dst + uint64_t{posted} * bytes;
            w.rkey = rkey;
            if (qp->post_write(w) != PostResult::kOk) break;
            ++posted;
            ++work;
        }
        return work;
    }
};

struct Fixture {
    std::unique_ptr<Dataplane> a, b;
    std::vector<uint8_t> src, dst;
    Writer writer;
    Qp *qa = nullptr, *qb = nullptr;

    // fd00:0:0:PLANE::HOST
    static wire::Ipv6Addr ip6(uint32_t plane, uint8_t host) {
        wire::Ipv6Addr x{};
        x.b[0] = 0xfd;
        x.b[7] = uint8_t(plane);
        x.b[15] = host;
        return x;
    }

    Fixture(const std::string &tag, uint32_t planes, uint32_t messages, uint32_t bytes,
            void (*tune)(DataplaneConfig &) = nullptr, bool ipv6 = false) {
        make_ring_ports(tag, planes);
        DataplaneConfig c;
        c.rx_desc = c.tx_desc = 512;
        c.max_qps_per_worker = 8;
        c.idle = IdleMode::kSleep;
        if (tune != nullptr) tune(c);
        c.link_wait_ms = 2000;
        for (uint32_t p = 0; p < planes; ++p)
            c.ports.push_back("net_ring_" + tag + "a" + std::to_string(p));
        c.worker_lcores = {1, 2};
        c.name = "dpa";
        if (ipv6)  // the addresses below: the payload leaves room for IPv6's header
            for (uint32_t p = 0; p < planes; ++p)
                c.plane_ipv6.push_back(ip6(p, 1));
        auto da = Dataplane::create(c);
        EXPECT_TRUE(da.ok()) << (da ? "" : da.error().message);
        c.ports.clear();
        for (uint32_t p = 0; p < planes; ++p)
            c.ports.push_back("net_ring_" + tag + "b" + std::to_string(p));
        c.worker_lcores = {3, 4};
        c.name = "dpb";
        for (uint32_t p = 0; p < c.plane_ipv6.size(); ++p)
            c.plane_ipv6[p] = ip6(p, 2);
        auto db = Dataplane::create(c);
        EXPECT_TRUE(db.ok()) << (db ? "" : db.error().message);
        if (!da || !db) return;
        a = std::move(*da);
        b = std::move(*db);

        src.resize(uint64_t{messages} * bytes);
        dst.assign(src.size(), 0);
        for (size_t i = 0; i < src.size(); ++i)
            src[i] = uint8_t(i * 131 + (i >> 12));
        QpConfig qc;
        qc.mtu_payload_bytes = a->max_payload_bytes();
        qc.ev.evs = 8 * planes;
        qc.cc.nscc.line_rate_gbps = 10;
        qc.retry.timeout_exp = 12;
        qc.retry.limit = 15;
        // A: worker 0. B: worker 1, so B's worker 0 receives and hands off.
        Endpoint &ea = a->worker(0).endpoint();
        Endpoint &eb = b->worker(1).endpoint();
        qa = ea.create_qp(qc).value();
        qb = eb.create_qp(qc).value();
        EXPECT_TRUE(qa->to_init(kPd).ok());
        EXPECT_TRUE(qb->to_init(kPd).ok());
        const uint32_t rkey =
            eb.mrs().register_region(dst.data(), dst.size(), kAccessRemoteWrite, kPd).value();
        QpPeer pa, pb;
        pa.dst_qpn = eb.wire_qpn(*qb);
        pb.dst_qpn = ea.wire_qpn(*qa);
        pa.planes = pb.planes = uint8_t(planes);
        for (uint32_t p = 0; p < planes; ++p) {
            pa.path[p].src_ip = pb.path[p].dst_ip = wire::ipv4(10, uint8_t(p), 0, 1);
            pa.path[p].dst_ip = pb.path[p].src_ip = wire::ipv4(10, uint8_t(p), 0, 2);
            if (ipv6) {
                const wire::Ipv6Addr x = ip6(p, 1), y = ip6(p, 2);
                pa.path[p].ipv6 = pb.path[p].ipv6 = true;
                pa.path[p].src_ip6 = pb.path[p].dst_ip6 = x;
                pa.path[p].dst_ip6 = pb.path[p].src_ip6 = y;
            }
            pa.path[p].src_mac = pb.path[p].dst_mac = a->port(uint8_t(p)).mac();
            pa.path[p].dst_mac = pb.path[p].src_mac = b->port(uint8_t(p)).mac();
        }
        EXPECT_TRUE(qa->to_rtr(pa, Psn(77)).ok());
        EXPECT_TRUE(qb->to_rtr(pb, Psn(1000)).ok());
        EXPECT_TRUE(qa->to_rts(Psn(1000)).ok());
        EXPECT_TRUE(qb->to_rts(Psn(77)).ok());
        writer.qp = qa;
        writer.src = src.data();
        writer.dst = reinterpret_cast<uint64_t>(dst.data());
        writer.rkey = rkey;
        writer.bytes = bytes;
        writer.messages = messages;
        a->worker(0).set_app(&writer);
    }

    // Starts both ends, waits for every message and checks every byte
    // (callers: ASSERT_NO_FATAL_FAILURE).
    void run_verified(std::chrono::seconds limit = std::chrono::seconds(60)) {
        ASSERT_TRUE(a->start().ok());
        ASSERT_TRUE(b->start().ok());
        ASSERT_TRUE(wait_done(limit)) << writer.done.load() << " of " << writer.messages << " done";
        EXPECT_EQ(writer.failed.load(), 0u);
        EXPECT_EQ(dst, src) << "B's memory differs from what A wrote";
    }

    bool wait_done(std::chrono::seconds limit) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            if (writer.done.load() + writer.failed.load() == writer.messages) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }
};

// Sends a raw frame into B's plane 0 through A's port 0 ring (queue 0):
// the ring PMD's TX, from this (non-lcore) thread, before the workers start.
void send_stray(uint16_t port_id, rte_mempool *mp) {
    rte_mbuf *m = rte_pktmbuf_alloc(mp);
    ASSERT_NE(m, nullptr);
    uint8_t *d = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, 60));
    std::memset(d, 0, 60);
    d[12] = 0x86;  // the IPv6 ether type over zeros: not MRC
    d[13] = 0xdd;
    ASSERT_EQ(rte_eth_tx_burst(port_id, 0, &m, 1), 1);
}

// Sends an Ethernet/IPv6/UDP frame to the MRC port with `payload` zero bytes
// and UDP checksum 0 (wrong over IPv6), the same way as send_stray.
void send_ipv6_cksum0(uint16_t port_id, rte_mempool *mp, uint16_t payload) {
    rte_mbuf *m = rte_pktmbuf_alloc(mp);
    ASSERT_NE(m, nullptr);
    const uint16_t len = uint16_t(wire::kEthIpv6UdpBytes + payload);
    uint8_t *d = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, len));
    std::memset(d, 0, len);
    wire::Udp6FrameSpec sp;
    sp.src_port = 49152;
    sp.dst_port = wire::kDefaultMrcPort;
    sp.src_ip.b[0] = sp.dst_ip.b[0] = 0xfd;
    sp.src_ip.b[15] = 2;
    sp.dst_ip.b[15] = 1;
    wire::write_eth_ipv6_udp(d, sp, payload);
    ASSERT_EQ(rte_eth_tx_burst(port_id, 0, &m, 1), 1);
}

std::string telemetry(const std::string &cmd) {
    const std::string path = std::string(rte_eal_get_runtime_dir()) + "/dpdk_telemetry.v2";
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd < 0) return "";
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0) {
        char buf[65536];
        (void)::recv(fd, buf, sizeof buf, 0);  // the greeting
        if (::send(fd, cmd.data(), cmd.size(), 0) == ssize_t(cmd.size())) {
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n > 0) out.assign(buf, size_t(n));
        }
    }
    ::close(fd);
    return out;
}

TEST(Dataplane, HandOffBetweenWorkersAndEveryByteArrives) {
    Fixture f("h", 2, 64, 60000);
    ASSERT_TRUE(f.a && f.b);
    // A stray frame waiting in B's plane-0 ring before the start.
    rte_mempool *mp = rte_mempool_lookup("dpa_pool");
    ASSERT_NE(mp, nullptr);
    send_stray(f.a->port(0).id(), mp);
    telemetry_attach(f.b.get());
    ASSERT_TRUE(f.a->start().ok());
    ASSERT_TRUE(f.b->start().ok());
    ASSERT_TRUE(f.wait_done(std::chrono::seconds(60)))
        << f.writer.done.load() << " of " << f.writer.messages << " done";
    EXPECT_EQ(f.writer.failed.load(), 0u);
    EXPECT_EQ(f.dst, f.src) << "B's memory differs from what A wrote";

    // Telemetry reads the live counters through snapshots: once the
    // snapshot has caught up with the last byte, every counter is final.
    nlohmann::json stats;
    EXPECT_TRUE(wait_until(
        [&] {
            stats = nlohmann::json::parse(telemetry("/mrc/stats"), nullptr, false);
            return stats.is_object() &&
                   stats["/mrc/stats"].value("qp_rx_data_bytes", uint64_t{0}) == f.src.size();
        },
        std::chrono::seconds(10)))
        << stats;
    ASSERT_TRUE(stats.is_object()) << telemetry("/mrc/stats");
    const auto &s = stats["/mrc/stats"];
    EXPECT_GE(s["handoff_out"].get<uint64_t>(), 64u * 43) << "B's worker 0 handed data over";
    EXPECT_EQ(s["handoff_full"], 0);
    EXPECT_EQ(s["rx_stray"], 1) << "the IPv6 frame is counted and dropped";
    EXPECT_EQ(s["qp_rx_data_bytes"].get<uint64_t>(), f.src.size());
    EXPECT_EQ(s["qps"], 1);
    const auto planes = nlohmann::json::parse(telemetry("/mrc/planes"), nullptr, false);
    ASSERT_TRUE(planes.is_object());
    EXPECT_EQ(planes["/mrc/planes"]["0"]["link"], "up");
    EXPECT_EQ(planes["/mrc/planes"]["1"]["port"], "net_ring_hb1");
    f.a->stop();
    f.b->stop();
    // A's acks came back through A's hand-off ring too (B answers from worker 1).
    EXPECT_GT(f.a->totals().worker.handoff_in, 0u);
    EXPECT_EQ(f.a->totals().worker.tx_nombuf, 0u);
    telemetry_attach(nullptr);
}

// IPv6 through the dataplane: RX finds the MRC header behind the IPv6 header
// and checks the UDP checksum over its pseudo header (a zero one is counted
// as bad), TX sums it in software while copying the payload (net_ring has
// no offload), and both ends place every byte.
TEST(Dataplane, Ipv6EveryByteArrivesAndAZeroChecksumIsDropped) {
    Fixture f("6", 2, 64, 60000, nullptr, true);
    ASSERT_TRUE(f.a && f.b);
    rte_mempool *mp = rte_mempool_lookup("dpa_pool");
    ASSERT_NE(mp, nullptr);
    send_ipv6_cksum0(f.a->port(0).id(), mp, 64);
    ASSERT_NO_FATAL_FAILURE(f.run_verified());
    f.a->stop();
    f.b->stop();
    const WorkerSnapshot ta = f.a->totals(), tb = f.b->totals();
    EXPECT_EQ(tb.worker.rx_bad_cksum, 1u) << "the frame with UDP checksum 0";
    EXPECT_EQ(ta.worker.rx_bad_cksum, 0u);
    EXPECT_EQ(ta.worker.rx_stray + tb.worker.rx_stray, 0u);
    EXPECT_EQ(ta.worker.rx_truncated + tb.worker.rx_truncated, 0u);
    EXPECT_GE(tb.worker.rx_packets, 64u * 43);
    EXPECT_GT(ta.worker.rx_packets, 0u);
    // Each end announced its two plane addresses (an unsolicited neighbour
    // advert per plane), and everything else was MRC over IPv6.
    EXPECT_EQ(ta.worker.rx_nd, 2u);
    EXPECT_EQ(tb.worker.rx_nd, 2u);
    EXPECT_EQ(ta.worker.tx_nd, 2u);
    EXPECT_EQ(ta.worker.rx_ipv6 + ta.worker.rx_nd, ta.worker.rx_packets)
        << "acks came back over IPv6";
    EXPECT_EQ(tb.worker.rx_ipv6 + tb.worker.rx_nd + 1, tb.worker.rx_packets)
        << "all but the bad frame";
    EXPECT_EQ(ta.worker.tx_oversize + tb.worker.tx_oversize, 0u) << "frames fit the MTU";
    EXPECT_EQ(f.a->max_payload_bytes() + wire::kIpv6ExtraBytes,
              f.a->config().mtu_bytes - (wire::kDataImmHdrBytes - sizeof(wire::EthHdr)));
}

// A frame over the port's MTU is dropped and counted before it reaches the
// device, not left in the queue (a PMD such as net_tap refuses it and stops
// its burst there, so it would block the plane for good): IPv6 QPs sized
// for IPv4 because the dataplane was not told the planes' IPv6 addresses.
TEST(Dataplane, FramesOverTheMtuAreCountedNotQueued) {
    Fixture f("o", 1, 4, 60000, nullptr, true);
    ASSERT_TRUE(f.a && f.b);
    const uint32_t v4_payload =
        f.a->config().mtu_bytes - uint32_t(wire::kDataImmHdrBytes - sizeof(wire::EthHdr));
    ASSERT_EQ(f.a->max_payload_bytes() + wire::kIpv6ExtraBytes, v4_payload);
    // A's QP again, with IPv4's payload over its IPv6 path.
    QpConfig qc;
    qc.mtu_payload_bytes = v4_payload;
    Endpoint &ea = f.a->worker(0).endpoint();
    Qp *q = ea.create_qp(qc).value();
    ASSERT_TRUE(q->to_init(kPd).ok());
    QpPeer peer;
    peer.dst_qpn = 1;
    peer.planes = 1;
    peer.path[0].ipv6 = true;
    peer.path[0].src_ip6 = Fixture::ip6(0, 1);
    peer.path[0].dst_ip6 = Fixture::ip6(0, 2);
    peer.path[0].src_mac = f.a->port(0).mac();
    peer.path[0].dst_mac = f.b->port(0).mac();
    ASSERT_TRUE(q->to_rtr(peer, Psn(5)).ok());
    ASSERT_TRUE(q->to_rts(Psn(5)).ok());
    f.writer.qp = q;
    ASSERT_TRUE(f.a->start().ok());
    ASSERT_TRUE(f.b->start().ok());
    ASSERT_TRUE(wait_until([&] { return f.a->totals().worker.tx_oversize > 0; },
                           std::chrono::seconds(10), std::chrono::milliseconds(1)));
    // Frames that fit (each message's short last packet, retransmissions
    // of it) still go out after them: the queue was not blocked.
    const uint64_t before = f.a->totals().port_tx_pkts[0];
    ASSERT_TRUE(wait_until([&] { return f.a->totals().port_tx_pkts[0] > before; },
                           std::chrono::seconds(10), std::chrono::milliseconds(1)));
    f.a->stop();
    f.b->stop();
}

// A plane cut in the middle of an IPv6 transfer: the rest goes over the
// other plane and every byte arrives. (Zero-copy TX is not tried here:
// net_ring hands the two-segment frames over as they are, and the receiving
// worker drops multi-segment frames, counted as rx_multiseg.)
TEST(Dataplane, Ipv6PortCutMidTransferCompletes) {
    Fixture f("z", 2, 300, 60000, nullptr, true);
    ASSERT_TRUE(f.a && f.b);
    ASSERT_TRUE(f.a->start().ok());
    ASSERT_TRUE(f.b->start().ok());
    ASSERT_TRUE(wait_until([&] { return f.writer.done.load() >= 30; }, std::chrono::seconds(60),
                           std::chrono::milliseconds(1)));
    ASSERT_TRUE(f.a->cut_port(0).ok());
    ASSERT_TRUE(f.wait_done(std::chrono::seconds(90)))
        << f.writer.done.load() << " of " << f.writer.messages << " done";
    EXPECT_EQ(f.writer.failed.load(), 0u);
    EXPECT_EQ(f.dst, f.src);
    const WorkerSnapshot t = f.a->totals();
    EXPECT_GT(t.port_tx_pkts[1], t.port_tx_pkts[0]);
    f.a->stop();
    f.b->stop();
    EXPECT_EQ(f.b->totals().worker.rx_bad_cksum, 0u);
}

TEST(Dataplane, PortCutMidTransferCompletesOnTheOtherPlane) {
    Fixture f("c", 2, 400, 60000);
    ASSERT_TRUE(f.a && f.b);
    ASSERT_TRUE(f.a->start().ok());
    ASSERT_TRUE(f.b->start().ok());
    ASSERT_TRUE(wait_until([&] { return f.writer.done.load() >= 40; }, std::chrono::seconds(60),
                           std::chrono::milliseconds(1)))
        << f.writer.done.load() << " done before the cut";
    ASSERT_TRUE(f.a->cut_port(1).ok());
    ASSERT_TRUE(f.wait_done(std::chrono::seconds(90)))
        << f.writer.done.load() << " of " << f.writer.messages << " done";
    EXPECT_EQ(f.writer.failed.load(), 0u);
    EXPECT_EQ(f.dst, f.src);
    EXPECT_TRUE(wait_until([&] { return f.a->link_up_mask() == 0x1; }, std::chrono::seconds(5)))
        << "the cut port reads as down: " << f.a->link_up_mask();
    const WorkerSnapshot t = f.a->totals();
    EXPECT_GT(t.port_tx_pkts[0], t.port_tx_pkts[1]);
    f.a->stop();
    f.b->stop();
}

// The adaptive idle mode (mrcd's default): a transfer over ports without RX
// interrupts (net_ring) still completes with every byte, the workers sleep
// once it is over, and stop() ends their sleep.
TEST(Dataplane, AdaptiveWorkersMoveEveryByteThenSleep) {
    Fixture f("ad", 2, 64, 60000, [](DataplaneConfig &c) { c.idle = IdleMode::kAdaptive; });
    ASSERT_TRUE(f.a && f.b);
    ASSERT_NO_FATAL_FAILURE(f.run_verified());
    // Every worker of both sides goes to sleep (ports without interrupts:
    // it wakes by its poll quantum).
    for (Dataplane *d : {f.a.get(), f.b.get()})
        for (uint32_t w = 0; w < d->workers(); ++w)
            EXPECT_TRUE(wait_until(
                [&] {
                    WorkerSnapshot s;
                    return d->worker(w).snapshot(&s) && s.worker.wakes_timeout >= 10;
                },
                std::chrono::seconds(10)))
                << "worker " << w << " of " << d->config().name << " does not sleep";
    f.a->stop();
    f.b->stop();
    EXPECT_FALSE(f.a->running());
}

// A worker sleeping for long quanta ends its sleep for wake() (what the
// control thread, mrcd's server thread and a hand-off do), not at the end
// of the quantum: its wakes are counted as events.
TEST(Dataplane, AdaptiveSleepEndsOnAWake) {
    Fixture f("aw", 1, 1, 1000, [](DataplaneConfig &c) {
        c.idle = IdleMode::kAdaptive;
        c.idle_spin_us = 0;
        c.idle_sleep_us = c.idle_sleep_max_us = 500'000;
    });
    ASSERT_TRUE(f.a && f.b);
    ASSERT_TRUE(f.a->start().ok());
    ASSERT_TRUE(f.b->start().ok());
    ASSERT_TRUE(f.wait_done(std::chrono::seconds(60)));
    Worker &w = f.a->worker(1);
    WorkerSnapshot s;
    ASSERT_TRUE(wait_until([&] { return w.snapshot(&s) && s.worker.idle_sleeps >= 1; },
                           std::chrono::seconds(10)));
    // A wake that lands while the worker is between sleeps does nothing:
    // ring until three have ended a sleep.
    EXPECT_TRUE(wait_until(
        [&] {
            w.wake();
            return w.snapshot(&s) && s.worker.wakes_event >= 3;
        },
        std::chrono::seconds(20), std::chrono::milliseconds(2)))
        << "wakes by event " << s.worker.wakes_event << ", by timeout " << s.worker.wakes_timeout;
    EXPECT_EQ(s.worker.wakes_rx, 0u) << "net_ring has no RX interrupts";
    f.a->stop();
    f.b->stop();
}

// An application with timed work of its own (WorkerApp::next_due_ns, as
// mrc-gen's rate pacing) is polled when it asks, however long the worker's
// poll quantum: 10 polls due every 20 ms take well under the 5 s that
// sleeping by a 500 ms quantum alone would.
class TimedApp final : public WorkerApp {
  public:
    std::atomic<uint32_t> hits{0};
    uint64_t due = 0;
    uint32_t poll(Worker &, uint64_t now_ns) override {
        if (due == 0) due = now_ns + 20'000'000;
        if (now_ns >= due) {
            hits.fetch_add(1);
            due = now_ns + 20'000'000;
        }
        return 0;
    }
    uint64_t next_due_ns(uint64_t) const override { return due == 0 ? UINT64_MAX : due; }
};

TEST(Dataplane, AdaptiveSleepEndsWhenTheApplicationIsDue) {
    Fixture f("at", 1, 1, 1000, [](DataplaneConfig &c) {
        c.idle = IdleMode::kAdaptive;
        c.idle_spin_us = 0;
        c.idle_sleep_us = c.idle_sleep_max_us = 500'000;
    });
    ASSERT_TRUE(f.a && f.b);
    TimedApp app;
    f.a->worker(1).set_app(&app);
    ASSERT_TRUE(f.a->start().ok());
    ASSERT_TRUE(f.b->start().ok());
    ASSERT_TRUE(f.wait_done(std::chrono::seconds(60)));
    const auto t0 = std::chrono::steady_clock::now();
    const uint32_t h0 = app.hits.load();
    ASSERT_TRUE(wait_until([&] { return app.hits.load() >= h0 + 10; }, std::chrono::seconds(20)));
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, std::chrono::milliseconds(2500))
        << "10 due polls took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
        << " ms: the worker slept past the application's deadline";
    f.a->stop();
    f.b->stop();
}

TEST(Dataplane, BadConfigurationIsRefusedWithTheReason) {
    DataplaneConfig c;
    EXPECT_NE(Dataplane::create(c).error().message.find("no ports"), std::string::npos);
    c.ports = {"no_such_port"};
    c.worker_lcores = {1};
    auto r = Dataplane::create(c);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("no_such_port"), std::string::npos) << r.error().message;
    c.ports = {"anything"};
    c.worker_lcores = {0};
    r = Dataplane::create(c);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("not an EAL worker lcore"), std::string::npos)
        << r.error().message;
}

}  // namespace
}  // namespace mrc::dp

int main(int argc, char **argv) {
    ::testing::InitGoogleTest(&argc, argv);
    const std::string prefix = "mrc-dp-test-" + std::to_string(getpid());
    auto r = mrc::drivers::eal_init(std::vector<std::string>{
        "dataplane_test", "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix, "--lcores",
        "0@0,1@0,2@1,3@1,4@0", "--log-level", "lib.eal:error"});
    if (!r) {
        std::fprintf(stderr, "EAL: %s\n", r.error().message.c_str());
        return 1;
    }
    const int rc = RUN_ALL_TESTS();
    mrc::drivers::eal_cleanup();
    return rc;
}
