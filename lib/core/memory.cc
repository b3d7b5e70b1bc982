#include "core/memory.h"

#include <algorithm>
#include <string>

namespace mrc {

MrTable::MrTable(uint32_t capacity) : entries_(capacity) {
    free_.reserve(capacity);
    for (uint32_t i = capacity; i-- > 0;)
        free_.push_back(i);
}

void MrTable::fill(Entry &e, void *base, uint64_t length, uint32_t access, uint32_t pd,
                   uint64_t remote_base) {
    e.live = true;
    e.region.base = static_cast<uint8_t *>(base);
    e.region.length = length;
    e.region.remote_base = remote_base ? remote_base : reinterpret_cast<uint64_t>(base);
    e.region.access = access;
    e.region.pd = pd;
    ++live_;
}

Result<uint32_t> MrTable::register_region(void *base, uint64_t length, uint32_t access, uint32_t pd,
                                          uint64_t remote_base) {
    if (base == nullptr || length == 0) return Error{"memory region: null base or zero length"};
    if (free_.empty())
        return Error{"memory region table full (" + std::to_string(entries_.size()) + " regions)"};
    if (entries_.size() > (1u << 24)) return Error{"memory region table larger than 2^24 slots"};
    const uint32_t slot = free_.back();
    free_.pop_back();
    Entry &e = entries_[slot];
    e.generation = static_cast<uint8_t>(e.generation + 1);
    if (e.generation == 0) e.generation = 1;  // key 0 is never valid
    fill(e, base, length, access, pd, remote_base);
    return (slot << 8) | e.generation;
}

Result<void> MrTable::register_with_key(uint32_t rkey, void *base, uint64_t length, uint32_t access,
                                        uint32_t pd, uint64_t remote_base) {
    if (base == nullptr || length == 0) return Error{"memory region: null base or zero length"};
    const uint32_t slot = rkey >> 8;
    if (slot >= entries_.size() || (rkey & 0xff) == 0)
        return Error{"memory region key " + std::to_string(rkey) + " out of range"};
    Entry &e = entries_[slot];
    if (e.live) return Error{"memory region key " + std::to_string(rkey) + " already in use"};
    const auto it = std::find(free_.begin(), free_.end(), slot);
    if (it != free_.end()) free_.erase(it);
    e.generation = static_cast<uint8_t>(rkey & 0xff);
    fill(e, base, length, access, pd, remote_base);
    return {};
}

bool MrTable::deregister(uint32_t rkey) {
    const uint32_t slot = rkey >> 8;
    if (slot >= entries_.size()) return false;
    Entry &e = entries_[slot];
    if (!e.live || e.generation != (rkey & 0xff)) return false;
    e.live = false;
    e.region = {};
    free_.push_back(slot);
    --live_;
    return true;
}

const MemoryRegion *MrTable::find(uint32_t rkey) const {
    const uint32_t slot = rkey >> 8;
    if (slot >= entries_.size()) return nullptr;
    const Entry &e = entries_[slot];
    if (!e.live || e.generation != (rkey & 0xff)) return nullptr;
    return &e.region;
}

}  // namespace mrc
