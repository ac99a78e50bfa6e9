//! Whole runs on the fake cluster: what the runner decides, in what order it
//! acts and puts back, on paused time. Times are ms since the run started;
//! a fault's act takes 200 ms and the node is `Unknown` 8 s after it ended.

use super::{Ran, Setup, SignalAt, run};
use crate::exit;
use crate::probe::RequestOutcome;
use crate::record::{RunVerdict, Verdict};
use crate::runner::session::reports::exit_code;
use crate::shutdown::Stop;

const PAUSE: &str = r#"
name: unit-pause
namespace: unit
target: {name: worker-1}
steps:
  - id: pause
    fault: pause-vm
  # Seen 8.2 s after the pause began: inside only because the window closes
  # later by the pause's own 0.2 s.
  - expect: {node: target, ready: Unknown, within: 5s .. 8100ms}
  - expect: {node: target, taint: "node.kubernetes.io/unreachable:NoSchedule", within: 12s}
  - action: {wait: {duration: 30s}}
  - fault: resume-vm
  - expect: {node: target, ready: "True", within: 10s}
cleanup: always
"#;

/// PAUSE without its own resume: cleanup puts the node back.
const PAUSE_ONLY: &str = r#"
name: unit-pause-only
namespace: unit
target: {name: worker-1}
steps:
  - fault: pause-vm
  - expect: {node: target, ready: Unknown, within: 20s}
cleanup: always
"#;

const INJECT: &str = "inject pause-vm worker-1";
const REVERT: &str = "revert resume-vm worker-1";

fn acts(r: &Ran) -> Vec<&str> {
    r.acts.iter().map(String::as_str).collect()
}

fn observed(r: &Ran) -> Vec<(String, Verdict, Option<i64>)> {
    r.outcome
        .result
        .expectations
        .iter()
        .map(|e| (e.label.clone(), e.verdict, e.observed))
        .collect()
}

/// Every fault put back, nothing left in the journal, and the journal closed.
fn all_put_back(r: &Ran) {
    assert!(r.open.is_empty(), "left in the journal: {:?}", r.open);
    assert!(
        r.outcome.unreverted.is_empty(),
        "{:?}",
        r.outcome.unreverted
    );
    assert!(r.journal_closed);
    assert_eq!(
        acts(r).last(),
        Some(&"revert resume-vm worker-1: done"),
        "{:?}",
        r.acts
    );
}

#[tokio::test(start_paused = true)]
async fn steps_run_in_order_and_windows_are_decided_on_the_scripted_timeline() {
    let r = run(Setup::new(PAUSE)).await;
    let result = &r.outcome.result;
    assert_eq!(result.verdict, RunVerdict::Pass, "{:?}", result.error);
    assert_eq!(
        observed(&r),
        [
            ("#2".into(), Verdict::Pass, Some(8_200)),
            ("#3".into(), Verdict::Pass, Some(8_200)),
            ("#6".into(), Verdict::Pass, Some(200)),
        ]
    );
    // The resume-vm step settled the pause: cleanup has no fault to revert.
    assert_eq!(
        acts(&r),
        [
            "inject pause-vm worker-1: begun",
            "inject pause-vm worker-1: done",
            "revert resume-vm worker-1: begun",
            "revert resume-vm worker-1: done",
        ]
    );
    // The wait begins once #3 is decided (8.2 s, and the 20 ms the runner
    // lets a burst of changes settle), and the resume when it ends.
    let started = |label: &str| {
        let s = result.steps.iter().find(|s| s.label.starts_with(label));
        s.map(|s| s.started)
            .unwrap_or_else(|| panic!("{label}: {:?}", result.steps))
    };
    assert_eq!(started("#1"), 0);
    assert!(
        (8_200..=8_300).contains(&started("#4")),
        "{:?}",
        result.steps
    );
    assert_eq!(started("#5") - started("#4"), 30_000, "{:?}", result.steps);
    all_put_back(&r);
    assert_eq!(exit_code(&r.outcome), exit::PASS);
}

#[tokio::test(start_paused = true)]
async fn a_guard_firing_mid_step_restores_and_fails_the_run() {
    const GUARDED: &str = r#"
name: unit-guard
namespace: unit
target: {name: worker-1}
abortIf:
  - {name: worker-1-lost, node: target, ready: Unknown, for: 2s}
steps:
  - fault: pause-vm
  - expect: {node: target, unschedulable: true, within: 1m}
cleanup: always
"#;
    let r = run(Setup::new(GUARDED)).await;
    let result = &r.outcome.result;
    assert_eq!(result.verdict, RunVerdict::Fail, "{:?}", result.error);
    let aborted = result.aborted.as_ref().expect("the guard fired");
    assert_eq!(aborted.guard, "worker-1-lost");
    // Unknown at 8.2 s, held 2 s: the step waiting up to a minute is cut.
    let revert = result
        .cleanup
        .iter()
        .find(|s| s.description.contains("resume-vm"))
        .expect("the pause reverted in cleanup");
    assert!((10_200..=10_400).contains(&revert.started), "{revert:?}");
    assert_ne!(result.expectations[0].verdict, Verdict::Pass);
    all_put_back(&r);
    assert_eq!(exit_code(&r.outcome), exit::EXPECTATION_FAILED);
}

#[tokio::test(start_paused = true)]
async fn a_signal_mid_inject_leaves_the_fault_reverted_and_the_journal_closable() {
    let mut setup = Setup::new(PAUSE);
    setup.signal = Some(SignalAt {
        during: INJECT.into(),
        stop: Stop::Interrupt,
    });
    let r = run(setup).await;
    assert_eq!(r.outcome.result.verdict, RunVerdict::Interrupted);
    assert_eq!(r.outcome.stopped_by, Some(Stop::Interrupt));
    // The inject was cut short; the fault was journaled first, so cleanup
    // reverts it all the same.
    assert_eq!(
        acts(&r),
        [
            "inject pause-vm worker-1: begun",
            "revert resume-vm worker-1: begun",
            "revert resume-vm worker-1: done",
        ]
    );
    all_put_back(&r);
    assert_eq!(exit_code(&r.outcome), 130);
}

#[tokio::test(start_paused = true)]
async fn a_signal_mid_revert_leaves_the_fault_reverted_and_the_journal_closable() {
    // In the scenario's own resume-vm step: the step is cut, cleanup reverts.
    let mut setup = Setup::new(PAUSE);
    setup.signal = Some(SignalAt {
        during: REVERT.into(),
        stop: Stop::Terminate,
    });
    let r = run(setup).await;
    assert_eq!(r.outcome.stopped_by, Some(Stop::Terminate));
    assert_eq!(
        acts(&r)[1..],
        [
            "inject pause-vm worker-1: done",
            "revert resume-vm worker-1: begun",
            "revert resume-vm worker-1: begun",
            "revert resume-vm worker-1: done",
        ]
    );
    all_put_back(&r);
    // In cleanup's revert: a first signal there lets cleanup finish.
    let mut setup = Setup::new(PAUSE_ONLY);
    setup.signal = Some(SignalAt {
        during: REVERT.into(),
        stop: Stop::Hangup,
    });
    let r = run(setup).await;
    assert_eq!(r.outcome.result.verdict, RunVerdict::Interrupted);
    assert_eq!(r.outcome.abandoned, None);
    all_put_back(&r);
    assert_eq!(exit_code(&r.outcome), 129);
}

#[tokio::test(start_paused = true)]
async fn a_failed_revert_is_reported_with_exit_3_and_stays_in_the_journal() {
    let mut setup = Setup::new(PAUSE_ONLY);
    setup.fail = vec![REVERT.into()];
    let r = run(setup).await;
    // The expectations held: the run is an infrastructure failure anyway.
    assert_eq!(observed(&r), [("#2".into(), Verdict::Pass, Some(8_200))]);
    assert_eq!(acts(&r).last(), Some(&"revert resume-vm worker-1: failed"));
    assert_eq!(r.outcome.unreverted.len(), 1, "{:?}", r.outcome.unreverted);
    assert!(
        r.outcome.unreverted[0].contains("worker-1"),
        "{:?}",
        r.outcome.unreverted
    );
    assert_eq!(r.open, r.outcome.unreverted);
    assert_eq!(exit_code(&r.outcome), exit::INFRASTRUCTURE);
}

#[tokio::test(start_paused = true)]
async fn cleanup_reverts_faults_then_taints_and_cordons_then_applied_objects() {
    const CHANGES: &str = r#"
name: unit-cleanup
namespace: unit
setup:
  apply: cm.yaml
target: {name: worker-1}
steps:
  - action: {cordon: {node: target}}
  - action: {taint: {node: target, key: example.com/held, value: "yes", effect: NoSchedule}}
  - fault: pause-vm
  - expect: {node: target, ready: Unknown, within: 20s}
cleanup: always
"#;
    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n";
    let mut setup = Setup::new(CHANGES);
    setup.manifests = &[("cm.yaml", CM)];
    let r = run(setup).await;
    let result = &r.outcome.result;
    assert_eq!(result.verdict, RunVerdict::Pass, "{:?}", result.error);
    let order: Vec<&str> = result
        .cleanup
        .iter()
        .map(|s| s.description.as_str())
        .collect();
    let at = |what: &str| {
        order
            .iter()
            .position(|d| d.contains(what))
            .unwrap_or_else(|| panic!("{what} in {order:?}"))
    };
    assert!(at("resume-vm") < at("example.com/held"), "{order:?}");
    assert!(at("example.com/held") < at("settings"), "{order:?}");
    assert!(at("uncordon") < at("settings"), "{order:?}");
    assert!(at("settings") < at("namespace"), "{order:?}");
    assert!(
        r.api
            .get("api/v1/namespaces/unit/configmaps/settings")
            .is_none()
    );
    let deletes = r
        .api
        .requests()
        .into_iter()
        .filter(|q| q.starts_with("DELETE"));
    assert_eq!(
        deletes
            .map(|q| q.split('?').next().unwrap_or_default().to_owned())
            .collect::<Vec<_>>(),
        [
            "DELETE api/v1/namespaces/unit/configmaps/settings",
            "DELETE api/v1/namespaces/unit"
        ],
        "nothing else deleted"
    );
    let node = r.api.get("api/v1/nodes/worker-1").expect("the node");
    assert!(node["spec"]["unschedulable"] != true, "{node}");
    assert!(!node.to_string().contains("example.com/held"), "{node}");
    all_put_back(&r);
}

#[tokio::test(start_paused = true)]
async fn a_probe_expectation_is_decided_when_the_probes_stop() {
    // The clients are refused from the pause's end (0.2 s) to the resume's
    // end; requests every 500 ms.
    const PROBED: &str = r#"
name: unit-probe
namespace: unit
target: {name: worker-1}
probe: {name: web, url: "http://127.0.0.1:30080/", interval: 500ms, timeout: 1s}
steps:
  - id: pause
    fault: pause-vm
  - expect: {probe: web, errors: 0, within: 5s}
  - expect: {node: target, ready: Unknown, within: 20s}
  - id: resume
    fault: resume-vm
  - expect: {probe: web, errors: 0, after: 2s}
  - action: {wait: {duration: 10s}}
cleanup: always
"#;
    let r = run(Setup::new(PROBED)).await;
    let result = &r.outcome.result;
    let probe = &result.probes[0];
    // Not held up by the probe's window: the node's step was decided at 8.2 s.
    assert_eq!(observed(&r)[1], ("#3".into(), Verdict::Pass, Some(8_200)));
    let during = &result.expectations[0];
    assert_eq!(during.verdict, Verdict::Fail, "{during:?}");
    // Decided over the requests of its window, once the probe had stopped
    // (after the 10 s wait), not when the step was reached.
    // The probes settled first (2 s): the pause began then.
    let pause = during.anchor_at;
    assert_eq!(
        (during.window_from, during.window_to),
        (Some(pause), Some(pause + 5_000)),
        "{during:?}"
    );
    let in_window = probe
        .samples
        .iter()
        .filter(|s| (pause..=pause + 5_000).contains(&s.at))
        .filter(|s| s.outcome != (RequestOutcome::Ok { status: 200 }))
        .count();
    assert!(
        in_window >= 9,
        "{in_window} refused in 0..5 s: {:?}",
        probe.samples
    );
    assert!(during.detail.contains(&in_window.to_string()), "{during:?}");
    let after = &result.expectations[2];
    assert_eq!(after.verdict, Verdict::Pass, "{after:?}");
    assert!(probe.stopped >= result.steps.last().and_then(|s| s.ended).unwrap_or(0));
    assert!(
        after.window_to == Some(probe.stopped),
        "{after:?} {}",
        probe.stopped
    );
    assert_eq!(result.verdict, RunVerdict::Fail);
    all_put_back(&r);
}
