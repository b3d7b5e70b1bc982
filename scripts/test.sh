#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian 12 machine: installs the
# dependencies, builds, runs `meson test`. Exits non-zero on any failure.
#
# Two passes:
#   1. build/      g++, debugoptimized: every suite (unit, simulation, DPDK
#                  virtual devices, end-to-end); skips nothing that can run.
#   2. build-san/  clang with AddressSanitizer + UndefinedBehaviorSanitizer:
#                  the same suites again, plus the libFuzzer targets.
# A skipped test (exit 77, GTEST_SKIP) fails the run unless
# tests/allowed-skips.txt lists it with its reason; every skip is printed.
# Environment: MRC_SANITIZE=0 skips pass 2; MRC_TEST_ARGS adds meson test
# arguments (e.g. "--suite unit").
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

run_pass() {
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@"
  fi
  meson compile -C "$dir"
  # shellcheck disable=SC2086
  meson test -C "$dir" --print-errorlogs ${MRC_TEST_ARGS:-}
  # meson counts skips as passes: only the listed ones may happen.
  scripts/check-skips.py "$dir" tests/allowed-skips.txt
}

start=$(date +%s)
echo "== pass 1: g++ $(g++ -dumpfullversion), debugoptimized"
run_pass build --buildtype=debugoptimized

if [ "${MRC_SANITIZE:-1}" = 1 ]; then
  echo "== pass 2: clang, address + undefined sanitizers"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
  # Leaks inside DPDK's net_af_xdp (libbpf / libxdp objects it never frees).
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
  CC=clang CXX=clang++ run_pass build-san --buildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbenchmarks=false
fi
echo "== all tests passed in $(( $(date +%s) - start )) s"
