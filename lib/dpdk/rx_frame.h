// The workers' first look at a received frame: where its MRC header is,
// whose QP it is for, and its checksums when the device did not check
// them. Header-only: these run for every frame, inlined into the RX loop.
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>

#include <netinet/in.h>

#include <cstdint>

#include "wire/mrc.h"
#include "wire/net.h"

namespace mrc::dp {

// Where the UDP payload of an untagged or single-tagged Ethernet/IPv4/UDP
// or Ethernet/IPv6/UDP frame to `mrc_port` starts, or 0 when the frame is
// something else. An IPv6 header followed by extension headers takes the
// wire parser's walk (which refuses the ones MRC does not take). The core
// validates everything again; this only finds the owner's QPN and drops
// strangers early.
inline uint32_t mrc_payload_offset(const uint8_t *f, uint32_t len, uint16_t mrc_port) {
    uint32_t off = 12;
    if (len < 14 + 20 + 8 + sizeof(wire::BaseHdr)) return 0;
    uint16_t type = uint16_t(f[off] << 8 | f[off + 1]);
    off += 2;
    if (type == RTE_ETHER_TYPE_VLAN) {
        type = uint16_t(f[off + 2] << 8 | f[off + 3]);
        off += 4;
    }
    if (type == RTE_ETHER_TYPE_IPV4) {
        const uint8_t vihl = f[off];
        const uint32_t ihl = (vihl & 0x0f) * 4u;
        if ((vihl >> 4) != 4 || ihl < 20 || f[off + 9] != IPPROTO_UDP) return 0;
        off += ihl;
    } else if (type == RTE_ETHER_TYPE_IPV6) {
        if (off + sizeof(wire::Ipv6Hdr) > len || (f[off] >> 4) != 6) return 0;
        if (f[off + 6] != IPPROTO_UDP) {
            wire::UdpView v;
            if (wire::parse_eth_ip_udp(f, len, len, &v) != wire::NetError::kOk ||
                v.udp->dst_port.get() != mrc_port || v.payload_bytes < sizeof(wire::BaseHdr))
                return 0;
            return uint32_t(v.payload - f);
        }
        off += sizeof(wire::Ipv6Hdr);
    } else {
        return 0;
    }
    if (off + 8 + sizeof(wire::BaseHdr) > len) return 0;
    if (uint16_t(f[off + 2] << 8 | f[off + 3]) != mrc_port) return 0;
    return off + 8;
}

// The MRC header's offset in a single-segment frame (0: not MRC; a
// multi-segment frame is counted and skipped by the caller).
inline uint32_t payload_offset(const rte_mbuf *m, uint16_t mrc_port) {
    if (m->nb_segs != 1) return 0;
    return mrc_payload_offset(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, mrc_port);
}

// The destination QPN of a frame whose MRC header starts at `off` (checked
// to be in the frame by mrc_payload_offset).
inline uint32_t frame_qpn(const uint8_t *f, uint32_t off) {
    return uint32_t(f[off + 5]) << 16 | uint32_t(f[off + 6]) << 8 | f[off + 7];
}

// Software checksum check of a received MRC frame: the IPv4 header's, and
// the UDP checksum over the pseudo header of either family. Over IPv4 a zero
// UDP checksum means none was sent; over IPv6 it is wrong (RFC 8200 8.1)
// unless this dataplane runs without UDP checksums (udp_checksum false).
inline bool rx_cksum_ok(const uint8_t *l3, bool v6, const uint8_t *udp, uint32_t udp_len,
                        bool udp_checksum) {
    uint64_t pseudo;
    if (v6) {
        pseudo =
            wire::ipv6_udp_pseudo_partial(*reinterpret_cast<const wire::Ipv6Hdr *>(l3), udp_len);
    } else {
        const auto *ip = reinterpret_cast<const wire::Ipv4Hdr *>(l3);
        if (wire::csum_fold(wire::csum_add(0, ip, (l3[0] & 0x0f) * 4u)) != 0xffff) return false;
        if ((udp[6] | udp[7]) == 0) return true;
        pseudo = wire::ipv4_udp_pseudo_partial(*ip, udp_len);
    }
    if (!udp_checksum) return true;
    return wire::csum_fold(wire::csum_add(pseudo, udp, udp_len)) == 0xffff;
}

}  // namespace mrc::dp
