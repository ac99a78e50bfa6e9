#!/usr/bin/env bash
# Builds the control-plane binaries the `sim` backend runs (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, kwok) from Go modules into a
# per-user cache keyed by version. Anything already in the cache is reused,
# never rebuilt. Without Go it downloads the official release binaries instead
# (needs dl.k8s.io and github.com). nodefall runs this same script (it is
# embedded in the binary) when `sim up` finds a binary missing, so CI and users
# share one recipe.
#
# The output of every go/curl/tar command goes to $NODEFALL_CACHE/provision.log
# (rewritten on each run that has something to do). When any command fails the
# script prints that command, its exit code, its line here and the log's last
# lines, and exits with the command's exit code.
#
# Environment:
#   NODEFALL_CACHE       cache root (default: $XDG_CACHE_HOME/nodefall or ~/.cache/nodefall)
#   NODEFALL_K8S_VERSION Kubernetes release (default v1.35.4)
#   NODEFALL_ETCD_VERSION etcd release (default v3.5.35)
#   NODEFALL_KWOK_VERSION KWOK release (default v0.8.0)
#   NODEFALL_CSI_SRC     the kind clusters' CSI driver's sources (scripts/kind/csi),
#   NODEFALL_CSI_BIN     and where its binary goes: built with Go when both are set
#                        and the binary is missing (nodefall passes both; without Go,
#                        or when the build fails, the sim runs without its attacher)
# -E: functions and subshells inherit the ERR trap below; inherit_errexit: a
# failure inside $(...) ends it instead of being ignored.
set -Eeuo pipefail
shopt -s inherit_errexit

K8S_VERSION="${NODEFALL_K8S_VERSION:-v1.35.4}"
ETCD_VERSION="${NODEFALL_ETCD_VERSION:-v3.5.35}"
KWOK_VERSION="${NODEFALL_KWOK_VERSION:-v0.8.0}"
CACHE="${NODEFALL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodefall}"
# Absolute, because the build commands run in other directories.
[[ "$CACHE" == /* ]] || CACHE="$PWD/$CACHE"
LOG="$CACHE/provision.log"

log() { printf '[provision] %s\n' "$*" >&2; }

have() { [[ -x "$1" ]]; }

k8s_dir="$CACHE/bin/kubernetes-$K8S_VERSION"
etcd_dir="$CACHE/bin/etcd-$ETCD_VERSION"
# Built from source, kwok gets two fixes (kwok_fix below); the directory's
# suffix keeps a binary cached before them out of use. A downloaded release (no
# Go) goes there too, without them.
KWOK_FIX="nodefall.2"
kwok_dir="$CACHE/bin/kwok-$KWOK_VERSION+$KWOK_FIX"

# One provisioner at a time: a second one (parallel tests, two runs started
# together) waits for the first, then finds its binaries built. Without the
# lock both built into the same temporary names and one moved the other's
# file away (seen: `mv .../etcd.tmp` failing).
mkdir -p "$CACHE"
if command -v flock >/dev/null; then
  exec 9>"$CACHE/.provision.lock"
  if ! flock -n 9; then
    log "another provisioning is running (lock $CACHE/.provision.lock): waiting for it"
    flock 9
  fi
fi

need_k8s=0 need_etcd=0 need_kwok=0
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  have "$k8s_dir/$b" || need_k8s=1
done
have "$etcd_dir/etcd" || need_etcd=1
have "$kwok_dir/kwok" || need_kwok=1
need_csi=0
if [[ -n "${NODEFALL_CSI_SRC:-}" && -n "${NODEFALL_CSI_BIN:-}" ]] && ! have "$NODEFALL_CSI_BIN"; then
  need_csi=1
fi

if (( need_k8s + need_etcd + need_kwok + need_csi == 0 )); then
  log "all binaries cached under $CACHE/bin"
  exit 0
fi

# Failure reporting. The first failing command is reported once: a failure
# inside a pipeline or $(...) is reported there, and the command around it then
# fails too, so later reports are suppressed through a marker in the work dir.
work=""
first_report() {
  [[ -n "$work" && -d "$work" ]] || return 0
  [[ ! -e "$work/.reported" ]] || return 1
  : >"$work/.reported"
}
tail_log() {
  [[ -s "$LOG" ]] || return 0
  log "last lines of $LOG:"
  tail -n 25 "$LOG" | sed 's/^/  | /' >&2
}
advice() {
  if [[ -f "$LOG" ]]; then log "full log: $LOG"; fi
  log "fix the cause above and run again; binaries already built stay in $CACHE/bin"
}
# A command run through `run` failed: its output is in the log.
report_run_failure() { # exit-code command line dir
  local msg
  first_report || return 0
  msg="error: \`$2\` (in $4) failed with exit code $1 at provision-binaries.sh line $3"
  log "$msg"
  tail_log
  printf '[provision] %s\n' "$msg" >>"$LOG"
  advice
}
# Any other command failed: its own output is already on stderr.
on_error() { # exit-code command line
  first_report || return 0
  log "error: \`$2\` failed with exit code $1 at provision-binaries.sh line $3"
  advice
}
trap 'on_error "$?" "$BASH_COMMAND" "$LINENO"' ERR

missing_msg() {
  cat >&2 <<MSG
[provision] error: the sim backend needs kube-apiserver, kube-controller-manager,
kube-scheduler ($K8S_VERSION), etcd ($ETCD_VERSION) and kwok ($KWOK_VERSION),
and they are not in $CACHE/bin.
$1
Install Go (https://go.dev/dl/, 1.24 or newer) so nodefall can build them, or
place the release binaries at:
  $k8s_dir/{kube-apiserver,kube-controller-manager,kube-scheduler}
  $etcd_dir/etcd
  $kwok_dir/kwok
MSG
  exit 3
}

wait_for() { # pid seconds: true once pid has exited
  local i
  for (( i = 0; i < $2 * 10; i++ )); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# The words, quoted only where needed, for pasting into a shell.
quote() {
  local word out=()
  for word in "$@"; do
    if [[ "$word" =~ ^[][A-Za-z0-9_./:=@,+%{}-]+$ ]]; then out+=("$word"); else out+=("'${word//\'/\'\\\'\'}'"); fi
  done
  printf '%s' "${out[*]}"
}

# run DIR COMMAND...: runs COMMAND in DIR with its stdout and stderr appended
# to the log (stdout to $RUN_STDOUT instead when set), printing a line every
# 30 s so a long build shows life. On failure it reports the command with the
# log's tail and returns the command's exit code.
run() {
  local dir="$1" start=$SECONDS pid rc=0 out="${RUN_STDOUT:-$LOG}" cmd
  shift
  cmd="$(quote "$@")"
  printf '\n[%s] (in %s) $ %s\n' "$(date -u +%H:%M:%S)" "$dir" "$cmd" >>"$LOG"
  # The command's own failure is reported below, not by the inherited ERR trap.
  (trap - ERR && cd "$dir" && exec "$@") >>"$out" 2>>"$LOG" &
  pid=$!
  while ! wait_for "$pid" 30; do
    log "  still running $1 $2 ... ${*: -1} ($(( SECONDS - start ))s)"
  done
  wait "$pid" || rc=$?
  if (( rc != 0 )); then
    # `go mod download -json` reports its error on stdout.
    if [[ "$out" != "$LOG" ]]; then tail -n 20 "$out" >>"$LOG"; fi
    report_run_failure "$rc" "$cmd" "${BASH_LINENO[0]}" "$dir"
    return "$rc"
  fi
}

mkdir -p "$CACHE"
: >"$LOG"
work="$(mktemp -d "${TMPDIR:-/tmp}/nodefall-provision.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Without Go: download the official release binaries (needs internet access to
# dl.k8s.io and github.com).
download_all() {
  local arch os=linux tmp="$work/download"
  case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) missing_msg "No Go toolchain, and no release binaries for $(uname -m)." ;;
  esac
  command -v curl >/dev/null || missing_msg "Neither go nor curl is installed."
  mkdir -p "$tmp"
  fetch() { log "  downloading $1"; run "$tmp" curl -fsSL --retry 3 -o "$2" "$1"; }
  if (( need_k8s )); then
    mkdir -p "$k8s_dir"
    for b in kube-apiserver kube-controller-manager kube-scheduler; do
      have "$k8s_dir/$b" && continue
      fetch "https://dl.k8s.io/release/$K8S_VERSION/bin/$os/$arch/$b" "$tmp/$b" \
        || missing_msg "Downloading $b failed."
      chmod +x "$tmp/$b" && mv "$tmp/$b" "$k8s_dir/$b"
    done
  fi
  if (( need_etcd )); then
    fetch "https://github.com/etcd-io/etcd/releases/download/$ETCD_VERSION/etcd-$ETCD_VERSION-$os-$arch.tar.gz" "$tmp/etcd.tgz" \
      || missing_msg "Downloading etcd failed."
    run "$tmp" tar -xzf "$tmp/etcd.tgz" -C "$tmp"
    mkdir -p "$etcd_dir" && mv "$tmp/etcd-$ETCD_VERSION-$os-$arch/etcd" "$etcd_dir/etcd"
  fi
  if (( need_kwok )); then
    fetch "https://github.com/kubernetes-sigs/kwok/releases/download/$KWOK_VERSION/kwok-$os-$arch" "$tmp/kwok" \
      || missing_msg "Downloading kwok failed."
    chmod +x "$tmp/kwok" && mkdir -p "$kwok_dir" && mv "$tmp/kwok" "$kwok_dir/kwok"
    log "  the downloaded kwok lacks nodefall's fix of its pod-IP race (kwok_fix): install Go for it"
  fi
  log "binaries downloaded to $CACHE/bin"
  exit 0
}

if ! command -v go >/dev/null; then
  if (( need_csi )); then
    log "go not found: the CSI driver (csi.nodefall.dev) has no release to download, so the simulated cluster runs without it"
  fi
  if (( need_k8s + need_etcd + need_kwok == 0 )); then
    exit 0
  fi
  log "go not found: downloading the official release binaries instead"
  download_all
fi

export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0

# Wrapper module for a module whose go.mod replaces its sibling modules with
# local paths (k8s.io/kubernetes, go.etcd.io/etcd/server/v3): require it, and
# replace each locally-replaced dependency by a published version: the one the
# upstream go.mod requires, or $4 where upstream requires the v0.0.0 placeholder.
wrapper() { # dir module version staging-version
  local dir="$1" module="$2" version="$3" staging="$4" gomod
  mkdir -p "$dir"
  RUN_STDOUT="$dir/download.json" run "$dir" go mod download -json "$module@$version"
  gomod="$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' "$dir/download.json")"
  if [[ ! -f "$gomod" ]]; then
    log "error: \`go mod download -json $module@$version\` named no readable go.mod (\"$gomod\"); its output:"
    sed 's/^/  | /' "$dir/download.json" >&2
    return 1
  fi
  printf 'module nodefall.local/build\n\ngo 1.24\n\nrequire %s %s\n\n' "$module" "$version" >"$dir/go.mod"
  replaces "$gomod" "$staging" >>"$dir/go.mod"
}

# Prints `replace dep => dep version` for each `dep => ./path` line of the go.mod
# $1, inside or outside a replace ( ... ) block, that the go.mod also requires.
replaces() { # upstream-go.mod staging-version
  local gomod="$1" staging="$2" dep target required
  # `|| true` on the greps: matching nothing is a valid answer, not a failure
  # (pipefail would otherwise end the script without a word).
  { grep -E '^[[:space:]]*(replace[[:space:]]+)?[^[:space:]]+[[:space:]]+=>[[:space:]]+\.\.?/' "$gomod" || true; } \
    | sed -E 's/^[[:space:]]*(replace[[:space:]]+)?//' \
    | while read -r dep _ target; do
        [[ "$target" == *FORBIDDEN* ]] && continue
        # A dependency replaced upstream but not required (k8s.io/sample-cli-plugin) has no version.
        required="$({ grep -E "^[[:space:]]*(require[[:space:]]+)?$dep[[:space:]]+v" "$gomod" || true; } | awk '{print $NF}' | head -n1)"
        [[ -z "$required" ]] && continue
        [[ "$required" == v0.0.0 ]] && required="$staging"
        echo "replace $dep => $dep $required"
      done
}

if (( need_k8s )); then
  start=$(date +%s)
  log "building Kubernetes $K8S_VERSION control plane (first build takes a while)"
  w="$work/kubernetes"
  minor="${K8S_VERSION#v1.}"            # 35.4
  wrapper "$w" k8s.io/kubernetes "$K8S_VERSION" "v0.$minor"
  printf 'package build\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler/app"\n)\n' >"$w/tools.go"
  run "$w" go mod tidy
  mkdir -p "$k8s_dir.tmp"
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    if ! have "$k8s_dir/$b"; then
      log "  go build $b"
      run "$w" go build -trimpath -ldflags "$ldflags" -o "$k8s_dir.tmp/$b" "k8s.io/kubernetes/cmd/$b"
    fi
  done
  mkdir -p "$k8s_dir"
  for f in "$k8s_dir.tmp"/*; do if [[ -e "$f" ]]; then mv "$f" "$k8s_dir/"; fi; done
  rmdir "$k8s_dir.tmp"
  log "Kubernetes $K8S_VERSION built in $(( $(date +%s) - start ))s"
fi

if (( need_etcd )); then
  start=$(date +%s)
  log "building etcd $ETCD_VERSION"
  w="$work/etcd"
  wrapper "$w" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "$ETCD_VERSION"
  printf 'package build\n\nimport _ "go.etcd.io/etcd/server/v3/etcdmain"\n' >"$w/tools.go"
  run "$w" go mod tidy
  mkdir -p "$etcd_dir"
  run "$w" go build -trimpath -ldflags "-s -w" -o "$etcd_dir/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$etcd_dir/etcd.tmp" "$etcd_dir/etcd"
  log "etcd $ETCD_VERSION built in $(( $(date +%s) - start ))s"
fi

# Two races in kwok v0.8.0 (and main as of 2026-11), both seen failing CI
# (docs/sim-backend.md), both in pkg/kwok/controllers:
# 1. Its pod controller makes a node's pod-IP pool on first use with a Load
#    then a Store (pod_controller.go, ipPool()): two of its stage workers
#    making a node's first pods Running at the same moment can each make a
#    pool, and both pods get its first address. The fix makes the pool with
#    LoadOrStore.
# 2. It acts on a node's pods only while its cache of the node's Lease names
#    it the holder (readOnly -> Held), but once it has written the Lease it
#    lists the node's pods at once (onNodeManaged): a pod listed before the
#    Lease reaches the cache is skipped for good, so a pod of a node powered
#    on again stayed not Ready. The fix waits in onNodeManaged, at most 5 s,
#    until the cache says Held.
kwok_fix() { # dir of kwok's module source
  local f="$1/pkg/kwok/controllers/pod_controller.go"
  sed -i -e 's/^\tpool = newIPPool(ipnet)$/\tpool, _ = c.ipPools.LoadOrStore(cidr, newIPPool(ipnet))/' \
    -e '/^\tc\.ipPools\.Store(cidr, pool)$/d' "$f"
  if ! grep -q 'c.ipPools.LoadOrStore(cidr, newIPPool(ipnet))' "$f" || grep -q 'c.ipPools.Store(' "$f"; then
    log "error: kwok $KWOK_VERSION's ipPool() is not the code kwok_fix changes ($f); set NODEFALL_KWOK_VERSION=v0.8.0"
    return 1
  fi
  local g="$1/pkg/kwok/controllers/node_lease_controller.go"
  local head='func (c *NodeLeaseController) onNodeManaged(nodeName string) {'
  if [[ "$(grep -cxF "$head" "$g")" != 1 ]] || ! grep -qxF "$(printf '\t"time"')" "$g"; then
    log "error: kwok $KWOK_VERSION's onNodeManaged() is not the code kwok_fix changes ($g); set NODEFALL_KWOK_VERSION=v0.8.0"
    return 1
  fi
  sed -i "/^func (c \*NodeLeaseController) onNodeManaged(nodeName string) {\$/a\\
\t// nodefall: the pods' sync this starts skips a pod unless Held(), read\\
\t// from the Lease cache: wait until the Lease just written is there.\\
\tfor i := 0; i < 500 \&\& !c.Held(nodeName); i++ {\\
\t\ttime.Sleep(10 * time.Millisecond)\\
\t}" "$g"
  if ! grep -qF 'i < 500 && !c.Held(nodeName)' "$g"; then
    log "error: kwok_fix could not change kwok $KWOK_VERSION's onNodeManaged() ($g)"
    return 1
  fi
}

if (( need_kwok )); then
  start=$(date +%s)
  log "building kwok $KWOK_VERSION (with nodefall's fixes of two races: kwok_fix)"
  w="$work/kwok"
  mkdir -p "$w"
  RUN_STDOUT="$w/download.json" run "$w" go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION"
  src="$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' "$w/download.json")"
  if [[ ! -d "$src" ]]; then
    log "error: \`go mod download -json sigs.k8s.io/kwok@$KWOK_VERSION\` named no source directory (\"$src\")"
    exit 1
  fi
  # The module cache is read-only: build a writable copy.
  cp -R "$src" "$w/src"
  chmod -R u+w "$w/src"
  kwok_fix "$w/src"
  mkdir -p "$kwok_dir"
  run "$w/src" go build -trimpath -ldflags "-s -w" -o "$kwok_dir/kwok.tmp" ./cmd/kwok
  mv "$kwok_dir/kwok.tmp" "$kwok_dir/kwok"
  log "kwok $KWOK_VERSION built in $(( $(date +%s) - start ))s"
fi

# The kind clusters' CSI driver, whose attacher the simulated cluster runs
# (crates/sim/src/sim/csi.rs embeds its sources): go.sum pins every module.
# A failed build is reported and left: the cluster runs without it.
if (( need_csi )); then
  start=$(date +%s)
  log "building the CSI driver csi.nodefall.dev (scripts/kind/csi)"
  mkdir -p "$(dirname "$NODEFALL_CSI_BIN")"
  if run "$NODEFALL_CSI_SRC" env GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$NODEFALL_CSI_BIN.tmp" .; then
    mv "$NODEFALL_CSI_BIN.tmp" "$NODEFALL_CSI_BIN"
    log "CSI driver built in $(( $(date +%s) - start ))s"
  else
    rm -f "$NODEFALL_CSI_BIN.tmp"
    log "the CSI driver was not built (above): the simulated cluster runs without its attacher"
  fi
fi

log "binaries ready under $CACHE/bin (log: $LOG)"
