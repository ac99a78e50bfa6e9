//! Reports rendered from fixed run results: Markdown and JUnit snapshots,
//! the `result.json` round trip, and schema version checks.
//!
//! Snapshots live in `tests/snapshots/`; after an intended change of the
//! output, regenerate them with `INSTA_UPDATE=always cargo test --test report_render`
//! (or `cargo insta review`) and read the diff before committing.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::Path;

use nodefall::report::result::{RunVerdict, StepOutcome, Verdict};
use nodefall::report::{self, RunResult, junit, markdown};

const STATEFULSET: &str = "tests/fixtures/results/statefulset-pass.json";
const DEPLOYMENT: &str = "tests/fixtures/results/deployment-fail.json";

fn fixture(path: &str) -> RunResult {
    report::read_result(Path::new(path)).unwrap()
}

/// The deployment run, cut short by an infrastructure error after step #6.
fn errored() -> RunResult {
    let mut r = fixture(DEPLOYMENT);
    r.verdict = RunVerdict::Error;
    r.error = Some(
        "observing pods in namespace seed-002: the watch stream ended\n  caused by: error sending request for url \
         (https://192.168.56.10:6443/api/v1/namespaces/seed-002/pods?watch=true&resourceVersion=48213): \
         connection <reset> | \"peer closed\""
            .into(),
    );
    for e in r.expectations.iter_mut().filter(|e| e.index >= 7) {
        e.verdict = Verdict::NotRun;
        e.observed = None;
        e.missed_by = None;
        e.detail = "not decided: the run stopped".into();
    }
    for s in r
        .steps
        .iter_mut()
        .filter(|s| s.index.is_some_and(|i| i >= 7))
    {
        s.outcome = StepOutcome::Skipped;
        s.ended = None;
    }
    r
}

#[test]
fn statefulset_pass_markdown() {
    insta::assert_snapshot!(
        "statefulset-pass.md",
        markdown::render(&fixture(STATEFULSET))
    );
}

#[test]
fn statefulset_pass_junit() {
    insta::assert_snapshot!("statefulset-pass.xml", junit::render(&fixture(STATEFULSET)));
}

#[test]
fn deployment_fail_markdown() {
    insta::assert_snapshot!("deployment-fail.md", markdown::render(&fixture(DEPLOYMENT)));
}

#[test]
fn deployment_fail_junit() {
    insta::assert_snapshot!("deployment-fail.xml", junit::render(&fixture(DEPLOYMENT)));
}

#[test]
fn fixtures_round_trip_through_json_unchanged() {
    for path in [STATEFULSET, DEPLOYMENT] {
        let text = std::fs::read_to_string(path).unwrap();
        let result: RunResult = serde_json::from_str(&text).unwrap();
        let again: RunResult =
            serde_json::from_str(&serde_json::to_string(&result).unwrap()).unwrap();
        assert_eq!(result, again, "{path}");
        // Nothing in the fixture is ignored or defaulted away on the way.
        let original: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(&result).unwrap(), original, "{path}");
    }
}

#[test]
fn a_different_schema_version_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    let text = std::fs::read_to_string(STATEFULSET).unwrap();
    std::fs::write(
        &path,
        text.replacen("\"schemaVersion\": 1", "\"schemaVersion\": 7", 1),
    )
    .unwrap();
    let err = report::read_result(&path).unwrap_err();
    assert!(err.is_bad_input());
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("schema version 7"), "{msg}");
    assert!(msg.contains("reads version 1"), "{msg}");

    std::fs::write(&path, "{\"schemaVersion\": 1}").unwrap();
    let err = report::read_result(&path).unwrap_err().to_string();
    assert!(err.contains("is not a nodefall run result"), "{err}");
}

#[test]
fn write_all_writes_the_three_files_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let result = fixture(DEPLOYMENT);
    let run = dir
        .path()
        .join(report::run_dir_name(&result.scenario, result.started_at));
    report::write_all(&run, &result).unwrap();
    assert!(run.ends_with("vm-halt-deployment-20261120T153107Z"));
    assert_eq!(
        report::read_result(&run.join(report::RESULT_JSON)).unwrap(),
        result
    );
    assert_eq!(
        std::fs::read_to_string(run.join(report::REPORT_MD)).unwrap(),
        markdown::render(&result)
    );
    assert_eq!(
        std::fs::read_to_string(run.join(report::JUNIT_XML)).unwrap(),
        junit::render(&result)
    );
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn junit_counts_cases_and_failures() {
    let xml = junit::render(&fixture(DEPLOYMENT));
    assert_eq!(count(&xml, "<testsuite "), 1);
    assert_eq!(count(&xml, "<testcase "), 8);
    assert_eq!(count(&xml, "<failure "), 1);
    assert!(xml.contains(
        "<testsuite name=\"nodefall.vm-halt-deployment\" tests=\"8\" failures=\"1\" errors=\"0\" skipped=\"0\""
    ));
    assert!(xml.contains("missed by 14.882s (too late)"), "{xml}");

    let xml = junit::render(&errored());
    // 8 expectations plus the errored `run` case.
    assert_eq!(count(&xml, "<testcase "), 9);
    assert_eq!(count(&xml, "<skipped "), 3);
    assert_eq!(count(&xml, "<error "), 1);
    assert!(xml.contains("tests=\"9\" failures=\"0\" errors=\"1\" skipped=\"3\""));
    assert!(xml.contains("name=\"run\""));
    assert!(xml.contains(
        "message=\"observing pods in namespace seed-002: the watch stream ended\" type=\"error\""
    ));
    assert!(xml.contains(
        "watch=true&amp;resourceVersion=48213): connection &lt;reset&gt; | &quot;peer closed&quot;"
    ));
}

#[test]
fn junit_escapes_markup_in_descriptions() {
    let mut r = fixture(STATEFULSET);
    r.expectations[0].description = "pods <app=web> & \"quoted\" 'x'".into();
    r.expectations[0].verdict = Verdict::Fail;
    r.expectations[0].detail = "a < b && c > \"d\"".into();
    let xml = junit::render(&r);
    assert!(
        xml.contains("name=\"#2: pods &lt;app=web&gt; &amp; &quot;quoted&quot; &apos;x&apos;\"")
    );
    assert!(xml.contains("<failure message=\"a &lt; b &amp;&amp; c &gt; &quot;d&quot;\""));
    assert!(!xml.contains("<app=web>"));
    assert!(!xml.contains("&&"));
}

#[test]
fn partial_reports_say_so_and_show_the_error() {
    let md = markdown::render(&errored());
    assert!(md.contains("**ERROR (partial report)**: 5 passed, 0 failed, 3 not run of 8"));
    assert!(md.contains("> **Error.** The run stopped early"));
    assert!(
        md.contains("> ```text\n> observing pods in namespace seed-002: the watch stream ended\n")
    );
    assert!(md.contains("| not run |"));
    assert!(md.contains("| skipped |"));

    let mut r = errored();
    r.verdict = RunVerdict::Interrupted;
    r.error = None;
    let md = markdown::render(&r);
    assert!(md.contains("**INTERRUPTED (partial report)**"));
    assert!(md.contains("no error text was recorded"));
    assert!(junit::render(&r).contains("type=\"interrupted\">the run was interrupted</error>"));
}

#[test]
fn markdown_escapes_pipes_in_cells() {
    let mut r = fixture(STATEFULSET);
    r.steps[1].description = "pause-vm worker-2 | then wait".into();
    let md = markdown::render(&r);
    assert!(md.contains("pause-vm worker-2 \\| then wait"));
}

#[test]
fn the_statefulset_report_shows_replacements_after_deletion() {
    let md = markdown::render(&fixture(STATEFULSET));
    assert!(md.contains(
        "- StatefulSet/statefulset-nfs (3 pods): 3 replaced only after the old pod was deleted."
    ));
    let md = markdown::render(&fixture(DEPLOYMENT));
    assert!(md.contains(
        "- ReplicaSet/nginx-webserver-6c9f8d4b7 (2 pods): 2 replaced while the old pod still existed."
    ));
}
