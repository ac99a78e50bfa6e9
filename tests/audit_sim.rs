//! The observer checked against the API server's audit log, end to end: a
//! run on a cluster whose nodes are played by shared kwok shards carries
//! its audit check (nothing missed, a lag), a 5 s poller watching the same
//! run is slower, and a result with one transition removed or repeated is
//! caught (exit 1, named). A drain under a PodDisruptionBudget is checked
//! clean: its evictions are in the truth. `audit stamp` folds kubectl's
//! watch output.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use nodefall::profile::TimingProfile;
use nodefall::sim::{SimCluster, UpOptions};
use serde_json::Value;

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::{Dirs, start_scenario};

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 12
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.invalid/web:1}]
";

const SCENARIO: &str = "name: audit-pause\nnamespace: audit-pause\nsetup:\n  apply: web.yaml\n\
  \x20 waitReady: {deployment: web, replicas: 12, timeout: 2m}\ntarget: {mostPods: app=web}\nsteps:\n\
  \x20 - fault: pause-vm\n\
  \x20 - expect: {node: target, ready: Unknown, within: \"grace - 5s .. grace + 10s\"}\n\
  \x20 - fault: resume-vm\n  - expect: {node: target, ready: \"True\", within: 1m}\n\
  \x20 - expect: {pods: app=web, ready: 12, within: 1m}\ncleanup: always\n";

/// The sim tests one at a time: two control planes at once on a small
/// machine slow both, and the timings they check with them.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn check(d: &Dirs, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut all = vec!["audit", "check", "--format", "json"];
    all.extend(args);
    let out = d.command(&all).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), json, stderr)
}

/// The directory of the one run written under `d.out`, and its report.md.
fn run_dir(d: &Dirs) -> (std::path::PathBuf, String) {
    let dir = std::fs::read_dir(d.out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("result.json").is_file())
        .unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    (dir, md)
}

fn source<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["source"] == name)
        .unwrap_or_else(|| panic!("no check of {name} in {report}"))
}

#[test]
fn a_run_on_shared_kwok_is_checked_against_the_audit_log() {
    let _serial = serial();
    let d = Dirs::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // 60 nodes on 2 shared kwok processes.
    let mut opts = UpOptions::new("audit", TimingProfile::fast());
    opts.root = d.state.path().to_owned();
    opts.nodes = 60;
    opts.shards = 2;
    let sim = rt
        .block_on(SimCluster::up(&opts, &mut |_: &str| {}))
        .unwrap();
    let audit_log = sim.audit_log_path();
    let kubeconfig = sim.kubeconfig_path();

    // The baseline: a 5 s poller of the same Nodes and Pods.
    let scratch = tempfile::tempdir().unwrap();
    let poll_out = scratch.path().join("poller.jsonl");
    let poller = d
        .command(&[
            "audit",
            "poll",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--namespace",
            "audit-pause",
            "--interval",
            "5",
            "--out",
            poll_out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    d.write("web.yaml", WEB);
    let file = d.write("audit-pause.yaml", SCENARIO);
    let run = start_scenario(&d, &file, &["--cluster", "audit"]);
    let (exit, log) = run.finish(Duration::from_secs(300));
    kill(
        Pid::from_raw(i32::try_from(poller.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let polled = poller.wait_with_output().unwrap();
    assert!(polled.status.success(), "{polled:?}");
    assert_eq!(exit, Some(0), "{log}");
    assert!(log.contains("audit: "), "{log}");

    // The run carries its own check: nothing missed, a small lag.
    let results = d.results();
    assert_eq!(results.len(), 1);
    let result = &results[0];
    let audit = result.audit.as_ref().expect("the run's audit check");
    let own = &audit.checks[0];
    assert_eq!(own.source, "nodefall");
    assert!(own.clean(), "{own:?}");
    // 12 pods created, scheduled, Running, Ready; the node down and up.
    assert!(own.truth >= 50, "{own:?}");
    let lag = own.lag_ms.unwrap();
    assert!(lag.p95 < 1000.0, "{lag:?}");
    let usage = result.usage.unwrap();
    assert!(usage.peak_rss_bytes > 0 && usage.cpu_ms > 0, "{usage:?}");
    let (dir, md) = run_dir(&d);
    assert!(md.contains("## Observer precision"), "{md}");
    assert!(md.contains("| nodefall "), "{md}");

    // The CLI agrees, and the poller, watching the same run, lagged.
    let result_json = dir.join("result.json");
    let (r, a) = (result_json.to_str().unwrap(), audit_log.to_str().unwrap());
    let baseline = format!("poller-5s={}", poll_out.display());
    let (code, report, stderr) = check(&d, &[r, "--audit-log", a, "--baseline", &baseline]);
    assert_eq!(code, Some(0), "{stderr}");
    let ours = source(&report, "nodefall");
    assert_eq!(ours["missed"], 0);
    let poll = source(&report, "poller-5s");
    let poll_p50 = poll["lagMs"]["p50"].as_f64().unwrap();
    assert!(
        poll_p50 > 300.0 && poll_p50 > ours["lagMs"]["p50"].as_f64().unwrap(),
        "poller {poll} vs nodefall {ours}"
    );

    // One transition taken out of the result: missed, and named. A pod
    // going Ready in the setup, seconds before the window's end (a change
    // made in the observer's last moments would be cut off, not missed).
    let mut value: Value =
        serde_json::from_str(&std::fs::read_to_string(&result_json).unwrap()).unwrap();
    let transitions = value["transitions"].as_array_mut().unwrap();
    // Of a pod that went Ready once only: a pod of the paused node goes Ready
    // again after the resume, and the check would pair its one truth left
    // with that later report (a lag, not a miss).
    let ready = |t: &Value| t["change"]["type"] == "podReady" && t["change"]["ready"] == true;
    let once = |name: &Value| {
        transitions
            .iter()
            .filter(|t| ready(t) && t["object"]["name"] == *name)
            .count()
            == 1
    };
    let pos = transitions
        .iter()
        .position(|t| ready(t) && once(&t["object"]["name"]))
        .unwrap();
    let removed = transitions.remove(pos);
    let pod = removed["object"]["name"].clone();
    assert!(
        removed["at"].as_i64().unwrap() < result.t0.unwrap(),
        "in the setup: {removed}"
    );
    let tampered = d.write("missed.json", &value.to_string());
    let (code, report, _) = check(&d, &[tampered.to_str().unwrap(), "--audit-log", a]);
    assert_eq!(code, Some(1));
    let ours = source(&report, "nodefall");
    assert_eq!(ours["missed"], 1, "{ours}");
    assert_eq!(ours["missedExamples"][0]["object"]["name"], pod);

    // The same transition reported twice: duplicated.
    value["transitions"]
        .as_array_mut()
        .unwrap()
        .insert(pos, removed.clone());
    let mut again = removed;
    again["at"] = Value::from(again["at"].as_i64().unwrap() + 5);
    value["transitions"]
        .as_array_mut()
        .unwrap()
        .insert(pos + 1, again);
    let tampered = d.write("duplicated.json", &value.to_string());
    let (code, report, _) = check(&d, &[tampered.to_str().unwrap(), "--audit-log", a]);
    assert_eq!(code, Some(1));
    assert_eq!(source(&report, "nodefall")["duplicated"], 1);

    // Not an audit log: exit 2, naming the file and line.
    let bad = d.write("audit.log", "{\"kind\":\"Event\"}\n");
    let (code, _, stderr) = check(&d, &[r, "--audit-log", bad.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("audit.log:1: not an audit event"),
        "{stderr}"
    );
    drop(sim);
}

/// Seed 004 (a drain of two nodes under a PDB, no fault): the pods the
/// Eviction API evicted went Terminating with a DisruptionTarget condition
/// with no audited write of the pod; the truth has them from the evictions
/// (the refused ones, 429, change nothing), so nothing is unexplained, and
/// the window ends where the cleanup began, so nothing is missed.
#[test]
fn a_drain_under_a_pdb_is_checked_clean_with_its_evictions_in_the_truth() {
    let _serial = serial();
    let d = Dirs::new();
    let run = start_scenario(&d, std::path::Path::new("scenarios/drain-pdb.yaml"), &[]);
    let (exit, log) = run.finish(Duration::from_secs(420));
    assert_eq!(exit, Some(0), "{log}");
    assert!(log.contains("429 evicting"), "a refusal happened: {log}");
    let results = d.results();
    let result = &results[0];
    let audit = result.audit.as_ref().expect("the run's audit check");
    let own = &audit.checks[0];
    assert_eq!(own.source, "nodefall");
    assert_eq!((own.missed, own.unexplained), (0, 0), "{own:?}\n{log}");
    assert!(own.clean(), "{own:?}");
    // Both evicted pods: their condition and their Terminating, from the
    // evictions' audit events.
    for kind in ["podDisruptionTarget", "podTerminating"] {
        let n = own.lag_by_change_ms.get(kind).map_or(0, |s| s.n);
        assert_eq!(n, 2, "{kind}: {own:?}");
    }
    // The window ends where the cleanup began.
    let cleanup = result.cleanup.iter().map(|s| s.started).min().unwrap();
    assert_eq!(audit.window.to, result.wall_clock(cleanup));
    let (_, md) = run_dir(&d);
    assert!(md.contains("**nodefall: clean**"), "{md}");
    assert!(md.contains("lag vs audit log p50"), "{md}");
}

#[test]
fn stamp_folds_kubectl_watch_events_and_bad_input_is_named() {
    let d = Dirs::new();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("stamped.jsonl");
    let mut stamp = d
        .command(&["audit", "stamp", "--out", out.to_str().unwrap()])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let node = |kind: &str, status: &str| {
        serde_json::to_string_pretty(&serde_json::json!({
            "type": kind,
            "object": {"kind": "Node", "apiVersion": "v1",
                "metadata": {"name": "worker-1", "uid": "u1"},
                "status": {"conditions": [{"type": "Ready", "status": status}]}}
        }))
        .unwrap()
    };
    let mut stdin = stamp.stdin.take().unwrap();
    for (kind, status) in [
        ("ADDED", "True"),
        ("MODIFIED", "Unknown"),
        ("DELETED", "Unknown"),
    ] {
        writeln!(stdin, "{}", node(kind, status)).unwrap();
    }
    drop(stdin);
    assert!(stamp.wait().unwrap().success());
    let changes: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            format!("{} {}", v["change"]["type"], v["change"]["status"]).replace('"', "")
        })
        .collect();
    assert_eq!(
        changes,
        [
            "nodeAdded null",
            "nodeReady True",
            "nodeReady Unknown",
            "nodeDeleted null"
        ]
    );

    let bad_baseline = d
        .command(&[
            "audit",
            "check",
            "r.json",
            "--audit-log",
            "a.log",
            "--baseline",
            "nofile",
        ])
        .output()
        .unwrap();
    assert_eq!(bad_baseline.status.code(), Some(2), "{bad_baseline:?}");
    assert!(String::from_utf8_lossy(&bad_baseline.stderr).contains("NAME=FILE"));
}
