#!/usr/bin/env bash
# Builds nodefall's kind node image with no registry: Debian packages (the
# node's OS, through mmdebstrap) and Go modules (every binary, from the Go
# module proxy), nothing pulled. Prints the image's tag on stdout when done.
#
#   scripts/kind/image.sh          build, or reuse the image already built
#   scripts/kind/image.sh --tag    print the tag the inputs give, build nothing
#   scripts/kind/image.sh prune    remove every nodefall node image but this one
#
# The tag, nodefall/kind-node:<k8s version>-<12 hex>, is a hash of this
# directory's files and the versions below: the same inputs give the same tag,
# and an image with that tag in Docker's store is used as it is. The image is
# the one thing the build leaves in Docker's store (every intermediate image
# is removed); binaries and root file systems stay in the nodefall cache
# ($NODEFALL_CACHE/kind, and the control plane under $NODEFALL_CACHE/bin,
# shared with the sim backend), so a rebuild never compiles what it has.
#
# What goes in (docs/kind-backend.md lists how it differs from kindest/node):
#   node OS        mmdebstrap --variant=minbase bookworm + systemd, dbus,
#                  containerd, runc, CNI plugins, iptables, ... (Debian's)
#   node binaries  kubelet, kubeadm, kubectl (k8s.io/kubernetes, CGO off)
#   kind's files   images/base/files of sigs.k8s.io/kind (entrypoint, units)
#   images         kube-apiserver, -controller-manager, -scheduler (the sim's
#                  binaries), kube-proxy, etcd, coredns, pause (gcc),
#                  local-path-provisioner and helper, kind-cni (./cni),
#                  kind-csi (./csi, installed by `nodefall kind up`), agnhost
#                  (the kind scenarios' web server), busybox (Debian's)
#
# Needs: docker (a running daemon; on a host without CAP_SYS_RESOURCE it must
# run scripts/kind/runc-without-sys-resource as its default runtime, see
# host-quirks.sh), go, gcc, mmdebstrap, busybox-static, jq.
# Progress goes to stderr, every command's output to $NODEFALL_CACHE/kind/build.log.
set -Eeuo pipefail
shopt -s inherit_errexit

K8S_VERSION="${NODEFALL_K8S_VERSION:-v1.35.4}"
ETCD_VERSION=v3.6.6        # what kubeadm 1.35 names (etcd:3.6.6-0)
COREDNS_VERSION=v1.13.1    # what kubeadm 1.35 names
PAUSE_VERSION=3.10.1       # kubeadm's; kind's containerd config names 3.10
LOCAL_PATH_VERSION=v0.0.30 # rancher/local-path-provisioner, kind's default storage
KIND_VERSION=v0.33.0
SUITE=bookworm

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
CACHE="${NODEFALL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodefall}"
[[ "$CACHE" == /* ]] || CACHE="$PWD/$CACHE"
KCACHE="$CACHE/kind"
LOG="$KCACHE/build.log"
REPO_NAME=nodefall/kind-node

log() { printf '[kind-image] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The tag: a hash of every file this build reads from the repository (its
# documentation and tests aside) and of the versions above (the Debian
# packages are whatever the mirror serves).
inputs_tag() {
  local h
  h="$( {
    printf '%s\n' "$K8S_VERSION" "$ETCD_VERSION" "$COREDNS_VERSION" "$PAUSE_VERSION" \
      "$LOCAL_PATH_VERSION" "$KIND_VERSION" "$SUITE"
    # Paths relative to the repository: the same inputs give the same tag
    # wherever the clone is.
    cd "$repo"
    find scripts/kind -type f ! -name '*_test.go' ! -name '*.md' -print0 | sort -z | xargs -0 sha256sum
    sha256sum scripts/provision-binaries.sh
  } | sha256sum | cut -c1-12)"
  printf '%s:%s-%s\n' "$REPO_NAME" "$K8S_VERSION" "$h"
}

TAG="$(inputs_tag)"
case "${1:-build}" in
  --tag) echo "$TAG"; exit 0 ;;
  prune)
    docker image ls --format '{{.Repository}}:{{.Tag}}' "$REPO_NAME" | while read -r img; do
      if [[ "$img" != "$TAG" ]]; then docker image rm "$img" >/dev/null && log "removed $img"; fi
    done
    exit 0 ;;
  build) ;;
  *) die "unknown argument '$1' (use: image.sh [--tag | prune])" ;;
esac

# kind itself, which `nodefall kind up` runs: installed into the cache even
# when the image is already built (a fresh cache beside a kept image).
kind_bin="$KCACHE/bin/kind-$KIND_VERSION/kind"
if [[ ! -x "$kind_bin" ]]; then
  command -v go >/dev/null || die "go is not installed (it builds kind from sigs.k8s.io/kind@$KIND_VERSION)"
  log "go install sigs.k8s.io/kind@$KIND_VERSION"
  mkdir -p "$KCACHE"
  CGO_ENABLED=0 GOBIN="$(dirname "$kind_bin")" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION" >&2
fi

if docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG is in Docker's store: nothing to build"
  echo "$TAG"
  exit 0
fi

for tool in docker go gcc mmdebstrap jq; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install docker.io golang gcc mmdebstrap jq)"
done
[[ -x /bin/busybox ]] || die "/bin/busybox is missing (apt-get install busybox-static)"
docker info >/dev/null 2>&1 || die "the Docker daemon is not running"

mkdir -p "$KCACHE"
exec 9>"$KCACHE/.build.lock"
if ! flock -n 9; then
  log "another build holds $KCACHE/.build.lock: waiting for it"
  flock 9
  if docker image inspect "$TAG" >/dev/null 2>&1; then echo "$TAG"; exit 0; fi
fi

began=$SECONDS
: >"$LOG"
work="$(mktemp -d "${TMPDIR:-/tmp}/nodefall-kind-image.XXXXXX")"
build_box="" # the container the images are loaded in, removed on exit
images=()    # intermediate images, removed on exit
bg=()        # background jobs, ended on exit
cleanup() {
  local rc=$?
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [[ -n "$build_box" ]]; then docker rm -f "$build_box" >/dev/null 2>&1 || true; fi
  if (( ${#images[@]} )); then docker image rm -f "${images[@]}" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
  if (( rc != 0 )); then
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

export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod"
minor="${K8S_VERSION#v1.}"
k8s_dir="$CACHE/bin/kubernetes-$K8S_VERSION"
etcd_dir="$CACHE/bin/etcd-$ETCD_VERSION"
bin="$KCACHE/bin"
mkdir -p "$bin"

# ---- root file systems (Debian), in the background while Go builds --------
# The node's OS, and a small one for kube-proxy (iptables, conntrack).
rootfs() { # name packages...
  local name="$1" out="$KCACHE/rootfs-$SUITE-$1.tar"
  shift
  [[ -s "$out" ]] && return 0
  local IFS=,
  run "rootfs $name (mmdebstrap)" mmdebstrap --variant=minbase --format=tar --components=main \
    --include="$*" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$SUITE" "$out.tmp" \
    "deb http://deb.debian.org/debian $SUITE main" \
    "deb http://deb.debian.org/debian $SUITE-updates main" \
    "deb http://deb.debian.org/debian-security $SUITE-security main"
  mv "$out.tmp" "$out"
}
node_packages=(systemd systemd-sysv dbus containerd runc containernetworking-plugins iptables nftables
  iproute2 conntrack ethtool socat util-linux mount kmod procps ca-certificates bash libseccomp2 jq pigz)
(
  rootfs node "${node_packages[@]}"
  rootfs proxy iptables conntrack kmod
) &
bg+=("$!")
rootfs_job=$!

# ---- binaries (Go modules), each built once into the cache -----------------
have() { [[ -x "$1" ]]; }

# The control plane the sim runs, and etcd at kubeadm's version: the
# provisioner nodefall itself runs (the same recipe, the same cache).
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  have "$k8s_dir/$b" || need_cp=1
done
if [[ -n "${need_cp:-}" ]] || ! have "$etcd_dir/etcd"; then
  log "control plane and etcd $ETCD_VERSION (scripts/provision-binaries.sh)"
  NODEFALL_CACHE="$CACHE" NODEFALL_ETCD_VERSION="$ETCD_VERSION" bash "$repo/scripts/provision-binaries.sh"
fi

# kubelet, kubeadm, kube-proxy, kubectl and agnhost from k8s.io/kubernetes:
# the provisioner's wrapper module, with the version stamped as a release
# build stamps it (kubeadm names its images after it).
need_node=()
for b in kubelet kubeadm kube-proxy kubectl; do have "$k8s_dir/$b" || need_node+=("$b"); done
agnhost_version="$(cat "$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/test/images/agnhost/VERSION" 2>/dev/null || true)"
if (( ${#need_node[@]} )) || [[ -z "$agnhost_version" ]] || ! have "$bin/agnhost-$K8S_VERSION/agnhost"; then
  w="$work/k8s"
  mkdir -p "$w"
  run "download k8s.io/kubernetes@$K8S_VERSION" bash -c "cd '$w' && go mod download -json k8s.io/kubernetes@$K8S_VERSION >download.json"
  gomod="$(jq -r .GoMod "$w/download.json")"
  {
    printf 'module nodefall.local/build\n\ngo 1.24\n\nrequire k8s.io/kubernetes %s\n\n' "$K8S_VERSION"
    grep -E '^[[:space:]]*k8s\.io/[^[:space:]]+[[:space:]]+=>[[:space:]]+\./staging/' "$gomod" \
      | awk -v v="v0.$minor" '{print "replace " $1 " => " $1 " " v}'
  } >"$w/go.mod"
  printf 'package build\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kubelet/app"\n\t_ "k8s.io/kubernetes/cmd/kubeadm/app"\n\t_ "k8s.io/kubernetes/cmd/kube-proxy/app"\n\t_ "k8s.io/kubectl/pkg/cmd"\n)\n' >"$w/tools.go"
  run "go mod tidy (k8s.io/kubernetes)" bash -c "cd '$w' && go mod tidy"
  ld="-s -w"
  for kv in "k8s.io/component-base/version.gitVersion=$K8S_VERSION" "k8s.io/component-base/version.gitMajor=1" \
    "k8s.io/component-base/version.gitMinor=${minor%%.*}" "k8s.io/component-base/version.gitTreeState=clean" \
    "k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION" "k8s.io/client-go/pkg/version.gitMajor=1" \
    "k8s.io/client-go/pkg/version.gitMinor=${minor%%.*}"; do
    ld+=" -X $kv"
  done
  mkdir -p "$k8s_dir"
  for b in "${need_node[@]}"; do
    log "go build $b"
    run "go build $b" bash -c "cd '$w' && go build -trimpath -ldflags '$ld' -o '$k8s_dir/$b.tmp' k8s.io/kubernetes/cmd/$b"
    mv "$k8s_dir/$b.tmp" "$k8s_dir/$b"
  done
  if ! have "$bin/agnhost-$K8S_VERSION/agnhost"; then
    log "go build agnhost"
    mkdir -p "$bin/agnhost-$K8S_VERSION"
    run "go build agnhost" bash -c "cd '$w' && go build -trimpath -ldflags '-s -w' -o '$bin/agnhost-$K8S_VERSION/agnhost.tmp' k8s.io/kubernetes/test/images/agnhost"
    mv "$bin/agnhost-$K8S_VERSION/agnhost.tmp" "$bin/agnhost-$K8S_VERSION/agnhost"
  fi
  agnhost_version="$(cat "$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/test/images/agnhost/VERSION")"
fi

go_install() { # name module version
  local dir="$bin/$1-$3"
  have "$dir/$1" && return 0
  log "go install $2@$3"
  run "go install $2@$3" env GOBIN="$dir" go install -trimpath -ldflags "-s -w" "$2@$3"
}
go_install coredns github.com/coredns/coredns "$COREDNS_VERSION"
go_install local-path-provisioner github.com/rancher/local-path-provisioner "$LOCAL_PATH_VERSION"

# Our own programs, each keyed by its sources: the pod network (./cni) and the
# CSI driver (./csi). own_bin NAME prints the binary's path, built if missing.
own_bin() {
  local hash out
  hash="$(cd "$here/$1" && find . -type f ! -name '*_test.go' ! -name '*.md' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)"
  out="$bin/kind-$1-$hash/kind-$1"
  if ! have "$out"; then
    log "go build kind-$1"
    mkdir -p "$(dirname "$out")"
    run "go build kind-$1" bash -c "cd '$here/$1' && GOFLAGS=-mod=readonly go build -trimpath -ldflags '-s -w' -o '$out.tmp' ."
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}
cni_bin="$(own_bin cni)"
csi_bin="$(own_bin csi)"

# pause, as the Kubernetes build makes it (static C).
pause_bin="$bin/pause-$PAUSE_VERSION/pause"
if ! have "$pause_bin"; then
  mkdir -p "$(dirname "$pause_bin")"
  k8s_src="$(cd "$work" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .Dir)"
  run "gcc pause" gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION" -o "$pause_bin.tmp" \
    "$k8s_src/build/pause/linux/pause.c"
  strip "$pause_bin.tmp"
  mv "$pause_bin.tmp" "$pause_bin"
fi
log "binaries ready ($(( SECONDS - began )) s)"

log "waiting for the root file systems (mmdebstrap)"
wait "$rootfs_job" || die "building a root file system failed (see $LOG)"
bg=()

# ---- component images (docker import of a small root holding a binary) -----
id="$$"
# image NAME ENTRYPOINT-JSON USER FILE:PATH... : a scratch image of static files.
image() {
  local name="$1" entry="$2" user="$3" root="$work/root-$RANDOM"
  shift 3
  mkdir -p "$root/etc" "$root/tmp" "$root/bin"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  local f
  for f in "$@"; do
    mkdir -p "$root/$(dirname "${f#*:}")"
    cp "${f%%:*}" "$root/${f#*:}"
  done
  local changes=(--change "ENV PATH=/usr/local/bin:/usr/bin:/bin")
  if [[ -n "$entry" ]]; then changes+=(--change "ENTRYPOINT $entry"); fi
  if [[ -n "$user" ]]; then changes+=(--change "USER $user"); fi
  run "image $name" bash -c "tar -C '$root' -c . | docker import ${changes[*]@Q} - '$name'"
  images+=("$name")
  rm -rf "$root"
}
R=registry.k8s.io
image "$R/kube-apiserver:$K8S_VERSION" "" "" "$k8s_dir/kube-apiserver:/usr/local/bin/kube-apiserver"
image "$R/kube-controller-manager:$K8S_VERSION" "" "" "$k8s_dir/kube-controller-manager:/usr/local/bin/kube-controller-manager"
image "$R/kube-scheduler:$K8S_VERSION" "" "" "$k8s_dir/kube-scheduler:/usr/local/bin/kube-scheduler"
image "$R/etcd:${ETCD_VERSION#v}-0" "" "" "$etcd_dir/etcd:/usr/local/bin/etcd"
image "$R/coredns/coredns:$COREDNS_VERSION" '["/coredns"]' "" "$bin/coredns-$COREDNS_VERSION/coredns:/coredns"
image "$R/pause:$PAUSE_VERSION" '["/pause"]' "65535:65535" "$pause_bin:/pause"
image "docker.io/kindest/local-path-provisioner:v20260820-69b56db7" "" "" \
  "$bin/local-path-provisioner-$LOCAL_PATH_VERSION/local-path-provisioner:/usr/local/bin/local-path-provisioner"
image "nodefall.local/kind-cni:v0.1.0" '["/kind-cni"]' "" "$cni_bin:/kind-cni"
image "nodefall.local/kind-csi:v0.1.0" '["/kind-csi"]' "" "$csi_bin:/kind-csi"
image "$R/e2e-test-images/agnhost:$agnhost_version" '["/agnhost"]' "" "$bin/agnhost-$K8S_VERSION/agnhost:/agnhost"
run "tag pause 3.10" docker tag "$R/pause:$PAUSE_VERSION" "$R/pause:3.10"
images+=("$R/pause:3.10")

# busybox: Debian's static busybox with its applets linked (local-path's
# helper, and a shell for tests).
bb="$work/busybox"
mkdir -p "$bb/bin" "$bb/etc" "$bb/tmp"
cp /bin/busybox "$bb/bin/"
for c in $(/bin/busybox --list); do [[ -e "$bb/bin/$c" ]] || ln -s busybox "$bb/bin/$c"; done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$bb/etc/passwd"
run "image busybox" bash -c "tar -C '$bb' -c . | docker import --change 'CMD [\"sh\"]' --change 'ENV PATH=/bin' - docker.io/library/busybox:nodefall"
images+=(docker.io/library/busybox:nodefall)
run "tag local-path-helper" docker tag docker.io/library/busybox:nodefall docker.io/kindest/local-path-helper:v20260131-7181c60a
images+=(docker.io/kindest/local-path-helper:v20260131-7181c60a)

# kube-proxy needs iptables: Debian's, under the binary.
run "import proxy rootfs" docker import "$KCACHE/rootfs-$SUITE-proxy.tar" "nodefall-build/proxy-base:$id"
images+=("nodefall-build/proxy-base:$id")
mkdir -p "$work/proxy"
cp "$k8s_dir/kube-proxy" "$work/proxy/"
printf 'FROM nodefall-build/proxy-base:%s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' "$id" >"$work/proxy/Dockerfile"
run "image kube-proxy" env DOCKER_BUILDKIT=0 docker build -q -t "$R/kube-proxy:$K8S_VERSION" "$work/proxy"
images+=("$R/kube-proxy:$K8S_VERSION")

# ---- the node ---------------------------------------------------------------
# kind's own base files and manifests, from its module's source.
kind_src="$(cd "$work" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)"
[[ -d "$kind_src/images/base/files" ]] || die "sigs.k8s.io/kind@$KIND_VERSION's source has no images/base/files ($kind_src)"
ctx="$work/node"
mkdir -p "$ctx/files/kind/manifests" "$ctx/bin"
cp -r "$kind_src/images/base/files/." "$ctx/files/"
chmod -R u+w "$ctx/files"
for b in kubelet kubeadm kubectl; do cp "$k8s_dir/$b" "$ctx/bin/"; done
chmod 755 "$ctx/bin/"* "$ctx/files/usr/local/bin/"* "$ctx/files/kind/bin/"*
cp "$here/cni/default-cni.yaml" "$ctx/files/kind/manifests/default-cni.yaml"
# kind's storage manifest is a Go constant in its module; its images are the ones above.
# shellcheck disable=SC2016 # the backquotes are Go's, matched literally
awk '/^const defaultStorageManifest = `/{f=1; next} f && /^`$/{f=0} f' "$kind_src/pkg/build/nodeimage/const_storage.go" \
  | sed -e 's|` + storageProvisionerImage + `|docker.io/kindest/local-path-provisioner:v20260820-69b56db7|' \
    -e 's|` + storageHelperImage + `|docker.io/kindest/local-path-helper:v20260131-7181c60a|' \
    >"$ctx/files/kind/manifests/default-storage.yaml"
grep -q 'local-path-provisioner:v20260820' "$ctx/files/kind/manifests/default-storage.yaml" \
  || die "kind $KIND_VERSION's storage manifest was not found in const_storage.go"
echo "$K8S_VERSION" >"$ctx/files/kind/version"
cp "$here/node/Dockerfile" "$here/node/nodefall-host-guard.service" "$ctx/"
run "import node rootfs" docker import "$KCACHE/rootfs-$SUITE-node.tar" "nodefall-build/node-rootfs:$id"
images+=("nodefall-build/node-rootfs:$id")
run "node base image" env DOCKER_BUILDKIT=0 docker build -q --build-arg "ROOTFS=nodefall-build/node-rootfs:$id" \
  -t "nodefall-build/node-base:$id" "$ctx"
images+=("nodefall-build/node-base:$id")

# Every image goes into the node's containerd content store, pinned, not
# unpacked (CRI unpacks on first use): no node ever pulls.
preload=("$R/kube-apiserver:$K8S_VERSION" "$R/kube-controller-manager:$K8S_VERSION"
  "$R/kube-scheduler:$K8S_VERSION" "$R/kube-proxy:$K8S_VERSION" "$R/etcd:${ETCD_VERSION#v}-0"
  "$R/coredns/coredns:$COREDNS_VERSION" "$R/pause:$PAUSE_VERSION" "$R/pause:3.10"
  docker.io/kindest/local-path-provisioner:v20260820-69b56db7
  docker.io/kindest/local-path-helper:v20260131-7181c60a nodefall.local/kind-cni:v0.1.0
  nodefall.local/kind-csi:v0.1.0
  "$R/e2e-test-images/agnhost:$agnhost_version" docker.io/library/busybox:nodefall)
run "docker save" docker save -o "$work/images.tar" "${preload[@]}"
build_box="nodefall-kind-image-build-$id"
run "build container" docker run -d --privileged --name "$build_box" --entrypoint sleep "nodefall-build/node-base:$id" infinity
run "containerd in the build container" docker exec -d "$build_box" sh -c 'containerd >/tmp/containerd.log 2>&1'
for _ in $(seq 1 100); do
  docker exec "$build_box" ctr version >/dev/null 2>&1 && break
  sleep 0.2
done
run "copy images" docker cp "$work/images.tar" "$build_box:/tmp/images.tar"
run "ctr import" docker exec "$build_box" ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned \
  --all-platforms --no-unpack --digests /tmp/images.tar
# shellcheck disable=SC2016 # expanded by the container's shell
run "stop containerd" docker exec "$build_box" sh -c 'kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.1; done; rm -rf /tmp/*'
run "commit $TAG" docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
  --change "LABEL io.nodefall.kind-node.inputs=${TAG##*-}" "$build_box" "$TAG"
log "built $TAG in $(( SECONDS - began )) s ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
echo "$TAG"
