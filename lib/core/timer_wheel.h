// Hashed timer wheel: one timer per id (a QP), O(1) arm, cancel and move.
//
// Slot = (deadline / tick) mod slots. advance(now) visits the slots whose
// ticks passed and fires the timers due; a timer further away than one
// revolution stays in its slot until its round comes. Timers may fire up to
// one tick late, never early. No allocation after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace mrc {

class TimerWheel {
  public:
    static constexpr uint32_t kNone = UINT32_MAX;

    TimerWheel(uint32_t ids, uint32_t slots_pow2, uint64_t tick_ns)
        : slots_(slots_pow2, kNone), nodes_(ids), mask_(slots_pow2 - 1), tick_ns_(tick_ns) {}

    bool armed(uint32_t id) const { return nodes_[id].slot != kNone; }
    // The earliest time at which advance() will fire a timer (UINT64_MAX if
    // none armed): the tick boundary its slot is visited at. Walks the slots
    // in tick order from the next tick and stops at the first one holding a
    // timer of this revolution: cost in slots up to the earliest timer, plus
    // the timers met on the way (all of them only when every timer is more
    // than a revolution away).
    uint64_t next_fire_ns() const {
        if (armed_ == 0) return UINT64_MAX;
        uint64_t m = UINT64_MAX;
        for (uint64_t t = last_tick_ + 1; t <= last_tick_ + slots_.size(); ++t) {
            for (uint32_t id = slots_[t & mask_]; id != kNone; id = nodes_[id].next)
                if (nodes_[id].tick < m) m = nodes_[id].tick;
            // Later slots of this revolution only hold ticks after t.
            if (m <= t) break;
        }
        return m * tick_ns_;
    }
    uint64_t tick_ns() const { return tick_ns_; }
    uint64_t deadline(uint32_t id) const { return nodes_[id].deadline_ns; }
    uint32_t armed_count() const { return armed_; }

    // Arms (or moves) the timer of `id`. A deadline already passed fires at
    // the next advance().
    void arm(uint32_t id, uint64_t deadline_ns) {
        if (armed(id)) unlink(id);
        Node &n = nodes_[id];
        n.deadline_ns = deadline_ns;
        // The first tick boundary at or after the deadline: visiting that
        // slot at that tick always finds the timer due.
        uint64_t t = (deadline_ns + tick_ns_ - 1) / tick_ns_;
        if (t <= last_tick_) t = last_tick_ + 1;
        n.tick = t;
        link(id, static_cast<uint32_t>(t & mask_));
    }
    // Arms only if not armed or armed later than `deadline_ns`.
    void arm_earlier(uint32_t id, uint64_t deadline_ns) {
        if (!armed(id) || nodes_[id].deadline_ns > deadline_ns) arm(id, deadline_ns);
    }
    void cancel(uint32_t id) {
        if (armed(id)) unlink(id);
    }

    // Fires fn(id) for every timer due at `now_ns`. The timer is disarmed
    // before fn runs; fn may re-arm or cancel that timer, and only that one
    // (a re-armed timer fires in a later call, even if due now).
    template <class F>
    void advance(uint64_t now_ns, F &&fn) {
        const uint64_t now_tick = now_ns / tick_ns_;
        if (now_tick <= last_tick_) return;
        uint64_t from = last_tick_ + 1;
        if (now_tick - from >= slots_.size()) from = now_tick - mask_;  // one revolution covers all
        last_tick_ = now_tick;  // arms from fn land in later ticks
        for (uint64_t t = from; t <= now_tick; ++t) {
            uint32_t id = slots_[t & mask_];
            while (id != kNone) {
                const uint32_t next = nodes_[id].next;
                if (nodes_[id].deadline_ns <= now_ns) {
                    unlink(id);
                    fn(id);
                }
                id = next;
            }
        }
    }

  private:
    struct Node {
        uint64_t deadline_ns = 0;
        uint64_t tick = 0;  // the tick whose visit of the slot fires it (or a later revolution's)
        uint32_t prev = kNone;
        uint32_t next = kNone;
        uint32_t slot = kNone;
    };
    void link(uint32_t id, uint32_t slot) {
        Node &n = nodes_[id];
        n.slot = slot;
        n.prev = kNone;
        n.next = slots_[slot];
        if (n.next != kNone) nodes_[n.next].prev = id;
        slots_[slot] = id;  // at the head: a walk in progress does not see it
        ++armed_;
    }
    void unlink(uint32_t id) {
        Node &n = nodes_[id];
        if (n.prev != kNone)
            nodes_[n.prev].next = n.next;
        else
            slots_[n.slot] = n.next;
        if (n.next != kNone) nodes_[n.next].prev = n.prev;
        n.prev = n.next = n.slot = kNone;
        --armed_;
    }

    std::vector<uint32_t> slots_;
    std::vector<Node> nodes_;
    uint32_t mask_;
    uint64_t tick_ns_;
    uint64_t last_tick_ = 0;
    uint32_t armed_ = 0;
};

}  // namespace mrc
