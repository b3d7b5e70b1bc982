// Scope: the mrc-sim command line: its flags and JSON keys are an
// interface; bad arguments are refused with the offending flag named and
// exit status 2; a failed verification exits 1.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "support/subprocess.h"

namespace mrc::test {
namespace {

struct SimRun {
    int rc = -1;
    std::string out;
};

SimRun mrc_sim(const std::vector<std::string> &args) {
    const char *bin = std::getenv("MRC_SIM_BIN");
    std::vector<std::string> argv = {bin ? bin : "mrc-sim"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string dir = make_temp_dir("simcli");
    auto p = Subprocess::start(argv, dir + "/out");
    SimRun r;
    if (!p) return r;
    auto rc = p->wait_for(std::chrono::seconds(120));
    r.rc = rc.value_or(-1);
    r.out = p->log();
    sh("rm -rf " + dir);
    return r;
}

TEST(MrcSimCli, JsonHasTheInterfaceKeys) {
    const SimRun r = mrc_sim(
        {"--planes",
         "4",
         "--paths-per-plane",
         "8",
         "--qps",
         "2",
         "--msg-bytes",
         "65536",
         "--total-bytes",
         "4194304",
         "--link-gbps",
         "100",
         "--delay-us",
         "2",
         "--loss",
         "0.001",
         "--seed",
         "5",
         "--impair",
         "plane=1,path=3,loss=0.01,ecn_bytes=32768,trim_bytes=65536,duplicate=0.001,reorder=0.01",
         "--fail",
         "plane=2,path=1,at_us=10,for_us=50",
         "--json"});
    ASSERT_EQ(r.rc, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    for (const char *k :
         {"verified", "delivered_bytes", "expected_bytes", "duplicate_deliveries",
          "completions_in_order", "qp_errors", "packets_sent", "packets_dropped_by_fabric",
          "retransmissions", "sim_time_us", "goodput_gbps", "per_plane_tx_packets"})
        EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["verified"], true);
    EXPECT_EQ(j["delivered_bytes"], 4194304);
    EXPECT_EQ(j["expected_bytes"], 4194304);
    EXPECT_EQ(j["per_plane_tx_packets"].size(), 4u);
    EXPECT_GT(j["goodput_gbps"].get<double>(), 0);
}

TEST(MrcSimCli, MultipathKeysAndTimeSeries) {
    const SimRun r = mrc_sim({"--planes", "4", "--qps", "2", "--total-bytes", "33554432",
                              "--timeout-exp", "5", "--fail", "plane=3,at_us=300", "--plane-limit",
                              "plane=1,gbps=50,ecn_bytes=16384", "--series-us", "100", "--json"});
    ASSERT_EQ(r.rc, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    for (const char *k : {"max_queue_bytes", "max_lasthop_queue_bytes", "ev_states",
                          "ev_transitions", "planes", "qps", "series"})
        EXPECT_TRUE(j.contains(k)) << k;
    ASSERT_EQ(j["planes"].size(), 4u);
    EXPECT_EQ(j["planes"][3]["state"], "DOWN");
    EXPECT_EQ(j["planes"][0]["state"], "UP");
    for (const char *k : {"tx_data_pkts", "acked_pkts", "ack_timeouts", "ev_states", "rtt_us"})
        EXPECT_TRUE(j["planes"][0].contains(k)) << k;
    uint64_t evs = 0;
    for (const char *k : {"good", "skip", "assumed_bad", "denied"})
        evs += j["ev_states"][k].get<uint64_t>();
    EXPECT_EQ(evs, 2u * (64 + 4 * 8)) << "every EV of both QPs, active and spare";
    EXPECT_GT(j["ev_states"]["assumed_bad"].get<uint64_t>(), 0u);
    const auto &s = j["series"];
    EXPECT_EQ(s["bucket_us"], 100.0);
    ASSERT_GT(s["goodput_gbps"].size(), 5u);
    EXPECT_EQ(s["plane_tx_pkts"].size(), s["goodput_gbps"].size());
    EXPECT_EQ(s["plane_tx_pkts"][0].size(), 4u);
    EXPECT_EQ(s["max_queue_bytes"].size(), s["goodput_gbps"].size());
    EXPECT_GT(j["packets_ecn_marked"].get<uint64_t>(), 0u);
}

TEST(MrcSimCli, SameSeedSameJson) {
    const std::vector<std::string> a = {"--qps",  "2", "--total-bytes", "2097152", "--loss", "0.02",
                                        "--seed", "9", "--json"};
    SimRun x = mrc_sim(a), y = mrc_sim(a);
    ASSERT_EQ(x.rc, 0);
    auto jx = nlohmann::json::parse(x.out), jy = nlohmann::json::parse(y.out);
    for (auto *j : {&jx, &jy}) {
        for (const char *k : {"wall_seconds", "setup_wall_seconds", "sim_packets_per_wall_second",
                              "sim_seconds_per_wall_second", "cpu_seconds",
                              "sim_packets_per_cpu_second", "peak_rss_bytes", "rss_per_qp_bytes"})
            j->erase(k);
    }
    EXPECT_EQ(jx, jy);
}

TEST(MrcSimCli, FailedVerificationExitsOne) {
    // Every path of the only plane dead from the start: nothing arrives.
    const SimRun r =
        mrc_sim({"--planes", "1", "--paths-per-plane", "2", "--total-bytes", "65536", "--fail",
                 "plane=0,at_us=0", "--retry-limit", "2", "--timeout-exp", "4", "--json"});
    EXPECT_EQ(r.rc, 1) << r.out;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["verified"], false);
    EXPECT_EQ(j["qp_errors"], 1);
}

TEST(MrcSimCli, BadArgumentsAreNamed) {
    struct Case {
        std::vector<std::string> args;
        std::string says;
    } cases[] = {
        {{"--impair", "plane=9,loss=0.1"}, "plane 9"},
        {{"--impair", "plane=0,loss=1.5"}, "[0, 1]"},
        {{"--impair", "plane=0,bogus=1"}, "unknown key 'bogus'"},
        {{"--impair", "plane=0,loss"}, "loss=true: not a number"},
        {{"--impair", "plane=0,loss=0.1,loss=0.2"}, "'loss' given twice"},
        {{"--impair", "plane=0,dup=0.1"}, "renamed: duplicate"},
        {{"--impair", "plane=0,jitter_us=5"}, "mrc-fabric setting"},
        {{"--impair", "plane=0,dir=up"}, "expected ab, ba or both"},
        {{"--fail", "plane=0"}, "at_us"},
        {{"--fail", "plane=0,at_us=-5"}, "negative"},
        {{"--delay-us", "-1"}, "delay"},
        {{"--planes", "0"}, "planes"},
        {{"--loss", "2"}, "loss"},
        {{"--retry-mode", "linear", "--retry-limit", "9"}, "at most 7"},
        {{"--no-such-flag"}, "no-such-flag"},
        {{"--plane-limit", "plane=7,gbps=25"}, "plane 7"},
        {{"--plane-limit", "plane=1"}, "gbps="},
        {{"--fail", "plane=1,at_us=0,for_us=500,period_us=100"}, "for_us < period_us"},
        {{"--fail", "plane=1,path=2,at_us=0,link=1"}, "whole plane"},
        {{"--evs", "6"}, "split evenly"},
        {{"--evs", "16", "--ev-floor", "20"}, "floor"},
        {{"--cc", "fixed", "--cwnd-kb", "8"}, "smaller than one MTU"},
        {{"--cc", "reno"}, "reno"},
        {{"--probe-us", "0"}, "probe-us"},
    };
    for (const auto &c : cases) {
        const SimRun r = mrc_sim(c.args);
        EXPECT_EQ(r.rc, 2) << c.args[0] << ": " << r.out;
        EXPECT_NE(r.out.find(c.says), std::string::npos)
            << "wanted '" << c.says << "' in: " << r.out;
    }
}

}  // namespace
}  // namespace mrc::test
