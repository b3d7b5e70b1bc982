// QP life cycle, transmit scheduling and timers. The requester's packet
// handling is in requester.cc, the responder's in responder.cc.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/endpoint.h"
#include "core/qp.h"

namespace mrc {

const char *to_string(QpState s) {
    switch (s) {
        case QpState::kReset:
            return "RESET";
        case QpState::kInit:
            return "INIT";
        case QpState::kRtr:
            return "RTR";
        case QpState::kRts:
            return "RTS";
        case QpState::kError:
            return "ERROR";
    }
    return "?";
}

const char *to_string(WcStatus s) {
    switch (s) {
        case WcStatus::kSuccess:
            return "success";
        case WcStatus::kRetryExceeded:
            return "retry exceeded";
        case WcStatus::kNackRetryExceeded:
            return "NACK retry exceeded";
        case WcStatus::kRemoteAccessError:
            return "remote access error";
        case WcStatus::kRemoteProtocolError:
            return "remote protocol error";
        case WcStatus::kFlushed:
            return "flushed";
        case WcStatus::kPeerUnreachable:
            return "peer unreachable";
    }
    return "?";
}

namespace {
uint32_t pow2_at_least(uint32_t n) {
    uint32_t c = 1;
    while (c < n)
        c <<= 1;
    return c;
}
}  // namespace

Qp::Qp(Endpoint *ep, uint32_t qpn, const QpConfig &cfg)
    : ep_(ep), qpn_(qpn), cfg_(cfg), own_mtu_(cfg.mtu_payload_bytes) {}
Qp::~Qp() {
    release_cc();
}

// ---- congestion state per path ----------------------------------------------------

namespace {
// The peer's address on a path and a plane as a 64-bit key: an IPv4
// address shifted by 8 bits; an IPv6 one mixed down to 55 bits, shifted,
// with the top bit set (never equal to an IPv4 key; two IPv6 peers share
// one with odds of about 2^-55). The plane in the low 8 bits.
uint64_t addr_key(const wire::MrcAddr &a, uint8_t plane) {
    if (!a.ipv6) return (uint64_t{a.dst_ip} << 8) | plane;
    uint64_t hi, lo;
    std::memcpy(&hi, a.dst_ip6.b, 8);
    std::memcpy(&lo, a.dst_ip6.b + 8, 8);
    uint64_t h = hi * 0x9e3779b97f4a7c15ull ^ lo;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return (1ull << 63) | ((h >> 9) << 8) | plane;
}
}  // namespace

void Qp::attach_cc(uint8_t planes) {
    link_ = ep_->acquire_peer_link(addr_key(peer_.path[0], 0), cfg_.liveness);
    for (uint8_t p = 0; p < planes; ++p) {
        if (cfg_.cc.per_peer) {
            // The path: the peer's address on the plane, and the plane.
            const uint64_t key = addr_key(peer_.path[p], p);
            pcc_[p] = ep_->acquire_path_cc(key, cfg_, planes);
        } else {
            own_cc_[p] = std::make_unique<PathCc>();
            own_cc_[p]->cc = make_cc(cfg_.cc, cfg_.mtu_payload_bytes, planes);
            own_cc_[p]->window = own_cc_[p]->cc->window_bytes();
            own_cc_[p]->users = 1;
            own_cc_[p]->mtu = cfg_.mtu_payload_bytes;
            own_cc_[p]->waiting.init(1);
            pcc_[p] = own_cc_[p].get();
        }
        plane_inflight_[p] = 0;
    }
}

void Qp::drop_inflight() {
    for (uint8_t p = 0; p < kMaxPlanes; ++p) {
        if (pcc_[p] != nullptr && plane_inflight_[p] != 0)
            inflight_sub(p, uint32_t(plane_inflight_[p]));
        plane_inflight_[p] = 0;
    }
}

void Qp::release_cc() {
    drop_inflight();
    for (uint8_t p = 0; p < kMaxPlanes; ++p) {
        if (pcc_[p] != nullptr && pcc_[p] != own_cc_[p].get()) ep_->release_path_cc(pcc_[p]);
        pcc_[p] = nullptr;
        own_cc_[p].reset();
    }
    cc_wait_ = 0;  // stale entries in the rings are skipped (the bit is clear)
    if (link_ != nullptr) {
        ep_->link_leave(*this);
        ep_->release_peer_link(link_);
    }
    link_ = nullptr;
}

void Qp::inflight_sub(uint8_t p, uint32_t len) {
    plane_inflight_[p] -= len;
    PathCc &c = *pcc_[p];
    c.inflight -= len;
    // A waiter per packet of room the departure left (one, for an ack of
    // one packet): each that wakes takes what room there is (its turn in
    // the ready ring), and waits again if data is left. A QP that failed
    // returns all it had in flight at once: as many wake. With nothing left
    // in flight no departure will come to wake the rest, so one more wakes
    // (a path with nothing in flight always takes a packet).
    if (c.waiting.empty() || ep_->destroying_) return;
    const uint64_t room = c.window > c.inflight ? c.window - c.inflight : 0;
    uint64_t wake = std::max<uint64_t>(room / std::max<uint32_t>(c.mtu, 1), 1);
    const auto bit = static_cast<uint8_t>(1u << p);
    while (wake > 0 && !c.waiting.empty()) {
        const uint32_t qpn = c.waiting.front();
        c.waiting.pop();
        Qp *q = ep_->qp(qpn);
        if (q == nullptr || !(q->cc_wait_ & bit) || q->pcc_[p] != &c) continue;  // stale
        q->cc_wait_ &= static_cast<uint8_t>(~bit);
        if (q->state_ != QpState::kRts) continue;  // failed meanwhile: nothing to send
        q->became_ready();
        --wake;
    }
}

void Qp::wait_for_cc() {
    // Wait on each plane it could use whose window is full.
    for (uint8_t p = 0; p < peer_.planes; ++p) {
        const auto bit = static_cast<uint8_t>(1u << p);
        if (!((usable_mask_ ? usable_mask_ : allowed_planes()) & bit) || (cc_wait_ & bit)) continue;
        PathCc &c = *pcc_[p];
        if (c.inflight == 0 || c.inflight + cfg_.mtu_payload_bytes <= c.window) continue;
        if (c.waiting.push_growing(qpn_, ep_->max_qps() + 1)) cc_wait_ |= bit;
    }
}

Result<void> Qp::to_init(uint32_t pd) {
    if (state_ != QpState::kReset) return Error{std::string("to_init from ") + to_string(state_)};
    pd_ = pd;
    // Every per-QP structure is sized here, small: the send queue, the
    // tracking ring and the completion queues start at kInitialEntries and
    // double (up to the configured bound) only when that much is
    // outstanding, so an idle or lightly used QP costs little; each grows at
    // most log2(bound / kInitialEntries) times in its life.
    sq_max_ = pow2_at_least(cfg_.max_send_wr);
    const uint32_t sq = std::min(sq_max_, kInitialEntries);
    sq_.assign(sq, WrEntry{});
    sq_mask_ = sq - 1;
    slot_max_ = pow2_at_least(cfg_.max_inflight_pkts);
    const uint32_t slots = std::min(slot_max_, kInitialEntries);
    slots_.assign(slots, TxSlot{});
    slot_mask_ = slots - 1;
    retx_now_.init(slots);
    retx_later_.init(slots);
    send_cq_.init(sq);
    rwin_pkts_ = uint32_t{cfg_.mpr_units} * wire::kPsnsPerWindowUnit;
    rwin_mask_ = rwin_pkts_ - 1;  // a power of two only when mpr_units is; see below
    if ((rwin_pkts_ & rwin_mask_) != 0) {
        rwin_pkts_ = pow2_at_least(rwin_pkts_);
        rwin_mask_ = rwin_pkts_ - 1;
    }
    rcv_bits_.assign(rwin_pkts_ / 64, 0);
    unrep_bits_.assign(rwin_pkts_ / 64, 0);
    imm_bits_.assign(rwin_pkts_ / 64, 0);
    imm_vals_.clear();  // allocated by the first immediate that arrives
    nack_q_.init(64);
    probe_q_.init(16);
    recv_cq_.init(std::min(cfg_.max_recv_cqe, kInitialEntries));
    probes_out_.clear();
    state_ = QpState::kInit;
    return {};
}

bool Qp::set_next_hop(uint8_t plane, const wire::MacAddr &mac) {
    if (state_ == QpState::kReset || state_ == QpState::kInit || plane >= peer_.planes)
        return false;
    peer_.path[plane].dst_mac = mac;
    return true;
}

Result<void> Qp::to_rtr(const QpPeer &peer, Psn expected_psn) {
    if (state_ != QpState::kInit) return Error{std::string("to_rtr from ") + to_string(state_)};
    if (peer.planes == 0 || peer.planes > kMaxPlanes)
        return Error{"to_rtr: planes must be in [1, 8]"};
    if (peer.dst_qpn == 0 || peer.dst_qpn > wire::kQpnMask)
        return Error{"to_rtr: bad destination QPN"};
    if (auto r = EvSet::check(cfg_.ev, peer.planes); !r)
        return Error{"to_rtr: " + r.error().message};
    // The path MTU of the connection: the smaller end's.
    cfg_.mtu_payload_bytes =
        peer.mtu_payload_bytes ? std::min(own_mtu_, peer.mtu_payload_bytes) : own_mtu_;
    if (auto r = check_cc(cfg_.cc, cfg_.mtu_payload_bytes, peer.planes); !r)
        return Error{"to_rtr: " + r.error().message};
    release_cc();
    peer_ = peer;
    attach_cc(peer.planes);
    evs_.init(cfg_.ev, peer.planes, cfg_.ev.seed ^ (uint64_t{qpn_} << 32), &ep_->ev_gauges_);
    probes_out_.reserve(evs_.entries().size());  // one outstanding probe per EV at most
    for (auto &h : plane_)
        h = PlaneHealth{};
    for (auto &r : ep_reasons_seen_)
        r = 0;
    planes_dirty_ = true;
    probe_due_ns_ = UINT64_MAX;
    probes_in_window_ = 0;
    for (auto &t : timing_)
        t = PlaneTiming{};
    sync_planes(0);
    epsn_ = deliver_psn_ = max_seen_ = expected_psn;
    state_ = QpState::kRtr;
    return {};
}

Result<void> Qp::to_rts(Psn send_psn) {
    if (state_ != QpState::kRtr) return Error{std::string("to_rts from ") + to_string(state_)};
    snd_una_ = snd_nxt_ = send_psn;
    // Until the peer says otherwise, assume it has the window we have.
    peer_window_pkts_ = rwin_pkts_;
    tx_head_ = tx_tail_ = kNil;
    rack_valid_ = false;
    rack_timer_ns_ = UINT64_MAX;
    rto_backoff_ = rto_charged_ = 0;
    tail_probe_out_ = false;
    retx_blocked_ = false;
    // Liveness counts from the first time the QP's timer sees (set-up calls
    // carry no time): the peer has all of peer_timeout_ns to speak.
    const uint64_t now_ns = ep_->now_ns();
    last_heard_ns_ = keepalive_sent_ns_ = last_progress_ns_ = now_ns;
    liveness_pending_ = true;
    keepalive_due_ = false;
    state_ = QpState::kRts;
    rearm(now_ns);
    return {};
}

void Qp::to_error(WcStatus cause) {
    fail(cause);
}

void Qp::fail(WcStatus cause) {
    if (state_ == QpState::kError) return;
    if (state_ == QpState::kReset) return;
    state_ = QpState::kError;
    error_cause_ = cause;
    if (link_ != nullptr) ep_->link_leave(*this);
    ep_->notify(*this);
    // Complete everything outstanding: the oldest with the cause, the rest flushed.
    bool first = true;
    while (sq_head_ != sq_tail_) {
        WrEntry &w = sq_[sq_head_ & sq_mask_];
        SendCompletion c{w.wr.wr_id, first ? cause : WcStatus::kFlushed, w.wr.length, w.msn};
        first = false;
        if (!send_cq_.push_growing(c, sq_max_)) break;  // cannot be full: one per WR
        ++ctr_.wr_flushed;
        ++sq_head_;
    }
    sq_head_ = sq_seg_ = sq_tail_;
    retx_now_.clear();
    retx_later_.clear();
    tx_head_ = tx_tail_ = kNil;
    rack_timer_ns_ = UINT64_MAX;
    keepalive_due_ = false;
    nack_q_.clear();
    probe_q_.clear();
    probes_out_.clear();
    probe_due_ns_ = UINT64_MAX;
    ack_due_now_ = ack_pending_ = false;
    ack_copies_ = 0;
    inflight_bytes_ = 0;
    drop_inflight();
    reverse_due_ns_ = UINT64_MAX;
    ep_->cancel_timer(*this);
}

void Qp::reset() {
    ep_->cancel_timer(*this);
    state_ = QpState::kReset;
    error_cause_ = WcStatus::kSuccess;
    ctr_ = QpCounters{};
    sq_head_ = sq_seg_ = sq_tail_ = next_msn_ = 0;
    inflight_bytes_ = 0;
    release_cc();
    pkts_since_ack_req_ = 0;
    pending_imm_ = 0;
    bytes_since_ack_ = 0;
    last_adv_rwnd_units_ = 0;
    has_unreported_ = false;
    ack_due_now_ = ack_pending_ = false;
    ack_copies_ = 0;
    probes_out_.clear();
    probe_due_ns_ = UINT64_MAX;
    last_data_rx_ns_ = reverse_next_ns_ = 0;
    reverse_due_ns_ = UINT64_MAX;
    evs_.release();
    // Queues and windows are sized again by to_init(), PSNs set by to_rtr/to_rts.
}

// ---- growth ---------------------------------------------------------------------

void Qp::grow_sq() {
    // Entries are found by absolute index & mask: re-place the outstanding ones.
    const auto n = static_cast<uint32_t>(sq_.size() * 2);
    std::vector<WrEntry> b(n);
    for (uint32_t i = sq_head_; i != sq_tail_; ++i)
        b[i & (n - 1)] = sq_[i & sq_mask_];
    sq_.swap(b);
    sq_mask_ = n - 1;
    ++ctr_.state_grows;
}

void Qp::grow_slots() {
    // Slots are found by PSN & mask: re-place those in [snd_una, snd_nxt).
    const auto n = static_cast<uint32_t>(slots_.size() * 2);
    std::vector<TxSlot> b(n);
    for (Psn p = snd_una_; p != snd_nxt_; ++p)
        b[p.value() & (n - 1)] = slots_[p.value() & slot_mask_];
    slots_.swap(b);
    slot_mask_ = n - 1;
    // At most one queued resend per PSN in flight: as deep as the slots.
    retx_now_.grow(n);
    retx_later_.grow(n);
    ++ctr_.state_grows;
}

size_t Qp::memory_bytes() const {
    auto vec = [](const auto &v) { return v.capacity() * sizeof(v[0]); };
    size_t b = sizeof(Qp) + evs_.memory_bytes();
    b += vec(sq_) + vec(slots_) + vec(rcv_bits_) + vec(unrep_bits_) + vec(imm_bits_) +
         vec(imm_vals_) + vec(probes_out_);
    b += retx_now_.memory_bytes() + retx_later_.memory_bytes() + send_cq_.memory_bytes() +
         recv_cq_.memory_bytes() + nack_q_.memory_bytes() + probe_q_.memory_bytes();
    // Shared path states are the endpoint's (one per peer and plane), not counted here.
    for (const auto &c : own_cc_)
        if (c) b += sizeof(PathCc) + c->cc->state_bytes() + c->waiting.memory_bytes();
    return b;
}

// ---- application ----------------------------------------------------------------

PostResult Qp::post_write(const WriteRequest &wr) {
    if (state_ != QpState::kRts) return PostResult::kNotReady;
    if (wr.length == 0 || wr.local == nullptr) return PostResult::kBadLength;
    if (sq_tail_ - sq_head_ >= sq_.size()) {
        if (sq_.size() >= sq_max_) return PostResult::kQueueFull;
        grow_sq();
    }
    WrEntry &w = sq_[sq_tail_ & sq_mask_];
    w.wr = wr;
    w.msn = next_msn_++;
    w.npkts = (wr.length + cfg_.mtu_payload_bytes - 1) / cfg_.mtu_payload_bytes;
    w.sent_pkts = 0;
    ++sq_tail_;
    became_ready();
    return PostResult::kOk;
}

uint32_t Qp::poll_send_cq(SendCompletion *out, uint32_t max) {
    uint32_t n = 0;
    while (n < max && !send_cq_.empty()) {
        out[n++] = send_cq_.front();
        send_cq_.pop();
    }
    if (n && state_ == QpState::kRts) complete_wrs();  // room for completions held back
    return n;
}

uint32_t Qp::poll_recv_cq(RecvCompletion *out, uint32_t max) {
    uint32_t n = 0;
    while (n < max && !recv_cq_.empty()) {
        out[n++] = recv_cq_.front();
        recv_cq_.pop();
    }
    if (n) {
        deliver_imms();  // immediates held back by a full CQ
        // The window the requester last heard of may be (nearly) closed:
        // tell it that it reopened, or it waits for an ack that never comes.
        if (state_ == QpState::kRtr || state_ == QpState::kRts) {
            if (last_adv_rwnd_units_ * 2 < rwnd_units()) {
                ack_due_now_ = true;
                became_ready();
            }
        }
    }
    return n;
}

// ---- transmit scheduling ------------------------------------------------------------

void Qp::became_ready() {
    ep_->mark_ready(*this);
}

void Qp::control_packet(TxPacket &t, uint8_t plane, uint16_t hdr_len) const {
    t.hdr_len = hdr_len;
    t.payload = nullptr;
    t.payload_len = 0;
    t.plane = plane;
    t.qpn = qpn_;
}

bool Qp::has_tx_work(uint64_t now_ns) const {
    if (state_ != QpState::kRtr && state_ != QpState::kRts) return false;
    if (ack_due_now_ || ack_copies_ || !nack_q_.empty() || !probe_q_.empty()) return true;
    if (reverse_probe_due_ns() <= now_ns) return true;
    if (state_ != QpState::kRts) return false;
    if (keepalive_due_ || probe_due_ns_ <= now_ns) return true;
    if (!retx_blocked_) {
        if (!retx_now_.empty()) return true;
        if (!retx_later_.empty() && retx_later_.front().due_ns <= now_ns) return true;
    }
    return sq_seg_ != sq_tail_ && can_send_new();
}

uint32_t Qp::emit(TxPacket *out, uint32_t max, uint64_t now_ns, uint8_t tx_planes) {
    uint32_t n = 0;
    if (state_ != QpState::kRtr && state_ != QpState::kRts) return 0;
    sync_planes(now_ns);
    const uint8_t status = advertised_status();
    // Control first: NACKs, probe replies, then the ack.
    while (n < max && !nack_q_.empty()) {
        const NackEntry &e = nack_q_.front();
        wire::NackFields f;
        f.dst_qpn = peer_.dst_qpn;
        f.psn = Psn(e.psn);
        f.reason = static_cast<wire::NackReason>(e.reason);
        f.flags = e.flags;
        f.ev_echo = e.ev;
        f.cum_psn = epsn_;
        f.ts_echo = e.ts;
        f.rwnd_units = static_cast<uint16_t>(rwnd_units());
        f.plane_status = status;
        const uint8_t plane = ack_plane(e.plane);
        TxPacket &t = out[n++];
        control_packet(t, plane,
                       wire::write_nack(t.hdr, peer_.path[plane], evs_.next_reverse_ev(plane), f));
        nack_q_.pop();
        ++ctr_.tx_nacks;
    }
    while (n < max && !probe_q_.empty()) {
        const ProbeEntry &e = probe_q_.front();
        wire::ProbeFields f;
        f.reply = true;
        f.flags = e.flags;
        f.dst_qpn = peer_.dst_qpn;
        f.probe_id = e.id;
        f.ev = e.ev;
        f.ts = e.ts;
        f.plane_status = status;
        // On the plane the probe came in on, whatever else: that is what it
        // tests. A reverse probe tests the prober's ack EV: the answer takes
        // two of this QP's usable forward EVs, not a reverse EV of unknown
        // health (two: a forward EV can be dead without this side knowing
        // yet, when the acks that would tell died on the way back). Any other
        // probe is answered on a reverse EV, and on every reverse EV of the
        // plane while none of them is known GOOD: a peer that probes because
        // it hears nothing must hear something.
        uint16_t evs[EvSet::kReverseEvsPerPlane];
        uint32_t k = 0;
        if (e.flags & wire::kProbeReverse) {
            const uint32_t i = evs_.choose_on_plane(now_ns, e.plane);
            if (i != kNoEv) {
                evs[k++] = evs_.entry(i).ev;
                const uint32_t j = evs_.choose_retx(now_ns, i, 0, uint8_t(1u << e.plane));
                if (j != kNoEv && j != i) evs[k++] = evs_.entry(j).ev;
            }
        }
        if (k == 0) {
            evs[k++] = evs_.next_reverse_ev(e.plane);
            if (!evs_.reverse_has_good(e.plane))
                for (uint32_t r = 1; r < EvSet::kReverseEvsPerPlane; ++r)
                    evs[k++] = evs_.reverse_ev(e.plane, (evs_.last_reverse_slot(e.plane) + r) %
                                                            EvSet::kReverseEvsPerPlane);
        }
        if (max - n < k) {
            if (n > 0) break;  // the whole answer next time
            k = max;           // a caller that never has room for it all gets what fits
        }
        for (uint32_t c = 0; c < k; ++c) {
            TxPacket &t = out[n++];
            control_packet(t, e.plane, wire::write_probe(t.hdr, peer_.path[e.plane], evs[c], f));
            ++ctr_.tx_probe_replies;
        }
        probe_q_.pop();
    }
    while (n < max && ack_due_now_)
        emit_sack(out[n++], status);  // more than one when arrivals span several bitmaps
    // After a duplicate: the same ack again on the plane's other reverse EVs.
    for (; n < max && ack_copies_ > 0; --ack_copies_) {
        TxPacket &t = out[n++];
        const uint8_t p = last_sack_plane_;
        const uint16_t ev = evs_.reverse_ev(
            p, (evs_.last_reverse_slot(p) + ack_copies_) % EvSet::kReverseEvsPerPlane);
        control_packet(t, p, wire::write_sack(t.hdr, peer_.path[p], ev, last_sack_));
        ++ctr_.tx_ack_copies;
    }
    if (n < max && reverse_probe_due_ns() <= now_ns)
        n += emit_reverse_probes(out + n, max - n, now_ns);
    if (state_ == QpState::kRts) {
        if (n < max && keepalive_due_) send_keepalive(out[n++], now_ns);
        if (probe_due_ns_ <= now_ns) n += emit_probes(out + n, max - n, now_ns);
        // Retransmissions before new data. One that finds no EV it may take
        // (every allowed plane's EVs denied) waits for the planes to change.
        auto resend = [&](Psn p) {
            TxSlot &s = slot(p);
            s.queued = false;
            if (emit_data(out[n], p, s.pending, now_ns)) {
                ++n;
                return true;
            }
            s.queued = true;
            retx_now_.try_push(p.value());
            retx_blocked_ = true;
            return false;
        };
        while (n < max && !retx_blocked_ && !retx_now_.empty()) {
            const Psn p(retx_now_.front());
            retx_now_.pop();
            if (!in_flight(p) || slot(p).acked) continue;  // its slot may hold a newer PSN now
            if (!resend(p)) break;
        }
        while (n < max && !retx_blocked_ && !retx_later_.empty() &&
               retx_later_.front().due_ns <= now_ns) {
            const Psn p(retx_later_.front().psn);
            retx_later_.pop();
            if (!in_flight(p) || slot(p).acked) continue;
            if (!resend(p)) break;
        }
        while (n < max && sq_seg_ != sq_tail_ && can_send_new(tx_planes)) {
            if (!emit_data(out[n], snd_nxt_, TxKind::kFirst, now_ns, tx_planes)) break;
            ++n;
        }
        // Data left that no path window has room for: wake when one has.
        if (sq_seg_ != sq_tail_ && send_mask() == 0 &&
            uint32_t(distance(snd_una_, snd_nxt_)) < window_pkts())
            wait_for_cc();
    }
    rearm(now_ns);
    return n;
}

void Qp::on_timer(uint64_t now_ns) {
    if (state_ != QpState::kRtr && state_ != QpState::kRts) return;
    if (ack_pending_ && now_ns >= ack_deadline_ns_) {
        ack_due_now_ = true;
        ack_trigger_.flags |= wire::kAckDelayed;  // its RTT includes the wait: not for CC
    }
    expire_reverse_probes(now_ns);
    if (liveness_pending_) {
        liveness_pending_ = false;
        last_heard_ns_ = std::max(last_heard_ns_, now_ns);
        keepalive_sent_ns_ = now_ns;
        if (link_ != nullptr && state_ == QpState::kRts) ep_->link_join(*this, now_ns);
    }
    if (state_ == QpState::kRts) {
        // Each can fail the QP (a retry budget or the peer's silence).
        if (now_ns >= rack_timer_ns_) detect_losses(now_ns);
        if (state_ == QpState::kRts && now_ns >= rto_deadline_ns()) on_rto(now_ns);
        if (state_ == QpState::kRts && now_ns >= tlp_deadline_ns()) send_tail_probe(now_ns);
        if (state_ == QpState::kRts && probe_due_ns_ <= now_ns) expire_probes(now_ns);
    }
    if (state_ != QpState::kRtr && state_ != QpState::kRts) return;
    if (has_tx_work(now_ns)) became_ready();
    rearm(now_ns);
}

// Arms the QP's one timer at its earliest deadline: a delayed ack, a
// transmission becoming late enough to be lost, the tail-loss probe, the
// retransmission timeout, a delayed retransmission, a probe to send or
// give up on, a reverse probe, or liveness. Early is harmless: on_timer
// re-arms.
void Qp::rearm(uint64_t now_ns) {
    uint64_t t = UINT64_MAX;
    if (ack_pending_ && !ack_due_now_) t = std::min(t, ack_deadline_ns_);
    t = std::min(t, reverse_probe_due_ns());
    if (liveness_pending_) t = now_ns;  // the next time seen starts liveness
    if (state_ == QpState::kRts) {
        t = std::min({t, rack_timer_ns_, rto_deadline_ns(), tlp_deadline_ns(), probe_due_ns_});
        if (!retx_blocked_ && !retx_later_.empty()) t = std::min(t, retx_later_.front().due_ns);
    }
    if (t == UINT64_MAX) {
        ep_->cancel_timer(*this);
    } else {
        ep_->arm_timer(*this, std::max(t, now_ns));
    }
}

}  // namespace mrc
