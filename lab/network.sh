#!/bin/bash
# The lab's own podman network, factory-floor-lab, with the subnet the lab hosts'
# fixed addresses are in (extensions/molecule/config.yml, inventory/lab/host_vars).
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

grep -q "${SUBNET%.0/24}\." "$here/../extensions/molecule/config.yml" ||
  { echo "lab/network.sh: extensions/molecule/config.yml has no address in $SUBNET" >&2; exit 1; }

if podman network exists "$NET"; then
  have=$(podman network inspect --format '{{ range .Subnets }}{{ .Subnet }} {{ end }}' "$NET")
  if [ "${have% }" = "$SUBNET" ]; then
    exit 0
  fi
  echo "lab network $NET is on ${have:-no subnet}, not $SUBNET: removing it and its containers"
  for c in $(podman ps -a --filter "network=$NET" --format '{{ .Names }}'); do
    podman rm -f -t 10 "$c" >/dev/null
  done
  podman network rm "$NET" >/dev/null
fi
podman network create --subnet "$SUBNET" --ip-range "$LAB_IP_RANGE" "$NET" >/dev/null
echo "lab network $NET created ($SUBNET, podman's own addresses from $LAB_IP_RANGE)"
