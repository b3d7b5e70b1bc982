// What a host answers for its own address on a plane, so that the routers,
// switches and Linux hosts next to a DPDK-owned port can reach it: ARP
// requests for the address (RFC 826) and ICMP echo requests to it (RFC 792,
// `ping`); over IPv6, neighbour solicitations for it (RFC 4861) and ICMPv6
// echo requests to it (RFC 4443, `ping -6`). Everything else is not this
// file's business.
//
// Pure C++: no DPDK, no OS headers; the dataplane calls it for frames that
// are not MRC, the fuzz target and the unit tests call it directly.
#pragma once

#include <cstdint>

#include "wire/net.h"

namespace mrc::wire {

struct ArpHdr {
    be16 htype;  // 1: Ethernet
    be16 ptype;  // 0x0800: IPv4
    uint8_t hlen;
    uint8_t plen;
    be16 oper;  // 1 request, 2 reply
    MacAddr sha;
    be32 spa;
    MacAddr tha;
    be32 tpa;
};
static_assert(sizeof(ArpHdr) == 28);

inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIcmpEchoReply = 0;
inline constexpr uint8_t kIcmpEchoRequest = 8;
// The frame an ARP packet is carried in, padded to Ethernet's minimum.
inline constexpr uint32_t kArpFrameBytes = 60;

enum class HostAnswer : uint8_t {
    kNone,        // not for this host, or not something it answers
    kArpReply,    // an ARP request for the address: the reply is in `out`
    kEchoReply,   // an ICMP echo request to the address: the reply is in `out`
    kArpLearned,  // an ARP packet from a neighbour (request for another
                  // address, a reply, a gratuitous announcement): see `from`
    kMalformed,   // ARP, ICMP or ICMPv6 to this host that does not parse (counted)
    kNdAdvert,    // a neighbour solicitation for the IPv6 address: the advert is in `out`
    kNdLearned,   // a neighbour's solicitation (for another address) or advert: see `from`
};

// What a neighbour's ARP packet says: who has which address.
struct ArpFrom {
    uint32_t ip = 0;  // host order
    MacAddr mac{};
    bool reply = false;
};

// An ARP frame (untagged Ethernet, ARP ethertype)?
inline bool is_arp(const uint8_t *frame, uint32_t len) {
    return len >= sizeof(EthHdr) && frame[12] == (kEtherTypeArp >> 8) &&
           frame[13] == (kEtherTypeArp & 0xff);
}

// The largest answer: an echo of a 9000-byte-MTU ping.
inline constexpr uint32_t kMaxHostAnswerBytes = 9018;

// Looks at one received Ethernet frame (untagged) on a plane where this
// host is `mac` / `ip` (host order). For an ARP request for `ip` or an
// ICMP echo request to `ip`, writes the answer into `out` (room for `cap`
// bytes: the echo is as long as the request) and returns its kind with
// *out_len set. An ARP packet from a neighbour is reported in *from (every
// ARP request for `ip` reports its sender too, as a host learns from it).
HostAnswer answer_host(const uint8_t *frame, uint32_t len, const MacAddr &mac, uint32_t ip,
                       uint8_t *out, uint32_t cap, uint32_t *out_len, ArpFrom *from);

// An ARP request for `target_ip` from `mac` / `ip` (broadcast), or a
// gratuitous one (target_ip == ip) announcing the address: kArpFrameBytes.
uint32_t write_arp_request(uint8_t *out, const MacAddr &mac, uint32_t ip, uint32_t target_ip);

// ---- IPv6 -------------------------------------------------------------------

inline constexpr uint8_t kIcmp6EchoRequest = 128;
inline constexpr uint8_t kIcmp6EchoReply = 129;
inline constexpr uint8_t kNdNeighborSolicit = 135;
inline constexpr uint8_t kNdNeighborAdvert = 136;
inline constexpr uint8_t kNdOptSourceLinkAddr = 1;
inline constexpr uint8_t kNdOptTargetLinkAddr = 2;
// NA flags (RFC 4861 4.4), in the first byte after the checksum.
inline constexpr uint8_t kNdFlagRouter = 0x80;
inline constexpr uint8_t kNdFlagSolicited = 0x40;
inline constexpr uint8_t kNdFlagOverride = 0x20;
// A solicitation or advert with one link-layer address option: Ethernet,
// IPv6, ICMPv6 header (4), reserved/flags (4), target (16), option (8).
inline constexpr uint32_t kNdFrameBytes = 14 + 40 + 32;

// What a neighbour's ND packet says: who has which address.
struct NdFrom {
    Ipv6Addr ip{};
    MacAddr mac{};
    bool advert = false;     // an advert (else a solicitation's source)
    bool solicited = false;  // an advert's S flag: the answer to a solicitation
    bool valid = false;      // something was learned
};

// ff02::1:ffXX:XXXX for `ip` (RFC 4291 2.7.1), and the Ethernet address
// an IPv6 multicast goes to (33:33 and its last 32 bits, RFC 2464 7).
Ipv6Addr solicited_node(const Ipv6Addr &ip);
MacAddr ipv6_multicast_mac(const Ipv6Addr &group);

// The ICMPv6 checksum over the IPv6 pseudo header (next header 58) and
// `len` bytes of ICMPv6 message, its checksum field taken as it is: 0 when
// a received message is right, the value to store when the field is zero.
uint16_t icmp6_checksum(const Ipv6Addr &src, const Ipv6Addr &dst, const uint8_t *icmp,
                        uint32_t len);

// As answer_host, for an IPv6 frame (untagged, no extension headers) on a
// plane where this host is `mac` / `ip`: a neighbour solicitation for `ip`
// gets an advert (solicited, override; to the all-nodes group when it came
// from the unspecified address, a duplicate-address probe), an ICMPv6 echo
// request to `ip` its reply. Every ND packet that names a neighbour's link
// address (a solicitation's source option, an advert's target option) is
// reported in *from, as RFC 4861 7.2.3 and 7.2.5 have hosts learn. ND
// packets are checked as RFC 4861 7.1 says (hop limit 255, code 0, the
// checksum, lengths, options, no multicast target) and counted malformed
// otherwise, whoever they were for.
HostAnswer answer_host6(const uint8_t *frame, uint32_t len, const MacAddr &mac, const Ipv6Addr &ip,
                        uint8_t *out, uint32_t cap, uint32_t *out_len, NdFrom *from);

// A neighbour solicitation for `target` from `mac` / `ip`, to the target's
// solicited-node group: kNdFrameBytes.
uint32_t write_nd_solicit(uint8_t *out, const MacAddr &mac, const Ipv6Addr &ip,
                          const Ipv6Addr &target);
// An unsolicited advert of `ip` at `mac` to all nodes (override set), as a
// host sends when its link address may have changed (RFC 4861 7.2.6):
// kNdFrameBytes.
uint32_t write_nd_announce(uint8_t *out, const MacAddr &mac, const Ipv6Addr &ip);

}  // namespace mrc::wire
