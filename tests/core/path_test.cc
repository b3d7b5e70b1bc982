// Scope: the path scorer (lib/core/path.h) fed by hand-made counter
// snapshots: each row of its truth table, the reported aggregates, the
// operator's denials, and the table's generation moving only on change.
#include <gtest/gtest.h>

#include "core/path.h"

namespace mrc {
namespace {

struct Feed {
    PlaneCounters c[kMaxPlanes];
    EvGauges g;
    uint8_t links = 0b11;
    uint64_t now = 0;
    Feed() {
        for (int p = 0; p < 2; ++p)
            g.total[p] = 48;
    }
    // One period in which plane p sent `tx` packets, `acked` of them were
    // acked (with one ack echoing its EV per 4), `lost` were found lost.
    void period(uint8_t p, uint64_t tx, uint64_t acked, uint64_t lost, uint64_t ecn = 0) {
        c[p].tx_data_pkts += tx;
        c[p].acked_pkts += acked;
        c[p].rx_acks += acked / 4;
        c[p].rx_ecn_echoes += ecn;
        c[p].lost_pkts += lost;
        c[p].rtt_samples += acked / 4;
        c[p].rtt_sum_ns += acked / 4 * 8000;
    }
    const PathTable &score(PathScorer &s) {
        now += 50'000;
        return s.update(now, c, g, links);
    }
};

TEST(PathScorer, APlaneWhoseSendsAreAllLostGoesDownAndComesBackOnProbes) {
    PathScorer s(ScorerConfig{}, 2);
    Feed f;
    f.period(0, 100, 100, 0);
    f.period(1, 100, 100, 0);
    const uint64_t g0 = f.score(s).generation;
    EXPECT_EQ(s.table().down_mask, 0);
    EXPECT_EQ(s.score(1).state, PlaneState::kUp);
    // Plane 1: sends, nothing acknowledged, losses.
    f.period(0, 100, 100, 0);
    f.period(1, 20, 0, 5);
    EXPECT_EQ(f.score(s).down_mask, 0b10);
    EXPECT_GT(s.table().generation, g0);
    EXPECT_EQ(s.score(1).state, PlaneState::kDown);
    EXPECT_EQ(s.score(1).down_events, 1u);
    // No news: it stays down (and the table does not move).
    const uint64_t g1 = s.table().generation;
    EXPECT_EQ(f.score(s).down_mask, 0b10);
    EXPECT_EQ(s.table().generation, g1);
    // Too few probes answered, or no more than were lost: not yet.
    f.c[1].probes_ok += 2;
    EXPECT_EQ(f.score(s).down_mask, 0b10);
    f.c[1].probes_ok += 3;
    f.c[1].probes_lost += 3;
    EXPECT_EQ(f.score(s).down_mask, 0b10);
    // Most answered: the lost ones are dead paths inside a working plane,
    // for its EV health to avoid one by one.
    f.c[1].probes_ok += 4;
    f.c[1].probes_lost += 3;
    EXPECT_EQ(f.score(s).down_mask, 0);
    EXPECT_EQ(s.score(1).state, PlaneState::kUp);
}

// A plane with dead paths in it is not taken down when it is the only way
// to the peer: every QP would stop, where EV health alone keeps the live
// paths in use. One plane of two stays up when both look failing.
TEST(PathScorer, TheLastPlaneThatReachesThePeerStaysUp) {
    PathScorer one(ScorerConfig{}, 1);
    Feed f;
    f.links = 0b01;
    f.period(0, 100, 60, 40);
    f.g.assumed_bad[0] = 40;  // of 48: above three quarters
    EXPECT_EQ(f.score(one).down_mask, 0);
    EXPECT_EQ(one.score(0).state, PlaneState::kUp);
    EXPECT_EQ(one.score(0).down_events, 0u);

    PathScorer two(ScorerConfig{}, 2);
    Feed g;
    g.period(0, 100, 60, 40);
    g.period(1, 100, 60, 40);
    g.g.assumed_bad[0] = 40;
    g.g.assumed_bad[1] = 40;
    const uint8_t m = g.score(two).down_mask;
    EXPECT_TRUE(m == 0b01 || m == 0b10) << int(m);
    EXPECT_EQ(g.score(two).down_mask, m) << "and it stays so";
}

// The plane that stayed up goes away (its link, the operator) while the
// other is down on the scorer's word: the down one comes back at once,
// unproven, rather than leave the peer with nothing to send on.
TEST(PathScorer, ADownPlaneComesBackWhenEveryOtherPlaneIsGone) {
    PathScorer s(ScorerConfig{}, 2);
    Feed f;
    f.period(0, 100, 100, 0);
    f.period(1, 20, 0, 5);
    EXPECT_EQ(f.score(s).down_mask, 0b10);
    f.c[1].tx_probes += 4;
    f.c[1].probes_lost += 4;
    f.period(0, 100, 100, 0);
    EXPECT_EQ(f.score(s).down_mask, 0b10) << "still dead, and plane 0 carries the traffic";
    f.links = 0b10;  // plane 0's link goes
    f.c[1].tx_probes += 4;
    f.c[1].probes_lost += 4;
    EXPECT_EQ(f.score(s).down_mask, 0);
    EXPECT_EQ(s.score(0).state, PlaneState::kLinkDown);
    EXPECT_EQ(s.score(1).state, PlaneState::kUp);
    // The same when the operator denies the plane that stayed.
    PathScorer d(ScorerConfig{}, 2);
    Feed g;
    g.period(0, 100, 100, 0);
    g.period(1, 20, 0, 5);
    EXPECT_EQ(g.score(d).down_mask, 0b10);
    d.deny_plane(0, true);
    EXPECT_EQ(g.score(d).down_mask, 0);
    EXPECT_EQ(d.score(0).state, PlaneState::kDenied);
    EXPECT_EQ(d.score(1).state, PlaneState::kUp);
}

TEST(PathScorer, LossesWhileThePlaneStillDeliversAreAPathProblemNotAPlaneOne) {
    PathScorer s(ScorerConfig{}, 2);
    Feed f;
    f.period(1, 100, 90, 10);
    EXPECT_EQ(f.score(s).down_mask, 0);
    f.period(1, 100, 90, 10);
    EXPECT_EQ(f.score(s).down_mask, 0);
    f.score(s);              // a quiet period
    f.period(1, 100, 0, 2);  // below down_losses, even with the quiet period before
    EXPECT_EQ(f.score(s).down_mask, 0);
}

TEST(PathScorer, LossesThenSilenceAcrossTwoPeriodsTakeThePlaneDown) {
    PathScorer s(ScorerConfig{}, 2);
    Feed f;
    // The failure: the last packets sent before it are acked in the same
    // period as the first losses of those sent after it.
    f.period(1, 50, 20, 30);
    EXPECT_EQ(f.score(s).down_mask, 0);
    // Then the QPs have left the plane and only probe it, in vain, while
    // plane 0 carries the traffic.
    f.c[1].tx_probes += 3;
    f.c[1].probes_lost += 2;
    f.period(0, 100, 100, 0);
    EXPECT_EQ(f.score(s).down_mask, 0b10);
    // An idle plane is not a dead one.
    PathScorer idle(ScorerConfig{}, 2);
    Feed g;
    g.period(1, 50, 20, 30);
    (void)g.score(idle);
    EXPECT_EQ(g.score(idle).down_mask, 0) << "nothing sent or probed: no evidence";
}

TEST(PathScorer, APeerThatStallsTakesNoPlaneDown) {
    PathScorer s(ScorerConfig{}, 2);
    Feed f;
    f.period(0, 100, 90, 10);
    f.period(1, 100, 90, 10);
    EXPECT_EQ(f.score(s).down_mask, 0);
    // The peer is descheduled for a period: both planes send, nothing
    // comes back anywhere, losses were found just before.
    f.period(0, 50, 0, 5);
    f.period(1, 50, 0, 5);
    EXPECT_EQ(f.score(s).down_mask, 0) << "a silent peer is not a failed plane";
    // It is back, and only plane 1 stays silent: that is a failure.
    f.period(0, 100, 100, 0);
    f.period(1, 50, 0, 5);
    EXPECT_EQ(f.score(s).down_mask, 0b10);
}

TEST(PathScorer, MostEvsOfAPlaneOutOfUseTakeItDown) {
    PathScorer s(ScorerConfig{}, 2);
    Feed f;
    f.period(0, 100, 100, 0);
    f.g.assumed_bad[0] = 30;
    f.g.denied[0] = 5;
    EXPECT_EQ(f.score(s).down_mask, 0) << "35 of 48 is below three quarters";
    f.g.assumed_bad[0] = 31;
    f.period(0, 100, 100, 0);
    EXPECT_EQ(f.score(s).down_mask, 0b01);
    EXPECT_EQ(s.score(0).evs_assumed_bad, 31);
    f.c[0].probes_ok += 5;
    EXPECT_EQ(f.score(s).down_mask, 0b01) << "probes alone do not outvote the EVs";
    f.g.assumed_bad[0] = 0;
    f.c[0].probes_ok += 5;
    EXPECT_EQ(f.score(s).down_mask, 0);
}

TEST(PathScorer, ReportsAggregatesAndLinkState) {
    ScorerConfig c;
    c.ewma_weight = 1;  // the last period only
    PathScorer s(c, 2);
    Feed f;
    f.period(0, 300, 300, 0, 15);  // 75 acks, 15 with ECN
    f.period(1, 100, 100, 1);
    f.links = 0b01;
    (void)f.score(s);
    EXPECT_DOUBLE_EQ(s.score(0).ecn_fraction, 0.2);
    EXPECT_DOUBLE_EQ(s.score(0).rtt_ns, 8000);
    EXPECT_DOUBLE_EQ(s.score(0).tx_share, 0.75);
    EXPECT_DOUBLE_EQ(s.score(1).loss_fraction, 0.01);
    EXPECT_EQ(s.score(1).state, PlaneState::kLinkDown);
    EXPECT_EQ(s.table().down_mask, 0) << "the endpoint leaves a dead link by itself";
}

TEST(PathScorer, ADeniedPlaneIsNotJudgedAndComesBackUpWhenAllowed) {
    PathScorer s(ScorerConfig{}, 2);
    Feed f;
    s.deny_plane(1, true);
    f.g.denied[1] = 48;  // what the endpoint reports for a denied plane's EVs
    f.period(1, 0, 0, 0);
    (void)f.score(s);
    EXPECT_EQ(s.table().down_mask, 0) << "the operator's, not a failure";
    EXPECT_EQ(s.score(1).state, PlaneState::kDenied);
    EXPECT_EQ(s.score(1).evs_denied, 48);
    s.deny_plane(1, false);
    f.g.denied[1] = 0;
    (void)f.score(s);
    EXPECT_EQ(s.score(1).state, PlaneState::kUp);
    EXPECT_EQ(s.table().down_mask, 0);
}

TEST(PathScorer, OperatorDenialsArePublishedAtOnce) {
    PathScorer s(ScorerConfig{}, 4);
    const uint64_t g0 = s.table().generation;
    s.deny_plane(2, true);
    EXPECT_EQ(s.table().denied_mask, 0b100);
    EXPECT_EQ(s.score(2).state, PlaneState::kDenied);
    EXPECT_GT(s.table().generation, g0);
    const uint64_t g1 = s.table().generation;
    s.deny_plane(2, true);
    EXPECT_EQ(s.table().generation, g1) << "no change, no new generation";
    s.deny_plane(9, true);
    EXPECT_EQ(s.table().denied_mask, 0b100) << "a plane that does not exist is ignored";
    s.deny_ev(7, 40000, true);
    s.deny_ev(7, 40001, true);
    EXPECT_EQ(s.table().denied_evs.size(), 2u);
    s.deny_ev(7, 40000, false);
    ASSERT_EQ(s.table().denied_evs.size(), 1u);
    EXPECT_EQ(s.table().denied_evs[0].ev, 40001);
    s.deny_plane(2, false);
    EXPECT_EQ(s.table().denied_mask, 0);
}

}  // namespace
}  // namespace mrc
