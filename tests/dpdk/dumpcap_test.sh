#!/usr/bin/env bash
# dpdk-dumpcap captures from a running mrc-gen through pdump, and the
# capture decodes as MRC with scripts/wireshark/mrc.lua.
#
# dpdk-dumpcap is a DPDK secondary process, and secondaries share the
# primary's memory: that takes hugepages (a --no-huge primary cannot be
# attached to). So this test, as root only, reserves 2 MiB hugepages and
# mounts a hugetlbfs of its own, and gives both back when it ends; when the
# kernel cannot spare the pages it says so and is skipped (77).
#
#   dumpcap_test.sh path/to/mrc-gen path/to/mrc.lua
set -euo pipefail
gen=$(realpath "$1")
lua=$(realpath "$2")
if [ "$(id -u)" -ne 0 ]; then echo "skipped: needs root (hugepages)"; exit 77; fi
# A sanitizer build's memory layout (ASan's shadow) leaves a secondary
# process no room to map the primary's memory at the same addresses: seen
# as "EAL: Cannot init memory" and crashes of dpdk-dumpcap.
if grep -q __asan_init "$gen"; then
  echo "skipped: dpdk-dumpcap cannot attach to an AddressSanitizer build of mrc-gen"
  exit 77
fi
command -v dpdk-dumpcap >/dev/null || { echo "dpdk-dumpcap is missing (package dpdk)"; exit 1; }
work=$(mktemp -d /tmp/mrc-dumpcap-XXXXXX)
hp=/proc/sys/vm/nr_hugepages
old_pages=$(cat "$hp")
mounted=0
pids=()
# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../support/procs.sh"
stop() { stop_pid "$1" TERM 5; }
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do stop "$p"; wait "$p" 2>/dev/null || true; done
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    print_logs "$work"
  fi
  # The hugepage files go with the directory; then the mount, then the pages.
  rm -rf "$work/huge/"* 2>/dev/null || true
  if [ "$mounted" -eq 1 ]; then
    for _ in 1 2 3 4 5; do umount "$work/huge" 2>/dev/null && break; sleep 0.5; done
    mountpoint -q "$work/huge" && umount -l "$work/huge"
  fi
  echo "$old_pages" >"$hp"
  rm -rf "$work" /var/run/dpdk/mrc-dc-s-$$ /var/run/dpdk/mrc-dc-c-$$
}
trap cleanup EXIT
trap 'exit 143' INT TERM

# 160 pages (320 MiB) for a primary with -m 256.
echo $((old_pages + 160)) >"$hp"
free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
if [ "$free" -lt 160 ]; then
  echo "skipped: the kernel gave only $free free hugepages of the 160 asked for"
  exit 77
fi
mkdir "$work/huge"
mount -t hugetlbfs -o pagesize=2M nodev "$work/huge"
mounted=1

oob="127.0.0.1:$((20000 + $$ % 20000))"
"$gen" -m 256 --huge-dir "$work/huge" --no-pci --file-prefix "mrc-dc-s-$$" --lcores 0@1,1@0 \
  --vdev=net_memif0,role=server,socket="$work/m0.sock" -- --role server --oob "$oob" \
  --idle sleep --timeout 30 --stats-period 0 >"$work/server.log" 2>&1 &
pids+=($!)
"$gen" --no-huge -m 256 --no-shconf --no-pci --file-prefix "mrc-dc-c-$$" --lcores 0@0,1@1 \
  --vdev=net_memif0,role=client,socket="$work/m0.sock" -- --role client --oob "$oob" \
  --idle sleep --timeout 30 --stats-period 0 --mode write_imm --verify --qps 2 --rate-gbps 0.2 \
  --duration 20 >"$work/client.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
  grep -q "client connected" "$work/server.log" && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "the server ended early"; exit 1; }
  sleep 0.1
done
grep -q "client connected" "$work/server.log" || { echo "no client after 30 s"; exit 1; }
# A secondary process maps the primary's memory at the same addresses;
# address-space randomisation makes that fail now and then (a known DPDK
# multi-process limit), so the attach is tried up to three times.
ok=0
for attempt in 1 2 3; do
  if timeout 30 dpdk-dumpcap --file-prefix="mrc-dc-s-$$" -i net_memif0 -c 200 \
      -w "$work/dump.pcapng" >"$work/dumpcap.log" 2>&1; then
    ok=1
    break
  fi
  echo "dpdk-dumpcap attempt $attempt failed:"
  tail -n 5 "$work/dumpcap.log"
done
[ "$ok" -eq 1 ] || { echo "dpdk-dumpcap failed three times"; exit 1; }
for p in "${pids[@]}"; do stop "$p"; wait "$p" 2>/dev/null || true; done
pids=()
# Every frame decodes as MRC: data arriving at the server and its acks.
# (The client was stopped mid-run: its status is not this test's business.)
# Wireshark's defaults, no heuristic first: with EVs from the dynamic port
# range (49152-65535) the MRC port is always the lower one.
tshark -X "lua_script:$lua" -r "$work/dump.pcapng" -T fields -e mrc.opcode -e _ws.malformed \
  2>/dev/null >"$work/ops.txt"
python3 - "$work/ops.txt" <<'PY'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
ops = collections.Counter(r[0] for r in rows)
# dumpcap stops after the burst that reaches its count.
assert len(rows) >= 200, f"{len(rows)} frames in the capture, 200 asked for"
assert not any(r[1] for r in rows), "malformed frames"
assert "" not in ops, f"{ops['']} frames not decoded as MRC"
assert ops["0x02"] > 0 and ops["0x10"] > 0, f"expected data and SACKs, got {dict(ops)}"
print(f"dpdk-dumpcap on a running mrc-gen: {len(rows)} frames, opcodes {dict(ops)}")
PY
