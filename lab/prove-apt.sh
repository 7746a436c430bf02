#!/bin/bash
# Proves the Makefile's APT_PACKAGES is a complete install step: in a clean
# Debian 12 tree (debootstrap minbase, nothing added) apt installs exactly that
# list the way `make apt` does, and lab/doctor.sh --commands then finds every
# command the lab and the tests run. Then iptables, and then python3-venv, are
# removed and the doctor must name each with its fix and fail. Not part of `make test` (it downloads ~100 MB
# and takes minutes). Run as root; the tree is removed at the end, mounts first.
#   lab/prove-apt.sh [DIR]      DIR defaults to /var/tmp/ff-apt-proof
# PROOF_MIRROR overrides the Debian mirror (default: the one this machine's apt uses).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DIR=${1:-/var/tmp/ff-apt-proof}
SUITE=bookworm
CHROOT_PATH=/usr/sbin:/usr/bin:/sbin:/bin

case "$DIR" in
  /?*/?*) ;;
  *) echo "prove-apt: refusing DIR '$DIR' (want an absolute path two levels deep, e.g. /var/tmp/ff-apt-proof)" >&2; exit 2 ;;
esac
DIR=${DIR%/}
[ "$(id -u)" -eq 0 ] || { echo "prove-apt: run as root (debootstrap, chroot)" >&2; exit 2; }

# The mirror this machine's apt uses for Debian (deb822 or one-line sources).
machine_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}$/\1/p' "$f"
  done
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    sed -n "s/^deb[[:space:]]\{1,\}\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]]\{1,\}$SUITE[[:space:]].*/\1/p"
  return 0
}
MIRROR=${PROOF_MIRROR:-$(machine_mirror | head -n 1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

# The list exactly as make evaluates it.
APT_LIST=$(make -s --no-print-directory -C "$here/.." --eval 'prove-apt-print: ; @echo $(APT_PACKAGES)' prove-apt-print)
[ -n "$APT_LIST" ] || { echo "prove-apt: no APT_PACKAGES from the Makefile" >&2; exit 1; }

cleanup() {
  # Lazy unmount, deepest first, of anything under the tree (debootstrap's and ours),
  # then remove it without crossing into another file system.
  findmnt -rno TARGET | grep "^$DIR/" | sort -r | xargs -r -n1 umount -l || true
  if findmnt -rno TARGET | grep -q "^$DIR/"; then
    echo "prove-apt: still mounted under $DIR, not removing it" >&2
    return 1
  fi
  rm -rf --one-file-system "$DIR"
}
in_tree() { env -i PATH=$CHROOT_PATH DEBIAN_FRONTEND=noninteractive "$@"; }
step_start=0
step() { step_start=$(date +%s); echo; echo "== $(date +%T) $*"; }
took() { echo "-- took $(( $(date +%s) - step_start )) s"; }

[ ! -e "$DIR" ] || { echo "prove-apt: removing a tree an earlier run left at $DIR"; cleanup; }
trap cleanup EXIT
echo "prove-apt: tree $DIR, mirror $MIRROR, suite $SUITE"
echo "prove-apt: APT_PACKAGES = $APT_LIST"

step "debootstrap --variant=minbase $SUITE $DIR $MIRROR"
debootstrap --variant=minbase "$SUITE" "$DIR" "$MIRROR" 2>&1 |
  { grep -v -E '^I: (Retrieving|Validating|Extracting|Unpacking|Configuring) ' || true; }
took

# No package's maintainer script may start a daemon on this machine from the tree.
printf '#!/bin/sh\nexit 101\n' >"$DIR/usr/sbin/policy-rc.d"
chmod 0755 "$DIR/usr/sbin/policy-rc.d"
mount -t proc proc "$DIR/proc"

step "apt-get update (in the tree)"
in_tree chroot "$DIR" apt-get update -qq
took

step "apt-get install -y --no-install-recommends $APT_LIST (in the tree)"
# shellcheck disable=SC2086 # the list is words
in_tree chroot "$DIR" apt-get install -y -qq --no-install-recommends $APT_LIST >"$DIR/root/apt-install.log" 2>&1 ||
  { tail -n 30 "$DIR/root/apt-install.log"; exit 1; }
grep -c '^Setting up ' "$DIR/root/apt-install.log" | sed 's/$/ packages set up/'
took

install -m 0755 "$here/doctor.sh" "$DIR/root/doctor.sh"
status=0

step "doctor --commands with the list installed: must pass"
in_tree APT_PACKAGES="$APT_LIST" chroot "$DIR" /bin/bash /root/doctor.sh --commands || status=$?
echo "-- doctor exit status $status"
if [ $status -ne 0 ]; then echo "prove-apt: FAILED: the doctor finds something missing with the whole list installed"; exit 1; fi

step "apt-get remove -y iptables (in the tree), then doctor --commands: must fail naming iptables"
in_tree chroot "$DIR" apt-get remove -y iptables 2>&1 | { grep -E '^(Removing|[0-9]+ upgraded)' || true; }
status=0
out=$(in_tree APT_PACKAGES="$APT_LIST" chroot "$DIR" /bin/bash /root/doctor.sh --commands) || status=$?
grep -E -A2 '^(MISSING|WARN) ' <<<"$out" || true
tail -n 1 <<<"$out"
echo "-- doctor exit status $status"
if [ $status -ne 1 ] || ! grep -q '^MISSING  iptables ' <<<"$out" ||
   ! grep -q '^         fix: apt-get install iptables' <<<"$out"; then
  echo "prove-apt: FAILED: without iptables the doctor did not fail naming it and its fix"; exit 1
fi

step "dpkg --remove python3-venv python3.11-venv (in the tree), then doctor --commands: must fail naming the venv module"
in_tree chroot "$DIR" dpkg --remove python3-venv python3.11-venv 2>&1 | { grep -E '^Removing' || true; }
status=0
out=$(in_tree APT_PACKAGES="$APT_LIST" chroot "$DIR" /bin/bash /root/doctor.sh --commands) || status=$?
grep -E -A2 '^(MISSING|WARN) ' <<<"$out" || true
echo "-- doctor exit status $status"
if [ $status -ne 1 ] || ! grep -q '^MISSING  python3 -m venv ' <<<"$out" ||
   ! grep -q '^         fix: apt-get install python3-venv' <<<"$out"; then
  echo "prove-apt: FAILED: without python3-venv the doctor did not fail naming it and its fix"; exit 1
fi

step "cleanup"
trap - EXIT
cleanup
if findmnt -rno TARGET | grep -q -E "^$DIR(/|$)" || [ -e "$DIR" ]; then echo "prove-apt: FAILED: $DIR or mounts under it left"; exit 1; fi
took
echo
echo "prove-apt: OK: $APT_LIST on Debian $SUITE minbase gives every command the doctor checks; without iptables, then python3-venv, it names them with their fixes and fails"
