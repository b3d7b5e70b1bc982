// libmrc: the C API of mrc/mrc.h over the daemon's socket and shared memory.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/ipc.h"
#include "client/sock.h"
#include "mrc/mrc.h"

using namespace mrc::ipc;

struct mrc_context {
    int fd = -1;
    std::mutex mu;  // one request at a time on the socket
    uint32_t seq = 0;
    std::atomic<bool> dead{false};
    HelloRep info{};
    // The daemon's wake page (read-only): a worker's word is set while it sleeps.
    const uint8_t *wake_page = nullptr;
    size_t wake_bytes = 0;
    std::vector<mrc_mr *> mrs;
    std::vector<mrc_cq *> cqs;
    std::vector<mrc_qp *> qps;
};

struct mrc_mr {
    mrc_context *ctx;
    void *addr;
    size_t length;
    size_t map_bytes;
    uint32_t key;
    uint32_t access;
    uint32_t service;
};

struct mrc_cq {
    mrc_context *ctx;
    RingHdr *ring;
    Cqe *e;
    uint32_t entries;
    size_t map_bytes;
    uint32_t id;
    uint32_t cons;
    uint32_t empty_polls;
    // The serving worker's sleeping word and wake fd (none: -1 / null).
    const std::atomic<uint32_t> *sleeping;
    int wake_fd;
};

namespace {
// Wakes the CQ's worker if it sleeps (mrcd's adaptive idle mode).
inline void wake_worker(const mrc_cq *cq) {
    if (cq->sleeping != nullptr && cq->sleeping->load(std::memory_order_seq_cst)) {
        const uint64_t one = 1;
        [[maybe_unused]] const ssize_t n = ::write(cq->wake_fd, &one, sizeof one);
    }
}
}  // namespace

struct mrc_qp {
    mrc_context *ctx;
    mrc_cq *cq;
    RingHdr *ring;
    Sqe *e;
    uint32_t entries;
    size_t map_bytes;
    uint32_t qpn;
    uint32_t prod;
    uint32_t cons_seen;  // the daemon's consumer index as last read
    bool connected;
};

namespace {

uint64_t mono_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

// The calling thread's last error (like errno): threads posting to
// different QPs of one context never share it.
thread_local char t_error[512];

__attribute__((format(printf, 3, 4))) int fail(mrc_context *, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    return status;
}

int sys_fail(mrc_context *ctx, const char *what) {
    return fail(ctx, MRC_ESYS, "%s: %s", what, std::strerror(errno));
}

// A reply with sequence number 0 answers no request: the daemon refused the
// connection itself (too many applications, shutting down) and closed it.
bool is_refusal(const RepHdr &rh) {
    return rh.magic == kMagic && rh.seq == 0 && rh.status != MRC_OK;
}

// After a failed send or a reset: the daemon may have refused the
// connection before it was used (and closed it with our request unread,
// which resets it); its reason is then still waiting on the socket.
// MRC_OK when not.
int take_refusal(mrc_context *ctx) {
    pollfd p{ctx->fd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) return MRC_OK;
    RepHdr rh;
    int fd = -1;
    const ssize_t n = recv_msg(ctx->fd, &rh, sizeof rh, &fd);
    if (fd >= 0) ::close(fd);
    if (n != ssize_t(sizeof rh) || !is_refusal(rh)) return MRC_OK;
    rh.message[sizeof rh.message - 1] = 0;
    return fail(ctx, rh.status, "%s", rh.message);
}

// One request, one reply. Holds ctx->mu. `reply` gets the body; *fd_in a
// descriptor that came with it. timeout_ms bounds the wait for the reply.
int request(mrc_context *ctx, Op op, const void *body, size_t body_len, void *reply,
            size_t reply_cap, int fd_out = -1, int *fd_in = nullptr, int timeout_ms = 10'000,
            std::string *text = nullptr, int *fd_in2 = nullptr) {
    if (fd_in != nullptr) *fd_in = -1;
    if (fd_in2 != nullptr) *fd_in2 = -1;
    if (ctx->dead) return fail(ctx, MRC_EDAEMON, "the daemon went away");
    std::vector<uint8_t> msg(sizeof(ReqHdr) + body_len);
    ReqHdr h{kMagic, kVersion, uint16_t(op), ++ctx->seq, uint32_t(body_len)};
    std::memcpy(msg.data(), &h, sizeof h);
    if (body_len) std::memcpy(msg.data() + sizeof h, body, body_len);
    if (int r = send_msg(ctx->fd, msg.data(), msg.size(), fd_out); r != 0) {
        ctx->dead = r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN;
        if (ctx->dead)
            if (const int refused = take_refusal(ctx); refused != MRC_OK) return refused;
        return fail(ctx, ctx->dead ? MRC_EDAEMON : MRC_ESYS, "sending to the daemon: %s",
                    std::strerror(-r));
    }
    std::vector<uint8_t> in(kMaxMessageBytes);
    for (;;) {
        pollfd p{ctx->fd, POLLIN, 0};
        const int pr = ::poll(&p, 1, timeout_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) return sys_fail(ctx, "poll");
        if (pr == 0)
            return fail(ctx, MRC_ETIMEDOUT, "the daemon did not answer within %d ms", timeout_ms);
        int fd = -1, fd2 = -1;
        const ssize_t n = recv_msg(ctx->fd, in.data(), in.size(), &fd, &fd2);
        // The second descriptor is only ever kept by a caller that asked for it.
        if (fd2 >= 0 && (fd_in2 == nullptr || n <= 0)) {
            ::close(fd2);
            fd2 = -1;
        }
        const auto drop_fds = [&] {
            if (fd >= 0) ::close(fd);
            if (fd2 >= 0) ::close(fd2);
            fd = fd2 = -1;
        };
        if (n == 0 || n == -ECONNRESET) {
            ctx->dead = true;
            // A reset comes before what was sent ahead of it: a refusal
            // may still be waiting.
            if (n < 0)
                if (const int refused = take_refusal(ctx); refused != MRC_OK) return refused;
            return fail(ctx, MRC_EDAEMON, "the daemon closed the connection");
        }
        if (n < 0) return fail(ctx, MRC_ESYS, "receiving from the daemon: %s", std::strerror(-n));
        RepHdr rh;
        if (size_t(n) < sizeof rh) {
            drop_fds();
            ctx->dead = true;
            return fail(ctx, MRC_EDAEMON, "short reply from the daemon (%zd bytes)", n);
        }
        std::memcpy(&rh, in.data(), sizeof rh);
        if (rh.magic != kMagic || rh.body_bytes != size_t(n) - sizeof rh) {
            drop_fds();
            ctx->dead = true;
            return fail(ctx, MRC_EDAEMON, "malformed reply from the daemon");
        }
        if (is_refusal(rh)) {
            drop_fds();
            ctx->dead = true;
            rh.message[sizeof rh.message - 1] = 0;
            return fail(ctx, rh.status, "%s", rh.message);
        }
        if (rh.seq != ctx->seq) {  // a late answer to a request that timed out
            drop_fds();
            continue;
        }
        rh.message[sizeof rh.message - 1] = 0;
        if (rh.status != MRC_OK) {
            drop_fds();
            if (rh.status == MRC_EVERSION) ctx->dead = true;
            return fail(ctx, rh.status, "%s", rh.message);
        }
        if (text != nullptr) {
            text->assign(reinterpret_cast<const char *>(in.data() + sizeof rh), rh.body_bytes);
        } else if (reply != nullptr) {
            if (rh.body_bytes < reply_cap) {
                drop_fds();
                return fail(ctx, MRC_EDAEMON, "reply body too short (%u bytes)", rh.body_bytes);
            }
            std::memcpy(reply, in.data() + sizeof rh, reply_cap);
        }
        if (fd_in != nullptr)
            *fd_in = fd;
        else if (fd >= 0)
            ::close(fd);
        if (fd_in2 != nullptr) *fd_in2 = fd2;
        return MRC_OK;
    }
}

// Maps a ring the daemon created; checks it is what the reply says.
int map_ring(mrc_context *ctx, int fd, const RingRep &rep, size_t entry_bytes, RingHdr **out) {
    if (fd < 0) return fail(ctx, MRC_EDAEMON, "the daemon sent no ring");
    // A CQ's mapping also holds its doorbell bitmap (ipc.h): up to a bit per
    // possible QP.
    if (rep.entries == 0 || rep.entries > kMaxRingEntries || (rep.entries & (rep.entries - 1)) ||
        rep.map_bytes < ring_bytes(rep.entries, entry_bytes) ||
        rep.map_bytes > ring_bytes(rep.entries, entry_bytes, kMaxBellBits)) {
        ::close(fd);
        return fail(ctx, MRC_EDAEMON, "the daemon sent a ring of a bad size");
    }
    void *p = ::mmap(nullptr, rep.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return sys_fail(ctx, "mmap of a ring");
    auto *h = static_cast<RingHdr *>(p);
    const bool cq = entry_bytes == sizeof(Cqe);
    const uint32_t bells = cq ? h->bell : 0;
    if (h->entries != rep.entries || h->entry_bytes != entry_bytes || bells > kMaxBellBits ||
        rep.map_bytes != ring_bytes(rep.entries, entry_bytes, bells) ||
        (cq && h->bell_offset != bell_offset(rep.entries, entry_bytes))) {
        ::munmap(p, rep.map_bytes);
        return fail(ctx, MRC_EDAEMON, "ring header disagrees with the reply");
    }
    *out = h;
    return MRC_OK;
}

template <typename T>
void erase(std::vector<T *> &v, T *x) {
    v.erase(std::remove(v.begin(), v.end(), x), v.end());
}

int destroy_qp_locked(mrc_qp *qp, bool tell) {
    mrc_context *ctx = qp->ctx;
    int r = MRC_OK;
    if (tell) {
        KeyReq k{qp->qpn, 0};
        r = request(ctx, Op::kDestroyQp, &k, sizeof k, nullptr, 0);
        if (r != MRC_OK && r != MRC_EDAEMON) return r;  // still the daemon's: keep the handle
    }
    ::munmap(qp->ring, qp->map_bytes);
    erase(ctx->qps, qp);
    delete qp;
    return r == MRC_EDAEMON ? MRC_OK : r;
}

int new_qp(mrc_context *ctx, mrc_cq *cq, const RingRep &rep, int fd, mrc_qp **out) {
    RingHdr *h = nullptr;
    if (int r = map_ring(ctx, fd, rep, sizeof(Sqe), &h); r != MRC_OK) {
        KeyReq k{rep.id, 0};
        request(ctx, Op::kDestroyQp, &k, sizeof k, nullptr, 0);
        return r;
    }
    auto *qp = new mrc_qp{};
    qp->ctx = ctx;
    qp->cq = cq;
    qp->ring = h;
    qp->e = ring_entries<Sqe>(h);
    qp->entries = rep.entries;
    qp->map_bytes = rep.map_bytes;
    qp->qpn = rep.id;
    qp->prod = h->prod.load(std::memory_order_relaxed);
    qp->cons_seen = qp->prod;
    ctx->qps.push_back(qp);
    *out = qp;
    return MRC_OK;
}

std::optional<uint32_t> parse_ip(const char *s) {
    in_addr a;
    if (s == nullptr || ::inet_pton(AF_INET, s, &a) != 1) return std::nullopt;
    return ntohl(a.s_addr);
}

}  // namespace

extern "C" {

const char *mrc_strerror(int status) {
    switch (status) {
        case MRC_OK:
            return "success";
        case MRC_EINVAL:
            return "invalid argument";
        case MRC_EAGAIN:
            return "send queue full, try again";
        case MRC_ENOMEM:
            return "out of memory or daemon resources";
        case MRC_ENOENT:
            return "no such object";
        case MRC_EPERM:
            return "not permitted";
        case MRC_EVERSION:
            return "API version mismatch";
        case MRC_ETIMEDOUT:
            return "timed out";
        case MRC_EREFUSED:
            return "connection refused";
        case MRC_EDAEMON:
            return "the daemon went away";
        case MRC_ESTATE:
            return "wrong state";
        case MRC_EBUSY:
            return "busy";
        case MRC_ESYS:
            return "system call failed";
    }
    return "unknown status";
}

const char *mrc_wc_status_str(uint32_t status) {
    switch (status) {
        case MRC_WC_SUCCESS:
            return "success";
        case MRC_WC_RETRY_EXCEEDED:
            return "retry exceeded (the peer stopped acknowledging)";
        case MRC_WC_NACK_RETRY_EXCEEDED:
            return "refused too often by the peer";
        case MRC_WC_REMOTE_ACCESS_ERROR:
            return "remote access error (key, address or length refused)";
        case MRC_WC_REMOTE_PROTOCOL_ERROR:
            return "remote protocol error";
        case MRC_WC_FLUSHED:
            return "flushed (the QP is in the error state)";
        case MRC_WC_LOCAL_PROTECTION_ERROR:
            return "local protection error (region unknown or range outside it)";
        case MRC_WC_BAD_REQUEST:
            return "malformed work request";
        case MRC_WC_PEER_DISCONNECTED:
            return "the peer disconnected";
        case MRC_WC_DAEMON_SHUTDOWN:
            return "the daemon is shutting down";
        case MRC_WC_PEER_UNREACHABLE:
            return "peer unreachable (nothing heard from it for the liveness timeout)";
    }
    return "unknown completion status";
}

const char *mrc_last_error(const mrc_context *) {
    return t_error;
}

int mrc_open(const char *socket_path, mrc_context **out) {
    if (out == nullptr) return fail(nullptr, MRC_EINVAL, "mrc_open: out is NULL");
    *out = nullptr;
    std::string path = socket_path ? socket_path : "";
    if (path.empty()) {
        const char *env = std::getenv("MRC_SOCKET");
        path = env && *env ? env : MRC_DEFAULT_SOCKET;
    }
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path)
        return fail(nullptr, MRC_EINVAL, "socket path too long: %s", path.c_str());
    std::memcpy(a.sun_path, path.data(), path.size());
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(nullptr, MRC_ESYS, "socket: %s", std::strerror(errno));
    if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        const int e = errno;
        ::close(fd);
        return fail(nullptr, e == EACCES || e == EPERM ? MRC_EPERM : MRC_ESYS,
                    "cannot reach mrcd at %s: %s%s", path.c_str(), std::strerror(e),
                    e == ENOENT || e == ECONNREFUSED ? " (is mrcd running?)" : "");
    }
    auto *ctx = new mrc_context;
    ctx->fd = fd;
    HelloReq h{};
    h.api_version = MRC_API_VERSION;
    h.pid = static_cast<uint32_t>(::getpid());
    std::snprintf(h.name, sizeof h.name, "%s", program_invocation_short_name);
    int wake_fd = -1;
    const int r =
        request(ctx, Op::kHello, &h, sizeof h, &ctx->info, sizeof ctx->info, -1, &wake_fd);
    if (r != MRC_OK) {
        ::close(fd);
        delete ctx;
        return r;
    }
    // The wake page: without it (or with a bad one) posts still work; a
    // sleeping worker then finds them when it next wakes by itself.
    if (wake_fd >= 0) {
        struct stat st {};
        const uint64_t need = uint64_t(ctx->info.workers) * ctx->info.wake_stride;
        if (::fstat(wake_fd, &st) == 0 && ctx->info.wake_stride >= sizeof(std::atomic<uint32_t>) &&
            ctx->info.wake_stride % alignof(std::atomic<uint32_t>) == 0 && need > 0 &&
            need <= uint64_t(st.st_size)) {
            void *p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, wake_fd, 0);
            if (p != MAP_FAILED) {
                ctx->wake_page = static_cast<const uint8_t *>(p);
                ctx->wake_bytes = size_t(st.st_size);
            }
        }
        ::close(wake_fd);
    }
    *out = ctx;
    return MRC_OK;
}

int mrc_query(mrc_context *ctx, struct mrc_info *out) {
    if (ctx == nullptr || out == nullptr) return MRC_EINVAL;
    *out = mrc_info{};
    out->api_version = ctx->info.api_version;
    out->planes = ctx->info.planes;
    out->max_msg_bytes = ctx->info.max_msg_bytes;
    out->mtu_payload_bytes = ctx->info.mtu_payload_bytes;
    std::memcpy(out->local_ip, ctx->info.local_ip, sizeof out->local_ip);
    std::memcpy(out->daemon, ctx->info.daemon, sizeof out->daemon);
    out->daemon[sizeof out->daemon - 1] = 0;
    return MRC_OK;
}

int mrc_close(mrc_context *ctx) {
    if (ctx == nullptr) return MRC_EINVAL;
    {
        std::lock_guard<std::mutex> g(ctx->mu);
        // Not one request per QP: closing the socket below has the daemon
        // release them all (and tell their peers) in one go.
        while (!ctx->qps.empty())
            destroy_qp_locked(ctx->qps.back(), false);
        for (mrc_cq *cq : ctx->cqs) {
            ::munmap(cq->ring, cq->map_bytes);
            if (cq->wake_fd >= 0) ::close(cq->wake_fd);
            delete cq;
        }
        for (mrc_mr *mr : ctx->mrs) {
            ::munmap(mr->addr, mr->map_bytes);
            delete mr;
        }
    }
    // Closing the socket releases everything the daemon still holds for us.
    ::close(ctx->fd);
    if (ctx->wake_page != nullptr) ::munmap(const_cast<uint8_t *>(ctx->wake_page), ctx->wake_bytes);
    delete ctx;
    return MRC_OK;
}

int mrc_alloc_mr(mrc_context *ctx, size_t length, uint32_t access, uint32_t service, mrc_mr **out) {
    if (ctx == nullptr || out == nullptr) return MRC_EINVAL;
    *out = nullptr;
    if (length == 0 || length > (size_t{1} << 40))
        return fail(ctx, MRC_EINVAL, "region length %zu out of range (1 B .. 1 TiB)", length);
    if (access & ~MRC_ACCESS_REMOTE_WRITE)
        return fail(ctx, MRC_EINVAL, "unknown access bits 0x%x", access);
    const size_t map_bytes = (length + 4095) / 4096 * 4096;
    const int fd = ::memfd_create("mrc-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return sys_fail(ctx, "memfd_create");
    if (::ftruncate(fd, off_t(map_bytes)) != 0) {
        ::close(fd);
        return sys_fail(ctx, "ftruncate of a region");
    }
    // Sealed: neither side can shrink it under the other's mapping.
    if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        ::close(fd);
        return sys_fail(ctx, "sealing a region");
    }
    void *p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ::close(fd);
        return sys_fail(ctx, "mmap of a region");
    }
    std::lock_guard<std::mutex> g(ctx->mu);
    RegMrReq req{length, reinterpret_cast<uint64_t>(p), access, service};
    RegMrRep rep{};
    const int r = request(ctx, Op::kRegMr, &req, sizeof req, &rep, sizeof rep, fd);
    ::close(fd);
    if (r != MRC_OK) {
        ::munmap(p, map_bytes);
        return r;
    }
    auto *mr = new mrc_mr{ctx, p, length, map_bytes, rep.key, access, service};
    ctx->mrs.push_back(mr);
    *out = mr;
    return MRC_OK;
}

int mrc_free_mr(mrc_mr *mr) {
    if (mr == nullptr) return MRC_EINVAL;
    mrc_context *ctx = mr->ctx;
    std::lock_guard<std::mutex> g(ctx->mu);
    KeyReq k{mr->key, 0};
    const int r = request(ctx, Op::kDeregMr, &k, sizeof k, nullptr, 0);
    if (r != MRC_OK && r != MRC_EDAEMON) return r;  // still registered: keep the mapping
    ::munmap(mr->addr, mr->map_bytes);
    erase(ctx->mrs, mr);
    delete mr;
    return MRC_OK;
}

void *mrc_mr_addr(const mrc_mr *mr) {
    return mr ? mr->addr : nullptr;
}
size_t mrc_mr_length(const mrc_mr *mr) {
    return mr ? mr->length : 0;
}
uint32_t mrc_mr_key(const mrc_mr *mr) {
    return mr ? mr->key : 0;
}
void mrc_mr_remote(const mrc_mr *mr, struct mrc_remote_mr *out) {
    if (out == nullptr) return;
    *out = mrc_remote_mr{};
    if (mr == nullptr) return;
    out->addr = reinterpret_cast<uint64_t>(mr->addr);
    out->length = mr->length;
    out->rkey = mr->key;
    out->service = mr->service;
}

int mrc_create_cq(mrc_context *ctx, uint32_t depth, mrc_cq **out) {
    if (ctx == nullptr || out == nullptr) return MRC_EINVAL;
    *out = nullptr;
    if (depth == 0 || depth > kMaxRingEntries)
        return fail(ctx, MRC_EINVAL, "CQ depth %u out of range (1 .. %u)", depth, kMaxRingEntries);
    std::lock_guard<std::mutex> g(ctx->mu);
    CreateCqReq req{depth, 0};
    RingRep rep{};
    int fd = -1, wake_fd = -1;
    if (int r = request(ctx, Op::kCreateCq, &req, sizeof req, &rep, sizeof rep, -1, &fd, 10'000,
                        nullptr, &wake_fd);
        r != MRC_OK)
        return r;
    RingHdr *h = nullptr;
    if (int r = map_ring(ctx, fd, rep, sizeof(Cqe), &h); r != MRC_OK) {
        if (wake_fd >= 0) ::close(wake_fd);
        KeyReq k{rep.id, 0};
        request(ctx, Op::kDestroyCq, &k, sizeof k, nullptr, 0);
        return r;
    }
    const std::atomic<uint32_t> *sleeping = nullptr;
    if (wake_fd >= 0 && ctx->wake_page != nullptr && rep.worker < ctx->info.workers)
        sleeping = reinterpret_cast<const std::atomic<uint32_t> *>(
            ctx->wake_page + size_t(rep.worker) * ctx->info.wake_stride);
    if (sleeping == nullptr && wake_fd >= 0) {
        ::close(wake_fd);
        wake_fd = -1;
    }
    auto *cq = new mrc_cq{ctx,
                          h,
                          ring_entries<Cqe>(h),
                          rep.entries,
                          rep.map_bytes,
                          rep.id,
                          h->cons.load(std::memory_order_relaxed),
                          0,
                          sleeping,
                          wake_fd};
    ctx->cqs.push_back(cq);
    *out = cq;
    return MRC_OK;
}

int mrc_destroy_cq(mrc_cq *cq) {
    if (cq == nullptr) return MRC_EINVAL;
    mrc_context *ctx = cq->ctx;
    std::lock_guard<std::mutex> g(ctx->mu);
    for (mrc_qp *qp : ctx->qps)
        if (qp->cq == cq) return fail(ctx, MRC_EBUSY, "CQ %u still has QP %u", cq->id, qp->qpn);
    KeyReq k{cq->id, 0};
    const int r = request(ctx, Op::kDestroyCq, &k, sizeof k, nullptr, 0);
    if (r != MRC_OK && r != MRC_EDAEMON) return r;
    ::munmap(cq->ring, cq->map_bytes);
    if (cq->wake_fd >= 0) ::close(cq->wake_fd);
    erase(ctx->cqs, cq);
    delete cq;
    return MRC_OK;
}

int mrc_poll_cq(mrc_cq *cq, struct mrc_wc *wc, int max) {
    if (cq == nullptr || wc == nullptr || max < 0) return MRC_EINVAL;
    RingHdr *h = cq->ring;
    const uint32_t prod = h->prod.load(std::memory_order_acquire);
    const uint32_t avail = prod - cq->cons;
    if (avail > cq->entries) {
        cq->ctx->dead = true;
        return fail(cq->ctx, MRC_EDAEMON, "completion queue %u corrupted", cq->id);
    }
    const uint32_t n = std::min<uint32_t>(avail, uint32_t(max));
    const uint32_t mask = cq->entries - 1;
    for (uint32_t i = 0; i < n; ++i) {
        const Cqe &c = cq->e[(cq->cons + i) & mask];
        wc[i].wr_id = c.wr_id;
        wc[i].qp_num = c.qp_num;
        wc[i].opcode = c.opcode;
        wc[i].status = c.status;
        wc[i].byte_len = c.byte_len;
        wc[i].imm = c.imm;
        wc[i].reserved = 0;
    }
    if (n) {
        cq->cons += n;
        h->cons.store(cq->cons, std::memory_order_seq_cst);
        // A QP of this CQ waits for the room just made (its worker may sleep).
        if (h->room_wanted.load(std::memory_order_seq_cst)) wake_worker(cq);
        cq->empty_polls = 0;
        return int(n);
    }
    // Nothing: once in a while (never per completion) make sure the daemon
    // is still there, so an application never waits forever on a dead one.
    if (h->state.load(std::memory_order_acquire) == kRingShutdown) {
        cq->ctx->dead = true;
        return fail(cq->ctx, MRC_EDAEMON, "the daemon shut down");
    }
    if (++cq->empty_polls % 4096 == 0) {
        if (cq->ctx->dead) return fail(cq->ctx, MRC_EDAEMON, "the daemon went away");
        pollfd p{cq->ctx->fd, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) {
            char c;
            if ((p.revents & (POLLHUP | POLLERR)) ||
                ::recv(cq->ctx->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
                cq->ctx->dead = true;
                return fail(cq->ctx, MRC_EDAEMON, "the daemon went away");
            }
        }
    }
    return 0;
}

int mrc_create_qp(mrc_context *ctx, mrc_cq *cq, const struct mrc_qp_attr *attr, mrc_qp **out) {
    if (ctx == nullptr || cq == nullptr || out == nullptr || cq->ctx != ctx) return MRC_EINVAL;
    *out = nullptr;
    const uint32_t depth = attr && attr->sq_depth ? attr->sq_depth : 128;
    if (depth > kMaxRingEntries)
        return fail(ctx, MRC_EINVAL, "sq_depth %u out of range (1 .. %u)", depth, kMaxRingEntries);
    std::lock_guard<std::mutex> g(ctx->mu);
    CreateQpReq req{cq->id, depth};
    RingRep rep{};
    int fd = -1;
    if (int r = request(ctx, Op::kCreateQp, &req, sizeof req, &rep, sizeof rep, -1, &fd);
        r != MRC_OK)
        return r;
    return new_qp(ctx, cq, rep, fd, out);
}

int mrc_destroy_qp(mrc_qp *qp) {
    if (qp == nullptr) return MRC_EINVAL;
    std::lock_guard<std::mutex> g(qp->ctx->mu);
    return destroy_qp_locked(qp, true);
}

uint32_t mrc_qp_num(const mrc_qp *qp) {
    return qp ? qp->qpn : 0;
}

int mrc_connect(mrc_qp *qp, const char *peer, uint32_t service, int timeout_ms) {
    if (qp == nullptr) return MRC_EINVAL;
    mrc_context *ctx = qp->ctx;
    const auto ip = parse_ip(peer);
    if (!ip) return fail(ctx, MRC_EINVAL, "peer '%s' is not an IPv4 address", peer ? peer : "");
    if (timeout_ms <= 0) timeout_ms = 5000;
    timeout_ms = std::min(timeout_ms, 600'000);
    std::lock_guard<std::mutex> g(ctx->mu);
    if (qp->connected) return fail(ctx, MRC_ESTATE, "QP %u is already connected", qp->qpn);
    ConnectReq req{qp->qpn, service, *ip, uint32_t(timeout_ms)};
    const int r =
        request(ctx, Op::kConnect, &req, sizeof req, nullptr, 0, -1, nullptr, timeout_ms + 5000);
    if (r == MRC_OK) qp->connected = true;
    return r;
}

int mrc_connect_many(mrc_qp *const *qps, unsigned n, const char *peer, uint32_t service,
                     int timeout_ms, int *status) {
    if (qps == nullptr || n == 0) return MRC_EINVAL;
    for (unsigned i = 0; i < n; ++i)
        if (qps[i] == nullptr || qps[i]->ctx != qps[0]->ctx) return MRC_EINVAL;
    mrc_context *ctx = qps[0]->ctx;
    const auto ip = parse_ip(peer);
    if (!ip) return fail(ctx, MRC_EINVAL, "peer '%s' is not an IPv4 address", peer ? peer : "");
    if (timeout_ms <= 0) timeout_ms = 5000;
    timeout_ms = std::min(timeout_ms, 600'000);
    std::lock_guard<std::mutex> g(ctx->mu);
    for (unsigned i = 0; i < n; ++i) {
        if (status) status[i] = MRC_OK;
        if (qps[i]->connected)
            return fail(ctx, MRC_ESTATE, "QP %u is already connected", qps[i]->qpn);
    }
    const uint64_t deadline = mono_ms() + uint64_t(timeout_ms);
    int first = MRC_OK;
    std::string first_msg;
    // In requests of up to kMaxConnectMany QPs, one after the other.
    for (unsigned at = 0; at < n; at += kMaxConnectMany) {
        const unsigned k = std::min<unsigned>(n - at, kMaxConnectMany);
        const uint64_t now = mono_ms();
        const auto left = int(deadline > now ? deadline - now : 1);
        ConnectManyReq req{service, *ip, uint32_t(left), k};
        std::vector<uint8_t> body(sizeof req + k * sizeof(uint32_t));
        std::memcpy(body.data(), &req, sizeof req);
        for (unsigned i = 0; i < k; ++i)
            std::memcpy(body.data() + sizeof req + i * sizeof(uint32_t), &qps[at + i]->qpn,
                        sizeof(uint32_t));
        std::string rep;
        if (int r = request(ctx, Op::kConnectMany, body.data(), body.size(), nullptr, 0, -1,
                            nullptr, left + 5000, &rep);
            r != MRC_OK) {
            for (unsigned i = at; i < n && status; ++i)
                status[i] = r;
            return r;
        }
        // The body: one status per QP, then the first failure's text.
        if (rep.size() < k * sizeof(int32_t))
            return fail(ctx, MRC_EDAEMON, "connect-many reply too short (%zu bytes)", rep.size());
        for (unsigned i = 0; i < k; ++i) {
            int32_t st;
            std::memcpy(&st, rep.data() + i * sizeof st, sizeof st);
            if (st == MRC_OK) qps[at + i]->connected = true;
            if (status) status[at + i] = st;
            if (st != MRC_OK && first == MRC_OK) first = st;
        }
        if (first != MRC_OK && first_msg.empty()) first_msg = rep.substr(k * sizeof(int32_t));
    }
    if (first != MRC_OK) return fail(ctx, first, "%s", first_msg.c_str());
    return MRC_OK;
}

int mrc_listen(mrc_context *ctx, uint32_t service, mrc_cq *cq, const struct mrc_qp_attr *attr) {
    if (ctx == nullptr || cq == nullptr || cq->ctx != ctx) return MRC_EINVAL;
    const uint32_t depth = attr && attr->sq_depth ? attr->sq_depth : 128;
    std::lock_guard<std::mutex> g(ctx->mu);
    ListenReq req{service, cq->id, depth, 0};
    return request(ctx, Op::kListen, &req, sizeof req, nullptr, 0);
}

int mrc_accept(mrc_context *ctx, uint32_t service, int timeout_ms, mrc_qp **out) {
    if (ctx == nullptr || out == nullptr) return MRC_EINVAL;
    *out = nullptr;
    if (timeout_ms <= 0) timeout_ms = 5000;
    timeout_ms = std::min(timeout_ms, 600'000);
    std::lock_guard<std::mutex> g(ctx->mu);
    AcceptReq req{service, uint32_t(timeout_ms)};
    RingRep rep{};
    int fd = -1;
    if (int r = request(ctx, Op::kAccept, &req, sizeof req, &rep, sizeof rep, -1, &fd,
                        timeout_ms + 5000);
        r != MRC_OK)
        return r;
    // The daemon put the QP on the CQ given to mrc_listen.
    mrc_cq *cq = nullptr;
    for (mrc_cq *c : ctx->cqs)
        if (c->id == rep.cq_id) cq = c;
    const int r = new_qp(ctx, cq, rep, fd, out);
    if (r == MRC_OK) (*out)->connected = true;
    return r;
}

int mrc_post_write(mrc_qp *qp, const struct mrc_wr *wr) {
    if (qp == nullptr || wr == nullptr) return MRC_EINVAL;
    mrc_context *ctx = qp->ctx;
    if (!qp->connected) return fail(ctx, MRC_ESTATE, "QP %u is not connected", qp->qpn);
    const uint32_t state = qp->ring->state.load(std::memory_order_relaxed);
    if (state == kRingShutdown) return fail(ctx, MRC_EDAEMON, "the daemon is shutting down");
    if (state == kRingError)
        return fail(ctx, MRC_ESTATE, "QP %u is in the error state (see its completions)", qp->qpn);
    if (wr->opcode != MRC_WR_WRITE && wr->opcode != MRC_WR_WRITE_WITH_IMM)
        return fail(ctx, MRC_EINVAL, "unknown opcode %u", wr->opcode);
    const mrc_mr *mr = wr->local;
    if (mr == nullptr || mr->ctx != ctx)
        return fail(ctx, MRC_EINVAL, "local region is not one of this context's");
    if (wr->length == 0 || wr->length > ctx->info.max_msg_bytes)
        return fail(ctx, MRC_EINVAL, "length %u out of range (1 .. %u)", wr->length,
                    ctx->info.max_msg_bytes);
    if (wr->local_offset > mr->length || wr->length > mr->length - wr->local_offset)
        return fail(ctx, MRC_EINVAL, "offset %llu + length %u leaves the %zu-byte region",
                    static_cast<unsigned long long>(wr->local_offset), wr->length, mr->length);
    if (qp->prod - qp->cons_seen >= qp->entries) {
        qp->cons_seen = qp->ring->cons.load(std::memory_order_acquire);
        if (qp->prod - qp->cons_seen >= qp->entries) {
            std::memcpy(t_error, "send queue full",
                        sizeof "send queue full");  // no formatting: a hot path
            return MRC_EAGAIN;
        }
    }
    Sqe &e = qp->e[qp->prod & (qp->entries - 1)];
    e.wr_id = wr->wr_id;
    e.opcode = wr->opcode;
    e.imm = wr->imm;
    e.lkey = mr->key;
    e.length = wr->length;
    e.local_offset = wr->local_offset;
    e.remote_addr = wr->remote_addr;
    e.rkey = wr->rkey;
    ++qp->prod;
    qp->ring->prod.store(qp->prod, std::memory_order_release);
    if (qp->cq != nullptr && ring_doorbell(qp->ring, qp->cq->ring)) wake_worker(qp->cq);
    return MRC_OK;
}

}  // extern "C"
