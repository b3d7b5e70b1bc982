// Scope: named simulator scenarios, each asserting a figure, on a fabric of
// 4 planes x 8 paths at 100 Gb/s per plane.
#include <gtest/gtest.h>

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
