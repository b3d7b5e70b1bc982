#include "core/ev.h"

#include <algorithm>

namespace mrc {

void EvSet::init(uint32_t count, uint32_t planes, uint64_t seed) {
    planes_ = std::clamp<uint32_t>(planes, 1, kMaxPlanes);
    count = std::max<uint32_t>(count, planes_);
    count = (count + planes_ - 1) / planes_ * planes_;
    Rng rng(seed);
    std::vector<uint8_t> used(65536, 0);
    evs_.clear();
    auto draw = [&] {
        for (;;) {
            const auto v = static_cast<uint16_t>(1024 + rng.below(65536 - 1024));
            if (!used[v]) {
                used[v] = 1;
                return v;
            }
        }
    };
    for (uint32_t i = 0; i < count; ++i)
        evs_.push_back(draw());
    for (uint32_t p = 0; p < planes_; ++p)
        for (auto &r : reverse_[p])
            r = draw();
    cursor_ = static_cast<uint32_t>(rng.below(count));
    rng_.reseed(rng.next());
}

}  // namespace mrc
