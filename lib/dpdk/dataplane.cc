#include "dpdk/dataplane.h"

#include <fmt/format.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include "common/sleep.h"
#include "port/eal.h"
#include "wire/addr.h"
#include "wire/host.h"

namespace mrc::dp {

Dataplane::Dataplane(const DataplaneConfig &cfg) : cfg_(cfg) {}

uint32_t Dataplane::max_payload_bytes() const {
    // IP MTU minus IPv4 (or, when any plane is IPv6, IPv6's 20 bytes more),
    // UDP and the largest MRC data headers: a QP's payload fits every plane.
    bool v6 = false;
    for (const wire::Ipv6Addr &a : cfg_.plane_ipv6)
        v6 = v6 || !wire::ipv6_is_unspecified(a);
    const uint32_t hdrs = uint32_t(wire::kDataImmHdrBytes - sizeof(wire::EthHdr)) +
                          (v6 ? uint32_t(wire::kIpv6ExtraBytes) : 0);
    return cfg_.mtu_bytes > hdrs ? cfg_.mtu_bytes - hdrs : 0;
}

Result<std::unique_ptr<Dataplane>> Dataplane::create(const DataplaneConfig &cfg) {
    if (cfg.ports.empty()) return Error{"no ports: name one port per plane"};
    if (cfg.ports.size() > kMaxPlanes)
        return Error{
            fmt::format("{} ports given; at most {} planes", cfg.ports.size(), kMaxPlanes)};
    if (cfg.burst == 0 || cfg.burst > 64) return Error{"burst must be in [1, 64]"};
    if (cfg.max_qps_per_worker == 0 || cfg.max_qps_per_worker >= (1u << Dataplane::kQpnWorkerShift))
        return Error{fmt::format("max QPs per worker must be in [1, {}]",
                                 (1u << Dataplane::kQpnWorkerShift) - 1)};
    std::unique_ptr<Dataplane> dp(new Dataplane(cfg));
    if (dp->max_payload_bytes() < 64)
        return Error{fmt::format("MTU {} leaves no room for MRC payload", cfg.mtu_bytes)};

    // Worker lcores: as asked, or every EAL worker.
    std::vector<unsigned> lcores = cfg.worker_lcores;
    if (lcores.empty()) {
        unsigned l;
        RTE_LCORE_FOREACH_WORKER(l) lcores.push_back(l);
    }
    if (lcores.empty())
        return Error{
            "EAL has no worker lcore: give it at least two (-l 0,1, or --lcores 0@0,1@1 to share "
            "CPUs between processes)"};
    for (unsigned l : lcores)
        if (!rte_lcore_is_enabled(l) || l == rte_get_main_lcore())
            return Error{fmt::format("lcore {} is not an EAL worker lcore", l)};
    const uint32_t nworkers = static_cast<uint32_t>(lcores.size());
    if (nworkers > 255) return Error{"at most 255 workers"};

    // One pool for every port and worker: RX rings, TX rings, the workers'
    // stashes and what sits in hand-off rings.
    drivers::PoolSizing ps;
    ps.ports = uint32_t(cfg.ports.size());
    ps.queues_per_port = nworkers;
    ps.rx_desc = cfg.rx_desc;
    ps.tx_desc = cfg.tx_desc;
    ps.burst = cfg.burst;
    ps.lcores = nworkers + 1;
    ps.in_flight = nworkers * (uint32_t(cfg.ports.size()) * Worker::kTxQueueCap + 2 * cfg.burst) +
                   nworkers * nworkers * 1024;
    if (cfg.zero_copy_tx) ps.in_flight *= 2;
    auto pool = drivers::create_mbuf_pool(cfg.name + "_pool", drivers::mbufs_needed(ps),
                                          drivers::mbuf_data_room_for_mtu(cfg.mtu_bytes), 256);
    if (!pool) return pool.error();
    dp->pool_ = *pool;

    for (size_t i = 0; i < cfg.ports.size(); ++i) {
        drivers::PortOptions po;
        po.device = cfg.ports[i];
        po.queues = static_cast<uint16_t>(nworkers);
        po.rx_desc = cfg.rx_desc;
        po.tx_desc = cfg.tx_desc;
        po.mtu_bytes = cfg.mtu_bytes;
        po.steer_udp_port = cfg.mrc_port;
        po.rx_interrupts = cfg.idle == IdleMode::kAdaptive;
        if (i < cfg.plane_ipv4.size()) po.steer_ipv4 = {cfg.plane_ipv4[i]};
        auto port = drivers::Port::open(po, dp->pool_);
        if (!port) return Error{fmt::format("plane {}: {}", i, port.error().message)};
        if (cfg.zero_copy_tx && !(*port)->caps().tx_multi_segs)
            return Error{fmt::format(
                "plane {}: port '{}' ({}) cannot send multi-segment frames: zero-copy transmit "
                "needs them",
                i, (*port)->name(), (*port)->driver())};
        dp->ports_.push_back(std::move(*port));
    }

    for (uint32_t w = 0; w < nworkers; ++w) {
        EndpointConfig ec;
        ec.mrc_port = cfg.mrc_port;
        ec.planes = static_cast<uint8_t>(cfg.ports.size());
        ec.max_qps = cfg.max_qps_per_worker;
        ec.max_mrs = cfg.max_mrs;
        ec.timer_tick_ns = cfg.timer_tick_ns;
        ec.qpn_base = w << kQpnWorkerShift;
        ec.checksums = wire::Checksums::kSkip;  // the worker checks them (or the device did)
        dp->workers_.push_back(std::unique_ptr<Worker>(
            new Worker(dp.get(), w, lcores[w], ec, cfg.max_qps_per_worker)));
    }
    // The wake page (each worker's sleeping word) and the workers' wake fds.
    dp->wake_page_bytes_ = (nworkers * kWakeStride + 4095) / 4096 * 4096;
    dp->wake_memfd_ = ::memfd_create((cfg.name + "-wake").c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (dp->wake_memfd_ < 0 || ::ftruncate(dp->wake_memfd_, off_t(dp->wake_page_bytes_)) != 0)
        return Error{fmt::format("wake page (memfd): {}", std::strerror(errno))};
    dp->wake_page_ = ::mmap(nullptr, dp->wake_page_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED,
                            dp->wake_memfd_, 0);
    if (dp->wake_page_ == MAP_FAILED) {
        dp->wake_page_ = nullptr;
        return Error{fmt::format("wake page (mmap): {}", std::strerror(errno))};
    }
    // Only this mapping writes: whoever gets the fd (mrcd's applications)
    // can map it read-only and nothing else.
    if (::fcntl(dp->wake_memfd_, F_ADD_SEALS,
                F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0)
        return Error{fmt::format("wake page (seals): {}", std::strerror(errno))};
    for (uint32_t w = 0; w < nworkers; ++w) {
        Worker &wk = *dp->workers_[w];
        wk.sleeping_ =
            new (static_cast<uint8_t *>(dp->wake_page_) + w * kWakeStride) std::atomic<uint32_t>(0);
        wk.wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (wk.wake_fd_ < 0)
            return Error{fmt::format("worker {}: eventfd: {}", w, std::strerror(errno))};
    }
    // Hand-off rings: one per (source, owner) pair, single producer and
    // single consumer.
    if (nworkers > 1) {
        for (uint32_t dst = 0; dst < nworkers; ++dst) {
            dp->workers_[dst]->rings_in_.assign(nworkers, nullptr);
            for (uint32_t src = 0; src < nworkers; ++src) {
                if (src == dst) continue;
                const std::string name = fmt::format("{}_h{}_{}", cfg.name, src, dst);
                rte_ring *r = rte_ring_create(name.c_str(), 1024, rte_socket_id(),
                                              RING_F_SP_ENQ | RING_F_SC_DEQ);
                if (r == nullptr)
                    return Error{fmt::format("cannot create hand-off ring {}: {}", name,
                                             rte_strerror(rte_errno))};
                dp->rings_.push_back(r);
                dp->workers_[dst]->rings_in_[src] = r;
            }
        }
    }
    return dp;
}

Dataplane::~Dataplane() {
    stop();
    workers_.clear();
    ports_.clear();  // before the pool: the devices hold its mbufs
    for (rte_ring *r : rings_)
        rte_ring_free(r);
    if (pool_ != nullptr) rte_mempool_free(pool_);
    if (wake_page_ != nullptr) ::munmap(wake_page_, wake_page_bytes_);
    if (wake_memfd_ >= 0) ::close(wake_memfd_);
}

uint8_t Dataplane::read_links() {
    uint8_t m = 0;
    const uint8_t cut = cut_mask_.load(std::memory_order_relaxed);
    for (uint8_t p = 0; p < planes(); ++p)
        if (!(cut & (1u << p)) && ports_[p]->link().up) m |= uint8_t(1u << p);
    return m;
}

Result<void> Dataplane::start() {
    if (auto r = wait_links(); !r) return r;
    return launch();
}

Result<void> Dataplane::wait_links() {
    if (launched_) return Error{"dataplane already started"};
    // Every link up, or a clear message naming the ones that are not.
    for (uint8_t p = 0; p < planes(); ++p) {
        const drivers::LinkState l = ports_[p]->wait_link_up(cfg_.link_wait_ms);
        if (!l.up)
            return Error{fmt::format(
                "plane {}: port '{}' ({}) link still down after {} ms: is the peer running "
                "(memif: the other side, tap: the interface up)?",
                p, ports_[p]->name(), ports_[p]->driver(), cfg_.link_wait_ms)};
    }
    return {};
}

Result<void> Dataplane::launch() {
    if (launched_) return Error{"dataplane already started"};
    const uint8_t links = read_links();
    link_mask_.store(links, std::memory_order_relaxed);
    for (auto &w : workers_)
        for (uint8_t p = 0; p < planes(); ++p)
            w->ep_->set_plane_up(p, links & (1u << p));
    stop_.store(false, std::memory_order_relaxed);
    for (auto &w : workers_) {
        if (int rc = rte_eal_remote_launch(&Worker::launch, w.get(), w->lcore_); rc != 0) {
            stop();
            return Error{fmt::format("cannot launch worker {} on lcore {}: {}", w->index_,
                                     w->lcore_, rte_strerror(-rc))};
        }
    }
    launched_ = true;
    running_.store(true, std::memory_order_release);
    control_ = std::thread([this] { control_loop(); });
    return {};
}

Result<wire::MacAddr> Dataplane::resolve_before_start(uint8_t plane, uint32_t ip,
                                                      uint32_t timeout_ms, uint64_t *dropped) {
    if (plane >= planes()) return Error{fmt::format("no plane {}", plane)};
    const uint32_t me = plane < cfg_.plane_ipv4.size() ? cfg_.plane_ipv4[plane] : 0;
    const wire::MacAddr mine = ports_[plane]->mac();
    uint8_t request[wire::kArpFrameBytes];
    const uint32_t request_len = wire::write_arp_request(request, mine, me, ip);
    const std::string why =
        fmt::format("{} did not answer ARP within {} ms", wire::ipv4_string(ip), timeout_ms);
    return resolve_with(plane, request, request_len, timeout_ms, dropped, why,
                        [&](const uint8_t *f, uint32_t len, uint8_t *out, uint32_t cap,
                            uint32_t *out_len, wire::MacAddr *mac) {
                            if (!wire::is_arp(f, len)) return false;
                            wire::ArpFrom from;
                            wire::answer_host(f, len, mine, me, out, cap, out_len, &from);
                            if (from.ip != ip || from.mac == wire::MacAddr{}) return false;
                            *mac = from.mac;
                            return true;
                        });
}

Result<wire::MacAddr> Dataplane::resolve_before_start(uint8_t plane, const wire::Ipv6Addr &ip,
                                                      uint32_t timeout_ms, uint64_t *dropped) {
    if (plane >= planes()) return Error{fmt::format("no plane {}", plane)};
    const wire::Ipv6Addr me = plane_ipv6(plane);
    if (wire::ipv6_is_unspecified(me))
        return Error{fmt::format("plane {} has no IPv6 address to solicit from", plane)};
    const wire::MacAddr mine = ports_[plane]->mac();
    uint8_t request[wire::kNdFrameBytes];
    const uint32_t request_len = wire::write_nd_solicit(request, mine, me, ip);
    const std::string why = fmt::format("{} did not answer neighbour solicitations within {} ms",
                                        wire::ipv6_string(ip), timeout_ms);
    return resolve_with(plane, request, request_len, timeout_ms, dropped, why,
                        [&](const uint8_t *f, uint32_t len, uint8_t *out, uint32_t cap,
                            uint32_t *out_len, wire::MacAddr *mac) {
                            wire::NdFrom from;
                            wire::answer_host6(f, len, mine, me, out, cap, out_len, &from);
                            // The advert for `ip` (a solicitation from it
                            // names its MAC as well).
                            if (!from.valid || !(from.ip == ip)) return false;
                            *mac = from.mac;
                            return true;
                        });
}

Result<wire::MacAddr> Dataplane::resolve_with(uint8_t plane, const uint8_t *request,
                                              uint32_t request_len, uint32_t timeout_ms,
                                              uint64_t *dropped, const std::string &timeout_why,
                                              const ResolveLook &look) {
    if (launched_) return Error{"the dataplane is running: its workers resolve next hops"};
    drivers::Port &port = *ports_[plane];
    if (port.af_xdp()) return Error{"an AF_XDP port: the kernel resolves its next hops"};
    if (!port.wait_link_up(cfg_.link_wait_ms).up)
        return Error{fmt::format("plane {}: link down", plane)};
    const auto send = [&](const uint8_t *frame, uint32_t len) {
        rte_mbuf *m = rte_pktmbuf_alloc(pool_);
        if (m == nullptr) return;
        char *d = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
        if (d == nullptr) {
            rte_pktmbuf_free(m);
            return;
        }
        std::memcpy(d, frame, len);
        if (port.try_tx_burst(0, &m, 1) != 1) rte_pktmbuf_free(m);
    };
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    auto next_request = Clock::now();
    std::vector<uint8_t> answer(wire::kMaxHostAnswerBytes);
    while (Clock::now() < deadline) {
        if (Clock::now() >= next_request) {
            send(request, request_len);
            next_request = Clock::now() + std::chrono::milliseconds(100);
        }
        bool got = false;
        wire::MacAddr mac{};
        for (uint16_t q = 0; q < port.queues(); ++q) {
            rte_mbuf *pkts[32];
            const uint16_t n = port.rx_burst(q, pkts, 32);
            for (uint16_t i = 0; i < n; ++i) {
                rte_mbuf *m = pkts[i];
                const auto *f = rte_pktmbuf_mtod(m, const uint8_t *);
                const uint32_t len = rte_pktmbuf_data_len(m);
                uint32_t out_len = 0;
                wire::MacAddr found{};
                const bool hit =
                    look(f, len, answer.data(), uint32_t(answer.size()), &out_len, &found);
                if (out_len) send(answer.data(), out_len);
                if (hit) {
                    got = true;
                    mac = found;
                } else if (out_len == 0 && dropped) {
                    ++*dropped;
                }
                rte_pktmbuf_free(m);
            }
        }
        if (got) return mac;
        sleep_for_steady(std::chrono::milliseconds(1));
    }
    return Error{timeout_why};
}

void Dataplane::stop() {
    if (!launched_) return;
    stop_.store(true, std::memory_order_seq_cst);
    wake_all();
    for (auto &w : workers_)
        rte_eal_wait_lcore(w->lcore_);
    if (control_.joinable()) control_.join();
    launched_ = false;
    running_.store(false, std::memory_order_release);
}

Result<void> Dataplane::cut_port(uint8_t plane) {
    if (plane >= planes()) return Error{fmt::format("no plane {}", plane)};
    const auto bit = static_cast<uint8_t>(1u << plane);
    cut_mask_.fetch_or(bit, std::memory_order_seq_cst);
    if (launched_) {
        wake_all();
        // Wait until no worker polls the port any more, then stop it.
        for (int i = 0; i < 10'000; ++i) {
            bool all = true;
            for (auto &w : workers_)
                all = all && (w->cut_ack_.load(std::memory_order_acquire) & bit);
            if (all) break;
            mrc::sleep_for_steady(std::chrono::microseconds(100));
        }
        for (auto &w : workers_)
            if (!(w->cut_ack_.load(std::memory_order_acquire) & bit))
                return Error{fmt::format("worker {} did not let go of plane {}", w->index_, plane)};
    }
    ports_[plane]->stop();
    return {};
}

void Dataplane::deny_plane(uint8_t plane, bool deny) {
    if (plane >= planes()) return;
    const auto bit = static_cast<uint8_t>(1u << plane);
    if (deny)
        deny_mask_.fetch_or(bit, std::memory_order_relaxed);
    else
        deny_mask_.fetch_and(uint8_t(~bit), std::memory_order_relaxed);
}

void Dataplane::deny_ev(uint32_t wire_qpn, uint16_t ev, bool deny) {
    std::lock_guard<std::mutex> g(ev_deny_mu_);
    const EvDenial d{wire_qpn, ev};
    const auto it = std::find(ev_deny_.begin(), ev_deny_.end(), d);
    if (deny && it == ev_deny_.end()) {
        ev_deny_.push_back(d);
        ++ev_deny_gen_;
    } else if (!deny && it != ev_deny_.end()) {
        ev_deny_.erase(it);
        ++ev_deny_gen_;
    }
}

std::vector<EvDenial> Dataplane::denied_evs() const {
    std::lock_guard<std::mutex> g(ev_deny_mu_);
    return ev_deny_;
}

void Dataplane::control_loop() {
    PathScorer scorer(cfg_.scorer, planes());
    uint8_t denied = 0;
    uint64_t ev_gen_applied = 0;
    std::vector<EvDenial> evs_applied;
    uint64_t next_link_ns = 0;
    uint64_t link_events = 0;
    ControlSnapshot cs;
    const auto period = std::chrono::nanoseconds(cfg_.scorer.period_ns);
    while (!stop_.load(std::memory_order_acquire)) {
        const uint64_t now = clock_.now_ns();
        if (now >= next_link_ns) {
            const uint8_t links = read_links();
            const uint8_t old = link_mask_.exchange(links, std::memory_order_seq_cst);
            if (old != links) {
                ++link_events;
                wake_all();
            }
            next_link_ns = now + cfg_.link_poll_ns;
        }
        // Operator denials go through the scorer, which publishes them.
        const uint8_t want = deny_mask_.load(std::memory_order_relaxed);
        for (uint8_t p = 0; p < planes(); ++p)
            if ((want ^ denied) & (1u << p)) scorer.deny_plane(p, want & (1u << p));
        denied = want;
        {
            std::lock_guard<std::mutex> g(ev_deny_mu_);
            if (ev_deny_gen_ != ev_gen_applied) {
                for (const EvDenial &d : evs_applied)
                    if (std::find(ev_deny_.begin(), ev_deny_.end(), d) == ev_deny_.end())
                        scorer.deny_ev(d.qpn, d.ev, false);
                for (const EvDenial &d : ev_deny_)
                    if (std::find(evs_applied.begin(), evs_applied.end(), d) == evs_applied.end())
                        scorer.deny_ev(d.qpn, d.ev, true);
                evs_applied = ev_deny_;
                ev_gen_applied = ev_deny_gen_;
            }
        }

        PlaneCounters sum[kMaxPlanes];
        EvGauges gauges;
        for (auto &w : workers_) {
            WorkerSnapshot s;
            if (!w->snapshot(&s)) continue;
            for (uint8_t p = 0; p < planes(); ++p) {
                sum[p] += s.planes[p];
                gauges.total[p] += s.gauges.total[p];
                gauges.assumed_bad[p] += s.gauges.assumed_bad[p];
                gauges.denied[p] += s.gauges.denied[p];
            }
        }
        const PathTable *t = nullptr;
        if (cfg_.run_scorer) {
            t = &scorer.update(now, sum, gauges, link_mask_.load(std::memory_order_relaxed));
        } else if (scorer.table().generation != table_gen_.load(std::memory_order_relaxed)) {
            t = &scorer.table();
        }
        // Publish a new table only once every worker applied the last one:
        // the slot is theirs to read until then.
        const uint64_t gen = table_gen_.load(std::memory_order_relaxed);
        if (t != nullptr && t->generation != gen) {
            bool all = true;
            for (auto &w : workers_)
                all = all && w->table_gen_seen_.load(std::memory_order_acquire) == gen;
            if (all) {
                table_ = *t;
                table_gen_.store(t->generation, std::memory_order_seq_cst);
                wake_all();
            }
        }
        cs.now_ns = now;
        ++cs.rounds;
        cs.link_up_mask = link_mask_.load(std::memory_order_relaxed);
        cs.link_events = link_events;
        cs.table_generation = table_gen_.load(std::memory_order_relaxed);
        cs.down_mask = scorer.table().down_mask;
        cs.denied_mask = scorer.table().denied_mask;
        for (uint8_t p = 0; p < planes(); ++p)
            cs.score[p] = scorer.score(p);
        ctl_snap_.store(cs);
        // Every worker asleep (adaptive idle): nothing to score, links are
        // looked at ten times less often.
        bool all_asleep = cfg_.idle == IdleMode::kAdaptive;
        for (auto &w : workers_)
            all_asleep = all_asleep && w->sleeping_->load(std::memory_order_relaxed);
        mrc::sleep_for_steady(all_asleep ? 10 * period : period);
    }
}

WorkerSnapshot Dataplane::totals() const {
    WorkerSnapshot t;
    for (const auto &w : workers_) {
        WorkerSnapshot s;
        if (!w->snapshot(&s)) continue;
        t.now_ns = std::max(t.now_ns, s.now_ns);
        t.worker += s.worker;
        const uint64_t *a = counter_array(s.endpoint);
        auto *b = const_cast<uint64_t *>(counter_array(t.endpoint));
        for (size_t i = 0; i < kEndpointCounterCount; ++i)
            b[i] += a[i];
        for (uint8_t p = 0; p < planes(); ++p) {
            t.planes[p] += s.planes[p];
            t.gauges.total[p] += s.gauges.total[p];
            t.gauges.assumed_bad[p] += s.gauges.assumed_bad[p];
            t.gauges.denied[p] += s.gauges.denied[p];
            t.port_tx_pkts[p] += s.port_tx_pkts[p];
            t.port_rx_pkts[p] += s.port_rx_pkts[p];
        }
        t.link_up_mask |= s.link_up_mask;
        t.table_generation = std::max(t.table_generation, s.table_generation);
    }
    return t;
}

QpSummary Dataplane::qp_totals() const {
    QpSummary t;
    for (const auto &w : workers_) {
        QpSummary s;
        if (!w->qp_summary(&s)) continue;
        t.qps += s.qps;
        t.qps_error += s.qps_error;
        t.sum += s.sum;
    }
    return t;
}

}  // namespace mrc::dp
