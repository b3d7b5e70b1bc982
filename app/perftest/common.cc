#include "common.h"

#include <errno.h>
#include <time.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace mrc::perf {

void add_common(CLI::App &cli, Options &o) {
    cli.add_option("server", o.server, "the server's host: run as client (else as server)");
    cli.add_option("--socket", o.socket,
                   "mrcd's socket (default: $MRC_SOCKET, else " MRC_DEFAULT_SOCKET ")");
    cli.add_option("-s,--size", o.size, "message size, bytes")
        ->check(CLI::Range(1u, 1u << 30))
        ->capture_default_str();
    cli.add_option("-n,--iters", o.iters, "messages to send")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
        ->capture_default_str();
    cli.add_option("-D,--duration", o.duration_s, "seconds to run (instead of --iters)")
        ->check(CLI::Range(0.0, 86400.0));
    cli.add_option("-q,--qp", o.qps, "queue pairs")
        ->check(CLI::Range(1u, 16384u))
        ->capture_default_str();
    cli.add_option("-t,--tx-depth", o.tx_depth, "outstanding writes per QP")
        ->check(CLI::Range(1u, 4096u))
        ->capture_default_str();
    cli.add_option("-p,--port", o.port, "TCP port of the key exchange")->capture_default_str();
    cli.add_option("--service", o.service, "MRC service number")->capture_default_str();
    cli.add_flag("--report_gbits,!--report_mbytes", o.report_gbits,
                 "report Gb/s (default) or MB/s");
    cli.add_option("--json", o.json_path, "also write the results here");
    cli.add_flag("--yield", o.yield,
                 "sched_yield() when the CQ is empty (when this program shares a CPU with mrcd)");
    cli.add_option("--sleep-us", o.sleep_us,
                   "sleep this long when the CQ is empty (a CPU shared with mrcd, bandwidth runs)")
        ->check(CLI::Range(0u, 100000u));
    cli.add_option("--timeout-ms", o.timeout_ms, "how long to wait for the peer")
        ->capture_default_str();
    cli.add_flag("--serial-connect", o.serial_connect,
                 "connect the QPs one mrc_connect at a time (default: mrc_connect_many)");
}

int tool_main(int argc, char **argv, const char *name, const char *what, Options o, Role server,
              Role client) {
    return app::tool_main(name, argc, argv, [&](app::Args &args) {
        CLI::App cli{std::string(name) + ": " + what, name};
        add_common(cli, o);
        if (auto rc = app::parse_cli(cli, args)) return *rc;
        mrc_context *ctx;
        if (int rc = mrc_open(o.socket.empty() ? nullptr : o.socket.c_str(), &ctx); rc)
            app::die(mrc_last_error(nullptr));
        const int rc = o.server.empty() ? server(o, ctx) : client(o, ctx);
        mrc_close(ctx);
        return rc;
    });
}

void SideChannel::accept(uint16_t port, int timeout_ms) {
    auto c = app::JsonChannel::accept("0.0.0.0", port, uint32_t(timeout_ms));
    if (!c) die(c.error().message);
    ch_ = std::move(*c);
}

void SideChannel::connect(const std::string &host, uint16_t port, int timeout_ms) {
    auto c =
        app::JsonChannel::connect(host, port, uint32_t(timeout_ms), nullptr, "perftest server");
    if (!c) die(c.error().message);
    ch_ = std::move(*c);
}

void SideChannel::send(const nlohmann::json &j) {
    if (auto r = ch_.send(j); !r) die("side channel: " + r.error().message);
}

nlohmann::json SideChannel::recv(int timeout_ms) {
    auto m = ch_.recv(uint32_t(timeout_ms));
    if (!m) die("side channel: " + m.error().message);
    if (!*m) die("side channel: nothing from the peer in time");
    return std::move(**m);
}

// These exit at once rather than unwind (app::die): the context and what
// it holds stay reachable from the stack, and closing it would talk to a
// daemon that may be gone (the case that often brings us here).
void die(mrc_context *ctx, const std::string &what, int rc) {
    die(fmt::format("{}: {} ({})", what, mrc_strerror(rc), mrc_last_error(ctx)));
}

void die(const std::string &what) {
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
    std::exit(app::kExitRunFailed);
}

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

double percentile_us(std::vector<uint64_t> &s, double p) {
    if (s.empty()) return 0;
    const size_t k = std::min(s.size() - 1, size_t(p * double(s.size())));
    std::nth_element(s.begin(), s.begin() + std::ptrdiff_t(k), s.end());
    return double(s[k]) / 1000.0;
}

void write_results(const std::string &path, const nlohmann::json &j) {
    if (path.empty()) return;
    if (auto r = app::write_json_file(path, j); !r) die(r.error().message);
}

}  // namespace mrc::perf
