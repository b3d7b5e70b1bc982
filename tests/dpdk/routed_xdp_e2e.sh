#!/usr/bin/env bash
# A routed fabric for AF_XDP ports (issue 20): two hosts in namespaces,
# each plane its own pair of subnets joined by a router namespace
# (ip_forward, no bridge: scripts/netns-planes.sh routed). The hosts' only
# knowledge of each other's subnets is the kernel's route through the
# plane's router; no MAC is configured anywhere. Checked:
#   1. mrc-gen over af_xdp ports: each end takes the gateway from the
#      kernel's route and its MAC from the kernel's neighbour table (the
#      router's real MAC), write_imm with --verify moves data over both
#      planes through the routers, no errors;
#   2. a route whose gateway does not answer: mrc-gen stops with an error
#      naming the plane and the gateway (no hang, no silent loss);
#   3. mrcd over af_xdp ports with no gateway in its config: bulk_copy
#      moves 32 MiB verified through the routers; mrcctl neighbors shows
#      the kernel's next hop and MAC per plane;
#   4. the router of plane 0 takes another MAC in the middle of a
#      transfer and announces it: the kernel learns it, mrcd's QPs follow
#      (paths_moved), plane 0 keeps carrying, the copy completes verified;
#   5. SIGTERM: both daemons exit 0.
# Needs root; exits 77 (skipped) without it or without the BPF object.
#
#   routed_xdp_e2e.sh APP_DIR   (APP_DIR: the build's app/)
set -euo pipefail
apps=$(realpath "$1")
gen=$apps/mrc-gen
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: needs root (namespaces, XDP)"
  exit 77
fi
for t in python3 arping; do
  command -v "$t" >/dev/null || { echo "skipped: $t missing (scripts/install-deps.sh)"; exit 77; }
done
if [ -z "${MRC_XDP_PROG:-}" ] && ! "$apps/mrc-xdp" status lo >/dev/null 2>&1; then
  echo "skipped: mrc-xdp cannot query interfaces"
  exit 77
fi

P=rx$(( $$ % 10000 ))
net="$src/scripts/netns-planes.sh"
work=$(mktemp -d /tmp/mrc-routed-xdp-XXXXXX)
pids=()
# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../support/procs.sh"
# shellcheck source=tests/support/routed.sh
source "$(dirname "$0")/../support/routed.sh"
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
ina() { ip netns exec "$P-a" "$@"; }
inb() { ip netns exec "$P-b" "$@"; }
mac_of() {  # NS IFACE
  ip -n "$1" -j link show dev "$2" | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['address'])"
}

# A: 10.81.p.1/24, B: 10.82.p.2/24, routers 10.81.p.254 / 10.82.p.254.
"$net" routed "$P" 2 81
eal=(--no-huge -m 512 --no-pci --log-level=lib.eal:error)
for p in 0 1; do
  ina ip neigh flush dev "${P}a$p"
  inb ip neigh flush dev "${P}b$p"
done

echo "== 1. mrc-gen over af_xdp ports through the routers"
start_server() {  # NAME: mrc-gen server in B, waits until it listens
  ip netns exec "$P-b" "$gen" "${eal[@]}" --lcores 0@1,1@0 --file-prefix "$P-$1" -- --role server \
    --port "af_xdp:${P}b0" --port "af_xdp:${P}b1" --local-ip 10.82.0.2,10.82.1.2 \
    --oob 10.82.0.2:18515 --idle sleep --json "$work/$1.json" >"$work/$1.log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 300); do
    grep -q "waiting for a client" "$work/$1.log" && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "server $1 exited: $(tail -3 "$work/$1.log")"
    sleep 0.1
  done
  fail "server $1 not listening after 30 s"
}
start_server s1
rc=0
ina timeout 120 "$gen" "${eal[@]}" --lcores 0@0,1@1 --file-prefix "$P-c1" -- --role client \
  --port "af_xdp:${P}a0" --port "af_xdp:${P}a1" --local-ip 10.81.0.1,10.81.1.1 \
  --oob 10.82.0.2:18515 --idle sleep --mode write_imm --verify --qps 4 --duration 4 \
  --json "$work/c1.json" >"$work/c1.log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || fail "client exited $rc: $(tail -3 "$work/c1.log")"
wait_exit "$server_pid" 30 || fail "server exited with an error: $(tail -3 "$work/s1.log")"
for p in 0 1; do
  ra=$(mac_of "$P-r$p" "${P}ra$p")
  rb=$(mac_of "$P-r$p" "${P}rb$p")
  grep -q "plane $p: 10.82.$p.2 through gateway 10.81.$p.254 ($ra, the kernel's neighbour on ${P}a$p)" \
    "$work/c1.log" || fail "client plane $p: not through its router $ra: $(grep "plane $p" "$work/c1.log")"
  grep -q "plane $p: 10.81.$p.1 through gateway 10.82.$p.254 ($rb, the kernel's neighbour on ${P}b$p)" \
    "$work/s1.log" || fail "server plane $p: not through its router $rb: $(grep "plane $p" "$work/s1.log")"
done
python3 - "$work/c1.json" "$work/s1.json" <<'PY'
import json, sys
c, s = (json.load(open(p)) for p in sys.argv[1:3])
assert c["verify_errors"] == 0 and s["verify_errors"] == 0, "verify errors"
assert c["qp_errors"] == 0 and s["qp_errors"] == 0, "QP errors"
assert c["bytes"] > (8 << 20), f"only {c['bytes']} bytes moved"
assert s["bytes_verified"] > 0, "the server verified nothing"
for side in (c, s):
    for p in side["ports"]:
        assert p["xdp"]["steered"] > 500, f"{p['port']}: only {p['xdp']['steered']} MRC frames in"
print(f"mrc-gen through the routers: {c['bytes'] / 2**20:.0f} MiB verified, "
      f"{c['goodput_gbps']:.2f} Gb/s, steered per port "
      f"{[p['xdp']['steered'] for p in c['ports']]}")
PY
# Forwarded by the routers, both ways, on both planes.
for p in 0 1; do
  n=$(ip -n "$P-r$p" -s -j link show "${P}rb$p" |
      python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['tx']['packets'])")
  [ "$n" -gt 500 ] || fail "router $p forwarded only $n frames towards B"
done

echo "== 2. a gateway that never answers"
ina ip route replace 10.82.1.0/24 via 10.81.1.253 dev "${P}a1"
start_server s2
rc=0
ina timeout 60 "$gen" "${eal[@]}" --lcores 0@0,1@1 --file-prefix "$P-c2" -- --role client \
  --port "af_xdp:${P}a0" --port "af_xdp:${P}a1" --local-ip 10.81.0.1,10.81.1.1 \
  --oob 10.82.0.2:18515 --idle sleep --duration 2 >"$work/c2.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "client with a dead gateway: exit $rc"
grep -q "plane 1: the gateway 10.81.1.253 to 10.82.1.2 did not answer ARP on ${P}a1" "$work/c2.log" ||
  fail "no clear error for the dead gateway: $(tail -3 "$work/c2.log")"
stop_pid "$server_pid" INT 5
ina ip route replace 10.82.1.0/24 via 10.81.1.254 dev "${P}a1"

echo "== 3. mrcd over af_xdp ports, gateways from the kernel"
for side in a b; do
  n=81 host=1; [ "$side" = b ] && n=82 host=2
  cat >"$work/mrcd-$side.toml" <<TOML
[daemon]
socket = "$work/$side.sock"
drain_ms = 1000
[dataplane]
ports = ["af_xdp:${P}${side}0", "af_xdp:${P}${side}1"]
idle = "sleep"
link_wait_ms = 30000
[[plane]]
ip = "10.$n.0.$host/24"
[[plane]]
ip = "10.$n.1.$host/24"
TOML
  lc=0@1,1@0; [ "$side" = b ] && lc=0@0,1@1
  ip netns exec "$P-$side" "$apps/mrcd" "${eal[@]}" --lcores "$lc" --file-prefix "$P-d$side" -- \
    --config "$work/mrcd-$side.toml" >"$work/mrcd-$side.log" 2>&1 &
  pids+=($!)
  eval "mrcd_$side=\$!"
done
for side in a b; do
  for _ in $(seq 300); do grep -q "mrcd: ready" "$work/mrcd-$side.log" && break; sleep 0.1; done
  grep -q "mrcd: ready" "$work/mrcd-$side.log" || fail "mrcd $side not ready"
done
bulk_copy_start first 10.82.0.2 7300 $((32 << 20))
bulk_copy_check first $((32 << 20))
"$apps/mrcctl" --socket "$work/a.sock" --json neighbors >"$work/neigh-a.json" || fail "mrcctl neighbors"
python3 - "$work/neigh-a.json" "$(mac_of "$P-r0" "${P}ra0")" "$(mac_of "$P-r1" "${P}ra1")" <<'PY'
import json, sys
planes = json.load(open(sys.argv[1]))["planes"]
for p in planes:
    assert p["resolution"] == "kernel (af_xdp)", p
    routes = {r["dst"]: r for r in p["kernel_routes"]}
    r = routes.get(f"10.82.{p['plane']}.2")
    assert r, f"plane {p['plane']}: no kernel route shown: {p}"
    assert r["next_hop"] == f"10.81.{p['plane']}.254" and r["from"] == "kernel route", r
    assert r["mac"] == sys.argv[2 + p["plane"]], (r, sys.argv[2 + p["plane"]])
print("mrcctl neighbors:", [(p["plane"], p["kernel_routes"]) for p in planes])
PY

echo "== 4. the router of plane 0 changes its MAC mid-transfer"
gateway_moves_mid_transfer "$P-r0" "${P}ra0" "${P}rb0" 10.81.0.254 02:00:00:00:fe:81 10.82.0.2 7301 $((512 << 20))

echo "== 5. SIGTERM"
for side in a b; do
  eval "pid=\$mrcd_$side"
  kill -TERM "$pid"
  rc=0; wait_exit "$pid" 30 || rc=$?
  [ "$rc" -eq 0 ] || fail "mrcd $side exited $rc"
done
echo "routed AF_XDP: all checks passed"
