// mrcctl: inspects and steers a running mrcd.
//
//   mrcctl [--socket PATH] [--json] status | ports | qps | evs
//   mrcctl [--socket PATH] deny|allow plane N
//   mrcctl [--socket PATH] deny|allow ev QPN EV
//
// Talks to mrcd over its socket (the same one applications use); deny and
// allow need root or mrcd's own user. The same data is in DPDK telemetry
// (/mrc/stats, /mrc/planes, /mrc/qps) for dpdk-telemetry.py.
//
// Exit status: 0 done, 1 the daemon refused or failed, 2 bad usage or no daemon.
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client/ipc.h"
#include "client/sock.h"
#include "cycles_text.h"
#include "mrc/mrc.h"

using nlohmann::json;

namespace {

int fail(const std::string &m, int rc = 2) {
    std::fprintf(stderr, "mrcctl: %s\n", m.c_str());
    return rc;
}

// One admin request; the reply's JSON, or an error message.
std::string ask(const std::string &path, const json &req, std::string *err) {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) {
        *err = "socket path too long";
        return {};
    }
    std::memcpy(a.sun_path, path.data(), path.size());
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        *err = fmt::format("cannot reach mrcd at {}: {}", path, std::strerror(errno));
        if (fd >= 0) ::close(fd);
        return {};
    }
    const std::string body = req.dump();
    std::vector<uint8_t> msg(sizeof(mrc::ipc::ReqHdr) + body.size());
    mrc::ipc::ReqHdr h{mrc::ipc::kMagic, mrc::ipc::kVersion, uint16_t(mrc::ipc::Op::kAdmin), 1,
                       uint32_t(body.size())};
    std::memcpy(msg.data(), &h, sizeof h);
    std::memcpy(msg.data() + sizeof h, body.data(), body.size());
    if (int r = mrc::ipc::send_msg(fd, msg.data(), msg.size()); r != 0) {
        *err = fmt::format("send: {}", std::strerror(-r));
        ::close(fd);
        return {};
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) {
        *err = "mrcd did not answer within 5 s";
        ::close(fd);
        return {};
    }
    std::vector<uint8_t> in(mrc::ipc::kMaxMessageBytes);
    const ssize_t n = mrc::ipc::recv_msg(fd, in.data(), in.size(), nullptr);
    ::close(fd);
    mrc::ipc::RepHdr rh;
    if (n < ssize_t(sizeof rh)) {
        *err = "mrcd closed the connection";
        return {};
    }
    std::memcpy(&rh, in.data(), sizeof rh);
    rh.message[sizeof rh.message - 1] = 0;
    if (rh.magic != mrc::ipc::kMagic || rh.body_bytes != size_t(n) - sizeof rh) {
        *err = "mrcd sent a malformed answer";
        return {};
    }
    if (rh.status != MRC_OK) {
        *err = fmt::format("mrcd: {} ({})", rh.message, mrc_strerror(rh.status));
        return {};
    }
    return std::string(reinterpret_cast<const char *>(in.data() + sizeof rh), rh.body_bytes);
}

void print_status(const json &j) {
    const json &d = j["daemon"];
    fmt::print("mrcd pid {}  up {:.1f} s  socket {}\n", d["pid"].get<int>(),
               d["uptime_s"].get<double>(), d["socket"].get<std::string>());
    fmt::print("planes {}  workers {}  clients {}  QPs {}  listeners {}{}\n",
               d["planes"].get<int>(), d["workers"].get<int>(), d["clients"].get<int>(),
               d["qps"].get<int>(), d["listeners"].get<int>(),
               d["draining"].get<bool>() ? "  (stopping)" : "");
    const json &t = j["traffic"];
    fmt::print("traffic: tx {} pkts  rx {} pkts  retransmissions {}  QPs in error {}\n",
               t["tx_packets"].get<uint64_t>(), t["rx_packets"].get<uint64_t>(),
               t["retransmissions"].get<uint64_t>(), t["qps_in_error"].get<uint64_t>());
    if (j.contains("cycles_per_packet"))
        fmt::print("cycles per packet (since start): {}\n",
                   mrc::app::cycles_text(j["cycles_per_packet"]));
    fmt::print("counters:");
    for (const auto &[k, v] : j["counters"].items())
        fmt::print(" {}={}", k, v.get<uint64_t>());
    fmt::print("\n");
    if (!j["clients"].empty()) {
        fmt::print("{:>4} {:<20} {:>8} {:>6} {:>5} {:>5} {:>7}\n", "id", "name", "pid", "uid",
                   "QPs", "CQs", "regions");
        for (const auto &c : j["clients"])
            fmt::print("{:>4} {:<20} {:>8} {:>6} {:>5} {:>5} {:>7}\n", c["id"].get<int>(),
                       c["name"].get<std::string>(), c["pid"].get<int>(), c["uid"].get<int>(),
                       c["qps"].get<int>(), c["cqs"].get<int>(), c["regions"].get<int>());
    }
}

void print_ports(const json &j) {
    fmt::print(
        "{:>5} {:<14} {:<10} {:<15} {:<5} {:<16} {:>12} {:>12} {:>9} {:>9} {:>8} {:>6} {:>6}\n",
        "plane", "port", "driver", "ip", "link", "health", "tx_pkts", "rx_pkts", "retx", "lost",
        "timeouts", "EVs", "bad");
    for (const auto &p : j["ports"])
        fmt::print(
            "{:>5} {:<14} {:<10} {:<15} {:<5} {:<16} {:>12} {:>12} {:>9} {:>9} {:>8} {:>6} {:>6}\n",
            p["plane"].get<int>(), p["port"].get<std::string>(), p["driver"].get<std::string>(),
            p["ip"].get<std::string>(), p["link"].get<std::string>(),
            p["health"].get<std::string>(), p["tx_packets"].get<uint64_t>(),
            p["rx_packets"].get<uint64_t>(), p["tx_retx_pkts"].get<uint64_t>(),
            p["lost_pkts"].get<uint64_t>(), p["ack_timeouts"].get<uint64_t>(),
            p["evs_total"].get<uint64_t>(), p["evs_assumed_bad"].get<uint64_t>());
    for (const auto &p : j["ports"])
        if (p.contains("xdp"))
            fmt::print(
                "plane {}: AF_XDP on {}, XDP program id {} ({} mode): {} steered to DPDK, "
                "{} to the kernel, {} MRC with no socket, {} MRC to another address\n",
                p["plane"].get<int>(), p["xdp"]["iface"].get<std::string>(),
                p["xdp"]["prog_id"].get<uint32_t>(), p["xdp"]["mode"].get<std::string>(),
                p["xdp"]["steered"].get<uint64_t>(), p["xdp"]["to_kernel"].get<uint64_t>(),
                p["xdp"]["no_socket"].get<uint64_t>(), p["xdp"]["other_address"].get<uint64_t>());
}

void print_neighbors(const json &j) {
    auto text = [](const json &v) { return v.is_string() ? v.get<std::string>() : "-"; };
    for (const auto &p : j["planes"]) {
        const std::string prefix =
            p["prefix_len"].is_number() ? "/" + std::to_string(p["prefix_len"].get<int>()) : "";
        fmt::print("plane {}: {}{} gateway {} ({})\n", p["plane"].get<int>(),
                   p["ip"].get<std::string>(), prefix, text(p["gateway"]),
                   p["resolution"].get<std::string>());
        const json &c = p["counters"];
        fmt::print(
            "  requests {} resolved {} failed {} unsolicited {} held {} hold_dropped {} "
            "expired {}\n",
            c["requests"].get<uint64_t>(), c["resolved"].get<uint64_t>(),
            c["failed"].get<uint64_t>(), c["unsolicited"].get<uint64_t>(),
            c["held"].get<uint64_t>(), c["hold_dropped"].get<uint64_t>(),
            c["expired"].get<uint64_t>());
        if (p["entries"].empty()) continue;
        fmt::print("  {:<15} {:<17} {:<10} {:>14} {:>6} {:>5}\n", "ip", "mac", "state",
                   "confirmed_ms", "probes", "held");
        for (const auto &e : p["entries"]) {
            const std::string age = e["confirmed_ms_ago"].is_number()
                                        ? fmt::format("{:.0f}", e["confirmed_ms_ago"].get<double>())
                                        : "-";
            fmt::print("  {:<15} {:<17} {:<10} {:>14} {:>6} {:>5}\n", e["ip"].get<std::string>(),
                       text(e["mac"]), e["state"].get<std::string>(), age, e["probes"].get<int>(),
                       e["held"].get<uint64_t>());
        }
    }
}

void print_qps(const json &j) {
    fmt::print("{:>8} {:>6} {:<6} {:<15} {:>8} {:>6} {:>10} {:>12} {:>8} {:>14}  {}\n", "qpn",
               "client", "state", "peer", "peer_qpn", "planes", "window", "tx_data", "retx",
               "rx_bytes", "EVs good/skip/bad/denied");
    for (const auto &q : j["qps"]) {
        const json &e = q["evs"];
        std::string evs;
        for (const auto &[k, v] : e.items())
            evs += (evs.empty() ? "" : "/") + std::to_string(v.get<uint32_t>());
        fmt::print("{:>8} {:>6} {:<6} {:<15} {:>8} {:>#6x} {:>10} {:>12} {:>8} {:>14}  {}{}\n",
                   q["qpn"].get<uint32_t>(), q.value("client", 0u), q["state"].get<std::string>(),
                   q.value("peer", std::string("-")), q.value("peer_qpn", 0u),
                   q["usable_planes"].get<uint32_t>(), q["window_bytes"].get<uint64_t>(),
                   q["tx_data_pkts"].get<uint64_t>(), q["tx_retx_pkts"].get<uint64_t>(),
                   q["rx_data_bytes"].get<uint64_t>(), evs,
                   q.contains("error") ? "  error: " + q["error"].get<std::string>() : "");
    }
}

void print_evs(const json &j) {
    fmt::print("EV states over all QPs:");
    for (const auto &[k, v] : j["ev_states"].items())
        fmt::print(" {}={}", k, v.get<uint64_t>());
    fmt::print("\n");
    for (const auto &d : j["denied_evs"])
        fmt::print("denied: QP {} EV {}\n", d["qpn"].get<uint32_t>(), d["ev"].get<uint32_t>());
}

}  // namespace

int main(int argc, char **argv) {
    std::string socket;
    bool as_json = false;
    std::vector<std::string> words;
    CLI::App cli{"mrcctl: inspect and steer a running mrcd", "mrcctl"};
    cli.add_option("--socket", socket,
                   "mrcd's socket (default: $MRC_SOCKET, else " MRC_DEFAULT_SOCKET ")");
    cli.add_flag("--json", as_json, "print the daemon's JSON answer");
    cli.add_option(
           "command", words,
           "status | ports | neighbors | qps | evs | deny|allow plane N | deny|allow ev QPN EV")
        ->required();
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        const int rc = cli.exit(e);
        return rc == 0 ? 0 : 2;
    }
    if (socket.empty()) {
        const char *env = std::getenv("MRC_SOCKET");
        socket = env && *env ? env : MRC_DEFAULT_SOCKET;
    }
    json req;
    const std::string &cmd = words[0];
    auto number = [&](size_t i, uint64_t max, uint64_t *out) {
        if (i >= words.size()) return false;
        char *end = nullptr;
        errno = 0;
        const unsigned long long v = std::strtoull(words[i].c_str(), &end, 0);
        if (errno || *end || v > max) return false;
        *out = v;
        return true;
    };
    if (cmd == "status" || cmd == "ports" || cmd == "neighbors" || cmd == "qps" || cmd == "evs") {
        if (words.size() != 1) return fail("'" + cmd + "' takes no arguments");
        req["cmd"] = cmd;
    } else if (cmd == "deny" || cmd == "allow") {
        req["cmd"] = cmd;
        uint64_t a = 0, b = 0;
        if (words.size() == 3 && words[1] == "plane" && number(2, 255, &a)) {
            req["plane"] = a;
        } else if (words.size() == 4 && words[1] == "ev" && number(2, 0xffffff, &a) &&
                   number(3, 65535, &b)) {
            req["qpn"] = a;
            req["ev"] = b;
        } else {
            return fail("usage: mrcctl " + cmd + " plane N | " + cmd + " ev QPN EV");
        }
    } else {
        return fail("unknown command '" + cmd +
                    "' (status, ports, neighbors, qps, evs, deny, allow)");
    }
    std::string err;
    json j;
    // "qps" comes a page at a time (thousands of QPs do not fit one
    // answer): ask on from where the last page ended, and join the pages.
    for (uint64_t pages = 0;; ++pages) {
        const std::string out = ask(socket, req, &err);
        if (!err.empty()) return fail(err);
        json page = json::parse(out, nullptr, false);
        if (page.is_discarded()) return fail("mrcd sent something that is not JSON", 1);
        if (page.contains("error")) {
            if (as_json) std::printf("%s\n", page.dump(2).c_str());
            return fail(page["error"].get<std::string>(), 1);
        }
        const bool more =
            cmd == "qps" && page.contains("next") && page["next"].is_number_unsigned();
        const uint64_t next = more ? page["next"].get<uint64_t>() : 0;
        if (pages == 0) {
            j = std::move(page);
        } else {
            if (!page.contains("qps") || !page["qps"].is_array())
                return fail("mrcd sent a page of QPs without \"qps\"", 1);
            for (auto &q : page["qps"])
                j["qps"].push_back(std::move(q));
        }
        if (!more) break;
        if ((req.contains("from") && next <= req["from"].get<uint64_t>()) || pages > (1u << 20))
            return fail("mrcd's pages of QPs do not advance", 1);
        req["from"] = next;
    }
    j.erase("next");
    if (as_json) {
        std::printf("%s\n", j.dump(2).c_str());
        return 0;
    }
    if (cmd == "status")
        print_status(j);
    else if (cmd == "ports")
        print_ports(j);
    else if (cmd == "neighbors")
        print_neighbors(j);
    else if (cmd == "qps")
        print_qps(j);
    else if (cmd == "evs")
        print_evs(j);
    else
        std::printf("ok\n");
    return 0;
}
