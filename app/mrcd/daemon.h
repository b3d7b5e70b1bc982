// mrcd: the sidecar daemon. It owns the dataplane (ports, workers, control
// thread) and serves applications over a Unix socket and shared memory.
//
// Threads:
//   - the server thread (main): the socket, every client's objects, the
//     connection manager (CONNECT / ACCEPT on the wire), mrcctl requests;
//   - worker lcores: each runs an Agent (agent.h) inside its poll loop: it
//     takes work requests from the send-queue rings of its QPs, posts them
//     to the core, and writes completions into the completion rings;
//   - the dataplane's control thread (path scoring, link state).
// The server never touches a QP: it sends commands (command.h) to the
// owning worker over an SPSC ring and waits for the answer (set-up path
// only). Worker 0 receives every connection-management frame and passes it
// on over another SPSC ring (CmInbox).
//
// The Daemon's members are defined in one file per job:
//   daemon.cc    lifecycle: create, socket, clients in and out, run loop, shutdown
//   requests.cc  the applications' requests, one function per IPC op
//   cm.cc        connection management on the wire, timeouts
//   admin.cc     the mrcctl protocol (JSON)
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "agent.h"
#include "client/ipc.h"
#include "command.h"
#include "config.h"
#include "counters.h"
#include "dpdk/dataplane.h"
#include "kernel/netlink.h"
#include "wire/cm.h"
#include "wire/neighbor.h"

namespace mrc::mrcd {

class Daemon {
  public:
    // The dataplane is created (not started) by the caller.
    static Result<std::unique_ptr<Daemon>> create(const DaemonConfig &cfg, dp::Dataplane *dp);
    ~Daemon();

    // Serves until `stop` is set, then lets in-flight work finish (up to
    // drain_ms), fails what is left with DAEMON_SHUTDOWN completions and
    // closes every client. The dataplane must be running.
    void run(const std::atomic<bool> &stop);

    const DaemonCounters &counters() const { return ctr_; }

  private:
    // records.h
    struct Client;
    struct Pending;
    struct MrRec;
    struct CqRec;
    struct QpRec;
    struct Listener;

    Daemon(const DaemonConfig &cfg, dp::Dataplane *dp);

    // Lifecycle (daemon.cc).
    Result<void> open_socket();
    void accept_clients();
    void release(Client &c);
    void begin_drain();
    void serve_clients(std::vector<pollfd> &fds, std::vector<uint32_t> &ids);
    void publish_telemetry();
    uint64_t outstanding();
    void shutdown_qps();
    void close_clients();

    // Commands to the workers: runs `body` on `worker` and waits for the
    // answer. An lvalue body gets the command's answer fields back.
    template <typename T>
    CommandAnswer run_on(uint32_t worker, T &&body);
    void send_and_wait(uint32_t worker, Command &cmd);

    // Requests (requests.cc).
    void on_client(Client &c);
    void on_request(Client &c, const uint8_t *msg, size_t n, int fd);
    bool refuse_header(Client &c, const ipc::ReqHdr &h, size_t n);
    bool refuse_now(Client &c, const ipc::ReqHdr &h);
    void dispatch(Client &c, const ipc::ReqHdr &h, const uint8_t *body, int fd);
    template <typename Req>
    std::optional<Req> decode(Client &c, const ipc::ReqHdr &h, const uint8_t *body);
    void reply(Client &c, uint16_t op, uint32_t seq, int status, const std::string &msg,
               const void *body = nullptr, size_t len = 0, int fd = -1, int fd2 = -1);
    void do_hello(Client &c, uint32_t seq, ipc::HelloReq req);
    void do_reg_mr(Client &c, uint32_t seq, const ipc::RegMrReq &req, int fd);
    void do_dereg_mr(Client &c, uint32_t seq, const ipc::KeyReq &req);
    void do_create_cq(Client &c, uint32_t seq, const ipc::CreateCqReq &req);
    void do_destroy_cq(Client &c, uint32_t seq, const ipc::KeyReq &req);
    void do_create_qp(Client &c, uint32_t seq, const ipc::CreateQpReq &req);
    void do_destroy_qp(Client &c, uint32_t seq, const ipc::KeyReq &req);
    void do_connect(Client &c, uint32_t seq, const ipc::ConnectReq &req);
    void do_connect_many(Client &c, uint32_t seq, const uint8_t *body, uint32_t len);
    // A CONNECT of QP `qpn` sent and waited for (connecting_).
    Pending &start_connect(Client &c, uint32_t seq, uint32_t qpn, uint32_t service,
                           uint32_t peer_ip, uint64_t deadline_ns);
    void send_batch(Client &c);
    // A connect ended (answered, refused, timed out): the application's
    // reply, or its place in the batch. `p` may be gone when this returns.
    void finish_connect(Client &c, const Pending &p, int status, const std::string &msg);
    void do_listen(Client &c, uint32_t seq, const ipc::ListenReq &req);
    void do_accept(Client &c, uint32_t seq, const ipc::AcceptReq &req);
    void do_admin(Client &c, uint32_t seq, const uint8_t *body, size_t n);
    void complete_accept(Client &c, QpRec &q);

    // Objects (requests.cc).
    std::optional<std::pair<int, std::string>> check_reg_mr(const Client &c,
                                                            const ipc::RegMrReq &req, int fd) const;
    static uint64_t map_bytes_of(uint64_t length);
    uint32_t take_mr_key();
    cmd::RegMr reg_mr_command(uint32_t client, const MrRec &m);
    void dereg_everywhere(uint32_t key, uint32_t workers, bool force);
    // A QP of client c; when refused, *status is MRC_EINVAL (a bad CQ or
    // depth) or MRC_ENOMEM (a limit or the worker's QP table reached).
    Result<QpRec *> new_qp(Client &c, uint32_t cq_id, uint32_t sq_depth, int *status);
    void destroy_qp(Client &c, uint32_t qpn, bool tell_peer);
    uint32_t pd_of(uint32_t client, uint32_t service);
    // A shared ring (a CQ's with a doorbell bitmap of bell_bits bits).
    Result<std::pair<int, ipc::RingHdr *>> make_ring(uint32_t entries, size_t entry_bytes,
                                                     const char *name, uint32_t bell_bits = 0);

    // Connection management (cm.cc).
    void poll_cm();
    void on_cm(const uint8_t *frame, uint32_t len, uint8_t plane);
    struct CmFrom;
    void on_connect(const wire::CmFields &f, const CmFrom &from, uint64_t now);
    void on_answer(const wire::CmFields &f, const CmFrom &from, uint64_t now);
    void on_disconnect(const wire::CmFields &f, const CmFrom &from);
    bool answer_repeat(const wire::CmFields &f, const CmFrom &from);
    void send_answer(wire::CmFields ans, const CmFrom &from);
    // CM frames are gathered while a batch is open and handed to the
    // worker kCmBatchFrames at a time, not one command each.
    void begin_cm_batch();
    void end_cm_batch();
    void send_cm(const wire::CmFields &f, uint8_t plane_mask, const uint32_t *dst_ip,
                 const wire::MacAddr *dst_mac);
    void send_connect(Pending &p);
    void send_disconnect(const QpRec &q);
    void disconnect_stray(const wire::CmFields &accept, const CmFrom &from);
    cmd::ConnectQp connect_command(QpRec &r, const wire::CmFields &f, uint32_t pd,
                                   const CmFrom &from);
    wire::CmFields connect_fields(const Pending &p) const;
    std::string no_answer_message(uint32_t peer_ip);
    std::string no_route(uint32_t peer_ip);
    // Next hops (cm.cc): the plane's route, then its neighbour table.
    enum class Hop : uint8_t { kKnown, kPending, kUnreachable };
    bool resolves(uint8_t plane) const;
    uint32_t next_hop(uint8_t plane, uint32_t dst);
    struct KernelHop;
    const KernelHop &kernel_hop(uint8_t plane, uint32_t dst);
    KernelHop kernel_route(uint8_t plane, uint32_t dst,
                           const std::vector<kernel::IfAddr> *addrs = nullptr);
    void follow_kernel(uint64_t now);
    Hop next_hop_mac(uint8_t plane, uint32_t dst, uint64_t now, std::optional<uint64_t> waiter,
                     wire::MacAddr *mac);
    wire::MacAddr path_mac(uint8_t plane, uint32_t dst, const wire::MacAddr &peer_said,
                           const CmFrom &from, uint64_t now);
    void send_arp_request(uint8_t plane, uint32_t ip);
    void on_arp(const uint8_t *frame, uint32_t len, uint8_t plane, uint64_t now);
    void neighbor_timeouts(uint64_t now);
    void follow_next_hop(uint8_t plane, uint32_t ip, const wire::MacAddr &mac);
    std::optional<wire::MacAddr> kernel_mac(uint8_t plane, uint32_t ip, uint64_t now, bool ask);
    void connect_on(uint64_t conn_id, uint8_t plane, bool failed, uint64_t now);
    void timeouts();
    void connect_timeouts(uint64_t now);
    void accept_timeouts(uint64_t now);
    wire::MacAddr neighbor_mac(uint32_t ip) const;
    wire::CmFields my_addrs() const;

    // mrcctl (admin.cc).
    std::string admin(const std::string &request, const Client &c);
    std::string admin_status();
    std::string admin_ports();
    std::string admin_neighbors();
    std::string admin_qps(bool per_qp, uint64_t from);
    std::string admin_deny(const nlohmann::json &req, const std::string &cmd, const Client &c);
    std::string admin_error(const std::string &message);

    DaemonConfig cfg_;
    dp::Dataplane *dp_;
    std::vector<std::unique_ptr<Agent>> agents_;
    CmInbox cm_in_;                           // worker 0 -> server
    std::vector<wire::NeighborTable> neigh_;  // per plane
    // AF_XDP planes follow the kernel's routes and neighbours (cm.cc):
    // its interface per plane, the route to each peer as last read, each
    // next hop's MAC as the QPs were last pointed at it, and when the kernel
    // was last asked to resolve an address.
    struct KernelHop {
        uint32_t next_hop = 0;  // 0: unreachable
        bool kernel = false;    // from the kernel's route (else the config's)
        std::string why;        // why the kernel had none
    };
    std::optional<kernel::Netlink> nl_;
    std::vector<int> kernel_ifindex_;  // per plane; 0: not AF_XDP
    std::map<std::pair<uint8_t, uint32_t>, KernelHop> kernel_hops_;
    std::map<std::pair<uint8_t, uint32_t>, wire::MacAddr> kernel_macs_;
    std::map<std::pair<uint8_t, uint32_t>, uint64_t> kernel_asked_ns_;
    uint64_t next_kernel_check_ns_ = 0;
    int listen_fd_ = -1;
    std::string socket_path_;
    std::map<uint32_t, std::unique_ptr<Client>> clients_;  // by id
    uint32_t next_client_ = 1;
    uint32_t next_cq_ = 1;
    uint32_t next_pd_ = 1;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> pds_;     // (client, service) -> pd
    std::unordered_map<uint32_t, std::unique_ptr<QpRec>> qps_;  // by wire QPN
    std::map<uint32_t, Listener> listeners_;                    // by service
    std::map<uint64_t, std::unique_ptr<Pending>> connecting_;   // by conn_id
    // Answers to CONNECTs already taken, for repeats: (peer ip, conn_id).
    struct Answer {
        uint32_t qpn = 0;
        uint32_t psn = 0;
        uint64_t at_ns = 0;
    };
    // Key: (peer ip, conn_id).
    using AnswerKey = std::pair<uint32_t, uint64_t>;
    struct AnswerKeyHash {
        size_t operator()(const AnswerKey &k) const {
            return std::hash<uint64_t>{}(k.second ^ (uint64_t{k.first} * 0x9e3779b97f4a7c15ull));
        }
    };
    static AnswerKey answer_key(uint32_t ip, uint64_t conn_id) { return {ip, conn_id}; }
    std::unordered_map<AnswerKey, Answer, AnswerKeyHash> answered_;
    // The same keys in the order they were answered (at_ns never goes
    // back): expiry pops the front, so a server loop looks at no more than
    // what expires. A key destroyed early is skipped when its turn comes.
    std::deque<std::pair<uint64_t, AnswerKey>> answered_order_;
    // MR keys: one slot allocator for every worker's table.
    std::vector<uint8_t> mr_gen_;
    std::vector<uint32_t> mr_free_;
    uint32_t next_worker_ = 0;
    std::mt19937_64 rng_;
    DaemonCounters ctr_;
    bool draining_ = false;
    std::optional<cmd::SendCm> cm_batch_;
    uint32_t cm_batch_depth_ = 0;
    uint64_t started_ns_ = 0;
};

template <typename T>
CommandAnswer Daemon::run_on(uint32_t worker, T &&body) {
    using Body = std::remove_cvref_t<T>;
    Command c{CommandBody{std::in_place_type<Body>, std::forward<T>(body)}};
    send_and_wait(worker, c);
    if constexpr (std::is_lvalue_reference_v<T> && !std::is_const_v<std::remove_reference_t<T>>)
        body = std::move(std::get<Body>(c.body));
    return std::move(c.answer);
}

}  // namespace mrc::mrcd
