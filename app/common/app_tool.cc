#include "app_tool.h"

#include <nlohmann/json.hpp>

#include <execinfo.h>
#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

namespace mrc::app {

namespace {

std::atomic<bool> g_stop{false};

void on_stop_signal(int) {
    g_stop.store(true);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAsan = true;
#else
constexpr bool kUnderAsan = false;
#endif
#else
constexpr bool kUnderAsan = false;
#endif

const char *g_program = "mrc";

// Async-signal-safe pieces only: write(2), backtrace_symbols_fd (its first
// use, which may allocate, happens at install time), no stdio.
void put(const char *s) {
    (void)!::write(STDERR_FILENO, s, std::strlen(s));
}

void on_crash(int sig) {
    char num[12];
    char *d = num + sizeof num;
    *--d = 0;
    for (unsigned v = unsigned(sig); d == num + sizeof num - 1 || v; v /= 10)
        *--d = char('0' + v % 10);
    char thread[16] = "?";
    (void)pthread_getname_np(pthread_self(), thread, sizeof thread);
    put(g_program);
    put(": fatal signal ");
    put(d);
    put(" in thread ");
    put(thread);
    put(", backtrace:\n");
    void *frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
    // SA_RESETHAND restored the default action: the signal raised again
    // ends the process as it would have without this report.
    ::raise(sig);
}

}  // namespace

void install_crash_report(const char *program) {
    if (kUnderAsan) return;
    g_program = program;
    void *warm[1];
    (void)backtrace(warm, 1);  // loads the unwinder now, not in the handler
    struct sigaction sa {};
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE})
        sigaction(sig, &sa, nullptr);
}

void die(const std::string &message, int exit_code) {
    throw Fatal{message, exit_code};
}

std::optional<int> parse_cli(CLI::App &cli, Args &args) {
    try {
        cli.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError &e) {
        return cli.exit(e) == 0 ? kExitOk : kExitUsage;
    }
    return std::nullopt;
}

int tool_main(const char *program, int argc, char **argv, const std::function<int(Args &)> &body) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    install_crash_report(program);
    Args args(argv, argv + argc);
    try {
        return body(args);
    } catch (const Fatal &f) {
        std::fprintf(stderr, "%s: %s\n", program, f.message.c_str());
        return f.exit_code;
    }
}

void install_stop_signals() {
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    std::signal(SIGPIPE, SIG_IGN);
}

const std::atomic<bool> &stop_flag() {
    return g_stop;
}

Result<void> write_json_file(const std::string &path, const nlohmann::json &j) {
    if (path == "-") {
        std::cout << j.dump(2) << std::endl;
        return ok();
    }
    std::ofstream f(path);
    f << j.dump(2) << '\n';
    f.close();
    if (!f) return Error{"cannot write " + path};
    return ok();
}

}  // namespace mrc::app
