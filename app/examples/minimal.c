/* The smallest complete libmrc program (docs/api.md): one side writes a
 * message into the other's memory with an immediate.
 *
 *   minimal server                       prints "ADDR RKEY", waits, prints the message
 *   minimal client PEER_IP ADDR RKEY     writes "hello over MRC"
 *
 * Both use the daemon at $MRC_SOCKET (default /run/mrcd/mrcd.sock). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mrc/mrc.h>

#define SERVICE 4242

static int check(mrc_context *ctx, int rc, const char *what) {
    if (rc != MRC_OK) {
        fprintf(stderr, "%s: %s (%s)\n", what, mrc_strerror(rc), mrc_last_error(ctx));
        exit(1);
    }
    return rc;
}

int main(int argc, char **argv) {
    mrc_context *ctx;
    mrc_mr *mr;
    mrc_cq *cq;
    mrc_qp *qp;
    struct mrc_wc wc;
    if (mrc_open(NULL, &ctx) != MRC_OK) {
        fprintf(stderr, "%s\n", mrc_last_error(NULL));
        return 1;
    }
    check(ctx, mrc_create_cq(ctx, 64, &cq), "create_cq");
    if (argc == 2 && strcmp(argv[1], "server") == 0) {
        struct mrc_remote_mr rm;
        check(ctx, mrc_alloc_mr(ctx, 4096, MRC_ACCESS_REMOTE_WRITE, SERVICE, &mr), "alloc_mr");
        check(ctx, mrc_listen(ctx, SERVICE, cq, NULL), "listen");
        mrc_mr_remote(mr, &rm); /* what the client needs: send it any way you like */
        printf("%" PRIu64 " %u\n", rm.addr, rm.rkey);
        fflush(stdout);
        check(ctx, mrc_accept(ctx, SERVICE, 60000, &qp), "accept");
        int n;
        while ((n = mrc_poll_cq(cq, &wc, 1)) == 0) {
        }
        if (n < 0 || wc.opcode != MRC_WC_RECV_WRITE_IMM) {
            fprintf(stderr, "unexpected completion\n");
            return 1;
        }
        printf("got %u bytes, imm %u: %s\n", wc.byte_len, wc.imm, (char *)mrc_mr_addr(mr));
    } else if (argc == 5 && strcmp(argv[1], "client") == 0) {
        const char msg[] = "hello over MRC";
        check(ctx, mrc_alloc_mr(ctx, 4096, MRC_ACCESS_LOCAL, SERVICE, &mr), "alloc_mr");
        memcpy(mrc_mr_addr(mr), msg, sizeof msg);
        check(ctx, mrc_create_qp(ctx, cq, NULL, &qp), "create_qp");
        check(ctx, mrc_connect(qp, argv[2], SERVICE, 5000), "connect");
        struct mrc_wr wr = {0};
        wr.wr_id = 1;
        wr.opcode = MRC_WR_WRITE_WITH_IMM;
        wr.imm = 42;
        wr.local = mr;
        wr.length = sizeof msg;
        wr.remote_addr = strtoull(argv[3], NULL, 0);
        wr.rkey = (uint32_t)strtoul(argv[4], NULL, 0);
        check(ctx, mrc_post_write(qp, &wr), "post_write");
        int n;
        while ((n = mrc_poll_cq(cq, &wc, 1)) == 0) {
        }
        if (n < 0 || wc.status != MRC_WC_SUCCESS) {
            fprintf(stderr, "write failed: %s\n",
                    n < 0 ? mrc_last_error(ctx) : mrc_wc_status_str(wc.status));
            return 1;
        }
        printf("written\n");
    } else {
        fprintf(stderr, "usage: minimal server | minimal client PEER_IP ADDR RKEY\n");
        return 2;
    }
    mrc_close(ctx);
    return 0;
}
