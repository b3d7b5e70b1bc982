#include "port/eal.h"

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_interrupts.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>

#include <sys/eventfd.h>
#include <unistd.h>

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

// Work for EAL's interrupt thread: an eventfd registered there as an external
// interrupt source; its callback runs what is queued, in order. Created on
// first use.
class IntrExecutor {
  public:
    static IntrExecutor *get();
    // Returns once the thread has finished what it was doing. The source
    // itself stays registered for the life of the process: unregistering it
    // makes the thread rebuild its list of sources, and a rebuild that runs
    // on while rte_eal_cleanup() unmaps EAL's memory reads freed handles
    // (DPDK 22.11: SEGV in rte_intr_fd_get at exit).
    static void drain();
    // False when the interrupt thread did not take `fn` (the caller runs it).
    bool run(const std::function<void()> &fn);

  private:
    enum class State { queued, running, done, withdrawn };
    struct Task {
        std::function<void()> fn;
        State state = State::queued;
        std::exception_ptr error;
    };
    IntrExecutor(rte_intr_handle *handle, int efd) : handle_(handle), efd_(efd) {}
    static void on_event(void *arg);

    [[maybe_unused]] rte_intr_handle *handle_;  // registered for the life of the process
    int efd_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Task>> queue_;
};

std::mutex g_executor_mu;
IntrExecutor *g_executor = nullptr;
std::atomic<bool> g_eal_up{false};

IntrExecutor *IntrExecutor::get() {
    std::lock_guard lk(g_executor_mu);
    if (g_executor || !g_eal_up) return g_executor;
    const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) return nullptr;
    rte_intr_handle *h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
    if (!h || rte_intr_fd_set(h, efd) != 0 || rte_intr_type_set(h, RTE_INTR_HANDLE_EXT) != 0) {
        if (h) rte_intr_instance_free(h);
        close(efd);
        return nullptr;
    }
    auto *ex = new IntrExecutor(h, efd);
    if (rte_intr_callback_register(h, &IntrExecutor::on_event, ex) != 0) {
        delete ex;
        rte_intr_instance_free(h);
        close(efd);
        return nullptr;
    }
    g_executor = ex;
    return ex;
}

void IntrExecutor::drain() {
    IntrExecutor *ex = nullptr;
    {
        std::lock_guard lk(g_executor_mu);
        ex = g_executor;
    }
    // After a callback that registered or unregistered a source (a port's
    // close does), the thread rebuilds its list of sources, reading every
    // source's handle. It does so when it sees its pipe, possibly just after
    // handling a wake-up of ours that came in the same epoll batch; the
    // second no-op, queued once the first ran, comes after the rebuild.
    if (!ex) return;
    ex->run([] {});
    ex->run([] {});
}

void IntrExecutor::on_event(void *arg) {
    auto *ex = static_cast<IntrExecutor *>(arg);
    uint64_t count = 0;
    // An external source is not read by EAL: drain it, or epoll fires again.
    if (read(ex->efd_, &count, sizeof count) < 0 && errno != EAGAIN) return;
    // Only what was queued before this call: work queued later waits for
    // the next wake-up, after any rebuild of the thread's sources.
    std::unique_lock lk(ex->mu_);
    std::deque<std::shared_ptr<Task>> batch;
    batch.swap(ex->queue_);
    for (auto &t : batch) {
        if (t->state == State::withdrawn) continue;
        t->state = State::running;
        lk.unlock();
        try {
            t->fn();
        } catch (...) {
            t->error = std::current_exception();
        }
        lk.lock();
        t->state = State::done;
        ex->cv_.notify_all();
    }
}

bool IntrExecutor::run(const std::function<void()> &fn) {
    auto t = std::make_shared<Task>(Task{fn});
    std::unique_lock lk(mu_);
    queue_.push_back(t);
    const uint64_t one = 1;
    if (write(efd_, &one, sizeof one) != sizeof one) {
        t->state = State::withdrawn;
        return false;
    }
    // A callback of a PMD may hold the thread for a while; one that holds it
    // for seconds is stuck, and the work is done here instead.
    if (!cv_.wait_for(lk, std::chrono::seconds(5), [&] { return t->state == State::done; })) {
        if (t->state == State::queued) {
            t->state = State::withdrawn;
            return false;
        }
        cv_.wait(lk, [&] { return t->state == State::done; });
    }
    lk.unlock();
    if (t->error) std::rethrow_exception(t->error);
    return true;
}

}  // namespace

void run_on_interrupt_thread(const std::function<void()> &fn) {
    if (!g_eal_up || rte_thread_is_intr()) return fn();
    IntrExecutor *ex = IntrExecutor::get();
    if (ex && ex->run(fn)) return;
    if (g_eal_up)
        std::fprintf(stderr,
                     "warning: EAL's interrupt thread did not take the work; doing it "
                     "on this thread\n");
    fn();
}

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
    g_eal_up = true;
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
    IntrExecutor::drain();
    g_eal_up = false;
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
