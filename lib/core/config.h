// Configuration of the transport core. Every quantity carries its unit.
// docs/transport.md, docs/multipath.md and docs/cc.md document the defaults.
#pragma once

#include <cstdint>

namespace mrc {

enum class RetryMode : uint8_t { kLinear, kExponential };

// The retransmission timeout (RTO), the last resort of loss recovery
// (docs/loss-recovery.md): it fires only when no acknowledgement made
// progress for a whole RTO, and then resends the oldest outstanding packet.
// Adaptive (the default): per plane, srtt + 4 x rttvar + the responder's ack
// delay from measured RTTs, within [min_rto_ns, max_rto_ns]; before the
// first sample, 1.024 us * 2^timeout_exp. Fixed: always 1.024 us * 2^t.
// Each expiry in a row without progress doubles the wait (exponential) or
// not (linear). Past `limit` expiries in a row with nothing acknowledged, or
// `limit` resends of one packet found lost from acks, the QP errors; with
// exponential mode a limit of 25 means retry for ever.
struct RetryPolicy {
    RetryMode mode = RetryMode::kExponential;
    uint8_t timeout_exp = 8;  // t: 1.024 us * 2^8 = 262 us
    uint8_t limit = 7;
    bool adaptive = true;
    uint64_t min_rto_ns = 1'000'000;    // floor: a peer descheduled this long costs one resend
    uint64_t max_rto_ns = 100'000'000;  // ceiling, backed-off waits included
    static constexpr uint8_t kMaxLinear = 7;
    static constexpr uint8_t kMaxExponential = 25;  // = infinite
    static constexpr uint8_t kMaxTimeoutExp = 24;   // about 17 s
};

// Loss detection from acknowledgements (docs/loss-recovery.md).
struct LossConfig {
    // A transmission is lost once one sent after it was acknowledged and it
    // has been out longer than its plane's RTT plus a reorder window, which
    // follows the lateness measured on that plane (RACK, RFC 8985, made
    // plane-aware for spraying).
    bool rack = true;
    uint64_t min_reo_wnd_ns = 2000;  // the reorder window never goes below this...
    uint32_t reo_decay_rtts = 64;    // ...and forgets lateness older than this many RTTs (x2)
    // A tail-loss probe: no ack progress for 2 x srtt + the ack delay while
    // packets are out, resend the latest one so its ack shows what is lost.
    bool tlp = true;
};

// Liveness of the peer host (docs/loss-recovery.md), shared by an
// endpoint's QPs to it: when nothing was heard from the peer (on any of
// them) for keepalive_ns, one of them sends a keepalive probe (another
// plane each time); nothing heard for peer_timeout_ns errors them with
// kPeerUnreachable. 0 switches either off.
struct LivenessConfig {
    uint64_t keepalive_ns = 100'000'000;
    uint64_t peer_timeout_ns = 500'000'000;
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
    // The UDP source ports EVs are drawn from, inclusive: by default the
    // dynamic range, as RoCEv2 draws its source ports, so that no EV is a
    // port another protocol is registered on (captures decode as MRC, and
    // fabrics treat the traffic like RoCEv2's).
    uint16_t ev_min = 49152;
    uint16_t ev_max = 65535;
    uint64_t skip_ns = 16000;                  // an ECN echo makes the EV SKIP for this long...
    uint8_t skip_max_doublings = 3;            // ...doubled per mark in a row, up to 2^this times
    uint8_t trim_skip_factor = 4;              // a trimmed-packet NACK skips this many times longer
    uint64_t probe_interval_ns = 16000;        // an ASSUMED_BAD EV is probed this often...
    uint8_t probe_backoff_max_doublings = 10;  // ...doubled per probe lost in a row, up to 2^this
    uint8_t plane_probe_backoff_max_doublings = 4;  // the same for a failed plane's probes (a
                                                    // whole plane is worth finding back soon)
    uint64_t probe_timeout_ns = 0;     // a probe unanswered this long failed (0: the ack timeout)
    uint8_t probe_successes = 3;       // probe replies in a row that revive an EV or a plane
    uint8_t probe_successes_max = 48;  // flap damping: the most successes ever asked for
    uint64_t flap_window_ns = 2'000'000;  // failing again within this of a revival doubles the
                                          // successes asked for next time
    uint8_t max_probes_per_interval = 4;  // probes one QP may start per probe interval
    uint8_t plane_fail_timeouts = 3;      // losses of distinct EVs of a plane, no ack from it in
                                          // between: the QP takes the plane as failed
    // The responder's reverse EVs (its acks): while data arrives, one of
    // them is probed about once per RTT (never more often than this; 0
    // switches reverse probing off).
    uint64_t reverse_probe_min_ns = 8000;
};

enum class CcAlgo : uint8_t { kFixed, kNscc };
const char *to_string(CcAlgo a);

// NSCC, UET's sender-based congestion control (lib/core/cc_nscc.h, docs/cc.md).
struct NsccConfig {
    double line_rate_gbps = 400;      // the sender's rate over all planes: sets the BDP
    uint64_t base_rtt_ns = 10000;     // until the first RTT sample; then the smallest seen
    bool base_rtt_known = false;      // base_rtt_ns is the fabric's (not a guess): samples may
                                      // only lower it (a first sample taken behind a standing
                                      // queue must not raise it)
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
    // true: one congestion window per (peer, plane), shared by every QP of
    // the endpoint to that peer (the path has one queue, however many QPs
    // use it): N QPs to a peer hold what one would in flight, not N times
    // it. false (the default): a window per QP and plane. Not the default
    // yet: NSCC driving one shared window is unstable where the hosts'
    // own scheduling delay reads as queueing delay (a shared 2-CPU machine:
    // goodput through mrc-fabric swung from 0.2x to 2x of a clean run,
    // docs/performance.md); in mrc-sim, where delay is the fabric's, it
    // keeps incast queues and drops far lower.
    bool per_peer = false;
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
    LossConfig loss;
    LivenessConfig liveness;
    EvConfig ev;
    CcConfig cc;
};

}  // namespace mrc
