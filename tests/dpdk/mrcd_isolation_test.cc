// Scope: what one application of mrcd can do to another, and to the daemon,
// with what it may write itself: its requests and its shared memory (the
// send-queue ring above all, which libmrc's checks do not guard: a client
// may write any bytes there). Two daemons over memif as in mrcd_test.cc;
// the hostile client is this process speaking the socket protocol and
// writing its rings directly. Checked, each with its error and nothing
// touched beyond it:
//   - another application's local key in a work request;
//   - a remote key of another service (and of another application of the
//     same service) on the responder;
//   - offsets and lengths outside the region, locally and remotely;
//   - a send-queue entry rewritten while the daemon consumes it;
//   - the client and QP limits: a clear refusal, others unaffected, room
//     again once one leaves.
// Target regions are one page with a guard at its end (mapped, outside the
// region) and source regions carry a marker past their end, so a write or
// a read outside a region shows in the bytes the test reads back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/ipc.h"
#include "dpdk/mrcd_harness.h"
#include "mrc/mrc.h"
#include "support/wait.h"

namespace mrc::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr size_t kPage = 4096;
constexpr size_t kGuardBytes = 96;                    // at the end of a target's page
constexpr size_t kTargetBytes = kPage - kGuardBytes;  // the target region
constexpr uint8_t kGuard = 0xa5;                      // the guard's bytes
constexpr uint8_t kBeyond = 0xee;        // what lies past a source region's end (never sent)
constexpr uint32_t kPeerB = 0x0a000002;  // daemon B, plane 0 (10.0.0.2)

// Bytes [from, to) of p all equal to v.
bool all_are(const uint8_t *p, size_t from, size_t to, uint8_t v) {
    for (size_t i = from; i < to; ++i)
        if (p[i] != v) return false;
    return true;
}
bool any_is(const uint8_t *p, size_t n, uint8_t v) {
    return std::memchr(p, v, n) != nullptr;
}

// A region on B that peers of `service` may write into: kTargetBytes of
// zeros, then the guard to the end of its page.
struct Target {
    mrc_mr *mr = nullptr;
    mrc_remote_mr remote{};
    uint8_t *bytes() const { return static_cast<uint8_t *>(mrc_mr_addr(mr)); }
    bool guard_intact() const { return all_are(bytes(), kTargetBytes, kPage, kGuard); }
};
void make_target(mrc_context *ctx, uint32_t service, Target &t) {
    ASSERT_EQ(mrc_alloc_mr(ctx, kTargetBytes, MRC_ACCESS_REMOTE_WRITE, service, &t.mr), MRC_OK)
        << mrc_last_error(ctx);
    std::memset(t.bytes(), 0, kTargetBytes);
    std::memset(t.bytes() + kTargetBytes, kGuard, kGuardBytes);
    mrc_mr_remote(t.mr, &t.remote);
}

// A shared mapping of a descriptor, unmapped (and closed) on destruction.
struct Mapping {
    void *p = MAP_FAILED;
    size_t bytes = 0;
    int fd = -1;
    Mapping(int f, size_t n)
        : p(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0)), bytes(n), fd(f) {}
    ~Mapping() {
        if (p != MAP_FAILED) ::munmap(p, bytes);
        if (fd >= 0) ::close(fd);
    }
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
};

// A client that speaks the socket protocol itself and maps its rings and
// regions here, so the test writes whatever it likes into them.
class Hostile {
  public:
    explicit Hostile(const std::string &sock) : raw_(sock) {}

    bool hello() { return raw_.hello().status == MRC_OK; }

    // A CQ; its ring, or nullptr (*err says why).
    ipc::RingHdr *cq(uint32_t depth, uint32_t *id, std::string *err) {
        std::vector<uint8_t> body;
        int fd = -1;
        const auto h = raw_.req(ipc::Op::kCreateCq, ipc::CreateCqReq{depth, 0}, -1, &body, &fd);
        return ring(h, body, fd, id, err);
    }
    // A QP on CQ `cq_id`, connected to the listener of `service` on B.
    ipc::RingHdr *qp(uint32_t cq_id, uint32_t depth, uint32_t service, std::string *err) {
        std::vector<uint8_t> body;
        int fd = -1;
        const auto h = raw_.req(ipc::Op::kCreateQp, ipc::CreateQpReq{cq_id, depth}, -1, &body, &fd);
        uint32_t qpn = 0;
        ipc::RingHdr *r = ring(h, body, fd, &qpn, err);
        if (r == nullptr) return nullptr;
        const auto c = raw_.req(ipc::Op::kConnect, ipc::ConnectReq{qpn, service, kPeerB, 10000});
        if (c.status != MRC_OK) {
            *err = std::string("connect: ") + c.message;
            return nullptr;
        }
        return r;
    }
    // A region of `length` bytes (local access) at the start of a sealed
    // memfd of `file_bytes`, mapped here whole: the bytes past `length` are
    // the application's, not the region's. Its key goes to *key.
    uint8_t *mr(uint64_t length, uint64_t file_bytes, uint32_t service, uint32_t *key,
                std::string *err) {
        const int fd = ::memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ::ftruncate(fd, off_t(file_bytes)) != 0 ||
            ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
            *err = "memfd";
            if (fd >= 0) ::close(fd);
            return nullptr;
        }
        maps_.push_back(std::make_unique<Mapping>(fd, file_bytes));
        auto *p = static_cast<uint8_t *>(maps_.back()->p);
        if (maps_.back()->p == MAP_FAILED) {
            *err = "mmap";
            return nullptr;
        }
        std::vector<uint8_t> body;
        const ipc::RegMrReq req{length, reinterpret_cast<uint64_t>(p), MRC_ACCESS_LOCAL, service};
        const auto h = raw_.req(ipc::Op::kRegMr, req, fd, &body);
        if (h.status != MRC_OK || body.size() < sizeof(ipc::RegMrRep)) {
            *err = std::string("register: ") + h.message;
            return nullptr;
        }
        ipc::RegMrRep rep;
        std::memcpy(&rep, body.data(), sizeof rep);
        *key = rep.key;
        return p;
    }

  private:
    ipc::RingHdr *ring(const ipc::RepHdr &h, const std::vector<uint8_t> &body, int fd, uint32_t *id,
                       std::string *err) {
        if (h.status != MRC_OK || fd < 0 || body.size() < sizeof(ipc::RingRep)) {
            *err = h.message;
            if (fd >= 0) ::close(fd);
            return nullptr;
        }
        ipc::RingRep rep;
        std::memcpy(&rep, body.data(), sizeof rep);
        maps_.push_back(std::make_unique<Mapping>(fd, rep.map_bytes));
        if (maps_.back()->p == MAP_FAILED) {
            *err = "mmap of a ring";
            return nullptr;
        }
        *id = rep.id;
        return static_cast<ipc::RingHdr *>(maps_.back()->p);
    }

    Raw raw_;
    std::vector<std::unique_ptr<Mapping>> maps_;
};

// Writes `e` into the send ring's next slot, publishes it and rings the
// doorbell in `cq`, as libmrc does but without its checks.
void post_raw(ipc::RingHdr *sq, ipc::RingHdr *cq, const ipc::Sqe &e) {
    const uint32_t prod = sq->prod.load(std::memory_order_relaxed);
    ipc::ring_entries<ipc::Sqe>(sq)[prod & (sq->entries - 1)] = e;
    sq->prod.store(prod + 1, std::memory_order_release);
    ipc::ring_doorbell(sq, cq);
}

// Takes completions from a raw CQ until `want` came or `limit` passed.
std::vector<ipc::Cqe> take_cqes(ipc::RingHdr *cq, size_t want, std::chrono::milliseconds limit) {
    std::vector<ipc::Cqe> out;
    const ipc::Cqe *e = ipc::ring_entries<ipc::Cqe>(cq);
    wait_until(
        [&] {
            const uint32_t prod = cq->prod.load(std::memory_order_acquire);
            uint32_t cons = cq->cons.load(std::memory_order_relaxed);
            for (; cons != prod; ++cons)
                out.push_back(e[cons & (cq->entries - 1)]);
            cq->cons.store(cons, std::memory_order_release);
            return out.size() >= want;
        },
        limit, 1ms);
    return out;
}

ipc::Sqe sqe(uint64_t wr_id, uint32_t lkey, uint64_t offset, uint32_t length,
             const mrc_remote_mr &to, uint64_t to_offset = 0) {
    ipc::Sqe e{};
    e.wr_id = wr_id;
    e.opcode = MRC_WR_WRITE;
    e.lkey = lkey;
    e.local_offset = offset;
    e.length = length;
    e.rkey = to.rkey;
    e.remote_addr = to.addr + to_offset;
    return e;
}

// One write through libmrc, waited for; its completion's status (or -1).
int write_and_wait(mrc_qp *qp, mrc_cq *cq, mrc_mr *from, uint32_t length, const mrc_remote_mr &to,
                   uint64_t to_offset = 0) {
    mrc_wr wr{};
    wr.wr_id = 42;
    wr.opcode = MRC_WR_WRITE;
    wr.local = from;
    wr.length = length;
    wr.rkey = to.rkey;
    wr.remote_addr = to.addr + to_offset;
    if (mrc_post_write(qp, &wr) != MRC_OK) return -1;
    int status = -1;
    wait_until(
        [&] {
            mrc_wc wc[16];
            const int n = mrc_poll_cq(cq, wc, 16);
            for (int i = 0; i < n; ++i)  // QP events (of this QP or one before) are not it
                if (wc[i].opcode == MRC_WC_WRITE && wc[i].qp_num == mrc_qp_num(qp))
                    status = int(wc[i].status);
            return status >= 0 || n < 0;
        },
        10s, 0ms);
    return status;
}

// An application on A with a QP to the listener of `service` on B, and a
// source region of `bytes` filled with `fill`.
struct App {
    mrc_context *ctx = nullptr;
    mrc_cq *cq = nullptr;
    mrc_qp *qp = nullptr;
    mrc_mr *src = nullptr;
};
void open_app(const Daemons &d, App &a, uint32_t service, size_t bytes, uint8_t fill) {
    ASSERT_EQ(mrc_open(d.sock('a').c_str(), &a.ctx), MRC_OK) << mrc_last_error(nullptr);
    ASSERT_EQ(mrc_alloc_mr(a.ctx, bytes, MRC_ACCESS_LOCAL, service, &a.src), MRC_OK);
    std::memset(mrc_mr_addr(a.src), fill, bytes);
    ASSERT_EQ(mrc_create_cq(a.ctx, 256, &a.cq), MRC_OK);
    ASSERT_EQ(mrc_create_qp(a.ctx, a.cq, nullptr, &a.qp), MRC_OK);
    ASSERT_EQ(mrc_connect(a.qp, d.ip('b').c_str(), service, 10000), MRC_OK)
        << mrc_last_error(a.ctx);
}

// The work request of a hostile client names the local key of a region
// another application registered on the same daemon. Asserts: the request
// completes LOCAL_PROTECTION_ERROR and its QP fails; not one byte of the
// other application's region reaches the target; the other application's
// region is unchanged and its own QP still writes (the same target, with
// the same bytes: so the check above would have seen them).
TEST(MrcdIsolation, AnotherApplicationsLocalKeyIsRefused) {
    Daemons d;
    start(d);
    constexpr uint32_t kService = 610;
    constexpr uint8_t kSecret = 0x5e;
    mrc_context *b = nullptr;
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK);
    Target t;
    make_target(b, kService, t);
    mrc_cq *cqb = nullptr;
    ASSERT_EQ(mrc_create_cq(b, 64, &cqb), MRC_OK);
    ASSERT_EQ(mrc_listen(b, kService, cqb, nullptr), MRC_OK);
    App victim;
    open_app(d, victim, kService, 64 * 1024, kSecret);

    Hostile h(d.sock('a'));
    ASSERT_TRUE(h.hello());
    std::string err;
    uint32_t cq_id = 0;
    ipc::RingHdr *cq = h.cq(64, &cq_id, &err);
    ASSERT_NE(cq, nullptr) << err;
    ipc::RingHdr *sq = h.qp(cq_id, 16, kService, &err);
    ASSERT_NE(sq, nullptr) << err;
    post_raw(sq, cq, sqe(7, mrc_mr_key(victim.src), 0, kTargetBytes, t.remote));
    const auto c = take_cqes(cq, 2, 5s);
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].wr_id, 7u);
    EXPECT_EQ(c[0].status, MRC_WC_LOCAL_PROTECTION_ERROR);
    EXPECT_EQ(c[1].opcode, MRC_WC_QP_EVENT);
    EXPECT_EQ(c[1].status, MRC_WC_LOCAL_PROTECTION_ERROR);
    EXPECT_EQ(sq->state.load(), ipc::kRingError);
    // Nothing of the victim's left A, the victim's region is as it was.
    EXPECT_FALSE(any_is(t.bytes(), kPage, kSecret));
    EXPECT_TRUE(all_are(t.bytes(), 0, kTargetBytes, 0));
    EXPECT_TRUE(t.guard_intact());
    EXPECT_TRUE(all_are(static_cast<uint8_t *>(mrc_mr_addr(victim.src)), 0, 64 * 1024, kSecret));
    // The victim's own QP is unaffected, and its bytes would have shown.
    EXPECT_EQ(write_and_wait(victim.qp, victim.cq, victim.src, 4096 - kGuardBytes, t.remote),
              MRC_WC_SUCCESS);
    EXPECT_TRUE(all_are(t.bytes(), 0, kTargetBytes, kSecret));
    EXPECT_TRUE(t.guard_intact());
    mrc_close(victim.ctx);
    mrc_close(b);
    finish(d);
}

// A QP connected under service 621 writes with valid remote keys of regions
// it has no right to: one registered for service 620 by the listener's own
// application, one registered for 621 by another application on B.
// Asserts: each write completes REMOTE_ACCESS_ERROR (the responder on B
// refuses it) and the region and its guard are unchanged; the listener's
// region of service 621 takes the same write (the path works).
TEST(MrcdIsolation, RemoteKeyOfAnotherServiceOrApplicationIsRefused) {
    Daemons d;
    start(d);
    constexpr uint32_t kOther = 620, kService = 621;
    constexpr uint8_t kFill = 0xc3;
    mrc_context *b = nullptr, *b2 = nullptr;
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK);
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b2), MRC_OK);
    Target other_service, other_app, mine;
    make_target(b, kOther, other_service);
    make_target(b2, kService, other_app);
    make_target(b, kService, mine);
    mrc_cq *cqb = nullptr;
    ASSERT_EQ(mrc_create_cq(b, 64, &cqb), MRC_OK);
    ASSERT_EQ(mrc_listen(b, kService, cqb, nullptr), MRC_OK);
    App a;
    open_app(d, a, kService, kTargetBytes, kFill);
    for (const Target *t : {&other_service, &other_app}) {
        EXPECT_EQ(write_and_wait(a.qp, a.cq, a.src, kTargetBytes, t->remote),
                  MRC_WC_REMOTE_ACCESS_ERROR);
        EXPECT_TRUE(all_are(t->bytes(), 0, kTargetBytes, 0));
        EXPECT_TRUE(t->guard_intact());
        // The QP failed: a new one for the next try.
        ASSERT_EQ(mrc_destroy_qp(a.qp), MRC_OK);
        ASSERT_EQ(mrc_create_qp(a.ctx, a.cq, nullptr, &a.qp), MRC_OK);
        ASSERT_EQ(mrc_connect(a.qp, d.ip('b').c_str(), kService, 10000), MRC_OK);
    }
    EXPECT_EQ(write_and_wait(a.qp, a.cq, a.src, kTargetBytes, mine.remote), MRC_WC_SUCCESS);
    EXPECT_TRUE(all_are(mine.bytes(), 0, kTargetBytes, kFill));
    EXPECT_TRUE(mine.guard_intact());
    EXPECT_TRUE(all_are(other_service.bytes(), 0, kTargetBytes, 0));
    EXPECT_TRUE(all_are(other_app.bytes(), 0, kTargetBytes, 0));
    mrc_close(a.ctx);
    mrc_close(b2);
    mrc_close(b);
    finish(d);
}

// Raw work requests whose offset or length leave the region, on the local
// side (the daemon's check) and on the remote side (the responder's),
// including sums that wrap. Asserts: each completes with its error
// (LOCAL_PROTECTION_ERROR, BAD_REQUEST, REMOTE_ACCESS_ERROR); the target
// and its guard are unchanged and no byte from past the source region's end
// reached it; both daemons stay up; a request inside the bounds then lands.
TEST(MrcdIsolation, RawWorkRequestsOutsideTheRegionAreRefused) {
    Daemons d;
    start(d);
    constexpr uint32_t kService = 630;
    constexpr uint8_t kFill = 0x11;
    mrc_context *b = nullptr;
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK);
    Target t;
    make_target(b, kService, t);
    mrc_cq *cqb = nullptr;
    ASSERT_EQ(mrc_create_cq(b, 64, &cqb), MRC_OK);
    ASSERT_EQ(mrc_listen(b, kService, cqb, nullptr), MRC_OK);

    Hostile h(d.sock('a'));
    ASSERT_TRUE(h.hello());
    std::string err;
    uint32_t key = 0, cq_id = 0;
    // The source: kTargetBytes of kFill in a two-page file whose rest is kBeyond.
    uint8_t *src = h.mr(kTargetBytes, 2 * kPage, kService, &key, &err);
    ASSERT_NE(src, nullptr) << err;
    std::memset(src, kFill, kTargetBytes);
    std::memset(src + kTargetBytes, kBeyond, 2 * kPage - kTargetBytes);
    ipc::RingHdr *cq = h.cq(256, &cq_id, &err);
    ASSERT_NE(cq, nullptr) << err;

    struct Case {
        const char *what;
        ipc::Sqe e;
        uint8_t want;
    };
    const mrc_remote_mr &to = t.remote;
    const std::vector<Case> cases = {
        {"local: runs 1000 bytes past the end", sqe(1, key, kTargetBytes - 1000, 2000, to),
         MRC_WC_LOCAL_PROTECTION_ERROR},
        {"local: starts past the end", sqe(2, key, kTargetBytes + 1, 1, to),
         MRC_WC_LOCAL_PROTECTION_ERROR},
        {"local: offset + length wraps", sqe(3, key, ~uint64_t{0} - 100, 200, to),
         MRC_WC_LOCAL_PROTECTION_ERROR},
        {"local: longer than the region", sqe(4, key, 0, kTargetBytes + 1, to),
         MRC_WC_LOCAL_PROTECTION_ERROR},
        {"zero length", sqe(5, key, 0, 0, to), MRC_WC_BAD_REQUEST},
        {"longer than a message may be", sqe(6, key, 0, (1u << 30) + 1, to), MRC_WC_BAD_REQUEST},
        {"remote: runs 100 bytes past the end", sqe(7, key, 0, 200, to, kTargetBytes - 100),
         MRC_WC_REMOTE_ACCESS_ERROR},
        {"remote: starts before the region", sqe(8, key, 0, 200, to, uint64_t(-100)),
         MRC_WC_REMOTE_ACCESS_ERROR},
        {"remote: address + length wraps", sqe(9, key, 0, 100, to, ~uint64_t{0} - 50 - to.addr),
         MRC_WC_REMOTE_ACCESS_ERROR},
    };
    for (const Case &k : cases) {
        SCOPED_TRACE(k.what);
        ipc::RingHdr *sq = h.qp(cq_id, 16, kService, &err);
        ASSERT_NE(sq, nullptr) << err;
        post_raw(sq, cq, k.e);
        const auto c = take_cqes(cq, 2, 10s);  // the request's, then the QP event
        ASSERT_EQ(c.size(), 2u);
        EXPECT_EQ(c[0].wr_id, k.e.wr_id);
        EXPECT_EQ(c[0].status, k.want);
        EXPECT_EQ(c[1].opcode, MRC_WC_QP_EVENT);
        EXPECT_TRUE(all_are(t.bytes(), 0, kTargetBytes, 0));
        EXPECT_TRUE(t.guard_intact());
    }
    EXPECT_FALSE(any_is(t.bytes(), kPage, kBeyond));
    EXPECT_FALSE(d.a->wait_for(0ms).has_value()) << d.a->log();
    EXPECT_FALSE(d.b->wait_for(0ms).has_value()) << d.b->log();
    // Inside the bounds: the whole region lands, nothing else.
    ipc::RingHdr *sq = h.qp(cq_id, 16, kService, &err);
    ASSERT_NE(sq, nullptr) << err;
    post_raw(sq, cq, sqe(10, key, 0, kTargetBytes, to));
    const auto c = take_cqes(cq, 1, 10s);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, MRC_WC_SUCCESS);
    EXPECT_TRUE(all_are(t.bytes(), 0, kTargetBytes, kFill));
    EXPECT_TRUE(t.guard_intact());
    mrc_close(b);
    finish(d);
}

// A thread rewrites the send-ring entry the daemon reads next, field by
// field and without pause, with a mix of good and hostile values (another
// application's key, a stale key, offsets and lengths past the region,
// remote addresses past the target, a bad opcode) while the test publishes
// entries one at a time; QP after QP (each ends at its first refused
// entry), for a few seconds. The daemon must take each entry as one copy
// and check that copy. Asserts: neither daemon dies; after every
// completion, the target's guard is intact and no byte from past the
// source region's end, nor of the other application's region, is in the
// target; entries were taken and some written (the test did exercise the
// daemon); the other application's QP still works afterwards.
// Without the daemon's local length check this fails at once (bytes past
// the source, even the other application's, reach the target). A read of
// the ring after the check (a window of nanoseconds) is hit only by chance.
TEST(MrcdIsolation, SendQueueEntryRewrittenWhileTheDaemonReadsIt) {
    Daemons d;
    start(d);
    constexpr uint32_t kService = 640;
    constexpr uint8_t kFill = 0x11, kSecret = 0x5e;
    mrc_context *b = nullptr;
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK);
    Target t;
    make_target(b, kService, t);
    mrc_cq *cqb = nullptr;
    ASSERT_EQ(mrc_create_cq(b, 1024, &cqb), MRC_OK);
    ASSERT_EQ(mrc_listen(b, kService, cqb, nullptr), MRC_OK);
    App victim;
    open_app(d, victim, kService, kTargetBytes, kSecret);
    mrc_qp *accepted = nullptr;
    ASSERT_EQ(mrc_accept(b, kService, 10000, &accepted), MRC_OK);

    Hostile h(d.sock('a'));
    ASSERT_TRUE(h.hello());
    std::string err;
    uint32_t key = 0, cq_id = 0;
    uint8_t *src = h.mr(kTargetBytes, 2 * kPage, kService, &key, &err);
    ASSERT_NE(src, nullptr) << err;
    std::memset(src, kFill, kTargetBytes);
    std::memset(src + kTargetBytes, kBeyond, 2 * kPage - kTargetBytes);
    ipc::RingHdr *cq = h.cq(4096, &cq_id, &err);
    ASSERT_NE(cq, nullptr) << err;

    const mrc_remote_mr to = t.remote;
    const uint32_t foreign = mrc_mr_key(victim.src);
    uint64_t taken = 0, ok = 0, refused = 0, flushed = 0, rounds = 0;
    bool beyond = false, secret = false, guard = true;
    // Sixteen values for each field, good but for one or two hostile ones
    // (another application's key, a stale key, an offset or length past the
    // region, an address past the target, a bad opcode); each field cycles
    // at its own pace, so entries (and torn copies) mix them.
    uint32_t lkeys[16], lengths[16], opcodes[16];
    uint64_t offsets[16], raddrs[16];
    for (uint32_t v = 0; v < 16; ++v) {
        lkeys[v] = key;
        offsets[v] = 100 * v;          // + the longest length: inside the source
        lengths[v] = 64 + 128 * v;     // at most 1984
        raddrs[v] = to.addr + 64 * v;  // + the longest length: inside the target
        opcodes[v] = v % 3 ? MRC_WR_WRITE : MRC_WR_WRITE_WITH_IMM;
    }
    lkeys[7] = key ^ 0x100;
    lkeys[15] = foreign;
    offsets[14] = kTargetBytes - 50;
    offsets[15] = ~uint64_t{0} - 10;
    lengths[14] = kTargetBytes + 200;
    lengths[15] = 1u << 31;
    raddrs[15] = to.addr + kTargetBytes - 32;
    opcodes[15] = 77;
    auto count = [&](const std::vector<ipc::Cqe> &cqes) {
        for (const auto &c : cqes) {
            if (c.opcode != MRC_WC_WRITE) continue;
            ++taken;
            ++(c.status == MRC_WC_SUCCESS ? ok : c.status == MRC_WC_FLUSHED ? flushed : refused);
        }
    };

    const auto until = std::chrono::steady_clock::now() + 4s;
    mrc_wc wcb[64];
    while ((std::chrono::steady_clock::now() < until || rounds < 3) && rounds < 200) {
        ipc::RingHdr *sq = h.qp(cq_id, 64, kService, &err);
        ASSERT_NE(sq, nullptr) << err;
        ++rounds;
        ipc::Sqe *ring = ipc::ring_entries<ipc::Sqe>(sq);
        const uint32_t entries = sq->entries;
        std::atomic<bool> stop{false};
        std::atomic<bool> filled{false};
        // Every slot once, then only the one the daemon reads next (its
        // consumer index), so the rewrites meet its reads as often as can be.
        std::thread writer([&] {
            for (uint32_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
                if (i == entries) filled.store(true);
                const uint32_t slot = i < entries ? i : sq->cons.load(std::memory_order_relaxed);
                volatile ipc::Sqe &e = ring[slot & (entries - 1)];
                e.wr_id = i;
                e.opcode = opcodes[i % 16];
                e.lkey = lkeys[(i / 3) % 16];
                e.local_offset = offsets[(i / 5) % 16];
                e.length = lengths[(i / 7) % 16];
                e.remote_addr = raddrs[(i / 11) % 16];
                e.rkey = i % 13 ? to.rkey : to.rkey ^ 0x200;
            }
        });
        // Once every slot holds the writer's values: publish entries one
        // at a time, each once the one before completed, until the QP
        // fails or a round's worth was taken.
        ASSERT_TRUE(wait_until([&] { return filled.load(); }, 5s, 0ms));
        for (uint32_t n = 0; n < 256 && sq->state.load() == ipc::kRingOk; ++n) {
            sq->prod.store(sq->prod.load(std::memory_order_relaxed) + 1, std::memory_order_release);
            ipc::ring_doorbell(sq, cq);
            const uint64_t before = taken;
            wait_until(
                [&] {
                    count(take_cqes(cq, 0, 0ms));
                    mrc_poll_cq(cqb, wcb, 64);  // B's receive completions (WRITE_WITH_IMM)
                    // Looked at after every completion: a later write
                    // would cover what a bad one left.
                    beyond |= any_is(t.bytes(), kPage, kBeyond);
                    secret |= any_is(t.bytes(), kPage, kSecret);
                    guard &= t.guard_intact();
                    return taken > before || sq->state.load() != ipc::kRingOk;
                },
                5s, 0ms);
        }
        stop = true;
        writer.join();
        // The daemon B created a QP for each connection: take and drop it.
        mrc_qp *q = nullptr;
        if (mrc_accept(b, kService, 5000, &q) == MRC_OK) mrc_destroy_qp(q);
        ASSERT_FALSE(d.a->wait_for(0ms).has_value()) << "daemon A died:\n" << d.a->log();
    }
    count(take_cqes(cq, 0, 0ms));
    std::printf("%llu QPs, %llu entries taken: %llu written, %llu refused, %llu flushed\n",
                (unsigned long long)rounds, (unsigned long long)taken, (unsigned long long)ok,
                (unsigned long long)refused, (unsigned long long)flushed);
    EXPECT_GE(taken, rounds);
    EXPECT_GT(ok, 0u);
    EXPECT_FALSE(d.a->wait_for(0ms).has_value()) << d.a->log();
    EXPECT_FALSE(d.b->wait_for(0ms).has_value()) << d.b->log();
    EXPECT_TRUE(guard && t.guard_intact()) << "a write past the target's end";
    EXPECT_FALSE(beyond) << "bytes from past the source region's end reached the target";
    EXPECT_FALSE(secret) << "bytes of the other application's region reached the target";
    // The other application on A still works.
    EXPECT_EQ(write_and_wait(victim.qp, victim.cq, victim.src, kTargetBytes, to), MRC_WC_SUCCESS);
    EXPECT_TRUE(all_are(t.bytes(), 0, kTargetBytes, kSecret));
    EXPECT_TRUE(t.guard_intact());
    mrc_close(victim.ctx);
    mrc_close(b);
    finish(d);
}

// Daemons that serve at most 3 applications, 2 QPs each, and (daemon A's
// one worker) 5 QPs in all. Asserts: the 4th application's mrc_open fails
// with MRC_ENOMEM and says the limit; a 3rd QP of one application fails
// with MRC_ENOMEM and says the limit; a QP past the worker's table fails
// with MRC_ENOMEM; a connection B cannot take (its listener at its limit)
// is refused by name; meanwhile the first application's QP still writes;
// once an application leaves, the next one is served.
TEST(MrcdIsolation, ClientAndQpLimitsRefuseClearlyAndSpareOthers) {
    Daemons d;
    d.daemon_toml = "max_clients = 3\nmax_qps_per_client = 2\n";
    d.dataplane_toml = "max_qps = 5\n";
    start(d);
    constexpr uint32_t kService = 650;
    constexpr uint8_t kFill = 0x3c;
    mrc_context *b = nullptr;
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK);
    Target t;
    make_target(b, kService, t);
    mrc_cq *cqb = nullptr;
    ASSERT_EQ(mrc_create_cq(b, 64, &cqb), MRC_OK);
    ASSERT_EQ(mrc_listen(b, kService, cqb, nullptr), MRC_OK);
    App first;
    open_app(d, first, kService, kTargetBytes, kFill);

    // QPs: the application's limit.
    mrc_qp *q2 = nullptr, *q3 = nullptr;
    ASSERT_EQ(mrc_create_qp(first.ctx, first.cq, nullptr, &q2), MRC_OK);
    EXPECT_EQ(mrc_create_qp(first.ctx, first.cq, nullptr, &q3), MRC_ENOMEM);
    EXPECT_NE(std::string(mrc_last_error(first.ctx)).find("at most 2 QPs per application"),
              std::string::npos)
        << mrc_last_error(first.ctx);
    // B's listener holds 1 QP (the first connection) and may have 2: the
    // second connection is taken, the third refused by name.
    ASSERT_EQ(mrc_connect(q2, d.ip('b').c_str(), kService, 10000), MRC_OK)
        << mrc_last_error(first.ctx);

    // Applications: the daemon's limit (first is one, two more fit).
    mrc_context *second = nullptr, *third = nullptr, *fourth = nullptr;
    ASSERT_EQ(mrc_open(d.sock('a').c_str(), &second), MRC_OK) << mrc_last_error(nullptr);
    ASSERT_EQ(mrc_open(d.sock('a').c_str(), &third), MRC_OK) << mrc_last_error(nullptr);
    EXPECT_EQ(mrc_open(d.sock('a').c_str(), &fourth), MRC_ENOMEM);
    EXPECT_NE(std::string(mrc_last_error(nullptr)).find("at most 3 applications"),
              std::string::npos)
        << mrc_last_error(nullptr);
    EXPECT_EQ(fourth, nullptr);

    // The worker's QP table (5): first holds 2, second takes 2, third 1, then none.
    mrc_cq *cq2 = nullptr, *cq3 = nullptr;
    ASSERT_EQ(mrc_create_cq(second, 64, &cq2), MRC_OK);
    ASSERT_EQ(mrc_create_cq(third, 64, &cq3), MRC_OK);
    mrc_qp *s1 = nullptr, *s2 = nullptr, *t1 = nullptr, *t2 = nullptr;
    ASSERT_EQ(mrc_create_qp(second, cq2, nullptr, &s1), MRC_OK);
    ASSERT_EQ(mrc_create_qp(second, cq2, nullptr, &s2), MRC_OK);
    ASSERT_EQ(mrc_create_qp(third, cq3, nullptr, &t1), MRC_OK);
    EXPECT_EQ(mrc_create_qp(third, cq3, nullptr, &t2), MRC_ENOMEM);
    EXPECT_NE(std::string(mrc_last_error(third)).find("max_qps 5"), std::string::npos)
        << mrc_last_error(third);
    // B's listener is at its 2 QPs: the connection is refused, by name.
    EXPECT_EQ(mrc_connect(t1, d.ip('b').c_str(), kService, 10000), MRC_EREFUSED);
    EXPECT_NE(std::string(mrc_last_error(third)).find("out of resources"), std::string::npos)
        << mrc_last_error(third);

    // The first application is unaffected.
    EXPECT_EQ(write_and_wait(first.qp, first.cq, first.src, kTargetBytes, t.remote),
              MRC_WC_SUCCESS);
    EXPECT_TRUE(all_are(t.bytes(), 0, kTargetBytes, kFill));
    EXPECT_TRUE(t.guard_intact());

    // One leaves: a new application is served (once daemon A saw it go),
    // and the QPs it held are free again.
    mrc_close(second);
    EXPECT_TRUE(
        wait_until([&] { return mrc_open(d.sock('a').c_str(), &fourth) == MRC_OK; }, 10s, 50ms))
        << mrc_last_error(nullptr);
    ASSERT_NE(fourth, nullptr);
    mrc_cq *cq4 = nullptr;
    mrc_qp *f1 = nullptr;
    ASSERT_EQ(mrc_create_cq(fourth, 64, &cq4), MRC_OK);
    EXPECT_EQ(mrc_create_qp(fourth, cq4, nullptr, &f1), MRC_OK) << mrc_last_error(fourth);
    mrc_close(fourth);
    mrc_close(third);
    mrc_close(first.ctx);
    mrc_close(b);
    finish(d);
}

}  // namespace
}  // namespace mrc::test
