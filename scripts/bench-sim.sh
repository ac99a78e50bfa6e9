#!/usr/bin/env bash
# Measures `nodefall sim up` (3 nodes to all-Ready, warm binary cache) and the
# running cluster's total resident memory. Usage: scripts/bench-sim.sh [runs]
# The figures in the README come from this script.
set -euo pipefail
runs="${1:-3}"
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin="$PWD/target/release/nodefall"
export NODEFALL_STATE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/nodefall-bench.XXXXXX")"
cleanup() { "$bin" sim down --name bench >/dev/null 2>&1 || true; rm -rf "$NODEFALL_STATE_DIR"; }
trap cleanup EXIT

# Warm the cache first (a cold build is not what this measures).
bash scripts/provision-binaries.sh

printf '%-4s %-12s %-10s\n' run "up (s)" "RSS (MiB)"
for (( i = 1; i <= runs; i++ )); do
  start=$EPOCHREALTIME
  "$bin" sim up --name bench --nodes 3 --profile fast >/dev/null 2>&1
  end=$EPOCHREALTIME
  # Sum VmRSS over the cluster's recorded processes.
  pids=$(grep -o '"pid": [0-9]*' "$NODEFALL_STATE_DIR/bench/state.json" | awk '{print $2}')
  rss=0
  for p in $pids; do
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    rss=$(( rss + ${kb:-0} ))
  done
  printf '%-4s %-12.2f %-10d\n' "$i" "$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')" $(( rss / 1024 ))
  "$bin" sim down --name bench >/dev/null 2>&1
done
