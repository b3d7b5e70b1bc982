// Congestion control hook of a QP's requester: a small table of events,
// one file per algorithm (cc_fixed.h, cc_nscc.h), chosen by CcConfig.
//
// A QP runs one instance per plane: a plane is an independent fabric with
// bottlenecks of its own, so a slow or congested plane shrinks only its
// own window (and with it its share of the packets), never the others'.
// The QP's window is the sum. Each instance sees the acks, NACKs and
// timeouts of packets sent on its plane; a new packet goes only to a
// plane whose window has room.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/result.h"
#include "core/config.h"

namespace mrc {

struct AckSample {
    uint64_t now_ns = 0;
    uint32_t acked_bytes = 0;  // newly acknowledged by this ack
    uint32_t rtt_ns = 0;       // 0 when the ack carried no usable timestamp
    bool ecn = false;          // the ack echoes a CE mark
};

// What the algorithm did with an ack, for the QP's counters and EV choice.
enum CcVerdict : uint8_t {
    kCcNone = 0,
    kCcRepath = 1,      // ECN without queueing delay: move off this EV, keep the window
    kCcDecreased = 2,   // multiplicative decrease
    kCcQuickAdapt = 4,  // window reset to what was delivered
};

class CongestionControl {
  public:
    virtual ~CongestionControl() = default;
    virtual const char *name() const = 0;
    virtual uint64_t window_bytes() const = 0;
    virtual size_t state_bytes() const = 0;  // sizeof the implementation
    virtual uint8_t on_ack(const AckSample &) { return kCcNone; }
    // A NACK for `bytes` because the packet was trimmed (in the fabric or,
    // with last_hop, at the receiver's switch).
    virtual uint8_t on_trim_nack(uint64_t /*now_ns*/, uint32_t /*bytes*/, bool /*last_hop*/) {
        return kCcNone;
    }
    // An ack timeout of a packet of `bytes`: it was lost without a trace.
    virtual uint8_t on_timeout(uint64_t /*now_ns*/, uint32_t /*bytes*/) { return kCcNone; }
    // A packet of `bytes` found lost from acks (docs/loss-recovery.md).
    // Loss without a trim is a path signal (the EV pays for it), not a
    // congestion one: congestion shows as ECN, delay and trims. So by
    // default nothing changes here: a QP on a lossy link keeps its window.
    virtual uint8_t on_loss(uint64_t /*now_ns*/, uint32_t /*bytes*/) { return kCcNone; }
};

// Whether `cfg` can work with packets of `mtu_bytes` over `planes` planes;
// the error says why not.
Result<void> check_cc(const CcConfig &cfg, uint32_t mtu_bytes, uint32_t planes);
// The instance for one plane of `planes`: it gets 1/planes of the line
// rate (NSCC) or of the fixed window.
std::unique_ptr<CongestionControl> make_cc(const CcConfig &cfg, uint32_t mtu_bytes,
                                           uint32_t planes);

}  // namespace mrc
