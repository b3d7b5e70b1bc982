#include "fabric/fabric.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "common/key_values.h"

namespace mrc::fabric {

const char *to_string(Dir d) {
    return d == kAtoB ? "ab" : "ba";
}

// ---- parameters -----------------------------------------------------------------

namespace {

std::string str(std::string_view s) {
    return std::string(s);
}

Result<void> set_range(double *field, std::string_view key, std::string_view v, double lo,
                       double hi, const char *what) {
    auto d = parse_number(key, v);
    if (!d) return d.error();
    if (*d < lo || *d > hi) return Error{str(key) + "=" + str(v) + ": " + what};
    *field = *d;
    return ok();
}

Result<void> set_u32(uint32_t *field, std::string_view key, std::string_view v, uint32_t lo,
                     uint32_t hi) {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi)
        return Error{str(key) + "=" + str(v) + ": expected a whole number in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]"};
    *field = static_cast<uint32_t>(n);
    return ok();
}

Result<void> set_flag(bool *field, std::string_view key, std::string_view v) {
    auto b = parse_bool(key, v);
    if (!b) return b.error();
    *field = *b;
    return ok();
}

constexpr double kMaxDelayUs = 10e6;  // 10 s: more is a mistake, not a network

const char *const kParamKeys[] = {
    "down",       "blackhole", "loss",        "burst_enter", "burst_exit",
    "burst_loss", "rate_gbps", "queue_bytes", "ecn_bytes",   "trim",
    "delay_us",   "jitter_us", "reorder",     "reorder_us",  "duplicate",
};

std::string known_keys() {
    std::string s;
    for (const char *k : kParamKeys) {
        if (!s.empty()) s += ", ";
        s += k;
    }
    return s;
}

}  // namespace

const std::vector<std::string> &param_keys() {
    static const std::vector<std::string> keys(std::begin(kParamKeys), std::end(kParamKeys));
    return keys;
}

Result<void> set_param(PathParams *p, std::string_view key, std::string_view v) {
    constexpr const char *prob = "a probability: must be within [0, 1]";
    if (key == "down") return set_flag(&p->down, key, v);
    if (key == "blackhole") return set_flag(&p->blackhole, key, v);
    if (key == "trim") return set_flag(&p->trim, key, v);
    if (key == "loss") return set_range(&p->loss, key, v, 0, 1, prob);
    if (key == "burst_enter") return set_range(&p->burst_enter, key, v, 0, 1, prob);
    if (key == "burst_exit") return set_range(&p->burst_exit, key, v, 0, 1, prob);
    if (key == "burst_loss") return set_range(&p->burst_loss, key, v, 0, 1, prob);
    if (key == "reorder") return set_range(&p->reorder, key, v, 0, 1, prob);
    if (key == "duplicate") return set_range(&p->duplicate, key, v, 0, 1, prob);
    if (key == "rate_gbps") {
        double r = 0;
        if (auto e =
                set_range(&r, key, v, 0, 1e4, "must be 0 (unlimited) or within [0.001, 10000]");
            !e)
            return e;
        if (r != 0 && r < 1e-3)
            return Error{str(key) + "=" + str(v) +
                         ": must be 0 (unlimited) or within [0.001, 10000]"};
        p->rate_gbps = r;
        return ok();
    }
    if (key == "delay_us")
        return set_range(&p->delay_us, key, v, 0, kMaxDelayUs, "must be within [0, 10 s]");
    if (key == "jitter_us")
        return set_range(&p->jitter_us, key, v, 0, kMaxDelayUs, "must be within [0, 10 s]");
    if (key == "reorder_us")
        return set_range(&p->reorder_us, key, v, 0, kMaxDelayUs, "must be within [0, 10 s]");
    if (key == "queue_bytes") return set_u32(&p->queue_bytes, key, v, 64, 1u << 30);
    if (key == "ecn_bytes") return set_u32(&p->ecn_bytes, key, v, 0, 1u << 30);
    return Error{"unknown key '" + str(key) + "' (known: plane, path, dir, " + known_keys() + ")"};
}

// ---- settings -------------------------------------------------------------------

namespace {

Result<int> parse_index(std::string_view key, std::string_view v) {
    if (v == "*" || v == "all") return -1;
    int n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < 0)
        return Error{str(key) + "=" + str(v) + ": expected a number, '*' or 'all'"};
    return n;
}

Result<Setting> setting_from(KeyValues kv, std::string_view spec) {
    Setting s;
    for (auto &[k, v] : kv) {
        if (k == "plane" || k == "path") {
            auto n = parse_index(k, v);
            if (!n) return n.error();
            (k == "plane" ? s.sel.plane : s.sel.path) = *n;
        } else if (k == "dir") {
            auto d = parse_direction(k, v);
            if (!d) return d.error();
            s.sel.a_to_b = *d != Direction::kBtoA;
            s.sel.b_to_a = *d != Direction::kAtoB;
        } else {
            PathParams scratch;
            if (auto r = set_param(&scratch, k, v); !r) return r.error();
            s.kv.emplace_back(std::move(k), std::move(v));
        }
    }
    if (s.kv.empty()) return Error{"'" + str(spec) + "' changes nothing (no parameter given)"};
    return s;
}

}  // namespace

Result<Setting> parse_setting(std::string_view spec) {
    auto kv = split_key_values(spec);
    if (!kv) return kv.error();
    return setting_from(std::move(*kv), spec);
}

Result<Event> parse_event(std::string_view spec) {
    auto kv = split_key_values(spec);
    if (!kv) return kv.error();
    Event e;
    bool have_time = false;
    KeyValues rest;
    for (auto &[k, v] : *kv) {
        if (k == "at_ms" || k == "at_us") {
            auto d = parse_number(k, v);
            if (!d) return d.error();
            if (*d < 0 || *d > 1e12) return Error{k + "=" + v + ": must be a time >= 0"};
            e.at_ns = static_cast<uint64_t>(*d * (k == "at_ms" ? 1e6 : 1e3));
            have_time = true;
        } else {
            rest.emplace_back(std::move(k), std::move(v));
        }
    }
    if (!have_time) return Error{"'" + str(spec) + "': an event needs at_ms (or at_us)"};
    auto s = setting_from(std::move(rest), spec);
    if (!s) return s.error();
    e.setting = std::move(*s);
    return e;
}

Result<CaptureSelector> parse_capture_selector(std::string_view s, uint32_t planes,
                                               uint32_t paths) {
    const Error bad{"expected PLANE[:PATH[:ab|ba]]"};
    std::vector<std::string_view> parts;
    for (size_t start = 0;;) {
        const size_t colon = s.find(':', start);
        parts.push_back(s.substr(start, colon == std::string_view::npos ? colon : colon - start));
        if (colon == std::string_view::npos) break;
        start = colon + 1;
    }
    if (parts.size() > 3) return bad;
    auto number = [](std::string_view v, uint32_t *out) {
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
        return !v.empty() && ec == std::errc() && end == v.data() + v.size();
    };
    CaptureSelector c;
    uint32_t n = 0;
    if (!number(parts[0], &n)) return bad;
    if (n >= planes)
        return Error{"no plane " + std::to_string(n) + " (" + std::to_string(planes) + " planes)"};
    c.plane = int(n);
    if (parts.size() >= 2) {
        if (!number(parts[1], &n)) return bad;
        if (n >= paths)
            return Error{"no path " + std::to_string(n) + " (" + std::to_string(paths) +
                         " paths per plane)"};
        c.path = int(n);
    }
    if (parts.size() == 3) {
        if (parts[2] != "ab" && parts[2] != "ba") return Error{"direction must be ab or ba"};
        c.ab = parts[2] == "ab";
        c.ba = parts[2] == "ba";
    }
    return c;
}

// ---- delay line -----------------------------------------------------------------

bool DelayLine::push(uint64_t due_ns, uint64_t handle, uint32_t len, uint16_t path) {
    if (heap_.size() >= cap_) return false;
    heap_.push_back({due_ns, seq_++, handle, len, path});
    size_t i = heap_.size() - 1;
    while (i > 0) {
        const size_t parent = (i - 1) / 2;
        if (!before(heap_[i], heap_[parent])) break;
        std::swap(heap_[i], heap_[parent]);
        i = parent;
    }
    return true;
}

bool DelayLine::pop_due(uint64_t now_ns, Item *out) {
    if (heap_.empty() || heap_.front().due_ns > now_ns) return false;
    *out = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    size_t i = 0;
    for (;;) {
        const size_t l = 2 * i + 1, r = l + 1;
        size_t m = i;
        if (l < n && before(heap_[l], heap_[m])) m = l;
        if (r < n && before(heap_[r], heap_[m])) m = r;
        if (m == i) break;
        std::swap(heap_[i], heap_[m]);
        i = m;
    }
    return true;
}

// ---- the fabric -----------------------------------------------------------------

Result<Fabric> Fabric::create(const FabricConfig &cfg) {
    if (cfg.planes < 1 || cfg.planes > kMaxPlanes)
        return Error{"planes=" + std::to_string(cfg.planes) + ": must be within [1, " +
                     std::to_string(kMaxPlanes) + "]"};
    if (cfg.paths < 1 || cfg.paths > kMaxPaths)
        return Error{"paths=" + std::to_string(cfg.paths) + ": must be within [1, " +
                     std::to_string(kMaxPaths) + "]"};
    if (cfg.delay_slots < 1 || cfg.delay_slots > (1u << 20))
        return Error{"delay_slots=" + std::to_string(cfg.delay_slots) +
                     ": must be within [1, 1048576]"};
    Fabric f;
    f.planes_ = cfg.planes;
    f.paths_ = cfg.paths;
    f.mrc_port_ = cfg.mrc_port;
    f.rng_.reseed(cfg.seed);
    f.paths_v_.resize(size_t(cfg.planes) * cfg.paths * 2);
    f.plane_ctr_.resize(size_t(cfg.planes) * 2);
    for (uint32_t i = 0; i < cfg.planes * 2; ++i)
        f.lines_.emplace_back(cfg.delay_slots);
    for (size_t i = 0; i < cfg.settings.size(); ++i)
        if (auto r = f.check(cfg.settings[i]); !r)
            return Error{"setting " + std::to_string(i + 1) + ": " + r.error().message};
    for (size_t i = 0; i < cfg.schedule.size(); ++i)
        if (auto r = f.check(cfg.schedule[i].setting); !r)
            return Error{"schedule event " + std::to_string(i + 1) + ": " + r.error().message};
    for (const Setting &s : cfg.settings)
        (void)f.apply(s);
    f.schedule_ = cfg.schedule;
    std::stable_sort(f.schedule_.begin(), f.schedule_.end(),
                     [](const Event &a, const Event &b) { return a.at_ns < b.at_ns; });
    return f;
}

uint32_t Fabric::path_of(uint16_t ev) const {
    // A fixed mix of the 16 bits (the murmur3 finaliser), as a switch's
    // ECMP hash: neighbouring EVs land on unrelated paths.
    uint32_t h = ev;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h % paths_;
}

Result<void> Fabric::check(const Setting &s) const {
    if (s.sel.plane >= int(planes_))
        return Error{"plane=" + std::to_string(s.sel.plane) + ": no such plane (" +
                     std::to_string(planes_) + " planes, from 0)"};
    if (s.sel.path >= int(paths_))
        return Error{"path=" + std::to_string(s.sel.path) + ": no such path (" +
                     std::to_string(paths_) + " paths per plane, from 0)"};
    PathParams scratch;
    for (const auto &[k, v] : s.kv)
        if (auto r = set_param(&scratch, k, v); !r) return r;
    return ok();
}

Result<void> Fabric::apply(const Setting &s) {
    if (auto r = check(s); !r) return r;
    for (uint32_t pl = 0; pl < planes_; ++pl) {
        if (s.sel.plane >= 0 && uint32_t(s.sel.plane) != pl) continue;
        for (uint32_t pa = 0; pa < paths_; ++pa) {
            if (s.sel.path >= 0 && uint32_t(s.sel.path) != pa) continue;
            for (Dir d : {kAtoB, kBtoA}) {
                if ((d == kAtoB && !s.sel.a_to_b) || (d == kBtoA && !s.sel.b_to_a)) continue;
                PathState &ps = paths_v_[index(pl, pa, d)];
                for (const auto &[k, v] : s.kv)
                    (void)set_param(&ps.params, k, v);  // checked above
                if (!ps.params.burst_enter) ps.burst_bad = false;
            }
        }
    }
    ++generation_;
    return ok();
}

uint32_t Fabric::run_schedule(uint64_t elapsed_ns) {
    uint32_t n = 0;
    while (next_event_ < schedule_.size() && schedule_[next_event_].at_ns <= elapsed_ns) {
        (void)apply(schedule_[next_event_++].setting);  // checked by create()
        ++n;
    }
    return n;
}

Verdict Fabric::ingress(uint32_t plane, Dir dir, uint8_t *frame, uint32_t *len, uint64_t handle,
                        uint64_t now_ns) {
    wire::UdpView u;
    if (wire::parse_eth_ipv4_udp(frame, *len, &u) != wire::NetError::kOk ||
        u.udp->dst_port.get() != mrc_port_) {
        PlaneCounters &pc = plane_ctr_[plane * 2 + dir];
        ++pc.passed;
        pc.passed_bytes += *len;
        return Verdict::kPass;
    }
    const uint32_t path = path_of(u.udp->src_port.get());
    PathState &ps = paths_v_[index(plane, path, dir)];
    const PathParams &p = ps.params;
    PathCounters &c = ps.ctr;
    ++c.rx_pkts;
    c.rx_bytes += *len;
    if (p.down) {
        ++c.drop_down;
        return Verdict::kDropped;
    }
    if (p.blackhole) {
        ++c.drop_blackhole;
        return Verdict::kDropped;
    }
    if (p.loss > 0 && rng_.chance(p.loss)) {
        ++c.drop_loss;
        return Verdict::kDropped;
    }
    if (p.burst_enter > 0) {
        ps.burst_bad = ps.burst_bad ? !rng_.chance(p.burst_exit) : rng_.chance(p.burst_enter);
        if (ps.burst_bad && rng_.chance(p.burst_loss)) {
            ++c.drop_burst;
            return Verdict::kDropped;
        }
    }
    // The rate limiter: a queue that drains at rate_gbps, kept as the time
    // it will be empty (ns, plus the picoseconds below a nanosecond, so that
    // serialisation times do not round down frame after frame). Its depth
    // in bytes is that backlog at the line rate. Nothing is committed --
    // queue time, marks, counters -- until the frame has its place in the
    // delay line.
    uint64_t leave_ns = now_ns;
    uint64_t busy_ns = ps.busy_until_ns, busy_ps = ps.busy_frac_ps;
    bool trimmed = false, marked = false;
    if (p.rate_gbps > 0) {
        const uint64_t backlog_ns = busy_ns > now_ns ? busy_ns - now_ns : 0;
        const double backlog_bytes = double(backlog_ns) * p.rate_gbps / 8;
        if (backlog_bytes + *len > p.queue_bytes) {
            const bool untrimmed_data = u.payload_bytes >= sizeof(wire::BaseHdr) &&
                                        (u.payload[0] == uint8_t(wire::Opcode::kWrite) ||
                                         u.payload[0] == uint8_t(wire::Opcode::kWriteImm)) &&
                                        !(u.payload[1] & wire::kFlagTrimmed);
            const uint16_t old_cksum = u.udp->checksum.get();
            const uint32_t cut =
                p.trim && untrimmed_data ? wire::trim_data_packet(frame, *len, false) : 0;
            if (cut == 0) {
                ++c.drop_queue;
                return Verdict::kDropped;
            }
            // The headers go on at once, ahead of the queue (switches send
            // trimmed headers on a priority queue).
            *len = cut;
            trimmed = true;
            if (old_cksum != 0) {
                auto *udp = const_cast<wire::UdpHdr *>(u.udp);
                udp->checksum.set(wire::ipv4_udp_checksum(*u.ip, udp, udp->length.get()));
            }
        } else {
            marked = p.ecn_bytes && backlog_bytes > p.ecn_bytes;
            if (busy_ns <= now_ns) {
                busy_ns = now_ns;
                busy_ps = 0;
            }
            busy_ps += static_cast<uint64_t>(std::llround(double(*len) * 8000 / p.rate_gbps));
            busy_ns += busy_ps / 1000;
            busy_ps %= 1000;
            leave_ns = busy_ns;
        }
    }
    double delay_us = p.delay_us;
    if (p.jitter_us > 0) delay_us += rng_.uniform() * p.jitter_us;
    const bool held = p.reorder > 0 && rng_.chance(p.reorder);
    if (held) delay_us += p.reorder_us;
    const uint64_t due = leave_ns + static_cast<uint64_t>(delay_us * 1000);
    DelayLine &dl = lines_[plane * 2 + dir];
    if (!dl.push(due, handle, *len, uint16_t(path))) {
        ++c.drop_delay_full;
        return Verdict::kDropped;
    }
    ps.busy_until_ns = busy_ns;
    ps.busy_frac_ps = busy_ps;
    c.trimmed += trimmed;
    c.reordered += held;
    if (marked && wire::mark_ce(*const_cast<wire::Ipv4Hdr *>(u.ip))) ++c.ecn_marked;
    if (p.duplicate > 0 && rng_.chance(p.duplicate) && dl.push(due, handle, *len, uint16_t(path))) {
        ++c.duplicated;
        return Verdict::kQueuedTwice;
    }
    return Verdict::kQueued;
}

uint32_t Fabric::drain(uint32_t plane, Dir dir, DelayLine::Item *out, uint32_t max) {
    DelayLine &dl = lines_[plane * 2 + dir];
    uint32_t n = 0;
    while (n < max && dl.pop_due(UINT64_MAX, &out[n]))
        ++n;
    return n;
}

uint32_t Fabric::egress(uint32_t plane, Dir dir, uint64_t now_ns, DelayLine::Item *out,
                        uint32_t max) {
    DelayLine &dl = lines_[plane * 2 + dir];
    uint32_t n = 0;
    while (n < max && dl.pop_due(now_ns, &out[n])) {
        PathCounters &c = paths_v_[index(plane, out[n].path, dir)].ctr;
        ++c.tx_pkts;
        c.tx_bytes += out[n].len;
        ++n;
    }
    return n;
}

uint64_t Fabric::next_due(uint32_t plane, Dir dir) const {
    const DelayLine::Item *t = line(plane, dir).top();
    return t ? t->due_ns : std::numeric_limits<uint64_t>::max();
}

void Fabric::copy_counters(std::vector<PathCounters> *out) const {
    out->resize(paths_v_.size());
    for (size_t i = 0; i < paths_v_.size(); ++i)
        (*out)[i] = paths_v_[i].ctr;
}

}  // namespace mrc::fabric

namespace mrc::fabric {

void Fabric::copy_params(std::vector<PathParams> *out) const {
    out->resize(paths_v_.size());
    for (size_t i = 0; i < paths_v_.size(); ++i)
        (*out)[i] = paths_v_[i].params;
}

}  // namespace mrc::fabric
