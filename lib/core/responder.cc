// Responder: PSN tracking over the receive window, direct placement into
// registered memory, immediates in message order, acks and NACKs.
//
// A message's immediate is delivered once every PSN before its last packet
// has arrived, i.e. once the cumulative PSN passes it: that is both "the
// message is complete" and "every earlier message is complete", so
// immediates come out in message order however the packets arrived.
#include <algorithm>
#include <cstring>

#include "core/endpoint.h"
#include "core/qp.h"

namespace mrc {

uint32_t Qp::rwnd_units() const {
    const auto lag = static_cast<uint32_t>(distance(deliver_psn_, epsn_));
    return (rwin_pkts_ - std::min(lag, rwin_pkts_)) / wire::kPsnsPerWindowUnit;
}

uint64_t Qp::sack_bitmap(Psn base) const {
    const uint32_t i = base.value() & rwin_mask_;
    const uint32_t w = i >> 6, b = i & 63;
    const auto nw = static_cast<uint32_t>(rcv_bits_.size());
    const uint64_t lo = rcv_bits_[w] >> b;
    const uint64_t hi = b ? rcv_bits_[(w + 1) % nw] << (64 - b) : 0;
    // Bits at or beyond the window's end alias PSNs one window earlier.
    const int32_t room = distance(base, deliver_psn_ + rwin_pkts_);
    if (room <= 0) return 0;
    return room >= 64 ? (lo | hi) : (lo | hi) & ((1ull << room) - 1);
}

// The first PSN in [from, max_seen) that arrived and no SACK has reported.
bool Qp::next_unreported(Psn from, Psn *out) const {
    if (distance(from, epsn_) > 0) from = epsn_;
    while (distance(from, max_seen_) > 0) {
        const uint32_t i = from.value() & rwin_mask_;
        const uint32_t w = i >> 6, b = i & 63;
        const uint64_t word = unrep_bits_[w] >> b;
        if (word) {
            const Psn p = from + static_cast<uint32_t>(__builtin_ctzll(word));
            if (distance(p, max_seen_) <= 0) return false;
            *out = p;
            return true;
        }
        from += 64 - b;
    }
    return false;
}

void Qp::queue_nack(const wire::MrcPacket &p, uint8_t plane, wire::NackReason r) {
    NackEntry e;
    e.psn = p.psn.value();
    e.reason = static_cast<uint8_t>(r);
    e.flags = p.ecn_ce ? wire::kAckEcnEcho : 0;
    e.ev = p.ev;
    e.ts = p.data ? p.data->tx_ts.get() : 0;
    e.plane = plane;
    if (!nack_q_.try_push(e)) {
        ++ctr_.nacks_dropped;  // the requester's ack timeout recovers
        return;
    }
    became_ready();
}

void Qp::on_probe(const wire::MrcPacket &p, uint8_t plane, uint64_t now_ns) {
    ++ctr_.rx_probes;
    apply_peer_status(p.probe->plane_status, now_ns);
    if (probe_q_.try_push(ProbeEntry{p.probe->probe_id.get(), p.probe->ev.get(), p.probe->ts.get(),
                                     plane, p.probe->flags}))
        became_ready();
}

// Moves epsn over the PSNs that have arrived, clearing their bits so the
// slots are fresh for PSN + window.
void Qp::advance_epsn() {
    for (;;) {
        const uint32_t i = epsn_.value() & rwin_mask_;
        const uint32_t w = i >> 6, b = i & 63;
        const uint64_t word = rcv_bits_[w] >> b;
        if (!(word & 1)) return;
        const uint64_t zeros = ~word;
        uint32_t run = zeros ? static_cast<uint32_t>(__builtin_ctzll(zeros)) : 64;
        run = std::min(run, 64 - b);
        const uint64_t mask = run == 64 ? ~0ull : ((1ull << run) - 1) << b;
        rcv_bits_[w] &= ~mask;
        unrep_bits_[w] &= ~mask;  // the cumulative PSN reports them
        epsn_ += run;
    }
}

void Qp::deliver_imms() {
    if (pending_imm_ == 0) {
        deliver_psn_ = epsn_;
        return;
    }
    while (deliver_psn_ != epsn_) {
        const auto todo = static_cast<uint32_t>(distance(deliver_psn_, epsn_));
        const uint32_t i = deliver_psn_.value() & rwin_mask_;
        const uint32_t w = i >> 6, b = i & 63;
        const uint32_t span = std::min(64 - b, todo);
        uint64_t word = imm_bits_[w] >> b;
        if (span < 64) word &= (1ull << span) - 1;
        if (word == 0) {
            deliver_psn_ += span;
            continue;
        }
        const auto k = static_cast<uint32_t>(__builtin_ctzll(word));
        deliver_psn_ += k;
        const uint32_t j = deliver_psn_.value() & rwin_mask_;
        const ImmEntry &e = imm_vals_[j];
        if (!recv_cq_.push_growing(RecvCompletion{e.imm, e.msn, e.bytes}, cfg_.max_recv_cqe))
            return;  // at its bound: the application has to poll first
        ep_->notify(*this);
        imm_bits_[j >> 6] &= ~(1ull << (j & 63));
        --pending_imm_;
        ++ctr_.imm_delivered;
        ++deliver_psn_;
        if (pending_imm_ == 0) deliver_psn_ = epsn_;
    }
}

void Qp::on_data(const wire::MrcPacket &p, uint8_t plane, uint64_t now_ns) {
    const Psn psn = p.psn;
    const int32_t d = distance(epsn_, psn);
    const uint8_t ce = p.ecn_ce ? wire::kAckEcnEcho : 0;
    if (ce) ++ctr_.rx_ecn_ce;
    last_data_rx_ns_ = now_ns;
    if (reverse_due_ns_ > reverse_next_ns_) update_reverse_due();  // probing (re)starts
    auto set_trigger = [&](uint8_t flags) {
        // An ECN echo is not overwritten by a later unmarked packet.
        if ((ack_trigger_.flags & wire::kAckEcnEcho) && !(flags & wire::kAckEcnEcho) &&
            (ack_pending_ || ack_due_now_))
            return;
        ack_trigger_.psn = psn;
        ack_trigger_.ev = p.ev;
        ack_trigger_.ts = p.data->tx_ts.get();
        ack_trigger_.plane = plane;
        ack_trigger_.flags = flags;
    };

    // Already here (below the cumulative point, or its bit is set): ack
    // again so a lost ack is repaired, never write twice.
    if (d < 0 || (static_cast<uint32_t>(d) < rwin_pkts_ && rbit(psn))) {
        ++ctr_.rx_duplicates;
        // The requester resent it: the ack for it was probably lost (or
        // the resend was needless). The reverse EV of the plane's last ack
        // becomes SUSPECT and is probed at once; this ack goes out on every
        // reverse EV of the plane, in case the others are on dead paths too.
        evs_.reverse_ack_lost(plane);
        reverse_next_ns_ = now_ns;
        update_reverse_due();
        ack_copies_ = EvSet::kReverseEvsPerPlane - 1;
        set_trigger(static_cast<uint8_t>(wire::kAckDuplicate | ce));
        ack_due_now_ = true;
        became_ready();
        return;
    }
    if (static_cast<uint32_t>(distance(deliver_psn_, psn)) >= rwin_pkts_) {
        ++ctr_.rx_out_of_window;
        queue_nack(p, plane, wire::NackReason::kPsnOutOfWindow);
        return;
    }
    if (p.trimmed()) {
        ++ctr_.rx_trimmed;
        queue_nack(p, plane,
                   (p.flags & wire::kFlagTrimLastHop) ? wire::NackReason::kTrimmedLastHop
                                                      : wire::NackReason::kTrimmed);
        return;
    }
    const uint32_t msg_offset = p.data->msg_offset.get();
    if (((p.flags & wire::kFlagFirst) != 0) != (msg_offset == 0) ||
        (p.imm && uint64_t{msg_offset} + p.payload_bytes != p.imm->msg_bytes.get())) {
        ++ctr_.rx_bad_message;
        return;
    }
    // The limit holds immediates that must wait; the one at the cumulative
    // point is delivered at once (and frees the others), so it always gets in.
    if (p.imm && pending_imm_ >= cfg_.max_pending_imm && d != 0) {
        ++ctr_.rx_no_resource;
        queue_nack(p, plane, wire::NackReason::kNoResource);
        return;
    }
    uint8_t *dst = ep_->mrs().resolve_write(p.reth->rkey.get(), p.reth->remote_addr.get(),
                                            p.payload_bytes, pd_);
    if (dst == nullptr) {
        ++ctr_.rx_access_errors;
        queue_nack(p, plane, wire::NackReason::kRemoteAccess);
        return;
    }
    std::memcpy(dst, p.payload, p.payload_bytes);
    ++ctr_.rx_data_pkts;
    ctr_.rx_data_bytes += p.payload_bytes;
    const uint32_t i = psn.value() & rwin_mask_;
    rcv_bits_[i >> 6] |= 1ull << (i & 63);
    unrep_bits_[i >> 6] |= 1ull << (i & 63);
    if (p.imm) {
        if (imm_vals_.empty()) {
            imm_vals_.assign(rwin_pkts_, ImmEntry{});
            ++ctr_.state_grows;
        }
        imm_bits_[i >> 6] |= 1ull << (i & 63);
        imm_vals_[i] = ImmEntry{p.imm->imm.get(), p.data->msn.get(), p.imm->msg_bytes.get()};
        ++pending_imm_;
    }
    const bool gap = distance(max_seen_, psn) > 0;  // PSNs between are missing now
    // Arrived after a PSN sent later (which made a gap, and so an ack): the
    // requester's loss detection is waiting on this one; tell it at once
    // rather than after the delayed-ack wait.
    const bool fills = distance(psn, max_seen_) > 1;
    if (distance(max_seen_, psn) >= 0) max_seen_ = psn + 1;
    bool report_now = false;
    if (d == 0) {
        advance_epsn();
        deliver_imms();
        if (has_unreported_ && distance(epsn_, unreported_) <= 0)
            has_unreported_ = next_unreported(epsn_, &unreported_);
    } else {
        if (!has_unreported_ || distance(unreported_, psn) < 0) unreported_ = psn;
        has_unreported_ = true;
        // One bitmap covers 64 PSNs: ack before what arrived spans more.
        report_now = distance(unreported_, psn) >= int32_t(wire::kSackBitmapBits);
    }

    bytes_since_ack_ += p.payload_bytes;
    set_trigger(ce);
    if ((p.flags & (wire::kFlagAckReq | wire::kFlagLast)) || ce || gap || fills || report_now ||
        bytes_since_ack_ >= cfg_.ack_every_bytes) {
        ack_due_now_ = true;
        became_ready();
    } else if (!ack_pending_) {
        ack_pending_ = true;
        ack_deadline_ns_ = now_ns + cfg_.ack_delay_ns;
        ep_->arm_timer_earlier(*this, ack_deadline_ns_);
    }
}

void Qp::emit_sack(TxPacket &t, uint8_t plane_status) {
    // The bitmap covers the latest 64 PSNs that arrived (ending at the
    // highest one seen), or starts at the cumulative point when that is
    // nearer: every arrival is reported again by the acks that follow it
    // until 64 higher PSNs have arrived, so one lost SACK costs nothing.
    // An arrival below that span that no SACK has covered yet gets a SACK
    // of its own (the bitmap then starts at it).
    const int32_t span = distance(epsn_, max_seen_);
    uint32_t offset = span > int32_t(wire::kSackBitmapBits)
                          ? static_cast<uint32_t>(span) - wire::kSackBitmapBits
                          : 0;
    if (has_unreported_ && distance(epsn_, unreported_) >= 0 &&
        static_cast<uint32_t>(distance(epsn_, unreported_)) < offset)
        offset = static_cast<uint32_t>(distance(epsn_, unreported_));
    wire::SackFields f;
    f.dst_qpn = peer_.dst_qpn;
    f.cum_psn = epsn_;
    f.trigger_psn = ack_trigger_.psn;
    f.sack_offset = static_cast<uint16_t>(offset);
    f.ev_echo = ack_trigger_.ev;
    f.bitmap = sack_bitmap(epsn_ + offset);
    f.ts_echo = ack_trigger_.ts;
    f.rwnd_units = static_cast<uint16_t>(rwnd_units());
    f.flags = ack_trigger_.flags;
    f.plane_status = plane_status;
    const uint8_t plane = ack_plane(ack_trigger_.plane);
    control_packet(t, plane,
                   wire::write_sack(t.hdr, peer_.path[plane], evs_.next_reverse_ev(plane), f));
    last_sack_ = f;
    last_sack_plane_ = plane;
    ack_due_now_ = ack_pending_ = false;
    bytes_since_ack_ = 0;
    ack_trigger_.flags = 0;
    // Its timestamp is echoed once: a later SACK with no new trigger (the
    // next of a series, a window update) carries no RTT sample.
    ack_trigger_.ts = 0;
    last_adv_rwnd_units_ = f.rwnd_units;
    ++ctr_.tx_sacks;
    // Everything in the bitmap is reported now; if arrivals elsewhere are
    // not, another SACK follows at once.
    if (has_unreported_) {
        const Psn base = epsn_ + offset;
        const uint32_t i = base.value() & rwin_mask_;
        const uint32_t w = i >> 6, b = i & 63;
        const auto nw = static_cast<uint32_t>(unrep_bits_.size());
        unrep_bits_[w] &= ~(f.bitmap << b);
        if (b) unrep_bits_[(w + 1) % nw] &= ~(f.bitmap >> (64 - b));
        // unreported_ was the oldest: the next one can only be later.
        has_unreported_ = next_unreported(unreported_, &unreported_);
        if (has_unreported_) ack_due_now_ = true;
    }
}

}  // namespace mrc
