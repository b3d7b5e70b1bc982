// The kernel's routes, neighbours and addresses over rtnetlink, for ports
// the kernel shares with the dataplane (AF_XDP): the kernel owns such an
// interface's address and hears its ARP, so what it resolved is read here
// instead of being resolved a second time.
//
// Linux only, no DPDK. Setup and control paths (a system call per query);
// never per packet. IPv4.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "wire/net.h"

namespace mrc::kernel {

// Where the kernel sends a packet for a destination.
struct Route {
    uint32_t gateway = 0;  // 0: the destination is on the link
    int oif = 0;           // output interface
    uint32_t prefsrc = 0;  // the source address the kernel would pick (0: none)
};

struct Neighbor {
    uint16_t state = 0;                // NUD_* of <linux/neighbour.h>
    std::optional<wire::MacAddr> mac;  // set when the entry can be used
};

struct IfAddr {
    uint32_t ip = 0;
    int prefix_len = 0;
    bool contains(uint32_t a) const {
        const uint32_t mask = prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
        return (a & mask) == (ip & mask);
    }
};

// "reachable", "stale", "incomplete", "failed"...: a NUD_* state by name.
std::string neighbor_state_name(uint16_t state);

// An rtnetlink socket of this network namespace. Every query waits at most
// a second for its answer.
class Netlink {
  public:
    static Result<Netlink> open();
    Netlink(Netlink &&o) noexcept : fd_(o.fd_), seq_(o.seq_) { o.fd_ = -1; }
    Netlink &operator=(Netlink &&o) noexcept;
    Netlink(const Netlink &) = delete;
    Netlink &operator=(const Netlink &) = delete;
    ~Netlink();

    // "ip route get DST [from SRC] oif IFINDEX": the route the kernel takes
    // to `dst` out of `ifindex`. An error when there is none: the kernel's
    // answer (no route, a local or unreachable destination), or a
    // destination the kernel would only assume on the link (no route names
    // this interface and no address of it covers `dst`).
    // `addrs`: the interface's addresses when the caller has them (many
    // routes read at once), else they are read when needed.
    Result<Route> route_to(uint32_t dst, uint32_t src, int ifindex,
                           const std::vector<IfAddr> *addrs = nullptr);

    // "ip neigh get IP dev IFINDEX": the entry's state, and its MAC when it
    // can be used (reachable, stale, delay, probe, permanent). No entry:
    // state 0, no MAC.
    Result<Neighbor> neighbor(int ifindex, uint32_t ip);

    // "ip neigh replace IP dev IFINDEX use": the kernel starts resolving
    // `ip` (an incomplete entry, ARP requests) if it has no usable entry.
    Result<void> resolve(int ifindex, uint32_t ip);

    // The interface's IPv4 addresses ("ip -4 addr show dev IFINDEX").
    Result<std::vector<IfAddr>> addresses(int ifindex);

  private:
    explicit Netlink(int fd) : fd_(fd) {}
    Result<Route> route_query(uint32_t dst, uint32_t src, int ifindex);
    // Sends one request and collects the answer's messages (a dump up to
    // its end); an NLMSG_ERROR with an error code becomes the Error.
    Result<std::vector<uint8_t>> request(std::vector<uint8_t> msg, bool dump);

    int fd_ = -1;
    uint32_t seq_ = 0;
};

// The interface index of `iface` (0: no such interface).
int ifindex(const std::string &iface);

// Parsers of the kernel's answers (one or more netlink messages), apart
// from the socket so that they can be tested on hand-made bytes.
Result<Route> parse_route(std::span<const uint8_t> answer);
Result<Neighbor> parse_neighbor(std::span<const uint8_t> answer);
Result<std::vector<IfAddr>> parse_addresses(std::span<const uint8_t> answer, int ifindex);

}  // namespace mrc::kernel
