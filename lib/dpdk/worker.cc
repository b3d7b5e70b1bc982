// The worker loop: run to completion, no locks, no allocation per packet.
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_memcpy.h>
#include <rte_pause.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include <sched.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "dpdk/dataplane.h"
#include "dpdk/rx_frame.h"
#include "wire/host.h"

namespace mrc::dp {

namespace {

constexpr uint64_t kControlPeriodNs = 10'000;  // how often a worker looks at control inputs
// A loop that starts this long after the one before was descheduled (or
// slept): it reads the RX backlog before it runs timers, for at most
// kMaxTimerDeferrals loops.
constexpr uint64_t kStallNs = 100'000;
constexpr uint32_t kMaxTimerDeferrals = 64;
constexpr uint64_t kSnapshotPeriodNs = 20'000;
// kAdaptive: the longest sleep of a worker whose every port has RX
// interrupts; it wakes this often to publish a slice of QP snapshots.
constexpr uint64_t kMaxSleepNs = 10'000'000;
constexpr uint32_t kWakeTag = 0xffff;  // epoll data of the wake fd (ports: their plane)

// A no-op free callback: registered memory outlives every mbuf that points
// into it (the dataplane stops and drains before memory is released).
void extbuf_free(void *, void *) {}

}  // namespace

Worker::Worker(Dataplane *dp, uint32_t index, unsigned lcore, const EndpointConfig &ec,
               uint32_t max_qps)
    : dp_(dp),
      index_(index),
      lcore_(lcore),
      clock_(&dp->clock_),
      ep_(std::make_unique<Endpoint>(ec)),
      qp_snaps_(new Seqlock<QpSnapshot>[max_qps + 1]) {
    stash_.reserve(2 * dp->cfg_.burst);
}

Worker::~Worker() {
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

const char *to_string(IdleMode m) {
    switch (m) {
        case IdleMode::kBusy:
            return "busy";
        case IdleMode::kSleep:
            return "sleep";
        case IdleMode::kYield:
            return "yield";
        case IdleMode::kAdaptive:
            return "adaptive";
    }
    return "?";
}

bool parse_idle_mode(std::string_view s, IdleMode *out) {
    for (IdleMode m : {IdleMode::kBusy, IdleMode::kSleep, IdleMode::kYield, IdleMode::kAdaptive})
        if (s == to_string(m)) {
            *out = m;
            return true;
        }
    return false;
}

void Worker::ring_wake_fd() {
    const uint64_t one = 1;
    // EAGAIN: the counter is already non-zero, the worker will wake anyway.
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

Result<void> Worker::open_sleep_set() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return Error{fmt::format("epoll_create1: {}", std::strerror(errno))};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = kWakeTag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0)
        return Error{fmt::format("epoll_ctl (wake fd): {}", std::strerror(errno))};
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        const int fd = dp_->ports_[p]->rx_intr_fd(uint16_t(index_));
        if (fd < 0) continue;
        ev.data.u32 = p;
        if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0) intr_ports_ |= uint8_t(1u << p);
    }
    return {};
}

void Worker::end_sleep_arming() {
    sleeping_->store(0, std::memory_order_relaxed);
    for (uint8_t p = 0; p < dp_->planes(); ++p)
        if (intr_ports_ & (1u << p)) dp_->ports_[p]->rx_intr_disable(uint16_t(index_));
    sleep_armed_ = false;
}

void Worker::sleep_until(uint64_t limit_ns) {
    ++ctr_.idle_sleeps;
    int n = 0;
    epoll_event ev[kMaxPlanes + 1];
    if (epoll_fd_ >= 0) {
        const timespec ts{long(limit_ns / 1'000'000'000), long(limit_ns % 1'000'000'000)};
        n = ::epoll_pwait2(epoll_fd_, ev, kMaxPlanes + 1, &ts, nullptr);
        if (n < 0 && errno == ENOSYS)  // before Linux 5.11: milliseconds, rounded up
            n = ::epoll_wait(epoll_fd_, ev, kMaxPlanes + 1, int((limit_ns + 999'999) / 1'000'000));
    } else {
        const timespec ts{0, long(std::min<uint64_t>(limit_ns, 999'999'999))};
        nanosleep(&ts, nullptr);
    }
    bool by_event = false, by_rx = false;
    for (int i = 0; i < n; ++i) {
        if (ev[i].data.u32 == kWakeTag) {
            uint64_t v;
            [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &v, sizeof v);
            by_event = true;
        } else {
            by_rx = true;
        }
    }
    end_sleep_arming();
    if (by_event) ++ctr_.wakes_event;
    if (by_rx) ++ctr_.wakes_rx;
    const DataplaneConfig &cfg = dp_->cfg_;
    if (n <= 0) {
        ++ctr_.wakes_timeout;
        quantum_ns_ = std::min<uint64_t>(2 * quantum_ns_, uint64_t(cfg.idle_sleep_max_us) * 1000);
    } else {
        quantum_ns_ = uint64_t(cfg.idle_sleep_us) * 1000;
    }
}

int Worker::run() {
    const DataplaneConfig &cfg = dp_->cfg_;
    const uint8_t planes = dp_->planes();
    port_enabled_ = static_cast<uint8_t>((1u << planes) - 1);
    max_frame_ = uint32_t(RTE_ETHER_HDR_LEN) + cfg.mtu_bytes;
    link_mask_ = ep_->link_up_mask();
    uint64_t now = clock_->now_ns();
    if (cfg.idle == IdleMode::kAdaptive) {
        // Sleeps end when asked to, not up to 50 us later (the default slack).
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        if (auto r = open_sleep_set(); !r)
            std::fprintf(stderr, "worker %u: %s: sleeping without a wake set (poll quantum only)\n",
                         index_, r.error().message.c_str());
        quantum_ns_ = uint64_t(cfg.idle_sleep_us) * 1000;
        last_work_ns_ = now;
    }
    next_tick_ns_ = now;
    if (index_ == 0) announce_addresses();
    control(now);
    publish(now);
    publish_qps(now, cfg.max_qps_per_worker);
    while (!dp_->stop_.load(std::memory_order_relaxed)) {
        const uint64_t prev = now;
        now = clock_->now_ns();
        ++ctr_.loops;
        // Cycles per stage, read from the TSC at the stage boundaries (the
        // RX of a port with nothing pending adds no reading). They count
        // only for a loop that did work; an empty one is idle as a whole.
        // TX bursts, wherever they happen (flush()), are a stage of their own.
        LoopCycles lc;
        const uint64_t tx_packets_start = ctr_.tx_packets;
        const uint64_t loop_start = rte_rdtsc();
        uint64_t mark = loop_start;
        const uint64_t tx_io_start = tx_io_cycles_;
        uint64_t io_mark = tx_io_start;
        const auto stage = [&](uint64_t &acc) {
            const uint64_t t = rte_rdtsc();
            acc += (t - mark) - (tx_io_cycles_ - io_mark);
            mark = t;
            io_mark = tx_io_cycles_;
        };
        if (now - prev > kStallNs) catching_up_ = true;
        uint32_t work = 0;
        bool backlog = false;
        // The port polled first turns with every loop: the ones polled
        // last would otherwise always wait behind the others' bursts, and
        // that extra delay reads as congestion on their paths (planes 0..3
        // carried about 35/26/21/19% of the data with a fixed order).
        rx_first_ = uint8_t(rx_first_ + 1 < planes ? rx_first_ + 1 : 0);
        for (uint8_t k = 0, p = rx_first_; k < planes;
             ++k, p = uint8_t(p + 1 < planes ? p + 1 : 0)) {
            if (!(port_enabled_ & (1u << p))) continue;
            rte_mbuf *pkts[64];
            const uint16_t n =
                dp_->ports_[p]->rx_burst(uint16_t(index_), pkts, std::min<uint16_t>(cfg.burst, 64));
            if (n) {
                // A full burst means frames are queueing in the RX ring: this
                // host is the bottleneck, and says so as a switch would, with
                // CE marks (NSCC slows the senders down before the ring overflows).
                const bool full = n == std::min<uint16_t>(cfg.burst, 64);
                backlog |= full;
                full_bursts_ = full ? full_bursts_ + 1 : 0;
                mark_ce_ = cfg.ecn_full_bursts && full_bursts_ >= cfg.ecn_full_bursts;
                stage(lc.rx_io);
                rx_frames(p, pkts, n, now);
                stage(lc.rx);
                work += n;
            }
        }
        stage(lc.rx_io);
        if (!rings_in_.empty()) {
            work += rx_handoff(now);
            stage(lc.rx);
        }
        if (now >= next_tick_ns_) {
            // Acks before timers: after this worker was descheduled, the
            // RX rings hold what arrived meanwhile, and a timeout judged
            // before those acks are read would resend what has arrived
            // (and blame a silent peer). While catching up after such a
            // gap, a full burst means more is waiting: the timers wait for
            // a bounded number of loops. (Not in steady state: a receiver
            // that is simply busy keeps its timers on time.)
            if (backlog && catching_up_ && timer_deferrals_ < kMaxTimerDeferrals) {
                ++timer_deferrals_;
                ++ctr_.timers_deferred;
            } else {
                timer_deferrals_ = 0;
                catching_up_ = false;
                ep_->on_time(now);
                next_tick_ns_ = now + cfg.timer_tick_ns;
                stage(lc.timers);
            }
        }
        if (app_ != nullptr) {
            work += app_->poll(*this, now);
            stage(lc.app);
        }
        work += tx(now);
        stage(lc.tx);
        if (now >= next_control_ns_) {
            control(now);
            next_control_ns_ = now + kControlPeriodNs;
            if (now >= next_qp_snap_ns_) {
                publish_qps(now, kQpSnapSlice);
                next_qp_snap_ns_ = now + cfg.qp_snapshot_ns;
            }
            stage(lc.control);
        }
        // Frames the ports took count as work wherever they were built
        // (a flush of what an earlier loop queued, one from control()).
        work += uint32_t(ctr_.tx_packets - tx_packets_start);
        const uint64_t loop_end = rte_rdtsc();
        if (work != 0) {
            ++ctr_.busy_loops;
            ctr_.cycles_busy += loop_end - loop_start;
            ctr_.cycles_rx_io += lc.rx_io;
            ctr_.cycles_rx += lc.rx;
            ctr_.cycles_timers += lc.timers;
            ctr_.cycles_app += lc.app;
            ctr_.cycles_tx += lc.tx;
            ctr_.cycles_tx_io += tx_io_cycles_ - tx_io_start;
            ctr_.cycles_control += lc.control;
            empty_polls_ = 0;
            last_work_ns_ = now;
            if (sleep_armed_) end_sleep_arming();
            quantum_ns_ = uint64_t(cfg.idle_sleep_us) * 1000;
            continue;
        }
        ctr_.cycles_idle += loop_end - loop_start;
        if (cfg.idle == IdleMode::kYield) {
            if (++empty_polls_ >= cfg.idle_yield_polls) {
                ++ctr_.idle_yields;
                sched_yield();
                ctr_.cycles_asleep += rte_rdtsc() - loop_end;
            }
        } else if (cfg.idle == IdleMode::kAdaptive) {
            if (now - last_work_ns_ < uint64_t(cfg.idle_spin_us) * 1000) {
                if (++empty_polls_ >= cfg.idle_yield_polls) {
                    ++ctr_.idle_yields;
                    sched_yield();
                    ctr_.cycles_asleep += rte_rdtsc() - loop_end;
                }
            } else if (!sleep_armed_) {
                // Wakers first learn that the worker sleeps, then the worker
                // looks at its inputs once more (the next loop): whatever comes
                // after that look finds the word set and writes the wake fd, or
                // raises an RX interrupt. publish(): readers see where it stopped.
                for (uint8_t p = 0; p < planes; ++p)
                    if (intr_ports_ & port_enabled_ & (1u << p))
                        dp_->ports_[p]->rx_intr_enable(uint16_t(index_));
                sleeping_->store(1, std::memory_order_seq_cst);
                std::atomic_thread_fence(std::memory_order_seq_cst);
                sleep_armed_ = true;
                next_control_ns_ = 0;  // the last look reads the control inputs too
                publish(now);
            } else {
                uint64_t timer = ep_->next_timer_ns();
                if (app_ != nullptr) timer = std::min(timer, app_->next_due_ns(now));
                uint64_t limit = (port_enabled_ & ~intr_ports_) ? quantum_ns_ : kMaxSleepNs;
                if (timer != UINT64_MAX) limit = timer > now ? std::min(limit, timer - now) : 0;
                if (limit != 0) {
                    sleep_until(limit);
                    ctr_.cycles_asleep += rte_rdtsc() - loop_end;
                } else {
                    end_sleep_arming();  // a timer is due
                }
            }
        } else if (cfg.idle == IdleMode::kSleep && ++empty_polls_ >= cfg.idle_polls) {
            // Nothing to do for a while: let the other processes of a
            // shared machine run. Never sleep past a due timer by much: the
            // core's timers are in tens of microseconds at the least.
            ++ctr_.idle_sleeps;
            const timespec ts{0, long(cfg.idle_sleep_us) * 1000};
            nanosleep(&ts, nullptr);
            ctr_.cycles_asleep += rte_rdtsc() - loop_end;
            empty_polls_ = cfg.idle_polls / 2;
        }
    }
    drain();
    publish(clock_->now_ns());
    publish_qps(clock_->now_ns(), cfg.max_qps_per_worker);
    return 0;
}

void Worker::rx_frames(uint8_t plane, rte_mbuf **pkts, uint16_t n, uint64_t now_ns) {
    const DataplaneConfig &cfg = dp_->cfg_;
    const uint32_t nworkers = dp_->workers();
    port_rx_[plane] += n;
    ctr_.rx_packets += n;
    // Cache hints: two frames ahead the frame's headers, one ahead (its
    // headers near by then) the QP it is for. A frame's MRC offset is found
    // once, a step ahead, and used again on its own turn.
    if (n > 0) rte_prefetch0(rte_pktmbuf_mtod(pkts[0], void *));
    if (n > 1) rte_prefetch0(rte_pktmbuf_mtod(pkts[1], void *));
    uint32_t next_off = n > 0 ? payload_offset(pkts[0], cfg.mrc_port) : 0;
    for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf *m = pkts[i];
        const uint32_t off = next_off;
        if (i + 2 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 2], void *));
        if (i + 1 < n) {
            next_off = payload_offset(pkts[i + 1], cfg.mrc_port);
            if (next_off != 0) {
                const uint32_t q =
                    frame_qpn(rte_pktmbuf_mtod(pkts[i + 1], const uint8_t *), next_off);
                if (Dataplane::owner_of(q) == index_) ep_->prefetch_qp(q);
            }
        }
        ctr_.rx_bytes += m->pkt_len;
        if (m->nb_segs != 1) {
            ++ctr_.rx_multiseg;
            continue;
        }
        const auto *f = rte_pktmbuf_mtod(m, const uint8_t *);
        const uint32_t len = m->data_len;
        if (off == 0) {
            host_frame(plane, f, len, now_ns);
            continue;
        }
        // Lengths before anything reads by them (the checksum below does).
        const uint32_t l2 = f[12] == 0x81 ? 18 : 14;
        const bool v6 = (f[l2] >> 4) == 6;  // mrc_payload_offset checked the ether type
        const uint32_t ip_len =
            v6 ? uint32_t(sizeof(wire::Ipv6Hdr)) + (uint32_t(f[l2 + 4]) << 8 | f[l2 + 5])
               : uint32_t(f[l2 + 2]) << 8 | f[l2 + 3];
        const uint32_t udp_len = uint32_t(f[off - 4]) << 8 | f[off - 3];
        if (l2 + ip_len > len || off - 8 + udp_len > l2 + ip_len || udp_len < 8) {
            ++ctr_.rx_truncated;
            continue;
        }
        // Checksums: trust the device when it checked; else check here.
        const drivers::RxCksum ck = drivers::Port::rx_cksum(m);
        if (ck == drivers::RxCksum::kBad) {
            ++ctr_.rx_bad_cksum;
            continue;
        }
        if (ck == drivers::RxCksum::kUnknown &&
            !rx_cksum_ok(f + l2, v6, f + off - 8, udp_len, cfg.udp_checksum)) {
            ++ctr_.rx_bad_cksum;
            continue;
        }
        ctr_.rx_ipv6 += v6;
        if (mark_ce_ && v6) {
            if (wire::mark_ce(
                    *const_cast<wire::Ipv6Hdr *>(reinterpret_cast<const wire::Ipv6Hdr *>(f + l2))))
                ++ctr_.rx_ce_marked;
        } else if (mark_ce_) {
            // The checksum was checked above and the core does not check it
            // again; keep it right for capture tools anyway (RFC 1624).
            auto *ip = const_cast<rte_ipv4_hdr *>(reinterpret_cast<const rte_ipv4_hdr *>(f + l2));
            if ((ip->type_of_service & 3) != 3 && (ip->type_of_service & 3) != 0) {
                const uint16_t old = rte_be_to_cpu_16(*reinterpret_cast<uint16_t *>(ip));
                ip->type_of_service |= 3;
                const uint16_t neu = rte_be_to_cpu_16(*reinterpret_cast<uint16_t *>(ip));
                uint32_t sum = uint16_t(~rte_be_to_cpu_16(ip->hdr_checksum)) + uint16_t(~old) + neu;
                sum = (sum & 0xffff) + (sum >> 16);
                sum = (sum & 0xffff) + (sum >> 16);
                ip->hdr_checksum = rte_cpu_to_be_16(uint16_t(~sum));
                ++ctr_.rx_ce_marked;
            }
        }
        const uint32_t qpn = frame_qpn(f, off);
        const uint32_t owner = Dataplane::owner_of(qpn);
        if (owner != index_ && owner < nworkers) {
            // Another worker's QP: hand the frame over (the mbuf goes with it).
            m->hash.usr = plane;
            Worker &to = *dp_->workers_[owner];
            if (rte_ring_sp_enqueue(to.rings_in_[index_], m) == 0) {
                to.wake();
                ++ctr_.handoff_out;
                pkts[i] = nullptr;
            } else {
                ++ctr_.handoff_full;
            }
            continue;
        }
        deliver(f, len, qpn, plane, now_ns);
    }
    // The core copied what it keeps; every frame not handed over is freed.
    uint16_t k = 0;
    for (uint16_t i = 0; i < n; ++i)
        if (pkts[i] != nullptr) pkts[k++] = pkts[i];
    if (k) rte_pktmbuf_free_bulk(pkts, k);
}

void Worker::deliver(const uint8_t *f, uint32_t len, uint32_t qpn, uint8_t plane, uint64_t now_ns) {
    if (qpn == 0) {
        // Not a QP's: connection management (or garbage the app rejects).
        if (app_ == nullptr) {
            ++ctr_.rx_cm_unclaimed;
            return;
        }
        ++ctr_.rx_cm;
        app_->on_cm_frame(*this, f, len, plane, now_ns);
        return;
    }
    ep_->on_packet(f, len, nullptr, 0, plane, now_ns);
}

// A frame that is not MRC: ARP, IPv6 neighbour discovery and ICMP echo
// for the plane's own addresses are answered (wire/host.h), so that
// neighbours can reach a DPDK-owned port; the rest is stray. Not on AF_XDP
// ports: their address is the kernel's, and only MRC frames are steered to
// the socket.
void Worker::host_frame(uint8_t plane, const uint8_t *f, uint32_t len, uint64_t now_ns) {
    const std::vector<uint32_t> &ips = dp_->cfg_.plane_ipv4;
    const drivers::Port &port = *dp_->ports_[plane];
    const bool v6 = len >= sizeof(wire::EthHdr) && f[12] == (wire::kEtherTypeIpv6 >> 8) &&
                    f[13] == (wire::kEtherTypeIpv6 & 0xff);
    const wire::Ipv6Addr ip6 = dp_->plane_ipv6(plane);
    const bool mine = v6 ? !wire::ipv6_is_unspecified(ip6) : plane < ips.size() && ips[plane];
    if (!mine || port.af_xdp()) {
        ++ctr_.rx_stray;
        return;
    }
    uint8_t out[wire::kMaxHostAnswerBytes];
    uint32_t n = 0;
    wire::ArpFrom from;
    wire::NdFrom from6;
    const wire::HostAnswer a =
        v6 ? wire::answer_host6(f, len, port.mac(), ip6, out, sizeof out, &n, &from6)
           : wire::answer_host(f, len, port.mac(), ips[plane], out, sizeof out, &n, &from);
    if (wire::is_arp(f, len)) ++ctr_.rx_arp;
    switch (a) {
        case wire::HostAnswer::kArpReply:
            if (send_raw(plane, out, n)) ++ctr_.tx_arp;
            if (app_ && from.ip) app_->on_arp_frame(*this, f, len, plane, now_ns);
            break;
        case wire::HostAnswer::kEchoReply:
            if (send_raw(plane, out, n)) ++ctr_.tx_echo_replies;
            break;
        case wire::HostAnswer::kMalformed:
            ++ctr_.rx_host_malformed;
            break;
        case wire::HostAnswer::kArpLearned:
            if (app_) app_->on_arp_frame(*this, f, len, plane, now_ns);
            break;
        case wire::HostAnswer::kNdAdvert:
            ++ctr_.rx_nd;
            if (send_raw(plane, out, n)) ++ctr_.tx_nd;
            break;
        case wire::HostAnswer::kNdLearned:
            // Nobody keeps an IPv6 neighbour table on the workers yet: mrc-gen
            // resolves its gateways before it starts (Dataplane::
            // resolve_before_start), mrcd runs IPv4 only.
            ++ctr_.rx_nd;
            break;
        case wire::HostAnswer::kNone:
            ++ctr_.rx_stray;
            break;
    }
}

// A copy of `frame` in a new mbuf, with room for it in `plane`'s TX queue
// (flushed if full), or nullptr (counted). `min_len`: the shortest frame
// the caller accepts.
rte_mbuf *Worker::frame_mbuf(uint8_t plane, const uint8_t *frame, uint32_t len, uint32_t min_len) {
    if (plane >= dp_->planes() || !(port_enabled_ & (1u << plane))) {
        ++ctr_.tx_port_down;
        return nullptr;
    }
    TxQueue &q = txq_[plane];
    if (q.n == kTxQueueCap) flush(plane);
    if (q.n == kTxQueueCap) {
        ++ctr_.tx_full;
        return nullptr;
    }
    rte_mbuf *m = rte_pktmbuf_alloc(dp_->pool_);
    if (m == nullptr) {
        ++ctr_.tx_nombuf;
        return nullptr;
    }
    if (len > rte_pktmbuf_tailroom(m) || len < min_len) {
        rte_pktmbuf_free(m);
        ++ctr_.tx_full;
        return nullptr;
    }
    rte_memcpy(rte_pktmbuf_mtod(m, uint8_t *), frame, len);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = len;
    return m;
}

void Worker::queue_frame(uint8_t plane, rte_mbuf *m) {
    if (m->pkt_len > max_frame_) {
        ++ctr_.tx_oversize;
        rte_pktmbuf_free(m);
        return;
    }
    TxQueue &q = txq_[plane];
    q.m[q.n++] = m;
    ctr_.tx_bytes += m->pkt_len;
}

// A whole frame as it is (no checksum filled), queued on `plane`.
bool Worker::send_raw(uint8_t plane, const uint8_t *frame, uint32_t len) {
    rte_mbuf *m = frame_mbuf(plane, frame, len, sizeof(wire::EthHdr));
    if (m == nullptr) return false;
    queue_frame(plane, m);
    return true;
}

// At start, worker 0 announces each plane's address (a gratuitous ARP, an
// unsolicited neighbour advert over IPv6), so neighbours that knew another
// MAC for it learn this one.
void Worker::announce_addresses() {
    const std::vector<uint32_t> &ips = dp_->cfg_.plane_ipv4;
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        const drivers::Port &port = *dp_->ports_[p];
        if (port.af_xdp() || !(port_enabled_ & (1u << p))) continue;
        uint8_t out[wire::kNdFrameBytes];
        if (p < ips.size() && ips[p] != 0) {
            const uint32_t n = wire::write_arp_request(out, port.mac(), ips[p], ips[p]);
            if (send_raw(p, out, n)) ++ctr_.tx_arp;
        }
        if (const wire::Ipv6Addr ip6 = dp_->plane_ipv6(p); !wire::ipv6_is_unspecified(ip6)) {
            const uint32_t n = wire::write_nd_announce(out, port.mac(), ip6);
            if (send_raw(p, out, n)) ++ctr_.tx_nd;
        }
    }
}

bool Worker::send_frame(uint8_t plane, const uint8_t *frame, uint32_t len) {
    const bool v6 = len >= wire::kEthIpv6UdpBytes && (frame[RTE_ETHER_HDR_LEN] >> 4) == 6;
    rte_mbuf *m =
        frame_mbuf(plane, frame, len, v6 ? wire::kEthIpv6UdpBytes : wire::kEthIpv4UdpBytes);
    if (m == nullptr) return false;
    const drivers::Port &port = *dp_->ports_[plane];
    if (dp_->cfg_.udp_checksum) {
        if (port.tx_udp_offload())
            port.prepare_tx_cksum(m, RTE_ETHER_HDR_LEN, v6);
        else
            wire::fill_udp_checksum(rte_pktmbuf_mtod(m, uint8_t *));
    }
    queue_frame(plane, m);
    ++ctr_.tx_cm;
    return true;
}

uint32_t Worker::rx_handoff(uint64_t now_ns) {
    uint32_t total = 0;
    for (rte_ring *r : rings_in_) {
        if (r == nullptr) continue;
        rte_mbuf *pkts[32];
        const unsigned n =
            rte_ring_sc_dequeue_burst(r, reinterpret_cast<void **>(pkts), 32, nullptr);
        for (unsigned i = 0; i < n; ++i) {
            rte_mbuf *m = pkts[i];
            const auto *f = rte_pktmbuf_mtod(m, const uint8_t *);
            const uint32_t off = mrc_payload_offset(f, m->data_len, dp_->cfg_.mrc_port);
            deliver(f, m->data_len, frame_qpn(f, off), static_cast<uint8_t>(m->hash.usr), now_ns);
        }
        if (n) rte_pktmbuf_free_bulk(pkts, n);
        ctr_.handoff_in += n;
        total += n;
    }
    return total;
}

bool Worker::attach_payload(rte_mbuf *hdr, const TxPacket &t, bool sw_cksum) {
    uint8_t *frame = rte_pktmbuf_mtod(hdr, uint8_t *);
    // The core writes no VLAN tag and no IPv6 extension header.
    const bool v6 = (frame[RTE_ETHER_HDR_LEN] >> 4) == 6;
    const uint32_t udp_off = uint32_t(v6 ? wire::kEthIpv6UdpBytes : wire::kEthIpv4UdpBytes) - 8;
    auto *udp = reinterpret_cast<wire::UdpHdr *>(frame + udp_off);
    const auto pseudo = [&] {
        return v6 ? wire::ipv6_udp_pseudo_partial(
                        *reinterpret_cast<const wire::Ipv6Hdr *>(frame + RTE_ETHER_HDR_LEN),
                        udp->length.get())
                  : wire::ipv4_udp_pseudo_partial(
                        *reinterpret_cast<const wire::Ipv4Hdr *>(frame + RTE_ETHER_HDR_LEN),
                        udp->length.get());
    };
    if (!dp_->cfg_.zero_copy_tx) {
        if (sw_cksum) {
            // Headers, then the payload copied and summed in one pass.
            uint64_t sum = pseudo();
            sum = wire::csum_add(sum, udp, t.hdr_len - udp_off);
            sum = wire::csum_copy(frame + t.hdr_len, t.payload, t.payload_len, sum);
            udp->checksum.set(wire::udp_checksum_finish(sum));
        } else {
            rte_memcpy(frame + t.hdr_len, t.payload, t.payload_len);
        }
        hdr->data_len = static_cast<uint16_t>(t.hdr_len + t.payload_len);
        hdr->pkt_len = hdr->data_len;
        return true;
    }
    if (sw_cksum) {
        // The payload is not copied, but it is still read once, here.
        uint64_t sum = pseudo();
        sum = wire::csum_add(sum, udp, t.hdr_len - udp_off);
        sum = wire::csum_add(sum, t.payload, t.payload_len);
        udp->checksum.set(wire::udp_checksum_finish(sum));
    }
    // The payload stays in registered memory: a second mbuf points at it.
    rte_mbuf *seg = rte_pktmbuf_alloc(dp_->pool_);
    if (seg == nullptr) return false;
    // One shared-info block per packet, in the segment's own (unused) data
    // room, so the reference count is per packet and nothing is shared.
    auto *shinfo = rte_pktmbuf_mtod(seg, rte_mbuf_ext_shared_info *);
    shinfo->free_cb = extbuf_free;
    shinfo->fcb_opaque = nullptr;
    rte_mbuf_ext_refcnt_set(shinfo, 1);
    auto *addr = const_cast<uint8_t *>(t.payload);
    // Virtual devices read by address; a NIC needs the memory DMA-mapped.
    const rte_iova_t iova =
        rte_eal_iova_mode() == RTE_IOVA_VA ? reinterpret_cast<uintptr_t>(addr) : RTE_BAD_IOVA;
    rte_pktmbuf_attach_extbuf(seg, addr, iova, uint16_t(t.payload_len), shinfo);
    seg->data_len = static_cast<uint16_t>(t.payload_len);
    seg->pkt_len = seg->data_len;
    hdr->data_len = t.hdr_len;
    hdr->pkt_len = t.hdr_len;
    if (rte_pktmbuf_chain(hdr, seg) != 0) {
        rte_pktmbuf_free(seg);
        return false;
    }
    return true;
}

uint32_t Worker::tx(uint64_t now_ns) {
    const DataplaneConfig &cfg = dp_->cfg_;
    const uint8_t planes = dp_->planes();
    uint32_t sent = 0;
    // Flush what an earlier round left behind first.
    for (uint8_t p = 0; p < planes; ++p)
        if (txq_[p].n) flush(p);
    // A budget per loop iteration: a backlog of retransmissions must not
    // keep the worker from polling RX (where the acks that end it arrive).
    uint32_t budget = 4u * cfg.burst;
    while (ep_->tx_pending() && budget > 0) {
        // New data only to ports whose queue has room for a burst.
        uint8_t room = 0;
        for (uint8_t p = 0; p < planes; ++p)
            if ((port_enabled_ & (1u << p)) && txq_[p].n + cfg.burst <= kTxDataRoom)
                room |= uint8_t(1u << p);
        // Every queue full: nothing could go out, and asking the core would
        // still give every ready QP a turn (a walk over all of them per loop
        // while the devices are the bottleneck). Control packets wait too:
        // they would find the same full queues.
        if (room == 0) {
            ++ctr_.tx_backpressure;
            break;
        }
        const uint32_t want = std::min<uint32_t>(cfg.burst, budget);
        if (stash_.size() < want) {
            const size_t have = stash_.size();
            stash_.resize(want);
            if (rte_pktmbuf_alloc_bulk(dp_->pool_, stash_.data() + have, unsigned(want - have)) !=
                0) {
                stash_.resize(have);
                ++ctr_.tx_nombuf;
                break;
            }
        }
        TxPacket *out = tx_out_;
        for (uint32_t i = 0; i < want; ++i)
            out[i].hdr = rte_pktmbuf_mtod(stash_[stash_.size() - 1 - i], uint8_t *);
        const uint32_t n = ep_->poll_tx(out, want, now_ns, room);
        if (n == 0) break;
        budget -= n;
        for (uint32_t i = 0; i < n; ++i) {
            rte_mbuf *m = stash_.back();
            stash_.pop_back();
            const TxPacket &t = out[i];
            const uint8_t p = t.plane;
            if (p >= planes || !(port_enabled_ & (1u << p))) {
                ++ctr_.tx_port_down;
                rte_pktmbuf_free(m);
                continue;
            }
            // UDP checksums: the device's offload, or software (the payload
            // copy sums it on the way), or none.
            const drivers::Port &port = *dp_->ports_[p];
            const bool sw_cksum = cfg.udp_checksum && !port.tx_udp_offload();
            if (t.payload_len == 0) {
                m->data_len = t.hdr_len;
                m->pkt_len = t.hdr_len;
                if (sw_cksum) wire::fill_udp_checksum(rte_pktmbuf_mtod(m, uint8_t *));
            } else if (!attach_payload(m, t, sw_cksum)) {
                ++ctr_.tx_nombuf;
                rte_pktmbuf_free(m);
                continue;
            }
            if (cfg.udp_checksum && !sw_cksum)
                port.prepare_tx_cksum(m, RTE_ETHER_HDR_LEN, (t.hdr[RTE_ETHER_HDR_LEN] >> 4) == 6);
            TxQueue &q = txq_[p];
            if (q.n == kTxQueueCap) {
                ++ctr_.tx_full;
                rte_pktmbuf_free(m);
                continue;
            }
            // A PMD refuses a frame over its MTU and stops its burst there
            // (net_tap does): left in the queue it would block the plane.
            if (m->pkt_len > max_frame_) {
                ++ctr_.tx_oversize;
                rte_pktmbuf_free(m);
                continue;
            }
            q.m[q.n++] = m;
            ctr_.tx_bytes += m->pkt_len;
        }
        sent += n;
        for (uint8_t p = 0; p < planes; ++p)
            if (txq_[p].n >= cfg.burst) flush(p);
    }
    for (uint8_t p = 0; p < planes; ++p)
        if (txq_[p].n) flush(p);
    return sent;
}

void Worker::flush(uint8_t plane) {
    TxQueue &q = txq_[plane];
    if (!(port_enabled_ & (1u << plane))) {
        ctr_.tx_port_down += q.n;
        rte_pktmbuf_free_bulk(q.m, q.n);
        q.n = 0;
        return;
    }
    const uint64_t t = rte_rdtsc();
    const uint16_t k = dp_->ports_[plane]->try_tx_burst(uint16_t(index_), q.m, q.n);
    tx_io_cycles_ += rte_rdtsc() - t;
    ctr_.tx_packets += k;
    port_tx_[plane] += k;
    if (k < q.n) std::memmove(q.m, q.m + k, (q.n - k) * sizeof(rte_mbuf *));
    q.n = static_cast<uint16_t>(q.n - k);
}

void Worker::control(uint64_t now_ns) {
    // Ports cut on request: stop polling them before the device stops.
    const uint8_t cut = dp_->cut_mask_.load(std::memory_order_acquire);
    if (cut & port_enabled_) {
        for (uint8_t p = 0; p < dp_->planes(); ++p)
            if ((cut & (1u << p)) && (port_enabled_ & (1u << p))) {
                port_enabled_ &= uint8_t(~(1u << p));
                flush(p);
            }
        cut_ack_.store(cut, std::memory_order_release);
    }
    // Link state: a port down is a plane down for every QP.
    const uint8_t links = dp_->link_mask_.load(std::memory_order_relaxed) & port_enabled_;
    if (links != link_mask_) {
        for (uint8_t p = 0; p < dp_->planes(); ++p)
            if ((links ^ link_mask_) & (1u << p)) ep_->set_plane_up(p, links & (1u << p));
        link_mask_ = links;
        ++ctr_.link_changes;
    }
    // A new path table from the control thread.
    const uint64_t gen = dp_->table_gen_.load(std::memory_order_acquire);
    if (gen != table_gen_applied_) {
        ep_->apply_path_table(dp_->table_, now_ns);
        table_gen_applied_ = gen;
        ++ctr_.path_tables;
        table_gen_seen_.store(gen, std::memory_order_release);
    }
    static_assert(kSnapshotPeriodNs >= kControlPeriodNs);
    publish(now_ns);
}

void Worker::publish(uint64_t now_ns) {
    WorkerSnapshot s;
    s.now_ns = now_ns;
    s.worker = ctr_;
    s.endpoint = ep_->counters();
    const uint8_t planes = dp_->planes();
    std::copy(ep_->plane_counters(), ep_->plane_counters() + planes, s.planes);
    s.gauges = ep_->ev_gauges();
    std::copy(port_tx_, port_tx_ + planes, s.port_tx_pkts);
    std::copy(port_rx_, port_rx_ + planes, s.port_rx_pkts);
    s.link_up_mask = ep_->link_up_mask();
    s.table_generation = table_gen_applied_;
    snap_.store(s);
}

void Worker::publish_qps(uint64_t now_ns, uint32_t slots) {
    const uint32_t max = dp_->cfg_.max_qps_per_worker;
    slots = std::min(slots, max);
    for (uint32_t k = 0; k < slots; ++k) {
        const uint32_t i = qp_snap_cursor_;
        qp_snap_cursor_ = i == max ? 1 : i + 1;
        const Qp *q = ep_->qp(i);
        QpSnapshot old;
        const bool was = qp_snaps_[i].load(&old) && old.live;
        if (q == nullptr && !was) continue;
        if (was) {
            --qp_total_.qps;
            if (old.state == static_cast<uint8_t>(QpState::kError)) --qp_total_.qps_error;
            qp_total_.sum -= old.c;
        }
        QpSnapshot s;
        if (q != nullptr) {
            s.live = 1;
            s.wire_qpn = ep_->wire_qpn(*q);
            s.state = static_cast<uint8_t>(q->state());
            s.error_cause = static_cast<uint8_t>(q->error_cause());
            s.usable_planes = q->usable_planes();
            s.window_bytes = q->window_bytes();
            s.inflight_bytes = q->inflight_bytes();
            const EvStateCounts ev = q->evs().counts(now_ns);
            std::copy(ev.state, ev.state + kEvStates, s.ev_states);
            s.c = q->counters();
            ++qp_total_.qps;
            if (q->state() == QpState::kError) ++qp_total_.qps_error;
            qp_total_.sum += s.c;
        }
        qp_snaps_[i].store(s);
    }
    qp_sum_.store(qp_total_);
}

void Worker::drain() {
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        // Give the device a moment to take what is queued, then drop the rest.
        for (int tries = 0; tries < 100 && txq_[p].n; ++tries)
            flush(p);
        if (txq_[p].n) {
            ctr_.tx_full += txq_[p].n;
            rte_pktmbuf_free_bulk(txq_[p].m, txq_[p].n);
            txq_[p].n = 0;
        }
    }
    if (!stash_.empty()) rte_pktmbuf_free_bulk(stash_.data(), unsigned(stash_.size()));
    stash_.clear();
    for (rte_ring *r : rings_in_) {
        if (r == nullptr) continue;
        void *m;
        while (rte_ring_sc_dequeue(r, &m) == 0)
            rte_pktmbuf_free(static_cast<rte_mbuf *>(m));
    }
}

}  // namespace mrc::dp
