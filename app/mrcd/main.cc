// mrcd: the MRC sidecar daemon. One per host: it owns the NIC ports
// (planes), runs the dataplane, and serves applications that use MRC
// through libmrc (docs/api.md, docs/mrcd.md).
//
//   mrcd [EAL args] -- --config FILE [--socket PATH]
//   mrcd --check-config FILE
//
// Stops cleanly on SIGTERM / SIGINT: in-flight work finishes (up to
// [daemon] drain_ms) or completes with DAEMON_SHUTDOWN; every application
// then sees its connection close. Logs through DPDK's log facility
// (--log-level=mrcd:debug and friends).
//
// Exit status: 0 after a clean stop, 2 bad usage or a set-up failure.
#include <rte_eal.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <vector>

#include "app_dpdk.h"
#include "config.h"
#include "daemon.h"
#include "dpdk/dataplane.h"
#include "port/eal.h"
#include "port/port.h"

// libmrc's C API sizes its per-plane arrays with its own constant.
static_assert(MRC_MAX_PLANES == mrc::kMaxPlanes);

using namespace mrc;

namespace {

using app::die;

int run(app::Args &args) {
    std::string config_path, socket;
    CLI::App cli{"mrcd: the MRC sidecar daemon", "mrcd"};
    cli.add_option("--config", config_path, "TOML configuration (config/mrcd.toml)")->required();
    cli.add_option("--socket", socket, "Unix socket path (overrides [daemon] socket)");
    if (auto rc = app::parse_cli(cli, args)) {
        if (*rc == app::kExitOk) return *rc;
        die("bad arguments (mrcd [EAL args] -- --config FILE)");
    }
    auto cfg = mrcd::load_config(config_path);
    if (!cfg) die(cfg.error().message);
    if (!socket.empty()) {
        if (socket.size() >= 108) die("--socket: the path must be shorter than 108 bytes");
        cfg->socket = socket;
    }
    if (cfg->dp.ports.empty())
        for (const auto &p : drivers::list_ports())
            cfg->dp.ports.push_back(p.name);
    if (cfg->dp.ports.empty())
        die("no ports: list them in [dataplane] ports or give --vdev to EAL");
    auto dp = dp::Dataplane::create(cfg->dp);
    if (!dp) die(dp.error().message);
    auto daemon = mrcd::Daemon::create(*cfg, dp->get());
    if (!daemon) die(daemon.error().message);
    for (uint8_t p = 0; p < (*dp)->planes(); ++p)
        if (const auto x = (*dp)->port(p).xdp_info())
            std::printf("mrcd: plane %u: %s\n", unsigned(p),
                        drivers::describe(*x, cfg->dp.mrc_port).c_str());
    dp::telemetry_attach(dp->get());
    if (auto r = (*dp)->start(); !r) die(r.error().message);
    std::printf("mrcd: ready on %s (%u planes)\n", cfg->socket.c_str(), unsigned((*dp)->planes()));
    std::fflush(stdout);
    (*daemon)->run(app::stop_flag());
    (*dp)->stop();
    dp::telemetry_attach(nullptr);
    daemon->reset();
    dp->reset();
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    // mrcd --check-config FILE: parse and report, without EAL or ports.
    if (argc == 3 && std::string(argv[1]) == "--check-config") {
        auto cfg = mrcd::load_config(argv[2]);
        if (!cfg) {
            std::fprintf(stderr, "mrcd: %s\n", cfg.error().message.c_str());
            return 2;
        }
        std::printf("mrcd: %s: ok (%zu planes, socket %s)\n", argv[2], cfg->plane_ip.size(),
                    cfg->socket.c_str());
        return 0;
    }
    return app::dpdk_main("mrcd", argc, argv, {}, run);
}
