// What every program of the project does the same way, without DPDK: exit
// codes, the fatal exit, the command line, the stop signals, JSON files.
// The DPDK programs add app_dpdk.h; the perftest tools and mrc-sim use
// this part alone.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace mrc::app {

// Exit status of every program.
enum ExitCode : int {
    kExitOk = 0,
    kExitRunFailed = 1,  // the run went, its result is not good (data not verified, peer lost)
    kExitUsage = 2,      // bad arguments or configuration, or it could not start
};

// A program's fatal error: thrown by die(), caught once in main (tool_main
// or dpdk_main), where it is printed as "<program>: <message>" and becomes
// the exit status. Unwinding closes what the program opened on the way.
struct Fatal {
    std::string message;
    int exit_code = kExitUsage;
};
[[noreturn]] void die(const std::string &message, int exit_code = kExitUsage);

// The program's arguments as CLI11 takes them: argv[0], then the
// application's own (for a DPDK program, those after "--").
using Args = std::vector<char *>;

// Parses `args`; nullopt when the program should go on, else the exit
// status (0 after --help, kExitUsage after an error, which CLI11 printed).
std::optional<int> parse_cli(CLI::App &cli, Args &args);

// Runs a program without DPDK: stdout line-buffered (live lines reach a log
// file as they happen), body(args); a Fatal is printed and returned as its
// exit status.
int tool_main(const char *program, int argc, char **argv, const std::function<int(Args &)> &body);

// SIGINT and SIGTERM set the flag stop_flag() returns (and nothing else);
// SIGPIPE is ignored (a peer that went away is an error return, not a
// death). Idempotent.
void install_stop_signals();
// SIGSEGV, SIGBUS, SIGILL and SIGFPE print "<program>: fatal signal N in
// thread T" and a backtrace (module+offset, for addr2line) to stderr, then
// die of the signal as before (same exit status, a core if enabled). Not
// installed under AddressSanitizer, which reports these itself. Idempotent.
void install_crash_report(const char *program);
const std::atomic<bool> &stop_flag();
inline bool stop_requested() {
    return stop_flag().load(std::memory_order_relaxed);
}

// Writes `j` (indented, one trailing newline) to `path`; "-" is stdout.
Result<void> write_json_file(const std::string &path, const nlohmann::json &j);

}  // namespace mrc::app
