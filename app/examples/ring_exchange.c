/* ring_exchange: a ring all-reduce (sum of uint32 vectors) among N
 * processes, each writing only to its right-hand neighbour, as collective
 * libraries do over RDMA: N-1 reduce-scatter steps, then N-1 all-gather
 * steps, every step one WRITE_WITH_IMM whose immediate names the step.
 *
 *   ring_exchange --rank R --ranks N --peers IP0,IP1,... --dir DIR
 *                 [--socket S] [--elems E] [--service-base B]
 *
 * IPk is the address of the daemon rank k uses. Rank R listens on service
 * B+R and connects to rank R+1 on service B+R+1. Keys travel through files
 * in DIR (DIR/rank.R: address and key of rank R's region). Each rank checks
 * the whole result against the closed form; exit status 0 when right.
 *
 * A QP connects two daemons: neighbours must use different daemons (mrcd
 * has no loopback QPs yet), e.g. alternate two daemons with N even.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mrc/mrc.h>

static int fail(mrc_context *ctx, int rank, const char *what, int rc) {
    fprintf(stderr, "ring_exchange[%d]: %s: %s (%s)\n", rank, what, mrc_strerror(rc),
            mrc_last_error(ctx));
    return 1;
}

/* Steps that arrived (immediates 0..255), and our writes that completed:
 * one poll can return several steps at once. */
static unsigned char g_arrived[256];
static int g_writes_done;
static int g_writes_flushed;
static int g_left_gone;  /* the left neighbour closed: fine once its steps are all here */
static int g_right_gone; /* the right neighbour closed: it had all our steps (it waits for them) */
static uint32_t g_in_qpn;

static int poll_some(mrc_context *ctx, mrc_cq *cq, int rank) {
    struct mrc_wc wc[16];
    int n = mrc_poll_cq(cq, wc, 16);
    if (n < 0) return fail(ctx, rank, "poll_cq", n);
    for (int i = 0; i < n; ++i) {
        if (wc[i].opcode == MRC_WC_QP_EVENT && wc[i].status == MRC_WC_PEER_DISCONNECTED) {
            if (wc[i].qp_num == g_in_qpn)
                g_left_gone = 1;
            else
                g_right_gone = 1;
            continue;
        }
        /* Our last write can be flushed by the right neighbour's goodbye
         * racing its acknowledgement: it only leaves once it has the step. */
        if (wc[i].opcode == MRC_WC_WRITE && wc[i].status == MRC_WC_FLUSHED) {
            ++g_writes_flushed; /* judged once we know why (the QP event follows) */
            continue;
        }
        if (wc[i].status != MRC_WC_SUCCESS) {
            fprintf(stderr, "ring_exchange[%d]: QP %u: %s\n", rank, wc[i].qp_num,
                    mrc_wc_status_str(wc[i].status));
            return 1;
        }
        if (wc[i].opcode == MRC_WC_RECV_WRITE_IMM && wc[i].imm < 256) g_arrived[wc[i].imm] = 1;
        if (wc[i].opcode == MRC_WC_WRITE) ++g_writes_done;
    }
    if (n == 0) usleep(20);
    return 0;
}

/* Waits for the WRITE_WITH_IMM of step `imm` from the left neighbour. */
static int wait_step(mrc_context *ctx, mrc_cq *cq, uint32_t imm, int rank) {
    while (!g_arrived[imm]) {
        if (g_left_gone) {
            fprintf(stderr, "ring_exchange[%d]: a neighbour left before step %u\n", rank, imm);
            return 1;
        }
        if (poll_some(ctx, cq, rank)) return 1;
    }
    return 0;
}

static int post(mrc_context *ctx, mrc_qp *qp, mrc_cq *cq, mrc_mr *mr, uint64_t off, uint32_t len,
                uint64_t raddr, uint32_t rkey, uint32_t imm, int rank) {
    struct mrc_wr wr = {0};
    wr.wr_id = imm;
    wr.opcode = MRC_WR_WRITE_WITH_IMM;
    wr.imm = imm;
    wr.local = mr;
    wr.local_offset = off;
    wr.length = len;
    wr.rkey = rkey;
    wr.remote_addr = raddr;
    int rc;
    while ((rc = mrc_post_write(qp, &wr)) == MRC_EAGAIN)
        usleep(10);
    (void)cq;
    return rc == MRC_OK ? 0 : fail(ctx, rank, "post_write", rc);
}

int main(int argc, char **argv) {
    const char *sock = NULL, *peers = NULL, *dir = NULL;
    int rank = -1, ranks = 0;
    uint32_t elems = 1u << 16, base = 9000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--socket"))
            sock = argv[i + 1];
        else if (!strcmp(argv[i], "--rank"))
            rank = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ranks"))
            ranks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--peers"))
            peers = argv[i + 1];
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--elems"))
            elems = (uint32_t)strtoul(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--service-base"))
            base = (uint32_t)strtoul(argv[i + 1], NULL, 0);
        else {
            fprintf(stderr, "ring_exchange: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (ranks < 2 || ranks > 64 || rank < 0 || rank >= ranks || !peers || !dir || elems == 0 ||
        elems > (1u << 24)) {
        fprintf(stderr,
                "usage: ring_exchange --rank R --ranks N (2..64) --peers IP0,...,IPN-1 --dir DIR "
                "[--socket S] [--elems E] [--service-base B]\n");
        return 2;
    }
    char ips[64][64];
    {
        int k = 0;
        const char *p = peers;
        while (k < ranks && *p) {
            size_t n = strcspn(p, ",");
            if (n >= sizeof ips[0]) n = sizeof ips[0] - 1;
            memcpy(ips[k], p, n);
            ips[k][n] = 0;
            ++k;
            p += n;
            if (*p == ',') ++p;
        }
        if (k != ranks) {
            fprintf(stderr, "ring_exchange: --peers needs %d addresses\n", ranks);
            return 2;
        }
    }
    const int right = (rank + 1) % ranks;
    const uint64_t chunk = (uint64_t)elems * 4;
    /* Region: data (N chunks) | reduce-scatter inbox (N-1 slots) | gather (N chunks). */
    const uint64_t data_off = 0, inbox_off = chunk * ranks,
                   gather_off = inbox_off + chunk * (ranks - 1);
    const uint64_t bytes = gather_off + chunk * ranks;

    mrc_context *ctx;
    int rc = mrc_open(sock, &ctx);
    if (rc != MRC_OK) {
        fprintf(stderr, "ring_exchange[%d]: %s\n", rank, mrc_last_error(NULL));
        return 1;
    }
    mrc_mr *mr;
    mrc_cq *cq;
    mrc_qp *out, *in;
    if ((rc = mrc_alloc_mr(ctx, bytes, MRC_ACCESS_REMOTE_WRITE, base + rank, &mr)) != MRC_OK)
        return fail(ctx, rank, "alloc_mr", rc);
    uint8_t *m = mrc_mr_addr(mr);
    uint32_t *data = (uint32_t *)(m + data_off);
    for (int c = 0; c < ranks; ++c)
        for (uint32_t i = 0; i < elems; ++i)
            data[(uint64_t)c * elems + i] = (uint32_t)((rank + 1) * (c + 1)) + i;
    if ((rc = mrc_create_cq(ctx, 1024, &cq)) != MRC_OK) return fail(ctx, rank, "create_cq", rc);
    if ((rc = mrc_listen(ctx, base + rank, cq, NULL)) != MRC_OK)
        return fail(ctx, rank, "listen", rc);

    /* Publish my keys; read my right neighbour's. */
    struct mrc_remote_mr me;
    mrc_mr_remote(mr, &me);
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/rank.%d", dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%" PRIu64 " %u\n", me.addr, me.rkey) < 0 || fclose(f) ||
        rename(tmp, path)) {
        fprintf(stderr, "ring_exchange[%d]: cannot write %s: %s\n", rank, path, strerror(errno));
        return 1;
    }
    uint64_t raddr = 0;
    unsigned rkey = 0;
    snprintf(path, sizeof path, "%s/rank.%d", dir, right);
    for (int tries = 0;; ++tries) {
        f = fopen(path, "r");
        if (f) {
            int got = fscanf(f, "%" SCNu64 " %u", &raddr, &rkey);
            fclose(f);
            if (got == 2) break;
        }
        if (tries > 60000) {
            fprintf(stderr, "ring_exchange[%d]: no keys from rank %d\n", rank, right);
            return 1;
        }
        usleep(1000);
    }
    /* Connect to the right (it may not listen yet: try again), accept from the left. */
    if ((rc = mrc_create_qp(ctx, cq, NULL, &out)) != MRC_OK)
        return fail(ctx, rank, "create_qp", rc);
    for (int tries = 0;; ++tries) {
        rc = mrc_connect(out, ips[right], base + right, 2000);
        if (rc == MRC_OK) break;
        if ((rc != MRC_EREFUSED && rc != MRC_ETIMEDOUT) || tries > 30)
            return fail(ctx, rank, "connect", rc);
        usleep(100000);
    }
    if ((rc = mrc_accept(ctx, base + rank, 60000, &in)) != MRC_OK)
        return fail(ctx, rank, "accept", rc);
    g_in_qpn = mrc_qp_num(in);

    /* Reduce-scatter. */
    for (int s = 0; s < ranks - 1; ++s) {
        const int send_c = ((rank - s) % ranks + ranks) % ranks;
        const int recv_c = ((rank - 1 - s) % ranks + ranks) % ranks;
        if (post(ctx, out, cq, mr, data_off + chunk * send_c, (uint32_t)chunk,
                 raddr + inbox_off + chunk * s, rkey, (uint32_t)s, rank))
            return 1;
        if (wait_step(ctx, cq, (uint32_t)s, rank)) return 1;
        const uint32_t *inbox = (const uint32_t *)(m + inbox_off + chunk * s);
        for (uint32_t i = 0; i < elems; ++i)
            data[(uint64_t)recv_c * elems + i] += inbox[i];
    }
    /* All-gather: the reduced chunks travel round into every gather area. */
    uint32_t *gather = (uint32_t *)(m + gather_off);
    for (int s = 0; s < ranks - 1; ++s) {
        const int send_c = ((rank + 1 - s) % ranks + ranks) % ranks;
        const uint64_t src = (s == 0 ? data_off : gather_off) + chunk * send_c;
        if (post(ctx, out, cq, mr, src, (uint32_t)chunk, raddr + gather_off + chunk * send_c, rkey,
                 100u + (uint32_t)s, rank))
            return 1;
        if (wait_step(ctx, cq, 100u + (uint32_t)s, rank)) return 1;
    }
    /* Check: chunk c holds sum over ranks of (k+1)(c+1) + i. */
    uint64_t bad = 0;
    const int mine = (rank + 1) % ranks;
    for (int c = 0; c < ranks; ++c) {
        const uint32_t *v = c == mine ? data + (uint64_t)c * elems : gather + (uint64_t)c * elems;
        for (uint32_t i = 0; i < elems; ++i) {
            const uint32_t want =
                (uint32_t)((c + 1) * ranks * (ranks + 1) / 2) + (uint32_t)ranks * i;
            bad += v[i] != want;
        }
    }
    printf("ring_exchange[%d]: %d ranks, %u elements per chunk, %" PRIu64 " wrong\n", rank, ranks,
           elems, bad);
    /* Stay until every write of ours completed (the right neighbour has it). */
    while (g_writes_done + (g_right_gone ? g_writes_flushed : 0) < 2 * (ranks - 1))
        if (poll_some(ctx, cq, rank)) return 1;
    mrc_close(ctx);
    return bad == 0 ? 0 : 1;
}
