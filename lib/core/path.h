// Path scoring: what the control thread does with the per-plane counters
// and EV gauges the workers keep, and the table it publishes for them.
//
// The worker reacts to every ack on its own (an EV that times out is
// retired at once, a plane whose EVs time out one after the other is left
// within one ack timeout: core/qp.h). The scorer adds what one QP cannot
// see: evidence summed over every QP of the endpoint, so QPs that have not
// yet sent on a dead plane never do, and the operator's denials. It runs
// once per period on snapshots (no packets, no locks); its table is
// applied by Endpoint::apply_path_table on the worker's own thread.
//
// Plane verdicts. Rows: the plane's state in the table; columns: what one
// period's counters say.
//
// clang-format off
//   state  | >= down_losses losses in two     | >= fail_fraction of | >= up_probe_replies  | operator | operator
//          | periods, then packets or probes  | its EVs ASSUMED_BAD | probe replies, more  | deny     | allow
//          | sent and nothing acked/answered, | or DENIED           | than probes lost,    |          |
//          | while another plane got through  |                     | EVs not failing      |          |
//   -------+----------------------------------+---------------------+----------------------+----------+-----------------
//   UP     | DOWN                             | DOWN                | UP                   | DENIED   | -
//   DOWN   | DOWN                             | DOWN                | UP                   | DENIED   | -
//   DENIED | DENIED                           | DENIED              | DENIED               | DENIED   | UP (QPs probe it first)
// clang-format on
//
// DOWN only while another plane is up (link up, not denied, not DOWN):
// the last plane to the peer stays, and its EVs steer around its dead
// paths. When the planes that were up go (links, the operator), every DOWN
// plane comes back UP at once.
//
// Losses are packets found lost from acks or by a timeout (PlaneCounters
// lost_pkts). A period in which no plane got anything through is a
// stalled or silent peer: it takes no plane down.
//
// A denied plane's EVs all count as DENIED in the gauges; the scorer does
// not judge a plane while it is denied.
//
// A plane whose link is down is left by the endpoint itself; the scorer
// reports it (state LINK_DOWN) but does not need to publish it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/counters.h"
#include "core/ev.h"

namespace mrc {

enum class PlaneState : uint8_t { kUp, kDown, kDenied, kLinkDown };
const char *to_string(PlaneState s);

struct EvDenial {
    uint32_t qpn = 0;  // as on the wire (Endpoint::wire_qpn)
    uint16_t ev = 0;
    friend bool operator==(const EvDenial &, const EvDenial &) = default;
};

// What the workers apply. Plain data: the dataplane publishes it by
// pointer swap, the simulator hands it over directly.
struct PathTable {
    uint64_t generation = 0;
    uint8_t down_mask = 0;    // planes the scorer found failed
    uint8_t denied_mask = 0;  // planes the operator denied
    std::vector<EvDenial> denied_evs;
};

struct ScorerConfig {
    uint64_t period_ns = 50'000;  // how often the control thread scores
    uint32_t down_losses = 3;
    double fail_fraction = 0.75;
    uint32_t up_probe_replies = 3;
    double ewma_weight = 0.25;  // of the latest period in the reported averages
};

// One plane's aggregates, for operators and reports (EWMA over periods).
struct PlaneScore {
    PlaneState state = PlaneState::kUp;
    double rtt_ns = 0;         // mean RTT of acks echoing its EVs
    double ecn_fraction = 0;   // acks with an ECN echo / acks
    double trim_fraction = 0;  // trim NACKs / data packets sent
    double loss_fraction = 0;  // packets found lost / data packets sent
    double tx_share = 0;       // its data packets / all data packets sent
    int32_t evs_assumed_bad = 0;
    int32_t evs_denied = 0;
    uint32_t down_events = 0;  // times the scorer took it down
};

class PathScorer {
  public:
    PathScorer(const ScorerConfig &cfg, uint8_t planes);

    // One period: the cumulative counters and gauges of the endpoint (or
    // the sum over a process's endpoints) and the links that are up.
    // Returns the table, whose generation moves when a verdict changed.
    const PathTable &update(uint64_t now_ns, const PlaneCounters *planes, const EvGauges &gauges,
                            uint8_t link_up_mask);

    // The operator (mrcctl). Takes effect in the table at once.
    void deny_plane(uint8_t plane, bool deny);
    void deny_ev(uint32_t qpn, uint16_t ev, bool deny);

    const PathTable &table() const { return table_; }
    const PlaneScore &score(uint8_t plane) const { return score_[plane]; }
    uint8_t planes() const { return planes_; }

  private:
    void publish();

    ScorerConfig cfg_;
    uint8_t planes_;
    bool have_prev_ = false;
    PlaneCounters prev_[kMaxPlanes];
    uint64_t prev_losses_[kMaxPlanes] = {};  // in the period before the last
    PlaneScore score_[kMaxPlanes];
    PathTable table_;
};

}  // namespace mrc
