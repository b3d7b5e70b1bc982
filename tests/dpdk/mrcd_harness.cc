#include "dpdk/mrcd_harness.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "support/ports.h"

namespace mrc::test {

using namespace std::chrono_literals;
using nlohmann::json;

std::string app(const std::string &name) {
    const char *d = std::getenv("MRC_APP_DIR");
    return std::string(d ? d : ".") + "/" + name;
}

namespace {

std::string config(const Daemons &d, char which, const std::string &extra) {
    std::string c = "[daemon]\nsocket = \"" + d.sock(which) + "\"\ndrain_ms = 1000\n" +
                    d.daemon_toml + "[dataplane]\nlink_wait_ms = 30000\n" + d.dataplane_toml;
    for (uint32_t p = 0; p < d.planes; ++p)
        c += "[[plane]]\nip = \"" + d.ip(which, p) + "\"\n" + d.plane_toml;
    return c + extra;
}

bool wait_ready(Subprocess &p, std::chrono::milliseconds limit) {
    for (auto t = 0ms; t < limit; t += 50ms) {
        if (p.log().find("mrcd: ready") != std::string::npos) return true;
        if (p.wait_for(0ms).has_value()) return false;
        std::this_thread::sleep_for(50ms);
    }
    return false;
}

}  // namespace

void start(Daemons &d, const std::string &extra_toml, bool via_fabric,
           const std::vector<std::string> &fabric_args) {
    static int n = 0;
    d.dir = make_temp_dir("mrcd");
    d.tag = "mrcd-test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
    for (char w : {'a', 'b'}) {
        std::FILE *f = std::fopen((d.dir + "/" + w + ".toml").c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs(config(d, w, extra_toml).c_str(), f);
        std::fclose(f);
    }
    if (via_fabric) {
        auto c = dpdk_cmd(app("mrc-fabric"), d.tag + "-f", "0@(0,1)");
        int dev = 0;
        for (uint32_t p = 0; p < d.planes; ++p)
            for (char side : {'a', 'b'})
                c.push_back("--vdev=net_memif" + std::to_string(dev++) + ",role=server,socket=" +
                            d.dir + "/f" + side + std::to_string(p) + ".sock");
        c.insert(c.end(),
                 {"--", "--paths", "4", "--stats-period", "1", "--json", d.dir + "/fabric.json"});
        c.insert(c.end(), fabric_args.begin(), fabric_args.end());
        d.fabric = Subprocess::start(c, d.dir + "/fabric.log");
        ASSERT_TRUE(d.fabric.has_value());
    }
    launch(d, via_fabric);
}

void launch(Daemons &d, bool via_fabric) {
    static int gen = 0;
    ++gen;
    for (char w : {'a', 'b'}) {
        const std::string prefix = d.tag + "-" + w + std::to_string(gen);
        if (w == 'a') d.prefix_a = prefix;
        std::string lcores = w == 'a' ? "0@1,1@0" : "0@0,1@1";
        if (d.workers > 1) lcores += w == 'a' ? ",2@1" : ",2@0";
        auto c = dpdk_cmd(app("mrcd"), prefix, lcores);
        for (uint32_t p = 0; p < d.planes; ++p) {
            const std::string s = via_fabric ? d.dir + "/f" + w + std::to_string(p) + ".sock"
                                             : d.dir + "/m" + std::to_string(p) + ".sock";
            const std::string role = via_fabric || w == 'b' ? "client" : "server";
            c.push_back("--vdev=net_memif" + std::to_string(p) + ",role=" + role + ",socket=" + s);
        }
        c.insert(c.end(), {"--", "--config", d.dir + "/" + w + ".toml"});
        (w == 'a' ? d.a : d.b) = Subprocess::start(c, d.dir + "/" + w + ".log");
    }
    ASSERT_TRUE(d.a && d.b);
    ASSERT_TRUE(wait_ready(*d.a, 60s)) << d.a->log();
    ASSERT_TRUE(wait_ready(*d.b, 60s)) << d.b->log();
}

void finish(Daemons &d) {
    for (auto *p : {&d.a, &d.b})
        if (*p) {
            (*p)->stop(5000ms);
            p->reset();
        }
    if (d.fabric) d.fabric->stop(5000ms);
    sh("rm -rf " + d.dir);
    // A daemon a test killed (SIGKILL) leaves its EAL runtime directory.
    sh("rm -rf /var/run/dpdk/" + d.tag + "-*");
}

Done run(const std::vector<std::string> &argv, const std::string &log,
         std::chrono::milliseconds limit) {
    auto p = Subprocess::start(argv, log);
    if (!p) return {};
    const auto rc = p->wait_for(limit);
    Done r{rc.value_or(-1), p->log()};
    if (!rc) r.log += "\n(timed out: hung)";
    return r;
}

json ctl(const Daemons &d, char w, const std::vector<std::string> &args, int *rc) {
    std::vector<std::string> c{app("mrcctl"), "--socket", d.sock(w), "--json"};
    c.insert(c.end(), args.begin(), args.end());
    const Done r = run(c, d.dir + "/ctl.log", 20s);
    if (rc) *rc = r.rc;
    return json::parse(r.log, nullptr, false);
}

mrc_wr slot_write(const mrc_mr *src, const mrc_remote_mr &remote, uint32_t slot_bytes, uint32_t i,
                  uint64_t wr_id) {
    mrc_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = MRC_WR_WRITE;
    wr.local = src;
    wr.local_offset = uint64_t{i} * slot_bytes;
    wr.length = slot_bytes;
    wr.rkey = remote.rkey;
    wr.remote_addr = remote.addr + uint64_t{i} * slot_bytes;
    return wr;
}

void wait_moving(const Daemons &d, int service) {
    for (int i = 0; i < 200; ++i) {
        const json q = ctl(d, 'a', {"qps"});
        for (const auto &x : q.value("qps", json::array()))
            if ((service < 0 || x.value("service", 0) == service) &&
                x["tx_data_pkts"].get<uint64_t>() > 100)
                return;
        std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "no QP moved data";
}

std::pair<std::optional<Subprocess>, std::optional<Subprocess>> start_tool(
    const Daemons &d, const std::string &tool, const std::string &tag,
    const std::vector<std::string> &args, const std::vector<std::string> &client_args) {
    const std::string port = std::to_string(free_tcp_port());
    std::vector<std::string> s{app(tool), "--socket", d.sock('b'), "-p", port};
    s.insert(s.end(), args.begin(), args.end());
    std::vector<std::string> c{app(tool), "--socket", d.sock('a'), "-p", port};
    c.insert(c.end(), args.begin(), args.end());
    c.insert(c.end(), client_args.begin(), client_args.end());
    c.push_back("127.0.0.1");
    // The client retries its side channel until the server listens.
    auto srv = Subprocess::start(s, d.dir + "/" + tag + "-server.log");
    auto cli = Subprocess::start(c, d.dir + "/" + tag + "-client.log");
    return {std::move(srv), std::move(cli)};
}

Copy start_copy(const Daemons &d, uint32_t service, uint64_t bytes, const std::string &name) {
    Copy c;
    const std::string keys = d.dir + "/" + name + ".keys";
    c.rx = Subprocess::start(
        {app("bulk_copy"), "--socket", d.sock('b'), "--service", std::to_string(service), "--bytes",
         std::to_string(bytes), "--keys", keys},
        d.dir + "/" + name + "-rx.log");
    c.tx = Subprocess::start(
        {app("bulk_copy"), "--socket", d.sock('a'), "--service", std::to_string(service), "--bytes",
         std::to_string(bytes), "--keys", keys, "--peer", d.ip('b')},
        d.dir + "/" + name + "-tx.log");
    return c;
}

void connect_ends(const Daemons &d, Ends &e, uint32_t service, uint32_t sq_depth) {
    ASSERT_EQ(mrc_open(d.sock('a').c_str(), &e.a), MRC_OK) << mrc_last_error(nullptr);
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &e.b), MRC_OK) << mrc_last_error(nullptr);
    ASSERT_EQ(mrc_alloc_mr(e.a, 1 << 20, MRC_ACCESS_LOCAL, service, &e.src), MRC_OK);
    ASSERT_EQ(mrc_alloc_mr(e.b, 1 << 20, MRC_ACCESS_REMOTE_WRITE, service, &e.dst), MRC_OK);
    mrc_mr_remote(e.dst, &e.remote);
    ASSERT_EQ(mrc_create_cq(e.a, 1024, &e.cqa), MRC_OK);
    ASSERT_EQ(mrc_create_cq(e.b, 1024, &e.cqb), MRC_OK);
    ASSERT_EQ(mrc_listen(e.b, service, e.cqb, nullptr), MRC_OK) << mrc_last_error(e.b);
    mrc_qp_attr attr{sq_depth};
    ASSERT_EQ(mrc_create_qp(e.a, e.cqa, &attr, &e.qa), MRC_OK);
    EXPECT_EQ(mrc_post_write(e.qa, nullptr), MRC_EINVAL);
    ASSERT_EQ(mrc_connect(e.qa, d.ip('b').c_str(), service, 10000), MRC_OK) << mrc_last_error(e.a);
    ASSERT_EQ(mrc_accept(e.b, service, 10000, &e.qb), MRC_OK) << mrc_last_error(e.b);
}

std::vector<mrc_wc> poll_until(mrc_cq *cq, size_t want, std::chrono::milliseconds limit) {
    std::vector<mrc_wc> out;
    const auto until = std::chrono::steady_clock::now() + limit;
    while (out.size() < want && std::chrono::steady_clock::now() < until) {
        mrc_wc wc[16];
        const int n = mrc_poll_cq(cq, wc, 16);
        if (n < 0) break;
        out.insert(out.end(), wc, wc + n);
        if (n == 0) std::this_thread::sleep_for(100us);
    }
    return out;
}

}  // namespace mrc::test
