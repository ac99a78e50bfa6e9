#!/usr/bin/env bash
# Builds a release of nodefall for one target and packages it; prints the
# tarball's path on stdout, progress on stderr.
#
#   scripts/release.sh [--target TRIPLE] [--libvirt] [--zigbuild] [--out DIR]
#
#   --target TRIPLE  the Rust target (default: this host's, `rustc -vV`; its
#                    standard library must be installed: `rustup target add`)
#   --libvirt        with the libvirt backend (`--features libvirt`: needs
#                    libvirt's headers and pkg-config to build, libvirt0 to
#                    run); the tarball's name ends in -libvirt
#   --zigbuild       `cargo zigbuild` (cargo-zigbuild, with zig) instead of
#                    `cargo build`: how the release workflow builds the static
#                    musl targets
#   --out DIR        where the tarball and its checksum go (default: dist/ in
#                    cargo's target directory, $CARGO_TARGET_DIR or target/)
#
# The build is `cargo build --release --locked --target TRIPLE`. It writes
# DIR/nodefall-<version>-<target>[-libvirt].tar.gz, a directory of that name
# holding the binary, README.md and the license file if the repository has
# one, and beside it <tarball>.sha256 (`sha256sum -c` checks it, in DIR).
# The tarball is reproducible: sorted, owned by root, dated at
# SOURCE_DATE_EPOCH or else the commit's time.
#
# When the binary can run here (the host's target, or a static musl build for
# the host's architecture), the packaged copy's `--version` is run as a smoke
# check. It names the commit the build was made from (build.rs; with
# -dirty when the sources differ from it; NODEFALL_COMMIT says it where there
# is no .git).
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[release] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

target=""
libvirt=""
builder=(cargo build)
out=""
while (($#)); do
  case "$1" in
    --target)
      (($# >= 2)) || die "--target needs a target triple"
      target="$2"
      shift 2
      ;;
    --target=*) target="${1#*=}" && shift ;;
    --libvirt) libvirt=1 && shift ;;
    --zigbuild) builder=(cargo zigbuild) && shift ;;
    --out)
      (($# >= 2)) || die "--out needs a directory"
      out="$2"
      shift 2
      ;;
    --out=*) out="${1#*=}" && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die "unknown argument '$1' (scripts/release.sh --help)" ;;
  esac
done

host="$(rustc -vV | sed -n 's/^host: //p')"
[[ -n "$host" ]] || die "cannot tell this host's target from 'rustc -vV'"
target="${target:-$host}"
[[ "$target" =~ ^[A-Za-z0-9_.-]+$ ]] || die "not a target triple: '$target'"

pkgid="$(cargo pkgid --locked -p nodefall)" # path+file:///...#nodefall@0.1.0
version="${pkgid##*[@#]}"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || die "no version in '$pkgid'"
metadata="$(cargo metadata --locked --no-deps --format-version 1)"
target_dir="$(grep -o '"target_directory":"[^"]*"' <<<"$metadata" | sed 's/.*:"\(.*\)"$/\1/')"
[[ -n "$target_dir" ]] || die "cargo metadata names no target directory"
out="${out:-$target_dir/dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

name="nodefall-$version-$target${libvirt:+-libvirt}"
features=()
if [[ -n "$libvirt" ]]; then features=(--features libvirt); fi

build=("${builder[@]}" --release --locked --target "$target" "${features[@]}")
log "building $name: ${build[*]}"
started=$SECONDS
"${build[@]}" >&2
log "built in $((SECONDS - started)) s"
binary="$target_dir/$target/release/nodefall"
[[ -x "$binary" ]] || die "the build left no $binary"

stage="$(mktemp -d "${TMPDIR:-/tmp}/nodefall-release.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$name"
install -m 0755 "$binary" "$stage/$name/nodefall"
install -m 0644 README.md "$stage/$name/README.md"
licenses=0
shopt -s nullglob
for f in LICENSE* COPYING*; do
  install -m 0644 "$f" "$stage/$name/$f"
  licenses=$((licenses + 1))
done
shopt -u nullglob
((licenses)) || log "note: the repository has no LICENSE file; the tarball has none"

epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
tarball="$out/$name.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$stage" -cf - "$name" | gzip -n >"$tarball.part"
mv "$tarball.part" "$tarball"
(cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
log "packaged $tarball ($(du -k "$tarball" | cut -f1) kB; the binary $(du -k "$binary" | cut -f1) kB)"
(cd "$out" && sha256sum -c --quiet "$name.tar.gz.sha256") || die "$tarball.sha256 does not check"
log "$(cat "$tarball.sha256")"

# A static musl binary runs on any Linux of its architecture.
runs_here=""
if [[ "$target" == "$host" ]] \
  || [[ "$target" == "${host%%-*}-unknown-linux-musl" && "$host" == *-linux-* ]]; then
  runs_here=1
fi
if [[ -n "$runs_here" ]]; then
  mkdir "$stage/check"
  tar -xzf "$tarball" -C "$stage/check"
  if ! shown="$("$stage/check/$name/nodefall" --version)"; then
    die "the packaged binary does not run ($name/nodefall --version failed)"
  fi
  while IFS= read -r line; do log "  $line"; done <<<"$shown"
  [[ "$shown" == "nodefall $version ("* ]] || die "its --version does not start 'nodefall $version ('"
  grep -qx "target: $target" <<<"$shown" || die "its --version does not say 'target: $target'"
  if [[ "$shown" == *"-dirty"* ]]; then
    log "warning: built from sources that differ from the commit (-dirty)"
  fi
else
  log "not run: a $target binary does not run on this $host host"
fi
printf '%s\n' "$tarball"
