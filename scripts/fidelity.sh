#!/usr/bin/env bash
# The simulator against real kubelets: runs the kind scenarios
# (scenarios/kind-*.yaml, or the ones named) on a real kind cluster
# (scripts/kind-scenarios.sh) and on the simulator with the same timings
# profile, then compares every transition (`nodefall report fidelity`).
#
#   scripts/fidelity.sh [--profile default|fast] [--workers N] [--kind-results DIR]
#                       [--sim-results DIR] [--out DIR] [--doc | --doc-section NAME]
#                       [SCENARIO...]
#
# --profile       the timings of both clusters (default: default; fast for a
#                 quick iteration, about 25 minutes instead of 90)
# --workers       the kind cluster's workers and the sim's nodes (default 3;
#                 2 gives a 4-replica StatefulSet two pods on every node, as
#                 CI's kind cluster has, where 3 leave it to chance which
#                 node has two)
# --kind-results  reuse the kind runs under DIR (a kind-scenarios.sh --out)
#                 instead of running them again
# --sim-results   the same for the sim runs (a fidelity.sh --out's sim/)
# --out           where the runs and fidelity.md go (default
#                 target/fidelity/<profile>)
# --doc           also write docs/fidelity.md (the sections --doc-section
#                 wrote stay, at its end)
# --doc-section   write this run into docs/fidelity.md as a section of its
#                 own, `## NAME` with its own timings and summary, in place
#                 of the section of that name a run wrote before, else at
#                 the end (the scenarios of a section run alone, without
#                 running every other one again); the head lists every
#                 section with its own summary line, not in its figures
#
# Exit 0 when every transition met the goal (same order, within 10 % or
# 1 s), 1 otherwise. Needs what kind-scenarios.sh needs (Docker, the node
# image) unless --kind-results is given. NODEFALL (the binary, default:
# `cargo build` then target/debug/nodefall) adjusts it.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

profile=default
workers=3
kind_results=
sim_results=
out=
doc=0
section=
scenarios=()
while [ $# -gt 0 ]; do
    case $1 in
        --profile) profile=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --kind-results) kind_results=$2; shift 2 ;;
        --sim-results) sim_results=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --doc) doc=1; shift ;;
        --doc-section) section=$2; shift 2 ;;
        -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fidelity.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) scenarios+=("$1"); shift ;;
    esac
done
case $workers in
    ''|*[!0-9]*|0) echo "fidelity.sh: --workers takes a number of 1 or more, not $workers" >&2; exit 2 ;;
esac
case $profile in
    default|fast) ;;
    *) echo "fidelity.sh: --profile is default or fast, not $profile" >&2; exit 2 ;;
esac
if [ "$doc" = 1 ] && [ -n "$section" ]; then
    echo "fidelity.sh: --doc writes the whole document, --doc-section one section of it: give one" >&2
    exit 2
fi
case $section in
    *[!A-Za-z0-9\ -]*) echo "fidelity.sh: --doc-section takes letters, digits, spaces and dashes, not $section" >&2; exit 2 ;;
esac
if [ -n "$kind_results" ] && [ ! -d "$kind_results" ]; then
    echo "fidelity.sh: --kind-results $kind_results is not a directory" >&2
    exit 2
fi
if [ -n "$sim_results" ] && [ ! -d "$sim_results" ]; then
    echo "fidelity.sh: --sim-results $sim_results is not a directory" >&2
    exit 2
fi
if [ ${#scenarios[@]} -eq 0 ]; then
    scenarios=(scenarios/kind-*.yaml)
fi
out=${out:-target/fidelity/$profile}

if [ -z "${NODEFALL:-}" ]; then
    cargo build --quiet
    NODEFALL=$repo/target/debug/nodefall
fi
export NODEFALL
mkdir -p "$out"

kind_reused=1
if [ -z "$kind_results" ]; then
    kind_reused=0
    kind_results=$out/kind
    echo "== kind: ${#scenarios[@]} scenario(s), $profile timings" >&2
    # Its exit status is the scenarios' verdicts; the comparison says more.
    bash scripts/kind-scenarios.sh --profile "$profile" --workers "$workers" --out "$kind_results" "${scenarios[@]}" || true
fi

# The sim: a fresh cluster per scenario with as many nodes as the kind
# cluster has workers and one that stands for its control plane (no
# workload, counted in its zone by the node lifecycle controller), the same
# timings and the same kubelet graceful shutdown settings
# (kind-scenarios.sh gives kind's kubelets 20s / 5s).
if [ -n "$sim_results" ]; then
    sim=$sim_results
else
    sim=$out/sim
    mkdir -p "$sim"
    cluster=fidelity
    up=0
    # shellcheck disable=SC2317 # called by the EXIT trap
    sim_down() {
        # Only a cluster this script started.
        if [ "$up" = 1 ]; then
            "$NODEFALL" sim down --name "$cluster" > /dev/null 2>&1 || true
        fi
    }
    trap sim_down EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    for s in "${scenarios[@]}"; do
        base=$(basename "$s" .yaml)
        echo "== sim: $s ($profile timings)" >&2
        if ! "$NODEFALL" sim up --name "$cluster" --profile "$profile" --nodes "$workers" --control-plane-node \
            --shutdown-grace-period 20s --shutdown-grace-period-critical-pods 5s \
            > "$sim/$base.log" 2>&1; then
            echo "   (sim up failed: $(tail -n 1 "$sim/$base.log"))" >&2
            continue
        fi
        up=1
        if ! "$NODEFALL" scenario "$s" --backend sim --cluster "$cluster" \
            --out "$sim/$base" >> "$sim/$base.log" 2>&1; then
            echo "   (not a pass: $(tail -n 1 "$sim/$base.log"))" >&2
        fi
        "$NODEFALL" sim down --name "$cluster" >> "$sim/$base.log" 2>&1 || true
        up=0
    done
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
made="from nodefall $commit"
before=()
if [ "$kind_reused" = 1 ]; then
    before+=("the kind runs under \`$kind_results\`")
fi
if [ -n "$sim_results" ]; then
    before+=("the sim runs under \`$sim\`")
fi
if [ ${#before[@]} -gt 0 ]; then
    joined=$(IFS=,; echo "${before[*]}")
    made="by nodefall $commit from runs made before it (${joined//,/ and })"
fi
note="Generated by \`scripts/fidelity.sh --profile $profile\` on $(date -u +%Y-%m-%d) \
$made: the kind runs with a $workers-worker cluster made by \`nodefall kind up\`, \
the sim runs on a fresh \`nodefall sim up --nodes $workers --control-plane-node\` cluster each, both \
with the kubelets' graceful shutdown at 20s / 5s."
rc=0
"$NODEFALL" report fidelity --kind "$kind_results" --sim "$sim" --note "$note" \
    --out "$out/fidelity.md" || rc=$?
# The sections written by --doc-section, listed under the head's summary
# (docs/fidelity.md rewritten through a temporary file, never in place).
index_sections() {
    awk -f scripts/lib/fidelity-sections.awk docs/fidelity.md docs/fidelity.md \
        > "$out/fidelity-indexed.md"
    mv "$out/fidelity-indexed.md" docs/fidelity.md
}
if [ "$doc" = 1 ] && [ -f "$out/fidelity.md" ]; then
    # The whole document anew; the sections runs of their own wrote stay.
    {
        cat "$out/fidelity.md"
        awk 'index($0, "<!-- fidelity.sh --doc-section ") == 1 { print ""; keep = 1 }
             keep { print }
             index($0, "<!-- end of section ") == 1 { keep = 0 }' docs/fidelity.md
    } > "$out/fidelity-doc.md"
    mv "$out/fidelity-doc.md" docs/fidelity.md
    index_sections
    echo "wrote docs/fidelity.md" >&2
fi
if [ -n "$section" ] && [ -f "$out/fidelity.md" ]; then
    # Between two markers: the document without its title, every heading
    # one level down, under `## $section`.
    begin="<!-- fidelity.sh --doc-section $section: generated, do not edit -->"
    end="<!-- end of section $section -->"
    {
        echo "$begin"
        echo "## $section"
        tail -n +2 "$out/fidelity.md" | sed 's/^\(#\{2,5\}\) /#\1 /'
        echo "$end"
    } > "$out/section.md"
    awk -v begin="$begin" -v end="$end" -v file="$out/section.md" '
        function put() { while ((getline l < file) > 0) print l; done = 1 }
        $0 == begin { skip = 1; put(); next }
        skip && $0 == end { skip = 0; next }
        !skip { print }
        END { if (!done) { print ""; put() } }
    ' docs/fidelity.md > "$out/fidelity-doc.md"
    mv "$out/fidelity-doc.md" docs/fidelity.md
    index_sections
    echo "wrote the section $section of docs/fidelity.md" >&2
fi
echo "wrote $out/fidelity.md" >&2
exit "$rc"
