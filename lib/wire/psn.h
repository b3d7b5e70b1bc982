// Packet sequence numbers: 24 bits on the wire, compared with wrap-around.
//
// Psn has no conversion to or from a raw integer besides the explicit
// constructor and value(): a raw integer comparison of two PSNs does not
// compile. Ordering is defined only between PSNs less than 2^23 apart, as
// with TCP sequence numbers (Linux before()/after()).
#pragma once

#include <compare>
#include <cstdint>

namespace mrc {

class Psn {
  public:
    static constexpr uint32_t kBits = 24;
    static constexpr uint32_t kMask = (1u << kBits) - 1;
    static constexpr uint32_t kHalf = 1u << (kBits - 1);

    constexpr Psn() = default;
    constexpr explicit Psn(uint32_t v) : v_(v & kMask) {}

    constexpr uint32_t value() const { return v_; }

    constexpr Psn operator+(uint32_t n) const { return Psn(v_ + n); }
    constexpr Psn operator-(uint32_t n) const { return Psn(v_ - n); }
    constexpr Psn &operator+=(uint32_t n) {
        v_ = (v_ + n) & kMask;
        return *this;
    }
    constexpr Psn &operator++() { return *this += 1; }

    // Signed distance from a to b (b - a), in [-2^23, 2^23).
    friend constexpr int32_t distance(Psn a, Psn b) {
        const uint32_t d = (b.v_ - a.v_) & kMask;
        return d >= kHalf ? static_cast<int32_t>(d) - static_cast<int32_t>(1u << kBits)
                          : static_cast<int32_t>(d);
    }

    friend constexpr bool operator==(Psn a, Psn b) { return a.v_ == b.v_; }
    friend constexpr std::strong_ordering operator<=>(Psn a, Psn b) {
        const int32_t d = distance(b, a);
        return d < 0 ? std::strong_ordering::less
                     : (d > 0 ? std::strong_ordering::greater : std::strong_ordering::equal);
    }

  private:
    uint32_t v_ = 0;
};

static_assert(distance(Psn(Psn::kMask), Psn(0)) == 1, "wrap forward");
static_assert(Psn(Psn::kMask) < Psn(3), "wrap-around order");
static_assert(Psn(5) > Psn(Psn::kMask - 5), "wrap-around order");
static_assert(Psn(Psn::kMask) + 1 == Psn(0));

}  // namespace mrc
