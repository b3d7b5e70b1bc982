#include "generator.h"

namespace mrc::gen {

void add_options(CLI::App &cli, Options &o) {
    // A flag given twice: the last one counts (scripts append overrides).
    cli.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    cli.add_option("--role", o.role, "server or client")
        ->required()
        ->check(CLI::IsMember({"server", "client"}));
    cli.add_option("--port", o.ports, "a DPDK port per plane (name or devargs); default: all")
        ->take_all();
    cli.add_option(
        "--local-ip", o.local_ip,
        "this end's address, one or one per plane: IPv4 (a.b.c.d or a.b.c.d/len) or IPv6 (RFC 4291 "
        "text, /len allowed; the peer's the same family)");
    cli.add_option("--gateway", o.gateway,
                   "the router in front of each plane, of the plane's family (needs --local-ip "
                   "with a prefix; its MAC is found by ARP or IPv6 neighbour discovery), one or "
                   "one per plane; none: no gateway. AF_XDP ports: the kernel's routes instead");
    cli.add_option("--dscp-data", o.dscp_data, "DSCP (0-63) of data packets, one or one per plane")
        ->capture_default_str();
    cli.add_option("--dscp-control", o.dscp_control,
                   "DSCP (0-63) of acks, NACKs and probes, one or one per plane")
        ->capture_default_str();
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
    cli.add_option("--ev-range", o.ev_range,
                   "UDP source ports the entropy values are drawn from, FIRST-LAST")
        ->check([](const std::string &s) {
            EvConfig c;
            auto r = parse_ev_range(s, &c);
            return r ? std::string() : r.error().message;
        })
        ->capture_default_str();
    cli.add_option(
           "--idle", o.idle,
           "busy (poll without pause), yield (sched_yield when idle), sleep (share the CPU) or "
           "adaptive (busy while there is traffic, then sleep until an RX interrupt, a wake or a "
           "timer)")
        ->check(CLI::IsMember({"busy", "yield", "sleep", "adaptive"}))
        ->capture_default_str();
    cli.add_option("--idle-spin-us", o.idle_spin_us,
                   "adaptive: keep polling this long after the last work")
        ->capture_default_str();
    cli.add_flag("--zero-copy", o.zero_copy, "send payloads from registered memory (extbuf mbufs)");
    cli.add_flag("--no-udp-cksum", o.no_udp_cksum, "send UDP checksum 0 and do not check it");
    cli.add_option("--ecn-full-bursts", o.ecn_full_bursts,
                   "mark CE on received frames after this many full RX bursts in a row (the "
                   "host's own backlog as congestion; 0: never)")
        ->check(CLI::Range(0u, 1000000u))
        ->capture_default_str();
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
}

Result<void> check_options(Options &o) {
    if (o.role == "client" && o.duration_s == 0 && o.total_bytes == 0) o.duration_s = 10;
    if (o.peer_timeout_ms > 0 && (o.keepalive_ms == 0 || o.keepalive_ms >= o.peer_timeout_ms))
        return Error{"--peer-timeout-ms needs --keepalive-ms above 0 and below it"};
    if (o.mode == "pingpong" && o.rate_gbps > 0)
        return Error{"--rate-gbps does not apply to pingpong"};
    return ok();
}

}  // namespace mrc::gen
