#!/usr/bin/env bash
# The Wireshark dissector (scripts/wireshark/mrc.lua) against
#  1. a golden capture with one of each MRC packet type (make_capture): every
#     field tshark decodes must be the value lib/wire wrote;
#  2. real traffic: two mrc-gen endpoints through mrc-fabric (loss, a
#     blackholed path and trimming, so acks, NACKs and probes all occur),
#     captured by the fabric: every packet type appears decoded, every SACK
#     and NACK echoes an EV that data was sent on, and tshark reports no
#     malformed packet, no dissector error and no bad IPv4/UDP checksum.
#
#   dissector_test.sh mrc.lua make_capture mrc-gen mrc-fabric
set -euo pipefail
lua=$(realpath "$1")
make_capture=$(realpath "$2")
gen=$(realpath "$3")
fabric=$(realpath "$4")
if ! command -v tshark >/dev/null; then
  echo "tshark is missing (scripts/install-deps.sh installs it)"
  exit 1
fi
work=$(mktemp -d /tmp/mrc-ws-XXXXXX)
pids=()
# shellcheck source=tests/support/procs.sh
source "$(dirname "$0")/../support/procs.sh"
stop() { stop_pid "$1" TERM 5; }
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do stop "$p"; done
  if [ "$rc" -ne 0 ]; then
    print_logs "$work"
  fi
  rm -rf "$work" /var/run/dpdk/mrc-ws-*-$$
}
trap cleanup EXIT
trap 'exit 143' INT TERM

fields=(frame.number mrc.opcode mrc.flags mrc.dst_qpn mrc.psn mrc.ev mrc.msn mrc.msg_offset
        mrc.tx_ts mrc.reth.remote_addr mrc.reth.rkey mrc.reth.length mrc.imm mrc.imm.msg_bytes
        mrc.sack.trigger_psn mrc.sack.offset mrc.ev_echo mrc.sack.bitmap mrc.sack.psn
        mrc.sack.count mrc.ts_echo mrc.rwnd_units mrc.ack.flags mrc.plane_status
        mrc.nack.reason mrc.nack.cum_psn mrc.probe.id mrc.probe.ev mrc.probe.ts mrc.probe.flags
        ip.checksum.status udp.checksum.status _ws.malformed _ws.expert.severity udp.srcport
        mrc.class mrc.dscp mrc.ect ip.src eth.type)
decode() {  # pcap -> tab-separated fields, one line per frame
  local args=()
  for f in "${fields[@]}"; do args+=(-e "$f"); done
  # Wireshark's defaults otherwise, no heuristics first: the EVs are above
  # the MRC port (the default range 49152-65535; the golden ones 40001+).
  tshark -X "lua_script:$lua" \
    -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE \
    -r "$1" -T fields -E separator=/t -E occurrence=a -E aggregator=, "${args[@]}" 2>"$work/tshark.err"
  if grep -qi "lua" "$work/tshark.err"; then cat "$work/tshark.err"; return 1; fi
}

# ---- 1. golden capture ----
"$make_capture" "$work/golden.pcap"
decode "$work/golden.pcap" >"$work/golden.txt"
python3 - "$work/golden.txt" "${fields[@]}" <<'PY'
import sys
path, names = sys.argv[1], sys.argv[2:]
rows = [dict(zip(names, l.rstrip("\n").split("\t"))) for l in open(path)]
def num(v):
    return int(v, 0)
# What make_capture.cc wrote, frame by frame (tshark names -> values).
expect = {
  1: {"mrc.opcode": 0x01, "mrc.flags": 0x05, "mrc.dst_qpn": 0x0a0b0c, "mrc.psn": 100, "mrc.ev": 40001,
      "mrc.msn": 3, "mrc.msg_offset": 0, "mrc.tx_ts": 0x11223344, "mrc.reth.remote_addr": 0x7f0000001000,
      "mrc.reth.rkey": 0xbeef, "mrc.reth.length": 1000},
  2: {"mrc.opcode": 0x02, "mrc.flags": 0x08, "mrc.psn": 101, "mrc.ev": 40002, "mrc.msg_offset": 1000,
      "mrc.reth.remote_addr": 0x7f0000001000 + 1000, "mrc.reth.length": 500, "mrc.imm": 0xcafe,
      "mrc.imm.msg_bytes": 1500},
  3: {"mrc.opcode": 0x01, "mrc.flags": 0xd0, "mrc.psn": 102, "mrc.reth.length": 1400, "mrc.ev": 40003},
  4: {"mrc.opcode": 0x10, "mrc.flags": 0, "mrc.dst_qpn": 0x777, "mrc.psn": 98, "mrc.sack.trigger_psn": 102,
      "mrc.sack.offset": 2, "mrc.ev_echo": 40003, "mrc.sack.bitmap": 5, "mrc.sack.psn": "100,102",
      "mrc.sack.count": 2, "mrc.ts_echo": 0x11223344, "mrc.rwnd_units": 12, "mrc.ack.flags": 0x05,
      "mrc.plane_status": 0x3},
  5: {"mrc.opcode": 0x11, "mrc.psn": 102, "mrc.nack.reason": 0x02, "mrc.ev_echo": 40003,
      "mrc.nack.cum_psn": 99, "mrc.ts_echo": 0x55667788, "mrc.rwnd_units": 7, "mrc.ack.flags": 0,
      "mrc.plane_status": 0xf},
  6: {"mrc.opcode": 0x11, "mrc.psn": 103, "mrc.nack.reason": 0x1a, "mrc.ack.flags": 0x01},
  7: {"mrc.opcode": 0x20, "mrc.dst_qpn": 0x0a0b0c, "mrc.psn": 0, "mrc.probe.id": 0x00020007,
      "mrc.probe.ev": 40005, "mrc.ev": 40005, "mrc.probe.ts": 123456789, "mrc.plane_status": 0x1,
      "mrc.probe.flags": 0x01},
  8: {"mrc.opcode": 0x21, "mrc.dst_qpn": 0x777, "mrc.probe.id": 0x00020007, "mrc.probe.ev": 40005,
      "mrc.probe.ts": 123456789, "mrc.probe.flags": 0x01},
  9: {"mrc.opcode": None},
  10: {"mrc.opcode": 0x01, "mrc.reth.length": 1000},
  11: {"mrc.opcode": 0x11, "mrc.dst_qpn": 0, "mrc.ack.flags": 0x02},
}
# Traffic classes: make_capture's data DSCP 26, control 46, all ECN-capable.
for n in expect:
    if n == 9:
        continue
    data = expect[n]["mrc.opcode"] in (0x01, 0x02)
    expect[n].update({"mrc.class": 0 if data else 1, "mrc.dscp": 26 if data else 46, "mrc.ect": 1})
violations = {10, 11}  # must carry expert-info errors; the others none
bad = []
assert len(rows) == 11, f"{len(rows)} frames decoded, 11 written"
for r in rows:
    n = int(r["frame.number"])
    for k, want in expect[n].items():
        got = r.get(k, "")
        if want is None:
            ok = got == ""
        elif isinstance(want, str):
            ok = got == want
        else:
            ok = got != "" and num(got) == want
        if not ok:
            bad.append(f"frame {n}: {k} = {got!r}, expected {want!r}")
    if r["_ws.malformed"] and n not in violations:  # the dissector's own errors count too
        bad.append(f"frame {n}: malformed")
    sev = [int(s, 0) for s in r["_ws.expert.severity"].split(",") if s]
    flagged = any(s >= 0x00600000 for s in sev)  # warnings and errors (notes are fine: trimmed)
    if flagged != (n in violations):
        bad.append(f"frame {n}: expert info severity {sev}, "
                   f"{'a violation' if n in violations else 'valid'}")
    if r["ip.checksum.status"] != "1" or r["udp.checksum.status"] not in ("1", "3"):
        bad.append(f"frame {n}: checksums ip {r['ip.checksum.status']} udp {r['udp.checksum.status']}")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("golden capture: 11 frames, every field as written (WRITE, WRITE_IMM, trimmed WRITE, SACK, "
      "2 NACKs, reverse PROBE and PROBE_REPLY; non-MRC UDP left alone; a short payload and a NACK to "
      "QPN 0 with a DUPLICATE flag flagged as errors)")
PY

# ---- 2. real traffic through the fabric ----
eal=(--no-huge -m 512 --no-shconf --no-pci)
oob="127.0.0.1:$(free_port)"
"$fabric" "${eal[@]}" --file-prefix "mrc-ws-f-$$" --lcores '0@(0,1)' \
  --vdev=net_memif0,role=server,socket="$work/a0.sock" --vdev=net_memif1,role=server,socket="$work/b0.sock" -- \
  --paths 4 --capture "$work/real.pcap" --stats-period 0 --impair "loss=0.01" --impair "path=2,blackhole" \
  --impair "dir=ab,rate_gbps=0.2,queue_bytes=12000,trim" >"$work/fabric.log" 2>&1 &
pids+=($!)
"$gen" "${eal[@]}" --file-prefix "mrc-ws-s-$$" --lcores 0@1,1@0 \
  --vdev=net_memif0,role=client,socket="$work/b0.sock" -- --role server --oob "$oob" \
  --idle sleep --timeout 30 --stats-period 0 --dscp-control 46 >"$work/server.log" 2>&1 &
pids+=($!)
"$gen" "${eal[@]}" --file-prefix "mrc-ws-c-$$" --lcores 0@0,1@1 \
  --vdev=net_memif0,role=client,socket="$work/a0.sock" -- --role client --oob "$oob" \
  --idle sleep --timeout 30 --stats-period 0 --mode write_imm --verify --qps 8 --msg-bytes 16384 \
  --total-bytes 8388608 --dscp-data 10 --dscp-control 34 >"$work/client.log" 2>&1
# The server ends once the client has told it the result: the traffic is
# over, the fabric can close its capture.
wait_exit "${pids[1]}" 30 || { echo "the server did not end cleanly after the client"; exit 1; }
stop "${pids[0]}"
grep -q "captured" "$work/fabric.log" || { echo "the fabric did not report its capture"; exit 1; }
decode "$work/real.pcap" >"$work/real.txt"
python3 - "$work/real.txt" "${fields[@]}" <<'PY'
import collections, sys
path, names = sys.argv[1], sys.argv[2:]
rows = [dict(zip(names, l.rstrip("\n").split("\t"))) for l in open(path)]
ops = collections.Counter()
data_evs, echoes, bad = set(), [], []
arp = 0
for r in rows:
    n = r["frame.number"]
    if r["eth.type"] == "0x0806":
        arp += 1  # each port announces its address when it starts (not MRC)
        continue
    if not r["mrc.opcode"]:
        bad.append(f"frame {n}: not decoded as MRC")
        continue
    op = int(r["mrc.opcode"], 0)
    ops[op] += 1
    if op in (1, 2):
        data_evs.add(int(r["udp.srcport"]))
        if int(r["mrc.ev"]) != int(r["udp.srcport"]):
            bad.append(f"frame {n}: EV {r['mrc.ev']} is not the UDP source port")
    if op in (0x10, 0x11):
        echoes.append(int(r["mrc.ev_echo"]))
    # Each end's classes: the client's data 10 and control 34, the
    # server's control 46; every packet ECN-capable.
    want = 10 if op in (1, 2) else (34 if r["ip.src"] == "10.10.0.1" else 46)
    if r["mrc.dscp"] != str(want) or r["mrc.ect"] != "1" or r["mrc.class"] != ("0" if op in (1, 2) else "1"):
        bad.append(f"frame {n}: opcode {op:#x} from {r['ip.src']}: class {r['mrc.class']} "
                   f"DSCP {r['mrc.dscp']} ECT {r['mrc.ect']}, expected DSCP {want}")
    if r["_ws.malformed"]:
        bad.append(f"frame {n}: malformed")
    sev = [int(s, 0) for s in r["_ws.expert.severity"].split(",") if s]
    if any(s >= 0x00600000 for s in sev):
        bad.append(f"frame {n}: expert info severity {sev}")
    if r["ip.checksum.status"] != "1" or r["udp.checksum.status"] not in ("1", "3"):
        bad.append(f"frame {n}: checksums ip {r['ip.checksum.status']} udp {r['udp.checksum.status']}")
stray = [e for e in echoes if e not in data_evs]
if stray:
    bad.append(f"{len(stray)} acks echo an EV no data was sent on, e.g. {stray[:5]}")
if arp > 2:
    bad.append(f"{arp} ARP frames: only the two ports' announcements were expected")
names_ = {1: "WRITE", 2: "WRITE_IMM", 0x10: "SACK", 0x11: "NACK", 0x20: "PROBE", 0x21: "PROBE_REPLY"}
for op in (2, 0x10, 0x11, 0x20, 0x21):
    if ops[op] == 0:
        bad.append(f"no {names_[op]} in the capture")
if bad:
    print("\n".join(bad[:20]))
    sys.exit(1)
print(f"real capture: {len(rows)} frames ({arp} ARP announcements), " +
      ", ".join(f"{names_[o]} {c}" for o, c in sorted(ops.items())) +
      f"; {len(echoes)} acks echo data EVs; every packet in its class (DSCP data 10, control "
      f"34 / 46); no malformed frames, no bad checksums")
PY
