// Two endpoints joined by a wire the test controls: every packet either
// side emits is captured as a contiguous frame, and the test decides which
// frames arrive, in which order, how often, and what time it is.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <vector>

#include "core/endpoint.h"
#include "core/loopback.h"
#include "wire/mrc.h"

namespace mrc::test {

struct Frame {
    std::vector<uint8_t> bytes;
    uint8_t plane = 0;

    wire::MrcPacket parse() const {
        wire::MrcPacket p;
        const auto e = wire::parse_mrc(bytes.data(), static_cast<uint32_t>(bytes.size()),
                                       wire::kDefaultMrcPort, &p);
        EXPECT_EQ(e, wire::MrcError::kOk) << wire::to_string(e);
        return p;
    }
    wire::Opcode opcode() const { return parse().opcode; }
    Psn psn() const { return parse().psn; }
    uint16_t ev() const { return parse().ev; }
    uint8_t flags() const { return parse().flags; }
};

struct Side {
    std::unique_ptr<Endpoint> ep;
    Qp *qp = nullptr;
    std::vector<uint8_t> mem;  // a registered region (on B: the target)
    uint32_t rkey = 0;
};

class Harness {
  public:
    static constexpr uint32_t kPlanes = 2;

    explicit Harness(QpConfig cfg = small_config(), Psn a_start = Psn(1000),
                     Psn b_start = Psn(5000), uint32_t planes = kPlanes, bool ipv6 = false)
        : pair_(cfg, uint8_t(planes), a_start, b_start, 0, 0, ipv6), planes_(planes) {
        a.ep = std::move(pair_.a);
        b.ep = std::move(pair_.b);
        a.qp = pair_.qa;
        b.qp = pair_.qb;
        for (Side *s : {&a, &b}) {
            EXPECT_EQ(s->qp->state(), QpState::kRts);
            s->mem.assign(1 << 20, 0);
            s->rkey = s->ep->mrs()
                          .register_region(s->mem.data(), s->mem.size(), kAccessRemoteWrite,
                                           LoopbackPair::kPd)
                          .value();
        }
        for (size_t i = 0; i < src.size(); ++i)
            src[i] = static_cast<uint8_t>(i * 7 + 3);
    }

    static QpConfig small_config() {
        QpConfig c;
        c.mtu_payload_bytes = 1024;
        c.mpr_units = 2;  // 256-PSN window
        c.max_inflight_pkts = 256;
        c.ev.evs = 8;
        c.ev.backup_per_plane = 2;
        c.ev.min_active = 2;
        c.cc.algo = CcAlgo::kFixed;    // protocol mechanics; NSCC has tests of its own
        c.ack_every_bytes = 1u << 30;  // tests pick their ack triggers
        c.ack_req_every_pkts = 1u << 30;
        c.ack_delay_ns = 5000;
        c.retry.timeout_exp = 6;  // 65.5 us
        c.retry.limit = 3;
        c.retry.adaptive = false;           // a fixed timeout: tests know when it fires
        c.ev.reverse_probe_min_ns = 0;      // no reverse probes among the frames tests count
        c.liveness = LivenessConfig{0, 0};  // liveness has tests of its own
        return c;
    }

    // Everything `s` wants to send now, as frames.
    std::vector<Frame> drain(Side &s, uint32_t max = 1000) {
        std::vector<Frame> out;
        uint8_t hdrs[16][wire::kMaxHdrBytes];
        TxPacket tx[16];
        while (out.size() < max) {
            for (int i = 0; i < 16; ++i)
                tx[i].hdr = hdrs[i];
            const uint32_t n = s.ep->poll_tx(tx, 16, now_ns);
            if (n == 0) break;
            for (uint32_t i = 0; i < n; ++i) {
                Frame f;
                f.plane = tx[i].plane;
                f.bytes.assign(tx[i].hdr, tx[i].hdr + tx[i].hdr_len);
                f.bytes.insert(f.bytes.end(), tx[i].payload, tx[i].payload + tx[i].payload_len);
                out.push_back(std::move(f));
            }
        }
        return out;
    }
    void deliver(Side &to, const Frame &f) {
        to.ep->on_packet(f.bytes.data(), static_cast<uint32_t>(f.bytes.size()), f.plane, now_ns);
    }
    void deliver_all(Side &to, const std::vector<Frame> &fs) {
        for (const auto &f : fs)
            deliver(to, f);
    }
    void advance(uint64_t ns) {
        now_ns += ns;
        a.ep->on_time(now_ns);
        b.ep->on_time(now_ns);
    }

    // A posts a WRITE of `len` bytes from src+src_off to B's region at dst_off.
    PostResult write(uint32_t len, uint64_t dst_off = 0, uint64_t wr_id = 1, bool imm = false,
                     uint32_t imm_val = 0, uint32_t src_off = 0) {
        WriteRequest w;
        w.wr_id = wr_id;
        w.local = src.data() + src_off;
        w.length = len;
        w.remote_addr = reinterpret_cast<uint64_t>(b.mem.data()) + dst_off;
        w.rkey = b.rkey;
        w.with_imm = imm;
        w.imm = imm_val;
        return a.qp->post_write(w);
    }
    std::vector<SendCompletion> completions() {
        std::vector<SendCompletion> v(64);
        v.resize(a.qp->poll_send_cq(v.data(), 64));
        return v;
    }
    std::vector<RecvCompletion> recv_completions() {
        std::vector<RecvCompletion> v(64);
        v.resize(b.qp->poll_recv_cq(v.data(), 64));
        return v;
    }
    bool placed(uint32_t len, uint64_t dst_off = 0, uint32_t src_off = 0) const {
        return std::memcmp(b.mem.data() + dst_off, src.data() + src_off, len) == 0;
    }

    LoopbackPair pair_;  // set-up only: its endpoints move into a and b
    Side a, b;
    std::vector<uint8_t> src = std::vector<uint8_t>(1 << 20);
    uint64_t now_ns = 1'000'000;
    uint32_t planes_;
};

// Data packets only (WRITE and WRITE_IMM): what tests of retransmission
// count, without the probes an EV health change may send alongside.
inline std::vector<Frame> data_frames(const std::vector<Frame> &fs) {
    std::vector<Frame> r;
    for (const auto &f : fs)
        if (f.parse().is_data()) r.push_back(f);
    return r;
}

inline std::vector<Frame> only(const std::vector<Frame> &fs, wire::Opcode op) {
    std::vector<Frame> r;
    for (const auto &f : fs)
        if (f.opcode() == op) r.push_back(f);
    return r;
}

}  // namespace mrc::test
