#include "port/port.h"

#include <fmt/format.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

#include <unistd.h>

#include "common/sleep.h"
#include "port/eal.h"
#ifdef MRC_HAVE_XDP
#include "xdp/steer.h"
#endif

namespace mrc::drivers {

// ---- mbuf pools ----------------------------------------------------------------

namespace {
constexpr uint32_t kAfXdpHeadroom = 256;
}

uint16_t mbuf_data_room_for_mtu(uint16_t mtu_bytes) {
    const uint32_t frame =
        uint32_t{mtu_bytes} + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN + RTE_ETHER_CRC_LEN;
    // net_af_xdp receives into the mbuf's data room behind the kernel's own
    // XDP headroom (XDP_PACKET_HEADROOM, 256 bytes): room for it too.
    uint32_t room = RTE_PKTMBUF_HEADROOM + kAfXdpHeadroom + frame;
    room = (room + 63u) & ~63u;  // whole cache lines
    // Some PMDs (net_af_packet's 2 KiB frames) want at least the default size.
    if (room < RTE_MBUF_DEFAULT_BUF_SIZE) room = RTE_MBUF_DEFAULT_BUF_SIZE;
    return static_cast<uint16_t>(room > UINT16_MAX ? UINT16_MAX : room);
}

uint32_t mbufs_needed(const PoolSizing &s) {
    const uint64_t rings = uint64_t{s.ports} * s.queues_per_port * (s.rx_desc + s.tx_desc);
    const uint64_t per_lcore = uint64_t{s.lcores} * (s.cache + 2ull * s.burst);
    uint64_t n = rings + per_lcore + s.in_flight;
    uint64_t pow2 = 1;
    while (pow2 < n + 1)
        pow2 <<= 1;
    n = pow2 - 1;
    return static_cast<uint32_t>(n > UINT32_MAX ? UINT32_MAX : n);
}

Result<rte_mempool *> create_mbuf_pool(const std::string &name, uint32_t mbufs,
                                       uint16_t data_room_bytes, uint32_t cache, int socket_id) {
    if (cache > RTE_MEMPOOL_CACHE_MAX_SIZE) cache = RTE_MEMPOOL_CACHE_MAX_SIZE;
    if (cache > mbufs / 1.5) cache = static_cast<uint32_t>(mbufs / 1.5);
    rte_mempool *mp =
        rte_pktmbuf_pool_create(name.c_str(), mbufs, cache, 0, data_room_bytes, socket_id);
    if (mp == nullptr) {
        const int err = rte_errno;
        const double need_mib =
            double(mbufs) * (data_room_bytes + sizeof(rte_mbuf) + 64) / (1 << 20);
        const double free_mib = double(eal_heap_free_bytes()) / (1 << 20);
        return Error{fmt::format(
            "cannot create mbuf pool '{}' of {} mbufs x {} bytes (about {:.0f} MiB): {}; "
            "the EAL heap has {:.0f} MiB free: give EAL more memory (-m <MiB> with --no-huge) "
            "or use fewer or shorter descriptor rings",
            name, mbufs, data_room_bytes, need_mib, rte_strerror(err), free_mib)};
    }
    return mp;
}

// ---- ports ---------------------------------------------------------------------

std::string to_string(const LinkState &l) {
    if (!l.up) return "down";
    std::string speed = l.speed_mbps == RTE_ETH_SPEED_NUM_UNKNOWN || l.speed_mbps == 0
                            ? std::string("unknown speed")
                            : fmt::format("{} Mb/s", l.speed_mbps);
    return fmt::format("up {} {}{}", speed, l.full_duplex ? "full-duplex" : "half-duplex",
                       l.autoneg ? " autoneg" : "");
}

std::vector<PortListing> list_ports() {
    std::vector<PortListing> out;
    uint16_t pid;
    RTE_ETH_FOREACH_DEV(pid) {
        char name[RTE_ETH_NAME_MAX_LEN] = {};
        rte_eth_dev_get_name_by_port(pid, name);
        rte_eth_dev_info info{};
        rte_eth_dev_info_get(pid, &info);
        out.push_back({pid, name, info.driver_name ? info.driver_name : "?"});
    }
    return out;
}

namespace {

std::string device_name(const std::string &devargs) {
    return devargs.substr(0, devargs.find(','));
}

std::string available_ports() {
    std::string s;
    for (const auto &p : list_ports())
        s += (s.empty() ? "" : ", ") + p.name;
    return s.empty() ? "none" : s;
}

// Finds the port for `device`, probing it first when it does not exist yet.
Result<uint16_t> find_or_probe(const std::string &device, bool *probed) {
    *probed = false;
    const std::string name = device_name(device);
    if (name.empty()) return Error{"empty device name"};
    uint16_t pid;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) == 0) {
        if (device != name)
            return Error{fmt::format(
                "port '{}' already exists (from --vdev or an earlier open); its devargs "
                "cannot be changed: name it without arguments",
                name)};
        return pid;
    }
    if (rte_dev_probe(device.c_str()) != 0) {
        const int err = rte_errno;
        return Error{
            fmt::format("no DPDK port '{}' and probing '{}' failed: {} (ports present: {}; pass "
                        "--vdev=<driver><n>,<args> to EAL or check the devargs)",
                        name, device, rte_strerror(err ? err : ENODEV), available_ports())};
    }
    if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) != 0)
        return Error{
            fmt::format("device '{}' probed but created no ethdev named '{}' (ports present: {})",
                        device, name, available_ports())};
    *probed = true;
    return pid;
}

// memif: DPDK 22.11's memif server accepts connections from the moment it is
// probed, and a client that connects before the server's port is configured
// and started leaves it in a broken state (seen: link up on one side only,
// and a PANIC in EAL's interrupt thread). So a memif server opened here
// publishes "<socket>.ready" once started, and a memif client opened here
// connects only when that file exists, or when the socket has been there
// for a while without one (a server that is not ours, such as VPP).
struct MemifArgs {
    bool server = false;
    std::string socket = "/run/memif.sock";
    uint32_t bsize = 2048;  // the PMD's buffer size (bsize=), its default
};

std::optional<MemifArgs> memif_args(const std::string &devargs) {
    if (devargs.rfind("net_memif", 0) != 0) return std::nullopt;
    MemifArgs m;
    size_t pos = devargs.find(',');
    while (pos != std::string::npos) {
        const size_t next = devargs.find(',', pos + 1);
        const std::string kv =
            devargs.substr(pos + 1, next == std::string::npos ? next : next - pos - 1);
        if (kv == "role=server") m.server = true;
        if (kv.rfind("socket=", 0) == 0) m.socket = kv.substr(7);
        if (kv.rfind("bsize=", 0) == 0)
            m.bsize = uint32_t(std::strtoul(kv.c_str() + 6, nullptr, 0));
        pos = next;
    }
    return m;
}

bool file_exists(const std::string &path) {
    return ::access(path.c_str(), F_OK) == 0;
}

// Whether the PMD gives RX queue interrupts (DPDK has no capability flag for
// them). Of the virtual devices in 22.11 only net_tap does (its queue fds);
// NICs on a real bus generally do, and rte_eth_dev_rx_intr_* tells at run time.
bool rx_interrupts_known(const rte_eth_dev_info &info) {
    if (info.driver_name != nullptr && std::strcmp(info.driver_name, "net_tap") == 0) return true;
    if (info.device == nullptr) return false;
    const rte_bus *bus = rte_dev_bus(info.device);
    return bus != nullptr && std::strcmp(rte_bus_name(bus), "vdev") != 0;
}

}  // namespace

int Port::on_lsc_event(uint16_t, rte_eth_event_type type, void *arg, void *) {
    if (type == RTE_ETH_EVENT_INTR_LSC)
        static_cast<Port *>(arg)->link_events_.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

Result<std::unique_ptr<Port>> Port::open(const PortOptions &opts, rte_mempool *pool) {
    if (pool == nullptr) return Error{"port open: no mbuf pool"};
    if (opts.queues == 0) return Error{"port open: queues must be at least 1"};
    std::unique_ptr<Port> p(new Port());
    // AF_XDP: the steering program's checks and lock come before the PMD
    // attaches anything (docs/ports.md, "AF_XDP").
    std::string device = opts.device;
    std::optional<xdp::AfXdpArgs> afx;
#ifdef MRC_HAVE_XDP
    {
        auto prog = xdp::program_path();
        afx = xdp::af_xdp_args(opts.device, opts.queues, prog ? *prog : std::string());
        if (afx) {
            uint16_t existing;
            if (rte_eth_dev_get_port_by_name(device_name(afx->devargs).c_str(), &existing) == 0) {
                // EAL made it from --vdev: no steering program was asked for,
                // and libxdp's default one would take every packet. Or it is
                // this process's own port on the same interface.
                rte_eth_dev_info info{};
                std::string iface = "IFACE";
                std::string args;
                if (rte_eth_dev_info_get(existing, &info) == 0 && info.device)
                    if (const rte_devargs *da = rte_dev_devargs(info.device); da && da->args)
                        args = da->args;
                if (auto a = xdp::af_xdp_args(device_name(afx->devargs) + "," + args, 1, "");
                    a && !a->iface.empty())
                    iface = a->iface;
                if (xdp::devarg("," + args, "xdp_prog"))
                    return Error{
                        fmt::format("AF_XDP port '{}': this process already has a port "
                                    "on {}; one port per interface",
                                    device_name(afx->devargs), iface)};
                return Error{fmt::format(
                    "AF_XDP port '{}' was created by EAL (--vdev), without MRC's steering "
                    "program: give it as --port af_xdp:{} (or ports = [\"af_xdp:{}\"]) instead",
                    device_name(afx->devargs), iface, iface)};
            }
            if (afx->own_program && !prog) return prog.error();
            if (afx->iface.empty())
                return Error{fmt::format("AF_XDP port '{}': no interface (iface=)", opts.device)};
            if (afx->own_program && opts.steer_udp_port == 0)
                return Error{
                    fmt::format("AF_XDP port '{}': no UDP port to steer to DPDK "
                                "(PortOptions::steer_udp_port)",
                                opts.device)};
            auto st = xdp::Steering::acquire({afx->iface, [](const std::string &l) {
                                                  std::fprintf(stderr, "%s\n", l.c_str());
                                              }});
            if (!st) return st.error();
            p->steering_ = std::move(*st);
            device = afx->devargs;
        }
    }
#else
    if (opts.device.rfind("af_xdp:", 0) == 0 || opts.device.rfind("net_af_xdp", 0) == 0)
        return Error{
            fmt::format("port '{}': this build has no XDP support (libbpf-dev was "
                        "missing when it was built): install it "
                        "(scripts/install-deps.sh) and rebuild",
                        opts.device)};
#endif
    auto found = find_or_probe(device, &p->hotplugged_);
    if (!found) return found.error();
    p->id_ = *found;
    p->name_ = device_name(device);
    const uint16_t pid = p->id_;
    auto fail = [&](const std::string &what, int rc) -> Error {
        return Error{fmt::format("port '{}' ({}): {}: {}", p->name_, p->driver_, what,
                                 rte_strerror(rc < 0 ? -rc : rc))};
    };

    rte_eth_dev_info info{};
    if (int rc = rte_eth_dev_info_get(pid, &info); rc != 0)
        return fail("cannot read device info", rc);
    p->driver_ = info.driver_name ? info.driver_name : "?";
    if (opts.queues > info.max_rx_queues || opts.queues > info.max_tx_queues)
        return Error{
            fmt::format("port '{}' ({}): {} queues asked, device has at most {} RX / {} TX",
                        p->name_, p->driver_, opts.queues, info.max_rx_queues, info.max_tx_queues)};
    if (opts.mtu_bytes < info.min_mtu || opts.mtu_bytes > info.max_mtu)
        return Error{fmt::format("port '{}' ({}): MTU {} outside the device's range [{}, {}]",
                                 p->name_, p->driver_, opts.mtu_bytes, info.min_mtu, info.max_mtu)};
    // Ports from --vdev are named without their arguments: ask the device.
    std::string devargs = p->name_;
    if (const rte_devargs *da = info.device ? rte_dev_devargs(info.device) : nullptr;
        da && da->args && *da->args)
        devargs += std::string(",") + da->args;
    const auto memif = memif_args(devargs);
    // The MTU ethdev is configured with. DPDK 22.11's memif says it takes
    // 1518-byte frames at most (max_rx_pktlen) and has no MTU to set, but
    // its rings carry any frame that fits a buffer (bsize=): a larger MTU is
    // configured as the largest it accepts and used as asked. A frame larger
    // than a buffer would be split over several, which this version's TX
    // does not do reliably (a stale "next" flag can join frames), so the
    // buffers must hold a whole frame; the client's bsize is the one used.
    uint16_t conf_mtu = opts.mtu_bytes;
    const uint32_t frame_bytes = uint32_t{opts.mtu_bytes} + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN;
    if (memif &&
        uint32_t{opts.mtu_bytes} + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN > info.max_rx_pktlen) {
        if (!memif->server && memif->bsize < frame_bytes)
            return Error{fmt::format(
                "port '{}' (net_memif): MTU {} needs buffers of at least {} bytes: add "
                "bsize={} to its devargs (it has {}; the client's buffers are the ones used)",
                p->name_, opts.mtu_bytes, frame_bytes, frame_bytes, memif->bsize)};
        conf_mtu = uint16_t(info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
    }
    uint32_t room = rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM;
    if (afx)
        room = room > kAfXdpHeadroom ? room - kAfXdpHeadroom : 0;  // see mbuf_data_room_for_mtu
    if (frame_bytes > room)
        return Error{fmt::format("port '{}': MTU {} needs {} bytes of mbuf data room, pool has {}",
                                 p->name_, opts.mtu_bytes, frame_bytes, room)};

    PortCaps &c = p->caps_;
    c.tx_ipv4_cksum = info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
    c.tx_udp_cksum = info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    c.rx_ipv4_cksum = info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
    c.rx_udp_cksum = info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
    c.tx_multi_segs = info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    c.tx_fast_free = info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
    c.lsc_interrupt = info.dev_flags && (*info.dev_flags & RTE_ETH_DEV_INTR_LSC);
    // net_tap's LSC "interrupt" is its netlink listener, and with it on,
    // rte_eth_link_get_nowait() returns what that listener last stored. CI
    // saw that copy stay "up" for seconds after `ip link set down` (the
    // plane failed over on its own losses, but read up to the end). Without
    // it, every link() asks the kernel (one SIOCGIFFLAGS), which the control
    // thread's poll (every millisecond) can afford.
    if (c.lsc_interrupt && info.driver_name != nullptr &&
        std::strcmp(info.driver_name, "net_tap") == 0)
        c.lsc_interrupt = false;
    c.max_queues = std::min(info.max_rx_queues, info.max_tx_queues);

    rte_eth_conf conf{};
    conf.rxmode.mtu = conf_mtu;
    if (opts.use_cksum_offload) {
        if (c.rx_ipv4_cksum) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
        if (c.rx_udp_cksum) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
        if (c.tx_ipv4_cksum) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
        if (c.tx_udp_cksum) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
        p->tx_ip_offload_ = c.tx_ipv4_cksum;
        p->tx_udp_offload_ = c.tx_udp_cksum;
    }
    if (c.tx_multi_segs) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    if (opts.tx_fast_free && c.tx_fast_free)
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
    if (opts.queues > 1) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf =
            (RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_NONFRAG_IPV6_UDP) &
            info.flow_type_rss_offloads;
        if (conf.rx_adv_conf.rss_conf.rss_hf == 0) conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
    }
    conf.intr_conf.lsc = c.lsc_interrupt ? 1 : 0;
    if (opts.rx_interrupts && rx_interrupts_known(info)) {
        conf.intr_conf.rxq = 1;
        c.rx_interrupts = true;
    }

    if (int rc = rte_eth_dev_configure(pid, opts.queues, opts.queues, &conf); rc != 0)
        return fail(fmt::format("configure with {} queues", opts.queues), rc);
    uint16_t rx_desc = opts.rx_desc, tx_desc = opts.tx_desc;
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &rx_desc, &tx_desc); rc != 0)
        return fail("adjust descriptor counts", rc);
    const int socket = rte_eth_dev_socket_id(pid);
    for (uint16_t q = 0; q < opts.queues; ++q) {
        rte_eth_rxconf rxc = info.default_rxconf;
        rxc.offloads = conf.rxmode.offloads;
        if (int rc = rte_eth_rx_queue_setup(pid, q, rx_desc, socket, &rxc, pool); rc != 0)
            return fail(fmt::format("RX queue {} setup ({} descriptors)", q, rx_desc), rc);
        rte_eth_txconf txc = info.default_txconf;
        txc.offloads = conf.txmode.offloads;
        if (int rc = rte_eth_tx_queue_setup(pid, q, tx_desc, socket, &txc); rc != 0)
            return fail(fmt::format("TX queue {} setup ({} descriptors)", q, tx_desc), rc);
    }
#ifdef MRC_HAVE_XDP
    // net_af_xdp attached the program and filled its socket map during RX
    // queue setup; until now it steered nothing.
    if (p->steering_ && afx && afx->own_program) {
        auto r = p->steering_->configure({opts.steer_udp_port, opts.steer_ipv4, {}});
        if (!r) return r.error();
        const int rxq = xdp::rx_queues(afx->iface);
        const auto start = xdp::devarg(afx->devargs, "start_queue");
        if (rxq > opts.queues || (start && *start != "0"))
            std::fprintf(stderr,
                         "warning: AF_XDP on %s: the interface receives on %d queue(s) and only "
                         "%u of them (from queue %s) have a socket: MRC packets hashed to the "
                         "others go to the kernel (counted as no_socket). Run `ethtool -L %s "
                         "combined %u` or give one worker per queue\n",
                         afx->iface.c_str(), rxq, unsigned(opts.queues),
                         start ? start->c_str() : "0", afx->iface.c_str(), unsigned(opts.queues));
    }
#endif
    if (c.lsc_interrupt) {
        if (rte_eth_dev_callback_register(pid, RTE_ETH_EVENT_INTR_LSC, &Port::on_lsc_event,
                                          p.get()) == 0)
            p->lsc_registered_ = true;
    }
    // A memif client starts only once its server is ready (see MemifArgs);
    // until then it stays stopped, link down, and wait_link_up() retries.
    if (memif && !memif->server) {
        p->memif_client_ = true;
        p->memif_ready_file_ = memif->socket + ".ready";
        p->memif_socket_file_ = memif->socket;
    }
    if (memif && memif->server) std::remove((memif->socket + ".ready").c_str());
    const bool defer_start = p->memif_client_ && !file_exists(p->memif_ready_file_);
    if (defer_start) {
        // started_ stays false: wait_link_up() starts it.
    } else if (int rc = rte_eth_dev_start(pid); rc == 0) {
        p->started_ = true;
    } else if (!p->memif_client_) {
        return fail("start", rc);
    }
    if (memif && memif->server) {
        p->memif_ready_file_ = memif->socket + ".ready";
        std::ofstream(p->memif_ready_file_) << "started\n";
    }
    if (opts.promiscuous) {
        // Not every virtual device has a promiscuous mode; that is not an error.
        rte_eth_promiscuous_enable(pid);
    }
    rte_ether_addr mac{};
    if (rte_eth_macaddr_get(pid, &mac) == 0) std::memcpy(p->mac_.b, mac.addr_bytes, 6);
    p->queues_ = opts.queues;
    uint16_t mtu = opts.mtu_bytes;
    if (conf_mtu == opts.mtu_bytes) rte_eth_dev_get_mtu(pid, &mtu);
    p->mtu_bytes_ = mtu;
    return p;
}

int Port::rx_intr_fd(uint16_t queue) const {
    if (!caps_.rx_interrupts || !started_ || queue >= queues_) return -1;
    return rte_eth_dev_rx_intr_ctl_q_get_fd(id_, queue);
}

void Port::rx_intr_enable(uint16_t queue) const {
    if (caps_.rx_interrupts) rte_eth_dev_rx_intr_enable(id_, queue);  // -ENOTSUP: level-triggered
}

void Port::rx_intr_disable(uint16_t queue) const {
    if (caps_.rx_interrupts) rte_eth_dev_rx_intr_disable(id_, queue);
}

Port::~Port() {
    if (id_ >= RTE_MAX_ETHPORTS) return;
    if (!memif_client_ && !memif_ready_file_.empty()) std::remove(memif_ready_file_.c_str());
    // Stopped and closed on EAL's interrupt thread, never beside a control
    // callback of the PMD (see run_on_interrupt_thread). The hot-plugged
    // device is removed after that, on the calling thread: removal may talk
    // to other processes, which the interrupt thread should not (a Port
    // destroyed on the interrupt thread itself does both there).
    rte_device *device = nullptr;
    run_on_interrupt_thread([&] {
        if (lsc_registered_)
            rte_eth_dev_callback_unregister(id_, RTE_ETH_EVENT_INTR_LSC, &Port::on_lsc_event, this);
        if (started_) rte_eth_dev_stop(id_);
        rte_eth_dev_info info{};
        if (rte_eth_dev_info_get(id_, &info) == 0) device = info.device;
        rte_eth_dev_close(id_);
    });
    if (hotplugged_ && device) rte_dev_remove(device);
}

std::string describe(const XdpInfo &x, uint16_t udp_port) {
    return fmt::format(
        "AF_XDP on {}: XDP steering program id {} attached in {} mode: UDP port {} "
        "to DPDK, everything else to the kernel",
        x.iface, x.prog_id, x.mode, udp_port);
}

std::optional<XdpInfo> Port::xdp_info() const {
#ifdef MRC_HAVE_XDP
    // Not with an xdp_prog= of the user's: the steering is theirs.
    if (!steering_ || steering_->attached().id == 0) return std::nullopt;
    XdpInfo x;
    x.iface = steering_->iface();
    x.mode = xdp::to_string(steering_->attached().mode);
    x.prog_id = steering_->attached().id;
    const xdp::SteerStats st = steering_->stats();
    x.steered = st.redirected;
    x.no_socket = st.no_socket;
    x.other_address = st.addr_miss;
    x.to_kernel = st.passed;
    return x;
#else
    return std::nullopt;
#endif
}

LinkState Port::link() const {
    rte_eth_link l{};
    LinkState s;
    if (rte_eth_link_get_nowait(id_, &l) != 0) return s;
    s.up = l.link_status == RTE_ETH_LINK_UP;
    s.speed_mbps = l.link_speed;
    s.full_duplex = l.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
    s.autoneg = l.link_autoneg == RTE_ETH_LINK_AUTONEG;
    return s;
}

LinkState Port::wait_link_up(uint32_t timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    // A memif client connects once its server is ready (see MemifArgs): it
    // is started when the ready file appears, or when the socket has stood
    // for a second without one; a start that fails is retried every 250 ms,
    // and a start whose handshake went nowhere is redone after a second.
    using std::chrono::milliseconds;
    using Clock = std::chrono::steady_clock;
    auto last_attempt = Clock::now() - milliseconds(1000);
    std::optional<Clock::time_point> socket_seen;
    LinkState s = link();
    while (!s.up && Clock::now() < deadline) {
        mrc::sleep_for_steady(milliseconds(10));
        const auto now = Clock::now();
        if (memif_client_) {
            bool may_connect = file_exists(memif_ready_file_);
            if (!may_connect && file_exists(memif_socket_file_)) {
                if (!socket_seen) socket_seen = now;
                may_connect = now - *socket_seen >= milliseconds(1000);
            }
            if (may_connect && now - last_attempt >= milliseconds(started_ ? 1000 : 250)) {
                // Never beside a handshake callback that may still be running.
                run_on_interrupt_thread([&] {
                    if (started_) rte_eth_dev_stop(id_);
                    started_ = rte_eth_dev_start(id_) == 0;
                });
                last_attempt = now;
            }
        }
        s = link();
    }
    return s;
}

void Port::stop() {
    if (!started_) return;
    run_on_interrupt_thread([&] { rte_eth_dev_stop(id_); });
    started_ = false;
}

PortCounters Port::counters() const {
    rte_eth_stats st{};
    PortCounters c;
    if (rte_eth_stats_get(id_, &st) != 0) return c;
    c.rx_packets = st.ipackets;
    c.tx_packets = st.opackets;
    c.rx_bytes = st.ibytes;
    c.tx_bytes = st.obytes;
    c.rx_missed = st.imissed;
    c.rx_errors = st.ierrors;
    c.tx_errors = st.oerrors;
    c.rx_nombuf = st.rx_nombuf;
    return c;
}

}  // namespace mrc::drivers
