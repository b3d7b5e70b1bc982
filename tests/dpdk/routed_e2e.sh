#!/usr/bin/env bash
# Two mrcd daemons on a routed (L3) fabric, with no static MAC anywhere:
# each plane is a pair of subnets joined by a router namespace of its own
# (ip_forward on, no bridge between the subnets). Host A is 10.1.p.1/24 on
# plane p, host B 10.2.p.1/24, the routers 10.1.p.254 and 10.2.p.254. Each
# daemon owns two net_tap ports; in its host's namespace a Linux bridge
# joins a tap's kernel side to a veth into the plane's router (a wire: the
# host namespace has no addresses). The daemons find their gateways by
# ARP, the CONNECT goes through the routers, bulk_copy moves 32 MiB with a
# WRITE_WITH_IMM at the end, verified byte for byte on the receiver.
# Then 256 MiB while plane 0's router changes its MAC and announces it: the
# QP must follow (the router keeps forwarding plane 0). Checked besides:
# the routers forwarded MRC frames on both planes (their veths' counters),
# mrcctl neighbors shows each gateway reachable, and daemon A restarted
# with no gateway, then with gateways nobody has, fails a connect with the
# reason. Last, mrc-gen over the same taps and routers (--local-ip with
# prefixes, --gateway: the gateways' MACs by ARP at set-up), write_imm
# verified, and its errors for a gateway off the subnet or without a
# prefix. Then mrc-gen again over IPv6 only (neighbour discovery, the
# gateways by --gateway, the flow label checked in a capture at a router,
# a ping -6 of a DPDK port). Needs root; exits 77 without it.
#
#   routed_e2e.sh path/to/app-dir   (mrcd, mrcctl, bulk_copy)
set -euo pipefail
apps=$(realpath "$1")
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "skipped: needs root and iproute2"
  exit 77
fi
P=mrt$$
work=$(mktemp -d /tmp/mrc-routed-XXXXXX)
pids=()
# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../support/procs.sh"
# shellcheck source=tests/support/routed.sh
source "$(dirname "$0")/../support/routed.sh"
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do stop_pid "$p" TERM 3; done
  if [ "$rc" -ne 0 ]; then print_logs "$work"; echo "FAILED (exit $rc)"; fi
  for n in a b r0 r1; do ip netns del "$P-$n" 2>/dev/null || true; done
  rm -rf "$work" /var/run/dpdk/"$P"-*
}
trap cleanup EXIT
trap 'exit 143' INT TERM
fail() { echo "$*"; exit 1; }

for n in a b r0 r1; do
  ip netns add "$P-$n"
  ip -n "$P-$n" link set lo up
done
for p in 0 1; do
  ip netns exec "$P-r$p" sysctl -qw net.ipv4.ip_forward=1
  for side in a b; do
    net=1; [ "$side" = b ] && net=2
    # host side: bridge x veth; router side: the gateway address
    ip link add "${P}$side$p" netns "$P-$side" type veth peer name "${P}r$side" netns "$P-r$p"
    ip -n "$P-r$p" addr add "10.$net.$p.254/24" dev "${P}r$side"
    ip -n "$P-r$p" link set "${P}r$side" up
    ip -n "$P-$side" link add "br$p" type bridge
    ip -n "$P-$side" link set "${P}$side$p" master "br$p"
    ip -n "$P-$side" link set "${P}$side$p" up
    ip -n "$P-$side" link set "br$p" up
  done
done

eal=(--no-huge -m 512 --no-pci --log-level=lib.eal:error)
start_mrcd() {  # side host-number lcores
  local side=$1 net=$2 lc=$3
  cat >"$work/mrcd-$side.toml" <<TOML
[daemon]
socket = "$work/$side.sock"
drain_ms = 500
connect_resend_ms = 50
[dataplane]
idle = "adaptive"
link_wait_ms = 30000
[[plane]]
ip = "10.$net.0.1/24"
gateway = "10.$net.0.254"
[[plane]]
ip = "10.$net.1.1/24"
gateway = "10.$net.1.254"
TOML
  "$apps/mrcd" --check-config "$work/mrcd-$side.toml" >/dev/null || fail "mrcd config $side refused"
  launch "$side" "$net" "$lc" "mrcd-$side"
}
launch() {  # side host-number lcores log-name: mrcd with $work/mrcd-<side>.toml
  local side=$1 net=$2
  ip netns exec "$P-$side" "$apps/mrcd" "${eal[@]}" --lcores "$3" --file-prefix "$P-$side" \
    --vdev="net_tap0,iface=t${side}0" --vdev="net_tap1,iface=t${side}1" -- \
    --config "$work/mrcd-$side.toml" >"$work/$4.log" 2>&1 &
  pids+=($!)
  eval "mrcd_$side=\$!"
  bridge_taps "$side" "$net"
  for _ in $(seq 300); do grep -q "mrcd: ready" "$work/$4.log" && break; sleep 0.1; done
  grep -q "mrcd: ready" "$work/$4.log" || fail "mrcd $side ($4) not ready"
}
bridge_taps() {  # side host-number
  local side=$1 net=$2
  # Each tap joins its plane's bridge once the PMD has it up, with another
  # MAC on the kernel side (net_tap gives it the port's own, and a bridge
  # keeps frames for its ports' own addresses instead of forwarding them).
  for p in 0 1; do
    for _ in $(seq 300); do
      ip -n "$P-$side" link show "t$side$p" 2>/dev/null | grep -q '<.*UP' && break
      sleep 0.05
    done
    ip netns exec "$P-$side" sysctl -qw "net.ipv6.conf.t$side$p.disable_ipv6=1"
    ip -n "$P-$side" link set "t$side$p" address "02:00:00:00:$net$p:01"
    ip -n "$P-$side" link set "t$side$p" master "br$p"
    ip -n "$P-$side" link set "t$side$p" up
  done
}
start_mrcd a 1 0@1,1@0
start_mrcd b 2 0@0,1@1

# The fabric is up when both daemons have resolved both gateways by ARP
# (the start-up requests may have gone out before the taps were bridged:
# the daemons keep asking).
gateways_up() {
  for side in a b; do
    "$apps/mrcctl" --socket "$work/$side.sock" --json neighbors | python3 -c '
import json, sys
for p in json.load(sys.stdin)["planes"]:
    e = {x["ip"]: x for x in p["entries"]}
    assert e.get(p["gateway"], {}).get("state") == "reachable"' 2>/dev/null || return 1
  done
}
for _ in $(seq 100); do gateways_up && break; sleep 0.1; done
gateways_up || fail "the daemons did not resolve their gateways"
bulk_copy_start first 10.2.0.1 7200 $((32 << 20))
bulk_copy_check first $((32 << 20))

for side in a b; do
  "$apps/mrcctl" --socket "$work/$side.sock" neighbors | tee "$work/neigh-$side.txt"
  "$apps/mrcctl" --socket "$work/$side.sock" --json neighbors >"$work/neigh-$side.json"
done
python3 - "$work/neigh-a.json" "$work/neigh-b.json" <<'PY'
import json, sys
for host, path in ((1, sys.argv[1]), (2, sys.argv[2])):
    planes = json.load(open(path))["planes"]
    for p in planes:
        gw = f"10.{host}.{p['plane']}.254"
        assert p["gateway"] == gw and p["prefix_len"] == 24 and p["resolution"] == "arp", p
        e = {x["ip"]: x for x in p["entries"]}
        assert gw in e and e[gw]["state"] in ("reachable", "stale") and e[gw]["mac"], p
        assert p["counters"]["resolved"] >= 1, p
PY
# Both routers forwarded the transfer: each plane carried MRC frames.
for p in 0 1; do
  fwd=$(ip -n "$P-r$p" -s -j link show "${P}rb" |
    python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['tx']['packets'])")
  echo "router of plane $p sent $fwd frames towards host B"
  [ "$fwd" -gt 1000 ] || fail "plane $p's router forwarded only $fwd frames"
done
# The router of plane 0 is replaced in the middle of a transfer: its
# A-side interface takes another MAC and announces it (a gratuitous ARP).
# Daemon A's QP must follow it there: the router keeps forwarding plane
# 0's frames towards B (without that, they would be sent to the old MAC
# and dropped by the router, and plane 1 would carry on alone).
echo "== a gateway that changes its MAC mid-transfer"
gateway_moves_mid_transfer "$P-r0" "${P}ra" "${P}rb" 10.1.0.254 02:00:00:00:fe:01 10.2.0.1 7201 $((256 << 20))

for side in a b; do
  eval "pid=\$mrcd_$side"
  kill -TERM "$pid"
  rc=0; wait_exit "$pid" 30 || rc=$?
  [ "$rc" -eq 0 ] || fail "mrcd $side exited $rc"
done
pids=()

# Daemon A again with gateways that cannot take it there: none in its
# config (the connect fails at once), then one nobody has (10.1.p.253:
# the connect times out, naming the next hop that never answered ARP).
restart_a() {  # log-name
  pids=()
  launch a 1 0@1,1@0 "$1"
  apid=$mrcd_a
}
try_connect() {  # expected-error
  set +e
  timeout 60 "$apps/bulk_copy" --socket "$work/a.sock" --service 7200 --bytes 4096 \
    --keys "$work/copy-first.keys" --peer 10.2.0.1 >"$work/try.log" 2>&1
  local rc=$?
  set -e
  cat "$work/try.log"
  [ "$rc" -ne 0 ] || fail "a connect with no route succeeded"
  grep -qF "$1" "$work/try.log" || fail "the error does not say: $1"
  kill -TERM "$apid"
  rc=0; wait_exit "$apid" 30 || rc=$?
  [ "$rc" -eq 0 ] || fail "mrcd a exited $rc"
  pids=()
}
echo "== no gateway"
sed -i '/^gateway/d' "$work/mrcd-a.toml"
restart_a nogw
try_connect "no route to 10.2.0.1: it is on no plane's subnet and no plane has a gateway"
echo "== a gateway that does not answer"
sed -i 's|^ip = "10.1.\([01]\).1/24"|&\ngateway = "10.1.\1.253"|' "$work/mrcd-a.toml"
restart_a deadgw
try_connect "no route to 10.2.0.1: plane 0: next hop 10.1.0.253 answers no ARP; plane 1: next hop 10.1.1.253 answers no ARP"

# mrc-gen on the same fabric: --local-ip with prefixes and --gateway, the
# gateways' MACs by ARP at set-up; its set-up channel runs over a
# management link of its own between the hosts (the fabric carries MRC).
echo "== mrc-gen through the routers"
ip link add "${P}ma" netns "$P-a" type veth peer name "${P}mb" netns "$P-b"
ip -n "$P-a" addr add 192.168.231.1/30 dev "${P}ma"
ip -n "$P-b" addr add 192.168.231.2/30 dev "${P}mb"
ip -n "$P-a" link set "${P}ma" up
ip -n "$P-b" link set "${P}mb" up
# gen_verified NAME IP-PREFIX: mrc-gen's client ($work/NAME-c.json) and
# server (-s.json) moved verified data with no QP error over both planes,
# the client's ports on addresses starting IP-PREFIX, no host frame refused.
gen_verified() {
  python3 - "$work/$1-c.json" "$work/$1-s.json" "$2" <<'PY'
import json, sys
c, s = (json.load(open(p)) for p in sys.argv[1:3])
assert c["verify_errors"] == 0 and s["verify_errors"] == 0, "verify errors"
assert c["qp_errors"] == 0 and s["qp_errors"] == 0, "QP errors"
assert c["bytes"] > (4 << 20), f"only {c['bytes']} bytes"
assert s["bytes_verified"] > 0
for p in c["ports"]:
    assert p["ip"].startswith(sys.argv[3]), p["ip"]
    assert p["tx_packets"] > 200, f"{p['port']}: only {p['tx_packets']} packets"
for side in (c, s):
    assert side["worker_counters"]["rx_host_malformed"] == 0, side["worker_counters"]
print(f"mrc-gen through the routers: {c['bytes'] / 2**20:.0f} MiB, {c['goodput_gbps']:.2f} Gb/s")
PY
}
gen_on() {  # side host-number role lcores log-name [flags...]
  local side=$1 net=$2 role=$3 lc=$4 name=$5
  shift 5
  local addrs=(--local-ip "10.$net.0.1/24,10.$net.1.1/24" --gateway "10.$net.0.254,10.$net.1.254")
  [ "${gen_ipv6:-0}" = 1 ] &&
    addrs=(--local-ip "2001:db8:$net:10::1/64,2001:db8:$net:11::1/64"
      --gateway "2001:db8:$net:10::fe,2001:db8:$net:11::fe")
  ip netns exec "$P-$side" "$apps/mrc-gen" "${eal[@]}" --lcores "$lc" --file-prefix "$P-g$side" \
    --vdev="net_tap0,iface=t${side}0" --vdev="net_tap1,iface=t${side}1" -- --role "$role" \
    "${addrs[@]}" --oob 192.168.231.2:18515 --idle sleep --link-wait 30 "$@" >"$work/$name.log" 2>&1 &
  gen_pid=$!
  pids+=("$gen_pid")
  bridge_taps "$side" "$net"
}
gen_on b 2 server 0@0,1@1 gen-s --json "$work/gen-s.json"
spid=$gen_pid
for _ in $(seq 300); do grep -q "waiting for a client" "$work/gen-s.log" && break; sleep 0.1; done
gen_on a 1 client 0@1,1@0 gen-c --mode write_imm --verify --qps 4 --duration 3 --json "$work/gen-c.json"
cpid=$gen_pid
wait_exit "$cpid" 90 || fail "mrc-gen client failed: $(tail -3 "$work/gen-c.log")"
wait_exit "$spid" 30 || fail "mrc-gen server failed: $(tail -3 "$work/gen-s.log")"
pids=()
for p in 0 1; do
  ra=$(ip -n "$P-r$p" -j link show "${P}ra" | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['address'])")
  grep -q "plane $p: 10.2.$p.1 through gateway 10.1.$p.254 ($ra, by ARP)" "$work/gen-c.log" ||
    fail "client plane $p not through its router ($ra): $(grep "plane $p" "$work/gen-c.log")"
done
gen_verified gen "10.1."
echo "== mrc-gen: a gateway off the subnet, none at all"
rc=0
ip netns exec "$P-a" "$apps/mrc-gen" "${eal[@]}" --file-prefix "$P-gx" --vdev=net_null0 -- \
  --role client --local-ip 10.1.0.1/24 --gateway 10.9.0.254 --oob 127.0.0.1:1 >"$work/gx.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q "not on plane 0's subnet" "$work/gx.log" ||
  fail "a gateway off the subnet: exit $rc, $(tail -2 "$work/gx.log")"
rc=0
ip netns exec "$P-a" "$apps/mrc-gen" "${eal[@]}" --file-prefix "$P-gx" --vdev=net_null0 -- \
  --role client --local-ip 10.1.0.1 --gateway 10.1.0.254 --oob 127.0.0.1:1 >"$work/gx.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q "needs its prefix in --local-ip" "$work/gx.log" ||
  fail "a gateway without a prefix: exit $rc, $(tail -2 "$work/gx.log")"

# The same over IPv6 only: the routers get IPv6 addresses (2001:db8:H:1P::fe,
# no duplicate-address wait) and forward IPv6; mrc-gen finds its gateways
# by neighbour discovery and the routers find the hosts' ports the same way
# (the ports answer their solicitations). A capture at plane 0's router
# checks the flow label of every MRC frame it forwards: the EV, as the UDP
# source port; and the router pings the server's plane address.
echo "== mrc-gen over IPv6 through the routers (neighbour discovery, flow label)"
for p in 0 1; do
  ip netns exec "$P-r$p" sysctl -qw net.ipv6.conf.all.forwarding=1
  ip -n "$P-r$p" addr add "2001:db8:1:1$p::fe/64" dev "${P}ra" nodad
  ip -n "$P-r$p" addr add "2001:db8:2:1$p::fe/64" dev "${P}rb" nodad
done
ip netns exec "$P-r0" dumpcap -q -i "${P}rb" -f "ip6 and udp" -c 3000 -a duration:60 \
  -w "$work/r0-v6.pcapng" >"$work/dumpcap.log" 2>&1 &
cap_pid=$!
pids+=("$cap_pid")
for _ in $(seq 50); do grep -q "Capturing on" "$work/dumpcap.log" 2>/dev/null && break; sleep 0.1; done
gen_ipv6=1
gen_on b 2 server 0@0,1@1 gen6-s --json "$work/gen6-s.json"
spid=$gen_pid
for _ in $(seq 300); do grep -q "waiting for a client" "$work/gen6-s.log" && break; sleep 0.1; done
gen_on a 1 client 0@1,1@0 gen6-c --mode write_imm --verify --qps 4 --duration 3 \
  --json "$work/gen6-c.json"
cpid=$gen_pid
# A ping of the server's plane-0 address from its router while it runs.
ip netns exec "$P-r0" ping -6 -c 3 -i 0.2 -w 20 2001:db8:2:10::1 >"$work/ping6.log" 2>&1 &
ping_pid=$!
wait_exit "$cpid" 90 || fail "mrc-gen client (IPv6) failed: $(tail -3 "$work/gen6-c.log")"
wait_exit "$spid" 30 || fail "mrc-gen server (IPv6) failed: $(tail -3 "$work/gen6-s.log")"
wait "$ping_pid" || fail "the server's port did not answer ping -6: $(cat "$work/ping6.log")"
cat "$work/ping6.log"
stop_pid "$cap_pid" INT 5
pids=()
for p in 0 1; do
  ra=$(ip -n "$P-r$p" -j link show "${P}ra" | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['address'])")
  grep -q "plane $p: 2001:db8:2:1$p::1 through gateway 2001:db8:1:1$p::fe ($ra, by neighbour discovery)" \
    "$work/gen6-c.log" ||
    fail "client plane $p not through its router ($ra): $(grep "plane $p" "$work/gen6-c.log")"
  # The router learned the server's port by neighbour discovery.
  ip -n "$P-r$p" -6 neigh show 2001:db8:2:1$p::1 | tee -a "$work/neigh6.txt" | grep -q lladdr ||
    fail "router $p has no neighbour entry for the server's port"
done
gen_verified gen6 "2001:db8:1:"
python3 -c 'import json,sys; assert all(json.load(open(p))["worker_counters"]["rx_ipv6"] > 0 for p in sys.argv[1:])' "$work/gen6-c.json" "$work/gen6-s.json" || fail "no MRC frame over IPv6"
tshark -r "$work/r0-v6.pcapng" -T fields -e ipv6.flow -e udp.srcport -e udp.dstport -e ipv6.hlim -e ipv6.dst \
  >"$work/flows.txt" 2>"$work/tshark.log" || fail "tshark: $(cat "$work/tshark.log")"
python3 - "$work/flows.txt" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
mrc = [r for r in rows if len(r) >= 5 and "4797" in (r[1], r[2])]
assert len(mrc) > 500, f"only {len(mrc)} MRC frames captured over IPv6 at the router"
bad = [r for r in mrc if int(r[0], 16) != int(r[1])]
assert not bad, f"{len(bad)} frames whose flow label is not their EV, e.g. {bad[:3]}"
labels = {int(r[0], 16) for r in mrc}
assert len(labels) >= 8, f"only {len(labels)} flow labels: the EVs are not sprayed"
# Captured on the router's B side: A's frames after the router, B's before.
fwd = [r for r in mrc if r[4] == "2001:db8:2:10::1"]
assert fwd and all(int(r[3]) == 63 for r in fwd), "A's frames: hop limit after a router not 63"
assert all(int(r[3]) == 64 for r in mrc if r not in fwd), "B's frames: hop limit not 64"
print(f"{len(mrc)} MRC frames at the router, {len(labels)} flow labels, each the frame's EV")
PY
echo "ok: routed through two routers by ARP and gateways, and over IPv6 by neighbour discovery, verified"
