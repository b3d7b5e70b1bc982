// libFuzzer target: mrcd's socket protocol (lib/client/ipc.h) as a hostile
// application speaks it. One daemon runs in this process for the whole
// fuzzing session (EAL under --no-huge, two net_null ports that receive
// nothing, its server loop on a thread); every input is one application:
// it connects to the daemon's socket, sends the input's messages one by one
// and reads each answer, then goes away (the daemon releases what it made).
//
// Input: one flags byte, then messages, each a 16-bit little-endian length
// and that many bytes. Flags help the fuzzer past the first checks:
//   bit 0  say a valid hello first;
//   bit 1  write a valid magic, version and body length into every header;
//   bit 2  take the op modulo the known ops (1..11);
//   bit 3  send a fresh 1 MiB memfd with each region registration.
// The daemon must answer every request it reads with a well-formed reply
// (or close the connection), and must never crash or leak (ASan).
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/ipc.h"
#include "client/sock.h"
#include "config.h"
#include "daemon.h"
#include "dpdk/dataplane.h"
#include "port/eal.h"

using namespace mrc;

namespace {

void check(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_ipc: %s\n", what);
        std::abort();
    }
}

struct World {
    std::string dir;
    std::string socket;
    std::unique_ptr<dp::Dataplane> dp;
    std::unique_ptr<mrcd::Daemon> daemon;
    std::atomic<bool> stop{false};
    std::thread server;
};
World *g_world = nullptr;

void stop_world() {
    World *w = g_world;
    if (w == nullptr) return;
    w->stop.store(true);
    if (w->server.joinable()) w->server.join();
    w->dp->stop();
    w->daemon.reset();
    w->dp.reset();
    std::system(("rm -rf " + w->dir).c_str());
    drivers::eal_abandon();
}

World &world() {
    if (g_world != nullptr) return *g_world;
    auto *w = new World;
    char tmpl[] = "/tmp/mrc-fuzz-ipc-XXXXXX";
    check(::mkdtemp(tmpl) != nullptr, "mkdtemp");
    w->dir = tmpl;
    w->socket = w->dir + "/mrcd.sock";
    const std::vector<std::string> eal = {"fuzz_ipc",
                                          "--no-huge",
                                          "-m",
                                          "512",
                                          "--no-pci",
                                          "--file-prefix",
                                          "mrc-fuzz-ipc-" + std::to_string(::getpid()),
                                          "--lcores",
                                          "0@0,1@1",
                                          "--vdev=net_null0,no-rx=1",
                                          "--vdev=net_null1,no-rx=1",
                                          "--log-level=*:error"};
    auto e = drivers::eal_init(eal);
    if (!e) std::fprintf(stderr, "fuzz_ipc: %s\n", e.error().message.c_str());
    check(e.ok(), "EAL");
    const std::string toml = "[daemon]\nsocket = \"" + w->socket +
                             "\"\ndrain_ms = 100\nmax_clients = 8\n"
                             "[dataplane]\nidle = \"sleep\"\nlink_wait_ms = 100\n"
                             "[[plane]]\nip = \"10.0.0.1\"\n[[plane]]\nip = \"10.0.1.1\"\n";
    auto cfg = mrcd::load_config("fuzz.toml", toml);
    check(cfg.ok(), "config");
    cfg->dp.ports = {"net_null0", "net_null1"};
    auto dp = dp::Dataplane::create(cfg->dp);
    if (!dp) std::fprintf(stderr, "fuzz_ipc: %s\n", dp.error().message.c_str());
    check(dp.ok(), "dataplane");
    w->dp = std::move(*dp);
    auto d = mrcd::Daemon::create(*cfg, w->dp.get());
    if (!d) std::fprintf(stderr, "fuzz_ipc: %s\n", d.error().message.c_str());
    check(d.ok(), "daemon");
    w->daemon = std::move(*d);
    check(w->dp->start().ok(), "dataplane start");
    w->server = std::thread([w] { w->daemon->run(w->stop); });
    g_world = w;
    std::atexit(stop_world);
    return *w;
}

int connect_to(const std::string &path) {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    check(fd >= 0, "socket");
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    for (int i = 0; i < 200; ++i) {
        if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0) return fd;
        ::usleep(5000);
    }
    check(false, "cannot connect to the daemon");
    return -1;
}

// Reads the answer to one request; false when the daemon closed the
// connection (or said nothing within the wait: a connect or accept that
// waits for a peer).
bool read_answer(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) != 1) return false;
    std::vector<uint8_t> buf(ipc::kMaxMessageBytes);
    int rfd = -1;
    const ssize_t n = ipc::recv_msg(fd, buf.data(), buf.size(), &rfd);
    if (rfd >= 0) ::close(rfd);
    if (n <= 0) return false;
    check(size_t(n) >= sizeof(ipc::RepHdr), "a reply shorter than its header");
    ipc::RepHdr h;
    std::memcpy(&h, buf.data(), sizeof h);
    check(h.magic == ipc::kMagic, "a reply without the magic");
    check(h.body_bytes == size_t(n) - sizeof h, "a reply whose body length is wrong");
    check(std::memchr(h.message, 0, sizeof h.message) != nullptr, "an unterminated message");
    return true;
}

void send_hello(int fd) {
    struct {
        ipc::ReqHdr h;
        ipc::HelloReq b;
    } m{};
    m.h = {ipc::kMagic, ipc::kVersion, uint16_t(ipc::Op::kHello), 1, sizeof m.b};
    m.b.api_version = ipc::kVersion;
    m.b.pid = uint32_t(::getpid());
    std::snprintf(m.b.name, sizeof m.b.name, "fuzz");
    check(ipc::send_msg(fd, &m, sizeof m) == 0, "send hello");
    read_answer(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    World &w = world();
    const uint8_t flags = data[0];
    const int fd = connect_to(w.socket);
    if (flags & 1) send_hello(fd);
    size_t at = 1;
    uint32_t seq = 2;
    while (at + 2 <= size) {
        const size_t want = size_t(data[at]) | size_t(data[at + 1]) << 8;
        at += 2;
        const size_t len = std::min(want, size - at);
        std::vector<uint8_t> msg(data + at, data + at + len);
        at += len;
        if (msg.empty()) continue;
        if (msg.size() >= sizeof(ipc::ReqHdr)) {
            ipc::ReqHdr h;
            std::memcpy(&h, msg.data(), sizeof h);
            if (flags & 2) {
                h.magic = ipc::kMagic;
                h.version = ipc::kVersion;
                h.body_bytes = uint32_t(msg.size() - sizeof h);
                h.seq = seq++;
            }
            if (flags & 4) h.op = uint16_t(1 + h.op % 11);
            std::memcpy(msg.data(), &h, sizeof h);
        }
        int mfd = -1;
        if ((flags & 8) && msg.size() >= sizeof(ipc::ReqHdr)) {
            ipc::ReqHdr h;
            std::memcpy(&h, msg.data(), sizeof h);
            if (h.op == uint16_t(ipc::Op::kRegMr)) {
                mfd = ::memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
                if (mfd >= 0 && ::ftruncate(mfd, 1 << 20) != 0) {
                    ::close(mfd);
                    mfd = -1;
                }
            }
        }
        const int rc = ipc::send_msg(fd, msg.data(), msg.size(), mfd);
        if (mfd >= 0) ::close(mfd);
        if (rc != 0 || !read_answer(fd)) break;
    }
    ::close(fd);
    return 0;
}
