// mrc-sim: the real MRC transport core over a simulated multi-plane fabric.
//
//   mrc-sim --planes 4 --paths-per-plane 8 --qps 4 --msg-bytes 1048576
//           --total-bytes 268435456 --link-gbps 400 --delay-us 2 --loss 0.001
//           --impair 'plane=1,path=3,trim_bytes=65536' --fail 'plane=2,at_us=500,for_us=1000'
//           --json
//
// Exit status: 0 verified, 1 verification failed (lost, corrupt, duplicated
// or out-of-order data, a QP error, or the run timed out), 2 bad arguments.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include <sys/resource.h>

#include "common/key_values.h"
#include "core/counters.h"
#include "core/endpoint.h"
#include "sim/sim.h"

using namespace mrc;

namespace {

// One key of a 'key=value,...' spec (common/key_values.h, the grammar
// mrc-fabric takes too) and where its value goes.
struct Key {
    const char *name;
    std::function<void(double)> set;
    bool required = false;
    bool may_be_negative = false;
};

// Keys of mrc-fabric's vocabulary the simulator has no model for, and keys
// this tool once took under another name.
const std::map<std::string, std::string> kNotHere = {
    {"down", "a mrc-fabric setting: use --fail here"},
    {"blackhole", "a mrc-fabric setting: use --fail here"},
    {"burst_loss", "a mrc-fabric setting: here every packet is lost in the burst state"},
    {"rate_gbps", "a mrc-fabric setting: here use --path-gbps or --plane-limit"},
    {"queue_bytes", "a mrc-fabric setting: here use --queue-kb"},
    {"trim", "a mrc-fabric setting: here use trim_bytes=N (trim above N queued bytes)"},
    {"delay_us", "a mrc-fabric setting: here use --delay-us"},
    {"jitter_us", "a mrc-fabric setting the simulator does not model"},
    {"dup", "renamed: duplicate (as in mrc-fabric)"},
    {"burst", "renamed: burst_enter (as in mrc-fabric)"},
    {"ecn_kb", "renamed: ecn_bytes, in bytes (as in mrc-fabric)"},
    {"trim_kb", "renamed: trim_bytes, in bytes"},
};

// Parses `spec` against `keys`: every key known, a number, not negative
// unless allowed, the required ones present. "dir" takes ab, ba or both
// (or 0, 1), as in mrc-fabric, and sets -1 for both. Returns the error, or
// empty.
std::string parse_keys(const std::string &spec, const std::vector<Key> &keys) {
    auto kv = split_key_values(spec);
    if (!kv) return kv.error().message;
    for (const Key &k : keys) {
        const bool given = std::any_of(kv->begin(), kv->end(),
                                       [&](const auto &item) { return item.first == k.name; });
        if (k.required && !given) return fmt::format("needs {}=", k.name);
    }
    for (const auto &item : *kv) {
        // Named copies, not structured bindings: a lambda below uses them.
        const std::string &name = item.first, &v = item.second;
        const auto key =
            std::find_if(keys.begin(), keys.end(), [&](const Key &k) { return name == k.name; });
        if (key == keys.end()) {
            if (auto it = kNotHere.find(name); it != kNotHere.end())
                return fmt::format("'{}': {}", name, it->second);
            std::string names;
            for (const Key &k : keys)
                names += (names.empty() ? "" : ", ") + std::string(k.name);
            return fmt::format("unknown key '{}' ({})", name, names);
        }
        double d;
        if (name == "dir") {
            auto dir = parse_direction(name, v);
            if (!dir) return dir.error().message;
            d = *dir == Direction::kAtoB ? 0 : *dir == Direction::kBtoA ? 1 : -1;
        } else {
            auto n = parse_number(name, v);
            if (!n) return n.error().message;
            d = *n;
            if (d < 0 && !key->may_be_negative)
                return fmt::format("{}={}: must not be negative", name, v);
        }
        key->set(d);
    }
    return {};
}

std::string parse_impair(const std::string &spec, sim::Impairment &im) {
    return parse_keys(spec,
                      {{"plane", [&](double d) { im.plane = int(d); }, false, true},
                       {"path", [&](double d) { im.path = int(d); }, false, true},
                       {"dir", [&](double d) { im.dir = int(d); }},
                       {"loss", [&](double d) { im.loss = d; }},
                       {"burst_enter", [&](double d) { im.burst_enter = d; }},
                       {"burst_exit", [&](double d) { im.burst_exit = d; }},
                       {"ecn_bytes", [&](double d) { im.ecn_bytes = uint64_t(d); }},
                       {"trim_bytes", [&](double d) { im.trim_bytes = uint64_t(d); }},
                       {"duplicate", [&](double d) { im.duplicate = d; }},
                       {"reorder", [&](double d) { im.reorder = d; }},
                       {"reorder_us", [&](double d) { im.reorder_ns = uint64_t(d * 1000); }}});
}

std::string parse_fail(const std::string &spec, sim::Failure &f) {
    return parse_keys(spec, {{"plane", [&](double d) { f.plane = int(d); }, true},
                             {"path", [&](double d) { f.path = int(d); }},
                             {"dir", [&](double d) { f.dir = int(d); }},
                             {"at_us", [&](double d) { f.at_ns = uint64_t(d * 1000); }, true},
                             {"for_us", [&](double d) { f.for_ns = uint64_t(d * 1000); }},
                             {"period_us", [&](double d) { f.period_ns = uint64_t(d * 1000); }},
                             {"link", [&](double d) { f.link = int(d); }}});
}

std::string parse_limit(const std::string &spec, sim::PlaneLimit &l) {
    return parse_keys(spec, {{"plane", [&](double d) { l.plane = int(d); }, true},
                             {"gbps", [&](double d) { l.gbps = d; }, true},
                             {"ecn_bytes", [&](double d) { l.ecn_bytes = uint64_t(d); }},
                             {"dir", [&](double d) { l.dir = int(d); }}});
}

const char *state_key(EvState s) {
    switch (s) {
        case EvState::kGood:
            return "good";
        case EvState::kSkip:
            return "skip";
        case EvState::kAssumedBad:
            return "assumed_bad";
        case EvState::kDenied:
            return "denied";
    }
    return "?";
}

nlohmann::json ev_counts_json(const EvStateCounts &c) {
    nlohmann::json j;
    for (uint32_t i = 0; i < kEvStates; ++i)
        j[state_key(EvState(i))] = c.state[i];
    return j;
}

template <class C, size_t N>
nlohmann::json counters_json(const C &c, const CounterInfo (&info)[N]) {
    nlohmann::json j;
    const uint64_t *v = counter_array(c);
    for (size_t i = 0; i < N; ++i)
        j[info[i].name] = v[i];
    return j;
}

// The process's peak resident set so far, and the CPU time it has used
// (user and system): on a shared machine, wall time also counts the time
// others had the CPU.
struct Usage {
    uint64_t peak_rss_bytes = 0;
    double cpu_seconds = 0;
};
Usage process_usage() {
    struct rusage ru {};
    if (getrusage(RUSAGE_SELF, &ru) != 0) return {};
    auto s = [](const timeval &t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
    return {uint64_t(ru.ru_maxrss) * 1024, s(ru.ru_utime) + s(ru.ru_stime)};  // Linux: KiB
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App cli{"mrc-sim: the MRC transport core over a simulated multi-plane fabric"};
    sim::SimConfig c;
    double delay_us = 2, max_sim_ms = 2000;
    bool json = false;
    std::vector<std::string> impairs, fails, limits;
    std::string cc = "nscc";
    std::string cc_scope = "qp";
    double series_us = 0, score_us = double(c.scorer.period_ns) / 1000, victim_start_us = 0;
    double probe_us = double(c.qp.ev.probe_interval_ns) / 1000;
    std::string ev_range = "49152-65535";
    uint32_t cwnd_kb = 0, probe_successes = c.qp.ev.probe_successes;
    std::string retry_mode = "exponential", rto = "adaptive";
    uint32_t timeout_exp = c.qp.retry.timeout_exp, retry_limit = c.qp.retry.limit;
    double rto_min_us = double(c.qp.retry.min_rto_ns) / 1000;
    double rto_max_us = double(c.qp.retry.max_rto_ns) / 1000;
    double keepalive_ms = double(c.qp.liveness.keepalive_ns) / 1e6;
    double peer_timeout_ms = double(c.qp.liveness.peer_timeout_ns) / 1e6;
    bool no_rack = false, no_tlp = false;
    cli.add_option("--planes", c.fabric.planes,
                   fmt::format("planes (NIC ports), 1-{}", mrc::kMaxPlanes));
    cli.add_option("--paths-per-plane", c.fabric.paths_per_plane, "ECMP paths per plane");
    cli.add_flag("--ipv6", c.fabric.ipv6,
                 "the hosts talk IPv6 and the paths hash the flow label (the EV)");
    cli.add_option("--qps", c.work.qps, "QPs writing to host B");
    cli.add_option("--senders", c.work.senders,
                   "sender hosts (QPs spread over them; more than one: incast)");
    cli.add_option("--msg-bytes", c.work.msg_bytes, "bytes per WRITE");
    cli.add_option("--total-bytes", c.work.total_bytes, "bytes to move, over all QPs");
    cli.add_option("--depth", c.work.depth, "WRITEs outstanding per QP");
    cli.add_flag("--write-imm", c.work.write_imm, "WRITE_WITH_IMM instead of WRITE");
    cli.add_option("--link-gbps", c.fabric.link_gbps, "host link rate per plane, Gb/s");
    cli.add_option("--path-gbps", c.fabric.path_gbps,
                   "rate of each path, Gb/s (default: link rate)");
    cli.add_option("--delay-us", delay_us, "one-way propagation delay, us");
    cli.add_option("--queue-kb", c.fabric.queue_kb, "drop-tail limit of every queue, KiB");
    cli.add_option("--lasthop-trim-kb", c.fabric.lasthop_trim_kb,
                   "last hop trims above this queue, KiB (0: drops)");
    cli.add_option("--loss", c.fabric.loss, "random loss on every path and direction, probability");
    cli.add_option("--seed", c.seed, "seed of every random choice");
    cli.add_option("--mtu", c.qp.mtu_payload_bytes, "payload bytes per packet");
    cli.add_option("--evs", c.qp.ev.evs, "active EVs per QP, a multiple of the planes");
    cli.add_option("--ev-range", ev_range,
                   "UDP source ports the entropy values are drawn from, FIRST-LAST")
        ->check([](const std::string &s) {
            EvConfig e;
            auto r = parse_ev_range(s, &e);
            return r ? std::string() : r.error().message;
        })
        ->capture_default_str();
    cli.add_option("--backup-evs", c.qp.ev.backup_per_plane,
                   "spare EVs per plane, replacing its retired EVs");
    cli.add_option("--ev-floor", c.qp.ev.min_active,
                   "never fewer active EVs than this not ASSUMED_BAD");
    cli.add_option("--probe-us", probe_us,
                   "probe interval of an ASSUMED_BAD EV or a failed plane, us");
    cli.add_option("--probe-successes", probe_successes,
                   "probe replies in a row that revive an EV or a plane");
    cli.add_option("--cc", cc, "congestion control: nscc | fixed")
        ->check(CLI::IsMember({"nscc", "fixed"}));
    cli.add_option("--cc-scope", cc_scope,
                   "one window per (peer, plane) shared by the QPs to the peer, or per QP")
        ->check(CLI::IsMember({"peer", "qp"}))
        ->capture_default_str();
    cli.add_option("--cwnd-kb", cwnd_kb, "with --cc fixed: the window, KiB (0: unbounded)");
    cli.add_option("--score-us", score_us, "path scorer period, us (0: no scorer)");
    cli.add_option("--series-us", series_us,
                   "goodput and per-plane time series with buckets of this many us (0: none)");
    cli.add_option("--victims", c.work.victims,
                   "extra QPs, each from a sender host of its own (incast bystanders)");
    cli.add_option("--victim-bytes", c.work.victim_bytes, "bytes each victim moves");
    cli.add_option("--victim-start-us", victim_start_us, "when the victims start, us");
    cli.add_option("--lasthop-ecn-kb", c.fabric.lasthop_ecn_kb,
                   "last hop marks ECN above this queue, KiB (0: never)");
    cli.add_option(
        "--plane-limit", limits,
        "plane=p,gbps=G[,ecn_bytes=B][,dir=ab|ba]: the plane's core carries only G Gb/s");
    cli.add_option("--mpr", c.qp.mpr_units, "receive window, units of 128 PSNs");
    cli.add_option("--rto", rto,
                   "retransmission timeout: adaptive (per plane, from the RTT) | fixed "
                   "(1.024 us * 2^timeout-exp)")
        ->check(CLI::IsMember({"adaptive", "fixed"}));
    cli.add_option("--timeout-exp", timeout_exp,
                   "fixed timeout 1.024 us * 2^t (adaptive: the timeout before any RTT sample)");
    cli.add_option("--rto-min-us", rto_min_us, "adaptive timeout floor, us");
    cli.add_option("--rto-max-us", rto_max_us, "adaptive timeout ceiling (back-off included), us");
    cli.add_flag("--no-rack", no_rack, "no loss detection from acks (timeouts and NACKs only)");
    cli.add_flag("--no-tlp", no_tlp, "no tail-loss probe");
    cli.add_option("--keepalive-ms", keepalive_ms,
                   "a QP that heard nothing from its peer this long sends a keepalive (0: never)");
    cli.add_option("--peer-timeout-ms", peer_timeout_ms,
                   "a QP that heard nothing from its peer this long errors (0: never)");
    cli.add_option("--retry-limit", retry_limit,
                   "timeouts in a row, or losses of one packet, before the QP errors");
    cli.add_option("--retry-mode", retry_mode, "linear | exponential")
        ->check(CLI::IsMember({"linear", "exponential"}));
    cli.add_option("--max-sim-ms", max_sim_ms, "give up after this much simulated time, ms");
    cli.add_option("--impair", impairs,
                   "plane=p[,path=k][,dir=ab|ba|both],loss=..,burst_enter=..,burst_exit=..,"
                   "ecn_bytes=..,trim_bytes=..,duplicate=..,reorder=..,reorder_us=.. (the "
                   "vocabulary of mrc-fabric's --impair)");
    cli.add_option(
        "--fail", fails,
        "plane=p[,path=k][,dir=0|1],at_us=T[,for_us=D][,period_us=P][,link=0|1]: blackhole "
        "(both directions unless dir; repeating every P; link: the senders' (0) or receiver's "
        "(1) port goes down)");
    cli.add_flag("--json", json, "print a JSON summary instead of text");
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return cli.exit(e) == 0 ? 0 : 2;
    }
    auto usage = [](const std::string &msg) {
        std::fprintf(stderr, "mrc-sim: %s\n", msg.c_str());
        return 2;
    };
    for (const auto &s : impairs) {
        sim::Impairment im;
        if (auto e = parse_impair(s, im); !e.empty())
            return usage(fmt::format("--impair '{}': {}", s, e));
        c.fabric.impairments.push_back(im);
    }
    for (const auto &s : fails) {
        sim::Failure f;
        if (auto e = parse_fail(s, f); !e.empty())
            return usage(fmt::format("--fail '{}': {}", s, e));
        c.fabric.failures.push_back(f);
    }
    for (const auto &s : limits) {
        sim::PlaneLimit l;
        if (auto e = parse_limit(s, l); !e.empty())
            return usage(fmt::format("--plane-limit '{}': {}", s, e));
        c.fabric.plane_limits.push_back(l);
    }
    if (delay_us < 0) return usage("--delay-us must not be negative");
    if (series_us < 0 || score_us < 0 || victim_start_us < 0 || probe_us <= 0)
        return usage(
            "--series-us, --score-us, --victim-start-us must not be negative, "
            "--probe-us must be positive");
    c.series_ns = uint64_t(series_us * 1000);
    c.run_scorer = score_us > 0;
    if (c.run_scorer) c.scorer.period_ns = uint64_t(score_us * 1000);
    c.work.victim_start_ns = uint64_t(victim_start_us * 1000);
    c.qp.ev.probe_interval_ns = uint64_t(probe_us * 1000);
    (void)parse_ev_range(ev_range, &c.qp.ev);  // checked with the options
    if (probe_successes < 1 || probe_successes > 255)
        return usage("--probe-successes must be in [1, 255]");
    c.qp.ev.probe_successes = uint8_t(probe_successes);
    c.qp.ev.probe_successes_max = std::max(c.qp.ev.probe_successes_max, c.qp.ev.probe_successes);
    c.qp.cc.algo = cc == "fixed" ? CcAlgo::kFixed : CcAlgo::kNscc;
    c.qp.cc.fixed_window_bytes = uint64_t{cwnd_kb} * 1024;
    c.fabric.delay_ns = uint64_t(delay_us * 1000);
    c.max_sim_ns = uint64_t(max_sim_ms * 1e6);
    c.qp.retry.mode = retry_mode == "linear" ? RetryMode::kLinear : RetryMode::kExponential;
    c.qp.retry.timeout_exp = uint8_t(std::min<uint32_t>(timeout_exp, 255));
    c.qp.retry.limit = uint8_t(std::min<uint32_t>(retry_limit, 255));
    if (c.qp.retry.timeout_exp > RetryPolicy::kMaxTimeoutExp)
        return usage("--timeout-exp must be at most 24");
    if (c.qp.retry.mode == RetryMode::kLinear && c.qp.retry.limit > RetryPolicy::kMaxLinear)
        return usage("--retry-limit must be at most 7 with --retry-mode linear");
    if (c.qp.retry.limit > RetryPolicy::kMaxExponential)
        return usage("--retry-limit must be at most 25");
    if (c.qp.mpr_units < 1 || c.qp.mpr_units > 256) return usage("--mpr must be in [1, 256]");
    if (!(rto_min_us > 0) || rto_max_us < rto_min_us)
        return usage("--rto-min-us must be positive and at most --rto-max-us");
    if (keepalive_ms < 0 || peer_timeout_ms < 0)
        return usage("--keepalive-ms and --peer-timeout-ms must not be negative");
    c.qp.retry.adaptive = rto == "adaptive";
    c.qp.retry.min_rto_ns = uint64_t(rto_min_us * 1000);
    c.qp.retry.max_rto_ns = uint64_t(rto_max_us * 1000);
    c.qp.loss.rack = !no_rack;
    c.qp.cc.per_peer = cc_scope == "peer";
    c.qp.loss.tlp = !no_tlp;
    c.qp.liveness.keepalive_ns = uint64_t(keepalive_ms * 1e6);
    c.qp.liveness.peer_timeout_ns = uint64_t(peer_timeout_ms * 1e6);
    if (auto r = sim::validate(c); !r) return usage(r.error().message);
    // What a QP would refuse, refused here with the same words.
    {
        EndpointConfig ec;
        ec.planes = uint8_t(c.fabric.planes);
        ec.max_qps = 1;
        Endpoint check_ep(ec);
        if (auto q = check_ep.create_qp(c.qp); !q) return usage(q.error().message);
    }

    const Usage before = process_usage();
    const auto t0 = std::chrono::steady_clock::now();
    const sim::SimResult r = sim::run(c);
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The simulator's own cost: frames the simulated network carried and
    // simulated time, per second of wall time (set-up included), and the
    // memory the run added, per QP (its requester, its responder, its region).
    const double pps = wall_s > 0 ? double(r.packets_sent) / wall_s : 0;
    const double sim_per_wall = wall_s > 0 ? double(r.sim_time_ns) / 1e9 / wall_s : 0;
    const Usage after = process_usage();
    const double cpu_s = after.cpu_seconds - before.cpu_seconds;
    const double pps_cpu = cpu_s > 0 ? double(r.packets_sent) / cpu_s : 0;
    const uint64_t peak_rss = after.peak_rss_bytes;
    const uint32_t nqps = c.work.qps + c.work.victims;
    const uint64_t rss_per_qp =
        peak_rss > before.peak_rss_bytes ? (peak_rss - before.peak_rss_bytes) / nqps : 0;

    if (json) {
        nlohmann::json j = {
            {"verified", r.verified},
            {"delivered_bytes", r.delivered_bytes},
            {"expected_bytes", r.expected_bytes},
            {"verify_errors", r.verify_errors},
            {"duplicate_deliveries", r.duplicate_deliveries},
            {"completions_in_order", r.completions_in_order},
            {"qp_errors", r.qp_errors},
            {"qp_error_causes", r.qp_error_causes},
            {"messages", r.messages},
            {"imm_delivered", r.imm_delivered},
            {"packets_sent", r.packets_sent},
            {"data_packets_sent", r.data_packets_sent},
            {"packets_dropped_by_fabric", r.packets_dropped_by_fabric},
            {"data_packets_dropped", r.data_packets_dropped},
            {"packets_trimmed", r.packets_trimmed},
            {"packets_ecn_marked", r.packets_ecn_marked},
            {"packets_duplicated", r.packets_duplicated},
            {"retransmissions", r.retransmissions},
            {"data_arrived_again", r.data_arrived_again},
            {"needless_resends", r.needless_resends},
            {"final_slots_checked", r.final_slots_checked},
            {"final_slot_mismatches", r.final_slot_mismatches},
            {"guard_bytes_changed", r.guard_bytes_changed},
            {"sim_time_us", double(r.sim_time_ns) / 1000},
            {"goodput_gbps", r.goodput_gbps},
            {"per_plane_tx_packets", r.per_plane_tx_packets},
            {"timed_out", r.timed_out},
            {"events", r.events},
            {"wall_seconds", wall_s},
            {"setup_wall_seconds", r.setup_wall_seconds},
            {"sim_packets_per_wall_second", pps},
            {"sim_seconds_per_wall_second", sim_per_wall},
            {"cpu_seconds", cpu_s},
            {"sim_packets_per_cpu_second", pps_cpu},
            {"peak_rss_bytes", peak_rss},
            {"rss_per_qp_bytes", rss_per_qp},
            {"requester", counters_json(r.requester, kQpCounterInfo)},
            {"responder", counters_json(r.responder, kQpCounterInfo)},
            {"max_queue_bytes", r.max_queue_bytes},
            {"max_lasthop_queue_bytes", r.max_lasthop_queue_bytes},
            {"ev_states", ev_counts_json(r.ev_states)},
        };
        if (!r.setup_error.empty()) j["setup_error"] = r.setup_error;
        nlohmann::json planes = nlohmann::json::array();
        for (const auto &p : r.planes) {
            nlohmann::json pj = counters_json(p.counters, kPlaneCounterInfo);
            pj["state"] = to_string(p.state);
            pj["ev_states"] = ev_counts_json(p.evs);
            pj["rtt_us"] = p.score.rtt_ns / 1000;
            pj["ecn_fraction"] = p.score.ecn_fraction;
            pj["tx_share"] = p.score.tx_share;
            pj["down_events"] = p.score.down_events;
            planes.push_back(pj);
        }
        j["planes"] = planes;
        uint64_t failures = 0, revivals = 0;
        for (const auto &e : r.evs) {
            failures += e.failures;
            revivals += e.revivals;
        }
        j["ev_transitions"] = {{"to_assumed_bad", failures}, {"revived", revivals}};
        nlohmann::json qps = nlohmann::json::array();
        for (const auto &q : r.qps)
            qps.push_back({{"victim", q.victim},
                           {"bytes", q.bytes},
                           {"start_us", double(q.start_ns) / 1000},
                           {"done_us", double(q.done_ns) / 1000},
                           {"goodput_gbps", q.goodput_gbps}});
        j["qps"] = qps;
        if (r.series_ns)
            j["series"] = {{"bucket_us", double(r.series_ns) / 1000},
                           {"goodput_gbps", r.series_goodput_gbps},
                           {"plane_tx_pkts", r.series_plane_tx},
                           {"max_queue_bytes", r.series_max_queue_bytes}};
        std::cout << j.dump(2) << std::endl;
    } else {
        std::printf(
            "%s: %lu of %lu bytes delivered and compared, %lu verify errors, %lu duplicates, "
            "completions %s, %u QP errors%s\n",
            r.verified ? "VERIFIED" : "FAILED", r.delivered_bytes, r.expected_bytes,
            r.verify_errors, r.duplicate_deliveries,
            r.completions_in_order ? "in order" : "OUT OF ORDER", r.qp_errors,
            r.timed_out ? ", timed out" : "");
        std::printf(
            "goodput %.2f Gb/s over %.1f us simulated; %lu packets sent, %lu dropped, %lu trimmed, "
            "%lu ECN-marked, %lu duplicated; %lu retransmissions\n",
            r.goodput_gbps, double(r.sim_time_ns) / 1000, r.packets_sent,
            r.packets_dropped_by_fabric, r.packets_trimmed, r.packets_ecn_marked,
            r.packets_duplicated, r.retransmissions);
        std::printf(
            "loss recovery: %lu found from acks, %lu NACKed, %lu tail probes, %lu timeouts; %lu "
            "resends arrived a second time (%lu explained by no loss, trim or reordering)\n",
            r.requester.losses_detected, r.requester.retx_after_nack, r.requester.tail_probes,
            r.requester.ack_timeouts, r.data_arrived_again, r.needless_resends);
        std::printf("per-plane data packets:");
        for (auto n : r.per_plane_tx_packets)
            std::printf(" %lu", n);
        std::printf("\nplanes:");
        for (const auto &p : r.planes)
            std::printf(" %s", to_string(p.state));
        std::printf("; EVs at the end:");
        for (uint32_t i = 0; i < kEvStates; ++i)
            std::printf(" %u %s", r.ev_states.state[i], to_string(EvState(i)));
        std::printf("; deepest queue %lu bytes (last hop %lu)", r.max_queue_bytes,
                    r.max_lasthop_queue_bytes);
        std::printf(
            "\nsimulator speed: %.3f M packets per wall second (%.3f M per CPU second), %.3g "
            "simulated s per wall s; %.2f s wall (%.2f s of it set-up), %.2f s CPU; peak RSS "
            "%.1f MiB, %.1f KiB per QP\n",
            pps / 1e6, pps_cpu / 1e6, sim_per_wall, wall_s, r.setup_wall_seconds, cpu_s,
            double(peak_rss) / 1048576, double(rss_per_qp) / 1024);
    }
    return r.verified ? 0 : 1;
}
