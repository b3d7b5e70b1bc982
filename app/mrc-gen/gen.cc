#include "gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pattern.h"

namespace mrc::gen {

const char *to_string(Mode m) {
    switch (m) {
        case Mode::kWrite:
            return "write";
        case Mode::kWriteImm:
            return "write_imm";
        case Mode::kPingpong:
            return "pingpong";
    }
    return "?";
}

void GenApp::add_qp(GenQp q) {
    q.post_ns.assign(cfg_.slots, 0);
    q.last_done.assign(cfg_.slots, -1);
    qps_.push_back(std::move(q));
    if (lat_.capacity() == 0) lat_.reserve(cfg_.max_latency_samples);
}

void GenApp::on_error(GenQp &q, const std::string &why) {
    if (!q.errored) {
        q.errored = true;
        stats_.qp_errors.fetch_add(1, std::memory_order_relaxed);
    }
    if (first_error_.empty()) first_error_ = why;
}

void GenApp::sample(uint64_t ns) {
    if (lat_.size() < lat_.capacity())
        lat_.push_back(static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX)));
    else
        ++lat_dropped_;
}

void GenApp::post(GenQp &q, uint64_t now_ns) {
    const uint64_t seq = q.next_seq;
    const uint32_t slot = static_cast<uint32_t>(seq % cfg_.slots);
    uint8_t *src = q.local + uint64_t{slot} * cfg_.msg_bytes;
    if (cfg_.verify) pattern_fill(src, cfg_.msg_bytes, q.index, static_cast<uint32_t>(seq));
    WriteRequest wr;
    wr.wr_id = seq;
    wr.local = src;
    wr.length = cfg_.msg_bytes;
    wr.remote_addr = q.remote_addr + uint64_t{slot} * cfg_.msg_bytes;
    wr.rkey = q.remote_rkey;
    wr.with_imm = cfg_.mode != Mode::kWrite;
    wr.imm = static_cast<uint32_t>(seq);
    const PostResult r = q.qp->post_write(wr);
    if (r != PostResult::kOk) {
        on_error(q, fmt::format("QP {}: post_write refused ({})", q.index, int(r)));
        return;
    }
    q.post_ns[slot] = now_ns;
    ++q.next_seq;
    ++q.outstanding;
    posted_bytes_ += cfg_.msg_bytes;
    tokens_bits_ -= 8.0 * cfg_.msg_bytes;
}

uint32_t GenApp::poll_client(GenQp &q, uint64_t now_ns) {
    uint32_t work = 0;
    SendCompletion *sc = sc_;
    const uint32_t ns = q.qp->poll_send_cq(sc, 32);
    for (uint32_t i = 0; i < ns; ++i) {
        const uint32_t slot = static_cast<uint32_t>(sc[i].wr_id % cfg_.slots);
        if (sc[i].status != WcStatus::kSuccess) {
            on_error(q, fmt::format("QP {}: message {} failed: {}", q.index, sc[i].wr_id,
                                    to_string(sc[i].status)));
            --q.outstanding;
            continue;
        }
        if (cfg_.mode == Mode::kPingpong) continue;  // done when the reply comes
        q.last_done[slot] = static_cast<int64_t>(sc[i].wr_id);
        sample(now_ns - q.post_ns[slot]);
        stats_.messages.fetch_add(1, std::memory_order_relaxed);
        stats_.bytes.fetch_add(sc[i].bytes, std::memory_order_relaxed);
        --q.outstanding;
    }
    work += ns;
    if (cfg_.mode == Mode::kPingpong) {
        RecvCompletion *rc = rc_;
        const uint32_t nr = q.qp->poll_recv_cq(rc, 32);
        for (uint32_t i = 0; i < nr; ++i) {
            const uint32_t slot = rc[i].imm % cfg_.slots;
            sample(now_ns - q.post_ns[slot]);
            // The reply lands in the second half of the local buffer.
            const uint8_t *got = q.local + (uint64_t{cfg_.slots} + slot) * cfg_.msg_bytes;
            if (rc[i].bytes != cfg_.msg_bytes ||
                (cfg_.verify && pattern_check(got, cfg_.msg_bytes, q.index, rc[i].imm) != 0)) {
                stats_.verify_errors.fetch_add(1, std::memory_order_relaxed);
            } else if (cfg_.verify) {
                stats_.verified_bytes.fetch_add(rc[i].bytes, std::memory_order_relaxed);
            }
            stats_.messages.fetch_add(1, std::memory_order_relaxed);
            stats_.bytes.fetch_add(rc[i].bytes, std::memory_order_relaxed);
            if (q.outstanding) --q.outstanding;
        }
        work += nr;
    }
    if (!q.errored && q.qp->state() == QpState::kError)
        on_error(q,
                 fmt::format("QP {} entered ERROR: {}", q.index, to_string(q.qp->error_cause())));
    return work;
}

uint32_t GenApp::poll_server(GenQp &q, uint64_t now_ns) {
    (void)now_ns;
    uint32_t work = 0;
    RecvCompletion *rc = rc_;
    const uint32_t nr = q.qp->poll_recv_cq(rc, 32);
    for (uint32_t i = 0; i < nr; ++i) {
        const uint32_t slot = rc[i].imm % cfg_.slots;
        const uint8_t *got = q.local + uint64_t{slot} * cfg_.msg_bytes;
        if (rc[i].bytes != cfg_.msg_bytes ||
            (cfg_.verify && pattern_check(got, cfg_.msg_bytes, q.index, rc[i].imm) != 0)) {
            stats_.verify_errors.fetch_add(1, std::memory_order_relaxed);
        } else if (cfg_.verify) {
            stats_.verified_bytes.fetch_add(rc[i].bytes, std::memory_order_relaxed);
        }
        stats_.messages.fetch_add(1, std::memory_order_relaxed);
        stats_.bytes.fetch_add(rc[i].bytes, std::memory_order_relaxed);
        if (cfg_.mode == Mode::kPingpong && !q.errored) {
            // Send the message back, from where it landed.
            WriteRequest wr;
            wr.wr_id = rc[i].imm;
            wr.local = got;
            wr.length = cfg_.msg_bytes;
            wr.remote_addr = q.remote_addr + uint64_t{slot} * cfg_.msg_bytes;
            wr.rkey = q.remote_rkey;
            wr.with_imm = true;
            wr.imm = rc[i].imm;
            if (q.qp->post_write(wr) != PostResult::kOk)
                on_error(q, fmt::format("QP {}: cannot post the pingpong reply", q.index));
        }
    }
    work += nr;
    SendCompletion *sc = sc_;
    const uint32_t ns = q.qp->poll_send_cq(sc, 32);
    for (uint32_t i = 0; i < ns; ++i)
        if (sc[i].status != WcStatus::kSuccess)
            on_error(q, fmt::format("QP {}: reply {} failed: {}", q.index, sc[i].wr_id,
                                    to_string(sc[i].status)));
    work += ns;
    if (!q.errored && q.qp->state() == QpState::kError)
        on_error(q,
                 fmt::format("QP {} entered ERROR: {}", q.index, to_string(q.qp->error_cause())));
    return work;
}

uint64_t GenApp::next_due_ns(uint64_t now_ns) const {
    if (cfg_.role == Role::kServer || cfg_.rate_gbps <= 0 ||
        draining_.load(std::memory_order_relaxed) ||
        (cfg_.byte_budget && posted_bytes_ >= cfg_.byte_budget))
        return UINT64_MAX;
    bool room = false;
    for (const GenQp &q : qps_)
        room = room || (!q.errored && q.outstanding < cfg_.depth);
    if (!room) return UINT64_MAX;  // a completion comes first (a frame, or the core's timer)
    // The bucket was last filled at tokens_ns_ (Gb/s = bits per ns).
    const double missing = 8.0 * cfg_.msg_bytes - tokens_bits_;
    if (missing <= 0 || tokens_ns_ == 0) return now_ns;
    return std::max(now_ns, tokens_ns_ + uint64_t(missing / cfg_.rate_gbps) + 1);
}

uint32_t GenApp::poll(dp::Worker &, uint64_t now_ns) {
    uint32_t work = 0;
    if (cfg_.role == Role::kServer) {
        for (GenQp &q : qps_)
            work += poll_server(q, now_ns);
        return work;
    }
    for (GenQp &q : qps_)
        work += poll_client(q, now_ns);

    // Refill the rate limiter: at most one round of messages of credit.
    if (cfg_.rate_gbps > 0) {
        if (tokens_ns_ == 0) tokens_ns_ = now_ns;
        tokens_bits_ += double(now_ns - tokens_ns_) * cfg_.rate_gbps;  // Gb/s = bits per ns
        tokens_ns_ = now_ns;
        const double cap = 8.0 * cfg_.msg_bytes * std::max<size_t>(qps_.size(), 1);
        tokens_bits_ = std::min(tokens_bits_, cap);
    }
    const bool draining = draining_.load(std::memory_order_relaxed);
    uint64_t outstanding = 0;
    if (!draining && !qps_.empty()) {
        // Round robin over the QPs, starting where the last round stopped.
        const uint32_t n = static_cast<uint32_t>(qps_.size());
        for (uint32_t k = 0; k < n; ++k) {
            GenQp &q = qps_[(cursor_ + k) % n];
            while (!q.errored && q.outstanding < cfg_.depth) {
                if (cfg_.byte_budget && posted_bytes_ >= cfg_.byte_budget) break;
                if (cfg_.rate_gbps > 0 && tokens_bits_ < 8.0 * cfg_.msg_bytes) break;
                post(q, now_ns);
                ++work;
            }
        }
        cursor_ = (cursor_ + 1) % n;
    }
    for (const GenQp &q : qps_)
        if (!q.errored) outstanding += q.outstanding;
    stats_.outstanding.store(outstanding, std::memory_order_relaxed);
    const bool budget_done = cfg_.byte_budget && posted_bytes_ >= cfg_.byte_budget;
    if ((draining || budget_done) && outstanding == 0)
        stats_.drained.store(true, std::memory_order_release);
    return work;
}

double percentile_us(std::vector<uint32_t> &samples, double p) {
    if (samples.empty()) return 0;
    const size_t k = std::min(samples.size() - 1, static_cast<size_t>(p * double(samples.size())));
    std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(k),
                     samples.end());
    return samples[k] / 1000.0;
}

}  // namespace mrc::gen
