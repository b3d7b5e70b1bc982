// Scope: end-to-end properties of the real transport core over the
// simulated fabric, over many seeds. Each seed draws its own topology,
// workload and impairments; the properties must hold for every one:
//   - every byte placed exactly where it belongs (compared with the source
//     at each completion, and once more after the run: every region slot
//     holds the last message written to it), and not one byte written
//     outside a registered region (guards around every region);
//   - completions exactly once and in order, immediates in message order;
//   - no QP error unless one packet really exhausted its retry budget
//     (checked exactly where drops can be charged to a PSN: the first mix),
//     and none at all when retrying for ever (the second mix);
//   - with loss, trimming, reordering and blackholes on the data path but
//     nothing else interfering: no packet is resent that the fabric did
//     not drop, trim or hold back (loss detection from acks must not
//     mistake plain spraying for loss), and without reordering,
//     retransmissions == fabric drops + trims exactly.
// Each mix runs the fixed seeds 1..N (N = MRC_PROPERTY_SEEDS, default 1000)
// and N/5 seeds from a base drawn at each run and printed, so every CI run
// explores new configurations; MRC_PROPERTY_BASE_SEED replays a drawn run,
// MRC_PROPERTY_FIRST=S with MRC_PROPERTY_SEEDS=1 replays seed S.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#include "common/rng.h"
#include "sim/sim.h"

namespace mrc::sim {
namespace {

uint32_t seeds() {
    const char *e = std::getenv("MRC_PROPERTY_SEEDS");
    return e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : 1000;
}

// The first of the fixed seeds (MRC_PROPERTY_FIRST, default 1): with
// MRC_PROPERTY_SEEDS=1 it replays one seed.
uint64_t first_seed() {
    const char *e = std::getenv("MRC_PROPERTY_FIRST");
    return e ? static_cast<uint64_t>(std::strtoull(e, nullptr, 10)) : 1;
}

// The base of the drawn seeds: MRC_PROPERTY_BASE_SEED, or a fresh one
// (kept clear of the fixed seeds), printed so that a failure can be replayed.
uint64_t drawn_base() {
    static const uint64_t base = []() -> uint64_t {
        if (const char *e = std::getenv("MRC_PROPERTY_BASE_SEED"))
            return static_cast<uint64_t>(std::strtoull(e, nullptr, 10));
        std::random_device rd;
        const uint64_t t =
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        return (((uint64_t{rd()} << 32) ^ t) % 1'000'000'000'000ull) + 1'000'000;
    }();
    return base;
}

// A random small configuration for `seed`. With `clean_acks` every
// impairment is on the data direction only and nothing duplicates, so
// retransmissions must equal drops + trims exactly.
SimConfig draw(uint64_t seed, bool clean_acks) {
    Rng r(seed * 0x9e3779b97f4a7c15ull + (clean_acks ? 1 : 2));
    SimConfig c;
    c.seed = seed;
    c.fabric.planes = 1 + uint32_t(r.below(4));
    c.fabric.paths_per_plane = 1 + uint32_t(r.below(8));
    c.fabric.link_gbps = 100;
    c.fabric.path_gbps = 30 + double(r.below(71));  // slower paths: queues build, trims happen
    c.fabric.delay_ns = 500 + r.below(3000);
    const uint32_t mtus[] = {256, 1000, 1024, 4096};
    c.qp.mtu_payload_bytes = mtus[r.below(4)];
    // 4 to 63 EVs per plane (MRC uses 128-256 per QP): few enough that a
    // dead path often holds several of a QP's EVs, so EV health (retiring,
    // spares, the floor, probes) is what finds the way around it.
    c.qp.ev.evs = (4 + uint32_t(r.below(60))) * c.fabric.planes;
    c.qp.ev.min_active = 2;
    c.qp.retry.limit = 7;
    c.work.qps = 1 + uint32_t(r.below(3));
    c.work.msg_bytes = 1 + r.below(48 * 1024);
    c.work.depth = 1 + uint32_t(r.below(8));
    c.work.write_imm = r.below(2);
    c.work.total_bytes = c.work.msg_bytes * c.work.qps * (2 + r.below(10));
    c.max_sim_ns = 2'000'000'000;
    Impairment data;
    data.dir = 0;
    data.loss = r.uniform() * 0.2;  // up to 20%
    data.reorder = r.uniform() * 0.3;
    data.reorder_ns = 1000 + r.below(10'000);
    if (r.below(2)) data.trim_bytes = (1 + r.below(16)) * 1024;
    if (r.below(4) == 0) data.burst_enter = r.uniform() * 0.02;
    c.fabric.impairments.push_back(data);
    if (r.below(3) == 0) c.fabric.lasthop_trim_kb = 4 + uint32_t(r.below(32));
    // Blackhole one path from some time on (or for a while); never the only path.
    if (c.fabric.planes * c.fabric.paths_per_plane > 1 && r.below(3) == 0) {
        Failure f;
        f.plane = int(r.below(c.fabric.planes));
        f.path = int(r.below(c.fabric.paths_per_plane));
        f.at_ns = r.below(200'000);
        f.for_ns = r.below(2) ? 0 : r.below(500'000);
        f.dir = clean_acks ? 0 : -1;  // a dead link takes both directions; "clean" keeps acks whole
        c.fabric.failures.push_back(f);
    }
    if (!clean_acks) {
        Impairment acks;
        acks.dir = 1;
        acks.loss = r.uniform() * 0.02;
        acks.reorder = r.uniform() * 0.2;
        c.fabric.impairments.push_back(acks);
        c.fabric.impairments[0].loss = r.uniform() * 0.05;
        c.fabric.impairments[0].duplicate = r.uniform() * 0.05;
        if (c.fabric.planes > 1 && r.below(4) == 0) {  // a whole plane flaps (another stays)
            Failure f;
            f.plane = int(r.below(c.fabric.planes));
            f.at_ns = r.below(100'000);
            f.for_ns = 50'000 + r.below(200'000);
            c.fabric.failures.push_back(f);
        }
        c.qp.mpr_units = uint16_t(1 + r.below(8));
        // Ack losses cannot be charged to a PSN exactly (acks coalesce), so
        // this mix retries for ever and must then deliver everything.
        c.qp.retry.limit = RetryPolicy::kMaxExponential;
        // No more simulated time than the first mix: EV health retires a
        // dead path's EVs after one timeout each, so exponentially growing
        // waits on it no longer decide how long a run takes.
    }
    return c;
}

std::string describe(const SimConfig &c) {
    std::string s = "seed " + std::to_string(c.seed) + ": planes " +
                    std::to_string(c.fabric.planes) + " paths " +
                    std::to_string(c.fabric.paths_per_plane) + " qps " +
                    std::to_string(c.work.qps) + " msg " + std::to_string(c.work.msg_bytes) +
                    " total " + std::to_string(c.work.total_bytes) + " mtu " +
                    std::to_string(c.qp.mtu_payload_bytes) + (c.work.write_imm ? " imm" : "");
    for (const auto &i : c.fabric.impairments)
        s += " [dir " + std::to_string(i.dir) + " loss " + std::to_string(i.loss) + " trim " +
             std::to_string(i.trim_bytes) + " duplicate " + std::to_string(i.duplicate) +
             " reorder " + std::to_string(i.reorder) + " burst " + std::to_string(i.burst_enter) +
             "]";
    for (const auto &f : c.fabric.failures)
        s += " [fail plane " + std::to_string(f.plane) + " path " + std::to_string(f.path) +
             " dir " + std::to_string(f.dir) + " at_us " + std::to_string(f.at_ns / 1000) +
             " for_us " + std::to_string(f.for_ns / 1000) + "]";
    s += " evs " + std::to_string(c.qp.ev.evs) + " mpr " + std::to_string(c.qp.mpr_units) +
         " depth " + std::to_string(c.work.depth) + " delay_ns " +
         std::to_string(c.fabric.delay_ns) + " path_gbps " + std::to_string(c.fabric.path_gbps);
    return s;
}

struct MixFigures {
    uint64_t runs = 0, errors = 0, drops = 0, trims = 0, retx = 0, arrived_again = 0;
    uint64_t timeouts = 0, losses_found = 0, tail_probes = 0, dups = 0, all_drops = 0;

    void add(const SimResult &r) {
        ++runs;
        errors += r.qp_errors;
        drops += r.data_packets_dropped;
        trims += r.packets_trimmed;
        retx += r.retransmissions;
        arrived_again += r.data_arrived_again;
        timeouts += r.requester.ack_timeouts;
        losses_found += r.requester.losses_detected;
        tail_probes += r.requester.tail_probes;
        dups += r.packets_duplicated;
        all_drops += r.packets_dropped_by_fabric;
    }
    void report(const std::string &name) const {
        const double lost = double(drops + trims);
        std::cout << name << ": " << runs << " runs, " << errors << " QP errors; " << retx
                  << " retransmissions for " << drops << " data drops + " << trims
                  << " trims (ratio " << (lost > 0 ? double(retx) / lost : 0) << "); "
                  << losses_found << " losses found from acks, " << tail_probes << " tail probes, "
                  << timeouts << " timeouts; " << arrived_again << " data packets arrived again\n";
        testing::Test::RecordProperty(name + "_retx_per_loss",
                                      std::to_string(lost > 0 ? double(retx) / lost : 0));
        testing::Test::RecordProperty(name + "_timeouts", std::to_string(timeouts));
        testing::Test::RecordProperty(name + "_qp_errors", std::to_string(errors));
    }
};

void check_common(const SimConfig &c, const SimResult &r) {
    const std::string d = describe(c);
    EXPECT_EQ(r.verify_errors, 0u) << d;
    EXPECT_EQ(r.duplicate_deliveries, 0u) << d;
    EXPECT_TRUE(r.completions_in_order) << d;
    EXPECT_FALSE(r.timed_out && r.qp_errors == 0) << "stalled: " << d;
    EXPECT_EQ(r.qps_unfinished, 0u) << "a QP stalled that did not fail: " << d;
    EXPECT_EQ(r.final_slot_mismatches, 0u) << "a region's final content is wrong: " << d;
    EXPECT_GT(r.final_slots_checked + r.qp_errors, 0u) << d;
    EXPECT_EQ(r.guard_bytes_changed, 0u) << "written outside a registered region: " << d;
    if (r.qp_errors == 0) {
        EXPECT_TRUE(r.verified) << d;
    }
}

// Mix 1: impairments on the data path only, a retry budget of 7.
void run_clean_acks(uint64_t first, uint32_t n, MixFigures &m) {
    for (uint64_t s = first; s < first + n; ++s) {
        const SimConfig c = draw(s, true);
        ASSERT_TRUE(validate(c)) << validate(c).error().message << describe(c);
        const SimResult r = run(c);
        check_common(c, r);
        // A QP error must be earned: the PSN that ran out of retries (or the
        // acks it triggered) was really dropped more often than the budget
        // allows.
        for (const uint32_t drops : r.error_psn_drops)
            EXPECT_GT(drops, c.qp.retry.limit) << describe(c);
        EXPECT_EQ(r.error_psn_drops.size(), r.qp_errors)
            << "only retry exhaustion may fail a QP: " << describe(c);
        // Nothing resent that the fabric did not drop, trim or hold back.
        EXPECT_EQ(r.needless_resends, 0u) << describe(c);
        if (r.qp_errors == 0 && c.fabric.impairments[0].reorder == 0) {
            EXPECT_EQ(r.retransmissions, r.data_packets_dropped + r.packets_trimmed)
                << "selective retransmission only: " << describe(c);
        }
        m.add(r);
        if (testing::Test::HasFailure()) break;  // one seed's story is enough
    }
}

// Mix 2: everything at once, acks included, retrying for ever.
void run_everything(uint64_t first, uint32_t n, MixFigures &m) {
    for (uint64_t s = first; s < first + n; ++s) {
        const SimConfig c = draw(s, false);
        ASSERT_TRUE(validate(c)) << validate(c).error().message << describe(c);
        const SimResult r = run(c);
        check_common(c, r);
        std::string causes;
        for (const std::string &e : r.qp_error_causes)
            causes += " " + e;
        EXPECT_EQ(r.qp_errors, 0u)
            << "retrying for ever, no QP may fail (" << causes << " ): " << describe(c);
        m.add(r);
        if (testing::Test::HasFailure()) break;
    }
}

TEST(SimProperties, LossTrimReorderBlackholeOnTheDataPath) {
    MixFigures m;
    run_clean_acks(first_seed(), seeds(), m);
    m.report("data_path");
    // The mix must really exercise recovery, or the checks above say nothing.
    EXPECT_GT(m.drops, 1000u);
    EXPECT_GT(m.trims, 100u);
    EXPECT_GT(m.arrived_again, 0u) << "reordering beyond what loss detection allows happens";
}

TEST(SimProperties, LossTrimReorderBlackholeOnTheDataPathDrawnSeeds) {
    std::cout << "drawn base seed " << drawn_base() << " (MRC_PROPERTY_BASE_SEED replays it)\n";
    RecordProperty("base_seed", std::to_string(drawn_base()));
    MixFigures m;
    run_clean_acks(drawn_base(), std::max<uint32_t>(1, seeds() / 5), m);
    m.report("data_path_drawn");
}

TEST(SimProperties, EverythingAtOnceIncludingAckLossAndDuplicates) {
    MixFigures m;
    run_everything(first_seed(), seeds(), m);
    m.report("everything");
    EXPECT_GT(m.dups, 100u);
    EXPECT_GT(m.all_drops, 100u);
}

TEST(SimProperties, EverythingAtOnceDrawnSeeds) {
    std::cout << "drawn base seed " << drawn_base() << " (MRC_PROPERTY_BASE_SEED replays it)\n";
    RecordProperty("base_seed", std::to_string(drawn_base()));
    MixFigures m;
    run_everything(drawn_base() + 7'777'777, std::max<uint32_t>(1, seeds() / 5), m);
    m.report("everything_drawn");
}
// Seeds the drawn runs once failed on, kept as fixed cases.
TEST(SimProperties, SeedsThatOnceFailed) {
    MixFigures m;
    // 1 plane, 2 paths, path 1 dead both ways, 4 of the QP's 5 EVs on it:
    // every RTO looked "silent" (the acks died on the way back) so no EV
    // was blamed, and the probe replies took dead EVs; the peer timeout
    // failed the QP of a peer that was alive.
    run_everything(566969731276, 1, m);
    // The same shape: 1 plane, 2 paths, path 0 dead both ways from 73 us,
    // and all four active EVs of one QP on it. Every timeout was silent,
    // so it resent on those EVs for ever; the other QP finished, and the
    // keepalives of both hosts took dead EVs too: both liveness checks
    // failed the QPs of a live peer. Resends after silent timeouts now try
    // spare EVs (SimScenario.EveryActiveEvOnADeadPathFindsTheLiveOne).
    run_everything(53049868312, 1, m);
    // (The same seed with EVs from 49152-65535: 12 of the 13 EVs on the
    // dead path. The QP failed its only plane, and its plane probes, on
    // those EVs in turn, were never answered three times in a row: it held
    // its new data for ever. A failed plane now carries new data when no
    // other plane is left.)
    // 2 planes x 1 path: plane 1 dead both ways for good, plane 0 down for
    // its first 157 us. Each timeout judged one of the packets lost in
    // plane 0's outage and resent it on plane 1; those resends never came
    // up to be judged, so plane 1 never failed: 25 timeouts in a row, and
    // the run stalled (until everything sent an RTO ago counted as lost).
    run_everything(670572237854, 1, m);
    // 1 plane, 2 paths, path 0 dead from early on, 17-18% loss on both: so
    // many of the plane's EVs were ASSUMED_BAD that the scorer took the
    // only plane down, and its probes (half of them to the dead path) were
    // never all answered, so it never came back: the QPs that had not
    // failed waited for ever.
    run_clean_acks(363836001094, 1, m);
    run_clean_acks(101602, 1, m);
}

TEST(SimProperties, SameSeedSameResult) {
    for (uint64_t s : {3u, 17u, 99u}) {
        const SimConfig c = draw(s, false);
        const SimResult a = run(c), b = run(c);
        EXPECT_EQ(a.events, b.events);
        EXPECT_EQ(a.sim_time_ns, b.sim_time_ns);
        EXPECT_EQ(a.retransmissions, b.retransmissions);
        EXPECT_EQ(a.packets_dropped_by_fabric, b.packets_dropped_by_fabric);
        EXPECT_EQ(a.per_plane_tx_packets, b.per_plane_tx_packets);
    }
}

}  // namespace
}  // namespace mrc::sim
