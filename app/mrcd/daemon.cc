// mrcd's lifecycle: creation, the socket, clients coming and going, the
// server thread's loop, and the shutdown drain. DPDK telemetry's
// /mrcd/status is published from here.
#include "daemon.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <rte_errno.h>
#include <rte_ring.h>
#include <rte_telemetry.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "client/sock.h"
#include "common/sleep.h"
#include "mrc/mrc.h"
#include "records.h"
#include "support.h"

namespace mrc::mrcd {

namespace {

constexpr uint32_t kCmInCap = 1024;

// What DPDK telemetry's /mrcd/status shows: a copy the server thread
// refreshes, read by the telemetry thread under the lock.
struct TelemetryView {
    std::mutex mu;
    bool live = false;
    DaemonCounters c;
    uint64_t clients = 0, qps = 0, listeners = 0, regions = 0;
};
TelemetryView g_tel;

int tel_status(const char *, const char *, rte_tel_data *d) {
    std::lock_guard<std::mutex> g(g_tel.mu);
    rte_tel_data_start_dict(d);
    if (!g_tel.live) {
        rte_tel_data_add_dict_string(d, "error", "mrcd is not serving");
        return 0;
    }
    rte_tel_data_add_dict_u64(d, "clients", g_tel.clients);
    rte_tel_data_add_dict_u64(d, "qps", g_tel.qps);
    rte_tel_data_add_dict_u64(d, "listeners", g_tel.listeners);
    rte_tel_data_add_dict_u64(d, "regions", g_tel.regions);
    const uint64_t *values = counter_array(g_tel.c);
    for (size_t i = 0; i < DaemonCounters::kCount; ++i)
        rte_tel_data_add_dict_u64(d, kDaemonCounterInfo[i].name, values[i]);
    return 0;
}

}  // namespace

Daemon::Daemon(const DaemonConfig &cfg, dp::Dataplane *dp)
    : cfg_(cfg), dp_(dp), rng_(std::random_device{}()) {}

Daemon::~Daemon() {
    for (auto &[id, c] : clients_)
        if (c->fd >= 0) ::close(c->fd);
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
        ::unlink(socket_path_.c_str());
    }
    for (auto &a : agents_)
        dp_->worker(uint32_t(&a - &agents_[0])).set_app(nullptr);
    if (cm_in_.wake_fd >= 0) ::close(cm_in_.wake_fd);
    if (cm_in_.ring != nullptr) {
        void *m;
        while (rte_ring_sc_dequeue(cm_in_.ring, &m) == 0)
            delete static_cast<CmFrame *>(m);
        rte_ring_free(cm_in_.ring);
    }
}

Result<std::unique_ptr<Daemon>> Daemon::create(const DaemonConfig &cfg, dp::Dataplane *dp) {
    std::unique_ptr<Daemon> d(new Daemon(cfg, dp));
    if (cfg.plane_ip.size() != dp->planes())
        return Error{fmt::format("the config gives {} [[plane]] addresses for {} ports",
                                 cfg.plane_ip.size(), dp->planes())};
    if (cfg.plane_route.size() != cfg.plane_ip.size())
        return Error{"the config's [[plane]] routes and addresses do not match"};
    d->neigh_.resize(dp->planes());
    // AF_XDP planes: the kernel's routes and neighbours, not the config's.
    d->kernel_ifindex_.assign(dp->planes(), 0);
    for (uint8_t p = 0; p < dp->planes(); ++p) {
        if (!dp->port(p).af_xdp()) continue;
        const auto x = dp->port(p).xdp_info();
        if (cfg.plane_route[p].gateway)
            return Error{fmt::format(
                "plane {}: an AF_XDP port follows the kernel's routes: give the gateway to "
                "the kernel (ip route add PEERS via {} dev {}), not in [[plane]]",
                p, wire::ipv4_string(cfg.plane_route[p].gateway), x ? x->iface : "IFACE")};
        if (!x) continue;  // the user's own XDP program: no steering of ours, no routes
        d->kernel_ifindex_[p] = kernel::ifindex(x->iface);
        if (!d->nl_) {
            auto nl = kernel::Netlink::open();
            if (!nl) return Error{"plane " + std::to_string(p) + ": " + nl.error().message};
            d->nl_ = std::move(*nl);
        }
    }
    for (auto &t : d->neigh_)
        for (const Neighbor &n : cfg.neighbors)
            t.set_static(n.ip, n.mac);
    d->cm_in_.ring = rte_ring_create("mrcd_cm_in", kCmInCap, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if (d->cm_in_.ring == nullptr)
        return Error{fmt::format("cannot create the CM ring: {}", rte_strerror(rte_errno))};
    d->cm_in_.wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (d->cm_in_.wake_fd < 0)
        return Error{fmt::format("eventfd for the CM ring: {}", std::strerror(errno))};
    for (uint32_t w = 0; w < dp->workers(); ++w) {
        d->agents_.push_back(
            std::make_unique<Agent>(&d->cm_in_, &dp->worker(w), dp->config().max_mrs));
        if (!d->agents_.back()->ok())
            return Error{fmt::format("cannot create worker {}'s command ring: {}", w,
                                     rte_strerror(rte_errno))};
        dp->worker(w).set_app(d->agents_.back().get());
    }
    d->mr_gen_.assign(dp->config().max_mrs, 0);
    for (uint32_t i = dp->config().max_mrs; i-- > 0;)
        d->mr_free_.push_back(i);
    if (auto r = d->open_socket(); !r) return r.error();
    static bool registered = false;
    if (!registered) {
        rte_telemetry_register_cmd("/mrcd/status", tel_status,
                                   "mrcd: clients, QPs, connection-management counters");
        registered = true;
    }
    return d;
}

Result<void> Daemon::open_socket() {
    socket_path_ = cfg_.socket;
    const size_t slash = socket_path_.rfind('/');
    if (slash != std::string::npos && slash > 0) {
        const std::string dir = socket_path_.substr(0, slash);
        if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
            return Error{fmt::format("cannot create {}: {}", dir, std::strerror(errno))};
    }
    // A socket file left by a daemon that died: take it over only if nobody answers on it.
    const int probe = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, socket_path_.data(), socket_path_.size());
    if (probe >= 0) {
        const bool live = ::connect(probe, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
        ::close(probe);
        if (live)
            return Error{fmt::format("another mrcd serves {} (stop it, or set [daemon] socket)",
                                     socket_path_)};
    }
    ::unlink(socket_path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd_ < 0) return Error{fmt::format("socket: {}", std::strerror(errno))};
    // Created with no permissions for anyone else, then opened up to the
    // configured mode: there is no moment at which it is wider.
    const mode_t old = ::umask(0177);
    const int br = ::bind(listen_fd_, reinterpret_cast<sockaddr *>(&a), sizeof a);
    const int be = errno;
    ::umask(old);
    if (br != 0) return Error{fmt::format("bind {}: {}", socket_path_, std::strerror(be))};
    if (!cfg_.socket_group.empty()) {
        const group *g = ::getgrnam(cfg_.socket_group.c_str());
        if (g == nullptr)
            return Error{fmt::format("[daemon] socket_group: no group '{}'", cfg_.socket_group)};
        if (::chown(socket_path_.c_str(), uid_t(-1), g->gr_gid) != 0)
            return Error{fmt::format("chown {}: {}", socket_path_, std::strerror(errno))};
    }
    if (::chmod(socket_path_.c_str(), cfg_.socket_mode) != 0)
        return Error{fmt::format("chmod {}: {}", socket_path_, std::strerror(errno))};
    if (::listen(listen_fd_, 64) != 0)
        return Error{fmt::format("listen: {}", std::strerror(errno))};
    return {};
}

void Daemon::send_and_wait(uint32_t worker, Command &cmd) {
    cmd.done.store(false, std::memory_order_relaxed);
    rte_ring *r = agents_[worker]->commands();
    while (rte_ring_sp_enqueue(r, &cmd) != 0)
        std::this_thread::yield();
    dp_->worker(worker).wake();
    uint64_t spins = 0;
    while (!cmd.done.load(std::memory_order_acquire)) {
        if (++spins < 1000)
            std::this_thread::yield();
        else
            mrc::sleep_for_steady(std::chrono::microseconds(20));
    }
}

// ---- clients in and out -----------------------------------------------------

void Daemon::accept_clients() {
    for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        ucred cred{};
        socklen_t len = sizeof cred;
        if (draining_ || clients_.size() >= cfg_.max_clients ||
            ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            ++ctr_.clients_refused;
            ipc::RepHdr h{};
            h.magic = ipc::kMagic;
            h.version = ipc::kVersion;
            h.status = draining_ ? MRC_EDAEMON : MRC_ENOMEM;
            std::snprintf(
                h.message, sizeof h.message, "%s",
                draining_
                    ? "mrcd is shutting down"
                    : fmt::format("mrcd serves at most {} applications", cfg_.max_clients).c_str());
            ipc::send_msg(fd, &h, sizeof h);
            ::close(fd);
            continue;
        }
        auto c = std::make_unique<Client>();
        c->id = next_client_++;
        c->fd = fd;
        c->pid = cred.pid;
        c->uid = cred.uid;
        ++ctr_.clients_accepted;
        clients_.emplace(c->id, std::move(c));
    }
}

void Daemon::release(Client &c) {
    if (c.fd < 0) return;
    log(RTE_LOG_INFO, "client {} ({} pid {}) gone: releasing {} QPs, {} CQs, {} regions", c.id,
        c.name, c.pid, c.qps.size(), c.cqs.size(), c.mrs.size());
    // QPs first (nothing posts from or lands in the regions after), then
    // CQs, then regions; the peers of connected QPs are told.
    while (!c.qps.empty())
        destroy_qp(c, c.qps.back(), true);
    for (uint32_t svc : c.listens)
        listeners_.erase(svc);
    for (auto &[id, cq] : c.cqs) {
        run_on(cq.worker, cmd::DelCq{.cq_id = id});
        ::munmap(cq.ring, cq.map_bytes);
    }
    for (auto &[key, mr] : c.mrs) {
        dereg_everywhere(key, uint32_t(agents_.size()), true);
        ::munmap(mr.base, mr.map_bytes);
        mr_free_.push_back(key >> 8);
    }
    for (auto it = pds_.begin(); it != pds_.end();)
        it = it->first.first == c.id ? pds_.erase(it) : std::next(it);
    ::close(c.fd);
    c.fd = -1;
    ++ctr_.clients_released;
}

// ---- the server thread's loop -----------------------------------------------

void Daemon::run(const std::atomic<bool> &stop) {
    started_ns_ = mono_ns();
    log(RTE_LOG_INFO, "serving on {} ({} planes, {} workers)", socket_path_, dp_->planes(),
        dp_->workers());
    // Each plane's gateway is asked for now, before a connection needs it.
    for (uint8_t p = 0; p < dp_->planes(); ++p) {
        const uint32_t gw = cfg_.plane_route[p].gateway;
        if (gw == 0 || !resolves(p)) continue;
        if (neigh_[p].resolve(gw, started_ns_).send_request) send_arp_request(p, gw);
    }
    uint64_t drain_deadline = 0, next_check = 0;
    std::vector<pollfd> fds;
    std::vector<uint32_t> ids;
    for (;;) {
        const uint64_t now = mono_ns();
        if (stop.load() && !draining_) {
            begin_drain();
            drain_deadline = now + uint64_t(cfg_.drain_ms) * 1'000'000;
        }
        if (draining_ && now >= next_check) {
            next_check = now + 10'000'000;
            if (now >= drain_deadline || outstanding() == 0) break;
        }
        serve_clients(fds, ids);
        poll_cm();
        timeouts();
        publish_telemetry();
    }
    {
        std::lock_guard<std::mutex> g(g_tel.mu);
        g_tel.live = false;
    }
    // What did not finish fails with DAEMON_SHUTDOWN; give the workers a
    // moment to write those completions, then close every client.
    shutdown_qps();
    const uint64_t until = mono_ns() + 500'000'000;
    while (mono_ns() < until && outstanding() != 0)
        mrc::sleep_for_steady(std::chrono::milliseconds(5));
    close_clients();
    log(RTE_LOG_INFO, "stopped");
}

// Stop taking work: connects and accepts in progress fail now; in-flight
// work requests get until the drain deadline.
void Daemon::begin_drain() {
    draining_ = true;
    log(RTE_LOG_INFO, "stopping: letting in-flight work finish (up to {} ms)", cfg_.drain_ms);
    for (auto &[id, c] : clients_) {
        if (c->fd >= 0 && c->waiting) {
            const auto op =
                c->waiting->kind == Pending::kConnect ? ipc::Op::kConnect : ipc::Op::kAccept;
            reply(*c, uint16_t(op), c->waiting->seq, MRC_EDAEMON, "mrcd is shutting down");
            c->waiting.reset();
        }
    }
    connecting_.clear();
}

// Waits up to 1 ms for the socket, takes new clients and their requests,
// then forgets the clients released meanwhile.
void Daemon::serve_clients(std::vector<pollfd> &fds, std::vector<uint32_t> &ids) {
    fds.clear();
    ids.clear();
    fds.push_back({listen_fd_, POLLIN, 0});
    fds.push_back({cm_in_.wake_fd, POLLIN, 0});  // a CM frame came in
    bool waiting = false;
    for (auto &[id, c] : clients_) {
        fds.push_back({c->fd, POLLIN, 0});
        ids.push_back(id);
        waiting = waiting || c->waiting;
    }
    // Timeouts to run (connects, accepts, a drain) every millisecond; with
    // none, the thread wakes only for its descriptors or every 10 ms (a
    // stop request): an idle daemon's server thread costs next to nothing.
    const int timeout_ms = waiting || draining_ || !connecting_.empty() ? 1 : 10;
    const int r = ::poll(fds.data(), fds.size(), timeout_ms);
    if (r > 0) {
        if (fds[0].revents & POLLIN) accept_clients();
        if (fds[1].revents & POLLIN) {
            uint64_t n;
            [[maybe_unused]] const ssize_t k = ::read(cm_in_.wake_fd, &n, sizeof n);
        }
        for (size_t i = 2; i < fds.size(); ++i)
            if (fds[i].revents) on_client(*clients_.at(ids[i - 2]));
    }
    for (auto it = clients_.begin(); it != clients_.end();)
        it = it->second->fd < 0 ? clients_.erase(it) : std::next(it);
}

void Daemon::publish_telemetry() {
    std::lock_guard<std::mutex> g(g_tel.mu);
    g_tel.live = true;
    g_tel.c = ctr_;
    g_tel.clients = clients_.size();
    g_tel.qps = qps_.size();
    g_tel.listeners = listeners_.size();
    uint64_t regions = 0;
    for (const auto &[id, c] : clients_)
        regions += c->mrs.size();
    g_tel.regions = regions;
}

// ---- shutdown -----------------------------------------------------------------

uint64_t Daemon::outstanding() {
    uint64_t n = 0;
    for (uint32_t w = 0; w < agents_.size(); ++w) {
        cmd::CountOutstanding count;
        run_on(w, count);
        n += count.work;
    }
    return n;
}

void Daemon::shutdown_qps() {
    for (uint32_t w = 0; w < agents_.size(); ++w)
        run_on(w, cmd::Shutdown{});
}

void Daemon::close_clients() {
    for (auto &[id, c] : clients_) {
        for (auto &[cq_id, cq] : c->cqs)  // an application polling an empty CQ learns of it
            cq.ring->state.store(ipc::kRingShutdown, std::memory_order_release);
        if (c->fd >= 0) {
            ::close(c->fd);
            c->fd = -1;
        }
    }
}

}  // namespace mrc::mrcd
