// The simulated fabric between the hosts: each plane's ECMP paths (queue,
// impairments, failures), a limited plane's core, the last hop into the
// receiver, and delivery (simulator.h has the model's parts).
#include "sim/simulator.h"

namespace mrc::sim::detail {

void Simulator::drop(const Pkt &p) {
    ++r_.packets_dropped_by_fabric;
    // Charge the drop to the PSN whose retry budget it costs.
    const uint32_t qpn = frame_qpn(p.hdr);
    uint32_t psn = frame_psn(p.hdr);
    const size_t mrc = frame_mrc(p.hdr);
    const auto op = static_cast<wire::Opcode>(p.hdr[mrc]);
    if (op == wire::Opcode::kSack) {
        const auto *s =
            reinterpret_cast<const wire::SackHdr *>(p.hdr + mrc + sizeof(wire::BaseHdr));
        psn = s->trigger_psn.get();
    }
    const uint32_t app = app_of_qpn_[p.dst][qpn];
    if (!is_receiver(p.src) && p.data) ++r_.data_packets_dropped;
    if (app != UINT32_MAX) ++drops_of_psn_[(uint64_t{app} << 24) | psn];
}

bool Simulator::path_down(int dir, uint32_t plane, uint32_t k, uint64_t t_ps) const {
    for (const Failure &fl : cfg_.fabric.failures) {
        if (uint32_t(fl.plane) != plane || (fl.path >= 0 && uint32_t(fl.path) != k)) continue;
        if (fl.dir >= 0 && fl.dir != dir) continue;
        if (failure_active(fl, t_ps / 1000)) return true;
    }
    return false;
}

// A packet enters its path's switch queue at t_ps: impairments, then the
// queue, then propagation to the last hop.
void Simulator::through_path(uint32_t pi, uint64_t t_ps) {
    Pkt &p = pkts_[pi];
    const int dir = is_receiver(p.src) ? 1 : 0;
    const FabricConfig &f = cfg_.fabric;
    PathState &ps = path(dir, p.plane, p.path);
    const Impairment &im = ps.imp;
    if (path_down(dir, p.plane, p.path, t_ps)) {
        drop(p);
        return free_pkt(pi);
    }
    if (im.burst_enter > 0) {
        if (!ps.burst_bad && rng_.chance(im.burst_enter))
            ps.burst_bad = true;
        else if (ps.burst_bad && rng_.chance(im.burst_exit))
            ps.burst_bad = false;
        if (ps.burst_bad) {
            drop(p);
            return free_pkt(pi);
        }
    }
    if (rng_.chance(im.loss) || rng_.chance(f.loss)) {
        drop(p);
        return free_pkt(pi);
    }
    const uint64_t backlog = backlog_bytes(ps.busy_until_ps, t_ps, path_gbps_);
    if (!admit(p, backlog, im.trim_bytes, false)) return free_pkt(pi);
    if (im.ecn_bytes && backlog > im.ecn_bytes) mark_ce(p);
    const bool dup = rng_.chance(im.duplicate);
    p.extra_delay_ps = rng_.chance(im.reorder) ? im.reorder_ns * 1000 : 0;
    if (p.extra_delay_ps) note_fate(p, kHeldBack);
    if (dup) note_fate(p, kDuplicated);
    const uint64_t depart =
        std::max(t_ps, ps.busy_until_ps) + ser_ps(p.hdr_len + p.payload_len, path_gbps_);
    ps.busy_until_ps = depart;
    // A plane with a PlaneLimit: its core queue next; otherwise on to the last hop.
    const bool core = limit_of_[size_t(dir) * f.planes + p.plane] >= 0;
    if (core)
        push(depart, Ev::kCore, pi);
    else
        push(depart + f.delay_ns * 1000 + p.extra_delay_ps, Ev::kLastHop, pi);
    if (dup) {
        const uint32_t di = alloc_pkt();
        pkts_[di] = pkts_[pi];
        pkts_[di].extra_delay_ps = 0;
        ++r_.packets_duplicated;
        const uint64_t d2 = depart + ser_ps(pkts_[di].hdr_len + pkts_[di].payload_len, path_gbps_);
        ps.busy_until_ps = d2;
        if (core)
            push(d2, Ev::kCore, di);
        else
            push(d2 + f.delay_ns * 1000, Ev::kLastHop, di);
    }
}

void Simulator::mark_ce(Pkt &p) {
    const bool marked =
        frame_ipv6(p.hdr)
            ? wire::mark_ce(*reinterpret_cast<wire::Ipv6Hdr *>(p.hdr + sizeof(wire::EthHdr)))
            : wire::mark_ce(*reinterpret_cast<wire::Ipv4Hdr *>(p.hdr + sizeof(wire::EthHdr)));
    if (marked) ++r_.packets_ecn_marked;
}

// The core of a plane with a PlaneLimit: one queue at its rate for every
// path of the plane, marking ECN above its threshold.
void Simulator::through_core(uint32_t pi, uint64_t t_ps) {
    Pkt &p = pkts_[pi];
    const int dir = is_receiver(p.src) ? 1 : 0;
    const FabricConfig &f = cfg_.fabric;
    const PlaneLimit &lim = f.plane_limits[size_t(limit_of_[size_t(dir) * f.planes + p.plane])];
    QueueState &q = core_[size_t(dir) * f.planes + p.plane];
    const uint64_t backlog =
        q.busy_until_ps > t_ps
            ? static_cast<uint64_t>(double(q.busy_until_ps - t_ps) * lim.gbps * (1.0 / 8000.0))
            : 0;
    if (!admit(p, backlog, 0, false)) return free_pkt(pi);
    if (lim.ecn_bytes && backlog > lim.ecn_bytes) mark_ce(p);
    const uint64_t ser = static_cast<uint64_t>(
        double(p.hdr_len + p.payload_len + kWireOverheadBytes) * 8000.0 / lim.gbps);
    const uint64_t depart = std::max(t_ps, q.busy_until_ps) + ser;
    q.busy_until_ps = depart;
    push(depart + f.delay_ns * 1000 + p.extra_delay_ps, Ev::kLastHop, pi);
}

// Queue admission with `backlog` bytes queued: a data packet is trimmed
// above trim_bytes (when set), any packet dropped above the queue limit.
// False when dropped.
bool Simulator::admit(Pkt &p, uint64_t backlog, uint64_t trim_bytes, bool last_hop) {
    r_.max_queue_bytes = std::max(r_.max_queue_bytes, backlog);
    series_max_queue_ = std::max(series_max_queue_, backlog);
    if (last_hop) r_.max_lasthop_queue_bytes = std::max(r_.max_lasthop_queue_bytes, backlog);
    if (p.data && trim_bytes && backlog > trim_bytes) {
        if (wire::trim_data_headers(p.hdr, p.hdr_len, p.payload_len, last_hop)) {
            p.payload = nullptr;
            p.payload_len = 0;
            p.data = false;
            ++r_.packets_trimmed;
        }
        return true;
    }
    if (backlog > uint64_t{cfg_.fabric.queue_kb} * 1024) {
        drop(p);
        return false;
    }
    return true;
}

// The last hop: the receiving host's link, shared by every path of the plane.
void Simulator::last_hop_arrive(uint32_t pi, uint64_t t_ps) {
    Pkt &p = pkts_[pi];
    const FabricConfig &f = cfg_.fabric;
    QueueState &lq = last_hop(p.dst, p.plane);
    const uint64_t backlog = backlog_bytes(lq.busy_until_ps, t_ps, f.link_gbps);
    if (!admit(p, backlog, uint64_t{f.lasthop_trim_kb} * 1024, true)) return free_pkt(pi);
    if (f.lasthop_ecn_kb && p.data && backlog > uint64_t{f.lasthop_ecn_kb} * 1024) mark_ce(p);
    const uint64_t depart =
        std::max(t_ps, lq.busy_until_ps) + ser_ps(p.hdr_len + p.payload_len, f.link_gbps);
    lq.busy_until_ps = depart;
    push(depart, Ev::kDeliver, pi);
}

// What the fabric did to a data packet's PSN, for the accounting of
// resends: one that arrives twice must have been held back or duplicated.
void Simulator::note_fate(const Pkt &p, uint8_t bit) {
    if (!p.data || is_receiver(p.src)) return;
    const uint32_t app = app_of_qpn_[p.dst][frame_qpn(p.hdr)];
    if (app != UINT32_MAX) fate_of(app, frame_psn(p.hdr)) |= bit;
}

void Simulator::deliver(uint32_t pi, uint64_t t_ps) {
    const Pkt &p = pkts_[pi];
    const uint32_t h = p.dst;
    const uint32_t qpn = frame_qpn(p.hdr);
    if (p.data && !is_receiver(p.src)) {
        const uint32_t app = app_of_qpn_[h][qpn];
        if (app != UINT32_MAX) {
            uint8_t &f = fate_of(app, frame_psn(p.hdr));
            if (f & kArrived) {
                ++r_.data_arrived_again;
                if (!(f & (kHeldBack | kDuplicated))) ++r_.needless_resends;
            }
            f |= kArrived;
        }
    }
    ep_[h]->on_packet(p.hdr, p.hdr_len, p.payload, p.payload_len, p.plane, t_ps / 1000);
    free_pkt(pi);
    if (qpn < app_of_qpn_[h].size() && app_of_qpn_[h][qpn] != UINT32_MAX) {
        const uint32_t app = app_of_qpn_[h][qpn];
        app_qp(app);
        kick_tx(apps_[app].sender, t_ps);  // a completion may have posted more
    }
    kick_tx(h, t_ps);
    ensure_timer(h, t_ps);
}

void Simulator::link_event(uint32_t fi, uint64_t t_ps) {
    const Failure &fl = cfg_.fabric.failures[fi];
    const uint64_t now_ns = t_ps / 1000;
    const bool up = !failure_active(fl, now_ns);
    for (uint32_t h = 0; h < ep_.size(); ++h) {
        if ((fl.link == 1) != is_receiver(h)) continue;
        ep_[h]->set_plane_up(static_cast<uint8_t>(fl.plane), up);
        kick_tx(h, t_ps);
        ensure_timer(h, t_ps);
    }
    const uint64_t next = failure_next_change(fl, now_ns);
    if (next != UINT64_MAX) push(next * 1000, Ev::kLink, fi);
}

}  // namespace mrc::sim::detail
