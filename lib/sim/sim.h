// A deterministic discrete-event simulator that runs the real transport
// core over an emulated multi-plane fabric: one or more sender hosts (each
// an Endpoint; "A") write to one receiver host ("B").
//
// Fabric, per direction and plane: the sending host's NIC (serialisation
// at the link rate) -> one of K paths chosen by hashing the EV, as ECMP
// does (a switch queue at the path rate, propagation delay, impairments)
// -> the last hop to the receiving host (a queue at the link rate, shared
// by all paths of the plane and all senders: where incast queues build).
// Every queue is FIFO with a drop-tail limit; paths can mark ECN or trim
// above a threshold; the last hop can trim (marked as last-hop trims).
// Direction 0 is senders -> receiver (data), 1 is receiver -> senders (acks).
//
// Same configuration and seed, same result: one seeded RNG drives every
// random choice, and simultaneous events run in the order they were made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/counters.h"
#include "core/ev.h"
#include "core/path.h"
#include "core/qp.h"

namespace mrc::sim {

// An impairment on the paths it names (every plane/path/direction when -1).
struct Impairment {
    int plane = -1;
    int path = -1;
    int dir = -1;                // 0: A -> B (data), 1: B -> A (acks), -1: both
    double loss = 0;             // random loss probability per packet
    double burst_enter = 0;      // burst loss (Gilbert-Elliott): P(good -> bad) per packet
    double burst_exit = 0.3;     //   P(bad -> good) per packet; every packet is lost while bad
    uint64_t ecn_bytes = 0;      // mark CE when the queue holds more than this (0: never)
    uint64_t trim_bytes = 0;     // trim data packets when the queue holds more (0: never)
    double duplicate = 0;        // probability a packet is duplicated
    double reorder = 0;          // probability a packet is held back...
    uint64_t reorder_ns = 5000;  // ...by this much extra delay
};

// A blackhole on a plane, or one path of it, from at_ns for for_ns (0: to
// the end); in both directions unless dir says 0 (A -> B) or 1 (B -> A).
// With period_ns the outage repeats: for_ns down, then up until the next
// period starts (a flapping path). With link 0 or 1 it is a port failure
// the hosts see: the plane's link of every sender (0) or of the receiver
// (1) goes down, which also blackholes the plane both ways.
struct Failure {
    int plane = 0;
    int path = -1;
    uint64_t at_ns = 0;
    uint64_t for_ns = 0;
    int dir = -1;
    uint64_t period_ns = 0;
    int link = -1;
};

// A plane with less capacity than its links: every path of the plane, in
// direction dir, passes one more queue at `gbps` (its core) before the
// last hop, which marks ECN above ecn_bytes (0: never).
struct PlaneLimit {
    int plane = 0;
    int dir = 0;
    double gbps = 0;
    uint64_t ecn_bytes = 0;
};

struct FabricConfig {
    uint32_t planes = 4;
    uint32_t paths_per_plane = 8;
    double link_gbps = 100;        // host links, each plane
    double path_gbps = 0;          // each path; 0: link_gbps
    uint64_t delay_ns = 2000;      // one-way propagation over a path
    uint32_t queue_kb = 1024;      // drop-tail limit of every queue
    uint32_t lasthop_trim_kb = 0;  // last hop trims above this instead of dropping (0: drops)
    uint32_t lasthop_ecn_kb = 0;   // last hop marks ECN above this (0: never, as in MRC fabrics)
    double loss = 0;  // random loss on every path, both directions (besides impairments)
    // The hosts talk IPv6 (2001:db8:P:S::1, the receiver 2001:db8:P:ffff::fe
    // on plane P, sender S) and the paths hash the flow label, not the UDP
    // source port: MRC writes the EV into both.
    bool ipv6 = false;
    std::vector<Impairment> impairments;
    std::vector<Failure> failures;
    std::vector<PlaneLimit> plane_limits;
};

struct WorkloadConfig {
    uint32_t senders = 1;  // hosts writing to the one receiver (QPs spread over them)
    uint32_t qps = 1;
    uint64_t msg_bytes = 65536;
    uint64_t total_bytes = 16ull << 20;  // over all QPs
    bool write_imm = false;              // WRITE_WITH_IMM instead of WRITE
    uint32_t depth = 8;                  // messages outstanding per QP
    // Victims: extra QPs, each from a sender host of its own, that move
    // victim_bytes each, starting at victim_start_ns (an incast's bystander).
    uint32_t victims = 0;
    uint64_t victim_bytes = 4ull << 20;
    uint64_t victim_start_ns = 0;
};

struct SimConfig {
    FabricConfig fabric;
    WorkloadConfig work;
    QpConfig qp;
    uint64_t seed = 1;
    uint64_t max_sim_ns = 2'000'000'000;  // give up (timed_out) after this much simulated time
    uint64_t timer_tick_ns = 1000;
    // The control thread: every host scores its paths this often and
    // applies the table (0: no scorer).
    ScorerConfig scorer;
    bool run_scorer = true;
    // Goodput time series: bucket width (0: none).
    uint64_t series_ns = 0;
    // NSCC's line rate and base RTT from the fabric (planes x link rate, and
    // the RTT of an unloaded path) instead of qp.cc.nscc's values.
    bool derive_cc = true;
};

// The ECMP hash of the simulated fabric: which of `paths` an EV takes.
inline uint32_t path_of(uint16_t ev, uint32_t paths) {
    return ((uint32_t{ev} * 0x9e3779b1u) >> 16) % paths;
}

struct PlaneReport {
    PlaneCounters counters;              // summed over the sender hosts
    PlaneState state = PlaneState::kUp;  // first sender's scorer, at the end
    PlaneScore score;
    EvStateCounts evs;  // the requesters' EVs on this plane, at the end
};

struct QpReport {
    bool victim = false;
    uint64_t bytes = 0;  // delivered and compared
    uint64_t start_ns = 0;
    uint64_t done_ns = 0;  // last completion
    double goodput_gbps = 0;
};

// One EV of a requester QP, at the end of the run.
struct EvReport {
    uint32_t qp = 0;
    uint16_t ev = 0;
    uint8_t plane = 0;
    uint32_t path = 0;
    EvState state = EvState::kGood;
    bool active = false;
    uint32_t failures = 0;
    uint32_t revivals = 0;
    uint64_t min_bad_ns = UINT64_MAX;
    uint8_t probe_need = 0;  // probe replies its next revival takes (grows when it flaps)
};

struct SimResult {
    bool verified = false;  // every byte compared, all equal, everything delivered, no errors,
                            // the regions' final content right, their guards untouched
    uint64_t delivered_bytes = 0;  // bytes of completed messages, compared with the source
    uint64_t expected_bytes = 0;
    uint64_t verify_errors = 0;  // messages whose bytes differ from what was sent
    uint64_t duplicate_deliveries =
        0;  // data packets placed more than once, immediates delivered twice
    bool completions_in_order = true;
    // After the run, independently of the completions: the final content
    // of every region slot compared with the last message written to it,
    // and the guard bytes around every region (never to be written).
    uint64_t final_slots_checked = 0;
    uint64_t final_slot_mismatches = 0;
    uint64_t guard_bytes_changed = 0;
    uint32_t qp_errors = 0;
    // QPs that did not error yet did not complete every message (a QP
    // stalled while the others finished or failed).
    uint32_t qps_unfinished = 0;
    std::vector<std::string> qp_error_causes;
    uint64_t messages = 0;
    uint64_t imm_delivered = 0;
    uint64_t packets_sent = 0;       // by both hosts, all kinds
    uint64_t data_packets_sent = 0;  // by A, first transmissions and retransmissions
    uint64_t packets_dropped_by_fabric = 0;
    uint64_t data_packets_dropped = 0;  // A -> B data packets dropped (loss, blackhole, full queue)
    uint64_t packets_trimmed = 0;
    uint64_t packets_ecn_marked = 0;
    uint64_t packets_duplicated = 0;
    uint64_t retransmissions = 0;
    // Data packets that arrived for a PSN already received (a resend that
    // was not needed, or a fabric duplicate), and those of them for a PSN
    // the fabric never held back nor duplicated: a resend no loss, trim or
    // reordering explains.
    uint64_t data_arrived_again = 0;
    uint64_t needless_resends = 0;
    uint64_t sim_time_ns = 0;
    double goodput_gbps = 0;
    std::vector<uint64_t> per_plane_tx_packets;  // data packets A sent on each plane
    uint64_t events = 0;
    // Wall time the set-up took (hosts, QPs, regions, source data): the one
    // field that is not the same from run to run.
    double setup_wall_seconds = 0;
    bool timed_out = false;
    std::string setup_error;  // a QP refused its set-up (the run did not start); empty: none
    // Every QP that errored with kRetryExceeded: how often the fabric
    // dropped a transmission of the PSN whose budget ran out, or an ack or
    // NACK it triggered (the check that the error was earned).
    std::vector<uint32_t> error_psn_drops;
    QpCounters requester;                  // A's QPs, summed
    QpCounters responder;                  // B's QPs, summed
    uint64_t max_queue_bytes = 0;          // deepest any fabric queue got
    uint64_t max_lasthop_queue_bytes = 0;  // deepest a last-hop queue got
    std::vector<PlaneReport> planes;
    EvStateCounts ev_states;  // every requester EV, at the end
    std::vector<QpReport> qps;
    std::vector<EvReport> evs;
    // With series_ns: per bucket, bytes placed at the receiver as Gb/s,
    // data packets sent on each plane (series_plane_tx[bucket][plane]) and
    // the deepest any fabric queue got.
    uint64_t series_ns = 0;
    std::vector<double> series_goodput_gbps;
    std::vector<std::vector<uint64_t>> series_plane_tx;
    std::vector<uint64_t> series_max_queue_bytes;
};

// Whether the configuration can run; the error says what is wrong with it
// (lib/sim/validate.cc).
Result<void> validate(const SimConfig &cfg);
SimResult run(const SimConfig &cfg);

}  // namespace mrc::sim
