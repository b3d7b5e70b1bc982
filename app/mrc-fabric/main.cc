// mrc-fabric: an impairment fabric between real DPDK ports.
//
// Ports come in pairs, one pair per plane: what arrives on side A leaves on
// side B and the other way round, through K emulated paths per plane (the
// UDP source port of an MRC frame picks its path, as ECMP would). The
// decisions -- loss, queues, ECN, trimming, delay, reordering, duplicates,
// blackholes, scheduled failures -- are lib/fabric's; this program moves the
// mbufs, keeps the time (TSC), captures to pcap, prints live lines, serves
// DPDK telemetry (/fabric/*) and takes settings at run time.
//
//   mrc-fabric EAL-ARGS -- [--port A0 B0 A1 B1 ...] [--paths K] [--config F.toml]
//       [--impair SPEC]... [--schedule SPEC]... [--capture FILE [--capture-path SEL]...]
//       [--duration S] [--stats-period S] [--json FILE] [--idle busy|sleep]
//
// One poll loop does everything, in slices run by EAL's interrupt thread
// (see FabricApp::on_alarm for why); the main lcore waits. The rates it
// carries in tests are a few Gb/s, and one loop keeps the order of events
// exact.
#include <fmt/core.h>
#include <pcap/pcap.h>
#include <rte_alarm.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_telemetry.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <sys/time.h>
#include <time.h>

#include "app_dpdk.h"
#include "common/sleep.h"
#include "fabric/config.h"
#include "fabric/fabric.h"
#include "port/clock.h"
#include "port/eal.h"
#include "port/port.h"

using namespace mrc;
using namespace mrc::fabric;
using nlohmann::json;

namespace {

using app::die;

struct Options {
    std::vector<std::string> ports;
    uint32_t paths = 0;  // 0: the config file's, else 4
    std::string config;
    std::vector<std::string> impair;
    std::vector<std::string> schedule;
    uint64_t seed = 0;
    bool seed_set = false;
    uint32_t delay_slots = 0;
    uint16_t mrc_port = 0;
    std::string capture;
    std::vector<std::string> capture_paths;
    double duration_s = 0;
    double stats_period_s = 1;
    std::string json_path;
    std::string idle = "sleep";
    double link_wait_s = 0;
    uint16_t mtu = 1500;
    std::string schedule_clock = "first-frame";
};

constexpr uint16_t kBurst = 32;

// What is captured: a plane, optionally a path and a direction.
// What the telemetry thread reads: copied by the poll loop under try_lock,
// so the loop never waits for a reader.
struct Snapshot {
    std::mutex mu;
    uint64_t generation = 0;
    double elapsed_s = 0;
    std::vector<PathCounters> counters;
    std::vector<PathParams> params;
    std::vector<PlaneCounters> planes;
};

class FabricApp {
  public:
    FabricApp(Options o, FabricConfig cfg) : o_(std::move(o)), cfg_(std::move(cfg)) {}
    void setup();
    int run();
    // Telemetry (another thread).
    int tel_stats(rte_tel_data *d);
    int tel_path(const char *params, rte_tel_data *d);
    int tel_set(const char *params, rte_tel_data *d);

  private:
    struct Out {
        rte_mbuf *pkts[kBurst];
        uint16_t n = 0;
    };
    uint16_t port_of(uint32_t plane, Dir d, bool in) const {
        // A -> B: in on A (2p), out on B (2p+1).
        const bool a = (d == kAtoB) == in;
        return uint16_t(plane * 2 + (a ? 0 : 1));
    }
    bool captured(uint32_t plane, int path, Dir d) const;
    void capture(const rte_mbuf *m, uint64_t now_ns);
    uint32_t poll_rx(uint32_t plane, Dir d, uint64_t now);
    uint32_t poll_tx(uint32_t plane, Dir d, uint64_t now);
    void publish(double elapsed_s, bool force);
    std::string stats_line(double t);
    json summary(double elapsed_s);
    PathCounters totals(const std::vector<PathCounters> &v) const;

    Options o_;
    FabricConfig cfg_;
    std::optional<Fabric> fab_;
    std::vector<std::unique_ptr<drivers::Port>> ports_;
    rte_mempool *pool_ = nullptr;
    dp::TscClock clock_;
    std::vector<Out> out_;  // per (plane, dir): frames popped, not yet taken by the port
    uint64_t tx_pass_dropped_ = 0;
    uint64_t rx_multiseg_dropped_ = 0;
    // Capture.
    pcap_t *pcap_ = nullptr;
    pcap_dumper_t *dumper_ = nullptr;
    std::vector<CaptureSelector> cap_sel_;
    uint64_t captured_ = 0;
    timeval wall_start_{};
    uint8_t cap_buf_[16384];  // a frame of the largest MTU (9600) and more
    // Run-time settings from telemetry, applied by the loop.
    std::mutex pending_mu_;
    std::vector<Setting> pending_;
    std::atomic<bool> have_pending_{false};
    uint64_t settings_applied_ = 0;
    Snapshot snap_;
    uint64_t next_publish_ns_ = 0;
    // The poll loop (see on_alarm).
    static void on_alarm(void *arg);
    int64_t slice();  // microseconds until the next slice, or -1: the run is over
    static constexpr uint64_t kSliceNs = 1'000'000;
    std::atomic<bool> finished_{false};
    uint64_t start_ns_ = 0, end_ns_ = UINT64_MAX, period_ns_ = 0, next_line_ns_ = UINT64_MAX;
    uint32_t empty_polls_ = 0;
    // The schedule's time origin: the start, or the first MRC frame.
    bool sched_started_ = false;
    uint64_t sched_origin_ns_ = 0;
    std::vector<PathCounters> last_line_;
};

// The telemetry thread reaches the app through this, under g_app_mu, so
// that a command arriving during shutdown never sees a destroyed app.
std::mutex g_app_mu;
FabricApp *g_app = nullptr;

// Makes the app reachable from telemetry for its lifetime; afterwards the
// callbacks answer -ENODEV.
struct AppRegistration {
    explicit AppRegistration(FabricApp *a) {
        std::lock_guard lk(g_app_mu);
        g_app = a;
    }
    ~AppRegistration() {
        std::lock_guard lk(g_app_mu);
        g_app = nullptr;
    }
    AppRegistration(const AppRegistration &) = delete;
    AppRegistration &operator=(const AppRegistration &) = delete;
};

void FabricApp::setup() {
    auto listing = drivers::list_ports();
    std::vector<std::string> names = o_.ports;
    if (names.empty())
        for (const auto &p : listing)
            names.push_back(p.name);
    if (names.empty()) die("no ports: give EAL devices (--vdev=net_memif0,...) in pairs");
    if (names.size() % 2 != 0)
        die(fmt::format("ports come in pairs (side A, side B of each plane): got {}",
                        names.size()));
    for (const auto &n : names) {
        bool found = false;
        for (const auto &p : listing)
            found |= p.name == n;
        if (!found) {
            std::string have;
            for (const auto &p : listing)
                have += (have.empty() ? "" : ", ") + p.name;
            die(fmt::format("--port {}: no such port (ports: {})", n,
                            have.empty() ? "none" : have));
        }
    }
    cfg_.planes = uint32_t(names.size() / 2);
    if (cfg_.planes > kMaxPlanes)
        die(fmt::format("{} port pairs: at most {} planes", cfg_.planes, kMaxPlanes));
    auto f = Fabric::create(cfg_);
    if (!f) die(f.error().message);
    fab_.emplace(std::move(f).value());

    // Every delay line may be full while every RX ring is full and each
    // out-queue holds a burst.
    drivers::PoolSizing ps;
    ps.ports = uint32_t(names.size());
    ps.rx_desc = 1024;
    ps.tx_desc = 1024;
    ps.burst = kBurst;
    ps.in_flight = cfg_.planes * 2 * (cfg_.delay_slots + kBurst);
    auto pool = drivers::create_mbuf_pool("fabric_pool", drivers::mbufs_needed(ps),
                                          drivers::mbuf_data_room_for_mtu(o_.mtu), ps.cache);
    if (!pool) die(pool.error().message);
    pool_ = *pool;
    for (const auto &n : names) {
        drivers::PortOptions po;
        po.device = n;
        po.mtu_bytes = o_.mtu;
        po.use_cksum_offload = false;  // frames leave as they came (or as the fabric changed them)
        auto p = drivers::Port::open(po, pool_);
        if (!p) die(p.error().message);
        ports_.push_back(std::move(*p));
    }
    if (o_.link_wait_s > 0)
        for (auto &p : ports_)
            p->wait_link_up(uint32_t(o_.link_wait_s * 1000));
    out_.resize(cfg_.planes * 2);

    if (!o_.capture.empty()) {
        for (const auto &s : o_.capture_paths) {
            auto c = parse_capture_selector(s, cfg_.planes, cfg_.paths);
            if (!c) die(fmt::format("--capture-path {}: {}", s, c.error().message));
            cap_sel_.push_back(*c);
        }
        pcap_ = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, 65535, PCAP_TSTAMP_PRECISION_NANO);
        dumper_ = pcap_ ? pcap_dump_open(pcap_, o_.capture.c_str()) : nullptr;
        if (dumper_ == nullptr)
            die(fmt::format("--capture {}: {}", o_.capture, pcap_ ? pcap_geterr(pcap_) : "pcap"));
    }
}

bool FabricApp::captured(uint32_t plane, int path, Dir d) const {
    if (dumper_ == nullptr) return false;
    if (cap_sel_.empty()) return true;
    for (const auto &c : cap_sel_) {
        if (c.plane >= 0 && uint32_t(c.plane) != plane) continue;
        if (c.path >= 0 && c.path != path) continue;
        if ((d == kAtoB && !c.ab) || (d == kBtoA && !c.ba)) continue;
        return true;
    }
    return false;
}

void FabricApp::capture(const rte_mbuf *m, uint64_t now_ns) {
    const uint32_t len = std::min<uint32_t>(m->pkt_len, sizeof cap_buf_);
    const auto *data = static_cast<const uint8_t *>(rte_pktmbuf_read(m, 0, len, cap_buf_));
    if (data == nullptr) return;
    pcap_pkthdr h{};
    // Wall time of the start plus the TSC time since: both taken together.
    const uint64_t ns = uint64_t(wall_start_.tv_usec) * 1000 + (now_ns - start_ns_);
    h.ts.tv_sec = wall_start_.tv_sec + time_t(ns / 1'000'000'000);
    h.ts.tv_usec = suseconds_t(ns % 1'000'000'000);  // nanoseconds: the file says so
    h.caplen = len;  // frames above the buffer (jumbo) are cut, and say so
    h.len = m->pkt_len;
    pcap_dump(reinterpret_cast<u_char *>(dumper_), &h, data);
    ++captured_;
}

uint32_t FabricApp::poll_rx(uint32_t plane, Dir d, uint64_t now) {
    rte_mbuf *pkts[kBurst];
    const uint16_t n = ports_[port_of(plane, d, true)]->rx_burst(0, pkts, kBurst);
    if (n == 0) return 0;
    rte_mbuf *pass[kBurst];
    uint16_t np = 0;
    for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf *m = pkts[i];
        if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
            ++rx_multiseg_dropped_;
            rte_pktmbuf_free(m);
            continue;
        }
        uint32_t len = m->data_len;
        const Verdict v = fab_->ingress(plane, d, rte_pktmbuf_mtod(m, uint8_t *), &len,
                                        reinterpret_cast<uintptr_t>(m), now);
        if (!sched_started_ && v != Verdict::kPass) {
            sched_started_ = true;
            sched_origin_ns_ = now;
        }
        switch (v) {
            case Verdict::kPass:
                pass[np++] = m;
                break;
            case Verdict::kQueuedTwice:
                rte_mbuf_refcnt_update(m, 1);
                [[fallthrough]];
            case Verdict::kQueued:
                if (len < m->data_len) rte_pktmbuf_trim(m, uint16_t(m->data_len - len));
                break;
            case Verdict::kDropped:
                rte_pktmbuf_free(m);
                break;
        }
    }
    if (np) {
        for (uint16_t i = 0; i < np; ++i)
            if (dumper_ && cap_sel_.empty()) capture(pass[i], now);  // only with no selection
        const uint16_t sent = ports_[port_of(plane, d, false)]->try_tx_burst(0, pass, np);
        for (uint16_t i = sent; i < np; ++i)
            rte_pktmbuf_free(pass[i]);
        tx_pass_dropped_ += np - sent;
    }
    return n;
}

uint32_t FabricApp::poll_tx(uint32_t plane, Dir d, uint64_t now) {
    Out &o = out_[plane * 2 + d];
    if (o.n == 0) {
        DelayLine::Item items[kBurst];
        const uint32_t n = fab_->egress(plane, d, now, items, kBurst);
        for (uint32_t i = 0; i < n; ++i) {
            auto *m = reinterpret_cast<rte_mbuf *>(uintptr_t(items[i].handle));
            if (captured(plane, items[i].path, d)) capture(m, now);
            o.pkts[o.n++] = m;
        }
    }
    if (o.n == 0) return 0;
    // A port that takes nothing (the peer is slow or gone) holds the
    // frames here; the delay line behind them then fills and drops, counted.
    const uint16_t sent = ports_[port_of(plane, d, false)]->try_tx_burst(0, o.pkts, o.n);
    if (sent && sent < o.n) std::memmove(o.pkts, o.pkts + sent, (o.n - sent) * sizeof(o.pkts[0]));
    o.n = uint16_t(o.n - sent);
    return sent;
}

void FabricApp::publish(double elapsed_s, bool force) {
    std::unique_lock lk(snap_.mu, std::defer_lock);
    if (force)
        lk.lock();
    else if (!lk.try_lock())
        return;
    snap_.generation = fab_->generation();
    snap_.elapsed_s = elapsed_s;
    fab_->copy_counters(&snap_.counters);
    fab_->copy_params(&snap_.params);
    snap_.planes.resize(cfg_.planes * 2);
    for (uint32_t p = 0; p < cfg_.planes; ++p)
        for (Dir d : {kAtoB, kBtoA})
            snap_.planes[p * 2 + d] = fab_->plane_counters(p, d);
}

PathCounters FabricApp::totals(const std::vector<PathCounters> &v) const {
    PathCounters t;
    for (const auto &c : v)
        t += c;
    return t;
}

std::string FabricApp::stats_line(double t) {
    std::vector<PathCounters> now;
    fab_->copy_counters(&now);
    const PathCounters a = totals(now);
    PathCounters b = last_line_.empty() ? PathCounters{} : totals(last_line_);
    last_line_ = now;
    const double dt = std::max(o_.stats_period_s, 1e-3);
    const double pps = double(a.tx_pkts - b.tx_pkts) / dt;
    const double gbps = double(a.tx_bytes - b.tx_bytes) * 8 / dt / 1e9;
    std::string planes;
    for (uint32_t p = 0; p < cfg_.planes; ++p) {
        uint64_t tx = 0, drops = 0;
        for (uint32_t k = 0; k < cfg_.paths; ++k)
            for (Dir d : {kAtoB, kBtoA}) {
                const auto &c = now[(size_t(p) * cfg_.paths + k) * 2 + d];
                tx += c.tx_pkts;
                drops += c.drop_down + c.drop_blackhole + c.drop_loss + c.drop_burst +
                         c.drop_queue + c.drop_delay_full;
            }
        planes += fmt::format(" p{} {}/{}", p, tx, drops);
    }
    const uint64_t drops = a.drop_down + a.drop_blackhole + a.drop_loss + a.drop_burst +
                           a.drop_queue + a.drop_delay_full;
    return fmt::format(
        "[{:6.1f}s] fwd {:.3f} Mpps {:.2f} Gb/s  drop {} (loss {} burst {} queue {} down {} "
        "blackhole {} full {})  trim {}  ce {}  dup {}  reord {}  planes tx/drop{}",
        t, pps / 1e6, gbps, drops, a.drop_loss, a.drop_burst, a.drop_queue, a.drop_down,
        a.drop_blackhole, a.drop_delay_full, a.trimmed, a.ecn_marked, a.duplicated, a.reordered,
        planes);
}

json FabricApp::summary(double elapsed_s) {
    std::vector<PathCounters> cs;
    fab_->copy_counters(&cs);
    auto counters_json = [](const PathCounters &c) {
        json j = json::object();
        for (size_t i = 0; i < PathCounters::kCount; ++i)
            j[kPathCounterInfo[i].name] = c.array()[i];
        return j;
    };
    json j;
    j["elapsed_s"] = elapsed_s;
    j["planes"] = cfg_.planes;
    j["paths"] = cfg_.paths;
    j["generation"] = fab_->generation();
    j["settings_applied_at_run_time"] = settings_applied_;
    j["totals"] = counters_json(totals(cs));
    j["passed_not_mrc"] = 0;
    uint64_t passed = 0;
    json planes = json::array();
    for (uint32_t p = 0; p < cfg_.planes; ++p) {
        json pj;
        pj["plane"] = p;
        for (Dir d : {kAtoB, kBtoA}) {
            PathCounters t;
            for (uint32_t k = 0; k < cfg_.paths; ++k)
                t += cs[(size_t(p) * cfg_.paths + k) * 2 + d];
            json dj = counters_json(t);
            dj["passed_not_mrc"] = fab_->plane_counters(p, d).passed;
            passed += fab_->plane_counters(p, d).passed;
            pj[to_string(d)] = dj;
        }
        const auto &a = *ports_[p * 2];
        const auto &b = *ports_[p * 2 + 1];
        pj["port_a"] = a.name();
        pj["port_b"] = b.name();
        planes.push_back(pj);
    }
    j["passed_not_mrc"] = passed;
    j["planes_detail"] = planes;
    json paths = json::array();
    for (uint32_t p = 0; p < cfg_.planes; ++p)
        for (uint32_t k = 0; k < cfg_.paths; ++k)
            for (Dir d : {kAtoB, kBtoA}) {
                json pj = counters_json(cs[(size_t(p) * cfg_.paths + k) * 2 + d]);
                pj["plane"] = p;
                pj["path"] = k;
                pj["dir"] = to_string(d);
                paths.push_back(pj);
            }
    j["paths_detail"] = paths;
    j["tx_pass_dropped"] = tx_pass_dropped_;
    j["rx_multiseg_dropped"] = rx_multiseg_dropped_;
    j["captured"] = captured_;
    json ports = json::array();
    for (const auto &p : ports_) {
        const auto c = p->counters();
        ports.push_back({{"name", p->name()},
                         {"driver", p->driver()},
                         {"rx_packets", c.rx_packets},
                         {"tx_packets", c.tx_packets},
                         {"rx_missed", c.rx_missed},
                         {"rx_nombuf", c.rx_nombuf},
                         {"link", p->link().up ? "up" : "down"}});
    }
    j["ports"] = ports;
    return j;
}

// The poll loop runs in EAL's interrupt thread, in slices of at most a
// millisecond re-armed with rte_eal_alarm_set, never on an lcore of its own.
// Why: when a memif peer goes away, DPDK 22.11's memif driver unmaps the
// peer's memory from that thread (memif_disconnect) without any exclusion
// against a thread inside rx_burst on the same port; a fabric outlives its
// endpoints' connections, and polling from an lcore crashed it (SEGV in
// memif rx, seen in the fault suite under ASan). In the interrupt thread a
// burst and a disconnect never overlap. Connection events wait at most one
// slice; an idle fabric returns early and re-arms the alarm for its nap.
void FabricApp::on_alarm(void *arg) {
    auto *app = static_cast<FabricApp *>(arg);
    const int64_t next_us = app->slice();
    if (next_us < 0 ||
        rte_eal_alarm_set(uint64_t(std::max<int64_t>(next_us, 1)), on_alarm, arg) != 0)
        app->finished_.store(true, std::memory_order_release);
}

int64_t FabricApp::slice() {
    const uint64_t slice_start = clock_.now_ns();
    for (;;) {
        const uint64_t now = clock_.now_ns();
        if (app::stop_requested() || now >= end_ns_) return -1;
        if (now - slice_start >= kSliceNs) return 0;
        if (sched_started_ && fab_->run_schedule(now - sched_origin_ns_)) {
            std::printf("[%6.1fs] schedule: %.3f s after the %s, settings generation %llu\n",
                        double(now - start_ns_) / 1e9, double(now - sched_origin_ns_) / 1e9,
                        o_.schedule_clock == "start" ? "start" : "first MRC frame",
                        (unsigned long long)fab_->generation());
        }
        if (have_pending_.load(std::memory_order_acquire)) {
            std::vector<Setting> todo;
            {
                std::lock_guard lk(pending_mu_);
                todo.swap(pending_);
                have_pending_.store(false, std::memory_order_relaxed);
            }
            for (const auto &s : todo)
                if (fab_->apply(s)) ++settings_applied_;  // checked when queued
        }
        uint32_t work = 0;
        for (uint32_t p = 0; p < cfg_.planes; ++p)
            for (Dir d : {kAtoB, kBtoA})
                work += poll_rx(p, d, now);
        for (uint32_t p = 0; p < cfg_.planes; ++p)
            for (Dir d : {kAtoB, kBtoA})
                work += poll_tx(p, d, now);
        if (now >= next_publish_ns_) {
            publish(double(now - start_ns_) / 1e9, false);
            next_publish_ns_ = now + 10'000'000;
        }
        if (now >= next_line_ns_) {
            std::printf("%s\n", stats_line(double(now - start_ns_) / 1e9).c_str());
            if (dumper_) pcap_dump_flush(dumper_);
            next_line_ns_ += period_ns_;
        }
        if (work) {
            empty_polls_ = 0;
        } else if (o_.idle == "sleep" && ++empty_polls_ >= 256) {
            // Share the CPU with the endpoints: nap until the next frame is
            // due, 20 us at the most.
            empty_polls_ = 128;
            uint64_t due = UINT64_MAX;
            for (uint32_t p = 0; p < cfg_.planes; ++p)
                for (Dir d : {kAtoB, kBtoA})
                    due = std::min(due, fab_->next_due(p, d));
            const uint64_t wait = due > now ? std::min<uint64_t>(due - now, 20'000) : 0;
            if (wait > 1000) return int64_t(wait / 1000);
        }
    }
}

int FabricApp::run() {
    start_ns_ = clock_.now_ns();
    gettimeofday(&wall_start_, nullptr);
    end_ns_ = o_.duration_s > 0 ? start_ns_ + uint64_t(o_.duration_s * 1e9) : UINT64_MAX;
    period_ns_ = o_.stats_period_s > 0 ? uint64_t(o_.stats_period_s * 1e9) : 0;
    next_line_ns_ = period_ns_ ? start_ns_ + period_ns_ : UINT64_MAX;
    const uint64_t start = start_ns_;
    std::printf("mrc-fabric: %u planes x %u paths, %zu settings, %zu scheduled events%s\n",
                cfg_.planes, cfg_.paths, cfg_.settings.size(), cfg_.schedule.size(),
                dumper_ ? fmt::format(", capturing to {}", o_.capture).c_str() : "");
    for (uint32_t p = 0; p < cfg_.planes; ++p)
        std::printf("mrc-fabric: plane %u: %s <-> %s\n", p, ports_[p * 2]->name().c_str(),
                    ports_[p * 2 + 1]->name().c_str());
    if (o_.schedule_clock == "start") {
        sched_started_ = true;
        sched_origin_ns_ = start;
    }
    publish(0, true);
    if (int rc = rte_eal_alarm_set(1, on_alarm, this); rc != 0)
        die(fmt::format("cannot start the poll loop (rte_eal_alarm_set: {})", rc));
    while (!finished_.load(std::memory_order_acquire))
        mrc::sleep_for_steady(std::chrono::milliseconds(5));
    const double elapsed = double(clock_.now_ns() - start) / 1e9;
    publish(elapsed, true);
    // Frames still held are freed: nothing leaks at exit.
    for (uint32_t p = 0; p < cfg_.planes; ++p)
        for (Dir d : {kAtoB, kBtoA}) {
            Out &o = out_[p * 2 + d];
            for (uint16_t i = 0; i < o.n; ++i)
                rte_pktmbuf_free(o.pkts[i]);
            o.n = 0;
            DelayLine::Item items[kBurst];
            while (uint32_t n = fab_->drain(p, d, items, kBurst))  // not counted as sent
                for (uint32_t i = 0; i < n; ++i)
                    rte_pktmbuf_free(reinterpret_cast<rte_mbuf *>(uintptr_t(items[i].handle)));
        }
    const json s = summary(elapsed);
    const auto &t = s["totals"];
    std::printf("---- mrc-fabric summary ----\n");
    std::printf(
        "%.2f s, %u planes x %u paths: in %llu frames, out %llu; dropped loss %llu, burst %llu, "
        "queue %llu, down %llu, blackhole %llu, delay line full %llu; trimmed %llu, CE-marked "
        "%llu, duplicated %llu, reordered %llu; %llu non-MRC frames passed\n",
        elapsed, cfg_.planes, cfg_.paths, (unsigned long long)t["rx_pkts"].get<uint64_t>(),
        (unsigned long long)t["tx_pkts"].get<uint64_t>(),
        (unsigned long long)t["drop_loss"].get<uint64_t>(),
        (unsigned long long)t["drop_burst"].get<uint64_t>(),
        (unsigned long long)t["drop_queue"].get<uint64_t>(),
        (unsigned long long)t["drop_down"].get<uint64_t>(),
        (unsigned long long)t["drop_blackhole"].get<uint64_t>(),
        (unsigned long long)t["drop_delay_full"].get<uint64_t>(),
        (unsigned long long)t["trimmed"].get<uint64_t>(),
        (unsigned long long)t["ecn_marked"].get<uint64_t>(),
        (unsigned long long)t["duplicated"].get<uint64_t>(),
        (unsigned long long)t["reordered"].get<uint64_t>(),
        (unsigned long long)s["passed_not_mrc"].get<uint64_t>());
    if (dumper_) {
        pcap_dump_close(dumper_);
        pcap_close(pcap_);
        dumper_ = nullptr;
        std::printf("captured %llu frames to %s\n", (unsigned long long)captured_,
                    o_.capture.c_str());
    }
    if (!o_.json_path.empty())
        if (auto r = app::write_json_file(o_.json_path, s); !r) {
            std::fprintf(stderr, "mrc-fabric: %s\n", r.error().message.c_str());
            return 1;
        }
    return 0;
}

// ---- telemetry --------------------------------------------------------------------

void add_counters(rte_tel_data *d, const char *prefix, const PathCounters &c) {
    for (size_t i = 0; i < PathCounters::kCount; ++i)
        rte_tel_data_add_dict_u64(d, fmt::format("{}{}", prefix, kPathCounterInfo[i].name).c_str(),
                                  c.array()[i]);
}

int FabricApp::tel_stats(rte_tel_data *d) {
    std::lock_guard lk(snap_.mu);
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "planes", cfg_.planes);
    rte_tel_data_add_dict_u64(d, "paths", cfg_.paths);
    rte_tel_data_add_dict_u64(d, "generation", snap_.generation);
    PathCounters t;
    for (const auto &c : snap_.counters)
        t += c;
    add_counters(d, "", t);
    uint64_t passed = 0;
    for (const auto &p : snap_.planes)
        passed += p.passed;
    rte_tel_data_add_dict_u64(d, "passed_not_mrc", passed);
    return 0;
}

int FabricApp::tel_path(const char *params, rte_tel_data *d) {
    unsigned plane = 0, path = 0;
    char tail;
    if (params == nullptr || std::sscanf(params, "%u,%u%c", &plane, &path, &tail) != 2 ||
        plane >= cfg_.planes || path >= cfg_.paths)
        return -EINVAL;
    std::lock_guard lk(snap_.mu);
    rte_tel_data_start_dict(d);
    for (Dir dir : {kAtoB, kBtoA}) {
        const size_t i = (size_t(plane) * cfg_.paths + path) * 2 + dir;
        if (i >= snap_.counters.size()) return -EAGAIN;
        add_counters(d, dir == kAtoB ? "ab_" : "ba_", snap_.counters[i]);
        const PathParams &p = snap_.params[i];
        const std::string pre = dir == kAtoB ? "ab_" : "ba_";  // telemetry names: no dots
        rte_tel_data_add_dict_u64(d, (pre + "down").c_str(), p.down);
        rte_tel_data_add_dict_u64(d, (pre + "blackhole").c_str(), p.blackhole);
        rte_tel_data_add_dict_u64(d, (pre + "trim").c_str(), p.trim);
        // Telemetry in 22.11 has no doubles in dicts: parts per million.
        rte_tel_data_add_dict_u64(d, (pre + "loss_ppm").c_str(),
                                  uint64_t(std::llround(p.loss * 1e6)));
        rte_tel_data_add_dict_u64(d, (pre + "delay_ns").c_str(),
                                  uint64_t(std::llround(p.delay_us * 1e3)));
        rte_tel_data_add_dict_u64(d, (pre + "rate_mbps").c_str(),
                                  uint64_t(std::llround(p.rate_gbps * 1e3)));
        rte_tel_data_add_dict_u64(d, (pre + "queue_bytes").c_str(), p.queue_bytes);
    }
    return 0;
}

int FabricApp::tel_set(const char *params, rte_tel_data *d) {
    rte_tel_data_start_dict(d);
    auto s = parse_setting(params ? params : "");
    Result<void> r = s ? fab_->check(*s) : Result<void>(s.error());
    if (!r) {
        rte_tel_data_add_dict_string(d, "error", r.error().message.substr(0, 120).c_str());
        return 0;
    }
    {
        std::lock_guard lk(pending_mu_);
        pending_.push_back(std::move(*s));
        have_pending_.store(true, std::memory_order_release);
    }
    rte_tel_data_add_dict_string(d, "status", "queued");
    return 0;
}

int tel_stats_cb(const char *, const char *, rte_tel_data *d) {
    std::lock_guard lk(g_app_mu);
    return g_app ? g_app->tel_stats(d) : -ENODEV;
}
int tel_path_cb(const char *, const char *params, rte_tel_data *d) {
    std::lock_guard lk(g_app_mu);
    return g_app ? g_app->tel_path(params, d) : -ENODEV;
}
int tel_set_cb(const char *, const char *params, rte_tel_data *d) {
    std::lock_guard lk(g_app_mu);
    return g_app ? g_app->tel_set(params, d) : -ENODEV;
}

int run_main(app::Args &args) {
    Options o;
    CLI::App cli{
        "mrc-fabric: an impairment fabric between DPDK port pairs (EAL arguments, then "
        "--, then these)"};
    cli.add_option("--port", o.ports, "ports in pairs: A0 B0 A1 B1 ... (default: every port)")
        ->take_all();
    cli.add_option("--paths", o.paths, "emulated paths per plane (default 4)")
        ->check(CLI::Range(1u, kMaxPaths));
    cli.add_option("--config", o.config, "TOML file: paths, seed, [[impair]], [[schedule]]");
    cli.add_option("--impair", o.impair,
                   "a setting, e.g. plane=0,path=1,dir=ab,loss=0.01,delay_us=20 (repeatable)")
        ->take_all();
    cli.add_option("--schedule", o.schedule, "a timed setting, e.g. at_ms=500,plane=1,down=1")
        ->take_all();
    cli.add_option("--schedule-clock", o.schedule_clock,
                   "what at_ms counts from: first-frame (the first MRC frame) or start")
        ->check(CLI::IsMember({"first-frame", "start"}))
        ->capture_default_str();
    cli.add_option("--seed", o.seed, "random seed (loss, jitter, ...)");
    cli.add_option("--delay-slots", o.delay_slots, "frames each plane and direction can hold")
        ->check(CLI::Range(1u, 1u << 20));
    cli.add_option("--mrc-port", o.mrc_port, "UDP destination port of MRC (default 4797)");
    cli.add_option("--capture", o.capture, "write forwarded frames to this pcap file");
    cli.add_option("--capture-path", o.capture_paths,
                   "capture only PLANE[:PATH[:ab|ba]] (repeatable; default everything)")
        ->take_all();
    cli.add_option("--duration", o.duration_s, "seconds to run (0: until SIGINT/SIGTERM)")
        ->check(CLI::Range(0.0, 1e7));
    cli.add_option("--stats-period", o.stats_period_s, "seconds between live lines (0: none)")
        ->check(CLI::Range(0.0, 3600.0))
        ->capture_default_str();
    cli.add_option("--json", o.json_path, "write the final counters here");
    cli.add_option("--idle", o.idle, "sleep (share the CPU, default) or busy")
        ->check(CLI::IsMember({"busy", "sleep"}))
        ->capture_default_str();
    cli.add_option("--link-wait", o.link_wait_s,
                   "seconds to wait for links at start (memif clients)")
        ->check(CLI::Range(0.0, 3600.0));
    cli.add_option("--mtu", o.mtu, "IP MTU of the ports")
        ->check(CLI::Range(576, 9600))
        ->capture_default_str();
    if (auto rc = app::parse_cli(cli, args)) return *rc;
    if (!o.capture_paths.empty() && o.capture.empty()) die("--capture-path needs --capture FILE");

    FabricConfig cfg;
    if (!o.config.empty()) {
        auto c = load_config(o.config, cfg);
        if (!c) die(c.error().message);
        cfg = std::move(*c);
    }
    if (o.paths) cfg.paths = o.paths;
    if (cli.count("--seed")) cfg.seed = o.seed;
    if (o.delay_slots) cfg.delay_slots = o.delay_slots;
    if (o.mrc_port) cfg.mrc_port = o.mrc_port;
    for (const auto &s : o.impair) {
        auto r = parse_setting(s);
        if (!r) die(fmt::format("--impair {}: {}", s, r.error().message));
        cfg.settings.push_back(std::move(*r));
    }
    for (const auto &s : o.schedule) {
        auto r = parse_event(s);
        if (!r) die(fmt::format("--schedule {}: {}", s, r.error().message));
        cfg.schedule.push_back(std::move(*r));
    }
    {
        FabricApp a(o, cfg);
        a.setup();
        const AppRegistration reg(&a);  // before `a` goes, however it goes
        rte_telemetry_register_cmd("/fabric/stats", tel_stats_cb,
                                   "mrc-fabric totals over every path and direction");
        rte_telemetry_register_cmd("/fabric/path", tel_path_cb,
                                   "One path's counters and parameters. Params: PLANE,PATH");
        rte_telemetry_register_cmd(
            "/fabric/set", tel_set_cb,
            "Change parameters at run time. Params: plane=P,path=K,dir=ab,loss=0.01,...");
        return a.run();
    }
}

}  // namespace

int main(int argc, char **argv) {
    return app::dpdk_main("mrc-fabric", argc, argv, {}, run_main);
}
