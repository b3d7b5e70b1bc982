#include "port/eal.h"

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace mrc::drivers {

namespace {

bool hugepages_reserved() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    long value = 0;
    while (meminfo >> key >> value) {
        if (key == "HugePages_Total:") return value > 0;
        meminfo.ignore(256, '\n');
    }
    return false;
}

bool has_arg(int argc, char **argv, const char *prefix) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--") == 0) return false;
        if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) return true;
    }
    return false;
}

}  // namespace

Result<int> eal_init(int argc, char **argv) {
    // Build the argument vector EAL sees: the caller's EAL arguments plus a
    // quieter default log level, up to (not including) the application's.
    std::vector<char *> eal_argv(argv, argv + argc);
    std::string quiet = "--log-level=lib.eal:warning";
    if (!has_arg(argc, argv, "--log-level")) eal_argv.insert(eal_argv.begin() + 1, quiet.data());
    const bool no_huge = has_arg(argc, argv, "--no-huge");
    const int n = static_cast<int>(eal_argv.size());
    eal_argv.push_back(nullptr);

    const int consumed = rte_eal_init(n, eal_argv.data());
    if (consumed < 0) {
        const int err = rte_errno;
        std::string hint;
        if (!no_huge && !hugepages_reserved())
            hint = " (no hugepages are reserved: add --no-huge -m 512 to the EAL arguments)";
        else if (err == EALREADY)
            hint = " (EAL is already initialised in this process)";
        else
            hint = " (check the EAL arguments before '--', e.g. --vdev, -l, --file-prefix)";
        return Error{fmt::format("EAL initialisation failed: {}{}", rte_strerror(err), hint)};
    }
    // rte_eal_init returns the index of "--" in the vector it was given
    // (which may hold our extra argument): application arguments follow it.
    const int extra = n - argc;
    int app_index = consumed + 1 - extra;
    if (app_index > argc) app_index = argc;
    if (app_index < 1) app_index = 1;
    return app_index;
}

Result<void> eal_init(const std::vector<std::string> &args) {
    std::vector<std::string> copy = args;
    std::vector<char *> argv;
    for (auto &a : copy)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    auto r = eal_init(static_cast<int>(copy.size()), argv.data());
    if (!r) return r.error();
    return {};
}

void eal_cleanup() {
    // A primary process owns its runtime directory (/var/run/dpdk/<prefix>);
    // EAL leaves it behind, so remove it once nothing can attach any more.
    const bool primary = rte_eal_process_type() == RTE_PROC_PRIMARY;
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    if (primary && !runtime_dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(runtime_dir, ec);
    }
}

void eal_abandon() {
    if (rte_eal_process_type() != RTE_PROC_PRIMARY) return;
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    if (runtime_dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(runtime_dir, ec);
}

void fatal_exit(const char *program, const std::string &message, int status) {
    std::fprintf(stderr, "%s: %s\n", program, message.c_str());
    std::fflush(nullptr);
    eal_abandon();
    std::exit(status);
}

size_t eal_heap_free_bytes() {
    size_t free_bytes = 0;
    for (unsigned s = 0; s < rte_socket_count(); ++s) {
        rte_malloc_socket_stats st{};
        if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(s), &st) == 0)
            free_bytes += st.heap_freesz_bytes;
    }
    return free_bytes;
}

}  // namespace mrc::drivers
