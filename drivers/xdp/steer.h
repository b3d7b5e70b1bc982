// Loader and owner of MRC's XDP steering program (mrc_steer.bpf.c).
//
// An AF_XDP port shares its interface with the kernel: the steering program
// sends MRC's UDP packets to the dataplane's AF_XDP sockets and passes the
// rest (SSH, storage, the job launcher) to the kernel's stack. DPDK 22.11's
// net_af_xdp loads the program named by its xdp_prog= option and inserts
// each queue's socket into the program's "xsks_map"; this class does what
// the PMD does not:
//
//   acquire()   before the port is probed: the interface exists, we may use
//               XDP and AF_XDP, the kernel has them, no other program holds
//               the interface, and no other MRC process does (a lock file,
//               released by the kernel when its holder dies). A steering
//               program left attached by an MRC process that died is
//               detached here: the "clean up after a crash on next start".
//   configure() after the PMD attached it: checks the attached program is
//               ours and writes the UDP port and local addresses to steer;
//               reports the attach mode (native or generic).
//   ~Steering() after the port is closed: detaches the program if it is
//               still attached (it is ours: same id), releases the lock.
//
// Libbpf only; no DPDK. The checks are also used by the mrc-xdp tool.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace mrc::xdp {

enum class AttachMode : uint8_t { kNone, kNative, kGeneric, kOffload, kMulti };
const char *to_string(AttachMode m);

// The XDP program attached to an interface, if any.
struct AttachedProg {
    uint32_t ifindex = 0;
    uint32_t id = 0;  // 0: none
    std::string name;
    AttachMode mode = AttachMode::kNone;
    bool ours() const;  // MRC's steering program (by name and maps)
    bool has_our_maps = false;
};

struct SteerConfig {
    uint16_t udp_port = 0;       // host order; 0 steers nothing
    std::vector<uint32_t> ipv4;  // host order; empty: any local address
    std::vector<std::array<uint8_t, 16>> ipv6;
};

struct SteerStats {
    uint64_t redirected = 0;  // MRC packets handed to an AF_XDP socket
    uint64_t no_socket = 0;   // MRC packets on a queue with no socket, passed
    uint64_t addr_miss = 0;   // MRC port, other destination address, passed
    uint64_t passed = 0;      // everything else, passed to the kernel
};

// The value of `key` in devargs "name,k=v,k=v", or nullopt.
std::optional<std::string> devarg(const std::string &devargs, const std::string &key);

// An AF_XDP port's devargs, expanded: "af_xdp:IFACE[,k=v...]" becomes
// "net_af_xdp_IFACE,iface=IFACE,start_queue=0,queue_count=Q[,k=v...]", and
// xdp_prog=PROG is added unless given (net_af_xdp without it would load
// libxdp's default program, which sends every packet of the queue to DPDK
// and cuts the host off). nullopt: not an AF_XDP device.
struct AfXdpArgs {
    std::string devargs;
    std::string iface;
    bool own_program = false;  // xdp_prog= was ours to add (else the user's)
};
std::optional<AfXdpArgs> af_xdp_args(const std::string &device, uint16_t queues,
                                     const std::string &prog_path);

// Where the steering object file is: $MRC_XDP_PROG, else the build tree's,
// else the installed one. Error names every place looked at.
Result<std::string> program_path();

// The program attached to `iface` (in this network namespace).
Result<AttachedProg> query(const std::string &iface);

// What errno from a BPF / XDP / AF_XDP operation means for the operator:
// the sentence to print, naming what to do. Pure; unit-tested.
std::string explain(const std::string &what, const std::string &iface, int err);

// The pid recorded in the interface's lock file, and whether it still holds
// the lock (0, false when nobody ever did).
struct Owner {
    int pid = 0;
    bool alive = false;
};
Owner owner(const std::string &iface);

// What starting an AF_XDP port on `iface` would find, without changing
// anything: the interface, permission, kernel support, the attached program
// and who owns it. Error: what would make the start fail, and what to do.
struct Preflight {
    AttachedProg attached;
    Owner owner;
    bool stale = false;  // an MRC program whose process is gone: a start removes it
};
Result<Preflight> check(const std::string &iface);

// Removes the MRC steering program from `iface` when its process is gone
// (or any program, with `force`). Refuses while an MRC process owns it.
// Returns the program removed (id 0: there was none).
Result<AttachedProg> detach_program(const std::string &iface, bool force);

// Queues the interface's driver spreads received packets over (ethtool's
// combined channels; 1 when the driver does not say). MRC packets that land
// on a queue without an AF_XDP socket go to the kernel instead.
int rx_queues(const std::string &iface);

// The counters of an attached MRC steering program.
Result<SteerStats> read_stats(const AttachedProg &p);

class Steering {
  public:
    struct Options {
        std::string iface;
        // Called with one line for each thing worth telling the operator
        // (a stale program removed); may be empty.
        void (*log)(const std::string &line) = nullptr;
    };
    static Result<std::unique_ptr<Steering>> acquire(const Options &opts);
    ~Steering();
    Steering(const Steering &) = delete;
    Steering &operator=(const Steering &) = delete;

    // After the PMD attached the program: verifies it is ours, writes `cfg`.
    Result<AttachedProg> configure(const SteerConfig &cfg);
    // Counters of the attached program (zero before configure()).
    SteerStats stats() const;
    const std::string &iface() const { return iface_; }
    const AttachedProg &attached() const { return attached_; }

  private:
    Steering() = default;
    std::string iface_;
    uint32_t ifindex_ = 0;
    int lock_fd_ = -1;
    std::string lock_path_;
    AttachedProg attached_;
    int cfg_fd_ = -1;
    int stats_fd_ = -1;
};

}  // namespace mrc::xdp
