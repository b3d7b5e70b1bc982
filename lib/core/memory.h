// Registered memory regions and the bounds check every placement passes.
//
// A remote key names a slot and a generation, so a key that was
// deregistered (or guessed) never resolves to a region registered later in
// the same slot. resolve() is the only way the responder turns a (key,
// address, length) from the wire into a pointer.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"

namespace mrc {

inline constexpr uint32_t kAccessRemoteWrite = 1u << 0;

struct MemoryRegion {
    uint8_t *base = nullptr;
    uint64_t length = 0;
    uint64_t remote_base = 0;  // the address peers use for base[0]
    uint32_t access = 0;
    uint32_t pd = 0;  // protection domain: only QPs of the same pd may write
};

class MrTable {
  public:
    explicit MrTable(uint32_t capacity);

    // Registers [base, base + length). Peers address it from remote_base,
    // which defaults to the address of base (as with verbs).
    Result<uint32_t> register_region(void *base, uint64_t length, uint32_t access, uint32_t pd,
                                     uint64_t remote_base = 0);
    // The same, under a key chosen by the caller (a daemon that keeps one
    // key for a region registered in several tables): fails when the key's
    // slot is out of range or live, or its generation is 0.
    Result<void> register_with_key(uint32_t rkey, void *base, uint64_t length, uint32_t access,
                                   uint32_t pd, uint64_t remote_base = 0);
    bool deregister(uint32_t rkey);
    const MemoryRegion *find(uint32_t rkey) const;

    // Per packet: where `length` bytes for remote address `addr` go, or
    // nullptr when the key is unknown, stale, not writable, of another
    // protection domain, or the range leaves the region.
    uint8_t *resolve_write(uint32_t rkey, uint64_t addr, uint32_t length, uint32_t pd) const {
        const uint32_t slot = rkey >> 8;
        if (slot >= entries_.size()) return nullptr;
        const Entry &e = entries_[slot];
        if (!e.live || e.generation != (rkey & 0xff)) return nullptr;
        const MemoryRegion &r = e.region;
        if (!(r.access & kAccessRemoteWrite) || r.pd != pd) return nullptr;
        if (addr < r.remote_base) return nullptr;
        const uint64_t off = addr - r.remote_base;
        if (length > r.length || off > r.length - length) return nullptr;
        return r.base + off;
    }

    uint32_t live() const { return live_; }
    uint32_t capacity() const { return static_cast<uint32_t>(entries_.size()); }

  private:
    struct Entry {
        MemoryRegion region;
        uint8_t generation = 0;
        bool live = false;
    };
    void fill(Entry &e, void *base, uint64_t length, uint32_t access, uint32_t pd,
              uint64_t remote_base);

    std::vector<Entry> entries_;
    std::vector<uint32_t> free_;
    uint32_t live_ = 0;
};

}  // namespace mrc
