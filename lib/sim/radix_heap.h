// Monotone priority queue for simulated time (a radix heap): pushes must
// not be earlier than the last pop, which a discrete-event simulator
// guarantees. Push is O(1); pop is O(1) amortised plus a redistribution
// of one bucket. Events with equal keys come out in a fixed order (last in
// first), so a run is as deterministic as with a binary heap.
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

namespace mrc::sim {

template <class T>
class RadixHeap {
  public:
    void push(uint64_t key, const T &v) {
        assert(key >= last_);
        buckets_[bucket(key)].push_back({key, v});
        ++size_;
    }
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    uint64_t last_key() const { return last_; }

    // Removes and returns the element with the smallest key.
    T pop(uint64_t *key) {
        assert(size_ > 0);
        if (buckets_[0].empty()) refill();
        Item it = buckets_[0].back();
        buckets_[0].pop_back();
        --size_;
        *key = it.key;
        return it.v;
    }

  private:
    struct Item {
        uint64_t key;
        T v;
    };
    int bucket(uint64_t key) const { return key == last_ ? 0 : 64 - __builtin_clzll(key ^ last_); }
    void refill() {
        int i = 1;
        while (buckets_[i].empty())
            ++i;
        uint64_t m = UINT64_MAX;
        for (const Item &x : buckets_[i])
            m = x.key < m ? x.key : m;
        last_ = m;
        for (const Item &x : buckets_[i])
            buckets_[bucket(x.key)].push_back(x);
        buckets_[i].clear();
    }

    std::vector<Item> buckets_[65];
    uint64_t last_ = 0;
    size_t size_ = 0;
};

}  // namespace mrc::sim
