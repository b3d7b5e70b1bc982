// Big-endian field types for wire headers.
//
// Every field is an array of bytes, so headers have alignment 1, no padding,
// and can be laid over any byte buffer; sizes are checked with static_assert
// next to each header. Loads and stores compile to a single (byte-swapped)
// move on x86 and arm64.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mrc::wire {

template <int Bytes, class T>
struct BigEndian {
    static_assert(Bytes >= 1 && Bytes <= 8 && Bytes <= int(sizeof(T)));
    uint8_t b[Bytes];

    // Whole-word loads and stores with one byte swap where the width is a
    // machine word; byte assembly otherwise (the 24-bit fields).
    T get() const {
        if constexpr (Bytes == 2 || Bytes == 4 || Bytes == 8) {
            T v;
            std::memcpy(&v, b, Bytes);
            return from_be(v);
        } else {
            T v = 0;
            for (int i = 0; i < Bytes; ++i)
                v = static_cast<T>((v << 8) | b[i]);
            return v;
        }
    }
    void set(T v) {
        if constexpr (Bytes == 2 || Bytes == 4 || Bytes == 8) {
            v = from_be(v);
            std::memcpy(b, &v, Bytes);
        } else {
            for (int i = Bytes - 1; i >= 0; --i) {
                b[i] = static_cast<uint8_t>(v & 0xff);
                v = static_cast<T>(v >> 8);
            }
        }
    }

  private:
    static T from_be(T v) {
        if constexpr (std::endian::native == std::endian::big) {
            return v;
        } else if constexpr (sizeof(T) == 2) {
            return static_cast<T>(__builtin_bswap16(v));
        } else if constexpr (sizeof(T) == 4) {
            return static_cast<T>(__builtin_bswap32(v));
        } else {
            return static_cast<T>(__builtin_bswap64(v));
        }
    }
};

using be16 = BigEndian<2, uint16_t>;
using be24 = BigEndian<3, uint32_t>;
using be32 = BigEndian<4, uint32_t>;
using be64 = BigEndian<8, uint64_t>;

static_assert(sizeof(be16) == 2 && alignof(be16) == 1);
static_assert(sizeof(be24) == 3 && alignof(be24) == 1);
static_assert(sizeof(be32) == 4 && alignof(be32) == 1);
static_assert(sizeof(be64) == 8 && alignof(be64) == 1);

}  // namespace mrc::wire
