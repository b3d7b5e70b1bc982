// DPDK telemetry commands: the stock client (dpdk-telemetry.py) reads the
// dataplane's live counters from /var/run/dpdk/<prefix>/dpdk_telemetry.v2.
// Callbacks run on EAL's telemetry thread and read snapshots only.
#include <rte_cycles.h>
#include <rte_telemetry.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "dpdk/dataplane.h"

namespace mrc::dp {

namespace {

std::atomic<Dataplane *> g_dp{nullptr};

int no_dataplane(rte_tel_data *d) {
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_string(d, "error", "no dataplane running");
    return 0;
}

int cmd_stats(const char *, const char *, rte_tel_data *d) {
    Dataplane *dp = g_dp.load(std::memory_order_acquire);
    if (dp == nullptr) return no_dataplane(d);
    const WorkerSnapshot t = dp->totals();
    const QpSummary q = dp->qp_totals();
    rte_tel_data_start_dict(d);
    const uint64_t *w = counter_array(t.worker);
    for (size_t i = 0; i < WorkerCounters::kCount; ++i)
        rte_tel_data_add_dict_u64(d, kWorkerCounterInfo[i].name, w[i]);
    const uint64_t *e = counter_array(t.endpoint);
    for (size_t i = 0; i < kEndpointCounterCount; ++i) {
        char name[RTE_TEL_MAX_STRING_LEN];
        std::snprintf(name, sizeof name, "ep_%s", kEndpointCounterInfo[i].name);
        rte_tel_data_add_dict_u64(d, name, e[i]);
    }
    rte_tel_data_add_dict_u64(d, "qps", q.qps);
    rte_tel_data_add_dict_u64(d, "qps_error", q.qps_error);
    const uint64_t *c = counter_array(q.sum);
    for (size_t i = 0; i < kQpCounterCount; ++i) {
        char name[RTE_TEL_MAX_STRING_LEN];
        std::snprintf(name, sizeof name, "qp_%s", kQpCounterInfo[i].name);
        rte_tel_data_add_dict_u64(d, name, c[i]);
    }
    return 0;
}

int cmd_planes(const char *, const char *, rte_tel_data *d) {
    Dataplane *dp = g_dp.load(std::memory_order_acquire);
    if (dp == nullptr) return no_dataplane(d);
    const WorkerSnapshot t = dp->totals();
    ControlSnapshot cs;
    const bool have_cs = dp->control_snapshot(&cs);
    rte_tel_data_start_dict(d);
    for (uint8_t p = 0; p < dp->planes(); ++p) {
        rte_tel_data *pd = rte_tel_data_alloc();
        if (pd == nullptr) return -ENOMEM;
        rte_tel_data_start_dict(pd);
        rte_tel_data_add_dict_string(pd, "port", dp->port(p).name().c_str());
        rte_tel_data_add_dict_string(pd, "driver", dp->port(p).driver());
        rte_tel_data_add_dict_string(pd, "link", (dp->link_up_mask() >> p) & 1 ? "up" : "down");
        rte_tel_data_add_dict_int(pd, "cut", (dp->cut_mask() >> p) & 1);
        if (const auto x = dp->port(p).xdp_info()) {
            rte_tel_data_add_dict_string(pd, "xdp_mode", x->mode.c_str());
            rte_tel_data_add_dict_u64(pd, "xdp_steered", x->steered);
            rte_tel_data_add_dict_u64(pd, "xdp_to_kernel", x->to_kernel);
            rte_tel_data_add_dict_u64(pd, "xdp_no_socket", x->no_socket);
            rte_tel_data_add_dict_u64(pd, "xdp_other_address", x->other_address);
        }
        if (have_cs) {
            const PlaneScore &s = cs.score[p];
            rte_tel_data_add_dict_string(pd, "state", to_string(s.state));
            rte_tel_data_add_dict_u64(pd, "rtt_ns", static_cast<uint64_t>(s.rtt_ns));
            rte_tel_data_add_dict_u64(pd, "ecn_permille",
                                      static_cast<uint64_t>(s.ecn_fraction * 1000));
            rte_tel_data_add_dict_u64(pd, "tx_share_permille",
                                      static_cast<uint64_t>(s.tx_share * 1000));
            rte_tel_data_add_dict_u64(pd, "down_events", s.down_events);
        }
        rte_tel_data_add_dict_int(pd, "evs_total", t.gauges.total[p]);
        rte_tel_data_add_dict_int(pd, "evs_assumed_bad", t.gauges.assumed_bad[p]);
        rte_tel_data_add_dict_int(pd, "evs_denied", t.gauges.denied[p]);
        rte_tel_data_add_dict_u64(pd, "port_tx_pkts", t.port_tx_pkts[p]);
        rte_tel_data_add_dict_u64(pd, "port_rx_pkts", t.port_rx_pkts[p]);
        const uint64_t *c = counter_array(t.planes[p]);
        for (size_t i = 0; i < kPlaneCounterCount; ++i)
            rte_tel_data_add_dict_u64(pd, kPlaneCounterInfo[i].name, c[i]);
        char key[16];
        std::snprintf(key, sizeof key, "%u", unsigned(p));
        rte_tel_data_add_dict_container(d, key, pd, 0);
    }
    return 0;
}

// /mrc/qps: the live QPNs. /mrc/qp,<qpn>: one QP's state and counters.
int cmd_qps(const char *, const char *, rte_tel_data *d) {
    Dataplane *dp = g_dp.load(std::memory_order_acquire);
    if (dp == nullptr) return no_dataplane(d);
    rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
    uint32_t listed = 0;
    for (uint32_t w = 0; w < dp->workers(); ++w)
        for (uint32_t i = 1; i <= dp->config().max_qps_per_worker; ++i) {
            QpSnapshot s;
            if (!dp->worker(w).qp_snapshot(i, &s) || !s.live) continue;
            if (++listed > RTE_TEL_MAX_ARRAY_ENTRIES) return 0;
            rte_tel_data_add_array_u64(d, s.wire_qpn);
        }
    return 0;
}

int cmd_qp(const char *, const char *params, rte_tel_data *d) {
    Dataplane *dp = g_dp.load(std::memory_order_acquire);
    if (dp == nullptr) return no_dataplane(d);
    if (params == nullptr || *params == '\0') return -EINVAL;
    char *end = nullptr;
    const unsigned long qpn = std::strtoul(params, &end, 0);
    if (end == params || *end != '\0') return -EINVAL;
    const uint32_t w = Dataplane::owner_of(uint32_t(qpn));
    const uint32_t local = uint32_t(qpn) & ((1u << Dataplane::kQpnWorkerShift) - 1);
    QpSnapshot s;
    if (w >= dp->workers() || local == 0 || local > dp->config().max_qps_per_worker ||
        !dp->worker(w).qp_snapshot(local, &s) || !s.live) {
        rte_tel_data_start_dict(d);
        rte_tel_data_add_dict_string(d, "error", "no such QP");
        return 0;
    }
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "qpn", s.wire_qpn);
    rte_tel_data_add_dict_string(d, "state", to_string(static_cast<QpState>(s.state)));
    rte_tel_data_add_dict_string(d, "error_cause", to_string(static_cast<WcStatus>(s.error_cause)));
    rte_tel_data_add_dict_u64(d, "usable_planes", s.usable_planes);
    rte_tel_data_add_dict_u64(d, "window_bytes", s.window_bytes);
    rte_tel_data_add_dict_u64(d, "inflight_bytes", s.inflight_bytes);
    for (uint32_t i = 0; i < kEvStates; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "evs_%s", to_string(static_cast<EvState>(i)));
        rte_tel_data_add_dict_u64(d, name, s.ev_states[i]);
    }
    const uint64_t *c = counter_array(s.c);
    for (size_t i = 0; i < kQpCounterCount; ++i)
        rte_tel_data_add_dict_u64(d, kQpCounterInfo[i].name, c[i]);
    return 0;
}

int cmd_workers(const char *, const char *, rte_tel_data *d) {
    Dataplane *dp = g_dp.load(std::memory_order_acquire);
    if (dp == nullptr) return no_dataplane(d);
    rte_tel_data_start_dict(d);
    for (uint32_t w = 0; w < dp->workers(); ++w) {
        WorkerSnapshot s;
        if (!dp->worker(w).snapshot(&s)) continue;
        rte_tel_data *wd = rte_tel_data_alloc();
        if (wd == nullptr) return -ENOMEM;
        rte_tel_data_start_dict(wd);
        rte_tel_data_add_dict_u64(wd, "lcore", dp->worker(w).lcore());
        const uint64_t *c = counter_array(s.worker);
        for (size_t i = 0; i < WorkerCounters::kCount; ++i)
            rte_tel_data_add_dict_u64(wd, kWorkerCounterInfo[i].name, c[i]);
        // Rounded (telemetry in 22.11 has no floating-point values).
        const CyclesPerPacket cpp = cycles_per_packet(s.worker);
        rte_tel_data_add_dict_u64(wd, "cycles_per_packet", uint64_t(cpp.busy + 0.5));
        rte_tel_data_add_dict_u64(wd, "busy_percent", uint64_t(100 * cpp.busy_share + 0.5));
        rte_tel_data_add_dict_u64(wd, "tsc_hz", rte_get_tsc_hz());
        char key[16];
        std::snprintf(key, sizeof key, "%u", w);
        rte_tel_data_add_dict_container(d, key, wd, 0);
    }
    return 0;
}

}  // namespace

void telemetry_attach(Dataplane *dp) {
    static bool registered = false;
    g_dp.store(dp, std::memory_order_release);
    if (registered || dp == nullptr) return;
    registered = true;
    rte_telemetry_register_cmd("/mrc/stats", cmd_stats,
                               "MRC dataplane totals: worker, endpoint and QP counters");
    rte_telemetry_register_cmd("/mrc/planes", cmd_planes,
                               "MRC planes: port, link, score, EV states, counters");
    rte_telemetry_register_cmd("/mrc/qps", cmd_qps, "MRC QPNs in use");
    rte_telemetry_register_cmd("/mrc/qp", cmd_qp, "One MRC QP's state and counters. Param: QPN");
    rte_telemetry_register_cmd("/mrc/workers", cmd_workers, "MRC worker lcores and counters");
}

}  // namespace mrc::dp
