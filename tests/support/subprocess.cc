#include "support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char **environ;

namespace mrc::test {

std::optional<Subprocess> Subprocess::start(const std::vector<std::string> &argv,
                                            const std::string &log_path) {
    std::vector<char *> args;
    for (const auto &a : argv)
        args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return std::nullopt;
    return Subprocess(pid, log_path);
}

namespace {
int decode(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}
}  // namespace

std::optional<int> Subprocess::wait_for(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int status = 0;
        const pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            return decode(status);
        }
        if (r < 0 && errno != EINTR) {
            pid_ = -1;
            return std::nullopt;
        }
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

void Subprocess::stop(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    if (wait_for(grace)) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
}

std::string Subprocess::log() const {
    return read_file(log_);
}

int sh(const std::string &cmd) {
    const int rc = std::system(cmd.c_str());
    return rc == -1 ? -1 : decode(rc);
}

bool is_root() {
    return geteuid() == 0;
}

std::string read_file(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<std::string> dpdk_cmd(const std::string &bin, const std::string &prefix,
                                  const std::string &lcores) {
    return {bin,        "--no-huge",     "-m",   "512",      "--no-shconf",
            "--no-pci", "--file-prefix", prefix, "--lcores", lcores};
}

std::string telemetry_query(const std::string &prefix, const std::string &cmd) {
    const char *xdg = std::getenv("XDG_RUNTIME_DIR");
    const std::string base = getuid() == 0 ? "/var/run/dpdk/"
                             : xdg         ? std::string(xdg) + "/dpdk/"
                                           : "/tmp/dpdk/";
    const std::string path = base + prefix + "/dpdk_telemetry.v2";
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return {};
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    std::string out;
    char buf[16384];
    if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
        read(fd, buf, sizeof buf) > 0 &&  // the greeting
        write(fd, cmd.data(), cmd.size()) == ssize_t(cmd.size())) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) out.assign(buf, size_t(n));
    }
    close(fd);
    return out;
}

std::string make_temp_dir(const std::string &tag) {
    std::string tmpl = "/tmp/mrc-" + tag + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) return "/tmp";
    return tmpl;
}

}  // namespace mrc::test
