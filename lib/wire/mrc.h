// MRC wire format: headers after Ethernet / IPv4 / UDP, builders and a
// validating parser. docs/wire-format.md describes every field; the
// static_asserts below pin the layout.
//
// Pure C++: no DPDK, no OS headers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/bytes.h"
#include "wire/net.h"
#include "wire/psn.h"

namespace mrc {

// One bit per plane (NIC port): the plane-status fields of acks, NACKs and
// probes.
using PlaneMask = uint8_t;
// The most planes one QP, endpoint, fabric or daemon uses: as many as a
// plane mask has bits. Every per-plane array in the tree is sized by it.
inline constexpr uint32_t kMaxPlanes = 8 * sizeof(PlaneMask);

}  // namespace mrc

namespace mrc::wire {

// Default UDP destination port of MRC. Not 4791 (RoCEv2) nor 4793 (UET):
// MRC packets are neither. Configurable everywhere.
inline constexpr uint16_t kDefaultMrcPort = 4797;
inline constexpr uint8_t kMrcVersion = 1;

enum class Opcode : uint8_t {
    kWrite = 0x01,     // RDMA WRITE: data packet
    kWriteImm = 0x02,  // RDMA WRITE with immediate: data packet; the last one carries ImmHdr
    kSack = 0x10,      // cumulative + selective ack
    kNack = 0x11,      // negative ack of one PSN
    kProbe = 0x20,     // path probe on one EV
    kProbeReply = 0x21,
};

// BaseHdr.flags
inline constexpr uint8_t kFlagAckReq = 0x01;       // requester asks for an ack now
inline constexpr uint8_t kFlagSyn = 0x02;          // connection start (0-RTT)
inline constexpr uint8_t kFlagFirst = 0x04;        // first packet of a message
inline constexpr uint8_t kFlagLast = 0x08;         // last packet of a message
inline constexpr uint8_t kFlagRetx = 0x10;         // a retransmission
inline constexpr uint8_t kFlagTrimLastHop = 0x40;  // trimmed by the last hop (with kFlagTrimmed)
inline constexpr uint8_t kFlagTrimmed = 0x80;      // payload cut by the network
inline constexpr uint8_t kFlagsDefined = 0xdf;

struct BaseHdr {
    uint8_t opcode;
    uint8_t flags;
    uint8_t version;  // kMrcVersion
    uint8_t reserved0;
    uint8_t reserved1;
    be24 dst_qpn;
    uint8_t reserved2;
    be24 psn;  // data: this packet; SACK: cumulative PSN; NACK: the PSN refused; probe: 0
};
static_assert(sizeof(BaseHdr) == 12);
static_assert(offsetof(BaseHdr, dst_qpn) == 5 && offsetof(BaseHdr, psn) == 9);

// On every data packet.
struct DataHdr {
    be32 msn;         // message sequence number, per QP and direction
    be32 msg_offset;  // byte offset of this packet's payload in its message
    be32 tx_ts;       // sender's clock when sent, ns (low 32 bits); echoed in acks
};
static_assert(sizeof(DataHdr) == 12);

// RDMA-extended header, on every data packet: where this packet's payload goes.
struct Reth {
    be64 remote_addr;  // target address of this packet's first payload byte
    be32 rkey;         // remote memory key
    be32 length;       // payload bytes of this packet (before any trimming)
};
static_assert(sizeof(Reth) == 16);

// After the RETH on the last packet of a WRITE_WITH_IMM.
struct ImmHdr {
    be32 imm;        // immediate data, delivered to the responder's application
    be32 msg_bytes;  // length of the whole message
};
static_assert(sizeof(ImmHdr) == 8);

// SackHdr.flags
inline constexpr uint8_t kAckEcnEcho = 0x01;    // the triggering packet was CE-marked
inline constexpr uint8_t kAckDuplicate = 0x02;  // the triggering packet was a duplicate
inline constexpr uint8_t kAckDelayed = 0x04;    // sent after the delayed-ack wait: no RTT for CC
inline constexpr uint8_t kAckFlagsDefined = 0x07;

struct SackHdr {
    uint8_t reserved0;
    be24 trigger_psn;        // PSN of the packet that triggered this ack
    be16 sack_offset;        // bitmap bit 0 covers PSN cum_psn + sack_offset
    be16 ev_echo;            // EV (UDP source port) of the triggering packet
    be64 bitmap;             // bit i (LSB = 0): PSN cum_psn + sack_offset + i received
    be32 ts_echo;            // DataHdr.tx_ts of the triggering packet
    be16 rwnd_units;         // responder window (MPR), units of 128 PSNs
    uint8_t flags;           // kAck*
    PlaneMask plane_status;  // bit p: the responder sees plane p up
};
static_assert(sizeof(SackHdr) == 24);

enum class NackReason : uint8_t {
    kTrimmed = 0x01,         // payload cut in the network: retransmit now
    kTrimmedLastHop = 0x02,  // cut at the last hop: retransmit, the path is not to blame
    kNoResource = 0x0a,      // responder out of resources (immediates): retransmit later
    kPsnOutOfWindow = 0x0b,  // PSN beyond the responder's window
    kUnexpected = 0x19,      // protocol violation: the requester's QP errors
    kRemoteAccess = 0x1a,    // bad key, address or length: the requester's QP errors
};
bool nack_reason_known(uint8_t r);
const char *to_string(NackReason r);

struct NackHdr {
    uint8_t reason;  // NackReason
    uint8_t flags;   // kAckEcnEcho when the refused packet was CE-marked
    be16 ev_echo;
    uint8_t reserved0;
    be24 cum_psn;  // responder's cumulative PSN: every PSN before it arrived
    be32 ts_echo;
    be16 rwnd_units;
    uint8_t reserved1;
    PlaneMask plane_status;
};
static_assert(sizeof(NackHdr) == 16);

// ProbeHdr.flags
inline constexpr uint8_t kProbeReverse = 0x01;    // tests the prober's reverse (ack) EV: the
                                                  // reply goes back on one of the answerer's
                                                  // GOOD forward EVs
inline constexpr uint8_t kProbeKeepalive = 0x02;  // liveness only: tests no EV
inline constexpr uint8_t kProbeFlagsDefined = 0x03;

struct ProbeHdr {
    be32 probe_id;
    be16 ev;        // EV the probe was sent on (echoed in the reply)
    uint8_t flags;  // kProbe*; echoed in the reply
    PlaneMask plane_status;
    be32 ts;  // request: sender's clock, ns; reply: echoed
};
static_assert(sizeof(ProbeHdr) == 12);

inline constexpr size_t kDataHdrBytes =
    kEthIpv4UdpBytes + sizeof(BaseHdr) + sizeof(DataHdr) + sizeof(Reth);
inline constexpr size_t kDataImmHdrBytes = kDataHdrBytes + sizeof(ImmHdr);
inline constexpr size_t kSackBytes = kEthIpv4UdpBytes + sizeof(BaseHdr) + sizeof(SackHdr);
inline constexpr size_t kNackBytes = kEthIpv4UdpBytes + sizeof(BaseHdr) + sizeof(NackHdr);
inline constexpr size_t kProbeBytes = kEthIpv4UdpBytes + sizeof(BaseHdr) + sizeof(ProbeHdr);
// The most header bytes of any packet, over either IP family (the sizes
// above are IPv4's; IPv6 adds kIpv6ExtraBytes).
inline constexpr size_t kIpv6ExtraBytes = kEthIpv6UdpBytes - kEthIpv4UdpBytes;
inline constexpr size_t kMaxHdrBytes = kDataImmHdrBytes + kIpv6ExtraBytes;
static_assert(kDataHdrBytes == 82 && kDataImmHdrBytes == 90 && kSackBytes == 78 &&
              kNackBytes == 70 && kMaxHdrBytes == 110);
inline constexpr uint32_t kSackBitmapBits = 64;
inline constexpr uint32_t kPsnsPerWindowUnit = 128;  // MPR unit
inline constexpr uint32_t kQpnMask = 0xffffff;

// ---- building -----------------------------------------------------------------

// Addresses of one direction of one QP on one plane: IPv4 (src_ip, dst_ip)
// or, with ipv6 set, IPv6 (src_ip6, dst_ip6; the EV also in the flow label).
struct MrcAddr {
    MacAddr src_mac{};
    MacAddr dst_mac{};
    uint32_t src_ip = 0;  // host order
    uint32_t dst_ip = 0;
    bool ipv6 = false;
    Ipv6Addr src_ip6{};
    Ipv6Addr dst_ip6{};
    uint16_t dst_port = kDefaultMrcPort;
    // Traffic classes (DSCP, the upper 6 bits of TOS; ECT(0) is always set):
    // of data packets, and of what controls them (acks, NACKs, probes and
    // probe replies), which switches commonly queue apart and ahead.
    uint8_t dscp = 0;
    uint8_t dscp_control = 0;
};

struct DataFields {
    Opcode opcode = Opcode::kWrite;
    uint8_t flags = 0;
    uint32_t dst_qpn = 0;
    Psn psn;
    uint32_t msn = 0;
    uint32_t msg_offset = 0;
    uint32_t tx_ts = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;        // with kWriteImm and kFlagLast
    uint32_t msg_bytes = 0;  // with kWriteImm and kFlagLast
};

struct SackFields {
    uint32_t dst_qpn = 0;
    Psn cum_psn;
    Psn trigger_psn;
    uint16_t sack_offset = 0;
    uint16_t ev_echo = 0;
    uint64_t bitmap = 0;
    uint32_t ts_echo = 0;
    uint16_t rwnd_units = 0;
    uint8_t flags = 0;
    PlaneMask plane_status = 0;
};

struct NackFields {
    uint32_t dst_qpn = 0;
    Psn psn;
    NackReason reason = NackReason::kTrimmed;
    uint8_t flags = 0;
    uint16_t ev_echo = 0;
    Psn cum_psn;
    uint32_t ts_echo = 0;
    uint16_t rwnd_units = 0;
    PlaneMask plane_status = 0;
};

struct ProbeFields {
    bool reply = false;
    uint8_t flags = 0;  // kProbe*
    uint32_t dst_qpn = 0;
    uint32_t probe_id = 0;
    uint16_t ev = 0;
    uint32_t ts = 0;
    PlaneMask plane_status = 0;
};

// Each writes the whole header stack (Ethernet to MRC) into `buf`, which
// must hold kMaxHdrBytes, and returns the header length. `ev` goes into the
// UDP source port (and the IPv6 flow label). The IPv4 checksum is filled
// in; the UDP checksum is left zero for the port layer (offload or
// software) to fill.
uint16_t write_data(uint8_t *buf, const MrcAddr &a, uint16_t ev, const DataFields &f,
                    uint32_t payload_bytes);
uint16_t write_sack(uint8_t *buf, const MrcAddr &a, uint16_t ev, const SackFields &f);
uint16_t write_nack(uint8_t *buf, const MrcAddr &a, uint16_t ev, const NackFields &f);
uint16_t write_probe(uint8_t *buf, const MrcAddr &a, uint16_t ev, const ProbeFields &f);

// What a trimming switch does: cut the payload, set the trimmed flag (and
// the last-hop flag), fix the IP and UDP lengths and the IPv4 checksum.
// Returns the new frame length, or 0 if the frame is not an MRC data packet.
uint32_t trim_data_packet(uint8_t *frame, uint32_t len, bool last_hop);
// The same for headers kept apart from their payload of payload_len bytes
// (the simulator's packets); returns the header length, or 0.
uint32_t trim_data_headers(uint8_t *hdr, uint32_t hdr_len, uint32_t payload_len, bool last_hop);

// ---- parsing -------------------------------------------------------------------

enum class MrcError : uint8_t {
    kOk = 0,
    kNet,        // Ethernet/IP/UDP malformed (see net_error)
    kNotMrc,     // UDP destination port is not MRC's
    kTruncated,  // shorter than the MRC headers its opcode needs
    kBadVersion,
    kBadOpcode,
    kBadFlags,  // undefined flag bits, or flags that make no sense for the opcode
    kReservedNonZero,
    kBadLength,  // payload length disagrees with the RETH, or data packet without payload
    kBadQpn,     // QPN 0 is never valid
    kBadNackReason,
};
const char *to_string(MrcError e);

// Filled by parse_mrc; valid only when it returned kOk. No member
// initialisers: constructing one per packet must cost nothing.
struct MrcPacket {
    UdpView udp;
    NetError net_error;
    const BaseHdr *base;
    Opcode opcode;
    uint8_t flags;
    uint32_t dst_qpn;
    Psn psn;
    uint16_t ev;  // UDP source port
    bool ecn_ce;
    const DataHdr *data;
    const Reth *reth;
    const ImmHdr *imm;
    const SackHdr *sack;
    const NackHdr *nack;
    const ProbeHdr *probe;
    const uint8_t *payload;
    uint32_t payload_bytes;
    uint32_t hdr_bytes;

    bool is_data() const { return opcode == Opcode::kWrite || opcode == Opcode::kWriteImm; }
    bool trimmed() const { return flags & kFlagTrimmed; }
};

// Parses a frame (IPv4 or IPv6) whose headers are all in `head` (head_len bytes) and whose
// payload continues in `tail` (tail_len bytes) when tail is not null: the
// simulator passes payload by reference. A contiguous frame has tail null.
// Never reads outside the two buffers.
MrcError parse_mrc(const uint8_t *head, uint32_t head_len, const uint8_t *tail, uint32_t tail_len,
                   uint16_t mrc_port, MrcPacket *out, Checksums checksums = Checksums::kSkip);

inline MrcError parse_mrc(const uint8_t *frame, uint32_t len, uint16_t mrc_port, MrcPacket *out,
                          Checksums checksums = Checksums::kSkip) {
    return parse_mrc(frame, len, nullptr, 0, mrc_port, out, checksums);
}

}  // namespace mrc::wire
