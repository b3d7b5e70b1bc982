#!/usr/bin/env bash
# End to end over net_tap: two mrc-gen endpoints, each with 2 tap ports (one
# per plane), inside a network namespace this script creates and removes.
# The kernel bridges plane p's two taps (one Linux bridge per plane). Once the
# client has reported its first second of traffic, the kernel side of its
# plane-1 tap is set down ("ip link set down"): the transfer must complete,
# verified, over plane 0, which must carry traffic after the cut. The server
# runs the adaptive idle mode: its workers sleep on the taps' RX interrupts
# between messages until the next one's frames wake them (wakes_rx). The
# client offers 0.2 Gb/s, a 64 KiB message every 2.6 ms, so that there are
# such gaps: at full speed the server may never be idle for its spin time
# (200 us here), and whether it sleeps at all is luck (seen: 0 sleeps in 1
# run of 6).
# Needs root (namespaces, taps); exits 77 (skipped) without it.
#
#   tap_e2e.sh path/to/mrc-gen
set -euo pipefail
gen=$(realpath "$1")
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "skipped: needs root and iproute2"
  exit 77
fi
ns=mrc-tap-$$
work=$(mktemp -d /tmp/mrc-tap-XXXXXX)
spid=""
cpid=""
fpid=""
logs() {
  for f in client server links; do
    [ -f "$work/$f.log" ] && { echo "---- $f log"; tail -n 40 "$work/$f.log"; }
  done
}
# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../support/procs.sh"
stop() { stop_pid "$1" TERM 2; }
cleanup() {
  local rc=$?
  for p in $cpid $spid $fpid; do stop "$p"; done
  if [ "$rc" -ne 0 ]; then logs; echo "FAILED (exit $rc)"; fi
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work" /var/run/dpdk/mrc-tap-s-$$ /var/run/dpdk/mrc-tap-c-$$
}
trap cleanup EXIT
trap 'exit 143' INT TERM
# Waits for a process to end, at most $2 seconds; fails if it does not.
wait_for() {
  for _ in $(seq $(( $2 * 10 ))); do
    kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }
    sleep 0.1
  done
  echo "process $1 still running after $2 s"
  return 124
}
ip netns add "$ns"
inns() { ip netns exec "$ns" "$@"; }
inns ip link set lo up
for p in 0 1; do
  inns ip link add "br$p" type bridge
  inns ip link set "br$p" up
done
eal=(--no-huge -m 512 --no-pci --log-level=lib.eal:error)
taps() { for p in 0 1; do echo "--vdev=net_tap$p,iface=$1$p"; done; }
attach() {  # iface-prefix: put each tap in its plane's bridge once its port started
  for p in 0 1; do
    # The port is started when the PMD has set the interface up.
    for _ in $(seq 200); do
      inns ip link show "$1$p" 2>/dev/null | grep -q '<.*UP' && break
      sleep 0.05
    done
    inns sysctl -qw "net.ipv6.conf.$1$p.disable_ipv6=1" 2>/dev/null || true
    # net_tap gives the kernel side the port's own MAC, and a bridge keeps
    # frames for its ports' own addresses for the host instead of forwarding
    # them: the kernel side takes another address (after the PMD set its own).
    inns ip link set "$1$p" address "$2:0$p"
    inns ip link set "$1$p" master "br$p"
    inns ip link set "$1$p" up
  done
}

# The side-channel ports: free in the namespace (the client's, where it
# first tries, and the server's, joined below).
cport=$(free_port inns)
sport=$(free_port inns)
while [ "$sport" = "$cport" ]; do sport=$(free_port inns); done

inns "$gen" "${eal[@]}" --lcores 0@1,1@0 --file-prefix "mrc-tap-s-$$" $(taps ts) -- \
  --role server --oob "127.0.0.1:$sport" --idle adaptive --idle-spin-us 200 --json "$work/server.json" \
  >"$work/server.log" 2>&1 &
spid=$!
attach ts 02:00:00:00:01
inns "$gen" "${eal[@]}" --lcores 0@0,1@1 --file-prefix "mrc-tap-c-$$" $(taps tc) -- \
  --role client --oob "127.0.0.1:$cport" --idle sleep --mode write_imm --verify --qps 4 \
  --msg-bytes 65536 --rate-gbps 0.2 --duration 5 --stats-period 1 --json "$work/client.json" >"$work/client.log" 2>&1 &
cpid=$!
attach tc 02:00:00:00:02
# Traffic starts only now that all four taps are in their bridges: frames
# sent before that are lost, and a plane that loses everything in its first
# milliseconds can stay out of use for seconds (seen under ASan). The
# server listens on $sport; the client has been trying $cport since it
# started; this joins the two.
inns python3 - "$cport" "$sport" <<'FWD' &
import socket, sys, threading
cport, sport = int(sys.argv[1]), int(sys.argv[2])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", cport))
ls.listen(1)
a, _ = ls.accept()
b = socket.create_connection(("127.0.0.1", sport))
def pipe(x, y):
    while True:
        d = x.recv(65536)
        if not d:
            y.shutdown(socket.SHUT_WR)
            return
        y.sendall(d)
t = threading.Thread(target=pipe, args=(b, a), daemon=True)
t.start()
pipe(a, b)
t.join(30)
FWD
fpid=$!
# Cut after the first stats line, not after a fixed delay: start-up time
# varies a lot (sanitizer builds start several times slower).
for _ in $(seq 300); do
  grep -q '^\[ *1\.0s\]' "$work/client.log" && break
  kill -0 "$cpid" 2>/dev/null || { echo "the client ended before its first second"; exit 1; }
  sleep 0.1
done
grep -q '^\[ *1\.0s\]' "$work/client.log" || { echo "no traffic after 30 s"; exit 1; }
echo "setting tc1 (client plane 1) down"
inns ip link set tc1 down || { echo "the client's tap is gone"; exit 1; }
# What the kernel says a second later, for the log of a failure (the taps
# are gone once the endpoints end).
sleep 1
inns ip -br link show >"$work/links.log" 2>&1 || true
# The client runs 4 s and drains; the server ends after it.
rc=0
wait_for "$cpid" 60 || rc=$?
[ "$rc" -eq 0 ] && cpid=""
wait_for "$spid" 20 || rc=$?
[ "$rc" -eq 0 ] && spid=""
[ "$rc" -eq 0 ] || exit 1
cat "$work/client.log"
python3 - "$work/client.json" "$work/server.json" "$work/client.log" <<'PY'
import json, re, sys
c, s = (json.load(open(p)) for p in sys.argv[1:3])
# Live lines after the cut (it came right after the 1.0 s line): traffic
# still flowing, whenever the client noticed the link go down.
after = [float(m.group(2)) for m in
         re.finditer(r"^\[ *([0-9.]+)s\] goodput +([0-9.]+) Gb/s", open(sys.argv[3]).read(), re.M)
         if float(m.group(1)) >= 2.0]
assert len(after) >= 2 and all(g > 0 for g in after), f"no traffic after the cut: {after}"
assert c["verify_errors"] == 0 and s["verify_errors"] == 0, "verify errors"
assert c["qp_errors"] == 0 and s["qp_errors"] == 0, "QP errors"
assert s["bytes_verified"] == c["bytes"] > 0, (s["bytes_verified"], c["bytes"])
assert all(p["driver"] == "net_tap" for p in c["ports"])
assert c["ports"][1]["link"] == "down", "plane 1 should read down after ip link set down"
assert c["ports"][0]["tx_data_pkts"] > c["ports"][1]["tx_data_pkts"], "plane 0 should carry the rest"
w = s["worker_counters"]
assert w["idle_sleeps"] > 0 and w["wakes_rx"] > 0, f"the adaptive server never woke by RX interrupt: {w}"
print(f"tap e2e: {c['bytes'] / 2**20:.0f} MiB verified, plane 1 taken down mid-run, "
      f"{c['retransmissions']} retransmissions, {c['worker_counters']['rx_stray']} stray frames dropped, "
      f"server slept {w['idle_sleeps']} times, woken {w['wakes_rx']} times by RX interrupts")
PY
