// mrc_write_lat: RDMA WRITE latency through mrcd, in the manner of
// perftest's ib_write_lat: ping-pong of WRITE_WITH_IMM messages, one at a
// time. Reports the round trip and, as perftest does, half of it.
//
//   server: mrc_write_lat [flags]
//   client: mrc_write_lat [flags] SERVER_HOST
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "common.h"

using namespace mrc::perf;
using nlohmann::json;

namespace {

struct Side {
    mrc_mr *mr = nullptr;
    mrc_cq *cq = nullptr;
    mrc_qp *qp = nullptr;
};

Side setup(const Options &o, mrc_context *ctx) {
    Side s;
    if (int rc = mrc_alloc_mr(ctx, 2ull * o.size, MRC_ACCESS_REMOTE_WRITE, o.service, &s.mr); rc)
        die(ctx, "alloc_mr", rc);
    std::memset(mrc_mr_addr(s.mr), 0, 2ull * o.size);
    if (int rc = mrc_create_cq(ctx, 256, &s.cq); rc) die(ctx, "create_cq", rc);
    return s;
}

// Waits for the next WRITE_WITH_IMM to land; false on a QP error.
bool wait_recv(const Options &o, mrc_context *ctx, mrc_cq *cq, uint32_t *imm) {
    for (;;) {
        mrc_wc wc[8];
        const int n = mrc_poll_cq(cq, wc, 8);
        if (n < 0) die(ctx, "poll_cq", n);
        if (n == 0) idle(o);
        bool got = false;
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != MRC_WC_SUCCESS) {
                std::fprintf(stderr, "mrc_write_lat: QP %u: %s\n", wc[i].qp_num,
                             mrc_wc_status_str(wc[i].status));
                return false;
            }
            if (wc[i].opcode == MRC_WC_RECV_WRITE_IMM) {
                *imm = wc[i].imm;
                got = true;
            }
        }
        if (got) return true;
    }
}

void post(mrc_context *ctx, const Options &o, Side &s, uint64_t raddr, uint32_t rkey,
          uint32_t imm) {
    mrc_wr wr{};
    wr.wr_id = imm;
    wr.opcode = MRC_WR_WRITE_WITH_IMM;
    wr.imm = imm;
    wr.local = s.mr;
    wr.local_offset = 0;
    wr.length = o.size;
    wr.rkey = rkey;
    wr.remote_addr = raddr + o.size;  // the peer's second half
    int rc;
    while ((rc = mrc_post_write(s.qp, &wr)) == MRC_EAGAIN) {
        mrc_wc wc[8];
        if (mrc_poll_cq(s.cq, wc, 8) == 0) idle(o);  // send completions make room
    }
    if (rc) die(ctx, "post_write", rc);
}

void print(const json &r) {
    fmt::print(
        "---------------------------------------------------------------------------------------"
        "\n");
    fmt::print("                    RDMA_Write Latency Test (MRC, through mrcd)\n");
    fmt::print(
        "---------------------------------------------------------------------------------------"
        "\n");
    fmt::print(
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_99[usec]  "
        "t_99.9[usec]\n");
    const json &h = r["half_rtt_us"];
    fmt::print(" {:<6} {:<12} {:>12.2f} {:>14.2f} {:>16.2f} {:>13.2f} {:>13.2f}\n",
               r["bytes"].get<uint32_t>(), r["iterations"].get<uint64_t>(), h["min"].get<double>(),
               h["max"].get<double>(), h["p50"].get<double>(), h["p99"].get<double>(),
               h["p999"].get<double>());
    const json &t = r["rtt_us"];
    fmt::print(
        " round trip: p50 {:.2f} us  p99 {:.2f} us  p99.9 {:.2f} us (t_* above are half of it, as "
        "perftest reports)\n",
        t["p50"].get<double>(), t["p99"].get<double>(), t["p999"].get<double>());
    fmt::print(
        "---------------------------------------------------------------------------------------"
        "\n");
}

int server(const Options &o, mrc_context *ctx) {
    mrc_info info;
    mrc_query(ctx, &info);
    Side s = setup(o, ctx);
    if (int rc = mrc_listen(ctx, o.service, s.cq, nullptr); rc) die(ctx, "listen", rc);
    SideChannel ch;
    ch.accept(o.port, o.timeout_ms);
    json hello;
    hello = ch.recv(o.timeout_ms);
    if (hello.value("size", 0u) != o.size)
        die(fmt::format("the client sends {}-byte messages, this server was started with -s {}",
                        hello.value("size", 0u), o.size));
    mrc_remote_mr rm;
    mrc_mr_remote(s.mr, &rm);
    ch.send(json{
        {"ip", mrc::wire::ipv4_string(info.local_ip[0])}, {"addr", rm.addr}, {"rkey", rm.rkey}});
    json peer;
    peer = ch.recv(o.timeout_ms);
    if (int rc = mrc_accept(ctx, o.service, o.timeout_ms, &s.qp); rc) die(ctx, "accept", rc);
    ch.send(json{{"ready", true}});
    const uint64_t raddr = peer.value("addr", uint64_t{0});
    const uint32_t rkey = peer.value("rkey", 0u);
    const uint64_t iters = hello.value("iters", uint64_t{0});
    for (uint64_t i = 0; i < iters; ++i) {
        uint32_t imm;
        if (!wait_recv(o, ctx, s.cq, &imm)) return 1;
        post(ctx, o, s, raddr, rkey, imm);
    }
    json res;
    res = ch.recv(o.timeout_ms);
    print(res);
    write_results(o.json_path, res);
    mrc_destroy_qp(s.qp);
    return 0;
}

int client(const Options &o, mrc_context *ctx) {
    Side s = setup(o, ctx);
    if (int rc = mrc_create_qp(ctx, s.cq, nullptr, &s.qp); rc) die(ctx, "create_qp", rc);
    SideChannel ch;
    ch.connect(o.server, o.port, o.timeout_ms);
    const uint64_t warmup = std::min<uint64_t>(100, o.iters);
    ch.send(json{{"size", o.size}, {"iters", o.iters + warmup}});
    json peer;
    peer = ch.recv(o.timeout_ms);
    mrc_remote_mr rm;
    mrc_mr_remote(s.mr, &rm);
    ch.send(json{{"addr", rm.addr}, {"rkey", rm.rkey}});
    const std::string ip = peer.value("ip", "");
    if (int rc = mrc_connect(s.qp, ip.c_str(), o.service, o.timeout_ms); rc)
        die(ctx, "connect", rc);
    json ready;
    ready = ch.recv(o.timeout_ms);
    const uint64_t raddr = peer.value("addr", uint64_t{0});
    const uint32_t rkey = peer.value("rkey", 0u);
    std::vector<uint64_t> rtt;
    rtt.reserve(o.iters);
    for (uint64_t i = 0; i < o.iters + warmup; ++i) {
        const uint64_t t = now_ns();
        post(ctx, o, s, raddr, rkey, uint32_t(i));
        uint32_t imm;
        if (!wait_recv(o, ctx, s.cq, &imm)) return 1;
        if (imm != uint32_t(i)) die(fmt::format("reply {} to message {}", imm, i));
        if (i >= warmup) rtt.push_back(now_ns() - t);
    }
    std::vector<uint64_t> half(rtt.size());
    for (size_t i = 0; i < rtt.size(); ++i)
        half[i] = rtt[i] / 2;
    json r = {{"test", "write_lat"}, {"bytes", o.size}, {"iterations", rtt.size()}};
    r["rtt_us"] = {{"p50", percentile_us(rtt, 0.5)},
                   {"p99", percentile_us(rtt, 0.99)},
                   {"p999", percentile_us(rtt, 0.999)}};
    r["half_rtt_us"] = {{"min", percentile_us(half, 0)},
                        {"max", percentile_us(half, 1)},
                        {"p50", percentile_us(half, 0.5)},
                        {"p99", percentile_us(half, 0.99)},
                        {"p999", percentile_us(half, 0.999)}};
    ch.send(r);
    print(r);
    write_results(o.json_path, r);
    mrc_destroy_qp(s.qp);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    o.size = 64;
    o.iters = 10000;
    return tool_main(argc, argv, "mrc_write_lat",
                     "RDMA WRITE latency through mrcd (perftest style)", o, server, client);
}
