#include "config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cstdio>
#include <set>

#include "core/ev.h"

namespace mrc::mrcd {

Result<uint32_t> parse_ip(const std::string &s) {
    if (auto ip = wire::parse_ipv4(s)) return *ip;
    return Error{"'" + s + "' is not an IPv4 address"};
}

Result<wire::MacAddr> parse_mac(const std::string &s) {
    if (auto m = wire::parse_mac(s)) return *m;
    return Error{"'" + s + "' is not a MAC address"};
}

namespace {

// Reads the keys of one table, and refuses any it does not know.
class Table {
  public:
    Table(const toml::table *t, std::string where) : t_(t), where_(std::move(where)) {}

    template <typename T>
    Result<void> whole(const char *key, T *out, uint64_t lo, uint64_t hi) {
        const toml::node *n = get(key);
        if (n == nullptr) return {};
        const auto *v = n->as_integer();
        if (v == nullptr || v->get() < int64_t(lo) || uint64_t(v->get()) > hi)
            return Error{
                fmt::format("{}: {} must be a whole number in [{}, {}]", where_, key, lo, hi)};
        *out = static_cast<T>(v->get());
        return {};
    }
    Result<void> number(const char *key, double *out, double lo, double hi) {
        const toml::node *n = get(key);
        if (n == nullptr) return {};
        double v;
        if (const auto *i = n->as_integer())
            v = double(i->get());
        else if (const auto *f = n->as_floating_point())
            v = f->get();
        else
            return Error{fmt::format("{}: {} must be a number", where_, key)};
        if (!(v >= lo && v <= hi))
            return Error{fmt::format("{}: {} must be in [{}, {}]", where_, key, lo, hi)};
        *out = v;
        return {};
    }
    Result<void> boolean(const char *key, bool *out) {
        const toml::node *n = get(key);
        if (n == nullptr) return {};
        const auto *v = n->as_boolean();
        if (v == nullptr) return Error{fmt::format("{}: {} must be true or false", where_, key)};
        *out = v->get();
        return {};
    }
    Result<void> string(const char *key, std::string *out) {
        const toml::node *n = get(key);
        if (n == nullptr) return {};
        const auto *v = n->as_string();
        if (v == nullptr) return Error{fmt::format("{}: {} must be a string", where_, key)};
        *out = v->get();
        return {};
    }
    Result<void> strings(const char *key, std::vector<std::string> *out) {
        const toml::node *n = get(key);
        if (n == nullptr) return {};
        const auto *a = n->as_array();
        if (a == nullptr)
            return Error{fmt::format("{}: {} must be an array of strings", where_, key)};
        out->clear();
        for (const auto &e : *a) {
            const auto *s = e.as_string();
            if (s == nullptr)
                return Error{fmt::format("{}: {} must be an array of strings", where_, key)};
            out->push_back(s->get());
        }
        return {};
    }
    // After every key was read: anything left is a typo.
    Result<void> done() const {
        if (t_ == nullptr) return {};
        for (const auto &kv : *t_) {
            const std::string k(kv.first.str());
            if (!seen_.count(k)) return Error{fmt::format("{}: unknown key '{}'", where_, k)};
        }
        return {};
    }
    const std::string &where() const { return where_; }

  private:
    const toml::node *get(const char *key) {
        seen_.insert(key);
        return t_ == nullptr ? nullptr : t_->get(key);
    }
    const toml::table *t_;
    std::string where_;
    std::set<std::string> seen_;
};

}  // namespace

Result<DaemonConfig> load_config(const std::string &path, const std::string &text) {
    const std::string prefix = (text.empty() ? path : std::string("config")) + ": ";
    // A table's error, with the file named.
    auto in_file = [&](const Result<void> &r) { return Error{prefix + r.error().message}; };
    toml::table root;
    try {
        root = text.empty() ? toml::parse_file(path) : toml::parse(text);
    } catch (const toml::parse_error &e) {
        return Error{fmt::format("{}line {}: {}", prefix, e.source().begin.line, e.description())};
    }
    DaemonConfig c;
    c.dp.name = "mrcd";
    c.dp.idle = dp::IdleMode::kAdaptive;
    c.dp.scorer.period_ns = 1'000'000;  // as mrc-gen: the control thread wakes every 1 ms
    // A software path on shared CPUs: the timeout before the first RTT
    // sample is 4 ms; after that it follows the RTT, never below 1 ms
    // (docs/mrcd.md, docs/loss-recovery.md).
    c.qp.retry.timeout_exp = 12;
    c.qp.retry.limit = 15;
    c.qp.cc.nscc.line_rate_gbps = 25;
    c.qp.cc.nscc.base_rtt_ns = 20'000;

    for (const auto &kv : root) {
        const std::string k(kv.first.str());
        if (k != "daemon" && k != "dataplane" && k != "plane" && k != "qp" && k != "neighbor")
            return Error{prefix + "unknown table '" + k + "'"};
    }
    {
        Table t(root["daemon"].as_table(), "[daemon]");
        if (auto r = t.string("socket", &c.socket); !r) return in_file(r);
        std::string mode;
        if (auto r = t.string("socket_mode", &mode); !r) return in_file(r);
        if (!mode.empty()) {
            char *end = nullptr;
            const unsigned long m = std::strtoul(mode.c_str(), &end, 8);
            if (*end != 0 || m > 0777)
                return Error{prefix + "[daemon]: socket_mode must be octal like \"0660\""};
            c.socket_mode = uint32_t(m);
        }
        if (auto r = t.string("socket_group", &c.socket_group); !r) return in_file(r);
        if (auto r = t.whole("max_clients", &c.max_clients, 1, 4096); !r) return in_file(r);
        if (auto r = t.whole("max_qps_per_client", &c.max_qps_per_client, 1, 65536); !r)
            return in_file(r);
        if (auto r = t.whole("max_mrs_per_client", &c.max_mrs_per_client, 1, 65536); !r)
            return in_file(r);
        uint64_t mib = c.max_region_bytes >> 20;
        if (auto r = t.whole("max_region_mib", &mib, 1, uint64_t{1} << 20); !r) return in_file(r);
        c.max_region_bytes = mib << 20;
        if (auto r = t.whole("drain_ms", &c.drain_ms, 0, 600'000); !r) return in_file(r);
        if (auto r = t.whole("connect_resend_ms", &c.connect_resend_ms, 1, 10'000); !r)
            return in_file(r);
        if (auto r = t.done(); !r) return in_file(r);
        if (c.socket.empty() || c.socket.size() >= 108)
            return Error{prefix + "[daemon]: socket must be a path shorter than 108 bytes"};
    }
    {
        Table t(root["dataplane"].as_table(), "[dataplane]");
        if (auto r = t.strings("ports", &c.dp.ports); !r) return in_file(r);
        if (auto r = t.whole("mtu", &c.dp.mtu_bytes, 576, 9000); !r) return in_file(r);
        if (auto r = t.whole("mrc_port", &c.dp.mrc_port, 1, 65535); !r) return in_file(r);
        std::string idle = dp::to_string(c.dp.idle);
        if (auto r = t.string("idle", &idle); !r) return in_file(r);
        if (!dp::parse_idle_mode(idle, &c.dp.idle))
            return Error{
                prefix +
                "[dataplane]: idle must be \"adaptive\", \"busy\", \"yield\" or \"sleep\""};
        if (auto r = t.whole("idle_sleep_us", &c.dp.idle_sleep_us, 1, 100'000); !r)
            return in_file(r);
        if (auto r = t.whole("idle_spin_us", &c.dp.idle_spin_us, 0, 1'000'000); !r)
            return in_file(r);
        if (auto r = t.whole("idle_sleep_max_us", &c.dp.idle_sleep_max_us, 1, 100'000); !r)
            return in_file(r);
        if (c.dp.idle_sleep_max_us < c.dp.idle_sleep_us)
            return Error{prefix + "[dataplane]: idle_sleep_max_us must be >= idle_sleep_us"};
        if (auto r = t.boolean("udp_checksum", &c.dp.udp_checksum); !r) return in_file(r);
        if (auto r = t.boolean("zero_copy", &c.dp.zero_copy_tx); !r) return in_file(r);
        if (c.dp.zero_copy_tx)
            return Error{prefix +
                         "[dataplane]: zero_copy is not available in mrcd (a region can be "
                         "unmapped while frames still point into it)"};
        if (auto r = t.whole("link_wait_ms", &c.dp.link_wait_ms, 0, 600'000); !r) return in_file(r);
        if (auto r = t.whole("max_qps", &c.dp.max_qps_per_worker, 1, 65535); !r) return in_file(r);
        if (auto r = t.whole("max_mrs", &c.dp.max_mrs, 1, 1u << 20); !r) return in_file(r);
        double control_us = double(c.dp.scorer.period_ns) / 1000;
        if (auto r = t.number("control_us", &control_us, 10, 1e6); !r) return in_file(r);
        c.dp.scorer.period_ns = uint64_t(control_us * 1000);
        if (auto r = t.done(); !r) return in_file(r);
    }
    if (const auto *planes = root["plane"].as_array()) {
        size_t i = 0;
        for (const auto &e : *planes) {
            const std::string where = fmt::format("[[plane]] #{}", ++i);
            if (!e.is_table()) return Error{prefix + where + ": must be a table"};
            Table t(e.as_table(), where);
            std::string ip;
            if (auto r = t.string("ip", &ip); !r) return in_file(r);
            DaemonConfig::PlaneDscp d;
            if (auto r = t.whole("dscp_data", &d.data, 0, 63); !r) return in_file(r);
            if (auto r = t.whole("dscp_control", &d.control, 0, 63); !r) return in_file(r);
            if (auto r = t.whole("dscp_cm", &d.cm, 0, 63); !r) return in_file(r);
            std::string gateway;
            if (auto r = t.string("gateway", &gateway); !r) return in_file(r);
            if (auto r = t.done(); !r) return in_file(r);
            auto route = wire::parse_ipv4_prefix(ip.data(), ip.size());
            if (!route) {
                const size_t slash = ip.find('/');
                if (slash == std::string::npos)
                    return Error{prefix + where + ": ip: " + parse_ip(ip).error().message};
                return Error{prefix + where + ": ip: \"" + ip +
                             "\" is not an IPv4 address with a prefix length 0-32 (a.b.c.d/len)"};
            }
            if (route->ip == 0 || route->ip == 0xffffffffu)
                return Error{prefix + where + ": ip: 0.0.0.0 and 255.255.255.255 are not a host's"};
            if (!gateway.empty()) {
                auto g = parse_ip(gateway);
                if (!g) return Error{prefix + where + ": gateway: " + g.error().message};
                if (route->prefix_len < 0)
                    return Error{prefix + where +
                                 ": gateway needs the prefix of ip (for example \"" + ip +
                                 "/24\"): without one every peer is on-link"};
                if (!route->on_link(*g) || *g == route->ip)
                    return Error{prefix + where + ": gateway " + gateway +
                                 " is not another host on the subnet of " + ip};
                route->gateway = *g;
            }
            c.plane_ip.push_back(route->ip);
            c.plane_route.push_back(*route);
            c.plane_dscp.push_back(d);
        }
    } else if (root.contains("plane")) {
        return Error{prefix + "plane must be an array of tables: [[plane]]"};
    }
    if (c.plane_ip.size() > kMaxPlanes)
        return Error{fmt::format("{}at most {} [[plane]] entries", prefix, kMaxPlanes)};
    c.dp.plane_ipv4 = c.plane_ip;  // AF_XDP ports take MRC packets to these addresses only
    {
        Table t(root["qp"].as_table(), "[qp]");
        std::string cc = "nscc";
        if (auto r = t.string("cc", &cc); !r) return in_file(r);
        if (cc != "nscc" && cc != "fixed")
            return Error{prefix + "[qp]: cc must be \"nscc\" or \"fixed\""};
        c.qp.cc.algo = cc == "nscc" ? CcAlgo::kNscc : CcAlgo::kFixed;
        if (auto r = t.number("line_gbps", &c.qp.cc.nscc.line_rate_gbps, 0.001, 10'000); !r)
            return in_file(r);
        if (auto r = t.whole("evs_per_plane", &c.evs_per_plane, 1, 1024); !r) return in_file(r);
        std::string ev_range = "49152-65535";
        if (auto r = t.string("ev_range", &ev_range); !r) return in_file(r);
        if (auto r = parse_ev_range(ev_range, &c.qp.ev); !r)
            return Error{prefix + "[qp]: ev_range: " + r.error().message};
        std::string rto = "adaptive";
        if (auto r = t.string("rto", &rto); !r) return in_file(r);
        if (rto != "adaptive" && rto != "fixed")
            return Error{prefix + "[qp]: rto must be \"adaptive\" or \"fixed\""};
        c.qp.retry.adaptive = rto == "adaptive";
        if (auto r = t.whole("retry_timeout_exp", &c.qp.retry.timeout_exp, 1,
                             RetryPolicy::kMaxTimeoutExp);
            !r)
            return in_file(r);
        if (auto r = t.whole("retry_limit", &c.qp.retry.limit, 1, RetryPolicy::kMaxExponential); !r)
            return in_file(r);
        uint64_t rto_min_us = c.qp.retry.min_rto_ns / 1000,
                 rto_max_ms = c.qp.retry.max_rto_ns / 1'000'000;
        if (auto r = t.whole("rto_min_us", &rto_min_us, 1, 10'000'000); !r) return in_file(r);
        if (auto r = t.whole("rto_max_ms", &rto_max_ms, 1, 600'000); !r) return in_file(r);
        if (rto_max_ms * 1000 < rto_min_us)
            return Error{prefix + "[qp]: rto_max_ms is below rto_min_us"};
        c.qp.retry.min_rto_ns = rto_min_us * 1000;
        c.qp.retry.max_rto_ns = rto_max_ms * 1'000'000;
        uint64_t keepalive_ms = c.qp.liveness.keepalive_ns / 1'000'000;
        uint64_t peer_timeout_ms = c.qp.liveness.peer_timeout_ns / 1'000'000;
        if (auto r = t.whole("keepalive_ms", &keepalive_ms, 0, 3'600'000); !r) return in_file(r);
        if (auto r = t.whole("peer_timeout_ms", &peer_timeout_ms, 0, 3'600'000); !r)
            return in_file(r);
        if (peer_timeout_ms && keepalive_ms && keepalive_ms >= peer_timeout_ms)
            return Error{prefix +
                         "[qp]: keepalive_ms must be below peer_timeout_ms (or either 0: off)"};
        if (peer_timeout_ms && !keepalive_ms)
            return Error{prefix +
                         "[qp]: peer_timeout_ms needs keepalives (keepalive_ms > 0): an idle "
                         "peer would be taken for dead"};
        c.qp.liveness.keepalive_ns = keepalive_ms * 1'000'000;
        c.qp.liveness.peer_timeout_ns = peer_timeout_ms * 1'000'000;
        if (auto r = t.whole("max_send_wr", &c.qp.max_send_wr, 1, 65536); !r) return in_file(r);
        std::string scope = c.qp.cc.per_peer ? "peer" : "qp";
        if (auto r = t.string("cc_scope", &scope); !r) return in_file(r);
        if (scope != "peer" && scope != "qp")
            return Error{prefix + "[qp]: cc_scope must be \"peer\" or \"qp\", not \"" + scope +
                         "\""};
        c.qp.cc.per_peer = scope == "peer";
        if (auto r = t.done(); !r) return in_file(r);
    }
    if (const auto *ns = root["neighbor"].as_array()) {
        size_t i = 0;
        for (const auto &e : *ns) {
            const std::string where = fmt::format("[[neighbor]] #{}", ++i);
            if (!e.is_table()) return Error{prefix + where + ": must be a table"};
            Table t(e.as_table(), where);
            std::string ip, mac;
            if (auto r = t.string("ip", &ip); !r) return in_file(r);
            if (auto r = t.string("mac", &mac); !r) return in_file(r);
            if (auto r = t.done(); !r) return in_file(r);
            auto a = parse_ip(ip);
            if (!a) return Error{prefix + where + ": ip: " + a.error().message};
            auto m = parse_mac(mac);
            if (!m) return Error{prefix + where + ": mac: " + m.error().message};
            c.neighbors.push_back({*a, *m});
        }
    }
    // Last, so that any other mistake in the file is named first.
    if (c.plane_ip.empty())
        return Error{prefix + "no [[plane]]: give one per port, each with its ip"};
    // What every QP will be given: refused here, not at each connection.
    EvConfig ev = c.qp.ev;
    const auto planes = static_cast<uint32_t>(c.plane_ip.size());
    ev.evs = c.evs_per_plane * planes;
    ev.min_active = std::min(ev.min_active, ev.evs);
    if (auto r = EvSet::check(ev, planes); !r) return Error{prefix + "[qp]: " + r.error().message};
    return c;
}

}  // namespace mrc::mrcd
