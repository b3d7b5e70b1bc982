// Configuration of the transport core. Every quantity carries its unit.
#pragma once

#include <cstdint>

namespace mrc {

enum class RetryMode : uint8_t { kLinear, kExponential };

// Ack timeout = 1.024 us * 2^t; a packet retransmitted after a timeout waits
// the same again (linear) or twice as long each time (exponential). Past
// `limit` timeouts of one packet the QP errors; with exponential mode a
// limit of 25 means retry for ever.
struct RetryPolicy {
    RetryMode mode = RetryMode::kExponential;
    uint8_t timeout_exp = 8;  // t: 1.024 us * 2^8 = 262 us
    uint8_t limit = 7;
    static constexpr uint8_t kMaxLinear = 7;
    static constexpr uint8_t kMaxExponential = 25;  // = infinite
    static constexpr uint8_t kMaxTimeoutExp = 24;   // about 17 s
};

inline constexpr uint64_t ack_timeout_ns(uint8_t t) {
    return (1024ull << t);
}

struct QpConfig {
    uint32_t mtu_payload_bytes = 4096;  // payload bytes per data packet
    uint16_t mpr_units = 8;             // receive window: units of 128 PSNs
    uint32_t max_send_wr = 256;         // send queue depth, work requests
    uint32_t max_recv_cqe = 1024;       // receive completion queue depth
    uint32_t max_pending_imm = 256;     // WRITE_WITH_IMM immediates held for in-order delivery
    uint32_t max_inflight_pkts = 1024;  // requester's packet tracking (power of two)
    uint64_t cwnd_bytes = 0;  // fixed congestion window; 0 = bounded by the peer's window only
    uint32_t evs = 64;        // EVs, split evenly over the planes
    uint64_t ev_seed = 1;
    uint32_t ack_every_bytes = 16384;  // responder acks after this many new bytes
    uint32_t ack_req_every_pkts = 32;  // requester sets ACK_REQ at least this often
    uint64_t ack_delay_ns = 4000;      // a pending ack waits at most this long
    uint64_t no_resource_backoff_ns =
        8000;  // retransmit delay after NO_RESOURCE / out-of-window NACKs
    uint32_t nack_retry_limit =
        255;  // NACK-caused retransmissions of one packet before the QP errors
    RetryPolicy retry;
};

}  // namespace mrc
