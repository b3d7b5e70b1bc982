// Scope: next hops (wire/neighbor.h): which address a frame for a peer
// goes to (the peer on-link, else the gateway), and the neighbour table
// that resolves it: requests, retries, failure, the bounded hold queue,
// aging to stale and refresh, expiry, static overrides, and that an ARP
// packet about an address nobody asked for is ignored.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "wire/neighbor.h"

namespace mrc::wire {
namespace {

constexpr uint64_t kMs = 1'000'000;
const MacAddr kA{{0x02, 0, 0, 0, 0, 0x0a}};
const MacAddr kB{{0x02, 0, 0, 0, 0, 0x0b}};
const uint32_t kGw = ipv4(10, 1, 0, 254);
const uint32_t kPeer = ipv4(10, 2, 0, 7);

std::optional<Route> prefix(const std::string &s) {
    return parse_ipv4_prefix(s.data(), s.size());
}

NeighborConfig small() {
    NeighborConfig c;
    c.max_entries = 4;
    c.max_held = 2;
    c.max_probes = 3;
    c.retry_ns = 100 * kMs;
    c.reachable_ns = 1000 * kMs;
    c.failed_ns = 500 * kMs;
    c.gc_ns = 5000 * kMs;
    return c;
}

TEST(Route, APeerOffTheSubnetGoesToTheGatewayAndWithoutAPrefixEveryoneIsOnLink) {
    auto r = prefix("10.1.0.1/24");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->ip, ipv4(10, 1, 0, 1));
    EXPECT_EQ(r->prefix_len, 24);
    r->gateway = kGw;
    EXPECT_EQ(r->next_hop(ipv4(10, 1, 0, 99)), ipv4(10, 1, 0, 99));
    EXPECT_EQ(r->next_hop(kPeer), kGw);
    r->gateway = 0;
    EXPECT_EQ(r->next_hop(kPeer), 0u) << "off-link without a gateway is unreachable";
    auto bare = prefix("10.1.0.1");
    ASSERT_TRUE(bare);
    EXPECT_EQ(bare->prefix_len, -1);
    EXPECT_TRUE(bare->on_link(kPeer));
    auto all = prefix("10.1.0.1/0");
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->on_link(kPeer));
    auto host = prefix("10.1.0.1/32");
    ASSERT_TRUE(host);
    EXPECT_FALSE(host->on_link(ipv4(10, 1, 0, 2)));
    EXPECT_TRUE(host->on_link(ipv4(10, 1, 0, 1)));
    for (const char *bad :
         {"10.1.0.1/33", "10.1.0.1/", "10.1.0.1/2a", "10.1.0/24", "10.1.0.1/024", "/24", ""})
        EXPECT_FALSE(prefix(bad)) << bad;
}

TEST(Neighbor, AnUnknownAddressIsAskedForAndItsWaitersGoOnWhenItAnswers) {
    NeighborTable t(small());
    auto l = t.resolve(kGw, 0, 11);
    EXPECT_EQ(l.kind, NeighborTable::Kind::kPending);
    EXPECT_TRUE(l.send_request);
    EXPECT_TRUE(l.held);
    // A second waiter joins the same entry; no second request at once.
    l = t.resolve(kGw, 10 * kMs, 12);
    EXPECT_EQ(l.kind, NeighborTable::Kind::kPending);
    EXPECT_FALSE(l.send_request);
    EXPECT_EQ(t.find(kGw)->state, NeighState::kIncomplete);
    std::vector<uint64_t> released;
    EXPECT_TRUE(t.learn(kGw, kA, false, 20 * kMs, &released));
    EXPECT_EQ(released, (std::vector<uint64_t>{11, 12}));
    l = t.resolve(kGw, 30 * kMs);
    EXPECT_EQ(l.kind, NeighborTable::Kind::kKnown);
    EXPECT_EQ(l.mac, kA);
    EXPECT_FALSE(l.send_request);
    EXPECT_EQ(t.counters().resolved, 1u);
    EXPECT_EQ(t.counters().requests, 1u);
}

TEST(Neighbor, AnUnansweredAddressIsAskedAgainThenFailsAndReleasesItsWaitersAsFailed) {
    NeighborTable t(small());
    t.resolve(kGw, 0, 5);
    std::vector<uint32_t> req;
    std::vector<uint64_t> failed;
    t.tick(99 * kMs, &req, &failed);
    EXPECT_TRUE(req.empty()) << "not before retry_ns";
    EXPECT_EQ(t.next_due_ns(), 100 * kMs);
    t.tick(100 * kMs, &req, &failed);
    t.tick(200 * kMs, &req, &failed);
    EXPECT_EQ(req, (std::vector<uint32_t>{kGw, kGw})) << "max_probes requests in all";
    EXPECT_TRUE(failed.empty());
    t.tick(300 * kMs, &req, &failed);
    EXPECT_EQ(req.size(), 2u);
    EXPECT_EQ(failed, (std::vector<uint64_t>{5}));
    EXPECT_EQ(t.find(kGw)->state, NeighState::kFailed);
    EXPECT_EQ(t.counters().failed, 1u);
    // While failed, lookups fail at once (and hold nothing), without asking.
    auto l = t.resolve(kGw, 400 * kMs, 6);
    EXPECT_EQ(l.kind, NeighborTable::Kind::kFailed);
    EXPECT_FALSE(l.send_request);
    EXPECT_FALSE(l.held);
    // After failed_ns it is asked for afresh.
    l = t.resolve(kGw, 800 * kMs, 7);
    EXPECT_EQ(l.kind, NeighborTable::Kind::kPending);
    EXPECT_TRUE(l.send_request);
    EXPECT_TRUE(l.held);
    // A failed entry nobody asks for again goes away.
    NeighborTable u(small());
    u.resolve(kPeer, 0);
    for (uint64_t now = 100 * kMs; now <= 900 * kMs; now += 100 * kMs)
        u.tick(now, &req, &failed);
    EXPECT_EQ(u.find(kPeer), nullptr);
    EXPECT_EQ(u.counters().expired, 1u);
}

TEST(Neighbor, AReplyForAnAddressNeverAskedForIsIgnoredButARequestForUsTeaches) {
    NeighborTable t(small());
    std::vector<uint64_t> released;
    EXPECT_FALSE(t.learn(kPeer, kB, false, 0, &released));
    EXPECT_EQ(t.find(kPeer), nullptr);
    EXPECT_EQ(t.counters().unsolicited, 1u);
    // The sender of a request for this host's address is learnt.
    EXPECT_TRUE(t.learn(kPeer, kB, true, 0, &released));
    auto l = t.resolve(kPeer, 1);
    EXPECT_EQ(l.kind, NeighborTable::Kind::kKnown);
    EXPECT_EQ(l.mac, kB);
    EXPECT_TRUE(released.empty());
}

TEST(Neighbor, TheHoldQueueIsBoundedAndTheTableToo) {
    NeighborTable t(small());
    EXPECT_TRUE(t.resolve(kGw, 0, 1).held);
    EXPECT_TRUE(t.resolve(kGw, 0, 1).held) << "a resend keeps its one place";
    EXPECT_TRUE(t.resolve(kGw, 0, 2).held);
    const auto third = t.resolve(kGw, 0, 3);
    EXPECT_EQ(third.kind, NeighborTable::Kind::kPending);
    EXPECT_FALSE(third.held) << "max_held is 2";
    EXPECT_EQ(t.counters().hold_dropped, 1u);
    EXPECT_EQ(t.counters().held, 2u);
    std::vector<uint64_t> released;
    t.learn(kGw, kA, false, 1, &released);
    EXPECT_EQ(released, (std::vector<uint64_t>{1, 2}));
    for (uint8_t i = 1; i <= 3; ++i)
        EXPECT_NE(t.resolve(ipv4(10, 1, 0, i), 2).kind, NeighborTable::Kind::kFull);
    EXPECT_EQ(t.resolve(ipv4(10, 1, 0, 4), 2).kind, NeighborTable::Kind::kFull);
    EXPECT_FALSE(t.learn(ipv4(10, 1, 0, 5), kB, true, 2, &released));
    EXPECT_EQ(t.counters().table_full, 2u);
}

TEST(Neighbor, AnOldEntryIsStillUsedWhileItIsAskedAgainAndGoesIfNobodyAnswers) {
    NeighborTable t(small());
    t.resolve(kGw, 0);
    t.learn(kGw, kA, false, 0, nullptr);
    std::vector<uint32_t> req;
    t.tick(999 * kMs, &req, nullptr);
    EXPECT_EQ(t.find(kGw)->state, NeighState::kReachable);
    t.tick(1000 * kMs, &req, nullptr);
    EXPECT_EQ(t.find(kGw)->state, NeighState::kStale);
    EXPECT_TRUE(req.empty()) << "nobody uses it: not asked for";
    // Used: the old MAC, and a refresh request.
    auto l = t.resolve(kGw, 1100 * kMs);
    EXPECT_EQ(l.kind, NeighborTable::Kind::kKnown);
    EXPECT_EQ(l.mac, kA);
    EXPECT_TRUE(l.send_request);
    EXPECT_FALSE(t.resolve(kGw, 1150 * kMs).send_request) << "one refresh at a time";
    // The answer gives a new MAC: the neighbour was replaced.
    t.learn(kGw, kB, false, 1160 * kMs, nullptr);
    l = t.resolve(kGw, 1170 * kMs);
    EXPECT_EQ(l.mac, kB);
    EXPECT_EQ(t.find(kGw)->state, NeighState::kReachable);
    // Stale again, refreshed, never answered: removed after max_probes.
    t.tick(2160 * kMs, &req, nullptr);
    ASSERT_TRUE(t.resolve(kGw, 2200 * kMs).send_request);
    for (uint64_t now = 2300 * kMs; now <= 2500 * kMs; now += 100 * kMs)
        t.tick(now, &req, nullptr);
    EXPECT_EQ(req, (std::vector<uint32_t>{kGw, kGw}));
    EXPECT_EQ(t.find(kGw), nullptr);
    EXPECT_EQ(t.counters().expired, 1u);
    // Unused stale entries go after gc_ns.
    t.learn(kPeer, kA, true, 3000 * kMs, nullptr);
    t.tick(4000 * kMs, &req, nullptr);
    ASSERT_NE(t.find(kPeer), nullptr);
    EXPECT_EQ(t.find(kPeer)->state, NeighState::kStale);
    t.tick(7999 * kMs, &req, nullptr);
    EXPECT_NE(t.find(kPeer), nullptr);
    EXPECT_EQ(t.next_due_ns(), 8000 * kMs);
    t.tick(8000 * kMs, &req, nullptr);
    EXPECT_EQ(t.find(kPeer), nullptr);
}

TEST(Neighbor, AStaticEntryOverridesAndArpNeverChangesIt) {
    NeighborTable t(small());
    t.set_static(kGw, kA);
    EXPECT_FALSE(t.learn(kGw, kB, true, 0, nullptr));
    std::vector<uint32_t> req;
    t.tick(100'000 * kMs, &req, nullptr);
    auto l = t.resolve(kGw, 100'000 * kMs);
    EXPECT_EQ(l.kind, NeighborTable::Kind::kKnown);
    EXPECT_EQ(l.mac, kA);
    EXPECT_FALSE(l.send_request);
    EXPECT_TRUE(req.empty());
    EXPECT_EQ(t.next_due_ns(), UINT64_MAX);
}

}  // namespace
}  // namespace mrc::wire
