// Ethernet / IPv4 / IPv6 / UDP headers, Internet checksums, and validating
// parsers.
//
// Pure C++ (no DPDK, no OS headers): used by the transport core, the
// simulator, the port self-test and the fabric emulator alike.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/bytes.h"

namespace mrc::wire {

struct MacAddr {
    uint8_t b[6];
    friend bool operator==(const MacAddr &, const MacAddr &) = default;
};
static_assert(sizeof(MacAddr) == 6);

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
inline constexpr uint8_t kIpProtoUdp = 17;

struct EthHdr {
    MacAddr dst;
    MacAddr src;
    be16 ether_type;
};
static_assert(sizeof(EthHdr) == 14);

struct VlanTag {
    be16 tci;
    be16 ether_type;
};
static_assert(sizeof(VlanTag) == 4);

struct Ipv4Hdr {
    uint8_t version_ihl;  // version 4 in the high nibble, header length in 32-bit words
    uint8_t tos;          // DSCP (6 bits) and ECN (low 2 bits)
    be16 total_length;    // IP header + payload, bytes
    be16 id;
    be16 frag;  // flags (3 bits) and fragment offset (13 bits)
    uint8_t ttl;
    uint8_t protocol;
    be16 checksum;
    be32 src;
    be32 dst;
};
static_assert(sizeof(Ipv4Hdr) == 20);

inline constexpr uint8_t kEcnMask = 0x03;
inline constexpr uint8_t kEcnNotEct = 0x00;
inline constexpr uint8_t kEcnEct1 = 0x01;
inline constexpr uint8_t kEcnEct0 = 0x02;
inline constexpr uint8_t kEcnCe = 0x03;
inline constexpr uint16_t kIpv4MoreFragments = 0x2000;
inline constexpr uint16_t kIpv4DontFragment = 0x4000;
inline constexpr uint16_t kIpv4FragOffsetMask = 0x1fff;

struct UdpHdr {
    be16 src_port;
    be16 dst_port;
    be16 length;  // UDP header + payload, bytes
    be16 checksum;
};
static_assert(sizeof(UdpHdr) == 8);

inline constexpr size_t kEthIpv4UdpBytes = sizeof(EthHdr) + sizeof(Ipv4Hdr) + sizeof(UdpHdr);
static_assert(kEthIpv4UdpBytes == 42);

struct Ipv6Addr {
    uint8_t b[16];
    friend bool operator==(const Ipv6Addr &, const Ipv6Addr &) = default;
};
static_assert(sizeof(Ipv6Addr) == 16);

inline bool ipv6_is_multicast(const Ipv6Addr &a) {
    return a.b[0] == 0xff;
}
inline bool ipv6_is_unspecified(const Ipv6Addr &a) {
    return a == Ipv6Addr{};
}

struct Ipv6Hdr {
    be32 vtc_flow;        // version 6 (4 bits), traffic class (8: DSCP and ECN), flow label (20)
    be16 payload_length;  // bytes after this header, extension headers included
    uint8_t next_header;
    uint8_t hop_limit;
    Ipv6Addr src;
    Ipv6Addr dst;
};
static_assert(sizeof(Ipv6Hdr) == 40);

inline constexpr size_t kEthIpv6UdpBytes = sizeof(EthHdr) + sizeof(Ipv6Hdr) + sizeof(UdpHdr);
static_assert(kEthIpv6UdpBytes == 62);

// Next-header values the IPv6 parser knows (RFC 8200 4.1, RFC 4303, 4302).
inline constexpr uint8_t kIpv6HopByHop = 0;
inline constexpr uint8_t kIpv6Routing = 43;
inline constexpr uint8_t kIpv6Fragment = 44;
inline constexpr uint8_t kIpv6Esp = 50;
inline constexpr uint8_t kIpv6Auth = 51;
inline constexpr uint8_t kIpv6NoNext = 59;
inline constexpr uint8_t kIpv6DestOpts = 60;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;
// Whether an IPv6 next-header value is an extension header (IANA's list:
// hop-by-hop, routing, fragment, ESP, AH, destination options, mobility,
// HIP, shim6, the two experimental values) rather than an upper layer.
inline constexpr bool ipv6_is_extension(uint8_t next) {
    switch (next) {
        case 0:
        case 43:
        case 44:
        case 50:
        case 51:
        case 60:
        case 135:
        case 139:
        case 140:
        case 253:
        case 254:
            return true;
        default:
            return false;
    }
}
// Extension headers the parser walks past before it gives up (a chain of
// options is a cheap way to make a receiver spend cycles).
inline constexpr uint32_t kIpv6MaxExtHeaders = 4;

inline uint8_t ipv6_version(const Ipv6Hdr &h) {
    return static_cast<uint8_t>(h.vtc_flow.get() >> 28);
}
inline uint8_t ipv6_traffic_class(const Ipv6Hdr &h) {
    return static_cast<uint8_t>(h.vtc_flow.get() >> 20);
}
inline uint32_t ipv6_flow_label(const Ipv6Hdr &h) {
    return h.vtc_flow.get() & 0xfffffu;
}
inline void ipv6_set_vtc_flow(Ipv6Hdr &h, uint8_t traffic_class, uint32_t flow_label) {
    h.vtc_flow.set((6u << 28) | (uint32_t{traffic_class} << 20) | (flow_label & 0xfffffu));
}
// The flow label an MRC packet carries: its entropy value, so that a fabric
// hashing on (addresses, flow label) sprays as one hashing on the UDP
// source port does. The EV is 16 bits; the label's top 4 bits stay zero.
inline constexpr uint32_t flow_label_of_ev(uint16_t ev) {
    return ev;
}

// ---- Internet checksum (RFC 1071) ------------------------------------------
//
// Sums are accumulated in host byte order over 8-byte words; one's
// complement addition is byte-order independent, so the folded result is
// swapped to network order once at the end.

namespace detail {
// Adds the two 32-bit halves of a word: a sum of those never overflows 64
// bits before 2^31 words, and is congruent to the word modulo 2^16 - 1,
// which is all the Internet checksum needs.
inline uint64_t halves(uint64_t w) {
    return (w & 0xffffffffu) + (w >> 32);
}
inline uint64_t add_carry(uint64_t sum, uint64_t v) {
    sum += v;
    return sum + (sum < v);  // end-around carry
}
}  // namespace detail

// Adds `len` bytes at `data` to a partial sum. Every buffer but the last of a
// checksummed run must have an even length. Four independent accumulators of
// 32-bit halves, so the adds do not wait on each other's carries.
inline uint64_t csum_add(uint64_t sum, const void *data, size_t len) {
    const auto *p = static_cast<const uint8_t *>(data);
    uint64_t a = 0, b = 0, c = 0, d = 0;
    while (len >= 32) {
        uint64_t w[4];
        std::memcpy(w, p, 32);
        a += detail::halves(w[0]);
        b += detail::halves(w[1]);
        c += detail::halves(w[2]);
        d += detail::halves(w[3]);
        p += 32;
        len -= 32;
    }
    sum = detail::add_carry(sum, a);
    sum = detail::add_carry(sum, b);
    sum = detail::add_carry(sum, c);
    sum = detail::add_carry(sum, d);
    while (len >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        sum = detail::add_carry(sum, w);
        p += 8;
        len -= 8;
    }
    if (len) {
        uint64_t w = 0;
        std::memcpy(&w, p, len);  // zero padding at the end, in memory order
        sum = detail::add_carry(sum, w);
    }
    return sum;
}

// Copies `len` bytes from src to dst and adds them to a partial sum, in one
// pass (the transmit path: payload into the frame, checksum on the way).
inline uint64_t csum_copy(void *dst, const void *src, size_t len, uint64_t sum) {
    auto *o = static_cast<uint8_t *>(dst);
    const auto *p = static_cast<const uint8_t *>(src);
    uint64_t a = 0, b = 0, c = 0, d = 0;
    while (len >= 32) {
        uint64_t w[4];
        std::memcpy(w, p, 32);
        std::memcpy(o, w, 32);
        a += detail::halves(w[0]);
        b += detail::halves(w[1]);
        c += detail::halves(w[2]);
        d += detail::halves(w[3]);
        p += 32;
        o += 32;
        len -= 32;
    }
    sum = detail::add_carry(sum, a);
    sum = detail::add_carry(sum, b);
    sum = detail::add_carry(sum, c);
    sum = detail::add_carry(sum, d);
    if (len != 0) std::memcpy(o, p, len);  // (p may be null when len is 0)
    return csum_add(sum, p, len);
}

// Folds a partial sum to 16 bits, in network byte order, not complemented.
inline uint16_t csum_fold(uint64_t sum) {
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffu) + (sum >> 16);
    sum = (sum & 0xffffu) + (sum >> 16);
    auto v = static_cast<uint16_t>(sum);
    if constexpr (std::endian::native == std::endian::little)
        v = static_cast<uint16_t>((v >> 8) | (v << 8));
    return v;
}

// The IPv4 header checksum, computed as if the checksum field were zero.
uint16_t ipv4_header_checksum(const Ipv4Hdr &ip);

// What a switch does to an ECN-capable packet above its marking threshold:
// sets CE and rewrites the header checksum. Returns false (and changes
// nothing) when the packet is not ECN-capable or already marked.
bool mark_ce(Ipv4Hdr &ip);

// Sum of the IPv4 pseudo header for a UDP datagram of `udp_bytes` (folded, not
// complemented): what a NIC with UDP checksum offload expects in the field.
uint16_t ipv4_udp_pseudo_sum(const Ipv4Hdr &ip, uint16_t udp_bytes);

// The unfolded sum of the pseudo header, to continue with csum_add/csum_copy
// over the UDP header (checksum field zero) and payload; then
// udp_checksum_finish.
uint64_t ipv4_udp_pseudo_partial(const Ipv4Hdr &ip, size_t udp_bytes);
inline uint16_t udp_checksum_finish(uint64_t sum) {
    const auto c = static_cast<uint16_t>(~csum_fold(sum));
    return c == 0 ? 0xffff : c;
}

// The full UDP checksum over pseudo header, header and payload, computed as if
// the checksum field were zero; 0 is returned as 0xffff (RFC 768).
uint16_t ipv4_udp_checksum(const Ipv4Hdr &ip, const UdpHdr *udp, size_t udp_bytes);

// The unfolded sum of the IPv6 pseudo header (RFC 8200 8.1: addresses,
// upper-layer length, next header UDP), to continue as for IPv4.
uint64_t ipv6_udp_pseudo_partial(const Ipv6Hdr &ip, size_t udp_bytes);
// The full UDP checksum over an IPv6 pseudo header, computed as if the
// checksum field were zero; never 0 (RFC 8200: a zero checksum is invalid
// over IPv6, 0xffff is sent instead).
uint16_t ipv6_udp_checksum(const Ipv6Hdr &ip, const UdpHdr *udp, size_t udp_bytes);
// What a switch does to an ECN-capable IPv6 packet (no header checksum).
bool mark_ce(Ipv6Hdr &ip);

// ---- Building frames ---------------------------------------------------------

struct UdpFrameSpec {
    MacAddr src_mac{};
    MacAddr dst_mac{};
    uint32_t src_ip = 0;  // host order
    uint32_t dst_ip = 0;  // host order
    uint16_t src_port = 0;
    uint16_t dst_port = 0;
    uint8_t tos = 0;
    uint8_t ttl = 64;
    uint16_t ip_id = 0;
};

// Writes Ethernet, IPv4 and UDP headers for `payload_bytes` of payload into
// `frame` (kEthIpv4UdpBytes long). The IPv4 checksum is filled in; the UDP
// checksum is left zero (see fill_udp_checksum or checksum offload).
void write_eth_ipv4_udp(uint8_t *frame, const UdpFrameSpec &spec, uint16_t payload_bytes);

struct Udp6FrameSpec {
    MacAddr src_mac{};
    MacAddr dst_mac{};
    Ipv6Addr src_ip{};
    Ipv6Addr dst_ip{};
    uint16_t src_port = 0;
    uint16_t dst_port = 0;
    uint8_t traffic_class = 0;  // DSCP << 2 | ECN
    uint8_t hop_limit = 64;
    uint32_t flow_label = 0;  // 20 bits
};

// Writes Ethernet, IPv6 (no extension headers) and UDP headers for
// `payload_bytes` of payload into `frame` (kEthIpv6UdpBytes long); the UDP
// checksum is left zero, to be filled (it is mandatory over IPv6).
void write_eth_ipv6_udp(uint8_t *frame, const Udp6FrameSpec &spec, uint16_t payload_bytes);

// Computes the UDP checksum of a complete frame written by
// write_eth_ipv4_udp or write_eth_ipv6_udp (the ether type says which).
void fill_udp_checksum(uint8_t *frame);

// ---- Parsing -----------------------------------------------------------------

enum class NetError : uint8_t {
    kOk = 0,
    kTruncated,     // frame shorter than the headers it announces
    kNotIpv4,       // ether type is neither IPv4 nor one VLAN tag over IPv4
    kBadIpHeader,   // version != 4, IHL < 5, or total length inconsistent
    kFragment,      // IPv4 fragment: MRC never fragments
    kNotUdp,        // IP protocol is not UDP
    kBadUdpLength,  // UDP length disagrees with the IP payload length
    kBadIpChecksum,
    kBadUdpChecksum,  // wrong, or zero over IPv6
    kNotIp,           // (parse_eth_ip_udp) neither IPv4 nor IPv6
    kBadIpv6Header,   // version != 6, or the payload length past the frame's end
    kIpv6ExtRefused,  // an extension header MRC does not take (ESP, AH, unknown, too many)
};
const char *to_string(NetError e);

// Filled by the parser; valid only when it returned kOk.
struct UdpView {
    const EthHdr *eth;
    const Ipv4Hdr *ip;
    const UdpHdr *udp;
    const uint8_t *payload;
    uint16_t payload_bytes;
    uint16_t l2_bytes;  // Ethernet header plus VLAN tag, if any
    uint16_t l3_bytes;  // IPv4 header including options; IPv6 header and extension headers
    // The IPv6 header (ip is then null; only parse_eth_ip_udp takes IPv6),
    // and the extension headers walked past (hop-by-hop, routing,
    // destination options). No initialisers: the parsers set every field.
    const Ipv6Hdr *ip6;
    uint8_t ext_headers;
    bool is_ipv6() const { return ip6 != nullptr; }
};

enum class Checksums : uint8_t { kSkip, kVerify };

// Parses Ethernet (optionally one 802.1Q tag), IPv4 and UDP. Never reads
// beyond `len`. Ethernet padding after the IP datagram is ignored.
NetError parse_eth_ipv4_udp(const uint8_t *frame, size_t len, UdpView *out,
                            Checksums checksums = Checksums::kSkip);

// The same, for a frame whose first `len` bytes are at `frame` and whose
// remaining total_len - len bytes are elsewhere: headers must lie within the
// first part; `payload` then points just past them. Checksums are verified
// only when the frame is contiguous (len == total_len).
NetError parse_eth_ipv4_udp_split(const uint8_t *frame, size_t len, size_t total_len, UdpView *out,
                                  Checksums checksums = Checksums::kSkip);

// Either family: Ethernet (optionally one 802.1Q tag), then IPv4 as
// above, or IPv6 with up to kIpv6MaxExtHeaders hop-by-hop, routing and
// destination-options headers walked past (counted in ext_headers), then
// UDP. Fragments, ESP, AH, an unknown next header or too many extension
// headers are refused (kFragment, kIpv6ExtRefused); Ethernet padding after
// the datagram is ignored. Never reads beyond `len` (headers) or
// `total_len` (the frame); checksums only when the frame is contiguous.
NetError parse_eth_ip_udp(const uint8_t *frame, size_t len, size_t total_len, UdpView *out,
                          Checksums checksums = Checksums::kSkip);

inline constexpr uint32_t ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    return (uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | d;
}

}  // namespace mrc::wire
