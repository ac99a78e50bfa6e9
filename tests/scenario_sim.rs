//! Seed 000 end to end on a throwaway simulated cluster, through the CLI:
//! as written it passes; with one window made wrong it fails, and the report
//! says which expectation failed and by how much.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use nodefall::record::RunResult;
use nodefall::record::remediation::Fencing;
use nodefall::record::{RunVerdict, Verdict};
use nodefall::report::read_result;
use nodefall::timeline::Change;

static SERIAL: Mutex<()> = Mutex::new(());

/// Removed when dropped, also when the test panics.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    result: RunResult,
    report: String,
}

/// Runs `nodefall scenario` and checks what every run must leave behind:
/// one report directory with its three files, and no cluster.
fn run_scenario(file: &Path) -> Run {
    run_scenario_with(file, &[])
}

/// [`run_scenario`] with more arguments.
fn run_scenario_with(file: &Path, args: &[&str]) -> Run {
    let state = tempfile::tempdir().unwrap();
    let journals = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .arg("scenario")
        .arg(file)
        .arg("--out")
        .arg(out.path())
        .args(args)
        .env("NODEFALL_STATE_DIR", state.path())
        .env("NODEFALL_JOURNAL_DIR", journals.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let dirs: Vec<PathBuf> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "one report directory: {dirs:?}\n{stderr}");
    let dir = &dirs[0];
    for f in ["result.json", "report.md", "junit.xml"] {
        assert!(dir.join(f).is_file(), "{f} missing\n{stderr}");
    }
    let leftover: Vec<_> = std::fs::read_dir(state.path()).unwrap().collect();
    assert!(leftover.is_empty(), "the throwaway cluster was removed");
    Run {
        code: output.status.code(),
        result: read_result(&nodefall::disk::Disk, &dir.join("result.json")).unwrap(),
        report: std::fs::read_to_string(dir.join("report.md")).unwrap(),
        stdout,
        stderr,
    }
}

#[test]
fn seed_000_passes_on_the_simulated_cluster() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let run = run_scenario(Path::new("scenarios/statefulset-nfs.yaml"));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let r = &run.result;
    assert_eq!(r.verdict, RunVerdict::Pass);
    assert_eq!(r.expectations.len(), 9);
    assert!(r.expectations.iter().all(|e| e.verdict == Verdict::Pass));
    let m = &r.metrics;
    // Node Unknown after the fast profile's 8 s grace period (+ monitor
    // period); never earlier, later only by as much as the scenario's own
    // window allows a loaded machine (grace + monitorPeriod + 10s).
    let unknown = m.node_not_ready.unwrap();
    assert!(
        (7_000..=19_000).contains(&unknown),
        "Unknown at T0+{unknown}ms"
    );
    // Evictions after grace + 20 s toleration (never before); later by at
    // most the scenario's own slack for load.
    let evicted = m.first_eviction.unwrap();
    assert!(
        (25_000..=43_000).contains(&evicted),
        "evicted at T0+{evicted}ms"
    );
    assert!(!m.pods.is_empty());
    for p in &m.pods {
        let (deleted, created) = (p.deleted_at.unwrap(), p.replacement_created.unwrap());
        assert!(
            created >= deleted,
            "{}: a StatefulSet replaces a pod only once it is gone",
            p.pod
        );
        assert_ne!(p.replacement_node.as_deref(), Some(p.node.as_str()));
    }
    assert!(m.node_ready_again.is_some());
    assert!(run.report.contains("**PASS**"), "{}", run.report);
    // The remediation: the scenario's out-of-service taint is the one act,
    // put down to nodefall's field manager (the lifecycle controller's
    // unreachable taint is the failure, put down to it); the paused VM was
    // never off; the taint was taken off after the node came back.
    let target = &r.targets["target"];
    let unreachable = r
        .transitions
        .iter()
        .find(|t| matches!(&t.change, Change::TaintAdded { key, effect, .. } if key == "node.kubernetes.io/unreachable" && effect == "NoExecute"))
        .unwrap();
    assert_eq!(unreachable.by.as_deref(), Some("kube-controller-manager"));
    let rem = r.remediation.as_ref().expect("the remediation judged");
    assert_eq!(rem.acts.len(), 1, "{rem:#?}");
    let act = &rem.acts[0];
    assert_eq!(
        (act.node.as_str(), act.what.as_str(), act.by.as_deref()),
        (
            target.as_str(),
            "taint + node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
            Some("nodefall")
        )
    );
    assert_eq!(rem.decision, Some(act.at - unknown));
    assert_eq!(
        rem.fencing,
        Fencing::NotOff {
            fault: Some(nodefall::scenario::model::FaultKind::PauseVm)
        }
    );
    assert_eq!((rem.replaced, rem.pods), (m.pods.len(), m.pods.len()));
    assert!(rem.recovery.is_some_and(|v| v > 0), "{rem:#?}");
    // by nodefall, where the Node can say (not when its taint went last:
    // the field goes with it; which goes first is a race)
    assert!(rem.cleanup[0].removed.is_some(), "{rem:#?}");
    assert!(
        matches!(
            rem.cleanup[0].removed_by.as_deref(),
            None | Some("nodefall")
        ),
        "{rem:#?}"
    );
    assert!(run.report.contains("## Remediation"), "{}", run.report);
}

/// Issue 59: seed 000's steps on ReadWriteOnce volumes that really attach,
/// the kind scenarios run on the sim as they are (`--backend sim`): the sim's
/// volumes attach through the real attach-detach controller and the kind
/// driver's attacher, its kubelets report them in use, so the out-of-service
/// taint releases them at once ...
#[test]
fn seed_000_on_attaching_volumes_the_taint_releases_them_on_the_sim() {
    let run = run_scenario_with(
        Path::new("scenarios/kind-rwo-out-of-service.yaml"),
        &["--backend", "sim"],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let m = &run.result.metrics;
    let detached = m.detach_after_out_of_service_max;
    assert!(
        detached.is_some_and(|ms| ms <= 30_000),
        "detached {detached:?} ms after the taint (pod GC's next pass, then at once)"
    );
}

/// ... and force-deleting the pods does not: the frozen node keeps reporting
/// the volumes in use, the replacements meet Multi-Attach errors and wait
/// until the taint.
#[test]
fn seed_000_on_attaching_volumes_force_deleted_pods_leave_them_attached_on_the_sim() {
    let run = run_scenario_with(
        Path::new("scenarios/kind-rwo-force-delete.yaml"),
        &["--backend", "sim"],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let multi_attach = run
        .result
        .transitions
        .iter()
        .filter(|t| {
            matches!(&t.change, Change::Event { reason, message, .. }
                if nodefall::timeline::multi_attach_volume(reason, message).is_some())
        })
        .count();
    assert!(multi_attach >= 1, "no Multi-Attach error recorded");
}

/// ... until the controller's own way out, 6 minutes after the force
/// delete (maxWaitForUnmount, a constant no flag compresses: the sim plays
/// it whole, about 8 minutes of one lane, beside the real tier in CI).
#[test]
fn the_six_minute_force_detach_plays_on_the_sim() {
    let run = run_scenario_with(
        Path::new("scenarios/slow/kind-rwo-force-detach.yaml"),
        &["--backend", "sim"],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    // The controller's timer: 6 minutes from the force delete (kind:
    // docs/kind-backend.md), decided by the real kube-controller-manager.
    let e = run
        .result
        .expectations
        .iter()
        .find(|e| e.label.contains("force-detached"))
        .unwrap();
    assert_eq!(e.verdict, Verdict::Pass, "{e:?}");
    // (`observed` counts from the window's anchor: the force delete.)
    let after = e.observed;
    assert!(
        after.is_some_and(|ms| (359_000..=390_000).contains(&ms)),
        "force-detached {after:?} ms after the force delete"
    );
}

#[test]
fn a_wrong_expectation_fails_the_run_and_the_report_says_by_how_much() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let text = std::fs::read_to_string("scenarios/statefulset-nfs.yaml").unwrap();
    let wrong = text.replace(
        "ready: Unknown, within: grace - lease .. grace + monitorPeriod + 10s",
        "ready: Unknown, within: 2s .. 5s",
    );
    assert_ne!(text, wrong, "the scenario line to break was found");
    // In a directory of its own with the manifests it names, so nothing
    // appears in scenarios/ while other tests read it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("manifests")).unwrap();
    for m in ["statefulset-nfs.yaml", "sim-nfs-volumes.yaml"] {
        std::fs::copy(
            Path::new("scenarios/manifests").join(m),
            dir.path().join("manifests").join(m),
        )
        .unwrap();
    }
    let file = dir.path().join("statefulset-nfs.yaml");
    std::fs::write(&file, wrong).unwrap();
    let run = run_scenario(&file);

    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("FAIL: 8/9"), "{}", run.stdout);
    let failed: Vec<_> = run
        .result
        .expectations
        .iter()
        .filter(|e| e.verdict == Verdict::Fail)
        .collect();
    assert_eq!(failed.len(), 1);
    let f = failed[0];
    assert_eq!(f.index, 1, "the Ready=Unknown expectation");
    // Unknown comes at 7..19 s (see seed 000), the window closed at 5 s.
    let missed = f.missed_by.unwrap();
    assert!((2_000..=14_000).contains(&missed), "missed by {missed}ms");
    // The window closes later by the pause step's own length (docs/scenario-format.md §6.3).
    let pause = run
        .result
        .steps
        .iter()
        .find(|s| s.index == Some(0))
        .unwrap();
    let took = pause.ended.unwrap() - pause.started;
    let closed = nodefall::duration::format_millis(5_000 + took);
    assert!(
        f.detail
            .contains(&format!("after the window closed at {closed}")),
        "{} (the pause took {took} ms)",
        f.detail
    );
    assert!(
        run.report.contains("**FAIL**") && run.report.contains(&f.detail),
        "{}",
        run.report
    );
}

/// Kills and reaps the child when dropped (also when the test panics).
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn ctrl_c_after_the_fault_restores_the_node_and_writes_a_partial_report() {
    use std::io::BufRead as _;
    use std::time::Duration;

    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let state = tempfile::tempdir().unwrap();
    let journals = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .args(["scenario", "scenarios/statefulset-nfs.yaml", "--out"])
        .arg(out.path())
        .env("NODEFALL_STATE_DIR", state.path())
        .env("NODEFALL_JOURNAL_DIR", journals.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reap(child);
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    // Wait (on the progress log, not a sleep) until the node is paused and
    // the first expectation is being watched.
    let mut log = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("no progress line; so far:\n{}", log.join("\n")));
        log.push(line.clone());
        if line.contains("#2: node target") {
            break;
        }
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.0.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.0.wait().unwrap();
    reader.join().unwrap();
    log.extend(rx.try_iter());
    let log = log.join("\n");
    assert_eq!(status.code(), Some(130), "{log}");

    let dirs: Vec<PathBuf> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{log}");
    let result = read_result(&nodefall::disk::Disk, &dirs[0].join("result.json")).unwrap();
    assert_eq!(result.verdict, RunVerdict::Interrupted);
    assert!(
        result
            .cleanup
            .iter()
            .any(|c| c.description.starts_with("resume-vm")),
        "the paused node was resumed: {:?}",
        result.cleanup
    );
    assert!(
        result
            .expectations
            .iter()
            .any(|e| e.verdict == Verdict::NotRun)
    );
    let report = std::fs::read_to_string(dirs[0].join("report.md")).unwrap();
    assert!(report.contains("INTERRUPTED"), "{report}");
    assert!(
        std::fs::read_dir(state.path()).unwrap().next().is_none(),
        "cluster removed\n{log}"
    );
}

#[test]
fn seed_001_stopped_kubelet_recovers_by_deleting_the_node() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let run = run_scenario(Path::new("scenarios/kubelet-stop-node-delete.yaml"));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let r = &run.result;
    let target = &r.targets["target"];
    let node_changes: Vec<&nodefall::timeline::Change> = r
        .transitions
        .iter()
        .filter(
            |t| matches!(&t.object, nodefall::timeline::ObjectRef::Node { name } if name == target),
        )
        .map(|t| &t.change)
        .collect();
    let deleted = node_changes
        .iter()
        .position(|c| **c == nodefall::timeline::Change::NodeDeleted);
    let added_again = node_changes
        .iter()
        .rposition(|c| **c == nodefall::timeline::Change::NodeAdded);
    assert!(
        deleted.is_some() && added_again > deleted,
        "deleted, then re-registered: {node_changes:?}"
    );
    for p in &r.metrics.pods {
        assert!(
            p.replacement_created.unwrap() >= p.deleted_at.unwrap(),
            "{p:?}"
        );
        assert_ne!(p.replacement_node.as_deref(), Some(target.as_str()));
    }
    // The Node's deletion is the act; the kubelet was stopped, the machine
    // never off.
    let rem = r.remediation.as_ref().expect("the remediation judged");
    assert_eq!(rem.acts[0].what, "deleted", "{rem:#?}");
    // A deletion writes no field: its author is the audit log's, the
    // scenario's `delete-node` under the sim's admin user.
    assert!(
        rem.acts[0]
            .user
            .as_deref()
            .is_some_and(|u| u.starts_with("nodefall-admin")),
        "{rem:#?}"
    );
    assert_eq!(
        rem.fencing,
        Fencing::NotOff {
            fault: Some(nodefall::scenario::model::FaultKind::StopKubelet)
        }
    );
}

#[test]
fn seed_002_deployment_replaced_after_the_toleration_and_not_rebalanced() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let run = run_scenario(Path::new("scenarios/vm-halt-deployment.yaml"));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let m = &run.result.metrics;
    assert!(!m.pods.is_empty());
    for p in &m.pods {
        // A Deployment does not wait for the old pod: the replacement comes
        // while it is still Terminating, after grace (8 s) + toleration (20 s).
        // Never before grace + toleration; later by the scenario's slack.
        let created = p.replacement_created.unwrap();
        assert!((25_000..=48_000).contains(&created), "{p:?}");
        assert!(created < p.deleted_at.unwrap(), "{p:?}");
    }
    assert!(
        run.report
            .contains("replaced while the old pod still existed"),
        "{}",
        run.report
    );
    assert_eq!(
        run.result.remediation, None,
        "nothing remediated the node: the toleration evicted its pods"
    );
    // What clients see: the halted node's endpoints stayed ready for about
    // the grace period (8 s; the node lifecycle controller marks its pods
    // not Ready one monitor period later), then left the Service.
    let stale = m.endpoints.stale_endpoint_window.unwrap();
    assert!((4_000..=19_000).contains(&stale), "{:?}", m.endpoints);
    assert!(!m.endpoints.stale_endpoints.is_empty());
    let web = &m.endpoints.ready_endpoints[0];
    assert_eq!(
        (web.service.as_str(), web.ready_before),
        ("nginx-webserver", 6)
    );
    assert!(web.min_ready < 6, "{web:?}");
    // Each endpoint's changes are in result.json, with its pod and node.
    let target = &run.result.targets["target"];
    let unready = run.result.transitions.iter().filter(|t| {
        matches!(&t.change, Change::Endpoint { ready: false, node: Some(n), pod: Some(_), .. } if n == target)
    });
    assert!(unready.count() >= m.endpoints.stale_endpoints.len());
}

#[test]
fn seed_004_drain_under_a_pdb_is_refused_then_completes() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let run = run_scenario(Path::new("scenarios/drain-pdb.yaml"));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let r = &run.result;
    let drain = r
        .steps
        .iter()
        .find(|s| s.description.starts_with("drain"))
        .unwrap();
    assert!(
        drain
            .notes
            .iter()
            .any(|(_, n)| n.starts_with("429 evicting")),
        "{:?}",
        drain.notes
    );
    assert_eq!(r.metrics.ready_before, 3);
    assert!(
        r.metrics.max_unavailable <= 1,
        "never below the budget: {:?}",
        r.metrics
    );
    assert!(
        run.report.contains("429 evicting"),
        "the report shows the refusals"
    );
    // "3 ready" is measured from when the drain had emptied the second
    // node, after an eviction, not from T0 where it held already. (Not
    // after the first 429: the two nodes are drained side by side, and
    // when the second's one pod is the first evicted, it is empty before
    // any refusal; CI saw that once.)
    let ready = r.expectations.iter().find(|e| e.index == 4).unwrap();
    let first_eviction = drain
        .notes
        .iter()
        .find(|(_, n)| n.starts_with("evicted "))
        .map(|(at, _)| *at)
        .unwrap();
    assert!(ready.anchor.contains("second-drained"), "{}", ready.anchor);
    assert!(
        ready.anchor_at >= first_eviction && ready.anchor_at > drain.started,
        "{} before the first eviction ({first_eviction}) or the drain ({})",
        ready.anchor_at,
        drain.started
    );
    // Issue 32: a drain is no node failure. The report names no failed
    // node and lists no node failure it did not see.
    assert!(!run.report.contains("failed node"), "{}", run.report);
    assert!(run.report.contains("## Pods on the target node(s)"));
    let key_metrics = run
        .report
        .split("## Key metrics")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    assert!(!key_metrics.contains("not observed"), "{key_metrics}");
    // Each cleanup step lasts from its start to its end: deleting the
    // namespace waits until it is gone, so it takes time, and the next
    // step begins only after the one before it ended.
    let namespace = r
        .cleanup
        .iter()
        .find(|c| c.description.starts_with("delete namespace"))
        .unwrap();
    assert!(
        namespace.ended.unwrap() > namespace.started,
        "{:?}",
        r.cleanup
    );
    for pair in r.cleanup.windows(2) {
        assert!(pair[1].started >= pair[0].ended.unwrap(), "{:?}", r.cleanup);
    }
}

#[test]
fn an_unknown_node_is_refused_before_any_fault() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("unknown-node.yaml");
    std::fs::write(
        &file,
        "name: unknown-node\nnamespace: preflight\ntarget: {name: worker-9}\nsteps:\n  - fault: pause-vm\n  - expect: {node: target, ready: Unknown, within: grace + 10s}\n",
    )
    .unwrap();
    let run = run_scenario(&file);
    assert_eq!(run.code, Some(2), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("target `target` (node `worker-9`) matches no node; nodes: worker-1, worker-2, worker-3; nothing was injected"),
        "{}",
        run.stderr
    );
    assert!(
        run.result
            .steps
            .iter()
            .all(|s| s.description.starts_with("namespace")),
        "only setup ran: {:?}",
        run.result.steps
    );
    assert!(
        run.result
            .cleanup
            .iter()
            .all(|c| !c.description.starts_with("resume-vm"))
    );
}
