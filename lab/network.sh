#!/bin/bash
# The lab's own podman networks: factory-floor-lab, the LAN, with the subnet the lab
# hosts' fixed addresses are in (extensions/molecule/config.yml, inventory/lab/host_vars);
# and factory-floor-link, the two GB10 hosts' direct link (lab/link.sh connects them).
# podman gives addresses of its own only from LAB_IP_RANGE, so the rest of the subnet
# (a floating address, say) is never handed to a container. A network of that name
# on another subnet (an older lab's) is removed first, with the lab hosts on it:
# molecule creates them again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="$here/containers.conf"
NET=factory-floor-lab
SUBNET=10.89.7.0/24
LAB_IP_RANGE=10.89.7.128/26
LINK_NET=factory-floor-link
LINK_SUBNET=10.89.8.0/24
LINK_MTU=9000

grep -q "${SUBNET%.0/24}\." "$here/../extensions/molecule/config.yml" ||
  { echo "lab/network.sh: extensions/molecule/config.yml has no address in $SUBNET" >&2; exit 1; }
grep -q "^vllm_link_address: ${LINK_SUBNET%.0/24}\." "$here/../inventory/lab/host_vars/spark-a.yml" ||
  { echo "lab/network.sh: inventory/lab/host_vars/spark-a.yml has no vllm_link_address in $LINK_SUBNET" >&2; exit 1; }

lan_network() {
  if podman network exists "$NET"; then
    have=$(podman network inspect --format '{{ range .Subnets }}{{ .Subnet }} {{ end }}' "$NET")
    if [ "${have% }" = "$SUBNET" ]; then
      return 0
    fi
    echo "lab network $NET is on ${have:-no subnet}, not $SUBNET: removing it and its containers"
    for c in $(podman ps -a --filter "network=$NET" --format '{{ .Names }}'); do
      podman rm -f -t 10 "$c" >/dev/null
    done
    podman network rm "$NET" >/dev/null
  fi
  podman network create --subnet "$SUBNET" --ip-range "$LAB_IP_RANGE" "$NET" >/dev/null
  echo "lab network $NET created ($SUBNET, podman's own addresses from $LAB_IP_RANGE)"
}

# The GB10 hosts' direct link (their ConnectX on a real site): a network of its own that
# only spark-a and spark-b join (lab/link.sh, fixed addresses), with its own MTU as the
# ConnectX link has (9000), internal (no way out, no default route through it) and
# without DNS (names keep resolving to the LAN addresses). One that differs in subnet or
# MTU is made again, its hosts disconnected first (lab/link.sh connects them again).
link_network() {
  if podman network exists "$LINK_NET"; then
    have=$(podman network inspect --format '{{ range .Subnets }}{{ .Subnet }}{{ end }} {{ index .Options "mtu" }}' "$LINK_NET")
    if [ "$have" = "$LINK_SUBNET $LINK_MTU" ]; then
      return 0
    fi
    echo "lab link $LINK_NET is '$have', not '$LINK_SUBNET $LINK_MTU': making it again"
    for c in $(podman ps -a --filter "network=$LINK_NET" --format '{{ .Names }}'); do
      podman network disconnect -f "$LINK_NET" "$c" >/dev/null
    done
    podman network rm "$LINK_NET" >/dev/null
  fi
  podman network create --subnet "$LINK_SUBNET" --internal --disable-dns --opt "mtu=$LINK_MTU" "$LINK_NET" >/dev/null
  echo "lab link $LINK_NET created ($LINK_SUBNET, MTU $LINK_MTU, internal; lab/link.sh connects spark-a and spark-b)"
}

lan_network
link_network
