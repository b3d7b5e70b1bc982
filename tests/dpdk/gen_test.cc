// Scope: mrc-gen end to end, two processes joined by P memif pairs (one per
// plane), EAL under --no-huge, both sharing the machine's CPUs (idle-friendly
// polling). Every run is verified byte for byte by the receiver:
//   - P = 1, 2, 4 planes, WRITE_WITH_IMM and WRITE;
//   - a plane's port cut in the middle of the run: the run completes,
//     verified, on the remaining planes;
//   - pingpong latency figures are reported;
//   - a server that vanishes, a client with nobody to talk to, bad flags:
//     clear messages and the documented exit status, never a hang.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "support/ports.h"
#include "support/subprocess.h"

namespace mrc::test {
namespace {

using nlohmann::json;

struct Pair {
    std::string dir;
    uint16_t oob_port;
    uint32_t planes;
    std::string memif_extra = {};  // more devargs for every memif port
};

Pair make_pair(uint32_t planes) {
    return {make_temp_dir("gen"), free_tcp_port(), planes};
}

std::vector<std::string> gen_cmd(const Pair &p, bool server, const std::vector<std::string> &args) {
    const char *bin = std::getenv("MRC_GEN_BIN");
    static int n = 0;
    // Two lcores on the two CPUs, crossed between the two ends.
    std::vector<std::string> c =
        dpdk_cmd(bin ? bin : "mrc-gen",
                 "mrc-gen-test-" + std::to_string(getpid()) + "-" + std::to_string(n++),
                 server ? "0@1,1@0" : "0@0,1@1");
    for (uint32_t i = 0; i < p.planes; ++i)
        c.push_back("--vdev=net_memif" + std::to_string(i) +
                    ",role=" + (server ? "server" : "client") + ",socket=" + p.dir + "/m" +
                    std::to_string(i) + ".sock" + p.memif_extra);
    c.insert(c.end(),
             {"--", "--role", server ? "server" : "client", "--oob",
              "127.0.0.1:" + std::to_string(p.oob_port), "--idle", "sleep", "--stats-period", "1",
              "--json", p.dir + (server ? "/server.json" : "/client.json"), "--timeout", "30"});
    c.insert(c.end(), args.begin(), args.end());
    return c;
}

struct Result {
    int client_rc = -1, server_rc = -1;
    json client, server;
    std::string client_log, server_log;
};

Result run_pair(const Pair &p, const std::vector<std::string> &client_args,
                const std::vector<std::string> &server_args = {}) {
    Result r;
    auto server = Subprocess::start(gen_cmd(p, true, server_args), p.dir + "/server.log");
    EXPECT_TRUE(server.has_value());
    if (!server) return r;
    auto client = Subprocess::start(gen_cmd(p, false, client_args), p.dir + "/client.log");
    EXPECT_TRUE(client.has_value());
    if (!client) return r;
    const auto crc = client->wait_for(std::chrono::seconds(90));
    const auto src = server->wait_for(std::chrono::seconds(30));
    r.client_log = client->log();
    r.server_log = server->log();
    EXPECT_TRUE(crc.has_value()) << "client hung:\n" << r.client_log;
    EXPECT_TRUE(src.has_value()) << "server hung:\n" << r.server_log;
    r.client_rc = crc.value_or(-1);
    r.server_rc = src.value_or(-1);
    r.client = json::parse(read_file(p.dir + "/client.json"), nullptr, false);
    r.server = json::parse(read_file(p.dir + "/server.json"), nullptr, false);
    return r;
}

void expect_verified(const Result &r) {
    EXPECT_EQ(r.client_rc, 0) << r.client_log;
    EXPECT_EQ(r.server_rc, 0) << r.server_log;
    ASSERT_TRUE(r.client.is_object()) << r.client_log;
    ASSERT_TRUE(r.server.is_object()) << r.server_log;
    EXPECT_GT(r.client["messages"].get<uint64_t>(), 0u);
    EXPECT_GT(r.client["bytes_verified"].get<uint64_t>(), 0u) << r.client_log;
    EXPECT_EQ(r.client["verify_errors"], 0) << r.client_log;
    EXPECT_EQ(r.client["qp_errors"], 0) << r.client_log;
    EXPECT_EQ(r.server["verify_errors"], 0) << r.server_log;
    EXPECT_EQ(r.server["qp_errors"], 0) << r.server_log;
}

class GenPlanes : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GenPlanes, WriteImmVerifiedOverEveryPlane) {
    const uint32_t planes = GetParam();
    const Pair p = make_pair(planes);
    const uint64_t total = 64ull << 20;
    Result r = run_pair(p, {"--mode", "write_imm", "--verify", "--qps", "4", "--msg-bytes", "65536",
                            "--total-bytes", std::to_string(total)});
    expect_verified(r);
    // Every byte asked for was moved and checked by the server, message by message.
    EXPECT_EQ(r.client["bytes"].get<uint64_t>(), total);
    EXPECT_EQ(r.server["bytes_verified"].get<uint64_t>(), total) << r.server_log;
    EXPECT_EQ(r.server["messages"], r.client["messages"]);
    // Sprayed: every plane carried a fair part of the data.
    ASSERT_EQ(r.client["ports"].size(), planes);
    uint64_t sum = 0;
    for (const auto &port : r.client["ports"])
        sum += port["tx_data_pkts"].get<uint64_t>();
    for (const auto &port : r.client["ports"]) {
        EXPECT_EQ(port["driver"], "net_memif");
        EXPECT_GT(port["tx_data_pkts"].get<uint64_t>(), sum / planes / 2)
            << "plane " << port["plane"] << " carried too little";
    }
    EXPECT_EQ(r.client["worker_counters"]["rx_bad_cksum"], 0);
    EXPECT_EQ(r.server["worker_counters"]["rx_bad_cksum"], 0);
    // Cycles per packet: the stages account for the busy cycles (the few
    // cycles between TSC readings aside), and each end spent some in each
    // of the stages its traffic goes through.
    for (const json *side : {&r.client, &r.server}) {
        const json &c = (*side)["cycles_per_packet"];
        const double busy = c["busy"].get<double>();
        double stages = 0;
        for (const char *k : {"rx_io", "rx", "timers", "app", "tx", "tx_io", "control"})
            stages += c[k].get<double>();
        EXPECT_GT(busy, 0) << c;
        EXPECT_LE(stages, busy) << c;
        EXPECT_GE(stages, 0.8 * busy) << c;
        for (const char *k : {"rx_io", "rx", "tx", "tx_io"})
            EXPECT_GT(c[k].get<double>(), 0) << k << " " << c;
        EXPECT_GT(c["busy_share"].get<double>(), 0) << c;
        EXPECT_LE(c["busy_share"].get<double>(), 1) << c;
        EXPECT_GT(c["tsc_hz"].get<uint64_t>(), 0u);
        const json &w = (*side)["worker_counters"];
        EXPECT_LE(w["busy_loops"].get<uint64_t>(), w["loops"].get<uint64_t>());
    }
    std::printf("%u planes: %.2f Gb/s, %llu retransmissions\n", planes,
                r.client["goodput_gbps"].get<double>(),
                (unsigned long long)r.client["retransmissions"].get<uint64_t>());
    sh("rm -rf " + p.dir);
}
INSTANTIATE_TEST_SUITE_P(Memif, GenPlanes, ::testing::Values(1u, 2u, 4u));

// IPv6 planes: --local-ip in IPv6 text on both ends, the addresses in the
// side descriptions, every QP's packets in IPv6 with its UDP checksum over
// the IPv6 pseudo header (memif has no offload: summed and checked in
// software), and every byte verified.
TEST(Gen, Ipv6PlanesMoveEveryByteVerified) {
    const Pair p = make_pair(2);
    const uint64_t total = 32ull << 20;
    Result r = run_pair(p,
                        {"--mode", "write_imm", "--verify", "--qps", "3", "--total-bytes",
                         std::to_string(total), "--local-ip", "fd00:0:0:0::1", "fd00:0:0:1::1/64"},
                        {"--local-ip", "fd00::2,fd00:0:0:1::2"});
    expect_verified(r);
    EXPECT_EQ(r.server["bytes_verified"].get<uint64_t>(), total) << r.server_log;
    ASSERT_EQ(r.client["ports"].size(), 2u);
    EXPECT_EQ(r.client["ports"][1]["ip"], "fd00:0:0:1::1");
    EXPECT_EQ(r.server["ports"][0]["ip"], "fd00::2");
    for (const auto &port : r.client["ports"])
        EXPECT_GT(port["tx_data_pkts"].get<uint64_t>(), total / 1500 / 4) << port;
    EXPECT_EQ(r.server["worker_counters"]["rx_bad_cksum"], 0) << r.server_log;
    EXPECT_EQ(r.server["worker_counters"]["rx_stray"], 0) << r.server_log;
    // On the wire in IPv6: every frame either end took was, MRC or the
    // other end's neighbour adverts announcing its two addresses at start.
    for (const json *side : {&r.client, &r.server}) {
        const json &w = (*side)["worker_counters"];
        EXPECT_GT(w["rx_ipv6"].get<uint64_t>(), 0u);
        EXPECT_EQ(w["rx_nd"], 2) << w;
        EXPECT_EQ(w["tx_nd"], 2) << w;
        EXPECT_EQ(w["rx_ipv6"].get<uint64_t>() + 2, w["rx_packets"].get<uint64_t>()) << w;
        EXPECT_EQ(w["tx_oversize"], 0) << "frames fit the MTU: " << w;
    }
    EXPECT_EQ(r.client["worker_counters"]["rx_bad_cksum"], 0) << r.client_log;
    sh("rm -rf " + p.dir);
}

// Zero-copy transmit over IPv6: the payload summed in registered memory
// over the IPv6 pseudo header, and the server's check agrees.
TEST(Gen, Ipv6ZeroCopyTransmitVerifies) {
    const Pair p = make_pair(2);
    const uint64_t total = 16ull << 20;
    Result r = run_pair(p,
                        {"--mode", "write_imm", "--verify", "--qps", "2", "--zero-copy",
                         "--total-bytes", std::to_string(total), "--local-ip", "fd00::1"},
                        {"--local-ip", "fd00::2", "--zero-copy"});
    expect_verified(r);
    EXPECT_EQ(r.server["bytes_verified"].get<uint64_t>(), total) << r.server_log;
    EXPECT_EQ(r.server["worker_counters"]["rx_bad_cksum"], 0) << r.server_log;
    const json &w = r.server["worker_counters"];
    EXPECT_EQ(w["rx_ipv6"].get<uint64_t>() + w["rx_nd"].get<uint64_t>(),
              w["rx_packets"].get<uint64_t>())
        << w;
    EXPECT_EQ(r.client["worker_counters"]["tx_oversize"], 0) << r.client["worker_counters"];
    sh("rm -rf " + p.dir);
}

// One end IPv6 on a plane and the other IPv4: both say so and stop.
TEST(Gen, MixedAddressFamiliesOnAPlaneAreAClearError) {
    const Pair p = make_pair(2);
    Result r = run_pair(p, {"--total-bytes", "1000000", "--local-ip", "10.10.0.1,fd00:0:0:1::1"},
                        {"--local-ip", "10.10.0.2,10.10.1.2"});
    EXPECT_NE(r.client_rc, 0);
    EXPECT_NE(r.server_rc, 0);
    const std::string both = r.client_log + r.server_log;
    EXPECT_NE(both.find("plane 1: this end's address is"), std::string::npos) << both;
    EXPECT_NE(both.find("same family"), std::string::npos) << both;
    sh("rm -rf " + p.dir);
}

TEST(Gen, WriteModeSlotsVerifiedAfterTheRun) {
    // Plain WRITEs tell the server nothing: it checks every slot's final
    // contents against the client's record of what it wrote last.
    const Pair p = make_pair(2);
    Result r = run_pair(p, {"--mode", "write", "--verify", "--qps", "2", "--depth", "4",
                            "--msg-bytes", "100000", "--duration", "2"});
    expect_verified(r);
    // 2 QPs x 8 slots, each holding a completed message.
    EXPECT_EQ(r.server["bytes_verified"].get<uint64_t>(), 2u * 8u * 100000u) << r.server_log;
    sh("rm -rf " + p.dir);
}

TEST(Gen, ZeroCopyTransmitWithSoftwareChecksumsVerifies) {
    // memif has no checksum offload: the UDP checksum of a payload sent from
    // registered memory is summed there, and the server checks it.
    const Pair p = make_pair(2);
    const uint64_t total = 32ull << 20;
    Result r = run_pair(p, {"--mode", "write_imm", "--verify", "--qps", "2", "--zero-copy",
                            "--total-bytes", std::to_string(total)});
    expect_verified(r);
    EXPECT_EQ(r.server["bytes_verified"].get<uint64_t>(), total) << r.server_log;
    EXPECT_EQ(r.server["worker_counters"]["rx_bad_cksum"], 0) << r.server_log;
    EXPECT_GT(r.server["worker_counters"]["rx_packets"].get<uint64_t>(), total / 1500);
    sh("rm -rf " + p.dir);
}

TEST(Gen, JumboFramesOverMemifCarryTheirPayloadVerified) {
    // DPDK 22.11's memif accepts no MTU above 1500 from ethdev, but carries
    // any frame that fits one of its buffers: with bsize for 9000-byte
    // MTUs, each data packet carries about 6x the payload of a 1500 one.
    Pair p = make_pair(2);
    p.memif_extra = ",bsize=9018";
    const uint64_t total = 64ull << 20;
    Result r = run_pair(p,
                        {"--mode", "write_imm", "--verify", "--qps", "4", "--mtu", "9000",
                         "--total-bytes", std::to_string(total)},
                        {"--mtu", "9000"});
    expect_verified(r);
    EXPECT_EQ(r.server["bytes_verified"].get<uint64_t>(), total) << r.server_log;
    EXPECT_EQ(r.server["worker_counters"]["rx_bad_cksum"], 0) << r.server_log;
    EXPECT_EQ(r.server["worker_counters"]["rx_multiseg"], 0) << r.server_log;
    uint64_t data_pkts = 0;
    for (const auto &port : r.client["ports"])
        data_pkts += port["tx_data_pkts"].get<uint64_t>();
    ASSERT_GT(data_pkts, 0u);
    // First transmissions alone would be total / (9000 - headers); with
    // retransmissions, fewer bytes per packet: still far above 1500.
    EXPECT_GT(total / data_pkts, 6000u) << data_pkts << " data packets";
    sh("rm -rf " + p.dir);
}

// The two ends given different MTUs: they agree on the smaller at set-up,
// say so, and the transfer verifies (the server's 1500-byte port never
// sees a frame it cannot take).
TEST(Gen, EndsWithDifferentMtusAgreeOnTheSmaller) {
    Pair p = make_pair(1);
    p.memif_extra = ",bsize=9018";
    const uint64_t total = 16ull << 20;
    Result r = run_pair(p,
                        {"--mode", "write_imm", "--verify", "--qps", "2", "--mtu", "9000",
                         "--total-bytes", std::to_string(total)},
                        {"--mtu", "1500"});
    expect_verified(r);
    EXPECT_EQ(r.server["bytes_verified"].get<uint64_t>(), total) << r.server_log;
    const uint64_t agreed = r.client["mtu_payload_bytes"];
    EXPECT_EQ(agreed, r.server["mtu_payload_bytes"].get<uint64_t>());
    EXPECT_LT(agreed, 1500u);
    EXPECT_GT(agreed, 1300u);
    EXPECT_NE(r.client_log.find("path MTU: the peer's ports carry"), std::string::npos)
        << r.client_log;
    uint64_t data_pkts = 0;
    for (const auto &port : r.client["ports"])
        data_pkts += port["tx_data_pkts"].get<uint64_t>();
    EXPECT_GE(data_pkts, total / agreed) << "no packet carried more than the agreed payload";
    EXPECT_EQ(r.server["worker_counters"]["rx_multiseg"], 0) << r.server_log;
    sh("rm -rf " + p.dir);
}

TEST(Gen, JumboMtuOverMemifWithSmallBuffersIsAClearError) {
    const Pair p = make_pair(1);
    auto c = gen_cmd(p, false, {"--mode", "write", "--mtu", "9000", "--duration", "1"});
    auto client = Subprocess::start(c, p.dir + "/client.log");
    ASSERT_TRUE(client.has_value());
    const auto rc = client->wait_for(std::chrono::seconds(30));
    ASSERT_TRUE(rc.has_value()) << client->log();
    EXPECT_NE(*rc, 0);
    EXPECT_NE(client->log().find("bsize=9018"), std::string::npos) << client->log();
    sh("rm -rf " + p.dir);
}

TEST(Gen, PlaneCutMidRunCompletesOnTheOthers) {
    const Pair p = make_pair(4);
    // The client stops plane 1's port after 1 s: the server sees its memif
    // peer disconnect, the client's control thread sees the link go down.
    Result r = run_pair(p, {"--mode", "write_imm", "--verify", "--qps", "4", "--duration", "3",
                            "--cut-port", "1@1"});
    expect_verified(r);
    ASSERT_EQ(r.client["ports"].size(), 4u);
    EXPECT_EQ(r.client["ports"][1]["cut"], true);
    EXPECT_EQ(r.client["ports"][1]["link"], "down");
    // The server saw plane 1 go down; the other three planes stayed up.
    EXPECT_EQ(r.server["ports"][1]["link"], "down") << r.server_log;
    for (int pl : {0, 2, 3}) {
        EXPECT_EQ(r.client["ports"][pl]["link"], "up");
        EXPECT_GT(r.client["ports"][pl]["tx_data_pkts"].get<uint64_t>(),
                  2 * r.client["ports"][1]["tx_data_pkts"].get<uint64_t>())
            << "plane " << pl << " should carry the load after the cut\n"
            << r.client_log;
    }
    EXPECT_NE(r.client_log.find("cutting plane 1"), std::string::npos);
    sh("rm -rf " + p.dir);
}

TEST(Gen, PingpongReportsLatency) {
    const Pair p = make_pair(1);
    Result r = run_pair(p, {"--mode", "pingpong", "--verify", "--qps", "1", "--msg-bytes", "64",
                            "--duration", "1"});
    expect_verified(r);
    ASSERT_TRUE(r.client.contains("latency_us")) << r.client_log;
    const auto &l = r.client["latency_us"];
    EXPECT_GT(l["samples"].get<uint64_t>(), 100u);
    EXPECT_GT(l["p50"].get<double>(), 0.0);
    EXPECT_LE(l["p50"].get<double>(), l["p99"].get<double>());
    EXPECT_LE(l["p99"].get<double>(), l["p999"].get<double>());
    std::printf("pingpong (idle-friendly polling, shared CPUs): p50 %.1f us, p99 %.1f us\n",
                l["p50"].get<double>(), l["p99"].get<double>());
    sh("rm -rf " + p.dir);
}

TEST(Gen, ServerThatVanishesFailsTheClientWithAMessage) {
    const Pair p = make_pair(1);
    auto server = Subprocess::start(gen_cmd(p, true, {}), p.dir + "/server.log");
    ASSERT_TRUE(server.has_value());
    auto client = Subprocess::start(gen_cmd(p, false, {"--mode", "write", "--duration", "30"}),
                                    p.dir + "/client.log");
    ASSERT_TRUE(client.has_value());
    // Let the run start, then kill the server outright.
    for (int i = 0; i < 100 && client->log().find("goodput") == std::string::npos; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::kill(server->pid(), SIGKILL);
    server->wait_for(std::chrono::seconds(5));
    const auto rc = client->wait_for(std::chrono::seconds(60));
    ASSERT_TRUE(rc.has_value()) << "client hung after the server died:\n" << client->log();
    EXPECT_EQ(*rc, 1) << client->log();
    EXPECT_NE(client->log().find("server went away"), std::string::npos) << client->log();
    sh("rm -rf " + p.dir + " /var/run/dpdk/mrc-gen-test-" + std::to_string(getpid()) + "-*");
}

TEST(Gen, AFatalSignalPrintsABacktraceAndEndsTheProcessByIt) {
    const Pair p = make_pair(1);
    auto server = Subprocess::start(gen_cmd(p, true, {}), p.dir + "/server.log");
    ASSERT_TRUE(server.has_value());
    for (int i = 0; i < 100 && server->log().find("waiting for a client") == std::string::npos; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_NE(server->log().find("waiting for a client"), std::string::npos) << server->log();
    ::kill(server->pid(), SIGSEGV);
    const auto rc = server->wait_for(std::chrono::seconds(10));
    ASSERT_TRUE(rc.has_value()) << server->log();
    const std::string log = server->log();
    if (log.find("AddressSanitizer") != std::string::npos) {
        // The sanitizer build reports the signal itself (and aborts).
        EXPECT_NE(log.find("SEGV"), std::string::npos) << log;
    } else {
        EXPECT_EQ(*rc, 128 + SIGSEGV) << log;
        EXPECT_NE(log.find("mrc-gen: fatal signal 11 in thread "), std::string::npos) << log;
        EXPECT_NE(log.find("mrc-gen("), std::string::npos) << "no frame of the program:\n" << log;
    }
    sh("rm -rf " + p.dir + " /var/run/dpdk/mrc-gen-test-" + std::to_string(getpid()) + "-*");
}

TEST(Gen, NoServerIsAClearErrorNotAHang) {
    const Pair p = make_pair(1);
    auto client = Subprocess::start(gen_cmd(p, false, {"--timeout", "1", "--link-wait", "1"}),
                                    p.dir + "/client.log");
    ASSERT_TRUE(client.has_value());
    const auto rc = client->wait_for(std::chrono::seconds(30));
    ASSERT_TRUE(rc.has_value()) << client->log();
    EXPECT_EQ(*rc, 2);
    EXPECT_NE(client->log().find("no mrc-gen server at 127.0.0.1"), std::string::npos)
        << client->log();
    sh("rm -rf " + p.dir);
}

TEST(Gen, BadFlagsAreRefusedWithTheReason) {
    const Pair p = make_pair(1);
    struct Case {
        std::vector<std::string> args;
        const char *says;
    } cases[] = {
        {{"--mode", "read"}, "--mode"},
        {{"--qps", "0"}, "--qps"},
        {{"--cut-port", "9@1"}, "no plane 9"},
        {{"--cut-port", "x"}, "PLANE@SECONDS"},
        {{"--local-ip", "10.0.0.300"}, "--local-ip"},
        {{"--local-ip", "fd00::1::2"}, "--local-ip"},
        {{"--local-ip", "fd00::1/129"}, "--local-ip"},
        {{"--local-ip", "fd00::1/64", "--gateway", "10.0.0.1"}, "give an IPv6 gateway"},
        {{"--local-ip", "10.0.0.2/24", "--gateway", "fd00::fe"}, "give an IPv4 gateway"},
        {{"--local-ip", "fd00::1", "--gateway", "fd00::fe"}, "needs its prefix"},
        {{"--local-ip", "fd00::1/64", "--gateway", "fd00:1::fe"}, "not on plane 0's subnet"},
        {{"--local-ip", "fd00::1/64", "--gateway", "ff02::1"}, "--gateway"},
        {{"--bogus"}, "--bogus"},
    };
    for (const Case &c : cases) {
        auto proc = Subprocess::start(gen_cmd(p, false, c.args), p.dir + "/bad.log");
        ASSERT_TRUE(proc.has_value());
        const auto rc = proc->wait_for(std::chrono::seconds(30));
        ASSERT_TRUE(rc.has_value());
        EXPECT_EQ(*rc, 2) << c.args[0];
        EXPECT_NE(proc->log().find(c.says), std::string::npos)
            << "expected '" << c.says << "' in:\n"
            << proc->log();
    }
    sh("rm -rf " + p.dir);
}

}  // namespace
}  // namespace mrc::test
