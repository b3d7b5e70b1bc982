// What the server thread keeps about each application and its objects.
// Server thread only (the workers hold their own views, agent.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/ipc.h"
#include "daemon.h"
#include "wire/net.h"

namespace mrc::mrcd {

struct Daemon::MrRec {
    uint32_t key = 0;
    uint8_t *base = nullptr;  // the daemon's mapping
    uint64_t map_bytes = 0;
    uint64_t length = 0;
    uint64_t remote_base = 0;  // the application's address of the region
    uint32_t access = 0;       // MRC_ACCESS_ bits as the application gave them
    uint32_t service = 0;
};

struct Daemon::CqRec {
    uint32_t id = 0;
    uint32_t worker = 0;
    ipc::RingHdr *ring = nullptr;
    uint64_t map_bytes = 0;
    uint32_t entries = 0;
    // Doorbell bits of its QPs (ipc.h): the next never used, and those freed.
    uint32_t next_bell = 0;
    std::vector<uint32_t> free_bells;
};

struct Daemon::QpRec {
    uint32_t wire_qpn = 0;
    uint32_t client = 0;
    uint32_t worker = 0;
    uint32_t cq_id = 0;
    uint32_t bell = 0;             // its bit in the CQ's doorbell bitmap
    ipc::RingHdr *ring = nullptr;  // the send queue
    uint64_t map_bytes = 0;
    uint32_t entries = 0;
    int memfd = -1;  // until handed to the application (accept)
    bool connected = false;
    uint32_t service = 0;
    uint32_t peer_qpn = 0;
    uint8_t peer_planes = 0;
    uint32_t peer_ip[kMaxPlanes] = {};
    wire::MacAddr peer_mac[kMaxPlanes] = {};
    uint16_t peer_mtu_payload = 0;  // as its CONNECT / ACCEPT said (0: not said)
    uint64_t connected_ns = 0;
    bool answered = false;                       // accepted here: answered_ holds its key
    std::pair<uint32_t, uint64_t> answer_key{};  // (peer ip, conn_id)
};

struct Daemon::Listener {
    uint32_t client = 0;
    uint32_t cq_id = 0;
    uint32_t sq_depth = 0;
    std::deque<uint32_t> ready;  // accepted QPs the application has not taken yet
};

// A connect or accept an application waits for.
struct Daemon::Pending {
    enum Kind : uint8_t { kConnect, kAccept, kConnectMany } kind = kConnect;
    uint32_t client = 0;
    uint32_t seq = 0;  // of the request, for the reply
    uint64_t deadline_ns = 0;
    uint32_t service = 0;
    // kConnect only:
    uint64_t conn_id = 0;
    uint32_t qpn = 0;  // wire QPN of the connecting QP
    uint32_t peer_ip = 0;
    uint32_t psn = 0;  // our first PSN
    uint64_t next_send_ns = 0;
    bool in_batch = false;  // one QP of the client's kConnectMany
    uint32_t index = 0;     // ...its place in the batch
    // kConnectMany (the client's waiting entry): at most kConnectWindow of
    // its CONNECTs are out at a time (the peer's inbox is bounded).
    std::vector<uint32_t> batch_qpns;
    std::vector<int32_t> batch_status;
    uint32_t batch_next = 0;  // next to send
    uint32_t batch_open = 0;  // sent, not finished
    uint32_t batch_left = 0;  // not finished
    std::string batch_error;  // the first failure's text
};

struct Daemon::Client {
    uint32_t id = 0;
    int fd = -1;  // -1 once released
    pid_t pid = 0;
    uid_t uid = 0;
    std::string name;
    bool hello = false;
    std::map<uint32_t, MrRec> mrs;     // by key
    std::map<uint32_t, CqRec> cqs;     // by id
    std::vector<uint32_t> qps;         // wire QPNs
    std::vector<uint32_t> listens;     // services
    std::unique_ptr<Pending> waiting;  // a connect or accept in progress (one at a time)
    uint64_t requests = 0;
};

}  // namespace mrc::mrcd
