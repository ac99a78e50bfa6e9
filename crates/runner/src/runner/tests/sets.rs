//! Faults on a set of nodes (`target: {nodes: SELECTOR}`) on the fake
//! cluster: every node journaled, then hit at once (a backend that forks,
//! as kind's) or in turn (one that does not, as the sim's), each put back;
//! a set whose inject fails on one node begins no more, names it, and
//! every node journaled is put back.

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

/// What the fake backend did on `SET`, hit at once (`forks`) or in turn.
struct SetRun {
    /// When the set was Unknown as a whole.
    set_unknown: i64,
    /// The injects' acts; the reverts ([`REVERTS`]) follow.
    injects: [&'static str; 4],
    /// Each node's (inject begun, done).
    hit: [(&'static str, i64, i64); 2],
    spread: &'static str,
}

async fn a_fault_on_a_set(forks: bool, want: SetRun) {
    let mut setup = Setup::new(SET);
    setup.nodes = &["control-plane", "worker-1", "worker-2", "worker-3"];
    setup.forks = forks;
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
                Some(want.set_unknown)
            ),
        ]
    );
    let acts: Vec<&str> = want.injects.iter().chain(&REVERTS).copied().collect();
    assert_eq!(r.acts, acts);
    let step = fault_step(result);
    let fault = step.fault.as_ref().expect("the fault step's record");
    assert_eq!(fault.node, "pair");
    let hit: Vec<(&str, i64, i64)> = fault
        .nodes
        .iter()
        .map(|n| (n.node.as_str(), n.at, n.done))
        .collect();
    assert_eq!(hit, want.hit);
    assert!(fault.hits("worker-2") && !fault.hits("worker-3"));
    let note = format!("2 of 2 nodes hit; spread {}", want.spread);
    assert!(
        step.notes.iter().any(|(_, n)| n.contains(&note)),
        "{note}: {:?}",
        step.notes
    );
    assert!(r.open.is_empty() && r.journal_closed, "{:?}", r.open);
    assert_eq!(exit_code(&r.outcome), exit::PASS);
}

/// The revert of both, newest journaled first.
const REVERTS: [&str; 4] = [
    "revert resume-vm worker-2: begun",
    "revert resume-vm worker-2: done",
    "revert resume-vm worker-1: begun",
    "revert resume-vm worker-1: done",
];

#[tokio::test(start_paused = true)]
async fn a_fault_on_a_set_hits_its_nodes_at_once_and_cleanup_puts_each_back() {
    // Each act takes 200 ms, both together: the spread is one act.
    let want = SetRun {
        set_unknown: 8_200,
        injects: [
            "inject pause-vm worker-1: begun",
            "inject pause-vm worker-2: begun",
            "inject pause-vm worker-1: done",
            "inject pause-vm worker-2: done",
        ],
        hit: [("worker-1", 0, 200), ("worker-2", 0, 200)],
        spread: "0.2s",
    };
    a_fault_on_a_set(true, want).await;
}

#[tokio::test(start_paused = true)]
async fn a_backend_that_cannot_fork_hits_a_set_s_nodes_in_turn() {
    // One after another: the set is Unknown 8 s after the second inject
    // ended, and the spread is both acts.
    let want = SetRun {
        set_unknown: 8_400,
        injects: [
            "inject pause-vm worker-1: begun",
            "inject pause-vm worker-1: done",
            "inject pause-vm worker-2: begun",
            "inject pause-vm worker-2: done",
        ],
        hit: [("worker-1", 0, 200), ("worker-2", 200, 400)],
        spread: "0.4s",
    };
    a_fault_on_a_set(false, want).await;
}

/// The three workers as one set; the inject fails on the second.
const ALL: &str = r#"
name: unit-set-all
namespace: unit
targets:
  all: {nodes: "kubernetes.io/hostname in (worker-1, worker-2, worker-3)"}
steps:
  - fault: pause-vm
    node: all
cleanup: always
"#;

/// Runs `ALL` with worker-2's inject failing, the setup changed by `how`;
/// checks the error names worker-2, the journal is emptied and the exit
/// is 3, and returns the acts and each node hit: (node, at, done, failed).
async fn a_set_failing_on_worker_2(
    how: impl FnOnce(&mut Setup),
) -> (Vec<String>, Vec<(String, i64, i64, bool)>) {
    let mut setup = Setup::new(ALL);
    setup.nodes = &["control-plane", "worker-1", "worker-2", "worker-3"];
    setup.fail = vec!["inject pause-vm worker-2".into()];
    how(&mut setup);
    let r = run(setup).await;
    let result = &r.outcome.result;
    let error = result.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("pause-vm on node worker-2 of set `all`")
            && error.contains("refused (planted)"),
        "{error}"
    );
    assert!(r.open.is_empty() && r.journal_closed, "{:?}", r.open);
    assert_eq!(exit_code(&r.outcome), exit::INFRASTRUCTURE);
    let fault = fault_step(result)
        .fault
        .as_ref()
        .expect("the fault's record");
    let hit = fault
        .nodes
        .iter()
        .map(|n| (n.node.clone(), n.at, n.done, n.error.is_some()))
        .collect();
    (r.acts, hit)
}

/// Every node reverted, newest journaled first: all three were journaled
/// before any inject, so worker-3's revert runs even where it was never
/// begun (a revert takes a node as it finds it).
const REVERTS_ALL: [&str; 6] = [
    "revert resume-vm worker-3: begun",
    "revert resume-vm worker-3: done",
    "revert resume-vm worker-2: begun",
    "revert resume-vm worker-2: done",
    "revert resume-vm worker-1: begun",
    "revert resume-vm worker-1: done",
];

/// worker-1 hit, then worker-2 failing, then worker-3 never begun.
const IN_TURN: [&str; 4] = [
    "inject pause-vm worker-1: begun",
    "inject pause-vm worker-1: done",
    "inject pause-vm worker-2: begun",
    "inject pause-vm worker-2: failed",
];

fn then_reverts(injects: &[&'static str]) -> Vec<String> {
    injects
        .iter()
        .chain(&REVERTS_ALL)
        .map(|&a| a.to_owned())
        .collect()
}

fn hit(node: &str, at: i64, done: i64, failed: bool) -> (String, i64, i64, bool) {
    (node.to_owned(), at, done, failed)
}

#[tokio::test(start_paused = true)]
async fn a_set_whose_inject_fails_on_one_node_names_it_and_puts_back_every_node() {
    let (acts, hits) = a_set_failing_on_worker_2(|_| {}).await;
    // All three begun together; worker-2 failed, the others were hit.
    let injects = [
        "inject pause-vm worker-1: begun",
        "inject pause-vm worker-2: begun",
        "inject pause-vm worker-3: begun",
        "inject pause-vm worker-1: done",
        "inject pause-vm worker-2: failed",
        "inject pause-vm worker-3: done",
    ];
    assert_eq!(acts, then_reverts(&injects));
    let want = [
        hit("worker-1", 0, 200, false),
        hit("worker-2", 0, 200, true),
        hit("worker-3", 0, 200, false),
    ];
    assert_eq!(hits, want);
}

#[tokio::test(start_paused = true)]
async fn once_a_node_of_a_set_fails_no_more_are_begun() {
    // Forks one at a time (worker-3 waits for a place), and the backend's
    // own batch (here the trait's default: in turn): every node journaled
    // first, worker-3 never begun, all three reverted.
    let one_at_a_time = |s: &mut Setup| s.parallel = 1;
    let batch = |s: &mut Setup| {
        s.forks = false;
        s.batches = true;
    };
    let ways: [&dyn Fn(&mut Setup); 2] = [&one_at_a_time, &batch];
    for how in ways {
        let (acts, hits) = a_set_failing_on_worker_2(how).await;
        assert_eq!(acts, then_reverts(&IN_TURN));
        let want = [
            hit("worker-1", 0, 200, false),
            hit("worker-2", 200, 400, true),
        ];
        assert_eq!(hits, want);
    }
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
    // The signal cut the step inside worker-2's inject, begun with
    // worker-1's: both were journaled first, so both are put back.
    assert_eq!(
        r.acts,
        [
            "inject pause-vm worker-1: begun",
            "inject pause-vm worker-2: begun",
            REVERTS[0],
            REVERTS[1],
            REVERTS[2],
            REVERTS[3],
        ]
    );
    assert!(r.open.is_empty() && r.journal_closed, "{:?}", r.open);
    assert_eq!(exit_code(&r.outcome), 143);
}
