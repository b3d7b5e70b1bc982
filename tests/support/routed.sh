# Sourced by the routed end-to-end tests (after procs.sh): a verified
# bulk_copy between two mrcd, and a router that changes its MAC in the
# middle of one. Each needs $apps, $work, the pids array and fail().
#
# bulk_copy_start TAG PEER_IP SERVICE BYTES
#   Starts a bulk_copy of BYTES from daemon A ($work/a.sock) to daemon B
#   ($work/b.sock) on SERVICE (logs $work/copy-TAG-rx.log and -tx.log);
#   sets copy_rx and copy_tx (also in pids).
# bulk_copy_check TAG BYTES
#   Waits for both ends; the receiver must have verified all BYTES.
bulk_copy_start() {
  local tag=$1 peer=$2 svc=$3 bytes=$4
  rm -f "$work/copy-$tag.keys"
  "$apps/bulk_copy" --socket "$work/b.sock" --service "$svc" --bytes "$bytes" \
    --keys "$work/copy-$tag.keys" >"$work/copy-$tag-rx.log" 2>&1 &
  copy_rx=$!
  pids+=("$copy_rx")
  "$apps/bulk_copy" --socket "$work/a.sock" --service "$svc" --bytes "$bytes" \
    --keys "$work/copy-$tag.keys" --peer "$peer" >"$work/copy-$tag-tx.log" 2>&1 &
  copy_tx=$!
  pids+=("$copy_tx")
}
bulk_copy_check() {
  local tag=$1 bytes=$2
  wait_exit "$copy_tx" 180 || fail "bulk_copy sender failed: $(tail -3 "$work/copy-$tag-tx.log")"
  wait_exit "$copy_rx" 30 || fail "bulk_copy receiver failed: $(tail -3 "$work/copy-$tag-rx.log")"
  cat "$work/copy-$tag-rx.log"
  grep -q "$bytes bytes, 0 wrong" "$work/copy-$tag-rx.log" ||
    fail "copy: $(tail -2 "$work/copy-$tag-rx.log")"
}
#
# gateway_moves_mid_transfer ROUTER_NS IN_IFACE OUT_IFACE GW_IP NEW_MAC PEER_IP SERVICE BYTES
#   Starts a bulk_copy of BYTES from daemon A ($work/a.sock) to daemon B
#   ($work/b.sock) on SERVICE; once the router (namespace ROUTER_NS) has
#   forwarded 2,000 frames of it out of OUT_IFACE, gives IN_IFACE (A's side,
#   address GW_IP) the MAC NEW_MAC and announces it (gratuitous ARP). The
#   copy must complete verified, daemon A must have moved its QPs
#   (paths_moved) with no path unresolved, and the router must keep
#   forwarding A's frames after the change.
gateway_moves_mid_transfer() {
  local ns=$1 in_if=$2 out_if=$3 gw=$4 mac=$5 peer=$6 svc=$7 bytes=$8
  local start moved_at after
  forwarded() {
    ip -n "$ns" -s -j link show "$out_if" |
      python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['tx']['packets'])"
  }
  bulk_copy_start moved "$peer" "$svc" "$bytes"
  start=$(forwarded)
  for _ in $(seq 300); do [ $(( $(forwarded) - start )) -gt 2000 ] && break; sleep 0.05; done
  kill -0 "$copy_tx" 2>/dev/null ||
    fail "the transfer ended before the router changed (it forwarded $(( $(forwarded) - start )) frames of it on $out_if; A's status: $("$apps/mrcctl" --socket "$work/a.sock" --json status 2>&1 | head -c 2000))"
  ip -n "$ns" link set "$in_if" address "$mac"
  ip netns exec "$ns" arping -q -U -c 2 -w 2 -I "$in_if" "$gw" || true
  moved_at=$(forwarded)
  kill -0 "$copy_tx" 2>/dev/null ||
    fail "the transfer ended before the router announced its new MAC"
  bulk_copy_check moved "$bytes"
  after=$(forwarded)
  echo "the router forwarded $((after - moved_at)) frames towards B after its MAC changed"
  "$apps/mrcctl" --socket "$work/a.sock" --json status >"$work/status-moved.json"
  python3 - "$work/status-moved.json" "$((after - moved_at))" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["counters"]
print("paths_moved", c["paths_moved"], "paths_unresolved", c["paths_unresolved"])
assert c["paths_moved"] >= 1, c
assert c["paths_unresolved"] == 0, c
assert int(sys.argv[2]) > 1000, "the plane stopped carrying A's frames after the change"
PY
}
