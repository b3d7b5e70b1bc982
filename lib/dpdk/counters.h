// Counters of the dataplane's workers, declared once as data (like
// core/counters.h): the struct, the names for JSON and telemetry, and the
// documentation check in tests all come from this list. Pure C++: the core
// tests include it without DPDK.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc::dp {

// Per worker: what happened to frames between the ports and the core.
#define MRC_WORKER_COUNTERS(X)                                                                    \
    X(loops, "iterations of the worker's poll loop")                                              \
    X(rx_packets, "frames received from the ports")                                               \
    X(rx_bytes, "bytes received from the ports")                                                  \
    X(rx_stray, "frames neither MRC nor ARP / ND / ICMP echo for the plane's address (dropped)")  \
    X(rx_arp, "ARP frames received (a request for the plane's address is answered)")              \
    X(tx_arp, "ARP frames sent: replies for the plane's address, announcements at start")         \
    X(rx_nd, "IPv6 neighbour solicitations and adverts received (valid ones)")                    \
    X(tx_nd, "IPv6 neighbour adverts sent: answers for the plane's address, announcements")       \
    X(tx_echo_replies, "ICMP and ICMPv6 echo replies sent (a ping of the plane's address)")       \
    X(rx_host_malformed, "ARP, ICMP or ICMPv6 frames for this host that do not parse (dropped)")  \
    X(rx_truncated, "frames shorter than their IP or UDP length fields say (dropped)")            \
    X(rx_bad_cksum,                                                                               \
      "frames with a bad IPv4 or UDP checksum, or UDP checksum 0 over IPv6 (dropped)")            \
    X(rx_multiseg, "frames spread over several mbufs (dropped; the MTU fits one mbuf)")           \
    X(rx_ce_marked, "frames marked CE because the RX ring was backed up (ecn_full_bursts)")       \
    X(rx_ipv6, "MRC frames over IPv6 that passed the length and checksum checks")                 \
    X(timers_deferred, "timer runs put off while the RX rings held a backlog (acks first)")       \
    X(handoff_out, "frames passed to the worker that owns their QP")                              \
    X(handoff_in, "frames taken from other workers")                                              \
    X(handoff_full, "frames dropped because the owner's hand-off ring was full")                  \
    X(tx_packets, "frames handed to the ports")                                                   \
    X(tx_bytes, "bytes handed to the ports")                                                      \
    X(tx_full, "frames dropped because a port's TX queue stayed full (control packets only)")     \
    X(tx_backpressure,                                                                            \
      "TX rounds not started because every port's queue was full (the core is not asked)")        \
    X(tx_nombuf, "transmit attempts that found the mbuf pool empty")                              \
    X(tx_oversize,                                                                                \
      "frames longer than the port's MTU allows (dropped, not left to block a queue)")            \
    X(tx_port_down, "frames dropped because their port was cut or stopped")                       \
    X(idle_sleeps, "times the worker slept after a run of empty polls (idle-friendly mode)")      \
    X(idle_yields, "times the worker yielded its CPU after a run of empty polls (yield mode)")    \
    X(wakes_event, "adaptive sleeps ended by a wake (an application's post, a command, control)") \
    X(wakes_rx, "adaptive sleeps ended by an RX interrupt")                                       \
    X(wakes_timeout, "adaptive sleeps that ran to their end (a timer due, or the poll quantum)")  \
    X(path_tables, "path tables applied from the control thread")                                 \
    X(link_changes, "link state changes applied from the control thread")                         \
    X(rx_cm, "connection-management frames received (QPN 0) and given to the application")        \
    X(rx_cm_unclaimed, "connection-management frames dropped: no application takes them")         \
    X(tx_cm, "connection-management frames queued by the application")                            \
    X(busy_loops, "loop iterations that did work (frames in or out, the application's)")          \
    X(cycles_busy, "TSC cycles of the loop iterations that did work")                             \
    X(cycles_idle, "TSC cycles of the loop iterations that found nothing to do")                  \
    X(cycles_asleep, "TSC cycles spent asleep or yielded after empty polls (idle modes)")         \
    X(cycles_rx_io, "TSC cycles in the ports' RX bursts (the PMD)")                               \
    X(cycles_rx, "TSC cycles handling received frames: parse, checksum, core, placement")         \
    X(cycles_timers, "TSC cycles in the core's timers")                                           \
    X(cycles_app, "TSC cycles in the application's share of the loop")                            \
    X(cycles_tx, "TSC cycles building frames to send: core, headers, payload, checksum")          \
    X(cycles_tx_io, "TSC cycles in the ports' TX bursts (the PMD)")                               \
    X(cycles_control, "TSC cycles applying control inputs and publishing snapshots")

#define MRC_DP_COUNTER_FIELD(name, doc) uint64_t name = 0;
#define MRC_DP_COUNTER_COUNT(name, doc) +1

struct WorkerCounters {
    MRC_WORKER_COUNTERS(MRC_DP_COUNTER_FIELD)
    WorkerCounters &operator+=(const WorkerCounters &o) {
        auto *a = &loops;
        const auto *b = &o.loops;
        for (size_t i = 0; i < kCount; ++i)
            a[i] += b[i];
        return *this;
    }
    static constexpr size_t kCount = 0 MRC_WORKER_COUNTERS(MRC_DP_COUNTER_COUNT);
};
static_assert(sizeof(WorkerCounters) == WorkerCounters::kCount * sizeof(uint64_t));

struct WorkerCounterInfo {
    const char *name;
    const char *doc;
};
#define MRC_DP_COUNTER_INFO(name, doc) {#name, doc},
inline constexpr WorkerCounterInfo kWorkerCounterInfo[] = {
    MRC_WORKER_COUNTERS(MRC_DP_COUNTER_INFO)};
#undef MRC_DP_COUNTER_INFO

inline const uint64_t *counter_array(const WorkerCounters &c) {
    return &c.loops;
}

// Where a worker's cycles went, per packet, from its counters (or the
// difference of two readings), as VPP's "show runtime" gives clocks per
// vector element. Every figure is over all frames, received and sent, so the
// stages add up to `busy` (less the few cycles between TSC readings).
struct CyclesPerPacket {
    double busy = 0;  // cycles_busy / (rx_packets + tx_packets)
    double rx_io = 0;
    double rx = 0;
    double timers = 0;
    double app = 0;
    double tx = 0;
    double tx_io = 0;
    double control = 0;
    double busy_share = 0;  // busy cycles / all cycles the worker spent (0..1)
};

inline CyclesPerPacket cycles_per_packet(const WorkerCounters &c) {
    CyclesPerPacket r;
    const auto per = [](uint64_t cycles, uint64_t pkts) {
        return pkts ? double(cycles) / double(pkts) : 0.0;
    };
    const uint64_t all = c.rx_packets + c.tx_packets;
    r.busy = per(c.cycles_busy, all);
    r.rx_io = per(c.cycles_rx_io, all);
    r.rx = per(c.cycles_rx, all);
    r.timers = per(c.cycles_timers, all);
    r.app = per(c.cycles_app, all);
    r.tx = per(c.cycles_tx, all);
    r.tx_io = per(c.cycles_tx_io, all);
    r.control = per(c.cycles_control, all);
    const uint64_t spent = c.cycles_busy + c.cycles_idle + c.cycles_asleep;
    r.busy_share = spent ? double(c.cycles_busy) / double(spent) : 0.0;
    return r;
}

}  // namespace mrc::dp
