#!/bin/bash
# Connect the lab's "GB10 hosts" to their direct link, factory-floor-link
# (lab/network.sh makes it), at the fixed addresses their inventory names
# (vllm_link_address): spark-a 10.89.8.10, spark-b 10.89.8.11 (inventory/lab/host_vars),
# and spark-c 10.89.8.12 (inventory/lab-groups/host_vars) when the lab has a third
# engine host (make lab-up LAB_ENGINES=3; lab/engines.py). LAB_ENGINES=3 makes spark-c
# required; otherwise it joins when it exists.
# It is their second interface, eth1 (the LAN is eth0), with the link's MTU; the gateway
# never joins it. Idempotent: a host already on it at its address is left alone. Run
# after the lab hosts are created (make lab-up; the default scenario's prepare). A
# connection survives `podman restart`; a host created again needs this again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="$here/containers.conf"
NET=factory-floor-link
IFACE=eth1

podman network exists "$NET" || { echo "lab/link.sh: no network $NET: run lab/network.sh first" >&2; exit 1; }
# spark-a and spark-b always; spark-c with LAB_ENGINES=3, or when it exists. Each one's
# host_vars: inventory/lab's, spark-c's inventory/lab-groups' (the inventory that names it).
hosts=(spark-a spark-b)
if [ "${LAB_ENGINES:-2}" -ge 3 ] || podman container exists spark-c; then hosts+=(spark-c); fi
for host in "${hosts[@]}"; do
  vars=inventory/lab/host_vars/$host.yml
  [ "$host" != spark-c ] || vars=inventory/lab-groups/host_vars/$host.yml
  podman container exists "$host" ||
    { echo "lab/link.sh: no lab host $host (make lab-up${LAB_ENGINES:+ LAB_ENGINES=$LAB_ENGINES})" >&2; exit 1; }
  address=$(sed -n 's/^vllm_link_address: *//p' "$here/../$vars")
  [ -n "$address" ] || { echo "lab/link.sh: $vars has no vllm_link_address" >&2; exit 1; }
  have=$(podman container inspect --format "{{ with index .NetworkSettings.Networks \"$NET\" }}{{ .IPAddress }}{{ end }}" "$host")
  if [ "$have" != "$address" ]; then
    [ -z "$have" ] || podman network disconnect "$NET" "$host" >/dev/null
    podman network connect --ip "$address" "$NET" "$host"
    echo "lab/link.sh: $host joined $NET at $address"
  fi
  # The roles name the interface (vllm_link_interface): it must be the one holding the address.
  holder=$(podman exec "$host" ip -o -4 addr show to "$address/32" | awk '{print $2}')
  if [ "$holder" != "$IFACE" ]; then
    echo "lab/link.sh: on $host $address is on '${holder:-no interface}', not $IFACE (inventory/lab: vllm_link_interface)" >&2
    exit 1
  fi
done
