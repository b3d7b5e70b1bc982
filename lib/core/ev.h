// Entropy values (EVs) of one QP and their health: the UDP source ports its
// packets are sprayed over, split evenly across planes, each with a state.
//
// Per plane the QP has `evs / planes` active EVs and `backup_per_plane`
// spares. New packets walk the active set in an order that alternates
// planes and is reshuffled (per plane, from the QP's own seed) after every
// pass, so QPs never move in lock-step; the walk passes over EVs that are
// not GOOD and planes the QP may not use. Retransmissions take a random
// GOOD EV other than the one that failed.
//
// EV health. Rows: the EV's state; columns: what happened to it.
//
// clang-format off
//   state       | delivered  | ECN echo   | trim NACK (*) | loss found    | timeout while   | probe reply | probe lost | deny   | allow
//               | (an ack)   |            |               | from acks     | the peer answers|             |            |        |
//   ------------+------------+------------+---------------+---------------+-----------------+-------------+------------+--------+------------
//   GOOD        | GOOD,      | SKIP       | SKIP x factor | 1st: as trim; | ASSUMED_BAD:    | -           | -          | DENIED | -
//               | level 0,   | level + 1  | level + 1     | 2nd in a row: | retired, a spare|             |            |        |
//               | strikes 0  |            |               | as timeout    | takes its slot; |             |            |        |
//               |            |            |               |               | at the floor:   |             |            |        |
//               |            |            |               |               | SKIP max        |             |            |        |
//   SKIP        | level 0    | SKIP again,| as GOOD       | as GOOD       | as GOOD         | -           | -          | DENIED | -
//               | (expires)  | level + 1  |               |               |                 |             |            |        |
//   ASSUMED_BAD | -          | -          | -             | -             | -               | ok + 1; at  | ok = 0     | DENIED | -
//               |            |            |               |               |                 | need: GOOD  |            |        |
//   DENIED      | -          | -          | -             | -             | -               | -           | -          | -      | ASSUMED_BAD
// clang-format on
//
//   (*) TRIMMED only: a last-hop trim or a receiver-resource NACK is not
//       the path's fault and changes nothing.
//   A loss found from acks (docs/loss-recovery.md) acts as a trim NACK the
//   first time since a packet the EV carried was acknowledged (strikes 1),
//   and as a timeout the second time in a row. A timeout while the peer
//   says nothing at all changes nothing (no path is to blame).
//   SKIP lasts skip_ns << min(level, skip_max_doublings) (x trim_skip_factor
//   for a trim); it ends by itself (checked when the walk reaches the EV).
//   A revived EV (ok reached `need`) returns to GOOD; a spare that revives
//   takes back a slot held by an ASSUMED_BAD EV of its plane.
//   Flap damping: an EV that fails within flap_window_ns of its last revival
//   needs twice the replies next time (up to probe_successes_max); one that
//   stayed good longer starts again from probe_successes.
//   The floor: an active EV is not retired when no GOOD spare of its plane
//   can replace it and fewer than min_active active EVs would be left GOOD
//   or SKIP; it goes to SKIP at the longest skip instead.
//   DENIED (the operator) leaves the active set at once when a spare can
//   take its slot; an allowed EV has to prove itself with probes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/rng.h"
#include "core/config.h"
#include "wire/mrc.h"

namespace mrc {

inline constexpr uint32_t kMaxEvs = 4096;  // active + spare EVs of one QP
static_assert(kMaxEvs < 65536, "EvSet keeps entry and slot numbers in 16 bits");
inline constexpr uint32_t kNoEv = UINT32_MAX;

enum class EvState : uint8_t { kGood, kSkip, kAssumedBad, kDenied };
inline constexpr uint32_t kEvStates = 4;
const char *to_string(EvState s);

// What a packet's send and ack read of an EV, 8 bytes: with thousands of
// QPs the entries of every QP stay in the core's cache (issue 18); the
// rest, read on probes and state changes, is in EvDetail.
struct EvEntry {
    uint16_t ev = 0;  // the UDP source port
    uint8_t plane = 0;
    EvState state = EvState::kGood;
    bool active = false;       // in the active set; otherwise a spare
    bool probe_out = false;    // a probe on this EV awaits its reply
    uint8_t skip_level = 0;    // marks in a row: each doubles the next skip
    uint8_t loss_strikes = 0;  // packets lost on it since one it carried was acknowledged
};
static_assert(sizeof(EvEntry) == 8);

// The rest of an EV's state: SKIP and probe timing, revival, history.
struct EvDetail {
    uint8_t probe_ok = 0;    // probe replies in a row while ASSUMED_BAD
    uint8_t probe_need = 0;  // replies that revive it (grows when it flaps)
    uint8_t probe_lost = 0;  // probes lost in a row: each doubles the next wait
    uint16_t probe_seq = 0;  // sequence of the latest probe
    uint64_t skip_until_ns = 0;
    uint64_t since_ns = 0;     // when it entered its state
    uint64_t revived_ns = 0;   // last revival by probes (0: never)
    uint64_t probe_at_ns = 0;  // ASSUMED_BAD: next probe due; probe_out: when it was sent
    // History, for reports and tests.
    uint32_t failures = 0;             // times it became ASSUMED_BAD
    uint32_t revivals = 0;             // times probes revived it
    uint64_t min_bad_ns = UINT64_MAX;  // shortest ASSUMED_BAD spell that ended in a revival
};

// What an ack timeout or a lost packet did to the EV.
enum class EvTimeout : uint8_t { kRetired, kFloorHeld, kAlreadyOut, kSkipped };

// Health of a reverse EV (the responder's acks and probe replies), in the
// order acks prefer them:
//   GOOD: a reverse probe on it was answered;
//   UNKNOWN: not verified yet (fresh);
//   SUSPECT: an ack it carried was evidently lost (a duplicate arrived):
//     used only when nothing better is left, and probed next.
// A reverse EV whose probe goes unanswered is replaced at once by a fresh
// UNKNOWN one (there is no lasting BAD state: the slot gets a new EV).
enum class RevState : uint8_t { kGood, kUnknown, kSuspect };
const char *to_string(RevState s);
struct ReverseEv {
    uint16_t ev = 0;
    RevState state = RevState::kUnknown;
    bool probe_out = false;
    uint16_t probe_seq = 0;
    uint64_t probe_sent_ns = 0;
    uint32_t replaced = 0;  // times this slot got a fresh EV
};

// Per-plane gauges that every QP's EV set of one endpoint keeps current,
// for the path scorer (core/path.h): how many EVs are out of use.
struct EvGauges {
    int32_t total[kMaxPlanes] = {};  // active and spare EVs
    int32_t assumed_bad[kMaxPlanes] = {};
    int32_t denied[kMaxPlanes] = {};
};

struct EvStateCounts {
    uint32_t state[kEvStates] = {};  // indexed by EvState
    EvStateCounts &operator+=(const EvStateCounts &o) {
        for (uint32_t i = 0; i < kEvStates; ++i)
            state[i] += o.state[i];
        return *this;
    }
};

// "FIRST-LAST" (e.g. "49152-65535") into cfg's ev_min / ev_max; the error
// names what is wrong. Whether the range is large enough for a QP is
// EvSet::check's.
Result<void> parse_ev_range(std::string_view s, EvConfig *cfg);

class EvSet {
  public:
    EvSet() = default;
    ~EvSet() { release(); }
    EvSet(const EvSet &) = delete;
    EvSet &operator=(const EvSet &) = delete;

    // Whether `cfg` can work on `planes` planes; the error says why not.
    static Result<void> check(const EvConfig &cfg, uint32_t planes);
    // Draws cfg.evs + planes x cfg.backup_per_plane distinct EVs from [ev_min, ev_max] with
    // `seed` (check() must have passed). `gauges` (may be null) is kept current.
    void init(const EvConfig &cfg, uint32_t planes, uint64_t seed, EvGauges *gauges = nullptr);
    // Takes this set's EVs out of the gauges (before destruction or re-init).
    void release();

    uint32_t size() const { return static_cast<uint32_t>(e_.size()); }
    uint32_t active_size() const { return static_cast<uint32_t>(active_.size()); }
    uint32_t planes() const { return planes_; }
    const EvEntry &entry(uint32_t i) const { return e_[i]; }
    const std::vector<EvEntry> &entries() const { return e_; }
    const EvDetail &detail(uint32_t i) const { return d_[i]; }
    // Heap bytes of the set's tables (the object itself is in its owner).
    size_t memory_bytes() const {
        auto vec = [](const auto &v) { return v.capacity() * sizeof(v[0]); };
        return vec(e_) + vec(d_) + vec(active_) + vec(spares_) + vec(order_) + vec(index_) +
               vec(bad_);
    }
    // The entry holding EV value `ev`, or kNoEv. A few ns: a small hash.
    uint32_t find(uint16_t ev) const;

    // ---- choice ----
    // The EV for a new packet: the next GOOD one in the walk on a plane of
    // `planes` (bit p: plane p). When none is, the least bad on those
    // planes. kNoEv when every active EV on them is DENIED: never an EV of
    // another plane.
    uint32_t choose(uint64_t now_ns, uint8_t planes);
    // The EV for a retransmission: a random GOOD one on `planes` other than
    // `avoid` (an entry index or kNoEv), off the planes in `avoid_planes`
    // when another plane can take it. Never off `planes`.
    uint32_t choose_retx(uint64_t now_ns, uint32_t avoid, uint8_t avoid_planes, uint8_t planes);
    // A random usable spare EV on `planes` other than `avoid`, or kNoEv: a
    // resend after a timeout nobody answered tries a path the active set
    // may not reach (all of a QP's active EVs can hash onto one dead path).
    uint32_t choose_spare(uint64_t now_ns, uint32_t avoid, uint8_t planes);
    // Spare `s` carried a packet that the active EV `a` (same plane) did
    // not: `s` takes a's slot and `a` is retired among the spares (kRetired;
    // kAlreadyOut when it was ASSUMED_BAD already). kSkipped, with nothing
    // changed, when they are not such a pair.
    EvTimeout adopt(uint32_t s, uint32_t a, uint64_t now_ns);
    // A random usable EV of one plane (the reply to a reverse probe), or
    // kNoEv when the plane has none that is not DENIED.
    uint32_t choose_on_plane(uint64_t now_ns, uint8_t plane);
    // Active EV j (< per_plane()) of `plane`.
    uint32_t per_plane() const { return per_plane_; }
    uint32_t active_entry(uint8_t plane, uint32_t j) const {
        return active_[plane * per_plane_ + j];
    }

    // ---- health (the truth table above) ----
    void on_clean_ack(uint32_t i) { e_[i].skip_level = 0; }
    // Return true when the EV was GOOD or SKIP and is SKIP now.
    bool on_ecn(uint32_t i, uint64_t now_ns);
    bool on_trim(uint32_t i, uint64_t now_ns);
    EvTimeout on_timeout(uint32_t i, uint64_t now_ns);
    // A packet the EV carried was acknowledged / was found lost. The first
    // loss since a delivery puts the EV in SKIP (trim_skip_factor times
    // skip_ns: random loss costs a short detour), a second one retires it
    // as a timeout does. *fresh: the EV had no loss since its last delivery.
    void on_delivered(uint32_t i) { e_[i].loss_strikes = 0; }
    EvTimeout on_loss(uint32_t i, uint64_t now_ns, bool *fresh);
    // A probe on entry i was sent / answered / given up. on_probe_reply
    // returns true when the reply revived the EV. After a lost probe the
    // next waits probe_interval_ns << min(lost in a row, max doublings).
    void on_probe_sent(uint32_t i, uint64_t now_ns);
    bool on_probe_reply(uint32_t i, uint64_t now_ns);
    void on_probe_lost(uint32_t i, uint64_t now_ns);
    void deny(uint32_t i, uint64_t now_ns);
    void allow(uint32_t i, uint64_t now_ns);
    // Entries in ASSUMED_BAD (probed by the QP), in no particular order.
    const std::vector<uint32_t> &assumed_bad() const { return bad_; }
    // Cache hints for the next pick: the walk and the entry it starts at.
    void prefetch() const {
        if (order_.empty()) return;
        __builtin_prefetch(&order_[cursor_ < order_.size() ? cursor_ : 0]);
        __builtin_prefetch(active_.data());
        __builtin_prefetch(e_.data());
    }
    // Once prefetch()'s lines are near: the entry the walk offers next.
    void prefetch_next() const {
        if (order_.empty()) return;
        __builtin_prefetch(&e_[active_[order_[cursor_ < order_.size() ? cursor_ : 0]]]);
    }

    // True when SKIP has run out (the state changes when the walk reaches it).
    // The wait before the next probe after `lost` probes lost in a row.
    static uint64_t probe_wait_ns(const EvConfig &c, uint8_t lost) {
        return c.probe_interval_ns << std::min<uint8_t>(lost, c.probe_backoff_max_doublings);
    }
    static uint64_t plane_probe_wait_ns(const EvConfig &c, uint8_t lost) {
        return c.probe_interval_ns << std::min<uint8_t>(lost, c.plane_probe_backoff_max_doublings);
    }
    bool usable(uint32_t i, uint64_t now_ns) const {
        return e_[i].state == EvState::kGood ||
               (e_[i].state == EvState::kSkip && now_ns >= d_[i].skip_until_ns);
    }
    EvStateCounts counts(uint64_t now_ns) const;

    // ---- reverse EVs: the QP's acks and probe replies ----
    // The EV for this QP's next ack on `plane`: acks rotate over a small
    // reverse set per plane, GOOD ones first, then UNKNOWN, then SUSPECT.
    uint16_t next_reverse_ev(uint8_t plane);
    const ReverseEv &reverse(uint8_t plane, uint32_t slot) const { return reverse_[plane][slot]; }
    uint16_t reverse_ev(uint8_t plane, uint32_t slot) const { return reverse_[plane][slot].ev; }
    bool reverse_has_good(uint8_t plane) const {
        for (const ReverseEv &r : reverse_[plane])
            if (r.state == RevState::kGood) return true;
        return false;
    }
    // The slot of `plane` the last next_reverse_ev() took.
    uint32_t last_reverse_slot(uint8_t plane) const { return reverse_last_[plane]; }
    // A duplicate arrived on `plane`: the last ack sent there was evidently
    // lost; its reverse EV becomes SUSPECT (and is probed next).
    void reverse_ack_lost(uint8_t plane);
    // The reverse slot of `plane` to probe next (SUSPECT ones first, then
    // UNKNOWN ones, then GOOD ones in turn), or
    // kNoEv while a probe of the plane is out.
    uint32_t reverse_probe_slot(uint8_t plane);
    void on_reverse_probe_sent(uint8_t plane, uint32_t slot, uint64_t now_ns);
    // True when the reply matches the outstanding probe (the EV is GOOD now).
    bool on_reverse_probe_reply(uint8_t plane, uint32_t slot, uint16_t seq, uint16_t ev);
    // Unanswered: the slot gets a fresh UNKNOWN EV at once.
    void on_reverse_probe_lost(uint8_t plane, uint32_t slot);
    bool reverse_probe_out(uint8_t plane) const;
    static constexpr uint32_t kReverseEvsPerPlane = 4;

  private:
    void set_state(EvEntry &e, EvState s, uint64_t now_ns);
    // SKIP spells that ran out become GOOD (all of them, once the earliest is due).
    void expire_skips(uint64_t now_ns);
    void skip(EvEntry &e, uint64_t now_ns, uint64_t factor);
    void reshuffle();
    // Moves spare `s` into the slot of active entry `a` of the same plane.
    void swap_in(uint32_t a, uint32_t s);
    uint32_t good_spare(uint8_t plane, uint64_t now_ns) const;
    uint32_t slot_of(uint32_t i) const;
    uint32_t pick(uint64_t now_ns, uint32_t start, uint32_t avoid, uint8_t avoid_planes,
                  uint8_t planes);
    uint16_t draw_reverse();
    EvTimeout retire(EvEntry &e, uint32_t i, uint64_t now_ns);

    EvConfig cfg_;
    std::vector<EvEntry> e_;
    std::vector<EvDetail> d_;  // by entry, as e_
    // Entry and slot numbers fit 16 bits (kMaxEvs): the tables a packet
    // touches stay small.
    std::vector<uint16_t> active_;  // slot (plane * per_plane + j) -> entry
    std::vector<uint16_t> spares_;  // plane * spares_per_plane + j -> entry
    std::vector<uint16_t> order_;   // the walk: slots, planes interleaved
    std::vector<uint16_t> index_;   // open-addressed hash, load <= 1/2: EV -> entry + 1 (0: empty)
    std::vector<uint32_t> bad_;
    uint32_t index_shift_ = 0;
    uint32_t per_plane_ = 0;
    uint32_t spares_per_plane_ = 0;
    uint32_t planes_ = 1;
    uint32_t cursor_ = 0;
    // Active GOOD EVs per plane, and when the earliest SKIP runs out: the
    // walk never makes a pass in vain.
    uint16_t good_active_[kMaxPlanes] = {};
    uint64_t next_expiry_ns_ = UINT64_MAX;
    EvGauges *gauges_ = nullptr;
    ReverseEv reverse_[kMaxPlanes][kReverseEvsPerPlane] = {};
    uint8_t reverse_cursor_[kMaxPlanes] = {};
    uint8_t reverse_last_[kMaxPlanes] = {};  // slot of the last ack sent on the plane
    uint8_t reverse_probe_cursor_[kMaxPlanes] = {};
    Rng rng_;
};

}  // namespace mrc
