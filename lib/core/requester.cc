// Requester: segmentation, spraying, ack and NACK processing, selective
// retransmission.
//
// Only the PSNs known or found lost are resent (no go-back-N), each on a
// different EV than the one before. What triggers a resend:
//   - a NACK for a PSN (a trimmed packet: at once; a responder out of
//     resources: after a back-off);
//   - loss detection from acks (loss.cc): a transmission is lost when one
//     sent after it was acknowledged and it is later than its plane's RTT
//     and reorder window allow;
//   - a tail-loss probe and, last, the retransmission timeout (loss.cc).
// docs/loss-recovery.md has the rules and why plain reordering resends
// nothing.
#include <algorithm>

#include "core/endpoint.h"
#include "core/qp.h"

namespace mrc {

uint32_t Qp::window_pkts() const {
    return std::min<uint32_t>(peer_window_pkts_, slot_max_);
}

uint64_t Qp::window_bytes() const {
    uint64_t w = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        if (pcc_[p] != nullptr) w += pcc_[p]->window;  // none before to_rtr
    return w;
}

// Planes that may carry anything: the operator has not denied them and
// their link is up. A plane the QP found failed or the scorer took down
// still carries retransmissions when nothing better is left.
uint8_t Qp::allowed_planes() const {
    uint8_t m = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        if (!(plane_[p].down & (kPlaneDenied | kPlaneLink))) m |= static_cast<uint8_t>(1u << p);
    return m;
}

// Usable planes whose window has room for one more packet (a plane with
// nothing in flight always has). With no usable plane at all, the planes
// that are only waiting to be verified (the peer's bitmap or a probe); with
// none of those either, the planes this QP found failed: its EV set steers
// new data to the paths of the plane that still work (retiring the others
// one by one), where waiting for the plane's probes could wait for ever
// when most of its EVs are on dead paths. Never a plane that is denied,
// whose link is down, or that the scorer took down (it never takes the
// last one).
uint8_t Qp::send_mask() const {
    uint8_t planes = usable_mask_;
    if (planes == 0) {
        constexpr uint8_t kNoNewData = kPlaneDenied | kPlaneLink | kPlaneTable;
        uint8_t failed = 0;
        for (uint8_t p = 0; p < peer_.planes; ++p) {
            const uint8_t d = plane_[p].down;
            if (d & kNoNewData) continue;
            (d & kPlaneFailed ? failed : planes) |= static_cast<uint8_t>(1u << p);
        }
        if (planes == 0) planes = failed;
    }
    uint8_t m = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        if (((planes >> p) & 1) && (pcc_[p]->inflight == 0 ||
                                    pcc_[p]->inflight + cfg_.mtu_payload_bytes <= pcc_[p]->window))
            m |= static_cast<uint8_t>(1u << p);
    return m;
}

// Retransmissions are not held back by windows: the usable planes, or any
// plane that is allowed at all.
uint8_t Qp::retx_mask() const {
    return usable_mask_ ? usable_mask_ : allowed_planes();
}

bool Qp::can_send_new(uint8_t tx_planes) const {
    const auto inflight = static_cast<uint32_t>(distance(snd_una_, snd_nxt_));
    if (inflight >= window_pkts()) return false;
    return (send_mask() & tx_planes) != 0;
}

// Builds one data packet: a new one at snd_nxt (kind kFirst) or a
// retransmission of an outstanding PSN.
bool Qp::emit_data(TxPacket &pkt, Psn psn, TxKind kind, uint64_t now_ns, uint8_t tx_planes) {
    TxSlot *s;
    uint32_t ev_idx;
    if (kind == TxKind::kFirst) {
        ev_idx = evs_.choose(now_ns, send_mask() & tx_planes);
        if (ev_idx == kNoEv) {
            ++ctr_.ev_none;  // every EV of the allowed planes denied: nothing may be sent
            return false;
        }
        WrEntry &w = sq_[sq_seg_ & sq_mask_];
        const uint32_t off = w.sent_pkts * cfg_.mtu_payload_bytes;
        const uint32_t len = std::min(cfg_.mtu_payload_bytes, w.wr.length - off);
        if (w.sent_pkts == 0) w.first_psn = psn;
        if (uint32_t(distance(snd_una_, snd_nxt_)) > slot_mask_) grow_slots();
        s = &slot(psn);
        *s = TxSlot{};
        s->wr = sq_seg_;
        s->msg_offset = off;
        s->len = len;
        if (++w.sent_pkts == w.npkts) ++sq_seg_;
        ++snd_nxt_;
        inflight_bytes_ += len;
        inflight_add(evs_.entry(ev_idx).plane, len);
        ++ctr_.tx_data_pkts;
        ctr_.tx_data_bytes += len;
        ++ep_->plane_ctr_[evs_.entry(ev_idx).plane].tx_data_pkts;
    } else {
        s = &slot(psn);
        // After a loss, off the plane it was lost on when another can take it.
        const uint8_t avoid_planes = s->avoid_plane ? static_cast<uint8_t>(1u << s->plane) : 0;
        ev_idx = kNoEv;
        if (kind == TxKind::kSilentTimeout) {
            const uint8_t off = static_cast<uint8_t>(retx_mask() & ~avoid_planes);
            if (off != 0) ev_idx = evs_.choose_spare(now_ns, s->ev_idx, off);
            if (ev_idx == kNoEv) ev_idx = evs_.choose_spare(now_ns, s->ev_idx, retx_mask());
            if (ev_idx != kNoEv) ++ctr_.retx_spare_ev;
        }
        if (ev_idx == kNoEv)
            ev_idx = evs_.choose_retx(now_ns, s->ev_idx, avoid_planes, retx_mask());
        if (ev_idx == kNoEv) {
            ++ctr_.ev_none;
            return false;
        }
        const uint8_t plane = evs_.entry(ev_idx).plane;
        if (plane != s->plane) {
            if (s->avoid_plane) ++ctr_.retx_off_plane;
            // Its bytes are in flight on the new plane now.
            inflight_sub(s->plane, s->len);
            inflight_add(plane, s->len);
        }
        s->avoid_plane = false;
        s->prev_ev_idx = s->ev_idx;
        s->prev_sent_ns = s->sent_ns;
        s->prev_plane = s->plane;
        if (s->listed) tx_unlink(*s);  // a tail probe: its earlier transmission may still arrive
        ++ctr_.tx_retx_pkts;
        ++ep_->plane_ctr_[plane].tx_retx_pkts;
    }
    const EvEntry &c = evs_.entry(ev_idx);
    if (c.state != EvState::kGood) ++ctr_.ev_fallbacks;
    s->ev_idx = static_cast<uint16_t>(ev_idx);
    s->plane = c.plane;
    s->kind = kind;
    s->sent_ns = now_ns;
    tx_link(psn, *s);
    last_data_tx_ns_ = now_ns;
    const WrEntry &w = sq_[s->wr & sq_mask_];

    const bool last = s->msg_offset + s->len == w.wr.length;
    uint8_t flags = 0;
    if (s->msg_offset == 0) flags |= wire::kFlagFirst;
    if (last) flags |= wire::kFlagLast;
    if (kind != TxKind::kFirst) flags |= wire::kFlagRetx;
    if (last || kind != TxKind::kFirst || ++pkts_since_ack_req_ >= cfg_.ack_req_every_pkts) {
        flags |= wire::kFlagAckReq;
        pkts_since_ack_req_ = 0;
    }
    wire::DataFields f;
    f.opcode = w.wr.with_imm ? wire::Opcode::kWriteImm : wire::Opcode::kWrite;
    f.flags = flags;
    f.dst_qpn = peer_.dst_qpn;
    f.psn = psn;
    f.msn = w.msn;
    f.msg_offset = s->msg_offset;
    f.tx_ts = static_cast<uint32_t>(now_ns);
    f.remote_addr = w.wr.remote_addr + s->msg_offset;
    f.rkey = w.wr.rkey;
    f.imm = w.wr.imm;
    f.msg_bytes = w.wr.length;
    pkt.hdr_len = wire::write_data(pkt.hdr, peer_.path[c.plane], c.ev, f, s->len);
    pkt.payload = static_cast<const uint8_t *>(w.wr.local) + s->msg_offset;
    pkt.payload_len = s->len;
    pkt.plane = c.plane;
    pkt.qpn = qpn_;
    return true;
}

bool Qp::mark_acked(TxSlot &s, uint64_t now_ns) {
    s.acked = true;
    if (s.listed) tx_unlink(s);
    inflight_bytes_ -= s.len;
    inflight_sub(s.plane, s.len);
    // An ack that comes sooner after a resend than any RTT the plane has
    // shown may be for an earlier transmission: loss detection does not
    // learn from it (RFC 8985), and the delivery is credited to the earlier
    // transmission's plane. Sooner than half of that, it certainly is: the
    // resend was not needed, and the reorder window learns how late the
    // earlier transmission was. (Half: a resend may find emptier queues
    // than any sample did.)
    const uint64_t min_rtt = min_rtt_ns(s.plane);
    const bool earlier = s.kind != TxKind::kFirst && s.kind != TxKind::kNack &&
                         min_rtt != UINT64_MAX && now_ns - s.sent_ns < min_rtt;
    AckedOnPlane &a = acked_[earlier ? s.prev_plane : s.plane];
    a.bytes += s.len;
    ++a.pkts;
    a.latest_sent_ns = std::max(a.latest_sent_ns, earlier ? s.prev_sent_ns : s.sent_ns);
    if (earlier) {
        if (now_ns - s.sent_ns < min_rtt / 2) {
            if (s.kind != TxKind::kTailProbe) ++ctr_.retx_spurious;
            const uint64_t due = s.prev_sent_ns + rtt_ref_ns(s.prev_plane);
            if (now_ns > due)
                timing_[s.prev_plane].rtt.lateness(
                    now_ns - due, now_ns,
                    std::max<uint64_t>(srtt_max_ns(), 1000) * cfg_.loss.reo_decay_rtts);
        }
        return false;
    }
    evs_.on_delivered(s.ev_idx);
    // A spare EV got through where the active one before it was never
    // answered: it takes that one's place, which is retired (and probed).
    if (s.kind == TxKind::kSilentTimeout) {
        const EvTimeout t = evs_.adopt(s.ev_idx, s.prev_ev_idx, now_ns);
        if (t != EvTimeout::kSkipped) ++ctr_.ev_adopted;
        if (t == EvTimeout::kRetired) ++ctr_.ev_retired;
    }
    return true;
}

// What one ack or NACK acknowledged, per plane, into the plane counters and
// the planes' delivery record; once per ack, not per packet.
void Qp::settle_acked() {
    for (uint8_t p = 0; p < peer_.planes; ++p) {
        AckedOnPlane &a = acked_[p];
        if (a.pkts == 0) continue;
        ep_->plane_ctr_[p].acked_pkts += a.pkts;
        plane_delivered(p, a.latest_sent_ns);
        a = AckedOnPlane{};
    }
}

void Qp::complete_wrs() {
    const uint32_t before = sq_head_;
    while (sq_head_ != sq_tail_) {
        const WrEntry &w = sq_[sq_head_ & sq_mask_];
        if (w.sent_pkts != w.npkts || distance(w.first_psn + w.npkts, snd_una_) < 0) break;
        if (!send_cq_.push_growing(
                SendCompletion{w.wr.wr_id, WcStatus::kSuccess, w.wr.length, w.msn}, sq_max_))
            break;
        ++ctr_.wr_completed;
        ++sq_head_;
    }
    if (sq_head_ != before) ep_->notify(*this);
}

void Qp::queue_retx_now(Psn p, TxKind kind) {
    TxSlot &s = slot(p);
    if (s.queued) return;
    if (s.listed) tx_unlink(s);
    s.queued = true;
    s.pending = kind;
    retx_now_.try_push(p.value());  // one entry per outstanding PSN at most: never full
    became_ready();
}

// Moves the cumulative point to `cum`, acknowledging what it passes.
void Qp::advance_una(Psn cum, uint64_t now_ns) {
    const uint64_t order_before = rack_order_;
    while (snd_una_ != cum) {
        TxSlot &s = slot(snd_una_);
        if (!s.acked) {
            if (mark_acked(s, now_ns)) rack_note(s, now_ns, order_before);
            ++ctr_.acked_pkts;
        }
        ++snd_una_;
    }
}

void Qp::on_sack(const wire::MrcPacket &p, uint64_t now_ns) {
    if (state_ != QpState::kRts) return;
    ++ctr_.rx_sacks;
    const wire::SackHdr &h = *p.sack;
    const Psn cum = p.psn;
    if (distance(cum, snd_nxt_) < 0) {
        ++ctr_.rx_sacks_invalid;  // acknowledges PSNs never sent
        return;
    }
    const bool window_was_full = !can_send_new();
    const uint64_t acked_before = ctr_.acked_pkts + ctr_.sacked_pkts;
    // Loss detection compares with what earlier acks said, not this one.
    const uint64_t order_before = rack_order_;
    if (distance(snd_una_, cum) < 0)
        ++ctr_.rx_sacks_stale;
    else
        advance_una(cum, now_ns);
    // Selective part: bit i covers cum + offset + i.
    uint64_t bits = h.bitmap.get();
    const Psn base = cum + h.sack_offset.get();
    auto sack_one = [&](Psn q) {
        if (!in_flight(q)) return;
        TxSlot &s = slot(q);
        if (s.acked) return;
        if (mark_acked(s, now_ns)) rack_note(s, now_ns, order_before);
        ++ctr_.sacked_pkts;
    };
    while (bits) {
        const int i = __builtin_ctzll(bits);
        bits &= bits - 1;
        sack_one(base + static_cast<uint32_t>(i));
    }
    // The packet that triggered the ack arrived too, bitmap or not.
    sack_one(Psn(h.trigger_psn.get()));
    peer_window_pkts_ = uint32_t{h.rwnd_units.get()} * wire::kPsnsPerWindowUnit;
    const bool ecn = h.flags & wire::kAckEcnEcho;
    const bool delayed = h.flags & wire::kAckDelayed;
    uint32_t rtt_ns = 0;
    const uint32_t trigger = evs_.find(h.ev_echo.get());
    const uint8_t trigger_plane = trigger == kNoEv ? kMaxPlanes : evs_.entry(trigger).plane;
    if (const uint32_t ts = h.ts_echo.get(); ts != 0) {
        ++ctr_.rtt_samples;
        const uint32_t sample = static_cast<uint32_t>(now_ns) - ts;
        // A delayed ack's RTT includes the responder's wait: the timeout must
        // cover it, but it is not a delay signal for CC nor the path's minimum.
        if (trigger_plane < peer_.planes) rtt_sample(trigger_plane, sample, !delayed);
        if (!delayed) rtt_ns = sample;
    }
    if (ecn) ++ctr_.rx_ecn_echo;
    // Each plane's CC learns what the ack acknowledged on it; the plane of
    // the echoed EV also learns the ack's signals (its RTT and ECN echo).
    for (uint8_t pl = 0; pl < peer_.planes; ++pl) {
        const bool signal = pl == trigger_plane;
        if (!signal && acked_[pl].bytes == 0) continue;
        AckSample a;
        a.now_ns = now_ns;
        a.acked_bytes = acked_[pl].bytes;
        a.rtt_ns = signal ? rtt_ns : 0;
        a.ecn = signal && ecn;
        count_cc(pcc_[pl]->cc->on_ack(a));
        cc_moved(pl);
    }
    settle_acked();
    if (trigger != kNoEv) ev_feedback(trigger, ecn, rtt_ns, now_ns);
    apply_peer_status(h.plane_status, now_ns);
    if (ctr_.acked_pkts + ctr_.sacked_pkts != acked_before) ack_progress(now_ns);
    if (cfg_.loss.rack) detect_losses(now_ns);
    if (state_ != QpState::kRts) return;  // a loss may have spent the last retry
    complete_wrs();
    if (window_was_full && has_tx_work(now_ns)) became_ready();
    rearm(now_ns);
}

void Qp::on_nack(const wire::MrcPacket &p, uint64_t now_ns) {
    if (state_ != QpState::kRts) return;
    ++ctr_.rx_nacks;
    const wire::NackHdr &h = *p.nack;
    const Psn psn = p.psn;
    const auto reason = static_cast<wire::NackReason>(h.reason);
    if (reason == wire::NackReason::kRemoteAccess) return fail(WcStatus::kRemoteAccessError);
    if (reason == wire::NackReason::kUnexpected) return fail(WcStatus::kRemoteProtocolError);
    const uint64_t order_before = rack_order_;
    // The NACK's cumulative PSN is an ack too.
    const Psn cum(h.cum_psn.get());
    if (distance(snd_una_, cum) > 0 && distance(cum, snd_nxt_) >= 0) {
        advance_una(cum, now_ns);
        settle_acked();
        ack_progress(now_ns);
        complete_wrs();
    }
    peer_window_pkts_ = uint32_t{h.rwnd_units.get()} * wire::kPsnsPerWindowUnit;
    apply_peer_status(h.plane_status, now_ns);
    // What the cumulative part acknowledged may show losses; whatever
    // happens to the PSN named below, they are looked for and the timer set.
    auto settle = [&] {
        if (state_ != QpState::kRts) return;
        if (cfg_.loss.rack) detect_losses(now_ns);
        if (state_ == QpState::kRts) rearm(now_ns);
    };
    if (!in_flight(psn) || slot(psn).acked) {
        ++ctr_.rx_nacks_stale;
        return settle();
    }
    TxSlot &s = slot(psn);
    // A NACK names the transmission it refuses by its timestamp: one for an
    // earlier transmission, when a later one is out already (resent after
    // a loss was found), asks for nothing more.
    if (h.ts_echo.get() != static_cast<uint32_t>(s.sent_ns)) {
        ++ctr_.rx_nacks_stale;
        return settle();
    }
    if (++s.nacks > cfg_.nack_retry_limit) {
        error_psn_ = psn;
        return fail(WcStatus::kNackRetryExceeded);
    }
    ++ctr_.retx_after_nack;
    switch (reason) {
        case wire::NackReason::kTrimmed:
        case wire::NackReason::kTrimmedLastHop: {
            const bool last_hop = reason == wire::NackReason::kTrimmedLastHop;
            count_cc(pcc_[s.plane]->cc->on_trim_nack(now_ns, s.len, last_hop));
            cc_moved(s.plane);
            // A trim in the fabric is the path's fault; one at the last hop is not.
            if (const uint32_t i = evs_.find(h.ev_echo.get()); i != kNoEv) {
                const uint8_t plane = evs_.entry(i).plane;
                if (last_hop) {
                    ++ep_->plane_ctr_[plane].rx_lasthop_trims;
                } else {
                    ++ep_->plane_ctr_[plane].rx_trims;
                    if (evs_.on_trim(i, now_ns)) ++ctr_.ev_skips;
                }
                plane_delivered(plane, s.sent_ns);  // a trimmed header got through
            }
            // The trimmed header arrived: what was sent before it and is
            // still missing may be lost.
            if (s.listed) rack_note(s, now_ns, order_before);
            queue_retx_now(psn, TxKind::kNack);
            break;
        }
        default:  // NO_RESOURCE, PSN_OUT_OF_WINDOW: the responder needs time
            if (!s.queued) {
                if (s.listed) tx_unlink(s);
                s.queued = true;
                s.pending = TxKind::kNack;
                retx_later_.try_push(
                    DelayedRetx{psn.value(), now_ns + cfg_.no_resource_backoff_ns});
            }
            break;
    }
    settle();
}

}  // namespace mrc
