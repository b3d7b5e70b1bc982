#include "sim/simulator.h"

#include <chrono>

namespace mrc::sim {
namespace detail {

void Simulator::setup() {
    const FabricConfig &f = cfg_.fabric;
    path_gbps_ = f.path_gbps > 0 ? f.path_gbps : f.link_gbps;
    inv_path_gbps_ = 1.0 / path_gbps_;
    inv_link_gbps_ = 1.0 / f.link_gbps;
    const WorkloadConfig &w = cfg_.work;
    const uint32_t nqps = w.qps + w.victims;
    receiver_ = w.senders + w.victims;
    const uint32_t hosts = receiver_ + 1;
    ep_.resize(hosts);
    nic_.resize(hosts);
    app_of_qpn_.resize(hosts);
    apps_of_host_.resize(hosts);
    tx_scheduled_.assign(hosts, 0);
    timer_at_.assign(hosts, UINT64_MAX);
    check_at_.assign(hosts, UINT64_MAX);
    tick_ps_ = std::max<uint64_t>(1, cfg_.timer_tick_ns * 1000);
    // Each host's endpoint is sized for its own QPs: a sender's for its
    // share, the receiver's for all of them.
    std::vector<uint32_t> qps_of_host(hosts, 0);
    for (uint32_t i = 0; i < nqps; ++i)
        ++qps_of_host[i < w.qps ? i % w.senders : w.senders + (i - w.qps)];
    qps_of_host[receiver_] = nqps;
    for (uint32_t h = 0; h < hosts; ++h) {
        EndpointConfig ec;
        ec.planes = static_cast<uint8_t>(f.planes);
        ec.max_qps = qps_of_host[h] + 1;
        ec.max_mrs = qps_of_host[h] + 1;
        ec.timer_tick_ns = cfg_.timer_tick_ns;
        ep_[h] = std::make_unique<Endpoint>(ec);
        nic_[h].assign(f.planes, QueueState{});
        app_of_qpn_[h].assign(ec.max_qps + 2, UINT32_MAX);
        if (cfg_.run_scorer) scorers_.emplace_back(cfg_.scorer, static_cast<uint8_t>(f.planes));
    }
    limit_of_.assign(size_t(2) * f.planes, -1);
    core_.assign(size_t(2) * f.planes, QueueState{});
    for (size_t i = 0; i < f.plane_limits.size(); ++i)
        limit_of_[size_t(f.plane_limits[i].dir) * f.planes + f.plane_limits[i].plane] = int(i);
    paths_.assign(size_t(2) * f.planes * f.paths_per_plane, PathState{});
    last_hop_.assign(size_t(hosts) * f.planes, QueueState{});
    for (int dir = 0; dir < 2; ++dir)
        for (uint32_t p = 0; p < f.planes; ++p)
            for (uint32_t k = 0; k < f.paths_per_plane; ++k) {
                PathState &ps = path(dir, p, k);
                for (const Impairment &im : f.impairments) {
                    if ((im.plane >= 0 && uint32_t(im.plane) != p) ||
                        (im.path >= 0 && uint32_t(im.path) != k) || (im.dir >= 0 && im.dir != dir))
                        continue;
                    ps.imp = im;  // the last matching impairment wins
                }
            }

    // Source data: one random buffer; message m of QP q reads a slice of it
    // at an offset of its own, so misplaced bytes never compare equal.
    const uint64_t msg = cfg_.work.msg_bytes;
    src_buf_.resize(std::max<uint64_t>(msg * 4, 1u << 20));
    for (auto &b : src_buf_)
        b = static_cast<uint8_t>(rng_.next());
    const uint64_t per_qp = w.total_bytes / w.qps;
    const uint64_t msgs = std::max<uint64_t>(1, per_qp / msg);
    const uint64_t victim_msgs = std::max<uint64_t>(1, w.victim_bytes / msg);
    apps_.resize(nqps);
    dst_bufs_.resize(nqps);
    r_.expected_bytes = (msgs * w.qps + victim_msgs * w.victims) * msg;
    QpConfig qc_base = cfg_.qp;
    if (cfg_.derive_cc) {
        // An unloaded round trip: a data frame through NIC, path and last
        // hop, an ack frame back the same way, propagation both ways.
        const uint32_t extra = f.ipv6 ? uint32_t(wire::kIpv6ExtraBytes) : 0;
        const uint32_t data = cfg_.qp.mtu_payload_bytes + uint32_t(wire::kDataImmHdrBytes) + extra;
        const uint32_t ack = uint32_t(wire::kSackBytes) + extra;
        const uint64_t rtt_ps = 2 * ser_ps(data, f.link_gbps) + ser_ps(data, path_gbps_) +
                                2 * ser_ps(ack, f.link_gbps) + ser_ps(ack, path_gbps_) +
                                2 * f.delay_ns * 1000;
        qc_base.cc.nscc.base_rtt_ns = std::max<uint64_t>(1, rtt_ps / 1000);
        qc_base.cc.nscc.base_rtt_known = true;
        qc_base.cc.nscc.line_rate_gbps = f.link_gbps * f.planes;
    }
    for (uint32_t i = 0; i < nqps; ++i) {
        QpApp &q = apps_[i];
        QpConfig qc = qc_base;
        qc.ev.seed = cfg_.seed * 1315423911u + i;
        qc.max_send_wr = std::max(qc.max_send_wr, w.depth);
        q.victim = i >= w.qps;
        q.sender = q.victim ? w.senders + (i - w.qps) : i % w.senders;
        q.start_ps = q.victim ? w.victim_start_ns * 1000 : 0;
        q.a = ep_[q.sender]->create_qp(qc).value();
        q.b = ep_[receiver_]->create_qp(qc).value();
        note_setup(q.a->to_init(1));
        note_setup(q.b->to_init(1));
        QpPeer pa, pb;
        pa.dst_qpn = q.b->qpn();
        pb.dst_qpn = q.a->qpn();
        pa.planes = pb.planes = static_cast<uint8_t>(f.planes);
        for (uint32_t p = 0; p < f.planes; ++p) {
            wire::MrcAddr a2b;
            a2b.src_mac =
                wire::MacAddr{{2, 0, 0, uint8_t(q.sender >> 8), uint8_t(q.sender), uint8_t(p)}};
            a2b.dst_mac = wire::MacAddr{{2, 0, 0, 0xff, 0xff, uint8_t(p)}};
            a2b.src_ip =
                wire::ipv4(10, uint8_t(p), uint8_t(q.sender >> 8), uint8_t(1 + q.sender % 250));
            a2b.dst_ip = wire::ipv4(10, uint8_t(p), 255, 254);
            if (f.ipv6) {
                a2b.ipv6 = true;
                a2b.src_ip6 =
                    wire::Ipv6Addr{{0x20, 0x01, 0x0d, 0xb8, 0, uint8_t(p), uint8_t(q.sender >> 8),
                                    uint8_t(q.sender), 0, 0, 0, 0, 0, 0, 0, 1}};
                a2b.dst_ip6 = wire::Ipv6Addr{
                    {0x20, 0x01, 0x0d, 0xb8, 0, uint8_t(p), 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xfe}};
            }
            wire::MrcAddr b2a = a2b;
            std::swap(b2a.src_mac, b2a.dst_mac);
            std::swap(b2a.src_ip, b2a.dst_ip);
            std::swap(b2a.src_ip6, b2a.dst_ip6);
            pa.path[p] = a2b;
            pb.path[p] = b2a;
        }
        const Psn start_a(
            static_cast<uint32_t>(rng_.next()));  // random start PSNs: wrap gets exercised
        const Psn start_b(static_cast<uint32_t>(rng_.next()));
        note_setup(q.a->to_rtr(pa, start_b));
        note_setup(q.b->to_rtr(pb, start_a));
        q.first_psn = start_a;
        note_setup(q.a->to_rts(start_a));
        note_setup(q.b->to_rts(start_b));
        // The region, with a guard on each side that nothing may write.
        dst_bufs_[i].assign(msg * cfg_.work.depth + 2 * kGuardBytes, kGuardByte);
        std::fill(dst_bufs_[i].begin() + kGuardBytes, dst_bufs_[i].end() - kGuardBytes, 0);
        q.dst = dst_bufs_[i].data() + kGuardBytes;
        q.rkey = ep_[receiver_]
                     ->mrs()
                     .register_region(q.dst, msg * cfg_.work.depth, kAccessRemoteWrite, 1)
                     .value();
        q.src = src_buf_.data();
        q.msgs_total = q.victim ? victim_msgs : msgs;
        app_of_qpn_[q.sender][q.a->qpn()] = i;
        app_of_qpn_[receiver_][q.b->qpn()] = i;
        apps_of_host_[q.sender].push_back(i);
        apps_of_host_[receiver_].push_back(i);
    }
    r_.per_plane_tx_packets.assign(f.planes, 0);
    series_prev_tx_.assign(f.planes, 0);
    pkts_.reserve(4096);
}

namespace {

uint64_t src_offset(uint32_t qi, uint64_t m, uint64_t msg, uint64_t src_size) {
    return ((qi * 7919ull + m * 104729ull) * 61ull) % (src_size - msg + 1);
}

}  // namespace

// After the run, independently of the completions: every QP's region holds
// exactly the last message written to each of its slots, and the guards
// around it are untouched.
void Simulator::final_check() {
    const uint64_t msg = cfg_.work.msg_bytes;
    const uint64_t depth = cfg_.work.depth;
    for (uint32_t qi = 0; qi < apps_.size(); ++qi) {
        const QpApp &q = apps_[qi];
        const std::vector<uint8_t> &buf = dst_bufs_[qi];
        for (size_t i = 0; i < kGuardBytes; ++i) {
            r_.guard_bytes_changed += buf[i] != kGuardByte;
            r_.guard_bytes_changed += buf[buf.size() - 1 - i] != kGuardByte;
        }
        if (q.errored) continue;  // an errored QP's slots may hold part of a message
        const bool imm_done = !cfg_.work.write_imm || q.next_msn_expected == q.msgs_total;
        if (q.completed != q.msgs_total || !imm_done) ++r_.qps_unfinished;
        for (uint64_t slot = 0; slot < depth && slot < q.msgs_total; ++slot) {
            // The last message that went to this slot.
            const uint64_t m = slot + (q.msgs_total - 1 - slot) / depth * depth;
            const uint8_t *want = q.src + src_offset(qi, m, msg, src_buf_.size());
            r_.final_slots_checked++;
            if (std::memcmp(want, q.dst + slot * msg, msg) != 0) ++r_.final_slot_mismatches;
        }
    }
}

void Simulator::post_more(QpApp &q) {
    if (q.errored || now_ps_ < q.start_ps) return;
    const uint32_t qi = static_cast<uint32_t>(&q - apps_.data());
    const uint64_t msg = cfg_.work.msg_bytes;
    while (q.posted < q.msgs_total && q.posted - q.completed < cfg_.work.depth) {
        WriteRequest wr;
        wr.wr_id = q.posted;
        wr.local = q.src + src_offset(qi, q.posted, msg, src_buf_.size());
        wr.length = static_cast<uint32_t>(msg);
        wr.remote_addr = reinterpret_cast<uint64_t>(q.dst) + (q.posted % cfg_.work.depth) * msg;
        wr.rkey = q.rkey;
        wr.with_imm = cfg_.work.write_imm;
        wr.imm = static_cast<uint32_t>(q.posted * 2654435761u);
        if (q.a->post_write(wr) != PostResult::kOk) break;
        ++q.posted;
    }
}

// Completions of one QP: check order and bytes, post more.
void Simulator::app_qp(uint32_t qi) {
    QpApp &q = apps_[qi];
    if (q.done) return;
    SendCompletion *sc = sc_buf_;  // member buffers: no per-call initialisation
    RecvCompletion *rc = rc_buf_;
    uint32_t n;
    const uint64_t msg = cfg_.work.msg_bytes;
    while ((n = q.a->poll_send_cq(sc, 16)) > 0) {
        for (uint32_t i = 0; i < n; ++i) {
            if (sc[i].wr_id != q.next_wr_expected) r_.completions_in_order = false;
            q.next_wr_expected = sc[i].wr_id + 1;
            if (sc[i].status != WcStatus::kSuccess) continue;
            const uint8_t *want = q.src + src_offset(qi, sc[i].wr_id, msg, src_buf_.size());
            const uint8_t *got = q.dst + (sc[i].wr_id % cfg_.work.depth) * msg;
            if (std::memcmp(want, got, msg) != 0)
                ++r_.verify_errors;
            else
                r_.delivered_bytes += msg;
            ++q.completed;
            ++r_.messages;
            last_completion_ps_ = now_ps_;
            q.last_completion_ps = now_ps_;
        }
    }
    while ((n = q.b->poll_recv_cq(rc, 16)) > 0) {
        for (uint32_t i = 0; i < n; ++i) {
            if (rc[i].msn < q.next_msn_expected) ++r_.duplicate_deliveries;
            if (rc[i].msn != q.next_msn_expected) r_.completions_in_order = false;
            if (rc[i].imm != static_cast<uint32_t>(rc[i].msn * 2654435761u) || rc[i].bytes != msg)
                ++r_.verify_errors;
            q.next_msn_expected = rc[i].msn + 1;
            ++r_.imm_delivered;
        }
    }
    if (!q.errored && (q.a->state() == QpState::kError || q.b->state() == QpState::kError)) {
        q.errored = true;
        ++r_.qp_errors;
        Qp *e = q.a->state() == QpState::kError ? q.a : q.b;
        r_.qp_error_causes.push_back(to_string(e->error_cause()));
        if (e == q.a && e->error_cause() == WcStatus::kRetryExceeded) {
            const uint64_t key = (uint64_t{qi} << 24) | e->error_psn().value();
            const auto it = drops_of_psn_.find(key);
            r_.error_psn_drops.push_back(it == drops_of_psn_.end() ? 0 : it->second);
        }
    }
    post_more(q);
    const bool imm_done = !cfg_.work.write_imm || q.next_msn_expected == q.msgs_total;
    if (q.errored || (q.completed == q.msgs_total && imm_done)) {
        q.done = true;
        ++done_qps_;
    }
}

void Simulator::kick_tx(uint32_t h, uint64_t t_ps) {
    if (tx_scheduled_[h] || !ep_[h]->tx_pending()) return;
    tx_scheduled_[h] = true;
    push(t_ps, Ev::kHostTx, h);
}

// Host h's endpoint was called at t_ps and may have armed a timer. Its
// timer wheel fires only at tick boundaries, and a timer armed now fires at
// the first boundary at or after now or later: a look at the endpoint's next
// deadline at that boundary (check_timer) schedules the timer event in
// time. Endpoint::next_timer_ns walks the wheel's slots up to the earliest
// timer, so it is called at most once per tick and host, not after every
// packet; idle stretches cost nothing.
void Simulator::ensure_timer(uint32_t h, uint64_t t_ps) {
    const uint64_t boundary = (t_ps + tick_ps_ - 1) / tick_ps_ * tick_ps_;
    // A pending check is never later than the boundary: both are the first
    // tick boundary at or after a time not later than now.
    if (timer_at_[h] <= boundary || check_at_[h] <= boundary) return;
    check_at_[h] = boundary;
    push(boundary, Ev::kTimerCheck, h);
}

// Schedules host h's timer event at its endpoint's next deadline.
void Simulator::check_timer(uint32_t h, uint64_t t_ps) {
    check_at_[h] = UINT64_MAX;
    const uint64_t d_ns = ep_[h]->next_timer_ns();
    if (d_ns == UINT64_MAX) return;
    const uint64_t when = std::max(d_ns * 1000, t_ps);
    if (when >= timer_at_[h]) return;
    timer_at_[h] = when;
    push(when, Ev::kTimer, h);
}

void Simulator::on_timer(uint32_t h, uint64_t t_ps) {
    if (t_ps != timer_at_[h]) return;  // superseded by an earlier one
    timer_at_[h] = UINT64_MAX;
    Endpoint &ep = *ep_[h];
    const uint32_t armed = ep.armed_timers();
    ep.on_time(t_ps / 1000);
    // A timer completes work only by failing its QP (Qp::fail flushes the
    // send queue); a QP that failed does not re-arm, and the timers that
    // fired may re-arm only themselves: fewer timers armed is the sign to
    // look for failed QPs, and only then are this host's QPs scanned.
    if (ep.armed_timers() < armed)
        for (const uint32_t i : apps_of_host_[h]) {
            const QpApp &q = apps_[i];
            const Qp *mine = is_receiver(h) ? q.b : q.a;
            if (q.done || mine->state() != QpState::kError) continue;
            app_qp(i);
            kick_tx(q.sender, t_ps);
        }
    kick_tx(h, t_ps);
    ensure_timer(h, t_ps);
}

void Simulator::host_tx(uint32_t h, uint64_t t_ps) {
    tx_scheduled_[h] = false;
    const double gbps = cfg_.fabric.link_gbps;
    // Like a NIC's TX rings, one per port: new data goes only to planes
    // whose NIC has less than two MTU frames queued.
    const auto hdrs =
        uint32_t(wire::kDataImmHdrBytes + (cfg_.fabric.ipv6 ? wire::kIpv6ExtraBytes : 0));
    const uint64_t limit_ps = 2 * ser_ps(cfg_.qp.mtu_payload_bytes + hdrs, gbps);
    TxPacket *tx = tx_buf_;
    for (;;) {
        uint8_t room = 0;
        uint64_t next_room_ps = UINT64_MAX;
        for (uint32_t p = 0; p < nic_[h].size(); ++p) {
            const uint64_t busy = nic_[h][p].busy_until_ps;
            if (busy <= t_ps + limit_ps)
                room |= static_cast<uint8_t>(1u << p);
            else
                next_room_ps = std::min(next_room_ps, busy - limit_ps);
        }
        auto retry_later = [&] {
            if (next_room_ps == UINT64_MAX) return;
            tx_scheduled_[h] = true;
            push(next_room_ps, Ev::kHostTx, h);
        };
        if (room == 0) {
            retry_later();
            break;
        }
        for (int i = 0; i < 8; ++i)
            tx[i].hdr = tx_hdr_[i];
        const uint32_t n = ep_[h]->poll_tx(tx, 8, t_ps / 1000, room);
        if (n == 0) {
            // Work may be waiting for a plane whose NIC is full.
            if (ep_[h]->tx_pending()) retry_later();
            break;
        }
        for (uint32_t i = 0; i < n; ++i) {
            const uint32_t pi = alloc_pkt();
            Pkt &p = pkts_[pi];
            std::memcpy(p.hdr, tx[i].hdr, tx[i].hdr_len);
            p.hdr_len = tx[i].hdr_len;
            p.payload = tx[i].payload;
            p.payload_len = tx[i].payload_len;
            p.plane = tx[i].plane;
            p.src = static_cast<uint16_t>(h);
            // Data goes to the receiver; the receiver's acks to the QP's sender.
            p.dst = static_cast<uint16_t>(is_receiver(h) ? apps_[app_of_qpn_[h][tx[i].qpn]].sender
                                                         : receiver_);
            p.data = tx[i].payload_len > 0;
            p.extra_delay_ps = 0;
            // ECMP: the path is a hash of the UDP source port (the EV), or
            // over IPv6 of the flow label (MRC writes the EV into both).
            uint32_t entropy;
            if (frame_ipv6(p.hdr)) {
                const auto *ip6 = reinterpret_cast<const wire::Ipv6Hdr *>(p.hdr + 14);
                entropy = wire::ipv6_flow_label(*ip6);
            } else {
                entropy = uint32_t(p.hdr[34] << 8 | p.hdr[35]);
            }
            p.path = static_cast<uint16_t>(((entropy * 0x9e3779b1u) >> 16) %
                                           cfg_.fabric.paths_per_plane);
            QueueState &nq = nic_[h][p.plane];
            const uint64_t depart =
                std::max(t_ps, nq.busy_until_ps) + ser_ps(p.hdr_len + p.payload_len, gbps);
            nq.busy_until_ps = depart;
            ++r_.packets_sent;
            if (!is_receiver(h) && p.data) {
                ++r_.data_packets_sent;
                ++r_.per_plane_tx_packets[p.plane];
            }
            // With one sender, its NIC is the only feeder of its plane's
            // paths: they see packets in NIC order, so the path is handled
            // right away. Several senders share the paths: an event each.
            if (cfg_.work.senders == 1 || is_receiver(h))
                through_path(pi, depart);
            else
                push(depart, Ev::kPath, pi);
        }
    }
    ensure_timer(h, t_ps);
}

void Simulator::score(uint64_t t_ps) {
    const uint64_t now_ns = t_ps / 1000;
    for (uint32_t h = 0; h < ep_.size(); ++h) {
        Endpoint &ep = *ep_[h];
        ep.apply_path_table(
            scorers_[h].update(now_ns, ep.plane_counters(), ep.ev_gauges(), ep.link_up_mask()),
            now_ns);
        kick_tx(h, t_ps);
        ensure_timer(h, t_ps);
    }
    push(t_ps + cfg_.scorer.period_ns * 1000, Ev::kScore, 0);
}

// A port failure: the hosts on its side see the link go down or up.
void Simulator::sample(uint64_t t_ps) {
    uint64_t placed = 0;
    for (const QpApp &q : apps_)
        placed += q.b->counters().rx_data_bytes;
    r_.series_goodput_gbps.push_back(double(placed - series_prev_bytes_) * 8 /
                                     double(cfg_.series_ns));
    series_prev_bytes_ = placed;
    std::vector<uint64_t> tx(cfg_.fabric.planes);
    for (uint32_t p = 0; p < cfg_.fabric.planes; ++p) {
        tx[p] = r_.per_plane_tx_packets[p] - series_prev_tx_[p];
        series_prev_tx_[p] = r_.per_plane_tx_packets[p];
    }
    r_.series_plane_tx.push_back(std::move(tx));
    r_.series_max_queue_bytes.push_back(series_max_queue_);
    series_max_queue_ = 0;
    push(t_ps + cfg_.series_ns * 1000, Ev::kSample, 0);
}

void Simulator::report() {
    const uint32_t planes = cfg_.fabric.planes;
    const uint64_t now_ns = now_ps_ / 1000;
    r_.planes.assign(planes, PlaneReport{});
    for (uint32_t h = 0; h < receiver_; ++h)
        for (uint32_t p = 0; p < planes; ++p)
            r_.planes[p].counters += ep_[h]->plane_counters()[p];
    if (!scorers_.empty())
        for (uint32_t p = 0; p < planes; ++p) {
            r_.planes[p].score = scorers_[0].score(uint8_t(p));
            r_.planes[p].state = r_.planes[p].score.state;
        }
    r_.qps.reserve(apps_.size());
    size_t evs = 0;
    for (const QpApp &q : apps_)
        evs += q.a->evs().entries().size();
    r_.evs.reserve(evs);
    for (uint32_t qi = 0; qi < apps_.size(); ++qi) {
        const QpApp &q = apps_[qi];
        QpReport qr;
        qr.victim = q.victim;
        qr.bytes = q.completed * cfg_.work.msg_bytes;
        qr.start_ns = q.start_ps / 1000;
        qr.done_ns = q.last_completion_ps / 1000;
        if (qr.done_ns > qr.start_ns)
            qr.goodput_gbps = double(qr.bytes) * 8 / double(qr.done_ns - qr.start_ns);
        r_.qps.push_back(qr);
        const EvSet &qevs = q.a->evs();
        for (uint32_t i = 0; i < qevs.size(); ++i) {
            const EvEntry &e = qevs.entry(i);
            const EvDetail &d = qevs.detail(i);
            EvReport er;
            er.qp = qi;
            er.ev = e.ev;
            er.plane = e.plane;
            er.path = path_of(e.ev, cfg_.fabric.paths_per_plane);
            er.state = e.state;
            if (qevs.usable(i, now_ns)) er.state = EvState::kGood;
            er.active = e.active;
            er.failures = d.failures;
            er.revivals = d.revivals;
            er.min_bad_ns = d.min_bad_ns;
            er.probe_need = d.probe_need;
            r_.evs.push_back(er);
            ++r_.planes[e.plane].evs.state[uint32_t(er.state)];
            ++r_.ev_states.state[uint32_t(er.state)];
        }
    }
}

SimResult Simulator::run() {
    const auto setup_start = std::chrono::steady_clock::now();
    setup();
    r_.setup_wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
    for (auto &q : apps_)
        post_more(q);
    for (uint32_t h = 0; h < receiver_; ++h)
        kick_tx(h, 0);
    for (uint32_t i = 0; i < apps_.size(); ++i)
        if (apps_[i].start_ps > 0) push(apps_[i].start_ps, Ev::kStart, i);
    for (uint32_t i = 0; i < cfg_.fabric.failures.size(); ++i)
        if (cfg_.fabric.failures[i].link >= 0)
            push(cfg_.fabric.failures[i].at_ns * 1000, Ev::kLink, i);
    if (!scorers_.empty()) push(cfg_.scorer.period_ns * 1000, Ev::kScore, 0);
    if (cfg_.series_ns) {
        r_.series_ns = cfg_.series_ns;
        push(cfg_.series_ns * 1000, Ev::kSample, 0);
    }
    const uint64_t max_ps = cfg_.max_sim_ns * 1000;
    while (!heap_.empty() && !all_done()) {
        uint64_t t_ps;
        const Event e = heap_.pop(&t_ps);
        if (t_ps > max_ps) {
            r_.timed_out = true;
            break;
        }
        now_ps_ = t_ps;
        ++r_.events;
        switch (e.kind) {
            case Ev::kPath:
                through_path(e.arg, t_ps);
                break;
            case Ev::kCore:
                through_core(e.arg, t_ps);
                break;
            case Ev::kScore:
                score(t_ps);
                break;
            case Ev::kLink:
                link_event(e.arg, t_ps);
                break;
            case Ev::kSample:
                sample(t_ps);
                break;
            case Ev::kStart:
                post_more(apps_[e.arg]);
                kick_tx(apps_[e.arg].sender, t_ps);
                break;
            case Ev::kLastHop:
                last_hop_arrive(e.arg, t_ps);
                break;
            case Ev::kDeliver:
                deliver(e.arg, t_ps);
                break;
            case Ev::kHostTx:
                host_tx(e.arg, t_ps);
                break;
            case Ev::kTimer:
                on_timer(e.arg, t_ps);
                break;
            case Ev::kTimerCheck:
                check_timer(e.arg, t_ps);
                break;
        }
    }
    if (!all_done() && !r_.timed_out) r_.timed_out = true;  // nothing left to do, yet not finished
    report();
    final_check();
    for (auto &q : apps_) {
        r_.requester += q.a->counters();
        r_.responder += q.b->counters();
    }
    r_.retransmissions = r_.requester.tx_retx_pkts;
    // Placements beyond one per PSN sent would be duplicates.
    if (r_.responder.rx_data_pkts > r_.requester.tx_data_pkts)
        r_.duplicate_deliveries += r_.responder.rx_data_pkts - r_.requester.tx_data_pkts;
    r_.sim_time_ns = last_completion_ps_ / 1000;
    if (r_.sim_time_ns > 0)
        r_.goodput_gbps = double(r_.delivered_bytes) * 8 / double(r_.sim_time_ns);
    const uint64_t imm_expected = cfg_.work.write_imm ? r_.expected_bytes / cfg_.work.msg_bytes : 0;
    r_.verified = r_.verify_errors == 0 && r_.delivered_bytes == r_.expected_bytes &&
                  r_.qp_errors == 0 && r_.duplicate_deliveries == 0 && r_.completions_in_order &&
                  r_.imm_delivered == imm_expected && !r_.timed_out &&
                  r_.final_slot_mismatches == 0 && r_.guard_bytes_changed == 0 &&
                  r_.setup_error.empty();
    return std::move(r_);  // the simulator ends here: no copy of every QP's and EV's report
}

}  // namespace detail

SimResult run(const SimConfig &cfg) {
    detail::Simulator s(cfg);
    return s.run();
}

}  // namespace mrc::sim
