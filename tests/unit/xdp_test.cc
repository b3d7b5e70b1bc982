// The XDP steering program and its loader's pure parts.
//
// The program is run by the kernel on crafted frames (BPF_PROG_TEST_RUN):
// that needs root, so those tests skip without it. No interface, no socket:
// an MRC frame therefore takes the program's no-socket path, which is how
// the test sees that it was recognised, and every verdict must be XDP_PASS.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "xdp/steer.h"

extern "C" {
#include "xdp/steer_abi.h"
}

using namespace mrc;

namespace {

TEST(AfXdpArgs, ShortFormExpandsToPmdDevargs) {
    auto a = xdp::af_xdp_args("af_xdp:veth0", 2, "/p/mrc_steer.bpf.o");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->iface, "veth0");
    EXPECT_TRUE(a->own_program);
    EXPECT_EQ(a->devargs,
              "net_af_xdp_veth0,iface=veth0,start_queue=0,queue_count=2,"
              "xdp_prog=/p/mrc_steer.bpf.o");
}

TEST(AfXdpArgs, ShortFormKeepsGivenQueuesAndOptions) {
    auto a = xdp::af_xdp_args("af_xdp:eth1,start_queue=4,queue_count=1,busy_budget=0", 1, "/p");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->devargs,
              "net_af_xdp_eth1,iface=eth1,start_queue=4,queue_count=1,busy_budget=0,xdp_prog=/p");
}

TEST(AfXdpArgs, PmdDevargsGetOurProgramUnlessTheyNameOne) {
    auto a = xdp::af_xdp_args("net_af_xdp0,iface=eth2", 1, "/p");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->iface, "eth2");
    EXPECT_EQ(a->devargs, "net_af_xdp0,iface=eth2,xdp_prog=/p");
    EXPECT_TRUE(a->own_program);
    auto b = xdp::af_xdp_args("net_af_xdp0,iface=eth2,xdp_prog=/mine.o", 1, "/p");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->devargs, "net_af_xdp0,iface=eth2,xdp_prog=/mine.o");
    EXPECT_FALSE(b->own_program);
    auto c = xdp::af_xdp_args("net_af_xdp0", 1, "/p");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->iface, "");  // Port::open refuses it: no interface
}

TEST(AfXdpArgs, OtherDevicesAreNotAfXdp) {
    EXPECT_FALSE(xdp::af_xdp_args("net_memif0,role=server", 1, "/p"));
    EXPECT_FALSE(xdp::af_xdp_args("net_af_packet0,iface=eth0", 1, "/p"));
    EXPECT_FALSE(xdp::af_xdp_args("0000:3b:00.0", 1, "/p"));
}

TEST(Explain, NamesTheCauseAndWhatToDo) {
    EXPECT_NE(xdp::explain("x", "eth9", ENODEV).find("no network interface 'eth9'"),
              std::string::npos);
    const std::string perm = xdp::explain("loading", "eth0", EPERM);
    EXPECT_NE(perm.find("permission denied"), std::string::npos);
    EXPECT_NE(perm.find("CAP_SYS_ADMIN"), std::string::npos);
    EXPECT_NE(xdp::explain("x", "eth0", -ENOSYS).find("CONFIG_BPF_SYSCALL"), std::string::npos);
    EXPECT_NE(xdp::explain("x", "eth0", EAFNOSUPPORT).find("CONFIG_XDP_SOCKETS"),
              std::string::npos);
    EXPECT_NE(xdp::explain("x", "eth0", EOPNOTSUPP).find("neither native nor generic"),
              std::string::npos);
    EXPECT_NE(xdp::explain("x", "eth0", EBUSY).find("another XDP program"), std::string::npos);
    EXPECT_NE(xdp::explain("x", "eth0", EIO).find(std::strerror(EIO)), std::string::npos);
}

TEST(Query, UnknownInterfaceIsAClearError) {
    auto q = xdp::query("mrcnosuch0");
    ASSERT_FALSE(q);
    EXPECT_NE(q.error().message.find("no network interface 'mrcnosuch0'"), std::string::npos);
    EXPECT_FALSE(xdp::query(""));
    EXPECT_FALSE(xdp::query(std::string(40, 'x')));
}

// ---- the program, run by the kernel ----

struct Frame {
    std::vector<uint8_t> b;
    void put(std::initializer_list<uint8_t> v) { b.insert(b.end(), v); }
    void put16(uint16_t v) { put({uint8_t(v >> 8), uint8_t(v)}); }
    void put32(uint32_t v) { put16(uint16_t(v >> 16)), put16(uint16_t(v)); }
};

constexpr uint16_t kMrcPort = 4797;
constexpr uint32_t kLocal = 0x0a4d0002;  // 10.77.0.2

struct Spec {
    uint16_t vlans = 0;
    bool ipv6 = false;
    uint8_t proto = 17;
    uint32_t dst = kLocal;
    uint16_t dport = kMrcPort;
    uint16_t frag = 0;  // IPv4 flags + offset field
    uint8_t ihl = 5;
};

Frame frame(const Spec &s) {
    Frame f;
    f.put({2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1});
    for (uint16_t i = 0; i < s.vlans; ++i) {
        f.put16(i == 0 && s.vlans == 2 ? 0x88a8 : 0x8100);
        f.put16(100 + i);
    }
    if (!s.ipv6) {
        f.put16(0x0800);
        f.put({uint8_t(0x40 | s.ihl), 0});
        f.put16(uint16_t(s.ihl * 4 + 8 + 16));
        f.put16(1);
        f.put16(s.frag);
        f.put({64, s.proto, 0, 0});
        f.put32(0x0a4d0001);
        f.put32(s.dst);
        for (int i = 5; i < s.ihl; ++i)
            f.put32(0x01010101);  // NOP options
    } else {
        f.put16(0x86dd);
        f.put({0x60, 0, 0, 0});
        f.put16(8 + 16);
        f.put({s.proto, 64});
        for (int i = 0; i < 32; ++i)
            f.put({uint8_t(i)});
    }
    f.put16(49152);
    f.put16(s.dport);
    f.put16(8 + 16);
    f.put16(0);
    for (int i = 0; i < 16; ++i)
        f.put({0xab});
    return f;
}

class SteerProgram : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "loading BPF programs needs root";
        auto path = xdp::program_path();
        if (!path) GTEST_SKIP() << path.error().message;
        obj_ = bpf_object__open_file(path->c_str(), nullptr);
        ASSERT_NE(obj_, nullptr) << "cannot open " << *path;
        ASSERT_EQ(bpf_object__load(obj_), 0) << "the verifier refused " << *path;
        bpf_program *p = bpf_object__find_program_by_name(obj_, MRC_STEER_PROG_NAME);
        ASSERT_NE(p, nullptr);
        prog_ = bpf_program__fd(p);
        cfg_ = bpf_map__fd(bpf_object__find_map_by_name(obj_, MRC_STEER_CFG_MAP));
        stats_ = bpf_map__fd(bpf_object__find_map_by_name(obj_, MRC_STEER_STATS_MAP));
        ASSERT_GE(cfg_, 0);
        ASSERT_GE(stats_, 0);
        ASSERT_NE(bpf_object__find_map_by_name(obj_, MRC_STEER_XSKS_MAP), nullptr);
    }
    void TearDown() override {
        if (obj_) bpf_object__close(obj_);
    }
    void configure(uint16_t port, std::vector<uint32_t> v4, bool with_v6 = false) {
        mrc_steer_cfg c{};
        c.udp_port = htons(port);
        c.n_ipv4 = uint8_t(v4.size());
        for (size_t i = 0; i < v4.size(); ++i)
            c.ipv4[i] = htonl(v4[i]);
        if (with_v6) {  // the address frame() sends to: bytes 16..31
            c.n_ipv6 = 1;
            for (int b = 0; b < 16; ++b)
                c.ipv6[0][b] = uint8_t(16 + b);
        }
        const uint32_t k = 0;
        ASSERT_EQ(bpf_map_update_elem(cfg_, &k, &c, BPF_ANY), 0);
    }
    std::array<uint64_t, MRC_STEER_NSTATS> counters() {
        std::array<uint64_t, MRC_STEER_NSTATS> out{};
        std::vector<uint64_t> v(static_cast<size_t>(libbpf_num_possible_cpus()));
        for (uint32_t s = 0; s < MRC_STEER_NSTATS; ++s) {
            EXPECT_EQ(bpf_map_lookup_elem(stats_, &s, v.data()), 0);
            for (uint64_t x : v)
                out[s] += x;
        }
        return out;
    }
    // Runs the program on `f`; returns which counter moved (-1: none or several).
    int run(const Frame &f, size_t len = SIZE_MAX) {
        const auto before = counters();
        std::vector<uint8_t> data(f.b.begin(), f.b.begin() + std::min(len, f.b.size()));
        bpf_test_run_opts o{};
        o.sz = sizeof(o);
        o.data_in = data.data();
        o.data_size_in = uint32_t(data.size());
        o.repeat = 1;
        EXPECT_EQ(bpf_prog_test_run_opts(prog_, &o), 0) << std::strerror(errno);
        EXPECT_EQ(o.retval, uint32_t(XDP_PASS)) << "a verdict other than PASS with no socket";
        const auto after = counters();
        int moved = -1;
        for (int s = 0; s < MRC_STEER_NSTATS; ++s) {
            if (after[s] == before[s]) continue;
            if (moved != -1 || after[s] != before[s] + 1) return -1;
            moved = s;
        }
        return moved;
    }

    bpf_object *obj_ = nullptr;
    int prog_ = -1, cfg_ = -1, stats_ = -1;
};

TEST_F(SteerProgram, UnconfiguredSteersNothing) {
    EXPECT_EQ(run(frame({})), MRC_STEER_PASSED);
}

TEST_F(SteerProgram, MrcFramesAreSteeredOthersPassed) {
    configure(kMrcPort, {kLocal});
    EXPECT_EQ(run(frame({})), MRC_STEER_NO_SOCKET);            // steered; no socket here
    EXPECT_EQ(run(frame({.vlans = 1})), MRC_STEER_NO_SOCKET);  // 802.1Q
    EXPECT_EQ(run(frame({.vlans = 2})), MRC_STEER_PASSED);     // QinQ: the dataplane drops it
    EXPECT_EQ(run(frame({.ihl = 7})), MRC_STEER_NO_SOCKET);    // IPv4 options
    EXPECT_EQ(run(frame({.ipv6 = true})), MRC_STEER_PASSED);   // no IPv6 address: not steered
    EXPECT_EQ(run(frame({.dst = kLocal + 1})), MRC_STEER_ADDR_MISS);
    EXPECT_EQ(run(frame({.dport = 4798})), MRC_STEER_PASSED);
    EXPECT_EQ(run(frame({.dport = 22})), MRC_STEER_PASSED);
    EXPECT_EQ(run(frame({.proto = 6})), MRC_STEER_PASSED);                // TCP to the same port
    EXPECT_EQ(run(frame({.frag = 0x2000})), MRC_STEER_PASSED);            // first fragment (MF)
    EXPECT_EQ(run(frame({.frag = 0x0010})), MRC_STEER_PASSED);            // a later fragment
    EXPECT_EQ(run(frame({.ipv6 = true, .proto = 0})), MRC_STEER_PASSED);  // extension header
}

TEST_F(SteerProgram, Ipv6OnlyToAConfiguredAddress) {
    configure(kMrcPort, {kLocal}, /*with_v6=*/true);
    EXPECT_EQ(run(frame({.ipv6 = true})), MRC_STEER_NO_SOCKET);
    EXPECT_EQ(run(frame({.ipv6 = true, .dport = 53})), MRC_STEER_PASSED);
    EXPECT_EQ(run(frame({.ipv6 = true, .proto = 0})), MRC_STEER_PASSED);
}

TEST_F(SteerProgram, AnyAddressWhenNoneConfigured) {
    configure(kMrcPort, {});
    EXPECT_EQ(run(frame({.dst = 0x01020304})), MRC_STEER_NO_SOCKET);
    configure(kMrcPort, {1, 2, 3, kLocal});
    EXPECT_EQ(run(frame({})), MRC_STEER_NO_SOCKET);  // the fourth address
    EXPECT_EQ(run(frame({.dst = 5})), MRC_STEER_ADDR_MISS);
}

TEST_F(SteerProgram, TruncatedFramesAreAllPassed) {
    configure(kMrcPort, {kLocal});
    configure(kMrcPort, {kLocal}, /*with_v6=*/true);
    for (const Spec &s : {Spec{}, Spec{.vlans = 1}, Spec{.ipv6 = true}, Spec{.ihl = 15}}) {
        const Frame f = frame(s);
        const size_t full_headers = f.b.size() - 16;  // up to the UDP payload
        // Frames shorter than Ethernet are refused by BPF_PROG_TEST_RUN itself.
        for (size_t len = 14; len < full_headers; ++len)
            EXPECT_EQ(run(f, len), MRC_STEER_PASSED) << "length " << len;
    }
}

}  // namespace
