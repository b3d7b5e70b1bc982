/* libmrc: the client library of the mrcd sidecar daemon.
 *
 * An application opens a context on the daemon's Unix socket, allocates
 * memory regions that live in shared memory the daemon maps, creates
 * completion queues and queue pairs, connects a QP to a peer (the daemon's
 * address and a service number: the daemons set the QP up between them on
 * the wire) or accepts one, then posts RDMA WRITE / WRITE_WITH_IMM work
 * requests and polls completions. Posting and polling touch only shared
 * memory: no system call per operation.
 *
 * Usable from C and C++; no DPDK types. docs/api.md has a complete program.
 *
 * Threads: a context's set-up calls may come from any thread (they are
 * serialised); one QP is posted to, and one CQ polled, by one thread at a
 * time.
 *
 * Errors: every call that can fail returns an int, 0 (MRC_OK) or a negative
 * mrc_status; mrc_last_error() then tells what went wrong in words (the
 * calling thread's last error, like errno).
 */
#ifndef MRC_MRC_H
#define MRC_MRC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the socket protocol this header speaks. */
#define MRC_API_VERSION 1
/* The most planes (NIC ports) a daemon sprays over: the bits of the wire
 * format's plane masks. */
#define MRC_MAX_PLANES 8
/* Where mrc_open() looks when given NULL and MRC_SOCKET is not set. */
#define MRC_DEFAULT_SOCKET "/run/mrcd/mrcd.sock"

enum mrc_status {
    MRC_OK = 0,
    MRC_EINVAL = -1,    /* an argument is out of range (bad offset, length, key, flag) */
    MRC_EAGAIN = -2,    /* the send queue is full: poll completions, then post again */
    MRC_ENOMEM = -3,    /* out of memory or of daemon resources */
    MRC_ENOENT = -4,    /* no such region, queue or service */
    MRC_EPERM = -5,     /* not allowed (socket permissions, admin request) */
    MRC_EVERSION = -6,  /* the daemon speaks another API version */
    MRC_ETIMEDOUT = -7, /* nothing came in time (connect, accept) */
    MRC_EREFUSED = -8,  /* the peer daemon refused the connection */
    MRC_EDAEMON = -9,   /* the daemon went away or broke the protocol */
    MRC_ESTATE = -10,   /* the object is not in a state for this call */
    MRC_EBUSY = -11,    /* already in use (a service somebody listens on) */
    MRC_ESYS = -12      /* a system call failed (the message has errno) */
};

/* Memory region access. */
#define MRC_ACCESS_LOCAL 0u        /* a source of writes only */
#define MRC_ACCESS_REMOTE_WRITE 1u /* peers of this region's service may write into it */

/* Work request opcodes. */
enum mrc_wr_opcode { MRC_WR_WRITE = 1, MRC_WR_WRITE_WITH_IMM = 2 };

/* Completion opcodes. */
enum mrc_wc_opcode {
    MRC_WC_WRITE = 1,          /* a work request of this side finished (status says how) */
    MRC_WC_RECV_WRITE_IMM = 2, /* a peer's WRITE_WITH_IMM landed: imm and byte_len valid */
    MRC_WC_QP_EVENT = 3        /* the QP entered the error state; status says why */
};

enum mrc_wc_status {
    MRC_WC_SUCCESS = 0,
    MRC_WC_RETRY_EXCEEDED = 1,      /* the peer stopped acknowledging */
    MRC_WC_NACK_RETRY_EXCEEDED = 2, /* refused too often (resources) */
    MRC_WC_REMOTE_ACCESS_ERROR = 3, /* the peer refused the key, address or length */
    MRC_WC_REMOTE_PROTOCOL_ERROR = 4,
    MRC_WC_FLUSHED = 5,                /* outstanding when the QP entered the error state */
    MRC_WC_LOCAL_PROTECTION_ERROR = 6, /* local region unknown or range outside it */
    MRC_WC_BAD_REQUEST = 7,            /* malformed work request (opcode, length) */
    MRC_WC_PEER_DISCONNECTED = 8, /* the peer's QP went away (its application closed or died) */
    MRC_WC_DAEMON_SHUTDOWN = 9,   /* the daemon is stopping */
    MRC_WC_PEER_UNREACHABLE = 10  /* nothing heard from the peer for [qp] peer_timeout_ms */
};

typedef struct mrc_context mrc_context;
typedef struct mrc_mr mrc_mr;
typedef struct mrc_cq mrc_cq;
typedef struct mrc_qp mrc_qp;

struct mrc_info {
    uint32_t api_version;
    uint32_t planes;        /* NIC ports (planes) the daemon sprays over */
    uint32_t max_msg_bytes; /* largest work request */
    uint32_t mtu_payload_bytes;
    uint32_t local_ip[MRC_MAX_PLANES]; /* the daemon's IPv4 address on each plane, host order */
    char daemon[64];                   /* name and version */
};

/* What a peer needs to write into a region: send it over your own channel. */
struct mrc_remote_mr {
    uint64_t addr; /* the region's first byte as peers address it */
    uint64_t length;
    uint32_t rkey;
    uint32_t service;
};

struct mrc_wr {
    uint64_t wr_id;      /* returned in the completion */
    uint32_t opcode;     /* MRC_WR_WRITE or MRC_WR_WRITE_WITH_IMM */
    uint32_t imm;        /* with MRC_WR_WRITE_WITH_IMM */
    const mrc_mr *local; /* source region (this context's) */
    uint64_t local_offset;
    uint32_t length; /* 1 .. mrc_info.max_msg_bytes */
    uint32_t rkey;   /* target: from the peer's mrc_remote_mr */
    uint64_t remote_addr;
};

struct mrc_wc {
    uint64_t wr_id;
    uint32_t qp_num;
    uint32_t opcode; /* mrc_wc_opcode */
    uint32_t status; /* mrc_wc_status */
    uint32_t byte_len;
    uint32_t imm;
    uint32_t reserved;
};

struct mrc_qp_attr {
    uint32_t sq_depth; /* work requests outstanding at most (0: 128) */
};

/* ---- context ---- */
/* socket_path NULL: $MRC_SOCKET, else MRC_DEFAULT_SOCKET. */
int mrc_open(const char *socket_path, mrc_context **out);
/* Destroys what the context still holds (QPs, CQs, regions) and closes it. */
int mrc_close(mrc_context *ctx);
int mrc_query(mrc_context *ctx, struct mrc_info *out);
/* The calling thread's last error in words (never NULL); ctx is accepted
 * for symmetry and may be NULL (after mrc_open). */
const char *mrc_last_error(const mrc_context *ctx);
const char *mrc_strerror(int status);
const char *mrc_wc_status_str(uint32_t status);

/* ---- memory regions ---- */
/* Allocates `length` bytes of shared memory, maps it here and in the
 * daemon, and registers it. With MRC_ACCESS_REMOTE_WRITE, QPs connected
 * on `service` (and only those) may write into it. */
int mrc_alloc_mr(mrc_context *ctx, size_t length, uint32_t access, uint32_t service, mrc_mr **out);
int mrc_free_mr(mrc_mr *mr);
void *mrc_mr_addr(const mrc_mr *mr);
size_t mrc_mr_length(const mrc_mr *mr);
uint32_t mrc_mr_key(const mrc_mr *mr);
void mrc_mr_remote(const mrc_mr *mr, struct mrc_remote_mr *out);

/* ---- completion queues ---- */
int mrc_create_cq(mrc_context *ctx, uint32_t depth, mrc_cq **out);
int mrc_destroy_cq(mrc_cq *cq);
/* Up to max completions into wc; returns how many (0: none yet), or
 * MRC_EDAEMON once the daemon is gone. */
int mrc_poll_cq(mrc_cq *cq, struct mrc_wc *wc, int max);

/* ---- queue pairs ---- */
/* A QP whose completions go to cq (send and receive). attr may be NULL. */
int mrc_create_qp(mrc_context *ctx, mrc_cq *cq, const struct mrc_qp_attr *attr, mrc_qp **out);
int mrc_destroy_qp(mrc_qp *qp);
uint32_t mrc_qp_num(const mrc_qp *qp);
/* Connects qp to the QP the peer daemon creates for a listener of
 * `service`; peer is the peer daemon's IPv4 address on one of its planes.
 * Waits up to timeout_ms. */
int mrc_connect(mrc_qp *qp, const char *peer, uint32_t service, int timeout_ms);
/* Connects n QPs of one context to the same peer and service at once: the
 * daemon sends their CONNECTs together and answers once, so n QPs cost far
 * less than n mrc_connect calls. timeout_ms bounds the whole call. Returns
 * MRC_OK when every QP connected; otherwise the first failure's status
 * (mrc_last_error names the QP), and status[i] (when not NULL) holds each
 * QP's own result: QPs that connected stay connected. */
int mrc_connect_many(mrc_qp *const *qps, unsigned n, const char *peer, uint32_t service,
                     int timeout_ms, int *status);
/* Takes connections on `service`: the daemon creates a QP for each on cq. */
int mrc_listen(mrc_context *ctx, uint32_t service, mrc_cq *cq, const struct mrc_qp_attr *attr);
/* The next connection on a service this context listens on. */
int mrc_accept(mrc_context *ctx, uint32_t service, int timeout_ms, mrc_qp **out);
/* Posts one work request. MRC_EAGAIN: the send queue is full. */
int mrc_post_write(mrc_qp *qp, const struct mrc_wr *wr);

#ifdef __cplusplus
}
#endif

#endif /* MRC_MRC_H */
