// mrc-xdp: inspects and cleans up MRC's XDP steering program on interfaces
// that AF_XDP ports share with the kernel (docs/ports.md, "AF_XDP").
//
//   mrc-xdp [--json] status [IFACE...]   what is attached, in which mode, who owns it
//   mrc-xdp [--json] check IFACE...      would an af_xdp port start here? (changes nothing)
//   mrc-xdp detach IFACE [--force]       remove a steering program left by a dead process
//
// mrcd and mrc-gen do all of this themselves (a program left by a crashed
// run is removed at the next start); this is for operators who want to see
// or clean up without starting one.
//
// Exit status: 0 fine, 1 a check or detach failed, 2 bad usage.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include <net/if.h>

#include "xdp/steer.h"

using nlohmann::json;
using namespace mrc;

namespace {

std::vector<std::string> all_interfaces() {
    std::vector<std::string> out;
    if (struct if_nameindex *ni = if_nameindex()) {
        for (struct if_nameindex *i = ni; i->if_index != 0; ++i)
            out.emplace_back(i->if_name);
        if_freenameindex(ni);
    }
    return out;
}

json describe(const std::string &iface, const xdp::AttachedProg &p) {
    json j = {{"iface", iface}, {"prog_id", p.id}, {"mode", xdp::to_string(p.mode)}};
    if (p.id == 0) return j;
    j["name"] = p.name;
    j["mrc"] = p.ours();
    const xdp::Owner o = xdp::owner(iface);
    j["owner_pid"] = o.pid;
    j["owner_alive"] = o.alive;
    if (p.ours()) {
        if (auto s = xdp::read_stats(p))
            j["counters"] = {{"steered", s->redirected},
                             {"no_socket", s->no_socket},
                             {"other_address", s->addr_miss},
                             {"to_kernel", s->passed}};
    }
    return j;
}

void print(const json &j) {
    if (j["prog_id"].get<uint32_t>() == 0) {
        fmt::print("{}: no XDP program\n", j["iface"].get<std::string>());
        return;
    }
    std::string who;
    if (j["mrc"].get<bool>())
        who = j["owner_alive"].get<bool>()
                  ? fmt::format("MRC steering, owned by pid {}", j["owner_pid"].get<int>())
                  : "MRC steering, left by a process that is gone (a start removes it; or "
                    "`mrc-xdp detach`)";
    else
        who = "not MRC's";
    fmt::print("{}: '{}' id {} ({} mode), {}\n", j["iface"].get<std::string>(),
               j["name"].get<std::string>(), j["prog_id"].get<uint32_t>(),
               j["mode"].get<std::string>(), who);
    if (j.contains("counters")) {
        const json &c = j["counters"];
        fmt::print(
            "  {} steered to DPDK, {} to the kernel, {} MRC with no socket, {} MRC to "
            "another address\n",
            c["steered"].get<uint64_t>(), c["to_kernel"].get<uint64_t>(),
            c["no_socket"].get<uint64_t>(), c["other_address"].get<uint64_t>());
    }
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App cli{"mrc-xdp: MRC's XDP steering program on shared interfaces"};
    bool as_json = false;
    cli.add_flag("--json", as_json, "print JSON");
    cli.require_subcommand(1);
    std::vector<std::string> ifaces;
    auto *status = cli.add_subcommand("status", "what is attached to each interface");
    status->add_option("IFACE", ifaces, "interfaces (default: all in this namespace)");
    auto *chk = cli.add_subcommand("check", "would an af_xdp port start on these interfaces?");
    chk->add_option("IFACE", ifaces, "interfaces")->required();
    bool force = false;
    auto *det = cli.add_subcommand("detach", "remove MRC's program left by a process that died");
    det->add_option("IFACE", ifaces, "interfaces")->required();
    det->add_flag("--force", force, "also remove a program that is not MRC's");
    CLI11_PARSE(cli, argc, argv);

    int rc = 0;
    json out = json::array();
    if (status->parsed()) {
        if (ifaces.empty()) ifaces = all_interfaces();
        for (const auto &i : ifaces) {
            auto q = xdp::query(i);
            if (!q) {
                std::fprintf(stderr, "mrc-xdp: %s\n", q.error().message.c_str());
                rc = 1;
                continue;
            }
            out.push_back(describe(i, *q));
            if (!as_json) print(out.back());
        }
    } else if (chk->parsed()) {
        for (const auto &i : ifaces) {
            auto pf = xdp::check(i);
            json j = {{"iface", i}, {"ok", pf.ok()}};
            if (!pf) {
                j["error"] = pf.error().message;
                rc = 1;
                if (!as_json) std::fprintf(stderr, "mrc-xdp: %s\n", pf.error().message.c_str());
            } else {
                j["stale_program"] = pf->stale;
                if (!as_json)
                    fmt::print("{}: ready for an af_xdp port{}\n", i,
                               pf->stale ? fmt::format(" (MRC program id {} left by a process "
                                                       "that is gone: the start removes it)",
                                                       pf->attached.id)
                                         : "");
            }
            out.push_back(j);
        }
    } else if (det->parsed()) {
        for (const auto &i : ifaces) {
            auto r = xdp::detach_program(i, force);
            json j = {{"iface", i}, {"ok", r.ok()}};
            if (!r) {
                j["error"] = r.error().message;
                rc = 1;
                if (!as_json) std::fprintf(stderr, "mrc-xdp: %s\n", r.error().message.c_str());
            } else {
                j["removed_prog_id"] = r->id;
                if (!as_json)
                    fmt::print("{}: {}\n", i,
                               r->id ? fmt::format("removed '{}' (id {})", r->name, r->id)
                                     : std::string("no XDP program"));
            }
            out.push_back(j);
        }
    }
    if (as_json) fmt::print("{}\n", out.dump(1));
    return rc;
}
