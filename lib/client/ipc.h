// What libmrc and mrcd share: the socket protocol and the shared-memory
// rings. Both sides include this file; neither trusts what the other put in
// shared memory beyond what is checked here (the daemon treats every ring
// index and entry written by an application as hostile input).
//
// Socket: SOCK_SEQPACKET (one request, one reply, whole messages); file
// descriptors (memfds) travel with SCM_RIGHTS. Every request starts with
// ReqHdr, every reply with RepHdr; the body follows.
//
// Rings: one memfd per ring, sealed against shrinking (a mapping can never
// fault past the end). A send queue is written by the application
// (producer) and read by the daemon's worker; a completion queue the other
// way round. Indices are free-running uint32_t; entries = size (a power of
// two).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "mrc/mrc.h"

namespace mrc::ipc {

inline constexpr uint32_t kMagic = 0x3143524d;  // "MRC1" little-endian
inline constexpr uint16_t kVersion = 1;         // = MRC_API_VERSION
inline constexpr size_t kMaxMessageBytes = 64 * 1024;
inline constexpr uint32_t kMaxRingEntries = 1u << 16;
inline constexpr uint32_t kMaxBellBits = 1u << 16;  // QPs one CQ can ring for

enum class Op : uint16_t {
    kHello = 1,
    kRegMr = 2,
    kDeregMr = 3,
    kCreateCq = 4,
    kDestroyCq = 5,
    kCreateQp = 6,
    kDestroyQp = 7,
    kConnect = 8,
    kListen = 9,
    kAccept = 10,
    kAdmin = 11,  // mrcctl: JSON request in, JSON reply out
    kConnectMany = 12,
};

struct ReqHdr {
    uint32_t magic;
    uint16_t version;
    uint16_t op;
    uint32_t seq;
    uint32_t body_bytes;
};
static_assert(sizeof(ReqHdr) == 16);

struct RepHdr {
    uint32_t magic;
    uint16_t version;
    uint16_t op;
    uint32_t seq;
    int32_t status;  // mrc_status
    uint32_t body_bytes;
    char message[236];  // NUL-terminated: what went wrong, for the caller to print
};
static_assert(sizeof(RepHdr) == 256);

struct HelloReq {
    uint32_t api_version;
    uint32_t pid;
    char name[32];
};
struct HelloRep {
    uint32_t api_version;
    uint32_t planes;
    uint32_t max_msg_bytes;
    uint32_t mtu_payload_bytes;
    uint32_t local_ip[MRC_MAX_PLANES];
    char daemon[64];
    // The wake page (a sealed memfd, with this reply): worker i's sleeping
    // word at byte i * wake_stride, for `workers` workers. Map it read-only.
    uint32_t workers;
    uint32_t wake_stride;
};

struct RegMrReq {  // + the memfd
    uint64_t length;
    uint64_t client_addr;  // where the region is mapped in the application: peers address it so
    uint32_t access;
    uint32_t service;
};
struct RegMrRep {
    uint32_t key;
    uint32_t pad;
};
struct KeyReq {  // kDeregMr, kDestroyCq, kDestroyQp
    uint32_t id;
    uint32_t pad;
};

struct CreateCqReq {
    uint32_t depth;
    uint32_t pad;
};
struct RingRep {  // + the ring's memfd
    uint32_t id;  // CQ id, or QPN
    uint32_t entries;
    uint64_t map_bytes;
    uint32_t peer_ip;  // kAccept: who connected
    uint32_t cq_id;    // kAccept: the CQ the QP reports to
    uint32_t worker;   // kCreateCq: the worker that serves the CQ (its wake fd comes second)
    uint32_t pad;
};
struct CreateQpReq {
    uint32_t cq_id;
    uint32_t sq_depth;
};
struct ConnectReq {
    uint32_t qpn;
    uint32_t service;
    uint32_t peer_ip;  // host order
    uint32_t timeout_ms;
};
// kConnectMany: ConnectManyReq, then `count` wire QPNs (uint32_t). The
// CONNECTs go out together; the reply (status OK) carries one int32_t
// mrc_status per QP, in order, and the first failure's text.
struct ConnectManyReq {
    uint32_t service;
    uint32_t peer_ip;  // host order
    uint32_t timeout_ms;
    uint32_t count;  // 1 .. kMaxConnectMany
};
inline constexpr uint32_t kMaxConnectMany = 4096;
static_assert(sizeof(ReqHdr) + sizeof(ConnectManyReq) + kMaxConnectMany * 4 <= kMaxMessageBytes);
struct ListenReq {
    uint32_t service;
    uint32_t cq_id;
    uint32_t sq_depth;
    uint32_t pad;
};
struct AcceptReq {
    uint32_t service;
    uint32_t timeout_ms;
};

// ---- shared memory ----

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// RingHdr.state (daemon -> application)
inline constexpr uint32_t kRingOk = 0;
inline constexpr uint32_t kRingError = 1;     // the QP entered the error state
inline constexpr uint32_t kRingShutdown = 2;  // the daemon is stopping

// Doorbells: a worker looks only at the QPs that have work, not at every
// QP's ring each loop. A QP's completion queue carries a bitmap with one bit
// per QP on it (its `bell`); when the worker has emptied a send queue it
// parks the QP and sets `armed`. The application, after publishing `prod`
// (and a full fence), finds `armed` set, clears it, sets the QP's bit in the
// CQ's bitmap and then the CQ's `rung`. The worker checks each CQ's `rung`
// per loop and services the QPs whose bits it takes. The fence pairs with
// the worker's own (armed, then prod again) so that one of the two sides
// always sees the other: no post waits without a bell, and a busy QP costs
// no atomic read-modify-write per post.
struct RingHdr {
    alignas(64) std::atomic<uint32_t> prod;
    alignas(64) std::atomic<uint32_t> cons;
    alignas(64) uint32_t entries;  // written by the daemon before the ring is handed out
    uint32_t entry_bytes;
    std::atomic<uint32_t> state;
    uint32_t bell;                // SQ: this QP's bit in its CQ's bitmap; CQ: bits in the bitmap
    uint32_t bell_offset;         // CQ: where the bitmap starts (bytes from this header)
    std::atomic<uint32_t> armed;  // SQ: the worker parked the QP (the next post rings)
    std::atomic<uint32_t> rung;   // CQ: some bit of the bitmap was set
    std::atomic<uint32_t> room_wanted;  // CQ: a QP waits for room (the next poll wakes the worker)
};
static_assert(sizeof(RingHdr) == 192);

struct Sqe {
    uint64_t wr_id;
    uint32_t opcode;  // mrc_wr_opcode
    uint32_t imm;
    uint32_t lkey;  // the local region's key (this context's)
    uint32_t length;
    uint64_t local_offset;
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t pad[5];
};
static_assert(sizeof(Sqe) == 64);

struct Cqe {
    uint64_t wr_id;
    uint32_t qp_num;
    uint8_t opcode;  // mrc_wc_opcode
    uint8_t status;  // mrc_wc_status
    uint16_t pad;
    uint32_t byte_len;
    uint32_t imm;
    uint64_t reserved;
};
static_assert(sizeof(Cqe) == 32);

// A ring's mapping: the header, the entries, then (CQs) `bell_bits` bits of
// doorbell bitmap, 64-bit words aligned to a cache line.
inline constexpr size_t bell_offset(uint32_t entries, size_t entry_bytes) {
    return (sizeof(RingHdr) + size_t{entries} * entry_bytes + 63) / 64 * 64;
}
inline constexpr size_t ring_bytes(uint32_t entries, size_t entry_bytes, uint32_t bell_bits = 0) {
    const size_t b = bell_offset(entries, entry_bytes) + (size_t{bell_bits} + 63) / 64 * 8;
    return (b + 4095) / 4096 * 4096;
}
inline std::atomic<uint64_t> *ring_bells(RingHdr *h) {
    return reinterpret_cast<std::atomic<uint64_t> *>(reinterpret_cast<uint8_t *>(h) +
                                                     h->bell_offset);
}

// The application's half of the doorbell, right after it published a send
// queue's `prod`: rings the QP's bit in its completion queue `cq` when the
// worker parked the QP, and says whether it rang. (libmrc's post; tests that
// write rings by hand.) A worker that sleeps (mrcd's adaptive idle mode)
// learns of a rung bell only when woken: after a true return, the caller
// reads the CQ's worker's word of the wake page and, when it is set, writes
// that worker's wake fd (HelloRep, RingRep: both came with the replies).
inline bool ring_doorbell(RingHdr *sq, RingHdr *cq) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!sq->armed.load(std::memory_order_relaxed) ||
        !sq->armed.exchange(0, std::memory_order_acq_rel))
        return false;
    const uint32_t bell = sq->bell;
    if (bell >= cq->bell) return false;
    ring_bells(cq)[bell / 64].fetch_or(uint64_t{1} << (bell % 64), std::memory_order_release);
    cq->rung.store(1, std::memory_order_seq_cst);
    return true;
}
template <typename E>
inline E *ring_entries(RingHdr *h) {
    return reinterpret_cast<E *>(reinterpret_cast<uint8_t *>(h) + sizeof(RingHdr));
}

}  // namespace mrc::ipc
