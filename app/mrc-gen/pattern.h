// The verification pattern of mrc-gen: message `seq` of QP `qp` has bytes
// that depend on both and on their offset, so a misplaced, stale, torn or
// corrupted message never matches. Cheap: one add per 8 bytes.
#pragma once

#include <cstdint>
#include <cstring>

namespace mrc::gen {

inline uint64_t pattern_seed(uint32_t qp, uint64_t seq) {
    uint64_t x = (uint64_t{qp} << 40) ^ (seq + 1) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    return x * 0xbf58476d1ce4e5b9ull;
}
inline constexpr uint64_t kPatternStep = 0x100000001b3ull;

inline void pattern_fill(uint8_t *p, uint32_t len, uint32_t qp, uint64_t seq) {
    uint64_t w = pattern_seed(qp, seq);
    uint32_t i = 0;
    for (; i + 8 <= len; i += 8, w += kPatternStep)
        std::memcpy(p + i, &w, 8);
    if (i < len) std::memcpy(p + i, &w, len - i);
}

// Bytes that differ from the pattern (0: the message is intact).
inline uint64_t pattern_check(const uint8_t *p, uint32_t len, uint32_t qp, uint64_t seq) {
    uint64_t w = pattern_seed(qp, seq);
    uint64_t bad = 0;
    uint32_t i = 0;
    for (; i + 8 <= len; i += 8, w += kPatternStep) {
        uint64_t v;
        std::memcpy(&v, p + i, 8);
        if (v != w) [[unlikely]] {
            for (uint32_t b = 0; b < 8; ++b)
                bad += uint8_t(v >> (8 * b)) != uint8_t(w >> (8 * b));
        }
    }
    for (uint32_t b = 0; i < len; ++i, ++b)
        bad += p[i] != uint8_t(w >> (8 * b));
    return bad;
}

}  // namespace mrc::gen
