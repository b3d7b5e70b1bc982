// mrc-ports: bring up DPDK ports, report what they can do, and prove they
// carry frames intact.
//
//   mrc-ports [EAL args] -- [--port DEV]... [--mode info|pair|ping|echo] ...
//
// info  lists each port: driver, MAC, MTU, checksum offloads, link.
// pair  needs two ports in this process and moves frames both ways.
// ping  sends frames on one port and checks the echoes of a peer process
// echo  (the peer) checks each frame and returns it.
//
// Exit status: 0 all frames intact, 1 a frame was lost or wrong, 2 bad usage
// or a port that could not be brought up.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "app_dpdk.h"
#include "port/eal.h"
#include "port/port.h"
#include "port/selftest.h"
#include "wire/addr.h"

using namespace mrc;
using namespace mrc::drivers;

namespace {

using app::die;

nlohmann::json stats_json(const SelftestStats &s) {
    return {{"sent", s.sent},
            {"received", s.received},
            {"duplicates", s.duplicates},
            {"bad_cksum", s.bad_cksum},
            {"bad_payload", s.bad_payload},
            {"foreign", s.foreign},
            {"hw_cksum_checked", s.hw_cksum_checked},
            {"sw_cksum_checked", s.sw_cksum_checked},
            {"payload_bytes", s.payload_bytes}};
}

nlohmann::json port_json(const Port &p) {
    const auto &c = p.caps();
    const auto &m = p.mac().b;
    return {{"name", p.name()},
            {"id", p.id()},
            {"driver", p.driver()},
            {"mac", fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3],
                                m[4], m[5])},
            {"mtu", p.mtu_bytes()},
            {"queues", p.queues()},
            {"tx_ipv4_cksum_offload", c.tx_ipv4_cksum},
            {"tx_udp_cksum_offload", c.tx_udp_cksum},
            {"rx_ipv4_cksum_offload", c.rx_ipv4_cksum},
            {"rx_udp_cksum_offload", c.rx_udp_cksum},
            {"lsc_interrupt", c.lsc_interrupt},
            {"link", to_string(p.link())}};
}

int run(app::Args &args) {
    CLI::App cli{"mrc-ports: bring up DPDK ports and check that they carry frames intact"};
    std::vector<std::string> devices;
    std::string mode = "info";
    SelftestOptions o;
    std::string json_path, peer_mac;
    uint32_t link_timeout_ms = 5000;
    uint16_t mtu = 1500;
    cli.add_option("--port", devices,
                   "port name or devargs to hot-plug (repeatable; default: every probed port)");
    cli.add_option("--mode", mode, "info | pair | ping | echo")
        ->check(CLI::IsMember({"info", "pair", "ping", "echo"}));
    cli.add_option("--frames", o.frames, "frames per direction")->check(CLI::Range(1u, 100000000u));
    cli.add_option("--min-payload", o.min_payload_bytes, "smallest UDP payload, bytes")
        ->check(CLI::Range(12, 9000));
    cli.add_option("--max-payload", o.max_payload_bytes, "largest UDP payload, bytes")
        ->check(CLI::Range(12, 9000));
    cli.add_option("--window", o.window_frames, "frames in flight per direction")
        ->check(CLI::Range(1u, 4096u));
    cli.add_option("--idle-timeout-ms", o.idle_timeout_ms,
                   "give up after this long without progress");
    cli.add_option("--link-timeout-ms", link_timeout_ms, "wait this long for links to come up");
    cli.add_option("--udp-port", o.udp_port, "UDP port of the self-test frames");
    cli.add_option("--mtu", mtu, "IP MTU of every port, bytes")->check(CLI::Range(68, 9600));
    cli.add_option("--peer-mac", peer_mac,
                   "destination MAC of every frame (default: the other port's in pair mode, "
                   "broadcast in ping mode)");
    cli.add_option("--json", json_path, "write a JSON summary to this file ('-' for stdout)");
    if (auto rc = app::parse_cli(cli, args)) return *rc;
    if (!peer_mac.empty()) {
        o.dst_mac = wire::parse_mac(peer_mac);
        if (!o.dst_mac) die(fmt::format("--peer-mac '{}' is not a MAC address", peer_mac));
    }
    if (o.min_payload_bytes > o.max_payload_bytes)
        die("--min-payload is larger than --max-payload");
    if (devices.empty())
        for (const auto &p : list_ports())
            devices.push_back(p.name);
    if (devices.empty()) die("no ports: pass --vdev=<driver><n>,<args> to EAL or --port <devargs>");
    // info takes any number of ports; pair exactly two; ping and echo one.
    const size_t need = mode == "pair" ? 2 : 1;
    if (mode != "info" && devices.size() != need)
        die(fmt::format("--mode {} needs {} port(s), {} given", mode, need, devices.size()));

    PoolSizing sizing;
    sizing.ports = static_cast<uint32_t>(devices.size());
    sizing.rx_desc = 512;
    sizing.tx_desc = 512;
    auto pool =
        create_mbuf_pool("mrc_ports", mbufs_needed(sizing), mbuf_data_room_for_mtu(mtu), 128);
    if (!pool) die(pool.error().message);

    std::vector<std::unique_ptr<Port>> ports;
    for (const auto &d : devices) {
        PortOptions po;
        po.device = d;
        po.rx_desc = 512;
        po.tx_desc = 512;
        po.mtu_bytes = mtu;
        auto p = Port::open(po, *pool);
        if (!p) die(p.error().message);
        ports.push_back(std::move(p.value()));
    }
    // With --json - the JSON owns stdout; the human-readable lines go to stderr.
    FILE *human = json_path == "-" ? stderr : stdout;
    nlohmann::json out = {{"mode", mode}, {"ports", nlohmann::json::array()}};
    for (auto &p : ports) {
        const LinkState l = mode == "info" ? p->link() : p->wait_link_up(link_timeout_ms);
        const auto &c = p->caps();
        std::fprintf(human, "port %u %s driver=%s mtu=%u tx-cksum=%s/%s rx-cksum=%s/%s link=%s\n",
                     p->id(), p->name().c_str(), p->driver(), p->mtu_bytes(),
                     c.tx_ipv4_cksum ? "hw" : "sw", c.tx_udp_cksum ? "hw" : "sw",
                     c.rx_ipv4_cksum ? "hw" : "sw", c.rx_udp_cksum ? "hw" : "sw",
                     to_string(l).c_str());
        out["ports"].push_back(port_json(*p));
        if (mode != "info" && !l.up)
            die(fmt::format("port '{}': link did not come up within {} ms (is the peer running?)",
                            p->name(), link_timeout_ms));
    }
    std::fflush(human);

    bool clean = true;
    if (mode == "pair") {
        auto r = selftest_pair(*ports[0], *ports[1], *pool, o);
        if (!r) die(r.error().message);
        out["a_to_b"] = stats_json(r->a_to_b);
        out["b_to_a"] = stats_json(r->b_to_a);
        clean = r->a_to_b.clean(o.frames) && r->b_to_a.clean(o.frames);
        std::fprintf(human,
                     "pair %s -> %s: %lu/%u frames intact, %lu bad checksum, %lu bad payload\n",
                     ports[0]->name().c_str(), ports[1]->name().c_str(), r->a_to_b.received,
                     o.frames, r->a_to_b.bad_cksum, r->a_to_b.bad_payload);
        std::fprintf(human,
                     "pair %s -> %s: %lu/%u frames intact, %lu bad checksum, %lu bad payload\n",
                     ports[1]->name().c_str(), ports[0]->name().c_str(), r->b_to_a.received,
                     o.frames, r->b_to_a.bad_cksum, r->b_to_a.bad_payload);
    } else if (mode == "ping" || mode == "echo") {
        auto r = mode == "ping" ? selftest_ping(*ports[0], *pool, o)
                                : selftest_echo(*ports[0], *pool, o);
        if (!r) die(r.error().message);
        out["stats"] = stats_json(*r);
        clean = r->clean(o.frames);
        std::fprintf(
            human, "%s %s: %lu/%u frames intact, %lu bad checksum, %lu bad payload, %lu foreign\n",
            mode.c_str(), ports[0]->name().c_str(), r->received, o.frames, r->bad_cksum,
            r->bad_payload, r->foreign);
    }
    out["clean"] = clean;
    if (!json_path.empty())
        if (auto r = app::write_json_file(json_path, out); !r) die(r.error().message);
    ports.clear();
    rte_mempool_free(*pool);
    return clean ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
    return app::dpdk_main("mrc-ports", argc, argv, {.pdump = false}, run);
}
