#include "wire/neighbor.h"

#include <algorithm>
#include <string_view>

#include "wire/addr.h"

namespace mrc::wire {

std::optional<Route> parse_ipv4_prefix(const char *s, size_t n) {
    const std::string_view v(s, n);
    Route r;
    const size_t slash = v.find('/');
    const auto ip = parse_ipv4(v.substr(0, slash));
    if (!ip) return std::nullopt;
    r.ip = *ip;
    if (slash == std::string_view::npos) return r;
    const std::string_view len = v.substr(slash + 1);
    if (len.empty() || len.size() > 2) return std::nullopt;
    int x = 0;
    for (char c : len) {
        if (c < '0' || c > '9') return std::nullopt;
        x = x * 10 + (c - '0');
    }
    if (x > 32) return std::nullopt;
    r.prefix_len = static_cast<int8_t>(x);
    return r;
}

const char *neigh_state_name(NeighState s) {
    switch (s) {
        case NeighState::kIncomplete:
            return "incomplete";
        case NeighState::kReachable:
            return "reachable";
        case NeighState::kStale:
            return "stale";
        case NeighState::kFailed:
            return "failed";
        case NeighState::kStatic:
            return "static";
    }
    return "?";
}

void NeighborTable::set_static(uint32_t ip, const MacAddr &mac) {
    Entry &e = map_[ip];
    e.mac = mac;
    e.state = NeighState::kStatic;
    e.probes = 0;
    e.held.clear();
}

NeighborTable::Lookup NeighborTable::resolve(uint32_t ip, uint64_t now_ns,
                                             std::optional<uint64_t> waiter) {
    Lookup l;
    auto hold = [&](Entry &e) {
        if (!waiter) return;
        // A waiter that asks again (a resend) keeps its one place.
        if (std::find(e.held.begin(), e.held.end(), *waiter) != e.held.end()) {
            l.held = true;
            return;
        }
        if (e.held.size() >= cfg_.max_held) {
            ++ctr_.hold_dropped;
            return;
        }
        e.held.push_back(*waiter);
        ++ctr_.held;
        l.held = true;
    };
    auto ask = [&](Entry &e) {
        ++e.probes;
        e.next_ns = now_ns + cfg_.retry_ns;
        ++ctr_.requests;
        l.send_request = true;
    };
    auto it = map_.find(ip);
    if (it == map_.end()) {
        if (map_.size() >= cfg_.max_entries) {
            ++ctr_.table_full;
            l.kind = Kind::kFull;
            return l;
        }
        Entry &e = map_[ip];
        e.state = NeighState::kIncomplete;
        e.used_ns = now_ns;
        ask(e);
        hold(e);
        l.kind = Kind::kPending;
        return l;
    }
    Entry &e = it->second;
    e.used_ns = now_ns;
    switch (e.state) {
        case NeighState::kStatic:
            l.kind = Kind::kKnown;
            l.mac = e.mac;
            return l;
        case NeighState::kReachable:
            if (now_ns - e.confirmed_ns < cfg_.reachable_ns) {
                l.kind = Kind::kKnown;
                l.mac = e.mac;
                return l;
            }
            e.state = NeighState::kStale;
            e.probes = 0;
            [[fallthrough]];
        case NeighState::kStale:
            // Used as it is; asked again, so that a neighbour that changed
            // its MAC (or went away) is found out.
            if (e.probes == 0) ask(e);
            l.kind = Kind::kKnown;
            l.mac = e.mac;
            return l;
        case NeighState::kIncomplete:
            hold(e);
            l.kind = Kind::kPending;
            return l;
        case NeighState::kFailed:
            if (now_ns < e.next_ns) {
                l.kind = Kind::kFailed;
                return l;
            }
            e.state = NeighState::kIncomplete;
            e.probes = 0;
            ask(e);
            hold(e);
            l.kind = Kind::kPending;
            return l;
    }
    return l;
}

bool NeighborTable::learn(uint32_t ip, const MacAddr &mac, bool create, uint64_t now_ns,
                          std::vector<uint64_t> *released) {
    auto it = map_.find(ip);
    if (it == map_.end()) {
        if (!create) {
            ++ctr_.unsolicited;
            return false;
        }
        if (map_.size() >= cfg_.max_entries) {
            ++ctr_.table_full;
            return false;
        }
        it = map_.emplace(ip, Entry{}).first;
        it->second.used_ns = now_ns;
    }
    Entry &e = it->second;
    if (e.state == NeighState::kStatic) return false;
    if (e.state == NeighState::kIncomplete) ++ctr_.resolved;
    e.mac = mac;
    e.state = NeighState::kReachable;
    e.confirmed_ns = now_ns;
    e.probes = 0;
    e.next_ns = 0;
    if (released) released->insert(released->end(), e.held.begin(), e.held.end());
    e.held.clear();
    return true;
}

void NeighborTable::tick(uint64_t now_ns, std::vector<uint32_t> *requests,
                         std::vector<uint64_t> *failed) {
    // One more request for an unanswered entry; false after max_probes.
    auto retry = [&](Entry &e, uint32_t ip) {
        if (e.probes >= cfg_.max_probes) return false;
        ++e.probes;
        e.next_ns = now_ns + cfg_.retry_ns;
        ++ctr_.requests;
        requests->push_back(ip);
        return true;
    };
    for (auto it = map_.begin(); it != map_.end();) {
        Entry &e = it->second;
        bool erase = false;
        switch (e.state) {
            case NeighState::kStatic:
                break;
            case NeighState::kIncomplete:
                if (now_ns < e.next_ns || retry(e, it->first)) break;
                e.state = NeighState::kFailed;
                e.next_ns = now_ns + cfg_.failed_ns;
                ++ctr_.failed;
                if (failed) failed->insert(failed->end(), e.held.begin(), e.held.end());
                e.held.clear();
                break;
            case NeighState::kReachable:
                if (now_ns - e.confirmed_ns >= cfg_.reachable_ns) {
                    e.state = NeighState::kStale;
                    e.probes = 0;
                }
                break;
            case NeighState::kStale:
                if (e.probes == 0) {
                    // Unused since it went stale: kept for a while, then dropped.
                    if (now_ns - std::max(e.used_ns, e.confirmed_ns) >= cfg_.gc_ns) erase = true;
                    break;
                }
                if (now_ns < e.next_ns) break;
                // A refresh nobody answered: the neighbour is gone.
                if (!retry(e, it->first)) erase = true;
                break;
            case NeighState::kFailed:
                if (now_ns >= e.next_ns) erase = true;
                break;
        }
        if (erase) {
            ++ctr_.expired;
            it = map_.erase(it);
        } else {
            ++it;
        }
    }
}

uint64_t NeighborTable::next_due_ns() const {
    uint64_t due = UINT64_MAX;
    for (const auto &[ip, e] : map_) {
        switch (e.state) {
            case NeighState::kStatic:
                break;
            case NeighState::kIncomplete:
            case NeighState::kFailed:
                due = std::min(due, e.next_ns);
                break;
            case NeighState::kReachable:
                due = std::min(due, e.confirmed_ns + cfg_.reachable_ns);
                break;
            case NeighState::kStale:
                due = std::min(
                    due, e.probes ? e.next_ns : std::max(e.used_ns, e.confirmed_ns) + cfg_.gc_ns);
                break;
        }
    }
    return due;
}

}  // namespace mrc::wire
