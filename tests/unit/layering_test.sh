#!/usr/bin/env bash
# The layering, checked: every folder of lib/ and drivers/ includes only the
# folders below it (lib/meson.build draws the picture), and DPDK headers
# appear only in drivers/, lib/dpdk/ and the apps built on them.
# Usage: layering_test.sh <source root>
set -euo pipefail
root=${1:?source root}
cd "$root"

# folder -> the include prefixes (first path component) it may use
declare -A allowed=(
  [lib/common]="common"
  [lib/wire]="common wire"
  [lib/core]="common wire core"
  [lib/sim]="common wire core sim"
  [lib/fabric]="common wire fabric"
  [lib/client]="common client mrc"
  [lib/dpdk]="common wire core port xdp dpdk"
  [drivers/xdp]="common xdp"
  [drivers/port]="common wire port xdp"
  [drivers/kernel]="common wire kernel"
)
# folders that may include DPDK (<rte_*.h>)
dpdk_ok='^(drivers/(port|xdp)/|lib/dpdk/|app/(mrc-gen|mrc-fabric|mrc-ports|mrcd|common)/)'

fail=0
for dir in "${!allowed[@]}"; do
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -n 's/.*#include "\([^/"]*\)\/.*/\1/p' <<<"$line")
    [ -n "$inc" ] || continue
    if ! grep -qw -- "$inc" <<<"${allowed[$dir]}"; then
      echo "layering: $file includes $inc/ (allowed for $dir: ${allowed[$dir]})"
      fail=1
    fi
  done < <(grep -rn '#include "[^"]*/' "$dir" --include='*.h' --include='*.cc' --include='*.c' || true)
done

while IFS= read -r line; do
  file=${line%%:*}
  if ! [[ $file =~ $dpdk_ok ]]; then
    echo "layering: $file includes a DPDK header: $line"
    fail=1
  fi
done < <(grep -rnE '#include <(rte_|ethdev_)' lib drivers app --include='*.h' --include='*.cc' || true)

if [ "$fail" = 0 ]; then
  echo "layering: ${#allowed[@]} folders checked, no include crosses a layer"
fi
exit "$fail"
