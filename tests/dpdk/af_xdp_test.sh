#!/usr/bin/env bash
# AF_XDP ports sharing their interfaces with the kernel (issue 8).
#
# Two hosts in network namespaces, two planes of veth pairs through a bridge
# namespace (scripts/netns-planes.sh). mrc-gen on both hosts opens
# af_xdp:<iface> ports: MRC's UDP goes to DPDK through the XDP steering
# program, everything else stays with the kernel. Checked:
#   1. a verified MRC transfer over both planes while ping and an iperf3 TCP
#      transfer run on the same interfaces, and the programs' counters show
#      both kinds of traffic;
#   2. after a clean stop, no program is left and the kernel alone uses the
#      interfaces (ping, TCP);
#   3. kill -9: the program stays attached but passes everything (ping
#      works); the next start removes it and works; a second process on the
#      same interface is refused while the first runs;
#   4. bad input: an interface that does not exist; another XDP program on
#      the interface (refused, left in place, nothing of ours left on the
#      plane opened before); no permission; a net_af_xdp port from --vdev;
#   5. mrcd with af_xdp ports in its config: a bulk_copy between two
#      daemons, verified; mrcctl shows the steering; SIGTERM detaches;
#   6. an interface whose driver has no native XDP (a bridge): the program
#      runs in generic mode and says so; SIGTERM detaches.
# Needs root; exits 77 (skipped) without it or without the BPF object.
#
#   af_xdp_test.sh APP_DIR OTHER_PROG_OBJ   (APP_DIR: the build's app/)
set -euo pipefail
apps=$(realpath "$1")
gen=$apps/mrc-gen
xdptool=$apps/mrc-xdp
other_obj=$(realpath "$2")
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: needs root (namespaces, XDP)"
  exit 77
fi
for t in iperf3 nft python3 ping setpriv; do
  command -v "$t" >/dev/null || { echo "skipped: $t missing (scripts/install-deps.sh)"; exit 77; }
done
if [ -z "${MRC_XDP_PROG:-}" ] && ! "$xdptool" status lo >/dev/null 2>&1; then
  echo "skipped: mrc-xdp cannot query interfaces"
  exit 77
fi

P=mx$(( $$ % 10000 ))
net="$src/scripts/netns-planes.sh"
work=$(mktemp -d /tmp/mrc-afxdp-XXXXXX)
pids=()
# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../support/procs.sh"
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do stop_pid "$p" TERM 3; done
  if [ "$rc" -ne 0 ]; then print_logs "$work"; echo "FAILED (exit $rc)"; fi
  "$net" down "$P"
  rm -rf "$work" /var/run/dpdk/"$P"-*
}
trap cleanup EXIT
trap 'exit 143' INT TERM
fail() { echo "FAIL: $*"; exit 1; }
forget() {  # PID: ended and reaped; cleanup must not signal it (or a reused PID)
  local keep=() p
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  pids=("${keep[@]}")
}
wait_listen() {  # NS PORT: until a TCP socket listens there (10 s)
  for _ in $(seq 100); do
    ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
    sleep 0.1
  done
  fail "nothing listens on port $2 in $1"
}
ina() { ip netns exec "$P-a" "$@"; }
inb() { ip netns exec "$P-b" "$@"; }

"$net" up "$P" 2 77
A0=${P}a0 A1=${P}a1 B0=${P}b0 B1=${P}b1
eal=(--no-huge -m 512 --no-pci --log-level=lib.eal:error)
common=(--idle sleep --oob 10.77.0.2:18515)
mtu=1500  # of every port; section 3 raises it (the veths too)

# start_server NAME [ports...]: mrc-gen server in B; waits until it listens.
start_server() {
  local name=$1; shift
  local ports=()
  for i in "$@"; do ports+=(--port "af_xdp:$i"); done
  [ $# -gt 0 ] || ports=(--port "af_xdp:$B0" --port "af_xdp:$B1")
  # Not through inb: $! must be mrc-gen itself (ip netns exec execs it).
  ip netns exec "$P-b" "$gen" "${eal[@]}" --lcores 0@1,1@0 --file-prefix "$P-$name" -- --role server \
    "${ports[@]}" --local-ip 10.77.0.2,10.77.1.2 "${common[@]}" --mtu "$mtu" --json "$work/$name.json" \
    >"$work/$name.log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 300); do
    grep -q "waiting for a client" "$work/$name.log" && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "server $name exited: $(tail -3 "$work/$name.log")"
    sleep 0.1
  done
  fail "server $name not listening after 30 s"
}
# run_client NAME SECONDS: a verified transfer over both planes, to the end.
run_client() {
  ina timeout 120 "$gen" "${eal[@]}" --lcores 0@0,1@1 --file-prefix "$P-$1" -- --role client \
    --port "af_xdp:$A0" --port "af_xdp:$A1" --local-ip 10.77.0.1,10.77.1.1 "${common[@]}" \
    --mode write --verify --qps 4 --duration "$2" --mtu "$mtu" --json "$work/$1.json" \
    >"$work/$1.log" 2>&1
}
wait_pid() {  # PID SECONDS: waits for it to end, returns its status
  local rc
  for _ in $(seq $(( $2 * 10 ))); do
    if ! kill -0 "$1" 2>/dev/null; then
      rc=0
      wait "$1" || rc=$?
      forget "$1"
      return $rc
    fi
    sleep 0.1
  done
  fail "process $1 still running after $2 s"
}
attached() {  # NS-RUNNER IFACE: the XDP program's name on IFACE, or nothing
  "$1" ip -d link show dev "$2" | sed -n 's/.*prog\/xdp id [0-9]* name \([^ ]*\).*/\1/p'
}
ping_ok() {  # PLANE: 10 pings A to B on that plane, at most 1 lost
  local got
  got=$(ina ping -c 10 -i 0.1 -W 1 "10.77.$1.2" | sed -n 's/.* \([0-9]*\) received.*/\1/p')
  [ "${got:-0}" -ge 9 ] || fail "ping on plane $1: ${got:-0}/10 answered"
}

echo "== 1. MRC over AF_XDP with ping and TCP on the same interfaces"
ip netns exec "$P-b" iperf3 -s -1 -B 10.77.0.2 -p 5201 >"$work/iperf3-server.log" 2>&1 &
ipid=$!
pids+=("$ipid")
wait_listen "$P-b" 5201
start_server s1
for i in "$B0" "$B1"; do
  [ "$(attached inb "$i")" = mrc_steer ] || fail "no mrc_steer on $i while the server runs"
done
run_client c1 6 &
cpid=$!  # a subshell: it ends with its mrc-gen (timeout 120 bounds it)
pids+=("$cpid")
# Kernel traffic starts once MRC's does (the client's first stats line).
for _ in $(seq 300); do grep -q '^\[ *1\.0s\]' "$work/c1.log" 2>/dev/null && break; sleep 0.1; done
grep -q '^\[ *1\.0s\]' "$work/c1.log" || fail "the MRC client moved nothing in 30 s"
ip netns exec "$P-a" ping -c 30 -i 0.1 -W 1 10.77.1.2 >"$work/ping1.log" 2>&1 &
ppid=$!
pids+=("$ppid")
ina iperf3 -c 10.77.0.2 -p 5201 -t 3 --json >"$work/iperf3.json" 2>"$work/iperf3.err" ||
  fail "iperf3 over plane 0 failed while MRC ran: $(tail -3 "$work/iperf3.err")"
wait_pid "$ppid" 30 || fail "ping over plane 1 failed while MRC ran: $(tail -2 "$work/ping1.log")"
wait_pid "$cpid" 120 || fail "client c1 failed"
wait_pid "$server_pid" 30 || fail "server s1 failed"
wait_pid "$ipid" 10 || true
python3 - "$work/c1.json" "$work/s1.json" "$work/iperf3.json" "$work/ping1.log" <<'PY'
import json, re, sys
c, s, tcp = (json.load(open(p)) for p in sys.argv[1:4])
ping = open(sys.argv[4]).read()
assert c["verify_errors"] == 0 and s["verify_errors"] == 0, "verify errors"
assert c["qp_errors"] == 0 and s["qp_errors"] == 0, "QP errors"
assert s["bytes_verified"] > 0, "the server verified nothing"
for side in (c, s):
    for p in side["ports"]:
        x = p.get("xdp")
        assert x, f"{p['port']}: no XDP report"
        assert x["mode"] in ("native", "generic"), x
        assert x["steered"] > 1000, f"{x['iface']}: only {x['steered']} MRC frames steered"
        assert x["other_address"] == 0, x
        assert p["rx_packets"] > 1000, f"{p['port']} carried too little"
# Kernel traffic crossed the same interfaces through the programs while
# MRC ran: the client's programs exist only for its run. Plane 0 saw
# iperf3's ACKs, plane 1 ping's replies.
cx = [p["xdp"]["to_kernel"] for p in c["ports"]]
assert cx[0] > 1000, f"plane 0: only {cx[0]} frames to the kernel during the MRC run (TCP)"
assert cx[1] >= 25, f"plane 1: only {cx[1]} frames to the kernel during the MRC run (ping)"
kernel = sum(p["xdp"]["to_kernel"] for p in s["ports"]) + sum(cx)
tcp_bytes = tcp["end"]["sum_received"]["bytes"]
assert tcp_bytes > 10_000_000, f"iperf3 moved only {tcp_bytes} bytes"
m = re.search(r"(\d+) received", ping)
assert m and int(m.group(1)) >= 28, "ping lost more than 2 of 30"
assert kernel > 1000, f"only {kernel} frames passed to the kernel"
print(f"MRC: {c['bytes']/2**20:.0f} MiB verified at {c['goodput_gbps']:.2f} Gb/s; "
      f"alongside: TCP {tcp_bytes/2**20:.0f} MiB at "
      f"{tcp['end']['sum_received']['bits_per_second']/1e9:.2f} Gb/s, ping {m.group(1)}/30; "
      f"{kernel} frames passed to the kernel by the programs "
      f"(mode {c['ports'][0]['xdp']['mode']})")
PY

echo "== 2. after a clean stop the kernel has the interfaces to itself"
for r in ina inb; do
  for i in 0 1; do
    iface=${P}${r:2:1}$i
    [ -z "$(attached $r "$iface")" ] || fail "a program is left on $iface after a clean stop"
  done
done
ping_ok 0
ping_ok 1
ip netns exec "$P-b" iperf3 -s -1 -B 10.77.1.2 -p 5202 >/dev/null 2>&1 &
ipid=$!
pids+=("$ipid")
wait_listen "$P-b" 5202
ina iperf3 -c 10.77.1.2 -p 5202 -t 1 >/dev/null || fail "TCP on plane 1 after the stop"
wait_pid "$ipid" 10 || true
"$xdptool" --json status lo >/dev/null
inb "$xdptool" status "$B0" | grep -q "no XDP program" || fail "mrc-xdp status after stop"

echo "== 3. kill -9, then start again"
start_server s2
kill -9 "$server_pid"
wait "$server_pid" 2>/dev/null || true
forget "$server_pid"
[ "$(attached inb "$B0")" = mrc_steer ] || fail "expected the dead server's program on $B0"
ping_ok 0  # left attached, it passes everything: no blackhole
ping_ok 1
inb "$xdptool" status "$B0" | grep -q "left by a process that is gone" ||
  fail "mrc-xdp does not report the stale program: $(inb "$xdptool" status "$B0")"
inb "$xdptool" check "$B0" | grep -q "the start removes it" || fail "mrc-xdp check"
rm -rf /var/run/dpdk/"$P"-s2
# The next run uses 3000-byte frames: AF_XDP receives behind a 256-byte XDP
# headroom, which the mbufs must have room for (they once did not: every
# frame above about 1750 bytes was dropped by the kernel).
mtu=3000
"$net" mtu "$P" $mtu
start_server s3
grep -q "removed the MRC steering program" "$work/s3.log" ||
  fail "the restart did not report removing the stale program"
# A second process on an interface in use is refused, and the first goes on.
if inb "$gen" "${eal[@]}" --lcores 0@1,1@0 --file-prefix "$P-s4" -- --role server \
    --port "af_xdp:$B0" --local-ip 10.77.0.2 --oob 10.77.0.2:18516 >"$work/s4.log" 2>&1; then
  fail "a second server on $B0 started"
fi
grep -q "in use by another MRC process (pid" "$work/s4.log" || fail "unclear refusal: $(tail -2 "$work/s4.log")"
[ "$(attached inb "$B0")" = mrc_steer ] || fail "the refused start took the program away"
run_client c3 3 || fail "client after restart failed"
wait_pid "$server_pid" 30 || fail "server s3 failed"
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert c['verify_errors']==0 and c['bytes']>0" \
  "$work/c3.json" || fail "transfer after restart"
python3 - "$work/s3.json" <<'PY' || fail "MTU 3000 transfer"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["bytes_verified"] > 0 and s["verify_errors"] == 0, "nothing verified at MTU 3000"
print(f"after kill -9 and restart, MTU 3000: {s['bytes']/2**20:.0f} MiB at {s['goodput_gbps']:.2f} Gb/s")
PY
mtu=1500
"$net" mtu "$P" $mtu

echo "== 4. bad input"
if inb "$gen" "${eal[@]}" --file-prefix "$P-b1" -- --role server --port af_xdp:nosuch0 \
    "${common[@]}" >"$work/bad1.log" 2>&1; then fail "started on a missing interface"; fi
grep -q "no network interface 'nosuch0'" "$work/bad1.log" || fail "bad1: $(tail -2 "$work/bad1.log")"
# Somebody else's program on plane 1: plane 0 opens first, then the start
# must fail, leave theirs alone and take ours off plane 0 again.
inb ip link set dev "$B1" xdp obj "$other_obj" sec xdp
if inb "$gen" "${eal[@]}" --file-prefix "$P-b2" -- --role server --port "af_xdp:$B0" \
    --port "af_xdp:$B1" --local-ip 10.77.0.2,10.77.1.2 "${common[@]}" >"$work/bad2.log" 2>&1; then
  fail "started over another XDP program"
fi
grep -q "already has an XDP program attached, 'other_prog'" "$work/bad2.log" ||
  fail "bad2: $(tail -2 "$work/bad2.log")"
grep -q "ip link set dev $B1 xdp off" "$work/bad2.log" || fail "bad2 names no remedy"
[ "$(attached inb "$B1")" = other_prog ] || fail "the other program was touched"
[ -z "$(attached inb "$B0")" ] || fail "our program was left on $B0 after the failed start"
ping_ok 0
inb "$xdptool" detach "$B1" 2>"$work/detach.err" && fail "mrc-xdp detached a foreign program"
grep -q "not MRC's steering program" "$work/detach.err" || fail "detach refusal unclear"
inb "$xdptool" detach --force "$B1" | grep -q "removed 'other_prog'" || fail "detach --force"
# No permission: the same checks the ports run, as nobody.
if inb setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all \
    "$xdptool" check "$B0" 2>"$work/perm.err"; then fail "nobody passed the check"; fi
grep -q "no permission" "$work/perm.err" || fail "perm: $(cat "$work/perm.err")"
# A net_af_xdp port EAL made from --vdev has no steering program: refused.
if inb "$gen" "${eal[@]}" --file-prefix "$P-b3" --vdev "net_af_xdp0,iface=$B0" -- \
    --role server --port net_af_xdp0 "${common[@]}" >"$work/bad3.log" 2>&1; then
  fail "started a --vdev net_af_xdp port"
fi
grep -q "give it as --port af_xdp:$B0" "$work/bad3.log" || fail "bad3: $(tail -2 "$work/bad3.log")"
# The same interface twice in one process.
if inb "$gen" "${eal[@]}" --file-prefix "$P-b4" -- --role server --port "af_xdp:$B0" \
    --port "af_xdp:$B0" --local-ip 10.77.0.2 "${common[@]}" >"$work/bad4.log" 2>&1; then
  fail "started with one interface twice"
fi
grep -q "this process already has a port on $B0" "$work/bad4.log" || fail "bad4: $(tail -2 "$work/bad4.log")"
[ -z "$(attached inb "$B0")" ] || fail "a program was left on $B0 after the refused second port"
ping_ok 0
ping_ok 1

echo "== 5. mrcd with af_xdp ports"
for side in a b; do
  host=1; [ "$side" = b ] && host=2
  cat >"$work/mrcd-$side.toml" <<TOML
[daemon]
socket = "$work/$side.sock"
drain_ms = 1000
[dataplane]
ports = ["af_xdp:${P}${side}0", "af_xdp:${P}${side}1"]
idle = "sleep"
link_wait_ms = 30000
[[plane]]
ip = "10.77.0.$host"
[[plane]]
ip = "10.77.1.$host"
TOML
  "$apps/mrcd" --check-config "$work/mrcd-$side.toml" >/dev/null || fail "mrcd config $side refused"
  lc=0@1,1@0; [ "$side" = b ] && lc=0@0,1@1
  ip netns exec "$P-$side" "$apps/mrcd" "${eal[@]}" --lcores "$lc" --file-prefix "$P-d$side" -- \
    --config "$work/mrcd-$side.toml" >"$work/mrcd-$side.log" 2>&1 &
  pids+=($!)
  eval "mrcd_$side=\$!"
done
for side in a b; do
  for _ in $(seq 300); do grep -q "mrcd: ready" "$work/mrcd-$side.log" && break; sleep 0.1; done
  grep -q "mrcd: ready" "$work/mrcd-$side.log" || fail "mrcd $side not ready"
  grep -q "AF_XDP on ${P}${side}1: XDP steering program id" "$work/mrcd-$side.log" ||
    fail "mrcd $side does not report its steering"
done
"$apps/bulk_copy" --socket "$work/b.sock" --service 7100 --bytes $((64 << 20)) \
  --keys "$work/copy.keys" >"$work/copy-rx.log" 2>&1 &
rx=$!
pids+=("$rx")
"$apps/bulk_copy" --socket "$work/a.sock" --service 7100 --bytes $((64 << 20)) \
  --keys "$work/copy.keys" --peer 10.77.0.2 >"$work/copy-tx.log" 2>&1 &
tx=$!
pids+=("$tx")
wait_pid "$tx" 120 || fail "bulk_copy sender failed"
wait_pid "$rx" 30 || fail "bulk_copy receiver failed"
grep -q "67108864 bytes, 0 wrong" "$work/copy-rx.log" || fail "copy: $(tail -2 "$work/copy-rx.log")"
"$apps/mrcctl" --socket "$work/a.sock" ports >"$work/ports.txt" || fail "mrcctl ports"
grep -q "plane 1: AF_XDP on ${P}a1, XDP program id" "$work/ports.txt" ||
  fail "mrcctl shows no steering: $(cat "$work/ports.txt")"
"$apps/mrcctl" --socket "$work/a.sock" --json ports |
  python3 -c "import json,sys; p=json.load(sys.stdin)['ports']; assert all(x['xdp']['steered']>0 for x in p), p" ||
  fail "mrcctl --json: nothing steered"
for side in a b; do
  eval "pid=\$mrcd_$side"
  kill -TERM "$pid"
  wait_pid "$pid" 30 || fail "mrcd $side exit status"
  for i in 0 1; do
    [ -z "$(attached "in$side" "${P}$side$i")" ] || fail "mrcd $side left a program on ${P}$side$i"
  done
done
ping_ok 0

echo "== 6. generic XDP on a driver without native XDP"
ip -n "$P-b" link add "${P}gb" type bridge
ip -n "$P-b" link set "${P}gb" up
ip -n "$P-b" addr add 10.79.0.2/24 dev "${P}gb"
ip netns exec "$P-b" "$gen" "${eal[@]}" --file-prefix "$P-g" -- --role server --port "af_xdp:${P}gb" \
  --local-ip 10.79.0.2 --oob 10.79.0.2:18515 --idle sleep >"$work/generic.log" 2>&1 &
gpid=$!
pids+=("$gpid")
for _ in $(seq 300); do grep -q "waiting for a client" "$work/generic.log" && break; sleep 0.1; done
grep -q "AF_XDP on ${P}gb: XDP steering program id [0-9]* attached in generic mode" "$work/generic.log" ||
  fail "generic mode not reported: $(tail -3 "$work/generic.log")"
inb "$xdptool" status "${P}gb" | grep -q "(generic mode), MRC steering, owned by pid $gpid" ||
  fail "mrc-xdp status: $(inb "$xdptool" status "${P}gb")"
kill -TERM "$gpid"
wait_pid "$gpid" 30 || true  # interrupted before a client: its status is not the point
[ -z "$(attached inb "${P}gb")" ] || fail "the generic-mode program was left attached"
echo "af_xdp: all checks passed"
