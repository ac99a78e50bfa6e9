//! Faults on a set of nodes (`target: {nodes: SELECTOR}`) on the fake
//! cluster: each node journaled and hit in turn, each put back, and a set
//! whose inject fails on one node stopped there with the node named.

use super::{Setup, run};
use crate::exit;
use crate::record::RunVerdict;
use crate::runner::session::reports::exit_code;

fn fault_step(r: &crate::record::RunResult) -> &crate::record::StepRecord {
    let fault = r
        .steps
        .iter()
        .find(|s| s.kind == crate::record::StepKind::Fault);
    fault.unwrap_or_else(|| panic!("no fault step: {:?}", r.steps))
}

/// Two of the three workers as one set, and one of them as a target of its
/// own for the expectation (an expectation names one node).
const SET: &str = r#"
name: unit-set
namespace: unit
targets:
  pair: {nodes: "kubernetes.io/hostname in (worker-1, worker-2, worker-3)", count: 2}
  first: {name: worker-1}
steps:
  - id: down
    fault: pause-vm
    node: pair
  - expect: {node: first, ready: Unknown, within: 20s}
  # Over the set: when both are Unknown, 8 s after the second inject ended.
  - expect: {node: pair, ready: Unknown, within: 20s}
cleanup: always
"#;

#[tokio::test(start_paused = true)]
async fn a_fault_on_a_set_hits_each_node_and_cleanup_puts_each_back() {
    let mut setup = Setup::new(SET);
    setup.nodes = &["control-plane", "worker-1", "worker-2", "worker-3"];
    let r = run(setup).await;
    let result = &r.outcome.result;
    assert_eq!(result.verdict, RunVerdict::Pass, "{:?}", result.error);
    // `count: 2`: the first two by name; worker-3 is left alone.
    assert_eq!(result.sets["pair"], ["worker-1", "worker-2"]);
    let observed: Vec<(&str, Option<i64>)> = result
        .expectations
        .iter()
        .map(|e| (e.description.as_str(), e.observed))
        .collect();
    assert_eq!(
        observed,
        [
            ("node first (worker-1): Ready=Unknown", Some(8_200)),
            (
                "node pair (each of worker-1, worker-2): Ready=Unknown",
                Some(8_400)
            ),
        ]
    );
    assert_eq!(
        r.acts,
        [
            "inject pause-vm worker-1: begun",
            "inject pause-vm worker-1: done",
            "inject pause-vm worker-2: begun",
            "inject pause-vm worker-2: done",
            "revert resume-vm worker-2: begun",
            "revert resume-vm worker-2: done",
            "revert resume-vm worker-1: begun",
            "revert resume-vm worker-1: done",
        ]
    );
    let step = fault_step(result);
    let fault = step.fault.as_ref().expect("the fault step's record");
    assert_eq!(fault.node, "pair");
    let hit: Vec<(&str, i64, i64)> = fault
        .nodes
        .iter()
        .map(|n| (n.node.as_str(), n.at, n.done))
        .collect();
    // Each act takes 200 ms: the spread is both of them.
    assert_eq!(hit, [("worker-1", 0, 200), ("worker-2", 200, 400)]);
    assert_eq!(fault.spread(), Some(400));
    assert!(fault.hits("worker-2") && !fault.hits("worker-3"));
    assert!(
        step.notes
            .iter()
            .any(|(_, n)| n.contains("2 of 2 nodes hit; spread 0.4s")),
        "{:?}",
        step.notes
    );
    assert!(r.open.is_empty() && r.journal_closed, "{:?}", r.open);
    assert_eq!(exit_code(&r.outcome), exit::PASS);
}

#[tokio::test(start_paused = true)]
async fn a_set_whose_inject_fails_on_one_node_stops_there_and_puts_back_the_others() {
    // The three workers; the inject fails on the second.
    const ALL: &str = r#"
name: unit-set-all
namespace: unit
targets:
  pair: {nodes: "kubernetes.io/hostname in (worker-1, worker-2, worker-3)"}
steps:
  - fault: pause-vm
    node: pair
cleanup: always
"#;
    let mut setup = Setup::new(ALL);
    setup.nodes = &["control-plane", "worker-1", "worker-2", "worker-3"];
    setup.fail = vec!["inject pause-vm worker-2".into()];
    let r = run(setup).await;
    let result = &r.outcome.result;
    let error = result.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("pause-vm on node worker-2 of set `pair`")
            && error.contains("refused (planted)"),
        "{error}"
    );
    // worker-3 is never hit. worker-2 was journaled before its inject, so
    // cleanup reverts it from whatever state the failed inject left.
    assert_eq!(
        r.acts,
        [
            "inject pause-vm worker-1: begun",
            "inject pause-vm worker-1: done",
            "inject pause-vm worker-2: begun",
            "inject pause-vm worker-2: failed",
            "revert resume-vm worker-2: begun",
            "revert resume-vm worker-2: done",
            "revert resume-vm worker-1: begun",
            "revert resume-vm worker-1: done",
        ]
    );
    let fault = fault_step(result)
        .fault
        .as_ref()
        .expect("the fault's record");
    let errors: Vec<bool> = fault.nodes.iter().map(|n| n.error.is_some()).collect();
    assert_eq!(errors, [false, true]);
    assert!(r.open.is_empty() && r.journal_closed, "{:?}", r.open);
    assert_eq!(exit_code(&r.outcome), exit::INFRASTRUCTURE);
}

#[tokio::test(start_paused = true)]
async fn a_set_that_matches_too_few_nodes_stops_the_run_before_any_fault() {
    // Two workers, and the set wants 2 of those named worker-2 or worker-3.
    const FEW: &str = r#"
name: unit-few
namespace: unit
target: {nodes: "kubernetes.io/hostname in (worker-2, worker-3)", count: 2}
steps:
  - fault: poweroff
cleanup: always
"#;
    let r = run(Setup::new(FEW)).await;
    let error = r.outcome.result.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("matches 1 node: worker-2") && error.contains("nothing was injected"),
        "{error}"
    );
    assert!(r.acts.is_empty(), "{:?}", r.acts);
    assert_eq!(exit_code(&r.outcome), exit::INVALID_INPUT);
}

#[tokio::test(start_paused = true)]
async fn a_signal_inside_a_set_s_inject_stops_it_there_and_puts_back_what_it_hit() {
    use super::SignalAt;
    use crate::shutdown::Stop;
    let mut setup = Setup::new(SET);
    setup.nodes = &["control-plane", "worker-1", "worker-2", "worker-3"];
    setup.signal = Some(SignalAt {
        during: "inject pause-vm worker-2".into(),
        stop: Stop::Terminate,
    });
    let r = run(setup).await;
    assert_eq!(r.outcome.stopped_by, Some(Stop::Terminate));
    // The signal cut the step inside worker-2's inject: worker-2 was
    // journaled first, so both nodes hit are put back.
    assert_eq!(
        r.acts,
        [
            "inject pause-vm worker-1: begun",
            "inject pause-vm worker-1: done",
            "inject pause-vm worker-2: begun",
            "revert resume-vm worker-2: begun",
            "revert resume-vm worker-2: done",
            "revert resume-vm worker-1: begun",
            "revert resume-vm worker-1: done",
        ]
    );
    assert!(r.open.is_empty() && r.journal_closed, "{:?}", r.open);
    assert_eq!(exit_code(&r.outcome), 143);
}
