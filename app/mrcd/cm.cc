// Connection management on the wire (docs/wire-format.md, "Connection
// management"): CONNECT, ACCEPT, REJECT and DISCONNECT frames, and the
// timeouts of connects and accepts in progress. Worker 0 passes every CM
// frame to the server thread (CmInbox); frames go out through worker 0.
//
// A CONNECT goes on every plane that is up (resent every
// connect_resend_ms until answered); the answer goes back on the plane
// the CONNECT came in on. Every copy of a CONNECT already taken gets the
// same ACCEPT again (answered_, kept kAnsweredKeepNs).
#include <rte_ring.h>

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "daemon.h"
#include "mrc/mrc.h"
#include "records.h"
#include "support.h"
#include "wire/host.h"

namespace mrc::mrcd {

namespace {

constexpr uint16_t kCmEv = 0xc0de;  // UDP source port of CM frames (not a QP's EV)
constexpr uint64_t kAnsweredKeepNs = 60'000'000'000ull;
// CM frames per SendCm command when batched: well inside a worker's TX
// queue (kTxQueueCap per port), so none is dropped for room.
constexpr size_t kCmBatchFrames = 64;
constexpr size_t kMaxAcceptBacklog = 512;
constexpr wire::MacAddr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

}  // namespace

// Where a CM frame came from.
struct Daemon::CmFrom {
    uint8_t plane = 0;
    uint32_t ip = 0;
    wire::MacAddr mac;
};

// ---- addresses and sending ----------------------------------------------------

wire::MacAddr Daemon::neighbor_mac(uint32_t ip) const {
    for (const Neighbor &n : cfg_.neighbors)
        if (n.ip == ip) return n.mac;
    return kBroadcast;
}

// ---- next hops ------------------------------------------------------------------
//
// A frame for a peer goes to the peer when it is on the plane's subnet,
// else to the plane's gateway (wire::Route). The next hop's MAC: a
// [[neighbor]] entry, else the plane's neighbour table, resolved by ARP
// (DPDK-owned ports: the workers answer ARP for the plane's address and
// pass every ARP they hear to this thread). AF_XDP ports share the
// kernel's address, routes and ARP: there the kernel's route to the peer
// gives the next hop and the kernel's neighbour table its MAC (rtnetlink,
// kernel/netlink.h); the kernel is made to resolve what it does not have,
// and every second the QPs follow what changed there.

bool Daemon::resolves(uint8_t plane) const {
    return !dp_->port(plane).af_xdp();
}

uint32_t Daemon::next_hop(uint8_t plane, uint32_t dst) {
    if (plane < kernel_ifindex_.size() && kernel_ifindex_[plane])
        return kernel_hop(plane, dst).next_hop;
    return cfg_.plane_route[plane].next_hop(dst);
}

// The kernel's route to `dst` out of the plane's interface, read once and
// then every second (follow_kernel). Without one, the config's route
// decides (the plane's prefix, else one segment).
const Daemon::KernelHop &Daemon::kernel_hop(uint8_t plane, uint32_t dst) {
    const auto key = std::make_pair(plane, dst);
    if (auto it = kernel_hops_.find(key); it != kernel_hops_.end()) return it->second;
    if (kernel_hops_.size() >= 4096) kernel_hops_.clear();  // read again when needed
    return kernel_hops_.emplace(key, kernel_route(plane, dst)).first->second;
}

Daemon::KernelHop Daemon::kernel_route(uint8_t plane, uint32_t dst,
                                       const std::vector<kernel::IfAddr> *addrs) {
    KernelHop h;
    const auto r = nl_->route_to(dst, cfg_.plane_ip[plane], kernel_ifindex_[plane], addrs);
    if (r) {
        h.next_hop = r->gateway ? r->gateway : dst;
        h.kernel = true;
    } else {
        h.next_hop = cfg_.plane_route[plane].next_hop(dst);
        h.why = r.error().message;
    }
    return h;
}

// Every second: the routes read before, read again, and each next hop's
// MAC in the kernel's table; the QPs through a next hop whose MAC changed
// (or that a route now names) are pointed at it.
void Daemon::follow_kernel(uint64_t now) {
    std::set<std::pair<uint8_t, uint32_t>> hops;
    // Each plane's addresses once (a peer on the link needs them), not once
    // per peer.
    std::map<uint8_t, std::vector<kernel::IfAddr>> addrs;
    for (auto &[key, hop] : kernel_hops_) {
        auto [a, fresh] = addrs.try_emplace(key.first);
        if (fresh) {
            auto r = nl_->addresses(kernel_ifindex_[key.first]);
            if (r) a->second = std::move(*r);
        }
        const uint32_t before = hop.next_hop;
        hop = kernel_route(key.first, key.second, &a->second);
        if (!hop.kernel || hop.next_hop == key.second) continue;
        hops.insert({key.first, hop.next_hop});
        // A route that names another next hop: its QPs are pointed there
        // even when that next hop's MAC is the one last seen (a route that
        // went back to an earlier gateway).
        if (hop.next_hop != before) kernel_macs_.erase({key.first, hop.next_hop});
    }
    for (const auto &[plane, nh] : hops) {
        const auto m = kernel_mac(plane, nh, now, true);
        if (!m) continue;
        wire::MacAddr &last = kernel_macs_[{plane, nh}];
        if (last == *m) continue;
        last = *m;
        follow_next_hop(plane, nh, *m);
    }
}

Daemon::Hop Daemon::next_hop_mac(uint8_t plane, uint32_t dst, uint64_t now,
                                 std::optional<uint64_t> waiter, wire::MacAddr *mac) {
    const uint32_t nh = next_hop(plane, dst);
    if (nh == 0) return Hop::kUnreachable;  // off-link, no gateway
    if (!resolves(plane)) {
        *mac = neighbor_mac(nh);
        if (!(*mac == kBroadcast)) return Hop::kKnown;
        if (const auto m = kernel_mac(plane, nh, now, true)) {
            *mac = *m;
            return Hop::kKnown;
        }
        // The kernel is resolving it: the next resend finds it. A peer on
        // the segment gets the broadcast CONNECT meanwhile (a broadcast is
        // not routed: an off-link peer waits for the gateway's MAC).
        return nh == dst ? Hop::kKnown : Hop::kPending;
    }
    const wire::NeighborTable::Lookup l = neigh_[plane].resolve(nh, now, waiter);
    if (l.send_request) send_arp_request(plane, nh);
    switch (l.kind) {
        case wire::NeighborTable::Kind::kKnown:
            *mac = l.mac;
            return Hop::kKnown;
        case wire::NeighborTable::Kind::kPending:
            return Hop::kPending;
        case wire::NeighborTable::Kind::kFailed:
        case wire::NeighborTable::Kind::kFull:
            break;
    }
    // A peer on the segment that does not answer ARP still gets the
    // broadcast CONNECT (its answer carries its MAC).
    if (nh == dst) {
        *mac = kBroadcast;
        return Hop::kKnown;
    }
    return Hop::kUnreachable;
}

// The MAC a QP's packets to `dst` on `plane` are sent to. `peer_said` is
// the MAC the peer wrote in its CONNECT / ACCEPT (its own port's), `from`
// where that frame came from. Zero (and counted) when the next hop is not
// known: that plane then carries nothing of the QP's, and its paths fail.
wire::MacAddr Daemon::path_mac(uint8_t plane, uint32_t dst, const wire::MacAddr &peer_said,
                               const CmFrom &from, uint64_t now) {
    const uint32_t nh = next_hop(plane, dst);
    if (nh != 0) {
        const wire::MacAddr st = neighbor_mac(nh);
        if (!(st == kBroadcast)) return st;
        // The frame came in through the next hop: the peer itself on the
        // segment, else the router in front of this host.
        if (plane == from.plane) return from.mac;
        if (nh == dst) return peer_said;
        wire::MacAddr mac;
        if (next_hop_mac(plane, dst, now, std::nullopt, &mac) == Hop::kKnown) return mac;
    }
    ++ctr_.paths_unresolved;
    log(RTE_LOG_WARNING, "plane {}: no next hop for {} ({}): the QP's packets there are lost",
        plane, wire::ipv4_string(dst),
        nh == 0 ? "off the subnet and no gateway"
                : "gateway " + wire::ipv4_string(nh) + " has not answered ARP");
    return wire::MacAddr{};
}

void Daemon::send_arp_request(uint8_t plane, uint32_t ip) {
    if (!(dp_->link_up_mask() & (1u << plane))) return;
    std::vector<uint8_t> frame(wire::kArpFrameBytes);
    wire::write_arp_request(frame.data(), dp_->port(plane).mac(), cfg_.plane_ip[plane], ip);
    if (cm_batch_) {
        cm_batch_->frames.emplace_back(plane, std::move(frame));
        return;
    }
    cmd::SendCm send;
    send.frames.emplace_back(plane, std::move(frame));
    run_on(0, std::move(send));
}

// An ARP packet a worker heard on `plane` (answered there if it asked for
// this host): what it says goes into the plane's table, and CONNECTs that
// waited for the address go out.
void Daemon::on_arp(const uint8_t *frame, uint32_t len, uint8_t plane, uint64_t now) {
    if (plane >= neigh_.size() || !resolves(plane)) return;
    uint8_t scratch[wire::kArpFrameBytes];
    uint32_t n = 0;
    wire::ArpFrom from;
    const wire::HostAnswer a =
        wire::answer_host(frame, len, dp_->port(plane).mac(), cfg_.plane_ip[plane], scratch,
                          sizeof scratch, &n, &from);
    if (from.ip == 0) return;
    const auto *before = neigh_[plane].find(from.ip);
    const bool had_mac = before && (before->state == wire::NeighState::kReachable ||
                                    before->state == wire::NeighState::kStale);
    const wire::MacAddr old_mac = had_mac ? before->mac : wire::MacAddr{};
    std::vector<uint64_t> released;
    neigh_[plane].learn(from.ip, from.mac, a == wire::HostAnswer::kArpReply, now, &released);
    for (uint64_t conn_id : released)
        connect_on(conn_id, plane, false, now);
    const auto *after = neigh_[plane].find(from.ip);
    if (after && after->state == wire::NeighState::kReachable &&
        !(had_mac && old_mac == after->mac))
        follow_next_hop(plane, from.ip, after->mac);
}

// A next hop on `plane` has a MAC it did not have: the connected QPs that
// go through it there are pointed at it (one command per worker). A rare
// event (a router replaced, or late to answer), so the QPs are walked.
void Daemon::follow_next_hop(uint8_t plane, uint32_t ip, const wire::MacAddr &mac) {
    if (!(neighbor_mac(ip) == kBroadcast)) return;  // a [[neighbor]] entry decides
    std::vector<cmd::SetNextHop> per_worker(dp_->workers());
    for (auto &[qpn, r] : qps_) {
        if (plane >= r->peer_planes || r->peer_mac[plane] == mac ||
            next_hop(plane, r->peer_ip[plane]) != ip)
            continue;
        r->peer_mac[plane] = mac;
        per_worker[r->worker].wire_qpns.push_back(qpn);
    }
    for (uint32_t w = 0; w < per_worker.size(); ++w) {
        if (per_worker[w].wire_qpns.empty()) continue;
        ctr_.paths_moved += per_worker[w].wire_qpns.size();
        log(RTE_LOG_INFO, "plane {}: next hop {} is at {} now: {} QPs follow", plane,
            wire::ipv4_string(ip), wire::mac_string(mac), per_worker[w].wire_qpns.size());
        per_worker[w].plane = plane;
        per_worker[w].mac = mac;
        run_on(w, std::move(per_worker[w]));
    }
}

// The kernel's MAC for `ip` on AF_XDP plane `plane`; with `ask`, when it
// has none, the kernel is made to resolve it (at most every 100 ms per
// address).
std::optional<wire::MacAddr> Daemon::kernel_mac(uint8_t plane, uint32_t ip, uint64_t now,
                                                bool ask) {
    const int ifx = plane < kernel_ifindex_.size() ? kernel_ifindex_[plane] : 0;
    if (ifx == 0) return std::nullopt;
    const auto n = nl_->neighbor(ifx, ip);
    if (n && n->mac) return n->mac;
    if (ask) {
        uint64_t &last = kernel_asked_ns_[{plane, ip}];
        if (last == 0 || now - last >= 100'000'000) {
            last = now;
            if (auto r = nl_->resolve(ifx, ip); !r)
                log(RTE_LOG_WARNING, "plane {}: the kernel would not resolve {}: {}", plane,
                    wire::ipv4_string(ip), r.error().message);
        }
    }
    return std::nullopt;
}

// Retries and expiry of every plane's neighbours; CONNECTs whose next hop
// never answered.
void Daemon::neighbor_timeouts(uint64_t now) {
    std::vector<uint32_t> requests;
    std::vector<uint64_t> failed;
    // AF_XDP planes: the kernel's routes and neighbours, every second (the
    // QPs follow a change there as they do an ARP packet elsewhere).
    if (nl_ && now >= next_kernel_check_ns_) {
        next_kernel_check_ns_ = now + 1'000'000'000;
        follow_kernel(now);
    }
    for (uint8_t p = 0; p < neigh_.size(); ++p) {
        // A gateway is always in use: kept resolved (asked for again after
        // a failure, refreshed when stale) before a connection needs it.
        if (const uint32_t gw = cfg_.plane_route[p].gateway; gw && resolves(p)) {
            const auto *e = neigh_[p].find(gw);
            if (!e || e->state != wire::NeighState::kIncomplete)
                if (neigh_[p].resolve(gw, now).send_request) send_arp_request(p, gw);
        }
        if (now < neigh_[p].next_due_ns()) continue;
        requests.clear();
        failed.clear();
        neigh_[p].tick(now, &requests, &failed);
        for (uint32_t ip : requests)
            send_arp_request(p, ip);
        for (uint64_t conn_id : failed)
            connect_on(conn_id, p, true, now);
    }
}

// Sends the CONNECT of `conn_id` on `plane` alone, once its next hop is
// known (or, `failed`, once it never answered: broadcast to a peer on the
// segment, nothing to one behind a gateway).
void Daemon::connect_on(uint64_t conn_id, uint8_t plane, bool failed, uint64_t now) {
    auto it = connecting_.find(conn_id);
    if (it == connecting_.end()) return;
    Pending &p = *it->second;
    wire::MacAddr mac = kBroadcast;
    if (failed) {
        if (next_hop(plane, p.peer_ip) != p.peer_ip) {
            ++ctr_.cm_unresolved;
            return;
        }
    } else if (next_hop_mac(plane, p.peer_ip, now, std::nullopt, &mac) != Hop::kKnown) {
        return;
    }
    uint32_t ips[kMaxPlanes];
    wire::MacAddr macs[kMaxPlanes];
    for (uint8_t i = 0; i < kMaxPlanes; ++i) {
        ips[i] = p.peer_ip;
        macs[i] = mac;
    }
    send_cm(connect_fields(p), uint8_t(1u << plane), ips, macs);
    ++ctr_.connects_sent;
}

wire::CmFields Daemon::my_addrs() const {
    wire::CmFields f;
    f.planes = dp_->planes();
    for (uint8_t p = 0; p < f.planes; ++p) {
        f.mac[p] = dp_->port(p).mac();
        f.ip[p] = cfg_.plane_ip[p];
    }
    f.mtu_payload = static_cast<uint16_t>(dp_->max_payload_bytes());
    return f;
}

// Sends `f` on every plane of `plane_mask` that is up, to dst_ip[p] / dst_mac[p].
void Daemon::send_cm(const wire::CmFields &f, uint8_t plane_mask, const uint32_t *dst_ip,
                     const wire::MacAddr *dst_mac) {
    cmd::SendCm send;
    const uint8_t up = dp_->link_up_mask();
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        if (!(plane_mask & (1u << p)) || !(up & (1u << p))) continue;
        wire::MrcAddr a;
        a.src_mac = dp_->port(p).mac();
        a.dst_mac = dst_mac[p];
        a.src_ip = cfg_.plane_ip[p];
        a.dst_ip = dst_ip[p];
        a.dst_port = dp_->config().mrc_port;
        a.dscp = cfg_.plane_dscp[p].cm;
        std::vector<uint8_t> frame(wire::kCmBytes);
        wire::write_cm(frame.data(), a, kCmEv, f);
        send.frames.emplace_back(p, std::move(frame));
    }
    if (send.frames.empty()) return;
    if (!cm_batch_) {
        run_on(0, std::move(send));
        return;
    }
    for (auto &fr : send.frames)
        cm_batch_->frames.push_back(std::move(fr));
    if (cm_batch_->frames.size() >= kCmBatchFrames) {
        run_on(0, std::move(*cm_batch_));
        cm_batch_.emplace();
    }
}

void Daemon::begin_cm_batch() {
    if (cm_batch_depth_++ == 0) cm_batch_.emplace();
}

void Daemon::end_cm_batch() {
    if (--cm_batch_depth_ != 0) return;
    cmd::SendCm rest = std::move(*cm_batch_);
    cm_batch_.reset();
    if (!rest.frames.empty()) run_on(0, std::move(rest));
}

wire::CmFields Daemon::connect_fields(const Pending &p) const {
    wire::CmFields f = my_addrs();
    f.op = wire::CmOp::kConnect;
    f.conn_id = p.conn_id;
    f.service = p.service;
    f.src_qpn = p.qpn;
    f.psn = p.psn;
    return f;
}

void Daemon::send_connect(Pending &p) {
    // On every plane that is up, to the one address the application gave:
    // the first copy through wins, a plane that is down does not matter.
    // A plane whose next hop is still being resolved holds its copy (the
    // neighbour table's hold queue) and sends it when the answer comes.
    const uint64_t now = mono_ns();
    uint32_t ips[kMaxPlanes];
    wire::MacAddr macs[kMaxPlanes];
    uint8_t mask = 0;
    for (uint8_t i = 0; i < kMaxPlanes; ++i) {
        ips[i] = p.peer_ip;
        if (i < dp_->planes() &&
            next_hop_mac(i, p.peer_ip, now, p.conn_id, &macs[i]) == Hop::kKnown)
            mask |= uint8_t(1u << i);
    }
    if (mask) send_cm(connect_fields(p), mask, ips, macs);
    ++ctr_.connects_sent;
    p.next_send_ns = now + uint64_t(cfg_.connect_resend_ms) * 1'000'000;
}

// Tells the peer of a connected QP that it is going away.
void Daemon::send_disconnect(const QpRec &q) {
    wire::CmFields f = my_addrs();
    f.op = wire::CmOp::kDisconnect;
    f.src_qpn = q.wire_qpn;
    f.dst_qpn = q.peer_qpn;
    uint8_t mask = 0;
    for (uint8_t p = 0; p < std::min<uint8_t>(q.peer_planes, dp_->planes()); ++p)
        mask |= uint8_t(1u << p);
    // Twice: one lost frame should not leave the peer waiting for timeouts.
    for (int i = 0; i < 2; ++i)
        send_cm(f, mask, q.peer_ip, q.peer_mac);
    ++ctr_.disconnects_sent;
}

// Takes down the peer's side of a connection this side could not bring up.
void Daemon::disconnect_stray(const wire::CmFields &accept, const CmFrom &from) {
    wire::CmFields f = my_addrs();
    f.op = wire::CmOp::kDisconnect;
    f.src_qpn = accept.dst_qpn;  // the QP it was meant for
    f.dst_qpn = accept.src_qpn;
    uint32_t ips[kMaxPlanes];
    wire::MacAddr macs[kMaxPlanes];
    uint8_t mask = 0;
    for (uint8_t p = 0; p < std::min<uint8_t>(accept.planes, dp_->planes()); ++p) {
        // Where a next hop is known without asking (the frame's own plane,
        // a peer on the segment): nothing is resolved for a frame like this.
        const uint32_t nh = next_hop(p, accept.ip[p]);
        if (p != from.plane && nh != accept.ip[p]) continue;
        ips[p] = accept.ip[p];
        macs[p] = p == from.plane ? from.mac : accept.mac[p];
        mask |= uint8_t(1u << p);
    }
    if (mask == 0 && from.plane < kMaxPlanes) {
        ips[from.plane] = from.ip;
        macs[from.plane] = from.mac;
        mask = uint8_t(1u << from.plane);
    }
    send_cm(f, mask, ips, macs);
    ++ctr_.disconnects_sent;
}

// An answer to a CONNECT (ACCEPT or REJECT, filled in by the caller), back
// on the plane the CONNECT came in on.
void Daemon::send_answer(wire::CmFields ans, const CmFrom &from) {
    uint32_t ips[kMaxPlanes];
    wire::MacAddr macs[kMaxPlanes];
    for (uint8_t i = 0; i < kMaxPlanes; ++i) {
        ips[i] = from.ip;
        macs[i] = from.mac;
    }
    send_cm(ans, uint8_t(1u << from.plane), ips, macs);
}

// Records the peer's addresses from its CONNECT or ACCEPT in `r` and
// makes the command that brings the QP up towards it (PSNs left to fill).
cmd::ConnectQp Daemon::connect_command(QpRec &r, const wire::CmFields &f, uint32_t pd,
                                       const CmFrom &from) {
    r.peer_qpn = f.src_qpn;
    r.peer_planes = std::min<uint8_t>(f.planes, dp_->planes());
    r.peer_mtu_payload = f.mtu_payload;
    const uint64_t now = mono_ns();
    for (uint8_t p = 0; p < r.peer_planes; ++p) {
        r.peer_ip[p] = f.ip[p];
        r.peer_mac[p] = path_mac(p, f.ip[p], f.mac[p], from, now);
    }
    cmd::ConnectQp c;
    c.wire_qpn = r.wire_qpn;
    c.pd = pd;
    c.peer.dst_qpn = f.src_qpn;
    c.peer.planes = r.peer_planes;
    c.peer.mtu_payload_bytes = f.mtu_payload;
    for (uint8_t p = 0; p < r.peer_planes; ++p) {
        wire::MrcAddr &a = c.peer.path[p];
        a.src_mac = dp_->port(p).mac();
        a.dst_mac = r.peer_mac[p];
        a.src_ip = cfg_.plane_ip[p];
        a.dst_ip = f.ip[p];
        a.dst_port = dp_->config().mrc_port;
        a.dscp = cfg_.plane_dscp[p].data;
        a.dscp_control = cfg_.plane_dscp[p].control;
    }
    return c;
}

// ---- frames in ------------------------------------------------------------------

// Until the ring is empty: worker 0 wakes this thread only for a frame
// that finds it empty (agent.cc).
void Daemon::poll_cm() {
    void *objs[32];
    unsigned n;
    begin_cm_batch();  // the answers to a burst of CONNECTs leave together
    do {
        n = rte_ring_sc_dequeue_burst(cm_in_.ring, objs, 32, nullptr);
        for (unsigned i = 0; i < n; ++i) {
            auto *m = static_cast<CmFrame *>(objs[i]);
            on_cm(m->frame, m->len, m->plane);
            delete m;
        }
    } while (n == 32);
    end_cm_batch();
    ctr_.cm_dropped = cm_in_.overflow.load(std::memory_order_relaxed) +
                      cm_in_.oversize.load(std::memory_order_relaxed);
}

void Daemon::on_cm(const uint8_t *frame, uint32_t len, uint8_t plane) {
    if (wire::is_arp(frame, len)) return on_arp(frame, len, plane, mono_ns());
    wire::CmFields f;
    CmFrom from;
    from.plane = plane;
    const wire::CmError e =
        wire::parse_cm(frame, len, dp_->config().mrc_port, &f, &from.mac, &from.ip);
    if (e != wire::CmError::kOk) {
        ++ctr_.cm_bad;
        return;
    }
    const uint64_t now = mono_ns();
    switch (f.op) {
        case wire::CmOp::kConnect:
            return on_connect(f, from, now);
        case wire::CmOp::kAccept:
        case wire::CmOp::kReject:
            return on_answer(f, from, now);
        case wire::CmOp::kDisconnect:
            return on_disconnect(f, from);
    }
}

// A repeat of a CONNECT already taken (another plane's copy, or a resend)
// gets the same answer again. Keyed by the requester's plane-0 address, the
// same in every copy. False when the CONNECT is new.
bool Daemon::answer_repeat(const wire::CmFields &f, const CmFrom &from) {
    auto done = answered_.find(answer_key(f.ip[0], f.conn_id));
    if (done == answered_.end()) return false;
    auto q = qps_.find(done->second.qpn);
    if (q != qps_.end()) {
        wire::CmFields ans = my_addrs();
        ans.conn_id = f.conn_id;
        ans.op = wire::CmOp::kAccept;
        ans.src_qpn = q->second->wire_qpn;
        ans.dst_qpn = f.src_qpn;
        ans.psn = done->second.psn;
        send_answer(ans, from);
    }
    return true;
}

// CONNECT: a new QP for the listener of the service, brought up towards
// the requester, answered with ACCEPT (or REJECT with the reason).
void Daemon::on_connect(const wire::CmFields &f, const CmFrom &from, uint64_t now) {
    ++ctr_.connects_received;
    if (answer_repeat(f, from)) return;
    auto reject = [&](wire::CmReject why) {
        wire::CmFields ans = my_addrs();
        ans.conn_id = f.conn_id;
        ans.op = wire::CmOp::kReject;
        ans.reason = why;
        send_answer(ans, from);
        ++ctr_.rejects_sent;
    };
    auto l = listeners_.find(f.service);
    if (l == listeners_.end() || draining_) return reject(wire::CmReject::kNoListener);
    // A listener that does not accept holds a ring per waiting QP:
    // bounded, so remote CONNECTs cannot use up the daemon's files. A full
    // backlog is a wait, not a refusal (a SYN queue's rule): no answer, and
    // the requester's resend (connect_resend_ms) finds room once the
    // application has accepted; one that never accepts times it out.
    if (l->second.ready.size() >= kMaxAcceptBacklog) {
        ++ctr_.cm_backlog_full;
        return;
    }
    Client &c = *clients_.at(l->second.client);
    int status = MRC_OK;
    auto q = new_qp(c, l->second.cq_id, l->second.sq_depth, &status);
    if (!q) {
        log(RTE_LOG_WARNING, "CONNECT for service {}: {}", f.service, q.error().message);
        return reject(wire::CmReject::kNoResources);
    }
    QpRec &r = **q;
    r.service = f.service;
    cmd::ConnectQp up = connect_command(r, f, pd_of(c.id, f.service), from);
    up.expected_psn = f.psn;
    up.start_psn = uint32_t(rng_()) & wire::kQpnMask;
    const CommandAnswer a = run_on(r.worker, up);
    if (!a.ok) {
        log(RTE_LOG_WARNING, "CONNECT for service {}: {}", f.service, a.error);
        destroy_qp(c, r.wire_qpn, false);
        return reject(wire::CmReject::kBadRequest);
    }
    r.connected = true;
    r.connected_ns = now;
    r.answered = true;
    r.answer_key = answer_key(f.ip[0], f.conn_id);
    answered_[r.answer_key] = Answer{r.wire_qpn, up.start_psn, now};
    answered_order_.emplace_back(now, r.answer_key);
    wire::CmFields ans = my_addrs();
    ans.conn_id = f.conn_id;
    ans.op = wire::CmOp::kAccept;
    ans.src_qpn = r.wire_qpn;
    ans.dst_qpn = f.src_qpn;
    ans.psn = up.start_psn;
    send_answer(ans, from);
    ++ctr_.accepts;
    log(RTE_LOG_INFO, "QP {} accepted for client {} on service {} from {} QP {}", r.wire_qpn, c.id,
        f.service, wire::ipv4_string(from.ip), f.src_qpn);
    if (c.waiting && c.waiting->kind == Pending::kAccept && c.waiting->service == f.service)
        complete_accept(c, r);
    else
        l->second.ready.push_back(r.wire_qpn);
}

// ACCEPT or REJECT of one of our CONNECTs: the QP comes up, and the
// application's connect is answered.
void Daemon::on_answer(const wire::CmFields &f, const CmFrom &from, uint64_t now) {
    auto it = connecting_.find(f.conn_id);
    if (it == connecting_.end()) {
        // A repeat of an answer already taken, or nobody asked.
        auto q = qps_.find(f.dst_qpn);
        const bool repeat =
            q != qps_.end() && q->second->connected && q->second->peer_qpn == f.src_qpn;
        ++(repeat ? ctr_.cm_duplicates : ctr_.cm_bad);
        return;
    }
    Pending &p = *it->second;
    auto cl = clients_.find(p.client);
    if (cl == clients_.end() || !qps_.count(p.qpn)) {
        connecting_.erase(it);
        return;
    }
    Client &c = *cl->second;
    if (f.op == wire::CmOp::kReject) {
        const Pending done = std::move(p);
        connecting_.erase(it);
        return finish_connect(c, done, MRC_EREFUSED,
                              fmt::format("{} refused the connection: {}",
                                          wire::ipv4_string(from.ip), wire::to_string(f.reason)));
    }
    if (f.dst_qpn != p.qpn) {
        ++ctr_.cm_bad;
        return;
    }
    QpRec &r = *qps_.at(p.qpn);
    cmd::ConnectQp up = connect_command(r, f, pd_of(c.id, p.service), from);
    up.expected_psn = f.psn;
    up.start_psn = p.psn;
    const CommandAnswer a = run_on(r.worker, up);
    const Pending done = std::move(p);
    connecting_.erase(it);
    if (!a.ok) {
        disconnect_stray(f, from);
        return finish_connect(c, done, MRC_EINVAL, "cannot bring the QP up: " + a.error);
    }
    r.connected = true;
    r.connected_ns = now;
    ++ctr_.accepts;
    log(RTE_LOG_INFO, "QP {} of client {} connected to {} QP {} (service {})", r.wire_qpn, c.id,
        wire::ipv4_string(from.ip), f.src_qpn, done.service);
    finish_connect(c, done, MRC_OK, "");
}

void Daemon::finish_connect(Client &c, const Pending &p, int status, const std::string &msg) {
    if (!p.in_batch) {
        if (c.waiting && c.waiting->kind == Pending::kConnect && c.waiting->seq == p.seq) {
            c.waiting.reset();
            reply(c, uint16_t(ipc::Op::kConnect), p.seq, status, msg);
        }
        return;
    }
    if (!c.waiting || c.waiting->kind != Pending::kConnectMany || c.waiting->seq != p.seq) return;
    Pending &b = *c.waiting;
    if (p.index >= b.batch_status.size()) return;
    b.batch_status[p.index] = status;
    if (status != MRC_OK && b.batch_error.empty())
        b.batch_error = fmt::format("QP {}: {}", p.qpn, msg);
    --b.batch_open;
    --b.batch_left;
    send_batch(c);
}

// DISCONNECT: the peer took its side down; ours fails with PEER_DISCONNECTED.
void Daemon::on_disconnect(const wire::CmFields &f, const CmFrom &from) {
    ++ctr_.disconnects_received;
    auto it = qps_.find(f.dst_qpn);
    // Only the peer this QP is connected to may take it down.
    if (it == qps_.end() || it->second->peer_qpn != f.src_qpn) {
        ++ctr_.cm_bad;
        return;
    }
    QpRec &q = *it->second;
    if (!q.connected) {
        ++ctr_.cm_duplicates;  // another copy of a DISCONNECT already taken
        return;
    }
    bool known = false;
    for (uint8_t p = 0; p < q.peer_planes; ++p)
        known = known || q.peer_ip[p] == from.ip;
    if (!known) {
        ++ctr_.cm_bad;
        return;
    }
    q.connected = false;
    run_on(q.worker, cmd::ErrorQp{.wire_qpn = f.dst_qpn, .status = MRC_WC_PEER_DISCONNECTED});
    log(RTE_LOG_INFO, "QP {}: the peer ({} QP {}) disconnected", f.dst_qpn,
        wire::ipv4_string(from.ip), f.src_qpn);
}

// ---- timeouts -------------------------------------------------------------------

void Daemon::timeouts() {
    const uint64_t now = mono_ns();
    begin_cm_batch();  // resent CONNECTs (and ARP requests) leave together
    neighbor_timeouts(now);
    connect_timeouts(now);
    end_cm_batch();
    accept_timeouts(now);
    while (!answered_order_.empty() && now - answered_order_.front().first > kAnsweredKeepNs) {
        auto it = answered_.find(answered_order_.front().second);
        // Only the entry this turn was queued for (not a later answer to the same key).
        if (it != answered_.end() && it->second.at_ns == answered_order_.front().first)
            answered_.erase(it);
        answered_order_.pop_front();
    }
}

// Connects in progress: resent until answered, failed at their deadline.
void Daemon::connect_timeouts(uint64_t now) {
    for (auto it = connecting_.begin(); it != connecting_.end();) {
        Pending &p = *it->second;
        auto cl = clients_.find(p.client);
        if (cl == clients_.end() || cl->second->fd < 0) {
            it = connecting_.erase(it);
            continue;
        }
        if (now >= p.deadline_ns) {
            Client &c = *cl->second;
            const Pending done = std::move(p);
            it = connecting_.erase(it);
            // finish_connect may start more of a batch (connecting_ grows
            // behind `it`: a map's iterators stay valid).
            finish_connect(c, done, MRC_ETIMEDOUT, no_answer_message(done.peer_ip));
            continue;
        }
        if (now >= p.next_send_ns) send_connect(p);
        ++it;
    }
}

// Empty when some plane has a next hop for `peer_ip`; else why not (a
// peer off every plane's subnet, with no gateway to reach it).
std::string Daemon::no_route(uint32_t peer_ip) {
    for (uint8_t p = 0; p < dp_->planes(); ++p)
        if (next_hop(p, peer_ip) != 0) return "";
    return fmt::format("no route to {}: it is on no plane's subnet and no plane has a gateway",
                       wire::ipv4_string(peer_ip));
}

// Why a CONNECT went unanswered, as far as this host can tell: no next hop
// on any plane (no route, or nobody answered ARP), else the peer.
std::string Daemon::no_answer_message(uint32_t peer_ip) {
    std::string hops;
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        const uint32_t nh = next_hop(p, peer_ip);
        bool unresolved = nh == 0;
        if (nh != 0 && resolves(p)) {
            const auto *e = neigh_[p].find(nh);
            unresolved = e && (e->state == wire::NeighState::kFailed ||
                               e->state == wire::NeighState::kIncomplete);
        } else if (nh != 0 && nh != peer_ip && neighbor_mac(nh) == kBroadcast) {
            unresolved = !kernel_mac(p, nh, mono_ns(), false);  // AF_XDP: the kernel's
        }
        if (!unresolved)
            return fmt::format("no answer from {} (is mrcd running there, on the same MRC port?)",
                               wire::ipv4_string(peer_ip));
        std::string why = nh == 0 ? "off the subnet and no gateway"
                                  : "next hop " + wire::ipv4_string(nh) + " answers no ARP";
        if (nh == 0 && p < kernel_ifindex_.size() && kernel_ifindex_[p])
            why = "the kernel has no route (" + kernel_hop(p, peer_ip).why + ")";
        hops += fmt::format("{}plane {}: {}", hops.empty() ? "" : "; ", p, why);
    }
    return fmt::format("no route to {}: {}", wire::ipv4_string(peer_ip), hops);
}

void Daemon::accept_timeouts(uint64_t now) {
    for (auto &[id, c] : clients_) {
        if (c->fd < 0 || !c->waiting || c->waiting->kind != Pending::kAccept) continue;
        if (now >= c->waiting->deadline_ns) {
            const uint32_t seq = c->waiting->seq;
            const uint32_t svc = c->waiting->service;
            c->waiting.reset();
            reply(*c, uint16_t(ipc::Op::kAccept), seq, MRC_ETIMEDOUT,
                  fmt::format("no connection on service {} in time", svc));
        }
    }
}

}  // namespace mrc::mrcd
