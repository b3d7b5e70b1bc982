#include "core/path.h"

#include <algorithm>

namespace mrc {

const char *to_string(PlaneState s) {
    switch (s) {
        case PlaneState::kUp:
            return "UP";
        case PlaneState::kDown:
            return "DOWN";
        case PlaneState::kDenied:
            return "DENIED";
        case PlaneState::kLinkDown:
            return "LINK_DOWN";
    }
    return "?";
}

PathScorer::PathScorer(const ScorerConfig &cfg, uint8_t planes)
    : cfg_(cfg), planes_(std::clamp<uint8_t>(planes, 1, kMaxPlanes)) {}

void PathScorer::publish() {
    ++table_.generation;
}

const PathTable &PathScorer::update(uint64_t /*now_ns*/, const PlaneCounters *c, const EvGauges &g,
                                    uint8_t link_up_mask) {
    uint64_t tx_all = 0;
    for (uint8_t p = 0; p < planes_; ++p)
        tx_all += c[p].tx_data_pkts + c[p].tx_retx_pkts -
                  (have_prev_ ? prev_[p].tx_data_pkts + prev_[p].tx_retx_pkts : 0);
    uint8_t down = table_.down_mask;
    const double w = cfg_.ewma_weight;
    // What each plane got through this period (acked or answered): a plane
    // whose sends get nothing through is failing only while another plane
    // shows the peer alive. A period in which nothing got through anywhere
    // is a stalled or silent peer, not a plane failure.
    uint64_t through[kMaxPlanes] = {}, through_all = 0;
    for (uint8_t p = 0; p < planes_; ++p) {
        const PlaneCounters before = have_prev_ ? prev_[p] : PlaneCounters{};
        through[p] = c[p].acked_pkts - before.acked_pkts + c[p].probes_ok - before.probes_ok;
        through_all += through[p];
    }
    // Planes that can carry traffic at all: link up, not denied.
    const uint8_t all = static_cast<uint8_t>((1u << planes_) - 1);
    const uint8_t available = static_cast<uint8_t>(link_up_mask & ~table_.denied_mask & all);
    for (uint8_t p = 0; p < planes_; ++p) {
        const PlaneCounters &now = c[p];
        const PlaneCounters before = have_prev_ ? prev_[p] : PlaneCounters{};
        auto d = [](uint64_t a, uint64_t b) { return a - b; };
        const uint64_t tx =
            d(now.tx_data_pkts, before.tx_data_pkts) + d(now.tx_retx_pkts, before.tx_retx_pkts);
        const uint64_t acks = d(now.rx_acks, before.rx_acks);
        const uint64_t delivered = d(now.acked_pkts, before.acked_pkts);
        const uint64_t ecn = d(now.rx_ecn_echoes, before.rx_ecn_echoes);
        const uint64_t trims = d(now.rx_trims, before.rx_trims);
        const uint64_t losses = d(now.lost_pkts, before.lost_pkts);
        const uint64_t probes_ok = d(now.probes_ok, before.probes_ok);
        const uint64_t probes_lost = d(now.probes_lost, before.probes_lost);
        const uint64_t probes_sent = d(now.tx_probes, before.tx_probes);
        const uint64_t rtt_n = d(now.rtt_samples, before.rtt_samples);
        const uint64_t rtt_sum = d(now.rtt_sum_ns, before.rtt_sum_ns);

        PlaneScore &s = score_[p];
        auto blend = [w](double &avg, double v) { avg = avg == 0 ? v : (1 - w) * avg + w * v; };
        if (rtt_n) blend(s.rtt_ns, double(rtt_sum) / double(rtt_n));
        if (acks) blend(s.ecn_fraction, double(ecn) / double(acks));
        if (tx) {
            blend(s.trim_fraction, double(trims) / double(tx));
            blend(s.loss_fraction, double(losses) / double(tx));
        }
        if (tx_all) s.tx_share = (1 - w) * s.tx_share + w * double(tx) / double(tx_all);
        s.evs_assumed_bad = g.assumed_bad[p];
        s.evs_denied = g.denied[p];

        const uint8_t bit = static_cast<uint8_t>(1u << p);
        // Losses of this period or the one before (the last packets sent
        // before a failure are still being acked in the period its first
        // losses come in), and now nothing sent or probed gets through,
        // while something does on another plane.
        const bool failing_acks = losses + prev_losses_[p] >= cfg_.down_losses && delivered == 0 &&
                                  probes_ok == 0 && tx + probes_sent > 0 &&
                                  through_all > through[p];
        prev_losses_[p] = losses;
        const bool failing_evs = g.total[p] > 0 && double(g.assumed_bad[p] + g.denied[p]) >=
                                                       cfg_.fail_fraction * double(g.total[p]);
        // Only while another plane is up: the last one the peer can be
        // reached on stays, its EVs alone steer around what is broken in it.
        const bool another_up = (available & ~down & ~bit) != 0;
        if (table_.denied_mask & bit) {
            // The operator's: its EVs count as denied, nothing to judge.
        } else if (!(down & bit)) {
            if ((failing_acks || failing_evs) && another_up) {
                down |= bit;
                ++s.down_events;
            }
        } else if (probes_ok >= cfg_.up_probe_replies && probes_ok > probes_lost && !failing_evs) {
            // Most probes answered: lost ones are EVs of dead paths in a
            // plane that works, which its EV health deals with one by one.
            down &= static_cast<uint8_t>(~bit);
        }
        prev_[p] = now;
    }
    // The other planes went (their links, the operator) while these were
    // down: every plane the peer can still be reached on comes back, or
    // nothing at all could be sent.
    if (available != 0 && (available & ~down) == 0) down &= static_cast<uint8_t>(~available);
    for (uint8_t p = 0; p < planes_; ++p) {
        const uint8_t bit = static_cast<uint8_t>(1u << p);
        PlaneScore &s = score_[p];
        if (table_.denied_mask & bit)
            s.state = PlaneState::kDenied;
        else if (!(link_up_mask & bit))
            s.state = PlaneState::kLinkDown;
        else
            s.state = (down & bit) ? PlaneState::kDown : PlaneState::kUp;
    }
    have_prev_ = true;
    if (down != table_.down_mask) {
        table_.down_mask = down;
        publish();
    }
    return table_;
}

void PathScorer::deny_plane(uint8_t plane, bool deny) {
    if (plane >= planes_) return;
    const uint8_t bit = static_cast<uint8_t>(1u << plane);
    const uint8_t m = deny ? (table_.denied_mask | bit) : (table_.denied_mask & ~bit);
    if (m == table_.denied_mask) return;
    table_.denied_mask = m;
    score_[plane].state = deny ? PlaneState::kDenied : PlaneState::kUp;
    publish();
}

void PathScorer::deny_ev(uint32_t qpn, uint16_t ev, bool deny) {
    auto &v = table_.denied_evs;
    const auto it = std::find(v.begin(), v.end(), EvDenial{qpn, ev});
    if (deny == (it != v.end())) return;
    if (deny)
        v.push_back(EvDenial{qpn, ev});
    else
        v.erase(it);
    publish();
}

}  // namespace mrc
