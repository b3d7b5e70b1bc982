// mrc-gen: a testpmd-style load generator that pushes verified MRC traffic
// over several ports (planes) at once and tells what happened.
//
//   mrc-gen [EAL args] -- --role server|client [--port DEV]... [options]
//
// The two ends agree on QPs, PSNs, addresses and keys over a TCP
// connection (--oob, as perftest does), then the client writes and the
// server checks. docs/mrc-gen.md lists every flag.
//
// Exit status: 0 the run completed (and verified, with --verify), 1 the run
// failed (QP errors, verify errors, a peer that went away), 2 bad usage or
// a set-up failure.
#include <fmt/format.h>
#include <rte_eal.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "app_dpdk.h"
#include "common/sleep.h"
#include "dpdk/dataplane.h"
#include "gen.h"
#include "json_channel.h"
#include "pattern.h"
#include "plane_json.h"
#include "port/eal.h"
#include "wire/addr.h"

using namespace mrc;
using namespace mrc::gen;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kPd = 1;
constexpr int kProtocolVersion = 1;

struct Options {
    std::string role;
    std::vector<std::string> ports;
    std::vector<std::string> local_ip;
    std::vector<std::string> peer_ip;
    std::vector<std::string> peer_mac;
    std::string oob = "127.0.0.1:18515";
    uint32_t qps = 4;
    uint32_t msg_bytes = 65536;
    uint32_t depth = 4;
    std::string mode = "write";
    double duration_s = 0;
    uint64_t total_bytes = 0;
    double rate_gbps = 0;
    double stats_period_s = 1;
    std::string json_path;
    bool verify = false;
    uint16_t mtu = 1500;
    std::string cc = "nscc";
    double line_gbps = 25;
    uint32_t evs_per_plane = 16;
    std::string idle = "busy";
    bool zero_copy = false;
    bool no_udp_cksum = false;
    std::vector<std::string> cuts;
    double link_wait_s = 30;
    double timeout_s = 60;
    double control_us = 1000;
    uint32_t max_qps = 256;
    uint16_t mrc_port = wire::kDefaultMrcPort;
    std::string rto = "adaptive";
    uint32_t timeout_exp = 12;
    double rto_min_us = double(RetryPolicy{}.min_rto_ns) / 1000;
    double keepalive_ms = double(LivenessConfig{}.keepalive_ns) / 1e6;
    double peer_timeout_ms = double(LivenessConfig{}.peer_timeout_ns) / 1e6;
};

using app::die;

// One value per plane: a single value applies to every plane.
template <typename T, typename F>
std::vector<T> per_plane(const std::vector<std::string> &in, uint8_t planes, const char *flag,
                         F parse) {
    std::vector<std::string> items;
    for (const auto &s : in) {
        size_t start = 0;
        while (start <= s.size()) {
            const size_t c = s.find(',', start);
            items.push_back(s.substr(start, c == std::string::npos ? c : c - start));
            if (c == std::string::npos) break;
            start = c + 1;
        }
    }
    if (items.size() != 1 && items.size() != planes)
        die(fmt::format("{}: give one value, or one per plane ({} planes)", flag, planes));
    std::vector<T> out;
    for (uint8_t p = 0; p < planes; ++p) {
        const std::string &s = items[items.size() == 1 ? 0 : p];
        auto v = parse(s);
        if (!v) die(fmt::format("{}: cannot parse '{}'", flag, s));
        out.push_back(*v);
    }
    return out;
}

struct Cut {
    uint8_t plane;
    double at_s;
    bool done = false;
};

// Everything one end knows about itself that the other end needs.
struct Side {
    std::vector<uint32_t> qpns, psns;
    std::vector<uint64_t> addrs;
    std::vector<uint32_t> rkeys;
    std::vector<uint32_t> ips;
    std::vector<std::string> macs;
};
json side_json(const Side &s) {
    return {{"qpns", s.qpns},   {"psns", s.psns}, {"addrs", s.addrs},
            {"rkeys", s.rkeys}, {"ips", s.ips},   {"macs", s.macs}};
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
    for (const auto &m : s.macs)
        if (!wire::parse_mac(m)) {
            *why = "the peer sent a bad MAC address";
            return std::nullopt;
        }
    return s;
}

class Generator {
  public:
    explicit Generator(Options o) : o_(std::move(o)) {}
    ~Generator() {
        dp_.reset();  // workers and ports first: they may point into the regions
        for (uint8_t *r : regions_)
            std::free(r);
    }
    Generator(const Generator &) = delete;
    Generator &operator=(const Generator &) = delete;
    int run();

  private:
    void setup_dataplane();
    std::vector<uint32_t> local_ips(uint8_t planes) const {
        return per_plane<uint32_t>(
            o_.local_ip.empty()
                ? std::vector<std::string>{role_ == Role::kClient ? "10.10.0.1" : "10.10.0.2"}
                : o_.local_ip,
            planes, "--local-ip", wire::parse_ipv4);
    }
    void create_qps();
    void connect_qps(const Side &peer);
    std::string stats_line(double t);
    json summary(double elapsed_s);
    uint64_t verify_write_slots(const json &slots, uint64_t *verified_bytes);
    int client();
    int server();

  public:
    int finish();

    Options o_;
    Role role_ = Role::kClient;
    Mode mode_ = Mode::kWrite;
    std::unique_ptr<dp::Dataplane> dp_;
    std::vector<std::unique_ptr<GenApp>> apps_;
    std::vector<uint8_t *> regions_;
    std::vector<uint64_t> region_bytes_;
    uint32_t slots_ = 0;
    uint8_t planes_ = 0;
    std::vector<uint32_t> local_ips_;
    std::vector<uint32_t> peer_ips_override_;
    std::vector<wire::MacAddr> peer_macs_override_;
    Side me_;
    std::vector<Cut> cuts_;
    QpConfig qcfg_;
    // Live-line state.
    uint64_t last_bytes_ = 0, last_frames_ = 0;
    double last_t_ = 0;
    json peer_result_;
    std::string failure_;
    double end_s_ = 0;
    json summary_;  // made before the ports close
    bool read_links_up() const {
        for (uint8_t p = 0; p < planes_; ++p)
            if (dp_->port(p).link().up) return true;
        return false;
    }
    uint64_t own_verified_ = 0;  // server, write mode: slots checked after the run
    uint64_t own_verify_errors_ = 0;
    Clock::time_point t0_;
};

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
    dc.udp_checksum = !o_.no_udp_cksum;
    dc.zero_copy_tx = o_.zero_copy;
    dc.idle = o_.idle == "sleep"   ? dp::IdleMode::kSleep
              : o_.idle == "yield" ? dp::IdleMode::kYield
                                   : dp::IdleMode::kBusy;
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
    for (uint8_t p = 0; p < planes_; ++p)
        me_.macs.push_back(wire::mac_string(dp_->port(p).mac()));
    for (uint32_t w = 0; w < nworkers; ++w)
        dp_->worker(w).set_app(apps_[w].get());
}

void Generator::connect_qps(const Side &peer) {
    const uint32_t nworkers = dp_->workers();
    for (uint32_t i = 0; i < o_.qps; ++i) {
        GenApp &app = *apps_[i % nworkers];
        GenQp &g = app.qps()[i / nworkers];
        QpPeer qp;
        qp.dst_qpn = peer.qpns[i];
        qp.planes = planes_;
        for (uint8_t p = 0; p < planes_; ++p) {
            wire::MrcAddr &a = qp.path[p];
            a.src_mac = dp_->port(p).mac();
            a.dst_mac = peer_macs_override_.empty() ? *wire::parse_mac(peer.macs[p])
                                                    : peer_macs_override_[p];
            a.src_ip = local_ips_[p];
            a.dst_ip = peer.ips[p];
            a.dst_port = o_.mrc_port;
        }
        if (auto r = g.qp->to_rtr(qp, Psn(peer.psns[i])); !r) die(r.error().message);
        if (auto r = g.qp->to_rts(Psn(me_.psns[i])); !r) die(r.error().message);
        g.remote_addr = peer.addrs[i];
        g.remote_rkey = peer.rkeys[i];
    }
}

std::string Generator::stats_line(double t) {
    uint64_t bytes = 0, qp_err = 0;
    for (const auto &a : apps_) {
        bytes += a->stats().bytes.load(std::memory_order_relaxed);
        qp_err += a->stats().qp_errors.load(std::memory_order_relaxed);
    }
    const dp::WorkerSnapshot s = dp_->totals();
    const uint64_t frames = s.worker.tx_packets + s.worker.rx_packets;
    const double dt = t - last_t_;
    const double gbps = dt > 0 ? double(bytes - last_bytes_) * 8 / dt / 1e9 : 0;
    const double mpps = dt > 0 ? double(frames - last_frames_) / dt / 1e6 : 0;
    last_bytes_ = bytes;
    last_frames_ = frames;
    last_t_ = t;
    const dp::QpSummary q = dp_->qp_totals();
    uint64_t port_total = 0;
    uint64_t per[kMaxPlanes] = {};
    for (uint8_t p = 0; p < planes_; ++p) {
        per[p] = role_ == Role::kClient ? s.planes[p].tx_data_pkts + s.planes[p].tx_retx_pkts
                                        : s.port_rx_pkts[p];
        port_total += per[p];
    }
    std::string share, links;
    for (uint8_t p = 0; p < planes_; ++p) {
        share +=
            fmt::format("{}{:.0f}%", p ? "/" : "", port_total ? 100.0 * per[p] / port_total : 0);
        links += (dp_->link_up_mask() >> p) & 1 ? 'U' : 'D';
    }
    return fmt::format(
        "[{:6.1f}s] goodput {:7.2f} Gb/s  {:6.3f} Mpps  retx {}  ports {} links {}  qp_errors {}",
        t, gbps, mpps, q.sum.tx_retx_pkts, share, links, std::max<uint64_t>(qp_err, q.qps_error));
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

json Generator::summary(double elapsed_s) {
    uint64_t messages = 0, bytes = 0, verified = 0, verify_errors = 0, qp_errors = 0;
    std::vector<uint32_t> lat;
    uint64_t lat_dropped = 0;
    std::string first_error;
    for (const auto &a : apps_) {
        messages += a->stats().messages.load();
        bytes += a->stats().bytes.load();
        verified += a->stats().verified_bytes.load();
        verify_errors += a->stats().verify_errors.load();
        qp_errors += a->stats().qp_errors.load();
        lat.insert(lat.end(), a->latency_ns().begin(), a->latency_ns().end());
        lat_dropped += a->latency_dropped();
        if (first_error.empty()) first_error = a->first_error();
    }
    const dp::WorkerSnapshot s = dp_->totals();
    const dp::QpSummary q = dp_->qp_totals();
    qp_errors = std::max<uint64_t>(qp_errors, q.qps_error);
    verified += own_verified_;
    verify_errors += own_verify_errors_;
    if (peer_result_.is_object()) {
        verified += peer_result_.value("bytes_verified", uint64_t{0});
        verify_errors += peer_result_.value("verify_errors", uint64_t{0});
    }
    // A WRITE tells the server nothing: count what its QPs placed.
    if (role_ == Role::kServer && mode_ == Mode::kWrite) bytes = q.sum.rx_data_bytes;
    json j;
    j["role"] = role_ == Role::kClient ? "client" : "server";
    j["mode"] = to_string(mode_);
    j["qps"] = o_.qps;
    j["msg_bytes"] = o_.msg_bytes;
    j["planes"] = planes_;
    j["workers"] = dp_->workers();
    j["verify"] = o_.verify;
    j["elapsed_s"] = elapsed_s;
    j["goodput_gbps"] = elapsed_s > 0 ? double(bytes) * 8 / elapsed_s / 1e9 : 0;
    j["mpps"] =
        elapsed_s > 0 ? double(s.worker.tx_packets + s.worker.rx_packets) / elapsed_s / 1e6 : 0;
    j["tx_mpps"] = elapsed_s > 0 ? double(s.worker.tx_packets) / elapsed_s / 1e6 : 0;
    j["rx_mpps"] = elapsed_s > 0 ? double(s.worker.rx_packets) / elapsed_s / 1e6 : 0;
    j["messages"] = messages;
    j["bytes"] = bytes;
    j["bytes_verified"] = verified;
    j["verify_errors"] = verify_errors;
    j["retransmissions"] = q.sum.tx_retx_pkts;
    j["qp_errors"] = qp_errors;
    if (!first_error.empty()) j["first_error"] = first_error;
    if (!failure_.empty()) j["failure"] = failure_;
    if (!lat.empty()) {
        j["latency_us"] = {{"samples", lat.size()},
                           {"dropped", lat_dropped},
                           {"p50", percentile_us(lat, 0.50)},
                           {"p99", percentile_us(lat, 0.99)},
                           {"p999", percentile_us(lat, 0.999)},
                           {"max", percentile_us(lat, 1.0)}};
    }
    json ports = json::array();
    for (uint8_t p = 0; p < planes_; ++p) {
        ports.push_back(app::plane_json(*dp_, s, p));
        ports.back()["cut"] = ((dp_->cut_mask() >> p) & 1) != 0;
    }
    j["ports"] = ports;
    json wc, ec, qc;
    const uint64_t *w = dp::counter_array(s.worker);
    for (size_t i = 0; i < dp::WorkerCounters::kCount; ++i)
        wc[dp::kWorkerCounterInfo[i].name] = w[i];
    const uint64_t *e = counter_array(s.endpoint);
    for (size_t i = 0; i < kEndpointCounterCount; ++i)
        ec[kEndpointCounterInfo[i].name] = e[i];
    const uint64_t *c = counter_array(q.sum);
    for (size_t i = 0; i < kQpCounterCount; ++i)
        qc[kQpCounterInfo[i].name] = c[i];
    j["worker_counters"] = wc;
    j["endpoint_counters"] = ec;
    j["qp_counters"] = qc;
    if (peer_result_.is_object()) j["peer"] = peer_result_;
    return j;
}

int Generator::client() {
    auto oob_addr = app::parse_host_port(o_.oob, 18515);
    if (!oob_addr) die(oob_addr.error().message);
    create_qps();
    auto conn = app::JsonChannel::connect(oob_addr->first, oob_addr->second,
                                          static_cast<uint32_t>(o_.timeout_s * 1000),
                                          &app::stop_flag(), "mrc-gen server");
    if (!conn) die(conn.error().message);
    json hello = {{"hello",
                   {{"version", kProtocolVersion},
                    {"mode", to_string(mode_)},
                    {"qps", o_.qps},
                    {"msg_bytes", o_.msg_bytes},
                    {"slots", slots_},
                    {"verify", o_.verify},
                    {"planes", planes_},
                    {"mrc_port", o_.mrc_port},
                    {"side", side_json(me_)}}}};
    if (auto r = conn->send(hello); !r) die(r.error().message);
    auto reply = conn->recv(static_cast<uint32_t>(o_.timeout_s * 1000), &app::stop_flag());
    if (!reply) die(reply.error().message);
    if (!*reply)
        die(app::stop_requested()
                ? std::string("interrupted")
                : fmt::format("the server did not answer within {} s", o_.timeout_s));
    const json &rj = **reply;
    if (rj.contains("error")) die("the server refused: " + rj["error"].get<std::string>());
    std::string why;
    auto peer = side_from(rj.value("ok", json::object()), o_.qps, planes_, &why);
    if (!peer) die(why);
    if (!peer_ips_override_.empty())
        for (uint8_t p = 0; p < planes_; ++p)
            if (peer->ips[p] != peer_ips_override_[p])
                die(fmt::format("--peer-ip: plane {} is {} at the server, not {}", p,
                                wire::ipv4_string(peer->ips[p]),
                                wire::ipv4_string(peer_ips_override_[p])));
    connect_qps(*peer);
    if (auto r = dp_->start(); !r) die(r.error().message);

    t0_ = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0_).count(); };
    double next_stats = o_.stats_period_s;
    bool draining = false;
    double drain_started = 0;
    double end_s = 0;
    const double drain_limit_s = 30;
    for (;;) {
        mrc::sleep_for_steady(std::chrono::milliseconds(5));
        const double t = elapsed();
        for (Cut &c : cuts_)
            if (!c.done && t >= c.at_s) {
                c.done = true;
                std::printf("[%6.1fs] cutting plane %u (port %s)\n", t, unsigned(c.plane),
                            dp_->port(c.plane).name().c_str());
                if (auto r = dp_->cut_port(c.plane); !r)
                    std::fprintf(stderr, "mrc-gen: %s\n", r.error().message.c_str());
            }
        if (o_.stats_period_s > 0 && t >= next_stats) {
            std::printf("%s\n", stats_line(t).c_str());
            next_stats += o_.stats_period_s;
        }
        bool all_drained = true, all_failed = true;
        for (const auto &a : apps_) {
            all_drained = all_drained && a->stats().drained.load(std::memory_order_acquire);
            all_failed = all_failed && a->stats().qp_errors.load() >= a->qps().size();
        }
        // The server going away shows on the TCP connection at once.
        auto msg = conn->recv(0);
        if (!msg) {
            failure_ = "server went away: " + msg.error().message;
            break;
        }
        if (!draining) {
            const bool time_up = o_.duration_s > 0 && t >= o_.duration_s;
            if (time_up || app::stop_requested() || all_failed || (o_.total_bytes && all_drained)) {
                draining = true;
                drain_started = t;
                for (auto &a : apps_)
                    a->drain();
                if (app::stop_requested()) failure_ = "interrupted";
                if (all_failed) failure_ = "every QP failed";
            }
        }
        if (draining) {
            if (all_drained || all_failed) break;
            if (t - drain_started > drain_limit_s) {
                uint64_t left = 0;
                for (const auto &a : apps_)
                    left += a->stats().outstanding.load();
                failure_ = fmt::format("{} messages still outstanding {} s after the end", left,
                                       drain_limit_s);
                break;
            }
        }
    }
    end_s = elapsed();
    // The transfer is over: stop driving the QPs before the server stops
    // its own (on "done"), or their liveness check would take the silent
    // server for a dead one.
    dp_->stop();
    // Tell the server what to check, and collect its verdict.
    if (failure_.rfind("server went away", 0) != 0) {
        json slots = json::array();
        for (uint32_t i = 0; i < o_.qps; ++i) {
            const GenQp &g = apps_[i % dp_->workers()]->qps()[i / dp_->workers()];
            slots.push_back(g.last_done);
        }
        uint64_t messages = 0;
        for (const auto &a : apps_)
            messages += a->stats().messages.load();
        if (auto r = conn->send({{"done", {{"messages", messages}, {"slots", slots}}}}); !r) {
            failure_ = r.error().message;
        } else {
            auto res = conn->recv(30'000);
            if (res && *res && (*res)->contains("result"))
                peer_result_ = (**res)["result"];
            else
                failure_ = "the server did not report its result";
        }
    }
    dp_->stop();
    end_s_ = end_s;
    // Tear down in order: this end closes its ports first, then tells the
    // server, which closes its own once it saw the links go down. (DPDK
    // 22.11's memif can crash when both ends close at the same moment.)
    summary_ = summary(end_s_);
    dp::telemetry_attach(nullptr);
    dp_.reset();
    (void)conn->send({{"bye", true}});
    return 0;
}

int Generator::server() {
    auto oob_addr = app::parse_host_port(o_.oob, 18515);
    if (!oob_addr) die(oob_addr.error().message);
    std::printf("mrc-gen server: %u planes, waiting for a client on %s:%u\n", unsigned(planes_),
                oob_addr->first.c_str(), unsigned(oob_addr->second));
    std::fflush(stdout);
    auto conn =
        app::JsonChannel::accept(oob_addr->first, oob_addr->second,
                                 static_cast<uint32_t>(o_.timeout_s * 1000), &app::stop_flag());
    if (!conn) die(conn.error().message);
    auto hello_msg = conn->recv(static_cast<uint32_t>(o_.timeout_s * 1000), &app::stop_flag());
    if (app::stop_requested()) die("interrupted");
    if (!hello_msg || !*hello_msg || !(*hello_msg)->contains("hello"))
        die("the client did not introduce itself");
    const json h = (**hello_msg)["hello"];
    auto refuse = [&](const std::string &why) {
        (void)conn->send({{"error", why}});
        die("refused the client: " + why);
    };
    try {
        if (h.at("version").get<int>() != kProtocolVersion)
            refuse(fmt::format("protocol version {} (this server speaks {})",
                               h.at("version").get<int>(), kProtocolVersion));
        // The client decides the workload; the server follows it.
        o_.qps = h.at("qps").get<uint32_t>();
        o_.msg_bytes = h.at("msg_bytes").get<uint32_t>();
        slots_ = h.at("slots").get<uint32_t>();
        o_.verify = h.at("verify").get<bool>();
        const std::string m = h.at("mode").get<std::string>();
        mode_ = m == "write_imm"  ? Mode::kWriteImm
                : m == "pingpong" ? Mode::kPingpong
                                  : Mode::kWrite;
        if (h.at("planes").get<uint32_t>() != planes_)
            refuse(fmt::format("the client has {} planes, this server {}",
                               h.at("planes").get<uint32_t>(), planes_));
        if (h.at("mrc_port").get<uint16_t>() != o_.mrc_port)
            refuse(fmt::format("MRC UDP port {} (this server uses {})",
                               h.at("mrc_port").get<uint16_t>(), o_.mrc_port));
    } catch (const std::exception &e) {
        refuse(std::string("malformed hello: ") + e.what());
    }
    if (o_.qps == 0 || o_.qps > 4096) refuse("QP count out of range [1, 4096]");
    if (o_.msg_bytes == 0 || slots_ == 0 || uint64_t{slots_} * o_.msg_bytes > (1ull << 30))
        refuse("message size x slots out of range (1 GiB per QP at most)");
    if (o_.qps > dp_->workers() * dp_->config().max_qps_per_worker)
        refuse(fmt::format("{} QPs: this server was started for at most {}", o_.qps,
                           dp_->workers() * dp_->config().max_qps_per_worker));
    std::string why;
    auto peer = side_from(h.at("side"), o_.qps, planes_, &why);
    if (!peer) refuse(why);
    create_qps();
    connect_qps(*peer);
    if (auto r = conn->send({{"ok", side_json(me_)}}); !r) die(r.error().message);
    if (auto r = dp_->start(); !r) die(r.error().message);
    std::printf("mrc-gen server: client connected: %s, %u QPs, %u-byte messages%s\n",
                to_string(mode_), o_.qps, o_.msg_bytes, o_.verify ? ", verified" : "");
    t0_ = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0_).count(); };
    double next_stats = o_.stats_period_s;
    json done;
    for (;;) {
        auto msg = conn->recv(5);
        const double t = elapsed();
        if (o_.stats_period_s > 0 && t >= next_stats) {
            std::printf("%s\n", stats_line(t).c_str());
            next_stats += o_.stats_period_s;
        }
        for (Cut &c : cuts_)
            if (!c.done && t >= c.at_s) {
                c.done = true;
                std::printf("[%6.1fs] cutting plane %u (port %s)\n", t, unsigned(c.plane),
                            dp_->port(c.plane).name().c_str());
                if (auto r = dp_->cut_port(c.plane); !r)
                    std::fprintf(stderr, "mrc-gen: %s\n", r.error().message.c_str());
            }
        if (!msg) {
            failure_ = "client went away before the end: " + msg.error().message;
            break;
        }
        if (*msg && (*msg)->contains("done")) {
            done = (**msg)["done"];
            break;
        }
        if (app::stop_requested()) {
            failure_ = "interrupted";
            break;
        }
    }
    const double end_s = elapsed();
    dp_->stop();
    // Write mode: what the client last wrote into each slot must be there.
    uint64_t wr_verified = 0, wr_errors = 0;
    if (done.is_object() && mode_ == Mode::kWrite && o_.verify)
        wr_errors = verify_write_slots(done.value("slots", json()), &wr_verified);
    uint64_t verified = wr_verified, verify_errors = wr_errors, messages = 0, qp_errors = 0;
    for (const auto &a : apps_) {
        verified += a->stats().verified_bytes.load();
        verify_errors += a->stats().verify_errors.load();
        messages += a->stats().messages.load();
        qp_errors += a->stats().qp_errors.load();
    }
    if (done.is_object()) {
        (void)conn->send({{"result",
                           {{"bytes_verified", verified},
                            {"verify_errors", verify_errors},
                            {"messages_received", messages},
                            {"qp_errors", qp_errors}}}});
    }
    own_verified_ = wr_verified;
    own_verify_errors_ = wr_errors;
    end_s_ = end_s;
    summary_ = summary(end_s_);
    if (done.is_object()) {
        // The client closes its ports first (see client()).
        const auto until = Clock::now() + std::chrono::seconds(5);
        while (Clock::now() < until) {
            auto m = conn->recv(100);
            if (!m || (*m && (*m)->contains("bye"))) break;
        }
        for (int i = 0; i < 200 && dp_->planes() && (read_links_up()); ++i)
            mrc::sleep_for_steady(std::chrono::milliseconds(10));
    }
    dp::telemetry_attach(nullptr);
    dp_.reset();
    return 0;
}

int Generator::finish() {
    if (summary_.is_null()) summary_ = summary(end_s_);
    json &j = summary_;
    const uint64_t verify_errors = j["verify_errors"].get<uint64_t>();
    const uint64_t qp_errors = j["qp_errors"].get<uint64_t>();
    std::printf("---- mrc-gen %s summary ----\n", j["role"].get<std::string>().c_str());
    std::printf("mode %s, %u QPs, %u-byte messages, %u planes, %u workers, %.2f s\n",
                to_string(mode_), o_.qps, o_.msg_bytes, unsigned(planes_),
                j["workers"].get<unsigned>(), end_s_);
    std::printf("goodput %.2f Gb/s, %.3f Mpps (tx %.3f, rx %.3f), %llu messages, %llu bytes\n",
                j["goodput_gbps"].get<double>(), j["mpps"].get<double>(),
                j["tx_mpps"].get<double>(), j["rx_mpps"].get<double>(),
                (unsigned long long)j["messages"].get<uint64_t>(),
                (unsigned long long)j["bytes"].get<uint64_t>());
    std::printf(
        "verified %llu bytes, %llu verify errors, %llu retransmissions, %llu QP errors\n",
        (unsigned long long)j["bytes_verified"].get<uint64_t>(), (unsigned long long)verify_errors,
        (unsigned long long)j["retransmissions"].get<uint64_t>(), (unsigned long long)qp_errors);
    if (j.contains("latency_us"))
        std::printf("latency p50 %.1f us, p99 %.1f us, p99.9 %.1f us (%llu samples)\n",
                    j["latency_us"]["p50"].get<double>(), j["latency_us"]["p99"].get<double>(),
                    j["latency_us"]["p999"].get<double>(),
                    (unsigned long long)j["latency_us"]["samples"].get<uint64_t>());
    for (const auto &p : j["ports"])
        std::printf("plane %u %-12s tx %llu rx %llu frames, link %s%s\n",
                    p["plane"].get<unsigned>(), p["port"].get<std::string>().c_str(),
                    (unsigned long long)p["tx_packets"].get<uint64_t>(),
                    (unsigned long long)p["rx_packets"].get<uint64_t>(),
                    p["link"].get<std::string>().c_str(), p["cut"].get<bool>() ? " (cut)" : "");
    for (const auto &p : j["ports"])
        if (p.contains("xdp"))
            std::printf(
                "plane %u XDP on %s (%s): %llu steered to DPDK, %llu to the kernel, "
                "%llu MRC with no socket, %llu MRC to another address\n",
                p["plane"].get<unsigned>(), p["xdp"]["iface"].get<std::string>().c_str(),
                p["xdp"]["mode"].get<std::string>().c_str(),
                (unsigned long long)p["xdp"]["steered"].get<uint64_t>(),
                (unsigned long long)p["xdp"]["to_kernel"].get<uint64_t>(),
                (unsigned long long)p["xdp"]["no_socket"].get<uint64_t>(),
                (unsigned long long)p["xdp"]["other_address"].get<uint64_t>());
    const auto &wc = j["worker_counters"];
    if (wc["rx_stray"].get<uint64_t>() || wc["rx_bad_cksum"].get<uint64_t>())
        std::printf("dropped: %llu stray frames, %llu bad checksums\n",
                    (unsigned long long)wc["rx_stray"].get<uint64_t>(),
                    (unsigned long long)wc["rx_bad_cksum"].get<uint64_t>());
    if (j.contains("first_error"))
        std::printf("first error: %s\n", j["first_error"].get<std::string>().c_str());
    if (!failure_.empty()) std::printf("FAILED: %s\n", failure_.c_str());
    if (o_.rate_gbps > 0 && role_ == Role::kClient && failure_.empty() &&
        j["goodput_gbps"].get<double>() < 0.9 * o_.rate_gbps)
        std::printf("note: asked for %.2f Gb/s, the ports carried %.2f Gb/s\n", o_.rate_gbps,
                    j["goodput_gbps"].get<double>());
    std::fflush(stdout);
    if (!o_.json_path.empty())
        if (auto r = app::write_json_file(o_.json_path, j); !r)
            std::fprintf(stderr, "mrc-gen: %s\n", r.error().message.c_str());
    const bool ok = failure_.empty() && verify_errors == 0 && qp_errors == 0 &&
                    (!o_.verify || j["bytes_verified"].get<uint64_t>() > 0 ||
                     j["messages"].get<uint64_t>() == 0);
    return ok ? 0 : 1;
}

int Generator::run() {
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
    local_ips_ = local_ips(planes_);
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
    return role_ == Role::kClient ? client() : server();
}

int run_main(app::Args &args) {
    Options o;
    CLI::App cli{"mrc-gen: MRC load generator (EAL arguments, then --, then these)"};
    // A flag given twice: the last one counts (scripts append overrides).
    cli.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    cli.add_option("--role", o.role, "server or client")
        ->required()
        ->check(CLI::IsMember({"server", "client"}));
    cli.add_option("--port", o.ports, "a DPDK port per plane (name or devargs); default: all")
        ->take_all();
    cli.add_option("--local-ip", o.local_ip, "this end's IPv4 address, one or one per plane");
    cli.add_option("--peer-ip", o.peer_ip, "the peer's IPv4 address(es): checked against the peer");
    cli.add_option("--peer-mac", o.peer_mac,
                   "the peer's MAC per plane (default: the peer's ports)");
    cli.add_option("--oob", o.oob, "HOST:PORT of the set-up connection (server: where to listen)")
        ->capture_default_str();
    cli.add_option("--qps", o.qps, "queue pairs")
        ->check(CLI::Range(1u, 4096u))
        ->capture_default_str();
    cli.add_option("--msg-bytes", o.msg_bytes, "bytes per message")
        ->check(CLI::Range(1u, 64u << 20))
        ->capture_default_str();
    cli.add_option("--depth", o.depth, "messages outstanding per QP")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    cli.add_option("--mode", o.mode, "write, write_imm or pingpong")
        ->check(CLI::IsMember({"write", "write_imm", "pingpong"}))
        ->capture_default_str();
    cli.add_option("--duration", o.duration_s, "seconds to run (client)")
        ->check(CLI::Range(0.0, 1e6));
    cli.add_option("--total-bytes", o.total_bytes, "bytes to move, then stop (client)");
    cli.add_option("--rate-gbps", o.rate_gbps, "offered load, Gb/s (0: as fast as possible)")
        ->check(CLI::Range(0.0, 1e5));
    cli.add_option("--stats-period", o.stats_period_s, "seconds between live lines (0: none)")
        ->check(CLI::Range(0.0, 3600.0))
        ->capture_default_str();
    cli.add_option("--json", o.json_path, "write the summary here");
    cli.add_flag("--verify", o.verify, "every payload carries a pattern the receiver checks");
    cli.add_option("--mtu", o.mtu, "IP MTU of the ports")
        ->check(CLI::Range(576, 9600))
        ->capture_default_str();
    cli.add_option("--cc", o.cc, "nscc or fixed")
        ->check(CLI::IsMember({"nscc", "fixed"}))
        ->capture_default_str();
    cli.add_option("--line-gbps", o.line_gbps,
                   "NSCC: what the ports carry, Gb/s over all planes (sets the window)")
        ->check(CLI::Range(0.1, 1e4))
        ->capture_default_str();
    cli.add_option("--evs-per-plane", o.evs_per_plane, "entropy values per plane and QP")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    cli.add_option(
           "--idle", o.idle,
           "busy (poll without pause), yield (sched_yield when idle) or sleep (share the CPU)")
        ->check(CLI::IsMember({"busy", "yield", "sleep"}))
        ->capture_default_str();
    cli.add_flag("--zero-copy", o.zero_copy, "send payloads from registered memory (extbuf mbufs)");
    cli.add_flag("--no-udp-cksum", o.no_udp_cksum, "send UDP checksum 0 and do not check it");
    cli.add_option("--cut-port", o.cuts,
                   "PLANE@SECONDS: stop that plane's port then (failover test)")
        ->take_all();
    cli.add_option("--link-wait", o.link_wait_s, "seconds to wait for every link")
        ->check(CLI::Range(0.0, 3600.0))
        ->capture_default_str();
    cli.add_option("--timeout", o.timeout_s, "seconds to wait for the peer on --oob")
        ->check(CLI::Range(0.1, 86400.0))
        ->capture_default_str();
    cli.add_option("--max-qps", o.max_qps, "server: most QPs per worker a client may ask for")
        ->check(CLI::Range(1u, 65535u))
        ->capture_default_str();
    cli.add_option("--control-us", o.control_us, "control thread period: path scoring, link state")
        ->check(CLI::Range(10.0, 1e6))
        ->capture_default_str();
    cli.add_option("--mrc-port", o.mrc_port, "UDP destination port of MRC")->capture_default_str();
    cli.add_option("--rto", o.rto,
                   "retransmission timeout: adaptive (per plane, from the RTT) or fixed "
                   "(1.024 us x 2^timeout-exp)")
        ->check(CLI::IsMember({"adaptive", "fixed"}))
        ->capture_default_str();
    cli.add_option("--timeout-exp", o.timeout_exp,
                   "fixed timeout 1.024 us x 2^t; adaptive: the timeout before any RTT sample")
        ->check(CLI::Range(1u, uint32_t{RetryPolicy::kMaxTimeoutExp}))
        ->capture_default_str();
    cli.add_option("--rto-min-us", o.rto_min_us, "adaptive timeout floor, us")
        ->check(CLI::Range(1.0, 1e7))
        ->capture_default_str();
    cli.add_option("--keepalive-ms", o.keepalive_ms,
                   "a QP that heard nothing from its peer this long sends a keepalive (0: off)")
        ->check(CLI::Range(0.0, 3.6e6))
        ->capture_default_str();
    cli.add_option("--peer-timeout-ms", o.peer_timeout_ms,
                   "a QP that heard nothing from its peer this long fails (0: off)")
        ->check(CLI::Range(0.0, 3.6e6))
        ->capture_default_str();
    if (auto rc = app::parse_cli(cli, args)) return *rc;
    if (o.role == "client" && o.duration_s == 0 && o.total_bytes == 0) o.duration_s = 10;
    if (o.peer_timeout_ms > 0 && (o.keepalive_ms == 0 || o.keepalive_ms >= o.peer_timeout_ms)) {
        std::fprintf(stderr,
                     "mrc-gen: --peer-timeout-ms needs --keepalive-ms above 0 and below it\n");
        return 2;
    }
    if (o.mode == "pingpong" && o.rate_gbps > 0) {
        std::fprintf(stderr, "mrc-gen: --rate-gbps does not apply to pingpong\n");
        return 2;
    }
    Generator g(o);
    g.run();
    return g.finish();
}

}  // namespace

int main(int argc, char **argv) {
    return app::dpdk_main("mrc-gen", argc, argv, {}, run_main);
}
