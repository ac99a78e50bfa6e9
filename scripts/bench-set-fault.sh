#!/usr/bin/env bash
# A fault on a set of sim nodes: a throwaway sim cluster of NODES nodes spread
# over ZONES, a `nodefall scenario` run powering off every node of SET (a
# label selector) as one set target, then on again. Prints each set step's
# spread (first inject begun to last one done) and, as its last line, one
# JSON object: {"nodes":..,"set":..,"off_spread_ms":..,"on_spread_ms":..,"wall_s":..}
#
# Usage: scripts/bench-set-fault.sh                 (100 nodes, every one in the set)
#        NODES=300 ZONES=a,b,c SET=topology.kubernetes.io/zone=a scripts/bench-set-fault.sh
# Needs: cargo, python3. Keeps everything under $BENCH_DIR (default: a new
# directory in /tmp).
set -euo pipefail

NODES=${NODES:-100}
ZONES=${ZONES:-a,b,c}
SET=${SET:-kubernetes.io/os=linux}
BENCH_DIR=${BENCH_DIR:-$(mktemp -d /tmp/nodefall-bench-set.XXXXXX)}
cd "$(dirname "$0")/.."

say() { printf '[bench-set] %s\n' "$*" >&2; }

cargo build --quiet --bin nodefall
nodefall="${CARGO_TARGET_DIR:-target}/debug/nodefall"

cat >"$BENCH_DIR/set.yaml" <<YAML
name: bench-set
namespace: bench-set
targets:
  down: {nodes: "$SET"}
  first: {name: worker-1}
steps:
  - fault: poweroff
    node: down
  - expect: {node: first, ready: Unknown, within: grace + monitorPeriod + 30s}
  - fault: poweron
    node: down
  - expect: {node: first, ready: "True", within: 2m}
cleanup: always
YAML

say "scenario: poweroff then poweron of the nodes matching $SET, on $NODES sim nodes over zones $ZONES"
start=$(date +%s)
"$nodefall" scenario "$BENCH_DIR/set.yaml" --nodes "$NODES" --zones "$ZONES" \
    --out "$BENCH_DIR/out" >"$BENCH_DIR/stdout" 2>"$BENCH_DIR/stderr" || {
    say "the run failed: $(tail -5 "$BENCH_DIR/stderr")"
    exit 1
}
wall_s=$(( $(date +%s) - start ))
result=$(ls "$BENCH_DIR"/out/*/result.json)
python3 - "$result" "$NODES" "$wall_s" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
spreads = {}
for s in r["steps"]:
    f = s.get("fault")
    if f and f.get("nodes"):
        hit = f["nodes"]
        spreads[f["fault"]] = (len(hit), hit[-1]["done"] - hit[0]["at"])
        print(f"{f['fault']}: {len(hit)} nodes, spread {hit[-1]['done'] - hit[0]['at']} ms", file=sys.stderr)
print(json.dumps({
    "nodes": int(sys.argv[2]),
    "set": len(r["sets"]["down"]),
    "off_spread_ms": spreads["poweroff"][1],
    "on_spread_ms": spreads["poweron"][1],
    "wall_s": int(sys.argv[3]),
    "verdict": r["verdict"],
}))
PY
