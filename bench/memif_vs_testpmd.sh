#!/usr/bin/env bash
# mrc-gen against the machine's ceiling, in one run, over the same memif
# pairs and frame size (1514-byte frames: 1500-byte IP MTU):
#   1. testpmd txonly -> rxonly over one memif pair: the raw packet rate;
#   2. mrc-gen WRITE goodput and packet rate over 1, 2 and 4 memif planes,
#      with UDP checksums (the default) and without, every message checked
#      by the receiver (--verify);
#      and over 1 plane at MTU 9000 (memif buffers of 9018 bytes);
#   3. mrc-gen pingpong of 64-byte messages: p50 / p99 / p99.9 latency.
# Both ends busy-poll one worker lcore each, crossed over the two CPUs.
# Cost per packet next to the rates: testpmd's own count of busy cycles per
# packet (--record-core-cycles) on each side, and mrc-gen's (its workers'
# cycles_* counters: busy cycles over every frame received and sent, and
# their split by stage), for the sender (client) and the receiver (server).
# Every run, testpmd's included, is repeated (default 3 rounds); each
# mrc-gen run is compared with the testpmd run of its round, and the table
# gives medians over the rounds (this machine's neighbours are noisy).
# Like is compared with like: the packets per second the mrc-gen receiver
# took from its ports (data, retransmissions and probes: every frame, as
# testpmd rxonly counts them) against testpmd's receive rate; goodput counts
# only new bytes. A round is ok when both ends exited 0 and the receiver
# verified bytes with no error; a failed round is reported as failed, not
# left out. Prints a table and writes JSON (default bench/results/memif.json).
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
  # Buffers for 9000-byte MTUs (MTU + 18) for the jumbo runs (tags j*).
  local extra=""
  [[ $3 == j* ]] && extra=",bsize=9018"
  for ((p = 0; p < $2; p++)); do echo "--vdev=net_memif$p,role=$1,socket=$work/$3-$p.sock$extra"; done
}

# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../tests/support/procs.sh"
stop() { stop_pid "$1" INT 3; }

# Starts testpmd rxonly (server) and txonly (client, 1514-byte frames) on
# one memif pair named by $1, both with --record-core-cycles; sets rxp, txp.
start_testpmd_pair() {
  local tag=$1
  dpdk-testpmd "${eal[@]}" --file-prefix mrc-bench-tps --lcores 0@1,1@0 $(vdevs server 1 "$tag") -- \
    --forward-mode=rxonly --nb-cores 1 --total-num-mbufs 16384 --stats-period 1 \
    --record-core-cycles >"$work/$tag-rx.log" 2>&1 &
  rxp=$!; pids+=("$rxp")
  # The memif client fails for good if the server is not listening yet.
  for _ in $(seq 100); do
    grep -q "@$work/$tag-0.sock" /proc/net/unix 2>/dev/null && break
    sleep 0.1
  done
  dpdk-testpmd "${eal[@]}" --file-prefix mrc-bench-tpc --lcores 0@0,1@1 $(vdevs client 1 "$tag") -- \
    --forward-mode=txonly --txpkts=1514 --nb-cores 1 --total-num-mbufs 16384 --stats-period 1 \
    --record-core-cycles >"$work/$tag-tx.log" 2>&1 &
  txp=$!; pids+=("$txp")
}

# testpmd txonly -> rxonly over one memif pair; writes the median of its
# per-second RX rates (after the first, partial, one) to $work/tp-$1.pps,
# and each side's cycles per packet to $work/tp-$1-{rx,tx}.cpp.
run_testpmd() {
  local r=$1 rxp txp
  echo "== [$r] testpmd txonly -> rxonly, one memif pair, 1514-byte frames, ${secs} s"
  start_testpmd_pair "tp$r"
  sleep "$((secs + 4))"
  stop "$txp"; stop "$rxp"
  local pps
  pps=$(grep -a 'Rx-pps' "$work/tp$r-rx.log" | awk '$2 > 0 {print $2}' | tail -n +2 | sort -n |
    awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : 0)}')
  echo "   testpmd rxonly: ${pps} packets/s"
  if [ "${pps:-0}" = 0 ]; then
    echo "testpmd moved no packets; its logs:" >&2
    tail -n 20 "$work/tp$r-rx.log" "$work/tp$r-tx.log" >&2
    exit 1
  fi
  echo "$pps" >"$work/tp-$r.pps"
  # At exit testpmd prints "CPU cycles/packet=<x> (...)" for its core, from
  # its port counters; memif clears those when its peer goes, so only the
  # end stopped first prints it: here the sender (txonly).
  grep -ao 'CPU cycles/packet=[0-9.]*' "$work/tp$r-tx.log" | tail -1 | cut -d= -f2 \
    >"$work/tp-$r-tx.cpp" || true
  # The receiver's figure from a second, shorter run, in which the sender
  # is frozen (SIGSTOP: its memif stays connected) while the receiver stops.
  start_testpmd_pair "tq$r"
  sleep 4
  kill -STOP "$txp" 2>/dev/null || true
  stop "$rxp"
  kill -CONT "$txp" 2>/dev/null || true
  stop "$txp"
  grep -ao 'CPU cycles/packet=[0-9.]*' "$work/tq$r-rx.log" | tail -1 | cut -d= -f2 \
    >"$work/tp-$r-rx.cpp" || true
  echo "   testpmd cycles/packet: txonly $(cat "$work/tp-$r-tx.cpp"), rxonly $(cat "$work/tp-$r-rx.cpp")"
}

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
    --json "$work/$tag-c.json" >"$work/$tag-c.log" 2>&1 && echo 0 >"$work/$tag-c.rc" ||
    { echo $? >"$work/$tag-c.rc"; cat "$work/$tag-c.log" >&2; }
  wait "$sp" && echo 0 >"$work/$tag-s.rc" || echo $? >"$work/$tag-s.rc"
}

for ((r = 0; r < reps; r++)); do
  run_testpmd "$r"
  for planes in 1 2 4; do
    echo "== [$r] mrc-gen WRITE, ${planes} plane(s), 4 QPs x 64 KiB messages, UDP checksums on"
    run_gen "w$planes-$r" "$planes" --mode write --qps 4 --msg-bytes 65536 --verify
    echo "== [$r] mrc-gen WRITE, ${planes} plane(s), UDP checksums off"
    run_gen "n$planes-$r" "$planes" --mode write --qps 4 --msg-bytes 65536 --no-udp-cksum --verify
  done
  echo "== [$r] mrc-gen WRITE, 1 plane, MTU 9000 (memif bsize=9018), UDP checksums on"
  run_gen "j1-$r" 1 --mode write --qps 4 --msg-bytes 65536 --mtu 9000 --verify
  echo "== [$r] mrc-gen WRITE, 1 plane, MTU 9000, UDP checksums off"
  run_gen "jn1-$r" 1 --mode write --qps 4 --msg-bytes 65536 --mtu 9000 --no-udp-cksum --verify
  echo "== [$r] mrc-gen WRITE, 1 plane, zero-copy transmit (extbuf mbufs), UDP checksums on"
  run_gen "zc1-$r" 1 --mode write --qps 4 --msg-bytes 65536 --zero-copy --verify
  echo "== [$r] mrc-gen WRITE, 1 plane, zero-copy transmit (extbuf mbufs), UDP checksums off"
  run_gen "z1-$r" 1 --mode write --qps 4 --msg-bytes 65536 --no-udp-cksum --zero-copy --verify
  echo "== [$r] mrc-gen pingpong, 1 plane, 64-byte messages"
  run_gen "pp-$r" 1 --mode pingpong --qps 1 --msg-bytes 64
done

mkdir -p "$(dirname "$out")"
python3 - "$work" "$secs" "$out" "$reps" <<'PY'
import json, os, platform, statistics, subprocess, sys
work, secs, out, reps = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
# testpmd ran at the start of every round: each mrc-gen run is compared with
# the testpmd run of its own round, and the table gives medians over rounds.
tp_round = {r: float(open(os.path.join(work, f"tp-{r}.pps")).read()) for r in range(reps)}
tp_pps = statistics.median(tp_round.values())
def tp_cycles(side):
    vals = []
    for r in range(reps):
        try:
            vals.append(float(open(os.path.join(work, f"tp-{r}-{side}.cpp")).read()))
        except (OSError, ValueError):
            pass
    return statistics.median(vals) if vals else None
def load(tag, r):
    try:
        c = json.load(open(os.path.join(work, f"{tag}-{r}-c.json")))
        s = json.load(open(os.path.join(work, f"{tag}-{r}-s.json")))
    except (OSError, ValueError):
        return None
    rc = lambda side: open(os.path.join(work, f"{tag}-{r}-{side}.rc")).read().strip()
    c["ok"] = (rc("c") == "0" and rc("s") == "0" and c["verify_errors"] == 0
               and c["bytes_verified"] > 0)
    c["server"] = s
    return c
def rx_pps(j):  # every frame the receiver took from its ports, per second
    s = j["server"]
    return sum(p["rx_packets"] for p in s["ports"]) / s["elapsed_s"]
frame = 1514
res = {"seconds_per_run": secs, "repeats": reps, "frame_bytes": frame,
       "testpmd_rx_pps": tp_pps, "testpmd_rx_pps_per_round": list(tp_round.values()),
       "testpmd_gbps": tp_pps * frame * 8 / 1e9, "runs": {}}
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
res["machine"] = {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release()}
res["testpmd_cycles_per_packet"] = {"rxonly": tp_cycles("rx"), "txonly": tp_cycles("tx")}
stages = ("rx_io", "rx", "timers", "app", "tx", "tx_io", "control")
def cycles(js, side):  # medians over rounds of one end's cycles per packet
    cs = [(j if side == "c" else j["server"]).get("cycles_per_packet") for j in js]
    cs = [c for c in cs if c]
    if not cs:
        return None
    return {k: med([c[k] for c in cs]) for k in ("busy", "busy_share") + stages}
med = statistics.median
fmt_c = lambda x: f"{x:6.0f}" if x is not None else f"{'-':>6}"
print(f"{'run':34} {'Gb/s':>7} {'rx Mpps':>8} {'x testpmd rx':>12} {'retx':>7} {'rounds ok':>9}"
      f" {'cyc/pkt tx':>10} {'cyc/pkt rx':>10}")
tpc = res["testpmd_cycles_per_packet"]
print(f"{'testpmd txonly->rxonly':34} {res['testpmd_gbps']:7.2f} {tp_pps/1e6:8.3f} {1.0:12.2f}"
      f" {'':7} {'':9} {fmt_c(tpc['txonly']):>10} {fmt_c(tpc['rxonly']):>10}")
names = {"w1": "mrc-gen 1 plane", "w2": "mrc-gen 2 planes", "w4": "mrc-gen 4 planes",
         "n1": "mrc-gen 1 plane, no UDP cksum", "n2": "mrc-gen 2 planes, no UDP cksum",
         "n4": "mrc-gen 4 planes, no UDP cksum", "zc1": "mrc-gen 1 plane, zero-copy",
         "z1": "mrc-gen 1 plane, zero-copy, no cksum",
         "j1": "mrc-gen 1 plane, MTU 9000", "jn1": "mrc-gen 1 plane, MTU 9000, no cksum"}
for tag, name in names.items():
    rounds = {r: load(tag, r) for r in range(reps)}
    good = {r: j for r, j in rounds.items() if j and j["ok"]}
    failed = sorted(r for r in rounds if r not in good)
    if not good:
        print(f"{name:34} (every round failed)")
        res["runs"][tag] = {"failed_rounds": failed}
        continue
    # Packet rates compare only at testpmd's frame size (not the MTU 9000 runs).
    ratios = ([rx_pps(j) / tp_round[r] for r, j in good.items()] if not tag.startswith("j")
              else [])
    r = {"goodput_gbps": med([j["goodput_gbps"] for j in good.values()]),
         "rx_mpps": med([rx_pps(j) for j in good.values()]) / 1e6,
         "ratio_rx_pps_vs_testpmd": med(ratios) if ratios else None,
         "ratio_rx_pps_vs_testpmd_per_round": ratios,
         "retransmissions": int(med([j["retransmissions"] for j in good.values()])),
         "rounds_ok": len(good), "failed_rounds": failed,
         "sender_cycles_per_packet": cycles(good.values(), "c"),
         "receiver_cycles_per_packet": cycles(good.values(), "s")}
    res["runs"][tag] = r
    busy = lambda c: c["busy"] if c else None
    ratio = r['ratio_rx_pps_vs_testpmd']
    ratio = f"{ratio:12.2f}" if ratio is not None else f"{'-':>12}"
    print(f"{name:34} {r['goodput_gbps']:7.2f} {r['rx_mpps']:8.3f} {ratio} "
          f"{r['retransmissions']:7d} {len(good):>5}/{reps}"
          f" {fmt_c(busy(r['sender_cycles_per_packet'])):>10}"
          f" {fmt_c(busy(r['receiver_cycles_per_packet'])):>10}")
for tag in ("w1", "n1", "z1", "j1", "jn1"):
    run = res["runs"].get(tag, {})
    for who in ("sender", "receiver"):
        c = run.get(f"{who}_cycles_per_packet")
        if c:
            print(f"  {names[tag]}, {who}: {c['busy']:.0f} cycles/packet = "
                  + " + ".join(f"{k} {c[k]:.0f}" for k in stages))
pps = sorted((j for r in range(reps) if (j := load("pp", r)) and "latency_us" in j),
             key=lambda j: j["latency_us"]["p99"])
pp = pps[len(pps) // 2] if pps else None
if pp:
    l = pp["latency_us"]
    res["pingpong_64B_us"] = {k: l[k] for k in ("p50", "p99", "p999", "samples")}
    print(f"pingpong 64 B: p50 {l['p50']:.1f} us, p99 {l['p99']:.1f} us, p99.9 {l['p999']:.1f} us "
          f"({l['samples']} round trips)")
json.dump(res, open(out, "w"), indent=2)
print(f"results: {out}")
PY
