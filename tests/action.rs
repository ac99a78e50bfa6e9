//! The GitHub Action (action.yml, scripts/action/nodefall-action.sh) run as
//! the runner runs it, on a kept simulated cluster: every scenario runs even
//! after one fails, the job summary has a row per scenario and a line per
//! failure, the outputs are written, the artifact holds every report; and a
//! job cancelled in the middle of a fault (SIGTERM, as the runner sends it,
//! or the runner's kill of the whole step) leaves every node Ready once the
//! action's `if: always()` step has run. The kind half is in
//! tests/kind_real.rs (the README's example workflow, on its cluster).

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use nodefall::sim::{State, is_ready};

#[path = "support/action.rs"]
mod action;
#[path = "support/cli_run.rs"]
mod cli_run;

use action::{Action, Job};
use cli_run::{Dirs, Running, cluster};

const BIN: &str = env!("CARGO_BIN_EXE_nodefall");

/// A job on the kept cluster `name`, with the test's state directories.
fn job(d: &Dirs, name: &str, scenarios: &str) -> Job {
    let args = format!("--cluster {name}");
    let mut job = Job::new(&[("scenarios", scenarios), ("args", &args), ("version", BIN)]);
    job.env = vec![
        (
            "NODEFALL_STATE_DIR".into(),
            d.state.path().display().to_string(),
        ),
        (
            "NODEFALL_JOURNAL_DIR".into(),
            d.journals.path().display().to_string(),
        ),
    ];
    job
}

#[test]
fn every_scenario_runs_and_the_summary_outputs_and_artifact_say_what_failed() {
    let action = Action::load();
    let d = Dirs::new();
    let name = "action";

    // A pattern matching nothing stops the step before any cluster work.
    let typo = job(
        &d,
        name,
        "tests/fixtures/action/node-unknown.yaml tests/fixtures/action/nope-*.yaml",
    );
    let (code, log) = typo.run(&action, action.step("run"));
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("'tests/fixtures/action/nope-*.yaml' matches no file"),
        "{log}"
    );
    assert!(!log.contains("nodefall scenario"), "a scenario ran:\n{log}");
    assert_eq!(typo.outputs()["verdict"], "error");
    assert!(
        typo.summary()
            .starts_with("## nodefall: ERROR, nothing ran\n"),
        "{}",
        typo.summary()
    );

    let (_rt, sim, _client) = cluster(d.state.path(), name);
    let started = Instant::now();
    let j = job(
        &d,
        name,
        "tests/fixtures/action/too-soon.yaml\ntests/fixtures/action/node-*.yaml",
    );
    let (code, log) = j.run(&action, action.step("run"));
    // The failure of the first did not stop the second; the exit code carries it.
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("nodefall scenario tests/fixtures/action/node-unknown.yaml"),
        "{log}"
    );

    let out = j.action_outputs(&action);
    assert_eq!(out["verdict"], "fail", "{out:?}");
    assert_eq!(
        (out["passed"].as_str(), out["failed"].as_str()),
        ("1", "1"),
        "{out:?}"
    );
    let summary: serde_json::Value = serde_json::from_str(&out["summary"]).unwrap();
    let entries = summary["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{summary}");
    let passed = &entries[0];
    assert_eq!(passed["scenario"], "action-node-unknown");
    // Its figures: Unknown after the fast profile's grace period.
    let not_ready = passed["figures"]["nodeNotReady"].as_f64().unwrap();
    assert!((4000.0..20_000.0).contains(&not_ready), "{summary}");
    let failed = &entries[1]["failed"][0];
    assert_eq!(failed["label"], "#2 (unknown at once)", "{summary}");

    let md = j.summary();
    assert!(
        md.starts_with("## nodefall: FAIL, 1 of 2 scenarios passed\n"),
        "{md}"
    );
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| action-")).collect();
    assert_eq!(rows.len(), 2, "{md}");
    assert!(
        rows[0].contains("| PASS ") && rows[1].contains("| FAIL "),
        "{md}"
    );
    // `within: 1s` of the pause, closing later by the pause step's own
    // length (docs/scenario-format.md §6.3): `1s`, or `1.04s` and the like.
    let said = "- **action-too-soon** `#2 (unknown at once)` node target (worker-2): Ready=Unknown: not seen within 1";
    let after = md.split_once(said).map(|(_, rest)| rest);
    assert!(
        after.is_some_and(|rest| rest.starts_with('s') || rest.starts_with('.')),
        "{md}"
    );
    assert!(
        j.path_added().trim_end().ends_with("nodefall-action/bin"),
        "{}",
        j.path_added()
    );

    // The artifact: both runs' reports and each scenario's log.
    let files = j.artifact(&action);
    for stem in ["action-node-unknown-", "action-too-soon-"] {
        for f in ["report.md", "result.json", "junit.xml", "timeline.svg"] {
            assert!(
                files
                    .iter()
                    .any(|p| p.starts_with(stem) && p.ends_with(&format!("/{f}"))),
                "no {stem}*/{f} in {files:?}"
            );
        }
    }
    assert!(
        files.contains(&"logs/node-unknown.log".to_owned()),
        "{files:?}"
    );

    // The always() step after a run that put everything back: nothing to do.
    let (code, log) = j.run(&action, action.recover_step());
    assert_eq!(code, Some(0), "{log}");
    assert!(d.unfinished().is_empty(), "{log}");
    eprintln!(
        "two scenarios through the action in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    drop(sim);
}

/// Every node Ready, and each agent recorded running and really running (a
/// SIGSTOPped kwok still looks Ready until the grace period ends).
fn every_node_ready(
    d: &Dirs,
    name: &str,
    client: &kube::Client,
    rt: &tokio::runtime::Runtime,
    what: &str,
) {
    let state = State::load(&d.state.path().join(name).join("state.json")).unwrap();
    for n in &state.nodes {
        let pid = n.agent.as_ref().map(|a| a.pid);
        let proc = pid.and_then(cli_run::proc_state);
        assert!(
            proc.is_some_and(|s| s != 'T' && s != 'Z'),
            "{what}: node {}'s agent {pid:?} is in state {proc:?}",
            n.name
        );
    }
    rt.block_on(async {
        let nodes: Api<Node> = Api::all(client.clone());
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let list = nodes.list(&Default::default()).await.unwrap();
            let not_ready: Vec<_> = list
                .items
                .iter()
                .filter(|n| !is_ready(n))
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            if list.items.len() == 3 && not_ready.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not Ready: {not_ready:?}"
            );
            // Node conditions through a plain list: a short bounded poll.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
}

/// Waits (bounded) until the node's Ready condition is no longer True.
fn wait_not_ready(client: &kube::Client, rt: &tokio::runtime::Runtime, node: &str) {
    rt.block_on(async {
        let nodes: Api<Node> = Api::all(client.clone());
        let deadline = Instant::now() + Duration::from_secs(60);
        while is_ready(&nodes.get(node).await.unwrap()) {
            assert!(Instant::now() < deadline, "{node} never left Ready");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
}

#[test]
fn a_cancelled_job_leaves_every_node_ready_after_the_always_step() {
    let action = Action::load();
    let d = Dirs::new();
    let name = "cancel";
    let (rt, sim, client) = cluster(d.state.path(), name);

    // The runner's cancel: SIGINT, then SIGTERM, to the step's process
    // (the script); here SIGTERM at once. nodefall gets it through the
    // script, reverts the fault, and the step ends with 143.
    let j = job(
        &d,
        name,
        "tests/fixtures/action/held.yaml tests/fixtures/action/node-unknown.yaml",
    );
    let mut step = Running::start(j.command(&action, action.step("run")));
    step.wait_for("#2", Duration::from_secs(120));
    kill(
        Pid::from_raw(i32::try_from(step.child.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let (code, log) = step.finish(Duration::from_secs(120));
    assert_eq!(code, Some(143), "{log}");
    assert!(log.contains("SIGTERM: passing it to nodefall"), "{log}");
    let out = j.action_outputs(&action);
    assert_eq!(out["verdict"], "interrupted", "{out:?}");
    assert!(
        j.summary().contains("Stopped by SIGTERM"),
        "{}",
        j.summary()
    );
    assert!(
        j.summary()
            .contains("node-unknown.yaml (not started: the job was stopped)"),
        "{}",
        j.summary()
    );
    let (code, log) = j.run(&action, action.recover_step());
    assert_eq!(code, Some(0), "{log}");
    assert!(d.unfinished().is_empty(), "{log}");
    every_node_ready(&d, name, &client, &rt, "after SIGTERM");

    // The runner's last resort when the step does not end: the whole
    // step's process tree killed. The fault stays (the node goes Unknown);
    // the always() step reverts it from the journal.
    let j = job(&d, name, "tests/fixtures/action/held.yaml");
    let mut cmd = j.command(&action, action.step("run"));
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut step = Running::start(cmd);
    step.wait_for("#2", Duration::from_secs(120));
    let group = Pid::from_raw(i32::try_from(step.child.id()).unwrap());
    // nodefall runs in a session of its own (setsid): the kill reaches it
    // as the runner's would, by process, through the tree.
    let tree = descendants(group.as_raw());
    killpg(group, Signal::SIGKILL).unwrap();
    for pid in &tree {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    let (_, log) = step.finish(Duration::from_secs(30));
    assert_eq!(
        d.unfinished().len(),
        1,
        "no journal left by the killed run:\n{log}"
    );
    wait_not_ready(&client, &rt, "worker-1");
    let (code, log) = j.run(&action, action.recover_step());
    assert_eq!(code, Some(0), "{log}");
    assert!(
        d.unfinished().is_empty(),
        "recover left the journal open:\n{log}"
    );
    every_node_ready(&d, name, &client, &rt, "after the kill and recover");
    drop(sim);
}

/// Every process under `pid`, by /proc's parent links.
fn descendants(pid: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        parents.push((p, ppid));
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// A loopback HTTP server of the files in `root` (GET only), for the
/// action's release download; its address.
fn serve(root: std::path::PathBuf) -> String {
    use std::io::{BufRead as _, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            let _ = reader.read_line(&mut request);
            // The rest of the head, up to the blank line.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let file = root.join(path.trim_start_matches('/'));
            let mut stream = stream;
            match std::fs::read(&file) {
                Ok(body) if !path.contains("..") => {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(&body);
                }
                _ => {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_release_tag_is_downloaded_and_held_to_its_checksum() {
    let site = tempfile::tempdir().unwrap();
    let tag = site.path().join("v9.8.7");
    let name = "nodefall-9.8.7-x86_64-unknown-linux-gnu";
    let stage = tempfile::tempdir().unwrap();
    std::fs::create_dir(stage.path().join(name)).unwrap();
    let bin = stage.path().join(name).join("nodefall");
    std::fs::write(
        &bin,
        "#!/bin/sh\necho 'nodefall 9.8.7 (from the release)'\n",
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir(&tag).unwrap();
    // Laid out as scripts/release.sh lays a release out.
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "tar -C '{}' -czf '{t}/{name}.tar.gz' {name} && cd '{t}' && sha256sum {name}.tar.gz > {name}.tar.gz.sha256",
            stage.path().display(),
            t = tag.display()
        ))
        .status()
        .unwrap();
    assert!(made.success());
    let url = serve(site.path().to_owned());
    let action = Action::load();
    let install = |version: &str| {
        let mut j = Job::new(&[("scenarios", "x"), ("version", version)]);
        j.env = vec![("NODEFALL_RELEASES_URL".into(), url.clone())];
        let mut step = action.step("run").clone();
        step.run = Some(
            step.run
                .unwrap()
                .replace("nodefall-action.sh\" run", "nodefall-action.sh\" install"),
        );
        let (code, log) = j.run(&action, &step);
        (j, code, log)
    };
    let (j, code, log) = install("v9.8.7");
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("nodefall 9.8.7 (from the release)"), "{log}");
    assert!(
        j.path_added().contains("nodefall-action/bin"),
        "{}",
        j.path_added()
    );

    // A tarball that is not the one its checksum names is refused.
    let tarball = tag.join(format!("{name}.tar.gz"));
    let mut bytes = std::fs::read(&tarball).unwrap();
    bytes.extend_from_slice(b"tampered");
    std::fs::write(&tarball, bytes).unwrap();
    let (_, code, log) = install("v9.8.7");
    assert_eq!(code, Some(3), "{log}");
    assert!(
        log.contains("does not match its published checksum"),
        "{log}"
    );
    assert!(!log.contains("from the release"), "it ran:\n{log}");
    // A tag with no release.
    let (_, code, log) = install("v0.0.1");
    assert_eq!(code, Some(3), "{log}");
    assert!(log.contains("cannot download"), "{log}");
    let (_, code, log) = install("latest");
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("is not 'source', a release tag"), "{log}");
}
