#include "plane_json.h"

#include <rte_cycles.h>

namespace mrc::app {

nlohmann::json plane_json(dp::Dataplane &dp, const dp::WorkerSnapshot &s, uint8_t p) {
    const auto pc = dp.port_counters(p);
    const auto &pl = s.planes[p];
    nlohmann::json j = {
        {"plane", p},
        {"port", dp.port(p).name()},
        {"driver", dp.port(p).driver()},
        {"link", ((dp.link_up_mask() >> p) & 1) ? "up" : "down"},
        {"tx_packets", s.port_tx_pkts[p]},
        {"rx_packets", s.port_rx_pkts[p]},
        {"tx_data_pkts", pl.tx_data_pkts},
        {"tx_retx_pkts", pl.tx_retx_pkts},
        {"lost_pkts", pl.lost_pkts},
        {"ack_timeouts", pl.ack_timeouts},
        {"rtt_us_mean",
         pl.rtt_samples ? double(pl.rtt_sum_ns) / double(pl.rtt_samples) / 1000 : 0.0},
        {"device_rx_missed", pc.rx_missed}};
    if (const auto x = dp.port(p).xdp_info())
        j["xdp"] = {{"iface", x->iface},         {"mode", x->mode},
                    {"prog_id", x->prog_id},     {"steered", x->steered},
                    {"no_socket", x->no_socket}, {"other_address", x->other_address},
                    {"to_kernel", x->to_kernel}};
    return j;
}

nlohmann::json cycles_json(const dp::WorkerCounters &c) {
    const dp::CyclesPerPacket r = dp::cycles_per_packet(c);
    return {{"busy", r.busy},
            {"rx_io", r.rx_io},
            {"rx", r.rx},
            {"timers", r.timers},
            {"app", r.app},
            {"tx", r.tx},
            {"tx_io", r.tx_io},
            {"control", r.control},
            {"busy_share", r.busy_share},
            {"tsc_hz", rte_get_tsc_hz()}};
}

}  // namespace mrc::app
