#include "app_tool.h"

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

namespace mrc::app {

namespace {

std::atomic<bool> g_stop{false};

void on_stop_signal(int) {
    g_stop.store(true);
}

}  // namespace

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
