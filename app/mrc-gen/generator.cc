#include "generator.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>
#include <string_view>

#include "common/sleep.h"
#include "kernel/netlink.h"
#include "pattern.h"
#include "port/eal.h"
#include "wire/neighbor.h"

namespace mrc::gen {

using nlohmann::json;

json side_json(const Side &s) {
    return {{"qpns", s.qpns}, {"psns", s.psns}, {"addrs", s.addrs}, {"rkeys", s.rkeys},
            {"ips", s.ips},   {"ip6", s.ip6},   {"macs", s.macs},   {"mtu_payload", s.mtu_payload}};
}
std::optional<Side> side_from(const json &j, uint32_t qps, uint8_t planes, std::string *why) {
    Side s;
    try {
        s.qpns = j.at("qpns").get<std::vector<uint32_t>>();
        s.psns = j.at("psns").get<std::vector<uint32_t>>();
        s.addrs = j.at("addrs").get<std::vector<uint64_t>>();
        s.rkeys = j.at("rkeys").get<std::vector<uint32_t>>();
        s.ips = j.at("ips").get<std::vector<uint32_t>>();
        s.macs = j.at("macs").get<std::vector<std::string>>();
        s.ip6 = j.value("ip6", std::vector<std::string>{});
        s.mtu_payload = j.value("mtu_payload", 0u);
    } catch (const std::exception &e) {
        *why = std::string("malformed peer description: ") + e.what();
        return std::nullopt;
    }
    if (s.qpns.size() != qps || s.psns.size() != qps || s.addrs.size() != qps ||
        s.rkeys.size() != qps) {
        *why = fmt::format("the peer describes {} QPs, this end has {}", s.qpns.size(), qps);
        return std::nullopt;
    }
    if (s.ips.size() != planes || s.macs.size() != planes) {
        *why = fmt::format("the peer has {} planes, this end has {}", s.ips.size(), planes);
        return std::nullopt;
    }
    if (s.ip6.empty()) s.ip6.resize(planes);
    if (s.ip6.size() != planes) {
        *why = fmt::format("the peer has {} IPv6 entries for {} planes", s.ip6.size(), planes);
        return std::nullopt;
    }
    for (const auto &a : s.ip6)
        if (!a.empty() && !wire::parse_ipv6(a)) {
            *why = "the peer sent a bad IPv6 address";
            return std::nullopt;
        }
    for (const auto &m : s.macs)
        if (!wire::parse_mac(m)) {
            *why = "the peer sent a bad MAC address";
            return std::nullopt;
        }
    return s;
}

void Generator::setup_dataplane() {
    dp::DataplaneConfig dc;
    dc.ports = o_.ports;
    if (dc.ports.empty())
        for (const auto &p : drivers::list_ports())
            dc.ports.push_back(p.name);
    if (dc.ports.empty())
        die("no ports: give --port DEV (one per plane) or --vdev to EAL, e.g. "
            "--vdev=net_memif0,role=server,socket=/tmp/m0.sock");
    dc.mtu_bytes = o_.mtu;
    dc.mrc_port = o_.mrc_port;
    dc.plane_ipv4 = local_ips(static_cast<uint8_t>(dc.ports.size()));
    for (const auto &a : local_ip6s(static_cast<uint8_t>(dc.ports.size())))
        dc.plane_ipv6.push_back(a.value_or(wire::Ipv6Addr{}));
    dc.udp_checksum = !o_.no_udp_cksum;
    dc.ecn_full_bursts = o_.ecn_full_bursts;
    dc.zero_copy_tx = o_.zero_copy;
    if (!dp::parse_idle_mode(o_.idle, &dc.idle)) dc.idle = dp::IdleMode::kBusy;  // CLI checked it
    dc.idle_spin_us = o_.idle_spin_us;
    dc.link_wait_ms = static_cast<uint32_t>(o_.link_wait_s * 1000);
    // The server learns the QP count from the client: room for --max-qps.
    dc.max_qps_per_worker = role_ == Role::kServer ? o_.max_qps : std::max<uint32_t>(o_.qps, 1);
    dc.name = "gen";
    dc.scorer.period_ns = static_cast<uint64_t>(o_.control_us * 1000);
    auto d = dp::Dataplane::create(dc);
    if (!d) die(d.error().message);
    dp_ = std::move(*d);
    planes_ = dp_->planes();
    for (uint8_t p = 0; p < planes_; ++p)
        if (const auto x = dp_->port(p).xdp_info())
            std::printf("plane %u: %s\n", unsigned(p), drivers::describe(*x, o_.mrc_port).c_str());
    dp::telemetry_attach(dp_.get());
}

void Generator::create_qps() {
    // QP config: the payload that fits the MTU, EVs spread over the planes.
    qcfg_.mtu_payload_bytes = dp_->max_payload_bytes();
    qcfg_.max_send_wr = std::max<uint32_t>(64, 2 * o_.depth);
    qcfg_.ev.evs = o_.evs_per_plane * planes_;
    (void)parse_ev_range(o_.ev_range, &qcfg_.ev);  // checked with the options
    qcfg_.ev.min_active = std::min<uint32_t>(qcfg_.ev.min_active, qcfg_.ev.evs);
    qcfg_.ev.seed = static_cast<uint64_t>(::getpid());
    qcfg_.cc.algo = o_.cc == "fixed" ? CcAlgo::kFixed : CcAlgo::kNscc;
    qcfg_.cc.nscc.line_rate_gbps = o_.line_gbps;
    qcfg_.cc.nscc.base_rtt_ns = 20'000;
    // A software path on shared CPUs has millisecond scheduling hiccups:
    // before the first RTT sample the timeout is 4 ms; after that it follows
    // the RTT, never below --rto-min-us. Losses are found from acks long
    // before it (docs/loss-recovery.md).
    qcfg_.retry.adaptive = o_.rto == "adaptive";
    qcfg_.retry.timeout_exp = static_cast<uint8_t>(o_.timeout_exp);
    qcfg_.retry.min_rto_ns = static_cast<uint64_t>(o_.rto_min_us * 1000);
    qcfg_.retry.limit = 15;
    qcfg_.liveness.keepalive_ns = static_cast<uint64_t>(o_.keepalive_ms * 1e6);
    qcfg_.liveness.peer_timeout_ns = static_cast<uint64_t>(o_.peer_timeout_ms * 1e6);

    const uint32_t nworkers = dp_->workers();
    GenConfig gc;
    gc.role = role_;
    gc.mode = mode_;
    gc.msg_bytes = o_.msg_bytes;
    gc.depth = mode_ == Mode::kPingpong ? 1 : o_.depth;
    gc.slots = slots_;
    gc.verify = o_.verify;
    gc.byte_budget = o_.total_bytes ? (o_.total_bytes + nworkers - 1) / nworkers : 0;
    gc.rate_gbps = o_.rate_gbps / nworkers;
    for (uint32_t w = 0; w < nworkers; ++w)
        apps_.push_back(std::make_unique<GenApp>(gc));

    std::mt19937 rng(static_cast<uint32_t>(::getpid()) ^ static_cast<uint32_t>(time(nullptr)));
    // Client regions: message sources, and pingpong replies in a second half.
    const uint64_t bytes = uint64_t{slots_} * o_.msg_bytes *
                           (role_ == Role::kClient && mode_ == Mode::kPingpong ? 2 : 1);
    for (uint32_t i = 0; i < o_.qps; ++i) {
        dp::Worker &w = dp_->worker(i % nworkers);
        Endpoint &ep = w.endpoint();
        auto q = ep.create_qp(qcfg_);
        if (!q) die(q.error().message);
        if (auto r = (*q)->to_init(kPd); !r) die(r.error().message);
        auto *mem = static_cast<uint8_t *>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
        if (mem == nullptr) die(fmt::format("cannot allocate {} bytes for QP {}", bytes, i));
        regions_.push_back(mem);
        region_bytes_.push_back(bytes);
        // Without --verify the sources carry one pattern from the start.
        pattern_fill(mem, static_cast<uint32_t>(bytes), i, 0);
        auto rkey = ep.mrs().register_region(mem, bytes, kAccessRemoteWrite, kPd);
        if (!rkey) die(rkey.error().message);
        GenQp g;
        g.qp = *q;
        g.index = i;
        g.local = mem;
        g.local_rkey = *rkey;
        apps_[i % nworkers]->add_qp(std::move(g));
        me_.qpns.push_back(ep.wire_qpn(**q));
        me_.psns.push_back(rng() & 0xffffff);
        // Where the peer writes: the server's slots, or the client's reply half.
        me_.addrs.push_back(reinterpret_cast<uint64_t>(mem) +
                            (role_ == Role::kClient ? uint64_t{slots_} * o_.msg_bytes : 0));
        me_.rkeys.push_back(*rkey);
    }
    me_.ips = local_ips_;
    me_.ip6.clear();
    for (const auto &a : local_ip6_)
        me_.ip6.push_back(a ? wire::ipv6_string(*a) : std::string());
    me_.mtu_payload = dp_->max_payload_bytes();
    for (uint8_t p = 0; p < planes_; ++p)
        me_.macs.push_back(wire::mac_string(dp_->port(p).mac()));
    for (uint32_t w = 0; w < nworkers; ++w)
        dp_->worker(w).set_app(apps_[w].get());
}

void Generator::connect_qps(const Side &peer) {
    const uint32_t nworkers = dp_->workers();
    // The path MTU: the smaller end's payload per packet (both ends agree).
    const uint32_t own = dp_->max_payload_bytes();
    mtu_payload_ = peer.mtu_payload ? std::min(own, peer.mtu_payload) : own;
    if (peer.mtu_payload && peer.mtu_payload != own)
        std::printf(
            "path MTU: the peer's ports carry %u-byte payloads, this end's %u: every QP "
            "sends %u (give both ends the same --mtu to use the larger)\n",
            peer.mtu_payload, own, mtu_payload_);
    for (uint8_t p = 0; p < planes_; ++p)
        if (local_ip6_[p].has_value() != !peer.ip6[p].empty())
            die(fmt::format(
                "plane {}: this end's address is {} ({}), the peer's {}: give both ends "
                "--local-ip of the same family on each plane",
                p, local_ip6_[p] ? "IPv6" : "IPv4",
                local_ip6_[p] ? wire::ipv6_string(*local_ip6_[p])
                              : wire::ipv4_string(local_ips_[p]),
                peer.ip6[p].empty() ? wire::ipv4_string(peer.ips[p]) : peer.ip6[p]));
    const std::vector<wire::MacAddr> dst_macs = next_hop_macs(peer);
    for (uint32_t i = 0; i < o_.qps; ++i) {
        GenApp &app = *apps_[i % nworkers];
        GenQp &g = app.qps()[i / nworkers];
        QpPeer qp;
        qp.dst_qpn = peer.qpns[i];
        qp.planes = planes_;
        qp.mtu_payload_bytes = peer.mtu_payload;
        for (uint8_t p = 0; p < planes_; ++p) {
            wire::MrcAddr &a = qp.path[p];
            a.src_mac = dp_->port(p).mac();
            a.dst_mac = dst_macs[p];
            a.src_ip = local_ips_[p];
            a.dst_ip = peer.ips[p];
            if (local_ip6_[p]) {
                a.ipv6 = true;
                a.src_ip6 = *local_ip6_[p];
                a.dst_ip6 = *wire::parse_ipv6(peer.ip6[p]);  // side_from checked it
            }
            a.dst_port = o_.mrc_port;
            a.dscp = dscp_data_[p];
            a.dscp_control = dscp_control_[p];
        }
        if (auto r = g.qp->to_rtr(qp, Psn(peer.psns[i])); !r) die(r.error().message);
        if (auto r = g.qp->to_rts(Psn(me_.psns[i])); !r) die(r.error().message);
        g.remote_addr = peer.addrs[i];
        g.remote_rkey = peer.rkeys[i];
    }
}

// Where each plane's packets to the peer go: --peer-mac when given; on an
// AF_XDP port, the next hop of the kernel's route to the peer (the peer's
// port when it is on the link, else the gateway, whose MAC the kernel's
// neighbour table has or is made to resolve); on a DPDK-owned port, the
// peer's port when it is on the plane's subnet (or no prefix was given),
// else --gateway's, resolved by ARP or IPv6 neighbour discovery.
std::vector<wire::MacAddr> Generator::next_hop_macs(const Side &peer) {
    if (!peer_macs_override_.empty()) return peer_macs_override_;
    std::vector<wire::MacAddr> macs(planes_);
    std::optional<kernel::Netlink> nl;
    for (uint8_t p = 0; p < planes_; ++p) {
        macs[p] = *wire::parse_mac(peer.macs[p]);  // side_from checked them
        const auto x = dp_->port(p).xdp_info();
        if (routes6_[p]) {
            // IPv6: the peer's port when it is on the link, else the
            // gateway, whose MAC neighbour discovery finds.
            if (x)
                die(
                    fmt::format("plane {}: IPv6 over AF_XDP ({}) is not done yet: the kernel's "
                                "IPv6 routes and neighbours are not read (issue 20)",
                                p, x->iface));
            const wire::Route6 &r = *routes6_[p];
            const wire::Ipv6Addr dst = *wire::parse_ipv6(peer.ip6[p]);  // side_from checked it
            const auto nh = r.next_hop(dst);
            if (!nh)
                die(
                    fmt::format("plane {}: the peer's {} is off the subnet {}/{} and there is "
                                "no --gateway",
                                p, peer.ip6[p], wire::ipv6_string(r.ip), r.prefix_len));
            if (*nh == dst) continue;  // on the link: the peer's own port
            uint64_t dropped = 0;
            const auto mac = dp_->resolve_before_start(p, *nh, 3000, &dropped);
            if (!mac)
                die(fmt::format("plane {}: the gateway {} to {}: {}", p, wire::ipv6_string(*nh),
                                peer.ip6[p], mac.error().message));
            macs[p] = *mac;
            std::printf("plane %u: %s through gateway %s (%s, by neighbour discovery)\n",
                        unsigned(p), peer.ip6[p].c_str(), wire::ipv6_string(*nh).c_str(),
                        wire::mac_string(*mac).c_str());
            if (dropped)
                std::printf("plane %u: %llu frames that came in while resolving were dropped\n",
                            unsigned(p), static_cast<unsigned long long>(dropped));
            continue;
        }
        if (!x) {
            // A DPDK-owned port: --local-ip's prefix and --gateway decide,
            // the gateway's MAC by ARP (the dataplane answers ARP for the
            // plane's address).
            const wire::Route &r = routes_[p];
            const uint32_t nh = r.next_hop(peer.ips[p]);
            const std::string dst = wire::ipv4_string(peer.ips[p]);
            if (nh == 0)
                die(
                    fmt::format("plane {}: the peer's {} is off the subnet {}/{} and there is "
                                "no --gateway",
                                p, dst, wire::ipv4_string(r.ip), r.prefix_len));
            if (nh == peer.ips[p]) continue;  // on the link: the peer's own port
            uint64_t dropped = 0;
            const auto mac = dp_->resolve_before_start(p, nh, 3000, &dropped);
            if (!mac)
                die(fmt::format("plane {}: the gateway {} to {}: {}", p, wire::ipv4_string(nh), dst,
                                mac.error().message));
            macs[p] = *mac;
            std::printf("plane %u: %s through gateway %s (%s, by ARP)\n", unsigned(p), dst.c_str(),
                        wire::ipv4_string(nh).c_str(), wire::mac_string(*mac).c_str());
            if (dropped)
                std::printf("plane %u: %llu frames that came in while resolving were dropped\n",
                            unsigned(p), static_cast<unsigned long long>(dropped));
            continue;
        }
        if (routes_[p].gateway)
            die(
                fmt::format("--gateway: plane {} is an AF_XDP port ({}), which follows the "
                            "kernel's routes: ip route add {} via {} dev {}",
                            p, x->iface, wire::ipv4_string(peer.ips[p]),
                            wire::ipv4_string(routes_[p].gateway), x->iface));
        const std::string dst = wire::ipv4_string(peer.ips[p]);
        if (!nl) {
            auto n = kernel::Netlink::open();
            if (!n) die(n.error().message);
            nl = std::move(*n);
        }
        const int ifx = kernel::ifindex(x->iface);
        const auto route = nl->route_to(peer.ips[p], local_ips_[p], ifx);
        if (!route) {
            // An interface the kernel has no address or route on: one
            // segment, as the peer's description says.
            std::printf(
                "plane %u: the kernel has no route to the peer's %s out of %s (%s): "
                "sending to the peer's port as on one segment (a routed plane needs "
                "ip route add %s via GATEWAY dev %s)\n",
                unsigned(p), dst.c_str(), x->iface.c_str(), route.error().message.c_str(),
                dst.c_str(), x->iface.c_str());
            continue;
        }
        if (route->gateway == 0) continue;  // on the link: the peer's own port
        const std::string gw = wire::ipv4_string(route->gateway);
        // The kernel resolves the gateway (ARP) if it has no usable entry.
        kernel::Neighbor n;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        for (bool asked = false;; asked = true) {
            auto r = nl->neighbor(ifx, route->gateway);
            if (!r) die(fmt::format("plane {}: gateway {}: {}", p, gw, r.error().message));
            n = *r;
            if (n.mac || std::chrono::steady_clock::now() >= deadline) break;
            if (!asked)
                if (auto u = nl->resolve(ifx, route->gateway); !u)
                    die(fmt::format("plane {}: gateway {}: {}", p, gw, u.error().message));
            sleep_for_steady(std::chrono::milliseconds(20));
        }
        if (!n.mac)
            die(
                fmt::format("plane {}: the gateway {} to {} did not answer ARP on {} within 3 s "
                            "(the kernel's entry: {})",
                            p, gw, dst, x->iface, kernel::neighbor_state_name(n.state)));
        macs[p] = *n.mac;
        std::printf("plane %u: %s through gateway %s (%s, the kernel's neighbour on %s)\n",
                    unsigned(p), dst.c_str(), gw.c_str(), wire::mac_string(macs[p]).c_str(),
                    x->iface.c_str());
    }
    return macs;
}

namespace {
// "ADDR" or "ADDR/LEN" (LEN 0-128) in IPv6 text; nullopt when it is not.
std::optional<wire::Route6> parse_ipv6_prefix(std::string_view s) {
    wire::Route6 r;
    const size_t slash = s.find('/');
    if (slash != std::string_view::npos) {
        const std::string_view len = s.substr(slash + 1);
        unsigned v = 0;
        const auto res = std::from_chars(len.data(), len.data() + len.size(), v);
        if (len.empty() || res.ec != std::errc() || res.ptr != len.data() + len.size() || v > 128)
            return std::nullopt;
        r.prefix_len = static_cast<int16_t>(v);
        s = s.substr(0, slash);
    }
    const auto a = wire::parse_ipv6(s);
    if (!a) return std::nullopt;
    r.ip = *a;
    return r;
}
bool is_ipv6_text(std::string_view s) {
    return s.find(':') != std::string_view::npos;
}
// A --gateway entry: "none", an IPv4 or an IPv6 address.
struct Gateway {
    uint32_t ip = 0;
    std::optional<wire::Ipv6Addr> ip6;
};
}  // namespace

std::vector<std::optional<wire::Ipv6Addr>> Generator::local_ip6s(uint8_t planes) const {
    std::vector<std::optional<wire::Ipv6Addr>> out;
    for (const auto &r : plane_routes6(planes))
        out.push_back(r ? std::optional(r->ip) : std::nullopt);
    return out;
}

std::vector<uint32_t> Generator::local_ips(uint8_t planes) const {
    std::vector<uint32_t> ips;
    for (const wire::Route &r : plane_routes(planes))
        ips.push_back(r.ip);
    return ips;
}

namespace {
std::vector<Gateway> gateways(const std::vector<std::string> &flag, uint8_t planes) {
    if (flag.empty()) return std::vector<Gateway>(planes);
    return per_plane<Gateway>(
        flag, planes, "--gateway", [](std::string_view s) -> std::optional<Gateway> {
            if (s == "none") return Gateway{};
            if (is_ipv6_text(s)) {
                const auto a = wire::parse_ipv6(s);
                if (!a || wire::ipv6_is_unspecified(*a) || wire::ipv6_is_multicast(*a))
                    return std::nullopt;
                return Gateway{0, a};
            }
            const auto a = wire::parse_ipv4(s);
            if (!a) return std::nullopt;
            return Gateway{*a, std::nullopt};
        });
}
}  // namespace

// --local-ip (with its prefixes) and --gateway, per plane.
std::vector<wire::Route> Generator::plane_routes(uint8_t planes) const {
    auto routes = per_plane<wire::Route>(
        o_.local_ip.empty()
            ? std::vector<std::string>{role_ == Role::kClient ? "10.10.0.1" : "10.10.0.2"}
            : o_.local_ip,
        planes, "--local-ip", [](std::string_view s) -> std::optional<wire::Route> {
            // An IPv6 plane has no IPv4 route (ip 0: no ARP either).
            if (is_ipv6_text(s))
                return parse_ipv6_prefix(s) ? std::optional(wire::Route{}) : std::nullopt;
            return wire::parse_ipv4_prefix(s.data(), s.size());
        });
    const auto gws = gateways(o_.gateway, planes);
    const auto v6 = plane_routes6(planes);
    for (uint8_t p = 0; p < planes; ++p) {
        wire::Route &r = routes[p];
        if (v6[p]) continue;  // plane_routes6 checked its gateway
        if (gws[p].ip6)
            die(fmt::format("--gateway {}: plane {} is IPv4 ({}): give an IPv4 gateway",
                            wire::ipv6_string(*gws[p].ip6), p, wire::ipv4_string(r.ip)));
        r.gateway = gws[p].ip;
        if (r.gateway == 0) continue;
        if (r.prefix_len < 0)
            die(fmt::format(
                "--gateway: plane {} needs its prefix in --local-ip (for example {}/24)", p,
                wire::ipv4_string(r.ip)));
        if (!r.on_link(r.gateway) || r.gateway == r.ip)
            die(fmt::format("--gateway {}: not on plane {}'s subnet {}/{}",
                            wire::ipv4_string(r.gateway), p, wire::ipv4_string(r.ip),
                            r.prefix_len));
    }
    return routes;
}

// The IPv6 planes' addresses, prefixes and gateways (nullopt: an IPv4 plane).
std::vector<std::optional<wire::Route6>> Generator::plane_routes6(uint8_t planes) const {
    std::vector<std::optional<wire::Route6>> routes(planes);
    if (o_.local_ip.empty()) return routes;
    routes = per_plane<std::optional<wire::Route6>>(
        o_.local_ip, planes, "--local-ip",
        [](std::string_view s) -> std::optional<std::optional<wire::Route6>> {
            if (!is_ipv6_text(s)) return std::optional<wire::Route6>();
            const auto r = parse_ipv6_prefix(s);
            if (!r) return std::nullopt;
            return r;
        });
    const auto gws = gateways(o_.gateway, planes);
    for (uint8_t p = 0; p < planes; ++p) {
        if (!routes[p]) continue;
        wire::Route6 &r = *routes[p];
        if (gws[p].ip)
            die(fmt::format("--gateway {}: plane {} is IPv6 ({}): give an IPv6 gateway",
                            wire::ipv4_string(gws[p].ip), p, wire::ipv6_string(r.ip)));
        if (!gws[p].ip6) continue;
        r.gateway = *gws[p].ip6;
        if (r.prefix_len < 0)
            die(fmt::format(
                "--gateway: plane {} needs its prefix in --local-ip (for example {}/64)", p,
                wire::ipv6_string(r.ip)));
        if (!r.on_link(r.gateway) || r.gateway == r.ip)
            die(fmt::format("--gateway {}: not on plane {}'s subnet {}/{}",
                            wire::ipv6_string(r.gateway), p, wire::ipv6_string(r.ip),
                            r.prefix_len));
    }
    return routes;
}

bool Generator::any_link_up() const {
    for (uint8_t p = 0; p < planes_; ++p)
        if (dp_->port(p).link().up) return true;
    return false;
}

uint64_t Generator::verify_write_slots(const json &slots, uint64_t *verified_bytes) {
    // The client's last completed message in each slot: what must be there.
    uint64_t errors = 0;
    *verified_bytes = 0;
    if (!slots.is_array() || slots.size() != o_.qps) return o_.qps;
    for (uint32_t i = 0; i < o_.qps; ++i) {
        const json &per = slots[i];
        if (!per.is_array() || per.size() != slots_) {
            ++errors;
            continue;
        }
        for (uint32_t s = 0; s < slots_; ++s) {
            if (!per[s].is_number_integer()) {
                ++errors;
                continue;
            }
            const int64_t seq = per[s].get<int64_t>();
            if (seq < 0) continue;
            const uint8_t *at = regions_[i] + uint64_t{s} * o_.msg_bytes;
            if (pattern_check(at, o_.msg_bytes, i, static_cast<uint32_t>(seq)) != 0)
                ++errors;
            else
                *verified_bytes += o_.msg_bytes;
        }
    }
    return errors;
}

double Generator::elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void Generator::tick(double t) {
    for (Cut &c : cuts_)
        if (!c.done && t >= c.at_s) {
            c.done = true;
            std::printf("[%6.1fs] cutting plane %u (port %s)\n", t, unsigned(c.plane),
                        dp_->port(c.plane).name().c_str());
            if (auto r = dp_->cut_port(c.plane); !r)
                std::fprintf(stderr, "mrc-gen: %s\n", r.error().message.c_str());
        }
    if (o_.stats_period_s > 0 && t >= next_stats_s_) {
        std::printf("%s\n", stats_line(t).c_str());
        next_stats_s_ += o_.stats_period_s;
    }
}

void Generator::run() {
    if (o_.role == "client")
        role_ = Role::kClient;
    else if (o_.role == "server")
        role_ = Role::kServer;
    else
        die("--role must be server or client");
    mode_ = o_.mode == "write_imm"  ? Mode::kWriteImm
            : o_.mode == "pingpong" ? Mode::kPingpong
                                    : Mode::kWrite;
    slots_ = 2 * std::max<uint32_t>(o_.depth, 1);
    setup_dataplane();
    routes_ = plane_routes(planes_);
    routes6_ = plane_routes6(planes_);
    local_ips_ = local_ips(planes_);
    local_ip6_ = local_ip6s(planes_);
    const auto dscp = [](std::string_view s) -> std::optional<uint8_t> {
        unsigned v = 0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty() || v > 63)
            return std::nullopt;
        return static_cast<uint8_t>(v);
    };
    dscp_data_ = per_plane<uint8_t>(o_.dscp_data, planes_, "--dscp-data", dscp);
    dscp_control_ = per_plane<uint8_t>(o_.dscp_control, planes_, "--dscp-control", dscp);
    if (!o_.peer_ip.empty())
        peer_ips_override_ =
            per_plane<uint32_t>(o_.peer_ip, planes_, "--peer-ip", wire::parse_ipv4);
    if (!o_.peer_mac.empty())
        peer_macs_override_ =
            per_plane<wire::MacAddr>(o_.peer_mac, planes_, "--peer-mac", wire::parse_mac);
    for (const std::string &c : o_.cuts) {
        unsigned plane;
        double at;
        char tail;
        if (std::sscanf(c.c_str(), "%u@%lf%c", &plane, &at, &tail) != 2 || at < 0)
            die(fmt::format("--cut-port '{}': expected PLANE@SECONDS", c));
        if (plane >= planes_)
            die(fmt::format("--cut-port: no plane {} ({} planes)", plane, planes_));
        cuts_.push_back({static_cast<uint8_t>(plane), at});
    }
    if (role_ == Role::kClient)
        client();
    else
        server();
}

}  // namespace mrc::gen
