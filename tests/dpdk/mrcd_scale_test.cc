// Scope: mrcd at scale and with more than one worker. Two daemons over
// memif (as in mrcd_test.cc), each with two worker lcores; the ends are
// libmrc contexts in this process. Checked:
//   - 2,000 QPs connected with mrc_connect_many, spread over both workers of
//     both daemons (two CQs per side, two services whose listeners use
//     different CQs), every QP moving its own verified slot;
//   - QPs destroyed while their writes are in flight: the others finish
//     with their data intact, the peer's QPs of the destroyed ones fail
//     with MRC_WC_PEER_DISCONNECTED, nothing else is touched;
//   - everything torn down: no QP left on either daemon, both exit 0 on
//     SIGTERM (under AddressSanitizer, with no leak report).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dpdk/mrcd_harness.h"
#include "mrc/mrc.h"

namespace mrc::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr uint32_t kQps = 2000;
constexpr uint32_t kSlotBytes = 4096;  // three packets at the default MTU
constexpr uint32_t kService = 7400;    // and kService + 1

uint8_t pattern(uint32_t i, uint32_t round) {
    return uint8_t(i * 131 + i / kSlotBytes * 7 + round * 29 + 1);
}

// Completions from both CQs until `want` arrived or `limit` passed.
std::vector<mrc_wc> poll_both(mrc_cq *const cq[2], size_t want, std::chrono::milliseconds limit) {
    std::vector<mrc_wc> out;
    const auto until = std::chrono::steady_clock::now() + limit;
    while (out.size() < want && std::chrono::steady_clock::now() < until) {
        int got = 0;
        for (int k = 0; k < 2; ++k) {
            mrc_wc wc[64];
            const int n = mrc_poll_cq(cq[k], wc, 64);
            if (n < 0) return out;
            out.insert(out.end(), wc, wc + n);
            got += n;
        }
        if (got == 0) std::this_thread::sleep_for(100us);
    }
    return out;
}

void post_slot(mrc_qp *q, const mrc_mr *src, const mrc_remote_mr &remote, uint32_t i,
               uint64_t wr_id) {
    const mrc_wr wr = slot_write(src, remote, kSlotBytes, i, wr_id);
    ASSERT_EQ(mrc_post_write(q, &wr), MRC_OK) << "QP " << i;
}

TEST(MrcdScale, TwoThousandQpsOnTwoWorkersMoveVerifiedDataAndTearDownCleanly) {
    Daemons d;
    d.workers = 2;
    d.daemon_toml = "max_qps_per_client = " + std::to_string(kQps) + "\n";
    start(d);
    ASSERT_FALSE(testing::Test::HasFailure());
    // Closed on every way out (a failed assertion too).
    struct Contexts {
        mrc_context *a = nullptr, *b = nullptr;
        ~Contexts() {
            if (a) mrc_close(a);
            if (b) mrc_close(b);
        }
    } ctx;
    mrc_context *&a = ctx.a, *&b = ctx.b;
    ASSERT_EQ(mrc_open(d.sock('a').c_str(), &a), MRC_OK) << mrc_last_error(nullptr);
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK) << mrc_last_error(nullptr);
    const uint64_t bytes = uint64_t{kQps} * kSlotBytes;
    // A target region per service (a key serves only its own service);
    // slot i of the one QP i's service writes.
    mrc_mr *src = nullptr, *dst[2] = {};
    mrc_remote_mr remote[2] = {};
    ASSERT_EQ(mrc_alloc_mr(a, bytes, MRC_ACCESS_LOCAL, kService, &src), MRC_OK);
    for (uint32_t k = 0; k < 2; ++k) {
        ASSERT_EQ(mrc_alloc_mr(b, bytes, MRC_ACCESS_REMOTE_WRITE, kService + k, &dst[k]), MRC_OK)
            << mrc_last_error(b);
        mrc_mr_remote(dst[k], &remote[k]);
    }
    auto *s = static_cast<uint8_t *>(mrc_mr_addr(src));
    auto slot = [&](uint32_t i) {
        return static_cast<uint8_t *>(mrc_mr_addr(dst[(i / 2) % 2])) + uint64_t{i} * kSlotBytes;
    };
    auto slot_intact = [&](uint32_t i) {
        return std::memcmp(slot(i), s + uint64_t{i} * kSlotBytes, kSlotBytes) == 0;
    };
    // CQs are given to workers in turn: two per side put one on each.
    mrc_cq *cqa[2] = {}, *cqb[2] = {};
    for (int k = 0; k < 2; ++k) {
        ASSERT_EQ(mrc_create_cq(a, 4096, &cqa[k]), MRC_OK) << mrc_last_error(a);
        ASSERT_EQ(mrc_create_cq(b, 4096, &cqb[k]), MRC_OK) << mrc_last_error(b);
    }
    mrc_qp_attr attr{4};
    for (uint32_t k = 0; k < 2; ++k)
        ASSERT_EQ(mrc_listen(b, kService + k, cqb[k], &attr), MRC_OK) << mrc_last_error(b);
    // QP i: on A's worker i % 2, to B's worker (i / 2) % 2 (every pairing).
    std::vector<mrc_qp *> qa(kQps, nullptr), qb;
    for (uint32_t i = 0; i < kQps; ++i)
        ASSERT_EQ(mrc_create_qp(a, cqa[i % 2], &attr, &qa[i]), MRC_OK)
            << "QP " << i << ": " << mrc_last_error(a);

    const auto t0 = std::chrono::steady_clock::now();
    auto phase = [t0](const char *what) {
        std::printf("%6.2f s  %s\n",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                    what);
    };
    for (uint32_t k = 0; k < 2; ++k) {
        std::vector<mrc_qp *> batch;
        for (uint32_t i = 0; i < kQps; ++i)
            if ((i / 2) % 2 == k) batch.push_back(qa[i]);
        std::vector<mrc_qp *> accepted;
        std::thread acceptor([&] {
            for (size_t n = 0; n < batch.size(); ++n) {
                mrc_qp *q = nullptr;
                if (mrc_accept(b, kService + k, 30000, &q) != MRC_OK) return;
                accepted.push_back(q);
            }
        });
        std::vector<int> status(batch.size(), 1);
        const int rc = mrc_connect_many(batch.data(), unsigned(batch.size()), d.ip('b').c_str(),
                                        kService + k, 30000, status.data());
        acceptor.join();
        ASSERT_EQ(rc, MRC_OK) << mrc_last_error(a);
        for (size_t n = 0; n < batch.size(); ++n)
            ASSERT_EQ(status[n], MRC_OK) << "QP " << n << " of service " << kService + k;
        ASSERT_EQ(accepted.size(), batch.size());
        qb.insert(qb.end(), accepted.begin(), accepted.end());
    }
    phase("QPs connected (two workers per daemon)");
    for (char w : {'a', 'b'}) {
        const json st = ctl(d, w, {"status"});
        ASSERT_TRUE(st.is_object()) << st;
        EXPECT_EQ(st["daemon"]["workers"], 2) << st["daemon"];
        EXPECT_EQ(st["daemon"]["qps"], kQps) << st["daemon"];
        EXPECT_EQ(st["daemon"]["worker_qps"], json::array({kQps / 2, kQps / 2})) << st["daemon"];
        // mrcctl qps lists them all (the daemon answers in pages), each once.
        // A worker refreshes its QPs' snapshots a slice at a time, so a QP
        // that has just connected may still read RESET for a few periods.
        json qs;
        for (auto until = std::chrono::steady_clock::now() + 10s;;) {
            qs = ctl(d, w, {"qps"});
            ASSERT_TRUE(qs.is_object() && qs.contains("qps")) << qs.dump().substr(0, 500);
            bool all_rts = true;
            for (const json &q : qs["qps"])
                all_rts = all_rts && q["state"] == "RTS";
            if (all_rts || std::chrono::steady_clock::now() > until) break;
            std::this_thread::sleep_for(50ms);
        }
        EXPECT_FALSE(qs.contains("next"));
        std::set<uint64_t> qpns;
        uint32_t per_worker[2] = {};
        for (const json &q : qs["qps"]) {
            qpns.insert(q["qpn"].get<uint64_t>());
            if (q["worker"].get<uint32_t>() < 2) ++per_worker[q["worker"].get<uint32_t>()];
            EXPECT_EQ(q["state"], "RTS") << q;
        }
        EXPECT_EQ(qs["qps"].size(), kQps);
        EXPECT_EQ(qpns.size(), kQps) << "a QP listed twice";
        EXPECT_EQ(per_worker[0], kQps / 2);
        EXPECT_EQ(per_worker[1], kQps / 2);
    }

    phase("status checked");
    // Round 1: every QP writes its slot; every slot arrives intact.
    for (uint64_t i = 0; i < bytes; ++i)
        s[i] = pattern(uint32_t(i), 1);
    for (uint32_t i = 0; i < kQps; ++i)
        post_slot(qa[i], src, remote[(i / 2) % 2], i, i);
    ASSERT_FALSE(testing::Test::HasFailure());
    std::vector<mrc_wc> wcs = poll_both(cqa, kQps, 60s);
    ASSERT_EQ(wcs.size(), kQps);
    std::vector<bool> seen(kQps, false);
    uint32_t failed = 0;
    for (const auto &w : wcs) {
        if (w.opcode == MRC_WC_QP_EVENT || w.status != MRC_WC_SUCCESS) {
            if (failed++ < 5)
                ADD_FAILURE() << "QP " << w.qp_num << ": opcode " << w.opcode << ", "
                              << mrc_wc_status_str(w.status);
            continue;
        }
        ASSERT_LT(w.wr_id, kQps);
        EXPECT_FALSE(seen[w.wr_id]) << "twice: wr " << w.wr_id;
        seen[w.wr_id] = true;
    }
    ASSERT_EQ(failed, 0u) << "QPs failed in round 1";
    for (uint32_t i = 0; i < kQps; ++i)
        ASSERT_TRUE(slot_intact(i)) << "slot of QP " << i;

    phase("round 1 verified");
    // Round 2: every QP writes again (a new pattern); every fourth QP is
    // destroyed while its write may be in flight. The others complete.
    for (uint64_t i = 0; i < bytes; ++i)
        s[i] = pattern(uint32_t(i), 2);
    for (uint32_t i = 0; i < kQps; ++i)
        post_slot(qa[i], src, remote[(i / 2) % 2], i, kQps + i);
    ASSERT_FALSE(testing::Test::HasFailure());
    uint32_t destroyed = 0;
    for (uint32_t i = 0; i < kQps; i += 4) {
        ASSERT_EQ(mrc_destroy_qp(qa[i]), MRC_OK) << mrc_last_error(a);
        qa[i] = nullptr;
        ++destroyed;
    }
    const uint32_t live = kQps - destroyed;
    std::vector<bool> done(kQps, false);
    uint32_t live_done = 0;
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (live_done < live && std::chrono::steady_clock::now() < until) {
        for (const auto &w : poll_both(cqa, 1, 100ms)) {
            // A destroyed QP's completions, if any reach the CQ, are not
            // looked at: its write may or may not have landed.
            const bool write = w.opcode == MRC_WC_WRITE;
            const uint32_t i = uint32_t(w.wr_id - kQps);
            if (write && w.wr_id >= kQps && w.wr_id < 2 * kQps && qa[i] == nullptr) continue;
            if (!write || w.wr_id < kQps || w.wr_id >= 2 * kQps) {
                ADD_FAILURE() << "QP " << w.qp_num << ": opcode " << w.opcode << ", wr " << w.wr_id
                              << ", " << mrc_wc_status_str(w.status);
                continue;
            }
            EXPECT_EQ(w.status, MRC_WC_SUCCESS) << "QP " << i;
            EXPECT_FALSE(done[i]) << "twice: QP " << i;
            if (!done[i]) ++live_done;
            done[i] = true;
        }
    }
    ASSERT_EQ(live_done, live);
    for (uint32_t i = 0; i < kQps; ++i) {
        if (qa[i] == nullptr) continue;
        ASSERT_TRUE(slot_intact(i)) << "slot of QP " << i;
    }
    phase("round 2 verified");
    // The peer side of every destroyed QP learns of it; no other QP does.
    uint32_t disconnected = 0;
    for (const auto &w : poll_both(cqb, destroyed, 30s)) {
        EXPECT_EQ(w.opcode, uint32_t(MRC_WC_QP_EVENT));
        EXPECT_EQ(w.status, uint32_t(MRC_WC_PEER_DISCONNECTED)) << "QP " << w.qp_num;
        ++disconnected;
    }
    EXPECT_EQ(disconnected, destroyed);
    EXPECT_TRUE(poll_both(cqb, 1, 200ms).empty());
    const json sa = ctl(d, 'a', {"status"});
    EXPECT_EQ(sa["daemon"]["qps"], live) << sa["daemon"];
    EXPECT_EQ(sa["traffic"]["qps_in_error"], 0) << sa["traffic"];

    phase("peers told");
    // Teardown: contexts closed, daemons empty, then stopped by SIGTERM.
    EXPECT_EQ(mrc_close(a), MRC_OK);
    EXPECT_EQ(mrc_close(b), MRC_OK);
    a = b = nullptr;
    for (char w : {'a', 'b'}) {
        json st;
        for (int i = 0; i < 200; ++i) {
            st = ctl(d, w, {"status"});
            // (mrcctl itself is a client while it asks.)
            if (st.is_object() && st["daemon"]["qps"] == 0 && st["daemon"]["clients"] == 1) break;
            std::this_thread::sleep_for(50ms);
        }
        EXPECT_EQ(st["daemon"]["qps"], 0) << st["daemon"];
        EXPECT_EQ(st["daemon"]["clients"], 1) << st["daemon"];
    }
    phase("contexts closed");
    for (auto *p : {&d.a, &d.b}) {
        ::kill((*p)->pid(), SIGTERM);
        const auto rc = (*p)->wait_for(30s);
        EXPECT_EQ(rc.value_or(-1), 0) << (*p)->log();
        EXPECT_EQ((*p)->log().find("Sanitizer"), std::string::npos) << (*p)->log();
    }
    phase("daemons stopped");
    finish(d);
}

}  // namespace
}  // namespace mrc::test
