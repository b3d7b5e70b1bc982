#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace mrc::perf {

void add_common(CLI::App &cli, Options &o) {
    cli.add_option("server", o.server, "the server's host: run as client (else as server)");
    cli.add_option("--socket", o.socket,
                   "mrcd's socket (default: $MRC_SOCKET, else " MRC_DEFAULT_SOCKET ")");
    cli.add_option("-s,--size", o.size, "message size, bytes")
        ->check(CLI::Range(1u, 1u << 30))
        ->capture_default_str();
    cli.add_option("-n,--iters", o.iters, "messages to send")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
        ->capture_default_str();
    cli.add_option("-D,--duration", o.duration_s, "seconds to run (instead of --iters)")
        ->check(CLI::Range(0.0, 86400.0));
    cli.add_option("-q,--qp", o.qps, "queue pairs")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    cli.add_option("-t,--tx-depth", o.tx_depth, "outstanding writes per QP")
        ->check(CLI::Range(1u, 4096u))
        ->capture_default_str();
    cli.add_option("-p,--port", o.port, "TCP port of the key exchange")->capture_default_str();
    cli.add_option("--service", o.service, "MRC service number")->capture_default_str();
    cli.add_flag("--report_gbits,!--report_mbytes", o.report_gbits,
                 "report Gb/s (default) or MB/s");
    cli.add_option("--json", o.json_path, "also write the results here");
    cli.add_flag("--yield", o.yield,
                 "sched_yield() when the CQ is empty (when this program shares a CPU with mrcd)");
    cli.add_option("--sleep-us", o.sleep_us,
                   "sleep this long when the CQ is empty (a CPU shared with mrcd, bandwidth runs)")
        ->check(CLI::Range(0u, 100000u));
    cli.add_option("--timeout-ms", o.timeout_ms, "how long to wait for the peer")
        ->capture_default_str();
}

int tool_main(int argc, char **argv, const char *name, const char *what, Options o, Role server,
              Role client) {
    CLI::App cli{std::string(name) + ": " + what, name};
    add_common(cli, o);
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return cli.exit(e) == 0 ? 0 : 2;
    }
    mrc_context *ctx;
    if (int rc = mrc_open(o.socket.empty() ? nullptr : o.socket.c_str(), &ctx); rc) {
        std::fprintf(stderr, "%s: %s\n", name, mrc_last_error(nullptr));
        return 2;
    }
    const int rc = o.server.empty() ? server(o, ctx) : client(o, ctx);
    mrc_close(ctx);
    return rc;
}

Channel::~Channel() {
    if (fd_ >= 0) ::close(fd_);
}

bool Channel::listen_accept(uint16_t port, int timeout_ms, std::string *err) {
    const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(ls, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(ls, 1) != 0) {
        *err = fmt::format("TCP port {}: {}", port, std::strerror(errno));
        ::close(ls);
        return false;
    }
    pollfd p{ls, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) {
        *err = fmt::format("no client on TCP port {} within {} ms", port, timeout_ms);
        ::close(ls);
        return false;
    }
    fd_ = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(ls);
    if (fd_ < 0) {
        *err = fmt::format("accept: {}", std::strerror(errno));
        return false;
    }
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return true;
}

bool Channel::connect(const std::string &host, uint16_t port, int timeout_ms, std::string *err) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
        *err = "cannot resolve " + host;
        return false;
    }
    const uint64_t until = now_ns() + uint64_t(timeout_ms) * 1'000'000;
    for (;;) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (::connect(fd_, res->ai_addr, res->ai_addrlen) == 0) break;
        ::close(fd_);
        fd_ = -1;
        if (now_ns() > until) {
            *err = fmt::format("cannot connect to {}:{}: {}", host, port, std::strerror(errno));
            ::freeaddrinfo(res);
            return false;
        }
        ::usleep(20'000);
    }
    ::freeaddrinfo(res);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return true;
}

bool Channel::send(const nlohmann::json &j, std::string *err) {
    const std::string s = j.dump() + "\n";
    size_t off = 0;
    while (off < s.size()) {
        const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0) {
            *err = fmt::format("side channel: {}", std::strerror(errno));
            return false;
        }
        off += size_t(n);
    }
    return true;
}

bool Channel::recv(nlohmann::json *j, int timeout_ms, std::string *err) {
    const uint64_t until = now_ns() + uint64_t(timeout_ms) * 1'000'000;
    size_t nl;
    while ((nl = buf_.find('\n')) == std::string::npos) {
        if (buf_.size() > (1u << 20)) {
            *err = "side channel: message too long";
            return false;
        }
        pollfd p{fd_, POLLIN, 0};
        // Rounded up: a 1 ms wait must not become a 0 ms poll (a busy loop).
        const int left =
            int(std::max<int64_t>(0, (int64_t(until - now_ns()) + 999'999) / 1'000'000));
        if (::poll(&p, 1, left) != 1) {
            *err = "side channel: nothing from the peer in time";
            return false;
        }
        char tmp[4096];
        const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
        if (n <= 0) {
            *err = "side channel: the peer closed it";
            return false;
        }
        buf_.append(tmp, size_t(n));
    }
    const std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    *j = nlohmann::json::parse(line, nullptr, false);
    if (j->is_discarded()) {
        *err = "side channel: not JSON";
        return false;
    }
    return true;
}

bool Channel::peer_closed() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return false;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

void die(mrc_context *ctx, const std::string &what, int rc) {
    std::fprintf(stderr, "%s: %s: %s (%s)\n", program_invocation_short_name, what.c_str(),
                 mrc_strerror(rc), mrc_last_error(ctx));
    std::exit(1);
}

void die(const std::string &what) {
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
    std::exit(1);
}

std::string ip_string(uint32_t ip) {
    return fmt::format("{}.{}.{}.{}", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

double percentile_us(std::vector<uint64_t> &s, double p) {
    if (s.empty()) return 0;
    const size_t k = std::min(s.size() - 1, size_t(p * double(s.size())));
    std::nth_element(s.begin(), s.begin() + std::ptrdiff_t(k), s.end());
    return double(s[k]) / 1000.0;
}

void write_json(const std::string &path, const nlohmann::json &j) {
    if (path.empty()) return;
    std::ofstream f(path);
    f << j.dump(2) << "\n";
    if (!f) die("cannot write " + path);
}

}  // namespace mrc::perf
