#include "generator.h"

#include <cstdio>

#include "common/sleep.h"
#include "json_channel.h"

namespace mrc::gen {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

void Generator::client() {
    auto oob_addr = app::parse_host_port(o_.oob, 18515);
    if (!oob_addr) die(oob_addr.error().message);
    create_qps();
    auto conn = app::JsonChannel::connect(oob_addr->first, oob_addr->second,
                                          static_cast<uint32_t>(o_.timeout_s * 1000),
                                          &app::stop_flag(), "mrc-gen server");
    if (!conn) die(conn.error().message);
    json hello = {{"hello",
                   {{"version", kProtocolVersion},
                    {"mode", to_string(mode_)},
                    {"qps", o_.qps},
                    {"msg_bytes", o_.msg_bytes},
                    {"slots", slots_},
                    {"verify", o_.verify},
                    {"planes", planes_},
                    {"mrc_port", o_.mrc_port},
                    {"side", side_json(me_)}}}};
    if (auto r = conn->send(hello); !r) die(r.error().message);
    auto reply = conn->recv(static_cast<uint32_t>(o_.timeout_s * 1000), &app::stop_flag());
    if (!reply) die(reply.error().message);
    if (!*reply)
        die(app::stop_requested()
                ? std::string("interrupted")
                : fmt::format("the server did not answer within {} s", o_.timeout_s));
    const json &rj = **reply;
    if (rj.contains("error")) die("the server refused: " + rj["error"].get<std::string>());
    std::string why;
    auto peer = side_from(rj.value("ok", json::object()), o_.qps, planes_, &why);
    if (!peer) die(why);
    if (!peer_ips_override_.empty())
        for (uint8_t p = 0; p < planes_; ++p)
            if (peer->ips[p] != peer_ips_override_[p])
                die(fmt::format("--peer-ip: plane {} is {} at the server, not {}", p,
                                wire::ipv4_string(peer->ips[p]),
                                wire::ipv4_string(peer_ips_override_[p])));
    connect_qps(*peer);
    // The links up (with a direct link the server's needs this end's), but
    // the QPs run only once the server says it polls: on a loaded machine
    // its start can take longer than the QPs' liveness timeout.
    if (auto r = dp_->wait_links(); !r) die(r.error().message);
    auto ready = conn->recv(static_cast<uint32_t>(o_.timeout_s * 1000), &app::stop_flag());
    if (!ready) die("waiting for the server to start: " + ready.error().message);
    if (!*ready || !(*ready)->contains("ready"))
        die(app::stop_requested() ? std::string("interrupted")
            : (*ready && (*ready)->contains("error"))
                ? "the server could not start: " + (**ready)["error"].get<std::string>()
                : fmt::format("the server did not start within {} s", o_.timeout_s));
    if (auto r = dp_->launch(); !r) die(r.error().message);

    t0_ = Clock::now();
    next_stats_s_ = o_.stats_period_s;
    bool draining = false;
    double drain_started = 0;
    double end_s = 0;
    const double drain_limit_s = 30;
    for (;;) {
        mrc::sleep_for_steady(std::chrono::milliseconds(5));
        const double t = elapsed_s();
        tick(t);
        bool all_drained = true, all_failed = true;
        for (const auto &a : apps_) {
            all_drained = all_drained && a->stats().drained.load(std::memory_order_acquire);
            all_failed = all_failed && a->stats().qp_errors.load() >= a->qps().size();
        }
        // The server going away shows on the TCP connection at once.
        auto msg = conn->recv(0);
        if (!msg) {
            failure_ = "server went away: " + msg.error().message;
            break;
        }
        if (!draining) {
            const bool time_up = o_.duration_s > 0 && t >= o_.duration_s;
            if (time_up || app::stop_requested() || all_failed || (o_.total_bytes && all_drained)) {
                draining = true;
                drain_started = t;
                for (auto &a : apps_)
                    a->drain();
                if (app::stop_requested()) failure_ = "interrupted";
                if (all_failed) failure_ = "every QP failed";
            }
        }
        if (draining) {
            if (all_drained || all_failed) break;
            if (t - drain_started > drain_limit_s) {
                uint64_t left = 0;
                for (const auto &a : apps_)
                    left += a->stats().outstanding.load();
                failure_ = fmt::format("{} messages still outstanding {} s after the end", left,
                                       drain_limit_s);
                break;
            }
        }
    }
    end_s = elapsed_s();
    // The transfer is over: stop driving the QPs before the server stops
    // its own (on "done"), or their liveness check would take the silent
    // server for a dead one.
    dp_->stop();
    // Tell the server what to check, and collect its verdict.
    if (failure_.rfind("server went away", 0) != 0) {
        json slots = json::array();
        for (uint32_t i = 0; i < o_.qps; ++i) {
            const GenQp &g = apps_[i % dp_->workers()]->qps()[i / dp_->workers()];
            slots.push_back(g.last_done);
        }
        uint64_t messages = 0;
        for (const auto &a : apps_)
            messages += a->stats().messages.load();
        if (auto r = conn->send({{"done", {{"messages", messages}, {"slots", slots}}}}); !r) {
            failure_ = r.error().message;
        } else {
            auto res = conn->recv(30'000);
            if (res && *res && (*res)->contains("result"))
                peer_result_ = (**res)["result"];
            else
                failure_ = "the server did not report its result";
        }
    }
    dp_->stop();
    end_s_ = end_s;
    // Tear down in order: this end closes its ports first, then tells the
    // server, which closes its own once it saw the links go down. (DPDK
    // 22.11's memif can crash when both ends close at the same moment.)
    summary_ = summary(end_s_);
    dp::telemetry_attach(nullptr);
    dp_.reset();
    // The server may be gone already: nothing to do about it.
    (void)conn->send({{"bye", true}});
}

void Generator::server() {
    auto oob_addr = app::parse_host_port(o_.oob, 18515);
    if (!oob_addr) die(oob_addr.error().message);
    std::printf("mrc-gen server: %u planes, waiting for a client on %s:%u\n", unsigned(planes_),
                oob_addr->first.c_str(), unsigned(oob_addr->second));
    std::fflush(stdout);
    auto conn =
        app::JsonChannel::accept(oob_addr->first, oob_addr->second,
                                 static_cast<uint32_t>(o_.timeout_s * 1000), &app::stop_flag());
    if (!conn) die(conn.error().message);
    auto hello_msg = conn->recv(static_cast<uint32_t>(o_.timeout_s * 1000), &app::stop_flag());
    if (app::stop_requested()) die("interrupted");
    if (!hello_msg || !*hello_msg || !(*hello_msg)->contains("hello"))
        die("the client did not introduce itself");
    const json h = (**hello_msg)["hello"];
    auto refuse = [&](const std::string &why) {
        // Best effort: the refusal ends this run whether or not it arrives.
        (void)conn->send({{"error", why}});
        die("refused the client: " + why);
    };
    try {
        if (h.at("version").get<int>() != kProtocolVersion)
            refuse(fmt::format("protocol version {} (this server speaks {})",
                               h.at("version").get<int>(), kProtocolVersion));
        // The client decides the workload; the server follows it.
        o_.qps = h.at("qps").get<uint32_t>();
        o_.msg_bytes = h.at("msg_bytes").get<uint32_t>();
        slots_ = h.at("slots").get<uint32_t>();
        o_.verify = h.at("verify").get<bool>();
        const std::string m = h.at("mode").get<std::string>();
        mode_ = m == "write_imm"  ? Mode::kWriteImm
                : m == "pingpong" ? Mode::kPingpong
                                  : Mode::kWrite;
        if (h.at("planes").get<uint32_t>() != planes_)
            refuse(fmt::format("the client has {} planes, this server {}",
                               h.at("planes").get<uint32_t>(), planes_));
        if (h.at("mrc_port").get<uint16_t>() != o_.mrc_port)
            refuse(fmt::format("MRC UDP port {} (this server uses {})",
                               h.at("mrc_port").get<uint16_t>(), o_.mrc_port));
    } catch (const std::exception &e) {
        refuse(std::string("malformed hello: ") + e.what());
    }
    if (o_.qps == 0 || o_.qps > 4096) refuse("QP count out of range [1, 4096]");
    if (o_.msg_bytes == 0 || slots_ == 0 || uint64_t{slots_} * o_.msg_bytes > (1ull << 30))
        refuse("message size x slots out of range (1 GiB per QP at most)");
    if (o_.qps > dp_->workers() * dp_->config().max_qps_per_worker)
        refuse(fmt::format("{} QPs: this server was started for at most {}", o_.qps,
                           dp_->workers() * dp_->config().max_qps_per_worker));
    std::string why;
    auto peer = side_from(h.at("side"), o_.qps, planes_, &why);
    if (!peer) refuse(why);
    create_qps();
    connect_qps(*peer);
    if (auto r = conn->send({{"ok", side_json(me_)}}); !r) die(r.error().message);
    if (auto r = dp_->start(); !r) {
        (void)conn->send({{"error", r.error().message}});  // best effort, as a refusal
        die(r.error().message);
    }
    // Polling now: the client's QPs may start.
    if (auto r = conn->send({{"ready", true}}); !r) die(r.error().message);
    std::printf("mrc-gen server: client connected: %s, %u QPs, %u-byte messages%s\n",
                to_string(mode_), o_.qps, o_.msg_bytes, o_.verify ? ", verified" : "");
    t0_ = Clock::now();
    next_stats_s_ = o_.stats_period_s;
    json done;
    for (;;) {
        auto msg = conn->recv(5);
        tick(elapsed_s());
        if (!msg) {
            failure_ = "client went away before the end: " + msg.error().message;
            break;
        }
        if (*msg && (*msg)->contains("done")) {
            done = (**msg)["done"];
            break;
        }
        if (app::stop_requested()) {
            failure_ = "interrupted";
            break;
        }
    }
    const double end_s = elapsed_s();
    dp_->stop();
    // Write mode: what the client last wrote into each slot must be there.
    uint64_t wr_verified = 0, wr_errors = 0;
    if (done.is_object() && mode_ == Mode::kWrite && o_.verify)
        wr_errors = verify_write_slots(done.value("slots", json()), &wr_verified);
    uint64_t verified = wr_verified, verify_errors = wr_errors, messages = 0, qp_errors = 0;
    for (const auto &a : apps_) {
        verified += a->stats().verified_bytes.load();
        verify_errors += a->stats().verify_errors.load();
        messages += a->stats().messages.load();
        qp_errors += a->stats().qp_errors.load();
    }
    if (done.is_object()) {
        if (auto r = conn->send({{"result",
                                  {{"bytes_verified", verified},
                                   {"verify_errors", verify_errors},
                                   {"messages_received", messages},
                                   {"qp_errors", qp_errors}}}});
            !r)
            failure_ = "could not report the result to the client: " + r.error().message;
    }
    own_verified_ = wr_verified;
    own_verify_errors_ = wr_errors;
    end_s_ = end_s;
    summary_ = summary(end_s_);
    if (done.is_object()) {
        // The client closes its ports first (see client()).
        const auto until = Clock::now() + std::chrono::seconds(5);
        while (Clock::now() < until) {
            auto m = conn->recv(100);
            if (!m || (*m && (*m)->contains("bye"))) break;
        }
        for (int i = 0; i < 200 && dp_->planes() && any_link_up(); ++i)
            mrc::sleep_for_steady(std::chrono::milliseconds(10));
    }
    dp::telemetry_attach(nullptr);
    dp_.reset();
}

}  // namespace mrc::gen
