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

bool Qp::can_send_new() const {
    const auto inflight = static_cast<uint32_t>(distance(snd_una_, snd_nxt_));
    if (inflight >= window_pkts()) return false;
    if (inflight_bytes_ > 0 && inflight_bytes_ + cfg_.mtu_payload_bytes > cc_->window_bytes())
        return false;
    return !send_log_.full();
}

uint64_t Qp::rto_ns(uint8_t timeouts) const {
    const uint64_t base = ack_timeout_ns(cfg_.retry.timeout_exp);
    if (cfg_.retry.mode == RetryMode::kLinear) return base;
    return base << std::min<uint8_t>(timeouts, 30);
}

// Builds one data packet: a new one at snd_nxt (retx false) or a
// retransmission of an outstanding PSN.
bool Qp::emit_data(TxPacket &pkt, Psn psn, bool retx, uint64_t now_ns) {
    TxSlot *s;
    EvChoice c;
    if (!retx) {
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
        ++ctr_.tx_data_pkts;
        ctr_.tx_data_bytes += len;
        c = evs_.next();
    } else {
        s = &slot(psn);
        ++ctr_.tx_retx_pkts;
        c = evs_.random_other_than(s->ev);
    }
    const WrEntry &w = sq_[s->wr & sq_mask_];
    s->ev = c.ev;
    s->plane = c.plane;
    ++s->tx_seq;
    s->deadline_ns = now_ns + rto_ns(s->timeouts);
    if (!s->backoff && !send_log_.try_push(LogEntry{psn.value(), s->tx_seq, s->deadline_ns})) {
        s->backoff = true;  // log full (only retransmissions get here): track it by scan
        backoff_.push_back(psn.value());
    }

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
    uint32_t acked_bytes = 0;
    if (distance(snd_una_, cum) < 0) {
        ++ctr_.rx_sacks_stale;
    } else {
        while (snd_una_ != cum) {
            TxSlot &s = slot(snd_una_);
            if (!s.acked) {
                acked_bytes += s.len;
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
        acked_bytes += s.len;
        mark_acked(s);
        ++ctr_.sacked_pkts;
    }
    // The packet that triggered the ack arrived too, bitmap or not.
    if (const Psn t(h.trigger_psn.get()); in_flight(t) && !slot(t).acked) {
        acked_bytes += slot(t).len;
        mark_acked(slot(t));
        ++ctr_.sacked_pkts;
    }
    peer_window_pkts_ = uint32_t{h.rwnd_units.get()} * wire::kPsnsPerWindowUnit;
    AckSample a;
    a.now_ns = now_ns;
    a.acked_bytes = acked_bytes;
    a.ecn = h.flags & wire::kAckEcnEcho;
    a.ev = h.ev_echo.get();
    if (const uint32_t ts = h.ts_echo.get(); ts != 0) {
        a.rtt_ns = static_cast<uint32_t>(now_ns) - ts;
        ++ctr_.rtt_samples;
    }
    if (a.ecn) ++ctr_.rx_ecn_echo;
    cc_->on_ack(a);
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
        complete_wrs();
    }
    peer_window_pkts_ = uint32_t{h.rwnd_units.get()} * wire::kPsnsPerWindowUnit;
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
        case wire::NackReason::kTrimmedLastHop:
            cc_->on_nack(s.len, reason == wire::NackReason::kTrimmed);
            queue_retx_now(psn);
            break;
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
    (void)now_ns;
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
    cc_->on_timeout(s.len);
    if (!s.backoff) {
        s.backoff = true;  // from now on its deadline grows with each timeout
        backoff_.push_back(p.value());
    }
    ++ctr_.retx_after_timeout;
    queue_retx_now(p);
}

}  // namespace mrc
