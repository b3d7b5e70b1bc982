// What the server thread asks a worker's Agent to do (agent.h). The server
// never touches a QP, a CQ ring or a worker's region table itself: it fills
// one of the structs below, hands it to the owning worker over that
// worker's SPSC command ring and waits until the Agent has run it
// (Daemon::run_on). Set-up path only.
//
// Each command carries exactly the fields it needs; the few that answer
// with a value have an answer field, written by the worker. Whether a
// command worked, and why not, is in Command::answer.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "client/ipc.h"
#include "core/config.h"
#include "core/qp.h"

namespace mrc::mrcd {

namespace cmd {

// Registers a region in the worker's table under `key` (chosen by the server).
struct RegMr {
    uint32_t client = 0;  // the owner: only its QPs may post from the region
    uint32_t key = 0;
    uint8_t *base = nullptr;  // the daemon's mapping
    uint64_t length = 0;
    uint64_t remote_base = 0;  // the application's address of the region
    uint32_t access = 0;       // core access bits (kAccessRemoteWrite)
    uint32_t pd = 0;           // protection domain (0: no remote access)
};

// Takes a region out of the worker's table; refused while work requests
// read it, unless `force` (the owner is gone and its QPs are destroyed).
struct DeregMr {
    uint32_t key = 0;
    bool force = false;
};

// Places a completion ring on the worker.
struct AddCq {
    uint32_t cq_id = 0;
    ipc::RingHdr *ring = nullptr;
    uint32_t bells = 0;  // bits of its doorbell bitmap
};

struct DelCq {
    uint32_t cq_id = 0;
};

// Creates a QP fed by the send-queue ring `sq_ring`, completing into CQ `cq_id`.
struct CreateQp {
    uint32_t client = 0;
    uint32_t cq_id = 0;
    ipc::RingHdr *sq_ring = nullptr;
    uint32_t bell = 0;  // its bit in the CQ's doorbell bitmap
    QpConfig config;
    uint32_t wire_qpn = 0;  // answer: the QP's number on the wire
};

// Brings a QP up towards its peer: INIT, RTR, RTS.
struct ConnectQp {
    uint32_t wire_qpn = 0;
    uint32_t pd = 0;
    QpPeer peer;
    uint32_t expected_psn = 0;  // the peer's first PSN
    uint32_t start_psn = 0;     // ours
};

struct DestroyQp {
    uint32_t wire_qpn = 0;
};

// Moves a QP to the error state; `status` is what its QP event reports.
struct ErrorQp {
    uint32_t wire_qpn = 0;
    uint8_t status = 0;
};

// Points the paths of some QPs on one plane at another next hop (the
// gateway changed its MAC, or answered after they came up).
struct SetNextHop {
    uint8_t plane = 0;
    wire::MacAddr mac{};
    std::vector<uint32_t> wire_qpns;
};

// Sends connection-management frames (worker 0).
struct SendCm {
    std::vector<std::pair<uint8_t, std::vector<uint8_t>>> frames;  // (plane, frame)
    uint64_t sent = 0;                                             // answer: frames the ports took
};

// Counts the work the worker's QPs still have to finish (shutdown drain).
struct CountOutstanding {
    uint64_t work = 0;  // answer: requests in the core or the rings, QPs not yet flushed
};

// Fails every QP of the worker with DAEMON_SHUTDOWN.
struct Shutdown {};

}  // namespace cmd

using CommandBody = std::variant<cmd::RegMr, cmd::DeregMr, cmd::AddCq, cmd::DelCq, cmd::CreateQp,
                                 cmd::ConnectQp, cmd::DestroyQp, cmd::ErrorQp, cmd::SetNextHop,
                                 cmd::SendCm, cmd::CountOutstanding, cmd::Shutdown>;

struct CommandAnswer {
    bool ok = true;
    std::string error;  // when !ok
};

// One command in flight: the server owns it and waits on `done`.
struct Command {
    explicit Command(CommandBody b) : body(std::move(b)) {}
    CommandBody body;
    CommandAnswer answer;
    std::atomic<bool> done{false};
};

}  // namespace mrc::mrcd
