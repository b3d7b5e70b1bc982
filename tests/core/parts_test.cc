// Scope: the small parts of the core: PSN arithmetic, the memory region
// table's bounds checks, the timer wheel, the EV set, the ring.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/ev.h"
#include "core/memory.h"
#include "core/ring.h"
#include "core/timer_wheel.h"
#include "wire/psn.h"

namespace mrc {
namespace {

TEST(Psn, WrapAroundArithmetic) {
    EXPECT_EQ(Psn(Psn::kMask) + 1, Psn(0));
    EXPECT_EQ(Psn(0) - 1, Psn(Psn::kMask));
    EXPECT_EQ(distance(Psn(Psn::kMask - 2), Psn(3)), 6);
    EXPECT_EQ(distance(Psn(3), Psn(Psn::kMask - 2)), -6);
    EXPECT_TRUE(Psn(Psn::kMask) < Psn(0));
    EXPECT_TRUE(Psn(100) > Psn(Psn::kMask - 100));
    EXPECT_EQ(distance(Psn(0), Psn(Psn::kHalf - 1)), int32_t(Psn::kHalf - 1));
    EXPECT_EQ(distance(Psn(0), Psn(Psn::kHalf)), -int32_t(Psn::kHalf));
    EXPECT_EQ(Psn(0x1234567).value(), 0x234567u) << "only 24 bits are kept";
    Psn p(Psn::kMask);
    ++p;
    EXPECT_EQ(p.value(), 0u);
}

TEST(MrTable, ResolveChecksEverything) {
    MrTable t(4);
    std::vector<uint8_t> buf(1000);
    const uint64_t base = reinterpret_cast<uint64_t>(buf.data());
    const uint32_t k = t.register_region(buf.data(), buf.size(), kAccessRemoteWrite, 3).value();
    EXPECT_EQ(t.resolve_write(k, base, 1000, 3), buf.data());
    EXPECT_EQ(t.resolve_write(k, base + 999, 1, 3), buf.data() + 999);
    EXPECT_EQ(t.resolve_write(k, base + 999, 2, 3), nullptr) << "one byte past the end";
    EXPECT_EQ(t.resolve_write(k, base - 1, 1, 3), nullptr);
    EXPECT_EQ(t.resolve_write(k, base, 1001, 3), nullptr);
    EXPECT_EQ(t.resolve_write(k, base + 500, UINT32_MAX, 3), nullptr);
    EXPECT_EQ(t.resolve_write(k, UINT64_MAX, 2, 3), nullptr);
    EXPECT_EQ(t.resolve_write(k, base, 10, 4), nullptr) << "another protection domain";
    EXPECT_EQ(t.resolve_write(0, base, 10, 3), nullptr) << "key 0 is never valid";
    EXPECT_EQ(t.resolve_write(k + 0x100, base, 10, 3), nullptr);
    const uint32_t ro = t.register_region(buf.data(), buf.size(), 0, 3).value();
    EXPECT_EQ(t.resolve_write(ro, base, 10, 3), nullptr) << "not registered for remote write";
    ASSERT_TRUE(t.deregister(k));
    EXPECT_EQ(t.resolve_write(k, base, 10, 3), nullptr) << "deregistered";
    EXPECT_FALSE(t.deregister(k));
    const uint32_t k2 = t.register_region(buf.data(), buf.size(), kAccessRemoteWrite, 3).value();
    EXPECT_NE(k2, k) << "a reused slot gets a new generation";
    EXPECT_EQ(t.resolve_write(k, base, 10, 3), nullptr) << "the old key stays dead";
    EXPECT_FALSE(t.register_region(nullptr, 10, kAccessRemoteWrite, 3).ok());
}

TEST(MrTable, FullTableIsAnError) {
    MrTable t(2);
    uint8_t b[4];
    EXPECT_TRUE(t.register_region(b, 4, kAccessRemoteWrite, 1).ok());
    EXPECT_TRUE(t.register_region(b, 4, kAccessRemoteWrite, 1).ok());
    EXPECT_FALSE(t.register_region(b, 4, kAccessRemoteWrite, 1).ok());
}

TEST(TimerWheel, FiresAtOrAfterDeadlineNeverBefore) {
    TimerWheel w(8, 16, 1000);  // 16 slots of 1 us: one revolution = 16 us
    std::vector<std::pair<uint32_t, uint64_t>> fired;
    w.arm(1, 5500);
    w.arm(2, 40'000);  // more than one revolution away
    w.arm(3, 5500);
    w.cancel(3);
    for (uint64_t t = 0; t <= 50'000; t += 500)
        w.advance(t, [&](uint32_t id) { fired.push_back({id, t}); });
    ASSERT_EQ(fired.size(), 2u);
    EXPECT_EQ(fired[0].first, 1u);
    EXPECT_GE(fired[0].second, 5500u);
    EXPECT_LE(fired[0].second, 6500u);
    EXPECT_EQ(fired[1].first, 2u);
    EXPECT_GE(fired[1].second, 40'000u);
    EXPECT_LE(fired[1].second, 41'000u);
    EXPECT_EQ(w.armed_count(), 0u);
}

TEST(TimerWheel, ReArmFromCallbackAndLargeJumps) {
    TimerWheel w(4, 8, 1000);
    int n = 0;
    w.arm(0, 1000);
    // The callback re-arms: one fire per advance, never a loop.
    for (int i = 1; i <= 5; ++i) {
        w.advance(uint64_t(i) * 1'000'000, [&](uint32_t id) {
            ++n;
            w.arm(id, uint64_t(i) * 1'000'000);  // already due: fires next time
        });
    }
    EXPECT_EQ(n, 5);
    w.arm_earlier(0, 1);  // moves earlier
    EXPECT_EQ(w.deadline(0), 1u);
    w.arm_earlier(0, 999'999'999);  // not later
    EXPECT_EQ(w.deadline(0), 1u);
}

TEST(Ring, FifoWithFixedCapacity) {
    Ring<int> r;
    r.init(3);
    EXPECT_EQ(r.capacity(), 4u);
    for (int i = 0; i < 4; ++i)
        EXPECT_TRUE(r.try_push(i));
    EXPECT_FALSE(r.try_push(9));
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(r.front(), i);
        r.pop();
    }
    EXPECT_TRUE(r.empty());
}

}  // namespace
}  // namespace mrc

#include <fstream>
#include <sstream>

#include "core/counters.h"
#include "dpdk/counters.h"
#include "mrcd/counters.h"

namespace mrc {
namespace {

TEST(Counters, DocsNameEveryCounter) {
    std::ifstream f(MRC_SOURCE_DIR "/docs/counters.md");
    ASSERT_TRUE(f.good()) << "docs/counters.md missing";
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string doc = ss.str();
    for (const auto &c : kEndpointCounterInfo)
        EXPECT_NE(doc.find(std::string("`") + c.name + "`"), std::string::npos) << c.name;
    for (const auto &c : kQpCounterInfo)
        EXPECT_NE(doc.find(std::string("`") + c.name + "`"), std::string::npos) << c.name;
    for (const auto &c : kPlaneCounterInfo)
        EXPECT_NE(doc.find(std::string("`") + c.name + "`"), std::string::npos) << c.name;
    for (const auto &c : dp::kWorkerCounterInfo)
        EXPECT_NE(doc.find(std::string("`") + c.name + "`"), std::string::npos) << c.name;
    for (const auto &c : mrcd::kDaemonCounterInfo)
        EXPECT_NE(doc.find(std::string("`") + c.name + "`"), std::string::npos) << c.name;
}

TEST(Counters, CyclesPerPacketSplitsBusyCyclesOverEveryFrame) {
    dp::WorkerCounters c;
    EXPECT_EQ(dp::cycles_per_packet(c).busy, 0.0);  // nothing moved: no division by zero
    EXPECT_EQ(dp::cycles_per_packet(c).busy_share, 0.0);
    c.rx_packets = 300;
    c.tx_packets = 700;
    c.cycles_rx_io = 50'000;
    c.cycles_rx = 150'000;
    c.cycles_timers = 10'000;
    c.cycles_app = 40'000;
    c.cycles_tx = 200'000;
    c.cycles_tx_io = 40'000;
    c.cycles_control = 10'000;
    c.cycles_busy = 500'000;
    c.cycles_idle = 300'000;
    c.cycles_asleep = 200'000;
    const dp::CyclesPerPacket r = dp::cycles_per_packet(c);
    EXPECT_DOUBLE_EQ(r.busy, 500.0);
    EXPECT_DOUBLE_EQ(r.rx_io, 50.0);
    EXPECT_DOUBLE_EQ(r.rx, 150.0);
    EXPECT_DOUBLE_EQ(r.tx, 200.0);
    EXPECT_DOUBLE_EQ(r.tx_io, 40.0);
    EXPECT_DOUBLE_EQ(r.rx_io + r.rx + r.timers + r.app + r.tx + r.tx_io + r.control, r.busy);
    EXPECT_DOUBLE_EQ(r.busy_share, 0.5);
}

}  // namespace
}  // namespace mrc
