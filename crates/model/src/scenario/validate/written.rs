//! Every condition can be written, on its own family's subject: for each
//! variant of each family (matched exhaustively, so a new condition is a
//! compile error here until the validator reads it), the expectation that
//! validates to it. Tests only.

#![deny(clippy::wildcard_enum_match_arm)]

use crate::scenario::checked::{
    Condition, EndOfRunCond, NodeCond, PodsCond, PreflightCond, ProbeCond, ServiceCond, StepKind,
    VolumeCond,
};
use crate::scenario::load::load_str;

/// The expectation each kind of condition is written as. A new variant
/// gets its expectation here and in [`WRITTEN`].
fn written(c: &Condition) -> &'static str {
    match c {
        Condition::Node(c) => match c {
            NodeCond::Ready(_) => "{node: target, ready: Unknown, within: 1m}",
            NodeCond::Taint { .. } => "{node: target, taint: example.com/x, within: 1m}",
            NodeCond::NoTaint { .. } => {
                "{node: target, noTaint: \"example.com/x:NoExecute\", within: 1m}"
            }
            NodeCond::Unschedulable(_) => "{node: target, unschedulable: true, within: 1m}",
            NodeCond::RemediatedBy(_) => "{node: target, remediatedBy: me, within: 1m}",
            NodeCond::Exists(_) => "{node: target, exists: false, within: 1m}",
            NodeCond::Count(_) => "{node: zone, ready: Unknown, count: 1, within: 1m}",
        },
        Condition::Pods(c) => match c {
            PodsCond::Ready(_) => "{pods: app=web, ready: all, within: 1m}",
            PodsCond::ReadyAtLeast(_) => "{pods: app=web, readyAtLeast: 2, within: 1m}",
            PodsCond::ReadyBelow(_) => "{pods: app=web, readyBelow: 2, within: 1m}",
            PodsCond::Terminating(_) => "{pods: app=web, terminating: 1, within: 1m}",
            PodsCond::Count(_) => "{pods: app=web, count: 0, within: 1m}",
            PodsCond::Phase(_) => "{pods: app=web, phase: Failed, within: 1m}",
            PodsCond::Reason(_) => "{pods: app=web, reason: Terminated, within: 1m}",
        },
        Condition::Volume(c) => match c {
            VolumeCond::Attached(_) => "{pvc: data-web-0, detachedFrom: target, within: 1m}",
        },
        Condition::Event(_) => "{event: NodeNotReady, node: target, within: 1m}",
        Condition::Service(c) => match c {
            ServiceCond::ReadyEndpoints(_) => "{service: web, readyEndpoints: 0, within: 1m}",
        },
        Condition::Preflight(c) => match c {
            PreflightCond::GracefulShutdown(_) => "{node: target, gracefulShutdown: will-run}",
        },
        Condition::EndOfRun(c) => match c {
            EndOfRunCond::DuplicateWindowAtMost(_) => "{duplicateWindow: {pods: app=web}, max: 0s}",
            EndOfRunCond::FencedBeforeReplacement => "{fencedBefore: replacement, pods: app=web}",
            EndOfRunCond::Remediation { .. } => "{remediation: {by: me}, node: target}",
        },
        Condition::Probe(c) => match c {
            ProbeCond::Errors(_) => "{probe: web, errors: 0}",
            ProbeCond::ErrorWindow { .. } => "{probe: web, errorWindow: \"<= 10s\"}",
        },
    }
}

/// Every expectation [`written`] names, one per kind of condition.
const WRITTEN: &[&str] = &[
    "{node: target, ready: Unknown, within: 1m}",
    "{node: target, taint: example.com/x, within: 1m}",
    "{node: target, noTaint: \"example.com/x:NoExecute\", within: 1m}",
    "{node: target, unschedulable: true, within: 1m}",
    "{node: target, remediatedBy: me, within: 1m}",
    "{node: target, exists: false, within: 1m}",
    "{node: zone, ready: Unknown, count: 1, within: 1m}",
    "{pods: app=web, ready: all, within: 1m}",
    "{pods: app=web, readyAtLeast: 2, within: 1m}",
    "{pods: app=web, readyBelow: 2, within: 1m}",
    "{pods: app=web, terminating: 1, within: 1m}",
    "{pods: app=web, count: 0, within: 1m}",
    "{pods: app=web, phase: Failed, within: 1m}",
    "{pods: app=web, reason: Terminated, within: 1m}",
    "{pvc: data-web-0, detachedFrom: target, within: 1m}",
    "{event: NodeNotReady, node: target, within: 1m}",
    "{service: web, readyEndpoints: 0, within: 1m}",
    "{node: target, gracefulShutdown: will-run}",
    "{duplicateWindow: {pods: app=web}, max: 0s}",
    "{fencedBefore: replacement, pods: app=web}",
    "{remediation: {by: me}, node: target}",
    "{probe: web, errors: 0}",
    "{probe: web, errorWindow: \"<= 10s\"}",
];

/// The conditions of `expectation`, validated as the first step of a
/// scenario whose fault follows it.
fn conditions(expectation: &str) -> Vec<Condition> {
    let text = format!(
        "name: t\nnamespace: ns\ntargets: {{target: {{mostPods: app=web}}, zone: {{nodes: zone=a}}}}\nprobe: {{name: web, url: \"http://127.0.0.1:30080/\"}}\nsteps:\n  - expect: {expectation}\n  - fault: shutdown\n"
    );
    let checked = load_str("s.yaml", std::path::Path::new("."), &text)
        .and_then(|l| super::validate(l, &crate::files::Memory::default()))
        .unwrap_or_else(|e| panic!("{expectation}: {e}"));
    let StepKind::Expect(e) = &checked.steps[0].kind else {
        panic!("{expectation}: the first step is an expectation");
    };
    e.conditions.clone()
}

#[test]
fn every_kind_of_condition_is_written_by_its_own_expectation() {
    for expectation in WRITTEN {
        let got = conditions(expectation);
        // `count` on a set counts the nodes meeting its other condition.
        let count = expectation.contains("count: 1");
        assert_eq!(got.len(), 1 + usize::from(count), "{expectation}: {got:?}");
        let last = got.last().expect("a condition");
        assert_eq!(written(last), *expectation, "{got:?}");
    }
}
