// What a host answers for its own address on a plane, so that the routers,
// switches and Linux hosts next to a DPDK-owned port can reach it: ARP
// requests for the address (RFC 826) and ICMP echo requests to it (RFC 792,
// `ping`). Everything else is not this file's business.
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
    kMalformed,   // ARP or ICMP to this host that does not parse (counted)
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

}  // namespace mrc::wire
