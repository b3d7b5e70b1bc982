// Child processes for tests: start by argv, wait with a deadline, and always
// stop what was started (SIGTERM, then SIGKILL), so no test leaves a DPDK
// process behind.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace mrc::test {

class Subprocess {
  public:
    // Starts argv[0] (a path) with stdout and stderr sent to `log_path`.
    static std::optional<Subprocess> start(const std::vector<std::string> &argv,
                                           const std::string &log_path);
    Subprocess(Subprocess &&o) noexcept : pid_(o.pid_), log_(std::move(o.log_)) { o.pid_ = -1; }
    Subprocess &operator=(Subprocess &&o) noexcept {
        if (this != &o) {
            stop();
            pid_ = o.pid_;
            log_ = std::move(o.log_);
            o.pid_ = -1;
        }
        return *this;
    }
    ~Subprocess() { stop(); }

    // Waits for exit; returns the exit status (128 + signal when killed), or
    // nullopt when the deadline passed (the process is still running).
    std::optional<int> wait_for(std::chrono::milliseconds timeout);
    // SIGTERM, a grace period, then SIGKILL; reaps the child.
    void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(1000));

    pid_t pid() const { return pid_; }
    const std::string &log_path() const { return log_; }
    std::string log() const;

  private:
    Subprocess(pid_t pid, std::string log) : pid_(pid), log_(std::move(log)) {}
    pid_t pid_ = -1;
    std::string log_;
};

// Runs a shell command; returns its exit status.
int sh(const std::string &cmd);
bool is_root();
std::string read_file(const std::string &path);
// The start of a DPDK program's command line for tests: EAL under
// --no-huge (512 MiB), no shared config, no PCI, its own file prefix and
// lcores; devices and the program's own arguments follow.
std::vector<std::string> dpdk_cmd(const std::string &bin, const std::string &prefix,
                                  const std::string &lcores);
// One command to a DPDK process's telemetry socket (by its file prefix);
// the reply's text, empty when there was none.
std::string telemetry_query(const std::string &prefix, const std::string &cmd);
// A fresh directory under /tmp for one test's sockets and logs.
std::string make_temp_dir(const std::string &tag);

}  // namespace mrc::test
