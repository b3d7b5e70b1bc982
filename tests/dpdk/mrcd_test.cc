// Scope: mrcd and libmrc end to end. Two daemons joined by memif pairs (one
// per plane), or through mrc-fabric, EAL under --no-huge; applications are
// separate processes (the examples and the perftest tools) or this test
// process itself speaking libmrc, or the raw socket protocol for hostile
// input. Checked:
//   - transfers verified byte for byte by the receiver (bulk_copy), a ring
//     all-reduce among four processes on two daemons, the perftest tools;
//   - a killed application: its peer gets an error completion, another
//     application's transfer on the same daemons completes verified, the
//     daemon releases what it held;
//   - a killed daemon: its application gets an error, not a hang; SIGTERM
//     drains and stops;
//   - socket permissions; malformed requests, out-of-range work requests,
//     unknown keys, a full ring, a hostile ring index, an old API version;
//   - mrcctl: status, ports, QPs, deny/allow a plane and an EV;
//   - a plane that fails in the fabric mid-transfer;
//   - mrc_connect_many: hundreds of QPs in one call, each moving verified data.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/ipc.h"
#include "client/sock.h"
#include "dpdk/mrcd_harness.h"
#include "mrc/mrc.h"
#include "support/ports.h"
#include "support/subprocess.h"
#include "support/wait.h"

namespace mrc::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

TEST(Mrcd, BulkCopyVerifiedAcrossTwoDaemons) {
    Daemons d;
    start(d);
    Copy c = start_copy(d, 7000, 96ull << 20, "copy");
    const auto trc = c.tx->wait_for(120s), rrc = c.rx->wait_for(30s);
    EXPECT_EQ(trc.value_or(-1), 0) << c.tx->log();
    EXPECT_EQ(rrc.value_or(-1), 0) << c.rx->log();
    EXPECT_NE(c.rx->log().find("100663296 bytes, 0 wrong"), std::string::npos) << c.rx->log();
    // Both planes carried data.
    const json ports = ctl(d, 'a', {"ports"});
    ASSERT_TRUE(ports.is_object()) << ports;
    for (const auto &p : ports["ports"])
        EXPECT_GT(p["tx_data_pkts"].get<uint64_t>(), 1000u) << p;
    // Once the applications closed, the daemons hold nothing for them.
    for (int i = 0; i < 50; ++i) {
        const json s = ctl(d, 'b', {"status"});
        if (s["daemon"]["qps"] == 0 && s["daemon"]["clients"].get<int>() <= 1) break;
        std::this_thread::sleep_for(100ms);
    }
    for (char w : {'a', 'b'}) {
        const json s = ctl(d, w, {"status"});
        EXPECT_EQ(s["daemon"]["qps"], 0) << s;
        EXPECT_EQ(s["daemon"]["listeners"], 0) << s;
    }
    finish(d);
}

TEST(Mrcd, RingAllReduceAmongFourProcessesOnTwoDaemons) {
    Daemons d;
    start(d);
    std::vector<Subprocess> ranks;
    const std::string peers = d.ip('a') + "," + d.ip('b') + "," + d.ip('a') + "," + d.ip('b');
    for (int r = 0; r < 4; ++r) {
        auto p = Subprocess::start({app("ring_exchange"), "--socket", d.sock(r % 2 ? 'b' : 'a'),
                                    "--rank", std::to_string(r), "--ranks", "4", "--peers", peers,
                                    "--dir", d.dir, "--elems", "200000"},
                                   d.dir + "/rank" + std::to_string(r) + ".log");
        ASSERT_TRUE(p.has_value());
        ranks.push_back(std::move(*p));
    }
    for (int r = 0; r < 4; ++r) {
        const auto rc = ranks[r].wait_for(120s);
        EXPECT_EQ(rc.value_or(-1), 0) << ranks[r].log();
        EXPECT_NE(ranks[r].log().find("elements per chunk, 0 wrong"), std::string::npos)
            << ranks[r].log();
    }
    finish(d);
}

TEST(Mrcd, PerftestToolsReport) {
    Daemons d;
    start(d);
    const std::string port = std::to_string(free_tcp_port());
    auto srv = Subprocess::start({app("mrc_write_bw"), "--socket", d.sock('b'), "-p", port, "-q",
                                  "2", "-s", "65536", "--json", d.dir + "/bw-server.json"},
                                 d.dir + "/bw-server.log");
    const Done cli = run({app("mrc_write_bw"), "--socket", d.sock('a'), "-p", port, "-q", "2", "-s",
                          "65536", "-D", "1", "--json", d.dir + "/bw.json", "127.0.0.1"},
                         d.dir + "/bw-client.log");
    EXPECT_EQ(cli.rc, 0) << cli.log;
    EXPECT_EQ(srv->wait_for(20s).value_or(-1), 0) << srv->log();
    EXPECT_NE(cli.log.find("BW average[Gb/sec]"), std::string::npos) << cli.log;
    const json bw = json::parse(read_file(d.dir + "/bw.json"), nullptr, false);
    ASSERT_TRUE(bw.is_object()) << cli.log;
    EXPECT_GT(bw["bw_gbps"].get<double>(), 0.01);
    EXPECT_GT(bw["iterations"].get<uint64_t>(), 10u);
    EXPECT_EQ(bw["planes"], 2);

    auto lsrv = Subprocess::start({app("mrc_write_lat"), "--socket", d.sock('b'), "-p", port},
                                  d.dir + "/lat-server.log");
    const Done lat = run({app("mrc_write_lat"), "--socket", d.sock('a'), "-p", port, "-n", "2000",
                          "--json", d.dir + "/lat.json", "127.0.0.1"},
                         d.dir + "/lat-client.log");
    EXPECT_EQ(lat.rc, 0) << lat.log;
    EXPECT_EQ(lsrv->wait_for(20s).value_or(-1), 0) << lsrv->log();
    const json l = json::parse(read_file(d.dir + "/lat.json"), nullptr, false);
    ASSERT_TRUE(l.is_object()) << lat.log;
    EXPECT_EQ(l["iterations"], 2000);
    EXPECT_GT(l["rtt_us"]["p50"].get<double>(), 0.5);
    std::printf("write_bw %.2f Gb/s, write_lat RTT p50 %.1f us (shared CPUs, sleep idle)\n",
                bw["bw_gbps"].get<double>(), l["rtt_us"]["p50"].get<double>());
    finish(d);
}

TEST(Mrcd, KilledApplicationGivesItsPeerAnErrorAndSparesOthers) {
    Daemons d;
    start(d);
    // The survivor: a verified copy on the same daemons.
    Copy keep = start_copy(d, 7100, 160ull << 20, "keep");
    // The victim: a bandwidth run that is killed once it is moving data.
    auto [vs, vc] = start_tool(d, "mrc_write_bw", "victim", {"--service", "7200"}, {"-D", "60"});
    ASSERT_TRUE(vs && vc);
    wait_moving(d, 7200);
    ::kill(vc->pid(), SIGKILL);
    // The victim's peer hears of it through an error completion, and says so.
    const auto src = vs->wait_for(30s);
    EXPECT_EQ(src.value_or(-1), 1) << vs->log();
    EXPECT_NE(vs->log().find("the peer disconnected"), std::string::npos) << vs->log();
    // The survivor finishes, verified.
    EXPECT_EQ(keep.tx->wait_for(120s).value_or(-1), 0) << keep.tx->log();
    EXPECT_EQ(keep.rx->wait_for(30s).value_or(-1), 0) << keep.rx->log();
    EXPECT_NE(keep.rx->log().find("167772160 bytes, 0 wrong"), std::string::npos) << keep.rx->log();
    // Daemon A released the killed application's QP, CQ and region (and
    // the survivor's, which closed just now).
    json s;
    for (int i = 0; i < 100; ++i) {
        s = ctl(d, 'a', {"status"});
        if (s.is_object() && s["daemon"]["qps"] == 0) break;
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_EQ(s["daemon"]["qps"], 0) << s;
    EXPECT_GE(s["counters"]["clients_released"].get<int>(), 2) << s;
    EXPECT_NE(read_file(d.dir + "/a.log").find("gone: releasing 1 QPs"), std::string::npos);
    finish(d);
}

TEST(Mrcd, KilledDaemonGivesItsApplicationAnErrorNotAHang) {
    Daemons d;
    // Short ack timeouts so the surviving side gives up quickly too.
    start(d, "[qp]\nretry_timeout_exp = 10\nretry_limit = 5\n");
    auto [srv, cli] = start_tool(d, "mrc_write_bw", "bw", {}, {"-D", "60"});
    ASSERT_TRUE(srv && cli);
    wait_moving(d);
    ::kill(d.a->pid(), SIGKILL);
    d.a->wait_for(2s);
    const auto crc = cli->wait_for(20s);
    ASSERT_TRUE(crc.has_value()) << "the application hung on a dead daemon:\n" << cli->log();
    EXPECT_EQ(*crc, 1) << cli->log();
    EXPECT_NE(cli->log().find("the daemon went away"), std::string::npos) << cli->log();
    // The far side only receives: it learns of the end from its side
    // channel or from its QP (MRC_WC_PEER_UNREACHABLE), and exits.
    const auto src = srv->wait_for(30s);
    ASSERT_TRUE(src.has_value()) << srv->log();
    EXPECT_EQ(*src, 1);
    // Started again (B too, for fresh memif links; A's socket file is left
    // from the killed daemon and is taken over): applications are served.
    d.b->stop(5000ms);
    sh("rm -f " + d.dir + "/m*.sock");
    launch(d);
    Copy again = start_copy(d, 7600, 8 << 20, "again");
    EXPECT_EQ(again.tx->wait_for(60s).value_or(-1), 0) << again.tx->log();
    EXPECT_EQ(again.rx->wait_for(30s).value_or(-1), 0) << again.rx->log();
    finish(d);
}

// A daemon killed mid-transfer: the QPs of its peer daemon, the one that
// sends to it and the one that only receives from it, both fail with
// MRC_WC_PEER_UNREACHABLE at the default settings (peer_timeout_ms 500):
// nothing of this reaches the applications but MRC itself (bulk_copy has no
// side channel).
TEST(Mrcd, KilledDaemonFailsItsPeersSendingAndReceivingQpsWithinASecond) {
    Daemons d;
    start(d);
    // A -> B: the sender on A; B -> A: A's QP only receives.
    Copy to_b = start_copy(d, 7700, 192ull << 20, "to-b");
    Copy to_a;
    const std::string keys = d.dir + "/to-a.keys";
    to_a.rx = Subprocess::start({app("bulk_copy"), "--socket", d.sock('a'), "--service", "7701",
                                 "--bytes", std::to_string(192ull << 20), "--keys", keys},
                                d.dir + "/to-a-rx.log");
    to_a.tx = Subprocess::start(
        {app("bulk_copy"), "--socket", d.sock('b'), "--service", "7701", "--bytes",
         std::to_string(192ull << 20), "--keys", keys, "--peer", d.ip('a')},
        d.dir + "/to-a-tx.log");
    ASSERT_TRUE(to_b.rx && to_b.tx && to_a.rx && to_a.tx);
    wait_moving(d, 7700);
    ASSERT_FALSE(testing::Test::HasFailure()) << to_b.tx->log() << to_b.rx->log();
    // B's sender is moving too (A's QP of service 7701 has received data).
    bool moving = false;
    for (int i = 0; i < 200 && !moving; ++i) {
        for (const auto &x : ctl(d, 'a', {"qps"}).value("qps", json::array()))
            moving |=
                x.value("service", 0) == 7701 && x["rx_data_bytes"].get<uint64_t>() > (1u << 20);
        if (!moving) std::this_thread::sleep_for(50ms);
    }
    auto everything = [&] {
        return "daemon A:\n" + d.a->log() + "\ndaemon B:\n" + d.b->log() + "\nto-b sender:\n" +
               to_b.tx->log() + "\nto-b receiver:\n" + to_b.rx->log() + "\nto-a sender:\n" +
               to_a.tx->log() + "\nto-a receiver:\n" + to_a.rx->log();
    };
    // Both daemons' state, while both run (what stalled, if anything did).
    auto state = [&] {
        std::string s;
        for (char w : {'a', 'b'})
            for (const char *what : {"status", "ports", "qps"})
                s += std::string("mrcctl ") + what + " on " + w + ": " + ctl(d, w, {what}).dump() +
                     "\n";
        return s;
    };
    EXPECT_TRUE(moving) << "B's sender did not start\n" << state() << everything();
    // All four still at work: an end before the kill is something else's
    // doing, and the times measured below would mean nothing.
    for (Subprocess *p : {&*to_b.tx, &*to_b.rx, &*to_a.tx, &*to_a.rx})
        ASSERT_FALSE(p->wait_for(0ms).has_value()) << p->log_path() << " ended before the kill\n"
                                                   << (moving ? state() : "") << everything();
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(d.b->pid(), SIGKILL);
    auto seconds = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    // A's two applications, watched together: when did each end?
    std::optional<int> sender, receiver;
    double sender_s = 0, receiver_s = 0;
    while ((!sender || !receiver) && seconds() < 20) {
        if (!sender && (sender = to_b.tx->wait_for(5ms))) sender_s = seconds();
        if (!receiver && (receiver = to_a.rx->wait_for(5ms))) receiver_s = seconds();
    }
    // B's own applications saw their daemon go.
    EXPECT_TRUE(to_b.rx->wait_for(20s).has_value());
    EXPECT_TRUE(to_a.tx->wait_for(20s).has_value());
    ASSERT_TRUE(sender.has_value()) << "the sender hung on a dead peer:\n" << to_b.tx->log();
    ASSERT_TRUE(receiver.has_value()) << "the receiver hung on a dead peer:\n" << to_a.rx->log();
    EXPECT_EQ(*sender, 1) << to_b.tx->log();
    EXPECT_EQ(*receiver, 1) << to_a.rx->log();
    EXPECT_NE(to_b.tx->log().find("peer unreachable"), std::string::npos) << everything();
    EXPECT_NE(to_a.rx->log().find("QP error: peer unreachable"), std::string::npos) << everything();
    std::printf(
        "peer daemon killed: its sending QP failed after %.2f s, its receiving QP after "
        "%.2f s (peer_timeout_ms 500)\n",
        sender_s, receiver_s);
    // A generous bound here (shared CPUs): the figure to meet is in the
    // benchmark (bench/loss_recovery.sh), not in a timed test.
    EXPECT_LT(receiver_s, 10.0);
    // The surviving daemon is healthy and stops cleanly.
    EXPECT_TRUE(ctl(d, 'a', {"status"}).is_object());
    ::kill(d.a->pid(), SIGTERM);
    EXPECT_EQ(d.a->wait_for(10s).value_or(-1), 0) << d.a->log();
    finish(d);
}

TEST(Mrcd, SigtermStopsWithInFlightWorkFailedOrDone) {
    Daemons d;
    start(d);
    auto [srv, cli] = start_tool(d, "mrc_write_bw", "bw", {}, {"-D", "60"});
    ASSERT_TRUE(srv && cli);
    wait_moving(d);
    ::kill(d.a->pid(), SIGTERM);
    const auto drc = d.a->wait_for(20s);
    ASSERT_TRUE(drc.has_value()) << "mrcd did not stop:\n" << d.a->log();
    EXPECT_EQ(*drc, 0) << d.a->log();
    EXPECT_NE(d.a->log().find("mrcd: stopped"), std::string::npos) << d.a->log();
    const auto crc = cli->wait_for(20s);
    ASSERT_TRUE(crc.has_value()) << cli->log();
    EXPECT_EQ(*crc, 1);
    const std::string l = cli->log();
    EXPECT_TRUE(l.find("shutting down") != std::string::npos ||
                l.find("shut down") != std::string::npos ||
                l.find("went away") != std::string::npos)
        << l;
    EXPECT_EQ(sh("test -e " + d.sock('a')), 1) << "socket left behind";
    srv->stop();
    d.a.reset();
    finish(d);
}

TEST(Mrcd, SocketPermissions) {
    if (!is_root()) GTEST_SKIP() << "needs root to try another user";
    Daemons d;
    start(d, "");
    struct stat st {};
    ASSERT_EQ(::stat(d.sock('a').c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660u) << std::oct << (st.st_mode & 0777);
    sh("chmod 755 " + d.dir);
    // Another user can neither use the daemon nor steer it.
    const Done r = run({"/usr/sbin/runuser", "-u", "nobody", "--", app("mrcctl"), "--socket",
                        d.sock('a'), "status"},
                       d.dir + "/nobody.log", 20s);
    EXPECT_EQ(r.rc, 2) << r.log;
    EXPECT_NE(r.log.find("Permission denied"), std::string::npos) << r.log;
    // The owner can.
    int rc = -1;
    const json s = ctl(d, 'a', {"status"}, &rc);
    EXPECT_EQ(rc, 0);
    EXPECT_TRUE(s.contains("daemon")) << s;
    finish(d);
}

TEST(Mrcd, MalformedRequestsGetErrorsAndTheDaemonStaysUp) {
    Daemons d;
    start(d);
    const std::string s = d.sock('a');
    {  // Garbage: not a request at all.
        Raw r(s);
        ASSERT_GE(r.fd, 0);
        const char junk[] = "GET / HTTP/1.1\r\n\r\n";
        const auto h = r.send_raw(junk, sizeof junk);
        EXPECT_EQ(h.status, MRC_EINVAL);
        EXPECT_NE(std::string(h.message).find("magic"), std::string::npos) << h.message;
        EXPECT_TRUE(r.closed());
    }
    {  // Shorter than a header.
        Raw r(s);
        const auto h = r.send_raw("ab", 2);
        EXPECT_EQ(h.status, MRC_EINVAL);
        EXPECT_NE(std::string(h.message).find("short"), std::string::npos) << h.message;
    }
    {  // An older client: the version in the header.
        Raw r(s);
        ipc::HelloReq hr{};
        hr.api_version = 0;
        const auto h = r.req(ipc::Op::kHello, hr, -1, nullptr, nullptr, 0);
        EXPECT_EQ(h.status, MRC_EVERSION);
        EXPECT_NE(std::string(h.message).find("version 0"), std::string::npos) << h.message;
    }
    {  // ...or in the hello.
        Raw r(s);
        ipc::HelloReq hr{};
        hr.api_version = 99;
        const auto h = r.req(ipc::Op::kHello, hr);
        EXPECT_EQ(h.status, MRC_EVERSION);
    }
    {
        Raw r(s);
        ipc::KeyReq k{1, 0};
        EXPECT_EQ(r.req(ipc::Op::kDeregMr, k).status, MRC_ESTATE);  // before hello
        EXPECT_EQ(r.hello().status, MRC_OK);
        EXPECT_EQ(r.req(ipc::Op::kDeregMr, k).status, MRC_ENOENT);
        EXPECT_EQ(r.req(ipc::Op::kDestroyQp, k).status, MRC_ENOENT);
        EXPECT_EQ(r.req(ipc::Op::kDestroyCq, k).status, MRC_ENOENT);
        EXPECT_EQ(r.req(static_cast<ipc::Op>(77), k).status, MRC_EINVAL);
        uint64_t odd = 0;  // wrong body size for the op
        EXPECT_EQ(r.req(ipc::Op::kCreateCq, odd).status, MRC_EINVAL);
        EXPECT_EQ(r.req(ipc::Op::kCreateCq, ipc::CreateCqReq{0, 0}).status, MRC_EINVAL);
        EXPECT_EQ(r.req(ipc::Op::kCreateCq, ipc::CreateCqReq{1u << 30, 0}).status, MRC_EINVAL);
        EXPECT_EQ(r.req(ipc::Op::kCreateQp, ipc::CreateQpReq{12345, 16}).status, MRC_EINVAL);
        EXPECT_EQ(r.req(ipc::Op::kConnect, ipc::ConnectReq{999, 1, 0x0a000002, 100}).status,
                  MRC_ENOENT);
        EXPECT_EQ(r.req(ipc::Op::kAccept, ipc::AcceptReq{5, 100}).status, MRC_ENOENT);
        // Regions: no descriptor, an unsealed one, one smaller than claimed.
        ipc::RegMrReq mr{4096, 0x10000, MRC_ACCESS_REMOTE_WRITE, 1};
        auto h = r.req(ipc::Op::kRegMr, mr);
        EXPECT_EQ(h.status, MRC_EINVAL) << h.message;
        const int plain = ::memfd_create("t", MFD_CLOEXEC);
        ASSERT_EQ(::ftruncate(plain, 4096), 0);
        h = r.req(ipc::Op::kRegMr, mr, plain);
        EXPECT_EQ(h.status, MRC_EINVAL);
        EXPECT_NE(std::string(h.message).find("sealed"), std::string::npos) << h.message;
        const int sealed = ::memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ASSERT_EQ(::ftruncate(sealed, 4096), 0);
        ASSERT_EQ(::fcntl(sealed, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
        mr.length = 1 << 20;
        h = r.req(ipc::Op::kRegMr, mr, sealed);
        EXPECT_EQ(h.status, MRC_EINVAL);
        EXPECT_NE(std::string(h.message).find("smaller"), std::string::npos) << h.message;
        mr.length = 4096;
        mr.access = 0x80;
        EXPECT_EQ(r.req(ipc::Op::kRegMr, mr, sealed).status, MRC_EINVAL);
        ::close(plain);
        ::close(sealed);
        // The admin channel: nonsense in, an error out.
        // (And a page of QPs from a position that is not one.)
        for (const std::string bad :
             {"{not json", R"({"cmd": "qps", "from": -1})", R"({"cmd": "qps", "from": "x"})"}) {
            std::vector<uint8_t> m(sizeof(ipc::ReqHdr) + bad.size()), body;
            ipc::ReqHdr hh{ipc::kMagic, ipc::kVersion, uint16_t(ipc::Op::kAdmin), 99,
                           uint32_t(bad.size())};
            std::memcpy(m.data(), &hh, sizeof hh);
            std::memcpy(m.data() + sizeof hh, bad.data(), bad.size());
            EXPECT_EQ(r.send_raw(m.data(), m.size(), -1, &body).status, MRC_OK);
            EXPECT_NE(std::string(body.begin(), body.end()).find("error"), std::string::npos)
                << bad;
        }
        {  // A page that starts past every QP is empty, and the last.
            const std::string q = R"({"cmd": "qps", "from": 18446744073709551615})";
            std::vector<uint8_t> m(sizeof(ipc::ReqHdr) + q.size()), body;
            ipc::ReqHdr hh{ipc::kMagic, ipc::kVersion, uint16_t(ipc::Op::kAdmin), 98,
                           uint32_t(q.size())};
            std::memcpy(m.data(), &hh, sizeof hh);
            std::memcpy(m.data() + sizeof hh, q.data(), q.size());
            EXPECT_EQ(r.send_raw(m.data(), m.size(), -1, &body).status, MRC_OK);
            const json page = json::parse(std::string(body.begin(), body.end()), nullptr, false);
            EXPECT_TRUE(page.contains("qps") && page["qps"].empty() && !page.contains("next"))
                << std::string(body.begin(), body.end());
        }
    }
    // A name that is not text (it goes into mrcctl's JSON).
    Raw named(s);
    ipc::HelloReq hn{};
    hn.api_version = MRC_API_VERSION;
    const char bad_name[] = {char(0xff), char(0xfe), char(0x01), 0x62, 0x61, 0x64, 0};
    std::memcpy(hn.name, bad_name, sizeof bad_name);
    EXPECT_EQ(named.req(ipc::Op::kHello, hn).status, MRC_OK);
    // Still serving, and it counted them.
    const json st = ctl(d, 'a', {"status"});
    ASSERT_TRUE(st.is_object());
    EXPECT_GE(st["counters"]["bad_requests"].get<int>(), 15) << st;
    Copy c = start_copy(d, 7300, 8 << 20, "after");
    EXPECT_EQ(c.tx->wait_for(60s).value_or(-1), 0) << c.tx->log();
    EXPECT_EQ(c.rx->wait_for(30s).value_or(-1), 0) << c.rx->log();
    finish(d);
}

TEST(Mrcd, WorkRequestsOutOfRangeUnknownKeysFullRing) {
    Daemons d;
    start(d);
    Ends e;
    connect_ends(d, e, 4242, 4);
    mrc_wr wr{};
    wr.opcode = MRC_WR_WRITE;
    wr.local = e.src;
    wr.length = 4096;
    wr.rkey = e.remote.rkey;
    wr.remote_addr = e.remote.addr;
    // Caught in the library, with a message.
    mrc_wr bad = wr;
    bad.local_offset = (1 << 20) - 100;
    EXPECT_EQ(mrc_post_write(e.qa, &bad), MRC_EINVAL);
    EXPECT_NE(std::string(mrc_last_error(e.a)).find("leaves"), std::string::npos);
    bad = wr;
    bad.opcode = 9;
    EXPECT_EQ(mrc_post_write(e.qa, &bad), MRC_EINVAL);
    bad = wr;
    bad.length = 0;
    EXPECT_EQ(mrc_post_write(e.qa, &bad), MRC_EINVAL);
    bad = wr;
    bad.local = e.dst;  // another context's region
    EXPECT_EQ(mrc_post_write(e.qa, &bad), MRC_EINVAL);
    // A good one lands.
    std::memset(mrc_mr_addr(e.src), 0xab, 4096);
    wr.wr_id = 1;
    ASSERT_EQ(mrc_post_write(e.qa, &wr), MRC_OK);
    auto wc = poll_until(e.cqa, 1, 10s);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, MRC_WC_SUCCESS);
    EXPECT_EQ(static_cast<uint8_t *>(mrc_mr_addr(e.dst))[4095], 0xab);
    // A full ring says so: 1 MiB writes, never polled, depth 4.
    int eagain = 0, posted = 0;
    wr.length = 1 << 20;
    for (int i = 0; i < 5000 && !eagain; ++i) {
        const int rc = mrc_post_write(e.qa, &wr);
        if (rc == MRC_EAGAIN)
            ++eagain;
        else if (rc == MRC_OK)
            ++posted;
        else
            ADD_FAILURE() << mrc_last_error(e.a);
    }
    EXPECT_EQ(eagain, 1);
    EXPECT_NE(std::string(mrc_last_error(e.a)).find("full"), std::string::npos);
    // Drain all of it.
    wc = poll_until(e.cqa, size_t(posted), 60s);
    EXPECT_EQ(wc.size(), size_t(posted));
    for (const auto &w : wc)
        EXPECT_EQ(w.status, MRC_WC_SUCCESS);
    // A region still read by work requests cannot be freed (the daemon
    // would read unmapped memory); once they completed it can.
    mrc_mr *big = nullptr;
    ASSERT_EQ(mrc_alloc_mr(e.a, 1 << 20, MRC_ACCESS_LOCAL, 4242, &big), MRC_OK);
    mrc_wr bw = wr;
    bw.local = big;
    bw.length = 1 << 20;
    int queued = 0;
    while (queued < 48) {
        const int rc = mrc_post_write(e.qa, &bw);
        if (rc == MRC_OK)
            ++queued;
        else if (rc != MRC_EAGAIN)
            FAIL() << mrc_last_error(e.a);
        else
            std::this_thread::sleep_for(50us);
    }
    EXPECT_EQ(mrc_free_mr(big), MRC_EBUSY);
    EXPECT_NE(std::string(mrc_last_error(e.a)).find("in progress"), std::string::npos)
        << mrc_last_error(e.a);
    wc = poll_until(e.cqa, size_t(queued), 60s);
    EXPECT_EQ(wc.size(), size_t(queued));
    EXPECT_EQ(mrc_free_mr(big), MRC_OK) << mrc_last_error(e.a);
    // An unknown remote key: the peer refuses, the QP reports the error.
    std::memset(mrc_mr_addr(e.dst), 0x77, 4096);
    wr.length = 4096;
    wr.rkey = e.remote.rkey ^ 0x5500;
    wr.wr_id = 77;
    ASSERT_EQ(mrc_post_write(e.qa, &wr), MRC_OK);
    wc = poll_until(e.cqa, 2, 10s);
    ASSERT_GE(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 77u);
    EXPECT_EQ(wc[0].status, MRC_WC_REMOTE_ACCESS_ERROR);
    if (wc.size() > 1) {
        EXPECT_EQ(wc[1].opcode, MRC_WC_QP_EVENT);
    }
    EXPECT_EQ(mrc_post_write(e.qa, &wr), MRC_ESTATE);
    // The refused write changed nothing on B.
    const auto *dst = static_cast<uint8_t *>(mrc_mr_addr(e.dst));
    EXPECT_EQ(dst[0], 0x77);
    EXPECT_EQ(dst[4095], 0x77);
    mrc_close(e.a);
    mrc_close(e.b);
    finish(d);
}

TEST(Mrcd, HostileRingIndexOnlyHurtsItsOwnQp) {
    Daemons d;
    start(d);
    // A raw client on A builds a QP itself, so it can write what it likes
    // into its send ring; a libmrc listener on B takes the connection.
    mrc_context *b = nullptr;
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK);
    mrc_cq *cqb;
    ASSERT_EQ(mrc_create_cq(b, 64, &cqb), MRC_OK);
    ASSERT_EQ(mrc_listen(b, 555, cqb, nullptr), MRC_OK);
    Raw r(d.sock('a'));
    ASSERT_EQ(r.hello().status, MRC_OK);
    int cqfd = -1, sqfd = -1;
    std::vector<uint8_t> body;
    auto h = r.req(ipc::Op::kCreateCq, ipc::CreateCqReq{64, 0}, -1, &body, &cqfd);
    ASSERT_EQ(h.status, MRC_OK);
    ipc::RingRep cq;
    std::memcpy(&cq, body.data(), sizeof cq);
    h = r.req(ipc::Op::kCreateQp, ipc::CreateQpReq{cq.id, 16}, -1, &body, &sqfd);
    ASSERT_EQ(h.status, MRC_OK);
    ipc::RingRep sq;
    std::memcpy(&sq, body.data(), sizeof sq);
    h = r.req(ipc::Op::kConnect, ipc::ConnectReq{sq.id, 555, 0x0a000002, 10000});
    ASSERT_EQ(h.status, MRC_OK) << h.message;
    auto *cqh = static_cast<ipc::RingHdr *>(
        ::mmap(nullptr, cq.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, cqfd, 0));
    auto *sqh = static_cast<ipc::RingHdr *>(
        ::mmap(nullptr, sq.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sqfd, 0));
    ASSERT_NE(cqh, MAP_FAILED);
    ASSERT_NE(sqh, MAP_FAILED);
    // A work request naming a key this client never registered.
    ipc::Sqe *e = ipc::ring_entries<ipc::Sqe>(sqh);
    e[0] = ipc::Sqe{};
    e[0].wr_id = 5;
    e[0].opcode = MRC_WR_WRITE;
    e[0].lkey = 0x1234501;
    e[0].length = 100;
    sqh->prod.store(1, std::memory_order_release);
    ipc::ring_doorbell(sqh, cqh);
    const ipc::Cqe *c = ipc::ring_entries<ipc::Cqe>(cqh);
    ASSERT_TRUE(wait_until([&] { return cqh->prod.load() >= 2; }, 2s, 1ms));
    EXPECT_EQ(c[0].wr_id, 5u);
    EXPECT_EQ(c[0].status, MRC_WC_LOCAL_PROTECTION_ERROR);
    EXPECT_EQ(c[1].opcode, MRC_WC_QP_EVENT);
    EXPECT_EQ(sqh->state.load(), ipc::kRingError);
    // A second QP, then an index no ring can have.
    int sqfd2 = -1;
    h = r.req(ipc::Op::kCreateQp, ipc::CreateQpReq{cq.id, 16}, -1, &body, &sqfd2);
    ASSERT_EQ(h.status, MRC_OK);
    ipc::RingRep sq2;
    std::memcpy(&sq2, body.data(), sizeof sq2);
    ASSERT_EQ(r.req(ipc::Op::kConnect, ipc::ConnectReq{sq2.id, 555, 0x0a000002, 10000}).status,
              MRC_OK);
    auto *sqh2 = static_cast<ipc::RingHdr *>(
        ::mmap(nullptr, sq2.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sqfd2, 0));
    sqh2->prod.store(0x80000000u, std::memory_order_release);
    ipc::ring_doorbell(sqh2, cqh);
    ASSERT_TRUE(wait_until([&] { return cqh->prod.load() >= 3; }, 2s, 1ms));
    EXPECT_EQ(c[2].opcode, MRC_WC_QP_EVENT);
    EXPECT_EQ(c[2].status, MRC_WC_BAD_REQUEST);
    // A consumer index ahead of the producer: no room, nothing written;
    // the daemon serves others as before meanwhile.
    cqh->cons.store(cqh->prod.load() + 1000);
    Copy cp = start_copy(d, 7400, 8 << 20, "others");
    EXPECT_EQ(cp.tx->wait_for(60s).value_or(-1), 0) << cp.tx->log();
    EXPECT_EQ(cp.rx->wait_for(30s).value_or(-1), 0) << cp.rx->log();
    ::munmap(cqh, cq.map_bytes);
    ::munmap(sqh, sq.map_bytes);
    ::munmap(sqh2, sq2.map_bytes);
    ::close(cqfd);
    ::close(sqfd);
    ::close(sqfd2);
    mrc_close(b);
    finish(d);
}

// The adaptive idle mode (the default) with long poll quanta and no spin:
// the workers sleep between messages, and an application's post wakes its
// daemon's worker through the wake page and the CQ's wake fd (a wake by
// event), not at the end of a quantum. Control: the same time without
// posts brings no such wakes. Every WRITE lands.
TEST(Mrcd, ApplicationPostsWakeASleepingWorker) {
    constexpr uint32_t kService = 7411, kPosts = 12, kBytes = 4096;
    Daemons d;
    d.dataplane_toml =
        "idle = \"adaptive\"\nidle_spin_us = 0\nidle_sleep_us = 50000\n"
        "idle_sleep_max_us = 50000\n";
    start(d);
    {  // The wake page an application gets maps read-only, never writable.
        Raw r(d.sock('a'));
        ipc::HelloReq h{};
        h.api_version = MRC_API_VERSION;
        std::vector<uint8_t> body;
        int page = -1;
        ASSERT_EQ(r.req(ipc::Op::kHello, h, -1, &body, &page).status, MRC_OK);
        ASSERT_GE(page, 0);
        void *rw = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, page, 0);
        EXPECT_EQ(rw, MAP_FAILED) << "an application could write the workers' words";
        if (rw != MAP_FAILED) ::munmap(rw, 4096);
        void *ro = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, page, 0);
        EXPECT_NE(ro, MAP_FAILED);
        if (ro != MAP_FAILED) ::munmap(ro, 4096);
        EXPECT_LT(::write(page, "x", 1), 0);
        ::close(page);
    }
    mrc_context *a = nullptr, *b = nullptr;
    ASSERT_EQ(mrc_open(d.sock('a').c_str(), &a), MRC_OK) << mrc_last_error(nullptr);
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK) << mrc_last_error(nullptr);
    mrc_mr *src = nullptr, *dst = nullptr;
    ASSERT_EQ(mrc_alloc_mr(a, kPosts * kBytes, MRC_ACCESS_LOCAL, kService, &src), MRC_OK);
    ASSERT_EQ(mrc_alloc_mr(b, kPosts * kBytes, MRC_ACCESS_REMOTE_WRITE, kService, &dst), MRC_OK);
    auto *sp = static_cast<uint8_t *>(mrc_mr_addr(src));
    for (uint32_t i = 0; i < kPosts * kBytes; ++i)
        sp[i] = uint8_t(i * 7 + i / kBytes);
    mrc_remote_mr remote{};
    mrc_mr_remote(dst, &remote);
    mrc_cq *cqa = nullptr, *cqb = nullptr;
    ASSERT_EQ(mrc_create_cq(a, 64, &cqa), MRC_OK);
    ASSERT_EQ(mrc_create_cq(b, 64, &cqb), MRC_OK);
    mrc_qp_attr attr{4};
    ASSERT_EQ(mrc_listen(b, kService, cqb, &attr), MRC_OK) << mrc_last_error(b);
    mrc_qp *qa = nullptr, *qb = nullptr;
    ASSERT_EQ(mrc_create_qp(a, cqa, &attr, &qa), MRC_OK) << mrc_last_error(a);
    std::thread acceptor([&] { mrc_accept(b, kService, 20000, &qb); });
    const int crc = mrc_connect(qa, d.ip('b').c_str(), kService, 20000);
    acceptor.join();
    ASSERT_EQ(crc, MRC_OK) << mrc_last_error(a);
    ASSERT_NE(qb, nullptr);
    const auto wakes = [&] {
        return ctl(d, 'a', {"status"})["worker"]["wakes_event"].get<uint64_t>();
    };
    const uint64_t w0 = wakes();
    std::this_thread::sleep_for(std::chrono::milliseconds(60 * kPosts));
    const uint64_t w1 = wakes();
    for (uint32_t i = 0; i < kPosts; ++i) {
        std::this_thread::sleep_for(60ms);  // the worker is asleep by now
        mrc_wr wr{};
        wr.wr_id = i;
        wr.opcode = MRC_WR_WRITE;
        wr.local = src;
        wr.local_offset = uint64_t{i} * kBytes;
        wr.length = kBytes;
        wr.rkey = remote.rkey;
        wr.remote_addr = remote.addr + uint64_t{i} * kBytes;
        ASSERT_EQ(mrc_post_write(qa, &wr), MRC_OK) << mrc_last_error(a);
        mrc_wc wc{};
        int n = 0;
        for (int t = 0; t < 20000 && n == 0; ++t) {
            n = mrc_poll_cq(cqa, &wc, 1);
            if (n == 0) std::this_thread::sleep_for(1ms);
        }
        ASSERT_EQ(n, 1) << "WRITE " << i << " not completed";
        ASSERT_EQ(wc.status, MRC_WC_SUCCESS) << mrc_wc_status_str(wc.status);
    }
    const uint64_t w2 = wakes();
    // mrcctl's own request reaches the worker as a command: one wake each.
    EXPECT_LE(w1 - w0, 3u) << "wakes by event without posts";
    EXPECT_GE(w2 - w1, kPosts - 2) << "wakes by event with " << kPosts << " posts";
    EXPECT_EQ(std::memcmp(mrc_mr_addr(dst), sp, kPosts * kBytes), 0);
    mrc_close(a);
    mrc_close(b);
    finish(d);
}

TEST(Mrcd, MrcctlShowsAndSteers) {
    Daemons d;
    d.plane_toml = "dscp_data = 26\ndscp_control = 46\ndscp_cm = 48\n";
    start(d);
    auto [srv, cli] = start_tool(d, "mrc_write_bw", "bw", {}, {"-D", "6"});
    ASSERT_TRUE(srv && cli);
    wait_moving(d);
    const json q = ctl(d, 'a', {"qps"});
    ASSERT_FALSE(q["qps"].empty()) << q;
    const json &qp = q["qps"][0];
    EXPECT_EQ(qp["state"], "RTS");
    EXPECT_EQ(qp["peer"], d.ip('b'));
    // Both planes, unless one is briefly out while the run starts (slow builds).
    EXPECT_NE(qp["usable_planes"], 0);
    EXPECT_GT(qp["evs"]["GOOD"].get<int>(), 0);
    const uint32_t qpn = qp["qpn"];
    int rc = -1;
    ctl(d, 'a', {"deny", "plane", "1"}, &rc);
    EXPECT_EQ(rc, 0);
    json p1;
    EXPECT_TRUE(wait_until(
        [&] {
            p1 = ctl(d, 'a', {"ports"});
            return p1.is_object() && p1["ports"][1]["health"] == "denied";
        },
        10s, 50ms))
        << p1;
    for (const json &port : p1["ports"])
        EXPECT_EQ(port["dscp"], json({{"data", 26}, {"control", 46}, {"cm", 48}})) << port;
    const uint64_t before = p1["ports"][1]["tx_data_pkts"];
    const uint64_t before0 = p1["ports"][0]["tx_data_pkts"];
    // Data leaves the denied plane: under 10% of what plane 0 carries
    // meanwhile (2000 packets at least), where it had half before. (A
    // trickle of first transmissions still goes to it: 0.5% in fast builds,
    // 3% under ASan -- a known issue of the plane denial in the core,
    // recorded for its own work.)
    json p2;
    uint64_t d0 = 0, d1 = 0;
    EXPECT_TRUE(wait_until(
        [&] {
            p2 = ctl(d, 'a', {"ports"});
            if (!p2.is_object()) return false;
            d1 = p2["ports"][1]["tx_data_pkts"].get<uint64_t>() - before;
            d0 = p2["ports"][0]["tx_data_pkts"].get<uint64_t>() - before0;
            return d0 >= 2000;
        },
        5s, 50ms))
        << "plane 0 carried " << d0 << " packets: " << p2;
    EXPECT_LT(d1 * 10, d0) << p2;
    ctl(d, 'a', {"allow", "plane", "1"}, &rc);
    EXPECT_EQ(rc, 0);
    ctl(d, 'a', {"deny", "ev", std::to_string(qpn), "50000"}, &rc);
    EXPECT_EQ(rc, 0);
    const json evs = ctl(d, 'a', {"evs"});
    ASSERT_EQ(evs["denied_evs"].size(), 1u) << evs;
    EXPECT_EQ(evs["denied_evs"][0]["qpn"], qpn);
    ctl(d, 'a', {"allow", "ev", std::to_string(qpn), "50000"}, &rc);
    EXPECT_EQ(ctl(d, 'a', {"evs"})["denied_evs"].size(), 0u);
    // The same over DPDK telemetry.
    const json t1 = json::parse(telemetry_query(d.prefix_a, "/mrcd/status"), nullptr, false);
    ASSERT_TRUE(t1.is_object()) << t1;
    EXPECT_EQ(t1["/mrcd/status"]["qps"], 1) << t1;
    EXPECT_GE(t1["/mrcd/status"]["accepts"].get<int>(), 1) << t1;
    const json t2 = json::parse(telemetry_query(d.prefix_a, "/mrc/qps"), nullptr, false);
    EXPECT_NE(t2.dump().find(std::to_string(qpn)), std::string::npos) << t2;
    // Wrong requests: a clear refusal.
    const Done e1 =
        run({app("mrcctl"), "--socket", d.sock('a'), "deny", "plane", "7"}, d.dir + "/e1.log", 20s);
    EXPECT_EQ(e1.rc, 1);
    EXPECT_NE(e1.log.find("plane must be 0 .. 1"), std::string::npos) << e1.log;
    ctl(d, 'a', {"deny", "ev", "999999", "1"}, &rc);
    EXPECT_EQ(rc, 1);
    ctl(d, 'a', {"frobnicate"}, &rc);
    EXPECT_EQ(rc, 2);
    // The text forms print.
    const Done t = run({app("mrcctl"), "--socket", d.sock('a'), "ports"}, d.dir + "/t.log", 20s);
    EXPECT_EQ(t.rc, 0);
    EXPECT_NE(t.log.find("net_memif1"), std::string::npos) << t.log;
    EXPECT_EQ(cli->wait_for(60s).value_or(-1), 0) << cli->log();
    EXPECT_EQ(srv->wait_for(20s).value_or(-1), 0) << srv->log();
    finish(d);
}

TEST(Mrcd, ThroughTheFabricAPlaneFailsMidTransfer) {
    Daemons d;
    // Plane 1 goes down 300 ms after the first data frame and stays down.
    start(d, "", true, {"--schedule", "at_ms=300,plane=1,down"});
    Copy c = start_copy(d, 7500, 192ull << 20, "fab");
    const auto trc = c.tx->wait_for(180s), rrc = c.rx->wait_for(30s);
    EXPECT_EQ(trc.value_or(-1), 0) << c.tx->log();
    EXPECT_EQ(rrc.value_or(-1), 0) << c.rx->log();
    EXPECT_NE(c.rx->log().find("201326592 bytes, 0 wrong"), std::string::npos) << c.rx->log();
    const json ports = ctl(d, 'a', {"ports"});
    std::printf("after the plane failure: %s\n", ports.dump().c_str());
    d.fabric->stop(5000ms);
    EXPECT_NE(d.fabric->log().find("schedule: "), std::string::npos) << d.fabric->log();
    finish(d);
}

}  // namespace
}  // namespace mrc::test

namespace mrc::test {
namespace {

TEST(Mrcd, MinimalProgramOfTheDocsRuns) {
    // docs/api.md carries app/examples/minimal.c verbatim.
    const std::string src = read_file(std::string(MRC_SOURCE_DIR) + "/app/examples/minimal.c");
    const std::string doc = read_file(std::string(MRC_SOURCE_DIR) + "/docs/api.md");
    ASSERT_FALSE(src.empty());
    EXPECT_NE(doc.find("```c\n" + src + "```"), std::string::npos)
        << "docs/api.md and app/examples/minimal.c differ";
    Daemons d;
    start(d);
    auto srv =
        Subprocess::start({"/usr/bin/env", "MRC_SOCKET=" + d.sock('b'), app("minimal"), "server"},
                          d.dir + "/server.log");
    std::string first;
    for (int i = 0; i < 200 && first.empty(); ++i) {
        const std::string l = srv->log();
        if (l.find('\n') != std::string::npos) first = l.substr(0, l.find('\n'));
        std::this_thread::sleep_for(20ms);
    }
    const size_t sp = first.find(' ');
    ASSERT_NE(sp, std::string::npos) << srv->log();
    const Done c = run({"/usr/bin/env", "MRC_SOCKET=" + d.sock('a'), app("minimal"), "client",
                        d.ip('b'), first.substr(0, sp), first.substr(sp + 1)},
                       d.dir + "/client.log", 30s);
    EXPECT_EQ(c.rc, 0) << c.log;
    EXPECT_EQ(srv->wait_for(20s).value_or(-1), 0) << srv->log();
    EXPECT_NE(srv->log().find("got 15 bytes, imm 42: hello over MRC"), std::string::npos)
        << srv->log();
    finish(d);
}

// mrc_connect_many (issue 18): hundreds of QPs connected in one call (more
// than one CONNECT window), each then moving its own verified data; the
// batch's refusals are per QP and named.
TEST(Mrcd, ConnectManyConnectsHundredsOfQpsEachMovingVerifiedData) {
    constexpr uint32_t kQps = 300, kService = 7311, kSlot = 1024;
    Daemons d;
    start(d);
    mrc_context *a = nullptr, *b = nullptr;
    ASSERT_EQ(mrc_open(d.sock('a').c_str(), &a), MRC_OK) << mrc_last_error(nullptr);
    ASSERT_EQ(mrc_open(d.sock('b').c_str(), &b), MRC_OK) << mrc_last_error(nullptr);
    mrc_mr *src = nullptr, *dst = nullptr;
    ASSERT_EQ(mrc_alloc_mr(a, kQps * kSlot, MRC_ACCESS_LOCAL, kService, &src), MRC_OK);
    ASSERT_EQ(mrc_alloc_mr(b, kQps * kSlot, MRC_ACCESS_REMOTE_WRITE, kService, &dst), MRC_OK);
    auto *s = static_cast<uint8_t *>(mrc_mr_addr(src));
    for (uint32_t i = 0; i < kQps * kSlot; ++i)
        s[i] = uint8_t(i * 31 + i / kSlot);
    mrc_remote_mr remote{};
    mrc_mr_remote(dst, &remote);
    mrc_cq *cqa = nullptr, *cqb = nullptr;
    ASSERT_EQ(mrc_create_cq(a, 4096, &cqa), MRC_OK);
    ASSERT_EQ(mrc_create_cq(b, 4096, &cqb), MRC_OK);
    mrc_qp_attr attr{4};
    ASSERT_EQ(mrc_listen(b, kService, cqb, &attr), MRC_OK) << mrc_last_error(b);
    std::vector<mrc_qp *> qa(kQps);
    for (auto &q : qa)
        ASSERT_EQ(mrc_create_qp(a, cqa, &attr, &q), MRC_OK) << mrc_last_error(a);

    // Refused as a whole before anything is sent: a QP named twice.
    std::vector<mrc_qp *> twice{qa[0], qa[1], qa[0]};
    EXPECT_EQ(mrc_connect_many(twice.data(), 3, d.ip('b').c_str(), kService, 5000, nullptr),
              MRC_EINVAL);
    EXPECT_NE(std::string(mrc_last_error(a)).find("named twice"), std::string::npos)
        << mrc_last_error(a);
    EXPECT_EQ(mrc_connect_many(qa.data(), 0, d.ip('b').c_str(), kService, 5000, nullptr),
              MRC_EINVAL);

    // The server accepts while the batch runs (its backlog is bounded).
    std::vector<mrc_qp *> qb;
    std::thread acceptor([&] {
        for (uint32_t i = 0; i < kQps; ++i) {
            mrc_qp *q = nullptr;
            if (mrc_accept(b, kService, 20000, &q) != MRC_OK) return;
            qb.push_back(q);
        }
    });
    std::vector<int> status(kQps, 1);
    const int rc =
        mrc_connect_many(qa.data(), kQps, d.ip('b').c_str(), kService, 20000, status.data());
    acceptor.join();
    ASSERT_EQ(rc, MRC_OK) << mrc_last_error(a);
    for (uint32_t i = 0; i < kQps; ++i)
        EXPECT_EQ(status[i], MRC_OK) << "QP " << i;
    ASSERT_EQ(qb.size(), kQps);

    // Connected QPs of the batch are refused by a second one, per QP.
    std::vector<int> again(2, 1);
    EXPECT_EQ(mrc_connect_many(qa.data(), 2, d.ip('b').c_str(), kService, 5000, again.data()),
              MRC_ESTATE);

    // Every QP writes its own slot; every slot arrives intact.
    for (uint32_t i = 0; i < kQps; ++i) {
        const mrc_wr wr = slot_write(src, remote, kSlot, i, i);
        ASSERT_EQ(mrc_post_write(qa[i], &wr), MRC_OK) << mrc_last_error(a);
    }
    const auto wcs = poll_until(cqa, kQps, 30s);
    ASSERT_EQ(wcs.size(), kQps);
    std::vector<bool> seen(kQps, false);
    for (const auto &w : wcs) {
        EXPECT_EQ(w.status, MRC_WC_SUCCESS) << "wr " << w.wr_id;
        if (w.wr_id < kQps) seen[w.wr_id] = true;
    }
    for (uint32_t i = 0; i < kQps; ++i)
        EXPECT_TRUE(seen[i]) << "QP " << i;
    EXPECT_EQ(std::memcmp(mrc_mr_addr(dst), s, kQps * kSlot), 0);
    EXPECT_EQ(mrc_close(a), MRC_OK);
    EXPECT_EQ(mrc_close(b), MRC_OK);
    finish(d);
}

TEST(Mrcd, BadConfigurationsAreRefusedByName) {
    const std::string dir = make_temp_dir("mrcd-cfg");
    const Done ok =
        run({app("mrcd"), "--check-config", std::string(MRC_SOURCE_DIR) + "/config/mrcd.toml"},
            dir + "/ok.log", 20s);
    EXPECT_EQ(ok.rc, 0) << ok.log;
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"[daemon]\nsocket_mode = \"rw\"\n", "socket_mode"},
        {"[daemon]\nmax_clients = 0\n", "max_clients"},
        {"[dataplane]\nidle = \"spin\"\n", "idle"},
        {"[dataplane]\nmtu = 100\n", "mtu"},
        {"[dataplane]\nport = [\"x\"]\n", "unknown key 'port'"},
        {"[[plane]]\nip = \"10.0.0.300\"\n", "10.0.0.300"},
        {"[qp]\ncc = \"reno\"\n", "cc must be"},
        {"[qp]\nretry_limit = 99\n", "retry_limit"},
        {"[[neighbor]]\nip = \"10.0.0.2\"\nmac = \"zz\"\n", "mac"},
        {"[deamon]\n", "unknown table 'deamon'"},
        {"[daemon\n", "line 1"},
        {"[daemon]\nmax_clients = 4\n", "no [[plane]]"},
        {"[qp]\nev_range = \"9-3\"\n", "ev_range"},
        {"[[plane]]\nip = \"10.0.0.1\"\ndscp_data = 64\n", "dscp_data must be"},
        {"[[plane]]\nip = \"10.0.0.1\"\ndscp_cm = -1\n", "dscp_cm must be"},
        {"[[plane]]\nip = \"10.0.0.1\"\n[qp]\nevs_per_plane = 16\nev_range = \"50000-50010\"\n",
         "holds fewer ports"},
        {"[[plane]]\nip = \"10.0.0.1/33\"\n", "prefix length 0-32"},
        {"[[plane]]\nip = \"10.0.0.1\"\ngateway = \"10.0.0.254\"\n", "gateway needs the prefix"},
        {"[[plane]]\nip = \"10.0.0.1/24\"\ngateway = \"10.0.1.254\"\n",
         "not another host on the subnet"},
        {"[[plane]]\nip = \"10.0.0.1/24\"\ngateway = \"10.0.0.1\"\n", "not another host"},
        {"[[plane]]\nip = \"10.0.0.1/24\"\ngateway = \"x\"\n", "gateway: 'x'"},
        {"[[plane]]\nip = \"0.0.0.0/8\"\n", "are not a host's"},
    };
    int i = 0;
    for (const auto &[text, want] : bad) {
        const std::string f = dir + "/bad" + std::to_string(i++) + ".toml";
        std::FILE *fp = std::fopen(f.c_str(), "w");
        std::fputs(text.c_str(), fp);
        std::fclose(fp);
        const Done r = run({app("mrcd"), "--check-config", f}, f + ".log", 20s);
        EXPECT_EQ(r.rc, 2) << text;
        EXPECT_NE(r.log.find(want), std::string::npos) << text << " -> " << r.log;
    }
    // A config that disagrees with the ports: refused at start, nothing left behind.
    std::FILE *fp = std::fopen((dir + "/one.toml").c_str(), "w");
    std::fputs(
        ("[daemon]\nsocket = \"" + dir + "/x.sock\"\n[[plane]]\nip = \"10.0.0.1\"\n").c_str(), fp);
    std::fclose(fp);
    const std::string prefix = "mrcd-cfg-" + std::to_string(getpid());
    auto c = dpdk_cmd(app("mrcd"), prefix, "0@0,1@1");
    for (int p = 0; p < 2; ++p)
        c.push_back("--vdev=net_null" + std::to_string(p));
    c.insert(c.end(), {"--", "--config", dir + "/one.toml"});
    const Done r = run(c, dir + "/start.log", 60s);
    EXPECT_EQ(r.rc, 2) << r.log;
    EXPECT_NE(r.log.find("1 [[plane]] addresses for 2 ports"), std::string::npos) << r.log;
    EXPECT_NE(sh("test -e /var/run/dpdk/" + prefix), 0);
    sh("rm -rf " + dir);
}

}  // namespace
}  // namespace mrc::test
