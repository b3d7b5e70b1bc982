// mrc::sleep_for_steady must end on time while signals rain on the thread
// (as net_tap's per-burst signals do on a DPDK process's main thread).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include <pthread.h>

#include "common/sleep.h"

namespace {

std::atomic<uint64_t> g_signals{0};
void on_signal(int) {
    g_signals.fetch_add(1, std::memory_order_relaxed);
}

TEST(Sleep, EndsUnderASignalStorm) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ASSERT_EQ(sigaction(SIGRTMIN + 1, &sa, nullptr), 0);

    std::atomic<bool> done{false};
    std::atomic<int> sleeps{0};
    std::thread sleeper([&] {
        for (int i = 0; i < 20; ++i) {
            mrc::sleep_for_steady(std::chrono::milliseconds(5));
            sleeps.fetch_add(1);
        }
        done.store(true);
    });
    // Signal the sleeper far faster than the timer slack (50 us), for at
    // most 20 s: a sleep that drifts never gets through its 20 sleeps.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done.load() && std::chrono::steady_clock::now() < give_up) {
        pthread_kill(sleeper.native_handle(), SIGRTMIN + 1);
        // One every ~5 us: ten times inside the slack, yet slow enough that
        // the sleeper is not kept in its handler for good.
        const auto next = std::chrono::steady_clock::now() + std::chrono::microseconds(5);
        while (std::chrono::steady_clock::now() < next) {
        }
    }
    const bool ended_in_the_storm = done.load();
    sleeper.join();
    signal(SIGRTMIN + 1, SIG_DFL);
    EXPECT_TRUE(ended_in_the_storm) << "only " << sleeps.load() << " of 20 sleeps ended";
    EXPECT_GT(g_signals.load(), 1000u) << "the storm did not happen";
}

TEST(Sleep, DeadlinesInThePastReturnAtOnce) {
    const auto t0 = std::chrono::steady_clock::now();
    mrc::sleep_until_steady(t0 - std::chrono::seconds(1));
    mrc::sleep_for_steady(std::chrono::nanoseconds(-5));
    mrc::sleep_until_steady(std::chrono::steady_clock::time_point{});
    // Generous: this only checks that nothing waited for a second or more.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

}  // namespace
