#!/usr/bin/env bash
# The sidecar's cost, in one run, over the same memif pairs and message size:
#   1. mrc-gen WRITE (the dataplane with the application inside the worker
#      loop) vs mrc_write_bw through two mrcd daemons (applications in
#      their own processes, work requests and completions through the
#      shared-memory rings): goodput, 2 planes, 1 QP, 64 KiB messages,
#      16 outstanding;
#   2. mrc-gen pingpong vs mrc_write_lat: 64-byte WRITE_WITH_IMM round trips.
# Every side's worker shares its CPU: workers on both CPUs crossed, as in
# bench/memif_vs_testpmd.sh; each perftest process is pinned to the CPU of
# its own daemon's worker and yields on an empty CQ; workers use the
# `yield` idle mode in both cases (mrc-gen too), and mrc-gen pingpong is
# also run busy (its best case). Rounds repeat (default 3), medians are
# reported with ratios. Prints a table and writes JSON
# (default bench/results/mrcd.json).
#
#   bench/mrcd_vs_gen.sh [seconds per run (default 4)] [json path] [repeats (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-4}
out=${2:-bench/results/mrcd.json}
reps=${3:-3}
b=build/app
for x in mrc-gen mrcd mrc_write_bw mrc_write_lat; do
  [ -x "$b/$x" ] || { echo "build first: meson compile -C build" >&2; exit 2; }
done
work=$(mktemp -d /tmp/mrc-bench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work" /var/run/dpdk/mrc-bench-*
}
trap cleanup EXIT INT TERM
eal=(--no-huge -m 1024 --no-pci --log-level=lib.eal:error)
# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../tests/support/procs.sh"

vdevs() {  # role tag
  for p in 0 1; do echo "--vdev=net_memif$p,role=$1,socket=$work/$2-$p.sock"; done
}

port=$((25000 + $$ % 9000))
run_gen() {  # tag idle extra-args...
  local tag=$1 idle=$2
  shift 2
  port=$((port + 1))
  "$b/mrc-gen" "${eal[@]}" --file-prefix "mrc-bench-$tag-s" --lcores 0@1,1@0 $(vdevs server "$tag") -- \
    --role server --oob "127.0.0.1:$port" --stats-period 0 --idle "$idle" "$@" \
    --json "$work/$tag-s.json" >"$work/$tag-s.log" 2>&1 &
  local sp=$!; pids+=("$sp")
  sleep 0.5
  "$b/mrc-gen" "${eal[@]}" --file-prefix "mrc-bench-$tag-c" --lcores 0@0,1@1 $(vdevs client "$tag") -- \
    --role client --oob "127.0.0.1:$port" --stats-period 0 --idle "$idle" --duration "$secs" "$@" \
    --json "$work/$tag-c.json" >"$work/$tag-c.log" 2>&1 || cat "$work/$tag-c.log" >&2
  wait "$sp" || true
}

# Daemon A: worker on CPU 0; daemon B: worker on CPU 1.
start_daemons() {  # tag
  local t=$1
  for w in a b; do
    local ip0=10.0.0.1 ip1=10.0.1.1
    [ "$w" = b ] && ip0=10.0.0.2 ip1=10.0.1.2
    printf '[daemon]\nsocket = "%s"\n[dataplane]\nidle = "yield"\n[[plane]]\nip = "%s"\n[[plane]]\nip = "%s"\n' \
      "$work/$t-$w.sock" "$ip0" "$ip1" >"$work/$t-$w.toml"
  done
  "$b/mrcd" "${eal[@]}" --file-prefix "mrc-bench-$t-a" --lcores 0@1,1@0 $(vdevs server "$t") -- \
    --config "$work/$t-a.toml" >"$work/$t-a.log" 2>&1 &
  da=$!; pids+=("$da")
  sleep 0.5
  "$b/mrcd" "${eal[@]}" --file-prefix "mrc-bench-$t-b" --lcores 0@0,1@1 $(vdevs client "$t") -- \
    --config "$work/$t-b.toml" >"$work/$t-b.log" 2>&1 &
  db=$!; pids+=("$db")
  for _ in $(seq 200); do
    grep -q "mrcd: ready" "$work/$t-a.log" 2>/dev/null && grep -q "mrcd: ready" "$work/$t-b.log" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "mrcd did not start:" >&2; tail "$work/$t-a.log" "$work/$t-b.log" >&2; exit 1
}
stop_daemons() { stop_pid "$da" TERM 10; stop_pid "$db" TERM 10; }

run_perf() {  # daemons-tag run-tag tool args...
  local d=$1 t=$2 tool=$3
  shift 3
  port=$((port + 1))
  taskset -c 1 "$b/$tool" --socket "$work/$d-b.sock" -p "$port" --yield "$@" >"$work/$t-srv.log" 2>&1 &
  local sp=$!; pids+=("$sp")
  sleep 0.3
  taskset -c 0 "$b/$tool" --socket "$work/$d-a.sock" -p "$port" --yield "$@" \
    --json "$work/$t.json" 127.0.0.1 >"$work/$t-cli.log" 2>&1 || cat "$work/$t-cli.log" >&2
  wait "$sp" || true
}

for ((r = 0; r < reps; r++)); do
  echo "== [$r] mrc-gen WRITE, 2 planes, 1 QP x 64 KiB, depth 16, idle yield"
  run_gen "gw-$r" yield --mode write --qps 1 --msg-bytes 65536 --depth 16
  echo "== [$r] mrc-gen pingpong 64 B, idle yield"
  run_gen "gp-$r" yield --mode pingpong --qps 1 --msg-bytes 64
  echo "== [$r] mrc-gen pingpong 64 B, busy"
  run_gen "gb-$r" busy --mode pingpong --qps 1 --msg-bytes 64
  start_daemons "d$r"
  echo "== [$r] mrc_write_bw through mrcd, 2 planes, 1 QP x 64 KiB, depth 16"
  run_perf "d$r" "d$r-bw" mrc_write_bw -s 65536 -t 16 -q 1 -D "$secs"
  echo "== [$r] mrc_write_lat through mrcd, 64 B"
  run_perf "d$r" "d$r-lat" mrc_write_lat -s 64 -n 20000
  stop_daemons
done

mkdir -p "$(dirname "$out")"
python3 - "$work" "$secs" "$out" "$reps" <<'PY'
import json, os, platform, statistics, subprocess, sys
work, secs, out, reps = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def load(path):
    try:
        return json.load(open(os.path.join(work, path)))
    except (OSError, ValueError):
        return None
med = statistics.median
gen_bw = [j["goodput_gbps"] for r in range(reps) if (j := load(f"gw-{r}-c.json"))]
gen_pp = [j["latency_us"]["p50"] for r in range(reps) if (j := load(f"gp-{r}-c.json")) and "latency_us" in j]
gen_ppb = [j["latency_us"]["p50"] for r in range(reps) if (j := load(f"gb-{r}-c.json")) and "latency_us" in j]
d_bw = [j["bw_gbps"] for r in range(reps) if (j := load(f"d{r}-bw.json"))]
d_lat = [j["rtt_us"]["p50"] for r in range(reps) if (j := load(f"d{r}-lat.json"))]
ratios = [d / g for d, g in zip(d_bw, gen_bw)]
res = {"seconds_per_run": secs, "repeats": reps, "msg_bytes": 65536, "planes": 2,
       "mrc_gen_write_gbps": gen_bw, "mrcd_write_bw_gbps": d_bw,
       "ratio_mrcd_vs_gen_per_round": ratios,
       "mrc_gen_pingpong_p50_us_yield": gen_pp, "mrc_gen_pingpong_p50_us_busy": gen_ppb,
       "mrcd_write_lat_rtt_p50_us": d_lat}
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
res["machine"] = {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release()}
def m(x):
    return med(x) if x else float("nan")
res["median"] = {"mrc_gen_write_gbps": m(gen_bw), "mrcd_write_bw_gbps": m(d_bw),
                 "ratio": m(ratios), "mrc_gen_pingpong_p50_us_yield": m(gen_pp),
                 "mrc_gen_pingpong_p50_us_busy": m(gen_ppb), "mrcd_write_lat_rtt_p50_us": m(d_lat)}
M = res["median"]
print(f"goodput, 64 KiB WRITEs, 2 planes: mrc-gen {M['mrc_gen_write_gbps']:.2f} Gb/s, "
      f"mrc_write_bw via mrcd {M['mrcd_write_bw_gbps']:.2f} Gb/s, ratio {M['ratio']:.2f} "
      f"(per round {', '.join(f'{x:.2f}' for x in ratios)})")
print(f"64 B round trip p50: mrc-gen pingpong {M['mrc_gen_pingpong_p50_us_yield']:.1f} us (yield), "
      f"{M['mrc_gen_pingpong_p50_us_busy']:.1f} us (busy); mrc_write_lat via mrcd "
      f"{M['mrcd_write_lat_rtt_p50_us']:.1f} us")
json.dump(res, open(out, "w"), indent=2)
print(f"results: {out}")
PY
