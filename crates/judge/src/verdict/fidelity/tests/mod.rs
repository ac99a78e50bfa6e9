//! The fidelity judgement on constructed runs: a pause of `nfscen-worker`
//! (kind) or `worker-1` (the sim), each pass on rows made for it.

mod compare;
mod passes;
mod points;

use serde_json::json;

use super::*;
use crate::record::RunVerdict;

/// A run of one scenario: a pause of `nfscen-worker` (the target) at
/// 10 s and its resume at 100 s, with `transitions` ([at, node, change]
/// for nodes, [at, pod uid, change] for pods).
pub(super) fn run(target: &str, transitions: serde_json::Value) -> RunResult {
    let step = |label: &str, kind: &str, started: i64| {
        json!({"label": label, "kind": kind, "description": label, "started": started,
               "ended": started + 100, "outcome": {"status": "ok"}})
    };
    serde_json::from_value(json!({
        "schemaVersion": crate::record::SCHEMA_VERSION,
        "scenario": "pause", "file": "pause.yaml", "backend": "sim",
        "profile": crate::profile::TimingProfile::fast(),
        "namespace": "ns", "targets": {"target": target},
        "startedAt": "2026-11-25T15:01:56.691Z",
        "finished": 200_000, "verdict": "pass",
        "steps": [step("setup", "setup", 0), step("#1 (pause)", "fault", 10_000),
                  step("#4", "expect", 11_000), step("#5 (resume)", "fault", 100_000)],
        "expectations": [],
        "cleanup": [step("cleanup", "cleanup", 150_000)],
        "metrics": crate::timeline::metrics::Metrics::default(),
        "transitions": transitions,
    }))
    .unwrap()
}

pub(super) fn node(at: i64, name: &str, change: serde_json::Value) -> serde_json::Value {
    json!({"at": at, "object": {"kind": "node", "name": name}, "change": change})
}

pub(super) fn pod(at: i64, uid: &str, change: serde_json::Value) -> serde_json::Value {
    json!({"at": at, "object": {"kind": "pod", "name": uid, "uid": uid}, "change": change})
}

pub(super) fn ready(status: &str) -> serde_json::Value {
    json!({"type": "nodeReady", "status": status})
}

/// What kind saw: Unknown 48 s after the pause, two pods Terminating,
/// a replacement Ready, and on resume Ready=False then True 10 s later.
pub(super) fn kind_run() -> RunResult {
    let w = "nfscen-worker";
    run(
        w,
        json!([
            pod(1_000, "a", json!({"type": "podScheduled", "node": w})),
            pod(1_000, "b", json!({"type": "podScheduled", "node": w})),
            pod(
                1_000,
                "c",
                json!({"type": "podScheduled", "node": "nfscen-worker2"})
            ),
            node(5_000, w, ready("True")),
            node(58_000, w, ready("Unknown")),
            node(
                58_100,
                w,
                json!({"type": "taintAdded", "key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})
            ),
            pod(80_000, "a", json!({"type": "podTerminating"})),
            pod(80_500, "b", json!({"type": "podTerminating"})),
            pod(81_000, "d", json!({"type": "podAdded", "labels": {}})),
            pod(84_000, "d", json!({"type": "podReady", "ready": true})),
            node(100_300, w, ready("False")),
            node(110_300, w, ready("True")),
            node(160_000, w, ready("Unknown")),
        ]),
    )
}

pub(super) fn names(points: &[Point]) -> Vec<(&str, &str, Ms, usize)> {
    points
        .iter()
        .map(|p| (p.what.as_str(), p.step.as_str(), p.after, p.count))
        .collect()
}

/// The row of that name.
pub(super) fn named<'a>(f: &'a ScenarioFidelity, what: &str) -> &'a Row {
    f.rows.iter().find(|r| r.what == what).unwrap()
}

pub(super) fn with_probe(mut run: RunResult, start: Ms, end: Ms) -> RunResult {
    let mut fixture: RunResult = serde_json::from_str(include_str!(
        "../../../../../../tests/fixtures/results/clients-probe.json"
    ))
    .unwrap();
    let w = &mut fixture.probes[0].windows[0];
    (w.start, w.end) = (start, Some(end));
    run.probes = fixture.probes;
    run
}
