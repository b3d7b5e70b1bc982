// Loss recovery that does not wait for timers, and the peer's liveness
// (docs/loss-recovery.md has the rules, their truth table and the reasons).
//
// Transmissions awaiting their ack sit on one list in send order (TxSlot
// prev/next). Three mechanisms, in the order they act:
//
//   1. Loss detection from acks (RACK, RFC 8985, plane-aware). Each ack
//      tells which transmissions arrived. A transmission T is lost when
//        (a) a transmission sent after T is known to have arrived, and
//        (b) T has been out longer than rtt_ref(plane of T) + reo_wnd(plane),
//      where rtt_ref is the RTT of the latest-sent packet acknowledged on
//      that plane, or its smoothed RTT when that is more (planes may differ
//      in RTT; spraying makes arrival order meaningless, send order and
//      time are what count), and reo_wnd is the largest of half the
//      smoothed RTT, the spread of the plane's recent RTTs and the
//      lateness recently seen (x 1.25), a whole smoothed RTT while the
//      plane has few samples, at most two smoothed RTTs, plus the peer's
//      ack delay. A transmission that satisfies (a) but not yet (b) arms
//      the timer for the moment it will.
//   2. A tail-loss probe: when nothing was acknowledged and nothing sent
//      for 2 x srtt + the ack delay while packets are out, the latest one
//      is sent again; its ack makes (a) true for everything sent before.
//   3. The retransmission timeout, last: no ack progress for a whole RTO
//      (per plane, adaptive; doubled per expiry in a row): the oldest
//      transmission is sent again. Its path is blamed only when the peer
//      QP sent anything (ack, probe) since it left; a peer that says
//      nothing (stalled, or gone) costs one resend per back-off step, no
//      storm. More than retry.limit expiries in a row with nothing
//      acknowledged (while the peer host is heard, on this QP or another
//      of the endpoint's to it, or with no liveness check) error the QP;
//      a packet found lost from acks more than retry.limit times does too.
//      A peer silent for peer_timeout_ns errors it as unreachable.
//
//   event                              | T's EV          | T's plane           | T
//   -----------------------------------+-----------------+---------------------+-------------
//   later-sent arrived, T not late     | -               | -                   | timer armed
//   later-sent arrived, T late         | 1st: SKIP;      | a distinct EV lost: | resent, off
//                                      | 2nd: retired    | counts to failed    | its plane
//   ack shows T's resend was needless  | -               | lateness sample     | spurious++
//   nothing acked or sent for PTO      | -               | -                   | latest resent
//   RTO, peer QP heard since T left    | retired         | counts to failed    | resent
//   RTO, peer QP silent since T left   | -               | -                   | resent
//   ... with its host heard, or again  | (a spare EV     | -                   | resent on a
//                                      |  that got it    |                     | spare EV
//                                      |  through takes  |                     |
//                                      |  T's EV's place)|                     |
//
// Liveness is the peer host's (PeerLink, shared by the endpoint's QPs to
// it): every valid packet from the peer to any of them counts as heard. When
// nothing was heard for keepalive_ns, the link's one timer has one of those
// QPs (in turn) send a keepalive probe (on another plane each time) for
// all; nothing heard for peer_timeout_ns errors each of them with
// kPeerUnreachable (counted from when each joined, for one that joined
// later). An idle QP has no timer of its own. A QP whose peer QP vanished silently while the peer
// host lives on is left to its retry budget (its RTOs count: the peer
// answers), as with RDMA RC.
#include <algorithm>

#include "core/endpoint.h"
#include "core/qp.h"

namespace mrc {

namespace {
constexpr uint32_t kSettleSamples = 16;
}  // namespace

// ---- the send-order list ----------------------------------------------------------

void Qp::tx_link(Psn p, TxSlot &s) {
    s.tx_order = tx_count_++;
    s.prev = tx_tail_;
    s.next = kNil;
    if (tx_tail_ != kNil)
        slot(Psn(tx_tail_)).next = p.value();
    else
        tx_head_ = p.value();
    tx_tail_ = p.value();
    s.listed = true;
}

void Qp::tx_unlink(TxSlot &s) {
    if (s.prev != kNil)
        slot(Psn(s.prev)).next = s.next;
    else
        tx_head_ = s.next;
    if (s.next != kNil)
        slot(Psn(s.next)).prev = s.prev;
    else
        tx_tail_ = s.prev;
    s.prev = s.next = kNil;
    s.listed = false;
}

// ---- RTTs and timeouts ------------------------------------------------------------

void Qp::rtt_sample(uint8_t plane, uint64_t rtt_ns, bool for_min) {
    timing_[plane].rtt.sample(rtt_ns, for_min);
    if (link_ != nullptr) link_->rtt[plane].sample(rtt_ns, for_min);
}

const PlaneRtt &Qp::known_rtt(uint8_t plane) const {
    const PlaneRtt &own = timing_[plane].rtt;
    return own.has_sample() || link_ == nullptr ? own : link_->rtt[plane];
}

uint64_t Qp::srtt_max_ns() const {
    uint64_t m = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        m = std::max(m, known_rtt(p).srtt_ns());
    return m;
}

uint64_t Qp::rto_ns(uint8_t plane) const {
    const uint64_t fixed = ack_timeout_ns(cfg_.retry.timeout_exp);
    if (!cfg_.retry.adaptive) return fixed;
    auto of = [&](const PlaneRtt &r) {
        return r.srtt_ns() + std::max<uint64_t>(4 * r.rttvar_ns(), 1000) + cfg_.ack_delay_ns;
    };
    uint64_t rto = 0;
    if (known_rtt(plane).has_sample()) {
        rto = of(known_rtt(plane));
    } else {
        // Nothing measured on this plane yet: what the others show, or the
        // configured start.
        for (uint8_t p = 0; p < peer_.planes; ++p)
            if (known_rtt(p).has_sample()) rto = std::max(rto, of(known_rtt(p)));
        if (rto == 0) rto = fixed;
    }
    return std::clamp(rto, cfg_.retry.min_rto_ns,
                      std::max(cfg_.retry.min_rto_ns, cfg_.retry.max_rto_ns));
}

uint64_t Qp::backed_off_rto_ns(uint8_t plane) const {
    const uint64_t base = rto_ns(plane);
    if (cfg_.retry.mode == RetryMode::kLinear) return base;
    const uint64_t shifted = base << std::min<uint8_t>(rto_backoff_, 30);
    if (!cfg_.retry.adaptive) return shifted;
    return std::min(shifted, std::max(base, cfg_.retry.max_rto_ns));
}

uint64_t Qp::rto_deadline_ns() const {
    if (tx_head_ == kNil) return UINT64_MAX;
    const TxSlot &s = slots_[tx_head_ & slot_mask_];
    return std::max(s.sent_ns, last_progress_ns_) + backed_off_rto_ns(s.plane);
}

uint64_t Qp::tlp_deadline_ns() const {
    // Not while timeouts are backing off: nothing came back for a probe to draw.
    if (!cfg_.loss.tlp || tx_head_ == kNil || tail_probe_out_ || rto_backoff_) return UINT64_MAX;
    return std::max(last_data_tx_ns_, last_progress_ns_) + pto_ns();
}

// The probe timeout: two smoothed RTTs (RFC 8985 7.2), or the smoothed RTT
// and four deviations where the RTT varies more than that (RFC 9002's
// PTO): a receiver that is late by its usual jitter (a busy CPU, a worker
// descheduled for a while) is not a tail loss. Plus the peer's ack delay.
// The slowest plane decides: the probe stands for the QP's whole tail.
uint64_t Qp::pto_ns() const {
    uint64_t pto = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p) {
        const PlaneRtt &r = known_rtt(p);
        if (r.has_sample()) pto = std::max({pto, 2 * r.srtt_ns(), r.srtt_ns() + 4 * r.rttvar_ns()});
    }
    return (pto ? pto : rto_ns(0)) + cfg_.ack_delay_ns;
}

// The RTT a transmission on `plane` is expected to take now: the RTT of
// the latest-sent packet acknowledged on it (RACK's reference), or the
// smoothed RTT when that is more (one lucky packet that met short queues
// must not make the others look late).
uint64_t Qp::rtt_ref_ns(uint8_t plane) const {
    const PlaneTiming &t = timing_[plane];
    uint64_t ref = t.rack_valid ? t.rack_rtt_ns : 0;
    // A plane not measured yet: the slowest smoothed RTT of the others.
    ref = std::max(ref, t.rtt.has_sample() ? t.rtt.srtt_ns() : srtt_max_ns());
    if (ref) return ref;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        if (timing_[p].rack_valid) ref = std::max(ref, timing_[p].rack_rtt_ns);
    return std::max<uint64_t>(ref, 1);
}

uint64_t Qp::min_rtt_ns(uint8_t plane) const {
    uint64_t m = timing_[plane].rtt.min_ns();
    if (m != UINT64_MAX) return m;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        m = std::min(m, timing_[p].rtt.min_ns());
    return m;
}

uint64_t Qp::reorder_window_ns(uint8_t plane, uint64_t now_ns) const {
    const PlaneRtt &r = timing_[plane].rtt;
    const uint64_t srtt = r.has_sample() ? r.srtt_ns() : rtt_ref_ns(plane);
    const uint64_t epoch = std::max<uint64_t>(srtt_max_ns(), 1000) * cfg_.loss.reo_decay_rtts;
    // Half the smoothed RTT (spraying reorders all the time: twice RACK's
    // quarter of the minimum RTT for TCP); the spread of the plane's recent RTTs
    // (a packet later than any recent RTT explains is lost, one within
    // that spread may just have taken a slower path); and the lateness
    // seen recently on any plane, x 1.25 (planes differ in RTT, which
    // rtt_ref accounts for, hardly in how much their paths reorder, and a
    // QP may go a while without sending much on one of them).
    uint64_t w = std::max(srtt / 2, r.spread_ns(now_ns, epoch));
    uint64_t seen = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        seen = std::max(seen, timing_[p].rtt.reorder_seen_ns(now_ns, epoch));
    if (seen) w = std::max(w, seen + seen / 4);
    // Until the plane has shown a few RTTs, a whole one: a QP that starts
    // knows nothing of the spread yet, and a loss found one RTT later is
    // still far sooner than any timeout.
    if (r.samples() < kSettleSamples) w = std::max(w, srtt);
    w = std::min(w, 2 * srtt);
    // The responder may hold an ack for an in-order arrival up to its ack
    // delay, while the arrival of a packet sent later, which made a gap,
    // was acked at once (the peer's delay is taken to be ours).
    return std::max(w, cfg_.loss.min_reo_wnd_ns) + cfg_.ack_delay_ns;
}

// ---- loss detection from acks -----------------------------------------------------

void Qp::rack_note(TxSlot &s, uint64_t now_ns, uint64_t order_before) {
    PlaneTiming &t = timing_[s.plane];
    // Late: a packet sent after this one was acknowledged by an earlier ack.
    if (rack_valid_ && s.tx_order < order_before) {
        const uint64_t due = s.sent_ns + rtt_ref_ns(s.plane);
        if (now_ns > due) {
            t.rtt.lateness(now_ns - due, now_ns,
                           std::max<uint64_t>(srtt_max_ns(), 1000) * cfg_.loss.reo_decay_rtts);
            ++ctr_.reordered_pkts;
        }
    }
    if (!rack_valid_ || rack_order_ < s.tx_order) {
        rack_order_ = s.tx_order;
        rack_valid_ = true;
    }
    if (!t.rack_valid || t.rack_order < s.tx_order) {
        t.rack_order = s.tx_order;
        t.rack_rtt_ns = std::max<uint64_t>(now_ns - s.sent_ns, 1);
        t.rack_valid = true;
    }
}

void Qp::detect_losses(uint64_t now_ns) {
    rack_timer_ns_ = UINT64_MAX;
    if (!rack_valid_) return;
    uint64_t wnd[kMaxPlanes] = {};
    for (uint32_t q = tx_head_; q != kNil;) {
        TxSlot &s = slot(Psn(q));
        const uint32_t next = s.next;
        if (s.tx_order >= rack_order_) break;  // nothing sent after it has arrived
        if (wnd[s.plane] == 0) wnd[s.plane] = reorder_window_ns(s.plane, now_ns);
        const uint64_t deadline = s.sent_ns + rtt_ref_ns(s.plane) + wnd[s.plane];
        if (now_ns >= deadline) {
            declare_lost(Psn(q), s, now_ns);
            if (state_ != QpState::kRts) return;
        } else {
            rack_timer_ns_ = std::min(rack_timer_ns_, deadline);
        }
        q = next;
    }
}

bool Qp::spend_retry(Psn p, TxSlot &s) {
    if (s.retries < UINT8_MAX) ++s.retries;
    const RetryPolicy &r = cfg_.retry;
    const bool forever =
        r.mode == RetryMode::kExponential && r.limit >= RetryPolicy::kMaxExponential;
    if (!forever && s.retries > r.limit) {
        error_psn_ = p;
        fail(WcStatus::kRetryExceeded);
        return false;
    }
    return true;
}

void Qp::declare_lost(Psn p, TxSlot &s, uint64_t now_ns) {
    ++ctr_.losses_detected;
    ++ep_->plane_ctr_[s.plane].lost_pkts;
    if (!spend_retry(p, s)) return;
    count_cc(pcc_[s.plane]->cc->on_loss(now_ns, s.len));
    cc_moved(s.plane);
    on_path_loss(s, false, now_ns);
    s.avoid_plane = true;
    queue_retx_now(p, TxKind::kLoss);
}

void Qp::ack_progress(uint64_t now_ns) {
    last_progress_ns_ = now_ns;
    rto_backoff_ = 0;
    rto_charged_ = 0;
    tail_probe_out_ = false;
}

// ---- the tail-loss probe and the timeout --------------------------------------------

void Qp::send_tail_probe(uint64_t now_ns) {
    (void)now_ns;
    if (tx_tail_ == kNil || tail_probe_out_) return;
    tail_probe_out_ = true;
    ++ctr_.tail_probes;
    queue_retx_now(Psn(tx_tail_), TxKind::kTailProbe);
}

void Qp::on_rto(uint64_t now_ns) {
    if (tx_head_ == kNil) return;
    const Psn p(tx_head_);
    TxSlot &s = slot(p);
    ++ctr_.ack_timeouts;
    ++ep_->plane_ctr_[s.plane].ack_timeouts;
    if (rto_backoff_ < UINT8_MAX) ++rto_backoff_;
    // Answered: the peer QP sent anything since T left (an ack, a probe of
    // its own). A peer QP that still sends while T's ack never came says
    // T's path lost it, even if every ack died on the way back. The peer
    // host heard (to another of its QPs, a keepalive) says only that the
    // host is alive: after a stall of either host the acks of the
    // endpoint's QPs come back one burst after another, and this QP's
    // timer may fire between the others' answers and its own. That does
    // not blame T's path; it does count against the retry budget.
    const bool answered = last_rx_ns_ > s.sent_ns;
    const bool host_heard = answered || peer_rx_ns() > s.sent_ns;
    // The budget of timeouts is the QP's: so many in a row with nothing
    // acknowledged in between (whichever packet each one resent). While
    // the peer host says nothing at all, that is for the liveness check to
    // judge (when there is one): a peer descheduled for a while must not
    // fail the QP, and a peer that is gone fails it as unreachable.
    if (host_heard || cfg_.liveness.peer_timeout_ns == 0) {
        const RetryPolicy &r = cfg_.retry;
        const bool forever =
            r.mode == RetryMode::kExponential && r.limit >= RetryPolicy::kMaxExponential;
        if (rto_charged_ < UINT8_MAX) ++rto_charged_;
        if (!forever && rto_charged_ > r.limit) {
            error_psn_ = p;
            return fail(WcStatus::kRetryExceeded);
        }
    }
    count_cc(pcc_[s.plane]->cc->on_timeout(now_ns, s.len));
    cc_moved(s.plane);
    if (answered) {
        // The peer answered since it left: this path lost it.
        ++ep_->plane_ctr_[s.plane].lost_pkts;
        on_path_loss(s, true, now_ns);
    } else {
        ++ctr_.rto_silent;  // the peer QP said nothing: no path is to blame
        // Except a spare that an earlier silent timeout sent it on: the
        // next exploring resend takes another one.
        const bool explored = s.kind == TxKind::kSilentTimeout && !evs_.entry(s.ev_idx).active;
        if (explored && evs_.on_timeout(s.ev_idx, now_ns) == EvTimeout::kRetired) ++ctr_.ev_retired;
    }
    s.avoid_plane = true;
    last_progress_ns_ = now_ns;  // the next one waits a whole (backed-off) RTO from here
    ++ctr_.retx_after_timeout;
    // Nothing heard from the peer QP while its host is heard, or for a
    // second timeout in a row: the active EVs may all hash onto one dead
    // path (each RTO was silent, so none was blamed). The resend tries a
    // spare EV; once one gets through it takes the place of the active EV
    // that did not (mark_acked), and its ack makes the next timeouts
    // answered ones, which retire the other dead active EVs.
    const bool explore = !answered && (host_heard || rto_backoff_ >= 2);
    queue_retx_now(p, explore ? TxKind::kSilentTimeout : TxKind::kTimeout);
    // Everything else sent a whole RTO ago and still not acknowledged is
    // lost too (RACK-TLP, RFC 8985 6.3), when the peer answered meanwhile
    // (a silent peer says nothing of the paths). Without this, one timeout
    // judged one packet: after an outage of one plane, each timeout resent
    // the next of its packets on the other plane, which was dead too, and
    // those resends never came up to be judged, so that plane never failed
    // (a stall found by the sim's drawn seeds).
    while (answered && state_ == QpState::kRts && tx_head_ != kNil) {
        const Psn q(tx_head_);
        TxSlot &o = slot(q);
        if (o.sent_ns + rto_ns(o.plane) > now_ns) break;  // the list is in send order
        declare_lost(q, o, now_ns);
        if (tx_head_ == q.value()) break;  // not taken off the list: nothing more to do here
    }
}

// ---- liveness ---------------------------------------------------------------------

void Qp::peer_silent() {
    ++ctr_.peer_timeouts;
    fail(WcStatus::kPeerUnreachable);
}

void Qp::keepalive_due(uint64_t now_ns) {
    if (state_ != QpState::kRts || keepalive_due_) return;
    keepalive_due_ = true;
    keepalive_sent_ns_ = now_ns;
    became_ready();
}

void Qp::send_keepalive(TxPacket &t, uint64_t now_ns) {
    // Another plane each time: a dead plane must not hide a live peer.
    uint8_t planes = usable_mask_ ? usable_mask_ : allowed_planes();
    if (planes == 0) planes = static_cast<uint8_t>((1u << peer_.planes) - 1);
    uint8_t plane = keepalive_plane_;
    for (uint8_t k = 0; k < peer_.planes; ++k) {
        plane = static_cast<uint8_t>((keepalive_plane_ + k) % peer_.planes);
        if ((planes >> plane) & 1) break;
    }
    keepalive_plane_ = static_cast<uint8_t>((plane + 1) % peer_.planes);
    const uint32_t i = evs_.choose_on_plane(now_ns, plane);
    const uint16_t ev = i != kNoEv ? evs_.entry(i).ev : evs_.next_reverse_ev(plane);
    wire::ProbeFields f;
    f.reply = false;
    f.flags = wire::kProbeKeepalive;
    f.dst_qpn = peer_.dst_qpn;
    f.ev = ev;
    f.ts = static_cast<uint32_t>(now_ns);
    f.plane_status = advertised_status();
    control_packet(t, plane, wire::write_probe(t.hdr, peer_.path[plane], ev, f));
    keepalive_sent_ns_ = now_ns;
    if (link_ != nullptr) link_->keepalive_sent_ns = now_ns;
    keepalive_due_ = false;
    ++ctr_.tx_keepalives;
}

}  // namespace mrc
