#include "xdp/steer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <linux/capability.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/xdp_diag.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {
#include "xdp/steer_abi.h"
}

#ifndef AF_XDP
#define AF_XDP 44
#endif

namespace mrc::xdp {

namespace {

constexpr const char *kLockDir = "/run/mrc/xdp";

struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int release() {
        int f = fd;
        fd = -1;
        return f;
    }
};

std::string errstr(int err) {
    return std::strerror(err < 0 ? -err : err);
}

// The maps of a loaded program, by name: fds the caller closes.
struct ProgMaps {
    int cfg = -1;
    int stats = -1;
    bool xsks = false;
};

Result<ProgMaps> prog_maps(int prog_fd) {
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
        return Error{fmt::format("cannot read the program's info: {}", errstr(errno))};
    std::vector<uint32_t> ids(info.nr_map_ids);
    ProgMaps out;
    if (ids.empty()) return out;
    const uint32_t n = info.nr_map_ids;
    info = bpf_prog_info{};
    info.nr_map_ids = n;
    info.map_ids = reinterpret_cast<uintptr_t>(ids.data());
    len = sizeof(info);
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
        return Error{fmt::format("cannot read the program's maps: {}", errstr(errno))};
    for (uint32_t i = 0; i < std::min(n, info.nr_map_ids); ++i) {
        Fd m(bpf_map_get_fd_by_id(ids[i]));
        if (m.fd < 0) continue;
        bpf_map_info mi{};
        uint32_t mlen = sizeof(mi);
        if (bpf_obj_get_info_by_fd(m.fd, &mi, &mlen) != 0) continue;
        const std::string name = mi.name;
        if (name == MRC_STEER_CFG_MAP && mi.value_size == sizeof(mrc_steer_cfg) && out.cfg < 0)
            out.cfg = m.release();
        else if (name == MRC_STEER_STATS_MAP && mi.value_size == sizeof(uint64_t) && out.stats < 0)
            out.stats = m.release();
        else if (name == MRC_STEER_XSKS_MAP && mi.type == BPF_MAP_TYPE_XSKMAP)
            out.xsks = true;
    }
    return out;
}

void close_maps(ProgMaps &m) {
    if (m.cfg >= 0) ::close(m.cfg);
    if (m.stats >= 0) ::close(m.stats);
    m.cfg = m.stats = -1;
}

uint32_t mode_flags(AttachMode m) {
    switch (m) {
        case AttachMode::kNative:
            return XDP_FLAGS_DRV_MODE;
        case AttachMode::kGeneric:
            return XDP_FLAGS_SKB_MODE;
        case AttachMode::kOffload:
            return XDP_FLAGS_HW_MODE;
        default:
            return 0;
    }
}

// Detaches program `p` from its interface, only if it is still the one
// attached (XDP_FLAGS_REPLACE with its fd).
int detach(const AttachedProg &p) {
    Fd fd(bpf_prog_get_fd_by_id(p.id));
    if (fd.fd < 0) return -errno;
    bpf_xdp_attach_opts o{};  // not LIBBPF_OPTS: a GNU extension in C++
    o.sz = sizeof(o);
    o.old_prog_fd = fd.fd;
    return bpf_xdp_detach(static_cast<int>(p.ifindex), mode_flags(p.mode), &o);
}

uint64_t netns_inode() {
    struct stat st {};
    if (::stat("/proc/self/ns/net", &st) != 0) return 0;
    return st.st_ino;
}

std::string lock_path(const std::string &iface) {
    return fmt::format("{}/{}-{}.lock", kLockDir, netns_inode(), iface);
}

int read_pid(int fd) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    return n > 0 ? std::atoi(buf) : 0;
}

// Whether the effective capability set holds `cap`.
bool has_cap(int cap) {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (::syscall(SYS_capget, &hdr, data) != 0) return false;
    return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

Result<void> check_privileges(const std::string &iface) {
    if (::geteuid() == 0) return {};
    std::string missing;
    auto need = [&](int cap, const char *name) {
        if (!has_cap(cap)) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    need(CAP_NET_ADMIN, "CAP_NET_ADMIN");
    need(CAP_NET_RAW, "CAP_NET_RAW");
    // CAP_BPF would do for loading, but finding the program the PMD
    // attached (by id) and its maps needs CAP_SYS_ADMIN.
    need(CAP_SYS_ADMIN, "CAP_SYS_ADMIN");
    if (missing.empty()) return {};
    if (missing[0] == ',') missing = missing.substr(2);
    return Error{fmt::format(
        "AF_XDP on '{}': no permission to load XDP programs, look them up and open AF_XDP "
        "sockets: run as root, or grant {} (for a service: AmbientCapabilities=; the lock "
        "directory /run/mrc/xdp must be writable too)",
        iface, missing)};
}

std::string foreign_program(const std::string &iface, const AttachedProg &p) {
    return fmt::format(
        "AF_XDP on '{}': the interface already has an XDP program attached, '{}' (id {}, {} "
        "mode), and MRC will not replace another program. If nothing needs it, detach it (`ip "
        "link set dev {} {} off`); otherwise give MRC another interface",
        iface, p.name.empty() ? "?" : p.name, p.id, to_string(p.mode), iface,
        p.mode == AttachMode::kGeneric ? "xdpgeneric" : "xdp");
}

std::string in_use(const std::string &iface, int pid) {
    if (pid == ::getpid())
        return fmt::format("AF_XDP on '{}': this process already has a port on the interface",
                           iface);
    return fmt::format(
        "AF_XDP on '{}': the interface is in use by another MRC process{}: stop it first, or "
        "give this one another interface",
        iface, pid > 0 ? fmt::format(" (pid {})", pid) : "");
}

// AF_XDP sockets bound to `ifindex` in this network namespace (sock_diag),
// or -errno when the kernel cannot tell (no CONFIG_XDP_SOCKETS_DIAG).
int xsk_sockets_on(uint32_t ifindex) {
    Fd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
    if (nl.fd < 0) return -errno;
    struct {
        nlmsghdr nlh;
        xdp_diag_req req;
    } r{};
    r.nlh.nlmsg_len = sizeof(r);
    r.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    r.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    r.req.sdiag_family = AF_XDP;
    r.req.xdiag_show = XDP_SHOW_INFO;
    if (::send(nl.fd, &r, sizeof(r), 0) != ssize_t(sizeof(r))) return -errno;
    int count = 0;
    alignas(nlmsghdr) char buf[16384];
    for (;;) {
        const ssize_t n = ::recv(nl.fd, buf, sizeof(buf), 0);
        if (n < 0) return -errno;
        if (n == 0) return count;
        // NLMSG_OK / NLMSG_NEXT, written out (the macros mix signedness).
        size_t left = static_cast<size_t>(n);
        for (auto *h = reinterpret_cast<nlmsghdr *>(buf);
             left >= sizeof(nlmsghdr) && h->nlmsg_len >= sizeof(nlmsghdr) && h->nlmsg_len <= left;
             left -= std::min<size_t>(left, NLMSG_ALIGN(h->nlmsg_len)),
                  h = reinterpret_cast<nlmsghdr *>(reinterpret_cast<char *>(h) +
                                                   NLMSG_ALIGN(h->nlmsg_len))) {
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(xdp_diag_msg)) && h->nlmsg_type != NLMSG_DONE &&
                h->nlmsg_type != NLMSG_ERROR)
                continue;
            if (h->nlmsg_type == NLMSG_DONE) return count;
            if (h->nlmsg_type == NLMSG_ERROR) {
                const auto *e = static_cast<const nlmsgerr *>(NLMSG_DATA(h));
                return e->error ? e->error : -EIO;
            }
            const auto *m = static_cast<const xdp_diag_msg *>(NLMSG_DATA(h));
            int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
            for (auto *a = reinterpret_cast<const nlattr *>(m + 1);
                 alen >= int(sizeof(nlattr)) && a->nla_len >= sizeof(nlattr) &&
                 int(a->nla_len) <= alen;
                 alen -= NLA_ALIGN(a->nla_len),
                      a = reinterpret_cast<const nlattr *>(reinterpret_cast<const char *>(a) +
                                                           NLA_ALIGN(a->nla_len))) {
                if (a->nla_type != XDP_DIAG_INFO || a->nla_len < NLA_HDRLEN + sizeof(xdp_diag_info))
                    continue;
                xdp_diag_info info;
                std::memcpy(&info, reinterpret_cast<const char *>(a) + NLA_HDRLEN, sizeof(info));
                if (info.ifindex == ifindex) ++count;
            }
        }
    }
}

// Takes the interface's lock: an fd holding an exclusive flock on the file
// that is (still) at `path`. A holder unlinks the file before it lets go,
// so a file unlinked between our open and our flock is not the lock any
// more: try again. A short wait covers owner()'s brief shared probe.
Result<int> take_lock(const std::string &path, const std::string &iface) {
    ::mkdir("/run/mrc", 0755);
    ::mkdir(kLockDir, 0755);
    for (int attempt = 0; attempt < 50; ++attempt) {
        Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
        if (fd.fd < 0)
            return Error{explain(fmt::format("creating the lock file {}", path), iface, errno)};
        if (::flock(fd.fd, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            const int pid = read_pid(fd.fd);
            if (err == EWOULDBLOCK && attempt < 20 && (pid <= 0 || ::kill(pid, 0) != 0)) {
                // Perhaps only someone's owner() probe: look again shortly.
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            return Error{in_use(iface, pid)};
        }
        struct stat held {
        }, named{};
        if (::fstat(fd.fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
            held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
            const std::string pid = std::to_string(::getpid()) + "\n";
            if (::ftruncate(fd.fd, 0) != 0 ||
                ::pwrite(fd.fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
                // Only informational (the pid in messages); the lock is what counts.
            }
            return fd.release();
        }
    }
    return Error{fmt::format("AF_XDP on '{}': cannot take the lock {}", iface, path)};
}

void drop_lock(int fd, const std::string &path) {
    ::unlink(path.c_str());  // while still holding it (see take_lock)
    ::close(fd);             // releases the lock
}

// Whether a program attached to `iface` may be removed as left over: no
// AF_XDP socket is bound to the interface. The lock says no MRC process
// of this /run holds it; the sockets say nobody at all uses it (a process
// with another /run, a container).
Result<void> unused(const AttachedProg &p, const std::string &iface) {
    const int n = xsk_sockets_on(p.ifindex);
    if (n > 0)
        return Error{fmt::format(
            "AF_XDP on '{}': the XDP program '{}' (id {}) has {} AF_XDP socket(s) bound to the "
            "interface, though no MRC process here holds its lock (another /run, a container?): "
            "not touched. Stop whatever uses it first",
            iface, p.name, p.id, n)};
    return {};  // none, or the kernel cannot tell (no sock_diag for AF_XDP): the lock decides
}

Result<void> check_kernel(const std::string &iface) {
    const int prog = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_XDP, nullptr);
    if (prog < 0) return Error{explain("probing for XDP", iface, -prog)};
    if (prog == 0)
        return Error{
            fmt::format("AF_XDP on '{}': this kernel cannot run XDP programs (needs "
                        "CONFIG_BPF_SYSCALL and XDP, Linux 5.4 or later)",
                        iface)};
    const int map = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_XSKMAP, nullptr);
    if (map < 0) return Error{explain("probing for AF_XDP maps", iface, -map)};
    Fd s(::socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0));
    if (map == 0 || s.fd < 0)
        return Error{explain("opening an AF_XDP socket", iface, map == 0 ? EAFNOSUPPORT : errno)};
    return {};
}

}  // namespace

// The value of `key` in "name,k=v,k=v", or nullopt.
std::optional<std::string> devarg(const std::string &devargs, const std::string &key) {
    size_t pos = devargs.find(',');
    while (pos != std::string::npos) {
        const size_t next = devargs.find(',', pos + 1);
        const std::string kv =
            devargs.substr(pos + 1, next == std::string::npos ? next : next - pos - 1);
        if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
        pos = next;
    }
    return std::nullopt;
}

std::optional<AfXdpArgs> af_xdp_args(const std::string &device, uint16_t queues,
                                     const std::string &prog_path) {
    AfXdpArgs a;
    if (device.rfind("af_xdp:", 0) == 0) {
        const std::string rest = device.substr(7);
        a.iface = rest.substr(0, rest.find(','));
        const std::string extra =
            rest.find(',') == std::string::npos ? std::string() : rest.substr(rest.find(','));
        a.devargs = fmt::format("net_af_xdp_{},iface={}", a.iface, a.iface);
        if (!devarg(a.devargs + extra, "start_queue")) a.devargs += ",start_queue=0";
        if (!devarg(a.devargs + extra, "queue_count"))
            a.devargs += fmt::format(",queue_count={}", queues);
        a.devargs += extra;
    } else if (device.rfind("net_af_xdp", 0) == 0) {
        a.devargs = device;
        a.iface = devarg(device, "iface").value_or("");
    } else {
        return std::nullopt;
    }
    if (!devarg(a.devargs, "xdp_prog")) {
        a.devargs += ",xdp_prog=" + prog_path;
        a.own_program = true;
    }
    return a;
}

const char *to_string(AttachMode m) {
    switch (m) {
        case AttachMode::kNone:
            return "none";
        case AttachMode::kNative:
            return "native";
        case AttachMode::kGeneric:
            return "generic";
        case AttachMode::kOffload:
            return "offload";
        case AttachMode::kMulti:
            return "multi";
    }
    return "?";
}

bool AttachedProg::ours() const {
    return id != 0 && name == MRC_STEER_PROG_NAME && has_our_maps;
}

Result<std::string> program_path() {
    std::vector<std::string> tried;
    if (const char *env = std::getenv("MRC_XDP_PROG"); env && *env) {
        if (::access(env, R_OK) == 0) return std::string(env);
        return Error{fmt::format("MRC_XDP_PROG={}: {}", env, errstr(errno))};
    }
#ifdef MRC_XDP_BUILD_PATH
    tried.push_back(MRC_XDP_BUILD_PATH);
#endif
#ifdef MRC_XDP_INSTALL_PATH
    tried.push_back(MRC_XDP_INSTALL_PATH);
#endif
    std::string list;
    for (const auto &p : tried) {
        if (::access(p.c_str(), R_OK) == 0) return p;
        list += (list.empty() ? "" : ", ") + p;
    }
    return Error{fmt::format(
        "the XDP steering program mrc_steer.bpf.o is not built (looked at: {}): build with "
        "clang and libbpf-dev installed (scripts/install-deps.sh), or set MRC_XDP_PROG",
        list.empty() ? "nowhere: this build has no BPF compiler" : list)};
}

std::string explain(const std::string &what, const std::string &iface, int err) {
    err = err < 0 ? -err : err;
    switch (err) {
        case ENODEV:
        case ENXIO:
            return fmt::format(
                "AF_XDP: no network interface '{}' in this network namespace "
                "(see `ip link`)",
                iface);
        case EPERM:
        case EACCES:
            return fmt::format(
                "AF_XDP on '{}': {}: permission denied: run as root, or grant "
                "CAP_NET_ADMIN, CAP_NET_RAW and CAP_SYS_ADMIN (and raise RLIMIT_MEMLOCK "
                "before Linux 5.11)",
                iface, what);
        case ENOSYS:
            return fmt::format(
                "AF_XDP on '{}': {}: this kernel has no BPF system call "
                "(CONFIG_BPF_SYSCALL is off)",
                iface, what);
        case EAFNOSUPPORT:
            return fmt::format(
                "AF_XDP on '{}': {}: this kernel has no AF_XDP sockets "
                "(CONFIG_XDP_SOCKETS is off)",
                iface, what);
        case EOPNOTSUPP:
            return fmt::format(
                "AF_XDP on '{}': {}: the interface's driver supports neither "
                "native nor generic XDP",
                iface, what);
        case EBUSY:
        case EEXIST:
            return fmt::format(
                "AF_XDP on '{}': {}: another XDP program is attached to the "
                "interface (see `ip link show dev {}`)",
                iface, what, iface);
        default:
            return fmt::format("AF_XDP on '{}': {}: {}", iface, what, errstr(err));
    }
}

Result<AttachedProg> query(const std::string &iface) {
    AttachedProg p;
    if (iface.empty() || iface.size() >= IF_NAMESIZE)
        return Error{fmt::format("AF_XDP: '{}' is not an interface name", iface)};
    p.ifindex = ::if_nametoindex(iface.c_str());
    if (p.ifindex == 0) return Error{explain("looking up the interface", iface, ENODEV)};
    bpf_xdp_query_opts q{};
    q.sz = sizeof(q);
    if (int rc = bpf_xdp_query(static_cast<int>(p.ifindex), 0, &q); rc != 0)
        return Error{explain("querying its XDP program", iface, rc)};
    switch (q.attach_mode) {
        case XDP_ATTACHED_NONE:
            return p;
        case XDP_ATTACHED_DRV:
            p.mode = AttachMode::kNative;
            p.id = q.drv_prog_id ? q.drv_prog_id : q.prog_id;
            break;
        case XDP_ATTACHED_SKB:
            p.mode = AttachMode::kGeneric;
            p.id = q.skb_prog_id ? q.skb_prog_id : q.prog_id;
            break;
        case XDP_ATTACHED_HW:
            p.mode = AttachMode::kOffload;
            p.id = q.hw_prog_id ? q.hw_prog_id : q.prog_id;
            break;
        default:
            p.mode = AttachMode::kMulti;
            p.id = q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
            p.name = "(several programs)";
            return p;
    }
    Fd fd(bpf_prog_get_fd_by_id(p.id));
    if (fd.fd < 0 && (errno == EPERM || errno == EACCES))
        return Error{
            explain(fmt::format("looking at its XDP program (id {})", p.id), iface, errno)};
    if (fd.fd < 0) return p;  // detached meanwhile
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.fd, &info, &len) == 0) p.name = info.name;
    if (auto maps = prog_maps(fd.fd)) {
        p.has_our_maps = maps->cfg >= 0 && maps->stats >= 0 && maps->xsks;
        close_maps(*maps);
    }
    return p;
}

Owner owner(const std::string &iface) {
    Owner o;
    Fd fd(::open(lock_path(iface).c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.fd < 0) return o;
    o.pid = read_pid(fd.fd);
    if (::flock(fd.fd, LOCK_SH | LOCK_NB) != 0) {
        o.alive = errno == EWOULDBLOCK;
    } else {
        ::flock(fd.fd, LOCK_UN);
    }
    return o;
}

namespace {

SteerStats sum_stats(int stats_fd) {
    SteerStats s;
    const int ncpu = libbpf_num_possible_cpus();
    if (stats_fd < 0 || ncpu <= 0) return s;
    std::vector<uint64_t> vals(static_cast<size_t>(ncpu));
    uint64_t *out[] = {&s.redirected, &s.no_socket, &s.addr_miss, &s.passed};
    for (uint32_t slot = 0; slot < MRC_STEER_NSTATS; ++slot) {
        if (bpf_map_lookup_elem(stats_fd, &slot, vals.data()) != 0) continue;
        for (uint64_t v : vals)
            *out[slot] += v;
    }
    return s;
}

}  // namespace

Result<Preflight> check(const std::string &iface) {
    Preflight pf;
    auto q = query(iface);
    if (!q) return q.error();
    if (auto r = check_privileges(iface); !r) return r.error();
    if (auto r = check_kernel(iface); !r) return r.error();
    pf.attached = *q;
    pf.owner = owner(iface);
    if (pf.owner.alive) return Error{in_use(iface, pf.owner.pid)};
    if (q->id != 0 && !q->ours()) return Error{foreign_program(iface, *q)};
    if (q->ours())
        if (auto r = unused(*q, iface); !r) return r.error();
    pf.stale = q->ours();
    return pf;
}

Result<AttachedProg> detach_program(const std::string &iface, bool force) {
    auto q = query(iface);
    if (!q) return q.error();
    if (q->id == 0) return *q;
    if (!q->ours() && !force)
        return Error{
            fmt::format("'{}' holds '{}' (id {}), which is not MRC's steering program: "
                        "not removed (--force removes it)",
                        iface, q->name, q->id)};
    // Holding the lock while detaching: no MRC process starts meanwhile,
    // and one that runs refuses us (whatever program it uses).
    const std::string path = lock_path(iface);
    auto lock = take_lock(path, iface);
    if (!lock) return lock.error();
    auto now = query(iface);  // again, under the lock
    Result<void> ok = now ? Result<void>() : Result<void>(now.error());
    if (ok && now->id != q->id)
        ok = Error{fmt::format("'{}': the program changed meanwhile", iface)};
    if (ok && !force) ok = unused(*now, iface);
    if (ok)
        if (int rc = detach(*now); rc != 0)
            ok = Error{explain(fmt::format("detaching program {}", now->id), iface, rc)};
    drop_lock(*lock, path);
    if (!ok) return ok.error();
    return *now;
}

int rx_queues(const std::string &iface) {
    Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return 1;
    ethtool_channels ch{};
    ch.cmd = ETHTOOL_GCHANNELS;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, iface.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char *>(&ch);
    if (::ioctl(s.fd, SIOCETHTOOL, &ifr) != 0) return 1;
    const uint32_t n = ch.combined_count + ch.rx_count;
    return n == 0 ? 1 : static_cast<int>(n);
}

Result<SteerStats> read_stats(const AttachedProg &p) {
    if (!p.ours()) return Error{"not MRC's steering program"};
    Fd prog(bpf_prog_get_fd_by_id(p.id));
    if (prog.fd < 0) return Error{fmt::format("program {}: {}", p.id, errstr(errno))};
    auto maps = prog_maps(prog.fd);
    if (!maps) return maps.error();
    const SteerStats s = sum_stats(maps->stats);
    close_maps(*maps);
    return s;
}

Result<std::unique_ptr<Steering>> Steering::acquire(const Options &opts) {
    const std::string &iface = opts.iface;
    auto first = query(iface);  // the interface exists (error otherwise)
    if (!first) return first.error();
    if (auto r = check_privileges(iface); !r) return r.error();
    if (auto r = check_kernel(iface); !r) return r.error();

    std::unique_ptr<Steering> s(new Steering());
    s->iface_ = iface;
    s->ifindex_ = first->ifindex;
    s->lock_path_ = lock_path(iface);
    auto lock = take_lock(s->lock_path_, iface);
    if (!lock) return lock.error();
    s->lock_fd_ = *lock;

    // With the lock held, an MRC program still attached was left by a
    // process that died, unless sockets are bound to the interface.
    auto now = query(iface);
    if (!now) return now.error();
    if (now->id != 0) {
        if (!now->ours()) return Error{foreign_program(iface, *now)};
        if (auto r = unused(*now, iface); !r) return r.error();
        if (int rc = detach(*now); rc != 0)
            return Error{
                explain(fmt::format("removing the MRC steering program (id {}) a previous run left",
                                    now->id),
                        iface, rc)};
        if (opts.log)
            opts.log(
                fmt::format("AF_XDP on '{}': removed the MRC steering program (id {}, {} "
                            "mode) left attached by a process that exited without "
                            "detaching it",
                            iface, now->id, to_string(now->mode)));
    }
    return s;
}

Result<AttachedProg> Steering::configure(const SteerConfig &cfg) {
    auto now = query(iface_);
    if (!now) return now.error();
    if (now->id == 0)
        return Error{
            fmt::format("AF_XDP on '{}': no XDP program attached after the port started "
                        "(the PMD did not load the steering program)",
                        iface_)};
    if (!now->ours())
        return Error{
            fmt::format("AF_XDP on '{}': the attached XDP program '{}' (id {}) is not "
                        "MRC's steering program",
                        iface_, now->name, now->id)};
    if (cfg.ipv4.size() > MRC_STEER_MAX_ADDRS || cfg.ipv6.size() > MRC_STEER_MAX_ADDRS)
        return Error{fmt::format("AF_XDP on '{}': at most {} local addresses per family", iface_,
                                 MRC_STEER_MAX_ADDRS)};
    Fd prog(bpf_prog_get_fd_by_id(now->id));
    if (prog.fd < 0) return Error{explain("opening the steering program", iface_, errno)};
    auto maps = prog_maps(prog.fd);
    if (!maps) return maps.error();
    if (cfg_fd_ >= 0) ::close(cfg_fd_);
    if (stats_fd_ >= 0) ::close(stats_fd_);
    cfg_fd_ = maps->cfg;
    stats_fd_ = maps->stats;

    mrc_steer_cfg v{};
    v.udp_port = htons(cfg.udp_port);
    v.n_ipv4 = static_cast<uint8_t>(cfg.ipv4.size());
    for (size_t i = 0; i < cfg.ipv4.size(); ++i)
        v.ipv4[i] = htonl(cfg.ipv4[i]);
    v.n_ipv6 = static_cast<uint8_t>(cfg.ipv6.size());
    for (size_t i = 0; i < cfg.ipv6.size(); ++i)
        std::memcpy(v.ipv6[i], cfg.ipv6[i].data(), 16);
    const uint32_t key = 0;
    if (bpf_map_update_elem(cfg_fd_, &key, &v, BPF_ANY) != 0)
        return Error{explain("writing the steering configuration", iface_, errno)};
    attached_ = *now;
    return *now;
}

SteerStats Steering::stats() const {
    return sum_stats(stats_fd_);
}

Steering::~Steering() {
    if (cfg_fd_ >= 0) ::close(cfg_fd_);
    if (stats_fd_ >= 0) ::close(stats_fd_);
    // The PMD detaches the program when the port closes; if it is still
    // there (the port failed half-way, or a PMD that does not), it is ours
    // to remove: we hold the interface's lock.
    if (lock_fd_ >= 0) {
        if (auto now = query(iface_); now && now->ours()) detach(*now);
        drop_lock(lock_fd_, lock_path_);
    }
}

}  // namespace mrc::xdp
