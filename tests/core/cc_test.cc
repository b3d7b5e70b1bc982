// Scope: congestion control on its own (lib/core/cc*.h): NSCC's four
// quadrants, the once-per-RTT decrease, batched increases, NACK cuts,
// QuickAdapt, the learned base RTT, the window bounds, per-plane scaling,
// and the configurations that cannot work.
#include <gtest/gtest.h>

#include "core/cc_fixed.h"
#include "core/cc_nscc.h"

namespace mrc {
namespace {

constexpr uint32_t kMtu = 4096;

// 100 Gb/s x 10 us: a BDP of 125000 bytes; target delay 7.5 us.
NsccConfig nscc() {
    NsccConfig c;
    c.line_rate_gbps = 100;
    c.base_rtt_ns = 10000;
    return c;
}

AckSample ack(uint64_t now, uint32_t rtt, bool ecn = false, uint32_t bytes = kMtu) {
    AckSample a;
    a.now_ns = now;
    a.rtt_ns = rtt;
    a.ecn = ecn;
    a.acked_bytes = bytes;
    return a;
}

TEST(Nscc, StartsAtOneBdpWithinBounds) {
    NsccCc cc(nscc(), kMtu);
    EXPECT_EQ(cc.window_bytes(), 125000u);
    EXPECT_EQ(cc.max_window_bytes(), 187500u) << "1.5 BDP";
    EXPECT_EQ(cc.min_window_bytes(), kMtu);
    EXPECT_EQ(cc.target_delay_ns(), 7500u);
    EXPECT_STREQ(cc.name(), "nscc");
}

TEST(Nscc, NoEcnNoDelayGrowsInProportionToTheHeadroom) {
    NsccConfig c = nscc();
    c.init_cwnd_bdps = 0.5;
    NsccCc a(c, kMtu), b(c, kMtu);
    const uint64_t w0 = a.window_bytes();
    // The first RTT sample sets the base RTT; it acknowledges nothing.
    (void)a.on_ack(ack(50, 10000, false, 0));
    (void)b.on_ack(ack(50, 10000, false, 0));
    // Same acks; a sees no queueing, b half the target.
    for (int i = 1; i <= 16; ++i) {
        (void)a.on_ack(ack(i * 100, 10000));
        (void)b.on_ack(ack(i * 100, 10000 + 3750));
    }
    EXPECT_GT(a.window_bytes(), w0);
    EXPECT_GT(b.window_bytes(), w0);
    // Increase = gain x acked x headroom: half the headroom, half the increase.
    EXPECT_NEAR(double(b.window_bytes() - w0), 0.5 * double(a.window_bytes() - w0), 64);
    EXPECT_NEAR(double(a.window_bytes() - w0), c.pi_gain * 16 * kMtu, 64);
}

TEST(Nscc, DelayWithoutEcnIsOnlyAFairIncrease) {
    NsccConfig c = nscc();
    c.init_cwnd_bdps = 0.5;
    NsccCc cc(c, kMtu);
    const double w0 = double(cc.window_bytes());
    (void)cc.on_ack(ack(50, 10000, false, 0));  // the base RTT
    // About one window's worth of acks (two batches of 8 MTUs) with the
    // delay above target: + fi_mtus MTUs.
    const int n = 16;
    for (int i = 1; i <= n; ++i)
        EXPECT_EQ(cc.on_ack(ack(i * 100, 10000 + 9000)), kCcNone);
    EXPECT_NEAR(double(cc.window_bytes()) - w0, c.fi_mtus * kMtu, 0.1 * kMtu);
}

TEST(Nscc, EcnWithDelayDecreasesAtMostOncePerBaseRtt) {
    NsccCc cc(nscc(), kMtu);
    const uint64_t w0 = cc.window_bytes();
    (void)cc.on_ack(ack(500, 10000, false, 0));  // the base RTT
    // delay 15 us against a 7.5 us target: x max(1 - 0.8 x 7.5/15, 0.5) = 0.6.
    EXPECT_EQ(cc.on_ack(ack(1000, 25000, true)), kCcDecreased);
    EXPECT_NEAR(double(cc.window_bytes()), 0.6 * double(w0), 2);
    const uint64_t w1 = cc.window_bytes();
    EXPECT_EQ(cc.on_ack(ack(5000, 25000, true)), kCcNone) << "within one base RTT";
    EXPECT_EQ(cc.window_bytes(), w1);
    EXPECT_EQ(cc.on_ack(ack(11000, 25000, true)), kCcDecreased);
    EXPECT_LT(cc.window_bytes(), w1);
    // A large delay (short of QuickAdapt's threshold) never cuts more than
    // md_floor in one step: 1 - 0.8 x 21.5/29 = 0.41 -> 0.5.
    NsccCc d(nscc(), kMtu);
    (void)d.on_ack(ack(500, 10000, false, 0));
    (void)d.on_ack(ack(1000, 39000, true));
    EXPECT_NEAR(double(d.window_bytes()), 0.5 * double(w0), 2);
}

TEST(Nscc, EcnWithoutDelayKeepsTheWindowAndAsksForAnotherPath) {
    NsccCc cc(nscc(), kMtu);
    const uint64_t w0 = cc.window_bytes();
    EXPECT_EQ(cc.on_ack(ack(1000, 12000, true)), kCcRepath);
    EXPECT_EQ(cc.window_bytes(), w0);
    FixedWindowCc f(100000);
    EXPECT_EQ(f.on_ack(ack(0, 0, true)), kCcRepath) << "fixed: any mark re-paths";
    EXPECT_EQ(f.on_ack(ack(0, 0, false)), kCcNone);
}

TEST(Nscc, IncreasesAreAppliedInBatches) {
    NsccConfig c = nscc();
    c.init_cwnd_bdps = 0.5;
    c.adjust_mtus = 8;
    NsccCc cc(c, kMtu);
    const uint64_t w0 = cc.window_bytes();
    for (int i = 1; i < 8; ++i) {
        (void)cc.on_ack(ack(100 + i, 10000));
        EXPECT_EQ(cc.window_bytes(), w0) << "collected, not applied, at ack " << i;
    }
    (void)cc.on_ack(ack(200, 10000));  // 8 MTUs acked: the batch is applied
    EXPECT_EQ(cc.window_bytes(), w0 + uint64_t(c.pi_gain * 8 * kMtu));
    (void)cc.on_ack(ack(200 + c.base_rtt_ns, 10000));  // one base RTT later: applied at once
    EXPECT_EQ(cc.window_bytes(), w0 + uint64_t(c.pi_gain * 9 * kMtu));
}

TEST(Nscc, TrimNackTakesTheBytesOff) {
    NsccCc cc(nscc(), kMtu);
    const uint64_t w0 = cc.window_bytes();
    (void)cc.on_trim_nack(1000, kMtu, false);
    EXPECT_EQ(cc.window_bytes(), w0 - kMtu);
}

TEST(Nscc, QuickAdaptDropsTheWindowToWhatWasDelivered) {
    NsccCc cc(nscc(), kMtu);
    // One ack starts the delivery history; then almost nothing for a period.
    (void)cc.on_ack(ack(1000, 10000, false, kMtu));
    const uint64_t period = cc.base_rtt_ns() + cc.target_delay_ns();
    (void)cc.on_ack(ack(1000 + period + 10, 10000, false, 2 * kMtu));
    // Delivered 1 MTU in the last full period, far below max / 8: adapt.
    EXPECT_EQ(cc.on_timeout(1000 + period + 20, kMtu), kCcQuickAdapt);
    EXPECT_EQ(cc.window_bytes(), 2u * kMtu) << "what the current period delivered so far";
    EXPECT_EQ(cc.on_timeout(1000 + period + 30, kMtu), kCcNone) << "at most once per period";
    // With plenty delivered, a loss does not collapse the window.
    NsccCc busy(nscc(), kMtu);
    for (int i = 0; i < 40; ++i)
        (void)busy.on_ack(ack(1000 + i * 500, 10000, false, 4 * kMtu));
    const uint64_t w = busy.window_bytes();
    EXPECT_EQ(busy.on_timeout(21000, kMtu), kCcNone);
    EXPECT_EQ(busy.window_bytes(), w);
    // A delay beyond qa_threshold_targets x target triggers it too.
    NsccCc late(nscc(), kMtu);
    (void)late.on_ack(ack(1000, 10000, false, kMtu));
    const uint8_t v = late.on_ack(ack(1000 + period + 10, 10000 + 31000, false, kMtu));
    EXPECT_TRUE(v & kCcQuickAdapt);
}

TEST(Nscc, BaseRttIsLearnedFromTheSmallestSample) {
    NsccCc cc(nscc(), kMtu);
    (void)cc.on_ack(ack(1000, 6000));
    EXPECT_EQ(cc.base_rtt_ns(), 6000u);
    EXPECT_EQ(cc.target_delay_ns(), 4500u);
    EXPECT_EQ(cc.max_window_bytes(), 112500u) << "1.5 x 100 Gb/s x 6 us";
    EXPECT_LE(cc.window_bytes(), cc.max_window_bytes());
    (void)cc.on_ack(ack(2000, 9000));
    EXPECT_EQ(cc.base_rtt_ns(), 6000u) << "a larger sample is queueing, not a new base";
}

TEST(Nscc, WindowNeverLeavesItsBounds) {
    NsccCc cc(nscc(), kMtu);
    for (int i = 0; i < 200; ++i)
        (void)cc.on_trim_nack(1000 + i, 64 * kMtu, false);
    EXPECT_EQ(cc.window_bytes(), kMtu);
    for (int i = 0; i < 5000; ++i)
        (void)cc.on_ack(ack(10000 + i * 20000, 10000, false, 64 * kMtu));
    EXPECT_EQ(cc.window_bytes(), cc.max_window_bytes());
}

TEST(Cc, OneInstancePerPlaneGetsItsShare) {
    CcConfig c;
    c.nscc = nscc();
    auto one = make_cc(c, kMtu, 1);
    auto quarter = make_cc(c, kMtu, 4);
    EXPECT_EQ(one->window_bytes(), 4 * quarter->window_bytes());
    c.algo = CcAlgo::kFixed;
    c.fixed_window_bytes = 1 << 20;
    EXPECT_EQ(make_cc(c, kMtu, 4)->window_bytes(), (1u << 20) / 4);
    c.fixed_window_bytes = 0;
    EXPECT_EQ(make_cc(c, kMtu, 4)->window_bytes(), UINT64_MAX) << "0: unbounded";
}

// check_cc's verdict as text: empty when the configuration is accepted.
std::string why_not(const Result<void> &r) {
    return r ? std::string() : r.error().message;
}

TEST(Cc, ConfigurationsThatCannotWorkAreNamed) {
    CcConfig c;
    c.nscc = nscc();
    EXPECT_EQ(why_not(check_cc(c, kMtu, 4)), "");
    c.algo = CcAlgo::kFixed;
    c.fixed_window_bytes = 8192;
    EXPECT_NE(why_not(check_cc(c, kMtu, 4)).find("smaller than one MTU"), std::string::npos)
        << "8 KiB over 4 planes is 2 KiB a plane";
    EXPECT_EQ(why_not(check_cc(c, kMtu, 2)), "");
    c.algo = CcAlgo::kNscc;
    c.nscc.line_rate_gbps = 1;
    c.nscc.base_rtt_ns = 1000;  // 1 Gb/s x 1 us = 125 bytes
    EXPECT_NE(why_not(check_cc(c, kMtu, 1)).find("smaller than one MTU"), std::string::npos);
    c.nscc = nscc();
    c.nscc.md_gamma = 0;
    EXPECT_NE(why_not(check_cc(c, kMtu, 1)), "");
    c.nscc = nscc();
    c.nscc.init_cwnd_bdps = 2;  // above the 1.5 ceiling
    EXPECT_NE(why_not(check_cc(c, kMtu, 1)), "");
    c.nscc = nscc();
    c.nscc.line_rate_gbps = 0;
    EXPECT_NE(why_not(check_cc(c, kMtu, 1)), "");
}

}  // namespace
}  // namespace mrc
