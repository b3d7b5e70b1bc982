#include "agent.h"

#include <rte_ring.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "mrc/mrc.h"
#include "support.h"

namespace mrc::mrcd {

namespace {

uint8_t wc_status(WcStatus s) {
    switch (s) {
        case WcStatus::kSuccess:
            return MRC_WC_SUCCESS;
        case WcStatus::kRetryExceeded:
            return MRC_WC_RETRY_EXCEEDED;
        case WcStatus::kNackRetryExceeded:
            return MRC_WC_NACK_RETRY_EXCEEDED;
        case WcStatus::kRemoteAccessError:
            return MRC_WC_REMOTE_ACCESS_ERROR;
        case WcStatus::kRemoteProtocolError:
            return MRC_WC_REMOTE_PROTOCOL_ERROR;
        case WcStatus::kFlushed:
            return MRC_WC_FLUSHED;
        case WcStatus::kPeerUnreachable:
            return MRC_WC_PEER_UNREACHABLE;
    }
    return MRC_WC_FLUSHED;
}

void fail(CommandAnswer &a, std::string why) {
    a.ok = false;
    a.error = std::move(why);
}

}  // namespace

Agent::Agent(CmInbox *cm, dp::Worker *w, uint32_t max_mrs) : cm_(cm), w_(w), mrs_(max_mrs) {
    const std::string name = fmt::format("mrcd_cmd{}", w->index());
    cmds_ = rte_ring_create(name.c_str(), 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
}

Agent::~Agent() {
    if (cmds_ != nullptr) rte_ring_free(cmds_);
}

uint32_t Agent::poll(dp::Worker &, uint64_t) {
    uint32_t work = 0;
    void *objs[8];
    const unsigned n = rte_ring_sc_dequeue_burst(cmds_, objs, 8, nullptr);
    for (unsigned i = 0; i < n; ++i) {
        auto *c = static_cast<Command *>(objs[i]);
        execute(*c);
        c->done.store(true, std::memory_order_release);
    }
    work += n;
    for (auto &q : qps_)
        work += service(*q);
    for (auto &cq : cqs_)
        cq->publish();
    return work;
}

void Agent::on_cm_frame(dp::Worker &, const uint8_t *frame, uint32_t len, uint8_t plane, uint64_t) {
    // The server parses it; here it is only copied out (bounded: a flood of
    // CM frames costs a full ring and a counter, nothing else).
    if (len > sizeof(CmFrame::frame)) {
        cm_->oversize.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    auto *m = new (std::nothrow) CmFrame;
    if (m == nullptr) return;
    std::memcpy(m->frame, frame, len);
    m->len = len;
    m->plane = plane;
    if (rte_ring_sp_enqueue(cm_->ring, m) != 0) {
        delete m;
        cm_->overflow.fetch_add(1, std::memory_order_relaxed);
    }
}

// ---- servicing a QP ---------------------------------------------------------

uint32_t Agent::service(AgentQp &q) {
    uint32_t space = q.cq->space();
    // Completions first: they make room in the core for more work.
    uint32_t work = complete_sends(q, space);
    work += complete_recvs(q, space);
    const QpState st = q.qp->state();
    if (st != QpState::kRts && st != QpState::kError) return work;  // not connected yet
    const uint32_t avail = sqes_available(q, st);
    if (st == QpState::kRts)
        work += post_sqes(q, avail, space);
    else
        work += flush_sqes(q, avail, space);
    q.hdr->cons.store(q.cons, std::memory_order_release);
    return work;
}

uint32_t Agent::complete_sends(AgentQp &q, uint32_t &space) {
    if (space == 0) return 0;
    const uint32_t n = q.qp->poll_send_cq(sc_, std::min<uint32_t>(space, 32));
    for (uint32_t i = 0; i < n; ++i) {
        q.done(mrs_);
        ipc::Cqe c{};
        c.wr_id = sc_[i].wr_id;
        c.qp_num = q.wire_qpn;
        c.opcode = MRC_WC_WRITE;
        c.status = sc_[i].status == WcStatus::kFlushed && q.shutdown
                       ? uint8_t(MRC_WC_DAEMON_SHUTDOWN)
                       : wc_status(sc_[i].status);
        c.byte_len = sc_[i].bytes;
        q.cq->push(c);
    }
    space -= n;
    return n;
}

uint32_t Agent::complete_recvs(AgentQp &q, uint32_t &space) {
    if (space == 0) return 0;
    const uint32_t n = q.qp->poll_recv_cq(rc_, std::min<uint32_t>(space, 32));
    for (uint32_t i = 0; i < n; ++i) {
        ipc::Cqe c{};
        c.qp_num = q.wire_qpn;
        c.opcode = MRC_WC_RECV_WRITE_IMM;
        c.status = MRC_WC_SUCCESS;
        c.byte_len = rc_[i].bytes;
        c.imm = rc_[i].imm;
        q.cq->push(c);
    }
    space -= n;
    return n;
}

// How many entries the application has put in the send-queue ring.
uint32_t Agent::sqes_available(AgentQp &q, QpState st) {
    const uint32_t prod = q.hdr->prod.load(std::memory_order_acquire);
    const uint32_t avail = prod - q.cons;
    if (avail <= q.mask + 1) return avail;
    // The application wrote an index no ring can have: stop trusting it.
    if (st == QpState::kRts) {
        q.event_status = MRC_WC_BAD_REQUEST;
        q.qp->to_error(WcStatus::kFlushed);
    }
    return 0;
}

// Why a work request cannot be posted (an MRC_WC_ status), or 0.
uint8_t Agent::check_sqe(const AgentQp &q, const ipc::Sqe &s) const {
    const uint32_t slot = s.lkey >> 8;
    const LocalMr *mr = slot < mrs_.size() ? &mrs_[slot] : nullptr;
    if (s.opcode != MRC_WR_WRITE && s.opcode != MRC_WR_WRITE_WITH_IMM) return MRC_WC_BAD_REQUEST;
    if (s.length == 0 || s.length > kMaxMsgBytes) return MRC_WC_BAD_REQUEST;
    if (mr == nullptr || !mr->live || mr->key != s.lkey || mr->client != q.client ||
        s.local_offset > mr->length || s.length > mr->length - s.local_offset)
        return MRC_WC_LOCAL_PROTECTION_ERROR;
    return 0;
}

// RTS: takes up to 32 work requests from the ring and posts them. A bad
// one completes with its error and fails the QP; a full core queue leaves
// the rest in the ring.
uint32_t Agent::post_sqes(AgentQp &q, uint32_t avail, uint32_t &space) {
    uint32_t work = 0;
    const uint32_t budget = std::min<uint32_t>(avail, 32);
    for (uint32_t i = 0; i < budget; ++i) {
        // One copy: every field is read once, after which the
        // application can change the slot without effect.
        ipc::Sqe s;
        std::memcpy(&s, &q.sqes[q.cons & q.mask], sizeof s);
        if (const uint8_t bad = check_sqe(q, s)) {
            if (space == 0) break;
            ipc::Cqe c{};
            c.wr_id = s.wr_id;
            c.qp_num = q.wire_qpn;
            c.opcode = MRC_WC_WRITE;
            c.status = bad;
            q.cq->push(c);
            --space;
            ++q.cons;
            q.event_status = bad;
            q.qp->to_error(WcStatus::kFlushed);
            break;
        }
        const uint32_t slot = s.lkey >> 8;
        WriteRequest wr;
        wr.wr_id = s.wr_id;
        wr.local = mrs_[slot].base + s.local_offset;
        wr.length = s.length;
        wr.remote_addr = s.remote_addr;
        wr.rkey = s.rkey;
        wr.with_imm = s.opcode == MRC_WR_WRITE_WITH_IMM;
        wr.imm = s.imm;
        if (q.qp->post_write(wr) != PostResult::kOk) break;  // full: the rest waits in the ring
        q.use(mrs_, slot);
        ++q.cons;
        ++work;
    }
    return work;
}

// Error state: what is still in the ring completes flushed; once nothing
// is left anywhere, one QP event says why the QP failed.
uint32_t Agent::flush_sqes(AgentQp &q, uint32_t avail, uint32_t &space) {
    uint32_t work = 0;
    const uint8_t why = q.shutdown ? uint8_t(MRC_WC_DAEMON_SHUTDOWN) : uint8_t(MRC_WC_FLUSHED);
    while (avail && space) {
        ipc::Cqe c{};
        c.wr_id = q.sqes[q.cons & q.mask].wr_id;
        c.qp_num = q.wire_qpn;
        c.opcode = MRC_WC_WRITE;
        c.status = why;
        q.cq->push(c);
        ++q.cons;
        --avail;
        --space;
        ++work;
    }
    q.hdr->state.store(q.shutdown ? ipc::kRingShutdown : ipc::kRingError,
                       std::memory_order_release);
    // In the error state the core sends nothing and holds no request.
    Qp &qp = *q.qp;
    if (qp.outstanding_wrs() == 0) q.release_all(mrs_);
    if (!q.event_sent && avail == 0 && qp.outstanding_wrs() == 0 && space) {
        ipc::Cqe c{};
        c.qp_num = q.wire_qpn;
        c.opcode = MRC_WC_QP_EVENT;
        c.status = q.shutdown       ? uint8_t(MRC_WC_DAEMON_SHUTDOWN)
                   : q.event_status ? q.event_status
                                    : wc_status(qp.error_cause());
        q.cq->push(c);
        q.event_sent = true;
        ++work;
    }
    return work;
}

// ---- commands ---------------------------------------------------------------

void Agent::execute(Command &c) {
    std::visit([&](auto &body) { run(body, c.answer); }, c.body);
}

void Agent::run(cmd::RegMr &c, CommandAnswer &a) {
    auto r = w_->endpoint().mrs().register_with_key(c.key, c.base, c.length, c.access, c.pd,
                                                    c.remote_base);
    if (!r) return fail(a, r.error().message);
    mrs_[c.key >> 8] = LocalMr{c.base, c.length, c.key, c.client, true};
}

void Agent::run(cmd::DeregMr &c, CommandAnswer &a) {
    const uint32_t slot = c.key >> 8;
    if (!c.force && slot < mrs_.size() && mrs_[slot].live && mrs_[slot].key == c.key &&
        mrs_[slot].inflight)
        return fail(a, fmt::format("region {:#x} is the source of {} work requests in progress",
                                   c.key, mrs_[slot].inflight));
    w_->endpoint().mrs().deregister(c.key);
    if (slot < mrs_.size()) mrs_[slot] = LocalMr{};
}

void Agent::run(cmd::AddCq &c, CommandAnswer &) {
    auto b = std::make_unique<AgentCq>();
    b->id = c.cq_id;
    b->hdr = c.ring;
    b->cqes = ipc::ring_entries<ipc::Cqe>(c.ring);
    b->mask = c.ring->entries - 1;
    b->prod = c.ring->prod.load(std::memory_order_relaxed);
    cqs_.push_back(std::move(b));
}

void Agent::run(cmd::DelCq &c, CommandAnswer &) {
    cqs_.erase(
        std::remove_if(cqs_.begin(), cqs_.end(), [&](const auto &b) { return b->id == c.cq_id; }),
        cqs_.end());
}

void Agent::run(cmd::CreateQp &c, CommandAnswer &a) {
    AgentCq *cq = nullptr;
    for (auto &b : cqs_)
        if (b->id == c.cq_id) cq = b.get();
    if (cq == nullptr) return fail(a, "no such CQ on this worker");
    Endpoint &ep = w_->endpoint();
    auto q = ep.create_qp(c.config);
    if (!q) return fail(a, q.error().message);
    auto b = std::make_unique<AgentQp>();
    b->qp = *q;
    b->wire_qpn = ep.wire_qpn(**q);
    b->client = c.client;
    b->hdr = c.sq_ring;
    b->sqes = ipc::ring_entries<ipc::Sqe>(c.sq_ring);
    b->mask = c.sq_ring->entries - 1;
    b->cq = cq;
    // As deep as the core's send queue (a power of two at least
    // max_send_wr): one entry per request it can hold.
    uint32_t depth = 1;
    while (depth < c.config.max_send_wr)
        depth <<= 1;
    b->uses.assign(depth, 0);
    c.wire_qpn = b->wire_qpn;
    qps_.push_back(std::move(b));
}

void Agent::run(cmd::ConnectQp &c, CommandAnswer &a) {
    AgentQp *q = find(c.wire_qpn);
    if (q == nullptr) return fail(a, "no such QP");
    Result<void> r = q->qp->to_init(c.pd);
    if (r) r = q->qp->to_rtr(c.peer, Psn(c.expected_psn));
    if (r) r = q->qp->to_rts(Psn(c.start_psn));
    if (!r) fail(a, r.error().message);
}

void Agent::run(cmd::DestroyQp &c, CommandAnswer &a) {
    for (auto it = qps_.begin(); it != qps_.end(); ++it) {
        if ((*it)->wire_qpn != c.wire_qpn) continue;
        (*it)->release_all(mrs_);
        const uint32_t local = (*it)->qp->qpn();
        qps_.erase(it);
        if (auto r = w_->endpoint().destroy_qp(local); !r) fail(a, r.error().message);
        return;
    }
    fail(a, "no such QP");
}

void Agent::run(cmd::ErrorQp &c, CommandAnswer &) {
    AgentQp *q = find(c.wire_qpn);
    if (q == nullptr) return;
    if (q->qp->state() != QpState::kError) {
        q->event_status = c.status;
        q->qp->to_error(WcStatus::kFlushed);
    }
}

void Agent::run(cmd::SendCm &c, CommandAnswer &) {
    uint64_t sent = 0;
    for (const auto &[plane, f] : c.frames)
        sent += w_->send_frame(plane, f.data(), uint32_t(f.size()));
    c.sent = sent;
}

void Agent::run(cmd::CountOutstanding &c, CommandAnswer &) {
    uint64_t n = 0;
    for (auto &q : qps_) {
        if (q->qp->state() == QpState::kRts) {
            n += q->qp->outstanding_wrs();
            const uint32_t avail = q->hdr->prod.load(std::memory_order_acquire) - q->cons;
            n += avail <= q->mask + 1 ? avail : 0;
        } else if (q->qp->state() == QpState::kError && !q->event_sent) {
            ++n;  // its flushes have not all reached the CQ yet
        }
    }
    c.work = n;
}

void Agent::run(cmd::Shutdown &, CommandAnswer &) {
    for (auto &q : qps_) {
        q->shutdown = true;
        if (q->qp->state() == QpState::kRts || q->qp->state() == QpState::kRtr)
            q->qp->to_error(WcStatus::kFlushed);
        else if (q->qp->state() != QpState::kError)
            q->hdr->state.store(ipc::kRingShutdown, std::memory_order_release);
    }
}

}  // namespace mrc::mrcd
