#!/usr/bin/env bash
# `nodefall predict` at scale: a sim cluster of NODES nodes in three zones
# (shared kwok shards, default timings) running PODS pods of one Deployment
# behind a Service (each pod requesting 10m CPU and 16Mi, so the zone fit
# counts room), and a StatefulSet of STS pods behind another; then `predict`
# for every node (poweroff, then drain) and for every zone (`--zone`:
# the zone rules, each pod's eviction and the fit of every replacement),
# each timed, with its peak RSS.
#
# Prints a human summary and, as its last line, one JSON object:
#   {"nodes":..,"pods":..,"poweroff_s":..,"poweroff_rss_mb":..,"drain_s":..,"drain_rss_mb":..,
#    "zones_s":..,"zones_rss_mb":..}
#
# Usage: scripts/bench-predict.sh            (1000 nodes, 10000 pods)
#        NODES=100 PODS=1000 scripts/bench-predict.sh
# Needs: cargo, kubectl, /usr/bin/time. Keeps everything under $BENCH_DIR
# (default: a new directory in /tmp).
set -euo pipefail

NODES=${NODES:-1000}
PODS=${PODS:-10000}
STS=${STS:-10}
BENCH_DIR=${BENCH_DIR:-$(mktemp -d /tmp/nodefall-bench-predict.XXXXXX)}
NAME=bench-predict

cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/nodefall
mkdir -p "$BENCH_DIR"
export NODEFALL_STATE_DIR=$BENCH_DIR/state
say() { printf '[bench-predict %s] %s\n' "$(date -u +%T)" "$*" >&2; }
cleanup() { "$bin" sim down --name "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT

say "sim up: $NODES nodes"
kubeconfig=$("$bin" sim up --name "$NAME" --nodes "$NODES" --zones a,b,c --profile default --timeout 900)
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
k create namespace bench >/dev/null
k -n bench apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: $PODS
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: app
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: 10m, memory: 16Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: $STS
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: app, image: registry.k8s.io/pause:3.10}]
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec: {selector: {app: db}, ports: [{port: 80}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec: {maxUnavailable: 0, selector: {matchLabels: {app: db}}}
EOF
say "waiting for $PODS + $STS pods"
k -n bench rollout status deployment/web --timeout=30m >/dev/null
k -n bench rollout status statefulset/db --timeout=30m >/dev/null

# timed NAME ARGS...: runs predict ARGS; prints "seconds rss_mb"
timed() {
    local out=$BENCH_DIR/predict-$1
    shift
    /usr/bin/time -f '%e %M' -o "$out.time" \
        "$bin" predict --cluster "$NAME" "$@" --out "$out" >"$out.log"
    awk '{ printf "%s %.1f\n", $1, $2 / 1024 }' "$out.time"
}
read -r poweroff_s poweroff_rss < <(timed poweroff --fault poweroff)
say "predict poweroff, $NODES nodes: ${poweroff_s}s, peak RSS ${poweroff_rss} MiB"
head -4 "$BENCH_DIR/predict-poweroff.log" >&2
read -r drain_s drain_rss < <(timed drain --fault drain)
say "predict drain, $NODES nodes: ${drain_s}s, peak RSS ${drain_rss} MiB"
read -r zones_s zones_rss < <(timed zones --zone)
say "predict --zone, 3 zones of $NODES nodes: ${zones_s}s, peak RSS ${zones_rss} MiB"
head -4 "$BENCH_DIR/predict-zones.log" >&2
printf '{"nodes":%s,"pods":%s,"poweroff_s":%s,"poweroff_rss_mb":%s,"drain_s":%s,"drain_rss_mb":%s,"zones_s":%s,"zones_rss_mb":%s}\n' \
    "$NODES" "$((PODS + STS))" "$poweroff_s" "$poweroff_rss" "$drain_s" "$drain_rss" "$zones_s" "$zones_rss"
