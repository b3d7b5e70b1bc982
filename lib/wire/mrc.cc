#include "wire/mrc.h"

namespace mrc::wire {

namespace {

// Ethernet + IP + UDP for an MRC packet of `mrc_bytes` after UDP; returns
// where the MRC headers start.
uint32_t write_l2_l4(uint8_t *buf, const MrcAddr &a, uint16_t ev, uint32_t mrc_bytes,
                     uint8_t dscp) {
    if (a.ipv6) {
        Udp6FrameSpec s;
        s.src_mac = a.src_mac;
        s.dst_mac = a.dst_mac;
        s.src_ip = a.src_ip6;
        s.dst_ip = a.dst_ip6;
        s.src_port = ev;
        s.dst_port = a.dst_port;
        s.traffic_class = static_cast<uint8_t>((dscp << 2) | kEcnEct0);
        s.flow_label = flow_label_of_ev(ev);
        write_eth_ipv6_udp(buf, s, static_cast<uint16_t>(mrc_bytes));
        return kEthIpv6UdpBytes;
    }
    UdpFrameSpec s;
    s.src_mac = a.src_mac;
    s.dst_mac = a.dst_mac;
    s.src_ip = a.src_ip;
    s.dst_ip = a.dst_ip;
    s.src_port = ev;
    s.dst_port = a.dst_port;
    s.tos = static_cast<uint8_t>((dscp << 2) | kEcnEct0);
    write_eth_ipv4_udp(buf, s, static_cast<uint16_t>(mrc_bytes));
    return kEthIpv4UdpBytes;
}

// `buf` points at the MRC headers here.
BaseHdr *write_base(uint8_t *buf, Opcode op, uint8_t flags, uint32_t dst_qpn, Psn psn) {
    auto *b = reinterpret_cast<BaseHdr *>(buf);
    b->opcode = static_cast<uint8_t>(op);
    b->flags = flags;
    b->version = kMrcVersion;
    b->reserved0 = 0;
    b->reserved1 = 0;
    b->dst_qpn.set(dst_qpn & kQpnMask);
    b->reserved2 = 0;
    b->psn.set(psn.value());
    return b;
}

}  // namespace

bool nack_reason_known(uint8_t r) {
    switch (static_cast<NackReason>(r)) {
        case NackReason::kTrimmed:
        case NackReason::kTrimmedLastHop:
        case NackReason::kNoResource:
        case NackReason::kPsnOutOfWindow:
        case NackReason::kUnexpected:
        case NackReason::kRemoteAccess:
            return true;
    }
    return false;
}

const char *to_string(NackReason r) {
    switch (r) {
        case NackReason::kTrimmed:
            return "TRIMMED";
        case NackReason::kTrimmedLastHop:
            return "TRIMMED_LAST_HOP";
        case NackReason::kNoResource:
            return "NO_RESOURCE";
        case NackReason::kPsnOutOfWindow:
            return "PSN_OUT_OF_WINDOW";
        case NackReason::kUnexpected:
            return "UNEXPECTED";
        case NackReason::kRemoteAccess:
            return "REMOTE_ACCESS";
    }
    return "unknown";
}

uint16_t write_data(uint8_t *buf, const MrcAddr &a, uint16_t ev, const DataFields &f,
                    uint32_t payload_bytes) {
    const bool with_imm = f.opcode == Opcode::kWriteImm && (f.flags & kFlagLast);
    const uint32_t mrc =
        static_cast<uint32_t>((with_imm ? kDataImmHdrBytes : kDataHdrBytes) - kEthIpv4UdpBytes);
    const uint32_t off = write_l2_l4(buf, a, ev, mrc + payload_bytes, a.dscp);
    write_base(buf + off, f.opcode, f.flags, f.dst_qpn, f.psn);
    auto *d = reinterpret_cast<DataHdr *>(buf + off + sizeof(BaseHdr));
    d->msn.set(f.msn);
    d->msg_offset.set(f.msg_offset);
    d->tx_ts.set(f.tx_ts);
    auto *r = reinterpret_cast<Reth *>(d + 1);
    r->remote_addr.set(f.remote_addr);
    r->rkey.set(f.rkey);
    r->length.set(payload_bytes);
    if (with_imm) {
        auto *im = reinterpret_cast<ImmHdr *>(r + 1);
        im->imm.set(f.imm);
        im->msg_bytes.set(f.msg_bytes);
    }
    return static_cast<uint16_t>(off + mrc);
}

uint16_t write_sack(uint8_t *buf, const MrcAddr &a, uint16_t ev, const SackFields &f) {
    constexpr uint32_t mrc = kSackBytes - kEthIpv4UdpBytes;
    const uint32_t off = write_l2_l4(buf, a, ev, mrc, a.dscp_control);
    write_base(buf + off, Opcode::kSack, 0, f.dst_qpn, f.cum_psn);
    auto *s = reinterpret_cast<SackHdr *>(buf + off + sizeof(BaseHdr));
    s->reserved0 = 0;
    s->trigger_psn.set(f.trigger_psn.value());
    s->sack_offset.set(f.sack_offset);
    s->ev_echo.set(f.ev_echo);
    s->bitmap.set(f.bitmap);
    s->ts_echo.set(f.ts_echo);
    s->rwnd_units.set(f.rwnd_units);
    s->flags = f.flags;
    s->plane_status = f.plane_status;
    return static_cast<uint16_t>(off + mrc);
}

uint16_t write_nack(uint8_t *buf, const MrcAddr &a, uint16_t ev, const NackFields &f) {
    constexpr uint32_t mrc = kNackBytes - kEthIpv4UdpBytes;
    const uint32_t off = write_l2_l4(buf, a, ev, mrc, a.dscp_control);
    write_base(buf + off, Opcode::kNack, 0, f.dst_qpn, f.psn);
    auto *n = reinterpret_cast<NackHdr *>(buf + off + sizeof(BaseHdr));
    n->reason = static_cast<uint8_t>(f.reason);
    n->flags = f.flags;
    n->ev_echo.set(f.ev_echo);
    n->reserved0 = 0;
    n->cum_psn.set(f.cum_psn.value());
    n->ts_echo.set(f.ts_echo);
    n->rwnd_units.set(f.rwnd_units);
    n->reserved1 = 0;
    n->plane_status = f.plane_status;
    return static_cast<uint16_t>(off + mrc);
}

uint16_t write_probe(uint8_t *buf, const MrcAddr &a, uint16_t ev, const ProbeFields &f) {
    constexpr uint32_t mrc = kProbeBytes - kEthIpv4UdpBytes;
    const uint32_t off = write_l2_l4(buf, a, ev, mrc, a.dscp_control);
    write_base(buf + off, f.reply ? Opcode::kProbeReply : Opcode::kProbe, 0, f.dst_qpn, Psn(0));
    auto *p = reinterpret_cast<ProbeHdr *>(buf + off + sizeof(BaseHdr));
    p->probe_id.set(f.probe_id);
    p->ev.set(f.ev);
    p->flags = f.flags;
    p->plane_status = f.plane_status;
    p->ts.set(f.ts);
    return static_cast<uint16_t>(off + mrc);
}

namespace {

// Marks the headers of a parsed data packet trimmed and makes its IP and UDP
// lengths describe the headers alone.
uint32_t trim_parsed(const MrcPacket &p, bool last_hop) {
    auto *base = const_cast<BaseHdr *>(p.base);
    base->flags =
        static_cast<uint8_t>(base->flags | kFlagTrimmed | (last_hop ? kFlagTrimLastHop : 0));
    const uint32_t new_len = p.hdr_bytes;  // every header, no payload
    auto *udp = const_cast<UdpHdr *>(p.udp.udp);
    const uint32_t l4 = new_len - p.udp.l2_bytes - p.udp.l3_bytes;
    if (p.udp.ip6 != nullptr) {
        // The payload length counts extension headers too (l3 past the
        // fixed header). UDP over IPv6 must carry a checksum: it is
        // computed here over the headers that are left.
        auto *ip6 = const_cast<Ipv6Hdr *>(p.udp.ip6);
        ip6->payload_length.set(static_cast<uint16_t>(p.udp.l3_bytes - sizeof(Ipv6Hdr) + l4));
        udp->length.set(static_cast<uint16_t>(l4));
        udp->checksum.set(0);
        udp->checksum.set(ipv6_udp_checksum(*ip6, udp, l4));
        return new_len;
    } else {
        auto *ip = const_cast<Ipv4Hdr *>(p.udp.ip);
        ip->total_length.set(static_cast<uint16_t>(p.udp.l3_bytes + l4));
        ip->checksum.set(0);
        ip->checksum.set(ipv4_header_checksum(*ip));
    }
    udp->length.set(static_cast<uint16_t>(l4));
    udp->checksum.set(0);
    return new_len;
}

}  // namespace

uint32_t trim_data_packet(uint8_t *frame, uint32_t len, bool last_hop) {
    MrcPacket p;
    if (parse_mrc(frame, len, nullptr, 0, 0, &p) != MrcError::kOk || !p.is_data()) return 0;
    return trim_parsed(p, last_hop);
}

uint32_t trim_data_headers(uint8_t *hdr, uint32_t hdr_len, uint32_t payload_len, bool last_hop) {
    MrcPacket p;
    // The parser only checks the payload's length, never reads it: any
    // non-null tail pointer does.
    const uint8_t *tail = payload_len ? hdr : nullptr;
    if (parse_mrc(hdr, hdr_len, tail, payload_len, 0, &p) != MrcError::kOk || !p.is_data())
        return 0;
    return trim_parsed(p, last_hop);
}

const char *to_string(MrcError e) {
    switch (e) {
        case MrcError::kOk:
            return "ok";
        case MrcError::kNet:
            return "bad Ethernet/IP/UDP";
        case MrcError::kNotMrc:
            return "not MRC";
        case MrcError::kTruncated:
            return "truncated MRC header";
        case MrcError::kBadVersion:
            return "bad MRC version";
        case MrcError::kBadOpcode:
            return "bad opcode";
        case MrcError::kBadFlags:
            return "bad flags";
        case MrcError::kReservedNonZero:
            return "reserved field not zero";
        case MrcError::kBadLength:
            return "bad payload length";
        case MrcError::kBadQpn:
            return "bad QPN";
        case MrcError::kBadNackReason:
            return "unknown NACK reason";
    }
    return "unknown";
}

MrcError parse_mrc(const uint8_t *head, uint32_t head_len, const uint8_t *tail, uint32_t tail_len,
                   uint16_t mrc_port, MrcPacket *out, Checksums checksums) {
    if (tail == nullptr) tail_len = 0;
    const size_t total = size_t{head_len} + tail_len;
    out->net_error = parse_eth_ip_udp(head, head_len, total, &out->udp, checksums);
    if (out->net_error != NetError::kOk) return MrcError::kNet;
    const UdpView &u = out->udp;
    // mrc_port 0: any port (for tools that already know the frame is MRC).
    if (mrc_port != 0 && u.udp->dst_port.get() != mrc_port) return MrcError::kNotMrc;
    const uint32_t l4_off = u.l2_bytes + u.l3_bytes + sizeof(UdpHdr);
    const uint32_t mrc_bytes = u.payload_bytes;  // everything after UDP
    const uint32_t in_head = head_len > l4_off ? head_len - l4_off : 0;
    const uint32_t avail =
        in_head < mrc_bytes ? in_head : mrc_bytes;  // header bytes readable in head
    const uint8_t *m = head + l4_off;
    if (avail < sizeof(BaseHdr)) return MrcError::kTruncated;
    const auto *b = reinterpret_cast<const BaseHdr *>(m);
    if (b->version != kMrcVersion) return MrcError::kBadVersion;
    if (b->reserved0 | b->reserved1 | b->reserved2) return MrcError::kReservedNonZero;
    out->base = b;
    out->opcode = static_cast<Opcode>(b->opcode);
    out->flags = b->flags;
    out->dst_qpn = b->dst_qpn.get();
    out->psn = Psn(b->psn.get());
    out->ev = u.udp->src_port.get();
    const uint8_t tos = u.ip6 != nullptr ? ipv6_traffic_class(*u.ip6) : u.ip->tos;
    out->ecn_ce = (tos & kEcnMask) == kEcnCe;
    out->data = nullptr;
    out->reth = nullptr;
    out->imm = nullptr;
    out->sack = nullptr;
    out->nack = nullptr;
    out->probe = nullptr;
    out->payload = nullptr;
    out->payload_bytes = 0;
    if (out->dst_qpn == 0) return MrcError::kBadQpn;
    if (b->flags & ~kFlagsDefined) return MrcError::kBadFlags;

    uint32_t need = sizeof(BaseHdr);
    switch (out->opcode) {
        case Opcode::kWrite:
        case Opcode::kWriteImm: {
            need += sizeof(DataHdr) + sizeof(Reth);
            const bool imm = out->opcode == Opcode::kWriteImm && (b->flags & kFlagLast);
            if (imm) need += sizeof(ImmHdr);
            if (avail < need) return MrcError::kTruncated;
            if ((b->flags & kFlagTrimLastHop) && !(b->flags & kFlagTrimmed))
                return MrcError::kBadFlags;
            out->data = reinterpret_cast<const DataHdr *>(m + sizeof(BaseHdr));
            out->reth = reinterpret_cast<const Reth *>(out->data + 1);
            if (imm) out->imm = reinterpret_cast<const ImmHdr *>(out->reth + 1);
            const uint32_t payload = mrc_bytes - need;
            const uint32_t reth_len = out->reth->length.get();
            if (b->flags & kFlagTrimmed) {
                // A trimmed packet keeps its headers and loses its payload.
                if (payload != 0) return MrcError::kBadLength;
            } else {
                if (payload != reth_len || payload == 0) return MrcError::kBadLength;
                out->payload_bytes = payload;
                // The payload is in the head after the headers, or all of it in the tail.
                if (in_head >= need + payload) {
                    out->payload = m + need;
                } else if (in_head == need && tail_len == payload) {
                    out->payload = tail;
                } else {
                    return MrcError::kTruncated;
                }
            }
            break;
        }
        case Opcode::kSack:
            need += sizeof(SackHdr);
            if (avail < need) return MrcError::kTruncated;
            if (b->flags != 0) return MrcError::kBadFlags;
            out->sack = reinterpret_cast<const SackHdr *>(m + sizeof(BaseHdr));
            if (out->sack->reserved0) return MrcError::kReservedNonZero;
            if (out->sack->flags & ~kAckFlagsDefined) return MrcError::kBadFlags;
            break;
        case Opcode::kNack:
            need += sizeof(NackHdr);
            if (avail < need) return MrcError::kTruncated;
            if (b->flags != 0) return MrcError::kBadFlags;
            out->nack = reinterpret_cast<const NackHdr *>(m + sizeof(BaseHdr));
            if (out->nack->reserved0 | out->nack->reserved1) return MrcError::kReservedNonZero;
            if (!nack_reason_known(out->nack->reason)) return MrcError::kBadNackReason;
            if (out->nack->flags & ~kAckEcnEcho) return MrcError::kBadFlags;
            break;
        case Opcode::kProbe:
        case Opcode::kProbeReply:
            need += sizeof(ProbeHdr);
            if (avail < need) return MrcError::kTruncated;
            if (b->flags != 0) return MrcError::kBadFlags;
            out->probe = reinterpret_cast<const ProbeHdr *>(m + sizeof(BaseHdr));
            if (out->probe->flags & ~kProbeFlagsDefined) return MrcError::kBadFlags;
            break;
        default:
            return MrcError::kBadOpcode;
    }
    // Control packets carry nothing after their header.
    if (!out->is_data() && mrc_bytes != need) return MrcError::kBadLength;
    out->hdr_bytes = l4_off + need;
    return MrcError::kOk;
}

}  // namespace mrc::wire
