// Next hops on a routed plane: where a frame for a peer goes (Route: the
// peer itself when it is on the plane's subnet, else the plane's gateway)
// and the MAC address of that next hop (NeighborTable: resolved by ARP,
// with retries, expiry and a bounded hold queue, as the Linux kernel and
// VPP keep their neighbours).
//
// Pure C++: no clock of its own (every call takes `now_ns`), no I/O. The
// owner sends the ARP requests the table asks for (wire/host.h writes
// them) and feeds it the ARP packets its ports receive.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "wire/net.h"

namespace mrc::wire {

// A plane's address with its prefix and gateway (host order). Without a
// prefix (prefix_len < 0) every peer is on-link: one segment per plane.
struct Route {
    uint32_t ip = 0;
    int8_t prefix_len = -1;  // 0-32, or -1: none given
    uint32_t gateway = 0;    // 0: none

    bool on_link(uint32_t dst) const {
        if (prefix_len < 0) return true;
        const uint32_t mask = prefix_len == 0 ? 0 : ~uint32_t(0) << (32 - prefix_len);
        return (dst & mask) == (ip & mask);
    }
    // Where a frame for `dst` goes: `dst` on-link, else the gateway; 0
    // when `dst` is off-link and there is no gateway (unreachable).
    uint32_t next_hop(uint32_t dst) const { return on_link(dst) ? dst : gateway; }
};

// The same for an IPv6 plane: its address, prefix (0-128) and gateway
// (the unspecified address: none). Link-local destinations (fe80::/10)
// are always on-link.
struct Route6 {
    Ipv6Addr ip{};
    int16_t prefix_len = -1;  // 0-128, or -1: none given
    Ipv6Addr gateway{};

    bool has_gateway() const { return !(gateway == Ipv6Addr{}); }
    bool on_link(const Ipv6Addr &dst) const {
        if (prefix_len < 0 || (dst.b[0] == 0xfe && (dst.b[1] & 0xc0) == 0x80)) return true;
        const int full = prefix_len / 8, rest = prefix_len % 8;
        for (int i = 0; i < full; ++i)
            if (dst.b[i] != ip.b[i]) return false;
        if (rest == 0) return true;
        const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
        return (dst.b[full] & mask) == (ip.b[full] & mask);
    }
    // `dst` on-link, else the gateway; nullopt when `dst` is off-link and
    // there is no gateway.
    std::optional<Ipv6Addr> next_hop(const Ipv6Addr &dst) const {
        if (on_link(dst)) return dst;
        if (!has_gateway()) return std::nullopt;
        return gateway;
    }
};

// "a.b.c.d" or "a.b.c.d/len" (0-32) into ip / prefix_len; nullopt when
// malformed.
std::optional<Route> parse_ipv4_prefix(const char *s, size_t n);

enum class NeighState : uint8_t {
    kIncomplete,  // asked for, no answer yet
    kReachable,   // answered within reachable_ns
    kStale,       // answered longer ago: still used, refreshed when used
    kFailed,      // asked max_probes times without an answer
    kStatic,      // configured ([[neighbor]]); never changed by ARP
};
const char *neigh_state_name(NeighState s);

struct NeighborConfig {
    uint32_t max_entries = 4096;
    uint32_t max_held = 1024;         // waiters held per incomplete entry
    uint32_t max_probes = 3;          // requests without an answer before giving up
    uint64_t retry_ns = 100'000'000;  // between them
    uint64_t reachable_ns = 30'000'000'000ull;
    uint64_t failed_ns = 1'000'000'000;   // a failed entry answers "failed" this long
    uint64_t gc_ns = 600'000'000'000ull;  // a stale entry nobody used this long goes
};

struct NeighborCounters {
    uint64_t requests = 0;      // ARP requests asked for (first, retries, refreshes)
    uint64_t resolved = 0;      // incomplete entries answered
    uint64_t failed = 0;        // incomplete entries given up on
    uint64_t unsolicited = 0;   // ARP about an address never asked for (ignored)
    uint64_t held = 0;          // waiters held
    uint64_t hold_dropped = 0;  // waiters refused: the entry's hold queue was full
    uint64_t table_full = 0;    // lookups refused: max_entries reached
    uint64_t expired = 0;       // entries removed (stale and unused, or refresh unanswered)
};

// One plane's neighbours. Single-threaded.
class NeighborTable {
  public:
    explicit NeighborTable(const NeighborConfig &cfg = {}) : cfg_(cfg) {}

    struct Entry {
        MacAddr mac{};
        NeighState state = NeighState::kIncomplete;
        uint8_t probes = 0;          // requests sent since the last answer
        uint64_t confirmed_ns = 0;   // last answer
        uint64_t used_ns = 0;        // last lookup
        uint64_t next_ns = 0;        // next retry (incomplete), refresh (stale) or end (failed)
        std::vector<uint64_t> held;  // waiters, released when it resolves or fails
    };

    enum class Kind : uint8_t { kKnown, kPending, kFailed, kFull };
    struct Lookup {
        Kind kind = Kind::kPending;
        MacAddr mac{};
        bool send_request = false;  // the owner sends an ARP request for the address now
        bool held = false;          // the waiter is in the hold queue
    };

    // A static entry ([[neighbor]]): an override, never aged or changed.
    void set_static(uint32_t ip, const MacAddr &mac);

    // The MAC of `ip` when known (reachable, stale or static). An unknown
    // address becomes incomplete and wants a request; a stale one is
    // refreshed (a request, at most one per retry_ns) and still used. With
    // a `waiter`, a lookup that does not find the MAC holds it, once however
    // often it asks (bounded by max_held: refused and counted past that),
    // until resolve or failure.
    Lookup resolve(uint32_t ip, uint64_t now_ns, std::optional<uint64_t> waiter = {});

    // An ARP packet a neighbour sent: `ip` is at `mac`. Updates the entry
    // of `ip`, if any (never a static one); creates one only with
    // `create` (a request for this host's address: its sender is about to
    // talk to this host, RFC 826). Anything else is unsolicited and
    // ignored. Waiters of an entry that resolves go into *released.
    bool learn(uint32_t ip, const MacAddr &mac, bool create, uint64_t now_ns,
               std::vector<uint64_t> *released);

    // Timed work up to `now_ns`: requests to send (retries of incomplete
    // entries; an unanswered refresh), entries that failed (their waiters
    // into *failed), entries removed. Call by next_due_ns().
    void tick(uint64_t now_ns, std::vector<uint32_t> *requests, std::vector<uint64_t> *failed);
    uint64_t next_due_ns() const;

    const Entry *find(uint32_t ip) const {
        auto it = map_.find(ip);
        return it == map_.end() ? nullptr : &it->second;
    }
    const std::unordered_map<uint32_t, Entry> &entries() const { return map_; }
    const NeighborCounters &counters() const { return ctr_; }

  private:
    NeighborConfig cfg_;
    std::unordered_map<uint32_t, Entry> map_;
    NeighborCounters ctr_;
};

}  // namespace mrc::wire
