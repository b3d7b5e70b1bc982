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
# Or routed (L3, no bridge, no shared subnet): per plane a router namespace
# <P>-r<p> forwarding between 10.<S>.<p>.0/24 (A: .1, router .254) and
# 10.<S+1>.<p>.0/24 (B: .2, router .254); each host routes the other's
# subnet of a plane through that plane's router (ip route ... via .254).
#
#   netns-planes.sh up PREFIX PLANES [SUBNET]   (SUBNET: second octet, default 77)
#   netns-planes.sh routed PREFIX PLANES [SUBNET]
#   netns-planes.sh down PREFIX
#   netns-planes.sh loss PREFIX PLANE PERCENT   (random drops both ways; 0 removes; either kind)
#   netns-planes.sh cut PREFIX PLANE            (drop everything on the plane)
#   netns-planes.sh heal PREFIX PLANE           (remove the plane's loss and cut)
#   netns-planes.sh mtu PREFIX MTU              (every interface of every plane)
set -euo pipefail

cmd=${1:?usage: netns-planes.sh up|down|loss|cut|heal PREFIX ...}
P=${2:?PREFIX}
[ "${#P}" -le 6 ] || { echo "netns-planes: PREFIX '$P' longer than 6 characters" >&2; exit 2; }

r() { ip netns exec "$P-r" "$@"; }
# The namespace and nftables family that drop a plane's packets: the
# bridge of an "up" network, the plane's router of a "routed" one.
plane_filter() {  # PLANE -> sets fns, fam
  if ip netns list | grep -qw "$P-r$1"; then fns=$P-r$1 fam=inet; else fns=$P-r fam=bridge; fi
}

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
routed)
  planes=${3:?PLANES}
  s=${4:-77}
  "$0" down "$P" 2>/dev/null || true
  for n in a b; do
    ip netns add "$P-$n"
    ip -n "$P-$n" link set lo up
  done
  for ((p = 0; p < planes; p++)); do
    rt=$P-r$p
    ip netns add "$rt"
    ip -n "$rt" link set lo up
    ip netns exec "$rt" sysctl -qw net.ipv4.ip_forward=1
    ip link add "${P}a$p" netns "$P-a" type veth peer name "${P}ra$p" netns "$rt"
    ip link add "${P}b$p" netns "$P-b" type veth peer name "${P}rb$p" netns "$rt"
    ip -n "$rt" addr add "10.$s.$p.254/24" dev "${P}ra$p"
    ip -n "$rt" addr add "10.$((s + 1)).$p.254/24" dev "${P}rb$p"
    for side in a b; do
      host=1 mine=$s other=$((s + 1))
      [ "$side" = b ] && host=2 mine=$((s + 1)) other=$s
      ip netns exec "$rt" sysctl -qw "net.ipv6.conf.${P}r$side$p.disable_ipv6=1"
      ip -n "$rt" link set "${P}r$side$p" up
      ip netns exec "$P-$side" sysctl -qw "net.ipv6.conf.${P}$side$p.disable_ipv6=1"
      ip -n "$P-$side" addr add "10.$mine.$p.$host/24" dev "${P}$side$p"
      ip -n "$P-$side" link set "${P}$side$p" up
      ip -n "$P-$side" route add "10.$other.$p.0/24" via "10.$mine.$p.254" dev "${P}$side$p"
    done
    ip netns exec "$rt" nft add table inet mrcnet
    ip netns exec "$rt" nft add chain inet mrcnet planes '{ type filter hook forward priority 0; policy accept; }'
  done
  ;;
down)
  for n in a r b; do ip netns del "$P-$n" 2>/dev/null || true; done
  for n in $(ip netns list | awk '{print $1}' | grep -E "^$P-r[0-9]+$" || true); do
    ip netns del "$n" 2>/dev/null || true
  done
  ;;
loss | cut | heal)
  plane=${3:?PLANE}
  plane_filter "$plane"
  f() { ip netns exec "$fns" "$@"; }
  # Remove the plane's earlier rules (found by their comment).
  f nft -a list chain "$fam" mrcnet planes |
    awk -v c="\"plane$plane\"" '$0 ~ "comment " c { print $NF }' |
    while read -r h; do f nft delete rule "$fam" mrcnet planes handle "$h"; done
  ifs="{ \"${P}ra$plane\", \"${P}rb$plane\" }"
  if [ "$cmd" = loss ] && [ "${4:?PERCENT}" != 0 ]; then
    f nft add rule "$fam" mrcnet planes iifname "$ifs" numgen random mod 100 '<' "$4" drop comment "\"plane$plane\""
  elif [ "$cmd" = cut ]; then
    f nft add rule "$fam" mrcnet planes iifname "$ifs" drop comment "\"plane$plane\""
  fi
  ;;
mtu)
  m=${3:?MTU}
  for ns in a r b $(ip netns list | awk '{print $1}' | sed -n "s/^$P-\(r[0-9]*\)$/\1/p"); do
    ip netns list | grep -qw "$P-$ns" || continue
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
