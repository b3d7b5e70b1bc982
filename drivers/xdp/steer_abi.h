/* What the MRC XDP steering program (mrc_steer.bpf.c) and its loader
 * (steer.cc) share: the configuration map's value and the counter slots.
 * Plain C with kernel UAPI types: it is compiled for BPF and for the host.
 *
 * Map names are at most 15 characters (BPF_OBJ_NAME_LEN - 1): the loader
 * finds the maps of an attached program by name.
 */
#ifndef MRC_XDP_STEER_ABI_H
#define MRC_XDP_STEER_ABI_H

#include <linux/types.h>

#define MRC_STEER_PROG_NAME "mrc_steer"
#define MRC_STEER_CFG_MAP "mrc_steer_cfg"
#define MRC_STEER_STATS_MAP "mrc_steer_stat"
/* The name net_af_xdp's xdp_prog= option looks for. */
#define MRC_STEER_XSKS_MAP "xsks_map"

#define MRC_STEER_MAX_QUEUES 256
#define MRC_STEER_MAX_ADDRS 4

/* One entry, key 0. udp_port 0 (the state the program is loaded in) steers
 * nothing: every packet goes to the kernel until the loader has written
 * the configuration. IPv4: with n_ipv4 0, any destination address; else
 * one of ipv4[]. IPv6: only to one of ipv6[] (n_ipv6 0: none steered). */
struct mrc_steer_cfg {
    __be16 udp_port; /* network byte order; 0: steer nothing */
    __u8 n_ipv4;
    __u8 n_ipv6;
    __be32 ipv4[MRC_STEER_MAX_ADDRS];
    __u8 ipv6[MRC_STEER_MAX_ADDRS][16];
};

/* Per-CPU counters, by slot. */
enum mrc_steer_stat {
    MRC_STEER_REDIRECTED = 0, /* MRC packets handed to an AF_XDP socket */
    MRC_STEER_NO_SOCKET = 1,  /* MRC packets on a queue with no socket: passed to the kernel */
    MRC_STEER_ADDR_MISS = 2,  /* the MRC port, but not a configured local address: passed */
    MRC_STEER_PASSED = 3,     /* everything else: passed to the kernel */
    MRC_STEER_NSTATS = 4,
};

#endif
