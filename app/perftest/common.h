// What mrc_write_bw and mrc_write_lat share: the perftest-style flags, the
// TCP channel on which the two sides swap region keys (as perftest does;
// libmrc leaves key exchange to applications), and result printing.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sched.h>
#include <time.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <mrc/mrc.h>

#include "app_tool.h"
#include "json_channel.h"
#include "wire/addr.h"

namespace mrc::perf {

struct Options {
    std::string server;  // positional: the server's host (client role when given)
    std::string socket;  // mrcd's socket
    uint32_t size = 65536;
    uint64_t iters = 5000;
    double duration_s = 0;  // when > 0: run this long instead of iters
    uint32_t qps = 1;
    uint32_t tx_depth = 16;  // outstanding writes per QP (bw)
    uint16_t port = 18515;   // TCP port of the key exchange
    uint32_t service = 18515;
    bool report_gbits = true;
    std::string json_path;
    int timeout_ms = 30000;
    bool yield = false;           // sched_yield() on an empty poll (the CPU is shared with mrcd)
    uint32_t sleep_us = 0;        // or sleep this long on an empty poll
    bool serial_connect = false;  // one mrc_connect per QP instead of mrc_connect_many
};

// What a polling loop does when the CQ was empty.
inline void idle(const Options &o) {
    if (o.sleep_us) {
        const timespec ts{0, long(o.sleep_us) * 1000};
        nanosleep(&ts, nullptr);
    } else if (o.yield) {
        sched_yield();
    }
}

void add_common(CLI::App &cli, Options &o);

using Role = int (*)(const Options &, mrc_context *);
// A tool's main(): flags, mrc_open, then the server role (no host given)
// or the client role. Exit status: 0 done, 1 the run failed, 2 bad usage
// or no daemon.
int tool_main(int argc, char **argv, const char *name, const char *what, Options o, Role server,
              Role client);

// The TCP side channel (app::JsonChannel) where any failure ends the run.
class SideChannel {
  public:
    // Server: one client on `port` (every address); client: host:port,
    // retried until timeout_ms.
    void accept(uint16_t port, int timeout_ms);
    void connect(const std::string &host, uint16_t port, int timeout_ms);
    void send(const nlohmann::json &j);
    nlohmann::json recv(int timeout_ms);  // nothing in time ends the run too
    // nullopt when nothing came within timeout_ms; an error when the peer
    // closed the connection or sent garbage.
    Result<std::optional<nlohmann::json>> try_recv(int timeout_ms) {
        return ch_.recv(uint32_t(timeout_ms));
    }

  private:
    app::JsonChannel ch_;
};

// A failed libmrc call or run ends the tool with status 1, at once.
[[noreturn]] void die(mrc_context *ctx, const std::string &what, int rc);
[[noreturn]] void die(const std::string &what);
uint64_t now_ns();
// Percentile p in [0, 1] of samples (ns), in microseconds.
double percentile_us(std::vector<uint64_t> &samples, double p);
// Writes the results to `path` (nothing when empty); a failure ends the run.
void write_results(const std::string &path, const nlohmann::json &j);

}  // namespace mrc::perf
