#!/bin/bash
# The lab's own podman networks: factory-floor-lab, the LAN, with the subnet the lab
# hosts' fixed addresses are in (extensions/molecule/config.yml, inventory/lab/host_vars);
# and factory-floor-link, the GB10 hosts' direct link (lab/link.sh connects them).
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

# Network $1 is kept when `podman network inspect --format "$2"` prints "$3"; otherwise it is
# removed (each container on it handed to "$4 <network> <container>" first) and created again
# with the remaining arguments.
ensure_network() {
  local name=$1 format=$2 want=$3 release=$4 have c
  shift 4
  if podman network exists "$name"; then
    have=$(podman network inspect --format "$format" "$name")
    if [ "$have" = "$want" ]; then
      return 0
    fi
    echo "lab network $name is '$have', not '$want': making it again"
    for c in $(podman ps -a --filter "network=$name" --format '{{ .Names }}'); do
      "$release" "$name" "$c"
    done
    podman network rm "$name" >/dev/null
  fi
  podman network create "$@" "$name" >/dev/null
  echo "lab network $name created ($*)"
}
remove_container() { podman rm -f -t 10 "$2" >/dev/null; }
disconnect_container() { podman network disconnect -f "$1" "$2" >/dev/null; }

# The LAN; its hosts are removed with it (molecule creates them again).
ensure_network "$NET" '{{ range .Subnets }}{{ .Subnet }} {{ end }}' "$SUBNET " remove_container \
  --subnet "$SUBNET" --ip-range "$LAB_IP_RANGE"

# The GB10 hosts' direct link (their ConnectX on a real site): a network of its own that
# only the engine hosts join (lab/link.sh, fixed addresses; spark-c too with LAB_ENGINES=3), with its own MTU as the
# ConnectX link has (9000), internal (no way out, no default route through it) and
# without DNS (names keep resolving to the LAN addresses). One that differs in subnet or
# MTU is made again, its hosts disconnected first (lab/link.sh connects them again).
ensure_network "$LINK_NET" '{{ range .Subnets }}{{ .Subnet }}{{ end }} {{ index .Options "mtu" }}' \
  "$LINK_SUBNET $LINK_MTU" disconnect_container \
  --subnet "$LINK_SUBNET" --internal --disable-dns --opt "mtu=$LINK_MTU"
