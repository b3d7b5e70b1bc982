#include "wire/net.h"

namespace mrc::wire {

uint16_t ipv4_header_checksum(const Ipv4Hdr &ip) {
    const size_t ihl_bytes = size_t(ip.version_ihl & 0x0f) * 4;
    uint64_t sum = csum_add(0, &ip, offsetof(Ipv4Hdr, checksum));
    const auto *after = reinterpret_cast<const uint8_t *>(&ip) + offsetof(Ipv4Hdr, checksum) + 2;
    sum = csum_add(sum, after, ihl_bytes - offsetof(Ipv4Hdr, checksum) - 2);
    return static_cast<uint16_t>(~csum_fold(sum));
}

namespace {

uint64_t pseudo_header_sum(const Ipv4Hdr &ip, size_t udp_bytes) {
    uint8_t ph[12];
    std::memcpy(ph, ip.src.b, 4);
    std::memcpy(ph + 4, ip.dst.b, 4);
    ph[8] = 0;
    ph[9] = kIpProtoUdp;
    ph[10] = static_cast<uint8_t>(udp_bytes >> 8);
    ph[11] = static_cast<uint8_t>(udp_bytes);
    return csum_add(0, ph, sizeof ph);
}

}  // namespace

uint64_t ipv6_udp_pseudo_partial(const Ipv6Hdr &ip, size_t udp_bytes) {
    uint8_t ph[40] = {};
    std::memcpy(ph, ip.src.b, 16);
    std::memcpy(ph + 16, ip.dst.b, 16);
    ph[34] = static_cast<uint8_t>(udp_bytes >> 8);
    ph[35] = static_cast<uint8_t>(udp_bytes);
    ph[39] = kIpProtoUdp;
    return csum_add(0, ph, sizeof ph);
}

namespace {
// A pseudo-header sum continued over the UDP header (its checksum field
// taken as zero) and payload, finished (0 sent as 0xffff).
uint16_t udp_checksum_over(uint64_t sum, const UdpHdr *udp, size_t udp_bytes) {
    const auto *u = reinterpret_cast<const uint8_t *>(udp);
    sum = csum_add(sum, u, offsetof(UdpHdr, checksum));
    sum = csum_add(sum, u + sizeof(UdpHdr), udp_bytes - sizeof(UdpHdr));
    return udp_checksum_finish(sum);
}
}  // namespace

uint16_t ipv6_udp_checksum(const Ipv6Hdr &ip, const UdpHdr *udp, size_t udp_bytes) {
    return udp_checksum_over(ipv6_udp_pseudo_partial(ip, udp_bytes), udp, udp_bytes);
}

uint64_t ipv4_udp_pseudo_partial(const Ipv4Hdr &ip, size_t udp_bytes) {
    return pseudo_header_sum(ip, udp_bytes);
}

uint16_t ipv4_udp_pseudo_sum(const Ipv4Hdr &ip, uint16_t udp_bytes) {
    return csum_fold(pseudo_header_sum(ip, udp_bytes));
}

uint16_t ipv4_udp_checksum(const Ipv4Hdr &ip, const UdpHdr *udp, size_t udp_bytes) {
    return udp_checksum_over(pseudo_header_sum(ip, udp_bytes), udp, udp_bytes);
}

void write_eth_ipv4_udp(uint8_t *frame, const UdpFrameSpec &spec, uint16_t payload_bytes) {
    auto *eth = reinterpret_cast<EthHdr *>(frame);
    eth->dst = spec.dst_mac;
    eth->src = spec.src_mac;
    eth->ether_type.set(kEtherTypeIpv4);

    auto *ip = reinterpret_cast<Ipv4Hdr *>(frame + sizeof(EthHdr));
    ip->version_ihl = 0x45;
    ip->tos = spec.tos;
    ip->total_length.set(static_cast<uint16_t>(sizeof(Ipv4Hdr) + sizeof(UdpHdr) + payload_bytes));
    ip->id.set(spec.ip_id);
    ip->frag.set(kIpv4DontFragment);
    ip->ttl = spec.ttl;
    ip->protocol = kIpProtoUdp;
    ip->src.set(spec.src_ip);
    ip->dst.set(spec.dst_ip);
    ip->checksum.set(0);
    ip->checksum.set(ipv4_header_checksum(*ip));

    auto *udp = reinterpret_cast<UdpHdr *>(frame + sizeof(EthHdr) + sizeof(Ipv4Hdr));
    udp->src_port.set(spec.src_port);
    udp->dst_port.set(spec.dst_port);
    udp->length.set(static_cast<uint16_t>(sizeof(UdpHdr) + payload_bytes));
    udp->checksum.set(0);
}

void write_eth_ipv6_udp(uint8_t *frame, const Udp6FrameSpec &spec, uint16_t payload_bytes) {
    auto *eth = reinterpret_cast<EthHdr *>(frame);
    eth->dst = spec.dst_mac;
    eth->src = spec.src_mac;
    eth->ether_type.set(kEtherTypeIpv6);

    auto *ip = reinterpret_cast<Ipv6Hdr *>(frame + sizeof(EthHdr));
    ipv6_set_vtc_flow(*ip, spec.traffic_class, spec.flow_label);
    ip->payload_length.set(static_cast<uint16_t>(sizeof(UdpHdr) + payload_bytes));
    ip->next_header = kIpProtoUdp;
    ip->hop_limit = spec.hop_limit;
    ip->src = spec.src_ip;
    ip->dst = spec.dst_ip;

    auto *udp = reinterpret_cast<UdpHdr *>(frame + sizeof(EthHdr) + sizeof(Ipv6Hdr));
    udp->src_port.set(spec.src_port);
    udp->dst_port.set(spec.dst_port);
    udp->length.set(static_cast<uint16_t>(sizeof(UdpHdr) + payload_bytes));
    udp->checksum.set(0);
}

void fill_udp_checksum(uint8_t *frame) {
    if (reinterpret_cast<const EthHdr *>(frame)->ether_type.get() == kEtherTypeIpv6) {
        auto *ip6 = reinterpret_cast<Ipv6Hdr *>(frame + sizeof(EthHdr));
        auto *udp = reinterpret_cast<UdpHdr *>(frame + sizeof(EthHdr) + sizeof(Ipv6Hdr));
        udp->checksum.set(0);
        udp->checksum.set(ipv6_udp_checksum(*ip6, udp, udp->length.get()));
        return;
    }
    auto *ip = reinterpret_cast<Ipv4Hdr *>(frame + sizeof(EthHdr));
    auto *udp = reinterpret_cast<UdpHdr *>(frame + sizeof(EthHdr) + sizeof(Ipv4Hdr));
    udp->checksum.set(ipv4_udp_checksum(*ip, udp, udp->length.get()));
}

const char *to_string(NetError e) {
    switch (e) {
        case NetError::kOk:
            return "ok";
        case NetError::kTruncated:
            return "truncated";
        case NetError::kNotIpv4:
            return "not IPv4";
        case NetError::kBadIpHeader:
            return "bad IPv4 header";
        case NetError::kFragment:
            return "IPv4 fragment";
        case NetError::kNotUdp:
            return "not UDP";
        case NetError::kBadUdpLength:
            return "bad UDP length";
        case NetError::kBadIpChecksum:
            return "bad IPv4 checksum";
        case NetError::kBadUdpChecksum:
            return "bad UDP checksum";
        case NetError::kNotIp:
            return "neither IPv4 nor IPv6";
        case NetError::kBadIpv6Header:
            return "bad IPv6 header";
        case NetError::kIpv6ExtRefused:
            return "IPv6 extension header refused";
    }
    return "unknown";
}

NetError parse_eth_ipv4_udp(const uint8_t *frame, size_t len, UdpView *out, Checksums checksums) {
    return parse_eth_ipv4_udp_split(frame, len, len, out, checksums);
}

NetError parse_eth_ipv4_udp_split(const uint8_t *frame, size_t len, size_t total_len, UdpView *out,
                                  Checksums checksums) {
    if (len < sizeof(EthHdr)) return NetError::kTruncated;
    const auto *eth = reinterpret_cast<const EthHdr *>(frame);
    size_t l2 = sizeof(EthHdr);
    uint16_t type = eth->ether_type.get();
    if (type == kEtherTypeVlan) {
        if (len < l2 + sizeof(VlanTag)) return NetError::kTruncated;
        type = reinterpret_cast<const VlanTag *>(frame + l2)->ether_type.get();
        l2 += sizeof(VlanTag);
    }
    if (type != kEtherTypeIpv4) return NetError::kNotIpv4;
    if (len < l2 + sizeof(Ipv4Hdr)) return NetError::kTruncated;
    const auto *ip = reinterpret_cast<const Ipv4Hdr *>(frame + l2);
    if ((ip->version_ihl >> 4) != 4) return NetError::kBadIpHeader;
    const size_t l3 = size_t(ip->version_ihl & 0x0f) * 4;
    const size_t ip_total = ip->total_length.get();
    if (l3 < sizeof(Ipv4Hdr) || ip_total < l3) return NetError::kBadIpHeader;
    if (total_len < l2 + ip_total) return NetError::kTruncated;
    if (ip->frag.get() & (kIpv4MoreFragments | kIpv4FragOffsetMask)) return NetError::kFragment;
    if (ip->protocol != kIpProtoUdp) return NetError::kNotUdp;
    if (ip_total < l3 + sizeof(UdpHdr)) return NetError::kBadUdpLength;
    if (len < l2 + l3 + sizeof(UdpHdr)) return NetError::kTruncated;
    const auto *udp = reinterpret_cast<const UdpHdr *>(frame + l2 + l3);
    const size_t udp_len = udp->length.get();
    if (udp_len != ip_total - l3) return NetError::kBadUdpLength;
    if (checksums == Checksums::kVerify && len >= l2 + ip_total) {
        if (ipv4_header_checksum(*ip) != ip->checksum.get()) return NetError::kBadIpChecksum;
        const uint16_t c = udp->checksum.get();
        if (c != 0 && ipv4_udp_checksum(*ip, udp, udp_len) != c) return NetError::kBadUdpChecksum;
    }
    out->eth = eth;
    out->ip = ip;
    out->ip6 = nullptr;
    out->ext_headers = 0;
    out->udp = udp;
    out->payload = reinterpret_cast<const uint8_t *>(udp) + sizeof(UdpHdr);
    out->payload_bytes = static_cast<uint16_t>(udp_len - sizeof(UdpHdr));
    out->l2_bytes = static_cast<uint16_t>(l2);
    out->l3_bytes = static_cast<uint16_t>(l3);
    return NetError::kOk;
}

namespace {

// IPv6 from its fixed header at frame + l2 to the UDP header: extension
// headers walked past as parse_eth_ip_udp says.
NetError parse_ipv6_udp(const uint8_t *frame, size_t len, size_t total_len, size_t l2, UdpView *out,
                        Checksums checksums) {
    if (len < l2 + sizeof(Ipv6Hdr)) return NetError::kTruncated;
    const auto *ip = reinterpret_cast<const Ipv6Hdr *>(frame + l2);
    if (ipv6_version(*ip) != 6) return NetError::kBadIpv6Header;
    const size_t ip_total = sizeof(Ipv6Hdr) + ip->payload_length.get();
    if (total_len < l2 + ip_total) return NetError::kTruncated;
    size_t l3 = sizeof(Ipv6Hdr);
    uint8_t next = ip->next_header;
    uint8_t ext = 0;
    while (next != kIpProtoUdp) {
        if (next == kIpv6Fragment) return NetError::kFragment;
        if (next != kIpv6HopByHop && next != kIpv6Routing && next != kIpv6DestOpts)
            return ipv6_is_extension(next) ? NetError::kIpv6ExtRefused : NetError::kNotUdp;
        // Hop-by-hop only first (RFC 8200 4.1).
        if (next == kIpv6HopByHop && ext != 0) return NetError::kIpv6ExtRefused;
        if (ext == kIpv6MaxExtHeaders) return NetError::kIpv6ExtRefused;
        // Each: next header, length in 8-byte units not counting the first 8.
        if (len < l2 + l3 + 8) return NetError::kTruncated;
        const size_t bytes = (size_t(frame[l2 + l3 + 1]) + 1) * 8;
        if (l3 + bytes > ip_total) return NetError::kBadIpv6Header;
        next = frame[l2 + l3];
        l3 += bytes;
        ++ext;
    }
    if (ip_total < l3 + sizeof(UdpHdr)) return NetError::kBadUdpLength;
    if (len < l2 + l3 + sizeof(UdpHdr)) return NetError::kTruncated;
    const auto *udp = reinterpret_cast<const UdpHdr *>(frame + l2 + l3);
    const size_t udp_len = udp->length.get();
    if (udp_len != ip_total - l3) return NetError::kBadUdpLength;
    if (checksums == Checksums::kVerify && len >= l2 + ip_total) {
        const uint16_t c = udp->checksum.get();
        if (c == 0 || ipv6_udp_checksum(*ip, udp, udp_len) != c) return NetError::kBadUdpChecksum;
    }
    out->eth = reinterpret_cast<const EthHdr *>(frame);
    out->ip = nullptr;
    out->ip6 = ip;
    out->udp = udp;
    out->payload = reinterpret_cast<const uint8_t *>(udp) + sizeof(UdpHdr);
    out->payload_bytes = static_cast<uint16_t>(udp_len - sizeof(UdpHdr));
    out->l2_bytes = static_cast<uint16_t>(l2);
    out->l3_bytes = static_cast<uint16_t>(l3);
    out->ext_headers = ext;
    return NetError::kOk;
}

}  // namespace

NetError parse_eth_ip_udp(const uint8_t *frame, size_t len, size_t total_len, UdpView *out,
                          Checksums checksums) {
    if (len > total_len) len = total_len;
    if (len < sizeof(EthHdr)) return NetError::kTruncated;
    size_t l2 = sizeof(EthHdr);
    uint16_t type = reinterpret_cast<const EthHdr *>(frame)->ether_type.get();
    if (type == kEtherTypeVlan) {
        if (len < l2 + sizeof(VlanTag)) return NetError::kTruncated;
        type = reinterpret_cast<const VlanTag *>(frame + l2)->ether_type.get();
        l2 += sizeof(VlanTag);
    }
    if (type == kEtherTypeIpv6) return parse_ipv6_udp(frame, len, total_len, l2, out, checksums);
    if (type != kEtherTypeIpv4) return NetError::kNotIp;
    return parse_eth_ipv4_udp_split(frame, len, total_len, out, checksums);
}

bool mark_ce(Ipv6Hdr &ip) {
    const uint8_t tc = ipv6_traffic_class(ip);
    const uint8_t ecn = tc & kEcnMask;
    if (ecn == kEcnNotEct || ecn == kEcnCe) return false;
    ipv6_set_vtc_flow(ip, static_cast<uint8_t>(tc | kEcnCe), ipv6_flow_label(ip));
    return true;
}

bool mark_ce(Ipv4Hdr &ip) {
    const uint8_t ecn = ip.tos & kEcnMask;
    if (ecn == kEcnNotEct || ecn == kEcnCe) return false;
    ip.tos = static_cast<uint8_t>(ip.tos | kEcnCe);
    ip.checksum.set(0);
    ip.checksum.set(ipv4_header_checksum(ip));
    return true;
}

}  // namespace mrc::wire
