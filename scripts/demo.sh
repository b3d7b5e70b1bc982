#!/usr/bin/env bash
# The "run it" command: installs dependencies, builds, and runs the main job
# on an embedded default that needs no NIC and no hugepages.
#
# The main job: two mrc-gen endpoints (two DPDK processes, EAL under
# --no-huge) joined by 4 memif pairs, one per plane. The client writes for
# MRC_DEMO_SECONDS (default 8) with WRITE_WITH_IMM; every message carries a
# pattern the server checks byte by byte. In the middle the client cuts
# plane 2's port (the server sees its memif peer disconnect): the transfer
# carries on over the three others. Live per-second lines, then both
# summaries; the demo fails unless every message arrived verified with no
# QP error.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
meson compile -C build >/dev/null

bin=build/app/mrc-gen
secs=${MRC_DEMO_SECONDS:-8}
cut_at=$(python3 -c "print($secs / 2)")
work=$(mktemp -d /tmp/mrc-demo-XXXXXX)
oob="127.0.0.1:$((20000 + $$ % 20000))"
eal=(--no-huge -m 512 --no-pci --log-level=lib.eal:error --log-level=lib.telemetry:error)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work" /var/run/dpdk/mrc-demo-server-$$ /var/run/dpdk/mrc-demo-client-$$
}
trap cleanup EXIT INT TERM

vdevs() {
  for p in 0 1 2 3; do echo "--vdev=net_memif$p,role=$1,socket=$work/plane$p.sock"; done
}

echo "== mrc demo: two mrc-gen endpoints over 4 memif planes, ${secs} s of verified WRITE_WITH_IMM,"
echo "   plane 2 cut at ${cut_at} s"
# Each endpoint: a main lcore and a worker lcore, crossed over the two CPUs.
"$bin" "${eal[@]}" --lcores 0@1,1@0 --file-prefix "mrc-demo-server-$$" $(vdevs server) -- \
  --role server --oob "$oob" --idle sleep --stats-period 0 \
  --json "$work/server.json" >"$work/server.log" 2>&1 &
server_pid=$!

rc=0
"$bin" "${eal[@]}" --lcores 0@0,1@1 --file-prefix "mrc-demo-client-$$" $(vdevs client) -- \
  --role client --oob "$oob" --idle sleep --mode write_imm --verify --qps 8 \
  --msg-bytes 262144 --duration "$secs" --cut-port "2@$cut_at" \
  --json "$work/client.json" || rc=$?
wait "$server_pid" || rc=$?
server_pid=""
echo
grep -v -E '^(EAL|TELEMETRY|eth_)' "$work/server.log" | sed -n '/summary/,$p'
if [ "$rc" -ne 0 ]; then
  cat "$work/server.log" >&2
  echo "== demo FAILED (exit $rc)"
  exit "$rc"
fi
python3 - "$work/client.json" "$work/server.json" <<'PY'
import json, sys
c, s = (json.load(open(p)) for p in sys.argv[1:3])
assert c["verify_errors"] == 0 and c["qp_errors"] == 0 and s["verify_errors"] == 0
assert s["bytes_verified"] == c["bytes"] > 0, (s["bytes_verified"], c["bytes"])
share = ", ".join(f"plane {p['plane']} {p['tx_data_pkts']}" for p in c["ports"])
print(f"-- {c['bytes'] / 2**20:.0f} MiB written and verified by the server, message by message; "
      f"{c['retransmissions']} retransmissions")
print(f"-- data packets per plane: {share} (plane 2 cut half way)")
PY
echo "== demo passed"
