#include "agent.h"

#include <rte_log.h>
#include <rte_ring.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "mrc/mrc.h"
#include "support.h"
#include "wire/host.h"

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

Agent::Agent(CmInbox *cm, dp::Worker *w, uint32_t max_mrs)
    : cm_(cm), w_(w), by_local_(w->endpoint().config().max_qps + 1, nullptr), mrs_(max_mrs) {
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
    take_core_notices();
    take_doorbells();
    take_cq_room();
    servicing_.swap(active_);
    for (AgentQp *q : servicing_) {
        q->active = false;
        Next next = Next::kArm;
        work += service(*q, next);
        settle(*q, next);
        AgentCq *cq = q->cq;
        if (cq->prod != cq->published && !cq->listed) {
            cq->listed = true;
            written_.push_back(cq);
        }
    }
    servicing_.clear();
    for (AgentCq *cq : written_) {
        cq->publish();
        cq->published = cq->prod;
        cq->listed = false;
    }
    written_.clear();
    return work;
}

// ---- finding the QPs with work ---------------------------------------------

void Agent::take_core_notices() {
    Endpoint &ep = w_->endpoint();
    for (;;) {
        const uint32_t n = ep.take_notified(notified_, uint32_t(std::size(notified_)));
        for (uint32_t i = 0; i < n; ++i)
            if (notified_[i] < by_local_.size()) activate(by_local_[notified_[i]]);
        if (n < std::size(notified_)) return;
    }
}

// Each CQ whose doorbell was rung: the QPs whose bits are set (client/ipc.h).
void Agent::take_doorbells() {
    for (auto &b : cqs_) {
        AgentCq &cq = *b;
        if (cq.bells == nullptr || !cq.hdr->rung.load(std::memory_order_relaxed) ||
            !cq.hdr->rung.exchange(0, std::memory_order_acq_rel))
            continue;
        const size_t words = (cq.by_bell.size() + 63) / 64;
        for (size_t w = 0; w < words; ++w) {
            if (!cq.bells[w].load(std::memory_order_relaxed)) continue;
            uint64_t x = cq.bells[w].exchange(0, std::memory_order_acquire);
            while (x) {
                const size_t bit = w * 64 + size_t(__builtin_ctzll(x));
                x &= x - 1;
                if (bit < cq.by_bell.size()) activate(cq.by_bell[bit]);
            }
        }
    }
}

// QPs that waited for room in a CQ ring the application has since polled.
void Agent::take_cq_room() {
    for (auto &b : cqs_) {
        AgentCq &cq = *b;
        if (cq.waiting.empty() || cq.space() == 0) continue;
        for (AgentQp *q : cq.waiting) {
            q->waiting = false;
            activate(q);
        }
        cq.waiting.clear();
        cq.hdr->room_wanted.store(0, std::memory_order_relaxed);
    }
}

void Agent::settle(AgentQp &q, Next next) {
    switch (next) {
        case Next::kStay:
            activate(&q);
            return;
        case Next::kWaitCq:
            if (!q.waiting) {
                q.waiting = true;
                q.cq->waiting.push_back(&q);
                // The application's next poll wakes this worker if it sleeps
                // (then take_cq_room sees the room; client/ipc.h).
                q.cq->hdr->room_wanted.store(1, std::memory_order_seq_cst);
            }
            return;
        case Next::kPark:  // the core names it again when it completes something
            return;
        case Next::kArm:
            // Arm, then look again (the other half of the application's
            // fence, client/ipc.h): a post that saw the QP unarmed is seen here.
            q.hdr->armed.store(1, std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_seq_cst);
            if (q.hdr->prod.load(std::memory_order_relaxed) != q.cons) activate(&q);
            return;
    }
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
    if (rte_ring_mp_enqueue(cm_->ring, m) != 0) {
        delete m;
        cm_->overflow.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    // Wake the server thread (it drains the ring until empty after reading
    // the eventfd, so the first frame of a batch is enough).
    if (rte_ring_count(cm_->ring) == 1 && cm_->wake_fd >= 0) {
        const uint64_t one = 1;
        [[maybe_unused]] const ssize_t r = ::write(cm_->wake_fd, &one, sizeof one);
    }
}

void Agent::on_arp_frame(dp::Worker &w, const uint8_t *frame, uint32_t len, uint8_t plane,
                         uint64_t now_ns) {
    on_cm_frame(w, frame, len, plane, now_ns);
}

// ---- servicing a QP ---------------------------------------------------------

uint32_t Agent::service(AgentQp &q, Next &next) {
    uint32_t space = q.cq->space();
    // Completions first: they make room in the core for more work.
    const uint32_t sends = complete_sends(q, space);
    const uint32_t recvs = complete_recvs(q, space);
    uint32_t work = sends + recvs;
    next = Next::kArm;
    const QpState st = q.qp->state();
    if (st == QpState::kRts || st == QpState::kError) {
        const uint32_t avail = sqes_available(q, st);
        if (st == QpState::kRts)
            work += post_sqes(q, avail, space, next);
        else
            work += flush_sqes(q, avail, space);
        q.hdr->cons.store(q.cons, std::memory_order_release);
    }
    if (space == 0)
        next = Next::kWaitCq;  // more may be waiting for the ring
    else if (sends == 32 || recvs == 32 || (q.qp->state() == QpState::kError && !q.event_sent))
        next = Next::kStay;
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
uint32_t Agent::post_sqes(AgentQp &q, uint32_t avail, uint32_t &space, Next &next) {
    uint32_t work = 0;
    const uint32_t budget = std::min<uint32_t>(avail, 32);
    if (avail > budget) next = Next::kStay;  // its turn is over; more next poll
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
        const PostResult r = q.qp->post_write(wr);
        if (r == PostResult::kQueueFull) {
            next = Next::kPark;  // the rest waits in the ring until a completion makes room
            break;
        }
        if (r != PostResult::kOk) break;
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
        // Why a QP failed on its own (not asked to: shutdown, flush, the
        // peer's DISCONNECT): what it had sent and heard, for the operator.
        if (!q.shutdown && !q.event_status && qp.error_cause() != WcStatus::kFlushed) {
            const QpCounters &k = qp.counters();
            RTE_LOG(WARNING, USER1,
                    "mrcd: QP %u failed: %s (sent %lu data packets, %lu resends, %lu "
                    "keepalives; %lu acked; %lu timeouts, %lu silent; %lu bytes in flight, "
                    "window %lu)\n",
                    q.wire_qpn, to_string(qp.error_cause()), (unsigned long)k.tx_data_pkts,
                    (unsigned long)k.tx_retx_pkts, (unsigned long)k.tx_keepalives,
                    (unsigned long)(k.acked_pkts + k.sacked_pkts), (unsigned long)k.ack_timeouts,
                    (unsigned long)k.rto_silent, (unsigned long)qp.inflight_bytes(),
                    (unsigned long)qp.window_bytes());
        }
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
    // The ring is new (the application has not seen it yet): its header can
    // be believed once, here.
    auto b = std::make_unique<AgentCq>();
    b->id = c.cq_id;
    b->hdr = c.ring;
    b->cqes = ipc::ring_entries<ipc::Cqe>(c.ring);
    const uint32_t entries = c.ring->entries;
    b->mask = entries - 1;
    b->prod = b->published = c.ring->prod.load(std::memory_order_relaxed);
    if (c.bells) {
        b->bells = reinterpret_cast<std::atomic<uint64_t> *>(
            reinterpret_cast<uint8_t *>(c.ring) + ipc::bell_offset(entries, sizeof(ipc::Cqe)));
        b->by_bell.assign(c.bells, nullptr);
    }
    cqs_.push_back(std::move(b));
}

void Agent::run(cmd::DelCq &c, CommandAnswer &) {
    written_.erase(std::remove_if(written_.begin(), written_.end(),
                                  [&](const AgentCq *b) { return b->id == c.cq_id; }),
                   written_.end());
    cqs_.erase(
        std::remove_if(cqs_.begin(), cqs_.end(), [&](const auto &b) { return b->id == c.cq_id; }),
        cqs_.end());
}

void Agent::run(cmd::CreateQp &c, CommandAnswer &a) {
    AgentCq *cq = find_cq(c.cq_id);
    if (cq == nullptr) return fail(a, "no such CQ on this worker");
    if (c.bell >= cq->by_bell.size() || cq->by_bell[c.bell] != nullptr)
        return fail(
            a, fmt::format("doorbell bit {} of CQ {} is taken or out of range", c.bell, c.cq_id));
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
    // As deep as the core's send queue may grow (a power of two at least
    // max_send_wr): one entry per request it can hold.
    uint32_t depth = 1;
    while (depth < c.config.max_send_wr)
        depth <<= 1;
    b->uses.init(std::min<uint32_t>(depth, 16));
    b->max_uses = depth;
    b->bell = c.bell;
    c.wire_qpn = b->wire_qpn;
    cq->by_bell[c.bell] = b.get();
    by_local_[b->qp->qpn()] = b.get();
    b->index = uint32_t(qps_.size());
    qps_.push_back(std::move(b));
}

void Agent::run(cmd::ConnectQp &c, CommandAnswer &a) {
    AgentQp *q = find(c.wire_qpn);
    if (q == nullptr) return fail(a, "no such QP");
    Result<void> r = q->qp->to_init(c.pd);
    if (r) r = q->qp->to_rtr(c.peer, Psn(c.expected_psn));
    if (r) r = q->qp->to_rts(Psn(c.start_psn));
    if (!r) fail(a, r.error().message);
    activate(q);  // what the application posted before its connect finished
}

void Agent::run(cmd::DestroyQp &c, CommandAnswer &a) {
    if (AgentQp *found = find(c.wire_qpn)) {
        auto it = qps_.begin() + found->index;
        AgentQp *q = it->get();
        q->release_all(mrs_);
        const uint32_t local = q->qp->qpn();
        if (q->active) active_.erase(std::find(active_.begin(), active_.end(), q));
        if (q->waiting) {
            auto &wl = q->cq->waiting;
            wl.erase(std::find(wl.begin(), wl.end(), q));
        }
        q->cq->by_bell[q->bell] = nullptr;
        by_local_[local] = nullptr;
        // Swap with the last: the order of qps_ means nothing.
        if (it != qps_.end() - 1) {
            std::swap(*it, qps_.back());
            (*it)->index = q->index;
        }
        qps_.pop_back();
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
    activate(q);
}

void Agent::run(cmd::SetNextHop &c, CommandAnswer &) {
    for (const uint32_t qpn : c.wire_qpns)
        if (AgentQp *q = find(qpn)) q->qp->set_next_hop(c.plane, c.mac);
}

void Agent::run(cmd::SendCm &c, CommandAnswer &) {
    uint64_t sent = 0;
    for (const auto &[plane, f] : c.frames) {
        const bool arp = wire::is_arp(f.data(), uint32_t(f.size()));  // no UDP to sum
        sent += arp ? w_->send_raw(plane, f.data(), uint32_t(f.size()))
                    : w_->send_frame(plane, f.data(), uint32_t(f.size()));
    }
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
        activate(q.get());
    }
}

}  // namespace mrc::mrcd
