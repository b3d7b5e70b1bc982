#!/usr/bin/env bash
# Runs one libFuzzer target for a short while over its checked-in seed
# corpus. New inputs go to a scratch directory, never into the source tree;
# a crash leaves its reproducer under $scratch and fails the test.
#   run.sh <fuzzer binary> <seed corpus dir> <seconds>
set -euo pipefail
bin=$(realpath "$1") corpus=$(realpath "$2") secs=$3
scratch=$(mktemp -d /tmp/mrc-fuzz-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
"$bin" "$scratch" "$corpus" -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 \
  -artifact_prefix="$scratch/" 2>&1 | tail -n 25
