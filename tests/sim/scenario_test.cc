// Scope: named simulator scenarios, each asserting a figure, on a fabric of
// 4 planes x 8 paths at 100 Gb/s per plane.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "fabric.h"

namespace mrc::sim {
namespace {

SimConfig base() {
    return fabric4x8(64ull << 20);
}

TEST(SimScenario, CleanFabricRunsNearLineRate) {
    const SimResult r = run(base());
    ASSERT_TRUE(r.verified);
    EXPECT_EQ(r.retransmissions, 0u);
    EXPECT_GT(r.goodput_gbps, 0.9 * 400) << "4 x 100 Gb/s";
    // Spraying splits the load evenly over the planes.
    for (auto n : r.per_plane_tx_packets)
        EXPECT_NEAR(double(n), double(r.data_packets_sent) / 4, 0.01 * r.data_packets_sent);
}

TEST(SimScenario, OneBlackholedPathPerPlaneLosesNothing) {
    SimConfig c = base();
    for (int p = 0; p < 4; ++p)
        c.fabric.failures.push_back(Failure{p, 3, 0, 0, -1});
    const SimResult r = run(c);
    ASSERT_TRUE(r.verified);
    EXPECT_EQ(r.qp_errors, 0u);
    EXPECT_GT(r.data_packets_dropped, 0u);
    // Every lost data packet is resent; a lost ack may cost one resend more.
    EXPECT_GE(r.retransmissions, r.data_packets_dropped);
    EXPECT_LE(r.retransmissions, r.packets_dropped_by_fabric);
    RecordProperty("goodput_gbps", std::to_string(r.goodput_gbps));
}

TEST(SimScenario, IncastTrimmingIsRecoveredByNacksNotTimeouts) {
    SimConfig c = base();
    c.work.senders = 8;  // 8:1 incast on every plane's last hop
    c.work.qps = 16;
    c.work.total_bytes = 64ull << 20;
    c.fabric.link_gbps = 100;
    c.fabric.path_gbps = 400;  // the core is fast; the receiver's links are the bottleneck
    c.fabric.lasthop_trim_kb = 64;
    const SimResult r = run(c);
    ASSERT_TRUE(r.verified);
    EXPECT_GT(r.packets_trimmed, 0u);
    EXPECT_EQ(r.requester.ack_timeouts, 0u) << "every trimmed packet was NACKed and resent at once";
    EXPECT_EQ(r.retransmissions, r.packets_trimmed);
    EXPECT_EQ(r.responder.rx_trimmed, r.packets_trimmed);
    EXPECT_EQ(r.packets_dropped_by_fabric, 0u) << "trimming, not dropping";
    EXPECT_GT(r.goodput_gbps, 0.8 * 400) << "the receiver's 4 x 100 Gb/s stay busy";
}

TEST(SimScenario, WholePlaneDownForAWhileLosesNothing) {
    SimConfig c = base();
    c.fabric.failures.push_back(Failure{2, -1, 100'000, 200'000});
    const SimResult r = run(c);
    ASSERT_TRUE(r.verified);
    EXPECT_EQ(r.qp_errors, 0u);
    EXPECT_GT(r.data_packets_dropped, 0u);
}

// One plane of two paths, one of them dead both ways from the start, and
// few EVs per QP: in about one run in sixteen all four active EVs of a QP
// hash onto the dead path. Its acks die with its data, so every timeout
// is one the peer QP never answered and blames no EV. Such a resend (while
// the peer host is heard, or at the second in a row) goes on a spare EV;
// one that gets through takes the place of the active EV that did not,
// and its ack makes the next timeouts answered ones, which retire the
// other dead EVs. Before, such a QP resent on its dead EVs until the
// liveness check failed it although the peer was alive.
TEST(SimScenario, EveryActiveEvOnADeadPathFindsTheLiveOne) {
    uint64_t spare_resends = 0, runs_needing_them = 0, slowest_ns = 0;
    for (uint64_t seed = 1; seed <= 64; ++seed) {
        SimConfig c = fabric4x8(256 * 1024);
        c.seed = seed;
        c.fabric.planes = 1;
        c.fabric.paths_per_plane = 2;
        c.fabric.failures.push_back(Failure{0, 0, 0, 0, -1});
        c.work.qps = 2;
        c.work.msg_bytes = 16 * 1024;
        c.work.depth = 2;
        c.qp.ev.evs = 4;
        c.qp.ev.min_active = 2;
        // Retrying for ever: with a budget of 7 one seed in 64 still runs
        // out (each timeout judges another of the packets in flight, so
        // resends on dead spares are charged too).
        c.qp.retry.limit = RetryPolicy::kMaxExponential;
        const SimResult r = run(c);
        EXPECT_TRUE(r.verified) << "seed " << seed;
        EXPECT_EQ(r.qp_errors, 0u) << "seed " << seed;
        EXPECT_FALSE(r.timed_out) << "seed " << seed;
        slowest_ns = std::max(slowest_ns, r.sim_time_ns);
        spare_resends += r.requester.retx_spare_ev;
        runs_needing_them += r.requester.retx_spare_ev > 0;
    }
    // The case must really occur, or this test says nothing.
    EXPECT_GT(runs_needing_them, 0u);
    RecordProperty("runs_with_spare_resends", std::to_string(runs_needing_them));
    RecordProperty("spare_resends", std::to_string(spare_resends));
    RecordProperty("slowest_run_ms", std::to_string(slowest_ns / 1'000'000));
}

// The same fabric over IPv6, its switches hashing the flow label instead of
// the UDP source port: MRC writes the EV into both, so spraying, the EV
// health that finds the dead paths and the goodput are those of IPv4 (20
// header bytes more per packet aside).
TEST(SimScenario, OverIpv6TheFlowLabelSpraysAndDeadPathsAreLeft) {
    SimConfig c = base();
    for (int p = 0; p < 4; ++p)
        c.fabric.failures.push_back(Failure{p, 3, 0, 0, -1});
    const SimResult v4 = run(c);
    c.fabric.ipv6 = true;
    const SimResult v6 = run(c);
    ASSERT_TRUE(v6.verified);
    EXPECT_EQ(v6.qp_errors, 0u);
    EXPECT_GT(v6.data_packets_dropped, 0u) << "the dead paths took packets";
    EXPECT_GE(v6.retransmissions, v6.data_packets_dropped);
    for (auto n : v6.per_plane_tx_packets)
        EXPECT_NEAR(double(n), double(v6.data_packets_sent) / 4, 0.02 * v6.data_packets_sent);
    // The EVs the set holds for the dead path (by the EV's hash) failed and
    // those of the live ones never did: the flow label steered each packet
    // where its EV says.
    uint32_t dead_failed = 0, live_failed = 0, dead_active_good = 0;
    for (const EvReport &e : v6.evs) {
        if (e.path == 3) {
            dead_failed += e.failures > 0;
            dead_active_good += e.active && e.state == EvState::kGood;
        } else {
            live_failed += e.failures > 0;
        }
    }
    EXPECT_GT(dead_failed, 0u);
    EXPECT_EQ(live_failed, 0u);
    EXPECT_EQ(dead_active_good, 0u);
    ASSERT_TRUE(v4.verified);
    EXPECT_NEAR(v6.goodput_gbps, v4.goodput_gbps, 0.05 * v4.goodput_gbps);
    RecordProperty("goodput_gbps_v4", std::to_string(v4.goodput_gbps));
    RecordProperty("goodput_gbps_v6", std::to_string(v6.goodput_gbps));
}

TEST(SimScenario, BadConfigurationsAreNamed) {
    SimConfig c = base();
    c.fabric.impairments.push_back(Impairment{});
    c.fabric.impairments.back().plane = 9;
    EXPECT_NE(validate(c).error().message.find("plane 9"), std::string::npos);
    c = base();
    c.fabric.impairments.push_back(Impairment{});
    c.fabric.impairments.back().loss = 1.5;
    EXPECT_FALSE(validate(c));
    c = base();
    c.fabric.failures.push_back(Failure{0, 99, 0, 0});
    EXPECT_NE(validate(c).error().message.find("path 99"), std::string::npos);
    c = base();
    c.work.total_bytes = 1;
    EXPECT_FALSE(validate(c));
}

}  // namespace
}  // namespace mrc::sim
