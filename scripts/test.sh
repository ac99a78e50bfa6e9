#!/usr/bin/env bash
# Runs nodefall's tests in tiers, several at once where the machine allows
# (docs/testing.md). The same tests as `cargo test --locked --features libvirt`,
# run differently: each binary of the pure tier whole, every other test in its
# own process, the longest first, a tier's lanes side by side.
#
#   scripts/test.sh [--list] [--no-run] [--tiers] [TIER...]
#
# TIER: pure, sim, docker, vm, browser, real (the default: all, in that order).
# --list prints the tests the tiers hold (binary::test) and runs none;
# --no-run only compiles the test binaries; --tiers names the tiers, in order.
# Environment: NODEFALL_TEST_FEATURES (cargo features, default "libvirt"),
# NODEFALL_TEST_LANES_<TIER> (e.g. NODEFALL_TEST_LANES_SIM=3),
# NODEFALL_TEST_TIMEOUT (seconds a test may run before it is stopped: 1200,
# the real tier's 1800).
# Which tier a test binary belongs to: tests/tiers.tsv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all_tiers=(pure sim docker vm browser real)
# Lanes: how many tests of the tier run at once. A sim test keeps about 5% of
# this 2-core machine busy (its control plane waits on the fast profile's
# timers) and about 600 MiB; a VM test under TCG about a quarter of it.
declare -A lanes=([pure]=2 [sim]=6 [docker]=1 [vm]=2 [browser]=1 [real]=1)
# Budgets in seconds (warm machine, docs/testing.md); a tier over its budget is
# said, loudly, and does not fail.
declare -A budget=([pure]=45 [sim]=450 [docker]=55 [vm]=280 [browser]=30 [real]=1500)
# The pure tier runs each binary whole (its tests are quick and use the
# harness's own threads); the others run one test per process.
declare -A whole=([pure]=1)

features="${NODEFALL_TEST_FEATURES-libvirt}"
# A real cluster's one test runs every kind scenario in turn.
declare -A tier_timeout=([real]=1800)
list_only="" no_run=""
tiers=()
for arg in "$@"; do
  case "$arg" in
    --list) list_only=1 ;;
    --no-run) no_run=1 ;;
    --tiers) echo "${all_tiers[*]}"; exit 0 ;;
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

declare -A measured=()
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
        measured[$key]="$took"
      elif grep -q '^SKIPPED: ' "$logs/$key.log"; then
        printf '  skipped %4d s  %s: %s\n' "$took" "$key" "$(grep -m1 '^SKIPPED: ' "$logs/$key.log" | cut -c10-)"
      else
        printf '  ok      %4d s  %s\n' "$took" "$key"
        measured[$key]="$took"
      fi
    else
      printf '  FAILED  %4d s  %s (exit %d; log %s)\n' "$took" "$key" "$rc" "$logs/$key.log"
      tier_failed+=("$key")
    fi
  done
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true

  # The times this run measured order the next one.
  mkdir -p "$(dirname "$times_file")"
  for key in "${!measured[@]}"; do printf '%s\t%s\n' "$key" "${measured[$key]}"; done | sort >"$times_file.tmp"
  mv "$times_file.tmp" "$times_file"

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

for tier in "${tiers[@]}"; do
  echo
  if ! run_tier "$tier"; then
    echo
    echo "failed: ${failed[*]}"
    exit 1
  fi
done
