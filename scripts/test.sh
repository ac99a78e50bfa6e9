#!/usr/bin/env bash
# Runs nodefall's tests in tiers, several at once where the machine allows
# (docs/testing.md). The same tests as `cargo test --locked --features libvirt`,
# run differently: each binary of the pure tier whole, every other test in its
# own process, the longest first, a tier's lanes side by side.
#
#   scripts/test.sh [--list] [--no-run] [--tiers] [--install] [TIER...]
#
# TIER: pure, sim, scale, docker, vm, browser, real (the default: all, in that
# order).
# --list prints the tests the tiers hold (binary::test) and runs none;
# --no-run only compiles the test binaries; --tiers names the tiers, in order;
# --install installs what every tier needs (Debian/Ubuntu packages, as root)
# and runs nothing.
# A tier whose prerequisite is missing is not run: one line says
# `SKIPPED: tier T: <what is missing>; <the command that adds it>`, and the
# libvirt feature is left out when libvirt's headers are missing. Under CI
# (CI=true) nothing is skipped: a missing prerequisite fails.
# Environment: NODEFALL_TEST_FEATURES (cargo features, default "libvirt"),
# NODEFALL_TEST_LANES_<TIER> (e.g. NODEFALL_TEST_LANES_SIM=3),
# NODEFALL_TEST_TIMEOUT (seconds a test may run before it is stopped: 1200,
# the real tier's 2400).
# Which tier a test binary belongs to: tests/tiers.tsv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all_tiers=(pure sim scale docker vm browser real)
# Lanes: how many tests of the tier run at once. A sim test keeps about 5% of
# this 2-core machine busy (its control plane waits on the fast profile's
# timers) and about 600 MiB; a VM test under TCG about a quarter of it.
# The scale tier's tests measure the process itself (its peak memory) at a
# size: one at a time, never beside the sim tier's.
declare -A lanes=([pure]=2 [sim]=6 [scale]=1 [docker]=1 [vm]=2 [browser]=1 [real]=1)
# Budgets in seconds (warm machine, docs/testing.md); a tier over its budget is
# said, loudly, and does not fail.
declare -A budget=([pure]=45 [sim]=540 [scale]=300 [docker]=65 [vm]=420 [browser]=30 [real]=1800)
# The pure tier runs each binary whole (its tests are quick and use the
# harness's own threads); the others run one test per process.
declare -A whole=([pure]=1)

features="${NODEFALL_TEST_FEATURES-libvirt}"
under_ci=""
[[ "${CI:-}" == true ]] && under_ci=1

# What each tier needs from the machine, beyond Rust: Debian/Ubuntu packages
# (--install), and the daemons started by hand (printed after installing).
declare -A packages=(
  [docker]="docker.io iptables iproute2 busybox-static mmdebstrap"
  [vm]="qemu-system-x86 libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-dev pkg-config linux-image-amd64 busybox-static dropbear-bin openssh-client cpio xz-utils docker.io iptables jq"
  [browser]="chromium fonts-dejavu-core"
  [real]="docker.io mmdebstrap gcc libc6-dev jq iptables iproute2 busybox-static"
)
# A real cluster's one test runs every kind scenario in turn.
declare -A tier_timeout=([real]=2400)
list_only="" no_run="" install=""
tiers=()
for arg in "$@"; do
  case "$arg" in
    --list) list_only=1 ;;
    --no-run) no_run=1 ;;
    --tiers) echo "${all_tiers[*]}"; exit 0 ;;
    --install) install=1 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *)
      if [[ -z "${lanes[$arg]:-}" ]]; then
        echo "scripts/test.sh: unknown argument '$arg' (tiers: ${all_tiers[*]}; --list, --no-run, --tiers)" >&2
        exit 2
      fi
      tiers+=("$arg")
      ;;
  esac
done
(( ${#tiers[@]} )) || tiers=("${all_tiers[@]}")
for t in "${all_tiers[@]}"; do
  var="NODEFALL_TEST_LANES_${t^^}"
  if [[ -n "${!var:-}" ]]; then
    [[ "${!var}" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/test.sh: $var must be a positive number, not '${!var}'" >&2; exit 2; }
    lanes[$t]="${!var}"
  fi
done

if [[ -n "$install" ]]; then
  all=""
  for t in "${all_tiers[@]}"; do all+=" ${packages[$t]:-}"; done
  # shellcheck disable=SC2086 # one word per package
  read -r -a wanted < <(printf '%s\n' $all | sort -u | tr '\n' ' ')
  sudo=()
  (( EUID == 0 )) || sudo=(sudo)
  echo "scripts/test.sh --install: ${wanted[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${wanted[@]}"
  cat <<'END'
installed. Daemons the tiers talk to, started by hand where no init system does:
  docker:  dockerd (or systemctl start docker)
  vm:      scripts/vm-rig/libvirt-daemons.sh start   (stop: ... stop); its real-kubelet
           VM also needs dockerd and the node image (scripts/kind/image.sh)
  real:    the node image, built once: scripts/kind/image.sh
END
  exit 0
fi

# Why a tier cannot run here, with the command that fixes it; nothing when
# it can. (The tests themselves check the same, each in its own words.)
missing_for() {
  case "$1" in
    sim | scale)
      local bin="${NODEFALL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodefall}/bin"
      if ! command -v go >/dev/null 2>&1 && ! compgen -G "$bin/kubernetes-*/kube-apiserver" >/dev/null; then
        echo "no Go toolchain to build the simulated cluster's binaries and none in $bin; install Go 1.24+ (https://go.dev/doc/install; Debian 12's golang-go is too old) or run scripts/provision-binaries.sh where Go is"
      fi
      ;;
    docker | real)
      if ! command -v docker >/dev/null 2>&1; then
        echo "docker is not installed; scripts/test.sh --install, then start dockerd"
      elif ! docker info >/dev/null 2>&1; then
        echo "no Docker engine answers (docker info failed); start dockerd (or systemctl start docker)"
      elif [[ "$1" == real ]]; then
        local tool tag
        for tool in mmdebstrap iptables ip jq gcc; do
          command -v "$tool" >/dev/null 2>&1 || { echo "$tool is not installed; scripts/test.sh --install"; return; }
        done
        tag="$(bash scripts/kind/image.sh --tag 2>/dev/null)" || { echo "scripts/kind/image.sh --tag failed"; return; }
        docker image inspect "$tag" >/dev/null 2>&1 \
          || echo "the kind node image $tag is not built; scripts/kind/image.sh (about 15-20 min the first time)"
      fi
      ;;
    vm)
      if ! command -v virsh >/dev/null 2>&1 || ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
        echo "libvirt and QEMU are not installed; scripts/test.sh --install"
      elif ! virsh -c qemu:///system version >/dev/null 2>&1; then
        echo "libvirt does not answer on qemu:///system; scripts/vm-rig/libvirt-daemons.sh start"
      fi
      ;;
    browser)
      command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
        || echo "Chromium is not installed; scripts/test.sh --install (apt-get install chromium fonts-dejavu-core)"
      ;;
  esac
}

# The libvirt feature links libvirt: left out, said once, where its headers
# are missing (never a compile failure on a fresh machine).
if [[ ",$features," == *,libvirt,* ]] && ! pkg-config --exists libvirt 2>/dev/null; then
  why="libvirt's headers are missing (pkg-config finds no libvirt.pc); apt-get install libvirt-dev pkg-config (or scripts/test.sh --install)"
  if [[ -n "$under_ci" ]]; then
    echo "scripts/test.sh: the libvirt feature cannot be built: $why" >&2
    exit 1
  fi
  echo "SKIPPED: feature libvirt (the libvirt backend's tests): $why"
  features="$(tr ',' '\n' <<<"$features" | grep -vx libvirt | paste -sd, -)" || true
fi

target="${CARGO_TARGET_DIR:-target}"
times_file="$target/nodefall-test-times.tsv"
log_root="$target/nodefall-test-logs"

# --- compile, and find each test binary -------------------------------------
cargo_args=(test --locked)
if [[ -n "$features" ]]; then cargo_args+=(--features "$features"); fi
compile_log="$(mktemp "${TMPDIR:-/tmp}/nodefall-test-compile.XXXXXX")"
trap 'rm -f "$compile_log"' EXIT
if [[ -n "$list_only" ]]; then
  cargo "${cargo_args[@]}" --no-run >"$compile_log" 2>&1 || { cat "$compile_log" >&2; exit 1; }
else
  # cargo's output as it comes, less its list of binaries (read below)
  cargo "${cargo_args[@]}" --no-run 2>&1 | tee "$compile_log" | sed '/^ *Executable /d'
fi
[[ -n "$no_run" ]] && exit 0

# "  Executable unittests src/lib.rs (target/debug/deps/nodefall-...)"; each
# crate of the workspace has its own src/lib.rs: crates/model's unit tests are
# lib_model (target/debug/deps/nodefall_model-...), the binary's crate's lib.
declare -A exe_of=()
while read -r src exe; do
  crate="$(basename "$exe")"
  crate="${crate%-*}"
  case "$src" in
    src/lib.rs) if [[ "$crate" == nodefall_* ]]; then name="lib_${crate#nodefall_}"; else name=lib; fi ;;
    src/main.rs) name=bin ;;
    *) name="$(basename "$src" .rs)" ;;
  esac
  exe_of[$name]="$exe"
done < <(sed -nE 's/^ *Executable (unittests )?([^ ]+) \((.+)\)$/\2 \3/p' "$compile_log")
(( ${#exe_of[@]} )) || { echo "scripts/test.sh: cargo named no test binary (its output above)" >&2; exit 1; }

declare -A tier_of=() table_secs=()
while IFS=$'\t' read -r name tier secs; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  if [[ -z "${lanes[$tier]:-}" || ! "$secs" =~ ^[0-9]+$ ]]; then
    echo "scripts/test.sh: tests/tiers.tsv: '$name' needs a tier (${all_tiers[*]}) and whole seconds, tab-separated" >&2
    exit 1
  fi
  tier_of[$name]="$tier"
  table_secs[$name]="$secs"
done <tests/tiers.tsv
for name in "${!exe_of[@]}"; do
  if [[ -z "${tier_of[$name]:-}" ]]; then
    echo "scripts/test.sh: the test binary '$name' has no tier: add a line to tests/tiers.tsv (docs/testing.md says which)" >&2
    exit 1
  fi
done
for name in "${!tier_of[@]}"; do
  [[ -n "${exe_of[$name]:-}" ]] || echo "note: tests/tiers.tsv names '$name', which this build has not (features: '${features}')" >&2
done

declare -A measured=() ran=()
if [[ -f "$times_file" ]]; then
  while IFS=$'\t' read -r key secs; do measured[$key]="$secs"; done <"$times_file"
fi

# Jobs of one tier, longest first: "estimate<TAB>key<TAB>binary<TAB>test".
jobs_of() {
  local tier=$1 name t n
  for name in "${!tier_of[@]}"; do
    [[ "${tier_of[$name]}" == "$tier" && -n "${exe_of[$name]:-}" ]] || continue
    if [[ -n "${whole[$tier]:-}" ]]; then
      printf '%s\t%s\t%s\t\n' "${measured[$name]:-${table_secs[$name]}}" "$name" "$name"
      continue
    fi
    local -a tests
    mapfile -t tests < <("${exe_of[$name]}" --list --format terse | sed -n 's/: test$//p')
    n=${#tests[@]}
    for t in "${tests[@]}"; do
      printf '%s\t%s\t%s\t%s\n' "${measured[$name::$t]:-$(( table_secs[$name] / (n > 0 ? n : 1) ))}" "$name::$t" "$name" "$t"
    done
  done | sort -t $'\t' -k1,1nr -k2,2
}

if [[ -n "$list_only" ]]; then
  for tier in "${tiers[@]}"; do
    while IFS=$'\t' read -r _ key name t; do
      if [[ -z "$t" ]]; then
        "${exe_of[$name]}" --list --format terse | sed -n "s/: test\$//p" | sed "s|^|$name::|"
      else
        echo "$key"
      fi
    done < <(jobs_of "$tier") | sed "s|^|$tier |"
  done
  exit 0
fi

# --- run ----------------------------------------------------------------------
declare -A job_key=() job_began=()
failed=()
stop_all() {
  local pid
  for pid in "${!job_key[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'echo "scripts/test.sh: stopped; ending the running tests" >&2; stop_all; exit 130' INT TERM HUP

secs_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a + 0.5 }'; }

run_tier() {
  local tier=$1
  local began=$EPOCHREALTIME logs="$log_root/$tier"
  timeout_s="${NODEFALL_TEST_TIMEOUT:-${tier_timeout[$tier]:-1200}}"
  local -a queue
  mapfile -t queue < <(jobs_of "$tier")
  local total=${#queue[@]} done_n=0 next=0 pid rc key took ticker line name t skipped
  local -a args
  rm -rf "$logs" && mkdir -p "$logs"
  if (( total == 0 )); then
    echo "tier $tier: no tests yet"
    return 0
  fi
  echo "tier $tier: ${total} $( [[ -n "${whole[$tier]:-}" ]] && echo binaries || echo tests ), ${lanes[$tier]} at a time (budget ${budget[$tier]} s)"
  local tier_failed=()
  sleep 60 & ticker=$!
  while (( done_n < total )); do
    while (( next < total && ${#job_key[@]} < lanes[$tier] )); do
      IFS=$'\t' read -r _ key name t <<<"${queue[$next]}"
      next=$((next + 1))
      args=()
      if [[ -n "$t" ]]; then args=(--exact "$t"); fi
      # setsid: each test leads a process group of its own (its pid is the
      # group's id), so a stop reaches everything it started.
      setsid "${exe_of[$name]}" "${args[@]}" </dev/null >"$logs/$key.log" 2>&1 &
      job_key[$!]="$key"
      job_began[$!]="$EPOCHREALTIME"
    done
    rc=0
    wait -n -p pid "${!job_key[@]}" "$ticker" || rc=$?
    if [[ "$pid" == "$ticker" ]]; then
      line=""
      for pid in "${!job_key[@]}"; do
        took=$(secs_since "${job_began[$pid]}")
        line+="${line:+,} ${job_key[$pid]} (${took} s)"
        if (( took > timeout_s + 60 )); then
          kill -KILL -- "-$pid" 2>/dev/null || true # it ignored SIGTERM
        elif (( took > timeout_s )); then
          echo "  TIMEOUT ${job_key[$pid]}: running ${took} s, over NODEFALL_TEST_TIMEOUT=${timeout_s}; stopping it"
          kill -TERM -- "-$pid" 2>/dev/null || true
        fi
      done
      echo "  ... $tier: $done_n of $total done after $(secs_since "$began") s; running:$line"
      sleep 60 & ticker=$!
      continue
    fi
    key="${job_key[$pid]}"
    took=$(secs_since "${job_began[$pid]}")
    unset "job_key[$pid]" "job_began[$pid]"
    done_n=$((done_n + 1))
    if (( rc == 0 )); then
      if [[ -n "${whole[$tier]:-}" ]]; then # a whole binary: its skipped tests, if any, counted
        skipped=$(grep -c '^SKIPPED: ' "$logs/$key.log" || true)
        printf '  ok      %4d s  %s%s\n' "$took" "$key" "$( (( skipped )) && echo " ($skipped skipped: $logs/$key.log)")"
        measured[$key]="$took" ran[$key]="$took"
      elif grep -q '^SKIPPED: ' "$logs/$key.log"; then
        printf '  skipped %4d s  %s: %s\n' "$took" "$key" "$(grep -m1 '^SKIPPED: ' "$logs/$key.log" | cut -c10-)"
      else
        printf '  ok      %4d s  %s\n' "$took" "$key"
        measured[$key]="$took" ran[$key]="$took"
      fi
    else
      printf '  FAILED  %4d s  %s (exit %d; log %s)\n' "$took" "$key" "$rc" "$logs/$key.log"
      tier_failed+=("$key")
    fi
  done
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true

  # The times this run measured order the next one: merged into the file as
  # it is now, since another tier running beside this one (.ci/run runs the
  # real tier beside the sim tier) may have written it after this one read it.
  mkdir -p "$(dirname "$times_file")"
  declare -A latest=()
  if [[ -f "$times_file" ]]; then
    while IFS=$'\t' read -r key secs; do latest[$key]="$secs"; done <"$times_file"
  fi
  for key in "${!ran[@]}"; do latest[$key]="${ran[$key]}"; done
  for key in "${!latest[@]}"; do printf '%s\t%s\n' "$key" "${latest[$key]}"; done | sort >"$times_file.tmp.$$"
  mv "$times_file.tmp.$$" "$times_file"

  took=$(secs_since "$began")
  for key in "${tier_failed[@]}"; do
    printf '\n---- %s (%s) ----\n' "$key" "$logs/$key.log"
    cat "$logs/$key.log"
  done
  echo "tier $tier: $total in ${took} s (budget ${budget[$tier]} s), ${#tier_failed[@]} failed"
  if (( took > budget[$tier] )); then
    echo "  OVER BUDGET: tier $tier took ${took} s, its budget is ${budget[$tier]} s (docs/testing.md)"
  fi
  failed+=("${tier_failed[@]}")
  (( ${#tier_failed[@]} == 0 ))
}

skipped_tiers=()
for tier in "${tiers[@]}"; do
  echo
  why="$(missing_for "$tier")"
  if [[ -n "$why" && -z "$under_ci" ]]; then
    echo "SKIPPED: tier $tier: $why"
    skipped_tiers+=("$tier")
    continue
  fi
  if ! run_tier "$tier"; then
    echo
    echo "failed: ${failed[*]}"
    exit 1
  fi
done
if (( ${#skipped_tiers[@]} )); then
  echo
  echo "tiers skipped for a missing prerequisite: ${skipped_tiers[*]} (SKIPPED lines above)"
fi
