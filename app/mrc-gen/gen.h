// mrc-gen's traffic: one GenApp per worker drives that worker's QPs from
// inside the worker loop (run to completion, no locks). The main thread
// reads GenStats (relaxed atomics, one writer each) for live lines, and
// everything else once the workers have stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/qp.h"
#include "dpdk/dataplane.h"

namespace mrc::gen {

enum class Role : uint8_t { kServer, kClient };
enum class Mode : uint8_t { kWrite, kWriteImm, kPingpong };
const char *to_string(Mode m);

struct GenConfig {
    Role role = Role::kClient;
    Mode mode = Mode::kWrite;
    uint32_t msg_bytes = 65536;
    uint32_t depth = 4;  // messages outstanding per QP (pingpong: 1)
    uint32_t slots = 8;  // message slots per QP in the target region
    bool verify = false;
    uint64_t byte_budget = 0;  // this worker's share of --total-bytes (0: none)
    double rate_gbps = 0;      // this worker's share of --rate-gbps (0: as fast as possible)
    uint32_t max_latency_samples = 1u << 21;
};

struct alignas(64) GenStats {
    std::atomic<uint64_t> messages{0};  // completed (client) or received (server)
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> verified_bytes{0};
    std::atomic<uint64_t> verify_errors{0};  // messages that did not match
    std::atomic<uint64_t> outstanding{0};
    std::atomic<uint32_t> qp_errors{0};
    std::atomic<bool> drained{false};  // client: stopped posting and nothing is outstanding
};

// One QP of the generator and the memory it uses.
struct GenQp {
    Qp *qp = nullptr;
    uint32_t index = 0;        // the same on both sides: QP i talks to the peer's QP i
    uint8_t *local = nullptr;  // slots x msg_bytes, registered with remote write access
    uint32_t local_rkey = 0;
    uint64_t remote_addr = 0;  // the peer's region for this QP
    uint32_t remote_rkey = 0;
    uint64_t next_seq = 0;
    uint32_t outstanding = 0;
    bool errored = false;
    std::vector<uint64_t> post_ns;   // per slot: when its message was posted
    std::vector<int64_t> last_done;  // per slot: last completed message (write mode; -1: none)
};

class GenApp final : public dp::WorkerApp {
  public:
    explicit GenApp(const GenConfig &cfg) : cfg_(cfg) {}
    const GenConfig &config() const { return cfg_; }
    std::vector<GenQp> &qps() { return qps_; }
    void add_qp(GenQp q);

    uint32_t poll(dp::Worker &w, uint64_t now_ns) override;
    // With --rate: when the token bucket holds the next message again.
    uint64_t next_due_ns(uint64_t now_ns) const override;

    // Main thread.
    const GenStats &stats() const { return stats_; }
    void drain() { draining_.store(true, std::memory_order_release); }
    // After the workers stopped.
    const std::vector<uint32_t> &latency_ns() const { return lat_; }
    const std::string &first_error() const { return first_error_; }
    uint64_t latency_dropped() const { return lat_dropped_; }

  private:
    void post(GenQp &q, uint64_t now_ns);
    void on_error(GenQp &q, const std::string &why);
    void sample(uint64_t ns);
    uint32_t poll_client(GenQp &q, uint64_t now_ns);
    uint32_t poll_server(GenQp &q, uint64_t now_ns);

    GenConfig cfg_;
    std::vector<GenQp> qps_;
    GenStats stats_;
    std::atomic<bool> draining_{false};
    std::vector<uint32_t> lat_;
    uint64_t lat_dropped_ = 0;
    std::string first_error_;
    uint64_t posted_bytes_ = 0;
    double tokens_bits_ = 0;
    uint64_t tokens_ns_ = 0;
    uint32_t cursor_ = 0;
    // Completion buffers: members, so a poll does not construct (and clear)
    // arrays on every call.
    SendCompletion sc_[32];
    RecvCompletion rc_[32];
};

// Latency percentile (p in [0, 1]) of samples in ns, in microseconds.
double percentile_us(std::vector<uint32_t> &samples, double p);

}  // namespace mrc::gen
