#include "xdp/steer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <linux/capability.h>
#include <linux/if_link.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/file.h>
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
    if (!has_cap(CAP_BPF) && !has_cap(CAP_SYS_ADMIN)) missing += ", CAP_BPF";
    if (missing.empty()) return {};
    if (missing[0] == ',') missing = missing.substr(2);
    return Error{fmt::format(
        "AF_XDP on '{}': no permission to load XDP programs and open AF_XDP sockets: run as "
        "root, or grant {} (for a service: AmbientCapabilities=)",
        iface, missing)};
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

}  // namespace

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
                "CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (and raise RLIMIT_MEMLOCK "
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
    if (fd.fd < 0) return p;  // detached meanwhile, or no permission to look
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
    pf.stale = q->ours();
    return pf;
}

Result<AttachedProg> detach_program(const std::string &iface, bool force) {
    auto q = query(iface);
    if (!q) return q.error();
    if (q->id == 0) return *q;
    const Owner o = owner(iface);
    if (o.alive && q->ours()) return Error{in_use(iface, o.pid)};
    if (!q->ours() && !force)
        return Error{
            fmt::format("'{}' holds '{}' (id {}), which is not MRC's steering program: "
                        "not removed (--force removes it)",
                        iface, q->name, q->id)};
    if (int rc = detach(*q); rc != 0)
        return Error{explain(fmt::format("detaching program {}", q->id), iface, rc)};
    return *q;
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
    ::mkdir("/run/mrc", 0755);
    ::mkdir(kLockDir, 0755);
    s->lock_path_ = lock_path(iface);
    // The lock file is removed by its holder on release; a file unlinked
    // between our open and our flock is not the lock any more: try again.
    for (int attempt = 0;; ++attempt) {
        s->lock_fd_ = ::open(s->lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (s->lock_fd_ < 0)
            return Error{
                explain(fmt::format("creating the lock file {}", s->lock_path_), iface, errno)};
        if (::flock(s->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
            const int pid = read_pid(s->lock_fd_);
            ::close(s->lock_fd_);
            s->lock_fd_ = -1;
            return Error{in_use(iface, pid)};
        }
        struct stat held {
        }, named{};
        if (::fstat(s->lock_fd_, &held) == 0 && ::stat(s->lock_path_.c_str(), &named) == 0 &&
            held.st_ino == named.st_ino && held.st_dev == named.st_dev)
            break;
        ::close(s->lock_fd_);
        s->lock_fd_ = -1;
        if (attempt == 10)
            return Error{
                fmt::format("AF_XDP on '{}': cannot take the lock {}", iface, s->lock_path_)};
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(s->lock_fd_, 0) != 0 ||
        ::pwrite(s->lock_fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
        // Only informational (the pid in error messages); the lock is what counts.
    }

    // With the lock held, whatever MRC program is attached was left by a
    // process that died: nobody else can be using it.
    auto now = query(iface);
    if (!now) return now.error();
    if (now->id != 0) {
        if (!now->ours()) return Error{foreign_program(iface, *now)};
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
        ::unlink(lock_path_.c_str());  // while still holding it (see acquire())
        ::close(lock_fd_);             // releases the lock
    }
}

}  // namespace mrc::xdp
