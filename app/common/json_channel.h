// One TCP connection carrying one JSON object per line: how the two ends of
// mrc-gen, mrc_write_bw and mrc_write_lat agree on addresses, QPNs and
// memory keys before a run and compare results after it (perftest's side
// channel; libmrc leaves key exchange to applications).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "common/result.h"

namespace mrc::app {

class JsonChannel {
  public:
    JsonChannel() = default;
    JsonChannel(JsonChannel &&o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) { o.fd_ = -1; }
    JsonChannel &operator=(JsonChannel &&o) noexcept;
    JsonChannel(const JsonChannel &) = delete;
    JsonChannel &operator=(const JsonChannel &) = delete;
    ~JsonChannel();

    // Client: connects to host:port, retrying until timeout_ms passes or
    // *stop is set. `peer` names what is expected there, for the error.
    static Result<JsonChannel> connect(const std::string &host, uint16_t port, uint32_t timeout_ms,
                                       const std::atomic<bool> *stop = nullptr,
                                       const char *peer = "server");
    // Server: listens on host:port ("0.0.0.0": every address) and takes one
    // connection within timeout_ms.
    static Result<JsonChannel> accept(const std::string &host, uint16_t port, uint32_t timeout_ms,
                                      const std::atomic<bool> *stop = nullptr);

    Result<void> send(const nlohmann::json &j);
    // The next object; nullopt when timeout_ms passed without one (or *stop
    // was set); an error when the peer closed the connection or sent a line
    // that is not a JSON object.
    Result<std::optional<nlohmann::json>> recv(uint32_t timeout_ms,
                                               const std::atomic<bool> *stop = nullptr);
    // The peer closed the connection (checked without blocking).
    bool peer_closed() const;

  private:
    explicit JsonChannel(int fd) : fd_(fd) {}
    int fd_ = -1;
    std::string buf_;  // received, not yet a whole line
};

// "host:port" -> parts; port defaults to `default_port`.
Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string &s,
                                                         uint16_t default_port);

}  // namespace mrc::app
