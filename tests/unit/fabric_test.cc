// Scope: the impairment fabric's decisions (lib/fabric): settings and their
// errors, the TOML file, the delay line, and each impairment on real MRC
// frames built by lib/wire. No DPDK, no clock: time is passed in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "fabric/config.h"
#include "fabric/fabric.h"
#include "wire/mrc.h"

namespace mrc::fabric {
namespace {

using wire::MrcPacket;

constexpr uint16_t kPort = wire::kDefaultMrcPort;

// An MRC WRITE frame of `payload` bytes on EV `ev`, with a UDP checksum.
std::vector<uint8_t> data_frame(uint16_t ev, uint32_t payload = 1400, uint32_t psn = 7) {
    wire::MrcAddr a;
    a.src_ip = wire::ipv4(10, 0, 0, 1);
    a.dst_ip = wire::ipv4(10, 0, 0, 2);
    wire::DataFields f;
    f.dst_qpn = 5;
    f.psn = Psn(psn);
    f.flags = wire::kFlagFirst;
    f.remote_addr = 0x1000;
    f.rkey = 9;
    std::vector<uint8_t> fr(wire::kMaxHdrBytes + payload);
    const uint16_t h = wire::write_data(fr.data(), a, ev, f, payload);
    fr.resize(h + payload);
    for (uint32_t i = 0; i < payload; ++i)
        fr[h + i] = uint8_t(i * 7);
    wire::fill_udp_checksum(fr.data());
    return fr;
}

std::vector<uint8_t> udp_frame(uint16_t dst_port) {
    wire::UdpFrameSpec s;
    s.src_ip = wire::ipv4(10, 0, 0, 1);
    s.dst_ip = wire::ipv4(10, 0, 0, 2);
    s.src_port = 5000;
    s.dst_port = dst_port;
    std::vector<uint8_t> fr(wire::kEthIpv4UdpBytes + 100, 0xab);
    wire::write_eth_ipv4_udp(fr.data(), s, 100);
    return fr;
}

Fabric make(uint32_t planes, uint32_t paths, std::vector<std::string> specs = {}) {
    FabricConfig c;
    c.planes = planes;
    c.paths = paths;
    for (const auto &s : specs) {
        auto r = parse_setting(s);
        EXPECT_TRUE(r.ok()) << s << ": " << (r ? "" : r.error().message);
        if (r) c.settings.push_back(*r);
    }
    auto f = Fabric::create(c);
    EXPECT_TRUE(f.ok()) << (f ? "" : f.error().message);
    return std::move(f).value();
}

// An EV that takes `path`, and one that does not.
uint16_t ev_on(const Fabric &f, uint32_t path, uint16_t from = 1024) {
    for (uint32_t ev = from; ev < 65536; ++ev)
        if (f.path_of(uint16_t(ev)) == path) return uint16_t(ev);
    ADD_FAILURE() << "no EV for path " << path;
    return 0;
}

Verdict send(Fabric &f, std::vector<uint8_t> &fr, uint64_t now, uint64_t handle = 1,
             uint32_t plane = 0, Dir dir = kAtoB) {
    uint32_t len = uint32_t(fr.size());
    const Verdict v = f.ingress(plane, dir, fr.data(), &len, handle, now);
    fr.resize(len);
    return v;
}

// ---- settings --------------------------------------------------------------------

TEST(FabricSetting, ParsesSelectorAndParameters) {
    auto s = parse_setting("plane=1, path=*, dir=ba, loss=0.01,delay_us=20,trim");
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->sel.plane, 1);
    EXPECT_EQ(s->sel.path, -1);
    EXPECT_FALSE(s->sel.a_to_b);
    EXPECT_TRUE(s->sel.b_to_a);
    ASSERT_EQ(s->kv.size(), 3u);
    EXPECT_EQ(s->kv[2].first, "trim");
    EXPECT_EQ(s->kv[2].second, "true");
    // mrc-sim's spelling of a direction means the same here.
    auto zero = parse_setting("dir=0,loss=0.1");
    ASSERT_TRUE(zero.ok()) << zero.error().message;
    EXPECT_TRUE(zero->sel.a_to_b);
    EXPECT_FALSE(zero->sel.b_to_a);
}

TEST(FabricCapture, SelectorsAreCheckedAgainstTheFabric) {
    auto a = parse_capture_selector("1", 2, 4);
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->plane, 1);
    EXPECT_EQ(a->path, -1);
    EXPECT_TRUE(a->ab && a->ba);
    auto b = parse_capture_selector("0:3:ba", 2, 4);
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(b->path, 3);
    EXPECT_FALSE(b->ab);
    EXPECT_TRUE(b->ba);
    for (const char *bad : {"", "2", "0:4", "0:1:up", "x", "0:", "0:1:ab:1", "-1", "0:1 "})
        EXPECT_FALSE(parse_capture_selector(bad, 2, 4).ok()) << bad;
}

TEST(FabricSetting, ImpossibleValuesAreRefusedNamingTheKey) {
    const std::map<std::string, std::string> bad = {
        {"loss=1.5", "loss=1.5"},
        {"delay_us=-1", "delay_us=-1"},
        {"lose=0.1", "unknown key 'lose'"},
        {"dir=up,loss=0", "dir=up"},
        {"plane=x,loss=0", "plane=x"},
        {"duplicate=abc", "duplicate=abc: not a number"},
        {"trim=maybe", "trim=maybe"},
        {"queue_bytes=10", "queue_bytes=10"},
        {"plane=0", "changes nothing"},
        {"rate_gbps=1e-20", "rate_gbps=1e-20"},
        {"=3", "key is missing"},
        {"loss=nan", "loss=nan"},
        {"loss=0.1,loss=0.2", "given twice"},
    };
    for (const auto &[spec, want] : bad) {
        auto s = parse_setting(spec);
        ASSERT_FALSE(s.ok()) << spec;
        EXPECT_NE(s.error().message.find(want), std::string::npos)
            << spec << " -> " << s.error().message;
    }
    auto e = parse_event("plane=1,down");
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message.find("at_ms"), std::string::npos);
    e = parse_event("at_ms=-5,down");
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message.find("at_ms=-5"), std::string::npos);
}

TEST(FabricSetting, APlaneOrPathThatDoesNotExistIsRefused) {
    FabricConfig c;
    c.planes = 2;
    c.paths = 4;
    c.settings.push_back(parse_setting("plane=0,loss=0.1").value());
    c.settings.push_back(parse_setting("plane=2,loss=0.1").value());
    auto f = Fabric::create(c);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find("setting 2: plane=2: no such plane (2 planes"),
              std::string::npos)
        << f.error().message;
    c.settings.clear();
    c.schedule.push_back(parse_event("at_ms=5,path=4,down").value());
    f = Fabric::create(c);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find("schedule event 1: path=4: no such path"), std::string::npos)
        << f.error().message;
    c.schedule.clear();
    c.planes = 9;
    EXPECT_FALSE(Fabric::create(c).ok());
}

TEST(FabricSetting, ASettingWithOneBadKeyChangesNothing) {
    Fabric f = make(1, 2);
    Setting s;
    s.kv = {{"loss", "0.5"}, {"delay_us", "-3"}};
    auto r = f.apply(s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(f.params(0, 0, kAtoB).loss, 0);
    EXPECT_EQ(f.generation(), 0u);
    ASSERT_TRUE(f.apply(parse_setting("path=1,dir=ab,loss=0.5").value()).ok());
    EXPECT_EQ(f.params(0, 1, kAtoB).loss, 0.5);
    EXPECT_EQ(f.params(0, 1, kBtoA).loss, 0);
    EXPECT_EQ(f.params(0, 0, kAtoB).loss, 0);
    EXPECT_EQ(f.generation(), 1u);
}

TEST(FabricConfig, TomlFileGivesSettingsAndSchedule) {
    const std::string text = R"(
paths = 8
seed = 42
[[impair]]
plane = 1
dir = "ab"
loss = 0.05
delay_us = 10
[[impair]]
path = 3
blackhole = true
[[schedule]]
at_ms = 200
plane = 0
down = true
[[schedule]]
at_ms = 400
plane = 0
down = false
)";
    FabricConfig base;
    base.planes = 2;
    auto c = parse_config(text, "t.toml", base);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->paths, 8u);
    EXPECT_EQ(c->seed, 42u);
    ASSERT_EQ(c->settings.size(), 2u);
    ASSERT_EQ(c->schedule.size(), 2u);
    EXPECT_EQ(c->schedule[1].at_ns, 400'000'000u);
    auto f = Fabric::create(*c);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->params(1, 0, kAtoB).loss, 0.05);
    EXPECT_EQ(f->params(1, 0, kBtoA).loss, 0);
    EXPECT_TRUE(f->params(0, 3, kBtoA).blackhole);
    EXPECT_FALSE(f->params(0, 2, kBtoA).blackhole);
}

TEST(FabricConfig, BadFilesNameTheTableAndKey) {
    const std::map<std::string, std::string> bad = {
        {"[[impair]]\nloss = 2\n", "impair #1: loss=2"},
        {"[[impair]]\nloss = 0.1\n[[impair]]\njitter = 3\n", "impair #2: unknown key 'jitter'"},
        {"pathz = 3\n", "'pathz': unknown key"},
        {"paths = 0\n", "'paths'"},
        {"[[schedule]]\ndown = true\n", "schedule #1: "},
        {"[[impair]]\ndelay_us = [1]\n", "key 'delay_us'"},
        {"paths = \n", "t.toml:1:"},
        {"[[impair]]\ndir = \"ab,loss=1\"\n", "may not contain"},
    };
    for (const auto &[text, want] : bad) {
        auto c = parse_config(text, "t.toml", FabricConfig{});
        ASSERT_FALSE(c.ok()) << text;
        EXPECT_NE(c.error().message.find(want), std::string::npos)
            << text << " -> " << c.error().message;
    }
    EXPECT_FALSE(load_config("/nonexistent/fabric.toml", FabricConfig{}).ok());
}

// ---- delay line -------------------------------------------------------------------

TEST(DelayLine, LeavesInDueOrderAndArrivalOrderOnTies) {
    DelayLine dl(8);
    EXPECT_TRUE(dl.push(30, 1, 0, 0));
    EXPECT_TRUE(dl.push(10, 2, 0, 0));
    EXPECT_TRUE(dl.push(20, 3, 0, 0));
    EXPECT_TRUE(dl.push(10, 4, 0, 0));
    EXPECT_TRUE(dl.push(10, 5, 0, 0));
    DelayLine::Item it;
    EXPECT_FALSE(dl.pop_due(9, &it));
    std::vector<uint64_t> order;
    while (dl.pop_due(25, &it))
        order.push_back(it.handle);
    EXPECT_EQ(order, (std::vector<uint64_t>{2, 4, 5, 3}));
    EXPECT_EQ(dl.size(), 1u);
}

TEST(DelayLine, IsBoundedAndFullLineDropsWithACounter) {
    DelayLine dl(3);
    EXPECT_TRUE(dl.push(1, 1, 0, 0));
    EXPECT_TRUE(dl.push(1, 2, 0, 0));
    EXPECT_TRUE(dl.push(1, 3, 0, 0));
    EXPECT_FALSE(dl.push(1, 4, 0, 0));
    EXPECT_EQ(dl.size(), 3u);

    FabricConfig c;
    c.paths = 1;
    c.delay_slots = 16;
    c.settings.push_back(parse_setting("delay_us=1000").value());
    auto f = Fabric::create(c);
    ASSERT_TRUE(f.ok());
    uint32_t dropped = 0;
    for (int i = 0; i < 100; ++i) {
        auto fr = data_frame(2000);
        if (send(*f, fr, 0, i) == Verdict::kDropped) ++dropped;
    }
    EXPECT_EQ(dropped, 84u);
    EXPECT_EQ(f->queued(0, kAtoB), 16u);
    EXPECT_EQ(f->counters(0, 0, kAtoB).drop_delay_full, 84u);
}

// ---- impairments ------------------------------------------------------------------

TEST(FabricImpair, NonMrcFramesPassUnchangedAndAtOnce) {
    Fabric f = make(1, 4, {"loss=1,delay_us=100"});
    auto other = udp_frame(53);
    const auto copy = other;
    EXPECT_EQ(send(f, other, 0), Verdict::kPass);
    EXPECT_EQ(other, copy);
    std::vector<uint8_t> arp(60, 0);
    arp[12] = 0x08;
    arp[13] = 0x06;
    EXPECT_EQ(send(f, arp, 0), Verdict::kPass);
    EXPECT_EQ(f.plane_counters(0, kAtoB).passed, 2u);
    auto mrc = data_frame(4000);
    EXPECT_EQ(send(f, mrc, 0), Verdict::kDropped);
}

TEST(FabricImpair, DelayAndJitterHoldFramesForTheirTime) {
    Fabric f = make(1, 1, {"delay_us=50,jitter_us=10"});
    for (int i = 0; i < 200; ++i) {
        auto fr = data_frame(3000);
        ASSERT_EQ(send(f, fr, 1'000'000, i), Verdict::kQueued);
    }
    DelayLine::Item out[256];
    EXPECT_EQ(f.egress(0, kAtoB, 1'049'999, out, 256), 0u);
    EXPECT_EQ(f.egress(0, kBtoA, 2'000'000, out, 256), 0u);  // the other direction is empty
    const uint32_t early = f.egress(0, kAtoB, 1'055'000, out, 256);
    const uint32_t rest = f.egress(0, kAtoB, 1'060'000, out, 256);
    EXPECT_EQ(early + rest, 200u);
    EXPECT_GT(early, 50u);  // uniform jitter: about half by the middle
    EXPECT_GT(rest, 50u);
    EXPECT_EQ(f.counters(0, 0, kAtoB).tx_pkts, 200u);
}

TEST(FabricImpair, RandomLossDropsAboutItsShare) {
    Fabric f = make(1, 4, {"loss=0.1"});
    uint32_t dropped = 0;
    for (int i = 0; i < 20000; ++i) {
        auto fr = data_frame(uint16_t(1024 + i % 5000), 64);
        if (send(f, fr, i) == Verdict::kDropped) ++dropped;
        DelayLine::Item out[4];
        (void)f.egress(0, kAtoB, i, out, 4);
    }
    EXPECT_GT(dropped, 1800u);
    EXPECT_LT(dropped, 2200u);
    uint64_t counted = 0;
    for (uint32_t p = 0; p < 4; ++p)
        counted += f.counters(0, p, kAtoB).drop_loss;
    EXPECT_EQ(counted, dropped);
}

TEST(FabricImpair, BurstLossComesInRuns) {
    Fabric f = make(1, 1, {"burst_enter=0.01,burst_exit=0.1,burst_loss=1"});
    uint32_t dropped = 0, runs = 0;
    bool prev = false;
    for (int i = 0; i < 50000; ++i) {
        auto fr = data_frame(2000, 64);
        const bool d = send(f, fr, i) == Verdict::kDropped;
        dropped += d;
        runs += d && !prev;
        prev = d;
        DelayLine::Item out[4];
        (void)f.egress(0, kAtoB, i, out, 4);
    }
    ASSERT_GT(runs, 10u);
    const double mean_run = double(dropped) / runs;
    EXPECT_GT(mean_run, 5.0);  // 1 / burst_exit = 10 expected; independent loss gives ~1
    EXPECT_EQ(f.counters(0, 0, kAtoB).drop_burst, dropped);
}

TEST(FabricImpair, BlackholeTakesOnlyItsPath) {
    Fabric f = make(2, 4, {"path=2,blackhole"});
    std::set<uint32_t> dropped_paths, passed_paths;
    for (uint32_t ev = 1024; ev < 1024 + 400; ++ev) {
        for (uint32_t plane = 0; plane < 2; ++plane) {
            auto fr = data_frame(uint16_t(ev), 64);
            const Verdict v = send(f, fr, 0, ev, plane);
            (v == Verdict::kDropped ? dropped_paths : passed_paths).insert(f.path_of(uint16_t(ev)));
        }
    }
    EXPECT_EQ(dropped_paths, (std::set<uint32_t>{2}));
    EXPECT_EQ(passed_paths, (std::set<uint32_t>{0, 1, 3}));
    EXPECT_GT(f.counters(1, 2, kAtoB).drop_blackhole, 0u);
}

TEST(FabricImpair, FullQueueMarksThenTrimsDataAndDropsTheRest) {
    // 10 Gb/s, a 15000-byte queue, CE above 6000 bytes: a burst of 1482-byte
    // frames arriving at once fills it after about 10.
    Fabric f = make(1, 1, {"rate_gbps=10,queue_bytes=15000,ecn_bytes=6000,trim"});
    const uint16_t ev = 1500;
    std::vector<std::vector<uint8_t>> frames;
    std::vector<Verdict> v;
    for (int i = 0; i < 20; ++i) {
        frames.push_back(data_frame(ev, 1400, 100 + i));
        v.push_back(send(f, frames.back(), 0, i));
    }
    const PathCounters &c = f.counters(0, 0, kAtoB);
    EXPECT_EQ(c.trimmed, 10u);
    EXPECT_EQ(c.drop_queue, 0u);
    EXPECT_EQ(c.ecn_marked, 5u);  // frames 6..10 find more than 6000 bytes queued
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(v[i], Verdict::kQueued);
        MrcPacket p;
        ASSERT_EQ(wire::parse_mrc(frames[i].data(), uint32_t(frames[i].size()), kPort, &p,
                                  wire::Checksums::kVerify),
                  wire::MrcError::kOk)
            << "frame " << i;
        EXPECT_EQ(p.trimmed(), i >= 10) << i;
        EXPECT_EQ(p.ecn_ce, i >= 5 && i < 10) << i;
        EXPECT_EQ(p.psn.value(), uint32_t(100 + i));
        if (p.trimmed()) {
            EXPECT_EQ(p.payload_bytes, 0u);
            EXPECT_EQ(frames[i].size(), wire::kDataHdrBytes);
        }
    }
    // Trimmed headers jump the queue; the full frames leave at the line rate.
    DelayLine::Item out[32];
    const uint32_t n = f.egress(0, kAtoB, 1, out, 32);
    EXPECT_EQ(n, 10u);
    for (uint32_t i = 0; i < n; ++i)
        EXPECT_GE(out[i].handle, 10u);
    EXPECT_EQ(f.egress(0, kAtoB, 12'000, out, 32), 10u);  // 10 x 1.19 us

    // Without trimming the overflow is dropped.
    Fabric g = make(1, 1, {"rate_gbps=10,queue_bytes=15000"});
    uint32_t dropped = 0;
    for (int i = 0; i < 20; ++i) {
        auto fr = data_frame(ev, 1400, i);
        dropped += send(g, fr, 0, i) == Verdict::kDropped;
    }
    EXPECT_EQ(dropped, 10u);
    EXPECT_EQ(g.counters(0, 0, kAtoB).drop_queue, 10u);
}

TEST(FabricImpair, RateLimitKeepsFractionsOfANanosecond) {
    // 1000 Gb/s: a 146-byte frame takes 1.168 ns. Rounded down per frame
    // it would take 1 ns, and 1000 frames would leave 168 ns early.
    Fabric f = make(1, 1, {"rate_gbps=1000,queue_bytes=1000000"});
    for (int i = 0; i < 1000; ++i) {
        auto fr = data_frame(2000, 64);
        ASSERT_EQ(fr.size(), 146u);
        ASSERT_EQ(send(f, fr, 0, i), Verdict::kQueued);
    }
    DelayLine::Item out[1024];
    // Frame k leaves at 1.168 (k + 1) ns, rounded down: 857 by 1000 ns.
    EXPECT_EQ(f.egress(0, kAtoB, 1000, out, 1024), 857u);
    EXPECT_EQ(f.egress(0, kAtoB, 1167, out, 1024), 142u);
    EXPECT_EQ(f.egress(0, kAtoB, 1168, out, 1024), 1u);
}

TEST(FabricImpair, AFrameTheDelayLineRefusesLeavesNoTrace) {
    // A full delay line: the dropped frame takes no queue time, gets no
    // mark and is not counted as reordered.
    FabricConfig c;
    c.paths = 1;
    c.delay_slots = 2;
    c.settings.push_back(
        parse_setting("rate_gbps=10,queue_bytes=100000,ecn_bytes=1,reorder=1,reorder_us=1")
            .value());
    auto f = Fabric::create(c);
    ASSERT_TRUE(f.ok());
    std::vector<std::vector<uint8_t>> fr;
    for (int i = 0; i < 4; ++i)
        fr.push_back(data_frame(2000, 1400, i));
    EXPECT_EQ(send(*f, fr[0], 0, 0), Verdict::kQueued);
    EXPECT_EQ(send(*f, fr[1], 0, 1), Verdict::kQueued);  // marked: 1482 bytes queued ahead
    const auto before = fr[2];
    EXPECT_EQ(send(*f, fr[2], 0, 2), Verdict::kDropped);  // would be marked; the line is full
    EXPECT_EQ(fr[2], before);                             // and it is left as it came
    const PathCounters &k = f->counters(0, 0, kAtoB);
    EXPECT_EQ(k.drop_delay_full, 1u);
    EXPECT_EQ(k.ecn_marked, 1u);
    EXPECT_EQ(k.reordered, 2u);
    DelayLine::Item out[4];
    EXPECT_EQ(f->egress(0, kAtoB, 10'000, out, 4), 2u);
    // The queue held two frames (2.37 us at 10 Gb/s), not three: at 2.4 us
    // it is empty and the next frame is not marked.
    EXPECT_EQ(send(*f, fr[3], 2'400, 3), Verdict::kQueued);
    EXPECT_EQ(k.ecn_marked, 1u);
}

TEST(FabricImpair, DuplicatesAreQueuedTwice) {
    Fabric f = make(1, 1, {"duplicate=1"});
    auto fr = data_frame(2000);
    EXPECT_EQ(send(f, fr, 0, 77), Verdict::kQueuedTwice);
    DelayLine::Item out[4];
    ASSERT_EQ(f.egress(0, kAtoB, 0, out, 4), 2u);
    EXPECT_EQ(out[0].handle, 77u);
    EXPECT_EQ(out[1].handle, 77u);
    EXPECT_EQ(f.counters(0, 0, kAtoB).duplicated, 1u);
    EXPECT_EQ(f.counters(0, 0, kAtoB).tx_pkts, 2u);
}

TEST(FabricImpair, ReorderHoldsSomeFramesBehindLaterOnes) {
    Fabric f = make(1, 1, {"reorder=0.2,reorder_us=5"});
    for (uint64_t i = 0; i < 1000; ++i) {
        auto fr = data_frame(2000, 64);
        ASSERT_EQ(send(f, fr, i * 1000, i), Verdict::kQueued);  // one per microsecond
    }
    std::vector<uint64_t> order;
    DelayLine::Item out[64];
    for (uint64_t t = 0; t < 2'000'000; t += 1000) {
        const uint32_t n = f.egress(0, kAtoB, t, out, 64);
        for (uint32_t i = 0; i < n; ++i)
            order.push_back(out[i].handle);
    }
    ASSERT_EQ(order.size(), 1000u);
    uint32_t inversions = 0;
    for (size_t i = 1; i < order.size(); ++i)
        inversions += order[i] < order[i - 1];
    const uint64_t held = f.counters(0, 0, kAtoB).reordered;
    EXPECT_GT(held, 150u);
    EXPECT_LT(held, 250u);
    EXPECT_GT(inversions, 100u);
}

TEST(FabricImpair, ScheduleTakesAPlaneDownAndBackUp) {
    FabricConfig c;
    c.planes = 2;
    c.paths = 4;
    c.schedule.push_back(parse_event("at_ms=2,plane=1,down=false").value());
    c.schedule.push_back(parse_event("at_ms=1,plane=1,down").value());
    auto fr = Fabric::create(c);
    ASSERT_TRUE(fr.ok()) << fr.error().message;
    Fabric &f = *fr;
    auto at = [&](uint64_t t_ns, uint32_t plane) {
        f.run_schedule(t_ns);
        auto x = data_frame(3000, 64);
        return send(f, x, t_ns, 0, plane);
    };
    EXPECT_EQ(at(500'000, 1), Verdict::kQueued);
    EXPECT_EQ(at(1'000'000, 1), Verdict::kDropped);
    EXPECT_EQ(at(1'500'000, 0), Verdict::kQueued);
    EXPECT_EQ(at(1'999'999, 1), Verdict::kDropped);
    EXPECT_EQ(at(2'000'000, 1), Verdict::kQueued);
    EXPECT_EQ(f.generation(), 2u);
    EXPECT_EQ(f.counters(1, f.path_of(3000), kAtoB).drop_down, 2u);
}

TEST(FabricImpair, PathsSpreadEvsLikeEcmp) {
    Fabric f = make(1, 8);
    std::vector<uint32_t> hits(8);
    for (uint32_t ev = 1024; ev < 1024 + 8000; ++ev)
        ++hits[f.path_of(uint16_t(ev))];
    for (uint32_t h : hits) {
        EXPECT_GT(h, 850u);
        EXPECT_LT(h, 1150u);
    }
    EXPECT_NE(ev_on(f, 3), 0);
}

}  // namespace
}  // namespace mrc::fabric

namespace mrc::fabric {
namespace {

std::string read_text(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return {};
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        s.append(buf, n);
    std::fclose(f);
    return s;
}

TEST(FabricDocs, EveryCounterAndParameterIsDocumented) {
    const std::string doc = read_text(std::string(MRC_SOURCE_DIR) + "/docs/fabric.md");
    ASSERT_FALSE(doc.empty());
    for (const auto &c : kPathCounterInfo)
        EXPECT_NE(doc.find("`" + std::string(c.name) + "`"), std::string::npos) << c.name;
    for (const auto &k : param_keys())
        EXPECT_NE(doc.find("| `" + k + "` |"), std::string::npos) << k;
}

TEST(FabricDocs, TheExampleConfigurationLoads) {
    FabricConfig base;
    base.planes = 2;
    auto c = load_config(std::string(MRC_SOURCE_DIR) + "/config/fabric-example.toml", base);
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto f = Fabric::create(*c);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->params(0, 0, kAtoB).loss, 0.01);
    EXPECT_EQ(f->params(0, 0, kBtoA).loss, 0);
    EXPECT_TRUE(f->params(1, 3, kBtoA).trim);
    EXPECT_EQ(f->params(1, 2, kBtoA).delay_us, 10);
    EXPECT_EQ(c->schedule.size(), 2u);
}

}  // namespace
}  // namespace mrc::fabric
