#include "core/ev.h"

#include <algorithm>
#include <utility>

namespace mrc {

const char *to_string(EvState s) {
    switch (s) {
        case EvState::kGood:
            return "GOOD";
        case EvState::kSkip:
            return "SKIP";
        case EvState::kAssumedBad:
            return "ASSUMED_BAD";
        case EvState::kDenied:
            return "DENIED";
    }
    return "?";
}

const char *to_string(RevState s) {
    switch (s) {
        case RevState::kUnknown:
            return "UNKNOWN";
        case RevState::kGood:
            return "GOOD";
        case RevState::kSuspect:
            return "SUSPECT";
    }
    return "?";
}

namespace {

uint32_t range_size(const EvConfig &c) {
    return uint32_t{c.ev_max} - c.ev_min + 1;
}

}  // namespace

Result<void> parse_ev_range(std::string_view s, EvConfig *c) {
    const auto dash = s.find('-');
    auto number = [](std::string_view t, uint16_t *out) {
        if (t.empty() || t.size() > 5) return false;
        uint32_t v = 0;
        for (const char ch : t) {
            if (ch < '0' || ch > '9') return false;
            v = v * 10 + uint32_t(ch - '0');
        }
        if (v == 0 || v > 65535) return false;
        *out = static_cast<uint16_t>(v);
        return true;
    };
    uint16_t lo = 0, hi = 0;
    if (dash == std::string_view::npos || !number(s.substr(0, dash), &lo) ||
        !number(s.substr(dash + 1), &hi) || lo > hi)
        return Error{"EV range \"" + std::string(s) +
                     "\": want FIRST-LAST, UDP ports in [1, 65535], FIRST <= LAST (default "
                     "49152-65535)"};
    c->ev_min = lo;
    c->ev_max = hi;
    return ok();
}

Result<void> EvSet::check(const EvConfig &c, uint32_t planes) {
    if (planes == 0 || planes > kMaxPlanes)
        return Error{"planes must be in [1, " + std::to_string(kMaxPlanes) + "]"};
    if (c.evs < planes) return Error{"fewer EVs than planes: some plane would have no EV"};
    if (c.evs % planes != 0)
        return Error{"EVs must split evenly over the planes (a multiple of them)"};
    if (c.evs + c.backup_per_plane * planes > kMaxEvs)
        return Error{"more than 4096 EVs (active + backup)"};
    if (c.ev_min == 0 || c.ev_min > c.ev_max)
        return Error{"the EV range must be within [1, 65535], its first port not above its last"};
    if (uint32_t{c.ev_max} - c.ev_min + 1 <
        c.evs + (c.backup_per_plane + kReverseEvsPerPlane) * planes)
        return Error{"the EV range " + std::to_string(c.ev_min) + "-" + std::to_string(c.ev_max) +
                     " holds fewer ports than the " +
                     std::to_string(c.evs + (c.backup_per_plane + kReverseEvsPerPlane) * planes) +
                     " distinct EVs a QP draws (active, spares and 4 reverse per plane)"};
    if (c.min_active > c.evs)
        return Error{"the bad-EV floor (min_active) exceeds the number of EVs"};
    if (c.probe_successes == 0) return Error{"probe_successes must be at least 1"};
    if (c.probe_successes_max < c.probe_successes)
        return Error{"probe_successes_max must be at least probe_successes"};
    if (c.probe_interval_ns == 0) return Error{"probe_interval_ns must be positive"};
    if (c.max_probes_per_interval == 0) return Error{"max_probes_per_interval must be at least 1"};
    if (c.plane_fail_timeouts == 0) return Error{"plane_fail_timeouts must be at least 1"};
    if (c.trim_skip_factor == 0) return Error{"trim_skip_factor must be at least 1"};
    if (c.skip_max_doublings > 16) return Error{"skip_max_doublings must be at most 16"};
    if (c.probe_backoff_max_doublings > 16 || c.plane_probe_backoff_max_doublings > 16)
        return Error{
            "probe_backoff_max_doublings and plane_probe_backoff_max_doublings must be at most "
            "16"};
    return ok();
}

void EvSet::release() {
    if (gauges_ == nullptr) return;
    for (const EvEntry &e : e_) {
        --gauges_->total[e.plane];
        if (e.state == EvState::kAssumedBad) --gauges_->assumed_bad[e.plane];
        if (e.state == EvState::kDenied) --gauges_->denied[e.plane];
    }
    gauges_ = nullptr;
}

void EvSet::init(const EvConfig &cfg, uint32_t planes, uint64_t seed, EvGauges *gauges) {
    release();
    cfg_ = cfg;
    gauges_ = gauges;
    planes_ = std::clamp<uint32_t>(planes, 1, kMaxPlanes);
    per_plane_ = cfg.evs / planes_;
    spares_per_plane_ = cfg.backup_per_plane;
    const uint32_t total = per_plane_ * planes_ + spares_per_plane_ * planes_;
    Rng rng(seed);
    std::vector<uint8_t> used(65536, 0);
    auto draw = [&] {
        for (;;) {
            const auto v = static_cast<uint16_t>(cfg.ev_min + rng.below(range_size(cfg)));
            if (!used[v]) {
                used[v] = 1;
                return v;
            }
        }
    };
    e_.assign(total, EvEntry{});
    d_.assign(total, EvDetail{});
    active_.assign(per_plane_ * planes_, 0);
    spares_.assign(spares_per_plane_ * planes_, 0);
    uint32_t i = 0;
    for (uint32_t p = 0; p < planes_; ++p) {
        for (uint32_t j = 0; j < per_plane_; ++j, ++i) {
            e_[i].ev = draw();
            e_[i].plane = static_cast<uint8_t>(p);
            e_[i].active = true;
            active_[p * per_plane_ + j] = static_cast<uint16_t>(i);
        }
        for (uint32_t j = 0; j < spares_per_plane_; ++j, ++i) {
            e_[i].ev = draw();
            e_[i].plane = static_cast<uint8_t>(p);
            spares_[p * spares_per_plane_ + j] = static_cast<uint16_t>(i);
        }
    }
    for (EvDetail &d : d_)
        d.probe_need = cfg.probe_successes;
    if (gauges_)
        for (const EvEntry &e : e_)
            ++gauges_->total[e.plane];
    for (uint32_t p = 0; p < kMaxPlanes; ++p)
        good_active_[p] = static_cast<uint16_t>(p < planes_ ? per_plane_ : 0);
    next_expiry_ns_ = UINT64_MAX;
    for (uint32_t p = 0; p < kMaxPlanes; ++p) {
        for (auto &r : reverse_[p]) {
            r = ReverseEv{};
            if (p < planes_) r.ev = draw();
        }
        reverse_cursor_[p] = reverse_last_[p] = reverse_probe_cursor_[p] = 0;
    }
    uint32_t cap = 4;
    while (cap < 2 * total)
        cap <<= 1;
    index_.assign(cap, 0);
    index_shift_ = 32 - static_cast<uint32_t>(__builtin_ctz(cap));
    for (uint32_t k = 0; k < total; ++k) {
        uint32_t h = (uint32_t{e_[k].ev} * 0x9e3779b1u) >> index_shift_;
        while (index_[h] != 0)
            h = (h + 1) & (cap - 1);
        index_[h] = static_cast<uint16_t>(k + 1);
    }
    bad_.clear();
    bad_.reserve(total);
    rng_.reseed(rng.next());
    order_.assign(active_.size(), 0);
    reshuffle();
    cursor_ = static_cast<uint32_t>(rng_.below(order_.size()));
}

uint32_t EvSet::find(uint16_t ev) const {
    const uint32_t mask = static_cast<uint32_t>(index_.size()) - 1;
    uint32_t h = (uint32_t{ev} * 0x9e3779b1u) >> index_shift_;
    for (;;) {
        const uint32_t v = index_[h];
        if (v == 0) return kNoEv;
        if (e_[v - 1].ev == ev) return v - 1;
        h = (h + 1) & mask;
    }
}

// The walk visits every active slot once per pass, in rounds of one slot
// per plane: each plane's slots in a fresh order, and the planes of each
// round in a fresh order too. Planes stay balanced packet by packet, but
// no plane holds a fixed place in the cycle: with a fixed cycle, a
// responder that acks every P packets would always echo the EV of one
// plane, and the other planes would never hear their RTT and ECN.
void EvSet::reshuffle() {
    uint32_t perm[kMaxEvs];
    for (uint32_t p = 0; p < planes_; ++p) {
        for (uint32_t j = 0; j < per_plane_; ++j)
            perm[j] = j;
        for (uint32_t j = per_plane_; j > 1; --j)
            std::swap(perm[j - 1], perm[rng_.below(j)]);
        for (uint32_t j = 0; j < per_plane_; ++j)
            order_[j * planes_ + p] = static_cast<uint16_t>(p * per_plane_ + perm[j]);
    }
    for (uint32_t r = 0; r < per_plane_; ++r)
        for (uint32_t k = planes_; k > 1; --k)
            std::swap(order_[r * planes_ + k - 1], order_[r * planes_ + rng_.below(k)]);
}

void EvSet::set_state(EvEntry &e, EvState s, uint64_t now_ns) {
    if (e.state == s) return;
    if (gauges_) {
        if (e.state == EvState::kAssumedBad) --gauges_->assumed_bad[e.plane];
        if (e.state == EvState::kDenied) --gauges_->denied[e.plane];
        if (s == EvState::kAssumedBad) ++gauges_->assumed_bad[e.plane];
        if (s == EvState::kDenied) ++gauges_->denied[e.plane];
    }
    const auto idx = static_cast<uint32_t>(&e - e_.data());
    if (e.state == EvState::kAssumedBad) {
        const auto it = std::find(bad_.begin(), bad_.end(), idx);
        *it = bad_.back();
        bad_.pop_back();
    }
    if (s == EvState::kAssumedBad) bad_.push_back(idx);
    if (e.active) {
        if (e.state == EvState::kGood) --good_active_[e.plane];
        if (s == EvState::kGood) ++good_active_[e.plane];
    }
    e.state = s;
    d_[idx].since_ns = now_ns;
}

void EvSet::expire_skips(uint64_t now_ns) {
    next_expiry_ns_ = UINT64_MAX;
    for (uint32_t i = 0; i < e_.size(); ++i) {
        if (e_[i].state != EvState::kSkip) continue;
        if (now_ns >= d_[i].skip_until_ns)
            set_state(e_[i], EvState::kGood, now_ns);
        else
            next_expiry_ns_ = std::min(next_expiry_ns_, d_[i].skip_until_ns);
    }
}

// Cost: a few ns while GOOD EVs abound; when none is left on the allowed
// planes (every path marked, say), the walk takes SKIP ones in turn rather
// than scan the set for each packet.
uint32_t EvSet::choose(uint64_t now_ns, uint8_t planes) {
    if (now_ns >= next_expiry_ns_) expire_skips(now_ns);
    bool any_good = false;
    for (uint32_t p = 0; p < planes_; ++p)
        any_good |= ((planes >> p) & 1) && good_active_[p] != 0;
    const auto n = static_cast<uint32_t>(order_.size());
    for (uint32_t t = 0; t < n; ++t) {
        // A slot's plane is its index's (active_ keeps a plane's slots
        // together): EVs of other planes are passed over without reading
        // their entries, which with thousands of QPs are rarely in cache.
        const uint32_t slot = order_[cursor_];
        if (++cursor_ == n) {
            cursor_ = 0;
            reshuffle();
        }
        if (!((planes >> (slot / per_plane_)) & 1)) continue;
        const uint32_t i = active_[slot];
        const EvEntry &e = e_[i];
        if (e.state == EvState::kGood || (!any_good && e.state == EvState::kSkip)) return i;
    }
    return pick(now_ns, cursor_, kNoEv, 0, planes);
}

uint32_t EvSet::choose_spare(uint64_t now_ns, uint32_t avoid, uint8_t planes) {
    const auto n = static_cast<uint32_t>(spares_.size());
    if (n == 0) return kNoEv;
    const auto start = static_cast<uint32_t>(rng_.below(n));
    for (uint32_t t = 0; t < n; ++t) {
        uint32_t j = start + t;
        if (j >= n) j -= n;
        const uint32_t i = spares_[j];
        if (i != avoid && ((planes >> e_[i].plane) & 1) && usable(i, now_ns)) return i;
    }
    return kNoEv;
}

EvTimeout EvSet::adopt(uint32_t s, uint32_t a, uint64_t now_ns) {
    if (s >= e_.size() || a >= e_.size() || e_[s].active || !e_[a].active ||
        e_[s].plane != e_[a].plane || e_[s].state == EvState::kDenied ||
        e_[a].state == EvState::kDenied)
        return EvTimeout::kSkipped;
    swap_in(a, s);
    if (e_[a].state == EvState::kAssumedBad) return EvTimeout::kAlreadyOut;
    return retire(e_[a], a, now_ns);  // a spare now: no floor
}

uint32_t EvSet::choose_on_plane(uint64_t now_ns, uint8_t plane) {
    const auto start = static_cast<uint32_t>(rng_.below(order_.size()));
    return pick(now_ns, start, kNoEv, 0, static_cast<uint8_t>(1u << plane));
}

uint32_t EvSet::choose_retx(uint64_t now_ns, uint32_t avoid, uint8_t avoid_planes, uint8_t planes) {
    const uint32_t start = static_cast<uint32_t>(rng_.below(order_.size()));
    return pick(now_ns, start, avoid, avoid_planes, planes);
}

// One pass over the active set from `start`, ranking each EV on a plane of
// `planes`; the first of the best rank wins (rank 0 ends the pass at once).
// Ranks: 0 usable, not on an avoided plane; 1 usable, on an avoided plane;
// 2 SKIP; 3 ASSUMED_BAD; the avoided entry itself only when nothing else
// is left; DENIED and other planes never (kNoEv when nothing is left).
uint32_t EvSet::pick(uint64_t now_ns, uint32_t start, uint32_t avoid, uint8_t avoid_planes,
                     uint8_t planes) {
    const auto n = static_cast<uint32_t>(order_.size());
    uint32_t best = kNoEv, best_rank = UINT32_MAX;
    for (uint32_t t = 0; t < n; ++t) {
        uint32_t j = start + t;
        if (j >= n) j -= n;
        const uint32_t i = active_[order_[j]];
        const EvEntry &e = e_[i];
        if (e.state == EvState::kDenied || !((planes >> e.plane) & 1)) continue;
        uint32_t rank;
        if (usable(i, now_ns))
            rank = ((avoid_planes >> e.plane) & 1) ? 1 : 0;
        else
            rank = e.state == EvState::kSkip ? 2 : 3;
        if (i == avoid) rank += 5;
        if (rank < best_rank) {
            best = i;
            best_rank = rank;
            if (rank == 0) break;
        }
    }
    if (best != kNoEv && e_[best].state == EvState::kSkip && now_ns >= d_[best].skip_until_ns)
        set_state(e_[best], EvState::kGood, now_ns);
    return best;
}

void EvSet::skip(EvEntry &e, uint64_t now_ns, uint64_t factor) {
    const uint32_t level = std::min<uint32_t>(e.skip_level, cfg_.skip_max_doublings);
    EvDetail &d = d_[static_cast<size_t>(&e - e_.data())];
    d.skip_until_ns = std::max(d.skip_until_ns, now_ns + ((cfg_.skip_ns * factor) << level));
    if (e.skip_level < 255) ++e.skip_level;
    next_expiry_ns_ = std::min(next_expiry_ns_, d.skip_until_ns);
    set_state(e, EvState::kSkip, now_ns);
}

bool EvSet::on_ecn(uint32_t i, uint64_t now_ns) {
    EvEntry &e = e_[i];
    if (e.state != EvState::kGood && e.state != EvState::kSkip) return false;
    skip(e, now_ns, 1);
    return true;
}

bool EvSet::on_trim(uint32_t i, uint64_t now_ns) {
    EvEntry &e = e_[i];
    if (e.state != EvState::kGood && e.state != EvState::kSkip) return false;
    skip(e, now_ns, cfg_.trim_skip_factor);
    return true;
}

uint32_t EvSet::slot_of(uint32_t i) const {
    const uint8_t p = e_[i].plane;
    for (uint32_t j = 0; j < per_plane_; ++j)
        if (active_[p * per_plane_ + j] == i) return p * per_plane_ + j;
    return kNoEv;
}

uint32_t EvSet::good_spare(uint8_t plane, uint64_t now_ns) const {
    for (uint32_t j = 0; j < spares_per_plane_; ++j) {
        const uint32_t s = spares_[plane * spares_per_plane_ + j];
        if (usable(s, now_ns)) return s;
    }
    return kNoEv;
}

void EvSet::swap_in(uint32_t a, uint32_t s) {
    const uint8_t p = e_[a].plane;
    const uint32_t slot = slot_of(a);
    for (uint32_t j = 0; j < spares_per_plane_; ++j) {
        uint16_t &sp = spares_[p * spares_per_plane_ + j];
        if (sp == s) {
            sp = static_cast<uint16_t>(a);
            break;
        }
    }
    active_[slot] = static_cast<uint16_t>(s);
    if (e_[a].state == EvState::kGood) --good_active_[p];
    if (e_[s].state == EvState::kGood) ++good_active_[p];
    e_[a].active = false;
    e_[s].active = true;
}

EvTimeout EvSet::on_timeout(uint32_t i, uint64_t now_ns) {
    EvEntry &e = e_[i];
    if (e.state == EvState::kAssumedBad || e.state == EvState::kDenied)
        return EvTimeout::kAlreadyOut;
    return retire(e, i, now_ns);
}

EvTimeout EvSet::on_loss(uint32_t i, uint64_t now_ns, bool *fresh) {
    EvEntry &e = e_[i];
    *fresh = e.loss_strikes == 0;
    if (e.state == EvState::kAssumedBad || e.state == EvState::kDenied)
        return EvTimeout::kAlreadyOut;
    if (e.loss_strikes == 0) {
        e.loss_strikes = 1;
        skip(e, now_ns, cfg_.trim_skip_factor);
        return EvTimeout::kSkipped;
    }
    return retire(e, i, now_ns);
}

EvTimeout EvSet::retire(EvEntry &e, uint32_t i, uint64_t now_ns) {
    e.loss_strikes = 0;
    if (e.active) {
        const uint32_t s = good_spare(e.plane, now_ns);
        if (s != kNoEv) {
            swap_in(i, s);
        } else {
            uint32_t ok = 0;
            for (const uint32_t a : active_) {
                const EvState st = e_[a].state;
                ok += st == EvState::kGood || st == EvState::kSkip;
            }
            if (ok <= cfg_.min_active) {
                e.skip_level = cfg_.skip_max_doublings;
                skip(e, now_ns, cfg_.trim_skip_factor);
                return EvTimeout::kFloorHeld;
            }
        }
    }
    // Failing again soon after a revival: a flapping path must prove itself longer.
    EvDetail &d = d_[i];
    const bool flapping = d.revived_ns != 0 && now_ns - d.revived_ns < cfg_.flap_window_ns;
    d.probe_need =
        flapping
            ? static_cast<uint8_t>(std::min<uint32_t>(2u * d.probe_need, cfg_.probe_successes_max))
            : cfg_.probe_successes;
    d.probe_ok = 0;
    d.probe_lost = 0;
    e.probe_out = false;
    d.probe_at_ns = now_ns + cfg_.probe_interval_ns;
    e.skip_level = 0;
    ++d.failures;
    set_state(e, EvState::kAssumedBad, now_ns);
    return EvTimeout::kRetired;
}

void EvSet::on_probe_sent(uint32_t i, uint64_t now_ns) {
    e_[i].probe_out = true;
    ++d_[i].probe_seq;
    d_[i].probe_at_ns = now_ns;
}

bool EvSet::on_probe_reply(uint32_t i, uint64_t now_ns) {
    EvEntry &e = e_[i];
    EvDetail &d = d_[i];
    e.probe_out = false;
    d.probe_lost = 0;
    if (e.state != EvState::kAssumedBad) return false;
    d.probe_at_ns = now_ns + cfg_.probe_interval_ns;
    if (++d.probe_ok < d.probe_need) return false;
    const uint64_t spell = now_ns - d.since_ns;
    d.min_bad_ns = std::min(d.min_bad_ns, spell);
    d.revived_ns = now_ns;
    ++d.revivals;
    set_state(e, EvState::kGood, now_ns);
    if (!e.active) {
        // Take back a slot of this plane held by an EV that is out of use.
        for (uint32_t j = 0; j < per_plane_; ++j) {
            const uint32_t a = active_[e.plane * per_plane_ + j];
            if (e_[a].state == EvState::kAssumedBad || e_[a].state == EvState::kDenied) {
                swap_in(a, i);
                break;
            }
        }
    }
    return true;
}

void EvSet::on_probe_lost(uint32_t i, uint64_t now_ns) {
    EvDetail &d = d_[i];
    e_[i].probe_out = false;
    d.probe_ok = 0;
    if (d.probe_lost < UINT8_MAX) ++d.probe_lost;
    d.probe_at_ns = now_ns + probe_wait_ns(cfg_, d.probe_lost);
}

void EvSet::deny(uint32_t i, uint64_t now_ns) {
    EvEntry &e = e_[i];
    if (e.state == EvState::kDenied) return;
    if (e.active) {
        const uint32_t s = good_spare(e.plane, now_ns);
        if (s != kNoEv) swap_in(i, s);
    }
    e.probe_out = false;
    set_state(e, EvState::kDenied, now_ns);
}

void EvSet::allow(uint32_t i, uint64_t now_ns) {
    EvEntry &e = e_[i];
    if (e.state != EvState::kDenied) return;
    EvDetail &d = d_[i];
    d.probe_need = cfg_.probe_successes;
    d.probe_ok = 0;
    d.probe_lost = 0;
    d.probe_at_ns = now_ns + cfg_.probe_interval_ns;
    set_state(e, EvState::kAssumedBad, now_ns);
}

uint16_t EvSet::draw_reverse() {
    return static_cast<uint16_t>(cfg_.ev_min + rng_.below(range_size(cfg_)));
}

uint16_t EvSet::next_reverse_ev(uint8_t plane) {
    ReverseEv *r = reverse_[plane];
    uint32_t best = 0, best_rank = UINT32_MAX;
    for (uint32_t k = 0; k < kReverseEvsPerPlane; ++k) {
        const uint32_t i = (reverse_cursor_[plane] + k) % kReverseEvsPerPlane;
        const auto rank = static_cast<uint32_t>(r[i].state);  // GOOD, UNKNOWN, SUSPECT
        if (rank < best_rank) {
            best = i;
            best_rank = rank;
            if (rank == 0) break;
        }
    }
    reverse_cursor_[plane] = static_cast<uint8_t>((best + 1) % kReverseEvsPerPlane);
    reverse_last_[plane] = static_cast<uint8_t>(best);
    return r[best].ev;
}

void EvSet::reverse_ack_lost(uint8_t plane) {
    ReverseEv &r = reverse_[plane][reverse_last_[plane]];
    if (r.state == RevState::kGood || r.state == RevState::kUnknown) r.state = RevState::kSuspect;
}

bool EvSet::reverse_probe_out(uint8_t plane) const {
    for (const ReverseEv &r : reverse_[plane])
        if (r.probe_out) return true;
    return false;
}

uint32_t EvSet::reverse_probe_slot(uint8_t plane) {
    if (reverse_probe_out(plane)) return kNoEv;
    const ReverseEv *r = reverse_[plane];
    for (uint32_t i = 0; i < kReverseEvsPerPlane; ++i)
        if (r[i].state == RevState::kSuspect) return i;
    for (uint32_t i = 0; i < kReverseEvsPerPlane; ++i)
        if (r[i].state == RevState::kUnknown) return i;
    const uint32_t i = reverse_probe_cursor_[plane];
    reverse_probe_cursor_[plane] = static_cast<uint8_t>((i + 1) % kReverseEvsPerPlane);
    return i;
}

void EvSet::on_reverse_probe_sent(uint8_t plane, uint32_t slot, uint64_t now_ns) {
    ReverseEv &r = reverse_[plane][slot];
    r.probe_out = true;
    ++r.probe_seq;
    r.probe_sent_ns = now_ns;
}

bool EvSet::on_reverse_probe_reply(uint8_t plane, uint32_t slot, uint16_t seq, uint16_t ev) {
    ReverseEv &r = reverse_[plane][slot];
    if (!r.probe_out || r.probe_seq != seq || r.ev != ev) return false;
    r.probe_out = false;
    r.state = RevState::kGood;
    return true;
}

void EvSet::on_reverse_probe_lost(uint8_t plane, uint32_t slot) {
    ReverseEv &r = reverse_[plane][slot];
    r.probe_out = false;
    // A fresh EV right away: acks should not wait for the next probe round
    // to leave a dead path.
    r.ev = draw_reverse();
    r.state = RevState::kUnknown;
    ++r.replaced;
}

EvStateCounts EvSet::counts(uint64_t now_ns) const {
    EvStateCounts c;
    for (uint32_t i = 0; i < e_.size(); ++i)
        ++c.state[static_cast<uint32_t>(usable(i, now_ns) ? EvState::kGood : e_[i].state)];
    return c;
}

}  // namespace mrc
