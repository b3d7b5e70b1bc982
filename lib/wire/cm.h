// Connection management frames: how two daemons set up a QP between them
// on the data ports themselves, so applications name only the peer and a
// service (docs/api.md, docs/wire-format.md "Connection management").
//
//   requester                                  responder
//   CONNECT(conn_id, service, qpn, psn, addrs) ->
//                                              <- ACCEPT(conn_id, qpn, psn, addrs)
//                                              <- REJECT(conn_id, reason)
//   DISCONNECT(qpn of the receiver)           <->
//
// Every CM frame goes to QPN 0 (never a QP), carries the MRC base header
// with one of the opcodes below and a CmHdr. CONNECT is repeated until an
// answer comes; the responder answers a repeat with the same ACCEPT. Both
// sides bring their QP to RTS from what the other sent: its QPN, its first
// PSN and its address on every plane.
//
// Pure C++: no DPDK, no OS headers.
#pragma once

#include <cstdint>

#include "wire/mrc.h"

namespace mrc::wire {

enum class CmOp : uint8_t {
    kConnect = 0x30,
    kAccept = 0x31,
    kReject = 0x32,
    kDisconnect = 0x33,
};
const char *to_string(CmOp op);

enum class CmReject : uint8_t {
    kNone = 0,
    kNoListener = 1,  // nobody listens on that service
    kNoResources = 2,
    kBadRequest = 3,  // planes or addresses unusable
};
const char *to_string(CmReject r);

struct CmPlaneAddr {
    MacAddr mac;
    be32 ip;
};
static_assert(sizeof(CmPlaneAddr) == 10);

struct CmHdr {
    be64 conn_id;      // chosen by the requester; echoed in ACCEPT / REJECT
    be32 service;      // CONNECT: the service asked for
    be32 src_qpn;      // the sender's QP
    be32 dst_qpn;      // ACCEPT: the requester's QP; DISCONNECT: the receiver's QP
    be32 psn;          // the first PSN the sender will send
    uint8_t planes;    // entries of addr in use (1..kMaxPlanes)
    uint8_t reason;    // REJECT: CmReject
    be16 mtu_payload;  // CONNECT, ACCEPT: the sender's largest data payload (0: not said)
    CmPlaneAddr addr[kMaxPlanes];
};
static_assert(sizeof(CmHdr) == 108);

inline constexpr size_t kCmBytes = kEthIpv4UdpBytes + sizeof(BaseHdr) + sizeof(CmHdr);
inline constexpr uint8_t kCmMaxPlanes = kMaxPlanes;

struct CmFields {
    CmOp op = CmOp::kConnect;
    uint64_t conn_id = 0;
    uint32_t service = 0;
    uint32_t src_qpn = 0;
    uint32_t dst_qpn = 0;
    uint32_t psn = 0;
    uint8_t planes = 0;
    CmReject reason = CmReject::kNone;
    // CONNECT, ACCEPT: the largest data payload per packet the sender's
    // ports carry (its MTU less MRC's headers); the QP uses the smaller of
    // the two ends'. 0: not said (the receiver's own then).
    uint16_t mtu_payload = 0;
    MacAddr mac[kCmMaxPlanes]{};
    uint32_t ip[kCmMaxPlanes]{};  // host order
};

// Writes the whole frame (kCmBytes) into buf; `a` addresses it (dst_port
// is MRC's port), `ev` is the UDP source port. Returns the frame length.
// The UDP checksum is left zero for the port layer.
uint16_t write_cm(uint8_t *buf, const MrcAddr &a, uint16_t ev, const CmFields &f);

enum class CmError : uint8_t { kOk, kNet, kNotMrc, kNotCm, kTruncated, kBadVersion, kBadFields };
const char *to_string(CmError e);

// Parses a CM frame. On kOk, `out` holds the fields and `from` the
// sender's addresses as seen in the frame (MAC, IP).
CmError parse_cm(const uint8_t *frame, uint32_t len, uint16_t mrc_port, CmFields *out,
                 MacAddr *from_mac = nullptr, uint32_t *from_ip = nullptr);

// True when the frame is addressed to QPN 0 with a CM opcode: cheap test
// on the MRC header (at `mrc`, the UDP payload).
inline bool is_cm(const uint8_t *mrc) {
    return mrc[0] >= uint8_t(CmOp::kConnect) && mrc[0] <= uint8_t(CmOp::kDisconnect);
}

}  // namespace mrc::wire
