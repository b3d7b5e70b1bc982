// Scope: the EV set on its own (lib/core/ev.h): the split over planes and
// spares, the walk, and every row of the health truth table: SKIP and its
// doubling, retirement with a spare taking the slot, the floor, probes,
// flap damping, DENIED, the plane masks, and the gauges the scorer reads.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/ev.h"

namespace mrc {
namespace {

EvConfig cfg(uint32_t evs = 16, uint32_t spares = 2, uint32_t floor = 4) {
    EvConfig c;
    c.evs = evs;
    c.backup_per_plane = spares;
    c.min_active = floor;
    return c;
}

constexpr uint8_t kAll = 0xff;

// The entries of `plane` that are active, in slot order.
std::vector<uint32_t> active_of(const EvSet &s, uint8_t plane) {
    std::vector<uint32_t> v;
    for (uint32_t j = 0; j < s.per_plane(); ++j)
        v.push_back(s.active_entry(plane, j));
    return v;
}

TEST(EvSet, SplitsEvenlyWithSparesAndDistinctValues) {
    EvSet s;
    s.init(cfg(12, 2), 4, 42);
    EXPECT_EQ(s.size(), 12u + 4 * 2);
    EXPECT_EQ(s.active_size(), 12u);
    EXPECT_EQ(s.per_plane(), 3u);
    std::set<uint16_t> seen;
    uint32_t active[4] = {}, spare[4] = {};
    for (const EvEntry &e : s.entries()) {
        seen.insert(e.ev);
        EXPECT_GE(e.ev, 49152) << "the dynamic port range by default, as RoCEv2";
        EXPECT_EQ(e.state, EvState::kGood);
        ++(e.active ? active : spare)[e.plane];
    }
    EXPECT_EQ(seen.size(), s.size()) << "distinct";
    for (int p = 0; p < 4; ++p) {
        EXPECT_EQ(active[p], 3u);
        EXPECT_EQ(spare[p], 2u);
    }
    std::set<uint16_t> rev;
    for (uint8_t p = 0; p < 4; ++p)
        for (uint32_t i = 0; i < EvSet::kReverseEvsPerPlane; ++i) {
            EXPECT_EQ(seen.count(s.reverse_ev(p, i)), 0u) << "ack EVs are separate";
            EXPECT_GE(s.reverse_ev(p, i), 49152);
            rev.insert(s.reverse_ev(p, i));
        }
    EXPECT_EQ(rev.size(), 4 * EvSet::kReverseEvsPerPlane);
    const uint16_t r0 = s.next_reverse_ev(1);
    EXPECT_NE(s.next_reverse_ev(1), r0) << "acks rotate over the reverse set";
    for (uint32_t i = 0; i < s.size(); ++i)
        EXPECT_EQ(s.find(s.entry(i).ev), i);
    EXPECT_EQ(s.find(80), kNoEv) << "below the EV range: never one of ours";
}

// EvSet::check's verdict as text: empty when the configuration is accepted.
std::string why_not(const Result<void> &r) {
    return r ? std::string() : r.error().message;
}

TEST(EvSet, ConfigurationsThatCannotWorkAreNamed) {
    EXPECT_EQ(why_not(EvSet::check(cfg(2, 0, 1), 4)),
              "fewer EVs than planes: some plane would have no EV");
    EXPECT_NE(why_not(EvSet::check(cfg(10, 0, 1), 4)), "") << "not a multiple of the planes";
    EXPECT_EQ(why_not(EvSet::check(cfg(16, 0, 17), 4)),
              "the bad-EV floor (min_active) exceeds the number of EVs");
    EXPECT_NE(why_not(EvSet::check(cfg(4096, 8, 4), 4)), "") << "over 4096 in all";
    EXPECT_NE(why_not(EvSet::check(cfg(), 0)), "");
    EXPECT_NE(why_not(EvSet::check(cfg(), 9)), "");
    EvConfig c = cfg();
    c.probe_successes = 0;
    EXPECT_NE(why_not(EvSet::check(c, 4)), "");
    EXPECT_EQ(why_not(EvSet::check(cfg(), 4)), "");
}

// Every EV a QP ever uses (active, spares, reverse, and the reverse EVs
// that replace failed ones) comes from the configured range, even one
// that holds exactly as many ports as the QP draws.
TEST(EvSet, EvsComeFromTheConfiguredRangeAndATooSmallOneIsRefused) {
    EvConfig c = cfg(8, 2, 2);
    ASSERT_TRUE(parse_ev_range("3000-3031", &c).ok());
    EXPECT_EQ(c.ev_min, 3000);
    EXPECT_EQ(c.ev_max, 3031);
    // 8 active + 2 x 4 spares + 4 x 4 reverse = 32 distinct: an exact fit.
    EXPECT_EQ(why_not(EvSet::check(c, 4)), "");
    EvSet s;
    s.init(c, 4, 7);
    std::set<uint16_t> all;
    for (const EvEntry &e : s.entries())
        all.insert(e.ev);
    for (uint8_t p = 0; p < 4; ++p)
        for (uint32_t i = 0; i < EvSet::kReverseEvsPerPlane; ++i)
            all.insert(s.reverse_ev(p, i));
    EXPECT_EQ(all.size(), 32u) << "distinct";
    EXPECT_EQ(*all.begin(), 3000);
    EXPECT_EQ(*all.rbegin(), 3031);
    for (int k = 0; k < 200; ++k) {  // reverse EVs replaced after lost probes
        s.on_reverse_probe_lost(uint8_t(k % 4), uint32_t(k % EvSet::kReverseEvsPerPlane));
        const uint16_t r = s.reverse_ev(uint8_t(k % 4), uint32_t(k % EvSet::kReverseEvsPerPlane));
        EXPECT_GE(r, 3000);
        EXPECT_LE(r, 3031);
    }
    c.ev_max = 3030;
    EXPECT_NE(why_not(EvSet::check(c, 4)).find("holds fewer ports than the 32"), std::string::npos)
        << why_not(EvSet::check(c, 4));
    c.ev_min = 0;
    EXPECT_NE(why_not(EvSet::check(c, 4)), "") << "port 0 is no source port";
    // The range as text: FIRST-LAST, both real ports, in order.
    EvConfig d;
    EXPECT_TRUE(parse_ev_range("1-65535", &d).ok());
    EXPECT_TRUE(parse_ev_range("49152-49152", &d).ok());
    for (const char *bad : {"", "49152", "-65535", "49152-", "65535-49152", "0-100", "1-65536",
                            "a-b", "1000 - 2000", "100000-100001", "1-2-3", "+5-9"})
        EXPECT_FALSE(parse_ev_range(bad, &d).ok()) << bad;
    EXPECT_NE(parse_ev_range("9-3", &d).error().message.find("FIRST-LAST"), std::string::npos);
}

TEST(EvSet, WalkVisitsEveryEvOncePerPassPlanesBalancedOrderReshuffled) {
    EvSet s;
    s.init(cfg(16), 4, 7);
    // The walk starts at a seeded place in its first pass: over 10 passes'
    // worth of choices every EV comes up 10 times, give or take the edges.
    std::map<uint32_t, int> times;
    uint32_t per_plane[4] = {};
    std::vector<uint32_t> seq;
    for (uint32_t k = 0; k < 160; ++k) {
        const uint32_t e = s.choose(0, kAll);
        ++times[e];
        ++per_plane[s.entry(e).plane];
        seq.push_back(e);
    }
    EXPECT_EQ(times.size(), 16u);
    for (const auto &[e, n] : times) {
        EXPECT_GE(n, 9) << e;
        EXPECT_LE(n, 11) << e;
    }
    for (auto n : per_plane) {
        EXPECT_GE(n, 39u);
        EXPECT_LE(n, 41u);
    }
    // Never the same plane three times running: rounds hold one EV per plane.
    for (size_t k = 2; k < seq.size(); ++k)
        EXPECT_FALSE(s.entry(seq[k]).plane == s.entry(seq[k - 1]).plane &&
                     s.entry(seq[k]).plane == s.entry(seq[k - 2]).plane);
    // Each pass in a fresh order.
    const std::vector<uint32_t> p1(seq.begin() + 32, seq.begin() + 48);
    const std::vector<uint32_t> p2(seq.begin() + 48, seq.begin() + 64);
    EXPECT_NE(p1, p2);
    EvSet a, b, c;
    a.init(cfg(16), 2, 9);
    b.init(cfg(16), 2, 9);
    c.init(cfg(16), 2, 10);
    bool differ = false;
    for (int i = 0; i < 40; ++i) {
        const uint32_t x = a.choose(0, kAll);
        EXPECT_EQ(x, b.choose(0, kAll)) << "same seed, same order";
        differ |= a.entry(x).ev != c.entry(c.choose(0, kAll)).ev;
    }
    EXPECT_TRUE(differ) << "another seed, another order: no lock-step between QPs";
}

TEST(EvSet, EcnSkipsTheEvForAWhileDoublingWhileMarksContinue) {
    EvConfig c = cfg(4, 0, 1);
    c.skip_ns = 1000;
    EvSet s;
    s.init(c, 1, 1);
    const uint32_t e = s.choose(0, kAll);
    EXPECT_TRUE(s.on_ecn(e, 0));
    EXPECT_EQ(s.entry(e).state, EvState::kSkip);
    for (int k = 0; k < 12; ++k)
        EXPECT_NE(s.choose(500, kAll), e) << "skipped while SKIP lasts";
    // Marked again: the next skip is twice as long.
    EXPECT_TRUE(s.on_ecn(e, 900));
    EXPECT_EQ(s.detail(e).skip_until_ns, 900u + 2000);
    bool back = false;
    for (int k = 0; k < 8; ++k)
        back |= s.choose(2900, kAll) == e;
    EXPECT_TRUE(back) << "SKIP ends by itself";
    EXPECT_EQ(s.entry(e).state, EvState::kGood);
    // A clean ack resets the doubling.
    s.on_clean_ack(e);
    EXPECT_TRUE(s.on_ecn(e, 5000));
    EXPECT_EQ(s.detail(e).skip_until_ns, 5000u + 1000);
    // A trim skips trim_skip_factor times longer.
    const uint32_t f = (e + 1) % 4;
    EXPECT_TRUE(s.on_trim(f, 0));
    EXPECT_EQ(s.detail(f).skip_until_ns, uint64_t{c.trim_skip_factor} * 1000);
}

TEST(EvSet, WithEveryEvInSkipTheWalkTakesThemInTurn) {
    EvConfig c = cfg(8, 0, 1);
    c.skip_ns = 1000;
    EvSet s;
    s.init(c, 2, 12);
    for (uint32_t k = 0; k < s.active_size(); ++k)
        (void)s.on_ecn(s.active_entry(uint8_t(k % 2), k / 2), 0);
    std::map<uint32_t, int> used;
    for (int k = 0; k < 32; ++k) {
        const uint32_t e = s.choose(10, kAll);
        EXPECT_EQ(s.entry(e).state, EvState::kSkip);
        ++used[e];
    }
    EXPECT_EQ(used.size(), 8u) << "spread over all of them, not pinned on one";
    for (const auto &[e, n] : used)
        EXPECT_LE(n, 5) << e;
    // One EV's SKIP runs out first: from then on only GOOD ones are taken.
    const uint32_t first = s.active_entry(0, 0);
    (void)s.on_ecn(s.active_entry(0, 1), 0);  // the others marked again: longer
    for (uint32_t k = 0; k < s.active_size(); ++k)
        if (s.active_entry(uint8_t(k % 2), k / 2) != first)
            (void)s.on_ecn(s.active_entry(uint8_t(k % 2), k / 2), 500);
    for (int k = 0; k < 8; ++k)
        EXPECT_EQ(s.choose(1200, kAll), first);
}

TEST(EvSet, TimeoutRetiresTheEvAndASpareOfItsPlaneTakesTheSlot) {
    EvGauges g;
    EvSet s;
    s.init(cfg(8, 2, 2), 2, 3, &g);
    EXPECT_EQ(g.total[0], 6);
    const uint32_t victim = s.active_entry(1, 2);
    EXPECT_EQ(s.on_timeout(victim, 100), EvTimeout::kRetired);
    EXPECT_EQ(s.entry(victim).state, EvState::kAssumedBad);
    EXPECT_FALSE(s.entry(victim).active);
    const auto act = active_of(s, 1);
    EXPECT_EQ(act.size(), 4u) << "the plane keeps its share of active EVs";
    for (uint32_t i : act) {
        EXPECT_EQ(s.entry(i).plane, 1) << "replaced from the same plane";
        EXPECT_EQ(s.entry(i).state, EvState::kGood);
    }
    EXPECT_EQ(g.assumed_bad[1], 1);
    EXPECT_EQ(g.assumed_bad[0], 0);
    EXPECT_EQ(s.assumed_bad().size(), 1u);
    for (int k = 0; k < 32; ++k)
        EXPECT_NE(s.choose(200, kAll), victim);
    EXPECT_EQ(s.on_timeout(victim, 300), EvTimeout::kAlreadyOut);
    s.release();
    EXPECT_EQ(g.assumed_bad[1], 0) << "gauges give back what the set held";
    EXPECT_EQ(g.total[1], 0);
}

// A resend after silent timeouts tries a spare (never an active EV, never
// one of another plane, never a bad one); a spare that got through takes
// the slot of the active EV that did not, which is retired among the spares.
TEST(EvSet, ASpareThatGotThroughTakesTheSlotOfTheActiveEvThatDidNot) {
    EvGauges g;
    EvSet s;
    s.init(cfg(8, 3, 2), 2, 9, &g);
    std::set<uint32_t> seen;
    for (int k = 0; k < 200; ++k) {
        const uint32_t i = s.choose_spare(10, kNoEv, 0x2);
        ASSERT_NE(i, kNoEv);
        EXPECT_FALSE(s.entry(i).active);
        EXPECT_EQ(s.entry(i).plane, 1);
        seen.insert(i);
    }
    EXPECT_EQ(seen.size(), 3u) << "every spare of the plane is tried, at random";
    const uint32_t dead_spare = *seen.begin();
    EXPECT_EQ(s.on_timeout(dead_spare, 20), EvTimeout::kRetired);
    for (int k = 0; k < 100; ++k)
        EXPECT_NE(s.choose_spare(30, kNoEv, 0x2), dead_spare) << "a spare that failed is not tried";
    const uint32_t spare = *std::next(seen.begin());
    const uint32_t dead = s.active_entry(1, 1);
    EXPECT_EQ(s.adopt(spare, s.active_entry(0, 0), 40), EvTimeout::kSkipped)
        << "another plane's slot";
    EXPECT_EQ(s.adopt(dead, spare, 40), EvTimeout::kSkipped) << "the other way round";
    ASSERT_EQ(s.adopt(spare, dead, 40), EvTimeout::kRetired);
    EXPECT_TRUE(s.entry(spare).active);
    EXPECT_EQ(s.active_entry(1, 1), spare);
    EXPECT_FALSE(s.entry(dead).active);
    EXPECT_EQ(s.entry(dead).state, EvState::kAssumedBad) << "probed before it is used again";
    EXPECT_EQ(g.assumed_bad[1], 2);
    EXPECT_EQ(s.active_size(), 8u);
    uint32_t spares_left = 0;
    for (int k = 0; k < 100; ++k)
        spares_left += s.choose_spare(50, kNoEv, 0x2) != kNoEv;
    EXPECT_EQ(spares_left, 100u) << "one usable spare is left";
    EXPECT_EQ(s.choose_spare(50, kNoEv, 0x4), kNoEv) << "no plane 2";
}

TEST(EvSet, TheFloorStopsRetirementsThatWouldLeaveTooFewEvs) {
    EvSet s;
    s.init(cfg(4, 0, 3), 1, 5);  // no spares; at least 3 active EVs usable
    const auto act = active_of(s, 0);
    EXPECT_EQ(s.on_timeout(act[0], 10), EvTimeout::kRetired);
    EXPECT_EQ(s.on_timeout(act[1], 10), EvTimeout::kFloorHeld) << "3 left would be 2";
    EXPECT_EQ(s.entry(act[1]).state, EvState::kSkip) << "avoided for long instead";
    EXPECT_GT(s.detail(act[1]).skip_until_ns, 10u);
    EXPECT_EQ(s.entry(act[0]).state, EvState::kAssumedBad);
    EXPECT_TRUE(s.entry(act[0]).active) << "no spare: it keeps its slot, out of use";
}

TEST(EvSet, ProbesReviveAfterEnoughRepliesInARowAndLossesBackOff) {
    EvConfig c = cfg(4, 1, 1);
    c.probe_successes = 3;
    c.probe_interval_ns = 1000;
    EvSet s;
    s.init(c, 1, 8);
    const uint32_t e = s.active_entry(0, 0);
    ASSERT_EQ(s.on_timeout(e, 0), EvTimeout::kRetired);
    EXPECT_EQ(s.detail(e).probe_at_ns, 1000u) << "first probe one interval later";
    // Two replies, then a loss: the count starts again.
    for (uint64_t t : {1000u, 2000u}) {
        s.on_probe_sent(e, t);
        EXPECT_FALSE(s.on_probe_reply(e, t + 10));
    }
    s.on_probe_sent(e, 3000);
    s.on_probe_lost(e, 4000);
    EXPECT_EQ(s.detail(e).probe_ok, 0);
    EXPECT_EQ(s.detail(e).probe_at_ns, 4000u + 2000) << "a lost probe doubles the wait";
    s.on_probe_sent(e, 6000);
    s.on_probe_lost(e, 7000);
    EXPECT_EQ(s.detail(e).probe_at_ns, 7000u + 4000);
    uint64_t t = 11000;
    for (int k = 0; k < 2; ++k, t += 1000) {
        s.on_probe_sent(e, t);
        EXPECT_FALSE(s.on_probe_reply(e, t + 10));
    }
    s.on_probe_sent(e, t);
    EXPECT_TRUE(s.on_probe_reply(e, t + 10)) << "the third reply in a row revives it";
    EXPECT_EQ(s.entry(e).state, EvState::kGood);
    EXPECT_EQ(s.detail(e).revivals, 1u);
    EXPECT_EQ(s.detail(e).min_bad_ns, t + 10);
    EXPECT_TRUE(s.assumed_bad().empty());
    // A reply for an EV that is not ASSUMED_BAD changes nothing.
    EXPECT_FALSE(s.on_probe_reply(s.active_entry(0, 1), t));
}

TEST(EvSet, ARevivedSpareTakesBackASlotHeldByABadEv) {
    EvConfig c = cfg(2, 1, 1);
    c.probe_successes = 1;
    EvSet s;
    s.init(c, 1, 11);
    const uint32_t a = s.active_entry(0, 0);
    const uint32_t b = s.active_entry(0, 1);
    ASSERT_EQ(s.on_timeout(a, 0), EvTimeout::kRetired);  // the spare takes a's slot
    const uint32_t spare_now_active = s.active_entry(0, 0);
    ASSERT_EQ(s.on_timeout(spare_now_active, 0), EvTimeout::kRetired);  // a held by no one
    (void)b;
    // No GOOD spare left: the slot keeps the bad EV. Reviving `a` brings it back.
    s.on_probe_sent(a, 100);
    ASSERT_TRUE(s.on_probe_reply(a, 110));
    EXPECT_TRUE(s.entry(a).active);
    EXPECT_FALSE(s.entry(spare_now_active).active);
}

TEST(EvSet, FlappingEvsNeedMoreRepliesEachTime) {
    EvConfig c = cfg(4, 0, 1);
    c.probe_successes = 2;
    c.probe_successes_max = 16;
    c.flap_window_ns = 1'000'000;
    EvSet s;
    s.init(c, 1, 4);
    const uint32_t e = s.active_entry(0, 0);
    uint64_t t = 0;
    auto revive = [&] {
        for (int k = 0; k < s.detail(e).probe_need; ++k) {
            t += 1000;
            s.on_probe_sent(e, t);
            (void)s.on_probe_reply(e, t + 1);
        }
        EXPECT_EQ(s.entry(e).state, EvState::kGood);
    };
    std::vector<int> needs;
    for (int flap = 0; flap < 5; ++flap) {
        t += 1000;
        ASSERT_EQ(s.on_timeout(e, t), EvTimeout::kRetired);
        needs.push_back(s.detail(e).probe_need);
        revive();
    }
    EXPECT_EQ(needs, (std::vector<int>{2, 4, 8, 16, 16})) << "doubling, capped";
    // Good for longer than the flap window: back to the base rule.
    t += 2'000'000;
    ASSERT_EQ(s.on_timeout(e, t), EvTimeout::kRetired);
    EXPECT_EQ(s.detail(e).probe_need, 2);
}

TEST(EvSet, DeniedEvsAreNeverUsedAndMustProveThemselvesWhenAllowed) {
    EvGauges g;
    EvSet s;
    s.init(cfg(4, 1, 1), 1, 6, &g);
    const uint32_t d = s.active_entry(0, 2);
    s.deny(d, 0);
    EXPECT_EQ(s.entry(d).state, EvState::kDenied);
    EXPECT_FALSE(s.entry(d).active) << "a spare took its slot";
    EXPECT_EQ(g.denied[0], 1);
    for (int k = 0; k < 40; ++k) {
        EXPECT_NE(s.choose(0, kAll), d);
        EXPECT_NE(s.choose_retx(0, kNoEv, 0, kAll), d);
    }
    s.allow(d, 10);
    EXPECT_EQ(s.entry(d).state, EvState::kAssumedBad) << "probes decide";
    EXPECT_EQ(g.denied[0], 0);
    EXPECT_EQ(g.assumed_bad[0], 1);
    // Every EV denied: nothing may be sent.
    EvSet all;
    all.init(cfg(2, 0, 1), 1, 6);
    all.deny(0, 0);
    all.deny(1, 0);
    EXPECT_EQ(all.choose(0, kAll), kNoEv);
    EXPECT_EQ(all.choose_retx(0, kNoEv, 0, kAll), kNoEv);
}

TEST(EvSet, PlaneMasksSteerNewPacketsAndRetransmissions) {
    EvSet s;
    s.init(cfg(16), 4, 2);
    for (int k = 0; k < 64; ++k)
        EXPECT_NE(s.entry(s.choose(0, 0b1101)).plane, 1) << "plane 1 not allowed";
    // A retransmission avoids the failed EV and its plane when another plane can take it.
    const uint32_t failed = s.active_entry(2, 0);
    for (int k = 0; k < 64; ++k) {
        const uint32_t r = s.choose_retx(0, failed, 0b0100, 0b1111);
        EXPECT_NE(r, failed);
        EXPECT_NE(s.entry(r).plane, 2);
    }
    // Only the avoided plane allowed: it still gets the packet, on another EV.
    for (int k = 0; k < 16; ++k) {
        const uint32_t r = s.choose_retx(0, failed, 0b0100, 0b0100);
        EXPECT_EQ(s.entry(r).plane, 2);
        EXPECT_NE(r, failed);
    }
    // No GOOD EV on the allowed planes: the least bad one there, not another plane.
    EvSet t;
    t.init(cfg(8, 0, 1), 2, 3);
    for (uint32_t j = 0; j < 4; ++j)
        (void)t.on_ecn(t.active_entry(0, j), 0);
    const uint32_t f = t.choose(10, 0b01);
    EXPECT_EQ(t.entry(f).plane, 0);
    EXPECT_EQ(t.entry(f).state, EvState::kSkip);
    const EvStateCounts n = t.counts(10);
    EXPECT_EQ(n.state[uint32_t(EvState::kSkip)], 4u);
    EXPECT_EQ(n.state[uint32_t(EvState::kGood)], 4u);
}

}  // namespace
}  // namespace mrc
