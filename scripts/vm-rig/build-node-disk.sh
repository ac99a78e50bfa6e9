#!/usr/bin/env bash
# Builds the root disk of the real-kubelet VM from nodefall's kind node image
# (scripts/kind/image.sh: Debian with systemd, logind, containerd, a kubelet,
# preloaded pause and agnhost images), or finds it in the cache, and prints:
#
#   kernel=/boot/vmlinuz-<version>
#   initrd=/boot/initrd.img-<version>     (Debian's own: finds /dev/vda, ext4)
#   disk=$NODEFALL_CACHE/vm-rig/node-<key>.img
#
# The disk is a raw ext4 image of the node image's files (nothing rebuilt)
# plus: udev (Debian's package of the image's systemd version), the kernel's modules (/lib/modules/<version>, the host's Debian
# kernel the VM boots), dropbear and its libraries (SSH), the setup unit in
# node/ (per-run config from a second disk: node name, NICs, kubelet config),
# an fstab. Boot it read-write through a copy (one per run). The key hashes
# the node image's ID, the kernel, dropbear and this directory's files.
#
# Needs: docker (the kind node image in its store), e2fsprogs (mkfs.ext4 -d), jq,
# linux-image-amd64 (kernel, modules, initrd), dropbear-bin, apt-get (udev's
# package, downloaded once into the cache).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "build-node-disk: $*" >&2; exit 1; }
cache="${NODEFALL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodefall}"
[[ "$cache" == /* ]] || cache="$PWD/$cache"

image="${NODEFALL_KIND_IMAGE:-$(NODEFALL_CACHE="$cache" bash "$here/../kind/image.sh" --tag)}"
image_id="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null)" \
  || die "no $image in Docker's store (scripts/kind/image.sh builds it)"

kver=""
for k in $(printf '%s\n' /boot/vmlinuz-* | sort -V); do
  v="${k#/boot/vmlinuz-}"
  [[ -f "/lib/modules/$v/modules.dep" && -r "/boot/initrd.img-$v" ]] && kver="$v"
done
[[ -n "$kver" ]] || die "no /boot/vmlinuz-* with /boot/initrd.img-* and modules (apt-get install linux-image-amd64)"
dropbear="$(command -v dropbear || echo /usr/sbin/dropbear)"
[[ -x "$dropbear" ]] || die "no dropbear (apt-get install dropbear-bin)"
command -v mkfs.ext4 >/dev/null || die "no mkfs.ext4 (apt-get install e2fsprogs)"

libs=()
while read -r lib; do libs+=("$lib"); done < <(ldd "$dropbear" | awk '/=> \//{ print $3 }')
key="$( { echo "$image_id $kver udev"; sha256sum "$0" "$here"/node/* "$dropbear" "${libs[@]}" | awk '{ print $1 }'; } \
  | sha256sum | cut -c1-16)"
out="$cache/vm-rig/node-$key.img"

if [[ ! -s "$out" ]]; then
  started=$SECONDS
  mkdir -p "$cache/vm-rig"
  stage="$(mktemp -d "$cache/vm-rig/node-stage.XXXXXX")"
  cid=""
  trap 'rm -rf "$stage" "$out.tmp.$$"; [[ -z "$cid" ]] || docker rm -f "$cid" >/dev/null 2>&1 || true' EXIT
  root="$stage/root"
  mkdir -p "$root"
  cid="$(docker create "$image" /bin/true)"
  docker export "$cid" | tar -x -C "$root" --numeric-owner
  docker rm "$cid" >/dev/null
  cid=""

  # udev, which the node image (a container's) leaves out: a machine needs
  # it for its devices, and logind for the ACPI power button (it watches the
  # input devices udev tags power-switch). Debian's package of the image's
  # own systemd version, unpacked (its files only).
  ver="$(sed -n '/^Package: systemd$/,/^$/s/^Version: //p' "$root/var/lib/dpkg/status")"
  [[ -n "$ver" ]] || die "no systemd version in $image's dpkg status"
  deb="$cache/vm-rig/udev_${ver//:/%3a}_amd64.deb"
  if [[ ! -s "$deb" ]]; then
    fetch() { (cd "$stage" && apt-get download -q -o APT::Sandbox::User=root "udev=$ver" >&2); }
    # Package lists older than the image's packages lack this version:
    # refreshed once, as the image's own build did.
    fetch || { apt-get update -qq >&2 && fetch; } || die "apt-get download udev=$ver failed"
    mv "$stage"/udev_*.deb "$deb"
  fi
  # Its paths are /lib and /sbin: into the merged /usr through the image's
  # symlinks, not over them.
  mkdir -p "$stage/udev"
  dpkg -x "$deb" "$stage/udev"
  tar -C "$stage/udev" -c . | tar -C "$root" -x --keep-directory-symlink

  # The kernel's modules (merged /usr: /lib is usr/lib).
  mkdir -p "$root/usr/lib/modules"
  cp -a "/lib/modules/$kver" "$root/usr/lib/modules/"
  # dropbear, with the libraries the image lacks.
  install -m 0755 "$dropbear" "$root/usr/sbin/dropbear"
  for lib in "${libs[@]}"; do
    [[ -e "$root$lib" ]] || { mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; }
  done
  mkdir -p "$root/etc/dropbear"
  dropbearkey -t ed25519 -f "$root/etc/dropbear/dropbear_ed25519_host_key" >/dev/null 2>&1
  install -m 0755 "$here/node/nodefall-vm-setup" "$root/usr/local/sbin/nodefall-vm-setup"
  install -m 0644 "$here/node/nodefall-vm-setup.service" "$here/node/dropbear.service" "$root/etc/systemd/system/"
  mkdir -p "$root/etc/systemd/system/kubelet.service.d" "$root/etc/systemd/system/multi-user.target.wants"
  install -m 0644 "$here/node/20-nodefall-vm.conf" "$root/etc/systemd/system/kubelet.service.d/"
  for u in nodefall-vm-setup.service dropbear.service; do
    ln -sf "/etc/systemd/system/$u" "$root/etc/systemd/system/multi-user.target.wants/$u"
  done
  printf '/dev/vda / ext4 rw,relatime 0 1\n' >"$root/etc/fstab"
  # A container's settings that a machine does without: kind's mount fixes,
  # and its containers' hook that mounts the kind node's fake product files
  # (a VM has its own /sys/class/dmi/id).
  rm -f "$root/etc/systemd/system/multi-user.target.wants/undo-mount-hacks.service"
  jq 'del(.hooks.createContainer)' "$root/etc/containerd/cri-base.json" >"$stage/cri-base.json"
  install -m 0644 "$stage/cri-base.json" "$root/etc/containerd/cri-base.json"

  # Room for containerd to unpack its images and for the pods.
  size_mb=$(( $(du -sm "$root" | cut -f1) + 3072 ))
  truncate -s "${size_mb}M" "$out.tmp.$$"
  mkfs.ext4 -q -F -L nodefall-node -d "$root" "$out.tmp.$$"
  mv "$out.tmp.$$" "$out"
  find "$cache/vm-rig" -maxdepth 1 -name 'node-*.img' ! -name "node-$key.img" -delete
  echo "build-node-disk: built $out (${size_mb} MB, $(du -m "$out" | cut -f1) MB used) in $((SECONDS - started))s" >&2
fi

echo "kernel=/boot/vmlinuz-$kver"
echo "initrd=/boot/initrd.img-$kver"
echo "disk=$out"
