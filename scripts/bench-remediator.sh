#!/usr/bin/env bash
# Judge the example remediator (examples/remediator.rs) on real kubelets,
# RUNS times: scenarios/kind-example-remediator.yaml (a worker powered off,
# nothing in the file acts) with `--repeat RUNS` while the remediator runs
# beside it with `--after 5s`. Prints the aggregate's remediation figures
# (decision, recovery: min/p50/p95/max) and, as its last line, one JSON
# object: {"runs":..,"passed":..,"decision_p50_s":..,"decision_p95_s":..,...}
#
# Usage: scripts/bench-remediator.sh CLUSTER [RUNS]   (RUNS default 5)
# CLUSTER: a cluster `nodefall kind up --profile fast` made, with the same
# XDG_STATE_HOME and KIND_EXPERIMENTAL_DOCKER_NETWORK as when it was made.
# Needs: cargo, docker, jq. Reports under $BENCH_DIR (default: a new
# directory in /tmp).
set -euo pipefail

CLUSTER=${1:?usage: scripts/bench-remediator.sh CLUSTER [RUNS]}
RUNS=${2:-5}
AFTER=${AFTER:-5s}
BENCH_DIR=${BENCH_DIR:-$(mktemp -d /tmp/nodefall-bench-remediator.XXXXXX)}

cd "$(dirname "$0")/.."
say() { printf '[bench-remediator %s] %s\n' "$(date -u +%T)" "$*" >&2; }
cargo build --quiet --bin nodefall --example remediator
bin=$PWD/target/debug/nodefall
state=${XDG_STATE_HOME:-$HOME/.local/state}
export KUBECONFIG=$state/nodefall/kind/$CLUSTER/kubeconfig
[[ -f $KUBECONFIG ]] || { say "no kubeconfig at $KUBECONFIG: is $CLUSTER a cluster of nodefall kind up?"; exit 2; }
mkdir -p "$BENCH_DIR"

setsid "$PWD/target/debug/examples/remediator" --after "$AFTER" >"$BENCH_DIR/remediator.log" 2>&1 &
remediator=$!
stop() { kill -TERM -- "-$remediator" 2>/dev/null || true; wait "$remediator" 2>/dev/null || true; }
trap stop EXIT
say "remediator (pid $remediator, --after $AFTER); $RUNS runs"

set +e
"$bin" scenario scenarios/kind-example-remediator.yaml --backend kind --kind-cluster "$CLUSTER" \
  --repeat "$RUNS" --out "$BENCH_DIR/reports" >"$BENCH_DIR/runs.log" 2>&1
status=$?
set -e
aggs=("$BENCH_DIR"/reports/*/aggregate.json)
agg=${aggs[-1]}
say "scenario exit $status; aggregate: $agg"
jq -r '.metrics[] | select(.name | startswith("remediation") or . == "nodeNotReady")
  | "\(.name): n=\(.n) min \(.min) p50 \(.p50) p95 \(.p95) max \(.max) (ms)"' "$agg" >&2 || true
jq -c --argjson runs "$RUNS" '{
  runs: $runs,
  passed: ([.runs[] | select(.verdict == "pass")] | length),
  decision_p50_s: ((.metrics[] | select(.name == "remediationDecision") | .p50) / 1000),
  decision_p95_s: ((.metrics[] | select(.name == "remediationDecision") | .p95) / 1000),
  recovery_p50_s: ((.metrics[] | select(.name == "remediationRecovery") | .p50) / 1000),
  recovery_p95_s: ((.metrics[] | select(.name == "remediationRecovery") | .p95) / 1000)
}' "$agg"
