// mrcd's configuration: one TOML file (config/mrcd.toml is the annotated
// example). Every error names the file, the table and the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "core/config.h"
#include "dpdk/dataplane.h"
#include "wire/addr.h"
#include "wire/neighbor.h"
#include "wire/net.h"

namespace mrc::mrcd {

struct Neighbor {
    uint32_t ip = 0;  // host order
    wire::MacAddr mac{};
};

struct DaemonConfig {
    // [daemon]
    std::string socket = "/run/mrcd/mrcd.sock";
    uint32_t socket_mode = 0660;  // of the socket file: who may use the daemon
    std::string socket_group;     // group owning the socket ("" : the daemon's)
    uint32_t max_clients = 64;
    uint32_t max_qps_per_client = 1024;
    uint32_t max_mrs_per_client = 256;
    uint64_t max_region_bytes = uint64_t{1} << 34;  // one region
    uint32_t drain_ms = 2000;                       // on SIGTERM: time for in-flight work to finish
    uint32_t connect_resend_ms = 100;               // CONNECT repeats until answered
    // [dataplane] (see dp::DataplaneConfig)
    dp::DataplaneConfig dp;
    // [[plane]]: this host's IPv4 address on each plane, in port order.
    std::vector<uint32_t> plane_ip;
    // [[plane]]: the same with its prefix and gateway (wire/neighbor.h):
    // peers off the subnet are reached through the gateway.
    std::vector<wire::Route> plane_route;
    // [[plane]]: the traffic classes (DSCP) of what this host sends on each
    // plane: data, its control packets (acks, NACKs, probes), CM frames.
    struct PlaneDscp {
        uint8_t data = 0, control = 0, cm = 0;
    };
    std::vector<PlaneDscp> plane_dscp;
    // [qp]
    QpConfig qp;
    uint32_t evs_per_plane = 16;
    // [[neighbor]]: MAC addresses of next hops (peers on-link, gateways),
    // overriding ARP.
    std::vector<Neighbor> neighbors;
};

// Parses a config file, or TOML text when `text` is not empty (tests).
Result<DaemonConfig> load_config(const std::string &path, const std::string &text = "");

// wire/addr.h's parsers, with the error a configuration file reports.
Result<uint32_t> parse_ip(const std::string &s);
Result<wire::MacAddr> parse_mac(const std::string &s);

}  // namespace mrc::mrcd
