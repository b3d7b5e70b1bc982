// The dataplane's clock: the TSC, turned into nanoseconds since the
// dataplane started with one multiply and one shift. The core has no clock
// of its own; workers read this once per loop and pass now_ns in.
#pragma once

#include <rte_cycles.h>

#include <cstdint>

namespace mrc::dp {

__extension__ using u128 = unsigned __int128;

class TscClock {
  public:
    TscClock() {
        hz_ = rte_get_tsc_hz();
        if (hz_ == 0) hz_ = 1'000'000'000;
        // ns = cycles * mult >> 32; exact to 1 ppb for any TSC above 1 MHz.
        mult_ = static_cast<uint64_t>((1'000'000'000.0 * 4294967296.0) / double(hz_));
        start_ = rte_rdtsc();
    }
    uint64_t now_ns() const { return to_ns(rte_rdtsc() - start_); }
    uint64_t to_ns(uint64_t cycles) const {
        return static_cast<uint64_t>((static_cast<u128>(cycles) * mult_) >> 32);
    }
    uint64_t hz() const { return hz_; }

  private:
    uint64_t hz_ = 0;
    uint64_t mult_ = 0;
    uint64_t start_ = 0;
};

}  // namespace mrc::dp
