// The "key=value,key=value" grammar mrc-sim and mrc-fabric share for
// impairments, failures and schedules (flags, TOML strings, telemetry):
// items separated by commas, spaces around an item ignored, a bare key
// meaning key=true ("down"), a key at most once. Values are read by the
// helpers below, which name the key and value in their errors.
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace mrc {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

inline Result<KeyValues> split_key_values(std::string_view spec) {
    KeyValues out;
    while (!spec.empty()) {
        const size_t comma = spec.find(',');
        std::string_view item = spec.substr(0, comma);
        spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
        while (!item.empty() && item.front() == ' ')
            item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ')
            item.remove_suffix(1);
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        if (eq == 0) return Error{"'" + std::string(item) + "': a key is missing before '='"};
        std::string key(item.substr(0, eq));
        for (const auto &kv : out)
            if (kv.first == key) return Error{"'" + key + "' given twice"};
        if (eq == std::string_view::npos)
            out.emplace_back(std::move(key), "true");
        else
            out.emplace_back(std::move(key), std::string(item.substr(eq + 1)));
    }
    return out;
}

inline Result<double> parse_number(std::string_view key, std::string_view v) {
    double d = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !std::isfinite(d))
        return Error{std::string(key) + "=" + std::string(v) + ": not a number"};
    return d;
}

inline Result<bool> parse_bool(std::string_view key, std::string_view v) {
    if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
    if (v == "0" || v == "false" || v == "no" || v == "off") return false;
    return Error{std::string(key) + "=" + std::string(v) + ": expected true or false"};
}

// Which way a setting applies: A to B (the data direction of the
// simulator and of a fabric port pair's first port), B to A (acks), both.
enum class Direction { kAtoB, kBtoA, kBoth };

// "ab", "ba" or "both"; 0 and 1 are ab and ba.
inline Result<Direction> parse_direction(std::string_view key, std::string_view v) {
    if (v == "ab" || v == "0") return Direction::kAtoB;
    if (v == "ba" || v == "1") return Direction::kBtoA;
    if (v == "both") return Direction::kBoth;
    return Error{std::string(key) + "=" + std::string(v) + ": expected ab, ba or both (0 or 1)"};
}

}  // namespace mrc
