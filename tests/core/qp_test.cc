// Scope: one QP pair driven packet by packet (tests/core/harness.h): the
// exact SACKs and NACKs the responder emits (cumulative PSN, bitmap bits,
// offset, echoed EV, flags), the requester's reaction (what it resends, on
// which EV, when), PSN wrap-around, and the QP state machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "harness.h"

namespace mrc::test {
namespace {

using wire::Opcode;

wire::SackHdr sack_of(const Frame &f) {
    return *f.parse().sack;
}
wire::NackHdr nack_of(const Frame &f) {
    return *f.parse().nack;
}

TEST(Qp, InOrderMessageIsAckedOnceAtItsEndAndCompletes) {
    Harness h;
    ASSERT_EQ(h.write(4096), PostResult::kOk);
    auto data = h.drain(h.a);
    ASSERT_EQ(data.size(), 4u);  // 4 KiB at MTU 1 KiB
    for (uint32_t i = 0; i < 4; ++i) {
        EXPECT_EQ(data[i].opcode(), Opcode::kWrite);
        EXPECT_EQ(data[i].psn(), Psn(1000 + i));
    }
    EXPECT_TRUE(data[0].flags() & wire::kFlagFirst);
    EXPECT_TRUE(data[3].flags() & wire::kFlagLast);
    EXPECT_TRUE(data[3].flags() & wire::kFlagAckReq);
    h.deliver_all(h.b, data);
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u) << "one ack for the message, at its last packet";
    const auto p = acks[0].parse();
    EXPECT_EQ(p.opcode, Opcode::kSack);
    EXPECT_EQ(p.psn, Psn(1004)) << "cumulative PSN: next expected";
    EXPECT_EQ(p.sack->bitmap.get(), 0u);
    EXPECT_EQ(p.sack->ev_echo.get(), data[3].ev());
    EXPECT_EQ(p.sack->trigger_psn.get(), 1003u);
    EXPECT_EQ(acks[0].plane, data[3].plane)
        << "the ack returns on the plane the trigger came in on";
    EXPECT_TRUE(h.placed(4096));
    EXPECT_TRUE(h.completions().empty()) << "nothing completes before the ack";
    h.deliver(h.a, acks[0]);
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    EXPECT_EQ(c[0].bytes, 4096u);
    EXPECT_EQ(h.a.qp->inflight_bytes(), 0u);
}

TEST(Qp, SprayingBalancesPlanesAndUsesManyEvs) {
    Harness h;
    ASSERT_EQ(h.write(64 * 1024), PostResult::kOk);
    auto data = h.drain(h.a);
    ASSERT_EQ(data.size(), 64u);
    std::set<uint16_t> evs;
    uint32_t per_plane[2] = {0, 0};
    for (size_t i = 0; i < data.size(); ++i) {
        evs.insert(data[i].ev());
        ++per_plane[data[i].plane];
        if (i >= 2) {
            EXPECT_FALSE(data[i].plane == data[i - 1].plane && data[i].plane == data[i - 2].plane)
                << "rounds of one packet per plane: never three in a row on one";
        }
    }
    EXPECT_EQ(evs.size(), 8u) << "every EV of the set is used";
    EXPECT_NEAR(per_plane[0], 32u, 1);
    EXPECT_NEAR(per_plane[1], 32u, 1);
}

TEST(Qp, GapTriggersAnImmediateSackWithTheRightBits) {
    Harness h;
    ASSERT_EQ(h.write(4096), PostResult::kOk);
    auto d = h.drain(h.a);
    h.deliver(h.b, d[0]);
    EXPECT_TRUE(h.drain(h.b).empty()) << "in order, not last: the ack waits";
    h.deliver(h.b, d[2]);  // 1 is missing: a new gap
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    const auto s = sack_of(acks[0]);
    EXPECT_EQ(acks[0].psn(), Psn(1001));
    EXPECT_EQ(s.sack_offset.get(), 0u) << "arrivals within 64 of cum: the bitmap starts there";
    EXPECT_EQ(s.bitmap.get(), 1ull << 1) << "bit i covers cum + offset + i: PSN 1002";
    EXPECT_EQ(s.ev_echo.get(), d[2].ev());
    // Fills the hole after a later PSN arrived: acked at once (the
    // requester's loss detection is waiting on it), cum jumps to 1003.
    h.deliver(h.b, d[1]);
    acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].psn(), Psn(1003));
    EXPECT_EQ(sack_of(acks[0]).trigger_psn.get(), 1001u);
    h.deliver(h.b, d[3]);
    acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].psn(), Psn(1004));
    EXPECT_EQ(sack_of(acks[0]).bitmap.get(), 0u);
    EXPECT_TRUE(h.placed(4096));
}

TEST(Qp, SackOffsetMovesTheBitmapToFarPsns) {
    Harness h;
    ASSERT_EQ(h.write(200 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 200u);
    h.deliver(h.b, d[100]);  // PSN 1100 with 1000..1099 missing
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    auto s = sack_of(acks[0]);
    EXPECT_EQ(acks[0].psn(), Psn(1000));
    EXPECT_EQ(s.sack_offset.get(), 37u)
        << "the bitmap covers the 64 PSNs up to the highest arrival";
    EXPECT_EQ(s.bitmap.get(), 1ull << 63);
    // The requester takes exactly that packet as acknowledged.
    h.deliver(h.a, acks[0]);
    EXPECT_EQ(h.a.qp->counters().sacked_pkts, 1u);
    EXPECT_EQ(h.a.qp->counters().acked_pkts, 0u);
    EXPECT_EQ(h.a.qp->send_una(), Psn(1000));
    // A later arrival far above: its own span, PSN 1100 no longer in it.
    h.deliver(h.b, d[190]);
    acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    s = sack_of(acks[0]);
    EXPECT_EQ(s.sack_offset.get(), 127u);
    EXPECT_EQ(s.bitmap.get(), 1ull << 63);
    // An arrival below that span (a hole filled late) gets a SACK that
    // starts at it; PSN 1100, reported before, is in its bitmap too, and
    // nothing already reported makes for a SACK of its own.
    h.deliver(h.b, d[50]);
    acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    s = sack_of(acks[0]);
    EXPECT_EQ(s.sack_offset.get(), 50u);
    EXPECT_EQ(s.bitmap.get(), 1ull | (1ull << 50));
    h.deliver(h.a, acks[0]);
    EXPECT_EQ(h.a.qp->counters().sacked_pkts, 2u) << "1050; 1100 counts once";
}

TEST(Qp, DuplicateIsReackedAndNotWrittenTwice) {
    Harness h;
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 1u);
    h.deliver(h.b, d[0]);
    auto first = h.drain(h.b);
    ASSERT_EQ(first.size(), 1u);
    std::fill(h.b.mem.begin(), h.b.mem.begin() + 1024, 0xee);  // would show a second write
    h.deliver(h.b, d[0]);
    // The last ack was evidently lost: this one goes out on every reverse
    // EV of the plane, in case the one it took is on a dead path.
    auto again = h.drain(h.b);
    ASSERT_EQ(again.size(), EvSet::kReverseEvsPerPlane);
    std::set<uint16_t> reverse;
    for (const auto &f : again) {
        const auto s = sack_of(f);
        EXPECT_EQ(f.psn(), Psn(1001));
        EXPECT_TRUE(s.flags & wire::kAckDuplicate);
        EXPECT_EQ(f.plane, d[0].plane);
        reverse.insert(f.ev());
    }
    EXPECT_EQ(reverse.size(), EvSet::kReverseEvsPerPlane);
    EXPECT_NE(again[0].ev(), first[0].ev()) << "the ack itself avoids the reverse EV that lost one";
    const uint8_t pl = d[0].plane;
    uint32_t suspect = 0;
    for (uint32_t k = 0; k < EvSet::kReverseEvsPerPlane; ++k)
        if (h.b.qp->evs().reverse(pl, k).state == RevState::kSuspect) {
            ++suspect;
            EXPECT_EQ(h.b.qp->evs().reverse_ev(pl, k), first[0].ev());
        }
    EXPECT_EQ(suspect, 1u) << "the lost ack's reverse EV is SUSPECT";
    EXPECT_EQ(h.b.qp->counters().tx_ack_copies, EvSet::kReverseEvsPerPlane - 1);
    EXPECT_EQ(h.b.qp->counters().rx_duplicates, 1u);
    EXPECT_EQ(h.b.qp->counters().rx_data_pkts, 1u);
    EXPECT_EQ(h.b.mem[0], 0xee) << "a duplicate must not be placed again";
}

TEST(Qp, TrimmedPacketIsNackedAndResentAtOnceOnAnotherEv) {
    Harness h;
    ASSERT_EQ(h.write(2048), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 2u);
    Frame t = d[0];
    const uint32_t l = wire::trim_data_packet(t.bytes.data(), uint32_t(t.bytes.size()), false);
    ASSERT_GT(l, 0u);
    t.bytes.resize(l);
    h.deliver(h.b, t);
    auto n = h.drain(h.b);
    ASSERT_EQ(n.size(), 1u);
    ASSERT_EQ(n[0].opcode(), Opcode::kNack);
    const auto nh = nack_of(n[0]);
    EXPECT_EQ(n[0].psn(), Psn(1000));
    EXPECT_EQ(nh.reason, uint8_t(wire::NackReason::kTrimmed));
    EXPECT_EQ(nh.ev_echo.get(), d[0].ev());
    EXPECT_EQ(nh.cum_psn.get(), 1000u);
    EXPECT_EQ(h.b.qp->counters().rx_trimmed, 1u);
    h.deliver(h.a, n[0]);
    auto r = h.drain(h.a);  // no time passes: no timeout involved
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].psn(), Psn(1000));
    EXPECT_TRUE(r[0].flags() & wire::kFlagRetx);
    EXPECT_NE(r[0].ev(), d[0].ev()) << "a retransmission takes a different EV";
    EXPECT_EQ(h.a.qp->counters().retx_after_nack, 1u);
    h.deliver(h.b, r[0]);
    h.deliver(h.b, d[1]);
    h.deliver_all(h.a, h.drain(h.b));
    ASSERT_EQ(h.completions().size(), 1u);
    EXPECT_TRUE(h.placed(2048));
}

TEST(Qp, ALossFoundFromAcksResendsOnlyThatPsnOnAnotherEvWithoutATimer) {
    Harness h;
    ASSERT_EQ(h.write(4096), PostResult::kOk);
    auto d = h.drain(h.a);
    h.advance(3000);  // the packets' RTT
    h.deliver(h.b, d[0]);
    h.deliver(h.b, d[2]);
    h.deliver(h.b, d[3]);  // d[1] is lost without a trace
    h.deliver_all(h.a, h.drain(h.b));
    EXPECT_TRUE(h.drain(h.a).empty()) << "reordering alone never triggers a resend";
    // Later than its RTT and the reorder window allow, while packets sent
    // after it were acknowledged: lost. Long before the timeout (65.5 us).
    const Qp &q = *h.a.qp;
    const uint64_t due = 3000 + q.reorder_window_ns(d[1].plane, h.now_ns);
    EXPECT_LT(due, ack_timeout_ns(6) / 2);
    h.advance(due - 3000 - 1000);
    EXPECT_TRUE(h.drain(h.a).empty()) << "not before its RTT and reorder window have passed";
    h.advance(2000);  // within a tick after it
    auto r = h.drain(h.a);
    ASSERT_EQ(r.size(), 1u) << "selective: only the missing PSN";
    EXPECT_EQ(r[0].psn(), Psn(1001));
    EXPECT_NE(r[0].ev(), d[1].ev());
    EXPECT_NE(r[0].plane, d[1].plane) << "off the plane it was lost on";
    EXPECT_TRUE(r[0].flags() & wire::kFlagAckReq);
    EXPECT_EQ(q.counters().losses_detected, 1u);
    EXPECT_EQ(q.counters().ack_timeouts, 0u);
    h.deliver(h.b, r[0]);
    h.advance(3000);  // an RTT later: an ack of the resend itself, not of the lost packet
    h.deliver_all(h.a, h.drain(h.b));
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    EXPECT_TRUE(h.placed(4096));
    EXPECT_EQ(q.counters().retx_spurious, 0u);
}

TEST(Qp, WithNoAckAtAllTheTimeoutResendsTheOldestAndBacksOff) {
    Harness h;
    ASSERT_EQ(h.write(2048), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 2u);
    const uint64_t rto = ack_timeout_ns(6);
    h.advance(rto - 1000);
    EXPECT_TRUE(data_frames(h.drain(h.a)).empty()) << "not before the timeout";
    h.advance(2000);
    auto r = data_frames(h.drain(h.a));
    ASSERT_EQ(r.size(), 1u) << "one packet per timeout: the oldest, not a storm";
    EXPECT_EQ(r[0].psn(), Psn(1000));
    EXPECT_NE(r[0].ev(), d[0].ev());
    EXPECT_EQ(h.a.qp->counters().ack_timeouts, 1u);
    EXPECT_EQ(h.a.qp->counters().rto_silent, 1u) << "the peer said nothing: no path blamed";
    EXPECT_EQ(h.a.qp->counters().ev_retired, 0u);
    // Its ack shows what else is missing: found lost from acks, no timer.
    h.deliver(h.b, r[0]);
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(h.a.qp->reorder_window_ns(d[1].plane, h.now_ns) + 2000);
    r = data_frames(h.drain(h.a));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].psn(), Psn(1001));
    EXPECT_EQ(h.a.qp->counters().ack_timeouts, 1u);
    EXPECT_EQ(h.a.qp->counters().losses_detected, 1u);
    h.deliver(h.b, r[0]);
    h.deliver_all(h.a, h.drain(h.b));
    ASSERT_EQ(h.completions().size(), 1u);
    EXPECT_TRUE(h.placed(2048));
}

TEST(Qp, ExponentialBackoffThenRetryExceededErrorsTheQp) {
    Harness h;  // retry limit 3, t = 6
    ASSERT_EQ(h.write(1024, 0, 11), PostResult::kOk);
    ASSERT_EQ(h.write(1024, 4096, 12), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 2u);
    const uint64_t rto = ack_timeout_ns(6);
    uint64_t fired_at = h.now_ns;  // each wait starts when the timeout before it fired
    for (int attempt = 1; attempt <= 3; ++attempt) {
        const uint64_t deadline = fired_at + (rto << (attempt - 1));  // doubles after each timeout
        h.advance(deadline - 2000 - h.now_ns);
        EXPECT_TRUE(data_frames(h.drain(h.a)).empty()) << "attempt " << attempt << ": too early";
        h.advance(4000);  // timers fire within one 1 us tick of their deadline
        fired_at = h.now_ns;
        auto r = data_frames(h.drain(h.a));
        ASSERT_EQ(r.size(), 1u) << "attempt " << attempt;
        // The oldest outstanding transmission each time: the two take turns.
        EXPECT_EQ(r[0].psn(), Psn(attempt % 2 ? 1000 : 1001)) << "attempt " << attempt;
    }
    const uint64_t wait = (fired_at + (rto << 3)) - h.now_ns;
    h.advance(wait + 2000);
    EXPECT_EQ(h.a.qp->state(), QpState::kError) << "the 4th timeout in a row exceeds a limit of 3";
    EXPECT_EQ(h.a.qp->error_cause(), WcStatus::kRetryExceeded);
    auto c = h.completions();
    ASSERT_EQ(c.size(), 2u) << "every outstanding WR completes";
    EXPECT_EQ(c[0].wr_id, 11u);
    EXPECT_EQ(c[0].status, WcStatus::kRetryExceeded);
    EXPECT_EQ(c[1].wr_id, 12u);
    EXPECT_EQ(c[1].status, WcStatus::kFlushed);
    EXPECT_TRUE(h.drain(h.a).empty()) << "an errored QP sends nothing";
    EXPECT_EQ(h.write(10), PostResult::kNotReady);
}

TEST(Qp, AnAckBetweenTimeoutsStartsTheCountAgain) {
    Harness h;  // retry limit 3
    for (uint64_t i = 0; i < 4; ++i)
        ASSERT_EQ(h.write(1024, i * 1024, i), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 4u);
    const uint64_t rto = ack_timeout_ns(6);
    // Three timeouts in a row, then the first resend gets through.
    uint64_t fired_at = h.now_ns;
    std::vector<Frame> resent;
    for (int attempt = 1; attempt <= 3; ++attempt) {
        h.advance(fired_at + (rto << (attempt - 1)) + 2000 - h.now_ns);
        fired_at = h.now_ns;
        auto r = data_frames(h.drain(h.a));
        ASSERT_EQ(r.size(), 1u);
        resent.push_back(r[0]);
    }
    h.deliver(h.b, resent[0]);
    h.deliver_all(h.a, h.drain(h.b));
    // Progress: the timeout is back to one RTO, and the count starts again.
    h.advance(rto + 2000);
    EXPECT_EQ(h.a.qp->state(), QpState::kRts);
    EXPECT_GE(h.a.qp->counters().ack_timeouts, 4u);
    EXPECT_LE(h.now_ns - fired_at, 2 * rto + 4000);
}

TEST(Qp, LinearRetriesWaitTheSameEachTime) {
    QpConfig c = Harness::small_config();
    c.retry.mode = RetryMode::kLinear;
    c.retry.limit = 7;
    Harness h(c);
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    h.drain(h.a);
    const uint64_t rto = ack_timeout_ns(6);
    for (int attempt = 1; attempt <= 7; ++attempt) {  // the same wait every time
        h.advance(rto - 2000);
        EXPECT_TRUE(data_frames(h.drain(h.a)).empty()) << attempt;
        h.advance(4000);
        EXPECT_EQ(data_frames(h.drain(h.a)).size(), 1u) << attempt;
    }
    EXPECT_EQ(h.a.qp->state(), QpState::kRts);
    h.advance(rto + 2000);
    EXPECT_EQ(h.a.qp->state(), QpState::kError) << "the 8th timeout exceeds a limit of 7";
}

TEST(Qp, PsnWrapAroundWithOutOfOrderSack) {
    const Psn start(Psn::kMask - 1);  // 0xfffffe: the message crosses 2^24
    Harness h(Harness::small_config(), start, Psn(Psn::kMask));
    ASSERT_EQ(h.write(4096), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 4u);
    EXPECT_EQ(d[0].psn(), Psn(0xfffffe));
    EXPECT_EQ(d[1].psn(), Psn(0xffffff));
    EXPECT_EQ(d[2].psn(), Psn(0));
    EXPECT_EQ(d[3].psn(), Psn(1));
    h.deliver(h.b, d[0]);
    h.deliver(h.b, d[3]);  // gap across the wrap
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].psn(), Psn(0xffffff));
    EXPECT_EQ(sack_of(acks[0]).sack_offset.get(), 0u);
    EXPECT_EQ(sack_of(acks[0]).bitmap.get(), 1ull << 2) << "PSN 1 = cum + 2 across the wrap";
    h.deliver(h.a, acks[0]);
    EXPECT_EQ(h.a.qp->send_una(), Psn(0xffffff));
    EXPECT_EQ(h.a.qp->counters().sacked_pkts, 1u);
    h.deliver(h.b, d[2]);
    h.deliver(h.b, d[1]);  // fill the holes: acked at once (one ack for both)
    acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks.back().psn(), Psn(2));
    h.deliver_all(h.a, acks);
    ASSERT_EQ(h.completions().size(), 1u);
    EXPECT_EQ(h.a.qp->send_una(), Psn(2));
    EXPECT_TRUE(h.placed(4096));
}

TEST(Qp, ImmediatesComeOutInMessageOrder) {
    Harness h;
    ASSERT_EQ(h.write(2048, 0, 1, true, 0xaaaa), PostResult::kOk);
    ASSERT_EQ(h.write(2048, 8192, 2, true, 0xbbbb), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 4u);
    EXPECT_EQ(d[0].opcode(), Opcode::kWriteImm);
    EXPECT_TRUE(d[3].parse().imm != nullptr);
    EXPECT_TRUE(d[2].parse().imm == nullptr) << "only the last packet carries the immediate";
    h.deliver(h.b, d[2]);
    h.deliver(h.b, d[3]);  // message 2 complete before message 1
    EXPECT_TRUE(h.recv_completions().empty()) << "message 1 is not complete yet";
    h.deliver(h.b, d[1]);  // last packet of message 1, still missing its first
    EXPECT_TRUE(h.recv_completions().empty());
    h.deliver(h.b, d[0]);
    auto rc = h.recv_completions();
    ASSERT_EQ(rc.size(), 2u);
    EXPECT_EQ(rc[0].imm, 0xaaaau);
    EXPECT_EQ(rc[0].msn, 0u);
    EXPECT_EQ(rc[0].bytes, 2048u);
    EXPECT_EQ(rc[1].imm, 0xbbbbu);
    EXPECT_EQ(rc[1].msn, 1u);
    EXPECT_TRUE(h.placed(2048));
    EXPECT_TRUE(h.placed(2048, 8192, 2048));
}

TEST(Qp, TooManyPendingImmediatesAreRefusedWithNoResource) {
    QpConfig c = Harness::small_config();
    c.max_pending_imm = 1;
    Harness h(c);
    for (uint64_t i = 0; i < 3; ++i)
        ASSERT_EQ(h.write(1024, i * 1024, i, true, uint32_t(i)), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 3u);
    h.deliver(h.b, d[1]);  // held: message 0 missing
    h.drain(h.b);
    h.deliver(h.b, d[2]);  // a second pending immediate: over the limit
    auto n = only(h.drain(h.b), Opcode::kNack);
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(n[0].psn(), Psn(1002));
    EXPECT_EQ(nack_of(n[0]).reason, uint8_t(wire::NackReason::kNoResource));
    EXPECT_EQ(h.b.qp->counters().rx_no_resource, 1u);
    // The requester waits before resending, then succeeds once room is made.
    h.deliver(h.a, n[0]);
    EXPECT_TRUE(h.drain(h.a).empty()) << "NO_RESOURCE: not at once";
    // The in-order immediate is accepted even at the limit: it unblocks
    // the one held (refusing it would deadlock the QP).
    h.deliver(h.b, d[0]);
    EXPECT_EQ(h.recv_completions().size(), 2u);
    h.advance(c.no_resource_backoff_ns + 1000);
    auto r = h.drain(h.a);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].psn(), Psn(1002));
    h.deliver(h.b, r[0]);
    auto rc = h.recv_completions();
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].imm, 2u);
}

TEST(Qp, OutOfWindowPsnIsNacked) {
    Harness h;  // 256-PSN window
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    auto d = h.drain(h.a);
    Frame f = d[0];
    auto *base = reinterpret_cast<wire::BaseHdr *>(f.bytes.data() + wire::kEthIpv4UdpBytes);
    base->psn.set(1000 + 256);
    h.deliver(h.b, f);
    auto n = h.drain(h.b);
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(nack_of(n[0]).reason, uint8_t(wire::NackReason::kPsnOutOfWindow));
    EXPECT_EQ(h.b.qp->counters().rx_out_of_window, 1u);
    EXPECT_EQ(h.b.qp->counters().rx_data_pkts, 0u);
}

// Rewrites the RETH of a captured data frame.
Frame with_reth(Frame f, uint64_t addr, uint32_t rkey) {
    auto *r = reinterpret_cast<wire::Reth *>(f.bytes.data() + wire::kEthIpv4UdpBytes +
                                             sizeof(wire::BaseHdr) + sizeof(wire::DataHdr));
    r->remote_addr.set(addr);
    r->rkey.set(rkey);
    return f;
}

TEST(Qp, BadKeyOrAddressIsRefusedAndNothingIsWritten) {
    Harness h;
    ASSERT_EQ(h.write(1024, 0, 5), PostResult::kOk);
    auto d = h.drain(h.a);
    const uint64_t base = reinterpret_cast<uint64_t>(h.b.mem.data());
    const uint64_t end = base + h.b.mem.size();
    const std::vector<Frame> hostile = {
        with_reth(d[0], base, h.b.rkey ^ 0x100),     // another slot
        with_reth(d[0], base, h.b.rkey ^ 0x01),      // stale generation
        with_reth(d[0], end - 1000, h.b.rkey),       // runs past the end
        with_reth(d[0], base - 1, h.b.rkey),         // starts before
        with_reth(d[0], UINT64_MAX - 10, h.b.rkey),  // wraps the address space
    };
    const auto before = h.b.mem;
    for (const auto &f : hostile)
        h.deliver(h.b, f);
    EXPECT_EQ(h.b.mem, before) << "nothing outside a registered range is written";
    EXPECT_EQ(h.b.qp->counters().rx_access_errors, hostile.size());
    auto n = only(h.drain(h.b), Opcode::kNack);
    ASSERT_EQ(n.size(), hostile.size());
    for (const auto &f : n)
        EXPECT_EQ(nack_of(f).reason, uint8_t(wire::NackReason::kRemoteAccess));
    // The requester's QP errors with a remote access error.
    h.deliver(h.a, n[0]);
    EXPECT_EQ(h.a.qp->state(), QpState::kError);
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kRemoteAccessError);
    // The responder is unharmed: a good packet is still placed.
    EXPECT_EQ(h.b.qp->state(), QpState::kRts);
    h.deliver(h.b, d[0]);
    EXPECT_TRUE(h.placed(1024));
}

TEST(Qp, RegionOfAnotherProtectionDomainIsNotWritable) {
    Harness h;
    std::vector<uint8_t> other(4096, 0);
    const uint32_t k =
        h.b.ep->mrs().register_region(other.data(), other.size(), kAccessRemoteWrite, 99).value();
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    auto d = h.drain(h.a);
    h.deliver(h.b, with_reth(d[0], reinterpret_cast<uint64_t>(other.data()), k));
    EXPECT_EQ(h.b.qp->counters().rx_access_errors, 1u);
    EXPECT_EQ(other, std::vector<uint8_t>(4096, 0));
}

TEST(Qp, EcnMarkIsEchoedAtOnceWithItsEv) {
    Harness h;
    ASSERT_EQ(h.write(4096), PostResult::kOk);
    auto d = h.drain(h.a);
    Frame m = d[1];
    auto *ip = reinterpret_cast<wire::Ipv4Hdr *>(m.bytes.data() + sizeof(wire::EthHdr));
    EXPECT_EQ(ip->tos & wire::kEcnMask, wire::kEcnEct0) << "data is sent ECN-capable";
    ASSERT_TRUE(wire::mark_ce(*ip));
    h.deliver(h.b, d[0]);
    h.deliver(h.b, m);
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    const auto s = sack_of(acks[0]);
    EXPECT_TRUE(s.flags & wire::kAckEcnEcho);
    EXPECT_EQ(s.ev_echo.get(), d[1].ev());
    h.deliver(h.b, d[2]);  // an unmarked packet later does not inherit the mark
    h.deliver(h.b, d[3]);
    acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_FALSE(sack_of(acks[0]).flags & wire::kAckEcnEcho);
    h.deliver(h.a, acks[0]);
}

TEST(Qp, AckCoalescingByBytesAndByDelay) {
    QpConfig c = Harness::small_config();
    c.ack_every_bytes = 4096;
    Harness h(c);
    ASSERT_EQ(h.write(10 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    ASSERT_EQ(d.size(), 10u);
    std::vector<uint32_t> acked_after;
    for (uint32_t i = 0; i < 9; ++i) {
        h.deliver(h.b, d[i]);
        if (!h.drain(h.b).empty()) acked_after.push_back(i + 1);
    }
    EXPECT_EQ(acked_after, (std::vector<uint32_t>{4, 8})) << "an ack every 4 KiB";
    // The ninth packet's ack is pending: the delay timer sends it.
    EXPECT_TRUE(h.drain(h.b).empty());
    h.advance(c.ack_delay_ns + 1500);
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].psn(), Psn(1009));
}

TEST(Qp, InvalidSackIsIgnored) {
    Harness h;
    ASSERT_EQ(h.write(2048), PostResult::kOk);
    auto d = h.drain(h.a);
    h.deliver_all(h.b, d);
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    Frame bogus = acks[0];
    reinterpret_cast<wire::BaseHdr *>(bogus.bytes.data() + wire::kEthIpv4UdpBytes)
        ->psn.set(1000 + 500);
    h.deliver(h.a, bogus);  // acknowledges PSNs never sent
    EXPECT_EQ(h.a.qp->counters().rx_sacks_invalid, 1u);
    EXPECT_EQ(h.a.qp->send_una(), Psn(1000));
    EXPECT_TRUE(h.completions().empty());
}

TEST(Qp, SendWindowIsBoundedByThePeersWindow) {
    Harness h;  // 256-PSN window
    ASSERT_EQ(h.write(300 * 1024), PostResult::kOk);
    auto d = h.drain(h.a);
    EXPECT_EQ(d.size(), 256u) << "never beyond cum + window";
    h.deliver(h.b, d[0]);
    h.deliver(h.b, d[1]);
    EXPECT_TRUE(h.drain(h.b).empty()) << "in order and not asked for: the ack is delayed";
    h.advance(6000);
    auto acks = h.drain(h.b);
    ASSERT_EQ(acks.size(), 1u);
    h.deliver_all(h.a, acks);
    EXPECT_EQ(h.drain(h.a).size(), 2u) << "two acknowledged, two more may go";
}

TEST(Qp, PacketsForUnknownQpOrFromAStrangerAreCounted) {
    Harness h;
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    auto d = h.drain(h.a);
    Frame f = d[0];
    reinterpret_cast<wire::BaseHdr *>(f.bytes.data() + wire::kEthIpv4UdpBytes)->dst_qpn.set(3);
    h.deliver(h.b, f);
    EXPECT_EQ(h.b.ep->counters().rx_unknown_qpn, 1u);
    Frame g = d[0];
    reinterpret_cast<wire::Ipv4Hdr *>(g.bytes.data() + sizeof(wire::EthHdr))
        ->src.set(wire::ipv4(6, 6, 6, 6));
    h.deliver(h.b, g);
    EXPECT_EQ(h.b.ep->counters().rx_wrong_peer, 1u);
    Frame p = d[0];
    p.plane = 5;
    h.deliver(h.b, p);
    EXPECT_EQ(h.b.ep->counters().rx_bad_plane, 1u);
    EXPECT_EQ(h.b.qp->counters().rx_data_pkts, 0u);
}

TEST(Qp, EveryTruncationOfADataFrameIsDroppedSafely) {
    Harness h;
    ASSERT_EQ(h.write(1024), PostResult::kOk);
    auto d = h.drain(h.a);
    const auto before = h.b.mem;
    for (size_t len = 0; len < d[0].bytes.size(); ++len) {
        std::vector<uint8_t> cut(d[0].bytes.begin(), d[0].bytes.begin() + long(len));
        h.b.ep->on_packet(cut.data(), uint32_t(cut.size()), 0, h.now_ns);
    }
    EXPECT_EQ(h.b.mem, before);
    EXPECT_EQ(h.b.qp->counters().rx_data_pkts, 0u);
    const auto &c = h.b.ep->counters();
    EXPECT_EQ(c.rx_not_mrc + c.rx_malformed, d[0].bytes.size());
}

TEST(QpState, TransitionsFollowTheTable) {
    EndpointConfig ec;
    Endpoint ep(ec);
    Qp *q = ep.create_qp(QpConfig{}).value();
    EXPECT_EQ(q->state(), QpState::kReset);
    WriteRequest w;
    uint8_t buf[8] = {};
    w.local = buf;
    w.length = 8;
    EXPECT_EQ(q->post_write(w), PostResult::kNotReady);
    QpPeer peer;
    peer.dst_qpn = 9;
    EXPECT_FALSE(q->to_rtr(peer, Psn(0)).ok()) << "RESET -> RTR is not allowed";
    EXPECT_FALSE(q->to_rts(Psn(0)).ok());
    ASSERT_TRUE(q->to_init(1).ok());
    EXPECT_FALSE(q->to_init(1).ok());
    EXPECT_EQ(q->post_write(w), PostResult::kNotReady);
    ASSERT_TRUE(q->to_rtr(peer, Psn(0)).ok());
    EXPECT_EQ(q->state(), QpState::kRtr);
    EXPECT_EQ(q->post_write(w), PostResult::kNotReady);
    ASSERT_TRUE(q->to_rts(Psn(0)).ok());
    EXPECT_EQ(q->post_write(w), PostResult::kOk);
    w.length = 0;
    EXPECT_EQ(q->post_write(w), PostResult::kBadLength);
    q->to_error();
    EXPECT_EQ(q->state(), QpState::kError);
    SendCompletion c[4];
    ASSERT_EQ(q->poll_send_cq(c, 4), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kFlushed);
    EXPECT_FALSE(q->to_rts(Psn(0)).ok());
    q->reset();
    EXPECT_EQ(q->state(), QpState::kReset);
    EXPECT_TRUE(q->to_init(1).ok()) << "a reset QP can be used again";
}

TEST(QpState, BadConfigurationsAreRefused) {
    EndpointConfig ec;
    Endpoint ep(ec);
    QpConfig c;
    c.retry.mode = RetryMode::kLinear;
    c.retry.limit = 8;
    EXPECT_FALSE(ep.create_qp(c).ok());
    c = QpConfig{};
    c.retry.timeout_exp = 25;
    EXPECT_FALSE(ep.create_qp(c).ok());
    c = QpConfig{};
    c.mtu_payload_bytes = 0;
    EXPECT_FALSE(ep.create_qp(c).ok());
}

// Endpoints that share ports (one per dataplane worker) hand out QPNs from
// disjoint ranges; a packet reaches a QP only by the QPN peers were told.
TEST(Qp, QpnBaseSeparatesEndpointsOnTheWire) {
    LoopbackPair pair(Harness::small_config(), 2, Psn(0), Psn(0), 0x10000, 0x20000);
    EXPECT_EQ(pair.a->wire_qpn(*pair.qa), 0x10000u + pair.qa->qpn());
    EXPECT_EQ(pair.b->qp_by_wire(0x20000 + pair.qb->qpn()), pair.qb);
    EXPECT_EQ(pair.b->qp_by_wire(pair.qb->qpn()), nullptr) << "a local QPN is not a wire QPN";
    std::vector<uint8_t> src(4096, 0x5a), dst(4096, 0);
    const uint32_t rkey =
        pair.b->mrs()
            .register_region(dst.data(), dst.size(), kAccessRemoteWrite, LoopbackPair::kPd)
            .value();
    WriteRequest w;
    w.local = src.data();
    w.length = 4096;
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = rkey;
    ASSERT_EQ(pair.qa->post_write(w), PostResult::kOk);
    uint8_t hdrs[16][wire::kMaxHdrBytes];
    TxPacket tx[16];
    for (auto &t : tx)
        t.hdr = &hdrs[&t - tx][0];
    const uint32_t n = pair.a->poll_tx(tx, 16, 1000);
    ASSERT_EQ(n, 4u);
    std::vector<uint8_t> frame;
    for (uint32_t i = 0; i < n; ++i) {
        frame.assign(tx[i].hdr, tx[i].hdr + tx[i].hdr_len);
        frame.insert(frame.end(), tx[i].payload, tx[i].payload + tx[i].payload_len);
        pair.b->on_packet(frame.data(), uint32_t(frame.size()), tx[i].plane, 2000);
    }
    EXPECT_EQ(pair.qb->counters().rx_data_pkts, 4u);
    EXPECT_EQ(dst, src);
    // The same frame with the local QPN in it is refused as unknown.
    wire::MrcPacket p;
    ASSERT_EQ(wire::parse_mrc(frame.data(), uint32_t(frame.size()), wire::kDefaultMrcPort, &p),
              wire::MrcError::kOk);
    frame[wire::kEthIpv4UdpBytes + 5] = 0;
    frame[wire::kEthIpv4UdpBytes + 6] = 0;
    pair.b->on_packet(frame.data(), uint32_t(frame.size()), 0, 3000);
    EXPECT_EQ(pair.b->counters().rx_unknown_qpn, 1u);
}

// Per-QP queues start small and grow with what is outstanding (issue 18:
// state in proportion to the work, not to the configured maximum). Growth
// happens with packets in flight and across the PSN wrap; nothing queued
// may be lost or reordered by it.
TEST(QpGrowth, QueuesGrowWithWorkInFlightAcrossThePsnWrap) {
    const Psn start(Psn::kMask - 20);
    Harness h(Harness::small_config(), start, Psn(7));
    const size_t idle = h.a.qp->memory_bytes();
    // A first handful in flight (less than the initial tracking ring).
    for (uint64_t i = 0; i < 4; ++i)
        ASSERT_EQ(h.write(1024, i * 1024, 100 + i, false, 0, uint32_t(i * 1024)), PostResult::kOk);
    auto first = h.drain(h.a);
    ASSERT_EQ(first.size(), 4u);
    EXPECT_EQ(h.a.qp->counters().state_grows, 0u) << "4 packets fit the initial queues";
    // 196 more WRs while those are out: the send queue (16 -> 256) and the
    // tracking ring (16 -> 256) grow with 4 PSNs outstanding.
    for (uint64_t i = 4; i < 200; ++i)
        ASSERT_EQ(h.write(1024, i * 1024, 100 + i, false, 0, uint32_t(i * 1024)), PostResult::kOk)
            << "WR " << i;
    EXPECT_EQ(h.write(1024), PostResult::kOk) << "201 of 256";
    auto rest = h.drain(h.a);
    ASSERT_EQ(rest.size(), 197u);
    EXPECT_GT(h.a.qp->counters().state_grows, 0u);
    EXPECT_GT(h.a.qp->memory_bytes(), idle);
    // Deliver out of order, one lost: the responder sees a gap, the
    // requester resends only that PSN, from the grown ring.
    std::vector<Frame> all = first;
    all.insert(all.end(), rest.begin(), rest.end());
    const Frame lost = all[2];
    all.erase(all.begin() + 2);
    std::reverse(all.begin() + 100, all.end());
    h.deliver_all(h.b, all);
    h.deliver_all(h.a, h.drain(h.b));
    h.advance(200'000);  // the resend, by loss detection or the timer
    auto resent = data_frames(h.drain(h.a));
    ASSERT_EQ(resent.size(), 1u);
    EXPECT_EQ(resent[0].psn(), lost.psn());
    h.deliver_all(h.b, resent);
    h.deliver_all(h.a, h.drain(h.b));
    EXPECT_TRUE(h.placed(200 * 1024));
    std::vector<SendCompletion> c;
    for (auto v = h.completions(); !v.empty(); v = h.completions())
        c.insert(c.end(), v.begin(), v.end());
    ASSERT_EQ(c.size(), 201u);
    for (uint64_t i = 0; i < 200; ++i) {
        EXPECT_EQ(c[i].wr_id, 100 + i) << "completions in posting order";
        EXPECT_EQ(c[i].status, WcStatus::kSuccess);
    }
    EXPECT_EQ(h.a.qp->inflight_bytes(), 0u);
}

TEST(QpGrowth, SendQueueStopsAtItsBound) {
    QpConfig cfg = Harness::small_config();
    cfg.max_send_wr = 40;  // rounded up to 64
    Harness h(cfg);
    for (uint32_t i = 0; i < 64; ++i)
        ASSERT_EQ(h.write(64, i * 64, i), PostResult::kOk) << i;
    EXPECT_EQ(h.write(64), PostResult::kQueueFull);
}

TEST(QpGrowth, ImmediatesTableAndReceiveQueueAreMadeOnFirstUse) {
    Harness h;
    const size_t before = h.b.qp->memory_bytes();
    // 40 immediates with nobody polling: the receive queue grows (16 -> 64).
    for (uint32_t i = 0; i < 40; ++i)
        ASSERT_EQ(h.write(512, i * 512, i, true, 1000 + i), PostResult::kOk);
    h.deliver_all(h.b, h.drain(h.a));
    EXPECT_GT(h.b.qp->memory_bytes(), before);
    EXPECT_GT(h.b.qp->counters().state_grows, 0u);
    std::vector<RecvCompletion> r;
    for (auto v = h.recv_completions(); !v.empty(); v = h.recv_completions())
        r.insert(r.end(), v.begin(), v.end());
    ASSERT_EQ(r.size(), 40u);
    for (uint32_t i = 0; i < 40; ++i)
        EXPECT_EQ(r[i].imm, 1000 + i) << "in order";
}

TEST(QpGrowth, ReceiveQueueHoldsAtItsBoundUntilPolled) {
    QpConfig cfg = Harness::small_config();
    cfg.max_recv_cqe = 32;
    Harness h(cfg);
    for (uint32_t i = 0; i < 50; ++i)
        ASSERT_EQ(h.write(256, i * 256, i, true, i), PostResult::kOk);
    h.deliver_all(h.b, h.drain(h.a));
    EXPECT_EQ(h.recv_completions().size(), 32u) << "the bound; the rest wait";
    h.deliver_all(h.a, h.drain(h.b));  // any ack due
    h.advance(10'000);                 // the responder delivers the rest
    std::vector<RecvCompletion> r;
    for (int k = 0; k < 4; ++k) {
        auto v = h.recv_completions();
        r.insert(r.end(), v.begin(), v.end());
        h.advance(10'000);
    }
    ASSERT_EQ(r.size(), 18u);
    EXPECT_EQ(r[0].imm, 32u);
}

// The path MTU of a connection: each end sends the smaller of its own
// payload size and what the peer said at set-up (0: not said, its own).
TEST(Qp, TheSmallerEndsPayloadSizeIsTheConnections) {
    struct Case {
        uint32_t own, peer, want;
    };
    for (const Case c : {Case{1024, 512, 512}, Case{512, 1024, 512}, Case{1024, 0, 1024}}) {
        EndpointConfig ec;
        ec.planes = 1;
        ec.max_qps = 2;
        Endpoint a(ec);
        QpConfig cfg = Harness::small_config();
        cfg.mtu_payload_bytes = c.own;
        Qp *q = a.create_qp(cfg).value();
        ASSERT_TRUE(q->to_init(1));
        QpPeer peer;
        peer.dst_qpn = 7;
        peer.planes = 1;
        peer.path[0].src_ip = wire::ipv4(10, 0, 0, 1);
        peer.path[0].dst_ip = wire::ipv4(10, 0, 0, 2);
        peer.mtu_payload_bytes = c.peer;
        ASSERT_TRUE(q->to_rtr(peer, Psn(1)));
        ASSERT_TRUE(q->to_rts(Psn(1)));
        EXPECT_EQ(q->mtu_payload_bytes(), c.want);
        std::vector<uint8_t> buf(4096, 1);
        WriteRequest wr;
        wr.local = buf.data();
        wr.length = 4096;
        wr.remote_addr = 0x1000;
        wr.rkey = 1;
        ASSERT_EQ(q->post_write(wr), PostResult::kOk);
        std::vector<uint8_t> hdrs(64 * wire::kMaxHdrBytes);
        TxPacket out[64];
        for (uint32_t i = 0; i < 64; ++i)
            out[i].hdr = hdrs.data() + i * wire::kMaxHdrBytes;
        const uint32_t n = a.poll_tx(out, 64, 1000);
        uint32_t data = 0;
        for (uint32_t i = 0; i < n; ++i) {
            if (out[i].payload_len == 0) continue;
            ++data;
            EXPECT_LE(out[i].payload_len, c.want);
        }
        EXPECT_EQ(data, 4096 / c.want) << "own " << c.own << " peer " << c.peer;
    }
}

TEST(Qp, ANewNextHopTakesThePlanesPacketsAndLeavesTheOthers) {
    EndpointConfig ec;
    ec.planes = 2;
    ec.max_qps = 2;
    Endpoint a(ec);
    Qp *q = a.create_qp(Harness::small_config()).value();
    const wire::MacAddr old_hop{{2, 0, 0, 0, 0, 1}}, new_hop{{2, 0, 0, 0, 0, 9}};
    EXPECT_FALSE(q->set_next_hop(0, new_hop)) << "no path before the QP is connected";
    ASSERT_TRUE(q->to_init(1));
    QpPeer peer;
    peer.dst_qpn = 7;
    peer.planes = 2;
    for (uint8_t p = 0; p < 2; ++p) {
        peer.path[p].src_ip = wire::ipv4(10, 1, p, 1);
        peer.path[p].dst_ip = wire::ipv4(10, 2, p, 1);
        peer.path[p].dst_mac = old_hop;
    }
    ASSERT_TRUE(q->to_rtr(peer, Psn(1)));
    ASSERT_TRUE(q->to_rts(Psn(1)));
    EXPECT_TRUE(q->set_next_hop(0, new_hop));
    EXPECT_FALSE(q->set_next_hop(2, new_hop)) << "the QP has two planes";
    std::vector<uint8_t> buf(64 * 1024, 1);
    WriteRequest wr;
    wr.local = buf.data();
    wr.length = uint32_t(buf.size());
    wr.remote_addr = 0x1000;
    wr.rkey = 1;
    ASSERT_EQ(q->post_write(wr), PostResult::kOk);
    std::vector<uint8_t> hdrs(64 * wire::kMaxHdrBytes);
    TxPacket out[64];
    for (uint32_t i = 0; i < 64; ++i)
        out[i].hdr = hdrs.data() + i * wire::kMaxHdrBytes;
    const uint32_t n = a.poll_tx(out, 64, 1000);
    uint32_t on[2] = {0, 0};
    for (uint32_t i = 0; i < n; ++i) {
        wire::EthHdr eth;
        std::memcpy(&eth, out[i].hdr, sizeof eth);
        EXPECT_EQ(eth.dst, out[i].plane == 0 ? new_hop : old_hop) << "packet " << i;
        ++on[out[i].plane & 1];
    }
    EXPECT_GT(on[0], 0u);
    EXPECT_GT(on[1], 0u);
}

}  // namespace
}  // namespace mrc::test
