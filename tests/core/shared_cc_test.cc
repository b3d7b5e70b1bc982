// Scope: state shared per peer (issue 18). Congestion state per (peer,
// plane) (CcConfig::per_peer): many QPs from one endpoint to one peer hold,
// together, what one path window allows in flight, not that window times
// the QP count; QPs held back by the shared window are woken as acks free
// room, every QP finishes, and the path state goes when its last QP does.
// Liveness per peer host (PeerLink): idle QPs to a peer share one
// keepalive per interval, and a silent peer fails every one of them.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "core/endpoint.h"
#include "core/loopback.h"

namespace mrc {
namespace {

constexpr uint32_t kPlanes = 2;
constexpr uint32_t kMtu = 1024;
// Fixed CC: 64 packets, split over the planes (above the shared floor of
// PathCc::kSharedFloorPkts, so the window is what binds).
constexpr uint64_t kWindow = 64 * kMtu;

// Two endpoints with `n` QP pairs between them, all to the same peer.
struct Many {
    std::unique_ptr<Endpoint> a, b;
    std::vector<Qp *> qa, qb;
    std::vector<uint8_t> src, dst;
    uint32_t rkey = 0;
    uint64_t now_ns = 1'000'000;

    Many(uint32_t n, bool per_peer, uint32_t msg, LivenessConfig live = LivenessConfig{0, 0})
        : src(size_t{n} * msg), dst(size_t{n} * msg) {
        EndpointConfig ec;
        ec.planes = kPlanes;
        ec.max_qps = n;
        a = std::make_unique<Endpoint>(ec);
        ec.qpn_base = 1u << 16;
        b = std::make_unique<Endpoint>(ec);
        QpConfig cfg;
        cfg.mtu_payload_bytes = kMtu;
        cfg.cc.algo = CcAlgo::kFixed;
        cfg.cc.fixed_window_bytes = kWindow;
        cfg.cc.per_peer = per_peer;
        cfg.ev.evs = 8;
        cfg.ev.backup_per_plane = 2;
        cfg.ev.min_active = 2;
        cfg.liveness = live;
        for (uint32_t i = 0; i < n; ++i) {
            Qp *x = a->create_qp(cfg).value();
            Qp *y = b->create_qp(cfg).value();
            EXPECT_TRUE(x->to_init(LoopbackPair::kPd));
            EXPECT_TRUE(y->to_init(LoopbackPair::kPd));
            QpPeer px, py;
            px.dst_qpn = b->wire_qpn(*y);
            py.dst_qpn = a->wire_qpn(*x);
            px.planes = py.planes = kPlanes;
            for (uint32_t p = 0; p < kPlanes; ++p) {
                px.path[p].src_ip = py.path[p].dst_ip = LoopbackPair::a_ip(p);
                px.path[p].dst_ip = py.path[p].src_ip = LoopbackPair::b_ip(p);
            }
            EXPECT_TRUE(x->to_rtr(px, Psn(100)));
            EXPECT_TRUE(y->to_rtr(py, Psn(100)));
            EXPECT_TRUE(x->to_rts(Psn(100)));
            EXPECT_TRUE(y->to_rts(Psn(100)));
            qa.push_back(x);
            qb.push_back(y);
        }
        rkey = b->mrs()
                   .register_region(dst.data(), dst.size(), kAccessRemoteWrite, LoopbackPair::kPd)
                   .value();
        for (size_t i = 0; i < src.size(); ++i)
            src[i] = uint8_t(i * 13 + 5);
    }

    // One WRITE of `msg` bytes on every QP, each into its own slot.
    bool post_all(uint32_t msg) {
        for (size_t i = 0; i < qa.size(); ++i) {
            WriteRequest w;
            w.wr_id = i;
            w.local = src.data() + i * msg;
            w.length = msg;
            w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + uint64_t{i} * msg;
            w.rkey = rkey;
            if (qa[i]->post_write(w) != PostResult::kOk) return false;
        }
        return true;
    }

    struct Frame {
        uint8_t plane;
        std::vector<uint8_t> bytes;
    };
    std::vector<Frame> drain(Endpoint &e) {
        std::vector<Frame> out;
        uint8_t hdrs[32][wire::kMaxHdrBytes];
        TxPacket tx[32];
        for (;;) {
            for (int i = 0; i < 32; ++i)
                tx[i].hdr = hdrs[i];
            const uint32_t k = e.poll_tx(tx, 32, now_ns);
            if (k == 0) return out;
            for (uint32_t i = 0; i < k; ++i) {
                Frame f{tx[i].plane, {tx[i].hdr, tx[i].hdr + tx[i].hdr_len}};
                f.bytes.insert(f.bytes.end(), tx[i].payload, tx[i].payload + tx[i].payload_len);
                out.push_back(std::move(f));
            }
        }
    }
    void deliver(Endpoint &e, const std::vector<Frame> &fs) {
        for (const auto &f : fs)
            e.on_packet(f.bytes.data(), uint32_t(f.bytes.size()), f.plane, now_ns);
    }
    static uint64_t data_bytes_on(const std::vector<Frame> &fs, uint8_t plane) {
        uint64_t b = 0;
        for (const auto &f : fs)
            if (f.plane == plane && f.bytes.size() > 100) b += f.bytes.size();
        return b;
    }
};

TEST(SharedCc, ManyQpsToOnePeerHoldOneWindowInFlight) {
    constexpr uint32_t kQps = 40, kMsg = 64 * 1024;
    Many m(kQps, true, kMsg);
    ASSERT_TRUE(m.post_all(kMsg));
    EXPECT_EQ(m.a->shared_paths(), kPlanes) << "one path state per plane for the one peer";
    std::vector<uint32_t> done(kQps, 0);
    uint32_t rounds = 0;
    uint64_t max_inflight[kPlanes] = {};
    for (; rounds < 4000; ++rounds) {
        auto out = m.drain(*m.a);
        for (uint8_t p = 0; p < kPlanes; ++p) {
            const uint64_t f = m.qa[0]->path_cc(p).inflight;
            const uint64_t window = m.qa[0]->path_cc(p).window;
            max_inflight[p] = std::max(max_inflight[p], f);
            // What the QPs hold together on the plane: the window, plus the
            // one packet a path with nothing in flight may always take.
            EXPECT_LE(f, window + kMtu) << "round " << rounds << " plane " << int(p);
            uint64_t sum = 0;
            for (Qp *q : m.qa)
                sum += q->plane_inflight_bytes(p);
            EXPECT_EQ(sum, f) << "the path's count is its QPs' sum";
        }
        m.deliver(*m.b, out);
        m.now_ns += 20'000;  // past the delayed-ack wait
        m.b->on_time(m.now_ns);
        m.deliver(*m.a, m.drain(*m.b));
        m.a->on_time(m.now_ns);
        SendCompletion c[8];
        bool all = true;
        for (uint32_t i = 0; i < kQps; ++i) {
            const uint32_t k = m.qa[i]->poll_send_cq(c, 8);
            for (uint32_t j = 0; j < k; ++j) {
                EXPECT_EQ(c[j].status, WcStatus::kSuccess);
                ++done[i];
            }
            all = all && done[i] == 1;
        }
        if (all) break;
    }
    for (uint32_t i = 0; i < kQps; ++i)
        EXPECT_EQ(done[i], 1u) << "QP " << i << " never finished: a waiter was not woken";
    EXPECT_EQ(std::memcmp(m.src.data(), m.dst.data(), m.src.size()), 0);
    for (uint8_t p = 0; p < kPlanes; ++p)
        EXPECT_GE(max_inflight[p], m.qa[0]->path_cc(p).window) << "the window was used";
    // 40 QPs x 64 KiB through two 32-packet windows: rounds, not one burst.
    EXPECT_GE(rounds, 39u);
    EXPECT_EQ(m.qa[0]->path_cc(0).window + m.qa[0]->path_cc(1).window, kWindow);
}

TEST(SharedCc, PerQpWindowsMultiplyWithTheQpCount) {
    // The reference: each QP its own window, so 40 QPs put 40 windows out.
    constexpr uint32_t kQps = 40, kMsg = 64 * 1024;
    Many m(kQps, false, kMsg);
    ASSERT_TRUE(m.post_all(kMsg));
    EXPECT_EQ(m.a->shared_paths(), 0u);
    auto out = m.drain(*m.a);
    uint64_t total = 0;
    for (uint32_t i = 0; i < kQps; ++i)
        for (uint8_t p = 0; p < kPlanes; ++p)
            total += m.qa[i]->plane_inflight_bytes(p);
    EXPECT_GE(total, uint64_t{kQps} * kWindow) << "each QP filled its own window";
    EXPECT_EQ(m.qa[0]->path_cc(0).window + m.qa[0]->path_cc(1).window, kWindow);
}

TEST(SharedCc, PathStateGoesWithItsLastQpAndErrorsReturnTheirShare) {
    Many m(3, true, 64 * 1024);
    WriteRequest w;
    w.local = m.src.data();
    w.length = 64 * 1024;
    w.remote_addr = reinterpret_cast<uint64_t>(m.dst.data());
    w.rkey = m.rkey;
    ASSERT_EQ(m.qa[0]->post_write(w), PostResult::kOk);
    ASSERT_EQ(m.qa[1]->post_write(w), PostResult::kOk);
    m.drain(*m.a);  // lost: nothing comes back
    const uint64_t before = m.qa[0]->path_cc(0).inflight + m.qa[0]->path_cc(1).inflight;
    EXPECT_GT(before, 0u);
    const uint64_t mine = m.qa[0]->plane_inflight_bytes(0) + m.qa[0]->plane_inflight_bytes(1);
    m.qa[0]->to_error(WcStatus::kFlushed);
    EXPECT_EQ(m.qa[1]->path_cc(0).inflight + m.qa[1]->path_cc(1).inflight, before - mine)
        << "a QP in error holds no room on the path";
    ASSERT_TRUE(m.a->destroy_qp(m.qa[0]->qpn()));
    ASSERT_TRUE(m.a->destroy_qp(m.qa[1]->qpn()));
    EXPECT_EQ(m.a->shared_paths(), kPlanes) << "QP 3 still holds them";
    EXPECT_EQ(m.qa[2]->path_cc(0).inflight + m.qa[2]->path_cc(1).inflight, 0u);
    ASSERT_TRUE(m.a->destroy_qp(m.qa[2]->qpn()));
    EXPECT_EQ(m.a->shared_paths(), 0u);
}
}  // namespace
}  // namespace mrc

namespace mrc {
namespace {

TEST(SharedCc, WaitersAreWokenWhenTheQpsHoldingTheWindowFail) {
    // QP 0 fills both planes' windows; QPs 1 and 2 wait on them. QP 1
    // fails while waiting (it stays in the rings, stale), then QP 0 fails
    // and returns everything it had in flight: QP 2 must get to send and
    // finish, though no ack will ever come for what QP 0 had out (a
    // departure that wakes only a failed QP strands the others: nothing
    // left in flight means no departure to wake them later).
    constexpr uint32_t kMsg = 64 * 1024;
    Many m(3, true, kMsg);
    WriteRequest w;
    w.length = kMsg;
    w.rkey = m.rkey;
    for (uint32_t i = 0; i < 3; ++i) {
        w.wr_id = i;
        w.local = m.src.data() + i * kMsg;
        w.remote_addr = reinterpret_cast<uint64_t>(m.dst.data()) + uint64_t{i} * kMsg;
        ASSERT_EQ(m.qa[i]->post_write(w), PostResult::kOk);
        m.drain(*m.a);  // lost: nothing of it comes back
    }
    EXPECT_EQ(m.qa[1]->plane_inflight_bytes(0) + m.qa[1]->plane_inflight_bytes(1) +
                  m.qa[2]->plane_inflight_bytes(0) + m.qa[2]->plane_inflight_bytes(1),
              0u)
        << "QPs 1 and 2 wait for the window";
    m.qa[1]->to_error(WcStatus::kFlushed);
    m.qa[0]->to_error(WcStatus::kFlushed);
    SendCompletion c[8];
    bool done = false;
    for (int round = 0; round < 400 && !done; ++round) {
        auto out = m.drain(*m.a);
        m.deliver(*m.b, out);
        m.now_ns += 20'000;
        m.b->on_time(m.now_ns);
        m.deliver(*m.a, m.drain(*m.b));
        m.a->on_time(m.now_ns);
        for (uint32_t k = m.qa[2]->poll_send_cq(c, 8), j = 0; j < k; ++j) {
            EXPECT_EQ(c[j].status, WcStatus::kSuccess);
            done = true;
        }
    }
    EXPECT_TRUE(done) << "QP 2 was never woken";
    EXPECT_EQ(std::memcmp(m.src.data() + 2 * kMsg, m.dst.data() + 2 * kMsg, kMsg), 0);
}

uint64_t keepalives(const std::vector<Qp *> &qs) {
    uint64_t k = 0;
    for (const Qp *q : qs)
        k += q->counters().tx_keepalives;
    return k;
}

TEST(SharedLiveness, IdleQpsToOnePeerShareOneKeepalivePerInterval) {
    constexpr uint32_t kQps = 50;
    constexpr uint64_t kKeepaliveNs = 100'000'000, kTimeoutNs = 500'000'000;
    Many m(kQps, true, 1024, LivenessConfig{kKeepaliveNs, kTimeoutNs});
    EXPECT_EQ(m.a->peer_links(), 1u);
    const uint64_t start = m.now_ns, span = 2'000'000'000;
    while (m.now_ns - start < span) {
        m.now_ns += 5'000'000;
        m.a->on_time(m.now_ns);
        m.b->on_time(m.now_ns);
        m.deliver(*m.b, m.drain(*m.a));
        m.deliver(*m.a, m.drain(*m.b));
    }
    for (uint32_t i = 0; i < kQps; ++i) {
        EXPECT_EQ(m.qa[i]->state(), QpState::kRts) << "QP " << i;
        EXPECT_EQ(m.qb[i]->state(), QpState::kRts) << "QP " << i;
    }
    // One per interval for the peer (the answers count as heard), not one
    // per QP: 50 QPs alone would have sent 50 x 20.
    const uint64_t intervals = span / kKeepaliveNs;
    for (const auto *side : {&m.qa, &m.qb}) {
        EXPECT_GE(keepalives(*side), intervals / 4);
        EXPECT_LE(keepalives(*side), intervals + 2);
    }
}

TEST(SharedLiveness, ASilentPeerFailsEveryQpToItAndIsAskedOncePerInterval) {
    constexpr uint32_t kQps = 50;
    constexpr uint64_t kKeepaliveNs = 100'000'000, kTimeoutNs = 500'000'000;
    Many m(kQps, true, 1024, LivenessConfig{kKeepaliveNs, kTimeoutNs});
    m.a->on_time(m.now_ns);  // liveness starts when the timers first run
    const uint64_t start = m.now_ns;
    // B says nothing from here on (its host stalled, or died).
    while (m.now_ns - start < kTimeoutNs + 50'000'000) {
        m.now_ns += 5'000'000;
        m.a->on_time(m.now_ns);
        m.drain(*m.a);
    }
    for (uint32_t i = 0; i < kQps; ++i) {
        EXPECT_EQ(m.qa[i]->state(), QpState::kError) << "QP " << i;
        EXPECT_EQ(m.qa[i]->error_cause(), WcStatus::kPeerUnreachable) << "QP " << i;
        EXPECT_EQ(m.qa[i]->counters().peer_timeouts, 1u) << "QP " << i;
    }
    EXPECT_GE(keepalives(m.qa), kTimeoutNs / kKeepaliveNs - 1);
    EXPECT_LE(keepalives(m.qa), kTimeoutNs / kKeepaliveNs + 1);
}

TEST(SharedLiveness, OneQpsTrafficKeepsTheOthersToThePeerAlive) {
    // QP 0 keeps moving data; the others are idle and send no keepalive
    // of their own while the peer is heard through QP 0.
    constexpr uint32_t kQps = 20;
    Many m(kQps, true, 1024, LivenessConfig{100'000'000, 500'000'000});
    const uint64_t start = m.now_ns;
    WriteRequest w;
    w.local = m.src.data();
    w.length = 1024;
    w.remote_addr = reinterpret_cast<uint64_t>(m.dst.data());
    w.rkey = m.rkey;
    while (m.now_ns - start < 1'500'000'000) {
        ASSERT_EQ(m.qa[0]->post_write(w), PostResult::kOk);
        m.now_ns += 5'000'000;
        m.a->on_time(m.now_ns);
        m.b->on_time(m.now_ns);
        m.deliver(*m.b, m.drain(*m.a));
        m.deliver(*m.a, m.drain(*m.b));
        SendCompletion c[8];
        while (m.qa[0]->poll_send_cq(c, 8) != 0) {
        }
    }
    for (uint32_t i = 0; i < kQps; ++i)
        EXPECT_EQ(m.qa[i]->state(), QpState::kRts) << "QP " << i;
    EXPECT_EQ(keepalives(m.qa), 0u) << "the peer was heard all along";
}

// Reverse-EV refreshes are bounded per peer: 128 receiving QPs to one
// peer send about kRefreshQpsPerPeer QPs' worth between them, not 128.
uint64_t reverse_probes_sent(uint32_t qps, uint64_t *answered) {
    constexpr uint32_t kMsg = 2048;
    Many m(qps, false, kMsg, LivenessConfig{100'000'000, 500'000'000});
    auto counted = [&] {
        uint64_t n = 0, ok = 0;
        for (const Qp *q : m.qb) {
            n += q->counters().tx_reverse_probes;
            ok += q->counters().reverse_probes_ok;
        }
        *answered = ok;
        return n;
    };
    std::vector<uint32_t> out(qps, 0);
    bool warmed = false;
    uint64_t at_warm = 0, ok_at_warm = 0;
    const uint64_t start = m.now_ns, warm = 2'000'000, span = 6'000'000;
    while (m.now_ns - start < warm + span) {
        // Every QP keeps a WRITE or two in flight all along.
        for (uint32_t i = 0; i < qps; ++i) {
            SendCompletion c[4];
            out[i] -= m.qa[i]->poll_send_cq(c, 4);
            while (out[i] < 2) {
                WriteRequest w;
                w.local = m.src.data() + size_t{i} * kMsg;
                w.length = kMsg;
                w.remote_addr = reinterpret_cast<uint64_t>(m.dst.data()) + uint64_t{i} * kMsg;
                w.rkey = m.rkey;
                EXPECT_EQ(m.qa[i]->post_write(w), PostResult::kOk);
                ++out[i];
            }
        }
        m.now_ns += 4'000;
        m.a->on_time(m.now_ns);
        m.b->on_time(m.now_ns);
        m.deliver(*m.b, m.drain(*m.a));
        m.deliver(*m.a, m.drain(*m.b));
        if (!warmed && m.now_ns - start >= warm) {
            warmed = true;  // counted from here: the first probes verify, later ones refresh
            at_warm = counted();
            ok_at_warm = *answered;
        }
    }
    for (uint32_t i = 0; i < qps; ++i) {
        EXPECT_EQ(m.qa[i]->state(), QpState::kRts) << "QP " << i;
        EXPECT_GT(m.qb[i]->counters().rx_data_pkts, 100u) << "QP " << i;
    }
    const uint64_t n = counted() - at_warm;
    *answered -= ok_at_warm;
    return n;
}

TEST(SharedLiveness, ReverseRefreshesAreBoundedPerPeerNotPerQp) {
    uint64_t ok_few = 0, ok_many = 0;
    const uint64_t few = reverse_probes_sent(Qp::kRefreshQpsPerPeer / 2, &ok_few);
    const uint64_t many = reverse_probes_sent(Qp::kRefreshQpsPerPeer * 8, &ok_many);
    // 8 QPs refresh at their own pace; 128 add up to 16 QPs' worth (2x),
    // where a pace per QP would be 16x.
    EXPECT_GT(few, 0u);
    EXPECT_LE(many, 3 * few) << "8 QPs sent " << few;
    // Refreshing goes on (bounded, not starved), and is answered.
    EXPECT_GE(many, few) << "8 QPs sent " << few;
    EXPECT_GE(ok_many, many / 2);
    std::printf("reverse probes to one peer: %u QPs %lu, %u QPs %lu\n", Qp::kRefreshQpsPerPeer / 2,
                (unsigned long)few, Qp::kRefreshQpsPerPeer * 8, (unsigned long)many);
}

// RTT shared per (peer, plane): what one QP measures, the others to the
// same peer go by until they have samples of their own.

// Frames between A and B take `one_way_ns` each way (a deep queue).
struct Delayed {
    Many &m;
    uint64_t one_way_ns;
    std::deque<std::pair<uint64_t, Many::Frame>> ab, ba;

    void step(uint64_t dt_ns) {
        m.now_ns += dt_ns;
        m.a->on_time(m.now_ns);
        m.b->on_time(m.now_ns);
        for (auto &f : m.drain(*m.a))
            ab.emplace_back(m.now_ns + one_way_ns, std::move(f));
        for (auto &f : m.drain(*m.b))
            ba.emplace_back(m.now_ns + one_way_ns, std::move(f));
        arrive(ab, *m.b);
        arrive(ba, *m.a);
    }
    void arrive(std::deque<std::pair<uint64_t, Many::Frame>> &q, Endpoint &to) {
        while (!q.empty() && q.front().first <= m.now_ns) {
            const Many::Frame &f = q.front().second;
            to.on_packet(f.bytes.data(), uint32_t(f.bytes.size()), f.plane, m.now_ns);
            q.pop_front();
        }
    }
    // QP i of A keeps two WRITEs of `msg` bytes in flight.
    void keep_busy(uint32_t i, uint32_t msg, uint32_t &out) {
        SendCompletion c[4];
        out -= m.qa[i]->poll_send_cq(c, 4);
        while (out < 2) {
            WriteRequest w;
            w.local = m.src.data() + size_t{i} * msg;
            w.length = msg;
            w.remote_addr = reinterpret_cast<uint64_t>(m.dst.data()) + uint64_t{i} * msg;
            w.rkey = m.rkey;
            ASSERT_EQ(m.qa[i]->post_write(w), PostResult::kOk);
            ++out;
        }
    }
};

TEST(SharedRtt, AQpWithoutSamplesTimesOutByWhatItsPeersQpsMeasured) {
    constexpr uint32_t kMsg = 16 * 1024;
    constexpr uint64_t kOneWayNs = 3'000'000;  // RTT 6 ms, above the 1 ms RTO floor
    Many m(2, true, kMsg);
    Delayed d{m, kOneWayNs, {}, {}};
    const uint64_t fresh_rto = m.qa[1]->rto_ns(0);
    EXPECT_LT(fresh_rto, 2 * kOneWayNs) << "nothing known yet: the configured start";
    uint32_t out = 0;
    for (int i = 0; i < 400; ++i) {  // 40 ms: QP 0 alone moves data
        d.keep_busy(0, kMsg, out);
        d.step(100'000);
    }
    ASSERT_TRUE(m.qa[0]->rtt(0).has_sample());
    EXPECT_GE(m.qa[0]->rtt(0).srtt_ns(), 2 * kOneWayNs);
    EXPECT_FALSE(m.qa[1]->rtt(0).has_sample()) << "QP 1 sent nothing";
    // QP 1's first packet waits for the path's RTT, not the 1 ms guess
    // that would time out (and resend) everything it sends.
    for (uint8_t p = 0; p < kPlanes; ++p) {
        EXPECT_GE(m.qa[1]->rto_ns(p), 2 * kOneWayNs) << "plane " << int(p);
        EXPECT_EQ(m.qa[1]->rto_ns(p), m.qa[0]->rto_ns(p)) << "plane " << int(p);
    }
    // And it sends without a single timeout.
    uint32_t out1 = 0;
    for (int i = 0; i < 400; ++i) {
        d.keep_busy(0, kMsg, out);
        d.keep_busy(1, kMsg, out1);
        d.step(100'000);
    }
    EXPECT_GT(m.qb[1]->counters().rx_data_pkts, 50u);
    EXPECT_EQ(m.qa[1]->counters().ack_timeouts, 0u);
    EXPECT_EQ(m.qa[1]->counters().tail_probes, 0u);
    EXPECT_EQ(m.qa[1]->counters().tx_retx_pkts, 0u);
}

TEST(SharedRtt, AReceiveOnlyQpLearnsTheRttFromLateProbeRepliesAndStopsReplacingEvs) {
    // B's QPs only receive: their RTT comes from reverse-probe replies
    // alone. A reply later than the first probe timeout (1 ms, nothing
    // measured) still measures the path; after it, probes are answered in
    // time and the reverse EVs stay.
    constexpr uint32_t kMsg = 16 * 1024;
    constexpr uint64_t kOneWayNs = 2'000'000;
    Many m(4, true, kMsg);
    Delayed d{m, kOneWayNs, {}, {}};
    std::vector<uint32_t> out(4, 0);
    auto totals = [&](uint64_t *ok, uint64_t *replaced) {
        *ok = *replaced = 0;
        for (const Qp *q : m.qb) {
            *ok += q->counters().reverse_probes_ok;
            *replaced += q->counters().reverse_evs_replaced;
        }
    };
    for (int i = 0; i < 2000; ++i) {  // 200 ms
        for (uint32_t q = 0; q < 4; ++q)
            d.keep_busy(q, kMsg, out[q]);
        d.step(100'000);
    }
    uint64_t ok0, replaced0;
    totals(&ok0, &replaced0);
    for (const Qp *q : m.qb)
        EXPECT_TRUE(q->rtt(0).has_sample() || q->rtt(1).has_sample());
    for (int i = 0; i < 2000; ++i) {  // 200 ms more
        for (uint32_t q = 0; q < 4; ++q)
            d.keep_busy(q, kMsg, out[q]);
        d.step(100'000);
    }
    uint64_t ok1, replaced1;
    totals(&ok1, &replaced1);
    EXPECT_GT(ok1 - ok0, 0u) << "refreshes answered in time";
    EXPECT_EQ(replaced1 - replaced0, 0u) << "no EV replaced on a path that loses nothing";
    EXPECT_GT(ok1, replaced1);
    std::printf("reverse probes: %lu answered, %lu EVs replaced (first 200 ms: %lu, %lu)\n",
                (unsigned long)ok1, (unsigned long)replaced1, (unsigned long)ok0,
                (unsigned long)replaced0);
}

}  // namespace
}  // namespace mrc
