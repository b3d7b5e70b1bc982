#!/usr/bin/env bash
# MRC over AF_XDP veth ports against the kernel's TCP and MPTCP, in one run,
# over the same two-plane network (scripts/netns-planes.sh: two hosts in
# namespaces, each plane a veth pair to a bridge namespace and back):
#
#   mrc    mrc-gen WRITE, 2 planes (af_xdp ports with the XDP steering
#          program), 4 QPs, 64 KiB messages; goodput as delivered and
#          verified by the server's pattern check being off (--verify costs
#          CPU): bytes the client saw completed / seconds
#   tcp    iperf3, one TCP connection, over plane 1
#   mptcp  iperf3 under mptcpize, first subflow over plane 1, the server
#          announcing its plane-0 address (ADD_ADDR) for the second: as many
#          subflows as MRC has planes
#
# Three conditions, each run `reps` times with the three transports
# interleaved: clean; 1% random loss each way on plane 1 (nftables numgen
# in the bridge namespace, so AF_XDP and kernel traffic are hit alike);
# plane 1 cut (all dropped) halfway through the transfer (counted from the
# transport's first one-second report, so start-up time does not shift it). Plane 1 is the path
# TCP and MPTCP's first subflow use: a single-path transport cannot avoid
# it. TCP/MPTCP run while no XDP program is attached: the kernel's best
# case. TCP goodput comes from the receiving iperf3's per-second reports
# (a connection on a cut path never finishes; those seconds count as 0).
#
# Prints a table and writes JSON (default bench/results/af_xdp.json).
# Root only; creates and removes its own namespaces (prefix mxb).
# Environment: MRC_MTU (default 1500) sets every veth's MTU and mrc-gen's;
# MRC_IDLE (default sleep) mrc-gen's idle mode; MRC_CONDITIONS a subset of
# "clean loss cut".
#
#   bench/af_xdp_vs_tcp.sh [seconds per run (default 8)] [json path] [repeats (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-8}
out=${2:-bench/results/af_xdp.json}
reps=${3:-3}
idle=${MRC_IDLE:-sleep}
mtu=${MRC_MTU:-1500}
b=build/app
[ "$(id -u)" -eq 0 ] || { echo "root only (namespaces, XDP)" >&2; exit 2; }
for x in mrc-gen mrc-xdp; do
  [ -x "$b/$x" ] || { echo "build first: meson compile -C build" >&2; exit 2; }
done
for t in iperf3 mptcpize nft python3; do
  command -v "$t" >/dev/null || { echo "$t missing: scripts/install-deps.sh" >&2; exit 2; }
done
P=mxb
net=scripts/netns-planes.sh
work=$(mktemp -d /tmp/mrc-bench-xdp-XXXXXX)
pids=()
# shellcheck source=tests/support/procs.sh
source tests/support/procs.sh
cleanup() {
  for p in "${pids[@]}"; do stop_pid "$p" TERM 2; done
  "$net" down "$P"
  rm -rf "$work" /var/run/dpdk/mrc-bxdp-*
}
trap cleanup EXIT
trap 'exit 143' INT TERM
"$net" up "$P" 2 78
A=(ip netns exec "$P-a")
B=(ip netns exec "$P-b")
for ns in a b; do ip netns exec "$P-$ns" ip mptcp limits set subflows 2 add_addr_accepted 2; done
ip netns exec "$P-b" ip mptcp endpoint add 10.78.0.2 dev "${P}b0" signal
"$net" mtu "$P" "$mtu"
eal=(--no-huge -m 1024 --no-pci --log-level=lib.eal:error)

cut_pid=""
# condition clean|loss|cut LOG PATTERN: sets plane 1 up for the run. cut:
# plane 1 is cut secs/2 seconds into the transfer, counted from when LOG
# shows PATTERN (the transport's first one-second report) minus that second.
condition() {
  case "$1" in
  clean) "$net" heal "$P" 1 ;;
  loss) "$net" loss "$P" 1 1 ;;
  cut)
    "$net" heal "$P" 1
    (
      for _ in $(seq 600); do grep -q "$3" "$2" 2>/dev/null && break; sleep 0.05; done
      sleep $((secs / 2 - 1))
      "$net" cut "$P" 1
    ) &
    cut_pid=$!
    pids+=("$cut_pid")
    ;;
  esac
}
# After a run: no cut may land in the next one.
end_condition() {
  if [ -n "$cut_pid" ]; then
    kill "$cut_pid" 2>/dev/null || true
    wait "$cut_pid" 2>/dev/null || true
    cut_pid=""
  fi
  "$net" heal "$P" 1
}

run_mrc() {  # tag cond
  local tag=$1
  "${B[@]}" "$b/mrc-gen" "${eal[@]}" --file-prefix "mrc-bxdp-$tag-s" --lcores 0@1,1@0 -- \
    --role server --port "af_xdp:${P}b0" --port "af_xdp:${P}b1" --local-ip 10.78.0.2,10.78.1.2 \
    --oob 10.78.0.2:18515 --stats-period 0 --idle "$idle" --mtu "$mtu" --json "$work/$tag-s.json" \
    >"$work/$tag-s.log" 2>&1 &
  local sp=$!
  pids+=("$sp")
  for _ in $(seq 300); do grep -q "waiting for a client" "$work/$tag-s.log" && break; sleep 0.1; done
  grep -q "waiting for a client" "$work/$tag-s.log" ||
    { echo "mrc-gen server ($tag) not ready:" >&2; tail -5 "$work/$tag-s.log" >&2; exit 1; }
  condition "$2" "$work/$tag-c.log" '^\[ *1\.0s\] goodput'
  "${A[@]}" timeout $((secs + 60)) "$b/mrc-gen" "${eal[@]}" --file-prefix "mrc-bxdp-$tag-c" \
    --lcores 0@0,1@1 -- --role client --port "af_xdp:${P}a0" --port "af_xdp:${P}a1" \
    --local-ip 10.78.0.1,10.78.1.1 --oob 10.78.0.2:18515 --stats-period 1 --idle "$idle" \
    --qps 4 --msg-bytes 65536 --duration "$secs" --mtu "$mtu" --json "$work/$tag-c.json" \
    >"$work/$tag-c.log" 2>&1 || { echo "mrc-gen client failed ($tag):" >&2; tail -5 "$work/$tag-c.log" >&2; }
  stop_pid "$sp" TERM 10
  wait "$sp" 2>/dev/null || true
  end_condition
}

run_iperf() {  # tag cond wrapper...
  local tag=$1 cond=$2
  shift 2
  "${B[@]}" "$@" iperf3 -s -1 -p 5301 -i 1 --forceflush >"$work/$tag-s.log" 2>&1 &
  local sp=$!
  pids+=("$sp")
  for _ in $(seq 100); do
    ip netns exec "$P-b" ss -Hltn "sport = :5301" | grep -q . && break
    sleep 0.1
  done
  condition "$cond" "$work/$tag-s.log" ' 0\.00-1\.0[0-9] *sec'
  "${A[@]}" "$@" timeout $((secs + 5)) iperf3 -c 10.78.1.2 -p 5301 -t "$secs" -i 0 \
    >"$work/$tag-c.log" 2>&1 || true
  stop_pid "$sp" KILL 1
  wait "$sp" 2>/dev/null || true
  end_condition
}

for cond in ${MRC_CONDITIONS:-clean loss cut}; do
  for r in $(seq "$reps"); do
    echo "== $cond, round $r"
    run_mrc "mrc-$cond-$r" "$cond"
    run_iperf "tcp-$cond-$r" "$cond"
    ip netns exec "$P-a" nstat -n >/dev/null
    run_iperf "mptcp-$cond-$r" "$cond" mptcpize run
    ip netns exec "$P-a" nstat -z MPTcpExtMPJoinSynAckRx | awk '/MPTcpExt/ {print $2}' \
      >"$work/mptcp-$cond-$r.joins"
  done
done

python3 - "$work" "$secs" "$reps" "$out" "$idle" "$mtu" <<'PY'
import json, os, re, statistics, sys
work, secs, reps, out, idle = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
mtu = int(sys.argv[6])
UNIT = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}

# "After the cut": the seconds from one second after the cut (secs / 2) to
# the end, so the second in which it happens is left out.
late = int(secs) // 2 + 1

def mrc(tag):
    try:
        c = json.load(open(f"{work}/{tag}-c.json"))
    except (OSError, ValueError):
        return 0.0, 0.0, {}
    # The client's live lines: "[   5.0s] goodput    2.35 Gb/s ..."
    after = [float(g) for t, g in re.findall(r"^\[ *([\d.]+)s\] goodput +([\d.]+) Gb/s",
                                             open(f"{work}/{tag}-c.log").read(), re.M)
             if late < float(t) <= secs + 0.01]
    return (c["goodput_gbps"], sum(after) / len(after) if after else 0.0,
            {"retx": c["retransmissions"], "qp_errors": c["qp_errors"], "bytes": c["bytes"]})

def iperf(tag):
    # The receiver's per-second lines: "[  5]   3.00-4.00   sec   280 MBytes  2.35 Gbits/sec"
    bits = late_bits = 0.0
    for m in re.finditer(r"^\[ *\d+\] +([\d.]+)-([\d.]+) +sec +[\d.]+ \w+ +([\d.]+) (\w?)bits/sec *$",
                         open(f"{work}/{tag}-s.log").read(), re.M):
        t0, t1 = float(m.group(1)), float(m.group(2))
        if t1 <= secs + 0.01 and 0 < t1 - t0 <= 1.1:  # per-second lines, not the summary
            b = float(m.group(3)) * UNIT[m.group(4)] * (t1 - t0)
            bits += b
            if t0 >= late - 0.01:
                late_bits += b
    return bits / secs / 1e9, late_bits / (secs - late) / 1e9

res = {"seconds": secs, "rounds": reps, "mrc_idle": idle, "mtu": mtu, "conditions": {}}
print(f"{'condition':<8} {'MRC Gb/s':>9} {'TCP Gb/s':>9} {'MPTCP Gb/s':>10} {'MRC/TCP':>8} {'MRC/MPTCP':>10}")
for cond in [c for c in ("clean", "loss", "cut") if os.path.exists(f"{work}/mrc-{c}-1-c.log")]:
    m = [mrc(f"mrc-{cond}-{r}") for r in range(1, reps + 1)]
    ti = [iperf(f"tcp-{cond}-{r}") for r in range(1, reps + 1)]
    mpi = [iperf(f"mptcp-{cond}-{r}") for r in range(1, reps + 1)]
    t, mp = [x[0] for x in ti], [x[0] for x in mpi]
    joins = []
    for r in range(1, reps + 1):
        try:
            joins.append(int(open(f"{work}/mptcp-{cond}-{r}.joins").read().strip() or 0))
        except (OSError, ValueError):
            joins.append(0)
    mg = [x[0] for x in m]
    med = lambda v: statistics.median(v) if v else 0.0
    e = {"mrc_gbps": mg, "tcp_gbps": t, "mptcp_gbps": mp, "mptcp_joins": joins,
         "mrc_detail": [x[2] for x in m],
         "median": {"mrc": med(mg), "tcp": med(t), "mptcp": med(mp)}}
    if cond == "cut":
        e["after_cut_gbps"] = {"from_second": late, "mrc": [x[1] for x in m],
                               "tcp": [x[1] for x in ti], "mptcp": [x[1] for x in mpi]}
        e["after_cut_median"] = {k: med(v) for k, v in e["after_cut_gbps"].items()
                                 if k != "from_second"}
    e["ratio_mrc_tcp"] = med(mg) / med(t) if med(t) > 0 else None
    e["ratio_mrc_mptcp"] = med(mg) / med(mp) if med(mp) > 0 else None
    res["conditions"][cond] = e
    fmt = lambda v: f"{v:.2f}" if v is not None else "inf"
    print(f"{cond:<8} {med(mg):9.2f} {med(t):9.2f} {med(mp):10.2f} {fmt(e['ratio_mrc_tcp']):>8} "
          f"{fmt(e['ratio_mrc_mptcp']):>10}")
    print(f"         rounds: MRC {' / '.join(f'{x:.2f}' for x in mg)}, TCP "
          f"{' / '.join(f'{x:.2f}' for x in t)}, MPTCP {' / '.join(f'{x:.2f}' for x in mp)} "
          f"(MPTCP joins {joins})")
    if cond == "cut":
        a = e["after_cut_median"]
        print(f"         after the cut (seconds {late}-{int(secs)}): MRC {a['mrc']:.2f}, TCP "
              f"{a['tcp']:.2f}, MPTCP {a['mptcp']:.2f} Gb/s")
json.dump(res, open(out, "w"), indent=1)
print(f"wrote {out}")
PY
