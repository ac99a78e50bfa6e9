#!/usr/bin/env bash
# Builds the base initramfs of the real-VM test rig (see README.md here), or
# finds it in the cache, and prints where the kernel and the initramfs are:
#
#   kernel=/boot/vmlinuz-<version>
#   kernel_version=<version>
#   initrd=$NODEFALL_CACHE/vm-rig/base-<key>.cpio
#
# The base holds what every run shares: busybox-static and its applet links,
# the kernel modules e1000, button and evdev (and their dependencies), dropbear
# with its libraries and a host key, kwok, and the guest scripts in guest/.
# What differs per run (node name, MACs, kubeconfig, CA, kwok arguments and
# stages, authorized_keys) comes in a second cpio appended by the test support.
# The cache key is a hash of every input file, so a changed input rebuilds.
#
# Inputs (environment, all optional):
#   NODEFALL_CACHE          cache root (default $XDG_CACHE_HOME/nodefall or ~/.cache/nodefall)
#   NODEFALL_KWOK           the kwok binary (default the provisioned kwok in the cache)
#   NODEFALL_KWOK_VERSION   kwok version of the default path (default v0.8.0)
#   NODEFALL_VM_KERNEL      kernel version (default the newest /boot/vmlinuz-* with modules)
# Needs: busybox-static, dropbear-bin, linux-image-amd64, cpio, xz-utils (for
# .ko.xz modules), coreutils.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "build-initramfs: $*" >&2; exit 1; }

cache="${NODEFALL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodefall}"
kwok="${NODEFALL_KWOK:-$cache/bin/kwok-${NODEFALL_KWOK_VERSION:-v0.8.0}+nodefall.2/kwok}"
[[ -x "$kwok" ]] || die "no kwok at $kwok (run scripts/provision-binaries.sh)"

if [[ -n "${NODEFALL_VM_KERNEL:-}" ]]; then
  kver="$NODEFALL_VM_KERNEL"
else
  kver=""
  for k in $(printf '%s\n' /boot/vmlinuz-* | sort -V); do
    v="${k#/boot/vmlinuz-}"
    [[ -f "/lib/modules/$v/modules.dep" ]] && kver="$v"
  done
  [[ -n "$kver" ]] || die "no /boot/vmlinuz-* with modules in /lib/modules (apt-get install linux-image-amd64)"
fi
kernel="/boot/vmlinuz-$kver"
moddir="/lib/modules/$kver"
[[ -r "$kernel" && -f "$moddir/modules.dep" ]] || die "kernel $kver: need $kernel and $moddir/modules.dep"

busybox="$(command -v busybox || true)"
[[ -n "$busybox" ]] || die "no busybox (apt-get install busybox-static)"
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' \
  || ldd "$busybox" 2>&1 | grep -q 'not a dynamic' || die "$busybox is not static (apt-get install busybox-static)"
dropbear="$(command -v dropbear || echo /usr/sbin/dropbear)"
[[ -x "$dropbear" ]] || die "no dropbear (apt-get install dropbear-bin)"
command -v dropbearkey >/dev/null || die "no dropbearkey (apt-get install dropbear-bin)"
command -v cpio >/dev/null || die "no cpio (apt-get install cpio)"

# Modules in load order (dependencies first), from modules.dep.
modules=(e1000 button evdev)
declare -A seen=()
order=()
dep_line() { # <module name> -> its modules.dep line
  awk -F: -v m="$1" '{ n = $1; sub(".*/", "", n); sub("\\.ko(\\.(xz|zst|gz))?$", "", n); gsub("-", "_", n) }
    n == m { print; exit }' "$moddir/modules.dep"
}
add_module() { # <path relative to moddir>
  local path="$1" line dep
  [[ -n "${seen[$path]:-}" ]] && return 0
  seen[$path]=1
  line="$(grep -m1 "^$path:" "$moddir/modules.dep")" || die "$path not in modules.dep"
  for dep in ${line#*:}; do add_module "$dep"; done
  order+=("$path")
}
for m in "${modules[@]}"; do
  line="$(dep_line "${m//-/_}")"
  [[ -n "$line" ]] || die "module $m not in $moddir/modules.dep (built in? then drop it here)"
  add_module "${line%%:*}"
done

# Dropbear's ELF interpreter and libraries.
libs=()
while read -r lib; do libs+=("$lib"); done < <(ldd "$dropbear" | awk '/=> \//{ print $3 } /^[[:space:]]*\/.*ld-linux/{ print $1 }')

# The cache key: every input's content plus this script and the guest files.
inputs=("$0" "$here"/guest/* "$busybox" "$dropbear" "$kwok" "${libs[@]}")
for p in "${order[@]}"; do inputs+=("$moddir/$p"); done
key="$( { echo "$kver"; sha256sum "${inputs[@]}" | awk '{ print $1 }'; } | sha256sum | cut -c1-16)"
out="$cache/vm-rig/base-$key.cpio"

if [[ ! -s "$out" ]]; then
  started=$SECONDS
  mkdir -p "$cache/vm-rig"
  stage="$(mktemp -d "$cache/vm-rig/stage.XXXXXX")"
  trap 'rm -rf "$stage"' EXIT
  cd "$stage"
  mkdir -p bin sbin usr/bin usr/sbin usr/local/bin dev proc sys run tmp etc/rig etc/acpi/PWRF \
    etc/dropbear lib/modules/rig root var/log
  chmod 0700 root

  cp "$busybox" bin/busybox
  while read -r applet; do
    [[ -e "$applet" || "$applet" == bin/busybox ]] && continue
    mkdir -p "$(dirname "$applet")"
    ln -s /bin/busybox "$applet"
  done < <("$busybox" --list-full)

  for p in "${order[@]}"; do
    name="$(basename "$p")"
    case "$name" in
      *.ko.xz) xz -dc "$moddir/$p" >"lib/modules/rig/${name%.xz}" ;;
      *.ko.zst) zstd -qdc "$moddir/$p" >"lib/modules/rig/${name%.zst}" ;;
      *.ko.gz) gzip -dc "$moddir/$p" >"lib/modules/rig/${name%.gz}" ;;
      *) cp "$moddir/$p" "lib/modules/rig/$name" ;;
    esac
    name="${name%.xz}"; name="${name%.zst}"; name="${name%.gz}"
    echo "$name" >>lib/modules/rig/order
  done

  cp "$dropbear" usr/sbin/dropbear
  for lib in "${libs[@]}"; do
    mkdir -p ".$(dirname "$lib")"
    cp -L "$lib" ".$lib"
  done
  dropbearkey -t ed25519 -f etc/dropbear/dropbear_ed25519_host_key >/dev/null 2>&1
  cp "$kwok" usr/local/bin/kwok

  install -m 0755 "$here/guest/init" init
  install -m 0644 "$here/guest/inittab" etc/inittab
  install -m 0755 "$here/guest/rc" etc/rig/rc
  install -m 0755 "$here/guest/agent" etc/rig/agent
  install -m 0755 "$here/guest/power-button" etc/acpi/PWRF/00000080
  install -m 0755 "$here/guest/systemctl" usr/bin/systemctl
  echo 'root:*:0:0:root:/root:/bin/sh' >etc/passwd
  echo 'root:x:0:' >etc/group
  echo '/bin/sh' >etc/shells
  printf 'passwd: files\ngroup: files\nshadow: files\n' >etc/nsswitch.conf

  find . -mindepth 1 -exec touch -h -d @0 {} +
  find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet >"$out.tmp.$$"
  mv "$out.tmp.$$" "$out"
  # Older bases (other inputs) are dead weight: about 70 MB each.
  find "$cache/vm-rig" -maxdepth 1 -name 'base-*.cpio' ! -name "base-$key.cpio" -delete
  echo "build-initramfs: built $out ($(du -m "$out" | cut -f1) MB) in $((SECONDS - started))s" >&2
fi

echo "kernel=$kernel"
echo "kernel_version=$kver"
echo "initrd=$out"
