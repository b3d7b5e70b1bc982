#include "wire/host.h"

#include <cstring>

namespace mrc::wire {

namespace {

constexpr MacAddr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

HostAnswer on_arp(const uint8_t *frame, uint32_t len, const MacAddr &mac, uint32_t ip, uint8_t *out,
                  uint32_t cap, uint32_t *out_len, ArpFrom *from) {
    if (len < sizeof(EthHdr) + sizeof(ArpHdr)) return HostAnswer::kMalformed;
    ArpHdr a;
    std::memcpy(&a, frame + sizeof(EthHdr), sizeof a);
    if (a.htype.get() != 1 || a.ptype.get() != kEtherTypeIpv4 || a.hlen != 6 || a.plen != 4)
        return HostAnswer::kNone;  // another hardware or protocol: not ours to judge
    const uint16_t op = a.oper.get();
    if (op != kArpOpRequest && op != kArpOpReply) return HostAnswer::kMalformed;
    const uint32_t spa = a.spa.get();
    // A sender claiming this host's address, or no address at all (an
    // address probe, RFC 5227), or a multicast/broadcast MAC: nothing to learn.
    const bool learnable = spa != 0 && spa != ip && !(a.sha.b[0] & 1);
    if (learnable) {
        from->ip = spa;
        from->mac = a.sha;
        from->reply = op == kArpOpReply;
    }
    if (op != kArpOpRequest || a.tpa.get() != ip || ip == 0)
        return learnable ? HostAnswer::kArpLearned : HostAnswer::kNone;
    if (cap < kArpFrameBytes) return HostAnswer::kNone;
    std::memset(out, 0, kArpFrameBytes);
    auto *eth = reinterpret_cast<EthHdr *>(out);
    eth->dst = a.sha;
    eth->src = mac;
    eth->ether_type.set(kEtherTypeArp);
    ArpHdr r = a;
    r.oper.set(kArpOpReply);
    r.sha = mac;
    r.spa.set(ip);
    r.tha = a.sha;
    r.tpa = a.spa;
    std::memcpy(out + sizeof(EthHdr), &r, sizeof r);
    *out_len = kArpFrameBytes;
    return HostAnswer::kArpReply;
}

HostAnswer on_ipv4(const uint8_t *frame, uint32_t len, const MacAddr &mac, uint32_t ip,
                   uint8_t *out, uint32_t cap, uint32_t *out_len) {
    if (len < sizeof(EthHdr) + sizeof(Ipv4Hdr)) return HostAnswer::kNone;
    const auto *iph = reinterpret_cast<const Ipv4Hdr *>(frame + sizeof(EthHdr));
    if (iph->protocol != kIpProtoIcmp || iph->dst.get() != ip || ip == 0) return HostAnswer::kNone;
    const uint32_t ihl = uint32_t(iph->version_ihl & 0x0f) * 4;
    const uint32_t total = iph->total_length.get();
    if ((iph->version_ihl >> 4) != 4 || ihl < sizeof(Ipv4Hdr) || total < ihl + 8 ||
        sizeof(EthHdr) + total > len)
        return HostAnswer::kMalformed;
    if (iph->frag.get() & (kIpv4MoreFragments | kIpv4FragOffsetMask))
        return HostAnswer::kNone;  // fragments are not reassembled here
    if (ipv4_header_checksum(*iph) != iph->checksum.get()) return HostAnswer::kMalformed;
    const uint8_t *icmp = frame + sizeof(EthHdr) + ihl;
    const uint32_t icmp_len = total - ihl;
    if (csum_fold(csum_add(0, icmp, icmp_len)) != 0xffff) return HostAnswer::kMalformed;
    if (icmp[0] != kIcmpEchoRequest || icmp[1] != 0) return HostAnswer::kNone;
    const uint32_t n = uint32_t(sizeof(EthHdr)) + total;
    if (n > cap) return HostAnswer::kNone;
    // The request turned around: addresses swapped, type 0, the same id,
    // sequence and data; IP options are not echoed (a plain 20-byte header).
    auto *eth = reinterpret_cast<EthHdr *>(out);
    const auto *in_eth = reinterpret_cast<const EthHdr *>(frame);
    eth->dst = in_eth->src;
    eth->src = mac;
    eth->ether_type.set(kEtherTypeIpv4);
    auto *oip = reinterpret_cast<Ipv4Hdr *>(out + sizeof(EthHdr));
    std::memcpy(oip, iph, sizeof(Ipv4Hdr));
    oip->version_ihl = 0x45;
    oip->total_length.set(static_cast<uint16_t>(sizeof(Ipv4Hdr) + icmp_len));
    oip->frag.set(0);
    oip->ttl = 64;
    oip->src.set(ip);
    oip->dst = iph->src;
    oip->checksum.set(0);
    oip->checksum.set(ipv4_header_checksum(*oip));
    uint8_t *oicmp = out + sizeof(EthHdr) + sizeof(Ipv4Hdr);
    std::memmove(oicmp, icmp, icmp_len);
    oicmp[0] = kIcmpEchoReply;
    oicmp[2] = oicmp[3] = 0;
    const auto c = static_cast<uint16_t>(~csum_fold(csum_add(0, oicmp, icmp_len)));
    oicmp[2] = static_cast<uint8_t>(c >> 8);
    oicmp[3] = static_cast<uint8_t>(c);
    *out_len = uint32_t(sizeof(EthHdr) + sizeof(Ipv4Hdr)) + icmp_len;
    return HostAnswer::kEchoReply;
}

}  // namespace

HostAnswer answer_host(const uint8_t *frame, uint32_t len, const MacAddr &mac, uint32_t ip,
                       uint8_t *out, uint32_t cap, uint32_t *out_len, ArpFrom *from) {
    *out_len = 0;
    *from = ArpFrom{};
    if (len < sizeof(EthHdr)) return HostAnswer::kNone;
    const auto *eth = reinterpret_cast<const EthHdr *>(frame);
    const uint16_t type = eth->ether_type.get();
    if (type == kEtherTypeArp) return on_arp(frame, len, mac, ip, out, cap, out_len, from);
    if (type == kEtherTypeIpv4) return on_ipv4(frame, len, mac, ip, out, cap, out_len);
    return HostAnswer::kNone;
}

uint32_t write_arp_request(uint8_t *out, const MacAddr &mac, uint32_t ip, uint32_t target_ip) {
    std::memset(out, 0, kArpFrameBytes);
    auto *eth = reinterpret_cast<EthHdr *>(out);
    eth->dst = kBroadcast;
    eth->src = mac;
    eth->ether_type.set(kEtherTypeArp);
    ArpHdr a{};
    a.htype.set(1);
    a.ptype.set(kEtherTypeIpv4);
    a.hlen = 6;
    a.plen = 4;
    a.oper.set(kArpOpRequest);
    a.sha = mac;
    a.spa.set(ip);
    a.tpa.set(target_ip);
    std::memcpy(out + sizeof(EthHdr), &a, sizeof a);
    return kArpFrameBytes;
}

// ---- IPv6 -------------------------------------------------------------------

Ipv6Addr solicited_node(const Ipv6Addr &ip) {
    Ipv6Addr g{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0, 0, 0}};
    g.b[13] = ip.b[13];
    g.b[14] = ip.b[14];
    g.b[15] = ip.b[15];
    return g;
}

MacAddr ipv6_multicast_mac(const Ipv6Addr &group) {
    return MacAddr{{0x33, 0x33, group.b[12], group.b[13], group.b[14], group.b[15]}};
}

uint16_t icmp6_checksum(const Ipv6Addr &src, const Ipv6Addr &dst, const uint8_t *icmp,
                        uint32_t len) {
    uint8_t ph[40] = {};
    std::memcpy(ph, src.b, 16);
    std::memcpy(ph + 16, dst.b, 16);
    ph[32] = static_cast<uint8_t>(len >> 24);
    ph[33] = static_cast<uint8_t>(len >> 16);
    ph[34] = static_cast<uint8_t>(len >> 8);
    ph[35] = static_cast<uint8_t>(len);
    ph[39] = kIpProtoIcmpv6;
    return static_cast<uint16_t>(~csum_fold(csum_add(csum_add(0, ph, sizeof ph), icmp, len)));
}

namespace {

constexpr Ipv6Addr kAllNodes{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}};
constexpr uint8_t kNdHopLimit = 255;

// Ethernet and IPv6 headers of an ICMPv6 message of `icmp_len` bytes.
void write_eth_ip6_icmp(uint8_t *out, const MacAddr &src_mac, const MacAddr &dst_mac,
                        const Ipv6Addr &src, const Ipv6Addr &dst, uint8_t hop_limit,
                        uint32_t icmp_len) {
    auto *eth = reinterpret_cast<EthHdr *>(out);
    eth->dst = dst_mac;
    eth->src = src_mac;
    eth->ether_type.set(kEtherTypeIpv6);
    Ipv6Hdr ip{};
    ipv6_set_vtc_flow(ip, 0, 0);
    ip.payload_length.set(static_cast<uint16_t>(icmp_len));
    ip.next_header = kIpProtoIcmpv6;
    ip.hop_limit = hop_limit;
    ip.src = src;
    ip.dst = dst;
    std::memcpy(out + sizeof(EthHdr), &ip, sizeof ip);
}

// A solicitation or advert: type, flags, target and one link-address
// option of `opt` type carrying `mac`; the checksum filled in.
uint32_t write_nd(uint8_t *out, uint8_t type, uint8_t flags, const MacAddr &src_mac,
                  const MacAddr &dst_mac, const Ipv6Addr &src, const Ipv6Addr &dst,
                  const Ipv6Addr &target, uint8_t opt, const MacAddr &mac) {
    constexpr uint32_t icmp_len = 32;
    write_eth_ip6_icmp(out, src_mac, dst_mac, src, dst, kNdHopLimit, icmp_len);
    uint8_t *icmp = out + sizeof(EthHdr) + sizeof(Ipv6Hdr);
    std::memset(icmp, 0, icmp_len);
    icmp[0] = type;
    icmp[4] = flags;
    std::memcpy(icmp + 8, target.b, 16);
    icmp[24] = opt;
    icmp[25] = 1;  // in units of 8 bytes
    std::memcpy(icmp + 26, mac.b, 6);
    const uint16_t c = icmp6_checksum(src, dst, icmp, icmp_len);
    icmp[2] = static_cast<uint8_t>(c >> 8);
    icmp[3] = static_cast<uint8_t>(c);
    return kNdFrameBytes;
}

// The link-layer address option of type `want` among the options of an
// ND message (RFC 4861 4.6.1), in *mac. False when the options do not
// parse (a zero length, one past the end): the whole message is then
// invalid (7.1.1).
bool nd_options(const uint8_t *opts, uint32_t n, uint8_t want, MacAddr *mac, bool *found) {
    *found = false;
    while (n > 0) {
        if (n < 2 || opts[1] == 0 || uint32_t(opts[1]) * 8 > n) return false;
        const uint32_t olen = uint32_t(opts[1]) * 8;
        if (opts[0] == want && olen >= 8) {
            std::memcpy(mac->b, opts + 2, 6);
            *found = true;
        }
        opts += olen;
        n -= olen;
    }
    return true;
}

HostAnswer on_nd(const Ipv6Hdr &iph, const uint8_t *frame, const uint8_t *icmp, uint32_t icmp_len,
                 const MacAddr &mac, const Ipv6Addr &ip, uint8_t *out, uint32_t cap,
                 uint32_t *out_len, NdFrom *from) {
    const uint8_t type = icmp[0];
    if (iph.hop_limit != kNdHopLimit || icmp[1] != 0 || icmp_len < 24)
        return HostAnswer::kMalformed;
    Ipv6Addr target;
    std::memcpy(target.b, icmp + 8, 16);
    if (ipv6_is_multicast(target)) return HostAnswer::kMalformed;
    MacAddr ll{};
    bool has_ll = false;
    const uint8_t want = type == kNdNeighborSolicit ? kNdOptSourceLinkAddr : kNdOptTargetLinkAddr;
    if (!nd_options(icmp + 24, icmp_len - 24, want, &ll, &has_ll)) return HostAnswer::kMalformed;
    const bool unspecified = ipv6_is_unspecified(iph.src);
    const bool learnable_mac = has_ll && !(ll.b[0] & 1);
    if (type == kNdNeighborSolicit) {
        // From the unspecified address (a duplicate-address probe): to a
        // solicited-node group and with no source option (7.1.1).
        if (unspecified && (has_ll || iph.dst.b[0] != 0xff)) return HostAnswer::kMalformed;
        if (!unspecified && learnable_mac && !(iph.src == ip)) {
            from->ip = iph.src;
            from->mac = ll;
            from->valid = true;
        }
        if (ipv6_is_unspecified(ip) || !(target == ip))
            return from->valid ? HostAnswer::kNdLearned : HostAnswer::kNone;
        if (cap < kNdFrameBytes) return HostAnswer::kNone;
        const auto *in_eth = reinterpret_cast<const EthHdr *>(frame);
        // A probe for this host's address is answered to all nodes (it
        // has no address to answer to), unsolicited (7.2.4).
        if (unspecified)
            *out_len = write_nd(out, kNdNeighborAdvert, kNdFlagOverride, mac,
                                ipv6_multicast_mac(kAllNodes), ip, kAllNodes, ip,
                                kNdOptTargetLinkAddr, mac);
        else
            *out_len = write_nd(out, kNdNeighborAdvert, kNdFlagSolicited | kNdFlagOverride, mac,
                                in_eth->src, ip, iph.src, ip, kNdOptTargetLinkAddr, mac);
        return HostAnswer::kNdAdvert;
    }
    // An advert: to a multicast group only unsolicited (7.1.2).
    const bool solicited = icmp[4] & kNdFlagSolicited;
    if (solicited && ipv6_is_multicast(iph.dst)) return HostAnswer::kMalformed;
    if (!learnable_mac || target == ip || ipv6_is_unspecified(target)) return HostAnswer::kNone;
    from->ip = target;
    from->mac = ll;
    from->advert = true;
    from->solicited = solicited;
    from->valid = true;
    return HostAnswer::kNdLearned;
}

}  // namespace

HostAnswer answer_host6(const uint8_t *frame, uint32_t len, const MacAddr &mac, const Ipv6Addr &ip,
                        uint8_t *out, uint32_t cap, uint32_t *out_len, NdFrom *from) {
    *out_len = 0;
    *from = NdFrom{};
    if (len < sizeof(EthHdr) + sizeof(Ipv6Hdr)) return HostAnswer::kNone;
    const auto *eth = reinterpret_cast<const EthHdr *>(frame);
    if (eth->ether_type.get() != kEtherTypeIpv6) return HostAnswer::kNone;
    Ipv6Hdr iph;
    std::memcpy(&iph, frame + sizeof(EthHdr), sizeof iph);
    if (ipv6_version(iph) != 6 || iph.next_header != kIpProtoIcmpv6) return HostAnswer::kNone;
    const uint32_t icmp_len = iph.payload_length.get();
    const uint8_t *icmp = frame + sizeof(EthHdr) + sizeof(Ipv6Hdr);
    if (icmp_len < 4 || sizeof(EthHdr) + sizeof(Ipv6Hdr) + icmp_len > len)
        return HostAnswer::kMalformed;
    const uint8_t type = icmp[0];
    const bool nd = type == kNdNeighborSolicit || type == kNdNeighborAdvert;
    const bool echo = type == kIcmp6EchoRequest && iph.dst == ip && !ipv6_is_unspecified(ip);
    if (!nd && !echo) return HostAnswer::kNone;  // router adverts, MLD, errors: not ours
    if (icmp6_checksum(iph.src, iph.dst, icmp, icmp_len) != 0) return HostAnswer::kMalformed;
    if (nd) return on_nd(iph, frame, icmp, icmp_len, mac, ip, out, cap, out_len, from);
    if (icmp[1] != 0 || icmp_len < 8 || ipv6_is_multicast(iph.src) || ipv6_is_unspecified(iph.src))
        return HostAnswer::kMalformed;
    const uint32_t n = uint32_t(sizeof(EthHdr) + sizeof(Ipv6Hdr)) + icmp_len;
    if (n > cap) return HostAnswer::kNone;
    // The request turned around: addresses swapped, type 129, the same
    // identifier, sequence and data.
    uint8_t *oicmp = out + sizeof(EthHdr) + sizeof(Ipv6Hdr);
    std::memmove(oicmp, icmp, icmp_len);
    write_eth_ip6_icmp(out, mac, eth->src, ip, iph.src, 64, icmp_len);
    oicmp[0] = kIcmp6EchoReply;
    oicmp[2] = oicmp[3] = 0;
    const uint16_t c = icmp6_checksum(ip, iph.src, oicmp, icmp_len);
    oicmp[2] = static_cast<uint8_t>(c >> 8);
    oicmp[3] = static_cast<uint8_t>(c);
    *out_len = n;
    return HostAnswer::kEchoReply;
}

uint32_t write_nd_solicit(uint8_t *out, const MacAddr &mac, const Ipv6Addr &ip,
                          const Ipv6Addr &target) {
    const Ipv6Addr group = solicited_node(target);
    return write_nd(out, kNdNeighborSolicit, 0, mac, ipv6_multicast_mac(group), ip, group, target,
                    kNdOptSourceLinkAddr, mac);
}

uint32_t write_nd_announce(uint8_t *out, const MacAddr &mac, const Ipv6Addr &ip) {
    return write_nd(out, kNdNeighborAdvert, kNdFlagOverride, mac, ipv6_multicast_mac(kAllNodes), ip,
                    kAllNodes, ip, kNdOptTargetLinkAddr, mac);
}

}  // namespace mrc::wire
