#!/usr/bin/env bash
# MRC through a bad network, on real packets: two mrc-gen endpoints joined
# through mrc-fabric (three DPDK processes under --no-huge, memif ports), 2
# planes x 4 paths impaired as config/fabric-example.toml says: delay and
# jitter everywhere, 1% loss on plane 0, a rate-limited path that marks and
# trims, plane 1 down for 200 ms. Half way, 5% loss is added to plane 0 at
# run time over DPDK telemetry. The client's live lines on screen, then the
# fabric's counters, both summaries, and the first packets of the capture as
# Wireshark decodes them (when tshark is installed).
#
#   scripts/fabric-demo.sh [config.toml]      (MRC_DEMO_SECONDS, default 6)
set -euo pipefail
cd "$(dirname "$0")/.."
config=$(realpath "${1:-config/fabric-example.toml}")

scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
meson compile -C build >/dev/null

gen=build/app/mrc-gen
fabric=build/app/mrc-fabric
secs=${MRC_DEMO_SECONDS:-6}
work=$(mktemp -d /tmp/mrc-fabric-demo-XXXXXX)
oob="127.0.0.1:$((20000 + $$ % 20000))"
eal=(--no-huge -m 512 --no-pci --log-level=lib.eal:error --log-level=lib.telemetry:error)
# shellcheck source=tests/support/procs.sh
source tests/support/procs.sh
pids=()
cleanup() {
  for p in "${pids[@]}"; do stop_pid "$p" TERM 5; done
  rm -rf "$work" /var/run/dpdk/mrc-fdemo-*-$$
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== mrc-fabric demo: $config, ${secs} s of verified WRITE_WITH_IMM over 2 planes"
"$fabric" "${eal[@]}" --file-prefix "mrc-fdemo-f-$$" --lcores '0@(0,1)' \
  --vdev=net_memif0,role=server,socket="$work/a0.sock" --vdev=net_memif1,role=server,socket="$work/b0.sock" \
  --vdev=net_memif2,role=server,socket="$work/a1.sock" --vdev=net_memif3,role=server,socket="$work/b1.sock" \
  -- --config "$config" --capture "$work/fabric.pcap" --capture-path 0:0 \
  --json "$work/fabric.json" >"$work/fabric.log" 2>&1 &
pids+=($!)
"$gen" "${eal[@]}" --file-prefix "mrc-fdemo-s-$$" --lcores 0@1,1@0 \
  --vdev=net_memif0,role=client,socket="$work/b0.sock" --vdev=net_memif1,role=client,socket="$work/b1.sock" \
  -- --role server --oob "$oob" --idle sleep --stats-period 0 --json "$work/server.json" \
  >"$work/server.log" 2>&1 &
pids+=($!)
(
  sleep "$(python3 -c "print($secs / 2 + 1)")"
  echo "/fabric/set,plane=0,dir=ab,loss=0.05" |
    python3 /usr/bin/dpdk-telemetry.py -f "mrc-fdemo-f-$$" 2>/dev/null | sed 's/^/-- telemetry: /' | tail -1
) &
rc=0
"$gen" "${eal[@]}" --file-prefix "mrc-fdemo-c-$$" --lcores 0@0,1@1 \
  --vdev=net_memif0,role=client,socket="$work/a0.sock" --vdev=net_memif1,role=client,socket="$work/a1.sock" \
  -- --role client --oob "$oob" --idle sleep --mode write_imm --verify --qps 4 --duration "$secs" \
  --json "$work/client.json" || rc=$?
wait "${pids[1]}" || rc=$?
stop_pid "${pids[0]}" TERM 5
pids=()
echo
echo "-- the fabric:"
grep -E '^\[|schedule|summary|dropped|captured' "$work/fabric.log" | tail -n 6
if [ "$rc" -ne 0 ]; then
  cat "$work/server.log" >&2
  echo "== demo FAILED (exit $rc)"
  exit "$rc"
fi
python3 - "$work/client.json" "$work/server.json" "$work/fabric.json" <<'PY'
import json, sys
c, s, f = (json.load(open(p)) for p in sys.argv[1:4])
assert c["verify_errors"] == 0 and c["qp_errors"] == 0 and s["verify_errors"] == 0
assert s["bytes_verified"] == c["bytes"] > 0, (s["bytes_verified"], c["bytes"])
t = f["totals"]
print(f"-- {c['bytes'] / 2**20:.0f} MiB written and verified at {c['goodput_gbps']:.2f} Gb/s; "
      f"{c['retransmissions']} retransmissions for {t['drop_loss'] + t['drop_down']} frames the "
      f"fabric dropped, {t['trimmed']} it trimmed and {t['ecn_marked']} it marked CE")
PY
if command -v tshark >/dev/null; then
  echo "-- plane 0, path 0, as Wireshark decodes it (scripts/wireshark/mrc.lua):"
  for filter in "mrc.opcode <= 2" "mrc.opcode > 2"; do
    { tshark -X lua_script:scripts/wireshark/mrc.lua -o udp.try_heuristic_first:TRUE \
        -r "$work/fabric.pcap" -Y "$filter" 2>/dev/null || true; } | head -n 4 | cut -c1-150
  done
fi
echo "== demo passed"
