// Two endpoints with one QP each, connected to each other: the setup that
// protocol tests, benchmarks and fuzz targets share. Plane p addresses are
// 10.p.0.1 (side a) and 10.p.0.2 (side b); both QPs use protection domain
// kPd. Frames still have to be carried from one endpoint to the other by
// the caller: this only does the connection set-up.
#pragma once

#include <memory>

#include "core/endpoint.h"

namespace mrc {

struct LoopbackPair {
    static constexpr uint32_t kPd = 1;
    static uint32_t a_ip(uint32_t plane) { return wire::ipv4(10, uint8_t(plane), 0, 1); }
    static uint32_t b_ip(uint32_t plane) { return wire::ipv4(10, uint8_t(plane), 0, 2); }

    std::unique_ptr<Endpoint> a, b;
    Qp *qa = nullptr;
    Qp *qb = nullptr;

    // a sends from a_start, b from b_start; each expects the other's.
    explicit LoopbackPair(const QpConfig &cfg = {}, uint8_t planes = 2, Psn a_start = Psn(0),
                          Psn b_start = Psn(0), uint32_t a_qpn_base = 0, uint32_t b_qpn_base = 0) {
        EndpointConfig ec;
        ec.planes = planes;
        ec.max_qps = 4;
        ec.qpn_base = a_qpn_base;
        a = std::make_unique<Endpoint>(ec);
        ec.qpn_base = b_qpn_base;
        b = std::make_unique<Endpoint>(ec);
        qa = a->create_qp(cfg).value();
        qb = b->create_qp(cfg).value();
        (void)qa->to_init(kPd);
        (void)qb->to_init(kPd);
        QpPeer pa, pb;
        pa.dst_qpn = b->wire_qpn(*qb);
        pb.dst_qpn = a->wire_qpn(*qa);
        pa.planes = pb.planes = planes;
        for (uint32_t p = 0; p < planes; ++p) {
            pa.path[p].src_ip = pb.path[p].dst_ip = a_ip(p);
            pa.path[p].dst_ip = pb.path[p].src_ip = b_ip(p);
        }
        (void)qa->to_rtr(pa, b_start);
        (void)qb->to_rtr(pb, a_start);
        (void)qa->to_rts(a_start);
        (void)qb->to_rts(b_start);
    }
};

}  // namespace mrc
