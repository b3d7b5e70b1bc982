#include "app_dpdk.h"

#include <rte_pdump.h>

#include <cstdio>

#include "port/eal.h"

namespace mrc::app {

int dpdk_main(const char *program, int argc, char **argv, const DpdkMainOptions &opts,
              const std::function<int(Args &)> &body) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    auto first_app_arg = drivers::eal_init(argc, argv);
    if (!first_app_arg) {
        std::fprintf(stderr, "%s: %s\n", program, first_app_arg.error().message.c_str());
        return kExitUsage;
    }
    drivers::EalCleanupGuard eal_guard;
    Args args{argv[0]};
    for (int i = *first_app_arg; i < argc; ++i)
        args.push_back(argv[i]);
    const bool pdump = opts.pdump && rte_pdump_init() == 0;
    if (opts.pdump && !pdump)
        std::fprintf(stderr, "%s: warning: pdump not available (dpdk-dumpcap cannot attach)\n",
                     program);
    install_stop_signals();
    install_crash_report(program);
    int rc;
    try {
        rc = body(args);
    } catch (const Fatal &f) {
        drivers::fatal_exit(program, f.message, f.exit_code);
    }
    if (pdump) rte_pdump_uninit();
    return rc;
}

}  // namespace mrc::app
