//! The command backend through the CLI on a real simulated cluster, with
//! real commands: `kill -STOP`/`kill -CONT` of a node's agent by PID (a
//! literal node -> machine map), and `nodefall sim node` (templates only, a
//! whole seed scenario). A failing revert is reported and exits 3; SIGTERM
//! mid-run reverts through the templates; after SIGKILL `nodefall recover`
//! runs the journaled revert even when the file has changed since.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

#[path = "support/cli_run.rs"]
mod cli_run;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use cli_run::{Dirs, Running, cluster, proc_state};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use nix::sys::signal::Signal;
use nodefall::record::{RunVerdict, StepOutcome};
use nodefall::sim::SimCluster;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

const NODE: &str = "worker-2";

/// The PID of a node's agent (its "machine" here).
fn agent_pid(sim: &SimCluster, node: &str) -> i32 {
    sim.state()
        .nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.agent.as_ref())
        .map(|a| a.pid)
        .unwrap()
}

/// A backend file that pauses a node by SIGSTOP of its agent's PID and
/// checks /proc says so; `revert` is the resume command.
fn pause_by_pid(pid: i32, revert: &str) -> String {
    format!(
        "description: sim node agents by PID\nmachines: {{{NODE}: {pid}}}\nfaults:\n  pause-vm:\n    \
         run: kill -STOP {{machine}}\n    check: sh -c 'test \"$(cut -d\" \" -f3 /proc/$1/stat)\" = T' sh {{machine}}\n    \
         revert: {revert}\n    timeout: 10s\n    checkTimeout: 10s\n"
    )
}

fn scenario(d: &Dirs, steps: &str) -> PathBuf {
    d.write(
        "pause.yaml",
        &format!(
            "name: cmd-pause\nnamespace: cmd-pause\ntarget: {{name: {NODE}}}\nsteps:\n  - fault: pause-vm\n\
             \x20 - expect: {{node: target, ready: Unknown, within: grace + monitorPeriod + 20s}}\n{steps}cleanup: always\n"
        ),
    )
}

/// `nodefall scenario FILE --backend command --backend-file BACKEND` on
/// the test's cluster, as a watched child.
fn start(d: &Dirs, sim: &SimCluster, file: &Path, backend: &Path) -> Running {
    let mut cmd = d.command(&[
        "scenario",
        file.to_str().unwrap(),
        "--out",
        d.out.path().to_str().unwrap(),
        "--backend",
        "command",
        "--backend-file",
        backend.to_str().unwrap(),
        "--profile",
        "fast",
    ]);
    cmd.env("KUBECONFIG", sim.kubeconfig_path());
    Running::start(cmd)
}

fn report_md(d: &Dirs) -> String {
    let dir = std::fs::read_dir(d.out.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    std::fs::read_to_string(dir.path().join("report.md")).unwrap()
}

fn wait_ready(rt: &tokio::runtime::Runtime, client: &kube::Client, node: &str) {
    rt.block_on(async {
        let nodes = Api::<Node>::all(client.clone());
        tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(nodes, node, |n: Option<&Node>| {
                n.is_some_and(nodefall::sim::is_ready)
            }),
        )
        .await
        .unwrap()
        .unwrap();
    });
}

#[test]
fn kill_stop_and_cont_by_pid_drive_a_node_through_its_transitions() {
    let _s = serial();
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "cmdpid");
    let pid = agent_pid(&sim, NODE);
    let backend = d.write("pid.yaml", &pause_by_pid(pid, "kill -CONT {machine}"));
    let file = scenario(
        &d,
        "  - fault: resume-vm\n  - expect: {node: target, ready: \"True\", within: 1m}\n",
    );
    let (code, log) = start(&d, &sim, &file, &backend).finish(Duration::from_secs(300));
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains(&format!("node {NODE} = machine {pid}")),
        "{log}"
    );
    let r = &d.results()[0];
    assert_eq!(r.verdict, RunVerdict::Pass, "{log}");
    assert_eq!(r.backend, "command");
    let pause = &r
        .steps
        .iter()
        .find(|s| s.description.starts_with("pause-vm"))
        .unwrap();
    let lines: Vec<_> = pause
        .commands
        .iter()
        .map(|c| (c.role.as_str(), c.line.as_str(), c.ok))
        .collect();
    let kill = format!("kill -STOP {pid}");
    assert_eq!(lines[0], ("run", kill.as_str(), true), "{lines:?}");
    assert_eq!(lines[1].0, "check", "{lines:?}");
    let resume = &r
        .steps
        .iter()
        .find(|s| s.description.starts_with("resume-vm"))
        .unwrap();
    assert_eq!(resume.commands[0].line, format!("kill -CONT {pid}"));
    assert_ne!(proc_state(pid).unwrap(), 'T');
    assert!(d.unfinished().is_empty(), "{log}");
    let md = report_md(&d);
    assert!(md.contains("## Commands") && md.contains(&kill), "{md}");
    wait_ready(&rt, &client, NODE);
    drop(sim);
}

#[test]
fn a_failing_revert_is_reported_with_its_command_and_exits_3() {
    let _s = serial();
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "cmdfail");
    let pid = agent_pid(&sim, NODE);
    let backend = d.write(
        "fail.yaml",
        &pause_by_pid(
            pid,
            "sh -c 'echo BMC refused to resume \"$1\" >&2; exit 1' sh {machine}",
        ),
    );
    let file = scenario(&d, "");
    let (code, log) = start(&d, &sim, &file, &backend).finish(Duration::from_secs(300));
    assert_eq!(code, Some(3), "{log}");
    assert!(
        log.contains("still not reverted: resume-vm worker-2"),
        "{log}"
    );
    let r = &d.results()[0];
    let failed = r
        .cleanup
        .iter()
        .find(|c| c.description == "resume-vm worker-2")
        .unwrap();
    let StepOutcome::Failed(why) = &failed.outcome else {
        panic!("{failed:?}")
    };
    assert!(
        why.contains(&format!("`sh -c 'echo BMC refused to resume \"$1\" >&2; exit 1' sh {pid}` failed (exit status: 1); stderr: BMC refused to resume {pid}")),
        "{why}"
    );
    assert_eq!(
        failed.commands[0].stderr,
        format!("BMC refused to resume {pid}\n")
    );
    let md = report_md(&d);
    assert!(md.contains(&format!("BMC refused to resume {pid}")), "{md}");
    // The fault is still in place and journaled: put it back by hand.
    assert_eq!(proc_state(pid).unwrap(), 'T');
    assert_eq!(d.unfinished().len(), 1);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    wait_ready(&rt, &client, NODE);
    drop(sim);
}

#[test]
fn sigterm_mid_run_reverts_through_the_templates() {
    let _s = serial();
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "cmdterm");
    let pid = agent_pid(&sim, NODE);
    let backend = d.write("pid.yaml", &pause_by_pid(pid, "kill -CONT {machine}"));
    let file = scenario(&d, "  - action: {wait: {duration: 10m}}\n");
    let mut run = start(&d, &sim, &file, &backend);
    run.wait_for("#3", Duration::from_secs(120));
    assert_eq!(proc_state(pid).unwrap(), 'T');
    run.signal(Signal::SIGTERM);
    let (code, log) = run.finish(Duration::from_secs(120));
    assert_eq!(code, Some(143), "{log}");
    assert_ne!(proc_state(pid).unwrap(), 'T', "{log}");
    assert!(d.unfinished().is_empty(), "{log}");
    let r = &d.results()[0];
    assert_eq!(r.verdict, RunVerdict::Interrupted);
    let resumed = r
        .cleanup
        .iter()
        .find(|c| c.description == "resume-vm worker-2")
        .unwrap();
    assert_eq!(resumed.outcome, StepOutcome::Ok);
    assert_eq!(resumed.commands[0].line, format!("kill -CONT {pid}"));
    wait_ready(&rt, &client, NODE);
    drop(sim);
}

#[test]
fn after_sigkill_recover_runs_the_journaled_revert_not_the_file() {
    let _s = serial();
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "cmdkill");
    let pid = agent_pid(&sim, NODE);
    let backend = d.write("pid.yaml", &pause_by_pid(pid, "kill -CONT {machine}"));
    let file = scenario(&d, "  - action: {wait: {duration: 10m}}\n");
    let mut run = start(&d, &sim, &file, &backend);
    run.wait_for("#3", Duration::from_secs(120));
    run.signal(Signal::SIGKILL);
    let (code, log) = run.finish(Duration::from_secs(30));
    assert_eq!(code, None, "{log}");
    assert_eq!(proc_state(pid).unwrap(), 'T');
    // The file changes (or goes) after the run, and the cluster cannot be
    // reached: recover needs neither to put the node back, only the
    // journal; what needs the cluster waits for a second recover.
    std::fs::write(&backend, "faults: {}\n").unwrap();
    let kubeconfig = sim.kubeconfig_path();
    let away = kubeconfig.with_extension("away");
    std::fs::rename(&kubeconfig, &away).unwrap();
    let out = d.command(&["recover"]).output().unwrap();
    std::fs::rename(&away, &kubeconfig).unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("resume-vm worker-2: ok"), "{text}");
    assert!(
        text.contains(&format!("ran `kill -CONT {pid}`: exit status: 0")),
        "{text}"
    );
    assert!(
        text.contains("delete namespace cmd-pause: FAILED: the cluster could not be reached"),
        "{text}"
    );
    assert_ne!(proc_state(pid).unwrap(), 'T');
    assert_eq!(d.unfinished().len(), 1, "{text}");
    let out = d.command(&["recover"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("delete namespace cmd-pause: ok"), "{text}");
    assert!(d.unfinished().is_empty(), "{text}");
    wait_ready(&rt, &client, NODE);
    drop(sim);
}

/// Done means: a seed scenario runs end to end on sim through `--backend
/// command` with templates only, passing the expectations it passes on the
/// built-in sim backend.
#[test]
fn a_seed_scenario_passes_through_templates_only() {
    let _s = serial();
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "cmdsim");
    let scenario = Path::new("scenarios/vm-halt-deployment.yaml");
    let backend = Path::new("tests/fixtures/backends/sim-cli.yaml");
    let bin = Path::new(env!("CARGO_BIN_EXE_nodefall")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut cmd = d.command(&[
        "scenario",
        scenario.to_str().unwrap(),
        "--out",
        d.out.path().to_str().unwrap(),
        "--backend",
        "command",
        "--backend-file",
        backend.to_str().unwrap(),
        "--profile",
        "fast",
    ]);
    cmd.env("KUBECONFIG", sim.kubeconfig_path())
        .env("PATH", path);
    let (code, log) = Running::start(cmd).finish(Duration::from_secs(900));
    assert_eq!(code, Some(0), "{log}");
    let r = &d.results()[0];
    assert_eq!(r.verdict, RunVerdict::Pass, "{log}");
    let target = r.targets["target"].clone();
    let halt = r
        .steps
        .iter()
        .find(|s| s.description.starts_with("poweroff"))
        .unwrap();
    assert_eq!(
        halt.commands[0].line,
        format!("nodefall sim node kill --name cmdsim {target}")
    );
    assert!(
        halt.commands[0]
            .stdout
            .starts_with(&format!("killed {target}")),
        "{:?}",
        halt.commands
    );
    assert!(d.unfinished().is_empty(), "{log}");
    wait_ready(&rt, &client, &target);
    drop(sim);
}
