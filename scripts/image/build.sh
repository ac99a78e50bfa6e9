#!/usr/bin/env bash
# Builds nodefall's container image (the repository's Dockerfile) with no
# registry and prints its tag on stdout; progress goes to stderr.
#
#   scripts/image/build.sh [BINARY]          build, or reuse the image already built
#   scripts/image/build.sh --tag [BINARY]    print the tag the inputs give, build nothing
#   scripts/image/build.sh --size [BINARY]   print the image's and its base's sizes
#   scripts/image/build.sh --base [BINARY]   build, or reuse, the base only; print its tag
#   scripts/image/build.sh --base-tag [BINARY]  print the base's tag, build nothing
#
# BINARY: the nodefall binary to put in the image (default
# ${CARGO_TARGET_DIR:-target}/release/nodefall). The Docker CLI is this
# host's (`command -v docker`); the kind backend drives node containers with it.
#
# The base, nodefall/nodefall-base:bookworm-<12 hex>, is Debian bookworm
# from Debian's mirror: mmdebstrap --variant=minbase + ca-certificates (and
# libvirt0 when BINARY links libvirt, as a `--features libvirt` build does),
# brought into Docker's store with `docker import`. The image,
# nodefall/nodefall:<version>-<12 hex>, is the Dockerfile on that base with
# BINARY and the Docker CLI (`docker build`, the legacy builder unless
# DOCKER_BUILDKIT says otherwise). Each tag is a hash of its inputs (the
# base's: its packages, the mirrors and the part of this script that makes
# it; the image's: the base's tag, this directory, the Dockerfile, the
# binary's and the CLI's bytes, the version, the git commit): the same inputs
# give the same tag, and an image with that tag in Docker's store is used as
# it is.
#
# What stays in Docker's store: the base and the image. A failed build's
# containers and intermediate images are removed; so is the image this script
# built before from the same BINARY path, once a new one is built (one image
# per binary: the release build's, the tests' debug build's).
#
# Needs: docker (a running daemon), mmdebstrap (root, for the base), strip
# (binutils; optional: debug info is stripped from the copy in the image).
set -Eeuo pipefail
shopt -s inherit_errexit

SUITE=bookworm
BASE_REPO=nodefall/nodefall-base
REPO_NAME=nodefall/nodefall
MIRRORS=("deb http://deb.debian.org/debian $SUITE main"
  "deb http://deb.debian.org/debian $SUITE-updates main"
  "deb http://deb.debian.org/debian-security $SUITE-security main")

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
CACHE="${NODEFALL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodefall}"
[[ "$CACHE" == /* ]] || CACHE="$PWD/$CACHE"
ICACHE="$CACHE/image"
LOG="$ICACHE/build.log"

log() { printf '[image] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
mb() { awk '{ printf "%.0f MB", $1 / 1e6 }'; }
hash12() { sha256sum | cut -c1-12; }

mode=build
case "${1:-}" in
  --tag | --size | --base | --base-tag) mode="${1#--}"; shift ;;
  -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  -*) die "unknown option '$1' (use: build.sh [--tag | --size | --base | --base-tag] [BINARY])" ;;
esac
(( $# <= 1 )) || die "one binary at most (use: build.sh [--tag | --size | --base | --base-tag] [BINARY])"

bin="${1:-${CARGO_TARGET_DIR:-$repo/target}/release/nodefall}"
[[ "$bin" == /* ]] || bin="$PWD/$bin"
docker_cli="$(command -v docker || true)"
[[ -n "$docker_cli" ]] || die "docker is not installed (apt-get install docker.io)"
docker_cli="$(readlink -f "$docker_cli")"

# ---- the base: its packages and its tag --------------------------------------
packages=(ca-certificates)
if [[ -e "$bin" || ( "$mode" != base && "$mode" != base-tag ) ]]; then
  [[ -x "$bin" ]] || die "no nodefall binary at $bin (cargo build --release --locked, or pass its path)"
  # A libvirt build links libvirt.so.0: Debian's libvirt0 is the one that fits.
  # (Not `grep -q`: with pipefail, ldd killed by SIGPIPE would read as no.)
  if ldd "$bin" 2>/dev/null | grep 'libvirt\.so' >/dev/null; then packages+=(libvirt0); fi
fi
base_packages="$(IFS=+; echo "${packages[*]}")"
base_hash="$( {
  printf '%s\n' "$SUITE" "${packages[@]}" "${MIRRORS[@]}"
  sed -n '/^# ---- the base (/,/^# ---- end of the base/p' "$here/build.sh"
} | hash12)"
BASE_TAG="$BASE_REPO:$SUITE-$base_hash"

# ---- the image: its inputs and its tag ---------------------------------------
if [[ "$mode" != base && "$mode" != base-tag ]]; then
  version="$("$bin" --version 2>/dev/null | awk 'NR == 1 { print $2 }')" || true
  if [[ -z "$version" ]]; then
    version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n1)"
  fi
  tag_version="$(tr -c 'A-Za-z0-9_.\n-' '-' <<<"${version:-unknown}")"
  revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  if [[ "$revision" != unknown ]] && [[ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    revision+="-dirty"
  fi
  source_url="$(git -C "$repo" remote get-url origin 2>/dev/null || true)"
  strip_tool="$(command -v strip || true)"
  bin_sum="$(sha256sum "$bin" | cut -d' ' -f1)"
  image_hash="$( {
    printf '%s\n' "$BASE_TAG" "$version" "$revision" "$source_url" "strip=${strip_tool:+1}" "$bin_sum"
    sha256sum "$docker_cli" | cut -d' ' -f1
    cd "$repo"
    sha256sum Dockerfile
    find scripts/image -type f ! -name '*.md' -print0 | sort -z | xargs -0 sha256sum
  } | hash12)"
  TAG="$REPO_NAME:$tag_version-$image_hash"
  # Which binary path an image was built from (hashed): the image built
  # before from the same path is removed once a new one is made.
  bin_key="$(printf '%s' "$bin" | hash12)"
fi

present() { docker image inspect "$1" >/dev/null 2>&1; }
size_of() { docker image inspect -f '{{.Size}}' "$1" | mb; }

case "$mode" in
  tag) echo "$TAG"; exit 0 ;;
  base-tag) echo "$BASE_TAG"; exit 0 ;;
  size)
    present "$TAG" || die "$TAG is not built (scripts/image/build.sh ${1:-})"
    base="$(docker image inspect -f '{{index .Config.Labels "io.nodefall.image.base"}}' "$TAG")"
    printf '%s\t%s\n' "$TAG" "$(size_of "$TAG")"
    if [[ -n "$base" ]] && present "$base"; then printf '%s\t%s\n' "$base" "$(size_of "$base")"; fi
    printf '%s\t%s\n' "nodefall binary (in the image)" \
      "$(docker run --rm --entrypoint stat "$TAG" -c %s /usr/local/bin/nodefall | mb)"
    exit 0 ;;
esac

docker info >/dev/null 2>&1 || die "the Docker daemon is not running (docker info failed)"
mkdir -p "$ICACHE"
exec 9>"$ICACHE/.build.lock"
if ! flock -n 9; then
  log "another build holds $ICACHE/.build.lock: waiting for it"
  flock 9
fi

began=$SECONDS
began_at="$(date +%s)"
work="$(mktemp -d "${TMPDIR:-/tmp}/nodefall-image.XXXXXX")"
: >"$LOG"
made_image="" # the image built by this run, removed if it does not run
cleanup() {
  local rc=$?
  rm -rf "$work"
  if (( rc != 0 )); then
    # A failed `docker build` leaves its last steps' images untagged: they
    # carry the Dockerfile's first label. Only those made since this script
    # began are removed: an untagged image of the same Dockerfile that was
    # there before is someone else's. (The lock keeps other builds of this
    # script out.)
    local id created
    docker image ls --all --filter dangling=true --filter "label=org.opencontainers.image.title=nodefall" \
      --format '{{.ID}} {{.CreatedAt}}' 2>/dev/null | while read -r id created; do
      created="$(date -d "${created% *}" +%s 2>/dev/null || echo 0)" # "2026-11-28 07:30:01 +0000 UTC"
      if (( created >= began_at )); then docker image rm "$id" >/dev/null 2>&1 || true; fi
    done
    if [[ -n "$made_image" ]]; then docker image rm "$made_image" >/dev/null 2>&1 || true; fi
    log "failed after $(( SECONDS - began )) s; the last lines of $LOG:"
    tail -n 30 "$LOG" | sed 's/^/  | /' >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# run DESCRIPTION COMMAND...: the command's output goes to the log.
run() {
  local what="$1" t=$SECONDS
  shift
  printf '\n[%s] %s\n$ %s\n' "$(date -u +%H:%M:%S)" "$what" "$*" >>"$LOG"
  "$@" >>"$LOG" 2>&1 || { log "failed: $what: $*"; return 1; }
  printf '[%s] %s: %d s\n' "$(date -u +%H:%M:%S)" "$what" $(( SECONDS - t )) >>"$LOG"
}

# ---- the base (everything down to the end marker is in the base's hash) ----
if present "$BASE_TAG"; then
  log "base $BASE_TAG is in Docker's store"
else
  command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (apt-get install mmdebstrap); it builds the base"
  log "base $BASE_TAG: mmdebstrap --variant=minbase $SUITE + ${packages[*]} (Debian's mirror)"
  rootfs="$work/rootfs.tar"
  (
    IFS=,
    run "rootfs (mmdebstrap)" mmdebstrap --variant=minbase --format=tar --components=main \
      --include="${packages[*]}" --aptopt='APT::Install-Recommends "false"' \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      "$SUITE" "$rootfs" "${MIRRORS[@]}"
  )
  run "import the base" docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --change "LABEL io.nodefall.image.base-inputs=$base_hash" \
    --change "LABEL io.nodefall.image.base-packages=$base_packages" \
    "$rootfs" "$BASE_TAG"
  rm -f "$rootfs"
  log "base built in $(( SECONDS - began )) s ($(size_of "$BASE_TAG"))"
  # Bases of the same packages and other inputs (an older script or
  # Dockerfile): removed, or only untagged while an image still stands on one
  # (it goes when that image goes). A base of other packages stays.
  docker image ls --filter "label=io.nodefall.image.base-packages=$base_packages" \
    --format '{{.Repository}}:{{.Tag}}' "$BASE_REPO" | while read -r old; do
    if [[ "$old" != "$BASE_TAG" ]] && docker image rm "$old" >/dev/null 2>&1; then log "removed the tag $old (other inputs)"; fi
  done
fi
# ---- end of the base ----------------------------------------------------------
if [[ "$mode" == base ]]; then
  echo "$BASE_TAG"
  exit 0
fi

if present "$TAG"; then
  log "$TAG is in Docker's store: nothing to build"
  echo "$TAG"
  exit 0
fi

# ---- the image -----------------------------------------------------------------
t=$SECONDS
ctx="$work/ctx"
mkdir -p "$ctx"
if [[ -z "$strip_tool" ]] || ! run "strip debug info (a copy)" "$strip_tool" --strip-debug -o "$ctx/nodefall" "$bin"; then
  cp "$bin" "$ctx/nodefall"
fi
cp "$docker_cli" "$ctx/docker"
chmod 0755 "$ctx/nodefall" "$ctx/docker"
log "docker build $TAG ($(wc -c <"$ctx/nodefall" | mb) binary, version $version, revision $revision)"
run "docker build" env DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}" docker build --force-rm \
  --build-arg "BASE=$BASE_TAG" --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
  --build-arg "CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)" --build-arg "SOURCE=$source_url" \
  --label "io.nodefall.image.base=$BASE_TAG" --label "io.nodefall.image.binary=$bin_key" \
  -t "$TAG" -f "$repo/Dockerfile" "$ctx"
made_image="$TAG"

# Does it run? (A library missing from the base shows here, not in a test.)
said="$(docker run --rm "$TAG" --version 2>&1)" || die "$TAG: nodefall --version failed: $said"
cli="$(docker run --rm --entrypoint docker "$TAG" --version 2>&1)" || die "$TAG: docker --version failed: $cli"
log "built $TAG in $(( SECONDS - t )) s ($(size_of "$TAG")): ${said%%$'\n'*}; $cli"
made_image=""

# The image built before from the same binary path, now replaced.
docker image ls --filter "label=io.nodefall.image.binary=$bin_key" --format '{{.Repository}}:{{.Tag}}' "$REPO_NAME" \
  | while read -r old; do
    if [[ "$old" != "$TAG" ]] && docker image rm "$old" >/dev/null 2>&1; then log "removed $old (an earlier build of $bin)"; fi
  done
echo "$TAG"
