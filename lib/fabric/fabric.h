// The impairment fabric: what happens to a frame between two endpoints'
// ports, decided per emulated path, as a switch fabric with ECMP would.
//
// A fabric has P planes (one port pair each) and K paths per plane; an MRC
// frame takes the path its UDP source port (the EV) hashes to. Each path has
// two directions (A to B, B to A), each with its own parameters and counters:
// link down, blackhole, random and burst loss, a rate limit with a bounded
// queue (ECN marks above a threshold, trimming or dropping on overflow),
// propagation delay with jitter, reordering and duplication. Frames that are
// not MRC (ARP, ...) pass unchanged and at once.
//
// Pure C++: no DPDK, no threads, no clock. The caller passes the time in and
// hands frames over with an opaque handle (an mbuf pointer in mrc-fabric, an
// integer in the tests); frames leave through egress() when they are due.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/rng.h"
#include "wire/mrc.h"

namespace mrc::fabric {

inline constexpr uint32_t kMaxPaths = 256;

enum Dir : uint8_t { kAtoB = 0, kBtoA = 1 };
const char *to_string(Dir d);

// What one direction of one path does to frames. The keys of Setting are
// these field names (docs/fabric.md describes each).
struct PathParams {
    bool down = false;                  // the path is down: everything is dropped
    bool blackhole = false;             // everything is dropped, silently (a broken path)
    double loss = 0;                    // probability that a frame is dropped
    double burst_enter = 0;             // Gilbert-Elliott: probability good -> bad, per frame
    double burst_exit = 0.5;            // ... bad -> good, per frame
    double burst_loss = 1;              // ... probability of a drop in the bad state
    double rate_gbps = 0;               // output rate; 0: unlimited (no queue)
    uint32_t queue_bytes = 256 * 1024;  // the rate limiter's queue bound
    uint32_t ecn_bytes = 0;             // mark CE when the queue holds more; 0: never
    bool trim = false;                  // on overflow, cut MRC data packets to their headers
    double delay_us = 0;                // propagation delay
    double jitter_us = 0;               // extra delay, uniform in [0, jitter_us]
    double reorder = 0;                 // probability that a frame is held back reorder_us more
    double reorder_us = 100;
    double duplicate = 0;  // probability that a frame is sent twice
};

// Counters of one direction of one path, declared once as data: the struct,
// the names for JSON and telemetry and the documentation all come from here.
#define MRC_FABRIC_PATH_COUNTERS(X)                                                             \
    X(rx_pkts, "frames that entered the path")                                                  \
    X(rx_bytes, "bytes that entered the path")                                                  \
    X(tx_pkts, "frames released to the output port (duplicates included)")                      \
    X(tx_bytes, "bytes that left the path (after trimming)")                                    \
    X(drop_down, "dropped: the path was down")                                                  \
    X(drop_blackhole, "dropped: the path was a blackhole")                                      \
    X(drop_loss, "dropped by random loss")                                                      \
    X(drop_burst, "dropped by burst loss (in the Gilbert-Elliott bad state)")                   \
    X(drop_queue, "dropped: the queue was full (trimming off, or not an untrimmed data frame)") \
    X(drop_delay_full, "dropped: the delay line was full")                                      \
    X(trimmed, "data frames cut to their headers because the queue was full")                   \
    X(ecn_marked, "frames marked CE because the queue was above ecn_bytes")                     \
    X(duplicated, "extra copies sent")                                                          \
    X(reordered, "frames held back by the reorder delay")

#define MRC_FABRIC_COUNTER_FIELD(name, doc) uint64_t name = 0;
#define MRC_FABRIC_COUNTER_COUNT(name, doc) +1
struct PathCounters {
    MRC_FABRIC_PATH_COUNTERS(MRC_FABRIC_COUNTER_FIELD)
    static constexpr size_t kCount = 0 MRC_FABRIC_PATH_COUNTERS(MRC_FABRIC_COUNTER_COUNT);
    const uint64_t *array() const { return &rx_pkts; }
    uint64_t *array() { return &rx_pkts; }
    PathCounters &operator+=(const PathCounters &o) {
        for (size_t i = 0; i < kCount; ++i)
            array()[i] += o.array()[i];
        return *this;
    }
};
static_assert(sizeof(PathCounters) == PathCounters::kCount * sizeof(uint64_t));
struct CounterInfo {
    const char *name;
    const char *doc;
};
#define MRC_FABRIC_COUNTER_INFO(name, doc) {#name, doc},
inline constexpr CounterInfo kPathCounterInfo[] = {
    MRC_FABRIC_PATH_COUNTERS(MRC_FABRIC_COUNTER_INFO)};
#undef MRC_FABRIC_COUNTER_INFO

// Per plane and direction: frames that are not MRC, passed through.
struct PlaneCounters {
    uint64_t passed = 0;  // not MRC (ARP, other UDP ports, ...): forwarded unchanged
    uint64_t passed_bytes = 0;
};

// Which paths a setting applies to; -1: all.
struct Selector {
    int plane = -1;
    int path = -1;
    bool a_to_b = true;
    bool b_to_a = true;
};

// A change of parameters: "plane=0,path=3,dir=ab,loss=0.01,delay_us=20".
struct Setting {
    Selector sel;
    std::vector<std::pair<std::string, std::string>> kv;  // parameter = value
};
// A setting applied at a time after the start ("at_ms=500,plane=1,down=1").
struct Event {
    uint64_t at_ns = 0;
    Setting setting;
};

// What mrc-fabric --capture-path keeps: a plane, optionally one path of it,
// optionally one direction.
struct CaptureSelector {
    int plane = -1, path = -1;  // -1: every one
    bool ab = true, ba = true;
};
// "PLANE[:PATH[:ab|ba]]", checked against the fabric's size.
Result<CaptureSelector> parse_capture_selector(std::string_view s, uint32_t planes, uint32_t paths);

// Parses "key=value,key=value". Selector keys: plane, path, dir (ab, ba,
// both); everything else must name a PathParams field, checked by
// Fabric::apply (or check_setting). Errors name the offending item.
Result<Setting> parse_setting(std::string_view spec);
// The same with a mandatory at_ms (or at_us) key.
Result<Event> parse_event(std::string_view spec);
// Applies one key to a PathParams (for validation and apply); the error
// names the key and says what is allowed.
Result<void> set_param(PathParams *p, std::string_view key, std::string_view value);
// Every parameter key, in PathParams order.
const std::vector<std::string> &param_keys();

// A bounded time-ordered queue of frames: a binary min-heap on (due time,
// arrival order), so frames due at the same time leave in arrival order.
// Fixed capacity, allocated once: push() on a full line fails.
class DelayLine {
  public:
    struct Item {
        uint64_t due_ns;
        uint64_t seq;
        uint64_t handle;
        uint32_t len;
        uint16_t path;
    };
    explicit DelayLine(uint32_t capacity) : cap_(capacity) { heap_.reserve(capacity); }
    bool push(uint64_t due_ns, uint64_t handle, uint32_t len, uint16_t path);
    // The earliest item, if due at `now_ns`.
    bool pop_due(uint64_t now_ns, Item *out);
    const Item *top() const { return heap_.empty() ? nullptr : &heap_.front(); }
    size_t size() const { return heap_.size(); }
    uint32_t capacity() const { return cap_; }

  private:
    static bool before(const Item &a, const Item &b) {
        return a.due_ns != b.due_ns ? a.due_ns < b.due_ns : a.seq < b.seq;
    }
    uint32_t cap_;
    uint64_t seq_ = 0;
    std::vector<Item> heap_;
};

struct FabricConfig {
    uint32_t planes = 1;
    uint32_t paths = 4;  // per plane
    uint16_t mrc_port = wire::kDefaultMrcPort;
    uint64_t seed = 1;
    uint32_t delay_slots = 4096;    // frames each plane and direction can hold
    std::vector<Setting> settings;  // applied in order at the start
    std::vector<Event> schedule;    // applied when due
};

// What ingress() did with a frame.
enum class Verdict : uint8_t {
    kPass,         // not MRC: send it now, unchanged (it is not queued)
    kQueued,       // queued on the delay line; egress() returns it when due
    kQueuedTwice,  // duplicated: the handle is queued twice (take a second reference)
    kDropped,      // dropped (the path's counters say why): free it
};

class Fabric {
  public:
    // Checks the configuration (every setting and event) and applies the
    // settings; the error names the offending setting and key.
    static Result<Fabric> create(const FabricConfig &cfg);

    uint32_t planes() const { return planes_; }
    uint32_t paths() const { return paths_; }
    // The path an EV takes (a fixed hash of the UDP source port, as ECMP).
    uint32_t path_of(uint16_t ev) const;

    // A frame arrives on plane `plane`, direction `dir`. The frame may be
    // changed in place (trimmed: *len shrinks; CE-marked). Time in ns, from
    // any origin, never going back.
    Verdict ingress(uint32_t plane, Dir dir, uint8_t *frame, uint32_t *len, uint64_t handle,
                    uint64_t now_ns);
    // Takes up to `max` frames due at `now_ns` on (plane, dir), in due order.
    uint32_t egress(uint32_t plane, Dir dir, uint64_t now_ns, DelayLine::Item *out, uint32_t max);
    // Takes up to `max` frames of (plane, dir) whatever their time, without
    // counting them as sent: for shutting down.
    uint32_t drain(uint32_t plane, Dir dir, DelayLine::Item *out, uint32_t max);
    // When the next frame of (plane, dir) is due; UINT64_MAX when none.
    uint64_t next_due(uint32_t plane, Dir dir) const;
    size_t queued(uint32_t plane, Dir dir) const { return line(plane, dir).size(); }

    // Whether a setting names planes and paths that exist and values that
    // are allowed (another thread may call it: it reads only the shape).
    Result<void> check(const Setting &s) const;
    // Applies a setting now; nothing changes when any part of it is wrong.
    Result<void> apply(const Setting &s);
    // Applies the schedule's events due by `elapsed_ns` since the start;
    // returns how many.
    uint32_t run_schedule(uint64_t elapsed_ns);
    // Settings applied (start, schedule, run time): readers compare it.
    uint64_t generation() const { return generation_; }

    const PathParams &params(uint32_t plane, uint32_t path, Dir dir) const {
        return paths_v_[index(plane, path, dir)].params;
    }
    const PathCounters &counters(uint32_t plane, uint32_t path, Dir dir) const {
        return paths_v_[index(plane, path, dir)].ctr;
    }
    const PlaneCounters &plane_counters(uint32_t plane, Dir dir) const {
        return plane_ctr_[plane * 2 + dir];
    }
    // Every path's counters, in (plane, path, dir) order: for snapshots.
    void copy_counters(std::vector<PathCounters> *out) const;
    void copy_params(std::vector<PathParams> *out) const;

  private:
    struct PathState {
        PathParams params;
        PathCounters ctr;
        uint64_t busy_until_ns = 0;  // the rate limiter's queue drains by then
        uint64_t busy_frac_ps = 0;   // ... and this many picoseconds
        bool burst_bad = false;
    };
    Fabric() = default;
    size_t index(uint32_t plane, uint32_t path, Dir dir) const {
        return (size_t(plane) * paths_ + path) * 2 + dir;
    }
    const DelayLine &line(uint32_t plane, Dir dir) const { return lines_[plane * 2 + dir]; }

    uint32_t planes_ = 0;
    uint32_t paths_ = 0;
    uint16_t mrc_port_ = wire::kDefaultMrcPort;
    Rng rng_;
    std::vector<PathState> paths_v_;
    std::vector<PlaneCounters> plane_ctr_;
    std::vector<DelayLine> lines_;
    std::vector<Event> schedule_;  // sorted by time
    size_t next_event_ = 0;
    uint64_t generation_ = 0;
};

}  // namespace mrc::fabric
