#!/usr/bin/env bash
# Runs every kind scenario (scenarios/kind-*.yaml) on a real kind cluster that
# `nodefall kind up` makes for the purpose, with upstream default timings
# unless told otherwise, then removes the cluster (also on failure or Ctrl-C).
#
#   scripts/kind-scenarios.sh [--profile default|fast] [--workers N] [--out DIR]
#                             [--disable-force-detach-on-timeout] [SCENARIO...]
#
# The cluster has N workers (default 3: seed 004, kind-drain-pdb.yaml, drains
# two of them at once and needs a third for the evicted pods).
# --disable-force-detach-on-timeout starts its controller manager with that
# flag (scenarios/slow/kind-rwo-no-force-detach.yaml and
# kind-rwo-node-deleted.yaml need it).
# Each scenario's report goes to DIR/<scenario>/ (default
# target/kind-scenarios/<profile>); a summary table is printed at the end and
# written to DIR/summary.md. Exit 0 when every scenario passed, 1 otherwise.
# Needs Docker and the node image (built here when missing:
# scripts/kind/image.sh). With default timings a scenario takes up to 8 minutes
# (the 300 s toleration; seeds 003 and 004 1-2), the whole run about 45.
#
# NODEFALL (the binary, default: `cargo build` then target/debug/nodefall)
# and NODEFALL_KIND_NAME (the cluster's name, default nfscen) adjust it.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

profile=default
workers=3
out=
scenarios=()
kind_up_flags=()
while [ $# -gt 0 ]; do
    case $1 in
        --profile) profile=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --disable-force-detach-on-timeout) kind_up_flags+=("$1"); shift ;;
        -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "kind-scenarios.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) scenarios+=("$1"); shift ;;
    esac
done
case $profile in
    default|fast) ;;
    *) echo "kind-scenarios.sh: --profile is default or fast, not $profile" >&2; exit 2 ;;
esac
if [ ${#scenarios[@]} -eq 0 ]; then
    scenarios=(scenarios/kind-*.yaml)
fi
out=${out:-target/kind-scenarios/$profile}
name=${NODEFALL_KIND_NAME:-nfscen}

if [ -z "${NODEFALL:-}" ]; then
    cargo build --quiet
    NODEFALL=$repo/target/debug/nodefall
fi
bash scripts/kind/image.sh >&2
image=$(bash scripts/kind/image.sh --tag)

state=${XDG_STATE_HOME:-$HOME/.local/state}
export KUBECONFIG=$state/nodefall/kind/$name/kubeconfig

# shellcheck disable=SC2317 # called by the EXIT trap
down() {
    local rc=$?
    trap - EXIT INT TERM HUP
    # `kind up` cut short removes what it made itself.
    if [ "$up" = 1 ]; then
        echo "== removing kind cluster $name" >&2
        "$NODEFALL" kind down "$name" >&2 || rc=3
    fi
    exit "$rc"
}
up=0
trap down EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mkdir -p "$out"
echo "== nodefall kind up --name $name --profile $profile --workers $workers ${kind_up_flags[*]} ($image)" >&2
start=$(date +%s)
# The kubelets' graceful node shutdown on (kind-graceful-shutdown.yaml).
"$NODEFALL" kind up --name "$name" --image "$image" --profile "$profile" --workers "$workers" \
    --shutdown-grace-period 20s --shutdown-grace-period-critical-pods 5s ${kind_up_flags[@]+"${kind_up_flags[@]}"}
up=1
echo "== cluster up in $(( $(date +%s) - start )) s" >&2

summary=$out/summary.md
{
    echo "| scenario | verdict | seconds | report |"
    echo "|---|---|---|---|"
} > "$summary"
failed=0
for s in "${scenarios[@]}"; do
    base=$(basename "$s" .yaml)
    echo "== $s (timings: $profile)" >&2
    t=$(date +%s)
    verdict=PASS
    # The cluster's own timings are discovered (no --profile: they are
    # what `kind up` set, with their origins in the report).
    if ! "$NODEFALL" scenario "$s" --backend kind --kind-cluster "$name" --out "$out/$base"; then
        verdict=FAIL
        failed=1
    fi
    report=$(find "$out/$base" -name 'report.md' -newer "$summary" 2>/dev/null | head -n 1)
    echo "| $s | $verdict | $(( $(date +%s) - t )) | ${report#"$out"/} |" >> "$summary"
done

echo >&2
cat "$summary"
exit "$failed"
