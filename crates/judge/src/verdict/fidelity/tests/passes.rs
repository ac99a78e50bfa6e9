//! The passes on rows made for them: gaps and timers, races, order, the goal.

use super::*;
use crate::profile::TimingProfile;
use crate::verdict::fidelity::gaps::judge_gaps;
use crate::verdict::fidelity::order::{inversions, mixes_first_and_last};
use crate::verdict::fidelity::races::join_boundary_races;
use crate::verdict::fidelity::rows::row;

#[test]
fn a_transition_late_on_its_own_timer_is_the_only_row_off() {
    let r = |what: &str, kind: Ms, sim: Ms| {
        let p = |after| Point {
            what: what.into(),
            step: "#1".into(),
            step_index: 0,
            after,
            count: 1,
        };
        (0, kind, row(Some(&p(kind)), Some(&p(sim))))
    };
    // Pod GC's pass came 30 s later on the sim; what followed it did not.
    let mut rows = [r("gc", 79_500, 49_900), r("created", 79_530, 49_960)];
    judge_gaps(&mut rows, &TimingProfile::upstream_default());
    assert_eq!(rows[0].2.verdict, RowVerdict::Off);
    assert_eq!(rows[1].2.verdict, RowVerdict::Within);
    assert_eq!(
        (rows[1].2.kind_gap, rows[1].2.sim_gap),
        (Some(30), Some(60))
    );
}

#[test]
fn a_controller_timers_phase_is_judged_by_its_window() {
    let judge = |what: &str, kind: Ms, sim: Ms| {
        let p = |after| Point {
            what: what.into(),
            step: "#6".into(),
            step_index: 0,
            after,
            count: 2,
        };
        let mut rows = [(0, kind, row(Some(&p(kind)), Some(&p(sim))))];
        judge_gaps(&mut rows, &TimingProfile::upstream_default());
        rows[0].2.verdict.clone()
    };
    // A timer's verdict whose rule says `says`.
    let timer = |what: &str, kind: Ms, sim: Ms, says: &str| {
        let v = judge(what, kind, sim);
        assert!(
            matches!(&v, RowVerdict::Timer { rule } if rule.contains(says)),
            "{what}: {v:?}"
        );
    };
    // Pod GC: 40-80 s after the Node's deletion (quarantine 40 s, a pass
    // every 20 s), whichever cluster.
    timer(
        "pods on target: phase Failed",
        79_484,
        49_935,
        "40.0-80.0 s",
    );
    assert_eq!(
        judge("pods on target: phase Failed", 79_484, 95_000),
        RowVerdict::Off
    );
    // Unknown: grace 50 s after the last renewal (every 10 s), a pass every 5 s.
    timer(
        "target: Ready=Unknown (NodeStatusUnknown)",
        42_000,
        54_000,
        "grace",
    );
    assert_eq!(judge("target: Ready=True", 42_000, 54_000), RowVerdict::Off);
    // Pods of an out-of-service node: at the next pass, up to 20 s on.
    timer(
        "pods on target: phase Failed (first)",
        8_913,
        14_818,
        "out-of-service",
    );
    // A returning kubelet's pods: at its status manager's next tick, up to
    // 10 s after the resume (kind 9.3 s, the sim 2.4 s) ...
    timer(
        "pods on workers: Ready=True (first)",
        9_265,
        2_420,
        "status manager",
    );
    // ... and no later.
    assert_eq!(
        judge("pods on workers: Ready=True (first)", 14_000, 2_420),
        RowVerdict::Off
    );
}

#[test]
fn pods_a_shutting_down_kubelet_stops_are_judged_by_the_range_kind_showed() {
    let p = |what: &str, after| Point {
        what: what.into(),
        step: "#2 (shutdown)".into(),
        step_index: 0,
        after,
        count: 2,
    };
    let judge = |with_status: bool, k: Ms, s: Ms| {
        let not_ready = "target: Ready=False (KubeletNotReady)";
        let stopped = "pods on target: DisruptionTarget (first)";
        let mut rows = vec![(0, k, row(Some(&p(stopped, k)), Some(&p(stopped, s))))];
        if with_status {
            rows.insert(
                0,
                (
                    0,
                    360,
                    row(Some(&p(not_ready, 360)), Some(&p(not_ready, 77))),
                ),
            );
        }
        judge_gaps(&mut rows, &TimingProfile::upstream_default());
        rows.last().unwrap().2.verdict.clone()
    };
    // kind stopped the first pod 0.54 s after the shutdown, the sim 1.56 s.
    assert!(matches!(judge(true, 541, 1_557), RowVerdict::Timer { .. }));
    // Without the kubelet's Ready=False it is no shutdown: off.
    assert_eq!(judge(false, 541, 1_557), RowVerdict::Off);
    // Outside what kind showed: off.
    assert_eq!(judge(true, 541, 3_900), RowVerdict::Off);
}

#[test]
fn a_groups_first_and_anothers_last_are_not_checked_for_order() {
    let p = |what: &str, after| Point {
        what: what.into(),
        step: "#2".into(),
        step_index: 0,
        after,
        count: 2,
    };
    let kind = [
        p("new pods: phase Running (first)", 1_437),
        p("new pods: created (last)", 2_280),
        p("new pods: phase Running (last)", 3_273),
    ];
    let sim = [
        p("new pods: created (last)", 1_602),
        p("new pods: phase Running (first)", 3_088),
        p("new pods: phase Running (last)", 3_137),
    ];
    assert!(inversions(&kind, &sim, &TimingProfile::upstream_default()).is_empty());
    assert!(mixes_first_and_last("a (first)", "b (last)"));
    assert!(!mixes_first_and_last("a (first)", "b (first)"));
    assert!(!mixes_first_and_last("a (last)", "b"));
}

#[test]
fn a_noexecute_taint_a_token_late_is_the_taint_queues_rate_limit() {
    // Seed 001 on kind: the taint 9.9 s after Unknown (a token spent on
    // a stale read), on the sim in the same pass.
    let p = |what: &str, after| Point {
        what: what.into(),
        step: "#1 (stop)".into(),
        step_index: 0,
        after,
        count: 1,
    };
    let unknown = "target: Ready=Unknown (NodeStatusUnknown)";
    let taint = "target: taint + node.kubernetes.io/unreachable:NoExecute";
    let judge = |k: Ms, s: Ms| {
        let mut rows = [
            (
                0,
                42_099,
                row(Some(&p(unknown, 42_099)), Some(&p(unknown, 44_637))),
            ),
            (0, k, row(Some(&p(taint, k)), Some(&p(taint, s)))),
        ];
        judge_gaps(&mut rows, &TimingProfile::upstream_default());
        rows[1].2.verdict.clone()
    };
    let late = judge(52_176, 44_703);
    assert!(
        matches!(late, RowVerdict::Timer { ref rule } if rule.contains("--node-eviction-rate")),
        "{late:?}"
    );
    // A token later still is off, and so is a taint removed that late.
    assert_eq!(judge(53_500, 44_703), RowVerdict::Off);
    let gone = "target: taint - node.kubernetes.io/unreachable:NoExecute";
    let both = |what: &str, k: Ms, s: Ms| (0, k, row(Some(&p(what, k)), Some(&p(what, s))));
    let mut rows = [both(unknown, 42_099, 44_637), both(gone, 52_176, 44_703)];
    judge_gaps(&mut rows, &TimingProfile::upstream_default());
    assert_eq!(rows[1].2.verdict, RowVerdict::Off);
    // The vm-halt power-on: the taint off 4.9 s after Ready=True on kind,
    // 0.4 s on the sim, other rows between: each within the controller's
    // next pass after the Ready change.
    let ready = "target: Ready=True (KubeletReady)";
    let deleted = "pods on target: deleted (last)";
    let mut rows = [
        both(ready, 8_262, 8_020),
        both(deleted, 10_209, 9_920),
        both(gone, 13_117, 8_378),
    ];
    judge_gaps(&mut rows, &TimingProfile::upstream_default());
    assert!(
        matches!(&rows[2].2.verdict, RowVerdict::Timer { rule } if rule.contains("after the node's Ready change")),
        "{:?}",
        rows[2].2.verdict
    );
}

#[test]
fn unknown_after_a_status_posted_in_the_step_counts_from_that_status() {
    let p = |what: &str, after| Point {
        what: what.into(),
        step: "#2 (shutdown)".into(),
        step_index: 1,
        after,
        count: 1,
    };
    let unknown = "target: Ready=Unknown (NodeStatusUnknown)";
    let judge = |status: bool| {
        // kind-graceful-shutdown, default timings: the kubelet's
        // Ready=False at once, Unknown 51.5 s (kind) and 57.7 s (sim) on.
        let mut rows = Vec::new();
        if status {
            let not_ready = "target: Ready=False (KubeletNotReady)";
            rows.push((
                1,
                235,
                row(Some(&p(not_ready, 235)), Some(&p(not_ready, 82))),
            ));
        }
        rows.push((
            1,
            51_523,
            row(Some(&p(unknown, 51_523)), Some(&p(unknown, 57_652))),
        ));
        judge_gaps(&mut rows, &TimingProfile::upstream_default());
        rows.last().unwrap().2.verdict.clone()
    };
    let v = judge(true);
    assert!(
        matches!(&v, RowVerdict::Timer { rule } if rule.contains("50.0-60.0 s after that status")),
        "{v:?}"
    );
    // No status of its own in the step: the last renewal came before it,
    // so 57.7 s is past the controller's window (40-55 s).
    assert_eq!(judge(false), RowVerdict::Off);
}

#[test]
fn a_transition_on_either_side_of_a_step_start_is_one_row() {
    let p = |step_index, after| Point {
        what: "endpoints elsewhere: ready".into(),
        step: format!("#{step_index}"),
        step_index,
        after,
        count: 1,
    };
    // Kind saw it 27 ms into step 1, the sim 0.471 s before its step 1.
    let mut rows = vec![
        (1, 27, row(Some(&p(1, 27)), None)),
        (0, 51_529, row(None, Some(&p(0, 51_529)))),
    ];
    join_boundary_races(&mut rows, &[(0, "#0".into()), (52_000, "#1".into())]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0].2;
    assert_eq!((r.kind, r.sim), (Some(27), Some(-471)));
    assert_eq!(r.verdict, RowVerdict::Within);
}

#[test]
fn the_goal_is_ten_percent_or_one_second() {
    assert!(within(48_000, 52_800));
    assert!(!within(48_000, 52_801));
    assert!(within(300, 1_300), "1 s on a small figure");
    assert!(!within(300, 1_301));
}

#[test]
fn an_order_seen_more_than_a_second_apart_on_one_side_must_hold_on_the_other() {
    let p = |what: &str, after: Ms| Point {
        what: what.into(),
        step: "#1".into(),
        step_index: 0,
        after,
        count: 1,
    };
    let kind = [p("a", 0), p("b", 1_500), p("c", 1_600)];
    // b and c swapped: 0.1 s apart on kind, so either order is fine.
    let d = TimingProfile::upstream_default();
    assert!(inversions(&kind, &[p("a", 0), p("c", 1_500), p("b", 1_600)], &d).is_empty());
    let inv = inversions(&kind, &[p("b", 0), p("a", 300), p("c", 1_600)], &d);
    assert_eq!(
        inv,
        [Inversion {
            first: "a".into(),
            then: "b".into(),
            step: "#1".into()
        }]
    );
}

#[test]
fn a_timer_rows_order_is_not_checked_and_readiness_at_a_step_start_counts_before_it() {
    let p = |what: &str, after: Ms| Point {
        what: what.into(),
        step: "#9".into(),
        step_index: 0,
        after,
        count: 1,
    };
    let taint = "target: taint + node.kubernetes.io/not-ready:NoExecute";
    let kind = [p(taint, 1_800), p("pods on target: deleted", 3_400)];
    let sim = [p(taint, 3_500), p("pods on target: deleted", 3_100)];
    let d = TimingProfile::upstream_default();
    assert!(inversions(&kind, &sim, &d).is_empty());
    // An endpoint ready 26 ms into the resume step: counted with the pause.
    let w = "nfscen-worker";
    let r = run(
        w,
        json!([
            {"at": 100_026, "object": {"kind": "endpointSlice", "name": "s", "service": "web"},
             "change": {"type": "endpoint", "address": "10.0.0.9", "node": "other",
                        "ready": true, "serving": true, "terminating": false}},
        ]),
    );
    assert_eq!(
        names(&points(&r)),
        [("endpoints elsewhere: ready", "#1 (pause)", 90_026, 1)]
    );
}
