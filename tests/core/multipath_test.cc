// Scope: a QP pair's multipath behaviour packet by packet (harness.h, two
// planes, 4 EVs and 2 spares per plane): an ECN echo skipping the EV, an
// ack timeout retiring it and resending off its plane, probes reviving it
// (and backing off when lost), a plane failing after its EVs time out and
// coming back after plane probes, the plane-status bitmap in acks, link
// state, last-hop trims, the path table, per-plane windows, the TX-room
// mask, and the QP configurations that are refused.
#include <gtest/gtest.h>
#include <set>

#include "harness.h"

namespace mrc::test {
namespace {

using wire::Opcode;

void mark_ce(Frame &f) {
    auto *ip = reinterpret_cast<wire::Ipv4Hdr *>(f.bytes.data() + sizeof(wire::EthHdr));
    ASSERT_TRUE(wire::mark_ce(*ip)) << "data is sent ECN-capable";
}

std::vector<Frame> on_plane(const std::vector<Frame> &fs, uint8_t plane) {
    std::vector<Frame> r;
    for (const auto &f : fs)
        if (f.plane == plane) r.push_back(f);
    return r;
}

EvState state_of(Harness &h, uint16_t ev) {
    const uint32_t i = h.a.qp->evs().find(ev);
    EXPECT_NE(i, kNoEv);
    return h.a.qp->evs().entry(i).state;
}

const uint64_t kRto = ack_timeout_ns(6);
const uint64_t kProbe = EvConfig{}.probe_interval_ns;

// Without tail-loss probes: what the timeout does, on its own.
QpConfig no_tail_probe() {
    QpConfig c = Harness::small_config();
    c.loss.tlp = false;
    return c;
}

// A 2 KiB write whose second packet is lost while the first is acked (the
// peer answers, nothing sent later arrives: only the timeout can tell):
// its EV retired, the resend delivered and acknowledged. Returns the lost
// packet. The harness must run without tail-loss probes.
Frame retire_one_ev(Harness &h) {
    EXPECT_EQ(h.write(2048), PostResult::kOk);
    auto d = h.drain(h.a);
    EXPECT_EQ(d.size(), 2u);
    h.deliver(h.b, d[0]);
    h.advance(Harness::small_config().ack_delay_ns + 1000);  // its (delayed) ack
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(kRto + 2000);
    h.deliver_all(h.b, data_frames(h.drain(h.a)));
    h.deliver_all(h.a, h.drain(h.b));
    return d.at(1);
}

// Answers every probe A sends, `rounds` times, one probe interval apart.
void answer_probes(Harness &h, int rounds) {
    for (int k = 0; k < rounds; ++k) {
        h.advance(kProbe + 1000);
        auto probes = only(h.drain(h.a), Opcode::kProbe);
        h.deliver_all(h.b, probes);
        h.deliver_all(h.a, only(h.drain(h.b), Opcode::kProbeReply));
    }
}

TEST(Multipath, AnEcnEchoSkipsTheEvForAWhile) {
    Harness h;
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 1u);
    mark_ce(d[0]);
    h.deliver(h.b, d[0]);
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_TRUE(acks[0].parse().sack->flags & wire::kAckEcnEcho);
    h.deliver(h.a, acks[0]);
    EXPECT_EQ(state_of(h, d[0].ev()), EvState::kSkip);
    EXPECT_EQ(h.a.qp->counters().ev_skips, 1u);
    ASSERT_EQ(h.write(16 * 1024, 8192, 2), PostResult::kOk);
    for (const auto &f : h.drain(h.a))
        EXPECT_NE(f.ev(), d[0].ev()) << "skipped while SKIP lasts";
    h.advance(EvConfig{}.skip_ns + 1000);
    ASSERT_EQ(h.write(16 * 1024, 32768, 3), PostResult::kOk);
    bool back = false;
    for (const auto &f : h.drain(h.a))
        back |= f.ev() == d[0].ev();
    EXPECT_TRUE(back) << "used again once SKIP ran out";
}

TEST(Multipath, AnAckTimeoutWhileThePeerAnswersRetiresTheEvAndResendsOffItsPlane) {
    Harness h(no_tail_probe());
    ASSERT_EQ(h.write(2048), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 2u);
    h.deliver(h.b, d[0]);  // d[1] is lost without a trace; d[0]'s (delayed) ack comes back
    h.advance(Harness::small_config().ack_delay_ns + 1000);
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(kRto + 2000);
    auto r = data_frames(h.drain(h.a));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].psn(), d[1].psn());
    EXPECT_NE(r[0].plane, d[1].plane) << "off the plane it timed out on";
    EXPECT_EQ(state_of(h, d[1].ev()), EvState::kAssumedBad);
    const auto &c = h.a.qp->counters();
    EXPECT_EQ(c.ev_retired, 1u);
    EXPECT_EQ(c.retx_off_plane, 1u);
    EXPECT_EQ(c.rto_silent, 0u);
    EXPECT_EQ(h.a.ep->ev_gauges().assumed_bad[d[1].plane], 1);
    EXPECT_EQ(h.a.ep->plane_counters()[d[1].plane].ack_timeouts, 1u);
    EXPECT_EQ(h.a.ep->plane_counters()[d[1].plane].lost_pkts, 1u);
    h.deliver(h.b, r[0]);
    h.deliver_all(h.a, h.drain(h.b));
    ASSERT_EQ(h.completions().size(), 1u);
    EXPECT_EQ(h.a.qp->usable_planes(), 0b11) << "one dead path is not a dead plane";
}

TEST(Multipath, ATimeoutWhileThePeerIsSilentBlamesNoPath) {
    Harness h(no_tail_probe());
    ASSERT_EQ(h.write(4096), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 4u);
    // Nothing comes back at all (a stalled or dead peer): one resend per
    // timeout, no EV retired, no plane left.
    h.advance(kRto + 2000);
    EXPECT_EQ(data_frames(h.drain(h.a)).size(), 1u);
    h.advance(2 * kRto + 2000);
    EXPECT_EQ(data_frames(h.drain(h.a)).size(), 1u);
    const auto &c = h.a.qp->counters();
    EXPECT_EQ(c.ack_timeouts, 2u);
    EXPECT_EQ(c.rto_silent, 2u);
    EXPECT_EQ(c.ev_retired, 0u);
    EXPECT_EQ(h.a.qp->usable_planes(), 0b11);
    for (const auto &f : d)
        EXPECT_EQ(state_of(h, f.ev()), EvState::kGood);
}

TEST(Multipath, APacketLostFromAcksSkipsItsEvOnceAndRetiresItTheSecondTime) {
    Harness h;
    ASSERT_EQ(h.write(8 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 8u);  // 8 EVs: each carried one
    h.advance(3000);
    for (size_t i = 1; i < d.size(); ++i)
        h.deliver(h.b, d[i]);  // d[0] lost
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(h.a.qp->reorder_window_ns(d[0].plane, h.now_ns) + 2000);
    auto r = data_frames(h.drain(h.a));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(state_of(h, d[0].ev()), EvState::kSkip) << "one loss: random loss costs a detour";
    EXPECT_EQ(h.a.qp->counters().ev_skips, 1u);
    EXPECT_EQ(h.a.qp->counters().ev_retired, 0u);
    h.deliver(h.b, r[0]);
    h.advance(3000);
    h.deliver_all(h.a, h.drain(h.b));
    ASSERT_EQ(h.completions().size(), 1u);
    // Once the skip is over, the EV is used again; a second loss on it with
    // no delivery in between retires it.
    h.advance(EvConfig{}.skip_ns * EvConfig{}.trim_skip_factor + 1000);
    ASSERT_EQ(h.write(8 * 1024, 65536, 2), PostResult::kOk);
    d = h.drain(h.a);
    size_t lost = d.size();
    for (size_t i = 0; i < d.size(); ++i)
        if (h.a.qp->evs().entry(h.a.qp->evs().find(d[i].ev())).loss_strikes == 1) lost = i;
    ASSERT_LT(lost, d.size()) << "the EV that lost a packet carries one again";
    h.advance(3000);
    for (size_t i = 0; i < d.size(); ++i)
        if (i != lost) h.deliver(h.b, d[i]);
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(h.a.qp->reorder_window_ns(d[lost].plane, h.now_ns) + 2000);
    EXPECT_EQ(data_frames(h.drain(h.a)).size(), 1u);
    EXPECT_EQ(state_of(h, d[lost].ev()), EvState::kAssumedBad);
    EXPECT_EQ(h.a.qp->counters().ev_retired, 1u);
}

TEST(Multipath, ProbeRepliesInARowReviveTheEv) {
    Harness h(no_tail_probe());
    const Frame first = retire_one_ev(h);
    const std::vector<Frame> d = {first};
    ASSERT_EQ(state_of(h, d[0].ev()), EvState::kAssumedBad);
    for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(state_of(h, d[0].ev()), EvState::kAssumedBad) << k;
        h.advance(kProbe + 1000);
        auto probes = only(h.drain(h.a), Opcode::kProbe);
        ASSERT_EQ(probes.size(), 1u) << "round " << k;
        EXPECT_EQ(probes[0].ev(), d[0].ev()) << "the probe goes on the retired EV";
        EXPECT_EQ(probes[0].plane, d[0].plane);
        h.deliver(h.b, probes[0]);
        auto replies = h.drain(h.b);
        // B knows none of its reverse EVs GOOD yet: the answer goes out on
        // every one of them (A probes because it hears nothing).
        ASSERT_EQ(replies.size(), EvSet::kReverseEvsPerPlane);
        std::set<uint16_t> evs;
        for (const auto &r : replies) {
            EXPECT_EQ(r.opcode(), Opcode::kProbeReply);
            EXPECT_EQ(r.plane, d[0].plane) << "back on the plane it came in on";
            evs.insert(r.ev());
        }
        EXPECT_EQ(evs.size(), replies.size()) << "each on another reverse EV";
        h.deliver_all(h.a, replies);
    }
    EXPECT_EQ(state_of(h, d[0].ev()), EvState::kGood);
    EXPECT_EQ(h.a.qp->counters().ev_revived, 1u);
    EXPECT_EQ(h.a.qp->counters().rx_probe_replies, 3u * EvSet::kReverseEvsPerPlane);
    EXPECT_EQ(h.a.qp->counters().rx_probe_replies_stale, 3u * (EvSet::kReverseEvsPerPlane - 1));
    h.advance(10 * kProbe);
    EXPECT_TRUE(only(h.drain(h.a), Opcode::kProbe).empty()) << "nothing left to probe";
    // A reply nobody asked for is counted and ignored.
    wire::ProbeFields f;
    f.reply = true;
    f.dst_qpn = h.a.qp->qpn();
    f.probe_id = 12345;
    f.ev = d[0].ev();
    Frame fake;
    fake.bytes.resize(wire::kMaxHdrBytes);
    wire::MrcAddr ad;
    ad.src_ip = LoopbackPair::b_ip(0);
    ad.dst_ip = LoopbackPair::a_ip(0);
    fake.bytes.resize(wire::write_probe(fake.bytes.data(), ad, 5000, f));
    h.deliver(h.a, fake);
    EXPECT_EQ(h.a.qp->counters().rx_probe_replies_stale, 3u * (EvSet::kReverseEvsPerPlane - 1) + 1);
}

TEST(Multipath, LostProbesResetTheCountAndBackOff) {
    Harness h(no_tail_probe());
    const Frame first = retire_one_ev(h);
    const std::vector<Frame> d = {first};
    h.advance(kProbe + 1000);
    ASSERT_EQ(only(h.drain(h.a), Opcode::kProbe).size(), 1u);  // dropped
    h.advance(kRto + 2000);  // the probe timeout is the ack timeout
    EXPECT_EQ(h.a.qp->counters().probes_lost, 1u);
    EXPECT_TRUE(only(h.drain(h.a), Opcode::kProbe).empty());
    h.advance(kProbe + 1000);
    EXPECT_TRUE(only(h.drain(h.a), Opcode::kProbe).empty()) << "backed off: twice the wait";
    h.advance(kProbe);
    EXPECT_EQ(only(h.drain(h.a), Opcode::kProbe).size(), 1u);
}

TEST(Multipath, APlaneWhoseEvsAllTimeOutIsLeftAndProbedBack) {
    Harness h;
    ASSERT_EQ(h.write(16 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 16u);
    // Plane 1 is dead: only plane 0's packets arrive, and their acks return.
    h.deliver_all(h.b, on_plane(d, 0));
    h.deliver_all(h.a, h.drain(h.b));
    ASSERT_EQ(h.a.qp->usable_planes(), 0b11);
    h.advance(kRto + 2000);
    EXPECT_EQ(h.a.qp->usable_planes(), 0b01);
    EXPECT_TRUE(h.a.qp->plane_down_reasons(1) & Qp::kPlaneFailed);
    EXPECT_EQ(h.a.qp->counters().plane_failovers, 1u);
    auto r = data_frames(h.drain(h.a));
    EXPECT_EQ(r.size(), on_plane(d, 1).size()) << "every lost packet resent";
    for (const auto &f : r)
        EXPECT_EQ(f.plane, 0) << "on the plane that works";
    h.deliver_all(h.b, r);
    h.deliver_all(h.a, h.drain(h.b));
    ASSERT_EQ(h.write(8 * 1024, 65536, 2), PostResult::kOk);
    for (const auto &f : data_frames(h.drain(h.a)))
        EXPECT_EQ(f.plane, 0) << "new data avoids the failed plane";
    // Plane probes, on the failed plane's EVs in turn; three replies bring it back.
    answer_probes(h, 3);
    EXPECT_EQ(h.a.qp->usable_planes(), 0b11);
    EXPECT_EQ(h.a.qp->counters().plane_recoveries, 1u);
}

// The plane this QP found failed is the only one left (the other's link
// went down): new data goes to it rather than nowhere, and the EV set
// steers it. (With most of a plane's EVs on dead paths its probes are
// never all answered, so waiting for them could wait for ever.)
TEST(Multipath, AFailedPlaneStillCarriesNewDataWhenNothingElseIsLeft) {
    Harness h;
    ASSERT_EQ(h.write(16 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    h.deliver_all(h.b, on_plane(d, 0));
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(kRto + 2000);
    ASSERT_TRUE(h.a.qp->plane_down_reasons(1) & Qp::kPlaneFailed);
    h.deliver_all(h.b, data_frames(h.drain(h.a)));
    h.deliver_all(h.a, h.drain(h.b));
    h.a.ep->set_plane_up(0, false);  // and now plane 0's link goes
    h.advance(1000);
    ASSERT_EQ(h.write(4 * 1024, 65536, 2), PostResult::kOk);
    const auto f = data_frames(h.drain(h.a));
    EXPECT_EQ(h.a.qp->usable_planes(), 0);
    EXPECT_TRUE(h.a.qp->plane_down_reasons(0) & Qp::kPlaneLink);
    ASSERT_EQ(f.size(), 4u) << "sent, not held until a probe is answered";
    for (const auto &x : f)
        EXPECT_EQ(x.plane, 1);
    h.deliver_all(h.b, f);
    h.deliver_all(h.a, h.drain(h.b));
    EXPECT_EQ(h.completions().size(), 2u);
}

TEST(Multipath, ThePeersPlaneStatusInAcksStopsUseOfThatPlane) {
    Harness h;
    h.b.ep->set_plane_up(1, false);  // B's port on plane 1 goes down
    ASSERT_EQ(h.write(2048), PostResult::kOk);
    auto d = h.drain(h.a);
    h.deliver_all(h.b, d);
    auto acks = only(h.drain(h.b), Opcode::kSack);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].parse().sack->plane_status, 0b01);
    EXPECT_EQ(acks[0].plane, 0) << "B sends nothing on its dead port";
    h.deliver(h.a, acks[0]);
    EXPECT_TRUE(h.a.qp->plane_down_reasons(1) & Qp::kPlanePeer);
    EXPECT_EQ(h.a.qp->usable_planes(), 0b01);
    ASSERT_EQ(h.write(8 * 1024, 8192, 2), PostResult::kOk);
    auto more = h.drain(h.a);
    for (const auto &f : data_frames(more))
        EXPECT_EQ(f.plane, 0);
    EXPECT_TRUE(only(more, Opcode::kProbe).empty()) << "no probing a plane the peer says is down";
    // B's port comes back: its next ack says so; A verifies with probes first.
    h.b.ep->set_plane_up(1, true);
    h.deliver_all(h.b, more);
    h.deliver_all(h.a, only(h.drain(h.b), Opcode::kSack));
    EXPECT_EQ(h.a.qp->plane_down_reasons(1), Qp::kPlaneVerify);
    answer_probes(h, 3);
    EXPECT_EQ(h.a.qp->usable_planes(), 0b11);
}

TEST(Multipath, ALocalLinkDownIsLeftAtOnceAndAdvertised) {
    Harness h;
    h.a.ep->set_plane_up(0, false);
    ASSERT_EQ(h.write(8 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 8u);
    for (const auto &f : d)
        EXPECT_EQ(f.plane, 1);
    EXPECT_EQ(h.a.qp->counters().plane_failovers, 1u);
    // What A says in its own acks (as B's responder): plane 0 down.
    ASSERT_EQ(
        h.b.qp->post_write(WriteRequest{
            1, h.src.data(), 1024, reinterpret_cast<uint64_t>(h.a.mem.data()), h.a.rkey, false, 0}),
        PostResult::kOk);
    h.deliver_all(h.a, h.drain(h.b));
    auto acks = only(h.drain(h.a), Opcode::kSack);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].parse().sack->plane_status, 0b10);
    EXPECT_EQ(acks[0].plane, 1);
    h.deliver_all(h.b, acks);
    EXPECT_TRUE(h.b.qp->plane_down_reasons(0) & Qp::kPlanePeer);
}

TEST(Multipath, ALastHopTrimIsNotThePathsFault) {
    Harness h;
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    auto d = h.drain(h.a);
    auto t = d[0];
    t.bytes.resize(wire::trim_data_packet(t.bytes.data(), uint32_t(t.bytes.size()), true));
    h.deliver(h.b, t);
    auto n = h.drain(h.b);
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(wire::NackReason(n[0].parse().nack->reason), wire::NackReason::kTrimmedLastHop);
    h.deliver(h.a, n[0]);
    EXPECT_EQ(state_of(h, d[0].ev()), EvState::kGood);
    EXPECT_EQ(h.a.ep->plane_counters()[d[0].plane].rx_lasthop_trims, 1u);
    // The resend, trimmed in the fabric this time: its EV is to blame.
    auto r = data_frames(h.drain(h.a));
    ASSERT_EQ(r.size(), 1u);
    r[0].bytes.resize(
        wire::trim_data_packet(r[0].bytes.data(), uint32_t(r[0].bytes.size()), false));
    h.deliver(h.b, r[0]);
    h.deliver_all(h.a, h.drain(h.b));
    EXPECT_EQ(state_of(h, r[0].ev()), EvState::kSkip);
    EXPECT_EQ(h.a.qp->counters().ev_skips, 1u);
}

TEST(Multipath, ThePathTableDeniesPlanesAndEvs) {
    Harness h;
    PathTable t;
    t.generation = 1;
    t.denied_mask = 0b10;
    h.a.ep->apply_path_table(t, h.now_ns);
    ASSERT_EQ(h.write(8 * 1024), PostResult::kOk);
    for (const auto &f : h.drain(h.a))
        EXPECT_EQ(f.plane, 0);
    EXPECT_TRUE(h.a.qp->plane_down_reasons(1) & Qp::kPlaneDenied);
    // Allow the plane, deny one EV of plane 0.
    const EvSet &evs = h.a.qp->evs();
    const uint16_t denied_ev = evs.entry(evs.active_entry(0, 1)).ev;
    t.generation = 2;
    t.denied_mask = 0;
    t.denied_evs = {EvDenial{h.a.qp->qpn(), denied_ev}};
    h.a.ep->apply_path_table(t, h.now_ns);
    EXPECT_EQ(state_of(h, denied_ev), EvState::kDenied);
    answer_probes(h, 1);
    EXPECT_EQ(h.a.qp->plane_down_reasons(1), Qp::kPlaneVerify) << "probed before use";
    answer_probes(h, 2);
    EXPECT_EQ(h.a.qp->usable_planes(), 0b11);
    ASSERT_EQ(h.write(32 * 1024, 16384, 2), PostResult::kOk);
    uint32_t per_plane[2] = {};
    for (const auto &f : data_frames(h.drain(h.a))) {
        EXPECT_NE(f.ev(), denied_ev);
        ++per_plane[f.plane];
    }
    EXPECT_GT(per_plane[1], 0u) << "plane 1 is back";
    t.generation = 3;
    t.denied_evs.clear();
    h.a.ep->apply_path_table(t, h.now_ns);
    EXPECT_EQ(state_of(h, denied_ev), EvState::kAssumedBad) << "allowed: probes decide";
}

TEST(Multipath, EachPlaneHasAWindowOfItsOwn) {
    QpConfig c = Harness::small_config();
    c.cc.fixed_window_bytes = 4 * 1024;  // 2 KiB per plane: two packets each
    Harness h(c);
    ASSERT_EQ(h.write(16 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 4u);
    EXPECT_EQ(on_plane(d, 0).size(), 2u);
    EXPECT_EQ(on_plane(d, 1).size(), 2u);
    EXPECT_EQ(h.a.qp->window_bytes(), 4u * 1024);
    EXPECT_EQ(h.a.qp->plane_inflight_bytes(0), 2048u);
    // Acks for plane 0's packets open plane 0 only.
    h.deliver_all(h.b, on_plane(d, 0));
    h.advance(6000);  // past the delayed ack
    h.deliver_all(h.a, h.drain(h.b));
    auto more = h.drain(h.a);
    ASSERT_EQ(more.size(), 2u);
    EXPECT_EQ(on_plane(more, 0).size(), 2u);
}

TEST(Multipath, NewDataGoesOnlyToPlanesWithTxRoom) {
    Harness h;
    ASSERT_EQ(h.write(8 * 1024), PostResult::kOk);
    uint8_t hdrs[16][wire::kMaxHdrBytes];
    TxPacket tx[16];
    for (int i = 0; i < 16; ++i)
        tx[i].hdr = hdrs[i];
    EXPECT_EQ(h.a.ep->poll_tx(tx, 16, h.now_ns, 0), 0u) << "no room anywhere: nothing";
    const uint32_t n = h.a.ep->poll_tx(tx, 16, h.now_ns, 0b10);
    ASSERT_EQ(n, 8u);
    for (uint32_t i = 0; i < n; ++i)
        EXPECT_EQ(tx[i].plane, 1);
}

TEST(Multipath, QpConfigurationsThatCannotWorkAreRefused) {
    EndpointConfig ec;
    ec.planes = 4;
    Endpoint ep(ec);
    auto expect_refused = [&](const QpConfig &c, const char *words) {
        auto q = ep.create_qp(c);
        ASSERT_FALSE(q.ok()) << words;
        EXPECT_NE(q.error().message.find(words), std::string::npos) << q.error().message;
    };
    QpConfig c;
    c.ev.evs = 2;
    c.ev.min_active = 1;
    expect_refused(c, "some plane would have no EV");
    c = QpConfig{};
    c.ev.evs = 16;
    c.ev.min_active = 17;
    expect_refused(c, "floor");
    c = QpConfig{};
    c.cc.algo = CcAlgo::kFixed;
    c.cc.fixed_window_bytes = 8192;  // 2 KiB per plane, MTU 4 KiB
    expect_refused(c, "smaller than one MTU");
    c = QpConfig{};
    c.cc.nscc.line_rate_gbps = 1;
    c.cc.nscc.base_rtt_ns = 2000;
    expect_refused(c, "window ceiling");
    // The peer's plane count matters too: 64 EVs do not split over 3 planes.
    auto q = ep.create_qp(QpConfig{});
    ASSERT_TRUE(q.ok());
    ASSERT_TRUE((*q)->to_init(1).ok());
    QpPeer peer;
    peer.dst_qpn = 5;
    peer.planes = 3;
    auto r = (*q)->to_rtr(peer, Psn(0));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("split evenly"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace mrc::test
