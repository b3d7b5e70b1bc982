// A fixed congestion window: the requester is limited only by this and by
// the responder's window.
#pragma once

#include "core/cc.h"

namespace mrc {

class FixedWindowCc final : public CongestionControl {
  public:
    explicit FixedWindowCc(uint64_t window_bytes) : window_bytes_(window_bytes) {}
    const char *name() const override { return "fixed"; }
    size_t state_bytes() const override { return sizeof(*this); }
    uint64_t window_bytes() const override { return window_bytes_; }
    uint8_t on_ack(const AckSample &a) override { return a.ecn ? kCcRepath : kCcNone; }

  private:
    uint64_t window_bytes_;
};

}  // namespace mrc
