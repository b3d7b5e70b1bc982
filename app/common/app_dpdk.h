// The start and end every DPDK program of the project shares (mrc-gen,
// mrc-fabric, mrc-ports, mrcd): EAL from the arguments before "--", the
// program's own after it, the EAL cleanup guard, pdump for dpdk-dumpcap,
// the stop signals, and a fatal exit that does not run the EAL cleanup
// DPDK 22.11 races on (drivers/port/eal.h).
#pragma once

#include <functional>

#include "app_tool.h"

namespace mrc::app {

struct DpdkMainOptions {
    // rte_pdump_init() after EAL: dpdk-dumpcap can attach to the ports.
    bool pdump = true;
};

// stdout line-buffered; EAL started (an error exits kExitUsage); then
// body(args) with args = argv[0] and the arguments after "--", the stop
// signals installed. body's return value is the exit status. A Fatal
// thrown from body (die()) is printed as "<program>: <message>" once the
// stack has unwound (the ports body opened are closed), and the process
// exits with its code without rte_eal_cleanup(). On a normal return EAL is
// cleaned up (runtime directory removed).
int dpdk_main(const char *program, int argc, char **argv, const DpdkMainOptions &opts,
              const std::function<int(Args &)> &body);

}  // namespace mrc::app
