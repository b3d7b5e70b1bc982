// Scope: loss recovery without timers and liveness, packet by packet
// (tests/core/harness.h): losses found from acks and the reorder window,
// the tail-loss probe, the adaptive per-plane timeout, SACKs that re-report
// arrivals (one lost SACK costs nothing), NACKs for earlier transmissions,
// the responder's reverse-EV probes, keepalives and the peer timeout, and
// planes that are denied, down or failed getting no new data.
#include <gtest/gtest.h>

#include <set>

#include "harness.h"

namespace mrc::test {
namespace {

using wire::Opcode;

constexpr uint64_t kRtt = 3000;  // what these tests take a round trip to be

// The harness with what the mechanics tests switch off switched on again.
QpConfig live_config() {
    QpConfig c = Harness::small_config();
    c.retry.adaptive = true;
    c.retry.min_rto_ns = 20'000;
    c.ev.reverse_probe_min_ns = EvConfig{}.reverse_probe_min_ns;
    c.liveness = LivenessConfig{};
    return c;
}

// Data frames that are resends.
std::vector<Frame> resends(const std::vector<Frame> &fs) {
    std::vector<Frame> r;
    for (const auto &f : data_frames(fs))
        if (f.flags() & wire::kFlagRetx) r.push_back(f);
    return r;
}

// A delivers `d` to B one RTT later, and B's acks (delayed ones too) come
// back at once.
void round_trip(Harness &h, const std::vector<Frame> &d) {
    h.advance(kRtt);
    h.deliver_all(h.b, d);
    h.deliver_all(h.a, only(h.drain(h.b), Opcode::kSack));
    h.advance(Harness::small_config().ack_delay_ns + 1000);
    h.deliver_all(h.a, only(h.drain(h.b), Opcode::kSack));
}

TEST(Loss, ReorderingWithinTheWindowResendsNothing) {
    Harness h;
    ASSERT_EQ(h.write(8 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 8u);
    // The first packet takes a slower path: everything sent after it
    // arrives first, it arrives well within the reorder window.
    h.advance(kRtt);
    for (size_t i = 1; i < d.size(); ++i)
        h.deliver(h.b, d[i]);
    h.deliver_all(h.a, h.drain(h.b));
    const uint64_t wnd = h.a.qp->reorder_window_ns(d[0].plane, h.now_ns);
    h.advance(wnd / 2);
    EXPECT_TRUE(h.drain(h.a).empty());
    h.deliver(h.b, d[0]);
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u) << "a hole filled late is acked at once";
    h.deliver(h.a, acks[0]);
    h.advance(10 * wnd);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty());
    EXPECT_EQ(h.a.qp->counters().losses_detected, 0u);
    EXPECT_EQ(h.a.qp->counters().tx_retx_pkts, 0u);
    ASSERT_EQ(h.completions().size(), 1u);
    EXPECT_GT(h.a.qp->counters().reordered_pkts, 0u) << "its lateness was measured";
}

TEST(Loss, LatenessSeenWidensTheReorderWindow) {
    Harness h;
    uint64_t before = 0;
    for (int round = 0; round < 20; ++round) {
        ASSERT_EQ(h.write(4 * 1024, 0, uint64_t(round)), PostResult::kOk);
        auto d = h.drain(h.a);
        ASSERT_EQ(d.size(), 4u);
        if (round == 0) before = h.a.qp->reorder_window_ns(d[0].plane, h.now_ns);
        h.advance(kRtt);
        for (size_t i = 1; i < d.size(); ++i)
            h.deliver(h.b, d[i]);
        h.deliver_all(h.a, h.drain(h.b));
        // d[0] arrives 10 us late, every time.
        h.advance(10'000);
        h.deliver(h.b, d[0]);
        h.deliver_all(h.a, h.drain(h.b));
        // Whatever was resent before the window learned is delivered too.
        h.deliver_all(h.b, data_frames(h.drain(h.a)));
        h.deliver_all(h.a, h.drain(h.b));
        ASSERT_EQ(h.completions().size(), 1u) << round;
    }
    const uint64_t after = h.a.qp->reorder_window_ns(0, h.now_ns);
    EXPECT_GT(after, before);
    EXPECT_GE(after, 10'000u) << "covers the lateness it keeps seeing";
    // Once learned, the same lateness resends nothing more.
    const uint64_t resent = h.a.qp->counters().tx_retx_pkts;
    ASSERT_EQ(h.write(4 * 1024, 0, 99), PostResult::kOk);
    auto d = h.drain(h.a);
    h.advance(kRtt);
    for (size_t i = 1; i < d.size(); ++i)
        h.deliver(h.b, d[i]);
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(10'000);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty());
    h.deliver(h.b, d[0]);
    h.deliver_all(h.a, h.drain(h.b));
    EXPECT_EQ(h.a.qp->counters().tx_retx_pkts, resent);
}

TEST(Loss, ATailLossProbeResendsTheLastPacketAndItsAckFindsTheRest) {
    Harness h;
    ASSERT_EQ(h.write(4 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 4u);
    // The last two packets are lost: nothing sent after them can be acked.
    round_trip(h, {d[0], d[1]});
    const uint64_t progress_ns = h.now_ns;
    const uint64_t srtt = std::max(h.a.qp->rtt(0).srtt_ns(), h.a.qp->rtt(1).srtt_ns());
    ASSERT_GT(srtt, 0u);
    const uint64_t pto = h.a.qp->pto_ns();
    EXPECT_GE(pto, 2 * srtt + Harness::small_config().ack_delay_ns);
    for (uint8_t p = 0; p < 2; ++p) {
        const PlaneRtt &r = h.a.qp->rtt(p);
        if (r.has_sample()) {
            EXPECT_GE(pto, r.srtt_ns() + 4 * r.rttvar_ns() + Harness::small_config().ack_delay_ns)
                << "jitter of the usual size is not a tail loss";
        }
    }
    ASSERT_LT(pto, ack_timeout_ns(6)) << "the probe comes long before the timeout";
    h.advance(progress_ns + pto - 1000 - h.now_ns);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty()) << "not before the probe timeout";
    h.advance(2000);
    auto p = data_frames(h.drain(h.a));
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].psn(), d[3].psn()) << "the latest packet";
    EXPECT_TRUE(p[0].flags() & wire::kFlagAckReq);
    EXPECT_EQ(h.a.qp->counters().tail_probes, 1u);
    // Its ack shows d[2] is missing: found lost, resent, no timeout.
    round_trip(h, p);
    h.advance(h.a.qp->reorder_window_ns(d[2].plane, h.now_ns) + 2000);
    auto r = data_frames(h.drain(h.a));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].psn(), d[2].psn());
    round_trip(h, r);
    ASSERT_EQ(h.completions().size(), 1u);
    EXPECT_TRUE(h.placed(4096));
    EXPECT_EQ(h.a.qp->counters().ack_timeouts, 0u);
    EXPECT_EQ(h.a.qp->counters().losses_detected, 1u);
}

TEST(Loss, TheAdaptiveTimeoutFollowsEachPlanesRtt) {
    QpConfig c = live_config();
    c.liveness = LivenessConfig{0, 0};
    c.retry.min_rto_ns = 1000;
    Harness h(c);
    for (int round = 0; round < 16; ++round) {
        // One-packet messages on both planes (the walk alternates them).
        for (uint64_t m = 0; m < 4; ++m)
            ASSERT_EQ(h.write(1024, m * 4096, uint64_t(4 * round) + m), PostResult::kOk);
        auto d = data_frames(h.drain(h.a));
        ASSERT_EQ(d.size(), 4u);
        // Plane 0's round trip takes 3 us, plane 1's 30 us.
        h.advance(kRtt);
        for (const auto &f : d)
            if (f.plane == 0) h.deliver(h.b, f);
        h.deliver_all(h.a, only(h.drain(h.b), Opcode::kSack));
        h.advance(9 * kRtt);
        for (const auto &f : d)
            if (f.plane == 1) h.deliver(h.b, f);
        h.deliver_all(h.a, only(h.drain(h.b), Opcode::kSack));
        ASSERT_EQ(h.completions().size(), 4u);
    }
    const Qp &q = *h.a.qp;
    EXPECT_NEAR(double(q.rtt(0).srtt_ns()), double(kRtt), kRtt * 0.2);
    EXPECT_NEAR(double(q.rtt(1).srtt_ns()), double(10 * kRtt), kRtt * 2.0);
    EXPECT_LT(q.rto_ns(0), q.rto_ns(1));
    // srtt + 4 rttvar (at least 1 us) + the ack delay.
    EXPECT_EQ(q.rto_ns(0), q.rtt(0).srtt_ns() + std::max<uint64_t>(4 * q.rtt(0).rttvar_ns(), 1000) +
                               c.ack_delay_ns);
    // Bounded by the floor and the ceiling.
    c.retry.min_rto_ns = 1'000'000;
    Harness g(c);
    EXPECT_EQ(g.a.qp->rto_ns(0), 1'000'000u) << "before any sample: the start, at least the floor";
    c.retry.adaptive = false;
    Harness fixed(c);
    EXPECT_EQ(fixed.a.qp->rto_ns(1), ack_timeout_ns(c.retry.timeout_exp));
}

TEST(Loss, OneLostSackCostsNoResend) {
    Harness h;
    ASSERT_EQ(h.write(16 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 16u);
    h.advance(kRtt);
    // Arrivals out of order: each gap triggers an ack; the first is lost.
    h.deliver(h.b, d[1]);
    auto lost = h.drain(h.b);
    ASSERT_EQ(lost.size(), 1u);
    for (size_t i = 2; i < d.size(); i += 2)
        h.deliver(h.b, d[i]);
    h.deliver_all(h.a, h.drain(h.b));  // every ack but the first
    // What the lost ack reported (d[1]) is in the later ones too.
    EXPECT_EQ(h.a.qp->counters().sacked_pkts, 8u);
    for (size_t i = 3; i < d.size(); i += 2)
        h.deliver(h.b, d[i]);
    h.deliver(h.b, d[0]);
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(20 * kRtt);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty());
    EXPECT_EQ(h.a.qp->counters().tx_retx_pkts, 0u);
    ASSERT_EQ(h.completions().size(), 1u);
}

TEST(Loss, ANackForAnEarlierTransmissionAsksForNothing) {
    Harness h;
    ASSERT_EQ(h.write(4 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 4u);
    // d[0] is trimmed, but its NACK is slow; the others arrive and their
    // acks find d[0] lost first.
    Frame t = d[0];
    t.bytes.resize(wire::trim_data_packet(t.bytes.data(), uint32_t(t.bytes.size()), false));
    round_trip(h, {d[1], d[2], d[3]});
    h.advance(h.a.qp->reorder_window_ns(d[0].plane, h.now_ns) + 2000);
    auto r = resends(h.drain(h.a));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].psn(), d[0].psn());
    // The NACK of the first transmission arrives now: nothing more to send.
    h.deliver(h.b, t);
    auto n = only(h.drain(h.b), Opcode::kNack);
    ASSERT_EQ(n.size(), 1u);
    h.deliver(h.a, n[0]);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty());
    EXPECT_EQ(h.a.qp->counters().rx_nacks_stale, 1u);
    round_trip(h, r);
    ASSERT_EQ(h.completions().size(), 1u);
    EXPECT_EQ(h.a.qp->counters().tx_retx_pkts, 1u);
}

TEST(Loss, TheResponderProbesItsReverseEvsAndAGoodForwardEvAnswers) {
    Harness h(live_config());
    ASSERT_EQ(h.write(2 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    h.advance(kRtt);
    h.deliver_all(h.b, d);
    auto out = h.drain(h.b);
    auto probes = only(out, Opcode::kProbe);
    ASSERT_EQ(probes.size(), 1u) << "data arrives: one reverse EV is probed";
    const auto pp = probes[0].parse();
    EXPECT_TRUE(pp.probe->flags & wire::kProbeReverse);
    std::set<uint16_t> reverse;
    for (uint32_t k = 0; k < EvSet::kReverseEvsPerPlane; ++k)
        reverse.insert(h.b.qp->evs().reverse_ev(probes[0].plane, k));
    EXPECT_EQ(reverse.count(probes[0].ev()), 1u) << "sent on one of B's reverse EVs";
    h.deliver_all(h.a, out);
    auto replies = only(h.drain(h.a), Opcode::kProbeReply);
    ASSERT_EQ(replies.size(), 2u) << "answered twice: a forward EV may be dead unknown to A";
    EXPECT_NE(replies[0].ev(), replies[1].ev());
    for (const auto &r : replies) {
        EXPECT_EQ(r.plane, probes[0].plane);
        EXPECT_NE(h.a.qp->evs().find(r.ev()), kNoEv) << "answered on A's forward EVs";
    }
    h.deliver_all(h.b, replies);
    EXPECT_EQ(h.b.qp->counters().reverse_probes_ok, 1u);
    EXPECT_EQ(h.b.qp->counters().rx_probe_replies_stale, 1u) << "the second copy asks nothing";
    uint32_t good = 0;
    for (uint32_t k = 0; k < EvSet::kReverseEvsPerPlane; ++k)
        good += h.b.qp->evs().reverse(probes[0].plane, k).state == RevState::kGood;
    EXPECT_EQ(good, 1u);
    // Acks on that plane prefer the reverse EV known GOOD.
    for (uint64_t m = 0; m < 8; ++m)
        ASSERT_EQ(h.write(1024, 8192 + m * 1024, 2 + m), PostResult::kOk);
    h.deliver_all(h.b, data_frames(h.drain(h.a)));
    uint32_t on_plane = 0;
    for (const auto &a : only(h.drain(h.b), Opcode::kSack)) {
        if (a.plane != probes[0].plane) continue;
        ++on_plane;
        EXPECT_EQ(a.ev(), probes[0].ev());
    }
    EXPECT_GT(on_plane, 0u);
}

TEST(Loss, AReverseEvWhoseProbeIsLostIsReplaced) {
    Harness h(live_config());
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    h.advance(kRtt);
    h.deliver_all(h.b, h.drain(h.a));
    auto probes = only(h.drain(h.b), Opcode::kProbe);
    ASSERT_EQ(probes.size(), 1u);
    const uint8_t plane = probes[0].plane;
    const uint16_t dead = probes[0].ev();  // dropped: its path is dead
    h.advance(4 * ack_timeout_ns(6));
    EXPECT_EQ(h.b.qp->counters().reverse_evs_replaced, 1u);
    std::set<uint16_t> reverse;
    for (uint32_t k = 0; k < EvSet::kReverseEvsPerPlane; ++k)
        reverse.insert(h.b.qp->evs().reverse_ev(plane, k));
    EXPECT_EQ(reverse.count(dead), 0u);
}

TEST(Loss, AKeepaliveKeepsAnIdlePairAliveOnEveryPlaneInTurn) {
    QpConfig c = live_config();
    c.liveness.keepalive_ns = 100'000;
    c.liveness.peer_timeout_ns = 500'000;
    Harness h(c);
    std::set<uint8_t> planes;
    for (int i = 0; i < 20; ++i) {
        h.advance(60'000);
        auto a = h.drain(h.a);
        auto b = h.drain(h.b);
        for (const auto &f : only(a, Opcode::kProbe)) {
            EXPECT_TRUE(f.parse().probe->flags & wire::kProbeKeepalive);
            planes.insert(f.plane);
        }
        h.deliver_all(h.b, a);
        h.deliver_all(h.a, b);
        h.deliver_all(h.a, h.drain(h.b));
        h.deliver_all(h.b, h.drain(h.a));
    }
    EXPECT_EQ(h.a.qp->state(), QpState::kRts);
    EXPECT_EQ(h.b.qp->state(), QpState::kRts);
    EXPECT_GT(h.a.qp->counters().tx_keepalives + h.b.qp->counters().tx_keepalives, 5u);
    EXPECT_LT(h.a.qp->counters().tx_keepalives + h.b.qp->counters().tx_keepalives, 40u)
        << "about one per keepalive interval, not a stream";
    EXPECT_EQ(planes.size(), 2u) << "keepalives go on every plane in turn";
}

TEST(Loss, ADeadPeerErrorsTheSenderAndTheQpThatOnlyReceives) {
    QpConfig c = live_config();
    c.liveness.keepalive_ns = 100'000;
    c.liveness.peer_timeout_ns = 500'000;
    // The harness's retry limit (3): timeouts while the peer is silent are
    // the liveness check's to judge, not the retry budget's.
    Harness h(c);
    ASSERT_EQ(h.write(4 * 1024, 0, 7), PostResult::kOk);
    auto d = h.drain(h.a);
    round_trip(h, {d[0]});
    h.drain(h.b);
    // From here on, nothing crosses the wire in either direction.
    const uint64_t dead_at = h.now_ns;
    while (h.now_ns < dead_at + 600'000 &&
           (h.a.qp->state() == QpState::kRts || h.b.qp->state() == QpState::kRts)) {
        h.advance(10'000);
        h.drain(h.a);
        h.drain(h.b);
    }
    EXPECT_EQ(h.a.qp->state(), QpState::kError);
    EXPECT_EQ(h.a.qp->error_cause(), WcStatus::kPeerUnreachable);
    EXPECT_EQ(h.b.qp->state(), QpState::kError) << "B only receives: it notices too";
    EXPECT_EQ(h.b.qp->error_cause(), WcStatus::kPeerUnreachable);
    EXPECT_LE(h.now_ns - dead_at, 500'000u + 20'000u);
    auto comp = h.completions();
    ASSERT_EQ(comp.size(), 1u);
    EXPECT_EQ(comp[0].wr_id, 7u);
    EXPECT_EQ(comp[0].status, WcStatus::kPeerUnreachable);
    EXPECT_EQ(h.a.qp->counters().peer_timeouts, 1u);
}

TEST(Loss, APeerReachableOnOnePlaneOnlyIsNotGivenUp) {
    QpConfig c = live_config();
    c.liveness.keepalive_ns = 100'000;
    c.liveness.peer_timeout_ns = 500'000;
    c.retry.limit = RetryPolicy::kMaxExponential;
    Harness h(c);
    // Plane 1 is dead both ways; plane 0 carries everything for 2 ms.
    for (int i = 0; i < 200; ++i) {
        if (i % 20 == 0) {
            ASSERT_EQ(h.write(4 * 1024, 0, uint64_t(i)), PostResult::kOk);
        }
        h.advance(10'000);
        auto a = h.drain(h.a);
        auto b = h.drain(h.b);
        for (const auto &f : a)
            if (f.plane == 0) h.deliver(h.b, f);
        for (const auto &f : b)
            if (f.plane == 0) h.deliver(h.a, f);
    }
    EXPECT_EQ(h.a.qp->state(), QpState::kRts);
    EXPECT_EQ(h.b.qp->state(), QpState::kRts);
    EXPECT_EQ(h.a.qp->counters().peer_timeouts + h.b.qp->counters().peer_timeouts, 0u);
    EXPECT_EQ(h.completions().size(), 10u) << "every write completed over plane 0";
}

TEST(Loss, NoNewDataOnADeniedPlaneEvenWhenNoPlaneIsUsable) {
    Harness h;
    // Plane 1 denied by the operator; plane 0 is failing its verification
    // after its link came back (not usable, but not denied, down or failed).
    PathTable t;
    t.generation = 1;
    t.denied_mask = 0b10;
    h.a.ep->apply_path_table(t, h.now_ns);
    h.a.ep->set_plane_up(0, false);
    h.drain(h.a);  // the QP takes each plane state in
    h.a.ep->set_plane_up(0, true);
    h.drain(h.a);
    ASSERT_EQ(h.a.qp->usable_planes(), 0);
    ASSERT_EQ(h.write(8 * 1024), PostResult::kOk);
    auto d = data_frames(h.drain(h.a));
    EXPECT_FALSE(d.empty()) << "the plane waiting for verification carries data meanwhile";
    for (const auto &f : d)
        EXPECT_EQ(f.plane, 0) << "never the denied plane";
    // The denied plane's EVs count as denied in the gauges.
    const EvGauges g = h.a.ep->ev_gauges();
    EXPECT_EQ(g.denied[1], g.total[1]);
    EXPECT_EQ(g.denied[0], 0);
    // Both planes out (one denied, one link down): nothing new at all.
    h.a.ep->set_plane_up(0, false);
    ASSERT_EQ(h.write(8 * 1024, 65536, 2), PostResult::kOk);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty());
}

TEST(Loss, AnIdleResponderStopsProbingAndArmsNothing) {
    // Data arrives, then stops: reverse probing runs a while and ends, at
    // whatever moment the last probe fell due (a timer left armed in the
    // past would spin the worker for ever).
    for (uint64_t step = 900; step <= 20'000; step += 1'700) {
        QpConfig c = live_config();
        c.liveness = LivenessConfig{0, 0};
        Harness h(c);
        ASSERT_EQ(h.write(1024), PostResult::kOk);
        h.advance(kRtt);
        h.deliver_all(h.b, h.drain(h.a));
        for (uint64_t t = 0; t < 3'000'000; t += step) {
            h.advance(step);
            h.deliver_all(h.a, h.drain(h.b));  // probes answered
            h.deliver_all(h.b, h.drain(h.a));
        }
        EXPECT_FALSE(h.b.ep->tx_pending()) << "step " << step;
        EXPECT_EQ(h.b.ep->next_timer_ns(), UINT64_MAX) << "step " << step << ": a timer is armed";
        EXPECT_GT(h.b.qp->counters().tx_reverse_probes, 0u);
    }
}

TEST(Loss, ABlockedResendArmsNoTimerThatCannotMakeProgress) {
    Harness h;
    ASSERT_EQ(h.write(1024, 0, 1), PostResult::kOk);
    ASSERT_EQ(h.write(1024, 4096, 2), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 2u);
    // The responder is out of room for immediates: NO_RESOURCE NACKs ask
    // for resends later, 4 us apart.
    auto nack = [&](const Frame &x) {
        wire::NackFields f;
        f.dst_qpn = h.a.qp->qpn();
        f.psn = x.psn();
        f.reason = wire::NackReason::kNoResource;
        f.cum_psn = d[0].psn();
        f.ts_echo = x.parse().data->tx_ts.get();
        f.rwnd_units = 2;
        f.plane_status = 0b11;
        wire::MrcAddr ad;
        ad.src_ip = LoopbackPair::b_ip(x.plane);
        ad.dst_ip = LoopbackPair::a_ip(x.plane);
        Frame n;
        n.plane = x.plane;
        n.bytes.resize(wire::kMaxHdrBytes);
        n.bytes.resize(wire::write_nack(n.bytes.data(), ad, 5000, f));
        h.deliver(h.a, n);
    };
    nack(d[0]);
    h.advance(4000);
    nack(d[1]);
    // Meanwhile every link goes down: the first resend finds no plane and
    // waits; the second falls due while it waits.
    h.a.ep->set_plane_up(0, false);
    h.a.ep->set_plane_up(1, false);
    h.advance(Harness::small_config().no_resource_backoff_ns);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty()) << "no plane may carry it";
    h.advance(6000);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty());
    EXPECT_EQ(h.a.ep->next_timer_ns(), UINT64_MAX) << "nothing can be done: no timer to spin on";
    // A link comes back: both resends go out.
    h.a.ep->set_plane_up(1, true);
    h.advance(1000);
    EXPECT_EQ(data_frames(h.drain(h.a)).size(), 2u);
}

TEST(Loss, AWindowUpdateAckCarriesNoStaleRttSample) {
    QpConfig c = Harness::small_config();
    c.mpr_units = 1;     // a 128-PSN window: one held immediate closes it
    c.max_recv_cqe = 4;  // four immediates fill the receive CQ
    Harness h(c);
    for (uint64_t m = 0; m < 8; ++m)
        ASSERT_EQ(h.write(1024, m * 1024, m, true, uint32_t(m)), PostResult::kOk);
    h.advance(kRtt);
    h.deliver_all(h.b, data_frames(h.drain(h.a)));
    h.deliver_all(h.a, h.drain(h.b));
    // Much later, the application polls: a window-update ack goes out.
    h.advance(1'000'000);
    ASSERT_FALSE(h.recv_completions().empty());
    const auto acks = only(h.drain(h.b), Opcode::kSack);
    ASSERT_FALSE(acks.empty()) << "the window reopened: the requester is told";
    for (const auto &a : acks)
        EXPECT_EQ(a.parse().sack->ts_echo.get(), 0u)
            << "a timestamp echoed a millisecond late would be taken for an RTT";
}

}  // namespace
}  // namespace mrc::test
