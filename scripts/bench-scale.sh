#!/usr/bin/env bash
# nodefall at scale: a sim cluster of NODES nodes (shared kwok shards) running
# PODS pods, FAILED nodes paused at once by a real `nodefall scenario` run,
# held HOLD seconds, then resumed. In the same run, a 5 s poller
# (`nodefall audit poll`), `kubectl get -w` and a raw watch without any client
# library (scripts/lib/raw-watch.py; both stamped by `nodefall audit stamp`)
# watch the same objects. Afterwards `nodefall audit check` compares them all
# with the API server's audit log.
#
# Prints a human summary and, as its last line, one JSON object:
#   {"nodes":..,"pods":..,"failed":..,"missed":..,"rss_mb":..,"cpu_s":..,
#    "lag_p50_ms":..,"lag_p95_ms":..,"poller_lag_p95_ms":..,"wall_s":..}
# (rss_mb, cpu_s: the `nodefall scenario` process's own peak RSS and CPU time
# up to its result; then kubectl_lag_p95_ms, raw_watch_lag_p95_ms, and
# process_rss_mb: the process's peak over its whole life, from /usr/bin/time.)
#
# Usage: scripts/bench-scale.sh            (1000 nodes, 10000 pods, 50 failed)
#        NODES=200 PODS=2000 FAILED=10 scripts/bench-scale.sh
#        HEAP_PROFILE=1 scripts/bench-scale.sh   (the scenario under heaptrack)
#        SCENARIO_WRAP="gdb -batch -x CMDS --args" scripts/bench-scale.sh
# The scenario's resident memory is sampled into $BENCH_DIR/rss.tsv
# (docs/observer-precision.md, "Where the memory goes").
# Needs: cargo, python3, kubectl (optional: without it, or with KUBECTL=0, the
# kubectl baseline is skipped).
# Keeps everything under $BENCH_DIR (default: a new directory in /tmp).
set -euo pipefail

NODES=${NODES:-1000}
PODS=${PODS:-10000}
FAILED=${FAILED:-50}
HOLD=${HOLD:-90}
# `default`: 40 s leases renewed every 10 s, as real kubelets do (`fast` renews
# every second: 1,000 nodes are then 1,000 lease writes a second).
PROFILE=${PROFILE:-default}
BENCH_DIR=${BENCH_DIR:-$(mktemp -d /tmp/nodefall-bench-scale.XXXXXX)}
NAME=bench-scale

cd "$(dirname "$0")/.."
if [ "${HEAP_PROFILE:-0}" = 1 ]; then
    # heaptrack needs the code's line tables, and malloc (not mimalloc): a
    # build of its own.
    export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}/heap-profile
fi
features=()
[ "${HEAP_PROFILE:-0}" = 1 ] && features=(--features system-allocator)
cargo build --release --quiet "${features[@]}"
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/nodefall
mkdir -p "$BENCH_DIR"
export NODEFALL_STATE_DIR=$BENCH_DIR/state
say() { printf '[bench-scale %s] %s\n' "$(date -u +%T)" "$*" >&2; }

pids=()
stampers=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}" "${stampers[@]}"; do wait "$p" 2>/dev/null || true; done
    "$bin" sim down --name "$NAME" >/dev/null 2>&1 || true
}
trap cleanup EXIT

started=$(date +%s.%N)
say "sim up: $NODES nodes ($PROFILE profile)"
up_start=$(date +%s.%N)
kubeconfig=$("$bin" sim up --name "$NAME" --nodes "$NODES" --profile "$PROFILE" --timeout 900)
up_s=$(python3 -c "import time; print(round(time.time() - $up_start, 1))")
cluster_rss=$("$bin" sim status | grep -o '[0-9]* MiB' | head -1)
say "cluster ready in ${up_s}s; control plane + kwok RSS $cluster_rss"

# The workload and the scenario: FAILED named targets, paused together.
cat >"$BENCH_DIR/bench.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench}
spec:
  replicas: $PODS
  selector: {matchLabels: {app: bench}}
  template:
    metadata: {labels: {app: bench}}
    spec:
      containers: [{name: app, image: registry.k8s.io/pause:3.10}]
EOF
{
    echo "name: bench-scale"
    echo "description: $FAILED of $NODES nodes paused at once for ${HOLD}s, $PODS pods"
    echo "namespace: bench-scale"
    echo "setup:"
    echo "  apply: bench.yaml"
    echo "  waitReady: {deployment: bench, replicas: $PODS, timeout: 30m}"
    echo "targets:"
    for i in $(seq 1 "$FAILED"); do
        echo "  n$i: {name: worker-$(( (i - 1) * (NODES / FAILED) + 1 ))}"
    done
    echo "steps:"
    for i in $(seq 1 "$FAILED"); do echo "  - {fault: pause-vm, node: n$i}"; done
    echo "  - expect: {node: n1, ready: Unknown, within: grace + monitorPeriod + 30s}"
    echo "  - expect: {node: n$FAILED, ready: Unknown, within: grace + monitorPeriod + 30s}"
    echo "  - action: {wait: {duration: ${HOLD}s}}"
    for i in $(seq 1 "$FAILED"); do echo "  - {fault: resume-vm, node: n$i}"; done
    echo "  - expect: {node: n1, ready: \"True\", within: 2m}"
    echo "  - expect: {node: n$FAILED, ready: \"True\", within: 2m}"
    echo "  - expect: {pods: app=bench, ready: $PODS, within: 10m}"
    echo "cleanup: always"
} >"$BENCH_DIR/scale.yaml"

# The baselines, watching from before the run.
"$bin" audit poll --kubeconfig "$kubeconfig" --namespace bench-scale --interval 5 \
    --out "$BENCH_DIR/poller.jsonl" 2>"$BENCH_DIR/poller.log" &
pids+=($!)
baselines=(--baseline "poller-5s=$BENCH_DIR/poller.jsonl")
# stamped NAME FILE LOG CMD...: runs a watch command whose output goes through
# a fifo to `nodefall audit stamp` (FILE.jsonl), as baseline NAME; its stderr
# to LOG. The stamper reads to EOF, so it ends when its watch does.
stamped() {
    local name=$1 out=$BENCH_DIR/$2.jsonl fifo=$BENCH_DIR/$2.fifo log=$BENCH_DIR/$3
    shift 3
    mkfifo "$fifo"
    "$bin" audit stamp --out "$out" <"$fifo" &
    stampers+=($!)
    "$@" >"$fifo" 2>>"$log" &
    pids+=($!)
    baselines+=(--baseline "$name=$out")
}
if [ "${KUBECTL:-1}" = 1 ] && command -v kubectl >/dev/null; then
    for what in nodes "pods -n bench-scale"; do
        # -v=6: its requests and why its watch ended, in kubectl.log.
        # shellcheck disable=SC2086 # $what is two words on purpose
        stamped kubectl-get-w "kubectl-${what%% *}" kubectl.log \
            kubectl --kubeconfig "$kubeconfig" get $what -w -o json --output-watch-events -v=6
    done
else
    say "kubectl not found: the kubectl baseline is skipped"
fi
# The API server's own delivery, with no client library: a raw watch
# (scripts/lib/raw-watch.py, which watches again from the last
# resourceVersion when the server ends a watch), each line stamped as it
# arrives. Lag seen here is the server's, not a client's.
if [ "${RAW:-1}" = 1 ]; then
    server=$(sed -n 's/^ *server: //p' "$kubeconfig" | head -1)
    ca=$(sed -n 's/^ *certificate-authority: //p' "$kubeconfig" | head -1)
    token=$(sed -n 's/^ *token: //p' "$kubeconfig" | head -1)
    stamped raw-watch raw-nodes raw.log \
        python3 scripts/lib/raw-watch.py "$server" /api/v1/nodes "$ca" "$token"
    stamped raw-watch raw-pods raw.log \
        python3 scripts/lib/raw-watch.py "$server" /api/v1/namespaces/bench-scale/pods "$ca" "$token"
else
    say "RAW=0: the raw watch baseline is skipped"
fi

say "scenario: $PODS pods, $FAILED nodes paused for ${HOLD}s, then resumed"
set +e
# /usr/bin/time: the process's peak RSS over its whole life, the report and
# the in-process audit check included (rss_mb is the run's, up to its result).
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -f %M -o "$BENCH_DIR/scenario.maxrss")
# HEAP_PROFILE=1: the process under heaptrack (its allocations by call stack,
# in $BENCH_DIR/heap.*; its peak consumers printed below). It slows every
# allocation: its lag and RSS figures are not the product's.
if [ "${HEAP_PROFILE:-0}" = 1 ]; then
    command -v heaptrack >/dev/null || { say "HEAP_PROFILE=1 needs heaptrack (apt-get install heaptrack)"; exit 2; }
    timer+=(heaptrack -o "$BENCH_DIR/heap")
fi
# SCENARIO_WRAP: a command (words) the scenario runs under, e.g.
# SCENARIO_WRAP="strace -f -qq -e trace=clone3 -k -o /tmp/clones".
if [ -n "${SCENARIO_WRAP:-}" ]; then
    read -r -a wrap <<<"$SCENARIO_WRAP"
    timer+=("${wrap[@]}")
fi
# Each phase's own peak (crates/io/src/memory.rs) into the log, nothing
# else added to it.
RUST_LOG=${RUST_LOG:-info,nodefall_io::memory=debug} \
"${timer[@]}" "$bin" scenario "$BENCH_DIR/scale.yaml" --cluster "$NAME" --out "$BENCH_DIR/reports" \
    2>"$BENCH_DIR/scenario.log" &
scenario_pid=$!
# Its resident memory every half second or so (rss.tsv: seconds, then VmRSS,
# RssAnon and RssFile in KiB, and its threads): what the peak is made of
# (RssFile: the code).
sample_rss() {
    local pid=$1 t=0 child
    while kill -0 "$pid" 2>/dev/null; do
        child=$(pgrep -P "$pid" -x nodefall | head -1 || true)
        awk -v t="$t" '/^VmRSS:/{r=$2} /^RssAnon:/{a=$2} /^RssFile:/{f=$2} /^Threads:/{n=$2}
            END{if (r) printf "%s\t%s\t%s\t%s\t%s\n", t, r, a, f, n}' "/proc/${child:-$pid}/status" 2>/dev/null || true
        sleep 0.5
        t=$(awk -v t="$t" 'BEGIN{print t + 0.5}')
    done
}
sample_rss "$scenario_pid" >"$BENCH_DIR/rss.tsv" &
sampler=$!
wait "$scenario_pid"
code=$?
wait "$sampler" || true
set -e
say "scenario exit code $code (log: $BENCH_DIR/scenario.log)"
# A kubectl watch that ended by itself lost events from then on (kubectl get -w
# does not re-establish a watch the API server closed).
for p in "${pids[@]:1}"; do
    kill -0 "$p" 2>/dev/null || say "a watch (pid $p) had ended before the run did"
done
cp "$NODEFALL_STATE_DIR/$NAME/logs/kube-apiserver.log" "$BENCH_DIR/" || true
[ "${KEEP_AUDIT:-0}" = 1 ] && cp "$NODEFALL_STATE_DIR/$NAME/logs/audit.log" "$BENCH_DIR/"
# The API server ends watches by itself under load (a clean end of the
# stream; why is logged only at its -v=1): kubectl does not watch again,
# client-go, kube-rs and raw-watch.py do.
ended=$(grep -c "ended after" "$BENCH_DIR/raw.log" 2>/dev/null || true)
say "API server: ended the raw watch ${ended:-0} times during the run (raw.log)"
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${pids[@]}" "${stampers[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
stampers=()

result=$(find "$BENCH_DIR/reports" -name result.json | sort | tail -1)
audit_log=$NODEFALL_STATE_DIR/$NAME/logs/audit.log
say "audit check: $(du -h "$audit_log" | cut -f1) of audit log"
set +e
"$bin" audit check "$result" --audit-log "$audit_log" "${baselines[@]}" --format json \
    --matches "$BENCH_DIR/matches.jsonl" >"$BENCH_DIR/check.json"
set -e
wall_s=$(python3 -c "import time; print(round(time.time() - $started, 1))")

# time(1) writes "Command exited with non-zero status N" first when it did.
process_kb=$(tail -1 "$BENCH_DIR/scenario.maxrss" 2>/dev/null || echo 0)
grep -o 'memory: after .*' "$BENCH_DIR/scenario.log" | sed 's/^/  /' >&2 || say "no per-phase memory lines in the log"
sort -t$'\t' -k2,2n "$BENCH_DIR/rss.tsv" | tail -1 | awk -F'\t' '{printf "  sampled peak: %.1f MiB resident at %s s (%.1f anonymous, %.1f file-backed: code; %s threads)\n", $2/1024, $1, $3/1024, $4/1024, $5}' >&2 || true
if [ "${HEAP_PROFILE:-0}" = 1 ]; then
    for heap in "$BENCH_DIR"/heap*.zst "$BENCH_DIR"/heap*.gz; do
        [ -e "$heap" ] || continue
        heaptrack_print --print-peaks 1 --print-allocators 0 --print-temporary 0 --print-leaks 0 \
            --peak-limit 25 --sub-peak-limit 8 "$heap" >"$BENCH_DIR/heap-peaks.txt" 2>&1 || true
        say "heap profile: $heap; its peak consumers in $BENCH_DIR/heap-peaks.txt"
    done
fi
python3 - "$result" "$BENCH_DIR/check.json" "$NODES" "$PODS" "$FAILED" "$wall_s" "$up_s" "$process_kb" <<'EOF'
import json, sys
result = json.load(open(sys.argv[1]))
check = json.load(open(sys.argv[2]))
nodes, pods, failed = (int(a) for a in sys.argv[3:6])
wall_s, up_s = float(sys.argv[6]), float(sys.argv[7])
by = {c["source"]: c for c in check["checks"]}
nf, poll = by["nodefall"], by.get("poller-5s", {})
kw = by.get("kubectl-get-w")
raw = by.get("raw-watch")
process_mb = round(int(sys.argv[8]) / 1024, 1)
usage = result.get("usage") or {}
lag = lambda c, k: round(c["lagMs"][k], 1) if c and c.get("lagMs") else None
print(f"verdict {result['verdict']}; audit: {check['events']} events, {nf['truth']} transitions "
      f"from {check['window']['from']} to {check['window']['to']}", file=sys.stderr)
print(f"{'observer':<15}{'missed':>8}{'dup':>6}{'order':>7}{'extra':>7}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}",
      file=sys.stderr)
for c in check["checks"]:
    print(f"{c['source']:<15}{c['missed']:>8}{c['duplicated']:>6}{c['outOfOrder']:>7}{c['unexplained']:>7}"
          f"{lag(c, 'p50') or '-':>10}{lag(c, 'p95') or '-':>10}{lag(c, 'max') or '-':>10}", file=sys.stderr)
if nf.get("lagFromT0Ms"):
    print(f"nodefall from T0 (the fault and recovery): p50 {nf['lagFromT0Ms']['p50']:.1f} ms, "
          f"p95 {nf['lagFromT0Ms']['p95']:.1f} ms over {nf['lagFromT0Ms']['n']} transitions", file=sys.stderr)
for c in (raw, kw):
    if c and c.get("lagFromT0Ms"):
        print(f"{c['source']} from T0: p50 {c['lagFromT0Ms']['p50']:.1f} ms, "
              f"p95 {c['lagFromT0Ms']['p95']:.1f} ms over {c['lagFromT0Ms']['n']} transitions", file=sys.stderr)
if process_mb:
    print(f"nodefall scenario process, whole life (report and audit check included): "
          f"peak RSS {process_mb} MiB", file=sys.stderr)
print(f"nodefall: peak RSS {usage.get('peakRssBytes', 0) / 2**20:.0f} MiB, "
      f"CPU {usage.get('cpuMs', 0) / 1000:.1f} s; sim up {up_s} s; wall {wall_s} s", file=sys.stderr)
out = {
    "nodes": nodes, "pods": pods, "failed": failed,
    "missed": nf["missed"],
    "rss_mb": round(usage.get("peakRssBytes", 0) / 2**20, 1),
    "cpu_s": round(usage.get("cpuMs", 0) / 1000, 1),
    "lag_p50_ms": lag(nf, "p50"), "lag_p95_ms": lag(nf, "p95"),
    "poller_lag_p95_ms": lag(poll, "p95"),
    "lag_p95_from_t0_ms": round(nf["lagFromT0Ms"]["p95"], 1) if nf.get("lagFromT0Ms") else None,
    "wall_s": wall_s,
}
if kw:
    out["kubectl_lag_p95_ms"] = lag(kw, "p95")
if raw:
    out["raw_watch_lag_p95_ms"] = lag(raw, "p95")
if process_mb:
    out["process_rss_mb"] = process_mb
print(json.dumps(out, separators=(",", ":")))
EOF
