#include "generator.h"

#include <cstdio>

#include "cycles_text.h"
#include "plane_json.h"

namespace mrc::gen {

using nlohmann::json;

std::string Generator::stats_line(double t) {
    uint64_t bytes = 0, qp_err = 0;
    for (const auto &a : apps_) {
        bytes += a->stats().bytes.load(std::memory_order_relaxed);
        qp_err += a->stats().qp_errors.load(std::memory_order_relaxed);
    }
    const dp::WorkerSnapshot s = dp_->totals();
    const uint64_t frames = s.worker.tx_packets + s.worker.rx_packets;
    const double dt = t - last_t_;
    const double gbps = dt > 0 ? double(bytes - last_bytes_) * 8 / dt / 1e9 : 0;
    const double mpps = dt > 0 ? double(frames - last_frames_) / dt / 1e6 : 0;
    last_bytes_ = bytes;
    last_frames_ = frames;
    last_t_ = t;
    const dp::QpSummary q = dp_->qp_totals();
    uint64_t port_total = 0;
    uint64_t per[kMaxPlanes] = {};
    for (uint8_t p = 0; p < planes_; ++p) {
        per[p] = role_ == Role::kClient ? s.planes[p].tx_data_pkts + s.planes[p].tx_retx_pkts
                                        : s.port_rx_pkts[p];
        port_total += per[p];
    }
    std::string share, links;
    for (uint8_t p = 0; p < planes_; ++p) {
        share +=
            fmt::format("{}{:.0f}%", p ? "/" : "", port_total ? 100.0 * per[p] / port_total : 0);
        links += (dp_->link_up_mask() >> p) & 1 ? 'U' : 'D';
    }
    return fmt::format(
        "[{:6.1f}s] goodput {:7.2f} Gb/s  {:6.3f} Mpps  retx {}  ports {} links {}  qp_errors {}",
        t, gbps, mpps, q.sum.tx_retx_pkts, share, links, std::max<uint64_t>(qp_err, q.qps_error));
}

json Generator::summary(double elapsed_s) {
    uint64_t messages = 0, bytes = 0, verified = 0, verify_errors = 0, qp_errors = 0;
    std::vector<uint32_t> lat;
    uint64_t lat_dropped = 0;
    std::string first_error;
    for (const auto &a : apps_) {
        messages += a->stats().messages.load();
        bytes += a->stats().bytes.load();
        verified += a->stats().verified_bytes.load();
        verify_errors += a->stats().verify_errors.load();
        qp_errors += a->stats().qp_errors.load();
        lat.insert(lat.end(), a->latency_ns().begin(), a->latency_ns().end());
        lat_dropped += a->latency_dropped();
        if (first_error.empty()) first_error = a->first_error();
    }
    const dp::WorkerSnapshot s = dp_->totals();
    const dp::QpSummary q = dp_->qp_totals();
    qp_errors = std::max<uint64_t>(qp_errors, q.qps_error);
    verified += own_verified_;
    verify_errors += own_verify_errors_;
    if (peer_result_.is_object()) {
        verified += peer_result_.value("bytes_verified", uint64_t{0});
        verify_errors += peer_result_.value("verify_errors", uint64_t{0});
    }
    // A WRITE tells the server nothing: count what its QPs placed.
    if (role_ == Role::kServer && mode_ == Mode::kWrite) bytes = q.sum.rx_data_bytes;
    json j;
    j["role"] = role_ == Role::kClient ? "client" : "server";
    j["mode"] = to_string(mode_);
    j["qps"] = o_.qps;
    j["msg_bytes"] = o_.msg_bytes;
    j["planes"] = planes_;
    j["mtu_payload_bytes"] = mtu_payload_;
    j["workers"] = dp_->workers();
    j["verify"] = o_.verify;
    j["elapsed_s"] = elapsed_s;
    j["goodput_gbps"] = elapsed_s > 0 ? double(bytes) * 8 / elapsed_s / 1e9 : 0;
    j["mpps"] =
        elapsed_s > 0 ? double(s.worker.tx_packets + s.worker.rx_packets) / elapsed_s / 1e6 : 0;
    j["tx_mpps"] = elapsed_s > 0 ? double(s.worker.tx_packets) / elapsed_s / 1e6 : 0;
    j["rx_mpps"] = elapsed_s > 0 ? double(s.worker.rx_packets) / elapsed_s / 1e6 : 0;
    j["messages"] = messages;
    j["bytes"] = bytes;
    j["bytes_verified"] = verified;
    j["verify_errors"] = verify_errors;
    j["retransmissions"] = q.sum.tx_retx_pkts;
    j["qp_errors"] = qp_errors;
    if (!first_error.empty()) j["first_error"] = first_error;
    if (!failure_.empty()) j["failure"] = failure_;
    if (!lat.empty()) {
        j["latency_us"] = {{"samples", lat.size()},
                           {"dropped", lat_dropped},
                           {"p50", percentile_us(lat, 0.50)},
                           {"p99", percentile_us(lat, 0.99)},
                           {"p999", percentile_us(lat, 0.999)},
                           {"max", percentile_us(lat, 1.0)}};
    }
    json ports = json::array();
    for (uint8_t p = 0; p < planes_; ++p) {
        ports.push_back(app::plane_json(*dp_, s, p));
        ports.back()["cut"] = ((dp_->cut_mask() >> p) & 1) != 0;
        ports.back()["ip"] = p < local_ip6_.size() && local_ip6_[p]
                                 ? wire::ipv6_string(*local_ip6_[p])
                                 : wire::ipv4_string(p < local_ips_.size() ? local_ips_[p] : 0);
    }
    j["ports"] = ports;
    json wc, ec, qc;
    const uint64_t *w = dp::counter_array(s.worker);
    for (size_t i = 0; i < dp::WorkerCounters::kCount; ++i)
        wc[dp::kWorkerCounterInfo[i].name] = w[i];
    const uint64_t *e = counter_array(s.endpoint);
    for (size_t i = 0; i < kEndpointCounterCount; ++i)
        ec[kEndpointCounterInfo[i].name] = e[i];
    const uint64_t *c = counter_array(q.sum);
    for (size_t i = 0; i < kQpCounterCount; ++i)
        qc[kQpCounterInfo[i].name] = c[i];
    j["worker_counters"] = wc;
    j["cycles_per_packet"] = app::cycles_json(s.worker);
    j["endpoint_counters"] = ec;
    j["qp_counters"] = qc;
    if (peer_result_.is_object()) j["peer"] = peer_result_;
    return j;
}

int Generator::finish() {
    if (summary_.is_null()) summary_ = summary(end_s_);
    json &j = summary_;
    const uint64_t verify_errors = j["verify_errors"].get<uint64_t>();
    const uint64_t qp_errors = j["qp_errors"].get<uint64_t>();
    std::printf("---- mrc-gen %s summary ----\n", j["role"].get<std::string>().c_str());
    std::printf("mode %s, %u QPs, %u-byte messages, %u planes, %u workers, %.2f s\n",
                to_string(mode_), o_.qps, o_.msg_bytes, unsigned(planes_),
                j["workers"].get<unsigned>(), end_s_);
    std::printf("goodput %.2f Gb/s, %.3f Mpps (tx %.3f, rx %.3f), %llu messages, %llu bytes\n",
                j["goodput_gbps"].get<double>(), j["mpps"].get<double>(),
                j["tx_mpps"].get<double>(), j["rx_mpps"].get<double>(),
                (unsigned long long)j["messages"].get<uint64_t>(),
                (unsigned long long)j["bytes"].get<uint64_t>());
    std::printf(
        "verified %llu bytes, %llu verify errors, %llu retransmissions, %llu QP errors\n",
        (unsigned long long)j["bytes_verified"].get<uint64_t>(), (unsigned long long)verify_errors,
        (unsigned long long)j["retransmissions"].get<uint64_t>(), (unsigned long long)qp_errors);
    if (j.contains("latency_us"))
        std::printf("latency p50 %.1f us, p99 %.1f us, p99.9 %.1f us (%llu samples)\n",
                    j["latency_us"]["p50"].get<double>(), j["latency_us"]["p99"].get<double>(),
                    j["latency_us"]["p999"].get<double>(),
                    (unsigned long long)j["latency_us"]["samples"].get<uint64_t>());
    std::printf("cycles per packet %s, TSC %.2f GHz\n",
                app::cycles_text(j["cycles_per_packet"]).c_str(),
                double(j["cycles_per_packet"]["tsc_hz"].get<uint64_t>()) / 1e9);
    for (const auto &p : j["ports"])
        std::printf("plane %u %-12s tx %llu rx %llu frames, link %s%s\n",
                    p["plane"].get<unsigned>(), p["port"].get<std::string>().c_str(),
                    (unsigned long long)p["tx_packets"].get<uint64_t>(),
                    (unsigned long long)p["rx_packets"].get<uint64_t>(),
                    p["link"].get<std::string>().c_str(), p["cut"].get<bool>() ? " (cut)" : "");
    for (const auto &p : j["ports"])
        if (p.contains("xdp"))
            std::printf(
                "plane %u XDP on %s (%s): %llu steered to DPDK, %llu to the kernel, "
                "%llu MRC with no socket, %llu MRC to another address\n",
                p["plane"].get<unsigned>(), p["xdp"]["iface"].get<std::string>().c_str(),
                p["xdp"]["mode"].get<std::string>().c_str(),
                (unsigned long long)p["xdp"]["steered"].get<uint64_t>(),
                (unsigned long long)p["xdp"]["to_kernel"].get<uint64_t>(),
                (unsigned long long)p["xdp"]["no_socket"].get<uint64_t>(),
                (unsigned long long)p["xdp"]["other_address"].get<uint64_t>());
    const auto &wc = j["worker_counters"];
    if (wc["rx_stray"].get<uint64_t>() || wc["rx_bad_cksum"].get<uint64_t>())
        std::printf("dropped: %llu stray frames, %llu bad checksums\n",
                    (unsigned long long)wc["rx_stray"].get<uint64_t>(),
                    (unsigned long long)wc["rx_bad_cksum"].get<uint64_t>());
    if (j.contains("first_error"))
        std::printf("first error: %s\n", j["first_error"].get<std::string>().c_str());
    if (!failure_.empty()) std::printf("FAILED: %s\n", failure_.c_str());
    if (o_.rate_gbps > 0 && role_ == Role::kClient && failure_.empty() &&
        j["goodput_gbps"].get<double>() < 0.9 * o_.rate_gbps)
        std::printf("note: asked for %.2f Gb/s, the ports carried %.2f Gb/s\n", o_.rate_gbps,
                    j["goodput_gbps"].get<double>());
    std::fflush(stdout);
    if (!o_.json_path.empty())
        if (auto r = app::write_json_file(o_.json_path, j); !r)
            std::fprintf(stderr, "mrc-gen: %s\n", r.error().message.c_str());
    const bool ok = failure_.empty() && verify_errors == 0 && qp_errors == 0 &&
                    (!o_.verify || j["bytes_verified"].get<uint64_t>() > 0 ||
                     j["messages"].get<uint64_t>() == 0);
    return ok ? 0 : 1;
}

}  // namespace mrc::gen
