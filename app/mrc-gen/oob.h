// mrc-gen's out-of-band channel: one TCP connection between the two ends,
// as perftest uses, to agree on QPNs, PSNs, addresses and memory keys
// before the run and to compare results after it. One JSON object per line.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <optional>
#include <string>

#include "common/result.h"

namespace mrc::gen {

class Oob {
  public:
    Oob() = default;
    Oob(Oob &&o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) { o.fd_ = -1; }
    Oob &operator=(Oob &&o) noexcept;
    ~Oob();

    // Client: connects to host:port, retrying until timeout_ms passes.
    static Result<Oob> connect(const std::string &host, uint16_t port, uint32_t timeout_ms,
                               const std::atomic<bool> &stop);
    // Server: listens on host:port and takes one connection.
    static Result<Oob> accept(const std::string &host, uint16_t port, uint32_t timeout_ms,
                              const std::atomic<bool> &stop);

    Result<void> send(const nlohmann::json &j);
    // A message, nullopt when timeout_ms passed without one (or `stop` was
    // set), or an error when the peer closed the connection or sent
    // something unreadable.
    Result<std::optional<nlohmann::json>> recv(uint32_t timeout_ms,
                                               const std::atomic<bool> *stop = nullptr);

  private:
    explicit Oob(int fd) : fd_(fd) {}
    int fd_ = -1;
    std::string buf_;
};

// "host:port" -> parts; port defaults to `default_port`.
Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string &s,
                                                         uint16_t default_port);

}  // namespace mrc::gen
