/* bulk_copy: moves a large buffer from one process to another through two
 * mrcd daemons, then checks every byte. Plain C against mrc/mrc.h.
 *
 *   receiver: bulk_copy --socket S --service N --bytes B --keys FILE
 *   sender:   bulk_copy --socket S --service N --bytes B --keys FILE --peer IP
 *
 * Remote keys travel as the applications choose (as with verbs): here the
 * receiver writes its region's address and key into FILE and the sender
 * reads it. Exit status 0 when the receiver found every byte right.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mrc/mrc.h>

#define CHUNK_BYTES (1u << 20)
#define DEPTH 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The byte at offset i of the payload: cheap, position-dependent. */
static uint8_t pattern(uint64_t i, uint32_t seed) {
    uint64_t x = (i >> 3) * 0x9e3779b97f4a7c15ull + seed;
    x ^= x >> 29;
    return (uint8_t)(x >> (8 * (i & 7)));
}

static int die(mrc_context *ctx, const char *what, int rc) {
    fprintf(stderr, "bulk_copy: %s: %s (%s)\n", what, mrc_strerror(rc), mrc_last_error(ctx));
    return 1;
}

static int receiver(mrc_context *ctx, uint32_t service, uint64_t bytes, const char *keys,
                    uint32_t seed) {
    mrc_mr *mr;
    mrc_cq *cq;
    mrc_qp *qp;
    int rc;
    if ((rc = mrc_alloc_mr(ctx, bytes, MRC_ACCESS_REMOTE_WRITE, service, &mr)) != MRC_OK)
        return die(ctx, "alloc_mr", rc);
    memset(mrc_mr_addr(mr), 0, bytes);
    if ((rc = mrc_create_cq(ctx, 256, &cq)) != MRC_OK) return die(ctx, "create_cq", rc);
    if ((rc = mrc_listen(ctx, service, cq, NULL)) != MRC_OK) return die(ctx, "listen", rc);
    /* Publish the region: written to a temporary name, then renamed, so the
     * sender never reads half a file. */
    struct mrc_remote_mr rm;
    mrc_mr_remote(mr, &rm);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", keys);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%" PRIu64 " %" PRIu64 " %u\n", rm.addr, rm.length, rm.rkey) < 0 ||
        fclose(f) != 0 || rename(tmp, keys) != 0) {
        fprintf(stderr, "bulk_copy: cannot write %s: %s\n", keys, strerror(errno));
        return 1;
    }
    if ((rc = mrc_accept(ctx, service, 60000, &qp)) != MRC_OK) return die(ctx, "accept", rc);
    printf("receiver: connected, QP %u\n", mrc_qp_num(qp));
    fflush(stdout);
    /* The sender ends with a WRITE_WITH_IMM: its completion here means every
     * byte before it has landed. */
    for (;;) {
        struct mrc_wc wc[16];
        int n = mrc_poll_cq(cq, wc, 16);
        if (n < 0) return die(ctx, "poll_cq", n);
        for (int i = 0; i < n; ++i) {
            if (wc[i].opcode == MRC_WC_QP_EVENT) {
                fprintf(stderr, "bulk_copy: QP error: %s\n", mrc_wc_status_str(wc[i].status));
                return 1;
            }
            if (wc[i].opcode == MRC_WC_RECV_WRITE_IMM && wc[i].imm == 0xd0e) goto check;
        }
        if (n == 0) usleep(50);
    }
check:;
    const uint8_t *p = mrc_mr_addr(mr);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < bytes; ++i)
        bad += p[i] != pattern(i, seed);
    printf("receiver: %" PRIu64 " bytes, %" PRIu64 " wrong\n", bytes, bad);
    mrc_destroy_qp(qp);
    return bad == 0 ? 0 : 1;
}

static int sender(mrc_context *ctx, uint32_t service, uint64_t bytes, const char *keys,
                  const char *peer, uint32_t seed) {
    mrc_mr *mr;
    mrc_cq *cq;
    mrc_qp *qp;
    int rc;
    if ((rc = mrc_alloc_mr(ctx, bytes, MRC_ACCESS_LOCAL, service, &mr)) != MRC_OK)
        return die(ctx, "alloc_mr", rc);
    uint8_t *src = mrc_mr_addr(mr);
    for (uint64_t i = 0; i < bytes; ++i)
        src[i] = pattern(i, seed);
    if ((rc = mrc_create_cq(ctx, 256, &cq)) != MRC_OK) return die(ctx, "create_cq", rc);
    struct mrc_qp_attr attr = {.sq_depth = DEPTH};
    if ((rc = mrc_create_qp(ctx, cq, &attr, &qp)) != MRC_OK) return die(ctx, "create_qp", rc);
    /* Wait for the receiver's keys. */
    uint64_t raddr = 0, rlen = 0;
    unsigned rkey = 0;
    for (int tries = 0;; ++tries) {
        FILE *f = fopen(keys, "r");
        if (f != NULL) {
            int got = fscanf(f, "%" SCNu64 " %" SCNu64 " %u", &raddr, &rlen, &rkey);
            fclose(f);
            if (got == 3) break;
        }
        if (tries > 60000) {
            fprintf(stderr, "bulk_copy: no keys in %s\n", keys);
            return 1;
        }
        usleep(1000);
    }
    if (rlen < bytes) {
        fprintf(stderr, "bulk_copy: the receiver's region is smaller (%" PRIu64 ")\n", rlen);
        return 1;
    }
    if ((rc = mrc_connect(qp, peer, service, 10000)) != MRC_OK) return die(ctx, "connect", rc);
    const double t0 = now_s();
    uint64_t posted = 0, done = 0;
    uint32_t outstanding = 0;
    const uint64_t chunks = (bytes + CHUNK_BYTES - 1) / CHUNK_BYTES;
    while (done < chunks) {
        while (outstanding < DEPTH && posted < chunks) {
            const uint64_t off = posted * CHUNK_BYTES;
            const uint32_t len = (uint32_t)(bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES);
            struct mrc_wr wr = {0};
            wr.wr_id = posted;
            wr.opcode = posted + 1 == chunks ? MRC_WR_WRITE_WITH_IMM : MRC_WR_WRITE;
            wr.imm = 0xd0e;
            wr.local = mr;
            wr.local_offset = off;
            wr.length = len;
            wr.rkey = rkey;
            wr.remote_addr = raddr + off;
            rc = mrc_post_write(qp, &wr);
            if (rc == MRC_EAGAIN) break;
            if (rc != MRC_OK) return die(ctx, "post_write", rc);
            ++posted;
            ++outstanding;
        }
        struct mrc_wc wc[16];
        int n = mrc_poll_cq(cq, wc, 16);
        if (n < 0) return die(ctx, "poll_cq", n);
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != MRC_WC_SUCCESS) {
                fprintf(stderr, "bulk_copy: write %" PRIu64 " failed: %s\n", wc[i].wr_id,
                        mrc_wc_status_str(wc[i].status));
                return 1;
            }
            ++done;
            --outstanding;
        }
    }
    const double dt = now_s() - t0;
    printf("sender: %" PRIu64 " bytes in %.3f s, %.2f Gb/s\n", bytes, dt,
           (double)bytes * 8 / dt / 1e9);
    mrc_destroy_qp(qp);
    return 0;
}

int main(int argc, char **argv) {
    const char *sock = NULL, *keys = NULL, *peer = NULL;
    uint32_t service = 7000, seed = 1;
    uint64_t bytes = 64ull << 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--socket"))
            sock = argv[i + 1];
        else if (!strcmp(argv[i], "--service"))
            service = (uint32_t)strtoul(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--bytes"))
            bytes = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--keys"))
            keys = argv[i + 1];
        else if (!strcmp(argv[i], "--peer"))
            peer = argv[i + 1];
        else if (!strcmp(argv[i], "--seed"))
            seed = (uint32_t)strtoul(argv[i + 1], NULL, 0);
        else {
            fprintf(stderr, "bulk_copy: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (keys == NULL || bytes == 0) {
        fprintf(
            stderr,
            "usage: bulk_copy --keys FILE [--socket S] [--service N] [--bytes B] [--peer IP]\n");
        return 2;
    }
    mrc_context *ctx;
    int rc = mrc_open(sock, &ctx);
    if (rc != MRC_OK) {
        fprintf(stderr, "bulk_copy: %s\n", mrc_last_error(NULL));
        return 1;
    }
    rc = peer ? sender(ctx, service, bytes, keys, peer, seed)
              : receiver(ctx, service, bytes, keys, seed);
    mrc_close(ctx);
    return rc;
}
