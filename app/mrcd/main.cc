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
#include <rte_pdump.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <vector>

#include "config.h"
#include "daemon.h"
#include "dpdk/dataplane.h"
#include "port/eal.h"
#include "port/port.h"

// libmrc's C API sizes its per-plane arrays with its own constant.
static_assert(MRC_MAX_PLANES == mrc::kMaxPlanes);

using namespace mrc;

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
    g_stop.store(true);
}

struct Fatal {
    std::string message;
};

int run(int argc, char **argv) {
    std::string config_path, socket;
    CLI::App cli{"mrcd: the MRC sidecar daemon", "mrcd"};
    cli.add_option("--config", config_path, "TOML configuration (config/mrcd.toml)")->required();
    cli.add_option("--socket", socket, "Unix socket path (overrides [daemon] socket)");
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        if (cli.exit(e) == 0) return 0;
        throw Fatal{"bad arguments (mrcd [EAL args] -- --config FILE)"};
    }
    auto cfg = mrcd::load_config(config_path);
    if (!cfg) throw Fatal{cfg.error().message};
    if (!socket.empty()) {
        if (socket.size() >= 108) throw Fatal{"--socket: the path must be shorter than 108 bytes"};
        cfg->socket = socket;
    }
    if (cfg->dp.ports.empty())
        for (const auto &p : drivers::list_ports())
            cfg->dp.ports.push_back(p.name);
    if (cfg->dp.ports.empty())
        throw Fatal{"no ports: list them in [dataplane] ports or give --vdev to EAL"};
    auto dp = dp::Dataplane::create(cfg->dp);
    if (!dp) throw Fatal{dp.error().message};
    auto daemon = mrcd::Daemon::create(*cfg, dp->get());
    if (!daemon) throw Fatal{daemon.error().message};
    for (uint8_t p = 0; p < (*dp)->planes(); ++p)
        if (const auto x = (*dp)->port(p).xdp_info())
            std::printf("mrcd: plane %u: %s\n", unsigned(p),
                        drivers::describe(*x, cfg->dp.mrc_port).c_str());
    dp::telemetry_attach(dp->get());
    if (rte_pdump_init() != 0)
        std::fprintf(stderr, "mrcd: warning: pdump not available (dpdk-dumpcap will not work)\n");
    if (auto r = (*dp)->start(); !r) throw Fatal{r.error().message};
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    std::signal(SIGPIPE, SIG_IGN);
    std::printf("mrcd: ready on %s (%u planes)\n", cfg->socket.c_str(), unsigned((*dp)->planes()));
    std::fflush(stdout);
    (*daemon)->run(g_stop);
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
    auto eal = drivers::eal_init(argc, argv);
    if (!eal) {
        std::fprintf(stderr, "mrcd: %s\n", eal.error().message.c_str());
        return 2;
    }
    int rc = 0;
    try {
        std::vector<char *> args{argv[0]};
        for (int i = *eal; i < argc; ++i)
            args.push_back(argv[i]);
        rc = run(int(args.size()), args.data());
    } catch (const Fatal &f) {
        drivers::fatal_exit("mrcd", f.message);
    }
    drivers::eal_cleanup();
    return rc;
}
