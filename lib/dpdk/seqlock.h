// Single-writer snapshots: a worker publishes plain data, any number of
// readers (the control thread, telemetry) copy it out without stopping the
// writer. The writer never waits; a reader retries while a write is under
// way. T must be trivially copyable.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mrc::dp {

template <typename T>
class Seqlock {
    static_assert(std::is_trivially_copyable_v<T>);

  public:
    // Writer side (one thread).
    void store(const T &v) {
        const uint64_t s = seq_.load(std::memory_order_relaxed);
        seq_.store(s + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        copy_out(&data_, &v);
        std::atomic_thread_fence(std::memory_order_release);
        seq_.store(s + 2, std::memory_order_relaxed);
    }
    // Reader side. Returns false when nothing was ever stored.
    bool load(T *out) const {
        for (;;) {
            const uint64_t s0 = seq_.load(std::memory_order_acquire);
            if (s0 & 1) continue;
            copy_out(out, &data_);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (seq_.load(std::memory_order_relaxed) == s0) return s0 != 0;
        }
    }

  private:
    // Word by word: a copy that races with the writer may be torn, and the
    // sequence check throws it away (the Linux seqlock pattern).
    static void copy_out(void *dst, const void *src) {
        auto *d = static_cast<uint8_t *>(dst);
        const auto *s = static_cast<const uint8_t *>(src);
        size_t i = 0;
        for (; i + sizeof(uint64_t) <= sizeof(T); i += sizeof(uint64_t)) {
            uint64_t w;
            std::memcpy(&w, s + i, sizeof w);  // one 8-byte load
            std::memcpy(d + i, &w, sizeof w);
        }
        for (; i < sizeof(T); ++i)
            d[i] = s[i];
    }
    std::atomic<uint64_t> seq_{0};
    alignas(64) T data_{};
};

}  // namespace mrc::dp
