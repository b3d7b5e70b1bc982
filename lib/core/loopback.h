// Two endpoints with one QP each, connected to each other: the setup that
// protocol tests, benchmarks and fuzz targets share. Plane p addresses are
// 10.p.0.1 (side a) and 10.p.0.2 (side b); both QPs use protection domain
// kPd. Frames still have to be carried from one endpoint to the other by
// the caller: this only does the connection set-up. With ipv6 the planes
// are IPv6 instead: fd00:0:0:p::1 (a) and fd00:0:0:p::2 (b).
#pragma once

#include <memory>
#include <string>

#include "core/endpoint.h"

namespace mrc {

struct LoopbackPair {
    static constexpr uint32_t kPd = 1;
    static uint32_t a_ip(uint32_t plane) { return wire::ipv4(10, uint8_t(plane), 0, 1); }
    static uint32_t b_ip(uint32_t plane) { return wire::ipv4(10, uint8_t(plane), 0, 2); }
    static wire::Ipv6Addr ip6(uint32_t plane, uint8_t host) {
        return wire::Ipv6Addr{{0xfd, 0, 0, 0, 0, 0, 0, uint8_t(plane), 0, 0, 0, 0, 0, 0, 0, host}};
    }

    std::unique_ptr<Endpoint> a, b;
    Qp *qa = nullptr;
    Qp *qb = nullptr;
    // Empty when both QPs reached RTS; else the first transition refused
    // (a configuration the core does not take).
    std::string setup_error;

    // a sends from a_start, b from b_start; each expects the other's.
    explicit LoopbackPair(const QpConfig &cfg = {}, uint8_t planes = 2, Psn a_start = Psn(0),
                          Psn b_start = Psn(0), uint32_t a_qpn_base = 0, uint32_t b_qpn_base = 0,
                          bool ipv6 = false) {
        EndpointConfig ec;
        ec.planes = planes;
        ec.max_qps = 4;
        ec.qpn_base = a_qpn_base;
        a = std::make_unique<Endpoint>(ec);
        ec.qpn_base = b_qpn_base;
        b = std::make_unique<Endpoint>(ec);
        qa = a->create_qp(cfg).value();
        qb = b->create_qp(cfg).value();
        note(qa->to_init(kPd));
        note(qb->to_init(kPd));
        QpPeer pa, pb;
        pa.dst_qpn = b->wire_qpn(*qb);
        pb.dst_qpn = a->wire_qpn(*qa);
        pa.planes = pb.planes = planes;
        for (uint32_t p = 0; p < planes; ++p) {
            pa.path[p].src_ip = pb.path[p].dst_ip = a_ip(p);
            pa.path[p].dst_ip = pb.path[p].src_ip = b_ip(p);
            if (ipv6) {
                pa.path[p].ipv6 = pb.path[p].ipv6 = true;
                pa.path[p].src_ip6 = pb.path[p].dst_ip6 = ip6(p, 1);
                pa.path[p].dst_ip6 = pb.path[p].src_ip6 = ip6(p, 2);
            }
        }
        note(qa->to_rtr(pa, b_start));
        note(qb->to_rtr(pb, a_start));
        note(qa->to_rts(a_start));
        note(qb->to_rts(b_start));
    }

  private:
    void note(const Result<void> &r) {
        if (!r && setup_error.empty()) setup_error = r.error().message;
    }
};

}  // namespace mrc
