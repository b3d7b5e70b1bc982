// libFuzzer target: the impairment fabric's ingress on arbitrary frames,
// every impairment on, trimming and ECN marking included. A frame is
// changed in place within its own bytes (ASan checks: each input is copied
// to a buffer of exactly its size), only ever shrinks, and a frame the
// fabric trimmed parses as a valid trimmed MRC data packet with good
// checksums; the delay lines never hold more than their capacity.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fabric/fabric.h"
#include "wire/mrc.h"

using namespace mrc;
using namespace mrc::fabric;

namespace {

constexpr uint32_t kSlots = 64;

Fabric &the_fabric() {
    static Fabric f = [] {
        FabricConfig c;
        c.planes = 2;
        c.paths = 4;
        c.delay_slots = kSlots;
        c.seed = 7;
        for (const char *s : {"loss=0.05,burst_enter=0.01,burst_exit=0.3",
                              "rate_gbps=1,queue_bytes=3000,ecn_bytes=1000,trim",
                              "delay_us=2,jitter_us=3,reorder=0.1,reorder_us=5,duplicate=0.1",
                              "plane=1,path=2,blackhole"}) {
            c.settings.push_back(parse_setting(s).value());
        }
        return Fabric::create(c).value();
    }();
    return f;
}

uint64_t g_now = 0;
uint64_t g_handle = 0;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    Fabric &f = the_fabric();
    // The input is the frame itself (so the parser's seeds are valid MRC
    // frames here too); its size picks plane, direction and time passing.
    const uint32_t plane = size & 1;
    const Dir dir = (size & 2) ? kBtoA : kAtoB;
    g_now += uint64_t(size % 97) * 100;
    std::vector<uint8_t> frame(data, data + size);
    const bool was_trimmed_data = [&] {
        wire::MrcPacket p;
        return wire::parse_mrc(frame.data(), uint32_t(frame.size()), wire::kDefaultMrcPort, &p) ==
                   wire::MrcError::kOk &&
               p.is_data() && p.trimmed();
    }();
    uint32_t len = uint32_t(frame.size());
    const Verdict v = f.ingress(plane, dir, frame.data(), &len, ++g_handle, g_now);
    if (len > frame.size()) abort();
    if (len < frame.size()) {
        if (v != Verdict::kQueued && v != Verdict::kQueuedTwice) abort();
        if (was_trimmed_data) abort();  // trimmed twice
        wire::MrcPacket p;
        if (wire::parse_mrc(frame.data(), len, wire::kDefaultMrcPort, &p,
                            wire::Checksums::kVerify) != wire::MrcError::kOk ||
            !p.is_data() || !p.trimmed() || p.payload_bytes != 0)
            abort();
    }
    DelayLine::Item out[16];
    for (uint32_t pl = 0; pl < 2; ++pl)
        for (Dir d : {kAtoB, kBtoA}) {
            if (f.queued(pl, d) > kSlots) abort();
            (void)f.egress(pl, d, g_now, out, 16);
        }
    return 0;
}
