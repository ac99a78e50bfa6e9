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

use std::path::{Path, PathBuf};

use nodefall::record::{self, RunResult};
use nodefall::record::{ExpectationResult, RunVerdict, StepOutcome, Verdict};
use nodefall::report::{self, junit, markdown};
use nodefall::scenario::expr::Window;
use nodefall::timeline::Ms;

const STATEFULSET: &str = "tests/fixtures/results/statefulset-pass.json";
const DEPLOYMENT: &str = "tests/fixtures/results/deployment-fail.json";
/// The StatefulSet run with a claim's VolumeAttachments (detached after the
/// out-of-service taint, attached on the new node) and a repeated
/// Multi-Attach event.
const VOLUMES: &str = "tests/fixtures/results/statefulset-volumes.json";
/// The deployment run stopped by an `abortIf` guard during step #4.
const ABORTED: &str = "tests/fixtures/results/deployment-aborted.json";
/// A real sim run (`tests/clients_sim.rs` with `NODEFALL_KEEP_RESULT`): a
/// Service's endpoints and an HTTP probe whose server failed while the
/// failed node's endpoints were stale.
const CLIENTS: &str = "tests/fixtures/results/clients-probe.json";
/// A real sim run of `scenarios/drain-pdb.yaml` (no fault: two nodes
/// drained under a PodDisruptionBudget), with its audit check and the
/// cleanup steps timed from start to end.
const DRAIN: &str = "tests/fixtures/results/drain-pdb.json";

fn fixture(path: &str) -> RunResult {
    report::read_result(&nodefall::disk::Disk, Path::new(path)).unwrap()
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

/// A set of nodes a fault hit is listed with the targets, its nodes named.
#[test]
fn a_set_of_nodes_is_listed_with_the_targets() {
    let mut r = fixture(STATEFULSET);
    r.sets
        .insert("zone-a".into(), vec!["worker-1".into(), "worker-3".into()]);
    let md = markdown::render(&r);
    let row = md
        .lines()
        .find(|l| l.starts_with("| targets"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        row.contains("target → ") && row.contains("zone-a → worker-1, worker-3 (2 nodes)"),
        "{row}"
    );
}

#[test]
fn statefulset_pass_junit() {
    insta::assert_snapshot!("statefulset-pass.xml", junit::render(&fixture(STATEFULSET)));
}

#[test]
fn clients_probe_markdown() {
    insta::assert_snapshot!("clients-probe.md", markdown::render(&fixture(CLIENTS)));
}

/// The fixture's figures follow from its samples and transitions.
#[test]
fn the_clients_fixture_metrics_follow_from_its_record() {
    let r = fixture(CLIENTS);
    let p = &r.probes[0];
    assert_eq!(
        p.windows,
        nodefall::record::probe::windows::error_windows(&p.samples, p.gap)
    );
    let t0 = r.t0.unwrap();
    let targets: Vec<String> = r.targets.values().cloned().collect();
    let steps_end = r.cleanup.iter().map(|s| s.started).min().unwrap();
    let before: Vec<_> = r
        .transitions
        .iter()
        .filter(|t| t.at <= steps_end)
        .cloned()
        .collect();
    assert_eq!(
        r.metrics.endpoints,
        nodefall::timeline::endpoints::metrics(&before, t0, &targets)
    );
}

#[test]
fn statefulset_volumes_markdown() {
    insta::assert_snapshot!(
        "statefulset-volumes.md",
        markdown::render(&fixture(VOLUMES))
    );
}

/// The metrics `compute` derives from a result's own transitions.
fn recomputed(r: &RunResult) -> nodefall::timeline::metrics::Metrics {
    let targets: Vec<String> = r.targets.values().cloned().collect();
    nodefall::timeline::metrics::compute(
        &r.transitions,
        r.t0.unwrap(),
        &targets,
        r.finished,
        r.started_at,
    )
}

/// The fixture's volume metrics are what `compute` derives from its own
/// transitions, so the snapshot shows real figures, not invented ones.
#[test]
fn the_volumes_fixture_metrics_follow_from_its_transitions() {
    let r = fixture(VOLUMES);
    let m = recomputed(&r);
    assert_eq!(m.volume_detaches, r.metrics.volume_detaches);
    assert_eq!(
        m.detach_after_out_of_service_max,
        r.metrics.detach_after_out_of_service_max
    );
    let waits = |m: &nodefall::timeline::metrics::Metrics| -> Vec<_> {
        m.pods
            .iter()
            .map(|p| (p.replacement_volume_attached, p.replacement_volume_wait))
            .collect()
    };
    assert_eq!(waits(&m), waits(&r.metrics));
    assert_eq!(r.metrics.pods[0].replacement_volume_wait, Some(861));
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
    for path in [STATEFULSET, DEPLOYMENT, VOLUMES, ABORTED, CLIENTS, DRAIN] {
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
        text.replacen("\"schemaVersion\": 2", "\"schemaVersion\": 11", 1),
    )
    .unwrap();
    let err = report::read_result(&nodefall::disk::Disk, &path).unwrap_err();
    assert!(err.is_bad_input());
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("schema version 11"), "{msg}");
    assert!(msg.contains("reads versions 1 to 10"), "{msg}");

    std::fs::write(&path, "{\"schemaVersion\": 2}").unwrap();
    let err = report::read_result(&nodefall::disk::Disk, &path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not a nodefall run result"), "{err}");
}

#[test]
fn write_all_writes_the_three_files_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let result = fixture(DEPLOYMENT);
    let run = dir
        .path()
        .join(report::run_dir_name(&result.scenario, result.started_at));
    report::write_all(&nodefall::disk::Disk, &run, &result).unwrap();
    assert!(run.ends_with("vm-halt-deployment-20261120T153107Z"));
    assert_eq!(
        report::read_result(&nodefall::disk::Disk, &run.join(report::RESULT_JSON)).unwrap(),
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
        "<testsuite name=\"nodefall.vm-halt-deployment\" tests=\"8\" skipped=\"0\" errors=\"0\" failures=\"1\""
    ));
    assert!(xml.contains("missed by 14.882s (too late)"), "{xml}");

    let xml = junit::render(&errored());
    // 8 expectations plus the errored `run` case.
    assert_eq!(count(&xml, "<testcase "), 9);
    assert_eq!(count(&xml, "<skipped "), 3);
    assert_eq!(count(&xml, "<error "), 1);
    assert!(
        xml.contains("tests=\"9\" skipped=\"3\" errors=\"1\" failures=\"0\""),
        "{xml}"
    );
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

/// Every result the repository ships, with the schema version it was written
/// in: the fixtures and the example reports (schema-1 ones are upgraded on read).
fn shipped_results() -> Vec<(PathBuf, u64, RunResult)> {
    let mut paths = vec![PathBuf::from(STATEFULSET), PathBuf::from(DEPLOYMENT)];
    let mut examples: Vec<PathBuf> = std::fs::read_dir("reports/examples")
        .unwrap()
        .map(|e| e.unwrap().path().join(report::RESULT_JSON))
        .filter(|p| p.exists())
        .collect();
    examples.sort();
    paths.extend(examples);
    paths
        .into_iter()
        .map(|p| {
            let raw: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let version = raw["schemaVersion"].as_u64().unwrap();
            let r = report::read_result(&nodefall::disk::Disk, &p).unwrap();
            (p, version, r)
        })
        .collect()
}

/// Whether `since:` was written on `e`'s step in the scenario the result
/// came from, when that file still has a matching expectation there.
fn written_since(r: &RunResult, e: &ExpectationResult) -> Option<bool> {
    let checked = nodefall::scenario::load(&nodefall::disk::Disk, Path::new(&r.file)).ok()?;
    let step = checked.steps.iter().find(|s| s.index == e.index)?;
    match &step.kind {
        nodefall::scenario::checked::StepKind::Expect(x)
            if x.window.source() == e.window_written =>
        {
            Some(x.explicit_anchor)
        }
        _ => None,
    }
}

/// When the step before `e` was decided at the earliest: an expectation when
/// its condition was first seen (or its window closed), another step when it ended.
fn previous_decided(r: &RunResult, e: &ExpectationResult) -> Option<Ms> {
    let prev = e.index.checked_sub(1)?;
    if let Some(p) = r.expectations.iter().find(|p| p.index == prev) {
        return match (p.window, p.observed) {
            (Window::Between { .. }, Some(o)) => Some(p.anchor_at + o),
            _ => p.window_to,
        };
    }
    r.steps.iter().find(|s| s.index == Some(prev))?.ended
}

/// The statefulset-nfs regression: a `holdsFor` without `since` was recorded
/// (and drawn) from its anchor, the pause at T0, though it ran from when the
/// step before it was decided. Every shipped result must record each window
/// where it ran.
#[test]
fn windows_are_recorded_where_they_ran() {
    let mut holds_checked = 0;
    for (path, version, r) in shipped_results() {
        let path = path.display();
        for e in r
            .expectations
            .iter()
            .filter(|e| e.verdict != Verdict::NotRun)
        {
            let at = format!("{path} {}", e.label);
            let implicit = e.anchor.starts_with(&format!("start of #{}", e.index + 1));
            // The scenario, when it still has this step, says whether `since` was written.
            if let (Some(explicit), Some(_)) = (written_since(&r, e), e.window_from) {
                let holds = matches!(e.window, Window::HoldsFor { .. } | Window::Never { .. });
                assert_eq!(implicit, holds && !explicit, "{at}: anchor {:?}", e.anchor);
            }
            match (e.window_from, e.window_to, e.window) {
                (Some(from), Some(to), Window::Between { from: f, to: t }) => {
                    assert_eq!((from, to), (e.anchor_at + f, e.anchor_at + t), "{at}");
                    assert!(!implicit, "{at}: within/after count from their anchor");
                }
                (Some(from), Some(to), Window::NotBefore { at: a }) => {
                    assert_eq!((from, to), (e.anchor_at, e.anchor_at + a), "{at}");
                }
                (
                    Some(from),
                    Some(to),
                    Window::HoldsFor { duration } | Window::Never { duration },
                ) => {
                    assert_eq!(to - from, duration, "{at}");
                    // what the result says the window counted from is where it began
                    assert_eq!(from, e.anchor_at, "{at}");
                    if implicit {
                        holds_checked += 1;
                        if let Some(step) = r.steps.iter().find(|s| s.index == Some(e.index)) {
                            assert_eq!(from, step.started, "{at}: from the step's start");
                        }
                        if let Some(prev) = previous_decided(&r, e) {
                            assert!(
                                from >= prev,
                                "{at}: window from {from} but the step before was decided at {prev}"
                            );
                        }
                    }
                }
                (Some(from), Some(to), Window::Preflight) => {
                    assert_eq!((from, to), (e.anchor_at, e.anchor_at), "{at}");
                }
                (None, None, Window::HoldsFor { .. } | Window::Never { .. }) => {
                    assert_eq!(version, 1, "{at}: schema 2 records every window that ran");
                }
                other => panic!("{at}: window span {other:?}"),
            }
        }
    }
    assert!(holds_checked >= 4, "the fixtures have implicit holds");
}

#[test]
fn schema_1_holds_are_not_drawn_from_their_anchor() {
    let path = Path::new("reports/examples/statefulset-nfs/result.json");
    let raw = std::fs::read_to_string(path).unwrap();
    if !raw.contains("\"schemaVersion\": 1") {
        return; // regenerated in schema 2: `windows_are_recorded_where_they_ran` covers it
    }
    let r = report::read_result(&nodefall::disk::Disk, path).unwrap();
    assert_eq!(r.schema_version, record::SCHEMA_VERSION);
    let hold = r.expectations.iter().find(|e| e.index == 4).unwrap();
    assert!(matches!(hold.window, Window::HoldsFor { .. }));
    assert_eq!((hold.window_from, hold.window_to), (None, None));
    // within/after keep their exact span: #4 is `after` 13s .. 43s from the pause
    let evicted = r.expectations.iter().find(|e| e.index == 3).unwrap();
    assert_eq!(
        evicted.window_from,
        Some(evicted.anchor_at + 13_000),
        "{evicted:?}"
    );
    let md = markdown::render(&r);
    assert!(md.contains("not recorded (schema-1 result)"), "{md}");
    assert!(!md.contains("#5 (stuck Terminating) pass held"), "{md}");
}

#[test]
fn implicit_holds_are_shown_from_the_step_start() {
    let md = markdown::render(&fixture(STATEFULSET));
    assert!(
        md.contains("start of #5 (after #4 (evicted) was decided) at T0+28.519s"),
        "{md}"
    );
    // the hold ran T0+28.519s .. T0+88.519s, not from the pause
    assert!(md.contains("| T0+28.519s .. T0+88.519s   |"), "{md}");
}

/// A vagrant run of `graceful-shutdown.yaml` as a schema-3 result: the
/// deployment fixture with two preflight reports and a `gracefulShutdown`
/// expectation. Constructed, not from a run: no kubelet runs here.
fn with_preflight() -> RunResult {
    use nodefall::gns::{self, Fact};
    let mut r = fixture(DEPLOYMENT);
    let config = |grace: &str, critical: &str| {
        nodefall::record::graceful::configz::parse(&format!(
            "{{\"kubeletconfig\":{{\"shutdownGracePeriod\":\"{grace}\",\"shutdownGracePeriodCriticalPods\":\"{critical}\"}}}}"
        ))
        .unwrap()
    };
    let locks = nodefall::record::graceful::logind::inhibitors_from(
        Ok(include_str!(
            "fixtures/gns/inhibit-table-kubelet-bottlerocket.txt"
        )),
        "ssh worker-1: systemd-inhibit --list",
    );
    r.graceful_shutdown = vec![
        nodefall::verdict::graceful::node_report(
            "worker-1",
            vec!["target".into()],
            7_865,
            Fact::Known {
                value: config("1m0s", "20s"),
                source: "GET /api/v1/nodes/worker-1/proxy/configz".into(),
            },
            locks,
            nodefall::record::graceful::logind::inhibit_delay_from(Ok("t 90000000\n"), "ssh worker-1: busctl get-property ... InhibitDelayMaxUSec"),
        ),
        nodefall::verdict::graceful::node_report(
            "worker-2",
            vec!["second".into()],
            7_870,
            Fact::Failed {
                error: "the API server could not reach the kubelet of node worker-2 (HTTP 503: error trying to reach service)".into(),
                source: "GET /api/v1/nodes/worker-2/proxy/configz".into(),
            },
            Fact::not_collected("the backend has no shell on this node"),
            Fact::not_collected("the backend has no shell on this node"),
        ),
    ];
    let (verdict, detail) = nodefall::expect::graceful::decide(
        gns::GracefulShutdown::WillRun,
        &r.graceful_shutdown[0].verdict,
    );
    r.expectations.insert(
        0,
        ExpectationResult {
            index: 0,
            label: "#1 (kubelet ready for graceful shutdown)".into(),
            description: "node target (worker-1): graceful shutdown will run".into(),
            window_written: "at preflight (before the first fault)".into(),
            window: Window::Preflight,
            anchor: "preflight".into(),
            anchor_at: 7_865,
            window_from: Some(7_865),
            window_to: Some(7_865),
            observed: None,
            verdict,
            detail,
            missed_by: None,
            notes: Vec::new(),
        },
    );
    r
}

#[test]
fn graceful_shutdown_preflight_markdown() {
    let md = markdown::render(&with_preflight());
    let section = md
        .split("## Graceful node shutdown (preflight)")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap();
    insta::assert_snapshot!("graceful-shutdown-preflight.md", section);
    assert!(
        md.contains("| at preflight (before the first fault) [at preflight] |")
            || md.contains("at preflight (before the first fault) [at preflight]"),
        "{md}"
    );
    assert!(md.contains("read at preflight"), "{md}");
    // without reports there is no section
    assert!(!markdown::render(&fixture(DEPLOYMENT)).contains("Graceful node shutdown"));
}

#[test]
fn preflight_reports_round_trip_and_old_results_have_none() {
    let r = with_preflight();
    let json = serde_json::to_string_pretty(&r).unwrap();
    assert!(json.contains("\"gracefulShutdown\": ["), "{json}");
    assert!(json.contains("\"kind\": \"preflight\""), "{json}");
    let back: RunResult = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    // a schema-2 file reads with no reports, as schema 3
    let old = fixture(DEPLOYMENT);
    assert!(old.graceful_shutdown.is_empty());
    assert_eq!(old.schema_version, record::SCHEMA_VERSION);
    // the junit case of a preflight expectation
    let xml = junit::render(&r);
    assert!(xml.contains("graceful shutdown will run"), "{xml}");
}

#[test]
fn aborted_markdown() {
    insta::assert_snapshot!("deployment-aborted.md", markdown::render(&fixture(ABORTED)));
}

#[test]
fn aborted_junit() {
    insta::assert_snapshot!("deployment-aborted.xml", junit::render(&fixture(ABORTED)));
}

#[test]
fn an_aborted_run_names_its_guard_at_the_top_and_fails() {
    let r = fixture(ABORTED);
    assert_eq!(r.verdict, RunVerdict::Fail);
    let md = markdown::render(&r);
    let banner = md.lines().nth(2).unwrap();
    assert!(
        banner.starts_with("> **Aborted by guard `replicas-low`** at T0+322.000s"),
        "{md}"
    );
    // the banner replaces the error box, which would only repeat it
    assert!(!md.contains("> **Error.**"), "{md}");
    assert!(
        md.contains("| replicas-low | pods app=nginx-webserver: &lt; 4 ready | 30s              | **fired** at T0+322.000s |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| abortIf[1]   | node target (worker-1): deleted        | grace + 10s (1m) | no "
        ),
        "{md}"
    );
    let xml = junit::render(&r);
    assert_eq!(count(&xml, "type=\"aborted\""), 1, "{xml}");
    assert!(
        xml.contains("abort guard `replicas-low` fired at T0+322.000s"),
        "{xml}"
    );
    // results without guards (every older one) have none and render no section
    let old = fixture(DEPLOYMENT);
    assert!(old.guards.is_empty() && old.aborted.is_none());
    assert!(!markdown::render(&old).contains("Abort guards"));
    assert!(!junit::render(&old).contains("abort guard"));
}

#[test]
fn the_timeline_lanes_show_steps_windows_nodes_pods_and_clients() {
    use nodefall::report::lanes::{self, Tone};
    let r = fixture(STATEFULSET);
    let l = lanes::build(&r);
    let names: Vec<&str> = l.sections.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["Steps", "Nodes", "Pods"]);
    assert_eq!(l.t0, r.t0);
    assert!(l.end >= r.finished);
    let steps = &l.sections[0].rows;
    // every decided expectation is a row with the moment it was seen
    let decided = r
        .expectations
        .iter()
        .filter(|e| e.verdict != Verdict::NotRun)
        .count();
    let marked: Vec<_> = steps
        .iter()
        .filter(|row| row.marks.iter().any(|m| m.tone.is_none()))
        .collect();
    assert!(!marked.is_empty() && marked.len() <= decided, "{steps:?}");
    for row in &marked {
        assert_eq!(row.tone(), Some(Tone::Ok), "{row:?}");
        assert!(row.segments.iter().all(|s| s.from <= s.to), "{row:?}");
    }
    // the node went Unknown and came back Ready
    let target = &r.targets["target"];
    let lane = l.sections[1]
        .rows
        .iter()
        .find(|row| &row.label == target)
        .unwrap();
    assert!(
        lane.segments
            .iter()
            .any(|s| s.tone == Tone::Bad && s.title.contains("Unknown")),
        "{lane:?}"
    );
    assert_eq!(lane.segments.last().unwrap().tone, Tone::Ok, "{lane:?}");
    // a failed run's expectation is drawn as a failure
    let failed = lanes::build(&fixture(DEPLOYMENT));
    assert!(
        failed.sections[0]
            .rows
            .iter()
            .any(|row| row.tone() == Some(Tone::Bad) && row.label.contains("FAIL"))
    );
    // a probed run has a Clients lane with an error window
    let clients = lanes::build(&fixture(CLIENTS));
    let c = clients
        .sections
        .iter()
        .find(|s| s.name == "Clients")
        .unwrap();
    assert!(
        c.rows
            .iter()
            .any(|row| row.tone() == Some(Tone::Bad) && row.label.contains("errors"))
    );
}

#[test]
fn compare_markdown() {
    use nodefall::stats::{self, compare};
    let base = fixture(STATEFULSET);
    let mut slow = fixture(STATEFULSET);
    slow.metrics.node_not_ready = slow.metrics.node_not_ready.map(|ms| ms * 16 / 10);
    slow.expectations[1].verdict = Verdict::Fail;
    let gate = stats::Gate {
        fail_if_slower: Some(20.0),
        ..stats::Gate::default()
    };
    let c = compare::compare(
        stats::Side::of_run("base/result.json", &base),
        stats::Side::of_run("new/result.json", &slow),
        &gate,
    );
    assert_eq!(c.regressions.len(), 2, "{:?}", c.regressions);
    insta::assert_snapshot!(
        "compare-slower.md",
        report::compare::render(&c, Some("compare.svg"))
    );
}

#[test]
fn drain_pdb_markdown() {
    insta::assert_snapshot!("drain-pdb.md", markdown::render(&fixture(DRAIN)));
}

/// The part of a report under `heading`, up to the next section.
fn section<'a>(md: &'a str, heading: &str) -> &'a str {
    md.split(&format!("## {heading}\n"))
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_else(|| panic!("no section {heading}:\n{md}"))
}

/// Issue 32: a run without a fault (a drain) lists no node failure it did
/// not see, and calls its nodes target nodes, not failed ones.
#[test]
fn a_run_without_a_fault_names_no_failed_node_and_no_failure_it_did_not_see() {
    let r = fixture(DRAIN);
    assert!(
        r.steps
            .iter()
            .all(|s| s.kind != nodefall::record::StepKind::Fault)
    );
    let md = markdown::render(&r);
    let metrics = section(&md, "Key metrics");
    for row in [
        "Target node NotReady/Unknown",
        "NoExecute taint on the target node",
        "Target node Ready again",
        "not observed",
    ] {
        assert!(!metrics.contains(row), "{row}:\n{metrics}");
    }
    assert!(metrics.contains("No fault was injected"), "{metrics}");
    assert!(metrics.contains("| First eviction"), "{metrics}");
    assert!(!md.contains("failed node"), "{md}");
    assert!(md.contains("## Pods on the target node(s)\n"), "{md}");

    // A target node that did go NotReady without a fault is shown, with
    // what followed (or did not).
    let mut r = fixture(DRAIN);
    r.metrics.node_not_ready = Some(2_000);
    let md = markdown::render(&r);
    let metrics = section(&md, "Key metrics");
    assert!(
        metrics.contains("| Target node NotReady/Unknown ") && metrics.contains("| T0+2.000s "),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("| Target node Ready again ") && l.contains("| not observed ")),
        "{metrics}"
    );

    // After a fault, a failure not observed is news: it stays.
    let mut r = fixture(STATEFULSET);
    r.metrics.no_execute_taint = None;
    let md = markdown::render(&r);
    let metrics = section(&md, "Key metrics");
    assert!(!metrics.contains("No fault was injected"), "{metrics}");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("| NoExecute taint on the target node ")
                && l.contains("| not observed ")),
        "{metrics}"
    );
    assert!(md.contains("## Pods on the failed node(s)\n"));

    // A fault that never ran (the run stopped before it) failed no node.
    let mut r = fixture(DEPLOYMENT);
    for s in r
        .steps
        .iter_mut()
        .filter(|s| s.kind == nodefall::record::StepKind::Fault)
    {
        s.outcome = StepOutcome::Skipped;
        s.ended = None;
    }
    let md = markdown::render(&r);
    assert!(md.contains("## Pods on the target node(s)\n"), "{md}");
    assert!(!md.contains("failed node"), "{md}");
}

/// Issue 32: the Key-metrics lag is against the objects' whole-second
/// stamps, and says so, beside the audit's lag against its log.
#[test]
fn the_key_metrics_lag_says_what_it_is_measured_against() {
    let md = markdown::render(&fixture(STATEFULSET));
    let metrics = section(&md, "Key metrics");
    assert!(!metrics.contains("| Detection lag, "), "{metrics}");
    assert!(
        metrics.contains("| Detection lag vs whole-second server timestamps, median | "),
        "{metrics}"
    );
    assert!(
        metrics.contains("| Detection lag vs whole-second server timestamps, max "),
        "{metrics}"
    );
    assert!(
        metrics.contains("Those stamps are whole seconds, so a lag reads up to 1s longer"),
        "{metrics}"
    );
    // no audit in that run: nothing to tell it from
    assert!(!metrics.contains("audit"), "{metrics}");
    let r = fixture(DRAIN);
    assert!(r.audit.is_some());
    let md = markdown::render(&r);
    assert!(
        section(&md, "Key metrics").contains(
            "the audit section's lag is measured against the audit log's microsecond stamps"
        ),
        "{md}"
    );
}

/// Issue 32: each cleanup step is shown as long as it took. Deleting the
/// namespace waited until it was gone; the runner records that wait
/// (`runner::cleanup` tests), and the report shows it.
#[test]
fn cleanup_steps_show_how_long_they_took() {
    let r = fixture(DRAIN);
    let namespace = r
        .cleanup
        .iter()
        .find(|c| c.description.starts_with("delete namespace"))
        .unwrap();
    let took = namespace.ended.unwrap() - namespace.started;
    assert!(took > 1_000, "{namespace:?}");
    for pair in r.cleanup.windows(2) {
        assert!(pair[1].started >= pair[0].ended.unwrap(), "{:?}", r.cleanup);
    }
    let md = markdown::render(&r);
    let row = section(&md, "Steps")
        .lines()
        .find(|l| l.contains("| delete namespace "))
        .unwrap();
    assert!(
        row.contains(&format!("| {}.{:03}s ", took / 1000, took % 1000)),
        "{row}"
    );
}

/// A simulated node's Ready=True keeps its first stamp: after an outage,
/// seen minus that stamp is the node's age, not a lag.
#[test]
fn stale_ready_stamps_give_no_server_lag() {
    let md = markdown::render(&fixture(CLIENTS));
    let transitions = section(&md, "Node transitions");
    let back = transitions
        .lines()
        .find(|l| l.starts_with("| T0+16.493s ") && l.contains("Ready=True"))
        .unwrap();
    assert!(back.contains("— (stale stamp, 18.756s old)"), "{back}");
    assert!(transitions.contains("it is not the change's own time"));
    // live changes keep theirs
    assert!(
        transitions
            .lines()
            .any(|l| l.contains("Ready=Unknown") && l.contains("| +0.")),
        "{transitions}"
    );
}

/// The drain fixture's pods and replacements are what `compute` derives
/// from its transitions: each replacement was created once its pod was
/// going (the drain evicts the second node's pod 5 s after the first's).
#[test]
fn the_drain_fixture_pairs_each_pod_with_the_replacement_made_after_it_went() {
    let r = fixture(DRAIN);
    let m = recomputed(&r);
    assert_eq!(m.pods, r.metrics.pods);
    assert_eq!(m.pods.len(), 2);
    for p in &m.pods {
        let (going, created) = (p.terminating_at.unwrap(), p.replacement_created.unwrap());
        assert!(created >= going, "{p:?}");
    }
}

/// The remediation judged from a recorded run (seed 000 on the sim, with
/// its volumes; its fault steps given the fault and node a schema-7 run
/// records): the out-of-service taint is the one act, the lifecycle
/// controller's taints are not; rendered as its own section. A run nothing
/// remediated (seed 002) has none.
#[test]
fn the_remediation_is_judged_from_the_record_and_rendered() {
    let mut r = fixture(VOLUMES);
    for s in r
        .steps
        .iter_mut()
        .filter(|s| s.kind == record::StepKind::Fault)
    {
        let mut words = s.description.split(' ');
        let fault = serde_json::from_value(serde_json::json!(words.next().unwrap())).unwrap();
        let node = words.next().unwrap().to_owned();
        s.fault = Some(record::FaultStep {
            fault,
            node,
            nodes: Vec::new(),
        });
    }
    let targets: Vec<String> = r.targets.values().cloned().collect();
    let judged = nodefall::verdict::remediation::judge(
        &r.transitions,
        r.t0.unwrap(),
        &targets,
        &r.steps,
        &r.metrics,
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(judged.acts.len(), 1, "{judged:#?}");
    assert_eq!(
        (judged.detection, judged.decision, judged.recovery),
        (Some(8_012), Some(80_546), Some(12_859)),
        "{judged:#?}"
    );
    assert_eq!(
        judged.release,
        record::remediation::Release::Released { after: 2_100 }
    );
    r.remediation = Some(judged);
    let md = markdown::render(&r);
    let section = &md[md.find("## Remediation").unwrap()..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    for line in [
        "| T0+88.558s | worker-2 | taint + node.kubernetes.io/out-of-service=nodeshutdown:NoExecute | unknown |",
        "| decision  | 80.546s ",
        "never off during the run (paused, not off: its containers run again when it resumes)",
        "| release   | 2.100s ",
        "| recovery  | 12.859s (3 of 3 pods) ",
        "node.kubernetes.io/out-of-service:NoExecute off at T0+102.217s",
    ] {
        assert!(section.contains(line), "{line}\nin\n{section}");
    }
    let d = fixture(DEPLOYMENT);
    let targets: Vec<String> = d.targets.values().cloned().collect();
    assert_eq!(
        nodefall::verdict::remediation::judge(
            &d.transitions,
            d.t0.unwrap(),
            &targets,
            &d.steps,
            &d.metrics,
            &[],
            &[],
        ),
        None
    );
    assert!(!markdown::render(&d).contains("## Remediation"));
    // A duplicate window measured, and one that could not be known.
    let mut d = d;
    let window =
        |pod: &str, window: Option<i64>, note: Option<&str>| record::machines::DuplicateWindow {
            pod: pod.into(),
            node: "w1".into(),
            replacement: pod.into(),
            replacement_node: Some("w2".into()),
            replacement_running: 27_467,
            replacement_seen: Some(27_002),
            original_last_seen: window.map(|w| 27_002 + w),
            window,
            note: note.map(str::to_owned),
            volumes: vec![nodefall::timeline::volumes::SharedVolume {
                claim: format!("data-{pod}"),
                volume: format!("pv-{pod}"),
                node: "w2".into(),
                attached_at: 26_100,
            }],
        };
    d.duplicates = vec![
        window("db-0", Some(18_535), None),
        window(
            "db-1",
            None,
            Some("unknown: w1 on and its containers unseen"),
        ),
    ];
    let md = markdown::render(&d);
    let section = &md[md.find("## Remediation").unwrap()..];
    for line in [
        "Nothing remediated the failed nodes (no act).",
        "| db-0 | w1          | db-0 on w2  | T0+27.467s (API), T0+27.002s (seen) | T0+45.537s                 | **18.535s**      |",
        "| unknown          | unknown: w1 on and its containers unseen |",
        "two writers on one volume",
        "| db-0 | data-db-0 | pv-db-0 | w2          | T0+26.100s  | **18.535s**      |",
        "| db-1 | data-db-1 | pv-db-1 | w2          | T0+26.100s  | unknown          |",
    ] {
        assert!(section.contains(line), "{line}\nin\n{section}");
    }
}
