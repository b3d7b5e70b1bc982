// mrc-gen's parts: the options, what one end tells the other (Side), and
// the Generator. The files:
//   main.cc       the command line, then Generator::run and finish
//   options.cc    the flags and their checks
//   generator.cc  dataplane, QPs, regions; the run's dispatch and tick
//   session.cc    the client and server roles over the side channel
//   report.cc     the live line, the summary (JSON) and its printing
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app_tool.h"
#include "common/result.h"
#include "core/qp.h"
#include "dpdk/dataplane.h"
#include "gen.h"
#include "wire/addr.h"
#include "wire/neighbor.h"

namespace mrc::gen {

inline constexpr uint32_t kPd = 1;
// 2: the server says "ready" once it polls; 3: sides carry IPv6 plane addresses
inline constexpr int kProtocolVersion = 3;
inline constexpr uint16_t kDefaultOobPort = 18515;

using app::die;

struct Options {
    std::string role;
    std::vector<std::string> ports;
    std::vector<std::string> local_ip;
    std::vector<std::string> gateway;            // per plane; "none": on-link only
    std::vector<std::string> dscp_data{"0"};     // DSCP of data, one or one per plane
    std::vector<std::string> dscp_control{"0"};  // of acks, NACKs and probes
    std::vector<std::string> peer_ip;
    std::vector<std::string> peer_mac;
    std::string oob = "127.0.0.1:18515";
    uint32_t qps = 4;
    uint32_t msg_bytes = 65536;
    uint32_t depth = 4;
    std::string mode = "write";
    double duration_s = 0;
    uint64_t total_bytes = 0;
    double rate_gbps = 0;
    double stats_period_s = 1;
    std::string json_path;
    bool verify = false;
    uint16_t mtu = 1500;
    std::string cc = "nscc";
    double line_gbps = 25;
    uint32_t evs_per_plane = 16;
    std::string ev_range = "49152-65535";  // UDP source ports EVs are drawn from
    std::string idle = "busy";
    uint32_t idle_spin_us = 1000;
    bool zero_copy = false;
    bool no_udp_cksum = false;
    uint32_t ecn_full_bursts = 2;  // DataplaneConfig::ecn_full_bursts
    std::vector<std::string> cuts;
    double link_wait_s = 30;
    double timeout_s = 60;
    double control_us = 1000;
    uint32_t max_qps = 256;
    uint16_t mrc_port = wire::kDefaultMrcPort;
    std::string rto = "adaptive";
    uint32_t timeout_exp = 12;
    double rto_min_us = double(RetryPolicy{}.min_rto_ns) / 1000;
    double keepalive_ms = double(LivenessConfig{}.keepalive_ns) / 1e6;
    double peer_timeout_ms = double(LivenessConfig{}.peer_timeout_ns) / 1e6;
};

// The flags (docs/mrc-gen.md), and the checks that tie several together.
void add_options(CLI::App &cli, Options &o);
Result<void> check_options(Options &o);

// One value per plane: a single value applies to every plane.
template <typename T, typename F>
inline std::vector<T> per_plane(const std::vector<std::string> &in, uint8_t planes,
                                const char *flag, F parse) {
    std::vector<std::string> items;
    for (const auto &s : in) {
        size_t start = 0;
        while (start <= s.size()) {
            const size_t c = s.find(',', start);
            items.push_back(s.substr(start, c == std::string::npos ? c : c - start));
            if (c == std::string::npos) break;
            start = c + 1;
        }
    }
    if (items.size() != 1 && items.size() != planes)
        die(fmt::format("{}: give one value, or one per plane ({} planes)", flag, planes));
    std::vector<T> out;
    for (uint8_t p = 0; p < planes; ++p) {
        const std::string &s = items[items.size() == 1 ? 0 : p];
        auto v = parse(s);
        if (!v) die(fmt::format("{}: cannot parse '{}'", flag, s));
        out.push_back(*v);
    }
    return out;
}

struct Cut {
    uint8_t plane;
    double at_s;
    bool done = false;
};

// Everything one end knows about itself that the other end needs.
struct Side {
    std::vector<uint32_t> qpns, psns;
    std::vector<uint64_t> addrs;
    std::vector<uint32_t> rkeys;
    std::vector<uint32_t> ips;     // per plane; 0 on an IPv6 plane
    std::vector<std::string> ip6;  // per plane: the IPv6 address, "" on an IPv4 plane
    std::vector<std::string> macs;
    uint32_t mtu_payload = 0;  // the largest data payload its ports carry (0: not said)
};
nlohmann::json side_json(const Side &s);
std::optional<Side> side_from(const nlohmann::json &j, uint32_t qps, uint8_t planes,
                              std::string *why);

// One mrc-gen process: its dataplane, QPs and regions, the session with
// the peer over the side channel, and the report. run() does the whole job
// (a set-up failure throws app::Fatal); finish() prints the summary and
// returns the exit status.
class Generator {
  public:
    explicit Generator(Options o) : o_(std::move(o)) {}
    ~Generator() {
        dp_.reset();  // workers and ports first: they may point into the regions
        for (uint8_t *r : regions_)
            std::free(r);
    }
    Generator(const Generator &) = delete;
    Generator &operator=(const Generator &) = delete;

    void run();
    int finish();

  private:
    // generator.cc: set-up.
    void setup_dataplane();
    std::vector<uint32_t> local_ips(uint8_t planes) const;
    // --local-ip's IPv6 addresses, per plane (nullopt: an IPv4 plane).
    std::vector<std::optional<wire::Ipv6Addr>> local_ip6s(uint8_t planes) const;
    std::vector<wire::Route> plane_routes(uint8_t planes) const;
    std::vector<std::optional<wire::Route6>> plane_routes6(uint8_t planes) const;
    void create_qps();
    void connect_qps(const Side &peer);
    std::vector<wire::MacAddr> next_hop_macs(const Side &peer);
    uint64_t verify_write_slots(const nlohmann::json &slots, uint64_t *verified_bytes);
    bool any_link_up() const;
    // session.cc: the two roles. Each records what went wrong in failure_.
    void client();
    void server();
    // The step both roles' loops take every few milliseconds: the port
    // cuts that are due and the live line.
    void tick(double t);
    double elapsed_s() const;
    // report.cc.
    std::string stats_line(double t);
    nlohmann::json summary(double elapsed_s);

    Options o_;
    Role role_ = Role::kClient;
    Mode mode_ = Mode::kWrite;
    std::unique_ptr<dp::Dataplane> dp_;
    std::vector<std::unique_ptr<GenApp>> apps_;
    std::vector<uint8_t *> regions_;
    std::vector<uint64_t> region_bytes_;
    uint32_t slots_ = 0;
    uint8_t planes_ = 0;
    std::vector<uint32_t> local_ips_;
    std::vector<std::optional<wire::Ipv6Addr>> local_ip6_;
    std::vector<wire::Route> routes_;                   // per plane: prefix and gateway
    std::vector<std::optional<wire::Route6>> routes6_;  // IPv6 planes' ones
    std::vector<uint8_t> dscp_data_, dscp_control_;
    uint32_t mtu_payload_ = 0;  // the connection's, agreed with the peer
    std::vector<uint32_t> peer_ips_override_;
    std::vector<wire::MacAddr> peer_macs_override_;
    Side me_;
    std::vector<Cut> cuts_;
    QpConfig qcfg_;
    std::chrono::steady_clock::time_point t0_;
    // Live-line state.
    double next_stats_s_ = 0;
    uint64_t last_bytes_ = 0, last_frames_ = 0;
    double last_t_ = 0;
    // The outcome.
    nlohmann::json peer_result_;
    std::string failure_;
    double end_s_ = 0;
    nlohmann::json summary_;     // made before the ports close
    uint64_t own_verified_ = 0;  // server, write mode: slots checked after the run
    uint64_t own_verify_errors_ = 0;
};

}  // namespace mrc::gen
