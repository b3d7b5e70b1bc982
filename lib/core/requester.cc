// Requester: segmentation, spraying, ack and NACK processing, selective
// retransmission and ack timeouts.
//
// Loss recovery has exactly two triggers, so that a retransmission is
// never spurious while the fabric only reorders (spraying reorders all the
// time): a NACK for a PSN (a trimmed packet: retransmit at once), and the
// ack timeout of one transmission of a PSN (lost without a trace: the path
// is suspect). Each retransmission goes out on a different EV than the one
// before. There is no go-back-N: only the PSNs named are resent.
#include <algorithm>

#include "core/endpoint.h"
#include "core/qp.h"

namespace mrc {

uint32_t Qp::window_pkts() const {
    return std::min<uint32_t>(peer_window_pkts_, slot_mask_ + 1);
}

uint64_t Qp::window_bytes() const {
    uint64_t w = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        w += cwnd_[p];
    return w;
}

// Usable planes whose window has room for one more packet (a plane with
// nothing in flight always has). With no usable plane at all, any plane
// with room: the QP keeps trying rather than stall.
uint8_t Qp::send_mask() const {
    const uint8_t planes = usable_mask_ ? usable_mask_ : retx_mask();
    uint8_t m = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        if (((planes >> p) & 1) &&
            (plane_inflight_[p] == 0 || plane_inflight_[p] + cfg_.mtu_payload_bytes <= cwnd_[p]))
            m |= static_cast<uint8_t>(1u << p);
    return m;
}

// Retransmissions are not held back by windows: the usable planes, or any.
uint8_t Qp::retx_mask() const {
    return usable_mask_ ? usable_mask_ : static_cast<uint8_t>((1u << peer_.planes) - 1);
}

bool Qp::can_send_new(uint8_t tx_planes) const {
    const auto inflight = static_cast<uint32_t>(distance(snd_una_, snd_nxt_));
    if (inflight >= window_pkts()) return false;
    return !send_log_.full() && (send_mask() & tx_planes) != 0;
}

uint64_t Qp::rto_ns(uint8_t timeouts) const {
    const uint64_t base = ack_timeout_ns(cfg_.retry.timeout_exp);
    if (cfg_.retry.mode == RetryMode::kLinear) return base;
    return base << std::min<uint8_t>(timeouts, 30);
}

// Builds one data packet: a new one at snd_nxt (retx false) or a
// retransmission of an outstanding PSN.
bool Qp::emit_data(TxPacket &pkt, Psn psn, bool retx, uint64_t now_ns, uint8_t tx_planes) {
    TxSlot *s;
    uint32_t ev_idx;
    if (!retx) {
        ev_idx = evs_.choose(now_ns, send_mask() & tx_planes);
        if (ev_idx == kNoEv) {
            ++ctr_.ev_none;  // every EV denied: nothing may be sent
            return false;
        }
        WrEntry &w = sq_[sq_seg_ & sq_mask_];
        const uint32_t off = w.sent_pkts * cfg_.mtu_payload_bytes;
        const uint32_t len = std::min(cfg_.mtu_payload_bytes, w.wr.length - off);
        if (w.sent_pkts == 0) w.first_psn = psn;
        s = &slot(psn);
        *s = TxSlot{};
        s->wr = sq_seg_;
        s->msg_offset = off;
        s->len = len;
        if (++w.sent_pkts == w.npkts) ++sq_seg_;
        ++snd_nxt_;
        inflight_bytes_ += len;
        plane_inflight_[evs_.entry(ev_idx).plane] += len;
        ++ctr_.tx_data_pkts;
        ctr_.tx_data_bytes += len;
        ++ep_->plane_ctr_[evs_.entry(ev_idx).plane].tx_data_pkts;
    } else {
        s = &slot(psn);
        // After a timeout, off the plane it failed on when another can take it.
        const uint8_t avoid_planes = s->timed_out ? static_cast<uint8_t>(1u << s->plane) : 0;
        ev_idx = evs_.choose_retx(now_ns, s->ev_idx, avoid_planes, retx_mask());
        if (ev_idx == kNoEv) {
            ++ctr_.ev_none;
            return false;
        }
        const uint8_t plane = evs_.entry(ev_idx).plane;
        if (plane != s->plane) {
            if (s->timed_out) ++ctr_.retx_off_plane;
            // Its bytes are in flight on the new plane now.
            plane_inflight_[s->plane] -= s->len;
            plane_inflight_[plane] += s->len;
        }
        s->timed_out = false;
        ++ctr_.tx_retx_pkts;
        ++ep_->plane_ctr_[plane].tx_retx_pkts;
    }
    const EvEntry &c = evs_.entry(ev_idx);
    if (c.state != EvState::kGood) ++ctr_.ev_fallbacks;
    s->ev_idx = static_cast<uint16_t>(ev_idx);
    s->plane = c.plane;
    ++s->tx_seq;
    s->sent_ns = now_ns;
    s->deadline_ns = now_ns + rto_ns(s->timeouts);
    if (!s->backoff && !send_log_.try_push(LogEntry{psn.value(), s->tx_seq, s->deadline_ns})) {
        s->backoff = true;  // log full (only retransmissions get here): track it by scan
        backoff_.push_back(psn.value());
    }
    const WrEntry &w = sq_[s->wr & sq_mask_];

    const bool last = s->msg_offset + s->len == w.wr.length;
    uint8_t flags = 0;
    if (s->msg_offset == 0) flags |= wire::kFlagFirst;
    if (last) flags |= wire::kFlagLast;
    if (retx) flags |= wire::kFlagRetx;
    if (last || retx || ++pkts_since_ack_req_ >= cfg_.ack_req_every_pkts) {
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

void Qp::mark_acked(TxSlot &s) {
    s.acked = true;
    inflight_bytes_ -= s.len;
    plane_inflight_[s.plane] -= s.len;
    AckedOnPlane &a = acked_[s.plane];
    a.bytes += s.len;
    ++a.pkts;
    a.latest_sent_ns = std::max(a.latest_sent_ns, s.sent_ns);
    if (s.backoff) {
        s.backoff = false;
        for (auto &v : backoff_) {
            if (&slot(Psn(v)) == &s) {
                v = backoff_.back();
                backoff_.pop_back();
                break;
            }
        }
    }
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
    while (sq_head_ != sq_tail_) {
        const WrEntry &w = sq_[sq_head_ & sq_mask_];
        if (w.sent_pkts != w.npkts || distance(w.first_psn + w.npkts, snd_una_) < 0) break;
        if (!send_cq_.try_push(SendCompletion{w.wr.wr_id, WcStatus::kSuccess, w.wr.length, w.msn}))
            break;
        ++ctr_.wr_completed;
        ++sq_head_;
    }
}

void Qp::queue_retx_now(Psn p) {
    TxSlot &s = slot(p);
    if (s.queued) return;
    s.queued = true;
    retx_now_.try_push(p.value());  // one entry per outstanding PSN at most: never full
    became_ready();
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
    if (distance(snd_una_, cum) < 0) {
        ++ctr_.rx_sacks_stale;
    } else {
        while (snd_una_ != cum) {
            TxSlot &s = slot(snd_una_);
            if (!s.acked) {
                mark_acked(s);
                ++ctr_.acked_pkts;
            }
            ++snd_una_;
        }
    }
    // Selective part: bit i covers cum + offset + i.
    uint64_t bits = h.bitmap.get();
    const Psn base = cum + h.sack_offset.get();
    while (bits) {
        const int i = __builtin_ctzll(bits);
        bits &= bits - 1;
        const Psn q = base + static_cast<uint32_t>(i);
        if (!in_flight(q)) continue;
        TxSlot &s = slot(q);
        if (s.acked) continue;
        mark_acked(s);
        ++ctr_.sacked_pkts;
    }
    // The packet that triggered the ack arrived too, bitmap or not.
    if (const Psn t(h.trigger_psn.get()); in_flight(t) && !slot(t).acked) {
        mark_acked(slot(t));
        ++ctr_.sacked_pkts;
    }
    peer_window_pkts_ = uint32_t{h.rwnd_units.get()} * wire::kPsnsPerWindowUnit;
    const bool ecn = h.flags & wire::kAckEcnEcho;
    uint32_t rtt_ns = 0;
    if (const uint32_t ts = h.ts_echo.get(); ts != 0) {
        ++ctr_.rtt_samples;
        // A delayed ack's RTT includes the responder's wait: not a delay signal.
        if (!(h.flags & wire::kAckDelayed)) rtt_ns = static_cast<uint32_t>(now_ns) - ts;
    }
    if (ecn) ++ctr_.rx_ecn_echo;
    // Each plane's CC learns what the ack acknowledged on it; the plane of
    // the echoed EV also learns the ack's signals (its RTT and ECN echo).
    const uint32_t trigger = evs_.find(h.ev_echo.get());
    const uint8_t trigger_plane = trigger == kNoEv ? kMaxPlanes : evs_.entry(trigger).plane;
    for (uint8_t pl = 0; pl < peer_.planes; ++pl) {
        const bool signal = pl == trigger_plane;
        if (!signal && acked_[pl].bytes == 0) continue;
        AckSample a;
        a.now_ns = now_ns;
        a.acked_bytes = acked_[pl].bytes;
        a.rtt_ns = signal ? rtt_ns : 0;
        a.ecn = signal && ecn;
        count_cc(cc_[pl]->on_ack(a));
        cwnd_[pl] = cc_[pl]->window_bytes();
    }
    settle_acked();
    if (trigger != kNoEv) ev_feedback(trigger, ecn, rtt_ns, now_ns);
    apply_peer_status(h.plane_status, now_ns);
    complete_wrs();
    if (window_was_full && has_tx_work(now_ns)) became_ready();
}

void Qp::on_nack(const wire::MrcPacket &p, uint64_t now_ns) {
    if (state_ != QpState::kRts) return;
    ++ctr_.rx_nacks;
    const wire::NackHdr &h = *p.nack;
    const Psn psn = p.psn;
    const auto reason = static_cast<wire::NackReason>(h.reason);
    if (reason == wire::NackReason::kRemoteAccess) return fail(WcStatus::kRemoteAccessError);
    if (reason == wire::NackReason::kUnexpected) return fail(WcStatus::kRemoteProtocolError);
    // The NACK's cumulative PSN is an ack too.
    const Psn cum(h.cum_psn.get());
    if (distance(snd_una_, cum) > 0 && distance(cum, snd_nxt_) >= 0) {
        while (snd_una_ != cum) {
            TxSlot &s = slot(snd_una_);
            if (!s.acked) {
                mark_acked(s);
                ++ctr_.acked_pkts;
            }
            ++snd_una_;
        }
        settle_acked();
        complete_wrs();
    }
    peer_window_pkts_ = uint32_t{h.rwnd_units.get()} * wire::kPsnsPerWindowUnit;
    apply_peer_status(h.plane_status, now_ns);
    if (!in_flight(psn) || slot(psn).acked) {
        ++ctr_.rx_nacks_stale;
        return;
    }
    TxSlot &s = slot(psn);
    if (++s.nacks > cfg_.nack_retry_limit) {
        error_psn_ = psn;
        return fail(WcStatus::kNackRetryExceeded);
    }
    ++ctr_.retx_after_nack;
    switch (reason) {
        case wire::NackReason::kTrimmed:
        case wire::NackReason::kTrimmedLastHop: {
            const bool last_hop = reason == wire::NackReason::kTrimmedLastHop;
            count_cc(cc_[s.plane]->on_trim_nack(now_ns, s.len, last_hop));
            cwnd_[s.plane] = cc_[s.plane]->window_bytes();
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
            queue_retx_now(psn);
            break;
        }
        default:  // NO_RESOURCE, PSN_OUT_OF_WINDOW: the responder needs time
            if (!s.queued) {
                s.queued = true;
                retx_later_.try_push(
                    DelayedRetx{psn.value(), now_ns + cfg_.no_resource_backoff_ns});
                rearm(now_ns);
            }
            break;
    }
}

void Qp::check_timeouts(uint64_t now_ns) {
    while (!send_log_.empty()) {
        const LogEntry e = send_log_.front();
        const Psn p(e.psn);
        const bool live = in_flight(p) && !slot(p).acked && slot(p).tx_seq == e.tx_seq;
        if (live && e.deadline_ns > now_ns) break;
        send_log_.pop();
        if (live && !slot(p).queued) {
            timeout_packet(p, now_ns);
            if (state_ != QpState::kRts) return;
        }
    }
    for (size_t i = 0; i < backoff_.size(); ++i) {
        const Psn p(backoff_[i]);
        if (!in_flight(p)) continue;
        TxSlot &s = slot(p);
        if (!s.acked && !s.queued && s.deadline_ns <= now_ns) {
            timeout_packet(p, now_ns);
            if (state_ != QpState::kRts) return;
        }
    }
}

void Qp::timeout_packet(Psn p, uint64_t now_ns) {
    TxSlot &s = slot(p);
    ++ctr_.ack_timeouts;
    ++s.timeouts;
    const RetryPolicy &r = cfg_.retry;
    const bool forever =
        r.mode == RetryMode::kExponential && r.limit >= RetryPolicy::kMaxExponential;
    if (!forever && s.timeouts > r.limit) {
        error_psn_ = p;
        return fail(WcStatus::kRetryExceeded);
    }
    count_cc(cc_[s.plane]->on_timeout(now_ns, s.len));
    cwnd_[s.plane] = cc_[s.plane]->window_bytes();
    on_ev_timeout(s, now_ns);
    if (!s.backoff) {
        s.backoff = true;  // from now on its deadline grows with each timeout
        backoff_.push_back(p.value());
    }
    s.timed_out = true;
    ++ctr_.retx_after_timeout;
    queue_retx_now(p);
}

}  // namespace mrc
