// The dataplane: the transport core on DPDK ports.
//
// One port per plane. Poll-mode workers (EAL worker lcores) each own an
// Endpoint (their QPs, memory regions and timers) and one RX and one TX
// queue on every port, and run to completion:
//
//   RX bursts from every port -> demultiplex by QPN -> core -> due timers
//     -> the application's poll (post work, reap completions) -> TX bursts
//
// A frame that lands on a worker that does not own its QP (a device that
// cannot steer by QPN) goes to the owner over a lock-free single-producer
// single-consumer ring. A control thread (an ordinary thread, not a busy
// lcore) reads the workers' counters through snapshots, runs the core's
// path scorer, publishes the path table, and turns link-state changes of
// the ports into plane failures. It never touches packets.
//
// Everything the worker threads share with other threads is listed in
// Worker below (marked "shared"); the rest is owned by one thread.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/result.h"
#include "core/endpoint.h"
#include "core/path.h"
#include "dpdk/counters.h"
#include "dpdk/seqlock.h"
#include "port/clock.h"
#include "port/port.h"

namespace mrc::dp {

enum class IdleMode : uint8_t {
    kBusy,   // poll without pause: lowest latency, one core per worker (benchmarks)
    kSleep,  // after `idle_polls` empty polls, sleep `idle_sleep_us`: shares a core
    // After `idle_yield_polls` empty polls in a row, sched_yield() at every
    // empty poll: a thread polling on the same CPU (an application of
    // mrcd's) runs at once, and the worker comes back as soon as it yields.
    kYield,
    // Busy while there is traffic; after `idle_spin_us` without work, sleep
    // until something needs the worker: an RX interrupt (ports that have
    // them), a wake() (an application's post through mrcd, a command, a
    // control change), or the core's next timer. A port without RX
    // interrupts caps each sleep at a poll quantum that starts at
    // `idle_sleep_us` and doubles while nothing comes, up to
    // `idle_sleep_max_us`. While spinning, an empty poll yields the CPU
    // (as kYield) so that a process sharing it runs at once.
    kAdaptive,
};
const char *to_string(IdleMode m);
// "busy", "yield", "sleep" or "adaptive"; false for anything else.
bool parse_idle_mode(std::string_view s, IdleMode *out);

struct DataplaneConfig {
    std::vector<std::string> ports;  // one device per plane (port.h PortOptions::device)
    uint16_t mtu_bytes = 1500;       // IP MTU of every port
    uint16_t rx_desc = 1024;
    uint16_t tx_desc = 1024;
    uint16_t burst = 32;
    uint32_t max_qps_per_worker = 1024;
    uint32_t max_mrs = 1024;
    uint16_t mrc_port = wire::kDefaultMrcPort;
    // This host's IPv4 address on each plane (host order), for ports that
    // share their interface with the kernel (AF_XDP): only MRC packets to
    // that address are taken from the kernel. Empty: any address.
    std::vector<uint32_t> plane_ipv4;
    // This host's IPv6 address on each plane (the unspecified address or
    // no entry: none): neighbour solicitations for it and pings of it are
    // answered on DPDK-owned ports, and it is announced at start. Give it
    // for every IPv6 plane: max_payload_bytes() leaves room for IPv6's
    // longer header only when a plane has one (a frame over the MTU is
    // dropped and counted, tx_oversize).
    std::vector<wire::Ipv6Addr> plane_ipv6;
    // UDP checksums: computed on transmit (offloaded where the port can)
    // and checked on receive. Off: sent as 0 ("none", legal for IPv4 UDP)
    // and not checked; the IPv4 header checksum is always checked.
    bool udp_checksum = true;
    // Transmit the payload straight from registered memory (an external
    // buffer mbuf chained after the header) instead of copying it. Only
    // for devices that read by virtual address (virtual devices) or when
    // registered memory is DMA-mapped. docs/dataplane.md has the numbers.
    bool zero_copy_tx = false;
    // Mark CE on ECN-capable frames received while the RX ring is backed
    // up: after this many full bursts in a row (0: never). The receiving
    // host is the last hop of a software path; this is its ECN threshold.
    uint32_t ecn_full_bursts = 2;
    IdleMode idle = IdleMode::kBusy;
    uint32_t idle_polls = 1024;
    uint32_t idle_yield_polls = 16;
    uint32_t idle_sleep_us = 20;
    // kAdaptive: poll this long after the last work. Frames through a kernel
    // path (net_tap, AF_XDP copy mode) come with gaps of hundreds of
    // microseconds while traffic flows: 200 us cost a fifth of tap_e2e's
    // goodput (a sleep and an interrupt wake per gap), 1 ms nothing.
    uint32_t idle_spin_us = 1000;
    uint32_t idle_sleep_max_us = 1000;  // kAdaptive: longest poll quantum (no RX interrupts)
    uint32_t link_wait_ms = 10'000;     // how long start() waits for every link to come up
    bool run_scorer = true;
    ScorerConfig scorer;
    uint64_t timer_tick_ns = 1000;
    uint64_t link_poll_ns = 1'000'000;  // control thread: link state of every port
    uint64_t qp_snapshot_ns = 1'000'000;
    // EAL lcores to run workers on; empty: every EAL worker lcore.
    std::vector<unsigned> worker_lcores;
    std::string name = "mrc";  // prefix of pool and ring names
};

// What a worker publishes for other threads.
struct WorkerSnapshot {
    uint64_t now_ns = 0;
    WorkerCounters worker;
    EndpointCounters endpoint;
    PlaneCounters planes[kMaxPlanes];
    EvGauges gauges;
    uint64_t port_tx_pkts[kMaxPlanes] = {};  // frames this worker sent on each port
    uint64_t port_rx_pkts[kMaxPlanes] = {};
    uint64_t link_up_mask = 0;
    uint64_t table_generation = 0;
};
// Slower: per-QP state, and their counters summed. A worker refreshes a
// slice of its QP slots (kQpSnapSlice) every qp_snapshot_ns, so the cost per
// loop does not grow with the number of QPs; a QP's snapshot is at most
// max_qps_per_worker / kQpSnapSlice periods old.
struct QpSnapshot {
    uint32_t wire_qpn = 0;
    uint8_t live = 0;
    uint8_t state = 0;  // QpState
    uint8_t error_cause = 0;
    uint8_t usable_planes = 0;
    uint64_t window_bytes = 0;
    uint64_t inflight_bytes = 0;
    uint32_t ev_states[kEvStates] = {};
    uint32_t pad = 0;
    QpCounters c;
};
struct QpSummary {
    uint64_t qps = 0;
    uint64_t qps_error = 0;
    QpCounters sum;
};

class Worker;

// The application's share of each worker loop iteration, called on the
// worker's lcore after RX and timers and before TX: post work requests,
// reap completions. Returns how much it did (0: nothing; counts toward
// idle detection).
class WorkerApp {
  public:
    virtual ~WorkerApp() = default;
    virtual uint32_t poll(Worker &w, uint64_t now_ns) = 0;
    // A connection-management frame (wire/cm.h: QPN 0, a CM opcode)
    // arrived on `plane`; worker 0 gets them all. The frame is freed after
    // the call. Without an app they are counted (rx_cm_unclaimed) and dropped.
    virtual void on_cm_frame(Worker &w, const uint8_t *frame, uint32_t len, uint8_t plane,
                             uint64_t now_ns) {
        (void)w, (void)frame, (void)len, (void)plane, (void)now_ns;
    }
    // An ARP packet from a neighbour on `plane` (a request for the plane's
    // address, already answered, or any other ARP the port heard), for
    // an application that resolves next hops itself. Any worker calls it.
    virtual void on_arp_frame(Worker &w, const uint8_t *frame, uint32_t len, uint8_t plane,
                              uint64_t now_ns) {
        (void)w, (void)frame, (void)len, (void)plane, (void)now_ns;
    }
    // Timed work of the application's own (rate pacing): the time by which
    // it wants its next poll. An adaptive worker (IdleMode::kAdaptive) does
    // not sleep past it. UINT64_MAX: none.
    virtual uint64_t next_due_ns(uint64_t now_ns) const {
        (void)now_ns;
        return UINT64_MAX;
    }
};

class Dataplane;

class Worker {
  public:
    ~Worker();
    uint32_t index() const { return index_; }
    unsigned lcore() const { return lcore_; }
    // Owner thread only, or before start() / after stop().
    Endpoint &endpoint() { return *ep_; }
    void set_app(WorkerApp *app) { app_ = app; }
    const WorkerCounters &counters() const { return ctr_; }
    const TscClock &clock() const { return *clock_; }
    // Owner thread: queues a complete frame (Ethernet to payload, UDP
    // checksum 0: filled here when the port does not offload it) for
    // `plane`, outside the core (connection management). False when the
    // plane is out of use or no mbuf is free (counted).
    bool send_frame(uint8_t plane, const uint8_t *frame, uint32_t len);
    // A frame sent as it is (ARP, ICMP: no UDP checksum to fill).
    bool send_raw(uint8_t plane, const uint8_t *frame, uint32_t len);

    // Any thread: ends the worker's adaptive sleep, if it sleeps, so that
    // it looks at its inputs (commands, doorbells, control state) now. One
    // load when it is awake. Processes that cannot call it (mrcd's
    // applications) read the worker's word in Dataplane::wake_page_fd() and
    // write its wake_fd() themselves (client/ipc.h, ring_doorbell).
    void wake() {
        if (sleeping_->load(std::memory_order_seq_cst)) ring_wake_fd();
    }
    int wake_fd() const { return wake_fd_; }

    // Any thread.
    bool snapshot(WorkerSnapshot *out) const { return snap_.load(out); }
    bool qp_summary(QpSummary *out) const { return qp_sum_.load(out); }
    // Snapshot of local QP slot i (i < max_qps_per_worker).
    bool qp_snapshot(uint32_t i, QpSnapshot *out) const { return qp_snaps_[i].load(out); }

  private:
    friend class Dataplane;
    // A port's software TX queue. New data goes only to ports whose queue
    // holds less than kTxDataRoom; the rest of it is for control packets
    // (acks, probe answers, keepalives) the core addresses to a port that
    // is backed up, so that a slow port does not cost them.
    static constexpr uint16_t kTxQueueCap = 512;
    static constexpr uint16_t kTxDataRoom = 128;
    struct TxQueue {
        rte_mbuf *m[kTxQueueCap];
        uint16_t n = 0;
    };

    Worker(Dataplane *dp, uint32_t index, unsigned lcore, const EndpointConfig &ec,
           uint32_t max_qps);
    int run();
    static int launch(void *arg) { return static_cast<Worker *>(arg)->run(); }
    void rx_port(uint8_t plane, uint64_t now_ns);
    void rx_frames(uint8_t plane, rte_mbuf **pkts, uint16_t n, uint64_t now_ns);
    void deliver(const uint8_t *f, uint32_t len, uint32_t qpn, uint8_t plane, uint64_t now_ns);
    void host_frame(uint8_t plane, const uint8_t *f, uint32_t len, uint64_t now_ns);
    rte_mbuf *frame_mbuf(uint8_t plane, const uint8_t *frame, uint32_t len, uint32_t min_len);
    void queue_frame(uint8_t plane, rte_mbuf *m);
    void announce_addresses();
    uint32_t rx_handoff(uint64_t now_ns);
    uint32_t tx(uint64_t now_ns);
    bool attach_payload(rte_mbuf *hdr, const TxPacket &t, bool sw_cksum);
    void flush(uint8_t plane);
    void control(uint64_t now_ns);
    void publish(uint64_t now_ns);
    // Refresh up to `slots` QP slots from the cursor on (all of them: a full sweep).
    void publish_qps(uint64_t now_ns, uint32_t slots);
    static constexpr uint32_t kQpSnapSlice = 16;
    void drain();
    void ring_wake_fd();
    // kAdaptive: the epoll set (wake fd and RX interrupt fds) and one sleep on it.
    Result<void> open_sleep_set();
    void sleep_until(uint64_t limit_ns);
    void end_sleep_arming();

    Dataplane *dp_;
    uint32_t index_;
    unsigned lcore_;
    const TscClock *clock_ = nullptr;
    std::unique_ptr<Endpoint> ep_;
    WorkerApp *app_ = nullptr;
    WorkerCounters ctr_;
    uint64_t port_tx_[kMaxPlanes] = {};
    uint64_t port_rx_[kMaxPlanes] = {};
    TxQueue txq_[kMaxPlanes];
    TxPacket tx_out_[64];              // poll_tx's output, reused (not rebuilt every call)
    std::vector<rte_mbuf *> stash_;    // pre-allocated mbufs for the next poll_tx
    uint8_t port_enabled_ = 0;         // ports this worker still polls (not cut)
    uint32_t max_frame_ = UINT32_MAX;  // the MTU's frame: Ethernet header + mtu_bytes
    uint8_t link_mask_ = 0;
    uint64_t table_gen_applied_ = 0;
    uint64_t next_tick_ns_ = 0;
    uint64_t next_control_ns_ = 0;
    uint64_t next_qp_snap_ns_ = 0;
    uint8_t rx_first_ = 0;         // the port RX polls first (turns each loop)
    uint32_t qp_snap_cursor_ = 1;  // next QP slot publish_qps refreshes
    QpSummary qp_total_;           // the sum over the published snapshots
    uint32_t empty_polls_ = 0;
    // kAdaptive
    int epoll_fd_ = -1;
    uint8_t intr_ports_ = 0;    // ports whose RX queue wakes the sleep set
    bool sleep_armed_ = false;  // sleeping_ set and interrupts armed; the next empty loop sleeps
    uint64_t last_work_ns_ = 0;
    uint64_t quantum_ns_ = 0;  // the next sleep's cap when some port has no interrupt
    uint32_t full_bursts_ = 0;
    uint32_t timer_deferrals_ = 0;  // timer runs put off in a row (RX backlog)
    bool catching_up_ = false;      // the loop ran late: RX backlog before timers
    bool mark_ce_ = false;
    uint64_t tx_io_cycles_ = 0;  // TSC cycles in TX bursts, all of them (flush())
    // One loop's cycles per stage, added to the counters if it did work.
    struct LoopCycles {
        uint64_t rx_io = 0, rx = 0, timers = 0, app = 0, tx = 0, control = 0;
    };

    // ---- shared ----
    // rings_in_[src]: frames worker src received for this worker's QPs.
    std::vector<rte_ring *> rings_in_;
    Seqlock<WorkerSnapshot> snap_;
    Seqlock<QpSummary> qp_sum_;
    std::unique_ptr<Seqlock<QpSnapshot>[]> qp_snaps_;
    std::atomic<uint64_t> table_gen_seen_{0};  // last path-table generation applied
    std::atomic<uint8_t> cut_ack_{0};          // ports this worker stopped using
    // 1 while the worker sleeps or is about to (its wake fd must then be
    // written to reach it). A word of the dataplane's wake page.
    std::atomic<uint32_t> *sleeping_ = nullptr;
    int wake_fd_ = -1;  // eventfd
};

// Published by the control thread.
struct ControlSnapshot {
    uint64_t now_ns = 0;
    uint64_t rounds = 0;
    uint64_t link_up_mask = 0;
    uint64_t link_events = 0;  // link changes seen, all ports
    uint64_t table_generation = 0;
    uint64_t down_mask = 0;
    uint64_t denied_mask = 0;
    PlaneScore score[kMaxPlanes];
};

class Dataplane {
  public:
    // Opens the ports (one RX/TX queue pair per worker on each), the mbuf
    // pool and the workers' endpoints. EAL must be up. Fails with a message
    // that names the port or resource at fault.
    static Result<std::unique_ptr<Dataplane>> create(const DataplaneConfig &cfg);
    ~Dataplane();
    Dataplane(const Dataplane &) = delete;
    Dataplane &operator=(const Dataplane &) = delete;

    const DataplaneConfig &config() const { return cfg_; }
    uint32_t workers() const { return static_cast<uint32_t>(workers_.size()); }
    Worker &worker(uint32_t i) { return *workers_[i]; }
    const Worker &worker(uint32_t i) const { return *workers_[i]; }
    uint8_t planes() const { return static_cast<uint8_t>(ports_.size()); }
    drivers::Port &port(uint8_t plane) { return *ports_[plane]; }
    const drivers::Port &port(uint8_t plane) const { return *ports_[plane]; }
    const TscClock &clock() const { return clock_; }
    // Payload bytes per data packet that fit the ports' MTU.
    uint32_t max_payload_bytes() const;
    // Which worker owns a wire QPN.
    static uint32_t owner_of(uint32_t wire_qpn) { return wire_qpn >> kQpnWorkerShift; }
    static constexpr uint32_t kQpnWorkerShift = 16;

    // Waits for every link (up to link_wait_ms) and launches the workers
    // and the control thread: wait_links() then launch().
    Result<void> start();
    // The two halves, for a process that must not run its QPs before its
    // peer does (mrc-gen's client: its links up, then the server's word
    // that it polls, then its workers).
    Result<void> wait_links();
    Result<void> launch();
    // Before start() only, from the thread that owns the dataplane: the
    // MAC of `ip` on DPDK-owned plane `plane`, by ARP (a request every
    // 100 ms until `timeout_ms`). ARP requests for the plane's own address
    // are answered meanwhile; everything else that arrives on the plane
    // then is dropped and counted in *dropped (its senders retransmit).
    Result<wire::MacAddr> resolve_before_start(uint8_t plane, uint32_t ip, uint32_t timeout_ms,
                                               uint64_t *dropped);
    // The same over IPv6: neighbour solicitations for `ip` (RFC 4861) from
    // the plane's IPv6 address, until an advert for it names its MAC;
    // solicitations for the plane's address are answered meanwhile.
    Result<wire::MacAddr> resolve_before_start(uint8_t plane, const wire::Ipv6Addr &ip,
                                               uint32_t timeout_ms, uint64_t *dropped);
    // The plane's IPv6 address (DataplaneConfig::plane_ipv6), or the
    // unspecified address.
    wire::Ipv6Addr plane_ipv6(uint8_t plane) const {
        return plane < cfg_.plane_ipv6.size() ? cfg_.plane_ipv6[plane] : wire::Ipv6Addr{};
    }
    // Asks workers and the control thread to finish, and waits for them.
    void stop();
    bool running() const { return running_.load(std::memory_order_acquire); }

    // Takes a port out as a failure would: its workers stop polling it and
    // the device is stopped (a memif peer sees its link go down). For
    // failover tests and demos. Any thread but a worker's.
    Result<void> cut_port(uint8_t plane);
    // The operator's DENIED state for a plane (mrcctl's job later).
    void deny_plane(uint8_t plane, bool deny);
    // The DENIED state for one EV of one QP (wire QPN), through the path
    // table like a plane denial. Any thread.
    void deny_ev(uint32_t wire_qpn, uint16_t ev, bool deny);
    // Plane and EV denials in force (any thread).
    uint8_t denied_planes() const { return deny_mask_.load(std::memory_order_relaxed); }
    std::vector<EvDenial> denied_evs() const;

    bool control_snapshot(ControlSnapshot *out) const { return ctl_snap_.load(out); }
    // A sealed memfd of one page (or more) holding each worker's sleeping
    // word, worker i's at byte i * kWakeStride: 1 while that worker sleeps
    // (IdleMode::kAdaptive) and has to be woken through its wake_fd(). For
    // other processes to map read-only (mrcd hands it to its applications).
    int wake_page_fd() const { return wake_memfd_; }
    static constexpr size_t kWakeStride = 64;
    void wake_all() {
        for (auto &w : workers_)
            w->wake();
    }
    // Port counters as the device reports them (any thread).
    drivers::PortCounters port_counters(uint8_t plane) const { return ports_[plane]->counters(); }
    uint8_t link_up_mask() const { return link_mask_.load(std::memory_order_relaxed); }
    uint8_t cut_mask() const { return cut_mask_.load(std::memory_order_relaxed); }

    // Sums over all workers.
    WorkerSnapshot totals() const;
    QpSummary qp_totals() const;

  private:
    friend class Worker;
    explicit Dataplane(const DataplaneConfig &cfg);
    void control_loop();
    void publish_table();
    uint8_t read_links();
    // resolve_before_start's loop: sends `request` every 100 ms; `look`
    // answers each frame that arrives (an answer to send in `out`, *out_len
    // bytes) and says whether it names the MAC looked for; `timeout_why` is
    // the error when nothing does in time.
    using ResolveLook = std::function<bool(const uint8_t *frame, uint32_t len, uint8_t *out,
                                           uint32_t cap, uint32_t *out_len, wire::MacAddr *mac)>;
    Result<wire::MacAddr> resolve_with(uint8_t plane, const uint8_t *request, uint32_t request_len,
                                       uint32_t timeout_ms, uint64_t *dropped,
                                       const std::string &timeout_why, const ResolveLook &look);

    DataplaneConfig cfg_;
    TscClock clock_;
    rte_mempool *pool_ = nullptr;
    std::vector<std::unique_ptr<drivers::Port>> ports_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::vector<rte_ring *> rings_;
    int wake_memfd_ = -1;
    void *wake_page_ = nullptr;
    size_t wake_page_bytes_ = 0;
    bool launched_ = false;
    std::thread control_;

    // ---- shared ----
    std::atomic<bool> running_{false};
    std::atomic<bool> stop_{false};
    std::atomic<uint8_t> link_mask_{0};
    std::atomic<uint8_t> cut_mask_{0};
    std::atomic<uint8_t> deny_mask_{0};  // operator; read by the control thread
    mutable std::mutex ev_deny_mu_;      // operator's EV denials (never on a worker)
    std::vector<EvDenial> ev_deny_;      // wanted
    uint64_t ev_deny_gen_ = 0;           // bumped on every change
    // The path table: written by the control thread only while every
    // worker has applied the previous one (table_gen_seen_), read by the
    // workers only while table_gen_ is ahead of what they applied.
    PathTable table_;
    std::atomic<uint64_t> table_gen_{0};
    Seqlock<ControlSnapshot> ctl_snap_;
};

// Registers /mrc/stats, /mrc/planes, /mrc/qps and /mrc/workers with DPDK
// telemetry (read by dpdk-telemetry.py) for `dp`; nullptr unregisters
// (the commands then answer that no dataplane is running).
void telemetry_attach(Dataplane *dp);

}  // namespace mrc::dp
