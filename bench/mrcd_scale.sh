#!/usr/bin/env bash
# How mrcd scales with connections, in one run: two daemons over 2 memif
# planes (workers crossed over the CPUs, idle "yield"), mrc_write_bw with
# 64 KiB WRITEs and --depth writes in flight on every QP, at each QP count
# (default 16 256 1000 4000). For each: goodput, the connect time (until the
# server accepted every QP) and the sending daemon's resident memory per QP
# (its RSS while the QPs are connected, less its RSS before, by kind:
# anonymous = the transport's state, shmem = the shared rings it touched).
# Also the packets the sending daemon received per packet it sent while
# the QPs moved data (acks, probes and their answers per data packet: what
# a packet costs grows with it), from two mrcctl snapshots a third of the
# run apart. Fresh daemons per count and round; rounds repeat (default 3);
# medians and the ratio of each count's goodput to the smallest count's
# are reported.
# Writes JSON (default bench/results/mrcd-scale.json).
#
# A failed run's logs are kept in /tmp/mrcd-scale-failed (MRC_SCALE_KEEP).
#
#   bench/mrcd_scale.sh [seconds (default 4)] [json] [rounds (default 3)] [QP counts...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-4}
out=${2:-bench/results/mrcd-scale.json}
reps=${3:-3}
shift $(($# < 3 ? $# : 3))
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(16 256 1000 4000)
depth=${DEPTH:-2}
cc_scope=${CC_SCOPE:-qp}  # the daemons' [qp] cc_scope: peer (shared windows) or qp
b=${MRC_BIN_DIR:-build/app}  # another build's apps, to compare two in one run
for x in mrcd mrc_write_bw mrcctl; do
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
vdevs() { for p in 0 1; do echo "--vdev=net_memif$p,role=$1,socket=$work/$2-$p.sock"; done; }
rss() {  # pid field(RssAnon|RssShmem) -> KiB
  awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}
port=$((26000 + $$ % 9000))
max=0
for n in "${counts[@]}"; do [ "$n" -gt "$max" ] && max=$n; done

start_daemons() {  # tag
  local t=$1
  for w in a b; do
    local ip0=10.0.0.1 ip1=10.0.1.1
    [ "$w" = b ] && ip0=10.0.0.2 ip1=10.0.1.2
    printf '[daemon]\nsocket = "%s"\nmax_qps_per_client = %d\n[dataplane]\nidle = "yield"\nmax_qps = %d\n[qp]\ncc_scope = "%s"\n[[plane]]\nip = "%s"\n[[plane]]\nip = "%s"\n' \
      "$work/$t-$w.sock" "$max" "$max" "$cc_scope" "$ip0" "$ip1" >"$work/$t-$w.toml"
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

run() {  # tag qps
  local t=$1 n=$2
  start_daemons "$t"
  sleep 0.3
  local base_anon base_shm
  base_anon=$(rss "$da" RssAnon); base_shm=$(rss "$da" RssShmem)
  port=$((port + 1))
  taskset -c 1 "$b/mrc_write_bw" --socket "$work/$t-b.sock" -p "$port" --yield --timeout-ms 20000 \
    -s 65536 -t "$depth" -q "$n" -D "$secs" >"$work/$t-srv.log" 2>&1 &
  local sp=$!; pids+=("$sp")
  sleep 0.3
  taskset -c 0 "$b/mrc_write_bw" --socket "$work/$t-a.sock" -p "$port" --yield --timeout-ms 20000 \
    -s 65536 -t "$depth" -q "$n" -D "$secs" --json "$work/$t.json" 127.0.0.1 >"$work/$t-cli.log" 2>&1 &
  local cp=$!; pids+=("$cp")
  # Resident memory once every QP is connected (the peak over the run);
  # daemon A's traffic counters a third and two thirds into the run.
  local anon=0 shm=0 conn_at=0 snaps=0
  while kill -0 "$cp" 2>/dev/null; do
    if grep -q "^connected" "$work/$t-cli.log" 2>/dev/null; then
      local a s now
      a=$(rss "$da" RssAnon); s=$(rss "$da" RssShmem)
      [ "${a:-0}" -gt "$anon" ] && anon=$a
      [ "${s:-0}" -gt "$shm" ] && shm=$s
      now=$(date +%s%N)
      [ "$conn_at" = 0 ] && conn_at=$now
      if [ "$snaps" -lt 2 ] && [ $((now - conn_at)) -ge $(( (snaps + 1) * ${secs%.*} * 1000000000 / 3 )) ]; then
        "$b/mrcctl" --socket "$work/$t-a.sock" --json status >"$work/$t.snap$snaps" 2>/dev/null || true
        snaps=$((snaps + 1))
      fi
    fi
    sleep 0.2
  done
  if wait "$cp" && wait "$sp"; then
    echo 0 >"$work/$t.rc"
  else
    echo 1 >"$work/$t.rc"
    cat "$work/$t-cli.log" "$work/$t-srv.log" >&2
    # The daemons' logs and the applications', kept for a look after.
    local keep=${MRC_SCALE_KEEP:-/tmp/mrcd-scale-failed}/$t-$$
    mkdir -p "$keep" && cp "$work/$t"-*.log "$work/$t"-*.toml "$keep/" 2>/dev/null || true
    echo "logs of the failed run: $keep" >&2
  fi
  echo "$base_anon $base_shm $anon $shm" >"$work/$t.mem"
  stop_pid "$da" TERM 20; stop_pid "$db" TERM 20
  grep -h "SIGSEGV\|ERROR\|LeakSanitizer" "$work/$t-a.log" "$work/$t-b.log" >&2 || true
}

for ((r = 0; r < reps; r++)); do
  for n in "${counts[@]}"; do
    echo "== [$r] $n QPs x depth $depth x 64 KiB, 2 planes, ${secs}s"
    run "s$r-$n" "$n"
    tail -n 3 "$work/s$r-$n-cli.log" | head -n 1 || true
  done
done

mkdir -p "$(dirname "$out")"
python3 - "$work" "$out" "$reps" "$secs" "$depth" "${counts[@]}" <<'PY'
import json, os, platform, statistics, subprocess, sys
work, out, reps, secs, depth = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
counts = [int(x) for x in sys.argv[6:]]
med = lambda x: statistics.median(x) if x else float("nan")
rows, failed = {}, []
for n in counts:
    gb, cs, anon, shm, ratios, ctl = [], [], [], [], [], []
    for r in range(reps):
        t = f"s{r}-{n}"
        try:
            ok = open(os.path.join(work, f"{t}.rc")).read().strip() == "0"
            j = json.load(open(os.path.join(work, f"{t}.json"))) if ok else None
        except (OSError, ValueError):
            j = None
        if j is None:
            failed.append({"qps": n, "round": r})
            continue
        gb.append(j["bw_gbps"]); cs.append(j["connect_s"])
        b_a, b_s, a, s = (int(x) for x in open(os.path.join(work, f"{t}.mem")).read().split())
        anon.append((a - b_a) * 1024 / n); shm.append((s - b_s) * 1024 / n)
        try:
            s0, s1 = (json.load(open(os.path.join(work, f"{t}.snap{k}")))["traffic"] for k in (0, 1))
            ctl.append((s1["rx_packets"] - s0["rx_packets"]) / (s1["tx_packets"] - s0["tx_packets"]))
        except (OSError, ValueError, KeyError, ZeroDivisionError):
            pass
        base = os.path.join(work, f"s{r}-{counts[0]}.json")
        try:
            ratios.append(j["bw_gbps"] / json.load(open(base))["bw_gbps"])
        except (OSError, ValueError, ZeroDivisionError):
            pass
    rows[n] = {"goodput_gbps": gb, "connect_s": cs, "anon_bytes_per_qp": anon,
               "shmem_bytes_per_qp": shm, "ratio_to_smallest": ratios,
               "rx_per_tx_packet": ctl,
               "median": {"goodput_gbps": med(gb), "connect_s": med(cs),
                          "connect_qps_per_s": n / med(cs) if cs else float("nan"),
                          "anon_bytes_per_qp": med(anon), "shmem_bytes_per_qp": med(shm),
                          "ratio_to_smallest": med(ratios), "rx_per_tx_packet": med(ctl)}}
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
res = {"seconds_per_run": secs, "rounds": reps, "depth": depth, "msg_bytes": 65536, "planes": 2,
       "by_qps": rows, "failed_runs": failed,
       "machine": {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release()}}
print(f"{'QPs':>6} {'Gb/s':>8} {'vs ' + str(counts[0]):>8} {'connect s':>10} {'QPs/s':>9} {'anon B/QP':>10} {'shm B/QP':>9} {'rx/tx pkt':>9}")
for n, row in rows.items():
    m = row["median"]
    print(f"{n:>6} {m['goodput_gbps']:>8.2f} {m['ratio_to_smallest']:>8.2f} {m['connect_s']:>10.3f} "
          f"{m['connect_qps_per_s']:>9.0f} {m['anon_bytes_per_qp']:>10.0f} {m['shmem_bytes_per_qp']:>9.0f} "
          f"{m['rx_per_tx_packet']:>9.3f}")
for f in failed:
    print(f"FAILED: {f['qps']} QPs, round {f['round']} (left out of the medians)")
json.dump(res, open(out, "w"), indent=2)
print(f"results: {out}")
PY
