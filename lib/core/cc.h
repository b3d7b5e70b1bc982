// Congestion control hook of a QP's requester. One file per algorithm
// (cc_*.h); the requester asks window_bytes() before each new packet and
// reports what acks, NACKs and timeouts say. NSCC arrives with the
// adaptive-multipath work.
#pragma once

#include <cstdint>

namespace mrc {

struct AckSample {
    uint64_t now_ns = 0;
    uint32_t acked_bytes = 0;  // newly acknowledged by this ack
    uint32_t rtt_ns = 0;       // 0 when the ack carried no usable timestamp
    bool ecn = false;
    uint16_t ev = 0;
};

class CongestionControl {
  public:
    virtual ~CongestionControl() = default;
    virtual const char *name() const = 0;
    virtual uint64_t window_bytes() const = 0;
    virtual void on_ack(const AckSample &) {}
    virtual void on_nack(uint32_t /*bytes*/, bool /*path_congested*/) {}
    virtual void on_timeout(uint32_t /*bytes*/) {}
};

}  // namespace mrc
