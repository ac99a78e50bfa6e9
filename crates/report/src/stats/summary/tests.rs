use super::*;
use crate::stats::compare::Gate;

fn run(name: &str, verdict: RunVerdict) -> RunResult {
    let mut r: RunResult = serde_json::from_str(include_str!(
        "../../../../../tests/fixtures/results/statefulset-pass.json"
    ))
    .unwrap();
    r.scenario = name.into();
    r.verdict = verdict;
    r
}

fn input(r: RunResult) -> (String, Input) {
    (
        format!("reports/{}-1/result.json", r.scenario),
        Input::Run(Box::new(r)),
    )
}

#[test]
fn every_scenario_counts_and_the_worst_outcome_wins() {
    let mut failing = run("b", RunVerdict::Fail);
    failing.expectations[0].verdict = Verdict::Fail;
    failing.expectations[0].detail = "observed at T0+12s, 3s late".into();
    let s = summarize(
        vec![
            input(run("c", RunVerdict::Pass)),
            input(failing),
            input(run("a", RunVerdict::Pass)),
        ],
        None,
    );
    assert_eq!(
        (s.outcome, s.scenarios, s.passed, s.failed),
        (Outcome::Fail, 3, 2, 1)
    );
    let names: Vec<_> = s.entries.iter().map(|e| e.scenario.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let b = &s.entries[1];
    assert_eq!(b.failed.len(), 1);
    assert_eq!(b.failed[0].detail, "observed at T0+12s, 3s late");
    assert_eq!(b.expectations_held + 1, b.expectations);
    // The figures are the run's own (ms after T0).
    let r = run("x", RunVerdict::Pass);
    assert_eq!(
        b.figures.get("nodeNotReady").copied(),
        r.metrics.node_not_ready.map(|v| v as f64)
    );
}

#[test]
fn an_error_outranks_a_failure_and_an_interruption_outranks_both() {
    let outcome = |vs: &[RunVerdict]| {
        summarize(
            vs.iter()
                .enumerate()
                .map(|(i, v)| input(run(&format!("s{i}"), *v)))
                .collect(),
            None,
        )
        .outcome
    };
    assert_eq!(
        outcome(&[RunVerdict::Pass, RunVerdict::Pass]),
        Outcome::Pass
    );
    assert_eq!(
        outcome(&[RunVerdict::Fail, RunVerdict::Error]),
        Outcome::Error
    );
    assert_eq!(
        outcome(&[RunVerdict::Error, RunVerdict::Interrupted, RunVerdict::Pass]),
        Outcome::Interrupted
    );
}

#[test]
fn a_passing_run_slower_than_the_baseline_fails() {
    let base = run("s", RunVerdict::Pass);
    let mut slow = run("s", RunVerdict::Pass);
    slow.metrics.node_not_ready = base.metrics.node_not_ready.map(|v| v * 2);
    let baseline = Baseline {
        runs: [
            ("s".to_owned(), input(base.clone())),
            ("gone".to_owned(), input(run("gone", RunVerdict::Pass))),
        ]
        .into_iter()
        .collect(),
        gate: Gate {
            fail_if_slower: Some(20.0),
            ..Gate::default()
        },
    };
    let s = summarize(vec![input(slow)], Some(&baseline));
    assert_eq!(s.outcome, Outcome::Fail);
    let e = &s.entries[0];
    assert_eq!(e.outcome, Outcome::Fail);
    assert_eq!(e.regressions.len(), 1, "{:?}", e.regressions);
    assert!(
        e.regressions[0].starts_with("nodeNotReady"),
        "{:?}",
        e.regressions
    );
    assert_eq!(e.baseline.as_deref(), Some("reports/s-1/result.json"));
    assert_eq!(s.not_run, ["gone"]);
    // The same run against itself passes.
    let s = summarize(vec![input(base)], Some(&baseline));
    assert_eq!(s.outcome, Outcome::Pass);
}

#[test]
fn nothing_run_is_no_pass_to_hide_behind() {
    let s = summarize(Vec::new(), None);
    assert_eq!((s.scenarios, s.passed, s.failed), (0, 0, 0));
    // The renderer says so (report::summary); the JSON carries the count.
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["scenarios"], 0);
}
