// Small helpers every part of mrcd uses: its log type, logging, the
// monotonic clock, and the largest message a work request may carry.
#pragma once

#include <rte_log.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace mrc::mrcd {

inline constexpr uint32_t kMaxMsgBytes = 1u << 30;

inline int logtype() {
    static const int t = [] {
        const int r = rte_log_register_type_and_pick_level("mrcd", RTE_LOG_INFO);
        return r < 0 ? int(RTE_LOGTYPE_USER1) : r;
    }();
    return t;
}

template <typename... A>
void log(uint32_t level, fmt::format_string<A...> f, A &&...a) {
    const std::string s = fmt::format(f, std::forward<A>(a)...);
    rte_log(level, uint32_t(logtype()), "mrcd: %s\n", s.c_str());
}

inline uint64_t mono_ns() {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count());
}

}  // namespace mrc::mrcd
