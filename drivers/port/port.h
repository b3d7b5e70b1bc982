// A small, reusable port layer over DPDK ethdev.
//
// One Port is one DPDK ethdev (a PCI NIC or a virtual device: net_memif,
// net_tap, net_ring, net_pcap, net_null, net_af_xdp, net_af_packet, ...),
// configured with one RX and one TX queue per worker, checksum offloads
// negotiated with the device, and link state tracked. Setup functions return
// Result; the burst and checksum helpers are inline because they sit on the
// per-packet path.
#pragma once

#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "wire/net.h"

namespace mrc::xdp {
class Steering;
}

namespace mrc::drivers {

// ---- mbuf pools ----------------------------------------------------------------

// Bytes of mbuf data room that hold one frame of `mtu_bytes` (IP MTU) plus
// Ethernet header, one VLAN tag and the mbuf headroom.
uint16_t mbuf_data_room_for_mtu(uint16_t mtu_bytes);

struct PoolSizing {
    uint32_t ports = 1;
    uint32_t queues_per_port = 1;
    uint32_t rx_desc = 1024;
    uint32_t tx_desc = 1024;
    uint32_t burst = 32;
    uint32_t lcores = 1;
    uint32_t cache = 256;       // per-lcore mempool cache, mbufs
    uint32_t in_flight = 1024;  // held by the application (queues, retransmit), mbufs
};

// Mbufs a pool needs so that every descriptor ring can be full while each
// lcore holds a cache and bursts in hand: rounded to 2^k - 1, the mempool's
// best size.
uint32_t mbufs_needed(const PoolSizing &s);

// Creates a pktmbuf pool. On failure the error names the size asked for and
// what the EAL heap has left (--no-huge gives EAL only what -m says).
Result<rte_mempool *> create_mbuf_pool(const std::string &name, uint32_t mbufs,
                                       uint16_t data_room_bytes, uint32_t cache,
                                       int socket_id = SOCKET_ID_ANY);

// ---- ports ---------------------------------------------------------------------

struct PortOptions {
    // A port name as EAL knows it ("net_memif0", "0000:3b:00.0"), or devargs
    // to hot-plug ("net_ring0", "net_tap0,iface=mrc0"); a device that does not
    // exist yet is probed with these devargs and removed again on close.
    std::string device;
    uint16_t queues = 1;  // RX and TX queues: one of each per worker
    uint16_t rx_desc = 1024;
    uint16_t tx_desc = 1024;
    uint16_t mtu_bytes = 1500;
    bool promiscuous = true;
    bool tx_fast_free = false;  // only when every mbuf is direct, refcnt 1, one pool
    bool use_cksum_offload = true;
    // AF_XDP ports ("af_xdp:IFACE", or net_af_xdp devargs): the XDP steering
    // program sends UDP packets for this destination port (and, when given,
    // these local IPv4 addresses, host order) to the port; everything else
    // goes to the kernel. docs/ports.md, "AF_XDP".
    uint16_t steer_udp_port = 0;
    std::vector<uint32_t> steer_ipv4;
    // RX queue interrupts, for workers that sleep when idle (IdleMode::kAdaptive):
    // asked of devices whose PMD provides them (net_tap and NICs on a bus
    // other than vdev; DPDK 22.11's memif, ring, af_packet and af_xdp have none).
    bool rx_interrupts = false;
};

struct PortCaps {
    bool tx_ipv4_cksum = false;
    bool tx_udp_cksum = false;
    bool rx_ipv4_cksum = false;
    bool rx_udp_cksum = false;
    bool tx_multi_segs = false;
    bool tx_fast_free = false;
    bool lsc_interrupt = false;  // link changes arrive as events; else poll link()
    bool rx_interrupts = false;  // RX queue interrupts configured (rx_intr_fd)
    uint16_t max_queues = 1;
};

struct LinkState {
    bool up = false;
    uint32_t speed_mbps = 0;
    bool full_duplex = false;
    bool autoneg = false;
};
std::string to_string(const LinkState &l);

struct XdpInfo {
    std::string iface;
    std::string mode;  // "native" or "generic" (the kernel's choice)
    uint32_t prog_id = 0;
    uint64_t steered = 0;        // MRC packets handed to the port's sockets
    uint64_t no_socket = 0;      // MRC packets on a queue without a socket: to the kernel
    uint64_t other_address = 0;  // MRC port but another destination: to the kernel
    uint64_t to_kernel = 0;      // everything else
};

// "AF_XDP on IFACE: XDP steering program id N attached in native mode: UDP
// port P to DPDK, everything else to the kernel".
std::string describe(const XdpInfo &x, uint16_t udp_port);

struct PortCounters {
    uint64_t rx_packets = 0;
    uint64_t tx_packets = 0;
    uint64_t rx_bytes = 0;
    uint64_t tx_bytes = 0;
    uint64_t rx_missed = 0;  // dropped by the device: RX ring full
    uint64_t rx_errors = 0;
    uint64_t tx_errors = 0;
    uint64_t rx_nombuf = 0;  // RX mbuf allocation failures
};

enum class RxCksum : uint8_t { kUnknown, kGood, kBad };

class Port {
  public:
    // Configures and starts the device. `pool` supplies RX mbufs.
    static Result<std::unique_ptr<Port>> open(const PortOptions &opts, rte_mempool *pool);
    ~Port();
    Port(const Port &) = delete;
    Port &operator=(const Port &) = delete;

    uint16_t id() const { return id_; }
    const std::string &name() const { return name_; }
    const PortCaps &caps() const { return caps_; }
    const wire::MacAddr &mac() const { return mac_; }
    uint16_t queues() const { return queues_; }
    uint16_t mtu_bytes() const { return mtu_bytes_; }
    const char *driver() const { return driver_.c_str(); }
    // An AF_XDP socket on a kernel interface: the kernel owns its address
    // (and answers ARP and ping for it).
    bool af_xdp() const { return driver_ == "net_af_xdp"; }
    // Whether the device computes the UDP checksum of what it sends.
    bool tx_udp_offload() const { return tx_udp_offload_; }
    // AF_XDP ports: the steering program's interface, mode and counters;
    // nullopt for other devices.
    std::optional<XdpInfo> xdp_info() const;

    // Current link state, without waiting.
    LinkState link() const;
    // Polls until the link is up or `timeout_ms` passes; returns the last
    // state. A memif client connects only when started, and only once its
    // server is ready: this is where it is started (see port.cc, MemifArgs).
    LinkState wait_link_up(uint32_t timeout_ms);
    // Link-state-change events delivered by the device since open.
    uint64_t link_events() const { return link_events_.load(std::memory_order_relaxed); }

    PortCounters counters() const;
    // Stops the device (a memif peer sees its link go down). Only when no
    // thread polls its queues any more.
    void stop();

    // ---- per-packet path ----
    uint16_t rx_burst(uint16_t queue, rte_mbuf **pkts, uint16_t n) const {
        return rte_eth_rx_burst(id_, queue, pkts, n);
    }
    // Returns how many were taken; the caller still owns the rest.
    uint16_t try_tx_burst(uint16_t queue, rte_mbuf **pkts, uint16_t n) const {
        return rte_eth_tx_burst(id_, queue, pkts, n);
    }

    // Makes the checksums of an Ethernet/IPv4/UDP frame (IPv4 header without
    // options) or Ethernet/IPv6/UDP frame (no extension headers) right on
    // the wire: offload flags where the port computes them, software where
    // it does not. Headers must be in the first segment.
    void prepare_tx_cksum(rte_mbuf *m, uint16_t l2_bytes, bool ipv6) const {
        if (ipv6) {
            auto *ip6 = rte_pktmbuf_mtod_offset(m, rte_ipv6_hdr *, l2_bytes);
            auto *udp = rte_pktmbuf_mtod_offset(m, rte_udp_hdr *, l2_bytes + sizeof(rte_ipv6_hdr));
            udp->dgram_cksum = 0;
            m->l2_len = l2_bytes;
            m->l3_len = sizeof(rte_ipv6_hdr);
            if (tx_udp_offload_) {
                m->ol_flags |= RTE_MBUF_F_TX_IPV6 | RTE_MBUF_F_TX_UDP_CKSUM;
                udp->dgram_cksum = rte_ipv6_phdr_cksum(ip6, m->ol_flags);
            } else {
                // rte_ipv6_udptcp_cksum_mbuf never returns 0 for UDP.
                udp->dgram_cksum =
                    rte_ipv6_udptcp_cksum_mbuf(m, ip6, l2_bytes + sizeof(rte_ipv6_hdr));
            }
            return;
        }
        const uint16_t l3_bytes = sizeof(rte_ipv4_hdr);
        auto *ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr *, l2_bytes);
        auto *udp = rte_pktmbuf_mtod_offset(m, rte_udp_hdr *, l2_bytes + l3_bytes);
        ip->hdr_checksum = 0;
        udp->dgram_cksum = 0;
        m->l2_len = l2_bytes;
        m->l3_len = l3_bytes;
        if (tx_ip_offload_) {
            m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
        } else {
            ip->hdr_checksum = rte_ipv4_cksum(ip);
        }
        if (tx_udp_offload_) {
            m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
            udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, m->ol_flags);
        } else {
            udp->dgram_cksum = rte_ipv4_udptcp_cksum_mbuf(m, ip, l2_bytes + l3_bytes);
        }
    }

    // A descriptor that becomes readable when RX queue `queue` has frames
    // (epoll it, never read it), or -1 when the port has no RX interrupts.
    // Valid while the port is started. Arm with rx_intr_enable before
    // sleeping on it, and disarm after (a no-op on devices whose descriptor
    // is level-triggered by nature, as net_tap's queue fds are).
    int rx_intr_fd(uint16_t queue) const;
    void rx_intr_enable(uint16_t queue) const;
    void rx_intr_disable(uint16_t queue) const;

    // What the device says about a received frame's checksums: kGood only
    // when it checked both IPv4 and UDP, kBad when either failed, kUnknown
    // when software must check.
    static RxCksum rx_cksum(const rte_mbuf *m) {
        const uint64_t ip = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
        const uint64_t l4 = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
        if (ip == RTE_MBUF_F_RX_IP_CKSUM_BAD || l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD)
            return RxCksum::kBad;
        if (ip == RTE_MBUF_F_RX_IP_CKSUM_GOOD && l4 == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
            return RxCksum::kGood;
        return RxCksum::kUnknown;
    }

  private:
    Port() = default;
    static int on_lsc_event(uint16_t port_id, rte_eth_event_type type, void *arg, void *ret);

    uint16_t id_ = RTE_MAX_ETHPORTS;
    std::string name_;
    std::string driver_;
    wire::MacAddr mac_{};
    PortCaps caps_;
    uint16_t queues_ = 0;
    uint16_t mtu_bytes_ = 0;
    bool tx_ip_offload_ = false;
    bool tx_udp_offload_ = false;
    bool hotplugged_ = false;
    bool started_ = false;
    bool lsc_registered_ = false;
    bool memif_client_ = false;
    std::string memif_ready_file_;  // "<socket>.ready", published by a memif server
    std::string memif_socket_file_;
    std::atomic<uint64_t> link_events_{0};
    std::unique_ptr<xdp::Steering> steering_;  // released after the device closes
};

struct PortListing {
    uint16_t id;
    std::string name;
    std::string driver;
};
// Every ethdev EAL has probed (from --vdev, the PCI bus, or hot-plug).
std::vector<PortListing> list_ports();

}  // namespace mrc::drivers
