#!/bin/bash
# What this controller needs for `make demo` and `make test`, checked before
# anything is built or booted. Each missing thing is named with what it is for
# and what fixes it; the exit status is 1 when something required is missing.
# Plain bash and Debian's base system only: it runs before the virtualenv exists.
#
#   lab/doctor.sh             everything: root, OS, cgroups, CPUs, memory, disk, commands
#   lab/doctor.sh --commands  only the commands (what the apt list and Debian's base provide)
#
# LAB_ENGINES (2, the default, or 3: make lab-up LAB_ENGINES=3) is how many engine hosts
# the lab runs: the CPU, memory and disk checks count each one.
#
# APT_PACKAGES (the Makefile passes its list) is what `make apt` installs; without
# it the list is read from the Makefile next to lab/. Every package in it must be
# the fix of some check here, so the two cannot drift apart.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

mode=all
case "${1:-}" in
  "") ;;
  --commands) mode=commands ;;
  -h|--help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "usage: $0 [--commands]" >&2; exit 2 ;;
esac

engines=${LAB_ENGINES:-2}
case $engines in
  2|3) ;;
  *) echo "$0: LAB_ENGINES is 2 or 3, not '$engines'" >&2; exit 2 ;;
esac

apt_list=${APT_PACKAGES-}
if [ -z "$apt_list" ] && [ -r "$here/../Makefile" ]; then
  apt_list=$(sed -n 's/^APT_PACKAGES *:= *//p' "$here/../Makefile")
fi

missing=0   # required things missing
warned=0    # optional things missing
in_apt_list() { [[ " $apt_list " == *" $1 "* ]]; }

ok() { printf 'OK       %-22s %s\n' "$1" "$2"; }
# bad LEVEL NAME DETAIL FOR FIX
bad() {
  if [ "$1" = req ]; then
    printf 'MISSING  %-22s %s\n' "$2" "$3"; missing=$((missing + 1))
  else
    printf 'WARN     %-22s %s (optional)\n' "$2" "$3"; warned=$((warned + 1))
  fi
  printf '         for: %s\n' "$4"
  printf '         fix: %s\n' "$5"
}
pkg_fix() {
  if in_apt_list "$1"; then
    echo "apt-get install $1   (one of the Makefile's APT_PACKAGES; make apt installs them when .cache/apt.done is absent)"
  else
    echo "apt-get install $1"
  fi
}

# ---- commands ---------------------------------------------------------------
# level|name|program (a name looked up in PATH, or an absolute path)|Debian package|what it is for
# Found by reading the Makefile, lab/*.sh, extensions/molecule (molecule's podman
# driver and the scenarios' controller tasks) and what debootstrap itself runs.
COMMANDS='
req|bash|bash|bash|the Makefile'\''s shell and the lab scripts
req|apt-get|apt-get|apt|`make apt` installs the Makefile'\''s APT_PACKAGES with it
req|podman|podman|podman|runs the lab hosts: molecule'\''s podman driver, the lab image build
req|ssh|ssh ssh-keygen|openssh-client|Ansible reaches the lab hosts over SSH (pipelined); lab/build-image.sh makes the lab'\''s key with ssh-keygen
req|conmon|conmon|conmon|podman'\''s container monitor (a dependency of podman)
req|runc|runc|runc|the OCI runtime lab/containers.conf selects (crun fails on cgroup v1/hybrid hosts)
req|netavark|/usr/lib/podman/netavark|netavark|podman'\''s network backend: the lab network factory-floor-lab
req|aardvark-dns|/usr/lib/podman/aardvark-dns|aardvark-dns|names on the lab network (the lab hosts reach each other by name)
req|iptables|iptables|iptables|netavark 1.4 runs it to set up the lab network; without it every lab container exits with "netavark: No such file or directory"
opt|nft|nft|nftables|reading the firewall rules by hand (nft list ruleset); netavark 1.4 writes them through iptables, nothing in make demo/test runs nft on the controller
opt|curl|curl|curl|asking the lab by hand (e.g. curl http://<lab host>:8080/v1/models); nothing in make demo/test runs curl on the controller
req|debootstrap|debootstrap|debootstrap|builds the lab image'\''s Debian 12 root file system (lab/build-image.sh)
req|wget|wget|wget|debootstrap downloads the packages with it
req|gpgv|gpgv|gpgv|debootstrap checks the Release file'\''s signature with it
req|debian-archive-keyring|/usr/share/keyrings/debian-archive-keyring.gpg|debian-archive-keyring|the key debootstrap checks bookworm'\''s Release file against
req|perl|perl|perl-base|debootstrap reads the package indexes with it
req|dpkg-deb|dpkg-deb|dpkg|debootstrap unpacks the packages with it
req|chroot|chroot|coreutils|lab/build-image.sh configures the new root file system inside it
req|findmnt|findmnt|util-linux|lab/build-image.sh finds what debootstrap left mounted before removing its tree
req|umount|umount|mount|lab/build-image.sh unmounts what debootstrap left mounted
req|tar|tar|tar|lab/build-image.sh streams the root file system into podman import; make sanity copies the collection
req|sha256sum|sha256sum|coreutils|lab/build-image.sh hashes the image'\''s inputs (rebuilt only when they change)
req|coreutils|mktemp cut sort mkdir ln cp rm touch cat dirname id uname install du tr|coreutils|the Makefile and lab scripts (and switch.yml'\''s lock owner: id, uname)
req|grep|grep|grep|make sanity picks the shipped files; lab/build-image.sh finds mounts
req|xargs|xargs|findutils|lab/build-image.sh unmounts what debootstrap left mounted
req|git|git|git|make sanity lists the shipped files (git ls-files) and gives ansible-test a repository
req|python3|python3|python3|makes the virtualenvs (.venv, .venv-sanity) the tools run from
req|python3.11|python3.11|python3.11|ansible-test sanity runs with --python 3.11
'

# Prints where a program is. Status 0: found in PATH; 2: only outside PATH (in a
# standard directory); 3: a link there is broken; 1: nowhere.
find_prog() {
  local p d
  if [[ $1 == /* ]]; then
    [ -e "$1" ] && [ ! -d "$1" ] && { echo "$1"; return 0; }
    [ -L "$1" ] && { echo "$1"; return 3; }
    return 1
  fi
  p=$(type -P "$1") && { echo "$p"; return 0; }
  for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
    [ -x "$d/$1" ] && [ ! -d "$d/$1" ] && { echo "$d/$1"; return 2; }
  done
  for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
    [ -L "$d/$1" ] && { echo "$d/$1"; return 3; }
  done
  return 1
}

check_commands() {
  local level name progs pkg purpose prog where rc found absent
  while IFS='|' read -r level name progs pkg purpose; do
    [ -n "$level" ] || continue
    found=() absent=()
    for prog in $progs; do
      where=$(find_prog "$prog"); rc=$?
      case $rc in
        0) found+=("$where") ;;
        2) bad "$level" "$name" "$where is not in PATH ($PATH)" "$purpose" \
             "add ${where%/*} to PATH"; continue 2 ;;
        3) bad "$level" "$name" "$where is a broken link" "$purpose" \
             "apt-get install --reinstall $pkg"; continue 2 ;;
        *) absent+=("$prog") ;;
      esac
    done
    if [ ${#absent[@]} -eq 0 ]; then
      if [ ${#found[@]} -eq 1 ]; then ok "$name" "${found[0]}"; else ok "$name" "${#found[@]} programs"; fi
    else
      bad "$level" "$name" "not found: ${absent[*]}" "$purpose" "$(pkg_fix "$pkg")"
    fi
  done <<<"$COMMANDS"

  # `python3 -m venv` needs ensurepip and its pip wheel, both from python3-venv on
  # Debian (its python3 ships without them); asking ensurepip for pip's version
  # finds both without making a virtualenv.
  local out VENV_PKG=python3-venv
  if ! type -P python3 >/dev/null; then
    out="no python3"
  elif out=$(python3 -c 'import venv, ensurepip; print("pip", ensurepip.version())' 2>&1); then
    ok "python3 -m venv" "ensurepip has $out"
  else
    out=$(tail -n 1 <<<"$out")
  fi
  [[ $out == pip* ]] || bad req "python3 -m venv" "$out" \
    "make venv and make sanity make their virtualenvs with it" "$(pkg_fix $VENV_PKG)"

  # Every package make apt installs is some check's fix, or the list has outgrown this file.
  local p covered
  if [ -z "$apt_list" ]; then
    printf 'WARN     %-22s %s\n' "apt list" "no APT_PACKAGES given and no Makefile next to lab/: not compared"
    warned=$((warned + 1))
  fi
  for p in $apt_list; do
    covered=no
    [ "$p" = "$VENV_PKG" ] && covered=yes
    while IFS='|' read -r _ _ _ pkg _; do [ "$pkg" = "$p" ] && covered=yes; done <<<"$COMMANDS"
    if [ $covered = no ]; then
      bad req "apt list: $p" "in APT_PACKAGES, but $0 checks nothing it provides" \
        "keeping the doctor and the Makefile's list in step" "add a check of what $p is installed for to $0"
    fi
  done
}

# ---- the machine -------------------------------------------------------------
check_root() {
  if [ "$(id -u)" -eq 0 ]; then
    ok root "uid 0"
  else
    bad req root "running as uid $(id -u)" \
      "make apt installs packages; the lab is rootful podman (rootless: false); debootstrap and chroot build the image" \
      "run make as root (sudo -i, or su -)"
  fi
}

check_os() {
  local id="" version="" name=""
  # shellcheck disable=SC1091
  [ -r /etc/os-release ] && . /etc/os-release && id=${ID:-} version=${VERSION_ID:-} name=${PRETTY_NAME:-}
  if [ "$id" = debian ] && [ "$version" = 12 ]; then
    ok os "$name"
  else
    bad opt os "${name:-unknown}" "the apt list and the lab are proven on Debian 12 (bookworm)" \
      "use Debian 12, or expect package names and versions to differ"
  fi
}

# The lab was proven on a hybrid host (v1 controllers, v2 "unified" with none):
# runc and cgroupfs (lab/containers.conf) work there, crun does not, and the lab
# hosts' systemd gets no memory controller, so slice limits are not enforced in
# the lab (the memory guard's own watch acts). Real GB10 hosts are cgroup v2.
check_cgroup() {
  local fs layout need=() c
  fs=$(stat -fc %T /sys/fs/cgroup 2>/dev/null || echo none)
  case $fs in
    cgroup2fs)
      layout="v2 (unified)"
      for c in memory pids; do
        grep -qw "$c" /sys/fs/cgroup/cgroup.controllers 2>/dev/null || need+=("$c")
      done ;;
    tmpfs)
      if [ -e /sys/fs/cgroup/unified/cgroup.controllers ]; then layout="hybrid (v1 controllers, v2 unified)"; else layout="v1"; fi
      # systemd as PID 1 in a lab host needs the named systemd hierarchy; podman's
      # default pids limit needs pids.
      for c in systemd memory pids; do
        [ -d "/sys/fs/cgroup/$c" ] && [ -n "$(ls -A "/sys/fs/cgroup/$c" 2>/dev/null)" ] || need+=("$c")
      done ;;
    *)
      bad req cgroup "nothing mounted at /sys/fs/cgroup ($fs)" \
        "podman puts each lab host in a cgroup; systemd runs inside them" \
        "boot the machine with systemd (it mounts the cgroup file systems)"
      return ;;
  esac
  if [ ${#need[@]} -eq 0 ]; then
    case $fs in
      cgroup2fs) ok cgroup "$layout; lab hosts enforce slice memory limits, as GB10 hosts do" ;;
      *) ok cgroup "$layout, as the lab was proven on; slice memory limits not enforced in lab hosts" ;;
    esac
  else
    bad req cgroup "$layout without ${need[*]}" \
      "podman's lab hosts run systemd as PID 1 with podman's default pids limit" \
      "boot with systemd, which mounts them (or systemd.unified_cgroup_hierarchy=1 for v2)"
  fi
}

check_cpus() {
  local n
  n=$(nproc)
  if [ "$n" -lt 2 ]; then
    bad req cpus "$n" \
      "the lab pins spark-a's vLLM worker to CPU 0 and spark-b's to CPU 1 (VLLM_CPU_OMP_THREADS_BIND, inventory/lab)" \
      "a machine (or VM) with at least 2 CPUs"
  elif [ "$n" -lt "$engines" ]; then
    bad opt cpus "$n for $engines engine hosts: spark-c shares CPU 0 with spark-a" \
      "each lab engine host on a core of its own (spark-c on CPU 2: lab/engines.py, inventory/lab-groups/host_vars/spark-c.yml); sharing one, their start-ups and the tool gate take longer" \
      "a machine (or VM) with $engines CPUs, or expect slower start-ups on spark-a and spark-c"
  else
    ok cpus "$n ($engines needed, one per engine host)"
  fi
}

# Up to one vLLM CPU server per engine host and one more (a candidate beside the
# incumbent) at ~3.0 GiB RSS each (measured in the lab with 1 GiB KV cache: API server
# ~0.6, EngineCore ~0.6, worker ~1.8) - 3 servers with 2 engine hosts, 4 with 3 - plus
# 2 GiB for the controller's ansible/molecule and the lab hosts' systemd, nginx and clients.
MEM_SERVERS=$((engines + 1))
MEM_NEED_MIB=$((MEM_SERVERS * 3072 + 2048))
check_memory() {
  local avail held=0 f
  avail=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo)
  avail=$((avail / 1024))
  # Memory the lab's running containers hold already is theirs to use (podman's
  # cgroupfs manager puts them under libpod_parent).
  for f in /sys/fs/cgroup/memory/libpod_parent/memory.stat /sys/fs/cgroup/libpod_parent/memory.stat; do
    if [ -r "$f" ]; then
      held=$(sed -n 's/^\(total_rss\|anon\) \([0-9]*\)$/\2/p' "$f" | head -n 1)
      held=$(( ${held:-0} / 1048576 ))
      break
    fi
  done
  if [ $((avail + held)) -ge $MEM_NEED_MIB ]; then
    ok memory "$(gib $avail) GiB available + $(gib $held) GiB held by running containers ($(gib $MEM_NEED_MIB) GiB needed)"
  else
    bad req memory "$(gib $avail) GiB available + $(gib $held) GiB held by running containers, $(gib $MEM_NEED_MIB) GiB needed" \
      "up to $MEM_SERVERS vLLM CPU servers of ~3 GiB RSS each ($engines engine hosts), plus 2 GiB for ansible/molecule and the lab hosts" \
      "free memory (stop what else runs here) or use a machine with more"
  fi
}
gib() { printf '%d.%d' $(($1 / 1024)) $(($1 % 1024 * 10 / 1024)); }

# Disk the lab image build and the lab use, by where it goes (MiB). Measured
# building the image on this kind of machine (df and du -x every 10 s):
#   LAB_CACHE      4.8 GiB at the end: wheels 879 MiB, models 89, debs 119, and
#                  docker-images/vllm-cpu.tar 3821 (the lab image's root file
#                  system without the models, for the lab hosts' docker; removed
#                  before a new one is written, never two), plus the debootstrap
#                  tree (~0.6 GiB) while step 1 runs;
#   podman storage 7.5 GiB at the peak (base 0.5 with docker.io + build container
#                  3.5 + the committed layer 3.5; 4.0 GiB once the build container
#                  is gone); with TMPDIR below, df grew by 14.9 GiB at the peak of
#                  a build with docker.io (14.7 before);
#   podman volumes each GB10 host's /var/lib/docker (factory-floor-lab-docker-*):
#                  3.9 GiB each once the vLLM image is loaded, 14.6 GiB for both at
#                  the peak of their first boot (7.5 GiB counted per engine host:
#                  LAB_ENGINES=3 adds spark-c's) (docker load unpacks the archive
#                  into /var/lib/docker/tmp before it registers the layer; the
#                  loader removes an old build first); they outlive make lab-down.
#                  That peak comes after the build's: on one file system the sum
#                  below asks ~7 GiB more than the lab ever holds at once;
#   TMPDIR         7.4 GiB at the peak, the rest of df's growth during podman
#                  commit (outside both above): its copy of the layer, which goes
#                  to image_copy_tmp_dir, $TMPDIR or /var/tmp;
#   the project    .venv 0.8 GiB, .venv-sanity and ansible-test's virtualenvs.
# Paths on one file system add up.
storage_root() {
  local r
  r=$(sed -n 's/^[[:space:]]*graphroot[[:space:]]*=[[:space:]]*"\(.*\)"/\1/p' /etc/containers/storage.conf 2>/dev/null | head -n 1)
  echo "${r:-/var/lib/containers/storage}"
}
DISK_NEEDS="${LAB_CACHE:-/var/cache/factory-floor}|5120|lab image cache: wheels, models, debs, the vLLM image tarball for docker
$(storage_root)|8192|podman storage: lab image, build container
$(storage_root)/volumes|$((engines * 7680))|podman volumes: the docker storage of $engines engine hosts (3.9 GiB each, twice that while the image loads)
${TMPDIR:-/var/tmp}|8192|podman commit's copy of the image layer
$(cd "$here/.." && pwd)|2048|the virtualenvs and build/ in the project"
# Earlier lab images a rebuild left untagged (4.8 GiB each; make lab-image prunes them since
# 2026-12-06, a machine from before may still hold some).
stale_images() {
  local n
  n=$(podman images -q --filter dangling=true --filter label=factory-floor.inputs 2>/dev/null | wc -l)
  if [ "$n" -gt 0 ]; then
    echo "$n old lab image(s) untagged: podman image prune -f --filter label=factory-floor.inputs"
  else
    echo "no old lab images to prune"
  fi
}
check_disk() {
  local path need what p mnt mnts="" m total avail parts
  declare -A sum=() detail=() what_for=()
  while IFS='|' read -r path need what; do
    p=$path
    while [ ! -e "$p" ]; do p=$(dirname "$p"); done
    mnt=$(df --output=target "$p" | tail -n 1)
    [ -n "${sum[$mnt]+x}" ] || { sum[$mnt]=0; detail[$mnt]=""; what_for[$mnt]=""; mnts+="$mnt "; }
    sum[$mnt]=$((sum[$mnt] + need))
    detail[$mnt]+="${detail[$mnt]:+ + }$path $(gib "$need")"
    what_for[$mnt]+="${what_for[$mnt]:+ + }$path $(gib "$need") GiB ($what)"
  done <<<"$DISK_NEEDS"
  for m in $mnts; do
    total=${sum[$m]}
    avail=$(df -m --output=avail "$m" | tail -n 1 | tr -d ' ')
    parts=${detail[$m]}
    if [ "$avail" -ge "$total" ]; then
      ok "disk $m" "$(gib "$avail") GiB free ($(gib "$total") GiB needed: $parts)"
    else
      bad req "disk $m" "$(gib "$avail") GiB free, $(gib "$total") GiB needed" \
        "${what_for[$m]} (peaks measured building the lab image)" \
        "free space on $m ($(stale_images)), or point LAB_CACHE / TMPDIR / podman's graphroot at a file system with room"
    fi
  done
}

# make itself runs all of the above, so the apt list cannot bring it.
check_make() {
  local where
  if where=$(type -P make); then
    ok make "$where"
  else
    bad req make "not found" "runs the Makefile (make doctor, make demo, make test)" \
      "apt-get install make   (before anything else: the Makefile cannot install what runs it)"
  fi
}

echo "factory floor doctor: what this controller needs for make demo / make test"
if [ $mode = all ]; then
  check_root
  check_os
  check_cgroup
  check_cpus
  check_memory
  check_disk
  check_make
fi
check_commands

if [ $missing -gt 0 ]; then
  echo "doctor: $missing required thing(s) missing; the fixes are above"
  exit 1
fi
if [ $warned -gt 0 ]; then
  echo "doctor: everything required is here ($warned optional thing(s) missing, see WARN)"
else
  echo "doctor: everything required is here"
fi
