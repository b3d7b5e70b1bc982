#!/usr/bin/env python3
"""mrc-sim at scale (issue 18): 1,000 QPs x 256 EVs x 8 planes by default,
one sender host writing 64 KiB messages (2 outstanding per QP, 64 per QP)
to one receiver over 8 planes x 100 Gb/s. Records the simulator's speed
(simulated packets and simulated time per wall second, the set-up's share)
and memory (peak resident set, and per QP), medians of --rounds runs, in
bench/results/sim-scale.json. The machine is shared: each run's CPU time
(user and system) and load average are recorded next to its wall time, and
packets per CPU second is the figure to compare across runs.

Peak RSS and wall time are measured here, around the process (wait4), so a
--before build that predates mrc-sim's own speed and memory keys is
measured the same way; the keys mrc-sim reports itself are kept too.

With --before DIR (the build directory of an older tree, e.g. made with
`git worktree add /tmp/old <commit>` and built there), that tree's mrc-sim
runs as well, alternating with this one round by round.

  bench/sim_scale.py [--rounds N] [--qps N] [--evs N] [--planes N]
                     [--msgs-per-qp N] [--before DIR [--before-label TEXT]] [--json PATH]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MSG_BYTES = 65536
DEPTH = 2

# Keys of mrc-sim's JSON kept per run: what it simulated, and its own view
# of its cost (absent from builds older than those keys).
KEPT = ["verified", "qp_errors", "sim_time_us", "goodput_gbps", "packets_sent", "events",
        "max_queue_bytes", "setup_wall_seconds", "sim_packets_per_wall_second",
        "sim_seconds_per_wall_second", "cpu_seconds", "sim_packets_per_cpu_second",
        "peak_rss_bytes", "rss_per_qp_bytes"]


def sim_args(a):
    return ["--qps", str(a.qps), "--evs", str(a.evs), "--planes", str(a.planes),
            "--msg-bytes", str(MSG_BYTES), "--depth", str(DEPTH),
            "--total-bytes", str(a.qps * a.msgs_per_qp * MSG_BYTES), "--json"]


def run_once(binary, args):
    """Runs mrc-sim once; its JSON keys of interest plus wall time and peak
    RSS measured from outside."""
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    p = subprocess.Popen([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    try:
        j = json.loads(out)
    except ValueError:
        sys.exit(f"{binary}: no JSON (exit {p.returncode}): {err.decode()[-500:]}")
    r = {k: j[k] for k in KEPT if k in j}
    r["exit"] = p.returncode
    r["wall_seconds"] = wall
    r["cpu_seconds"] = ru.ru_utime + ru.ru_stime
    r["max_rss_bytes"] = ru.ru_maxrss * 1024  # Linux: KiB
    r["load_avg_1min"] = load
    r["sim_pkts_per_wall_s"] = j["packets_sent"] / wall
    r["sim_pkts_per_cpu_s"] = j["packets_sent"] / max(r["cpu_seconds"], 1e-9)
    if "setup_wall_seconds" in j:  # the event loop alone, set-up left out
        r["loop_pkts_per_wall_s"] = j["packets_sent"] / max(
            j["wall_seconds"] - j["setup_wall_seconds"], 1e-9)
    return r


def summary(runs, qps):
    med = lambda k: statistics.median(r[k] for r in runs)
    s = {
        "verified": all(r["verified"] for r in runs),
        "sim_time_us": runs[0]["sim_time_us"],
        "packets_sent": runs[0]["packets_sent"],
        "goodput_gbps": runs[0]["goodput_gbps"],
        "wall_seconds": med("wall_seconds"),
        "cpu_seconds": med("cpu_seconds"),
        "sim_pkts_per_wall_s": med("sim_pkts_per_wall_s"),
        "sim_pkts_per_cpu_s": med("sim_pkts_per_cpu_s"),
        "sim_s_per_wall_s": runs[0]["sim_time_us"] / 1e6 / med("wall_seconds"),
        "max_rss_bytes": med("max_rss_bytes"),
        "max_rss_per_qp_bytes": med("max_rss_bytes") / qps,
    }
    if all("setup_wall_seconds" in r for r in runs):
        s["setup_wall_seconds"] = med("setup_wall_seconds")
        s["loop_pkts_per_wall_s"] = med("loop_pkts_per_wall_s")
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--qps", type=int, default=1000)
    ap.add_argument("--evs", type=int, default=256)
    ap.add_argument("--planes", type=int, default=8)
    ap.add_argument("--msgs-per-qp", type=int, default=64)
    ap.add_argument("--before", help="build directory of an older tree")
    ap.add_argument("--before-label", help="what the --before tree is (its commit), for the JSON")
    ap.add_argument("--json", default=os.path.join(ROOT, "bench/results/sim-scale.json"))
    a = ap.parse_args()
    builds = {"now": os.path.join(ROOT, "build")}
    if a.before:
        builds["before"] = os.path.abspath(a.before)
    for name, d in builds.items():
        if not os.access(f"{d}/app/mrc-sim", os.X_OK):
            sys.exit(f"{name}: no {d}/app/mrc-sim: build it first (ninja -C {d} app/mrc-sim)")
    args = sim_args(a)
    runs = {name: [] for name in builds}
    for rnd in range(a.rounds):
        for name, d in builds.items():
            r = run_once(f"{d}/app/mrc-sim", args)
            runs[name].append(r)
            print(f"round {rnd + 1} {name}: {r['sim_pkts_per_wall_s'] / 1e3:.0f} k pkts/wall s, "
                  f"{r['sim_pkts_per_cpu_s'] / 1e3:.0f} k pkts/CPU s, {r['wall_seconds']:.2f} s "
                  f"wall (set-up {r.get('setup_wall_seconds', 0):.2f} s), "
                  f"{r['cpu_seconds']:.2f} s CPU, "
                  f"peak RSS {r['max_rss_bytes'] / 2**20:.0f} MiB, load {r['load_avg_1min']:.1f}, "
                  f"{'verified' if r['verified'] else 'NOT VERIFIED'}", flush=True)
    res = {
        "what": f"mrc-sim, {a.qps} QPs x {a.evs} EVs x {a.planes} planes, one sender host, "
                f"{MSG_BYTES} B messages, {DEPTH} outstanding per QP, {a.msgs_per_qp} per QP",
        "command": "mrc-sim " + " ".join(args),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip(),
        "rounds": a.rounds,
        "results": {name: {"median": summary(rs, a.qps), "runs": rs} for name, rs in runs.items()},
    }
    if a.before:
        res["before_dir"] = builds["before"]
        res["before_label"] = a.before_label or ""
    for name, rs in res["results"].items():
        m = rs["median"]
        print(f"{name}: {m['sim_pkts_per_wall_s'] / 1e3:.0f} k simulated packets per wall second "
              f"({m['sim_pkts_per_cpu_s'] / 1e3:.0f} k per CPU second"
              + (f", {m['loop_pkts_per_wall_s'] / 1e3:.0f} k in the event loop alone"
                 if "loop_pkts_per_wall_s" in m else "") + "), "
              f"{m['sim_s_per_wall_s'] * 1e3:.2f} simulated ms per wall s, "
              f"peak RSS {m['max_rss_bytes'] / 2**20:.0f} MiB "
              f"({m['max_rss_per_qp_bytes'] / 1024:.0f} KiB per QP)")
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    print(f"wrote {a.json}")
    ok = all(r["verified"] for rs in runs.values() for r in rs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
