// Fixed-capacity FIFO for one thread, sized at setup: no allocation after
// init(). Capacity is rounded up to a power of two.
#pragma once

#include <cassert>
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
    uint32_t capacity() const { return mask_ + 1; }
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
    void pop() {
        assert(!empty());
        ++head_;
    }
    void clear() { head_ = tail_ = 0; }

  private:
    std::vector<T> buf_;
    uint32_t mask_ = 0;
    uint32_t head_ = 0;
    uint32_t tail_ = 0;
};

}  // namespace mrc
