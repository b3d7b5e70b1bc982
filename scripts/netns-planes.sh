#!/usr/bin/env bash
# A two-host test network of N planes in network namespaces, for AF_XDP
# tests and benchmarks. Root only; it creates and removes only its own
# namespaces and interfaces (all named after PREFIX).
#
#   <P>-a  host A: interfaces <P>a0..  addresses 10.<S>.<p>.1/24
#   <P>-r  the "switch": per plane a bridge <P>br<p> joining <P>ra<p> and
#          <P>rb<p>; loss and cuts are nftables rules here (bridge family),
#          so they hit AF_XDP and kernel traffic alike
#   <P>-b  host B: interfaces <P>b0..  addresses 10.<S>.<p>.2/24
#
#   netns-planes.sh up PREFIX PLANES [SUBNET]   (SUBNET: second octet, default 77)
#   netns-planes.sh down PREFIX
#   netns-planes.sh loss PREFIX PLANE PERCENT   (random drops both ways; 0 removes)
#   netns-planes.sh cut PREFIX PLANE            (drop everything on the plane)
#   netns-planes.sh heal PREFIX PLANE           (remove the plane's loss and cut)
#   netns-planes.sh mtu PREFIX MTU              (every interface of every plane)
set -euo pipefail

cmd=${1:?usage: netns-planes.sh up|down|loss|cut|heal PREFIX ...}
P=${2:?PREFIX}
[ "${#P}" -le 6 ] || { echo "netns-planes: PREFIX '$P' longer than 6 characters" >&2; exit 2; }

r() { ip netns exec "$P-r" "$@"; }

case "$cmd" in
up)
  planes=${3:?PLANES}
  subnet=${4:-77}
  "$0" down "$P" 2>/dev/null || true
  for n in a r b; do
    ip netns add "$P-$n"
    ip -n "$P-$n" link set lo up
  done
  for ((p = 0; p < planes; p++)); do
    ip link add "${P}a$p" netns "$P-a" type veth peer name "${P}ra$p" netns "$P-r"
    ip link add "${P}b$p" netns "$P-b" type veth peer name "${P}rb$p" netns "$P-r"
    ip -n "$P-r" link add "${P}br$p" type bridge
    for i in "${P}ra$p" "${P}rb$p"; do
      ip -n "$P-r" link set "$i" master "${P}br$p"
      ip -n "$P-r" link set "$i" up
    done
    ip -n "$P-r" link set "${P}br$p" up
    for side in a b; do
      host=1; [ "$side" = b ] && host=2
      ip netns exec "$P-$side" sysctl -qw "net.ipv6.conf.${P}$side$p.disable_ipv6=1"
      ip -n "$P-$side" addr add "10.$subnet.$p.$host/24" dev "${P}$side$p"
      ip -n "$P-$side" link set "${P}$side$p" up
    done
  done
  r nft add table bridge mrcnet
  r nft add chain bridge mrcnet planes '{ type filter hook forward priority 0; policy accept; }'
  ;;
down)
  for n in a r b; do ip netns del "$P-$n" 2>/dev/null || true; done
  ;;
loss | cut | heal)
  plane=${3:?PLANE}
  # Remove the plane's earlier rules (found by their comment).
  r nft -a list chain bridge mrcnet planes |
    awk -v c="\"plane$plane\"" '$0 ~ "comment " c { print $NF }' |
    while read -r h; do r nft delete rule bridge mrcnet planes handle "$h"; done
  ifs="{ \"${P}ra$plane\", \"${P}rb$plane\" }"
  if [ "$cmd" = loss ] && [ "${4:?PERCENT}" != 0 ]; then
    r nft add rule bridge mrcnet planes iifname "$ifs" numgen random mod 100 '<' "$4" drop comment "\"plane$plane\""
  elif [ "$cmd" = cut ]; then
    r nft add rule bridge mrcnet planes iifname "$ifs" drop comment "\"plane$plane\""
  fi
  ;;
mtu)
  m=${3:?MTU}
  for ns in a r b; do
    for i in $(ip -n "$P-$ns" -o link show type veth | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p'); do
      ip -n "$P-$ns" link set "$i" mtu "$m"
    done
  done
  ;;
*)
  echo "netns-planes: unknown command '$cmd'" >&2
  exit 2
  ;;
esac
