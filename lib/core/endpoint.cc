#include "core/endpoint.h"

#include <algorithm>
#include <string>

namespace mrc {

Endpoint::Endpoint(const EndpointConfig &cfg)
    : cfg_(cfg),
      qps_(cfg.max_qps + 1),
      mrs_(cfg.max_mrs),
      // QPNs 1..max_qps, then one id per peer link (at most one per QP).
      timers_(2 * (cfg.max_qps + 1), cfg.timer_slots, cfg.timer_tick_ns) {
    if (cfg_.planes == 0) cfg_.planes = 1;
    if (cfg_.planes > kMaxPlanes) cfg_.planes = kMaxPlanes;
    for (uint32_t q = cfg.max_qps; q >= 1; --q)
        free_qpns_.push_back(q);
    ready_.init(2 * (cfg.max_qps + 1));
    notified_.init(2 * (cfg.max_qps + 1));
    link_up_mask_ = static_cast<uint8_t>((1u << cfg_.planes) - 1);
    link_by_timer_.assign(cfg.max_qps + 1, nullptr);
    for (uint32_t i = cfg.max_qps + 1; i-- > 0;)
        free_link_timers_.push_back(cfg.max_qps + 1 + i);
}

Endpoint::~Endpoint() {
    // QPs first, while the path states they hold exist; none wakes another.
    destroying_ = true;
    qps_.clear();
}

Result<Qp *> Endpoint::create_qp(const QpConfig &cfg) {
    if (free_qpns_.empty())
        return Error{"no free QP (max_qps " + std::to_string(cfg_.max_qps) + ")"};
    if (auto r = EvSet::check(cfg.ev, cfg_.planes); !r)
        return Error{"QP config: " + r.error().message + " (evs " + std::to_string(cfg.ev.evs) +
                     ", backup_per_plane " + std::to_string(cfg.ev.backup_per_plane) +
                     ", min_active " + std::to_string(cfg.ev.min_active) + ", planes " +
                     std::to_string(cfg_.planes) + ")"};
    if (auto r = check_cc(cfg.cc, cfg.mtu_payload_bytes, cfg_.planes); !r)
        return Error{"QP config: " + r.error().message};
    if (cfg.mtu_payload_bytes == 0 || cfg.mtu_payload_bytes > 9000)
        return Error{"QP config: mtu_payload_bytes must be in [1, 9000]"};
    if (cfg.mpr_units == 0 || cfg.mpr_units > 256)
        return Error{"QP config: mpr_units must be in [1, 256]"};
    if (cfg.max_send_wr == 0 || cfg.max_inflight_pkts < 2 || cfg.max_recv_cqe == 0)
        return Error{"QP config: queue sizes must be positive"};
    if (cfg.retry.timeout_exp > RetryPolicy::kMaxTimeoutExp)
        return Error{"QP config: ack timeout exponent above 24"};
    if (cfg.retry.mode == RetryMode::kLinear && cfg.retry.limit > RetryPolicy::kMaxLinear)
        return Error{"QP config: linear retry limit above 7"};
    if (cfg.retry.mode == RetryMode::kExponential && cfg.retry.limit > RetryPolicy::kMaxExponential)
        return Error{"QP config: exponential retry limit above 25"};
    const uint32_t qpn = free_qpns_.back();
    free_qpns_.pop_back();
    qps_[qpn] = std::make_unique<Qp>(this, qpn, cfg);
    return qps_[qpn].get();
}

Result<void> Endpoint::destroy_qp(uint32_t qpn) {
    Qp *q = qp(qpn);
    if (q == nullptr) return Error{"no QP " + std::to_string(qpn)};
    timers_.cancel(qpn);
    qps_[qpn].reset();
    free_qpns_.push_back(qpn);
    return {};
}

void Endpoint::set_plane_up(uint8_t plane, bool up) {
    if (plane >= cfg_.planes) return;
    const auto bit = static_cast<uint8_t>(1u << plane);
    const auto m = static_cast<uint8_t>(up ? (link_up_mask_ | bit) : (link_up_mask_ & ~bit));
    if (m == link_up_mask_) return;
    link_up_mask_ = m;
    ++plane_gen_;
    for (const auto &q : qps_)
        if (q) q->planes_changed();
}

void Endpoint::apply_path_table(const PathTable &t, uint64_t now_ns) {
    if (t.generation == table_generation_) return;
    table_generation_ = t.generation;
    const auto all = static_cast<uint8_t>((1u << cfg_.planes) - 1);
    if ((t.down_mask & all) != table_down_mask_ || (t.denied_mask & all) != denied_mask_) {
        table_down_mask_ = t.down_mask & all;
        denied_mask_ = t.denied_mask & all;
        ++plane_gen_;
        for (const auto &q : qps_)
            if (q) q->planes_changed();
    }
    // EV denials: allow what is no longer listed, deny what is new.
    for (const EvDenial &d : applied_denials_)
        if (std::find(t.denied_evs.begin(), t.denied_evs.end(), d) == t.denied_evs.end())
            if (Qp *q = qp_by_wire(d.qpn)) q->set_ev_denied(d.ev, false, now_ns);
    for (const EvDenial &d : t.denied_evs)
        if (Qp *q = qp_by_wire(d.qpn)) q->set_ev_denied(d.ev, true, now_ns);
    applied_denials_ = t.denied_evs;
}

EvGauges Endpoint::ev_gauges() const {
    EvGauges g = ev_gauges_;
    for (uint32_t p = 0; p < cfg_.planes; ++p)
        if ((denied_mask_ >> p) & 1) g.denied[p] = g.total[p] - g.assumed_bad[p];
    return g;
}

bool Endpoint::take_plane_probe_token(uint8_t plane, uint64_t now_ns, uint64_t interval_ns) {
    if (now_ns < plane_probe_next_ns_[plane]) return false;
    plane_probe_next_ns_[plane] = now_ns + interval_ns;
    return true;
}

PathCc *Endpoint::acquire_path_cc(uint64_t key, const QpConfig &cfg, uint8_t planes) {
    auto &slot = path_cc_[key];
    if (!slot) {
        // The first QP to the peer sets the path's CC up (its settings).
        slot = std::make_unique<PathCc>();
        slot->cc = make_cc(cfg.cc, cfg.mtu_payload_bytes, planes);
        slot->window = slot->cc->window_bytes();
        slot->key = key;
        slot->waiting.init(16);
    }
    ++slot->users;
    slot->mtu = cfg.mtu_payload_bytes;
    set_floor(*slot);
    return slot.get();
}

void Endpoint::release_path_cc(PathCc *c) {
    if (--c->users == 0) {
        path_cc_.erase(c->key);
        return;
    }
    set_floor(*c);
}

PeerLink *Endpoint::acquire_peer_link(uint64_t key, const LivenessConfig &live) {
    auto &slot = peer_links_[key];
    if (!slot) {
        slot = std::make_unique<PeerLink>();
        slot->key = key;
        slot->live = live;
        slot->timer_id = free_link_timers_.back();  // never empty: a link per QP at most
        free_link_timers_.pop_back();
        link_by_timer_[slot->timer_id - (cfg_.max_qps + 1)] = slot.get();
    }
    ++slot->users;
    return slot.get();
}

void Endpoint::release_peer_link(PeerLink *l) {
    if (--l->users != 0) return;
    timers_.cancel(l->timer_id);
    link_by_timer_[l->timer_id - (cfg_.max_qps + 1)] = nullptr;
    free_link_timers_.push_back(l->timer_id);
    peer_links_.erase(l->key);
}

void Endpoint::link_join(Qp &q, uint64_t now_ns) {
    PeerLink &l = *q.link_;
    if (q.link_index_ != UINT32_MAX) return;
    q.link_index_ = uint32_t(l.members.size());
    l.members.push_back(&q);
    // Its silence counts from now (q.last_heard_ns_); the first keepalive
    // a keepalive interval after the first member joined.
    if (l.members.size() == 1) l.keepalive_sent_ns = std::max(l.keepalive_sent_ns, now_ns);
    const LivenessConfig &v = l.live;
    uint64_t t = UINT64_MAX;
    if (v.keepalive_ns) t = std::max(l.heard_ns, l.keepalive_sent_ns) + v.keepalive_ns;
    if (v.peer_timeout_ns) t = std::min(t, q.last_heard_ns_ + v.peer_timeout_ns);
    if (t != UINT64_MAX) timers_.arm_earlier(l.timer_id, t);
}

void Endpoint::link_leave(Qp &q) {
    PeerLink &l = *q.link_;
    if (q.link_index_ == UINT32_MAX) return;
    Qp *last = l.members.back();
    l.members[q.link_index_] = last;
    last->link_index_ = q.link_index_;
    l.members.pop_back();
    q.link_index_ = UINT32_MAX;
}

// The link's one timer: a keepalive from one member when the peer was
// silent for keepalive_ns; its members fail when it was silent for
// peer_timeout_ns (each counted from when it was last heard or joined).
// Walks the members only when the peer is silent that long.
void Endpoint::on_link_timer(PeerLink &l, uint64_t now_ns) {
    if (l.members.empty()) return;
    const LivenessConfig &v = l.live;
    uint64_t next = UINT64_MAX;
    if (v.peer_timeout_ns && now_ns - l.heard_ns >= v.peer_timeout_ns) {
        for (size_t i = l.members.size(); i-- > 0;) {
            Qp &q = *l.members[i];
            const uint64_t since = std::max(q.last_heard_ns_, l.heard_ns);
            if (now_ns - since >= v.peer_timeout_ns)
                q.peer_silent();  // leaves the members
            else
                next = std::min(next, since + v.peer_timeout_ns);
        }
        if (l.members.empty()) return;
    } else if (v.peer_timeout_ns) {
        next = l.heard_ns + v.peer_timeout_ns;
    }
    if (v.keepalive_ns) {
        const uint64_t due = std::max(l.heard_ns, l.keepalive_sent_ns) + v.keepalive_ns;
        if (now_ns >= due) {
            Qp &q = *l.members[l.next_sender++ % l.members.size()];
            q.keepalive_due(now_ns);
            l.keepalive_sent_ns = now_ns;
        }
        next = std::min(next, std::max(l.heard_ns, l.keepalive_sent_ns) + v.keepalive_ns);
    }
    if (next != UINT64_MAX) timers_.arm(l.timer_id, std::max(next, now_ns + 1));
}

void Endpoint::set_floor(PathCc &c) {
    c.floor = uint64_t{std::min(c.users, PathCc::kSharedFloorPkts)} * c.mtu;
    c.window = std::max(c.cc->window_bytes(), c.floor);
}

void Endpoint::mark_ready(Qp &q) {
    if (q.in_ready_) return;
    q.in_ready_ = true;
    const bool pushed = ready_.try_push(q.qpn());
    (void)pushed;  // capacity is twice the QP count: cannot fail
}

void Endpoint::notify(Qp &q) {
    if (q.in_notified_) return;
    q.in_notified_ = true;
    const bool pushed = notified_.try_push(q.qpn());
    (void)pushed;  // twice the QP count, and each QP at most once: cannot fail
}

uint32_t Endpoint::take_notified(uint32_t *qpns, uint32_t max) {
    uint32_t n = 0;
    while (n < max && !notified_.empty()) {
        const uint32_t qpn = notified_.front();
        notified_.pop();
        Qp *q = qp(qpn);
        if (q == nullptr || !q->in_notified_) continue;  // destroyed meanwhile
        q->in_notified_ = false;
        qpns[n++] = qpn;
    }
    return n;
}

namespace {
// The source address is the peer's on that plane, in the path's family.
bool from_peer(const wire::UdpView &u, const wire::MrcAddr &path) {
    if (u.ip6 != nullptr) return path.ipv6 && u.ip6->src == path.dst_ip6;
    return !path.ipv6 && u.ip->src.get() == path.dst_ip;
}
}  // namespace

void Endpoint::on_packet(const uint8_t *head, uint32_t head_len, const uint8_t *tail,
                         uint32_t tail_len, uint8_t plane, uint64_t now_ns) {
    now_ns_ = now_ns;
    ++ctr_.rx_frames;
    if (plane >= cfg_.planes) {
        ++ctr_.rx_bad_plane;
        return;
    }
    wire::MrcPacket p;
    const wire::MrcError e =
        wire::parse_mrc(head, head_len, tail, tail_len, cfg_.mrc_port, &p, cfg_.checksums);
    if (e != wire::MrcError::kOk) {
        if (e == wire::MrcError::kNet || e == wire::MrcError::kNotMrc)
            ++ctr_.rx_not_mrc;
        else
            ++ctr_.rx_malformed;
        return;
    }
    Qp *q = qp_by_wire(p.dst_qpn);
    if (q == nullptr) {
        ++ctr_.rx_unknown_qpn;
        return;
    }
    if (q->state_ != QpState::kRtr && q->state_ != QpState::kRts) {
        ++ctr_.rx_qp_not_ready;
        return;
    }
    if (plane >= q->peer_.planes || !from_peer(p.udp, q->peer_.path[plane])) {
        ++ctr_.rx_wrong_peer;
        return;
    }
    q->heard(now_ns);
    switch (p.opcode) {
        case wire::Opcode::kWrite:
        case wire::Opcode::kWriteImm:
            q->on_data(p, plane, now_ns);
            break;
        case wire::Opcode::kSack:
            q->on_sack(p, now_ns);
            break;
        case wire::Opcode::kNack:
            q->on_nack(p, now_ns);
            break;
        case wire::Opcode::kProbe:
            q->on_probe(p, plane, now_ns);
            break;
        case wire::Opcode::kProbeReply:
            q->on_probe_reply(p, plane, now_ns);
            break;
    }
}

uint32_t Endpoint::poll_tx(TxPacket *out, uint32_t max, uint64_t now_ns, uint8_t tx_planes) {
    now_ns_ = now_ns;
    uint32_t n = 0;
    // Round robin: each QP emits up to a burst per turn; one that still has
    // work goes to the back. Rounds repeat while they make progress.
    while (n < max && !ready_.empty()) {
        const uint32_t before = n;
        for (uint32_t turns = ready_.size(); turns > 0 && n < max; --turns) {
            // Cache hints, each stage reading what the one before brought
            // near: three QPs ahead its object, two ahead its EV arrays, one
            // ahead the EV entry its next packet takes.
            if (ready_.size() > 3)
                if (const Qp *a = qp(ready_.peek(3))) a->prefetch();
            if (ready_.size() > 2)
                if (const Qp *a = qp(ready_.peek(2))) a->prefetch_evs();
            if (ready_.size() > 1)
                if (const Qp *a = qp(ready_.peek(1))) a->prefetch_next_ev();
            const uint32_t qpn = ready_.front();
            ready_.pop();
            Qp *q = qp(qpn);
            if (q == nullptr || !q->in_ready_) continue;
            q->in_ready_ = false;
            const uint32_t room = max - n < cfg_.qp_tx_burst ? max - n : cfg_.qp_tx_burst;
            n += q->emit(out + n, room, now_ns, tx_planes);
            if (q->has_tx_work(now_ns)) mark_ready(*q);
        }
        if (n == before) break;
    }
    ctr_.tx_packets += n;
    return n;
}

void Endpoint::on_time(uint64_t now_ns) {
    now_ns_ = now_ns;
    timers_.advance(now_ns, [&](uint32_t id) {
        if (id <= cfg_.max_qps) {
            if (Qp *q = qp(id)) q->on_timer(now_ns);
        } else if (PeerLink *l = link_by_timer_[id - (cfg_.max_qps + 1)]) {
            on_link_timer(*l, now_ns);
        }
    });
}

}  // namespace mrc
