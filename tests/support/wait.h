// Waiting for a condition instead of sleeping and hoping it happened: a
// test that waits on what it needs passes as soon as it can and fails with
// a deadline, never by a machine being slower than a fixed sleep assumed.
#pragma once

#include <chrono>
#include <thread>

namespace mrc::test {

// Checks `done` until it returns true or `limit` has passed, pausing
// `pause` between checks; returns the last answer (one more check is made
// at the deadline, so a condition met just in time counts).
template <typename Pred>
bool wait_until(Pred &&done, std::chrono::milliseconds limit,
                std::chrono::milliseconds pause = std::chrono::milliseconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (done()) return true;
        std::this_thread::sleep_for(pause);
    }
    return done();
}

}  // namespace mrc::test
