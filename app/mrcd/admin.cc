// The mrcctl protocol: a JSON object with a "cmd" string in, a JSON object
// out (docs/mrcd.md, "mrcctl"). One function per command; every answer
// that is refused is {"error": "..."} and counts as a bad request. The keys
// are an interface: mrcctl and the tests read them.
#include <unistd.h>

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "client/ipc.h"
#include "daemon.h"
#include "mrc/mrc.h"
#include "plane_json.h"
#include "records.h"
#include "support.h"

namespace mrc::mrcd {

using nlohmann::json;

namespace {

std::string dump(const json &j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Counts by EV state name.
template <typename T>
json ev_state_counts(const T *counts) {
    json e;
    for (uint32_t k = 0; k < kEvStates; ++k)
        e[to_string(EvState(k))] = counts[k];
    return e;
}

}  // namespace

void Daemon::do_admin(Client &c, uint32_t seq, const uint8_t *b, size_t n) {
    const std::string req(reinterpret_cast<const char *>(b), n);
    std::string out = admin(req, c);
    if (out.size() > ipc::kMaxMessageBytes - sizeof(ipc::RepHdr))
        out = json{{"error", fmt::format("the answer ({} bytes) is larger than one message; read "
                                         "/mrc/qps over DPDK telemetry instead",
                                         out.size())}}
                  .dump();
    reply(c, uint16_t(ipc::Op::kAdmin), seq, MRC_OK, "", out.data(), out.size());
}

std::string Daemon::admin(const std::string &text, const Client &c) {
    const json req = json::parse(text, nullptr, false);
    if (req.is_discarded() || !req.is_object() || !req.contains("cmd") || !req["cmd"].is_string())
        return admin_error("expected a JSON object with a \"cmd\" string");
    const std::string cmd = req["cmd"];
    if (cmd == "status") return admin_status();
    if (cmd == "ports") return admin_ports();
    if (cmd == "neighbors") return admin_neighbors();
    if (cmd == "qps" || cmd == "evs") {
        uint64_t from = 0;
        if (req.contains("from")) {
            if (!req["from"].is_number_unsigned())
                return admin_error("\"from\" must be a QP position");
            from = req["from"].get<uint64_t>();
        }
        return admin_qps(cmd == "qps", from);
    }
    if (cmd == "deny" || cmd == "allow") return admin_deny(req, cmd, c);
    return admin_error("unknown command '" + cmd +
                       "' (status, ports, neighbors, qps, evs, deny, allow)");
}

std::string Daemon::admin_error(const std::string &message) {
    json e;
    e["error"] = message;
    ++ctr_.bad_requests;
    return dump(e);
}

std::string Daemon::admin_status() {
    const uint64_t now_ns = mono_ns();
    const dp::WorkerSnapshot s = dp_->totals();
    const dp::QpSummary q = dp_->qp_totals();
    json out;
    out["daemon"] = {{"pid", ::getpid()},         {"uptime_s", double(now_ns - started_ns_) / 1e9},
                     {"socket", socket_path_},    {"planes", dp_->planes()},
                     {"workers", dp_->workers()}, {"clients", clients_.size()},
                     {"qps", qps_.size()},        {"listeners", listeners_.size()},
                     {"draining", draining_}};
    std::vector<uint32_t> worker_qps(dp_->workers(), 0);
    for (const auto &rec : qps_)
        ++worker_qps[rec.second->worker];
    out["daemon"]["worker_qps"] = worker_qps;
    json counters = json::object();
    const uint64_t *values = counter_array(ctr_);
    for (size_t i = 0; i < DaemonCounters::kCount; ++i)
        counters[kDaemonCounterInfo[i].name] = values[i];
    out["counters"] = counters;
    // The workers' own counters, summed (drops, back-pressure, mbufs).
    json worker = json::object();
    const uint64_t *wv = dp::counter_array(s.worker);
    for (size_t i = 0; i < dp::WorkerCounters::kCount; ++i)
        worker[dp::kWorkerCounterInfo[i].name] = wv[i];
    out["worker"] = worker;
    out["cycles_per_packet"] = app::cycles_json(s.worker);
    out["traffic"] = {{"tx_packets", s.worker.tx_packets}, {"rx_packets", s.worker.rx_packets},
                      {"tx_bytes", s.worker.tx_bytes},     {"rx_bytes", s.worker.rx_bytes},
                      {"qps_in_error", q.qps_error},       {"retransmissions", q.sum.tx_retx_pkts}};
    json cl = json::array();
    for (const auto &[id, x] : clients_)
        cl.push_back({{"id", id},
                      {"name", x->name},
                      {"pid", x->pid},
                      {"uid", x->uid},
                      {"qps", x->qps.size()},
                      {"cqs", x->cqs.size()},
                      {"regions", x->mrs.size()},
                      {"requests", x->requests}});
    out["clients"] = cl;
    return dump(out);
}

// Each plane's route and neighbour table (mrcctl neighbors).
std::string Daemon::admin_neighbors() {
    const uint64_t now = mono_ns();
    json planes = json::array();
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        const wire::Route &route = cfg_.plane_route[p];
        json j;
        j["plane"] = p;
        j["ip"] = wire::ipv4_string(route.ip);
        j["prefix_len"] = route.prefix_len < 0 ? json(nullptr) : json(route.prefix_len);
        j["gateway"] = route.gateway ? json(wire::ipv4_string(route.gateway)) : json(nullptr);
        const bool kernel = p < kernel_ifindex_.size() && kernel_ifindex_[p];
        j["resolution"] = resolves(p) ? "arp" : kernel ? "kernel (af_xdp)" : "static (af_xdp)";
        if (kernel) {
            // The kernel's routes to the peers this plane has used, and
            // what its neighbour table has for each next hop.
            json routes = json::array();
            for (const auto &[key, hop] : kernel_hops_) {
                if (key.first != p) continue;
                json x;
                x["dst"] = wire::ipv4_string(key.second);
                x["next_hop"] =
                    hop.next_hop ? json(wire::ipv4_string(hop.next_hop)) : json(nullptr);
                x["from"] = hop.kernel ? "kernel route" : "config (" + hop.why + ")";
                const auto n = hop.next_hop ? nl_->neighbor(kernel_ifindex_[p], hop.next_hop)
                                            : Result<kernel::Neighbor>(Error{"none"});
                x["mac"] = n && n->mac ? json(wire::mac_string(*n->mac)) : json(nullptr);
                x["state"] = n ? kernel::neighbor_state_name(n->state) : n.error().message;
                routes.push_back(std::move(x));
            }
            j["kernel_routes"] = std::move(routes);
        }
        json entries = json::array();
        std::vector<std::pair<uint32_t, const wire::NeighborTable::Entry *>> sorted;
        for (const auto &[ip, e] : neigh_[p].entries())
            sorted.emplace_back(ip, &e);
        std::sort(sorted.begin(), sorted.end());
        for (const auto &[ip, e] : sorted) {
            json x;
            x["ip"] = wire::ipv4_string(ip);
            const bool has_mac =
                e->state != wire::NeighState::kIncomplete && e->state != wire::NeighState::kFailed;
            x["mac"] = has_mac ? json(wire::mac_string(e->mac)) : json(nullptr);
            x["state"] = wire::neigh_state_name(e->state);
            x["confirmed_ms_ago"] =
                e->confirmed_ns ? json(double(now - e->confirmed_ns) / 1e6) : json(nullptr);
            x["probes"] = e->probes;
            x["held"] = e->held.size();
            entries.push_back(std::move(x));
        }
        j["entries"] = std::move(entries);
        const wire::NeighborCounters &c = neigh_[p].counters();
        j["counters"] = {{"requests", c.requests},
                         {"resolved", c.resolved},
                         {"failed", c.failed},
                         {"unsolicited", c.unsolicited},
                         {"held", c.held},
                         {"hold_dropped", c.hold_dropped},
                         {"table_full", c.table_full},
                         {"expired", c.expired}};
        planes.push_back(std::move(j));
    }
    json out;
    out["planes"] = std::move(planes);
    return dump(out);
}

std::string Daemon::admin_ports() {
    dp::ControlSnapshot cs;
    const bool have = dp_->control_snapshot(&cs);
    const dp::WorkerSnapshot s = dp_->totals();
    json ports = json::array();
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        const bool link_up = (dp_->link_up_mask() >> p) & 1;
        const bool denied = (dp_->denied_planes() >> p) & 1;
        std::string health = "up";
        if (!link_up)
            health = "link down";
        else if (denied)
            health = "denied";
        else if (have && ((cs.down_mask >> p) & 1))
            health = "failed (scorer)";
        json j = app::plane_json(*dp_, s, p);
        j["ip"] = wire::ipv4_string(cfg_.plane_ip[p]);
        const wire::Route &route = cfg_.plane_route[p];
        j["prefix_len"] = route.prefix_len < 0 ? json(nullptr) : json(route.prefix_len);
        j["gateway"] = route.gateway ? json(wire::ipv4_string(route.gateway)) : json(nullptr);
        const DaemonConfig::PlaneDscp &d = cfg_.plane_dscp[p];
        j["dscp"] = {{"data", d.data}, {"control", d.control}, {"cm", d.cm}};
        j["health"] = health;
        j["denied"] = denied;
        j["evs_total"] = s.gauges.total[p];
        j["evs_assumed_bad"] = s.gauges.assumed_bad[p];
        j["evs_denied"] = s.gauges.denied[p];
        ports.push_back(std::move(j));
    }
    json out;
    out["ports"] = ports;
    return dump(out);
}

// "qps" (per_qp): the live QPs of every worker, a page at a time: from
// position `from` (worker x max_qps_per_worker + slot) on, as many as fit
// one answer, and "next" where the following page starts (none: the last
// page). "evs": EV states summed over every QP, and the EV denials in force.
std::string Daemon::admin_qps(bool per_qp, uint64_t from) {
    // What one page may hold: an answer must fit one IPC message.
    constexpr size_t kPageBytes = ipc::kMaxMessageBytes / 2;
    json qs = json::array();
    size_t page_bytes = 0;
    uint64_t ev_totals[kEvStates] = {};
    const uint64_t per_worker = dp_->config().max_qps_per_worker;
    std::optional<uint64_t> next;
    for (uint32_t w = 0; w < dp_->workers() && !next; ++w) {
        for (uint32_t i = 1; i <= per_worker; ++i) {
            const uint64_t pos = w * per_worker + (i - 1);
            if (per_qp && pos < from) continue;
            if (per_qp && page_bytes >= kPageBytes) {
                next = pos;
                break;
            }
            dp::QpSnapshot s;
            if (!dp_->worker(w).qp_snapshot(i, &s) || !s.live) continue;
            for (uint32_t k = 0; k < kEvStates; ++k)
                ev_totals[k] += s.ev_states[k];
            if (!per_qp) continue;
            json j = {{"qpn", s.wire_qpn},
                      {"worker", w},
                      {"state", to_string(QpState(s.state))},
                      {"usable_planes", s.usable_planes},
                      {"window_bytes", s.window_bytes},
                      {"inflight_bytes", s.inflight_bytes},
                      {"evs", ev_state_counts(s.ev_states)},
                      {"tx_data_pkts", s.c.tx_data_pkts},
                      {"tx_retx_pkts", s.c.tx_retx_pkts},
                      {"losses_detected", s.c.losses_detected},
                      {"tail_probes", s.c.tail_probes},
                      {"ack_timeouts", s.c.ack_timeouts},
                      {"retx_spurious", s.c.retx_spurious},
                      {"rx_data_bytes", s.c.rx_data_bytes},
                      {"wrs_completed", s.c.wr_completed}};
            if (QpState(s.state) == QpState::kError)
                j["error"] = to_string(WcStatus(s.error_cause));
            if (auto rec = qps_.find(s.wire_qpn); rec != qps_.end()) {
                const QpRec &r = *rec->second;
                j["client"] = r.client;
                j["service"] = r.service;
                j["connected"] = r.connected;
                if (r.peer_planes) {
                    // The payload per packet: the smaller end's (wire-format.md, CM).
                    const uint32_t own = dp_->max_payload_bytes();
                    j["mtu_payload_bytes"] =
                        r.peer_mtu_payload ? std::min<uint32_t>(own, r.peer_mtu_payload) : own;
                    j["peer_mtu_payload_bytes"] = r.peer_mtu_payload;
                    j["peer"] = wire::ipv4_string(r.peer_ip[0]);
                    j["peer_qpn"] = r.peer_qpn;
                }
            }
            page_bytes += dump(j).size() + 1;
            qs.push_back(j);
        }
    }
    json out;
    if (per_qp) {
        out["qps"] = qs;
        if (next) out["next"] = *next;
    } else {
        out["ev_states"] = ev_state_counts(ev_totals);
        json d = json::array();
        for (const EvDenial &x : dp_->denied_evs())
            d.push_back({{"qpn", x.qpn}, {"ev", x.ev}});
        out["denied_evs"] = d;
    }
    return dump(out);
}

// "deny" / "allow" a plane, or one EV of one QP (root or mrcd's own user).
std::string Daemon::admin_deny(const json &req, const std::string &cmd, const Client &c) {
    if (c.uid != 0 && c.uid != ::geteuid())
        return admin_error("deny/allow: only root or mrcd's own user may change paths");
    const bool deny = cmd == "deny";
    json out;
    if (req.contains("plane")) {
        if (!req["plane"].is_number_unsigned() || req["plane"].get<uint64_t>() >= dp_->planes())
            return admin_error(fmt::format("plane must be 0 .. {}", dp_->planes() - 1));
        dp_->deny_plane(uint8_t(req["plane"].get<uint64_t>()), deny);
        log(RTE_LOG_NOTICE, "operator: {} plane {}", cmd, req["plane"].get<uint64_t>());
        out["ok"] = true;
        return dump(out);
    }
    if (req.contains("qpn") && req.contains("ev")) {
        if (!req["qpn"].is_number_unsigned() || !req["ev"].is_number_unsigned() ||
            req["ev"].get<uint64_t>() > 65535)
            return admin_error("qpn and ev must be whole numbers (ev 0 .. 65535)");
        const auto qpn = uint32_t(req["qpn"].get<uint64_t>());
        if (!qps_.count(qpn)) return admin_error(fmt::format("no QP {}", qpn));
        dp_->deny_ev(qpn, uint16_t(req["ev"].get<uint64_t>()), deny);
        log(RTE_LOG_NOTICE, "operator: {} EV {} of QP {}", cmd, req["ev"].get<uint64_t>(), qpn);
        out["ok"] = true;
        return dump(out);
    }
    return admin_error("deny/allow need \"plane\", or \"qpn\" and \"ev\"");
}

}  // namespace mrc::mrcd
