// Scope: the DPDK port layer (drivers/port) on virtual devices, with EAL
// started under --no-huge. Frames are moved both ways and checked byte for
// byte, checksums included, over:
//   - net_ring: a crossed pair of rings in this process;
//   - net_memif: two mrc-ports processes, server and client, started in
//     either order;
//   - net_af_packet over a veth pair (root only);
//   - net_tap, two taps joined by a Linux bridge (root only: uses the tap's
//     checksum offload path).
// Also: bad devargs, impossible MTU and an impossible pool give clear errors.
#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_interrupts.h>
#include <rte_ring.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port/eal.h"
#include "port/port.h"
#include "port/selftest.h"
#include "support/subprocess.h"

namespace mrc::drivers {
namespace {

rte_mempool *g_pool = nullptr;

std::unique_ptr<Port> open_port(const std::string &device, uint16_t mtu = 1500) {
    PortOptions o;
    o.device = device;
    o.rx_desc = 256;
    o.tx_desc = 256;
    o.mtu_bytes = mtu;
    auto p = Port::open(o, g_pool);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    return p ? std::move(p.value()) : nullptr;
}

void expect_clean(const SelftestStats &s, uint32_t frames, const char *dir) {
    EXPECT_EQ(s.received, frames) << dir;
    EXPECT_EQ(s.bad_cksum, 0u) << dir;
    EXPECT_EQ(s.bad_payload, 0u) << dir;
    EXPECT_EQ(s.duplicates, 0u) << dir;
    EXPECT_EQ(s.hw_cksum_checked + s.sw_cksum_checked, s.received) << dir;
    EXPECT_GT(s.payload_bytes, 0u) << dir;
}

TEST(PortSmoke, RingPairBothWays) {
    // Two ports over two rings, crossed: what one sends, the other receives.
    rte_ring *r0 = rte_ring_create("smoke_r0", 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    rte_ring *r1 = rte_ring_create("smoke_r1", 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    ASSERT_NE(r0, nullptr);
    ASSERT_NE(r1, nullptr);
    ASSERT_GE(rte_eth_from_rings("sa", &r0, 1, &r1, 1, SOCKET_ID_ANY), 0);
    ASSERT_GE(rte_eth_from_rings("sb", &r1, 1, &r0, 1, SOCKET_ID_ANY), 0);
    {
        // rte_eth_from_rings names its ports net_ring_<name>.
        auto a = open_port("net_ring_sa");
        auto b = open_port("net_ring_sb");
        ASSERT_TRUE(a && b);
        EXPECT_TRUE(a->link().up);
        SelftestOptions o;
        o.frames = 5000;
        o.min_payload_bytes = 12;
        o.max_payload_bytes = 1458;
        auto r = selftest_pair(*a, *b, g_pool, o);
        ASSERT_TRUE(r.ok()) << r.error().message;
        expect_clean(r->a_to_b, o.frames, "a->b");
        expect_clean(r->b_to_a, o.frames, "b->a");
        // net_ring has no checksum offload: every frame was checked in software.
        EXPECT_EQ(r->a_to_b.sw_cksum_checked, o.frames);
        const auto ca = a->counters();
        EXPECT_EQ(ca.tx_packets, o.frames);
        EXPECT_EQ(ca.rx_packets, o.frames);
    }
    rte_ring_free(r0);
    rte_ring_free(r1);
}

TEST(PortSmoke, UnknownDeviceIsAClearError) {
    PortOptions o;
    o.device = "net_nosuchdriver0";
    auto p = Port::open(o, g_pool);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("net_nosuchdriver0"), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("--vdev"), std::string::npos) << p.error().message;

    o.device = "net_ring_never_made";
    p = Port::open(o, g_pool);
    ASSERT_FALSE(p.ok());
}

TEST(PortSmoke, ImpossibleMtuAndQueuesAreRefused) {
    PortOptions o;
    o.device = "net_null_mtu,size=64";
    o.mtu_bytes = 9000;  // larger than the pool's data room
    auto p = Port::open(o, g_pool);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("MTU"), std::string::npos) << p.error().message;

    PortOptions q;
    q.device = "net_null_q,size=64";
    q.queues = 4096;
    p = Port::open(q, g_pool);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("queues"), std::string::npos) << p.error().message;
}

TEST(PortSmoke, PoolTooLargeForHeapIsAClearError) {
    auto pool = create_mbuf_pool("too_big", (1u << 24) - 1, 9216, 0);
    ASSERT_FALSE(pool.ok());
    EXPECT_NE(pool.error().message.find("-m"), std::string::npos) << pool.error().message;
}

TEST(PortSmoke, PoolSizingCoversRings) {
    PoolSizing s;
    s.ports = 4;
    s.queues_per_port = 2;
    s.rx_desc = 512;
    s.tx_desc = 512;
    s.lcores = 2;
    const uint32_t n = mbufs_needed(s);
    EXPECT_GE(n, 4u * 2 * 1024 + 2 * (256 + 64) + 1024);
    EXPECT_EQ((n + 1) & n, 0u) << "not 2^k - 1";
}

// ---- two processes over memif --------------------------------------------------

struct PeerRun {
    std::optional<int> rc;
    std::string log;
    nlohmann::json summary;
};

std::vector<std::string> ports_cmd(const std::string &vdev, const std::string &mode,
                                   uint32_t frames, const std::string &json) {
    const char *bin = std::getenv("MRC_PORTS_BIN");
    static int n = 0;
    const std::string prefix = "mrc-smoke-" + std::to_string(getpid()) + "-" + std::to_string(n++);
    return {bin ? bin : "mrc-ports",
            "--no-huge",
            "-m",
            "256",
            "--no-shconf",
            "--file-prefix",
            prefix,
            "--no-pci",
            "-l",
            "0",
            "--vdev=" + vdev,
            "--",
            "--mode",
            mode,
            "--frames",
            std::to_string(frames),
            "--json",
            json,
            "--idle-timeout-ms",
            "5000",
            "--link-timeout-ms",
            "10000"};
}

void memif_two_processes(bool client_first) {
    const std::string dir = test::make_temp_dir("memif");
    const std::string sock = dir + "/memif.sock";
    const uint32_t frames = 3000;
    auto start_server = [&] {
        return test::Subprocess::start(ports_cmd("net_memif0,role=server,socket=" + sock, "echo",
                                                 frames, dir + "/server.json"),
                                       dir + "/server.log");
    };
    auto start_client = [&] {
        return test::Subprocess::start(ports_cmd("net_memif0,role=client,socket=" + sock, "ping",
                                                 frames, dir + "/client.json"),
                                       dir + "/client.log");
    };
    std::optional<test::Subprocess> server, client;
    if (client_first) {
        // The client must keep trying until the server listens.
        client = start_client();
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        server = start_server();
    } else {
        server = start_server();
        client = start_client();
    }
    ASSERT_TRUE(server.has_value() && client.has_value())
        << "cannot start " << std::getenv("MRC_PORTS_BIN");
    const auto crc = client->wait_for(std::chrono::seconds(60));
    const auto src = server->wait_for(std::chrono::seconds(20));
    ASSERT_TRUE(crc.has_value()) << "client hung:\n" << client->log();
    ASSERT_TRUE(src.has_value()) << "server hung:\n" << server->log();
    EXPECT_EQ(*crc, 0) << client->log();
    EXPECT_EQ(*src, 0) << server->log();
    auto cj = nlohmann::json::parse(test::read_file(dir + "/client.json"), nullptr, false);
    auto sj = nlohmann::json::parse(test::read_file(dir + "/server.json"), nullptr, false);
    ASSERT_FALSE(cj.is_discarded()) << client->log();
    ASSERT_FALSE(sj.is_discarded()) << server->log();
    // Client -> server: every request arrived intact at the server.
    EXPECT_EQ(sj["stats"]["received"], frames);
    EXPECT_EQ(sj["stats"]["bad_cksum"], 0);
    EXPECT_EQ(sj["stats"]["bad_payload"], 0);
    // Server -> client: every reply, with checksums recomputed, arrived intact.
    EXPECT_EQ(cj["stats"]["received"], frames);
    EXPECT_EQ(cj["stats"]["bad_cksum"], 0);
    EXPECT_EQ(cj["stats"]["bad_payload"], 0);
    EXPECT_EQ(cj["ports"][0]["driver"], "net_memif");
    test::sh("rm -rf " + dir);
}

TEST(PortSmoke, MemifTwoProcessesBothWays) {
    memif_two_processes(false);
}
TEST(PortSmoke, MemifClientStartedBeforeServer) {
    memif_two_processes(true);
}

TEST(PortSmoke, MissingVdevDriverFailsWithOneClearLine) {
    const std::string dir = test::make_temp_dir("badvdev");
    auto p = test::Subprocess::start(ports_cmd("net_nosuchpmd0", "info", 1, dir + "/x.json"),
                                     dir + "/log");
    ASSERT_TRUE(p.has_value());
    const auto rc = p->wait_for(std::chrono::seconds(30));
    ASSERT_TRUE(rc.has_value()) << "hung";
    EXPECT_EQ(*rc, 2) << p->log();
    EXPECT_NE(p->log().find("mrc-ports: EAL initialisation failed"), std::string::npos) << p->log();
    test::sh("rm -rf " + dir);
}

// ---- root only: kernel-backed virtual devices ----------------------------------

class KernelPorts : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!test::is_root())
            GTEST_SKIP() << "needs root (creates veth/tap/bridge interfaces); CI runs as root";
        if (test::sh("command -v ip >/dev/null") != 0) GTEST_SKIP() << "needs iproute2 (ip)";
    }
    void TearDown() override {
        for (const auto &c : cleanup_)
            test::sh(c + " >/dev/null 2>&1");
    }
    // Quietens the kernel's own traffic (IPv6 ND, MLD) on a test interface.
    static void quiet(const std::string &ifname) {
        test::sh("sysctl -qw net.ipv6.conf." + ifname + ".disable_ipv6=1 >/dev/null 2>&1");
    }
    std::vector<std::string> cleanup_;
};

TEST_F(KernelPorts, AfPacketOverVeth) {
    const std::string a = "mrcsv0a", b = "mrcsv0b";
    test::sh("ip link del " + a + " >/dev/null 2>&1");
    ASSERT_EQ(test::sh("ip link add " + a + " type veth peer name " + b), 0);
    cleanup_.push_back("ip link del " + a);
    quiet(a);
    quiet(b);
    ASSERT_EQ(test::sh("ip link set " + a + " up && ip link set " + b + " up"), 0);
    {
        auto pa = open_port("net_af_packet_sa,iface=" + a);
        auto pb = open_port("net_af_packet_sb,iface=" + b);
        ASSERT_TRUE(pa && pb);
        ASSERT_TRUE(pa->wait_link_up(3000).up);
        ASSERT_TRUE(pb->wait_link_up(3000).up);
        SelftestOptions o;
        o.frames = 2000;
        o.window_frames = 16;
        auto r = selftest_pair(*pa, *pb, g_pool, o);
        ASSERT_TRUE(r.ok()) << r.error().message;
        expect_clean(r->a_to_b, o.frames, "a->b");
        expect_clean(r->b_to_a, o.frames, "b->a");
    }
}

TEST_F(KernelPorts, TapPairThroughBridge) {
    const std::string t0 = "mrcst0", t1 = "mrcst1", br = "mrcsbr0";
    test::sh("ip link del " + br + " >/dev/null 2>&1");
    auto p0 = open_port("net_tap_s0,iface=" + t0);
    auto p1 = open_port("net_tap_s1,iface=" + t1);
    ASSERT_TRUE(p0 && p1);
    ASSERT_EQ(test::sh("ip link add " + br + " type bridge"), 0);
    cleanup_.push_back("ip link del " + br);
    for (const auto &i : {t0, t1, br})
        quiet(i);
    ASSERT_EQ(test::sh("ip link set " + t0 + " master " + br + " && ip link set " + t1 +
                       " master " + br + " && ip link set " + br + " up && ip link set " + t0 +
                       " up && ip link set " + t1 + " up"),
              0);
    ASSERT_TRUE(p0->wait_link_up(3000).up);
    ASSERT_TRUE(p1->wait_link_up(3000).up);
    // net_tap offers TX checksum offload; the port layer must use it.
    EXPECT_TRUE(p0->caps().tx_udp_cksum);
    SelftestOptions o;
    o.dst_mac = wire::MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
    o.frames = 2000;
    o.window_frames = 16;
    auto r = selftest_pair(*p0, *p1, g_pool, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    expect_clean(r->a_to_b, o.frames, "t0->t1");
    expect_clean(r->b_to_a, o.frames, "t1->t0");
    p0.reset();
    p1.reset();
}

// RX queue interrupts (the adaptive idle mode sleeps on them): net_tap has
// them, a memif or ring port does not say it has. The descriptor becomes
// readable when the kernel sends a frame into the tap, and the frame is
// then there to take.
TEST_F(KernelPorts, TapRxInterruptFdBecomesReadableWhenAFrameArrives) {
    const std::string t = "mrcsi0";
    PortOptions o;
    o.device = "net_tap_si0,iface=" + t;
    o.rx_desc = 256;
    o.tx_desc = 256;
    o.rx_interrupts = true;
    auto p = Port::open(o, g_pool);
    ASSERT_TRUE(p.ok()) << p.error().message;
    Port &port = **p;
    quiet(t);
    ASSERT_EQ(test::sh("ip addr add 10.213.0.1/24 dev " + t + " && ip link set " + t + " up"), 0);
    ASSERT_TRUE(port.wait_link_up(3000).up);
    EXPECT_TRUE(port.caps().rx_interrupts);
    const int fd = port.rx_intr_fd(0);
    ASSERT_GE(fd, 0);
    // Take whatever the kernel sent when the link came up.
    rte_mbuf *m[32];
    for (int i = 0; i < 20; ++i) {
        const uint16_t n = port.rx_burst(0, m, 32);
        if (n) rte_pktmbuf_free_bulk(m, n);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    port.rx_intr_enable(0);
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(ep, 0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ASSERT_EQ(::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
    // A datagram to a neighbour on the tap's subnet: the kernel's ARP
    // request for it goes out through the tap, to this port.
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(s, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr.s_addr = htonl(0x0ad50002);  // 10.213.0.2
    const char x = 'x';
    ASSERT_EQ(::sendto(s, &x, 1, 0, reinterpret_cast<sockaddr *>(&to), sizeof to), 1);
    epoll_event out{};
    EXPECT_EQ(::epoll_wait(ep, &out, 1, 5000), 1) << "no interrupt for the kernel's frame";
    port.rx_intr_disable(0);
    uint16_t got = 0;
    for (int i = 0; i < 100 && got == 0; ++i) {
        got = port.rx_burst(0, m, 32);
        if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_GT(got, 0);
    if (got) rte_pktmbuf_free_bulk(m, got);
    ::close(s);
    ::close(ep);
}

TEST(PortSmoke, VirtualDevicesWithoutRxInterruptsSayNone) {
    PortOptions o;
    o.device = "net_ring_si";
    o.rx_desc = 256;
    o.tx_desc = 256;
    o.rx_interrupts = true;
    auto p = Port::open(o, g_pool);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_FALSE((*p)->caps().rx_interrupts);
    EXPECT_EQ((*p)->rx_intr_fd(0), -1);
}

// ---- work on EAL's interrupt thread --------------------------------------------

// A control callback of a PMD, as memif's is: registered on an eventfd,
// it takes a while once rung.
struct SlowCallback {
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    rte_intr_handle *h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
    std::atomic<bool> started{false}, finished{false};

    static void on_event(void *arg) {
        auto *s = static_cast<SlowCallback *>(arg);
        uint64_t v;
        if (read(s->efd, &v, sizeof v) < 0) return;
        s->started = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        s->finished = true;
    }
    bool registered() {
        return efd >= 0 && h && rte_intr_fd_set(h, efd) == 0 &&
               rte_intr_type_set(h, RTE_INTR_HANDLE_EXT) == 0 &&
               rte_intr_callback_register(h, &on_event, this) == 0;
    }
    void ring() {
        const uint64_t one = 1;
        EXPECT_EQ(write(efd, &one, sizeof one), 8);
    }
    ~SlowCallback() {
        while (rte_intr_callback_unregister(h, &on_event, this) == -EAGAIN)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        rte_intr_instance_free(h);
        close(efd);
    }
};

TEST(InterruptThread, WorkRunsThereAfterTheCallbackItIsRunning) {
    SlowCallback cb;
    ASSERT_TRUE(cb.registered());
    cb.ring();
    for (int i = 0; i < 2000 && !cb.started; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(cb.started.load());
    bool on_intr = false, callback_done = false;
    run_on_interrupt_thread([&] {
        on_intr = rte_thread_is_intr() != 0;
        callback_done = cb.finished.load();
    });
    EXPECT_TRUE(on_intr);
    // Inline (on this thread) it would have run while the callback slept.
    EXPECT_TRUE(callback_done);
}

TEST(InterruptThread, NestedWorkRunsInlineAndErrorsComeBack) {
    int depth = 0;
    run_on_interrupt_thread([&] {
        ++depth;
        run_on_interrupt_thread([&] { ++depth; });  // from that thread: inline, no deadlock
    });
    EXPECT_EQ(depth, 2);
    EXPECT_THROW(run_on_interrupt_thread([] { throw std::runtime_error("x"); }),
                 std::runtime_error);
    // Several threads at once: each call returns after its own work ran,
    // and ran there (not inline after a timeout).
    std::atomic<int> ran{0}, elsewhere{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([&] {
            for (int i = 0; i < 50; ++i) {
                bool mine = false;
                run_on_interrupt_thread([&] {
                    mine = true;
                    if (!rte_thread_is_intr()) elsewhere.fetch_add(1);
                    ran.fetch_add(1);
                });
                EXPECT_TRUE(mine);
            }
        });
    for (auto &t : ts)
        t.join();
    EXPECT_EQ(ran.load(), 200);
    EXPECT_EQ(elsewhere.load(), 0);
}

}  // namespace
}  // namespace mrc::drivers

int main(int argc, char **argv) {
    ::testing::InitGoogleTest(&argc, argv);
    auto eal = mrc::drivers::eal_init({"port_smoke", "--no-huge", "-m", "512", "--no-shconf",
                                       "--file-prefix", "mrc-smoke-" + std::to_string(getpid()),
                                       "--no-pci", "-l", "0", "--log-level=lib.eal:error"});
    if (!eal) {
        std::fprintf(stderr, "cannot start EAL: %s\n", eal.error().message.c_str());
        return 1;
    }
    auto pool = mrc::drivers::create_mbuf_pool("smoke_pool", 8191,
                                               mrc::drivers::mbuf_data_room_for_mtu(1500), 128);
    if (!pool) {
        std::fprintf(stderr, "%s\n", pool.error().message.c_str());
        return 1;
    }
    mrc::drivers::g_pool = *pool;
    const int rc = RUN_ALL_TESTS();
    rte_mempool_free(mrc::drivers::g_pool);
    mrc::drivers::eal_cleanup();
    // Child processes that failed in EAL initialisation leave their runtime
    // directories behind; remove every one this run created.
    const std::string prefix = "mrc-smoke-" + std::to_string(getpid());
    const char *xdg = std::getenv("XDG_RUNTIME_DIR");
    mrc::test::sh("rm -rf /var/run/dpdk/" + prefix + "* /tmp/dpdk/" + prefix + "*" +
                  (xdg ? std::string(" ") + xdg + "/dpdk/" + prefix + "*" : std::string()) +
                  " 2>/dev/null");
    return rc;
}
