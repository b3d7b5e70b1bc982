// The harness of the mrcd tests (mrcd_test.cc, mrcd_isolation_test.cc):
// two daemons joined by memif pairs (or through mrc-fabric), EAL under
// --no-huge; the applications the tests start; libmrc ends in this
// process; and a raw client that speaks the socket protocol itself, for
// hostile input.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/ipc.h"
#include "client/sock.h"
#include "mrc/mrc.h"
#include "support/subprocess.h"

namespace mrc::test {

// A program of the build's app/ folder (MRC_APP_DIR).
std::string app(const std::string &name);

// Two daemons, A (plane addresses 10.0.p.1) and B (10.0.p.2).
struct Daemons {
    std::string dir;
    std::string tag;
    uint32_t planes = 2;
    // Worker lcores per daemon (1 or 2; a second worker shares a CPU with
    // the first worker of the other daemon: the machine has two).
    uint32_t workers = 1;
    // Lines added to both daemons' [daemon] and [dataplane] tables (limits).
    std::string daemon_toml;
    std::string dataplane_toml;
    std::string plane_toml;  // appended to every [[plane]] table
    std::optional<Subprocess> a, b, fabric;
    std::string prefix_a;  // EAL file prefix of daemon A (telemetry)
    std::string sock(char which) const { return dir + "/" + which + ".sock"; }
    std::string ip(char which, uint32_t plane = 0) const {
        return "10.0." + std::to_string(plane) + "." + (which == 'a' ? "1" : "2");
    }
};

// Starts both daemons; `via_fabric`: both are memif clients of mrc-fabric
// (started with fabric_args), else A serves the memif pairs to B.
// `extra_toml` is appended to both configs (whole tables).
void start(Daemons &d, const std::string &extra_toml = "", bool via_fabric = false,
           const std::vector<std::string> &fabric_args = {});
// Starts (or starts again) both daemons of `d`.
void launch(Daemons &d, bool via_fabric = false);
// Stops what `d` started and removes its files and EAL runtime directories.
void finish(Daemons &d);

// A program run to its end (or killed at the limit: rc -1, "hung" in the log).
struct Done {
    int rc = -1;
    std::string log;
};
Done run(const std::vector<std::string> &argv, const std::string &log,
         std::chrono::milliseconds limit = std::chrono::seconds(120));

// mrcctl --json on daemon `w`; *rc gets its exit status.
nlohmann::json ctl(const Daemons &d, char w, const std::vector<std::string> &args,
                   int *rc = nullptr);
// Waits until a QP on daemon A (of `service`, or any) has sent data.
void wait_moving(const Daemons &d, int service = -1);

// A WRITE of slot `i` (slot_bytes each) of `src` to the same slot of `remote`.
mrc_wr slot_write(const mrc_mr *src, const mrc_remote_mr &remote, uint32_t slot_bytes, uint32_t i,
                  uint64_t wr_id);

// A perftest pair: server on B, client on A (args added to both), on a
// free TCP port for their side channel.
std::pair<std::optional<Subprocess>, std::optional<Subprocess>> start_tool(
    const Daemons &d, const std::string &tool, const std::string &tag,
    const std::vector<std::string> &args, const std::vector<std::string> &client_args);

// bulk_copy receiver on B, sender on A.
struct Copy {
    std::optional<Subprocess> rx, tx;
};
Copy start_copy(const Daemons &d, uint32_t service, uint64_t bytes, const std::string &name);

// libmrc in this process, on both daemons.
struct Ends {
    mrc_context *a = nullptr, *b = nullptr;
    mrc_mr *src = nullptr, *dst = nullptr;
    mrc_cq *cqa = nullptr, *cqb = nullptr;
    mrc_qp *qa = nullptr, *qb = nullptr;
    mrc_remote_mr remote{};
};
// A QP from A to a listener of `service` on B, a 1 MiB source region on A
// and a 1 MiB region on B it may write into.
void connect_ends(const Daemons &d, Ends &e, uint32_t service, uint32_t sq_depth = 16);
// Completions of `cq` until `want` came or `limit` passed.
std::vector<mrc_wc> poll_until(mrc_cq *cq, size_t want, std::chrono::milliseconds limit);

// ---- the socket protocol spoken badly ----

struct Raw {
    int fd = -1;
    uint32_t seq = 0;
    explicit Raw(const std::string &path) {
        fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, path.data(), path.size());
        if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
            ::close(fd);
            fd = -1;
        }
    }
    ~Raw() {
        if (fd >= 0) ::close(fd);
    }
    // Sends raw bytes; returns the reply header (status -100: no reply / closed).
    ipc::RepHdr send_raw(const void *msg, size_t len, int fd_out = -1,
                         std::vector<uint8_t> *body = nullptr, int *fd_in = nullptr) {
        ipc::RepHdr h{};
        h.status = -100;
        if (ipc::send_msg(fd, msg, len, fd_out) != 0) return h;
        std::vector<uint8_t> in(ipc::kMaxMessageBytes);
        int got = -1;
        const ssize_t n = ipc::recv_msg(fd, in.data(), in.size(), &got);
        if (n < ssize_t(sizeof h)) return h;
        std::memcpy(&h, in.data(), sizeof h);
        if (body) body->assign(in.begin() + sizeof h, in.begin() + n);
        if (fd_in)
            *fd_in = got;
        else if (got >= 0)
            ::close(got);
        return h;
    }
    template <typename T>
    ipc::RepHdr req(ipc::Op op, const T &body, int fd_out = -1, std::vector<uint8_t> *rep = nullptr,
                    int *fd_in = nullptr, uint16_t version = ipc::kVersion) {
        std::vector<uint8_t> m(sizeof(ipc::ReqHdr) + sizeof(T));
        ipc::ReqHdr h{ipc::kMagic, version, uint16_t(op), ++seq, uint32_t(sizeof(T))};
        std::memcpy(m.data(), &h, sizeof h);
        std::memcpy(m.data() + sizeof h, &body, sizeof(T));
        return send_raw(m.data(), m.size(), fd_out, rep, fd_in);
    }
    ipc::RepHdr hello() {
        ipc::HelloReq h{};
        h.api_version = MRC_API_VERSION;
        std::strcpy(h.name, "hostile");
        return req(ipc::Op::kHello, h);
    }
    // The daemon closes the connection (soon after its reply).
    bool closed() {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1) return false;
        char c;
        return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
    }
};

}  // namespace mrc::test
