// Entropy values (EVs) of one QP: the UDP source ports its packets are
// sprayed over, split evenly across planes.
//
// EV i belongs to plane i % planes, so walking the set in order alternates
// planes packet by packet; every QP starts at its own seeded offset so that
// QPs do not move in lock-step. Health states, backup sets and smarter
// choice (REPS-style recycling) arrive with the adaptive-multipath work.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace mrc {

inline constexpr uint32_t kMaxPlanes = 8;

struct EvChoice {
    uint16_t ev = 0;
    uint8_t plane = 0;
};

class EvSet {
  public:
    // `count` EVs (rounded up to a multiple of planes), distinct, drawn
    // from [1024, 65535] with `seed`.
    void init(uint32_t count, uint32_t planes, uint64_t seed);

    uint32_t size() const { return static_cast<uint32_t>(evs_.size()); }
    uint32_t planes() const { return planes_; }
    uint16_t ev(uint32_t i) const { return evs_[i]; }
    uint8_t plane_of(uint32_t i) const { return static_cast<uint8_t>(i % planes_); }

    // Next EV in rotation.
    EvChoice next() {
        const uint32_t i = cursor_;
        cursor_ = cursor_ + 1 == evs_.size() ? 0 : cursor_ + 1;
        return {evs_[i], plane_of(i)};
    }
    // A random EV other than `avoid`, for a retransmission. Random, not the
    // rotation: a QP resending the same few PSNs round after round would
    // otherwise give each PSN the same stride of EVs, all on one dead path.
    EvChoice random_other_than(uint16_t avoid) {
        const auto n = static_cast<uint32_t>(evs_.size());
        uint32_t i = static_cast<uint32_t>(rng_.below(n));
        if (evs_[i] == avoid && n > 1) i = (i + 1 + static_cast<uint32_t>(rng_.below(n - 1))) % n;
        return {evs_[i], plane_of(i)};
    }
    // The EV for this QP's next ack on `plane`: acks rotate over a small
    // reverse set per plane, so one dead path cannot silence them all.
    uint16_t next_reverse_ev(uint8_t plane) {
        const uint32_t i = reverse_cursor_[plane];
        reverse_cursor_[plane] = static_cast<uint8_t>((i + 1) % kReverseEvsPerPlane);
        return reverse_[plane][i];
    }
    uint16_t reverse_ev(uint8_t plane, uint32_t i) const { return reverse_[plane][i]; }
    // The last ack on `plane` was evidently lost (a duplicate arrived):
    // replace the reverse EV it used with a fresh one, so acks find a way
    // around a dead path even when every reverse EV hashed onto it.
    void refresh_last_reverse_ev(uint8_t plane) {
        const uint32_t last =
            (reverse_cursor_[plane] + kReverseEvsPerPlane - 1) % kReverseEvsPerPlane;
        reverse_[plane][last] = static_cast<uint16_t>(1024 + rng_.below(65536 - 1024));
    }
    static constexpr uint32_t kReverseEvsPerPlane = 4;

  private:
    std::vector<uint16_t> evs_;
    uint16_t reverse_[kMaxPlanes][kReverseEvsPerPlane] = {};
    uint8_t reverse_cursor_[kMaxPlanes] = {};
    uint32_t planes_ = 1;
    uint32_t cursor_ = 0;
    Rng rng_;
};

}  // namespace mrc
