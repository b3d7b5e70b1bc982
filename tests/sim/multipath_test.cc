// Scope: adaptive multipath in the simulator, one named scenario per test,
// each asserting a figure against a reference run made in the same test:
// plane failure and recovery, dead paths inside planes, a slow plane with
// ECN, random loss, incast with a victim, a flapping path. The real core
// (EV health, probes, plane status, per-plane NSCC, the path scorer) runs
// over the simulated fabric; figures are RecordProperty'd for the log.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "fabric.h"

namespace mrc::sim {
namespace {

constexpr uint64_t kUs = 1000;

SimConfig fabric4x8() {
    return sim::fabric4x8(256ull << 20);
}

void record(const char *key, double v) {
    testing::Test::RecordProperty(key, std::to_string(v));
}

void expect_clean(const SimResult &r) {
    EXPECT_TRUE(r.verified);
    EXPECT_EQ(r.qp_errors, 0u);
    EXPECT_EQ(r.verify_errors, 0u);
    EXPECT_EQ(r.delivered_bytes, r.expected_bytes) << "no byte lost";
}

// Mean of a series over buckets [from, to).
double mean(const std::vector<double> &v, size_t from, size_t to) {
    double s = 0;
    for (size_t i = from; i < to; ++i)
        s += v[i];
    return to > from ? s / double(to - from) : 0;
}

TEST(Multipath, PlaneBlackholedIsLeftWithinOneAckTimeoutAndGoodputRecovers) {
    SimConfig c = fabric4x8();
    c.series_ns = 50 * kUs;
    const SimResult clean = run(c);
    expect_clean(clean);

    const uint64_t t_fail_ns = 1000 * kUs;
    c.fabric.failures.push_back(Failure{2, -1, t_fail_ns, 0, -1});
    const SimResult r = run(c);
    expect_clean(r);

    // What the remaining three planes can carry: the clean run's per-plane goodput.
    const double three_planes = clean.goodput_gbps * 3 / 4;
    const size_t fail_bucket = t_fail_ns / c.series_ns;
    const size_t end = r.series_goodput_gbps.size() - 2;  // the last buckets are partial
    ASSERT_GT(end, fail_bucket + 20) << "the run must go on well past the failure";
    size_t back = end;
    for (size_t b = fail_bucket; b < end; ++b) {
        bool stays = true;
        for (size_t k = b; k < end && stays; ++k)
            stays = r.series_goodput_gbps[k] >= 0.95 * three_planes;
        if (stays) {
            back = b;
            break;
        }
    }
    const double recovery_us = double((back + 1) * c.series_ns - t_fail_ns) / kUs;
    EXPECT_LE(recovery_us, 2000) << "goodput back to 95% of three planes within 2 ms";
    record("recovery_us", recovery_us);
    record("goodput_after_gbps", mean(r.series_goodput_gbps, back, end));
    record("three_planes_gbps", three_planes);

    // Not one data packet on the dead plane after one ack timeout (and the
    // bucket it ends in).
    const uint64_t rto_ns = ack_timeout_ns(c.qp.retry.timeout_exp);
    const size_t quiet_from = (t_fail_ns + rto_ns) / c.series_ns + 1;
    uint64_t late = 0;
    for (size_t b = quiet_from; b < r.series_plane_tx.size(); ++b)
        late += r.series_plane_tx[b][2];
    EXPECT_EQ(late, 0u) << "data sent on the dead plane later than one ack timeout";
    EXPECT_GT(r.series_plane_tx[fail_bucket - 1][2], 0u) << "the plane carried its share before";
    EXPECT_EQ(r.planes[2].state, PlaneState::kDown) << "the scorer took it down";
    EXPECT_GT(r.requester.plane_failovers, 0u);
}

TEST(Multipath, PlaneDownAndBackIsUsedAgainAfterProbes) {
    SimConfig c = fabric4x8();
    c.series_ns = 100 * kUs;
    c.fabric.failures.push_back(Failure{1, -1, 500 * kUs, 1000 * kUs, -1});
    const SimResult r = run(c);
    expect_clean(r);
    EXPECT_GT(r.requester.plane_failovers, 0u);
    EXPECT_EQ(r.requester.plane_recoveries, r.requester.plane_failovers);
    // Down for [500, 1500) us. A failed plane is probed with a back-off
    // (probes lost in a row stretch the interval up to 2^max_doublings
    // times): in use again at most one longest wait and probe_successes
    // intervals after it came back, at its full share 300 us after that.
    const EvConfig &ev = c.qp.ev;
    const uint64_t back_ns = 1500 * kUs +
                             EvSet::plane_probe_wait_ns(ev, ev.plane_probe_backoff_max_doublings) +
                             uint64_t{ev.probe_successes} * ev.probe_interval_ns;
    const size_t back = back_ns / c.series_ns + 1;
    EXPECT_EQ(r.series_plane_tx[10][1], 0u);
    EXPECT_GT(r.series_plane_tx[back][1], 0u);
    const auto &late = r.series_plane_tx[back + 3];
    EXPECT_NEAR(double(late[1]), double(late[0]), 0.05 * double(late[0]));
    EXPECT_EQ(r.planes[1].state, PlaneState::kUp);
    EXPECT_EQ(r.ev_states.state[uint32_t(EvState::kAssumedBad)], 0u) << "every EV revived";
}

TEST(Multipath, ReceiverPortDownIsAnnouncedInAcksAndLeftWithinAnRtt) {
    SimConfig c = fabric4x8();
    c.series_ns = 50 * kUs;
    // The receiver's port on plane 3 goes down: only the receiver sees it;
    // the senders learn it from the plane-status bitmap of its acks.
    c.fabric.failures.push_back(Failure{3, -1, 1000 * kUs, 1000 * kUs, -1, 0, 1});
    const SimResult r = run(c);
    expect_clean(r);
    // Only what was in flight at the failure is lost: no EV had to time out
    // one after the other to find out.
    EXPECT_LE(r.data_packets_dropped, 64u);
    EXPECT_EQ(r.series_plane_tx[21][3], 0u);
    EXPECT_GT(r.series_plane_tx[45][3], 0u) << "back after the port came up and probes passed";
    record("dropped_packets", double(r.data_packets_dropped));
}

TEST(Multipath, TenPercentOfPathsDeadInEveryPlane) {
    SimConfig c = fabric4x8();
    c.fabric.paths_per_plane = 10;
    const SimResult clean = run(c);
    expect_clean(clean);
    for (int p = 0; p < 4; ++p)
        c.fabric.failures.push_back(Failure{p, 2 * p + 1, 0, 0, -1});
    const SimResult r = run(c);
    expect_clean(r);
    EXPECT_GT(r.requester.ev_retired, 0u);
    EXPECT_GE(r.goodput_gbps, 0.9 * clean.goodput_gbps);
    EXPECT_GE(r.goodput_gbps, 0.9 * 400 * 0.97) << "of the fabric's capacity";
    // Every EV that hashed onto a dead path and was tried is out of use at
    // the end; every other is in use. (An EV on a live path can fail once
    // in a while: the ack of its last packet went back over a dead path.
    // Its probes then bring it back.)
    uint32_t dead_failures = 0, live_failures = 0;
    for (const EvReport &e : r.evs) {
        const bool dead = e.path == uint32_t(2 * e.plane + 1);
        if (dead) {
            dead_failures += e.failures;
            if (e.failures > 0) {
                EXPECT_EQ(e.state, EvState::kAssumedBad) << "EV " << e.ev << " on a dead path";
            }
        } else {
            live_failures += e.failures;
            EXPECT_NE(e.state, EvState::kAssumedBad) << "EV " << e.ev << " on a live path";
        }
    }
    EXPECT_GT(dead_failures, 4 * live_failures);
    record("goodput_gbps", r.goodput_gbps);
    record("clean_gbps", clean.goodput_gbps);
}

TEST(Multipath, SlowPlaneWithEcnGetsItsShareAndTheRestStaysFull) {
    SimConfig c = fabric4x8();
    // Plane 3's core carries a quarter of the others' rate and marks ECN.
    c.fabric.plane_limits.push_back(PlaneLimit{3, 0, 25, 16});
    const SimResult r = run(c);
    expect_clean(r);
    const double capacity = 3 * 100 + 25;
    uint64_t all = 0;
    for (auto n : r.per_plane_tx_packets)
        all += n;
    const double share3 = double(r.per_plane_tx_packets[3]) / double(all);
    // Its capacity share is 25 / 325 = 7.7%: a quarter of the others' share.
    EXPECT_GT(share3, 0.5 * 25 / capacity);
    EXPECT_LT(share3, 1.5 * 25 / capacity);
    EXPECT_GE(r.goodput_gbps, 0.9 * capacity * 0.97) << "of the total capacity";
    EXPECT_GT(r.packets_ecn_marked, 0u);
    EXPECT_GT(r.requester.ev_skips, 0u) << "marked EVs were skipped";
    EXPECT_NE(r.planes[3].state, PlaneState::kDown) << "slow is not dead";
    record("plane3_share", share3);
    record("goodput_gbps", r.goodput_gbps);
}

TEST(Multipath, RandomLossOnAllPlanesAndHeavierOnOne) {
    SimConfig c = fabric4x8();
    const SimResult clean = run(c);
    expect_clean(clean);
    SimConfig all = c;
    all.fabric.loss = 0.001;
    const SimResult r1 = run(all);
    expect_clean(r1);
    EXPECT_GT(r1.packets_dropped_by_fabric, 0u);
    EXPECT_GE(r1.goodput_gbps, 0.95 * clean.goodput_gbps);

    SimConfig one = c;
    Impairment im;
    im.plane = 1;
    im.dir = 0;
    im.loss = 0.01;
    one.fabric.impairments.push_back(im);
    const SimResult r2 = run(one);
    expect_clean(r2);
    EXPECT_GT(r2.data_packets_dropped, 0u);
    EXPECT_GE(r2.goodput_gbps, 0.9 * clean.goodput_gbps);
    // Random loss retires an EV now and then (two losses in a row on one
    // EV: at 1% loss, about once per hundred losses, so a run may see none);
    // probes bring retired ones back.
    EXPECT_GT(r2.requester.ev_skips, 0u) << "a loss skips its EV once";
    if (r2.requester.ev_retired > 0) {
        EXPECT_GT(r2.requester.ev_revived, 0u);
    }
    record("loss_0.1pct_ratio", r1.goodput_gbps / clean.goodput_gbps);
    record("loss_1pct_one_plane_ratio", r2.goodput_gbps / clean.goodput_gbps);
}

SimConfig incast() {
    SimConfig c;
    c.fabric.planes = 1;  // one receiver link
    c.fabric.paths_per_plane = 8;
    c.fabric.link_gbps = 100;
    c.fabric.path_gbps = 400;  // the fabric is fast: the receiver's link is the bottleneck
    c.fabric.delay_ns = 2000;
    c.fabric.queue_kb = 8192;
    c.work.senders = 8;
    c.work.qps = 8;
    c.work.victims = 1;
    c.work.victim_bytes = 4 << 20;
    c.work.victim_start_ns = 300 * kUs;
    c.work.msg_bytes = 256 * 1024;
    c.work.total_bytes = 128ull << 20;
    c.qp.retry.timeout_exp = 5;
    c.series_ns = 100 * kUs;
    return c;
}

double victim_gbps(const SimResult &r) {
    for (const QpReport &q : r.qps)
        if (q.victim) return q.goodput_gbps;
    return 0;
}

TEST(Multipath, IncastWithEcnAtTheLastHopKeepsTheQueueBoundedAndTheVictimServed) {
    SimConfig c = incast();
    c.fabric.lasthop_ecn_kb = 64;  // as in UET fabrics: the bottleneck marks
    const SimResult r = run(c);
    expect_clean(r);
    const double fair = 100.0 / 9;
    // After the first millisecond (the QPs' first windows all land at once).
    uint64_t steady = 0;
    for (size_t b = 10; b < r.series_max_queue_bytes.size(); ++b)
        steady = std::max(steady, r.series_max_queue_bytes[b]);
    EXPECT_LT(steady, 256u * 1024) << "NSCC holds the queue near the marking threshold";
    EXPECT_LT(r.max_queue_bytes, uint64_t{c.fabric.queue_kb} * 1024) << "never full";
    EXPECT_EQ(r.packets_dropped_by_fabric, 0u);
    EXPECT_GE(victim_gbps(r), 0.5 * fair);
    EXPECT_GE(r.goodput_gbps, 0.9 * 100 * 0.97);
    EXPECT_GT(r.requester.cc_decreases, 0u);
    record("max_queue_bytes", double(r.max_queue_bytes));
    record("steady_max_queue_bytes", double(steady));
    record("victim_gbps", victim_gbps(r));

    // The same without congestion control: the queue fills the buffer and
    // overflows. (The victim still gets about its share: loss detection
    // from acks resends what the full queue drops within an RTT or two.)
    c.qp.cc.algo = CcAlgo::kFixed;
    const SimResult f = run(c);
    EXPECT_GT(f.max_queue_bytes, uint64_t{c.fabric.queue_kb} * 1024 / 2);
    EXPECT_GT(f.packets_dropped_by_fabric, 0u);
    EXPECT_GT(f.max_queue_bytes, 10 * steady)
        << "NSCC keeps a tenth of the queue a fixed window builds";
    expect_clean(f);
    record("fixed_window_max_queue_bytes", double(f.max_queue_bytes));
    record("fixed_window_victim_gbps", victim_gbps(f));
}

TEST(Multipath, IncastWithLastHopTrimmingNeedsNoTimeouts) {
    SimConfig c = incast();
    c.fabric.lasthop_trim_kb = 64;  // as in MRC fabrics: no ECN at the last hop, trimming
    const SimResult r = run(c);
    expect_clean(r);
    EXPECT_GT(r.packets_trimmed, 0u);
    EXPECT_EQ(r.requester.ack_timeouts, 0u);
    EXPECT_EQ(r.requester.ev_skips, 0u) << "a last-hop trim is not the path's fault";
    EXPECT_GT(r.requester.cc_quick_adapts, 0u);
    EXPECT_GE(victim_gbps(r), 0.5 * 100.0 / 9);
    EXPECT_GE(r.goodput_gbps, 0.9 * 100 * 0.97);
    record("max_queue_bytes", double(r.max_queue_bytes));
    record("victim_gbps", victim_gbps(r));
}

struct FlapFigures {
    uint32_t evs = 0;  // EVs on the flapping path that failed at least once
    uint32_t failures = 0;
    uint32_t revivals = 0;
    uint8_t max_need = 0;
    uint64_t up_phases = 0;
};

// Path 3 of plane 1 goes down for 1 ms every 2 ms, from 1 ms on, both ways.
FlapFigures flap(uint32_t spares_per_plane) {
    SimConfig c = fabric4x8();
    c.fabric.link_gbps = 25;  // a long run in few packets
    c.work.total_bytes = 256ull << 20;
    c.qp.ev.backup_per_plane = spares_per_plane;
    c.fabric.failures.push_back(Failure{1, 3, 1000 * kUs, 1000 * kUs, -1, 2000 * kUs});
    const SimResult r = run(c);
    expect_clean(r);
    EXPECT_GE(r.goodput_gbps, 0.9 * 100 * 0.97);
    const EvConfig &ev = c.qp.ev;
    const uint64_t rule_ns = uint64_t{ev.probe_successes} * ev.probe_interval_ns;
    FlapFigures f;
    f.up_phases = r.sim_time_ns / (2000 * kUs);
    EXPECT_GE(f.up_phases, 8u) << "enough flaps to see damping";
    for (const EvReport &e : r.evs) {
        // Every revival, of any EV, took at least what the probe rule asks.
        if (e.revivals > 0) {
            EXPECT_GE(e.min_bad_ns, rule_ns) << "EV " << e.ev;
        }
        if (e.plane != 1 || e.path != 3 || e.failures == 0) continue;
        // Never back faster than the path itself comes back.
        EXPECT_LE(e.revivals, f.up_phases) << "EV " << e.ev;
        ++f.evs;
        f.failures += e.failures;
        f.revivals += e.revivals;
        f.max_need = std::max(f.max_need, e.probe_need);
    }
    return f;
}

TEST(Multipath, FlappingPathEvsAreParkedAsSpares) {
    // A revived EV whose slot a spare took stays a spare until its plane
    // needs one: the flapping path stops being used after its first failure.
    const FlapFigures f = flap(8);
    ASSERT_GT(f.evs, 0u);
    EXPECT_LE(f.failures, 2 * f.evs);
    record("flapping_evs", f.evs);
    record("failures", f.failures);
}

TEST(Multipath, FlappingPathEvsAreDampedWhenRevivedInPlace) {
    // Without spares a revived EV is used again, fails again when the path
    // goes down, and needs twice the probe replies each time.
    const FlapFigures f = flap(0);
    ASSERT_GT(f.evs, 0u);
    EXPECT_GT(f.failures, 2 * f.evs) << "they were used again after reviving";
    EXPECT_LT(f.revivals, f.failures);
    EXPECT_GE(f.max_need, 8 * EvConfig{}.probe_successes) << "damping grew the rule";
    record("flapping_evs", f.evs);
    record("failures", f.failures);
    record("revivals", f.revivals);
    record("max_probe_need", f.max_need);
}

}  // namespace
}  // namespace mrc::sim
