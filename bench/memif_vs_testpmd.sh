#!/usr/bin/env bash
# mrc-gen against the machine's ceiling, in one run, over the same memif
# pairs and frame size (1514-byte frames: 1500-byte IP MTU):
#   1. testpmd txonly -> rxonly over one memif pair: the raw packet rate;
#   2. mrc-gen WRITE goodput and packet rate over 1, 2 and 4 memif planes,
#      with UDP checksums (the default) and without;
#   3. mrc-gen pingpong of 64-byte messages: p50 / p99 / p99.9 latency.
# Both ends busy-poll one worker lcore each, crossed over the two CPUs.
# Every mrc-gen run is repeated (default 3 times, alternating with the
# others); the table gives the median run. Prints a table and writes JSON
# (default bench/results/memif.json).
#
#   bench/memif_vs_testpmd.sh [seconds per run (default 5)] [json path] [repeats (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
out=${2:-bench/results/memif.json}
reps=${3:-3}
gen=build/app/mrc-gen
[ -x "$gen" ] || { echo "build first: meson compile -C build" >&2; exit 2; }
work=$(mktemp -d /tmp/mrc-bench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work" /var/run/dpdk/mrc-bench-*
}
trap cleanup EXIT INT TERM
eal=(--no-huge -m 1024 --no-pci --log-level=lib.eal:error)

vdevs() {  # role planes tag
  for ((p = 0; p < $2; p++)); do echo "--vdev=net_memif$p,role=$1,socket=$work/$3-$p.sock"; done
}

# Stops a process by PID: SIGINT (testpmd prints and exits), then SIGKILL.
stop() {
  kill -INT "$1" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}

echo "== testpmd txonly -> rxonly, one memif pair, 1514-byte frames, ${secs} s"
dpdk-testpmd "${eal[@]}" --file-prefix mrc-bench-tps --lcores 0@1,1@0 $(vdevs server 1 tp) -- \
  --forward-mode=rxonly --nb-cores 1 --total-num-mbufs 16384 --stats-period 1 \
  >"$work/tp-rx.log" 2>&1 &
rxp=$!; pids+=("$rxp")
sleep 1
dpdk-testpmd "${eal[@]}" --file-prefix mrc-bench-tpc --lcores 0@0,1@1 $(vdevs client 1 tp) -- \
  --forward-mode=txonly --txpkts=1514 --nb-cores 1 --total-num-mbufs 16384 --stats-period 1 \
  >"$work/tp-tx.log" 2>&1 &
txp=$!; pids+=("$txp")
sleep "$((secs + 2))"
stop "$txp"; stop "$rxp"
# Median of the per-second RX rates, after the first (warm-up) line.
testpmd_pps=$(grep -a 'Rx-pps' "$work/tp-rx.log" | awk '$2 > 0 {print $2}' | tail -n +2 | sort -n |
  awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : 0)}')
echo "   testpmd rxonly: ${testpmd_pps} packets/s"

port=$((21000 + $$ % 9000))
run_gen() {  # tag planes extra-args...
  local tag=$1 planes=$2
  shift 2
  port=$((port + 1))
  "$gen" "${eal[@]}" --file-prefix "mrc-bench-$tag-s" --lcores 0@1,1@0 $(vdevs server "$planes" "$tag") -- \
    --role server --oob "127.0.0.1:$port" --stats-period 0 "$@" --json "$work/$tag-s.json" \
    >"$work/$tag-s.log" 2>&1 &
  local sp=$!; pids+=("$sp")
  sleep 0.5
  "$gen" "${eal[@]}" --file-prefix "mrc-bench-$tag-c" --lcores 0@0,1@1 $(vdevs client "$planes" "$tag") -- \
    --role client --oob "127.0.0.1:$port" --stats-period 0 --duration "$secs" "$@" \
    --json "$work/$tag-c.json" >"$work/$tag-c.log" 2>&1 || { cat "$work/$tag-c.log" >&2; }
  wait "$sp" || true
}

for ((r = 0; r < reps; r++)); do
  for planes in 1 2 4; do
    echo "== [$r] mrc-gen WRITE, ${planes} plane(s), 4 QPs x 64 KiB messages, UDP checksums on"
    run_gen "w$planes-$r" "$planes" --mode write --qps 4 --msg-bytes 65536
    echo "== [$r] mrc-gen WRITE, ${planes} plane(s), UDP checksums off"
    run_gen "n$planes-$r" "$planes" --mode write --qps 4 --msg-bytes 65536 --no-udp-cksum
  done
  echo "== [$r] mrc-gen WRITE, 1 plane, zero-copy transmit (extbuf mbufs), UDP checksums off"
  run_gen "z1-$r" 1 --mode write --qps 4 --msg-bytes 65536 --no-udp-cksum --zero-copy
  echo "== [$r] mrc-gen pingpong, 1 plane, 64-byte messages"
  run_gen "pp-$r" 1 --mode pingpong --qps 1 --msg-bytes 64
done

mkdir -p "$(dirname "$out")"
python3 - "$work" "$testpmd_pps" "$secs" "$out" "$reps" <<'PY'
import json, os, platform, subprocess, sys
work, tp_pps, secs, out, reps = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
def load(tag):
    # The median of the repeated runs, by goodput (pingpong: by p99).
    runs = []
    for r in range(reps):
        p = os.path.join(work, f"{tag}-{r}-c.json")
        if os.path.exists(p):
            runs.append(json.load(open(p)))
    if not runs:
        return None
    key = (lambda j: j.get("latency_us", {}).get("p99", 0)) if tag == "pp" else (lambda j: j["goodput_gbps"])
    runs.sort(key=key)
    return runs[len(runs) // 2]
frame = 1514
res = {"seconds_per_run": secs, "repeats": reps, "frame_bytes": frame,
       "testpmd_rx_pps": tp_pps, "testpmd_gbps": tp_pps * frame * 8 / 1e9, "runs": {}}
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
res["machine"] = {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release()}
print(f"{'run':34} {'Gb/s':>7} {'data Mpps':>9} {'x testpmd pps':>13} {'retx':>7} {'ok':>3}")
print(f"{'testpmd txonly->rxonly':34} {res['testpmd_gbps']:7.2f} {tp_pps/1e6:9.3f} {1.0:13.2f}")
names = {"w1": "mrc-gen 1 plane", "w2": "mrc-gen 2 planes", "w4": "mrc-gen 4 planes",
         "n1": "mrc-gen 1 plane, no UDP cksum", "n2": "mrc-gen 2 planes, no UDP cksum",
         "n4": "mrc-gen 4 planes, no UDP cksum", "z1": "mrc-gen 1 plane, zero-copy, no cksum"}
for tag, name in names.items():
    j = load(tag)
    if j is None:
        print(f"{name:34} (failed)"); continue
    data_pps = sum(p["tx_data_pkts"] + p["tx_retx_pkts"] for p in j["ports"]) / j["elapsed_s"]
    ok = j["qp_errors"] == 0 and j["verify_errors"] == 0
    r = {"goodput_gbps": j["goodput_gbps"], "data_mpps": data_pps / 1e6,
         "ratio_pps_vs_testpmd": data_pps / tp_pps if tp_pps else 0,
         "ratio_gbps_vs_testpmd": j["goodput_gbps"] / res["testpmd_gbps"] if tp_pps else 0,
         "retransmissions": j["retransmissions"], "qp_errors": j["qp_errors"], "ok": ok}
    res["runs"][tag] = r
    print(f"{name:34} {r['goodput_gbps']:7.2f} {r['data_mpps']:9.3f} {r['ratio_pps_vs_testpmd']:13.2f} "
          f"{r['retransmissions']:7d} {'yes' if ok else 'NO':>3}")
pp = load("pp")
if pp and "latency_us" in pp:
    l = pp["latency_us"]
    res["pingpong_64B_us"] = {k: l[k] for k in ("p50", "p99", "p999", "samples")}
    print(f"pingpong 64 B: p50 {l['p50']:.1f} us, p99 {l['p99']:.1f} us, p99.9 {l['p999']:.1f} us "
          f"({l['samples']} round trips)")
json.dump(res, open(out, "w"), indent=2)
print(f"results: {out}")
PY
