#!/bin/bash
# Connect the lab's two "GB10 hosts" to their direct link, factory-floor-link
# (lab/network.sh makes it), at the fixed addresses their inventory names
# (inventory/lab/host_vars: vllm_link_address): spark-a 10.89.8.10, spark-b 10.89.8.11.
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
for host in spark-a spark-b; do
  address=$(sed -n 's/^vllm_link_address: *//p' "$here/../inventory/lab/host_vars/$host.yml")
  [ -n "$address" ] || { echo "lab/link.sh: inventory/lab/host_vars/$host.yml has no vllm_link_address" >&2; exit 1; }
  podman container exists "$host" || { echo "lab/link.sh: no lab host $host (make lab-up)" >&2; exit 1; }
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
