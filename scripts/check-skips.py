#!/usr/bin/env python3
"""Fails when a test skipped that tests/allowed-skips.txt does not allow.

meson counts a script's exit 77 and a GoogleTest GTEST_SKIP() as passes, so
a green run can hide a suite that never ran. This reads what meson recorded
(meson-logs/testlog.json for whole tests, testlog.junit.xml for GoogleTest
cases), prints every skip with its reason, and exits 1 on any skip that is
not on the list for this pass.

Usage: check-skips.py <build dir> <allowed-skips file> [<log base, default testlog>]
"""
import fnmatch
import json
import os
import sys
import xml.etree.ElementTree as ET


def load_allowed(path, pass_name):
    allowed = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                sys.exit(f"{path}:{n}: want '<test> <pass> <reason>', got: {line}")
            test, pas, reason = parts
            if pas == "*" or pas == pass_name:
                allowed.append((test, reason))
    return allowed


def short_name(full):
    # "mrc:unit / core" -> "core"
    return full.split(" / ", 1)[-1]


def skips(build, logbase):
    found = []  # (id, message)
    logs = os.path.join(build, "meson-logs")
    with open(os.path.join(logs, logbase + ".json"), encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            if t.get("result") == "SKIP":
                out = (t.get("stdout") or "").strip().splitlines()
                found.append((short_name(t["name"]), out[-1] if out else ""))
    junit = os.path.join(logs, logbase + ".junit.xml")
    if os.path.exists(junit):
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            name = suite.get("name", "")
            if name.count(".") < 2:
                continue  # the whole-test entries: covered by testlog.json
            test, gsuite = name.split(".", 1)[1].rsplit(".", 1)
            for case in suite.iter("testcase"):
                s = case.find("skipped")
                if s is not None:
                    msg = (s.get("message") or s.text or "").strip().splitlines()
                    found.append((f"{short_name(test)}/{gsuite}.{case.get('name')}",
                                  msg[-1] if msg else ""))
    return found


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    build, listfile = sys.argv[1], sys.argv[2]
    logbase = sys.argv[3] if len(sys.argv) == 4 else "testlog"
    pass_name = os.path.basename(os.path.normpath(build))
    allowed = load_allowed(listfile, pass_name)
    bad = 0
    found = skips(build, logbase)
    for test, msg in found:
        reason = next((r for pat, r in allowed if fnmatch.fnmatchcase(test, pat)), None)
        if reason is None:
            bad += 1
            print(f"skip NOT ALLOWED: {test}: {msg}")
        else:
            print(f"skip allowed:     {test}: {msg} (listed: {reason})")
    print(f"skips in {pass_name}: {len(found)}, not allowed: {bad} (list: {listfile})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
