use super::*;
use crate::record::{RunResult, RunVerdict, Verdict};
use crate::stats::summary::{Input, summarize};

fn run(name: &str, verdict: RunVerdict) -> (String, Input) {
    let mut r: RunResult = serde_json::from_str(include_str!(
        "../../../../../tests/fixtures/results/statefulset-pass.json"
    ))
    .unwrap();
    r.scenario = name.into();
    r.verdict = verdict;
    if verdict == RunVerdict::Fail {
        r.expectations[0].verdict = Verdict::Fail;
        r.expectations[0].detail = "observed at T0+12s,\n3s after <the window>".into();
    }
    if verdict == RunVerdict::Error {
        r.error = Some("backend kind: docker unpause failed".into());
    }
    (
        format!("/tmp/out/{name}/{name}-20261128T0600Z/result.json"),
        Input::Run(Box::new(r)),
    )
}

#[test]
fn a_row_per_scenario_and_a_line_per_failure() {
    let s = summarize(
        vec![
            run("ok", RunVerdict::Pass),
            run("late", RunVerdict::Fail),
            run("broken", RunVerdict::Error),
        ],
        None,
    );
    let md = render(&s);
    assert!(
        md.starts_with("## nodefall: ERROR, 1 of 3 scenarios passed\n"),
        "{md}"
    );
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
    // header, then one per scenario, sorted by name
    assert_eq!(rows.len(), 4, "{md}");
    assert!(rows[0].contains("node NotReady"), "{md}");
    assert!(
        rows[1].starts_with("| broken") && rows[1].contains("ERROR"),
        "{md}"
    );
    assert!(
        rows[2].starts_with("| late") && rows[2].contains("FAIL"),
        "{md}"
    );
    assert!(rows[3].contains("`ok-20261128T0600Z`"), "{md}");
    let failures: Vec<&str> = md.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(failures.len(), 2, "{md}");
    assert!(
        failures[0].contains("**broken** could not finish: backend kind"),
        "{md}"
    );
    // One line, whatever the detail held.
    assert!(
        failures[1].contains("observed at T0+12s, 3s after &lt;the window>"),
        "{md}"
    );
}

#[test]
fn every_pass_says_so_in_the_headline() {
    let md = render(&summarize(
        vec![run("a", RunVerdict::Pass), run("b", RunVerdict::Pass)],
        None,
    ));
    assert!(
        md.starts_with("## nodefall: PASS, all 2 scenarios\n"),
        "{md}"
    );
    assert!(!md.contains("What failed"), "{md}");
    assert_eq!(
        render(&summarize(Vec::new(), None)),
        "## nodefall: nothing ran\n\nNo run was found.\n"
    );
}
