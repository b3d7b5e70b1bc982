#!/usr/bin/env bash
# The "run it" command: installs dependencies, builds, and runs the main job
# on an embedded default that needs no NIC and no hugepages.
#
# Until the DPDK dataplane and mrc-gen land, the main job has two parts:
#  1. the port smoke run: two DPDK processes joined by a memif pair move
#     Ethernet/IPv4/UDP frames both ways, every frame checked byte for byte,
#     checksums included;
#  2. a multipath MRC transfer by the real transport core in mrc-sim: 4
#     planes x 8 paths, one path of every plane blackholed, 0.1% loss, and a
#     whole plane blackholed for 1.5 ms in the middle; every byte compared
#     at the end.
# When mrc-gen lands, part 2 runs over real DPDK ports instead.
#
# Environment: MRC_DEMO_FRAMES (default 200000) frames per direction.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
meson compile -C build >/dev/null

bin=build/app/mrc-ports
frames=${MRC_DEMO_FRAMES:-200000}
work=$(mktemp -d /tmp/mrc-demo-XXXXXX)
sock=$work/memif.sock
eal=(--no-huge -m 256 --no-pci --no-shconf --log-level=lib.eal:warning)
# Two cores: the echo side and the ping side each get one.
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work" /var/run/dpdk/mrc-demo-echo-$$ /var/run/dpdk/mrc-demo-ping-$$
}
trap cleanup EXIT INT TERM

echo "== mrc demo: two DPDK processes over a memif pair, $frames frames each way"
"$bin" "${eal[@]}" -l 1 --file-prefix "mrc-demo-echo-$$" \
  --vdev="net_memif0,role=server,socket=$sock" -- \
  --mode echo --frames "$frames" --json "$work/echo.json" >"$work/echo.log" 2>&1 &
server_pid=$!

start=$(date +%s.%N)
rc=0
"$bin" "${eal[@]}" -l 0 --file-prefix "mrc-demo-ping-$$" \
  --vdev="net_memif0,role=client,socket=$sock" -- \
  --mode ping --frames "$frames" --json "$work/ping.json" 2>"$work/ping.err" || rc=$?
end=$(date +%s.%N)
wait "$server_pid" || rc=$?
server_pid=""
echo "-- echo side:"
grep -E '^(port|echo) ' "$work/echo.log" || cat "$work/echo.log"
[ -s "$work/ping.json" ] && [ -s "$work/echo.json" ] && python3 - "$work/ping.json" "$work/echo.json" "$start" "$end" <<'PY'
import json, sys
ping, echo = (json.load(open(p)) for p in sys.argv[1:3])
secs = float(sys.argv[4]) - float(sys.argv[3])
p, e = ping["stats"], echo["stats"]
print(f"-- client -> server: {e['received']} frames intact, {e['bad_cksum']} bad checksums, {e['bad_payload']} bad payloads")
print(f"-- server -> client: {p['received']} frames intact, {p['bad_cksum']} bad checksums, {p['bad_payload']} bad payloads")
print(f"-- {2 * p['received'] / secs / 1e3:.0f} kframes/s round trip, {8 * (p['payload_bytes'] + e['payload_bytes']) / secs / 1e9:.2f} Gb/s of verified payload, {secs:.1f} s")
PY
if [ "$rc" -ne 0 ]; then
  cat "$work/ping.err" "$work/echo.log" >&2
  echo "== demo FAILED (exit $rc)"
  exit "$rc"
fi
echo "-- every frame arrived intact both ways"

echo "== mrc demo: MRC over a simulated fabric (build/app/mrc-sim): 4 planes x 8 paths at 100 Gb/s,"
echo "   4 QPs writing 256 MiB, path 3 of every plane blackholed from the start, 0.1% random loss,"
echo "   and all of plane 2 blackholed from 1 ms to 2.5 ms"
build/app/mrc-sim --planes 4 --paths-per-plane 8 --link-gbps 100 --delay-us 2 --qps 4 \
  --msg-bytes 1048576 --total-bytes 268435456 --loss 0.001 --timeout-exp 5 --seed 1 \
  --fail plane=0,path=3,at_us=0 --fail plane=1,path=3,at_us=0 \
  --fail plane=2,path=3,at_us=0 --fail plane=3,path=3,at_us=0 \
  --fail plane=2,at_us=1000,for_us=1500
echo "== demo passed"
