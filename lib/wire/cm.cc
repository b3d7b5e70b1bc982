#include "wire/cm.h"

#include <cstring>

namespace mrc::wire {

const char *to_string(CmOp op) {
    switch (op) {
        case CmOp::kConnect:
            return "CONNECT";
        case CmOp::kAccept:
            return "ACCEPT";
        case CmOp::kReject:
            return "REJECT";
        case CmOp::kDisconnect:
            return "DISCONNECT";
    }
    return "?";
}

const char *to_string(CmReject r) {
    switch (r) {
        case CmReject::kNone:
            return "none";
        case CmReject::kNoListener:
            return "no listener on that service";
        case CmReject::kNoResources:
            return "the peer daemon is out of resources";
        case CmReject::kBadRequest:
            return "the peer daemon found the request unusable";
    }
    return "unknown reason";
}

const char *to_string(CmError e) {
    switch (e) {
        case CmError::kOk:
            return "ok";
        case CmError::kNet:
            return "malformed Ethernet/IPv4/UDP";
        case CmError::kNotMrc:
            return "not to the MRC port";
        case CmError::kNotCm:
            return "not a connection-management frame";
        case CmError::kTruncated:
            return "truncated";
        case CmError::kBadVersion:
            return "unknown MRC version";
        case CmError::kBadFields:
            return "fields out of range";
    }
    return "?";
}

uint16_t write_cm(uint8_t *buf, const MrcAddr &a, uint16_t ev, const CmFields &f) {
    UdpFrameSpec s;
    s.src_mac = a.src_mac;
    s.dst_mac = a.dst_mac;
    s.src_ip = a.src_ip;
    s.dst_ip = a.dst_ip;
    s.src_port = ev;
    s.dst_port = a.dst_port;
    s.tos = static_cast<uint8_t>(a.dscp << 2);  // not ECN-capable: CM is not congestion-controlled
    write_eth_ipv4_udp(buf, s, static_cast<uint16_t>(sizeof(BaseHdr) + sizeof(CmHdr)));
    auto *b = reinterpret_cast<BaseHdr *>(buf + kEthIpv4UdpBytes);
    std::memset(b, 0, sizeof(BaseHdr) + sizeof(CmHdr));
    b->opcode = static_cast<uint8_t>(f.op);
    b->version = kMrcVersion;
    auto *c = reinterpret_cast<CmHdr *>(b + 1);
    c->conn_id.set(f.conn_id);
    c->service.set(f.service);
    c->src_qpn.set(f.src_qpn & kQpnMask);
    c->dst_qpn.set(f.dst_qpn & kQpnMask);
    c->psn.set(f.psn & kQpnMask);
    c->planes = f.planes > kCmMaxPlanes ? kCmMaxPlanes : f.planes;
    c->reason = static_cast<uint8_t>(f.reason);
    if (f.op == CmOp::kConnect || f.op == CmOp::kAccept) c->mtu_payload.set(f.mtu_payload);
    for (uint8_t p = 0; p < c->planes; ++p) {
        c->addr[p].mac = f.mac[p];
        c->addr[p].ip.set(f.ip[p]);
    }
    return static_cast<uint16_t>(kCmBytes);
}

CmError parse_cm(const uint8_t *frame, uint32_t len, uint16_t mrc_port, CmFields *out,
                 MacAddr *from_mac, uint32_t *from_ip) {
    UdpView v;
    if (parse_eth_ipv4_udp(frame, len, &v) != NetError::kOk) return CmError::kNet;
    if (v.udp->dst_port.get() != mrc_port) return CmError::kNotMrc;
    if (v.payload_bytes < sizeof(BaseHdr)) return CmError::kTruncated;
    const auto *b = reinterpret_cast<const BaseHdr *>(v.payload);
    if (!is_cm(v.payload) || b->dst_qpn.get() != 0) return CmError::kNotCm;
    if (b->version != kMrcVersion) return CmError::kBadVersion;
    if (v.payload_bytes < sizeof(BaseHdr) + sizeof(CmHdr)) return CmError::kTruncated;
    CmHdr c;
    std::memcpy(&c, b + 1, sizeof c);
    const auto op = static_cast<CmOp>(b->opcode);
    if (c.planes > kCmMaxPlanes || b->flags != 0) return CmError::kBadFields;
    const bool says_mtu = op == CmOp::kConnect || op == CmOp::kAccept;
    if (!says_mtu && c.mtu_payload.get() != 0) return CmError::kBadFields;
    if ((op == CmOp::kConnect || op == CmOp::kAccept) &&
        (c.planes == 0 || c.src_qpn.get() == 0 || c.src_qpn.get() > kQpnMask ||
         c.psn.get() > kQpnMask))
        return CmError::kBadFields;
    if (op == CmOp::kAccept && c.dst_qpn.get() == 0) return CmError::kBadFields;
    if (op == CmOp::kDisconnect && c.dst_qpn.get() == 0) return CmError::kBadFields;
    if (op == CmOp::kReject && c.reason == 0) return CmError::kBadFields;
    *out = CmFields{};
    out->op = op;
    out->conn_id = c.conn_id.get();
    out->service = c.service.get();
    out->src_qpn = c.src_qpn.get();
    out->dst_qpn = c.dst_qpn.get();
    out->psn = c.psn.get();
    out->planes = c.planes;
    out->reason = static_cast<CmReject>(c.reason);
    out->mtu_payload = c.mtu_payload.get();
    for (uint8_t p = 0; p < c.planes; ++p) {
        out->mac[p] = c.addr[p].mac;
        out->ip[p] = c.addr[p].ip.get();
    }
    if (from_mac != nullptr) *from_mac = v.eth->src;
    if (from_ip != nullptr) *from_ip = v.ip->src.get();
    return CmError::kOk;
}

}  // namespace mrc::wire
