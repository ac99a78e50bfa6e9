//! An `abortIf` guard end to end on a throwaway simulated cluster, through
//! the CLI: the node under a Deployment is paused, the guard fires once the
//! Deployment has had fewer than 2 ready pods for 2 s, the 5-minute
//! expectation in progress is dropped, and the run restores (the node is
//! resumed), fails with exit code 1 and says which guard fired and when.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nodefall::record::{RunVerdict, StepOutcome, Verdict};

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::{DEPLOYMENT, Dirs, start_scenario};

fn scenario(d: &Dirs) -> PathBuf {
    d.write("web.yaml", DEPLOYMENT);
    d.write(
        "abort.yaml",
        "name: abort-guard\nnamespace: abort-guard\nsetup:\n  apply: web.yaml\n  waitReady: {deployment: web, replicas: 2, timeout: 1m}\n\
         target: {mostPods: app=web}\n\
         abortIf:\n  - {name: web-degraded, pods: app=web, readyBelow: 2, for: 2s}\n\
         steps:\n  - fault: pause-vm\n  - expect: {node: target, exists: true, holdsFor: 5m}\n\
         \x20 - fault: resume-vm\n  - expect: {node: target, ready: \"True\", within: 1m}\ncleanup: always\n",
    )
}

#[test]
fn a_guard_that_fires_stops_the_steps_restores_and_fails_the_run() {
    let d = Dirs::new();
    let file = scenario(&d);
    let began = Instant::now();
    let run = start_scenario(&d, &file, &[]);
    let (exit, log) = run.finish(Duration::from_secs(240));
    let took = began.elapsed();
    assert_eq!(exit, Some(1), "{log}");
    // The 5-minute hold was not waited for.
    assert!(took < Duration::from_secs(150), "took {took:?}\n{log}");
    assert!(
        log.contains("stopping: abort guard `web-degraded` fired at T0+"),
        "{log}"
    );

    // Nothing left pending in the journal, no cluster left.
    assert_eq!(d.unfinished(), Vec::<PathBuf>::new(), "journal left\n{log}");
    let results = d.results();
    assert_eq!(results.len(), 1, "{log}");
    let r = &results[0];
    assert_eq!(r.verdict, RunVerdict::Fail, "{log}");

    let a = r
        .aborted
        .as_ref()
        .unwrap_or_else(|| panic!("no abort\n{log}"));
    assert_eq!(a.guard, "web-degraded");
    assert_eq!(a.for_ms, 2_000);
    assert!(
        a.description.starts_with("pods app=web: < 2 ready"),
        "{a:?}"
    );
    let t0 = r.t0.unwrap();
    // After the node's grace period (8 s on `fast`) and the 2 s hold; well
    // before the toleration-driven eviction would have mattered to a 5m hold.
    let fired = a.at - t0;
    assert!(
        (8_000..60_000).contains(&fired),
        "fired at T0+{fired}ms\n{log}"
    );
    assert_eq!(r.guards.len(), 1);
    assert_eq!(r.guards[0].fired_at, Some(a.at));

    // The hold in progress and everything after it: not run.
    let verdicts: Vec<Verdict> = r.expectations.iter().map(|e| e.verdict).collect();
    assert_eq!(verdicts, vec![Verdict::NotRun, Verdict::NotRun], "{log}");
    // Only the pause ran as a step; the resume came from cleanup.
    let faults: Vec<&str> = r
        .steps
        .iter()
        .filter(|s| s.index.is_some())
        .map(|s| s.description.as_str())
        .collect();
    assert_eq!(faults.len(), 1, "{faults:?}");
    let node = r.targets.get("target").unwrap();
    let resume = r
        .cleanup
        .iter()
        .find(|c| {
            c.description
                .starts_with(&format!("resume-vm {node} (found it frozen"))
        })
        .unwrap_or_else(|| panic!("no resume in cleanup: {:?}", r.cleanup));
    assert_eq!(resume.outcome, StepOutcome::Ok);
    assert!(resume.started >= a.at);
    // (The node's return to Ready is not in the transitions: cleanup stops
    // observing once it deletes what the run applied, right after the resume.)

    // The report says which guard fired and when, at the top.
    let dir = std::fs::read_dir(d.out.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let banner = md.lines().nth(2).unwrap_or_default();
    assert!(
        banner.starts_with("> **Aborted by guard `web-degraded`** at T0+"),
        "{md}"
    );
    assert!(md.contains("## Abort guards"), "{md}");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(junit.contains("type=\"aborted\""), "{junit}");
}
