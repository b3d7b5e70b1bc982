// EAL bring-up for every DPDK program of the project.
//
// EAL arguments come first, application arguments after "--", as in every
// DPDK application. Errors come back as one line that names the problem.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"

namespace mrc::drivers {

// Initialises EAL from argv (which must start with the program name). Returns
// the index in argv of the first application argument (after "--"), or argc.
// Unless the caller passed --log-level, EAL's start-up chatter is limited to
// warnings. Call once per process.
Result<int> eal_init(int argc, char **argv);

// Same, from a list of EAL arguments (program name first); for tests.
Result<void> eal_init(const std::vector<std::string> &args);

// Releases EAL resources; a primary process also removes its runtime
// directory (/var/run/dpdk/<prefix>), which EAL itself leaves behind.
void eal_cleanup();

// Calls eal_cleanup() when it goes out of scope: declare it right after a
// successful eal_init(), before any port, so ports close first.
struct EalCleanupGuard {
    EalCleanupGuard() = default;
    EalCleanupGuard(const EalCleanupGuard &) = delete;
    EalCleanupGuard &operator=(const EalCleanupGuard &) = delete;
    ~EalCleanupGuard() { eal_cleanup(); }
};

// For a fatal exit: removes a primary's runtime directory but leaves the
// rest of EAL as it is, for the process to exit right after. In DPDK 22.11
// rte_eal_cleanup() of devices that were probed but never started (memif
// servers) races with EAL's interrupt thread (seen: SEGV in rte_intr_fd_get
// in about one exit in six on a loaded machine).
void eal_abandon();

// A program's fatal exit after EAL started: prints "<program>: <message>",
// abandons EAL (above) and exits with `status`. Call it once the ports the
// program opened are closed.
[[noreturn]] void fatal_exit(const char *program, const std::string &message, int status = 2);

// Runs `fn` on EAL's interrupt thread and returns once it has run. PMDs run
// their control callbacks there (memif's control channel, link-state
// events), so work done through this is never concurrent with them: a port
// is stopped and closed this way. (DPDK 22.11's memif marks the link down
// first and then unmaps the regions in the callback; a close on another
// thread in that window frees them twice.) Runs `fn` inline when called on
// the interrupt thread itself, before EAL is up, or when the thread has not
// taken the work within 5 s (a callback stuck there; then it says so on
// stderr, and the overlap this avoids is possible again). `fn` must not wait
// for anything the caller holds: once started it is waited for without end.
void run_on_interrupt_thread(const std::function<void()> &fn);

// Bytes the EAL heap can still hand out, over all NUMA sockets.
size_t eal_heap_free_bytes();

}  // namespace mrc::drivers
