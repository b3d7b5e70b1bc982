// N connected QP pairs between two endpoints over `planes` planes (the
// many-QP benchmarks' set-up): QP i of `a` talks to QP i of `b`.
#pragma once

#include <vector>

#include "core/endpoint.h"
#include "core/loopback.h"

namespace mrc::bench {

// Returns false when a QP refused a transition (the benchmark reports it).
inline bool connect_pairs(Endpoint &a, Endpoint &b, uint32_t n, const QpConfig &cfg, uint8_t planes,
                          std::vector<Qp *> *qa = nullptr, std::vector<Qp *> *qb = nullptr) {
    for (uint32_t i = 0; i < n; ++i) {
        auto x = a.create_qp(cfg);
        auto y = b.create_qp(cfg);
        if (!x || !y) return false;
        QpPeer px, py;
        px.dst_qpn = b.wire_qpn(**y);
        py.dst_qpn = a.wire_qpn(**x);
        px.planes = py.planes = planes;
        for (uint32_t p = 0; p < planes; ++p) {
            px.path[p].src_ip = py.path[p].dst_ip = LoopbackPair::a_ip(p);
            px.path[p].dst_ip = py.path[p].src_ip = LoopbackPair::b_ip(p);
        }
        if (!(*x)->to_init(LoopbackPair::kPd) || !(*y)->to_init(LoopbackPair::kPd) ||
            !(*x)->to_rtr(px, Psn(0)) || !(*y)->to_rtr(py, Psn(0)) || !(*x)->to_rts(Psn(0)) ||
            !(*y)->to_rts(Psn(0)))
            return false;
        if (qa) qa->push_back(*x);
        if (qb) qb->push_back(*y);
    }
    return true;
}

}  // namespace mrc::bench
