#!/usr/bin/env python3
"""Loss recovery, measured three ways in one run (docs/loss-recovery.md):

1. mrc-sim, 2 planes x 4 paths x 25 Gb/s, 10 us one way, 4 QPs x 256 KiB
   messages, 256 MiB, with the timeout settings mrcd and mrc-gen use
   (--timeout-exp 12 and their adaptive default): lossless; 1% and 3%
   random loss on plane 1 towards the receiver; burst loss there; 20% of
   packets held back 5 us and 20 us (no loss: nothing may be resent); 5%
   loss of the acks on plane 1 (spurious resends counted). Deterministic:
   one run each. Goodput as a ratio of the lossless run of the same binary.
2. mrc-fabric, 2 memif planes x 4 paths, two mrc-gen endpoints, write_imm,
   verified: a clean run, 1% loss on plane 0, and the mix of issue 16 (a
   dead path on plane 0; 3% loss and 10% reordering on plane 1 towards the
   server; 2% duplicated acks), each as fast as it goes and at an offered
   1.5 Gb/s (which the clean path carries even when this shared machine is
   slow: that ratio shows what the loss costs without the machine's own
   swings). Rounds interleaved, medians, the ratio to the clean run of the
   same round.
3. Two mrcd daemons, bulk copies both ways, one daemon killed with -9: how
   long its peer's sending QP and its receive-only QP take to fail.

With --before DIR (a build directory of an older tree, e.g. made with
`git worktree add /tmp/old <commit>` and built there), every part runs that
tree's binaries too, side by side, in the same run.

  bench/loss_recovery.py [--rounds N] [--seconds S] [--before DIR] [--json PATH]
                         [--parts sim,fabric,mrcd]
"""
import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EAL = ["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--log-level=lib.eal:error"]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---- 1. the simulator ----------------------------------------------------------

SIM_BASE = ["--planes", "2", "--paths-per-plane", "4", "--link-gbps", "25", "--delay-us", "10",
            "--qps", "4", "--msg-bytes", "262144", "--total-bytes", str(256 << 20),
            "--timeout-exp", "12", "--json"]
SIM_CASES = [
    ("lossless", []),
    ("loss_1pct_plane1", ["--impair", "plane=1,dir=0,loss=0.01"]),
    ("loss_3pct_plane1", ["--impair", "plane=1,dir=0,loss=0.03"]),
    ("burst_loss_plane1", ["--impair", "plane=1,dir=ab,burst_enter=0.003"]),
    ("reorder_20pct_5us", ["--impair", "dir=0,reorder=0.2,reorder_us=5"]),
    ("reorder_20pct_20us", ["--impair", "dir=0,reorder=0.2,reorder_us=20"]),
    ("ack_loss_5pct_plane1", ["--impair", "plane=1,dir=1,loss=0.05"]),
]


def sim_part(sim_bin):
    out = {}
    for name, args in SIM_CASES:
        p = subprocess.run([sim_bin] + SIM_BASE + args, capture_output=True, text=True)
        try:
            r = json.loads(p.stdout)
        except ValueError:
            out[name] = {"error": p.stderr.strip()[-300:]}
            continue
        q = r["requester"]
        out[name] = {
            "verified": r["verified"],
            "goodput_gbps": r["goodput_gbps"],
            "data_drops": r["data_packets_dropped"],
            "retransmissions": r["retransmissions"],
            "ack_timeouts": q.get("ack_timeouts", 0),
            "losses_detected": q.get("losses_detected", 0),
            "tail_probes": q.get("tail_probes", 0),
            # resends that arrived a second time: needless (the new tree
            # counts them; the old one through the responder's duplicates)
            "arrived_again": r.get("data_arrived_again", r["responder"].get("rx_duplicates", 0)),
        }
    base = out.get("lossless", {}).get("goodput_gbps")
    for v in out.values():
        if base and "goodput_gbps" in v:
            v["ratio_to_lossless"] = v["goodput_gbps"] / base
    return out


# ---- 2. the fabric -------------------------------------------------------------

LOSS_1PCT = ["--impair", "plane=0,loss=0.01"]
MIX = ["--impair", "plane=0,path=1,blackhole", "--impair", "plane=1,dir=ab,loss=0.03,reorder=0.1",
       "--impair", "dir=ba,duplicate=0.02"]
# (name, fabric arguments, client arguments, the clean case it is compared with).
# The "_at_1.5g" cases offer 1.5 Gb/s, which the clean path carries even
# when this shared machine is slow: their ratio shows what the loss costs,
# without the machine's own swings (the unlimited cases' ratios swing by
# tens of percent from round to round here).
FABRIC_CASES = [
    ("clean", [], [], "clean"),
    ("loss_1pct_plane0", LOSS_1PCT, [], "clean"),
    ("issue16_mix", MIX, [], "clean"),
    ("clean_at_1.5g", [], ["--rate-gbps", "1.5"], "clean_at_1.5g"),
    ("loss_1pct_plane0_at_1.5g", LOSS_1PCT, ["--rate-gbps", "1.5"], "clean_at_1.5g"),
    ("issue16_mix_at_1.5g", MIX, ["--rate-gbps", "1.5"], "clean_at_1.5g"),
]


class Procs:
    def __init__(self):
        self.ps = []

    def start(self, argv, log):
        p = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.ps.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, secs=5):
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(secs)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def stop_all(self):
        for p in self.ps:
            self.stop(p, signal.SIGKILL, 1)
        self.ps = []


def fabric_run(app, case_args, work, tag, secs, procs, client_args=()):
    d = os.path.join(work, tag)
    os.makedirs(d)
    fab = [f"{app}/mrc-fabric"] + EAL + ["--file-prefix", f"mrc-lr-{tag}-f", "--lcores", "0@(0,1)"]
    for p in range(2):
        for side in "ab":
            n = 2 * p + (side == "b")
            fab.append(f"--vdev=net_memif{n},role=server,socket={d}/{side}{p}.sock")
    fab += ["--", "--paths", "4", "--stats-period", "0", "--json", f"{d}/fabric.json"] + case_args
    fp = procs.start(fab, f"{d}/fabric.log")
    time.sleep(0.5)
    port = 20000 + (os.getpid() * 7 + hash(tag)) % 20000
    gen = lambda side, role, lc: [f"{app}/mrc-gen"] + EAL + [
        "--file-prefix", f"mrc-lr-{tag}-{side}", "--lcores", lc] + [
        f"--vdev=net_memif{p},role=client,socket={d}/{side}{p}.sock" for p in range(2)] + [
        "--", "--role", role, "--oob", f"127.0.0.1:{port}", "--idle", "sleep", "--stats-period",
        "0", "--timeout", "30", "--json", f"{d}/{role}.json"]
    sp = procs.start(gen("b", "server", "0@1,1@0"), f"{d}/server.log")
    time.sleep(0.3)
    cp = procs.start(gen("a", "client", "0@0,1@1") + [
        "--mode", "write_imm", "--verify", "--qps", "6", "--msg-bytes", "65536", "--duration",
        str(secs)] + list(client_args), f"{d}/client.log")
    try:
        cp.wait(secs + 90)
        sp.wait(30)
    except subprocess.TimeoutExpired:
        pass
    for p in (cp, sp):
        procs.stop(p, signal.SIGKILL, 1)
    procs.stop(fp)
    try:
        c = json.load(open(f"{d}/client.json"))
        s = json.load(open(f"{d}/server.json"))
        f = json.load(open(f"{d}/fabric.json"))
    except (OSError, ValueError):
        return {"error": open(f"{d}/client.log").read()[-400:]}
    q = c.get("qp_counters", {})
    ab = [pl["ab"] for pl in f.get("planes_detail", [])]
    data_drops = sum(x.get("drop_loss", 0) + x.get("drop_blackhole", 0) + x.get("drop_burst", 0)
                     + x.get("drop_queue", 0) + x.get("drop_down", 0) for x in ab)
    return {
        "goodput_gbps": c["goodput_gbps"],
        "verified": c["verify_errors"] == 0 and s["verify_errors"] == 0 and c["qp_errors"] == 0
        and s["qp_errors"] == 0 and s["bytes_verified"] == c["bytes"],
        "retransmissions": c["retransmissions"],
        "ack_timeouts": q.get("ack_timeouts"),
        "losses_detected": q.get("losses_detected"),
        "tail_probes": q.get("tail_probes"),
        "retx_spurious": q.get("retx_spurious"),
        # frames the fabric dropped towards the server (data, and probes)
        "fabric_drops_to_server": data_drops,
        "server_rx_duplicates": s.get("qp_counters", {}).get("rx_duplicates"),
        "rtt_us_mean": [p.get("rtt_us_mean") for p in c.get("ports", [])],
    }


def fabric_part(apps, rounds, secs, work, procs):
    res = {name: {case[0]: [] for case in FABRIC_CASES} for name in apps}
    for r in range(rounds):
        for case, args, cargs, _ in FABRIC_CASES:
            for name, app in apps.items():
                x = fabric_run(app, args, work, f"{name}-{case}-{r}", secs, procs, cargs)
                res[name][case].append(x)
                print(f"  [{r}] {name:6} {case:26} {x.get('goodput_gbps', 0):6.2f} Gb/s "
                      f"retx {x.get('retransmissions')} timeouts {x.get('ack_timeouts')} "
                      f"verified {x.get('verified')}", flush=True)
    out = {}
    for name in apps:
        o = {}
        for case, _, _, ref in FABRIC_CASES:
            runs = res[name][case]
            o[case] = {
                "runs": runs,
                "median_goodput_gbps": med([x.get("goodput_gbps") for x in runs]),
                "all_verified": all(x.get("verified") for x in runs),
                "compared_with": ref,
                "ratio_per_round": [x.get("goodput_gbps", 0) / c["goodput_gbps"]
                                    for x, c in zip(runs, res[name][ref]) if c.get("goodput_gbps")],
            }
            o[case]["median_ratio_to_clean"] = med(o[case]["ratio_per_round"])
        out[name] = o
    return out


# ---- 3. a daemon killed ----------------------------------------------------------

def mrcd_kill_run(app, work, tag, procs, cap_s):
    d = os.path.join(work, tag)
    os.makedirs(d)
    daemons = {}
    for w, lc, role in (("a", "0@1,1@0", "server"), ("b", "0@0,1@1", "client")):
        n = 1 if w == "a" else 2
        with open(f"{d}/{w}.toml", "w") as f:
            f.write(f'[daemon]\nsocket = "{d}/{w}.sock"\n[[plane]]\nip = "10.0.0.{n}"\n'
                    f'[[plane]]\nip = "10.0.1.{n}"\n')
        argv = [f"{app}/mrcd"] + EAL + ["--file-prefix", f"mrc-lr-{tag}-{w}", "--lcores", lc] + [
            f"--vdev=net_memif{p},role={role},socket={d}/m{p}.sock" for p in range(2)] + [
            "--", "--config", f"{d}/{w}.toml"]
        daemons[w] = procs.start(argv, f"{d}/{w}.log")
        time.sleep(0.5)
    for _ in range(200):
        if all("serving" in open(f"{d}/{w}.log").read() for w in "ab"):
            break
        time.sleep(0.1)
    size = str(192 << 20)
    copy = lambda sock, svc, keys, peer, log: procs.start(
        [f"{app}/bulk_copy", "--socket", sock, "--service", svc, "--bytes", size, "--keys", keys]
        + (["--peer", peer] if peer else []), log)
    rx_b = copy(f"{d}/b.sock", "7000", f"{d}/k1", None, f"{d}/rx_b.log")
    tx_a = copy(f"{d}/a.sock", "7000", f"{d}/k1", "10.0.0.2", f"{d}/tx_a.log")
    rx_a = copy(f"{d}/a.sock", "7001", f"{d}/k2", None, f"{d}/rx_a.log")
    tx_b = copy(f"{d}/b.sock", "7001", f"{d}/k2", "10.0.0.1", f"{d}/tx_b.log")
    # Both moving: the receivers have said "connected", and a little more.
    for _ in range(300):
        if all("connected" in open(f"{d}/{x}.log").read() for x in ("rx_a", "rx_b")):
            break
        time.sleep(0.05)
    time.sleep(1.0)
    t0 = time.monotonic()
    os.killpg(daemons["b"].pid, signal.SIGKILL)
    ends = {}
    while len(ends) < 2 and time.monotonic() - t0 < cap_s:
        for name, p in (("sender", tx_a), ("receiver", rx_a)):
            if name not in ends and p.poll() is not None:
                ends[name] = time.monotonic() - t0
        time.sleep(0.002)
    logs = {x: open(f"{d}/{x}.log").read() for x in ("tx_a", "rx_a")}
    procs.stop_all()
    return {"sender_s": ends.get("sender"), "receiver_s": ends.get("receiver"),
            "sender_log": logs["tx_a"].strip()[-160:], "receiver_log": logs["rx_a"].strip()[-160:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--before")
    ap.add_argument("--json", default=os.path.join(ROOT, "bench/results/loss_recovery.json"))
    ap.add_argument("--parts", default="sim,fabric,mrcd")
    a = ap.parse_args()
    apps = {"now": os.path.join(ROOT, "build/app")}
    if a.before:
        apps["before"] = os.path.join(os.path.abspath(a.before), "app")
    for name, app in apps.items():
        if not os.access(f"{app}/mrc-sim", os.X_OK):
            sys.exit(f"{name}: no {app}/mrc-sim: build first")
    parts = set(a.parts.split(","))
    res = {"rounds": a.rounds, "seconds_per_fabric_run": a.seconds, "trees": list(apps)}
    work = tempfile.mkdtemp(prefix="mrc-lr-")
    procs = Procs()
    try:
        if "sim" in parts:
            print("== mrc-sim: 2 planes x 4 paths x 25 Gb/s, 10 us, 4 QPs x 256 KiB, 256 MiB, "
                  "--timeout-exp 12", flush=True)
            res["sim"] = {name: sim_part(f"{app}/mrc-sim") for name, app in apps.items()}
            for case, _ in SIM_CASES:
                line = f"  {case:21}"
                for name in apps:
                    v = res["sim"][name][case]
                    if "error" in v:
                        line += f" | {name}: {v['error'][:60]}"
                        continue
                    line += (f" | {name}: {v['goodput_gbps']:6.2f} Gb/s ({v.get('ratio_to_lossless', 0):.3f}) "
                             f"drops {v['data_drops']} retx {v['retransmissions']} timeouts "
                             f"{v['ack_timeouts']} again {v['arrived_again']}")
                print(line, flush=True)
        if "fabric" in parts:
            print("== mrc-fabric: 2 memif planes x 4 paths, 6 QPs write_imm 64 KiB verified, "
                  f"{a.seconds:g} s, {a.rounds} rounds", flush=True)
            res["fabric"] = fabric_part(apps, a.rounds, a.seconds, work, procs)
            for name in apps:
                for case, *_ in FABRIC_CASES:
                    f = res["fabric"][name][case]
                    print(f"  {name:6} {case:26} median {f['median_goodput_gbps'] or 0:.2f} Gb/s, "
                          f"x clean {f['median_ratio_to_clean'] or 0:.2f}, verified {f['all_verified']}")
        if "mrcd" in parts:
            print("== mrcd: a daemon killed (-9) mid-copy; its peer's QPs", flush=True)
            res["mrcd_kill"] = {}
            for name, app in apps.items():
                runs = [mrcd_kill_run(app, work, f"k-{name}-{r}", procs, 30 if name == "now" else 20)
                        for r in range(a.rounds)]
                res["mrcd_kill"][name] = {
                    "runs": runs,
                    "median_sender_s": med([x["sender_s"] for x in runs]),
                    "median_receiver_s": med([x["receiver_s"] for x in runs])}
                for x in runs:
                    print(f"  {name:6} sender {x['sender_s'] if x['sender_s'] is not None else 'no error'} s, "
                          f"receive-only {x['receiver_s'] if x['receiver_s'] is not None else 'no error'} s",
                          flush=True)
    finally:
        procs.stop_all()
        subprocess.run(f"rm -rf {work} /var/run/dpdk/mrc-lr-*", shell=True)
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    res["machine"] = {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release()}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
