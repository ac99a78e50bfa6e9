//! `--repeat` end to end through the CLI, and `report compare` on what it
//! wrote: three runs on fresh throwaway clusters give three results and an
//! aggregate with p50 and p95; an aggregate compared with itself passes; a
//! copy with 60 % slower node figures fails a 20 % gate and names them. On a
//! shared cluster the namespace is reset between runs, and a SIGINT during
//! the second run keeps the first in the aggregate and exits 130.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use nodefall::record::RunVerdict;
use nodefall::stats::Aggregate;

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::{DEPLOYMENT, Dirs, cluster, start_scenario};

/// Pause a worker, see it go Unknown, resume it, see it Ready.
const QUICK: &str = "name: quick-pause\nnamespace: quick-pause\ntarget: {role: worker}\n\
steps:\n  - fault: pause-vm\n  - expect: {node: target, ready: Unknown, within: \"grace - 5s .. grace + 10s\"}\n\
\x20 - fault: resume-vm\n  - expect: {node: target, ready: \"True\", within: 1m}\ncleanup: always\n";

/// The one series directory under `out`.
fn series_dir(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

fn aggregate(dir: &Path) -> Aggregate {
    serde_json::from_str(&std::fs::read_to_string(dir.join("aggregate.json")).unwrap()).unwrap()
}

fn compare(d: &Dirs, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["report", "compare"];
    all.extend(args);
    let out = d.command(&all).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn three_runs_aggregate_and_compare_gates_a_slower_copy() {
    let d = Dirs::new();
    let file = d.write("quick.yaml", QUICK);
    let run = start_scenario(&d, &file, &["--repeat", "3"]);
    let (exit, log) = run.finish(Duration::from_secs(300));
    assert_eq!(exit, Some(0), "{log}");
    for k in 1..=3 {
        assert!(log.contains(&format!("repeat: run {k} of 3")), "{log}");
    }
    assert!(d.orphans().is_empty(), "left: {:?}", d.orphans());

    let dir = series_dir(d.out.path());
    for k in 1..=3 {
        let run = dir.join(format!("run-{k}"));
        for f in ["result.json", "report.md", "timeline.svg", "junit.xml"] {
            assert!(run.join(f).is_file(), "{} missing", run.join(f).display());
        }
    }
    let a = aggregate(&dir);
    assert_eq!(a.series.requested, 3);
    assert_eq!(a.runs.len(), 3);
    assert!(a.runs.iter().all(|r| r.verdict == RunVerdict::Pass));
    assert_eq!(a.stopped_early, None);
    let nr = a.metrics.iter().find(|m| m.name == "nodeNotReady").unwrap();
    let s = nr.summary;
    assert_eq!(s.n, 3);
    // The node goes Unknown after the grace period (8 s on `fast`).
    assert!(
        (3_000.0..18_000.0).contains(&s.p50),
        "nodeNotReady p50 {}",
        s.p50
    );
    assert!(s.min <= s.p50 && s.p50 <= s.p95 && s.p95 <= s.max, "{s:?}");
    // p50 is one of the three values; p95 lies between the two largest.
    let mut values: Vec<f64> = a
        .runs
        .iter()
        .map(|r| r.figures["nodeNotReady"] as f64)
        .collect();
    values.sort_by(f64::total_cmp);
    assert_eq!(s.p50, values[1]);
    assert!(values[1] <= s.p95 && s.p95 <= values[2]);
    assert!(a.expectations.iter().all(|e| e.rate() == "3/3"), "{a:?}");
    let slowest = a.slowest.as_ref().unwrap();
    let md = std::fs::read_to_string(dir.join("aggregate.md")).unwrap();
    assert!(
        md.contains(&format!("[run {0}](run-{0}/report.md)", slowest.run)),
        "{md}"
    );
    assert!(md.contains("| p50 "), "{md}");
    assert!(md.contains("![Each figure over the runs](distribution.svg)"));
    assert!(
        std::fs::read_to_string(dir.join("distribution.svg"))
            .unwrap()
            .starts_with("<svg")
    );

    // The aggregate against itself: no regression.
    let agg = dir.join("aggregate.json");
    let agg = agg.to_str().unwrap();
    let (code, stdout, stderr) = compare(&d, &[agg, agg, "--fail-if-slower", "20%"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("**No regression.**"), "{stdout}");

    // A copy whose node figures are 60 % slower, in every run and summary.
    let mut slow: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("aggregate.json")).unwrap())
            .unwrap();
    for m in slow["metrics"].as_array_mut().unwrap() {
        if m["name"].as_str().unwrap().starts_with("node") {
            for k in ["min", "p50", "p95", "max", "mean"] {
                let v = m[k].as_f64().unwrap();
                m[k] = serde_json::json!(v * 1.6);
            }
        }
    }
    let slow_path = d.write("slow.json", &slow.to_string());
    let out = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = compare(
        &d,
        &[
            agg,
            slow_path.to_str().unwrap(),
            "--fail-if-slower",
            "20%",
            "--out",
            out.path().to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    for name in ["nodeNotReady", "nodeReadyAgain"] {
        assert!(
            stderr.contains(&format!("regression: {name} got slower")),
            "{name}: {stderr}"
        );
    }
    assert!(stderr.contains("+60%"), "{stderr}");
    // The taint came 60 % later too, but it is not named `node...`: untouched.
    assert!(!stderr.contains("noExecuteTaint got slower"), "{stderr}");
    for f in ["compare.md", "compare.json", "compare.svg"] {
        assert!(out.path().join(f).is_file(), "{f} missing");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("compare.json")).unwrap())
            .unwrap();
    assert_eq!(json["regressions"].as_array().unwrap().len(), 2, "{json}");

    // One run against the series: a result and an aggregate compare too.
    let one = dir.join("run-1/result.json");
    let (code, stdout, stderr) = compare(&d, &[one.to_str().unwrap(), agg, "--format", "json"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["base"]["runs"], 1);
    assert_eq!(json["new"]["runs"], 3);
}

#[test]
fn a_shared_cluster_is_reset_between_runs_and_sigint_keeps_what_finished() {
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "shared");
    d.write("web.yaml", DEPLOYMENT);
    // `on-success` would keep a failed run's namespace: the series resets
    // it between runs anyway (run 2 could not apply web.yaml otherwise).
    let file = d.write(
        "web-pause.yaml",
        "name: web-pause\nnamespace: web-pause\nsetup:\n  apply: web.yaml\n  waitReady: {deployment: web, replicas: 2, timeout: 1m}\n\
         target: {mostPods: app=web}\nsteps:\n  - fault: pause-vm\n\
         \x20 - expect: {node: target, ready: Unknown, within: \"grace - 5s .. grace + 10s\"}\n\
         \x20 - fault: resume-vm\n  - expect: {node: target, ready: \"True\", within: 1m}\ncleanup: on-success\n",
    );
    let mut run = start_scenario(&d, &file, &["--cluster", "shared", "--repeat", "3"]);
    run.wait_for("runs 1 to 2 clean up fully", Duration::from_secs(30));
    run.wait_for("repeat: run 2 of 3", Duration::from_secs(150));
    run.wait_for_nth("#1: pause-vm", 2, Duration::from_secs(90));
    run.signal(Signal::SIGINT);
    let (exit, log) = run.finish(Duration::from_secs(120));
    assert_eq!(exit, Some(130), "{log}");
    assert!(!log.contains("repeat: run 3 of 3"), "{log}");
    assert_eq!(d.unfinished(), Vec::<PathBuf>::new(), "journal left\n{log}");

    let dir = series_dir(d.out.path());
    let a = aggregate(&dir);
    let verdicts: Vec<RunVerdict> = a.runs.iter().map(|r| r.verdict).collect();
    assert_eq!(
        verdicts,
        [RunVerdict::Pass, RunVerdict::Interrupted],
        "{log}"
    );
    assert_eq!(a.stopped_early.as_deref(), Some("SIGINT during run 2"));
    // Only the finished run is counted.
    let nr = a.metrics.iter().find(|m| m.name == "nodeNotReady").unwrap();
    assert_eq!(nr.summary.n, 1);
    assert!(dir.join("run-2/report.md").is_file());
    let md = std::fs::read_to_string(dir.join("aggregate.md")).unwrap();
    assert!(md.contains("stopped early: SIGINT during run 2"), "{md}");
    assert!(md.contains("listed but not counted"), "{md}");

    // The interrupted run cleaned up fully: its namespace is gone.
    let ns: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    let left = rt.block_on(ns.get_opt("web-pause")).unwrap();
    assert!(
        left.is_none_or(|n| n.metadata.deletion_timestamp.is_some()),
        "namespace left\n{log}"
    );
    drop(sim);
}
