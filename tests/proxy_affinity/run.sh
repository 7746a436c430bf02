#!/usr/bin/env bash
# The affinity balancer for real, without the lab: the nginx_proxy role applied by
# Ansible to one container of the lab image (no network, loopback only), two stand-in
# engines on its loopback (standin.py), and check.py inside it sending requests
# through nginx and asserting where each landed. Then the role again with
# nginx_proxy_balance=least_conn: no Lua left, least_conn as before. In between, the
# proxy scenario's client (extensions/molecule/resources/affinity_client.py) with the
# verify's assertions, the proxy scenario's own affinity plays
# (extensions/molecule/proxy/verify_affinity.yml) on stand-ins named spark-a and spark-b,
# and with AFF_BENCH=1 benchmarks/affinity.py, small, on stand-ins that model a prefix
# cache (the mechanism, not vLLM's numbers).
#
#   make venv collection && bash tests/proxy_affinity/run.sh
#
# Needs podman and the lab image (make lab-image). Takes 10-15 minutes (5 more with
# AFF_BENCH=1) on a busy 2-core machine. Prints check.py's JSON results and exits
# non-zero on the first failed check. Leaves nothing behind: the container is removed
# at the end (also on failure).
# AFF_IMAGE (default localhost/factory-floor-lab:latest), AFF_CONTAINER (aff-check),
# AFF_OUT (a directory for the results; default a temporary one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/lab/containers.conf}
export ANSIBLE_COLLECTIONS_PATH=$root/build/collections
export ANSIBLE_CONFIG=$root/ansible.cfg
export PATH=$root/.venv/bin:$PATH
image=${AFF_IMAGE:-localhost/factory-floor-lab:latest}
export AFF_CONTAINER=${AFF_CONTAINER:-aff-check}
out=${AFF_OUT:-$(mktemp -d)}
mkdir -p "$out"
key=affinity-check-key   # the stand-ins' key, from inventory.yml

stop() { podman rm -f -t 5 "$AFF_CONTAINER" >/dev/null 2>&1 || true; }
trap stop EXIT
stop
podman run -d --name "$AFF_CONTAINER" --network none --systemd=always "$image" /sbin/init >/dev/null
for _ in $(seq 60); do
  state=$(podman exec "$AFF_CONTAINER" systemctl is-system-running 2>/dev/null || true)
  [[ $state == running || $state == degraded ]] && break
  sleep 1
done
echo "container $AFF_CONTAINER: systemd $state"

# The role installs lua-cjson with affinity on; a lab image built before it was in
# the image's package list lacks it, and the container has no network: bring
# Debian's package from this machine.
if ! podman exec "$AFF_CONTAINER" dpkg -s lua-cjson >/dev/null 2>&1; then
  debs=$(mktemp -d)
  (cd "$debs" && apt-get download -qq lua-cjson 2>/dev/null)
  podman cp "$debs"/. "$AFF_CONTAINER":/tmp/debs
  podman exec "$AFF_CONTAINER" sh -c 'dpkg -i /tmp/debs/*.deb >/dev/null'
  rm -rf "$debs"
  echo "lua-cjson installed from this machine's apt (not in $image)"
fi

podman exec "$AFF_CONTAINER" mkdir -p /opt/affinity-check
podman cp "$here/standin.py" "$AFF_CONTAINER":/opt/affinity-check/standin.py
podman cp "$here/check.py" "$AFF_CONTAINER":/opt/affinity-check/check.py
for engine in up-a:18001 up-b:18002; do
  podman exec "$AFF_CONTAINER" systemd-run --quiet --unit="standin-${engine%%:*}" /usr/bin/python3 \
    /opt/affinity-check/standin.py --name "${engine%%:*}" --port "${engine##*:}" --api-key "$key"
done

converge() {
  local log=$1; shift
  ansible-playbook -i "$here/inventory.yml" "$here/converge.yml" "$@" >"$log" 2>&1 || { cat "$log"; return 1; }
  grep -E '^aff-proxy +:' "$log"
}
echo "== converge (affinity)"
converge "$out/converge.log"
echo "== converge again: nothing may change"
converge "$out/idempotence.log"
grep -qE '^aff-proxy +: ok=[0-9]+ +changed=0 ' "$out/idempotence.log" || { echo "second run changed something"; exit 1; }
echo "== check (affinity)"
podman exec "$AFF_CONTAINER" python3 /opt/affinity-check/check.py affinity | tee "$out/affinity.json"
echo "== check: the proxy scenario's affinity client"
podman cp "$root/extensions/molecule/resources/affinity_client.py" "$AFF_CONTAINER":/opt/affinity-check/affinity_client.py
podman exec "$AFF_CONTAINER" python3 /opt/affinity-check/check.py lab_client | tee "$out/lab_client.json"
if [[ ${AFF_BENCH:-0} == 1 ]]; then
  # Stand-ins whose prefill takes 0.5 ms per prompt token their prefix cache lacks.
  echo "== benchmarks/affinity.py, small, on stand-ins with a modelled prefix cache"
  podman exec "$AFF_CONTAINER" mkdir -p /opt/affinity-check/bench
  for file in benchmarks/affinity.py benchmarks/balance.py; do
    podman cp "$root/$file" "$AFF_CONTAINER":/opt/affinity-check/bench/
  done
  # The load generator: the collection's host package, every file of it (as benchmarks/affinity.yml copies it).
  podman exec "$AFF_CONTAINER" mkdir -p /opt/affinity-check/bench/_host
  for file in "$root"/plugins/module_utils/_host/*.py; do
    podman cp "$file" "$AFF_CONTAINER":/opt/affinity-check/bench/_host/
  done
  for engine in up-a:18001 up-b:18002; do
    podman exec "$AFF_CONTAINER" systemctl stop "standin-${engine%%:*}"
    podman exec "$AFF_CONTAINER" systemd-run --quiet --unit="standin-${engine%%:*}" /usr/bin/python3 \
      /opt/affinity-check/standin.py --name "${engine%%:*}" --port "${engine##*:}" --api-key "$key" \
      --prefill-seconds 0.0005
  done
  podman exec "$AFF_CONTAINER" python3 /opt/affinity-check/check.py bench 2>"$out/bench.txt" | tee "$out/bench.json"
  cat "$out/bench.txt"
fi
echo "== the proxy scenario's affinity plays (extensions/molecule/proxy/verify_affinity.yml), lab names"
# spark-a and spark-b on loopback addresses of their own, port 8000, found by name.
podman exec "$AFF_CONTAINER" sh -c 'printf "127.0.0.10 spark-a\n127.0.0.11 spark-b\n" >> /etc/hosts'
for engine in spark-a:127.0.0.10 spark-b:127.0.0.11; do
  podman exec "$AFF_CONTAINER" systemd-run --quiet --unit="standin-${engine%%:*}" /usr/bin/python3 \
    /opt/affinity-check/standin.py --name "${engine%%:*}" --host "${engine##*:}" --port 8000 --api-key "$key"
done
ansible-playbook -i "$here/inventory-lab-names.yml" "$here/converge.yml" >"$out/lab_names.log" 2>&1 \
  || { cat "$out/lab_names.log"; exit 1; }
ansible-playbook -i "$here/inventory-lab-names.yml" "$root/extensions/molecule/proxy/verify_affinity.yml" \
  >"$out/verify_affinity.log" 2>&1 || { tail -40 "$out/verify_affinity.log"; exit 1; }
grep -E '^gateway +:' "$out/verify_affinity.log"
echo "== converge (nginx_proxy_balance=least_conn)"
converge "$out/least_conn.log" -e nginx_proxy_balance=least_conn
echo "== check (least_conn)"
podman exec "$AFF_CONTAINER" python3 /opt/affinity-check/check.py least_conn | tee "$out/least_conn.json"
echo "all checks passed; results in $out"
