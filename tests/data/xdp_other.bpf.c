/* A stand-in for somebody else's XDP program (tests/dpdk/af_xdp_test.sh):
 * passes everything. MRC must refuse to replace it and leave it attached. */
#include <linux/bpf.h>

#include <bpf/bpf_helpers.h>

SEC("xdp")
int other_prog(struct xdp_md *ctx) {
    (void)ctx;
    return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
