#!/usr/bin/env python3
"""Google Benchmark before/after, interleaved: for every benchmark of a
program, the old and the new binary run one after the other, several times
over, so that a noisy neighbour hits both alike. Reports the median of each
side's medians and their ratio, and writes the raw runs as JSON.

  bench/gbench_compare.py OLD_BIN NEW_BIN [--rounds 3] [--filter REGEX] [--cpu N] [--out FILE]
"""
import argparse
import json
import statistics
import subprocess
import sys


CPU = []


def run(binary, name, reps):
    out = subprocess.run(
        CPU + [binary, f"--benchmark_filter=^{name}$", f"--benchmark_repetitions={reps}",
         "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
        capture_output=True, text=True, check=True).stdout
    for b in json.loads(out)["benchmarks"]:
        # One repetition has no aggregates: its one run is the figure.
        if b.get("aggregate_name") == "median" or (reps == 1 and b.get("run_type") == "iteration"):
            return b["real_time"], b["time_unit"]
    raise RuntimeError(f"{binary}: no median for {name}")


def names(binary, regex):
    out = subprocess.run([binary, "--benchmark_list_tests=true", f"--benchmark_filter={regex}"],
                         capture_output=True, text=True, check=True).stdout
    return [n for n in out.split() if n]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--filter", default=".")
    ap.add_argument("--out")
    ap.add_argument("--cpu", help="pin both programs to this CPU (taskset)")
    a = ap.parse_args()
    if a.cpu is not None:
        CPU.extend(["taskset", "-c", a.cpu])
    res = {"old": a.old, "new": a.new, "rounds": a.rounds, "benchmarks": {}}
    print(f"{'benchmark':44} {'before':>10} {'after':>10} {'unit':4} {'after/before':>12}")
    worst = 0.0
    for n in names(a.new, a.filter):
        old, new = [], []
        unit = "ns"
        for _ in range(a.rounds):
            t, unit = run(a.old, n, a.reps)
            old.append(t)
            t, unit = run(a.new, n, a.reps)
            new.append(t)
        mo, mn = statistics.median(old), statistics.median(new)
        res["benchmarks"][n] = {"unit": unit, "before": old, "after": new,
                                "ratio": mn / mo if mo else None}
        worst = max(worst, mn / mo if mo else 0)
        print(f"{n:44} {mo:10.1f} {mn:10.1f} {unit:4} {mn / mo:12.2f}", flush=True)
    if a.out:
        json.dump(res, open(a.out, "w"), indent=2)
    print(f"largest after/before: {worst:.2f}")


if __name__ == "__main__":
    sys.exit(main())
