// mrc_write_bw: RDMA WRITE bandwidth through mrcd, in the manner of
// perftest's ib_write_bw.
//
//   server: mrc_write_bw [flags]
//   client: mrc_write_bw [flags] SERVER_HOST
//
// The two sides swap keys over TCP (--port); the client then connects its
// QPs to the server's daemon (whose address the server sends) and keeps
// --tx-depth writes in flight on every QP. Both print the results table.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "common.h"

using namespace mrc::perf;
using nlohmann::json;

namespace {

void print_table(const Options &o, const json &r) {
    fmt::print(
        "---------------------------------------------------------------------------------------"
        "\n");
    fmt::print("                    RDMA_Write BW Test (MRC, through mrcd)\n");
    fmt::print(" Number of qps   : {:<10} Transport type : MRC over UDP\n",
               r["qps"].get<uint32_t>());
    fmt::print(" TX depth        : {:<10} Planes         : {}\n", r["tx_depth"].get<uint32_t>(),
               r["planes"].get<uint32_t>());
    fmt::print(
        "---------------------------------------------------------------------------------------"
        "\n");
    if (o.report_gbits)
        fmt::print(" #bytes     #iterations    BW average[Gb/sec]   MsgRate[Mpps]\n");
    else
        fmt::print(" #bytes     #iterations    BW average[MB/sec]   MsgRate[Mpps]\n");
    const double bw = r["bw_gbps"].get<double>();
    fmt::print(" {:<10} {:<14} {:<20.2f} {:.6f}\n", r["bytes"].get<uint32_t>(),
               r["iterations"].get<uint64_t>(), o.report_gbits ? bw : bw * 1e3 / 8,
               r["msg_rate_mpps"].get<double>());
    fmt::print(
        "---------------------------------------------------------------------------------------"
        "\n");
}

int server(const Options &o, mrc_context *ctx) {
    mrc_info info;
    mrc_query(ctx, &info);
    const uint64_t slot_bytes = o.size;
    const uint64_t region = slot_bytes * o.tx_depth * o.qps;
    mrc_mr *mr;
    if (int rc = mrc_alloc_mr(ctx, region, MRC_ACCESS_REMOTE_WRITE, o.service, &mr); rc)
        die(ctx, "alloc_mr", rc);
    mrc_cq *cq;
    const uint32_t cq_depth =
        std::min<uint32_t>(65536, std::max<uint32_t>(256, 2 * o.qps * o.tx_depth));
    if (int rc = mrc_create_cq(ctx, cq_depth, &cq); rc) die(ctx, "create_cq", rc);
    mrc_qp_attr attr{o.tx_depth};
    if (int rc = mrc_listen(ctx, o.service, cq, &attr); rc) die(ctx, "listen", rc);
    SideChannel ch;
    ch.accept(o.port, o.timeout_ms);
    json hello;
    hello = ch.recv(o.timeout_ms);
    const uint32_t qps = hello.value("qps", 0u), size = hello.value("size", 0u),
                   depth = hello.value("tx_depth", 0u);
    if (qps != o.qps || size != o.size || depth > o.tx_depth)
        die(
            fmt::format("the client asks for {} QPs of {}-byte messages, depth {}; this server was "
                        "started with -q {} -s {} -t {}",
                        qps, size, depth, o.qps, o.size, o.tx_depth));
    mrc_remote_mr rm;
    mrc_mr_remote(mr, &rm);
    json me = {{"ip", mrc::wire::ipv4_string(info.local_ip[0])},
               {"service", o.service},
               {"addr", rm.addr},
               {"rkey", rm.rkey},
               {"slot_bytes", slot_bytes},
               {"slots", o.tx_depth}};
    ch.send(me);
    std::vector<mrc_qp *> qp(o.qps);
    for (auto &q : qp)
        if (int rc = mrc_accept(ctx, o.service, o.timeout_ms, &q); rc) die(ctx, "accept", rc);
    ch.send(json{{"ready", true}});
    // Passive: WRITEs complete only at the sender. Watch for QP errors until
    // the client reports; if the side channel breaks first, keep watching a
    // moment so a QP error that explains it is reported.
    json res;
    uint64_t give_up_ns = 0;
    std::string why;
    for (;;) {
        mrc_wc wc[32];
        const int n = mrc_poll_cq(cq, wc, 32);
        if (n < 0) die(ctx, "poll_cq", n);
        for (int i = 0; i < n; ++i)
            if (wc[i].opcode == MRC_WC_QP_EVENT)
                die(fmt::format("QP {}: {}", wc[i].qp_num, mrc_wc_status_str(wc[i].status)));
        if (give_up_ns) {
            if (now_ns() > give_up_ns) die(why);
            ::usleep(100);
            continue;
        }
        // Waits up to 1 ms for the client's report: this side only watches.
        auto msg = ch.try_recv(1);
        if (!msg) {
            why = msg.error().message;
            give_up_ns = now_ns() + 3'000'000'000ull;
        } else if (*msg) {
            res = std::move(**msg);
            break;
        }
    }
    print_table(o, res);
    write_results(o.json_path, res);
    for (auto *q : qp)
        mrc_destroy_qp(q);
    return 0;
}

int client(const Options &o, mrc_context *ctx) {
    mrc_info info;
    mrc_query(ctx, &info);
    const uint64_t slot_bytes = o.size;
    mrc_mr *mr;
    if (int rc = mrc_alloc_mr(ctx, slot_bytes * o.tx_depth, MRC_ACCESS_LOCAL, o.service, &mr); rc)
        die(ctx, "alloc_mr", rc);
    std::memset(mrc_mr_addr(mr), 0x5a, slot_bytes * o.tx_depth);
    mrc_cq *cq;
    const uint32_t cq_depth =
        std::min<uint32_t>(65536, std::max<uint32_t>(256, 2 * o.qps * o.tx_depth));
    if (int rc = mrc_create_cq(ctx, cq_depth, &cq); rc) die(ctx, "create_cq", rc);
    std::vector<mrc_qp *> qp(o.qps);
    mrc_qp_attr attr{o.tx_depth};
    for (auto &q : qp)
        if (int rc = mrc_create_qp(ctx, cq, &attr, &q); rc) die(ctx, "create_qp", rc);
    SideChannel ch;
    ch.connect(o.server, o.port, o.timeout_ms);
    ch.send(json{{"qps", o.qps}, {"size", o.size}, {"tx_depth", o.tx_depth}});
    json peer;
    peer = ch.recv(o.timeout_ms);
    const std::string ip = peer.value("ip", "");
    const uint64_t raddr = peer.value("addr", uint64_t{0});
    const uint32_t rkey = peer.value("rkey", 0u);
    const uint64_t c0 = now_ns();
    if (o.serial_connect) {
        for (auto *q : qp)
            if (int rc = mrc_connect(q, ip.c_str(), o.service, o.timeout_ms); rc)
                die(ctx, "connect", rc);
    } else if (int rc = mrc_connect_many(qp.data(), unsigned(qp.size()), ip.c_str(), o.service,
                                         o.timeout_ms, nullptr);
               rc) {
        die(ctx, "connect", rc);
    }
    json ready;
    ready = ch.recv(o.timeout_ms);
    // Until the server has accepted them all: what a job waits for.
    const double connect_s = double(now_ns() - c0) / 1e9;
    fmt::print("connected {} QPs in {:.3f} s\n", o.qps, connect_s);
    std::fflush(stdout);

    // Every QP keeps tx_depth writes in flight, each into its own slot.
    std::vector<uint64_t> posted(o.qps, 0), done(o.qps, 0);
    std::vector<uint32_t> inflight(o.qps, 0);
    std::unordered_map<uint32_t, uint32_t> index;
    for (uint32_t i = 0; i < o.qps; ++i)
        index[mrc_qp_num(qp[i])] = i;
    const bool timed = o.duration_s > 0;
    const uint64_t t0 = now_ns();
    const uint64_t stop_ns = t0 + uint64_t(o.duration_s * 1e9);
    uint64_t completed = 0;
    bool posting = true;
    for (;;) {
        if (timed && posting && now_ns() >= stop_ns) posting = false;
        uint32_t outstanding = 0;
        for (uint32_t i = 0; i < o.qps; ++i) {
            while (posting && inflight[i] < o.tx_depth && (timed || posted[i] < o.iters)) {
                const uint32_t slot = uint32_t(posted[i] % o.tx_depth);
                mrc_wr wr{};
                wr.wr_id = (uint64_t(i) << 40) | posted[i];
                wr.opcode = MRC_WR_WRITE;
                wr.local = mr;
                wr.local_offset = uint64_t(slot) * slot_bytes;
                wr.length = o.size;
                wr.rkey = rkey;
                wr.remote_addr = raddr + (uint64_t(i) * o.tx_depth + slot) * slot_bytes;
                const int rc = mrc_post_write(qp[i], &wr);
                if (rc == MRC_EAGAIN) break;
                if (rc) die(ctx, "post_write", rc);
                ++posted[i];
                ++inflight[i];
            }
            outstanding += inflight[i];
        }
        if (outstanding == 0 && (!posting || !timed)) {
            bool all = true;
            for (uint32_t i = 0; i < o.qps; ++i)
                all = all && (timed || posted[i] >= o.iters);
            if (all || !posting) break;
        }
        mrc_wc wc[64];
        const int n = mrc_poll_cq(cq, wc, 64);
        if (n < 0) die(ctx, "poll_cq", n);
        if (n == 0) idle(o);
        for (int k = 0; k < n; ++k) {
            if (wc[k].status != MRC_WC_SUCCESS)
                die(fmt::format("QP {}: write failed: {}", wc[k].qp_num,
                                mrc_wc_status_str(wc[k].status)));
            if (wc[k].opcode != MRC_WC_WRITE) continue;
            const uint32_t i = index[wc[k].qp_num];
            --inflight[i];
            ++done[i];
            ++completed;
        }
    }
    const double secs = double(now_ns() - t0) / 1e9;
    json r = {{"test", "write_bw"},
              {"bytes", o.size},
              {"qps", o.qps},
              {"tx_depth", o.tx_depth},
              {"planes", info.planes},
              {"iterations", completed},
              {"seconds", secs},
              {"bw_gbps", double(completed) * o.size * 8 / secs / 1e9},
              {"msg_rate_mpps", double(completed) / secs / 1e6},
              {"connect_s", connect_s},
              {"connect_qps_per_s", connect_s > 0 ? o.qps / connect_s : 0.0}};
    ch.send(r);
    print_table(o, r);
    write_results(o.json_path, r);
    for (auto *q : qp)
        mrc_destroy_qp(q);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    return tool_main(argc, argv, "mrc_write_bw",
                     "RDMA WRITE bandwidth through mrcd (perftest style)", o, server, client);
}
