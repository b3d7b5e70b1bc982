// Counters of the dataplane's workers, declared once as data (like
// core/counters.h): the struct, the names for JSON and telemetry, and the
// documentation check in tests all come from this list. Pure C++: the core
// tests include it without DPDK.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc::dp {

// Per worker: what happened to frames between the ports and the core.
#define MRC_WORKER_COUNTERS(X)                                                                 \
    X(loops, "iterations of the worker's poll loop")                                           \
    X(rx_packets, "frames received from the ports")                                            \
    X(rx_bytes, "bytes received from the ports")                                               \
    X(rx_stray, "frames that are not IPv4/UDP to the MRC port (dropped)")                      \
    X(rx_truncated, "frames shorter than their IPv4 or UDP length fields say (dropped)")       \
    X(rx_bad_cksum, "frames with a bad IPv4 or UDP checksum (dropped)")                        \
    X(rx_multiseg, "frames spread over several mbufs (dropped; the MTU fits one mbuf)")        \
    X(rx_ce_marked, "frames marked CE because the RX ring was backed up (ecn_full_bursts)")    \
    X(timers_deferred, "timer runs put off while the RX rings held a backlog (acks first)")    \
    X(handoff_out, "frames passed to the worker that owns their QP")                           \
    X(handoff_in, "frames taken from other workers")                                           \
    X(handoff_full, "frames dropped because the owner's hand-off ring was full")               \
    X(tx_packets, "frames handed to the ports")                                                \
    X(tx_bytes, "bytes handed to the ports")                                                   \
    X(tx_full, "frames dropped because a port's TX queue stayed full (control packets only)")  \
    X(tx_backpressure,                                                                         \
      "TX rounds not started because every port's queue was full (the core is not asked)")     \
    X(tx_nombuf, "transmit attempts that found the mbuf pool empty")                           \
    X(tx_port_down, "frames dropped because their port was cut or stopped")                    \
    X(idle_sleeps, "times the worker slept after a run of empty polls (idle-friendly mode)")   \
    X(idle_yields, "times the worker yielded its CPU after a run of empty polls (yield mode)") \
    X(path_tables, "path tables applied from the control thread")                              \
    X(link_changes, "link state changes applied from the control thread")                      \
    X(rx_cm, "connection-management frames received (QPN 0) and given to the application")     \
    X(rx_cm_unclaimed, "connection-management frames dropped: no application takes them")      \
    X(tx_cm, "connection-management frames queued by the application")

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

}  // namespace mrc::dp
