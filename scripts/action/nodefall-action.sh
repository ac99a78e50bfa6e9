#!/usr/bin/env bash
# The GitHub Action's logic (action.yml at the repository root calls it; so
# does tests/action.rs, with the same environment the runner gives it).
#
#   nodefall-action.sh run       get nodefall, run every scenario, write the
#                                job summary and the step's outputs
#   nodefall-action.sh recover   revert what a cancelled or killed run left
#                                (the action's `if: always()` step)
#   nodefall-action.sh install   only get nodefall (as `run` does first)
#
# Inputs come as environment variables (action.yml maps each input to one):
#   NODEFALL_SCENARIOS      files or globs, one per line or space-separated,
#                           relative to GITHUB_WORKSPACE (required)
#   NODEFALL_BACKEND        sim (default) | kind | vagrant | libvirt | command
#   NODEFALL_KIND_CLUSTER   --kind-cluster NAME
#   NODEFALL_CONTEXT        --context CTX
#   NODEFALL_PROFILE        --profile fast|default
#   NODEFALL_REPEAT         --repeat N (1: single runs)
#   NODEFALL_ARGS           more flags for every `nodefall scenario`
#   NODEFALL_BASELINE       a directory of earlier reports to compare with
#   NODEFALL_FAIL_IF_SLOWER with a baseline: the allowed slowdown (`20%`)
#   NODEFALL_VERSION        source (cargo build of the action's checkout),
#                           a release tag (vX.Y.Z), or a path to a binary
#   NODEFALL_REPORT_DIR     where the reports go ($RUNNER_TEMP/nodefall-reports)
# and the runner's own: GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_PATH,
# GITHUB_WORKSPACE, GITHUB_ACTION_PATH, RUNNER_TEMP.
#
# Outputs: verdict (pass | fail | error | interrupted), passed, failed (the
# scenarios that did not pass, those that never ran included), report-dir,
# summary (JSON: every scenario's verdict, figures in ms and failures).
#
# Exit code: the worst of every scenario's (nodefall's own codes: 1 an
# expectation failed or a figure got slower than the baseline allows, 2
# invalid input, 3 infrastructure), 128+N when stopped by signal N. A
# cancelled job's SIGINT or SIGTERM is passed to the running nodefall, which
# reverts its fault before it exits; no scenario starts after it.
set -Eeuo pipefail
shopt -s inherit_errexit

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
action_path="${GITHUB_ACTION_PATH:-$(cd "$here/../.." && pwd)}"
workspace="${GITHUB_WORKSPACE:-$PWD}"
runner_temp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
# Where the binary is put, for this step and the `recover` step after it.
bin_dir="$runner_temp/nodefall-action/bin"
report_dir="${NODEFALL_REPORT_DIR:-$runner_temp/nodefall-reports}"

log() { printf '[nodefall-action] %s\n' "$*" >&2; }
# Stops the step with an annotation; in `run`, the summary and the verdict
# output say it too (nothing ran: the outputs must not read as a pass).
in_run=""
die() {
  printf '::error title=nodefall::%s\n' "$1" >&2
  if [[ -n "$in_run" ]]; then
    summary "## nodefall: ERROR, nothing ran"$'\n\n'"$1"
    output verdict error
  fi
  exit "${2:-2}"
}

# `name=value` into GITHUB_OUTPUT (a delimiter block: values may hold anything).
output() {
  local file="${GITHUB_OUTPUT:-/dev/null}" delim
  delim="nodefall_$RANDOM$RANDOM$RANDOM"
  printf '%s<<%s\n%s\n%s\n' "$1" "$delim" "$2" "$delim" >>"$file"
}

summary() { printf '%s\n' "$*" >>"${GITHUB_STEP_SUMMARY:-/dev/null}"; }

# ---- getting nodefall ----------------------------------------------------

install() {
  local version="${NODEFALL_VERSION:-source}" bin
  mkdir -p "$bin_dir"
  case "$version" in
    source)
      log "building nodefall from $action_path (cargo build --release --locked)"
      command -v cargo >/dev/null || die "version: source needs cargo (dtolnay/rust-toolchain), or give a release tag"
      cargo build --release --locked --manifest-path "$action_path/Cargo.toml" >&2
      bin="${CARGO_TARGET_DIR:-$action_path/target}/release/nodefall"
      ;;
    v[0-9]*)
      bin="$(download "$version")"
      ;;
    */*)
      [[ -x "$version" ]] || die "version: $version is not an executable nodefall"
      bin="$version"
      ;;
    *)
      die "version: '$version' is not 'source', a release tag (v0.2.0) or a path to a binary"
      ;;
  esac
  ln -sf "$(realpath "$bin")" "$bin_dir/nodefall"
  printf '%s\n' "$bin_dir" >>"${GITHUB_PATH:-/dev/null}"
  "$bin_dir/nodefall" --version >&2
}

# A release's Linux x86_64 binary, its checksum verified; prints its path.
download() {
  local tag="$1" arch target base name dir
  arch="$(uname -m)"
  [[ "$arch" == x86_64 ]] || die "version: $tag: the releases' tested build is x86_64 Linux, this runner is $arch; use version: source"
  target=x86_64-unknown-linux-gnu
  base="${NODEFALL_RELEASES_URL:-https://github.com/${GITHUB_ACTION_REPOSITORY:-${GITHUB_REPOSITORY:-nodefall/nodefall}}/releases/download}"
  name="nodefall-${tag#v}-$target.tar.gz"
  dir="$runner_temp/nodefall-action/$tag"
  mkdir -p "$dir"
  log "downloading $base/$tag/$name"
  curl --fail --silent --show-error --location --retry 3 -o "$dir/$name" "$base/$tag/$name" \
    || die "version: $tag: cannot download $base/$tag/$name" 3
  curl --fail --silent --show-error --location --retry 3 -o "$dir/$name.sha256" "$base/$tag/$name.sha256" \
    || die "version: $tag: cannot download its checksum $name.sha256" 3
  (cd "$dir" && sha256sum --check --status "$name.sha256") \
    || die "version: $tag: $name does not match its published checksum" 3
  tar -xzf "$dir/$name" -C "$dir"
  local found
  found="$(find "$dir" -type f -name nodefall -perm -u+x | head -n 1)"
  [[ -n "$found" ]] || die "version: $tag: $name holds no nodefall binary" 3
  printf '%s\n' "$found"
}

# ---- running the scenarios -------------------------------------------------

# `$1` split on spaces, tabs and newlines, no word globbed, into `split`.
split=()
words_of() {
  split=()
  [[ -n "$1" ]] || return 0
  read -r -d '' -a split <<<"$1" || true
}

# The scenario files the input names, into `files`; each pattern must match
# at least one.
files=()
scenario_files() {
  local pattern matched words
  words_of "${NODEFALL_SCENARIOS:-}"
  words=("${split[@]}")
  shopt -s nullglob globstar
  for pattern in "${words[@]}"; do
    # shellcheck disable=SC2206 # the glob is the point
    matched=($pattern)
    if (( ${#matched[@]} == 0 )); then
      die "scenarios: '$pattern' matches no file under $workspace"
    fi
    files+=("${matched[@]}")
  done
  shopt -u nullglob globstar
}

# How many runs the report directory holds (result.json or aggregate.json).
reports_in() {
  find "$1" \( -name result.json -o -name aggregate.json \) -type f | wc -l
}

child=""
stopped_by=""
on_signal() {
  stopped_by="$1"
  if [[ -n "$child" ]]; then
    log "SIG$1: passing it to nodefall (pid $child), which reverts its fault first"
    kill -s "$1" "$child" 2>/dev/null || true
  fi
}

run() {
  in_run=1
  trap 'on_signal INT' INT
  trap 'on_signal TERM' TERM
  trap 'on_signal HUP' HUP
  install
  local nodefall="$bin_dir/nodefall"
  cd "$workspace"
  mkdir -p "$report_dir/logs"
  report_dir="$(realpath "$report_dir")"
  # Said first, so the upload and a later step find it even if this one is stopped.
  output report-dir "$report_dir"

  scenario_files
  (( ${#files[@]} )) || die "scenarios: no scenario given"
  # Every file is checked before the first one runs: a typo in the last
  # must not cost a fault in the first.
  "$nodefall" validate "${files[@]}" >&2 || die "scenarios: a file is invalid (above); nothing was run"

  local flags=(--backend "${NODEFALL_BACKEND:-sim}" --out "$report_dir")
  [[ -n "${NODEFALL_KIND_CLUSTER:-}" ]] && flags+=(--kind-cluster "$NODEFALL_KIND_CLUSTER")
  [[ -n "${NODEFALL_CONTEXT:-}" ]] && flags+=(--context "$NODEFALL_CONTEXT")
  [[ -n "${NODEFALL_PROFILE:-}" ]] && flags+=(--profile "$NODEFALL_PROFILE")
  [[ "${NODEFALL_REPEAT:-1}" != 1 ]] && flags+=(--repeat "$NODEFALL_REPEAT")
  words_of "${NODEFALL_ARGS:-}"
  local extra=("${split[@]}")

  local worst=0 rc file stem before log_file from shower never_ran=()
  for file in "${files[@]}"; do
    if [[ -n "$stopped_by" ]]; then
      never_ran+=("$file (not started: the job was stopped)")
      continue
    fi
    stem="$(basename "${file%.*}")"
    log "nodefall scenario $file ${flags[*]} ${extra[*]}"
    echo "::group::nodefall scenario $file" >&2
    before="$(reports_in "$report_dir")"
    log_file="$report_dir/logs/$stem.log"
    # There before tail looks for it: the redirection below is opened by
    # the child, which may come after tail has given up on a missing file.
    : >>"$log_file"
    from=$(( $(stat -c %s "$log_file" 2>/dev/null || echo 0) + 1 ))
    # In a session of its own: a Ctrl-C in a terminal reaches it once,
    # through the trap above (a second signal would abandon its cleanup).
    # Its stderr goes to a file, shown as it grows: a pipe's write end
    # would be inherited by the node agents a kept sim cluster's nodefall
    # starts, and the step would never see its end.
    setsid "$nodefall" scenario "$file" "${flags[@]}" "${extra[@]}" 2>>"$log_file" &
    child=$!
    tail -c "+$from" -f --pid="$child" "$log_file" >&2 &
    shower=$!
    # `wait` returns early when a trap runs; wait again until it has exited.
    rc=0
    while true; do
      wait "$child" && rc=0 || rc=$?
      kill -0 "$child" 2>/dev/null || break
    done
    child=""
    wait "$shower" || true
    echo "::endgroup::" >&2
    if (( rc != 0 )); then
      log "$file: exit $rc"
      # A scenario stopped before its run (invalid against the cluster,
      # unreachable cluster) leaves no report: it is listed on its own.
      if (( $(reports_in "$report_dir") == before )); then
        never_ran+=("$file (exit $rc: $(tail -n 1 "$log_file" 2>/dev/null | tr -d '`'))")
      fi
    fi
    worst="$(worse "$worst" "$rc")"
  done

  finish "$nodefall" "$worst" "${never_ran[@]}"
}

# The worse of two exit codes: a signal, then infrastructure, invalid input,
# a failed expectation, a pass.
rank() { case "$1" in 0 | 1 | 2 | 3) echo "$1" ;; *) echo 4 ;; esac; }
worse() {
  if (( $(rank "$2") > $(rank "$1") )); then echo "$2"; else echo "$1"; fi
}

# The job summary, the outputs and the exit code.
finish() {
  local nodefall="$1" worst="$2"
  shift 2
  local never_ran=("$@")
  local cmp=()
  if [[ -n "${NODEFALL_BASELINE:-}" ]]; then
    cmp=(--baseline "$NODEFALL_BASELINE")
    [[ -n "${NODEFALL_FAIL_IF_SLOWER:-}" ]] && cmp+=(--fail-if-slower "$NODEFALL_FAIL_IF_SLOWER")
  fi
  local md json rc
  md="$("$nodefall" report summary "$report_dir" "${cmp[@]}" 2>&1)" && rc=0 || rc=$?
  json="$("$nodefall" report summary "$report_dir" "${cmp[@]}" --format json 2>/dev/null)" || true
  local verdict=pass passed=0 failed=0
  if [[ "$json" =~ ^\{\"outcome\":\"([a-z]+)\",\"scenarios\":([0-9]+),\"passed\":([0-9]+),\"failed\":([0-9]+) ]]; then
    verdict="${BASH_REMATCH[1]}" passed="${BASH_REMATCH[3]}" failed="${BASH_REMATCH[4]}"
  else
    md="## nodefall: nothing ran"$'\n'
    json='{"outcome":"error","scenarios":0,"passed":0,"failed":0,"entries":[]}'
    verdict=error
  fi
  # A regression (exit 1 from the summary) fails the job like an expectation.
  (( rc == 1 )) && worst="$(worse "$worst" 1)"
  failed=$((failed + ${#never_ran[@]}))
  if (( ${#never_ran[@]} )); then
    [[ "$verdict" == pass ]] && verdict=error
    md+=$'\n'"### Scenarios without a report"$'\n\n'
    local f
    for f in "${never_ran[@]}"; do md+="- $f"$'\n'; done
  fi
  if [[ -n "$stopped_by" ]]; then
    verdict=interrupted
    md+=$'\n'"Stopped by SIG$stopped_by (a cancelled job): the running scenario reverted its fault; \`nodefall recover\` ran after it."$'\n'
  fi
  summary "$md"
  output verdict "$verdict"
  output passed "$passed"
  output failed "$failed"
  output summary "$json"
  log "verdict: $verdict ($passed passed, $failed did not); reports in $report_dir"
  if [[ -n "$stopped_by" ]]; then
    case "$stopped_by" in INT) exit 130 ;; TERM) exit 143 ;; HUP) exit 129 ;; esac
  fi
  exit "$worst"
}

# ---- the always() step -------------------------------------------------------

recover() {
  local nodefall="$bin_dir/nodefall"
  if [[ ! -x "$nodefall" ]]; then
    log "recover: nodefall was never installed by this job; nothing to revert"
    return 0
  fi
  # Reverts what any killed run's journal holds; with nothing left, says so.
  "$nodefall" recover
}

case "${1:-}" in
  run) run ;;
  recover) recover ;;
  install) install ;; # only getting nodefall (tests/action.rs)
  *) echo "usage: $0 run | recover | install" >&2; exit 2 ;;
esac
