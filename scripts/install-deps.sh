#!/usr/bin/env bash
# Installs everything the build, the tests and the demo need, from Debian 12
# packages. Idempotent, and quick when everything is already there.
set -euo pipefail

packages=(
  build-essential pkg-config meson ninja-build python3-pyelftools
  libdpdk-dev dpdk dpdk-dev libbpf-dev libelf-dev libpcap-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  clang libclang-rt-14-dev clang-format
  iproute2 procps
  tshark
  # AF_XDP test and bench: kernel traffic beside MRC, loss, MPTCP
  iperf3 nftables mptcpize iputils-ping iputils-arping
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark's package asks whether non-root users may capture: no.
echo "wireshark-common wireshark-common/install-setuid boolean false" |
  "${sudo[@]}" debconf-set-selections 2>/dev/null || true
# iperf3's package asks whether to start a system-wide server: no.
echo "iperf3 iperf3/start_daemon boolean false" |
  "${sudo[@]}" debconf-set-selections 2>/dev/null || true
if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
