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
# reported with ratios; a ratio pairs the two runs of one round, and a round
# whose run failed (non-zero exit, or no result) is reported as failed and
# pairs with nothing. Prints a table and writes JSON
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
    --json "$work/$tag-c.json" >"$work/$tag-c.log" 2>&1 && echo 0 >"$work/$tag.rc" ||
    { echo $? >"$work/$tag.rc"; cat "$work/$tag-c.log" >&2; }
  wait "$sp" || echo "server: $?" >>"$work/$tag.rc"
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
    --json "$work/$t.json" 127.0.0.1 >"$work/$t-cli.log" 2>&1 && echo 0 >"$work/$t.rc" ||
    { echo $? >"$work/$t.rc"; cat "$work/$t-cli.log" >&2; }
  wait "$sp" || echo "server: $?" >>"$work/$t.rc"
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
def load(tag, json_name):
    """The run's JSON when it succeeded (both ends exited 0), else None."""
    try:
        if open(os.path.join(work, f"{tag}.rc")).read().strip() != "0":
            return None
        return json.load(open(os.path.join(work, json_name)))
    except (OSError, ValueError):
        return None
med = statistics.median
def per_round(tag, json_name, value):
    out = {}
    for r in range(reps):
        j = load(tag.format(r=r), json_name.format(r=r))
        try:
            out[r] = value(j) if j else None
        except (KeyError, TypeError):
            out[r] = None
    return out
gen_bw_r = per_round("gw-{r}", "gw-{r}-c.json", lambda j: j["goodput_gbps"])
gen_pp_r = per_round("gp-{r}", "gp-{r}-c.json", lambda j: j["latency_us"]["p50"])
gen_ppb_r = per_round("gb-{r}", "gb-{r}-c.json", lambda j: j["latency_us"]["p50"])
d_bw_r = per_round("d{r}-bw", "d{r}-bw.json", lambda j: j["bw_gbps"])
d_lat_r = per_round("d{r}-lat", "d{r}-lat.json", lambda j: j["rtt_us"]["p50"])
ok = lambda rr: [v for v in rr.values() if v is not None]
failed = lambda rr: [r for r, v in rr.items() if v is None]
gen_bw, gen_pp, gen_ppb, d_bw, d_lat = map(ok, (gen_bw_r, gen_pp_r, gen_ppb_r, d_bw_r, d_lat_r))
# A ratio pairs the two runs of the same round.
ratios = [d_bw_r[r] / gen_bw_r[r] for r in range(reps)
          if d_bw_r[r] is not None and gen_bw_r[r] is not None and gen_bw_r[r] > 0]
failed_rounds = {name: failed(rr) for name, rr in
                 (("mrc_gen_write", gen_bw_r), ("mrc_gen_pingpong_yield", gen_pp_r),
                  ("mrc_gen_pingpong_busy", gen_ppb_r), ("mrcd_write_bw", d_bw_r),
                  ("mrcd_write_lat", d_lat_r)) if failed(rr)}
res = {"seconds_per_run": secs, "repeats": reps, "msg_bytes": 65536, "planes": 2,
       "mrc_gen_write_gbps": gen_bw, "mrcd_write_bw_gbps": d_bw,
       "ratio_mrcd_vs_gen_per_round": ratios,
       "mrc_gen_pingpong_p50_us_yield": gen_pp, "mrc_gen_pingpong_p50_us_busy": gen_ppb,
       "mrcd_write_lat_rtt_p50_us": d_lat, "failed_rounds": failed_rounds}
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
for name, rs in failed_rounds.items():
    print(f"FAILED: {name} in round(s) {', '.join(map(str, rs))} (left out of the medians)")
json.dump(res, open(out, "w"), indent=2)
print(f"results: {out}")
PY
