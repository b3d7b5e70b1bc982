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

}  // namespace mrc::wire
