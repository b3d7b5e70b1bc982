// libFuzzer target: the frame parsers on arbitrary bytes. Each input is
// parsed as a whole frame, and as headers-plus-tail split at every one of
// a few points; nothing may read outside the two buffers (ASan checks),
// and a successful parse must describe a consistent frame.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/cm.h"
#include "wire/host.h"
#include "wire/mrc.h"

using namespace mrc::wire;

namespace {
void check(const MrcPacket &p, size_t total) {
    if (p.hdr_bytes > total) abort();
    if (p.payload_bytes && p.payload == nullptr) abort();
    if (p.is_data() && !p.trimmed() && p.payload_bytes != p.reth->length.get()) abort();
    if (p.hdr_bytes + p.payload_bytes > total) abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // Copies of exactly the input's size, so any over-read is caught.
    std::vector<uint8_t> f(data, data + size);
    UdpView v;
    (void)parse_eth_ipv4_udp(f.data(), f.size(), &v, Checksums::kVerify);
    // Both families (IPv6 extension headers walked), whole and with the
    // headers in a first part cut short of the frame.
    for (size_t head : {size, size_t(62), size_t(70), size_t(110), size / 2}) {
        if (head > size) continue;
        std::vector<uint8_t> h(data, data + head);
        const Checksums c = head == size ? Checksums::kVerify : Checksums::kSkip;
        if (parse_eth_ip_udp(h.data(), h.size(), size, &v, c) != NetError::kOk) continue;
        const size_t hdrs = size_t(v.l2_bytes) + v.l3_bytes + sizeof(UdpHdr);
        if (hdrs > head || hdrs + v.payload_bytes > size) abort();
        if ((v.ip == nullptr) == (v.ip6 == nullptr)) abort();
        if (v.ext_headers > kIpv6MaxExtHeaders) abort();
    }
    MrcPacket p;
    if (parse_mrc(f.data(), uint32_t(f.size()), 0, &p, Checksums::kVerify) == MrcError::kOk)
        check(p, size);
    // Connection management (mrcd's CONNECT / ACCEPT / REJECT / DISCONNECT).
    CmFields cm;
    if (parse_cm(f.data(), uint32_t(f.size()), 0, &cm) == CmError::kOk &&
        (cm.planes > kCmMaxPlanes || size < kCmBytes))
        abort();
    for (size_t cut : {size_t(42), size_t(54), size_t(82), size_t(90), size / 2}) {
        if (cut > size) continue;
        std::vector<uint8_t> head(data, data + cut), tail(data + cut, data + size);
        if (parse_mrc(head.data(), uint32_t(head.size()), tail.empty() ? nullptr : tail.data(),
                      uint32_t(tail.size()), 0, &p) == MrcError::kOk)
            check(p, size);
    }
    // What a host answers: as the owner of the address the frame asks for
    // (an ARP packet's target, an IP packet's destination) and of another.
    // An answer fits the room it was given and is never longer than the
    // request it turns around.
    for (size_t at : {size_t(38), size_t(30), size_t(0)}) {
        const uint32_t ip = size >= at + 4
                                ? uint32_t(data[at]) << 24 | uint32_t(data[at + 1]) << 16 |
                                      uint32_t(data[at + 2]) << 8 | data[at + 3]
                                : 1;
        std::vector<uint8_t> out(kMaxHostAnswerBytes);
        uint32_t n = 0;
        ArpFrom from;
        const HostAnswer h = answer_host(f.data(), uint32_t(f.size()), MacAddr{{2, 0, 0, 0, 0, 9}},
                                         ip, out.data(), uint32_t(out.size()), &n, &from);
        if (h == HostAnswer::kArpReply && n != kArpFrameBytes) abort();
        if (h == HostAnswer::kEchoReply && (n > size || n > out.size())) abort();
    }
    // The same over IPv6 (neighbour discovery, ICMPv6 echo): as the owner
    // of a solicitation's target (at 62) and of the destination (at 38).
    for (size_t at : {size_t(62), size_t(38)}) {
        Ipv6Addr ip6{};
        if (size >= at + 16) std::memcpy(ip6.b, data + at, 16);
        std::vector<uint8_t> out(kMaxHostAnswerBytes);
        uint32_t n = 0;
        NdFrom from;
        const HostAnswer h = answer_host6(f.data(), uint32_t(f.size()), MacAddr{{2, 0, 0, 0, 0, 9}},
                                          ip6, out.data(), uint32_t(out.size()), &n, &from);
        if (h == HostAnswer::kNdAdvert && n != kNdFrameBytes) abort();
        if (h == HostAnswer::kEchoReply && (n > size || n > out.size())) abort();
        if (h != HostAnswer::kNdAdvert && h != HostAnswer::kEchoReply && n != 0) abort();
        if (from.valid && (from.mac.b[0] & 1)) abort();  // never a multicast neighbour
    }
    if (size < 4096) {
        std::vector<uint8_t> t(f);
        const uint32_t l = trim_data_packet(t.data(), uint32_t(t.size()), size & 1);
        if (l) {
            if (parse_mrc(t.data(), l, 0, &p) != MrcError::kOk || !p.trimmed()) abort();
        }
    }
    return 0;
}
