// A queue pair: the requester (sends WRITEs, tracks acks, retransmits) and
// the responder (places payloads, tracks PSNs, acks) of one MRC connection.
//
// Single writer: one thread (a worker lcore, or the simulator) owns a QP
// and everything it touches. No allocation after to_init(); no locks, no
// clock of its own: time comes in as now_ns.
//
// State machine (verbs-like). Rows: state; columns: event.
//
//   state | to_init | to_rtr | to_rts | fatal event (*) | reset() | data/acks in | post_write
//   ------+---------+--------+--------+-----------------+---------+--------------+-----------
//   RESET | INIT    |  error |  error |  -              | RESET   | dropped      | kNotReady
//   INIT  |  error  | RTR    |  error |  ERROR          | RESET   | dropped      | kNotReady
//   RTR   |  error  |  error | RTS    |  ERROR          | RESET   | accepted     | kNotReady
//   RTS   |  error  |  error |  error |  ERROR          | RESET   | accepted     | kOk
//   ERROR |  error  |  error |  error |  ERROR          | RESET   | dropped      | kNotReady
//
//   (*) a packet's retry budget exhausted (timeouts and losses, or NACKs),
//       a NACK that says REMOTE_ACCESS or UNEXPECTED, the peer silent for
//       the liveness timeout, or to_error(). Entering ERROR
//       completes every outstanding work request with an error status (the
//       one that caused it first, with the cause) and stops all sending.
//       "error" in the table: the call returns an Error, state unchanged.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "core/cc.h"
#include "core/config.h"
#include "core/counters.h"
#include "core/ev.h"
#include "core/memory.h"
#include "core/ring.h"
#include "core/rtt.h"
#include "wire/mrc.h"
#include "wire/psn.h"

namespace mrc {

class Endpoint;

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kError };
const char *to_string(QpState s);

enum class WcStatus : uint8_t {
    kSuccess,
    kRetryExceeded,        // timeouts and losses of one packet exhausted the retry budget
    kNackRetryExceeded,    // a packet was NACKed more often than nack_retry_limit
    kRemoteAccessError,    // the responder refused the key, address or length
    kRemoteProtocolError,  // the responder answered UNEXPECTED
    kFlushed,              // outstanding when the QP entered ERROR
    kPeerUnreachable,      // nothing heard from the peer for the liveness timeout
};
const char *to_string(WcStatus s);

enum class PostResult : uint8_t { kOk, kQueueFull, kNotReady, kBadLength };

struct WriteRequest {
    uint64_t wr_id = 0;
    const void *local = nullptr;  // must stay unchanged until the completion
    uint32_t length = 0;          // 1 byte to 4 GiB - 1
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    bool with_imm = false;
    uint32_t imm = 0;
};

struct SendCompletion {
    uint64_t wr_id = 0;
    WcStatus status = WcStatus::kSuccess;
    uint32_t bytes = 0;
    uint32_t msn = 0;
};

struct RecvCompletion {
    uint32_t imm = 0;
    uint32_t msn = 0;
    uint32_t bytes = 0;
};

// How this QP reaches its peer on each plane.
struct QpPeer {
    uint32_t dst_qpn = 0;
    uint8_t planes = 1;
    wire::MrcAddr path[kMaxPlanes];
    // The largest data payload per packet the peer's ports carry, as it
    // said at set-up (0: not said). The QP sends the smaller of this and
    // its own QpConfig::mtu_payload_bytes, and says that to the peer.
    uint32_t mtu_payload_bytes = 0;
};

// One packet handed out by poll_tx: headers written into `hdr` (the caller's
// buffer of wire::kMaxHdrBytes), payload by reference into registered memory.
struct TxPacket {
    uint8_t *hdr = nullptr;
    uint16_t hdr_len = 0;
    const uint8_t *payload = nullptr;
    uint32_t payload_len = 0;
    uint8_t plane = 0;
    uint32_t qpn = 0;
};

// Congestion state of one path (peer, plane) (CcConfig::per_peer: shared by
// every QP of the endpoint to that peer; otherwise a QP's own). Its window
// bounds what all its QPs have in flight on the plane together; a QP that
// finds no room waits on `waiting` until an ack of any of them frees some.
struct PathCc {
    // A shared window never goes below this many packets (nor below one
    // per QP on it when fewer): one QP's floor is one packet, and a path
    // that many QPs share must not leave most of them a packet per many
    // RTTs after a cut. Far below a path's BDP; it does not multiply.
    static constexpr uint32_t kSharedFloorPkts = 16;
    std::unique_ptr<CongestionControl> cc;
    uint64_t window = 0;    // max(cc->window_bytes(), floor), kept after every update
    uint64_t floor = 0;     // min(users, kSharedFloorPkts) MTUs (shared ones)
    uint64_t inflight = 0;  // bytes of every QP on it in flight on the plane
    uint64_t key = 0;       // in the endpoint's table (shared ones)
    uint32_t mtu = 0;
    uint32_t users = 0;
    Ring<uint32_t> waiting;  // QPNs blocked on the window, each once (Qp::cc_wait_)
};

class Qp;

// Liveness of one peer host, shared by every QP of the endpoint to it
// (keyed by the peer's plane-0 address). Whatever any of them hears from
// the peer counts for all. The link, not each QP, owns the liveness timer
// (one timer per peer in the endpoint's wheel): when the peer was silent
// for keepalive_ns it has one of its QPs send a keepalive for all, and when
// it was silent for peer_timeout_ns it fails them. N idle QPs to a peer
// cost one keepalive and one timer event per interval, not N.
struct PeerLink {
    uint64_t heard_ns = 0;           // the peer's last packet to any of its QPs
    uint64_t keepalive_sent_ns = 0;  // the last keepalive any of them sent (or claimed)
    uint64_t key = 0;
    uint32_t users = 0;
    uint32_t timer_id = 0;      // in the endpoint's wheel (above the QPNs)
    uint32_t next_sender = 0;   // keepalives rotate over the members
    LivenessConfig live;        // the first QP's (QPs to one peer share settings)
    std::vector<Qp *> members;  // QPs whose liveness it watches (RTS, timer seen)
    // Every RTT sample of its QPs, per plane: what a QP that has none of
    // its own yet (new, or one that only receives) goes by for its timeouts
    // and probe pacing, instead of a configured guess.
    PlaneRtt rtt[kMaxPlanes];
};

class Qp {
  public:
    Qp(Endpoint *ep, uint32_t qpn, const QpConfig &cfg);
    ~Qp();
    Qp(const Qp &) = delete;
    Qp &operator=(const Qp &) = delete;

    uint32_t qpn() const { return qpn_; }
    QpState state() const { return state_; }
    WcStatus error_cause() const { return error_cause_; }
    // With kRetryExceeded / kNackRetryExceeded: the PSN whose budget ran out.
    Psn error_psn() const { return error_psn_; }
    const QpConfig &config() const { return cfg_; }
    // The payload per data packet: the smaller of this end's and the peer's
    // (QpPeer::mtu_payload_bytes), from to_rtr on.
    uint32_t mtu_payload_bytes() const { return cfg_.mtu_payload_bytes; }
    const QpCounters &counters() const { return ctr_; }
    // Bytes this QP holds now (itself, its queues, EV set and CC state), by
    // the capacity of each container: what a connected QP costs a host.
    size_t memory_bytes() const;

    // ---- state machine (setup path) ----
    Result<void> to_init(uint32_t pd);
    Result<void> to_rtr(const QpPeer &peer, Psn expected_psn);
    Result<void> to_rts(Psn send_psn);
    void to_error(WcStatus cause = WcStatus::kFlushed);
    void reset();
    // Points the QP's packets on `plane` at another next hop (the router in
    // front of this host changed its MAC, or answered only after the QP
    // came up); the rest of the path stays. False when the QP has no such
    // plane.
    bool set_next_hop(uint8_t plane, const wire::MacAddr &mac);

    // ---- application ----
    PostResult post_write(const WriteRequest &wr);
    uint32_t poll_send_cq(SendCompletion *out, uint32_t max);
    uint32_t poll_recv_cq(RecvCompletion *out, uint32_t max);
    // Work requests posted and not yet completed.
    uint32_t outstanding_wrs() const { return sq_tail_ - sq_head_; }
    Psn send_una() const { return snd_una_; }
    Psn send_next() const { return snd_nxt_; }
    Psn expected_psn() const { return epsn_; }
    uint64_t inflight_bytes() const { return inflight_bytes_; }

    // ---- multipath (multipath.cc, docs/multipath.md) ----
    const EvSet &evs() const { return evs_; }
    // Cache hints, no effect on behaviour. With thousands of QPs a packet's
    // QP is rarely in cache: the lines it reads first (state, peer, EV set
    // header, sender and receiver fields), then, once those are near, the
    // EV set's arrays (their addresses are read from the first).
    void prefetch() const {
        __builtin_prefetch(&state_);
        __builtin_prefetch(&peer_);
        __builtin_prefetch(&evs_);
        __builtin_prefetch(&link_);
        __builtin_prefetch(&snd_una_);
        __builtin_prefetch(&epsn_);
        __builtin_prefetch(&ack_due_now_);
    }
    void prefetch_evs() const { evs_.prefetch(); }
    void prefetch_next_ev() const { evs_.prefetch_next(); }
    // Reverse-EV refreshes of the QPs to one peer add up to at most this
    // many QPs' worth: with more, each QP refreshes that much less often.
    static constexpr uint32_t kRefreshQpsPerPeer = 16;
    // The congestion control of one plane (after to_rtr) and the QP's
    // window: the sum over its planes.
    const CongestionControl &cc(uint8_t plane) const { return *pcc_[plane]->cc; }
    // The path's congestion state (shared with the QPs to the same peer
    // under CcConfig::per_peer).
    const PathCc &path_cc(uint8_t plane) const { return *pcc_[plane]; }
    uint64_t window_bytes() const;
    uint64_t plane_inflight_bytes(uint8_t plane) const { return plane_inflight_[plane]; }
    // Planes this QP sends data on now.
    uint8_t usable_planes() const { return usable_mask_; }
    // Why the QP does not use `plane` (kPlane* bits; 0: it does).
    uint8_t plane_down_reasons(uint8_t plane) const { return plane_[plane].down; }
    // The operator's DENIED state for one EV (through the path table).
    void set_ev_denied(uint16_t ev, bool denied, uint64_t now_ns);

    // ---- loss recovery (loss.cc, docs/loss-recovery.md) ----
    // RTT knowledge of one plane (samples from acks and probe replies).
    const PlaneRtt &rtt(uint8_t plane) const { return timing_[plane].rtt; }
    // The plane's retransmission timeout now, before any back-off.
    uint64_t rto_ns(uint8_t plane) const;
    // The tail-loss probe's timeout: no ack progress and nothing sent for
    // this long while packets are out sends the probe.
    uint64_t pto_ns() const;
    // The reorder window loss detection allows on the plane now.
    uint64_t reorder_window_ns(uint8_t plane, uint64_t now_ns) const;
    // When something was last heard from the peer (any valid packet).
    uint64_t last_heard_ns() const { return last_heard_ns_; }

    // Reasons a QP leaves a plane. Link, table and denied come from the
    // endpoint; peer from the plane-status bitmap in the peer's acks; failed
    // from this QP's own ack timeouts; verify is set when any other reason
    // clears, and like failed only probe replies clear it.
    static constexpr uint8_t kPlaneLink = 0x01;
    static constexpr uint8_t kPlaneTable = 0x02;
    static constexpr uint8_t kPlaneDenied = 0x04;
    static constexpr uint8_t kPlanePeer = 0x08;
    static constexpr uint8_t kPlaneFailed = 0x10;
    static constexpr uint8_t kPlaneVerify = 0x20;

  private:
    friend class Endpoint;
    friend struct QpTestPeer;

    // ---- requester ----
    struct WrEntry {
        WriteRequest wr;
        uint32_t msn = 0;
        Psn first_psn;
        uint32_t npkts = 0;
        uint32_t sent_pkts = 0;  // segmented so far
    };
    // Why the latest transmission of a PSN left.
    // kSilentTimeout: a timeout with nothing heard from the peer QP while
    // its host is heard, or the second in a row (the resend tries a spare EV).
    enum class TxKind : uint8_t { kFirst, kNack, kLoss, kTailProbe, kTimeout, kSilentTimeout };
    static constexpr uint32_t kNil = UINT32_MAX;
    // Per outstanding PSN in [snd_una, snd_nxt).
    struct TxSlot {
        uint32_t wr = 0;  // index into sq_ (absolute, masked on use)
        uint32_t msg_offset = 0;
        uint32_t len = 0;
        // The send-order list of transmissions awaiting their ack (PSN
        // values, kNil at the ends): a PSN is on it while its latest
        // transmission may still be acknowledged and it is not queued.
        uint32_t prev = kNil;
        uint32_t next = kNil;
        uint64_t tx_order = 0;     // the QP's transmission count when it last left (never wraps)
        uint16_t ev_idx = 0;       // entry of the EV set that carried the latest transmission
        uint16_t prev_ev_idx = 0;  // the entry that carried the transmission before it
        uint8_t plane = 0;
        uint8_t prev_plane = 0;  // plane of the transmission before the latest
        uint8_t retries = 0;     // resends after a timeout or a loss: the retry budget
        uint16_t nacks = 0;
        TxKind kind = TxKind::kFirst;     // of the latest transmission
        TxKind pending = TxKind::kFirst;  // of the resend it is queued for
        bool acked = false;
        bool queued = false;        // in retx_now_ or retx_later_
        bool listed = false;        // on the send-order list
        bool avoid_plane = false;   // resend it off the plane it was lost on
        uint64_t sent_ns = 0;       // when the latest transmission left
        uint64_t prev_sent_ns = 0;  // when the transmission before it left
    };
    static_assert(sizeof(TxSlot) == 64, "one cache line per outstanding PSN");
    struct DelayedRetx {
        uint32_t psn = 0;
        uint64_t due_ns = 0;
    };
    // Per plane: RTTs, and the plane's reference for loss detection: the
    // RTT of the latest-sent packet acknowledged on it.
    struct PlaneTiming {
        PlaneRtt rtt;
        uint64_t rack_rtt_ns = 0;
        uint64_t rack_order = 0;
        bool rack_valid = false;
    };

    TxSlot &slot(Psn p) { return slots_[p.value() & slot_mask_]; }
    // Per-QP queues start this deep and double on demand up to their bound.
    static constexpr uint32_t kInitialEntries = 16;
    void grow_sq();
    void grow_slots();
    bool in_flight(Psn p) const { return distance(snd_una_, p) >= 0 && distance(p, snd_nxt_) > 0; }
    uint32_t window_pkts() const;
    bool can_send_new(uint8_t tx_planes = 0xff) const;
    // Planes a new packet may go to: usable, and with room in their window.
    uint8_t send_mask() const;
    uint8_t retx_mask() const;
    // Planes that may carry anything at all: not denied, link up.
    uint8_t allowed_planes() const;
    bool emit_data(TxPacket &pkt, Psn psn, TxKind kind, uint64_t now_ns, uint8_t tx_planes = 0xff);
    void queue_retx_now(Psn p, TxKind kind);
    void on_sack(const wire::MrcPacket &p, uint64_t now_ns);
    void on_nack(const wire::MrcPacket &p, uint64_t now_ns);
    // Returns true when the ack counts for the latest transmission (it
    // came too late to be for an earlier one).
    bool mark_acked(TxSlot &s, uint64_t now_ns);
    void advance_una(Psn cum, uint64_t now_ns);
    void settle_acked();
    void complete_wrs();
    void fail(WcStatus cause);

    // ---- loss recovery (loss.cc) ----
    void tx_link(Psn p, TxSlot &s);
    void tx_unlink(TxSlot &s);
    void rtt_sample(uint8_t plane, uint64_t rtt_ns, bool for_min);
    // The plane's RTT as this QP knows it: its own samples, or before it
    // has any, those of all the endpoint's QPs to the peer (PeerLink::rtt).
    const PlaneRtt &known_rtt(uint8_t plane) const;
    uint64_t srtt_max_ns() const;
    uint64_t rtt_ref_ns(uint8_t plane) const;
    // The plane's minimum RTT, or the smallest of the others' (UINT64_MAX: none).
    uint64_t min_rtt_ns(uint8_t plane) const;
    uint64_t backed_off_rto_ns(uint8_t plane) const;
    uint64_t rto_deadline_ns() const;
    uint64_t tlp_deadline_ns() const;
    // A transmission of `s` got through (acked, or trimmed and NACKed):
    // what loss detection learns from it.
    void rack_note(TxSlot &s, uint64_t now_ns, uint64_t order_before);
    void detect_losses(uint64_t now_ns);
    void declare_lost(Psn p, TxSlot &s, uint64_t now_ns);
    bool spend_retry(Psn p, TxSlot &s);
    void on_rto(uint64_t now_ns);
    void send_tail_probe(uint64_t now_ns);
    void ack_progress(uint64_t now_ns);
    void heard(uint64_t now_ns) {
        last_heard_ns_ = last_rx_ns_ = now_ns;
        if (link_ != nullptr) link_->heard_ns = now_ns;
    }
    // When the peer host last sent anything, to this QP or another to it.
    uint64_t peer_rx_ns() const {
        return link_ != nullptr ? std::max(last_rx_ns_, link_->heard_ns) : last_rx_ns_;
    }

    // From the peer link's timer: the peer was silent too long; or this QP
    // sends the link's next keepalive.
    void peer_silent();
    void keepalive_due(uint64_t now_ns);

    // ---- responder ----
    struct NackEntry {
        uint32_t psn = 0;
        uint8_t reason = 0;
        uint8_t flags = 0;
        uint16_t ev = 0;
        uint32_t ts = 0;
        uint8_t plane = 0;
    };
    struct ImmEntry {
        uint32_t imm = 0;
        uint32_t msn = 0;
        uint32_t bytes = 0;
    };
    struct ProbeEntry {
        uint32_t id = 0;
        uint16_t ev = 0;
        uint32_t ts = 0;
        uint8_t plane = 0;
        uint8_t flags = 0;  // wire::kProbe*
    };
    void on_data(const wire::MrcPacket &p, uint8_t plane, uint64_t now_ns);
    void on_probe(const wire::MrcPacket &p, uint8_t plane, uint64_t now_ns);
    void on_probe_reply(const wire::MrcPacket &p, uint8_t plane, uint64_t now_ns);
    void queue_nack(const wire::MrcPacket &p, uint8_t plane, wire::NackReason r);
    void advance_epsn();
    void deliver_imms();
    bool rbit(Psn p) const {
        const uint32_t i = p.value() & rwin_mask_;
        return (rcv_bits_[i >> 6] >> (i & 63)) & 1;
    }
    uint64_t sack_bitmap(Psn base) const;
    bool next_unreported(Psn from, Psn *out) const;
    uint32_t rwnd_units() const;

    // ---- multipath ----
    struct PlaneHealth {
        uint8_t down = 0;  // kPlane* reasons; 0: usable
        // Distinct EVs that lost packets sent after the latest packet the
        // plane delivered, and the earliest such send: the plane has failed
        // when enough of them pile up with nothing sent later getting through.
        uint8_t losses = 0;
        uint64_t fail_sent_ns = 0;
        uint64_t ok_sent_ns = 0;  // send time of the latest packet it delivered
        uint8_t probe_ok = 0;     // plane probes answered in a row
        uint8_t probe_lost = 0;   // plane probes lost in a row (backs the next one off)
        uint32_t probe_cursor = 0;
        uint32_t probe_entry = kNoEv;  // EV entry of the outstanding plane probe
        uint64_t next_probe_ns = 0;
    };
    static constexpr uint8_t kPlaneProbed = kPlaneFailed | kPlaneVerify | kPlaneTable;
    static constexpr uint8_t kPlaneUnprobed = kPlaneLink | kPlaneDenied | kPlanePeer;
    // Reasons the peer is told about: everything but what it told us, and
    // the verification that follows.
    static constexpr uint8_t kPlaneAdvertised =
        kPlaneLink | kPlaneTable | kPlaneDenied | kPlaneFailed;
    // The endpoint's link, table or denied masks moved.
    void planes_changed() {
        planes_dirty_ = true;
        if (state_ == QpState::kRtr || state_ == QpState::kRts) became_ready();
    }
    void sync_planes(uint64_t now_ns);
    void set_plane_reason(uint8_t plane, uint8_t reason, bool on, uint64_t now_ns);
    void update_usable(uint64_t now_ns);
    uint8_t advertised_status() const;
    void apply_peer_status(uint8_t status, uint64_t now_ns);
    uint8_t ack_plane(uint8_t trigger_plane) const;
    // What a SACK echoing EV-set entry `entry` says about that EV and its plane.
    void ev_feedback(uint32_t entry, bool ecn, uint32_t rtt_ns, uint64_t now_ns);
    void count_cc(uint8_t verdict);
    // After a CC call on plane p: the path's window follows.
    void cc_moved(uint8_t p) {
        pcc_[p]->window = std::max(pcc_[p]->cc->window_bytes(), pcc_[p]->floor);
    }
    void inflight_add(uint8_t p, uint32_t len) {
        plane_inflight_[p] += len;
        pcc_[p]->inflight += len;
    }
    // Bytes leave flight on p: a QP waiting for room on the path may go.
    void inflight_sub(uint8_t p, uint32_t len);
    // Nothing of this QP's in flight any more (error, reset).
    void drop_inflight();
    void attach_cc(uint8_t planes);
    void release_cc();
    // New data is held back by the path windows alone: wait for room.
    void wait_for_cc();
    // The latest transmission of `s` was lost (found from acks, or a
    // timeout with the peer answering meanwhile): its EV and plane pay.
    // `timeout`: retire the EV at once (no second chance).
    void on_path_loss(TxSlot &s, bool timeout, uint64_t now_ns);
    // Something sent on `plane` at sent_ns got through.
    void plane_delivered(uint8_t plane, uint64_t sent_ns);
    bool wants_plane_probe(uint8_t plane) const;
    bool wants_ev_probe(const EvEntry &e) const;
    uint32_t emit_probes(TxPacket *out, uint32_t max, uint64_t now_ns);
    // The responder's reverse EVs: probes about once per RTT while data
    // arrives, and what their replies and losses say.
    uint32_t emit_reverse_probes(TxPacket *out, uint32_t max, uint64_t now_ns);
    void on_reverse_probe_reply(const wire::MrcPacket &p, uint8_t plane, uint64_t now_ns);
    void expire_reverse_probes(uint64_t now_ns);
    uint64_t reverse_probe_due_ns() const { return reverse_due_ns_; }
    void update_reverse_due();
    struct ReverseTiming {
        uint64_t cadence = 0;  // one RTT while a reverse EV is not GOOD, else a refresh period
        uint64_t spacing = 0;  // between this QP's probes
        uint64_t window = 0;   // probing runs while data arrived within it
    };
    ReverseTiming reverse_timing() const;
    static constexpr uint64_t kReverseRefreshRtts = 16;
    void send_keepalive(TxPacket &t, uint64_t now_ns);
    void send_probe(TxPacket &t, uint32_t entry, uint64_t now_ns);
    void probe_lost(uint32_t entry, uint64_t now_ns);
    void expire_probes(uint64_t now_ns);
    void update_probe_due(uint64_t now_ns);
    uint64_t probe_timeout_ns() const;

    // ---- transmit scheduling ----
    bool has_tx_work(uint64_t now_ns) const;
    uint32_t emit(TxPacket *out, uint32_t max, uint64_t now_ns, uint8_t tx_planes);
    void emit_sack(TxPacket &pkt, uint8_t plane_status);
    void control_packet(TxPacket &t, uint8_t plane, uint16_t hdr_len) const;
    void on_timer(uint64_t now_ns);
    void rearm(uint64_t now_ns);
    void became_ready();

    Endpoint *ep_;
    uint32_t qpn_;
    QpConfig cfg_;  // mtu_payload_bytes: the connection's (to_rtr), at most own_mtu_
    uint32_t own_mtu_;
    QpState state_ = QpState::kReset;
    WcStatus error_cause_ = WcStatus::kSuccess;
    Psn error_psn_;
    uint32_t pd_ = 0;
    QpPeer peer_;
    EvSet evs_;
    PathCc *pcc_[kMaxPlanes] = {};                // the endpoint's (shared) or own_cc_
    std::unique_ptr<PathCc> own_cc_[kMaxPlanes];  // per-QP scope
    uint64_t plane_inflight_[kMaxPlanes] = {};    // this QP's share of pcc_[p]->inflight
    uint8_t cc_wait_ = 0;                         // planes whose PathCc::waiting holds it
    PeerLink *link_ = nullptr;                    // the endpoint's, while connected
    uint32_t link_index_ = UINT32_MAX;            // in link_->members (UINT32_MAX: not in)
    // What the ack being processed acknowledged on each plane (settle_acked).
    struct AckedOnPlane {
        uint32_t bytes = 0;
        uint32_t pkts = 0;
        uint64_t latest_sent_ns = 0;
    };
    AckedOnPlane acked_[kMaxPlanes];
    QpCounters ctr_;

    // multipath
    PlaneHealth plane_[kMaxPlanes];
    uint8_t usable_mask_ = 0;
    uint8_t ep_reasons_seen_[kMaxPlanes] = {};
    bool planes_dirty_ = true;
    std::vector<uint32_t> probes_out_;    // EV entries with a probe awaiting its reply
    uint64_t probe_due_ns_ = UINT64_MAX;  // next probe to send or to give up
    uint64_t probe_window_start_ns_ = 0;
    uint32_t probes_in_window_ = 0;
    uint32_t probe_bad_cursor_ = 0;

    // requester
    std::vector<WrEntry> sq_;
    uint32_t sq_mask_ = 0;
    uint32_t sq_head_ = 0;  // oldest not completed
    uint32_t sq_seg_ = 0;   // next to segment
    uint32_t sq_tail_ = 0;  // next free
    uint32_t next_msn_ = 0;
    std::vector<TxSlot> slots_;
    uint32_t slot_mask_ = 0;
    uint32_t slot_max_ = 0;  // what slots_ may grow to (max_inflight_pkts, a power of two)
    uint32_t sq_max_ = 0;    // what sq_ may grow to (max_send_wr, a power of two)
    Psn snd_una_;
    Psn snd_nxt_;
    uint64_t inflight_bytes_ = 0;
    uint32_t peer_window_pkts_ = 0;
    uint32_t pkts_since_ack_req_ = 0;
    Ring<uint32_t> retx_now_;
    Ring<DelayedRetx> retx_later_;
    Ring<SendCompletion> send_cq_;

    // loss recovery
    uint32_t tx_head_ = kNil;  // send-order list: oldest transmission awaiting its ack
    uint32_t tx_tail_ = kNil;
    uint64_t tx_count_ = 0;  // transmissions so far (TxSlot::tx_order)
    PlaneTiming timing_[kMaxPlanes];
    bool rack_valid_ = false;
    uint64_t rack_order_ = 0;              // the latest-sent transmission known to have arrived
    uint64_t rack_timer_ns_ = UINT64_MAX;  // when a transmission not yet late becomes lost
    uint64_t last_progress_ns_ = 0;        // an ack acknowledged something new (or the RTO fired)
    uint64_t last_data_tx_ns_ = 0;
    uint8_t rto_backoff_ = 0;  // timeouts in a row without progress
    uint8_t rto_charged_ = 0;  // ...of them charged to the retry budget
    bool tail_probe_out_ = false;
    bool retx_blocked_ = false;  // a resend found no EV it may take: wait for the planes

    // liveness
    uint64_t last_heard_ns_ = 0;
    uint64_t last_rx_ns_ =
        0;  // the last packet of the peer's (liveness may restart last_heard_ns_)
    uint64_t keepalive_sent_ns_ = 0;
    bool keepalive_due_ = false;
    bool liveness_pending_ = false;  // in RTS, no time seen since
    uint8_t keepalive_plane_ = 0;

    // reverse EVs (responder)
    uint64_t last_data_rx_ns_ = 0;
    uint64_t reverse_next_ns_ = 0;
    uint64_t reverse_due_ns_ = UINT64_MAX;  // next reverse probe to send or give up
    uint8_t reverse_plane_cursor_ = 0;

    // responder
    uint32_t rwin_pkts_ = 0;
    uint32_t rwin_mask_ = 0;
    std::vector<uint64_t> rcv_bits_;
    std::vector<uint64_t> unrep_bits_;  // arrivals no SACK has reported yet
    std::vector<uint64_t> imm_bits_;
    std::vector<ImmEntry> imm_vals_;
    uint32_t pending_imm_ = 0;
    Psn epsn_;         // every PSN before it has arrived
    Psn deliver_psn_;  // immediates before it have been delivered
    Psn max_seen_;     // one past the highest PSN that arrived
    // Oldest PSN above the cumulative point that arrived but no SACK bitmap
    // has covered yet: acks go out until nothing that arrived is unreported,
    // so a requester never times out a packet that is there.
    Psn unreported_;
    bool has_unreported_ = false;
    bool ack_due_now_ = false;
    bool ack_pending_ = false;
    uint8_t ack_copies_ = 0;  // copies of the last SACK still to send (after a duplicate)
    uint8_t last_sack_plane_ = 0;
    wire::SackFields last_sack_;
    uint64_t ack_deadline_ns_ = 0;
    uint32_t bytes_since_ack_ = 0;
    uint32_t last_adv_rwnd_units_ = 0;
    struct {
        Psn psn;
        uint16_t ev = 0;
        uint32_t ts = 0;
        uint8_t plane = 0;
        uint8_t flags = 0;  // wire::kAck*
    } ack_trigger_;
    Ring<NackEntry> nack_q_;
    Ring<ProbeEntry> probe_q_;
    Ring<RecvCompletion> recv_cq_;

    bool in_ready_ = false;
    bool in_notified_ = false;
};

}  // namespace mrc
