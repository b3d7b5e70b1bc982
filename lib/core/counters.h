// Every drop and every unusual event has a named counter, declared once
// here as data: the structs and the name tables for JSON and telemetry come
// from these lists, and a test checks that docs/counters.md names each one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc {

// Endpoint-wide: what happened to frames before they reached a QP.
#define MRC_ENDPOINT_COUNTERS(X)                                                             \
    X(rx_frames, "frames handed to the endpoint")                                            \
    X(rx_not_mrc, "frames that are not IPv4/UDP to the MRC port (dropped)")                  \
    X(rx_malformed, "MRC frames that failed header validation (dropped)")                    \
    X(rx_bad_plane, "frames on a plane index the endpoint does not have (dropped)")          \
    X(rx_unknown_qpn, "packets for a QPN that does not exist (dropped)")                     \
    X(rx_qp_not_ready, "packets for a QP not in RTR/RTS (dropped)")                          \
    X(rx_wrong_peer, "packets whose source IP is not the QP's peer on that plane (dropped)") \
    X(tx_packets, "packets emitted by poll_tx")

// Per QP, requester and responder sides.
#define MRC_QP_COUNTERS(X)                                                                        \
    X(tx_data_pkts, "data packets sent, first transmissions")                                     \
    X(tx_data_bytes, "payload bytes sent, first transmissions")                                   \
    X(tx_retx_pkts, "data packets retransmitted (all causes)")                                    \
    X(retx_after_nack, "retransmissions caused by a NACK")                                        \
    X(retx_after_timeout, "retransmissions caused by the retransmission timeout")                 \
    X(losses_detected, "packets found lost from acks, no timer (each resent unless acked first)") \
    X(retx_spurious, "resends after a loss or timeout whose earlier transmission arrived")        \
    X(tail_probes, "tail-loss probes: the latest packet resent after no progress for a PTO")      \
    X(ack_timeouts, "retransmission timeouts (no ack progress for an RTO)")                       \
    X(rto_silent, "timeouts while the peer answered nothing: no path blamed")                     \
    X(reordered_pkts, "packets acknowledged after a packet sent later (reorder window samples)")  \
    X(tx_sacks, "SACKs sent")                                                                     \
    X(tx_nacks, "NACKs sent")                                                                     \
    X(tx_ack_copies, "copies of a SACK sent on the other reverse EVs after a duplicate")          \
    X(tx_probe_replies, "probe replies sent")                                                     \
    X(nacks_dropped, "NACKs not sent because the NACK queue was full")                            \
    X(rx_data_pkts, "data packets accepted and placed")                                           \
    X(rx_data_bytes, "payload bytes placed")                                                      \
    X(rx_duplicates, "data packets already received (re-acked, not written)")                     \
    X(rx_trimmed, "trimmed data packets (NACKed)")                                                \
    X(rx_out_of_window, "data packets outside the receive window (NACKed)")                       \
    X(rx_access_errors, "data packets with a bad key, address or length (NACKed, not written)")   \
    X(rx_no_resource, "WRITE_WITH_IMM last packets refused: immediates limit (NACKed)")           \
    X(rx_bad_message, "data packets inconsistent with their message (dropped)")                   \
    X(rx_ecn_ce, "data packets that arrived CE-marked")                                           \
    X(rx_sacks, "SACKs received")                                                                 \
    X(rx_sacks_invalid, "SACKs acknowledging PSNs never sent (ignored)")                          \
    X(rx_sacks_stale, "SACKs older than what is already acknowledged")                            \
    X(rx_ecn_echo, "acks echoing a CE mark")                                                      \
    X(rx_nacks, "NACKs received")                                                                 \
    X(rx_nacks_stale, "NACKs for PSNs acked, never sent, or resent since (ignored)")              \
    X(rx_probes, "probes received")                                                               \
    X(rx_probe_replies, "probe replies received")                                                 \
    X(tx_reverse_probes, "probes of this QP's reverse (ack) EVs")                                 \
    X(reverse_probes_ok, "reverse probes answered: the reverse EV is GOOD")                       \
    X(reverse_evs_replaced, "reverse EVs replaced after their probe went unanswered")             \
    X(tx_keepalives, "keepalive probes (nothing heard from the peer for keepalive_ns)")           \
    X(rx_keepalive_replies, "answers to keepalive probes")                                        \
    X(peer_timeouts, "QP errors because the peer was silent for peer_timeout_ns")                 \
    X(acked_pkts, "packets acknowledged cumulatively")                                            \
    X(sacked_pkts, "packets acknowledged selectively before the cumulative point")                \
    X(wr_completed, "work requests completed successfully")                                       \
    X(wr_flushed, "work requests completed with an error")                                        \
    X(state_grows, "per-QP queues grown on demand (send queue, tracking ring, immediates)")       \
    X(imm_delivered, "immediates delivered to the receive completion queue")                      \
    X(rtt_samples, "RTT samples taken from echoed timestamps")                                    \
    X(ev_skips, "EVs put in SKIP by an ECN echo, a trimmed-packet NACK or a first loss")          \
    X(ev_retired,                                                                                 \
      "EVs retired (ASSUMED_BAD): a second loss in a row, or a timeout while the peer answered")  \
    X(ev_floor_holds, "retirements refused by the floor (min_active): SKIP instead")              \
    X(ev_revived, "ASSUMED_BAD EVs revived by probe replies")                                     \
    X(ev_fallbacks, "packets sent on an EV that was not GOOD: no GOOD one was usable")            \
    X(ev_none, "packets held back because every EV is DENIED")                                    \
    X(tx_probes, "probes sent (EV and plane probes)")                                             \
    X(probes_lost, "probes unanswered within the probe timeout")                                  \
    X(rx_probe_replies_stale, "probe replies that match no outstanding probe (ignored)")          \
    X(plane_failovers, "planes this QP stopped using (failure found, peer or table said down)")   \
    X(plane_recoveries, "planes this QP took back into use after probes succeeded")               \
    X(retx_off_plane, "resends after a loss or a timeout moved to another plane")                 \
    X(retx_spare_ev, "resends after unanswered timeouts in a row sent on a spare EV")             \
    X(ev_adopted,                                                                                 \
      "spare EVs made active: a resend on one got through where the active EV did not")           \
    X(cc_decreases, "multiplicative window decreases (ECN with queueing delay)")                  \
    X(cc_quick_adapts, "QuickAdapt window resets after loss, a NACK or a large delay")            \
    X(cc_repaths,                                                                                 \
      "acks with ECN but no queueing delay: the window kept, traffic moved off the "              \
      "EV")

// Per endpoint and plane: what the path scorer (core/path.h) reads. An ack
// or NACK counts on the plane of the EV it echoes.
#define MRC_PLANE_COUNTERS(X)                                               \
    X(tx_data_pkts, "data packets sent on the plane, first transmissions")  \
    X(tx_retx_pkts, "data packets retransmitted on the plane")              \
    X(tx_probes, "probes sent on the plane")                                \
    X(acked_pkts, "packets sent on the plane and acknowledged")             \
    X(rx_acks, "acks echoing an EV of the plane")                           \
    X(rx_ecn_echoes, "acks echoing a CE mark on an EV of the plane")        \
    X(rx_trims, "trimmed-packet NACKs for EVs of the plane (not last hop)") \
    X(rx_lasthop_trims, "last-hop trim NACKs for EVs of the plane")         \
    X(ack_timeouts, "retransmission timeouts of packets sent on the plane") \
    X(lost_pkts, "packets sent on the plane found lost (acks or timeouts)") \
    X(probes_ok, "probe replies for EVs of the plane")                      \
    X(probes_lost, "probes on the plane left unanswered")                   \
    X(rtt_samples, "RTT samples from acks echoing an EV of the plane")      \
    X(rtt_sum_ns, "sum of those RTT samples, ns (mean = rtt_sum_ns / rtt_samples)")

#define MRC_COUNTER_FIELD(name, doc) uint64_t name = 0;
#define MRC_COUNTER_COUNT(name, doc) +1

struct EndpointCounters {
    MRC_ENDPOINT_COUNTERS(MRC_COUNTER_FIELD)
};
struct QpCounters {
    MRC_QP_COUNTERS(MRC_COUNTER_FIELD)
    QpCounters &operator+=(const QpCounters &o);
    QpCounters &operator-=(const QpCounters &o);
};

struct PlaneCounters {
    MRC_PLANE_COUNTERS(MRC_COUNTER_FIELD)
    PlaneCounters &operator+=(const PlaneCounters &o);
};

struct CounterInfo {
    const char *name;
    const char *doc;
};
inline constexpr size_t kEndpointCounterCount = 0 MRC_ENDPOINT_COUNTERS(MRC_COUNTER_COUNT);
inline constexpr size_t kQpCounterCount = 0 MRC_QP_COUNTERS(MRC_COUNTER_COUNT);
inline constexpr size_t kPlaneCounterCount = 0 MRC_PLANE_COUNTERS(MRC_COUNTER_COUNT);
extern const CounterInfo kEndpointCounterInfo[kEndpointCounterCount];
extern const CounterInfo kQpCounterInfo[kQpCounterCount];
extern const CounterInfo kPlaneCounterInfo[kPlaneCounterCount];

// Counters as arrays, in declaration order, for generic printing.
inline const uint64_t *counter_array(const EndpointCounters &c) {
    return &c.rx_frames;
}
inline const uint64_t *counter_array(const QpCounters &c) {
    return &c.tx_data_pkts;
}
inline const uint64_t *counter_array(const PlaneCounters &c) {
    return &c.tx_data_pkts;
}
static_assert(sizeof(PlaneCounters) == kPlaneCounterCount * sizeof(uint64_t));
static_assert(sizeof(EndpointCounters) == kEndpointCounterCount * sizeof(uint64_t));
static_assert(sizeof(QpCounters) == kQpCounterCount * sizeof(uint64_t));

}  // namespace mrc
