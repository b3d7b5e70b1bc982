/* MRC's XDP steering program.
 *
 * Runs on every packet an interface receives. IPv4 UDP packets (untagged or
 * with one 802.1Q tag, as the dataplane parses them) whose destination port
 * is MRC's and, when configured, whose destination is one of this host's
 * MRC addresses go to the AF_XDP socket of the receiving queue; so do IPv6
 * ones, only to a configured IPv6 address. Everything else goes to the
 * kernel's stack unchanged. A queue with
 * no socket (the dataplane not started yet, stopped, or killed) passes MRC
 * packets to the kernel too: bpf_redirect_map's fallback action. So this
 * program, left attached by a process that died, never cuts the host off.
 *
 * The configuration is written by the loader after load (a map, so one
 * object file serves every port number); until then nothing is steered.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "steer_abi.h"

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, MRC_STEER_MAX_QUEUES);
    __type(key, __u32);
    __type(value, __u32);
} xsks_map SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct mrc_steer_cfg);
} mrc_steer_cfg SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, MRC_STEER_NSTATS);
    __type(key, __u32);
    __type(value, __u64);
} mrc_steer_stat SEC(".maps");

struct vlan_hdr {
    __be16 tci;
    __be16 proto;
};

static __always_inline int count(__u32 slot, int action) {
    __u64 *c = bpf_map_lookup_elem(&mrc_steer_stat, &slot);
    if (c) *c += 1;
    return action;
}

static __always_inline int ipv4_local(const struct mrc_steer_cfg *cfg, __be32 daddr) {
    if (cfg->n_ipv4 == 0) return 1;
#pragma unroll
    for (int i = 0; i < MRC_STEER_MAX_ADDRS; i++)
        if (i < cfg->n_ipv4 && cfg->ipv4[i] == daddr) return 1;
    return 0;
}

static __always_inline int ipv6_local(const struct mrc_steer_cfg *cfg, const __u8 *daddr) {
#pragma unroll
    for (int i = 0; i < MRC_STEER_MAX_ADDRS; i++) {
        int same = i < cfg->n_ipv6;
#pragma unroll
        for (int b = 0; b < 16; b++)
            if (cfg->ipv6[i][b] != daddr[b]) same = 0;
        if (same) return 1;
    }
    return 0;
}

SEC("xdp")
int mrc_steer(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    __u32 zero = 0;
    const struct mrc_steer_cfg *cfg = bpf_map_lookup_elem(&mrc_steer_cfg, &zero);
    if (!cfg || cfg->udp_port == 0) return count(MRC_STEER_PASSED, XDP_PASS);

    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end) return count(MRC_STEER_PASSED, XDP_PASS);
    __be16 proto = eth->h_proto;
    void *l3 = eth + 1;
    /* What the dataplane parses: untagged or one 802.1Q tag. */
    if (proto == bpf_htons(ETH_P_8021Q)) {
        struct vlan_hdr *vh = l3;
        if ((void *)(vh + 1) > end) return count(MRC_STEER_PASSED, XDP_PASS);
        proto = vh->proto;
        l3 = vh + 1;
    }

    struct udphdr *udp;
    int local;
    if (proto == bpf_htons(ETH_P_IP)) {
        struct iphdr *ip = l3;
        if ((void *)(ip + 1) > end) return count(MRC_STEER_PASSED, XDP_PASS);
        /* Fragments (MRC never sends them) and options-bearing headers
         * that do not fit go to the kernel. */
        if (ip->protocol != IPPROTO_UDP || ip->ihl < 5 || (ip->frag_off & bpf_htons(0x3fff)))
            return count(MRC_STEER_PASSED, XDP_PASS);
        udp = (void *)ip + ip->ihl * 4;
        if ((void *)(udp + 1) > end) return count(MRC_STEER_PASSED, XDP_PASS);
        if (udp->dest != cfg->udp_port) return count(MRC_STEER_PASSED, XDP_PASS);
        local = ipv4_local(cfg, ip->daddr);
    } else if (proto == bpf_htons(ETH_P_IPV6) && cfg->n_ipv6 > 0) {
        /* Only with an IPv6 address configured (the dataplane is IPv4-only
         * for now: no address, no IPv6 steering). */
        struct ipv6hdr *ip6 = l3;
        if ((void *)(ip6 + 1) > end) return count(MRC_STEER_PASSED, XDP_PASS);
        /* UDP right after the fixed header; extension headers go to the kernel. */
        if (ip6->nexthdr != IPPROTO_UDP) return count(MRC_STEER_PASSED, XDP_PASS);
        udp = (void *)(ip6 + 1);
        if ((void *)(udp + 1) > end) return count(MRC_STEER_PASSED, XDP_PASS);
        if (udp->dest != cfg->udp_port) return count(MRC_STEER_PASSED, XDP_PASS);
        local = ipv6_local(cfg, ip6->daddr.in6_u.u6_addr8);
    } else {
        return count(MRC_STEER_PASSED, XDP_PASS);
    }
    if (!local) return count(MRC_STEER_ADDR_MISS, XDP_PASS);

    int action = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
    return count(action == XDP_REDIRECT ? MRC_STEER_REDIRECTED : MRC_STEER_NO_SOCKET, action);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
