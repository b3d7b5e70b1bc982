// The worker side of mrcd: one Agent per worker lcore, run inside the
// worker's poll loop (dp::WorkerApp). Owner thread only, except the
// command ring (the server enqueues, the Agent dequeues) and the CM inbox
// (worker 0 enqueues, the server dequeues).
//
// Per poll the Agent
//   1. runs the server's commands (command.h), one handler per command;
//   2. finds the QPs with work, never by looking at every QP: those the core
//      names (new completions, the error state), those whose doorbell an
//      application rang (client/ipc.h), those waiting for room in a CQ ring
//      that the application has since polled, and those still busy from the
//      last poll;
//   3. services each of them: completions first (core to CQ ring, as far as
//      the ring has room), then up to 32 new work requests taken from the
//      QP's send-queue ring (copied once, checked, posted), or, for a QP in
//      the error state, flushes what is left in its ring and writes the QP
//      event; a QP left with nothing to do is parked (its doorbell armed);
//   4. publishes the producer index of each CQ ring it wrote.
// An idle QP costs nothing per poll; an idle CQ costs one load.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "client/ipc.h"
#include "command.h"
#include "core/ring.h"
#include "dpdk/dataplane.h"
#include "wire/cm.h"

struct rte_ring;

namespace mrc::mrcd {

// One CM frame copied out of the worker for the server thread.
struct CmFrame {
    uint8_t frame[wire::kCmBytes + 64];
    uint32_t len = 0;
    uint8_t plane = 0;
};

// Where worker 0 leaves CM frames for the server thread, and any worker
// the ARP frames of neighbours.
struct CmInbox {
    rte_ring *ring = nullptr;           // of CmFrame *, workers -> server (ARP: any worker)
    std::atomic<uint64_t> overflow{0};  // frames dropped: the ring was full
    std::atomic<uint64_t> oversize{0};  // frames dropped: longer than a CmFrame holds
    int wake_fd = -1;                   // eventfd: written when a frame lands in an empty ring
};

class Agent final : public dp::WorkerApp {
  public:
    Agent(CmInbox *cm, dp::Worker *w, uint32_t max_mrs);
    ~Agent() override;
    bool ok() const { return cmds_ != nullptr; }
    rte_ring *commands() { return cmds_; }

    uint32_t poll(dp::Worker &w, uint64_t now_ns) override;
    void on_cm_frame(dp::Worker &w, const uint8_t *frame, uint32_t len, uint8_t plane,
                     uint64_t now_ns) override;
    // ARP goes the same way: the server thread keeps the neighbour tables.
    void on_arp_frame(dp::Worker &w, const uint8_t *frame, uint32_t len, uint8_t plane,
                      uint64_t now_ns) override;

  private:
    // A completion ring as the worker writes it.
    struct AgentQp;
    struct AgentCq {
        uint32_t id = 0;
        ipc::RingHdr *hdr = nullptr;
        ipc::Cqe *cqes = nullptr;
        uint32_t mask = 0;
        uint32_t prod = 0;                       // published at the end of the poll that wrote it
        std::atomic<uint64_t> *bells = nullptr;  // doorbell bitmap (client/ipc.h)
        std::vector<AgentQp *> by_bell;          // bit -> QP
        std::vector<AgentQp *> waiting;          // QPs parked until the ring has room
        uint32_t space() const {
            const uint32_t used = prod - hdr->cons.load(std::memory_order_acquire);
            return used > mask + 1 ? 0 : mask + 1 - used;  // a hostile index: no room
        }
        void push(const ipc::Cqe &c) {
            cqes[prod & mask] = c;
            ++prod;
        }
        void publish() { hdr->prod.store(prod, std::memory_order_release); }
        uint32_t published = 0;
        bool listed = false;  // on the agent's list of CQs to publish
    };
    // A region in this worker's table (by key slot).
    struct LocalMr {
        uint8_t *base = nullptr;
        uint64_t length = 0;
        uint32_t key = 0;
        uint32_t client = 0;
        bool live = false;
        uint32_t inflight = 0;  // work requests in the core that read it
    };
    // A QP with its send-queue ring as the worker reads it.
    struct AgentQp {
        Qp *qp = nullptr;
        uint32_t wire_qpn = 0;
        uint32_t client = 0;
        ipc::RingHdr *hdr = nullptr;
        ipc::Sqe *sqes = nullptr;
        uint32_t mask = 0;
        uint32_t cons = 0;  // published at the end of each service
        AgentCq *cq = nullptr;
        uint32_t bell = 0;
        uint8_t event_status = 0;  // why the QP errored, when not the core's reason
        bool event_sent = false;
        uint32_t index = 0;  // in qps_
        bool shutdown = false;
        bool active = false;   // on the list of QPs to service next poll
        bool waiting = false;  // on its CQ's list of QPs waiting for room
        // The region (key slot) of every work request the core holds, in
        // posting order (the core completes in that order): a region is
        // not let go while a request may still read it.
        // Grows with the requests held, up to the core's send queue bound.
        Ring<uint32_t> uses;
        uint32_t max_uses = 0;
        void use(std::vector<LocalMr> &mrs, uint32_t slot) {
            uses.push_growing(slot, max_uses);  // the core holds no more than max_uses
            ++mrs[slot].inflight;
        }
        void done(std::vector<LocalMr> &mrs) {
            if (uses.empty()) return;
            --mrs[uses.front()].inflight;
            uses.pop();
        }
        void release_all(std::vector<LocalMr> &mrs) {
            while (!uses.empty())
                done(mrs);
        }
    };

    // Commands: one handler per alternative of CommandBody.
    void execute(Command &c);
    void run(cmd::RegMr &c, CommandAnswer &a);
    void run(cmd::DeregMr &c, CommandAnswer &a);
    void run(cmd::AddCq &c, CommandAnswer &a);
    void run(cmd::DelCq &c, CommandAnswer &a);
    void run(cmd::CreateQp &c, CommandAnswer &a);
    void run(cmd::ConnectQp &c, CommandAnswer &a);
    void run(cmd::DestroyQp &c, CommandAnswer &a);
    void run(cmd::ErrorQp &c, CommandAnswer &a);
    void run(cmd::SetNextHop &c, CommandAnswer &a);
    void run(cmd::SendCm &c, CommandAnswer &a);
    void run(cmd::CountOutstanding &c, CommandAnswer &a);
    void run(cmd::Shutdown &c, CommandAnswer &a);

    // Finding the QPs with work.
    void activate(AgentQp *q) {
        if (q != nullptr && !q->active) {
            q->active = true;
            active_.push_back(q);
        }
    }
    void take_core_notices();
    void take_doorbells();
    void take_cq_room();
    // What becomes of a QP after its service.
    enum class Next : uint8_t { kStay, kPark, kArm, kWaitCq };
    void settle(AgentQp &q, Next next);

    // Servicing one QP; `space` is what is left of its CQ ring.
    uint32_t service(AgentQp &q, Next &next);
    uint32_t complete_sends(AgentQp &q, uint32_t &space);
    uint32_t complete_recvs(AgentQp &q, uint32_t &space);
    uint32_t sqes_available(AgentQp &q, QpState st);
    uint32_t post_sqes(AgentQp &q, uint32_t avail, uint32_t &space, Next &next);
    uint8_t check_sqe(const AgentQp &q, const ipc::Sqe &s) const;
    uint32_t flush_sqes(AgentQp &q, uint32_t avail, uint32_t &space);

    AgentQp *find(uint32_t wire_qpn) {
        const Qp *q = w_->endpoint().qp_by_wire(wire_qpn);
        return q != nullptr && q->qpn() < by_local_.size() ? by_local_[q->qpn()] : nullptr;
    }
    AgentCq *find_cq(uint32_t id) {
        for (auto &b : cqs_)
            if (b->id == id) return b.get();
        return nullptr;
    }

    CmInbox *cm_;
    dp::Worker *w_;
    rte_ring *cmds_ = nullptr;
    std::vector<std::unique_ptr<AgentCq>> cqs_;
    std::vector<std::unique_ptr<AgentQp>> qps_;
    std::vector<AgentQp *> by_local_;  // by the core's local QPN
    std::vector<AgentQp *> active_, servicing_;
    std::vector<AgentCq *> written_;  // CQs to publish at the end of the poll
    uint32_t notified_[64];
    std::vector<LocalMr> mrs_;  // by key slot
    SendCompletion sc_[32];
    RecvCompletion rc_[32];
};

}  // namespace mrc::mrcd
