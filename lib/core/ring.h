// FIFO for one thread with a power-of-two capacity set by init(); grow()
// (and push_growing) doubles it on demand, the only allocation after init.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mrc {

template <class T>
class Ring {
  public:
    void init(uint32_t min_capacity) {
        uint32_t c = 1;
        while (c < min_capacity)
            c <<= 1;
        buf_.assign(c, T{});
        mask_ = c - 1;
        head_ = tail_ = 0;
    }
    uint32_t capacity() const { return uint32_t(buf_.size()); }  // 0 before init()
    uint32_t size() const { return tail_ - head_; }
    bool empty() const { return head_ == tail_; }
    bool full() const { return size() == capacity(); }

    // Returns false (and stores nothing) when full.
    bool try_push(const T &v) {
        if (full()) return false;
        buf_[tail_++ & mask_] = v;
        return true;
    }
    T &front() {
        assert(!empty());
        return buf_[head_ & mask_];
    }
    const T &front() const { return buf_[head_ & mask_]; }
    // The i-th queued element from the front (i < size()).
    const T &peek(uint32_t i) const { return buf_[(head_ + i) & mask_]; }
    void pop() {
        assert(!empty());
        ++head_;
    }
    void clear() { head_ = tail_ = 0; }
    // Doubles the capacity until it holds `min_capacity`, keeping what is
    // queued in its order. Per-QP rings start small and grow to their bound
    // only when that much is outstanding (state in proportion to the work).
    void grow(uint32_t min_capacity) {
        if (min_capacity <= capacity()) return;
        uint32_t c = capacity() ? capacity() : 1;
        while (c < min_capacity)
            c <<= 1;
        std::vector<T> b(c, T{});
        const uint32_t n = size();
        for (uint32_t i = 0; i < n; ++i)
            b[i] = buf_[(head_ + i) & mask_];
        buf_.swap(b);
        mask_ = c - 1;
        head_ = 0;
        tail_ = n;
    }
    // try_push, growing first (doubling, up to max_capacity) when full.
    bool push_growing(const T &v, uint32_t max_capacity) {
        if (full() && capacity() < max_capacity)
            grow(std::min(capacity() ? 2 * capacity() : 1, max_capacity));
        return try_push(v);
    }
    size_t memory_bytes() const { return buf_.capacity() * sizeof(T); }

  private:
    std::vector<T> buf_;
    uint32_t mask_ = 0;
    uint32_t head_ = 0;
    uint32_t tail_ = 0;
};

}  // namespace mrc
