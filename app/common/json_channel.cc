#include "json_channel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/sleep.h"

namespace mrc::app {

namespace {

constexpr size_t kMaxMessageBytes = 16u << 20;

bool stopped(const std::atomic<bool> *stop) {
    return stop != nullptr && stop->load();
}

Result<sockaddr_in> resolve(const std::string &host, uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || res == nullptr)
        return Error{fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc))};
    sockaddr_in a{};
    std::memcpy(&a, res->ai_addr, sizeof a);
    freeaddrinfo(res);
    a.sin_port = htons(port);
    return a;
}

}  // namespace

JsonChannel &JsonChannel::operator=(JsonChannel &&o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        buf_ = std::move(o.buf_);
        o.fd_ = -1;
    }
    return *this;
}

JsonChannel::~JsonChannel() {
    if (fd_ >= 0) ::close(fd_);
}

Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string &s,
                                                         uint16_t default_port) {
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos) return std::make_pair(s, default_port);
    const std::string p = s.substr(colon + 1);
    char *end = nullptr;
    const unsigned long v = std::strtoul(p.c_str(), &end, 10);
    if (p.empty() || *end != '\0' || v == 0 || v > 65535)
        return Error{fmt::format("'{}': port must be in [1, 65535]", s)};
    return std::make_pair(s.substr(0, colon), static_cast<uint16_t>(v));
}

Result<JsonChannel> JsonChannel::connect(const std::string &host, uint16_t port,
                                         uint32_t timeout_ms, const std::atomic<bool> *stop,
                                         const char *peer) {
    auto addr = resolve(host, port);
    if (!addr) return addr.error();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int last_err = 0;
    while (!stopped(stop) && std::chrono::steady_clock::now() < deadline) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return Error{fmt::format("socket: {}", std::strerror(errno))};
        if (::connect(fd, reinterpret_cast<const sockaddr *>(&*addr), sizeof(*addr)) == 0) {
            const int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return JsonChannel(fd);
        }
        last_err = errno;
        ::close(fd);
        mrc::sleep_for_steady(std::chrono::milliseconds(100));
    }
    if (stopped(stop)) return Error{"interrupted"};
    return Error{fmt::format("no {} at {}:{} after {} ms ({})", peer, host, port, timeout_ms,
                             std::strerror(last_err))};
}

Result<JsonChannel> JsonChannel::accept(const std::string &host, uint16_t port, uint32_t timeout_ms,
                                        const std::atomic<bool> *stop) {
    auto addr = resolve(host, port);
    if (!addr) return addr.error();
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return Error{fmt::format("socket: {}", std::strerror(errno))};
    const int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(lfd, reinterpret_cast<const sockaddr *>(&*addr), sizeof(*addr)) != 0 ||
        ::listen(lfd, 1) != 0) {
        const int e = errno;
        ::close(lfd);
        return Error{fmt::format("cannot listen on {}:{}: {}", host, port, std::strerror(e))};
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!stopped(stop) && std::chrono::steady_clock::now() < deadline) {
        pollfd p{lfd, POLLIN, 0};
        if (::poll(&p, 1, 100) == 1) {
            const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
            ::close(lfd);
            if (fd < 0) return Error{fmt::format("accept: {}", std::strerror(errno))};
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return JsonChannel(fd);
        }
    }
    ::close(lfd);
    if (stopped(stop)) return Error{"interrupted"};
    return Error{fmt::format("no client connected to {}:{} within {} ms", host, port, timeout_ms)};
}

Result<void> JsonChannel::send(const nlohmann::json &j) {
    const std::string s = j.dump() + "\n";
    size_t off = 0;
    while (off < s.size()) {
        const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Error{fmt::format("peer connection lost: {}", std::strerror(errno))};
        off += size_t(n);
    }
    return {};
}

Result<std::optional<nlohmann::json>> JsonChannel::recv(uint32_t timeout_ms,
                                                        const std::atomic<bool> *stop) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
            const std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            auto j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_discarded() || !j.is_object())
                return Error{"the peer sent a line that is not a JSON object"};
            return std::optional<nlohmann::json>(std::move(j));
        }
        // Poll at least once, even with no time left: a closed connection
        // shows at once. Rounded up: a 1 ms wait must not become a 0 ms
        // poll, or a caller that polls in a loop spins (and starves an
        // mrcd worker sharing its CPU).
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd p{fd_, POLLIN, 0};
        if (stopped(stop)) return std::optional<nlohmann::json>();
        const int r = ::poll(&p, 1, int(std::clamp<int64_t>(left.count(), 0, 100)));
        // A signal is not the end of the wait: net_tap raises one per
        // received burst, so a process using it sees EINTR all the time.
        if (r < 0 && errno != EINTR)
            return Error{fmt::format("poll on the peer connection: {}", std::strerror(errno))};
        if (r <= 0) {
            if (left.count() <= 0) return std::optional<nlohmann::json>();
            continue;
        }
        char tmp[4096];
        const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) return Error{"the peer closed the connection"};
        if (n < 0) return Error{fmt::format("peer connection lost: {}", std::strerror(errno))};
        buf_.append(tmp, size_t(n));
        if (buf_.size() > kMaxMessageBytes) return Error{"the peer sent an oversized message"};
    }
}

bool JsonChannel::peer_closed() const {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return false;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

}  // namespace mrc::app
