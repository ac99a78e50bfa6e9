//! The audit check against constructed truths and observations.

use super::*;
use crate::record::{StepKind, StepOutcome};

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(1_800_000_000_000 + ms).unwrap()
}
fn node(name: &str) -> ObjectRef {
    ObjectRef::Node { name: name.into() }
}
fn ready(status: &str) -> Change {
    Change::NodeReady {
        status: status.into(),
        reason: None,
        message: None,
    }
}
fn seen(ms: i64, object: ObjectRef, change: Change) -> Seen {
    Seen {
        at: at(ms),
        object,
        change,
    }
}

fn reports(seen: &[Seen]) -> Vec<Report<'_>> {
    seen.iter().map(Report::from).collect()
}

/// `compare` over [`window`], the truth and the reports both kept as the
/// record keeps them.
fn check(source: &str, truth: &[Seen], observed: &[Seen], keep_matches: bool) -> Check {
    compare(
        source,
        truth.iter().map(Report::from),
        &reports(observed),
        window(),
        keep_matches,
    )
}

fn window() -> AuditWindow {
    AuditWindow {
        from: at(0),
        to: at(100_000),
        t0: Some(at(5_000)),
    }
}

#[test]
fn every_true_change_seen_once_in_order_is_clean_with_its_lag() {
    let truth = [
        seen(1000, node("a"), ready("Unknown")),
        seen(2000, node("b"), ready("Unknown")),
        seen(9000, node("a"), ready("True")),
    ];
    let observed = [
        seen(1004, node("a"), ready("Unknown")),
        seen(2010, node("b"), ready("Unknown")),
        seen(9002, node("a"), ready("True")),
    ];
    let c = check("nodefall", &truth, &observed, true);
    assert!(c.clean(), "{c:?}");
    assert_eq!((c.truth, c.matched), (3, 3));
    let lag = c.lag_ms.unwrap();
    assert_eq!((lag.min, lag.p50, lag.max), (2.0, 4.0, 10.0));
    assert_eq!(c.lag_by_change_ms["nodeReady"].n, 3);
    // Only the return to Ready came after T0.
    assert_eq!(c.lag_from_t0_ms.unwrap().n, 1);
}

#[test]
fn a_poller_that_sleeps_through_a_flap_misses_both_changes() {
    let truth = [
        seen(1000, node("a"), ready("Unknown")),
        seen(3000, node("a"), ready("True")),
    ];
    let c = check("poller-5s", &truth, &[], true);
    assert_eq!((c.missed, c.matched), (2, 0));
    assert_eq!(c.missed_examples.len(), 2);
    assert!(c.lag_ms.is_none());
    assert!(!c.clean());
}

#[test]
fn repeats_reorders_and_inventions_are_counted_apart() {
    let truth = [
        seen(1000, node("a"), ready("Unknown")),
        seen(2000, node("a"), Change::Unschedulable { value: true }),
    ];
    let observed = [
        seen(2100, node("a"), Change::Unschedulable { value: true }),
        seen(2200, node("a"), ready("Unknown")),
        seen(2300, node("a"), ready("Unknown")),
        seen(2400, node("a"), Change::NodeDeleted),
    ];
    let c = check("x", &truth, &observed, true);
    assert_eq!(c.matched, 2);
    assert_eq!(c.out_of_order, 1);
    assert_eq!(c.duplicated, 1);
    assert_eq!(c.unexplained, 1);
    assert_eq!(c.missed, 0);
}

#[test]
fn a_change_made_as_the_observer_stopped_and_unreported_is_cut_off_not_missed() {
    let truth = [
        // 60 ms before the end, never reported: missed (the observer's
        // lags were under 50 ms).
        seen(99_940, node("a"), Change::Unschedulable { value: false }),
        // The node controller's taint removal, 5 ms before the cleanup
        // stopped the observer: it had not arrived yet.
        seen(
            99_995,
            node("b"),
            Change::TaintRemoved {
                key: "node.kubernetes.io/unschedulable".into(),
                effect: "NoSchedule".into(),
            },
        ),
    ];
    let c = check("nodefall", &truth, &[], false);
    assert_eq!((c.truth, c.missed, c.cut_off), (2, 1, 1), "{c:?}");
    assert_eq!(c.missed_examples[0].object, node("a"));
    assert_eq!(c.cut_off_examples[0].object, node("b"));
    assert_eq!(c.cut_off_within_ms, Some(50.0));
    // Only the one missed makes it unclean.
    let c = check("nodefall", &truth[1..], &[], false);
    assert!(c.clean(), "{c:?}");
    assert_eq!(c.cut_off, 1);
    // An observer that took up to 80 ms from T0 on could still have
    // been on its way to the first one.
    let slow = [
        seen(6_000, node("c"), ready("Unknown")),
        seen(7_000, node("c"), ready("True")),
    ];
    let observed = [
        seen(6_080, node("c"), ready("Unknown")),
        seen(7_010, node("c"), ready("True")),
    ];
    let all: Vec<Seen> = truth.iter().chain(&slow).cloned().collect();
    let c = check("nodefall", &all, &observed, false);
    assert_eq!((c.missed, c.cut_off), (0, 2), "{c:?}");
    assert_eq!(c.cut_off_within_ms, Some(80.0));
}

#[test]
fn every_unexplained_report_is_listed_up_to_the_cap_with_its_count() {
    let observed: Vec<Seen> = (0..25)
        .map(|i| seen(1000 + i, node(&format!("n{i}")), Change::NodeDeleted))
        .collect();
    let c = check("nodefall", &[], &observed, false);
    assert_eq!(c.unexplained, 25);
    assert_eq!(c.unexplained_examples.len(), LIST_MAX);
    assert_eq!(c.unexplained_examples[0], observed[0]);
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(
        json["unexplainedExamples"][0]["change"]["type"],
        "nodeDeleted"
    );
    assert!(json.get("cutOff").is_none(), "{json}");
}

#[test]
fn a_report_in_the_windows_last_ms_of_a_change_just_after_it_is_not_unexplained() {
    // Stamped 0.4 ms after the window's end by the API server, reported
    // at its last millisecond by nodefall's (1 ms) clock.
    let truth = [Seen {
        at: at(100_000)
            .checked_add(jiff::SignedDuration::from_micros(400))
            .unwrap(),
        object: node("a"),
        change: ready("True"),
    }];
    let observed = [seen(100_000, node("a"), ready("True"))];
    let c = check("nodefall", &truth, &observed, false);
    assert!(c.clean(), "{c:?}");
    assert_eq!((c.truth, c.matched), (0, 0));
}

#[test]
fn only_the_window_counts() {
    let truth = [
        // Before the observer had listed: part of its first list.
        seen(-500, node("a"), ready("True")),
        seen(50_000, node("a"), ready("Unknown")),
        // After the steps (cleanup).
        seen(200_000, node("a"), Change::NodeDeleted),
    ];
    let observed = [
        seen(0, node("a"), ready("True")),
        seen(50_300, node("a"), ready("Unknown")),
        seen(200_001, node("a"), Change::NodeDeleted),
        // Cleanup's changes, just after the window: not in the truth.
        seen(100_500, node("b"), Change::NodeDeleted),
    ];
    let c = check("nodefall", &truth, &observed, true);
    assert!(c.clean(), "{c:?}");
    assert_eq!(c.truth, 1);
}

/// A drain's run as result.json holds it, from `fields`.
fn run(fields: serde_json::Value) -> RunResult {
    let mut v = serde_json::json!({
        "schemaVersion": crate::record::SCHEMA_VERSION,
        "scenario": "drain-pdb", "file": "drain-pdb.yaml", "backend": "sim",
        "profile": crate::profile::TimingProfile::fast(),
        "namespace": "seed-004", "targets": {},
        "startedAt": "2026-11-25T15:01:56.691Z",
        "finished": 41_465, "verdict": "pass",
        "steps": [], "expectations": [], "cleanup": [],
        "metrics": crate::timeline::metrics::Metrics::default(),
        "transitions": [],
    });
    for (k, x) in fields.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

fn step(kind: StepKind, description: &str, started: i64, ended: i64) -> serde_json::Value {
    serde_json::json!({"label": kind.name(), "kind": kind, "description": description,
                       "started": started, "ended": ended, "outcome": StepOutcome::Ok})
}

fn taint_removed() -> Change {
    Change::TaintRemoved {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
    }
}

#[test]
fn the_window_covers_what_the_observer_reported_up_to_the_cleanups_start() {
    // The end of drain-pdb: both nodes uncordoned, the last expectation
    // held at once, then the cleanup deletes the PDB (the observer
    // stops), the Deployment and the namespace.
    let node = |name: &str| ObjectRef::Node { name: name.into() };
    let r = run(serde_json::json!({
        "observedFrom": 447,
        "steps": [step(StepKind::Action, "uncordon second", 35_963, 36_046),
                  step(StepKind::Expect, "node first schedulable", 36_046, 36_046)],
        "cleanup": [step(StepKind::Cleanup, "delete PodDisruptionBudget seed-004/myapp", 36_047, 36_059),
                    step(StepKind::Cleanup, "delete namespace seed-004", 36_068, 41_465)],
        "transitions": [
            {"at": 36_029, "object": node("worker-2"), "change": Change::Unschedulable { value: false }},
            {"at": 36_045, "object": node("worker-1"), "change": taint_removed()},
        ],
    }));
    let (seen, window) = observed_in_run(&r).unwrap();
    assert_eq!(window.from, r.wall_clock(447));
    assert_eq!(window.to, r.wall_clock(36_047), "the cleanup's start");
    let at = |ms: i64, us: i64| {
        r.wall_clock(ms)
            .checked_add(jiff::SignedDuration::from_micros(us))
            .unwrap()
    };
    let truth = [
        Seen {
            at: at(36_027, 400),
            object: node("worker-2"),
            change: Change::Unschedulable { value: false },
        },
        Seen {
            at: at(36_044, 200),
            object: node("worker-1"),
            change: taint_removed(),
        },
        // Removed by the controller 1 ms before the cleanup began: it
        // had not reached the observer when the cleanup stopped it.
        Seen {
            at: at(36_046, 100),
            object: node("worker-2"),
            change: taint_removed(),
        },
        // 5 ms into the cleanup: its own, not compared.
        Seen {
            at: at(36_052, 0),
            object: node("worker-3"),
            change: Change::Unschedulable { value: true },
        },
    ];
    let c = compare(
        "nodefall",
        truth.iter().map(Report::from),
        &seen,
        window,
        false,
    );
    assert_eq!((c.truth, c.matched, c.cut_off), (3, 2, 1), "{c:?}");
    assert!(c.clean(), "{c:?}");
}
