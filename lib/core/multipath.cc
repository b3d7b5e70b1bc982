// A QP's multipath state: EV feedback from acks, NACKs and timeouts; probes;
// which planes it uses and what it tells the peer about them.
//
// Planes. A plane is usable while no reason to leave it holds (qp.h,
// kPlane*). Rows: an event; columns: what the QP does.
//
// clang-format off
//   event                                                  | reason set / cleared       | then
//   -------------------------------------------------------+----------------------------+--------------------------
//   link down / up (Endpoint::set_plane_up)                | + link / - link, + verify  | probes before use again
//   scorer took the plane down / up (table)                | + table / - table          | table UP needs probe replies
//   operator deny / allow (table)                          | + denied / - denied,       | probes before use again
//                                                          |   + verify                 |
//   peer's acks: plane bit clear / set again               | + peer / - peer, + verify  |
//   losses of plane_fail_timeouts distinct EVs, each sent  | + failed                   | its packets in flight are
//   after the latest packet the plane delivered; or every  |                            | found lost and resent on
//   active EV of the plane out of use                      |                            | other planes
//   probe_successes probe replies in a row on the plane    | - failed, - verify         | usable when nothing else
//                                                          |                            | holds the plane
// clang-format on
//
// While failed, verify or table hold (and link, denied and peer do not),
// the QP probes the plane: one probe per probe interval on its active EVs
// in turn (for table alone, one QP per endpoint and interval). Data and
// acks never go to a plane the QP does not use; probe replies always go
// back on the plane the probe came in on. The peer is told, in the
// plane-status bitmap of every ack, NACK and probe, which planes this QP
// does not use for its own reasons (link, table, denied, failed).
#include <algorithm>

#include "core/endpoint.h"
#include "core/qp.h"

namespace mrc {

void Qp::sync_planes(uint64_t now_ns) {
    if (!planes_dirty_) return;
    planes_dirty_ = false;
    const uint8_t link = ep_->link_up_mask();
    const uint8_t table = ep_->table_down_mask();
    const uint8_t denied = ep_->denied_mask();
    for (uint8_t p = 0; p < peer_.planes; ++p) {
        set_plane_reason(p, kPlaneLink, !((link >> p) & 1), now_ns);
        set_plane_reason(p, kPlaneTable, (table >> p) & 1, now_ns);
        set_plane_reason(p, kPlaneDenied, (denied >> p) & 1, now_ns);
    }
    update_usable(now_ns);
}

void Qp::set_plane_reason(uint8_t plane, uint8_t reason, bool on, uint64_t now_ns) {
    PlaneHealth &h = plane_[plane];
    if (on == ((h.down & reason) != 0)) return;
    const bool was_usable = h.down == 0;
    if (on) {
        h.down |= reason;
        h.probe_ok = 0;
        h.probe_lost = 0;
        // Just failed: it will not answer yet.
        h.next_probe_ns = now_ns + cfg_.ev.probe_interval_ns;
        if (was_usable) ++ctr_.plane_failovers;
        return;
    }
    h.down &= static_cast<uint8_t>(~reason);
    // Back from something the QP did not see for itself: prove it first,
    // starting now. (The scorer's table goes UP only on probe replies.)
    if (reason == kPlaneLink || reason == kPlaneDenied || reason == kPlanePeer) {
        h.down |= kPlaneVerify;
        h.next_probe_ns = now_ns;
    }
    if (!was_usable && h.down == 0) ++ctr_.plane_recoveries;
}

void Qp::update_usable(uint64_t now_ns) {
    retx_blocked_ = false;  // a resend that found no EV may find one now
    uint8_t m = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        if (plane_[p].down == 0) m |= static_cast<uint8_t>(1u << p);
    usable_mask_ = m;
    update_probe_due(now_ns);
}

uint8_t Qp::advertised_status() const {
    uint8_t m = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        if (!(plane_[p].down & kPlaneAdvertised)) m |= static_cast<uint8_t>(1u << p);
    return m;
}

void Qp::apply_peer_status(uint8_t status, uint64_t now_ns) {
    bool changed = false;
    for (uint8_t p = 0; p < peer_.planes; ++p) {
        const bool down = !((status >> p) & 1);
        if (down != ((plane_[p].down & kPlanePeer) != 0)) {
            set_plane_reason(p, kPlanePeer, down, now_ns);
            changed = true;
        }
    }
    if (changed) update_usable(now_ns);
}

uint8_t Qp::ack_plane(uint8_t trigger_plane) const {
    if ((usable_mask_ >> trigger_plane) & 1 || usable_mask_ == 0) return trigger_plane;
    for (uint8_t k = 1; k < peer_.planes; ++k) {
        const auto p = static_cast<uint8_t>((trigger_plane + k) % peer_.planes);
        if ((usable_mask_ >> p) & 1) return p;
    }
    return trigger_plane;
}

void Qp::count_cc(uint8_t verdict) {
    if (verdict & kCcDecreased) ++ctr_.cc_decreases;
    if (verdict & kCcQuickAdapt) ++ctr_.cc_quick_adapts;
    if (verdict & kCcRepath) ++ctr_.cc_repaths;
}

void Qp::ev_feedback(uint32_t i, bool ecn, uint32_t rtt_ns, uint64_t now_ns) {
    const uint8_t plane = evs_.entry(i).plane;
    PlaneCounters &pc = ep_->plane_ctr_[plane];
    ++pc.rx_acks;
    if (ecn) ++pc.rx_ecn_echoes;
    if (rtt_ns != 0) {
        ++pc.rtt_samples;
        pc.rtt_sum_ns += rtt_ns;
    }
    // Every ECN echo moves traffic off the EV: MRC fabrics do not mark at
    // the last hop, so a mark says this path is busier than its siblings.
    // Whether the window shrinks as well is the CC's call (delay).
    if (ecn) {
        if (evs_.on_ecn(i, now_ns)) ++ctr_.ev_skips;
    } else {
        evs_.on_clean_ack(i);
    }
}

void Qp::on_path_loss(TxSlot &s, bool timeout, uint64_t now_ns) {
    const uint32_t i = s.ev_idx;
    const uint8_t plane = evs_.entry(i).plane;
    bool fresh = true;
    switch (timeout ? evs_.on_timeout(i, now_ns) : evs_.on_loss(i, now_ns, &fresh)) {
        case EvTimeout::kRetired:
            ++ctr_.ev_retired;
            break;
        case EvTimeout::kFloorHeld:
            ++ctr_.ev_floor_holds;
            break;
        case EvTimeout::kSkipped:
            ++ctr_.ev_skips;
            break;
        case EvTimeout::kAlreadyOut:
            return;  // a second packet on an EV already out counts once
    }
    PlaneHealth &h = plane_[plane];
    // Only a packet sent after the latest one the plane delivered says the
    // plane may be down (packets sent together also get lost together), and
    // only once per EV: losses of distinct EVs are what fail a plane.
    if (fresh && s.sent_ns > h.ok_sent_ns) {
        if (h.losses == 0 || s.sent_ns < h.fail_sent_ns) h.fail_sent_ns = s.sent_ns;
        if (h.losses < UINT8_MAX) ++h.losses;
    }
    bool all_out = true;
    for (uint32_t j = 0; j < evs_.per_plane() && all_out; ++j) {
        const EvState st = evs_.entry(evs_.active_entry(plane, j)).state;
        all_out = st == EvState::kAssumedBad || st == EvState::kDenied;
    }
    if (h.losses >= cfg_.ev.plane_fail_timeouts || all_out)
        set_plane_reason(plane, kPlaneFailed, true, now_ns);
    update_usable(now_ns);
}

void Qp::plane_delivered(uint8_t plane, uint64_t sent_ns) {
    PlaneHealth &h = plane_[plane];
    if (sent_ns > h.ok_sent_ns) h.ok_sent_ns = sent_ns;
    if (h.losses && sent_ns >= h.fail_sent_ns) h.losses = 0;  // sent later, got through
}

void Qp::set_ev_denied(uint16_t ev, bool denied, uint64_t now_ns) {
    if (state_ != QpState::kRtr && state_ != QpState::kRts) return;
    const uint32_t i = evs_.find(ev);
    if (i == kNoEv) return;
    if (denied) {
        evs_.deny(i, now_ns);
        probes_out_.erase(std::remove(probes_out_.begin(), probes_out_.end(), i),
                          probes_out_.end());
        // Was it the plane's outstanding probe? Then the plane probes again.
        PlaneHealth &h = plane_[evs_.entry(i).plane];
        if (h.probe_entry == i) h.probe_entry = kNoEv;
    } else {
        evs_.allow(i, now_ns);
        retx_blocked_ = false;  // a resend that found no EV may find one now
    }
    update_probe_due(now_ns);
    became_ready();
}

// ---- probes ---------------------------------------------------------------------

// A probe is answered at once: lost when its reply is later than two
// smoothed RTTs and four variations (adaptive), or the fixed ack timeout.
uint64_t Qp::probe_timeout_ns() const {
    if (cfg_.ev.probe_timeout_ns) return cfg_.ev.probe_timeout_ns;
    if (!cfg_.retry.adaptive) return ack_timeout_ns(cfg_.retry.timeout_exp);
    uint64_t t = 0;
    for (uint8_t p = 0; p < peer_.planes; ++p) {
        const PlaneRtt &r = known_rtt(p);
        if (r.has_sample()) t = std::max(t, 2 * r.srtt_ns() + 4 * r.rttvar_ns());
    }
    if (t == 0) return rto_ns(0);  // nothing measured yet
    return std::max(t, 2 * cfg_.loss.min_reo_wnd_ns);
}

bool Qp::wants_plane_probe(uint8_t plane) const {
    const uint8_t d = plane_[plane].down;
    return (d & kPlaneProbed) && !(d & kPlaneUnprobed);
}

// An ASSUMED_BAD EV is probed on its own while its plane is in use (or
// being verified); on a plane that is out, the plane's probes cover it.
bool Qp::wants_ev_probe(const EvEntry &e) const {
    return (plane_[e.plane].down & static_cast<uint8_t>(~kPlaneVerify)) == 0;
}

void Qp::update_probe_due(uint64_t now_ns) {
    const uint64_t timeout = probe_timeout_ns();
    uint64_t due = UINT64_MAX;
    for (const uint32_t i : probes_out_)
        due = std::min(due, evs_.detail(i).probe_at_ns + timeout);
    uint64_t send = UINT64_MAX;
    for (uint8_t p = 0; p < peer_.planes; ++p)
        if (wants_plane_probe(p) && plane_[p].probe_entry == kNoEv)
            send = std::min(send, plane_[p].next_probe_ns);
    for (const uint32_t i : evs_.assumed_bad()) {
        const EvEntry &e = evs_.entry(i);
        if (!e.probe_out && wants_ev_probe(e)) send = std::min(send, evs_.detail(i).probe_at_ns);
    }
    // The budget of probes per interval is spent: the rest wait for the next one.
    if (send != UINT64_MAX && probes_in_window_ >= cfg_.ev.max_probes_per_interval)
        send = std::max(send, probe_window_start_ns_ + cfg_.ev.probe_interval_ns);
    probe_due_ns_ = std::min(due, send);
    // Whatever changed it (an ack, a reply, a table), the timer must know.
    if (probe_due_ns_ != UINT64_MAX && state_ == QpState::kRts)
        ep_->arm_timer_earlier(*this, std::max(probe_due_ns_, now_ns));
}

void Qp::probe_lost(uint32_t i, uint64_t now_ns) {
    const uint8_t plane = evs_.entry(i).plane;
    evs_.on_probe_lost(i, now_ns);
    ++ctr_.probes_lost;
    ++ep_->plane_ctr_[plane].probes_lost;
    PlaneHealth &h = plane_[plane];
    if (h.probe_entry == i) {
        h.probe_entry = kNoEv;
        if (h.probe_lost < UINT8_MAX) ++h.probe_lost;
        h.next_probe_ns = now_ns + EvSet::plane_probe_wait_ns(cfg_.ev, h.probe_lost);
    }
    h.probe_ok = 0;
}

void Qp::expire_probes(uint64_t now_ns) {
    const uint64_t timeout = probe_timeout_ns();
    for (size_t k = 0; k < probes_out_.size();) {
        const uint32_t i = probes_out_[k];
        if (now_ns >= evs_.detail(i).probe_at_ns + timeout) {
            probes_out_[k] = probes_out_.back();
            probes_out_.pop_back();
            probe_lost(i, now_ns);
        } else {
            ++k;
        }
    }
    update_probe_due(now_ns);
    if (probe_due_ns_ <= now_ns) became_ready();
}

void Qp::send_probe(TxPacket &t, uint32_t i, uint64_t now_ns) {
    evs_.on_probe_sent(i, now_ns);
    const EvEntry &e = evs_.entry(i);
    wire::ProbeFields f;
    f.reply = false;
    f.dst_qpn = peer_.dst_qpn;
    f.probe_id = (i << 16) | evs_.detail(i).probe_seq;
    f.ev = e.ev;
    f.ts = static_cast<uint32_t>(now_ns);
    f.plane_status = advertised_status();
    control_packet(t, e.plane, wire::write_probe(t.hdr, peer_.path[e.plane], e.ev, f));
    probes_out_.push_back(i);
    ++probes_in_window_;
    ++ctr_.tx_probes;
    ++ep_->plane_ctr_[e.plane].tx_probes;
}

uint32_t Qp::emit_probes(TxPacket *out, uint32_t max, uint64_t now_ns) {
    expire_probes(now_ns);
    const EvConfig &c = cfg_.ev;
    if (now_ns - probe_window_start_ns_ >= c.probe_interval_ns) {
        probe_window_start_ns_ = now_ns;
        probes_in_window_ = 0;
    }
    auto budget = [&] { return probes_in_window_ < c.max_probes_per_interval; };
    uint32_t n = 0;
    for (uint8_t p = 0; p < peer_.planes && n < max && budget(); ++p) {
        PlaneHealth &h = plane_[p];
        if (!wants_plane_probe(p) || h.probe_entry != kNoEv || now_ns < h.next_probe_ns) continue;
        h.next_probe_ns = now_ns + c.probe_interval_ns;
        // Only the scorer's table holds it: one QP of the endpoint probes per interval.
        if (!(h.down & (kPlaneFailed | kPlaneVerify)) &&
            !ep_->take_plane_probe_token(p, now_ns, c.probe_interval_ns))
            continue;
        for (uint32_t k = 0; k < evs_.per_plane(); ++k) {
            const uint32_t i = evs_.active_entry(p, h.probe_cursor++ % evs_.per_plane());
            const EvEntry &e = evs_.entry(i);
            if (e.probe_out || e.state == EvState::kDenied) continue;
            send_probe(out[n++], i, now_ns);
            h.probe_entry = i;
            break;
        }
    }
    const std::vector<uint32_t> &bad = evs_.assumed_bad();
    const auto m = static_cast<uint32_t>(bad.size());
    for (uint32_t k = 0; k < m && n < max && budget(); ++k) {
        const uint32_t i = bad[(probe_bad_cursor_ + k) % m];
        const EvEntry &e = evs_.entry(i);
        if (e.probe_out || now_ns < evs_.detail(i).probe_at_ns || !wants_ev_probe(e)) continue;
        send_probe(out[n++], i, now_ns);
    }
    ++probe_bad_cursor_;
    update_probe_due(now_ns);
    return n;
}

void Qp::on_probe_reply(const wire::MrcPacket &p, uint8_t plane_in, uint64_t now_ns) {
    ++ctr_.rx_probe_replies;
    const uint8_t flags = p.probe->flags;
    if (flags & wire::kProbeReverse) return on_reverse_probe_reply(p, plane_in, now_ns);
    if (state_ != QpState::kRts) return;
    if (flags & wire::kProbeKeepalive) {
        ++ctr_.rx_keepalive_replies;  // heard: that is all it is for
        return;
    }
    const uint32_t id = p.probe->probe_id.get();
    const uint32_t i = id >> 16;
    if (i >= evs_.size() || !evs_.entry(i).probe_out || evs_.detail(i).probe_seq != (id & 0xffff) ||
        evs_.entry(i).ev != p.probe->ev.get()) {
        ++ctr_.rx_probe_replies_stale;
        return;
    }
    probes_out_.erase(std::find(probes_out_.begin(), probes_out_.end(), i));
    const uint8_t plane = evs_.entry(i).plane;
    const uint64_t sent_ns = evs_.detail(i).probe_at_ns;  // while out: when it was sent
    ++ep_->plane_ctr_[plane].probes_ok;
    if (now_ns > sent_ns) rtt_sample(plane, now_ns - sent_ns, true);
    if (evs_.on_probe_reply(i, now_ns)) ++ctr_.ev_revived;
    PlaneHealth &h = plane_[plane];
    plane_delivered(plane, sent_ns);
    h.probe_lost = 0;
    if (h.probe_entry == i) h.probe_entry = kNoEv;
    if ((h.down & kPlaneProbed) && ++h.probe_ok >= cfg_.ev.probe_successes) {
        set_plane_reason(plane, kPlaneFailed, false, now_ns);
        set_plane_reason(plane, kPlaneVerify, false, now_ns);
    }
    apply_peer_status(p.probe->plane_status, now_ns);
    update_usable(now_ns);
    if (has_tx_work(now_ns)) became_ready();
}

// ---- the responder's reverse EVs ----------------------------------------------------

// About once per RTT (the QP's own measure, else the probe interval) while
// some reverse EV is not known GOOD; once every one is, a refresh every
// kReverseRefreshRtts RTTs (acks re-report arrivals, so a reverse EV that
// dies costs little until then, and a duplicate makes it SUSPECT at once).
// Never more often than reverse_probe_min_ns. Refreshes are bounded per
// peer, not per QP: with more than kRefreshQpsPerPeer QPs on the peer link
// each one's refresh spacing grows in proportion (4,000 QPs to a peer
// refresh about once per RTT in all, not 250 times). A QP with a reverse
// EV in doubt probes at its own pace regardless.
Qp::ReverseTiming Qp::reverse_timing() const {
    const uint64_t srtt = srtt_max_ns();
    const uint64_t rtt =
        std::max(cfg_.ev.reverse_probe_min_ns, srtt ? srtt : cfg_.ev.probe_interval_ns);
    bool all_good = true;
    for (uint8_t p = 0; p < peer_.planes && all_good; ++p)
        for (uint32_t k = 0; k < EvSet::kReverseEvsPerPlane && all_good; ++k)
            all_good = evs_.reverse(p, k).state == RevState::kGood;
    ReverseTiming t;
    t.cadence = all_good ? kReverseRefreshRtts * rtt : rtt;
    t.spacing = t.cadence;
    if (all_good && link_ != nullptr && link_->members.size() > kRefreshQpsPerPeer)
        t.spacing = t.cadence * link_->members.size() / kRefreshQpsPerPeer;
    // While data arrived within 16 cadences, and at least until the next
    // probe of a stretched spacing falls due (one refresh after data stops).
    t.window = std::max(16 * t.cadence, t.spacing + t.cadence);
    return t;
}

// Probing runs while data arrives (within the last 16 cadences) and
// whenever a reverse probe is out (to give it up in time). Kept in
// reverse_due_ns_, recomputed when something it depends on changes.
void Qp::update_reverse_due() {
    reverse_due_ns_ = UINT64_MAX;
    if (state_ != QpState::kRtr && state_ != QpState::kRts) return;
    if (cfg_.ev.reverse_probe_min_ns == 0) return;
    uint64_t due = UINT64_MAX;
    const uint64_t timeout = probe_timeout_ns();
    for (uint8_t p = 0; p < peer_.planes; ++p)
        for (uint32_t k = 0; k < EvSet::kReverseEvsPerPlane; ++k) {
            const ReverseEv &r = evs_.reverse(p, k);
            if (r.probe_out) due = std::min(due, r.probe_sent_ns + timeout);
        }
    if (last_data_rx_ns_ != 0 && reverse_next_ns_ < last_data_rx_ns_ + reverse_timing().window)
        due = std::min(due, reverse_next_ns_);
    reverse_due_ns_ = due;
}

void Qp::expire_reverse_probes(uint64_t now_ns) {
    const uint64_t timeout = probe_timeout_ns();
    for (uint8_t p = 0; p < peer_.planes; ++p)
        for (uint32_t k = 0; k < EvSet::kReverseEvsPerPlane; ++k) {
            const ReverseEv &r = evs_.reverse(p, k);
            if (r.probe_out && now_ns >= r.probe_sent_ns + timeout) {
                evs_.on_reverse_probe_lost(p, k);
                ++ctr_.reverse_evs_replaced;
            }
        }
    update_reverse_due();
}

uint32_t Qp::emit_reverse_probes(TxPacket *out, uint32_t max, uint64_t now_ns) {
    expire_reverse_probes(now_ns);  // recomputes reverse_due_ns_
    // The same rule as update_reverse_due(): the probe scheduled at
    // reverse_next_ns_ goes out if it fell while data still arrived.
    if (max == 0 || cfg_.ev.reverse_probe_min_ns == 0 || last_data_rx_ns_ == 0 ||
        now_ns < reverse_next_ns_)
        return 0;
    const ReverseTiming timing = reverse_timing();
    if (reverse_next_ns_ >= last_data_rx_ns_ + timing.window) return 0;
    reverse_next_ns_ = now_ns + timing.spacing;
    // The planes acks may take, in turn.
    const uint8_t planes = usable_mask_ ? usable_mask_ : allowed_planes();
    for (uint8_t k = 0; k < peer_.planes; ++k) {
        const auto plane = static_cast<uint8_t>((reverse_plane_cursor_ + k) % peer_.planes);
        if (!((planes >> plane) & 1)) continue;
        const uint32_t sl = evs_.reverse_probe_slot(plane);
        if (sl == kNoEv) continue;  // one is out on this plane
        reverse_plane_cursor_ = static_cast<uint8_t>((plane + 1) % peer_.planes);
        evs_.on_reverse_probe_sent(plane, sl, now_ns);
        const ReverseEv &r = evs_.reverse(plane, sl);
        wire::ProbeFields f;
        f.reply = false;
        f.flags = wire::kProbeReverse;
        f.dst_qpn = peer_.dst_qpn;
        f.probe_id = (uint32_t{plane} << 24) | (sl << 16) | r.probe_seq;
        f.ev = r.ev;
        f.ts = static_cast<uint32_t>(now_ns);
        f.plane_status = advertised_status();
        control_packet(out[0], plane, wire::write_probe(out[0].hdr, peer_.path[plane], r.ev, f));
        ++ctr_.tx_reverse_probes;
        update_reverse_due();
        return 1;
    }
    update_reverse_due();
    return 0;
}

void Qp::on_reverse_probe_reply(const wire::MrcPacket &p, uint8_t plane_in, uint64_t now_ns) {
    const uint32_t id = p.probe->probe_id.get();
    const uint32_t plane = id >> 24, sl = (id >> 16) & 0xff;
    if (plane >= peer_.planes || sl >= EvSet::kReverseEvsPerPlane || plane != plane_in) {
        ++ctr_.rx_probe_replies_stale;
        return;
    }
    const uint32_t ts = p.probe->ts.get();
    const uint64_t rtt_ns = static_cast<uint32_t>(now_ns) - ts;
    if (!evs_.on_reverse_probe_reply(uint8_t(plane), sl, uint16_t(id & 0xffff),
                                     p.probe->ev.get())) {
        ++ctr_.rx_probe_replies_stale;
        // Given up on (its EV already replaced), it still measured the
        // path: a timeout shorter than the RTT would otherwise give up on
        // every probe and never learn better (thousands of QPs that only
        // receive, behind a deep queue).
        if (ts != 0 && rtt_ns <= cfg_.retry.max_rto_ns) rtt_sample(uint8_t(plane), rtt_ns, true);
        return;
    }
    ++ctr_.reverse_probes_ok;
    update_reverse_due();
    if (ts != 0) rtt_sample(uint8_t(plane), rtt_ns, true);
    apply_peer_status(p.probe->plane_status, now_ns);
}

}  // namespace mrc
