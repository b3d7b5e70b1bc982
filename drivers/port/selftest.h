// Port self-test: moves Ethernet/IPv4/UDP frames between ports and checks
// each one byte for byte, checksums included.
//
// Used by the `mrc-ports` tool (and so by the smoke tests and the demo) to
// prove that a pair of ports, in one process or two, carries frames intact.
#pragma once

#include <cstdint>
#include <optional>

#include "common/result.h"
#include "port/port.h"

namespace mrc::drivers {

struct SelftestOptions {
    uint32_t frames = 1000;           // frames per direction
    uint16_t min_payload_bytes = 16;  // payload sizes cycle through [min, max]
    uint16_t max_payload_bytes = 1400;
    uint16_t udp_port = 9000;         // self-test frames only; not MRC's port
    uint32_t window_frames = 32;      // in flight per direction, so no ring overflows
    uint32_t idle_timeout_ms = 3000;  // give up after this long without progress
    uint16_t queue = 0;
    uint32_t src_ip = wire::ipv4(10, 99, 0, 1);
    uint32_t dst_ip = wire::ipv4(10, 99, 0, 2);
    // Destination MAC of every frame; default: the other port's (pair), or
    // broadcast (ping). A bridge delivers frames for its ports' own MACs
    // locally, so bridged kernel devices need broadcast here.
    std::optional<wire::MacAddr> dst_mac;
};

struct SelftestStats {
    uint64_t sent = 0;
    uint64_t received = 0;  // distinct self-test frames that arrived intact
    uint64_t duplicates = 0;
    uint64_t bad_cksum = 0;    // IPv4 or UDP checksum wrong (device flag or software check)
    uint64_t bad_payload = 0;  // checksums right but bytes or length not what was sent
    uint64_t foreign = 0;      // frames that are not ours (ARP, IPv6 ND, ...): ignored
    uint64_t hw_cksum_checked = 0;
    uint64_t sw_cksum_checked = 0;
    uint64_t payload_bytes = 0;

    bool clean(uint64_t expected) const {
        return received == expected && bad_cksum == 0 && bad_payload == 0;
    }
};

struct PairStats {
    SelftestStats a_to_b;
    SelftestStats b_to_a;
};

// Both ports in this process: frames go a -> b and b -> a at the same time.
Result<PairStats> selftest_pair(const Port &a, const Port &b, rte_mempool *pool,
                                const SelftestOptions &opts);

// Two processes: one side runs selftest_echo, the other selftest_ping. The
// echo side checks each request and returns it with addresses swapped (and
// checksums recomputed by its own port); the ping side checks the replies.
// Echo returns after answering `frames` requests or after the idle timeout.
Result<SelftestStats> selftest_echo(const Port &port, rte_mempool *pool,
                                    const SelftestOptions &opts);
Result<SelftestStats> selftest_ping(const Port &port, rte_mempool *pool,
                                    const SelftestOptions &opts);

}  // namespace mrc::drivers
