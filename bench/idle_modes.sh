#!/usr/bin/env bash
# The idle modes of mrcd's workers, side by side in one run: for each mode,
# two daemons over 2 memif planes (workers crossed over the 2 CPUs, as in
# bench/mrcd_vs_gen.sh) and
#   1. the CPU each idle daemon uses (no application; /proc/PID/stat over
#      the idle window), in % of one CPU;
#   2. mrc_write_lat through them: 64-byte WRITE_WITH_IMM round trips, the
#      two applications pinned next to their daemon's worker and yielding
#      on an empty CQ (p50 / p99 / p99.9);
#   3. the CPU of the same daemons idle again after that traffic.
# Modes: adaptive (mrcd's default), busy, sleep (the default before
# adaptive), yield. Rounds repeat (default 3); medians per mode, and each
# mode's p50 as a ratio to busy's in the same round. JSON to
# bench/results/idle-modes.json unless told otherwise.
#
#   bench/idle_modes.sh [rounds (default 3)] [json path] [idle seconds (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
out=${2:-bench/results/idle-modes.json}
idle_s=${3:-3}
b=${MRC_BIN_DIR:-build/app}
modes=${MRC_IDLE_MODES:-"adaptive busy sleep yield"}
for x in mrcd mrc_write_lat; do
  [ -x "$b/$x" ] || { echo "build first: meson compile -C build" >&2; exit 2; }
done
work=$(mktemp -d /tmp/mrc-idle-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work" /var/run/dpdk/mrc-idle-*
}
trap cleanup EXIT INT TERM
# shellcheck source=tests/support/procs.sh
source tests/support/procs.sh
eal=(--no-huge -m 1024 --no-pci --log-level=lib.eal:error)
vdevs() {  # role tag
  for p in 0 1; do echo "--vdev=net_memif$p,role=$1,socket=$work/$2-$p.sock"; done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

start_daemons() {  # tag mode
  local t=$1 mode=$2
  for w in a b; do
    local ip0=10.0.0.1 ip1=10.0.1.1
    [ "$w" = b ] && ip0=10.0.0.2 ip1=10.0.1.2
    printf '[daemon]\nsocket = "%s"\n[dataplane]\nidle = "%s"\n[[plane]]\nip = "%s"\n[[plane]]\nip = "%s"\n' \
      "$work/$t-$w.sock" "$mode" "$ip0" "$ip1" >"$work/$t-$w.toml"
  done
  "$b/mrcd" "${eal[@]}" --file-prefix "mrc-idle-$t-a" --lcores 0@1,1@0 $(vdevs server "$t") -- \
    --config "$work/$t-a.toml" >"$work/$t-a.log" 2>&1 &
  da=$!; pids+=("$da")
  sleep 0.5
  "$b/mrcd" "${eal[@]}" --file-prefix "mrc-idle-$t-b" --lcores 0@0,1@1 $(vdevs client "$t") -- \
    --config "$work/$t-b.toml" >"$work/$t-b.log" 2>&1 &
  db=$!; pids+=("$db")
  for _ in $(seq 200); do
    grep -q "mrcd: ready" "$work/$t-a.log" 2>/dev/null && grep -q "mrcd: ready" "$work/$t-b.log" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "mrcd did not start:" >&2; tail "$work/$t-a.log" "$work/$t-b.log" >&2; exit 1
}

idle_cpu() {  # out-file: % of one CPU used by each daemon over idle_s
  local a0 b0 a1 b1
  sleep 0.5  # past the start-up (or the last traffic's spin)
  a0=$(cpu_ticks "$da"); b0=$(cpu_ticks "$db")
  sleep "$idle_s"
  a1=$(cpu_ticks "$da"); b1=$(cpu_ticks "$db")
  python3 -c "import sys; h,s=$hz,$idle_s; print(round(100*($a1-$a0)/(h*s),2), round(100*($b1-$b0)/(h*s),2))" >"$1"
}

port=$((26000 + $$ % 9000))
for ((r = 0; r < reps; r++)); do
  for m in $modes; do
    t="$m-$r"
    echo "== [$r] $m"
    start_daemons "$t" "$m"
    idle_cpu "$work/$t.idle0"
    port=$((port + 1))
    taskset -c 1 "$b/mrc_write_lat" --socket "$work/$t-b.sock" -p "$port" --yield -s 64 -n 20000 \
      >"$work/$t-srv.log" 2>&1 &
    sp=$!; pids+=("$sp")
    sleep 0.3
    if taskset -c 0 "$b/mrc_write_lat" --socket "$work/$t-a.sock" -p "$port" --yield -s 64 -n 20000 \
      --json "$work/$t.json" 127.0.0.1 >"$work/$t-cli.log" 2>&1; then
      echo 0 >"$work/$t.rc"
    else
      echo $? >"$work/$t.rc"; cat "$work/$t-cli.log" >&2
    fi
    wait "$sp" || echo "server: $?" >>"$work/$t.rc"
    idle_cpu "$work/$t.idle1"
    stop_pid "$da" TERM 10; stop_pid "$db" TERM 10
  done
done

python3 - "$work" "$out" "$reps" "$modes" <<'EOF'
import json, os, platform, statistics, subprocess, sys
work, out, reps, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
def read(p):
    try:
        with open(p) as f: return f.read().strip()
    except OSError: return None
rounds = {m: [] for m in modes}
for r in range(reps):
    for m in modes:
        t = f"{m}-{r}"
        ok = read(f"{work}/{t}.rc") == "0"
        j = json.loads(read(f"{work}/{t}.json") or "{}") if ok else {}
        i0 = [float(x) for x in (read(f"{work}/{t}.idle0") or "nan nan").split()]
        i1 = [float(x) for x in (read(f"{work}/{t}.idle1") or "nan nan").split()]
        rtt = j.get("rtt_us", {})
        rounds[m].append({"ok": ok and bool(rtt), "rtt_us": rtt, "idle_cpu_pct_before": i0,
                          "idle_cpu_pct_after": i1})
def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else None
summary = {}
for m in modes:
    good = [x for x in rounds[m] if x["ok"]]
    s = {"rounds_ok": len(good), "rounds": reps}
    for q in ("p50", "p99", "p999"):
        s[f"rtt_{q}_us"] = med([x["rtt_us"].get(q, float("nan")) for x in good])
    s["idle_cpu_pct_per_daemon"] = med([v for x in rounds[m] for v in x["idle_cpu_pct_before"] + x["idle_cpu_pct_after"]])
    ratios = []
    for r in range(reps):
        a, bz = rounds[m][r], rounds.get("busy", [None] * reps)[r]
        if bz and a["ok"] and bz["ok"]:
            ratios.append(a["rtt_us"]["p50"] / bz["rtt_us"]["p50"])
    s["p50_vs_busy"] = med(ratios)
    summary[m] = s
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
res = {"bench": "idle_modes", "rounds": rounds, "summary": summary,
       "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "machine": {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release()}}
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(out, "w") as f: json.dump(res, f, indent=1)
print(f"{'mode':10} {'ok':>5} {'p50 us':>8} {'p99 us':>8} {'p99.9 us':>9} {'p50/busy':>9} {'idle CPU %':>11}")
fmt = lambda v, w, d=1: f"{v:{w}.{d}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"
for m, s in summary.items():
    print(f"{m:10} {s['rounds_ok']:>2}/{s['rounds']:<2} {fmt(s['rtt_p50_us'],8)} {fmt(s['rtt_p99_us'],8)} "
          f"{fmt(s['rtt_p999_us'],9)} {fmt(s['p50_vs_busy'],9,2)} {fmt(s['idle_cpu_pct_per_daemon'],11,2)}")
print(f"(medians of {reps} rounds; idle CPU: each daemon, % of one CPU, before and after the traffic)")
EOF
