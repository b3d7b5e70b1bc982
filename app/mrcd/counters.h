// What mrcd counts besides the dataplane's counters, declared once as data
// (like lib/core/counters.h): the struct, DPDK telemetry's /mrcd/status and
// mrcctl's `status` JSON all come from this list, in this order, and
// docs/counters.md ("mrcd") names each one. Pure C++: a test can include it
// without DPDK.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc::mrcd {

#define MRCD_DAEMON_COUNTERS(X)                                                                 \
    X(clients_accepted, "application connections taken")                                        \
    X(clients_refused,                                                                          \
      "application connections refused: over max_clients, stopping, or no credentials")         \
    X(clients_released, "application connections ended (closed or died)")                       \
    X(requests, "requests on the socket")                                                       \
    X(bad_requests,                                                                             \
      "requests answered with an error (malformed, wrong version, out of range), mrcctl's too") \
    X(connects_sent, "CONNECTs sent, resends included (each on every plane that is up)")        \
    X(connects_received, "CONNECT frames received (every plane, resends included)")             \
    X(accepts, "connections set up (either side)")                                              \
    X(rejects_sent, "CONNECTs refused (REJECT frames sent)")                                    \
    X(disconnects_sent, "DISCONNECTs sent (one per QP taken down or stray ACCEPT, all copies)") \
    X(disconnects_received, "DISCONNECT frames received")                                       \
    X(cm_bad, "CM frames that did not parse, or matched nothing")                               \
    X(cm_duplicates, "copies of CM frames already acted on (each plane brings one)")            \
    X(cm_backlog_full, "CONNECTs left unanswered while the listener's accept backlog was full") \
    X(cm_dropped, "CM frames lost because the server thread was behind (or oversized)")         \
    X(cm_unresolved, "CONNECT copies not sent: the plane's gateway did not answer ARP")         \
    X(paths_unresolved,                                                                         \
      "QP planes set up without a next hop (no route, or the gateway had not answered ARP)")    \
    X(paths_moved,                                                                              \
      "QP planes pointed at a next hop's new MAC (it changed, or answered after set-up)")

#define MRCD_COUNTER_FIELD(name, doc) uint64_t name = 0;
#define MRCD_COUNTER_COUNT(name, doc) +1

struct DaemonCounters {
    MRCD_DAEMON_COUNTERS(MRCD_COUNTER_FIELD)
    static constexpr size_t kCount = 0 MRCD_DAEMON_COUNTERS(MRCD_COUNTER_COUNT);
};
static_assert(sizeof(DaemonCounters) == DaemonCounters::kCount * sizeof(uint64_t));

struct DaemonCounterInfo {
    const char *name;
    const char *doc;
};
#define MRCD_COUNTER_INFO(name, doc) {#name, doc},
inline constexpr DaemonCounterInfo kDaemonCounterInfo[] = {MRCD_DAEMON_COUNTERS(MRCD_COUNTER_INFO)};
#undef MRCD_COUNTER_INFO
static_assert(sizeof kDaemonCounterInfo / sizeof kDaemonCounterInfo[0] == DaemonCounters::kCount);

// The counters as an array, in declaration order (kDaemonCounterInfo's).
inline const uint64_t *counter_array(const DaemonCounters &c) {
    return &c.clients_accepted;
}

}  // namespace mrc::mrcd
