// Sleeps for control threads that end on time under a storm of signals.
//
// A relative sleep (nanosleep, std::this_thread::sleep_for) that a signal
// interrupts is resumed with the time the kernel reports as left, and that
// figure includes the timer slack (50 us by default). When signals arrive
// faster than the slack -- net_tap raises one per received burst, aimed at the
// process, so the main thread takes them at the packet rate -- the time left
// grows instead of shrinking and the sleep never ends. A sleep towards an
// absolute deadline on the monotonic clock has no such drift.
//
// Not for the packet path: workers poll and never block.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>

namespace mrc {

// Sleeps until `deadline` on CLOCK_MONOTONIC (std::chrono::steady_clock on
// Linux), however many signals arrive meanwhile.
inline void sleep_until_steady(std::chrono::steady_clock::time_point deadline) {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    if (ns <= 0) return;
    const timespec ts{time_t(ns / 1'000'000'000), long(ns % 1'000'000'000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
}

template <class Rep, class Period>
inline void sleep_for_steady(std::chrono::duration<Rep, Period> d) {
    sleep_until_steady(std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(d));
}

}  // namespace mrc
