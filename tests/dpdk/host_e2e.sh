#!/usr/bin/env bash
# A DPDK-owned port answers its neighbours for its plane address: mrcd owns
# a net_tap port whose kernel side sits in a network namespace; the
# namespace pings the plane address (the kernel's ARP request is answered
# first, so its neighbour table ends up holding the port's MAC) and arpings
# it; a ping of another address on the subnet gets no answer. The daemon's
# worker is adaptive (it sleeps on the tap's RX interrupt between the
# pings). mrcctl's counters must show every answer. Needs root (namespace,
# tap); exits 77 without it.
#
#   host_e2e.sh path/to/app-dir   (mrcd and mrcctl)
set -euo pipefail
apps=$(realpath "$1")
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "skipped: needs root and iproute2"
  exit 77
fi
for t in ping arping; do
  command -v "$t" >/dev/null || { echo "$t is missing (scripts/install-deps.sh installs it)"; exit 1; }
done
ns=mrc-host-$$
work=$(mktemp -d /tmp/mrc-host-XXXXXX)
spid=""
# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../support/procs.sh"
cleanup() {
  local rc=$?
  [ -n "$spid" ] && stop_pid "$spid" TERM 3
  if [ "$rc" -ne 0 ]; then print_logs "$work"; echo "FAILED (exit $rc)"; fi
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work" "/var/run/dpdk/mrc-host-$$"
}
trap cleanup EXIT
trap 'exit 143' INT TERM
ip netns add "$ns"
inns() { ip netns exec "$ns" "$@"; }
inns ip link set lo up
eal=(--no-huge -m 512 --no-pci --log-level=lib.eal:error)
cat >"$work/mrcd.toml" <<TOML
[daemon]
socket = "$work/mrcd.sock"
drain_ms = 200
[dataplane]
idle = "adaptive"
[[plane]]
ip = "10.79.0.2"
TOML
ip netns exec "$ns" "$apps/mrcd" "${eal[@]}" --lcores 0@1,1@0 --file-prefix "mrc-host-$$" --vdev=net_tap0,iface=mh0 -- \
  --config "$work/mrcd.toml" >"$work/mrcd.log" 2>&1 &
spid=$!
for _ in $(seq 200); do
  inns ip link show mh0 2>/dev/null | grep -q '<.*UP' && break
  sleep 0.05
done
inns ip link show mh0 | grep -q '<.*UP' || { echo "the tap never came up"; exit 1; }
port_mac=$(inns ip -br link show mh0 | awk '{print $3}')
# net_tap gives the kernel side the port's own MAC: the kernel side takes
# another, or it would take the port's frames for its own.
inns sysctl -qw net.ipv6.conf.mh0.disable_ipv6=1
inns ip link set mh0 address 02:00:00:00:79:01
inns ip addr add 10.79.0.1/24 dev mh0
inns ip link set mh0 up
for _ in $(seq 300); do grep -q "mrcd: ready" "$work/mrcd.log" && break; sleep 0.1; done
grep -q "mrcd: ready" "$work/mrcd.log" || { echo "mrcd is not ready"; exit 1; }
inns ping -c 3 -i 0.2 -W 2 10.79.0.2 >"$work/ping.log" 2>&1 || { cat "$work/ping.log"; exit 1; }
cat "$work/ping.log"
neigh=$(inns ip neigh show 10.79.0.2 dev mh0)
echo "neighbour: $neigh"
echo "$neigh" | grep -qi "lladdr $port_mac" ||
  { echo "the namespace's neighbour entry is not the port's MAC ($port_mac)"; exit 1; }
inns arping -c 2 -w 5 -I mh0 10.79.0.2 >"$work/arping.log" 2>&1 || { cat "$work/arping.log"; exit 1; }
cat "$work/arping.log"
grep -qi "$port_mac" "$work/arping.log" || { echo "arping did not hear the port's MAC"; exit 1; }
# Something the port must not answer: a ping of another address on its subnet.
if inns ping -c 1 -W 1 10.79.0.9 >/dev/null 2>&1; then echo "10.79.0.9 answered"; exit 1; fi
"$apps/mrcctl" --socket "$work/mrcd.sock" --json status >"$work/status.json" ||
  { echo "mrcctl status failed"; exit 1; }
python3 - "$work/status.json" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))["worker"]
print({k: w[k] for k in ("rx_arp", "tx_arp", "tx_echo_replies", "rx_host_malformed", "rx_stray")})
assert w["tx_echo_replies"] >= 3, w["tx_echo_replies"]
# The start-up announcement, and the replies (the kernel's request, arping's two).
assert w["tx_arp"] >= 1 + 2, w["tx_arp"]
assert w["rx_arp"] >= 2, w["rx_arp"]
assert w["rx_host_malformed"] == 0, w["rx_host_malformed"]
PY
kill -TERM "$spid"
rc=0; wait "$spid" || rc=$?
spid=""
[ "$rc" -eq 0 ] || { echo "mrcd exited $rc"; exit 1; }
echo "ok: the port answers ARP and ping for its plane address"
