#!/usr/bin/env bash
# scripts/check-skips.py on made-up meson logs: a listed skip passes, an
# unlisted whole-test skip and an unlisted GoogleTest skip each fail it.
set -euo pipefail
check=${1:?check-skips.py}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/meson-logs" "$tmp/build-san/meson-logs"
logs=$tmp/build/meson-logs
cat >"$tmp/allowed" <<'LIST'
# comment
dumpcap      build  a reason
mrcd/Mrcd.Socket*  *  another reason
LIST
write_logs() {  # <json lines> <skipped gtest case or "">
  printf '%s\n' "$1" >"$logs/testlog.json"
  local cases='<testcase name="Runs" status="run" classname="Mrcd"/>'
  [ -n "$2" ] && cases+="<testcase name=\"$2\" status=\"run\" result=\"skipped\" classname=\"Mrcd\"><skipped message=\"f.cc:1&#x0A;why\"/></testcase>"
  cat >"$logs/testlog.junit.xml" <<XML
<?xml version="1.0"?>
<testsuites><testsuite name="mrc.mrc:dpdk / mrcd.Mrcd" tests="2">$cases</testsuite>
<testsuite name="mrc" tests="1"><testcase name="mrc:dpdk / dumpcap" classname="mrc"><skipped/></testcase></testsuite></testsuites>
XML
}
expect() {  # <want rc> <what>
  local rc=0
  "$check" "$tmp/build" "$tmp/allowed" >"$tmp/out" || rc=$?
  if [ "$rc" != "$1" ]; then
    echo "FAIL: $2: exit $rc, want $1"; cat "$tmp/out"; exit 1
  fi
  echo "ok: $2"
}
skip='{"name": "mrc:dpdk / dumpcap", "result": "SKIP", "stdout": "skipped: because"}'
other='{"name": "mrc:dpdk / tap_e2e", "result": "SKIP", "stdout": "skipped: needs root"}'
okline='{"name": "mrc:unit / core", "result": "OK", "stdout": ""}'
write_logs "$okline" "";                   expect 0 "no skips"
write_logs "$skip" "SocketPermissions";    expect 0 "listed skips"
grep -q "skip allowed:     dumpcap" "$tmp/out" || { echo "FAIL: skip not printed"; exit 1; }
write_logs "$other" "";                    expect 1 "an unlisted script skip"
grep -q "NOT ALLOWED: tap_e2e: skipped: needs root" "$tmp/out" || { echo "FAIL: reason not printed"; exit 1; }
write_logs "$okline" "OtherCase";          expect 1 "an unlisted GoogleTest skip"
grep -q "NOT ALLOWED: mrcd/Mrcd.OtherCase: why" "$tmp/out" || { echo "FAIL: case not named"; exit 1; }
logs=$tmp/build-san/meson-logs
write_logs "$skip" ""
"$check" "$tmp/build-san" "$tmp/allowed" >"$tmp/out" && { echo "FAIL: a skip listed for another pass passed"; exit 1; }
echo "ok: a skip listed only for another pass fails"
