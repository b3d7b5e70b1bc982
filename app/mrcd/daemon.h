// mrcd: the sidecar daemon. It owns the dataplane (ports, workers, control
// thread) and serves applications over a Unix socket and shared memory.
//
// Threads:
//   - the server thread (main): the socket, every client's objects, the
//     connection manager (CONNECT / ACCEPT on the wire), mrcctl requests;
//   - worker lcores: each runs an Agent (below) inside its poll loop: it
//     takes work requests from the send-queue rings of its QPs, posts them
//     to the core, and writes completions into the completion rings;
//   - the dataplane's control thread (path scoring, link state).
// The server never touches a QP: it sends Commands to the owning worker
// over an SPSC ring and waits for the answer (set-up path only). Worker 0
// receives every connection-management frame and passes it on over another
// SPSC ring.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/ipc.h"
#include "config.h"
#include "dpdk/dataplane.h"
#include "wire/cm.h"

struct rte_ring;

namespace mrc::mrcd {

class Agent;

// What mrcd counts besides the dataplane's counters (mrcctl status).
struct DaemonCounters {
    uint64_t clients_accepted = 0;
    uint64_t clients_refused = 0;  // over max_clients, or no credentials
    uint64_t requests = 0;
    uint64_t bad_requests = 0;   // malformed, wrong version, out of range
    uint64_t connects_sent = 0;  // CONNECT frames
    uint64_t connects_received = 0;
    uint64_t accepts = 0;  // connections set up (either side)
    uint64_t rejects_sent = 0;
    uint64_t disconnects_sent = 0;
    uint64_t disconnects_received = 0;
    uint64_t cm_bad = 0;            // CM frames that did not parse or matched nothing
    uint64_t cm_duplicates = 0;     // copies of CM frames already acted on (every plane gets one)
    uint64_t cm_dropped = 0;        // CM frames lost because the server was behind
    uint64_t clients_released = 0;  // closed or died
};

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
    friend class Agent;
    struct Client;
    struct Pending;
    struct MrRec;
    struct CqRec;
    struct QpRec;
    struct Listener;
    struct Outgoing;
    struct Command;
    struct CmIn;

    Daemon(const DaemonConfig &cfg, dp::Dataplane *dp);
    Result<void> open_socket();
    void accept_clients();
    void on_client(Client &c);
    void reply(Client &c, uint16_t op, uint32_t seq, int status, const std::string &msg,
               const void *body = nullptr, size_t len = 0, int fd = -1);
    void release(Client &c);

    // Requests.
    void do_hello(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_reg_mr(Client &c, uint32_t seq, const uint8_t *b, size_t n, int fd);
    void do_dereg_mr(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_create_cq(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_destroy_cq(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_create_qp(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_destroy_qp(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_connect(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_listen(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_accept(Client &c, uint32_t seq, const uint8_t *b, size_t n);
    void do_admin(Client &c, uint32_t seq, const uint8_t *b, size_t n);

    // Objects.
    Result<QpRec *> new_qp(Client &c, uint32_t cq_id, uint32_t sq_depth);
    void destroy_qp(Client &c, uint32_t qpn, bool tell_peer);
    uint32_t pd_of(uint32_t client, uint32_t service);
    void run_on(uint32_t worker, Command &cmd);
    Result<std::pair<int, ipc::RingHdr *>> make_ring(uint32_t entries, size_t entry_bytes,
                                                     const char *name);

    // Connection management.
    void poll_cm();
    void on_cm(const uint8_t *frame, uint32_t len, uint8_t plane);
    void send_cm(const wire::CmFields &f, uint8_t plane_mask, const uint32_t *dst_ip,
                 const wire::MacAddr *dst_mac);
    void send_connect(Pending &p);
    void connect_command(Command &cmd, QpRec &r, const wire::CmFields &f, uint32_t pd);
    void disconnect_stray(const wire::CmFields &accept, uint32_t ip, const wire::MacAddr &mac);
    void complete_accept(Client &c, const Listener &l, QpRec &q);
    void timeouts();
    wire::MacAddr neighbor_mac(uint32_t ip) const;
    wire::CmFields my_addrs() const;

    // Shutdown.
    uint64_t outstanding();
    void shutdown_qps();

    std::string admin(const std::string &request, const Client &c);

    DaemonConfig cfg_;
    dp::Dataplane *dp_;
    std::vector<std::unique_ptr<Agent>> agents_;
    rte_ring *cm_in_ = nullptr;             // worker 0 -> server
    std::atomic<uint64_t> cm_overflow_{0};  // written by worker 0
    std::atomic<uint64_t> cm_oversize_{0};  // written by worker 0
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
    std::map<std::pair<uint32_t, uint64_t>, Answer> answered_;
    // MR keys: one slot allocator for every worker's table.
    std::vector<uint8_t> mr_gen_;
    std::vector<uint32_t> mr_free_;
    uint32_t next_worker_ = 0;
    std::mt19937_64 rng_;
    DaemonCounters ctr_;
    bool draining_ = false;
    uint64_t started_ns_ = 0;
};

}  // namespace mrc::mrcd
