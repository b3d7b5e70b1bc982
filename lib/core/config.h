// Configuration of the transport core. Every quantity carries its unit.
// docs/transport.md, docs/multipath.md and docs/cc.md document the defaults.
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

// The QP's entropy values and their health (lib/core/ev.h, docs/multipath.md).
struct EvConfig {
    uint32_t evs = 64;              // active EVs, a multiple of the planes: evs / planes per plane
    uint32_t backup_per_plane = 8;  // spares of each plane: they replace its retired EVs
    uint32_t min_active = 8;  // floor: never fewer active EVs that are not ASSUMED_BAD or DENIED
    uint64_t seed = 1;
    uint64_t skip_ns = 16000;                 // an ECN echo makes the EV SKIP for this long...
    uint8_t skip_max_doublings = 3;           // ...doubled per mark in a row, up to 2^this times
    uint8_t trim_skip_factor = 4;             // a trimmed-packet NACK skips this many times longer
    uint64_t probe_interval_ns = 16000;       // an ASSUMED_BAD EV is probed this often...
    uint8_t probe_backoff_max_doublings = 4;  // ...doubled per probe lost in a row, up to 2^this
    uint64_t probe_timeout_ns = 0;     // a probe unanswered this long failed (0: the ack timeout)
    uint8_t probe_successes = 3;       // probe replies in a row that revive an EV or a plane
    uint8_t probe_successes_max = 48;  // flap damping: the most successes ever asked for
    uint64_t flap_window_ns = 2'000'000;  // failing again within this of a revival doubles the
                                          // successes asked for next time
    uint8_t max_probes_per_interval = 4;  // probes one QP may start per probe interval
    uint8_t plane_fail_timeouts = 3;      // timeouts of distinct EVs of a plane, no ack from it in
                                          // between: the QP takes the plane as failed
};

enum class CcAlgo : uint8_t { kFixed, kNscc };
const char *to_string(CcAlgo a);

// NSCC, UET's sender-based congestion control (lib/core/cc_nscc.h, docs/cc.md).
struct NsccConfig {
    double line_rate_gbps = 400;      // the sender's rate over all planes: sets the BDP
    uint64_t base_rtt_ns = 10000;     // until the first RTT sample; then the smallest seen
    double target_delay_rtts = 0.75;  // target queueing delay, in base RTTs
    double max_cwnd_bdps = 1.5;       // window ceiling, in BDPs (line rate x base RTT)
    double init_cwnd_bdps = 1.0;      // starting window, in BDPs
    double pi_gain = 0.5;             // proportional increase: window grows by gain x acked bytes
                                      // x (target - delay) / target
    double fi_mtus = 1.0;             // fair increase: MTUs per window of acked bytes (per RTT)
    double md_gamma = 0.8;  // multiplicative decrease: x (1 - gamma (delay - target) / delay)
    double md_floor = 0.5;  // ...never below this factor in one step (1 - max_md_jump)
    double qa_threshold_targets = 4.0;  // QuickAdapt when the delay exceeds this many targets
    double qa_max_cwnd_ratio = 0.125;   // ...and only when delivery fell below this x max window
    uint32_t adjust_mtus = 8;  // increases are applied every this many MTUs acked (or per RTT)
};

struct CcConfig {
    CcAlgo algo = CcAlgo::kNscc;
    uint64_t fixed_window_bytes = 0;  // kFixed: 0 = bounded by the peer's window only
    NsccConfig nscc;
};

struct QpConfig {
    uint32_t mtu_payload_bytes = 4096;  // payload bytes per data packet
    uint16_t mpr_units = 8;             // receive window: units of 128 PSNs
    uint32_t max_send_wr = 256;         // send queue depth, work requests
    uint32_t max_recv_cqe = 1024;       // receive completion queue depth
    uint32_t max_pending_imm = 256;     // WRITE_WITH_IMM immediates held for in-order delivery
    uint32_t max_inflight_pkts = 1024;  // requester's packet tracking (power of two)
    uint32_t ack_every_bytes = 16384;   // responder acks after this many new bytes
    uint32_t ack_req_every_pkts = 32;   // requester sets ACK_REQ at least this often
    uint64_t ack_delay_ns = 4000;       // a pending ack waits at most this long
    uint64_t no_resource_backoff_ns =
        8000;  // retransmit delay after NO_RESOURCE / out-of-window NACKs
    uint32_t nack_retry_limit =
        255;  // NACK-caused retransmissions of one packet before the QP errors
    RetryPolicy retry;
    EvConfig ev;
    CcConfig cc;
};

}  // namespace mrc
