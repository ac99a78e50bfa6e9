//! A signal at every step boundary of a scenario, and half-way through each
//! sim fault's inject and revert, on one kept cluster: each run stops with
//! 128 + signo, writes an INTERRUPTED report, leaves no process of its own,
//! and leaves a journal that cleanup closed or `nodefall recover` closes,
//! with every node Ready and the run's namespace gone. The points are
//! reached through nodefall's test hook (`crates/io/src/testpoint.rs`), not sleeps.
//!
//! CI runs every boundary of one scenario per sim fault and of one with a
//! fault on a set of two nodes, and the seed's fault and cleanup revert
//! (about 4 minutes); `NODEFALL_SIGNAL_POINTS=all`
//! adds every boundary of `scenarios/statefulset-nfs.yaml` (each run waits
//! for the eviction timeline up to its point: about 15 minutes in all).

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::Api;
use nix::sys::signal::Signal;
use nodefall::record::RunVerdict;
use nodefall::sim::{State, is_ready};

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::{Dirs, Running, cluster, processes_naming};

/// One run: a scenario, the points its signals fire at, the signal.
struct Case {
    file: &'static str,
    points: String,
    signal: Signal,
}

const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

fn code(s: Signal) -> i32 {
    128 + s as i32
}

fn env_name(s: Signal) -> &'static str {
    match s {
        Signal::SIGTERM => "TERM",
        Signal::SIGHUP => "HUP",
        _ => "INT",
    }
}

/// The sim's half-way points of a fault's inject, of its revert as a step,
/// and of its revert in cleanup.
fn sim_points(fault: &str) -> (&'static str, &'static str, &'static str) {
    match fault {
        "pause" | "drop-nic" => ("sim:freeze", "sim:thaw", "sim:restore"),
        "poweroff" => ("sim:kill", "sim:start", "sim:start"),
        "stop-kubelet" => ("sim:stop", "sim:start", "sim:start"),
        other => panic!("no sim points for {other}"),
    }
}

/// The cases of a four-step fault scenario (fault, wait, revert, expect):
/// each boundary after the first (before step 1 nothing is injected, the
/// same for every fault: `pause` has it), the sim's half-way points of the
/// inject and of the revert step, and a cleanup revert cut by a second
/// signal; `pause` also has the runner's journaled/injected points of both
/// fault steps.
fn fault_cases(name: &'static str, file: &'static str) -> Vec<Case> {
    let (inject, revert, cleanup) = sim_points(name);
    let first = if name == "pause" { 1 } else { 2 };
    let mut points: Vec<String> = (first..=4).map(|n| format!("step-{n}")).collect();
    points.push("steps-end".into());
    if name == "pause" {
        for n in [1, 3] {
            points.push(format!("fault-{n}:journaled"));
            points.push(format!("fault-{n}:injected"));
        }
    }
    points.push(inject.into());
    points.push(revert.into());
    if revert == "sim:thaw" {
        // The thawed node's new agent: its Node registered, not started.
        points.push("sim:start".into());
    }
    // Stopped while the fault holds, then again half-way through its
    // revert in cleanup: cleanup is abandoned and `recover` finishes it.
    points.push(format!("step-2,{cleanup}"));
    cases(file, points)
}

fn cases(file: &'static str, points: Vec<String>) -> Vec<Case> {
    points
        .into_iter()
        .enumerate()
        .map(|(i, points)| Case {
            file,
            points,
            signal: SIGNALS[i % 3],
        })
        .collect()
}

/// A fault on a set of two nodes, which the sim hits one after the other:
/// its first node's inject half-way and done (the second not yet
/// journaled), its revert's first node half-way, and its cleanup revert
/// cut short on the first node (the step boundaries are the same as any
/// scenario's, swept above).
fn set_cases() -> Vec<Case> {
    let points = [
        "sim:kill",
        "fault-1:injected",
        "sim:start",
        "step-2,sim:start",
    ];
    cases(
        "tests/fixtures/signals/set.yaml",
        points.map(String::from).to_vec(),
    )
}

/// `scenarios/statefulset-nfs.yaml` (20-30 s a run: 8 pods up, their
/// namespace deleted): half-way through its inject, and its cleanup revert
/// cut short. With `all`, every boundary and its revert step (#9) too: up
/// to two minutes each, the eviction timeline (run it as
/// `NODEFALL_SIGNAL_POINTS=all cargo test --test signal_points`).
fn seed_cases(all: bool) -> Vec<Case> {
    let mut points: Vec<String> = vec!["sim:freeze".into(), "step-2,sim:restore".into()];
    if all {
        points.extend((1..=13).map(|n| format!("step-{n}")));
        points.push("steps-end".into());
        points.extend(["fault-1:journaled", "fault-1:injected"].map(String::from));
        points.extend(["fault-9:journaled", "sim:thaw", "fault-9:injected"].map(String::from));
    }
    cases("scenarios/statefulset-nfs.yaml", points)
}

/// The PIDs the kept cluster records (control plane, node agents).
fn recorded_pids(state: &State) -> BTreeSet<i32> {
    state
        .components
        .iter()
        .chain(state.nodes.iter().filter_map(|n| n.agent.as_ref()))
        .map(|p| p.pid)
        .collect()
}

/// Runs case number `n` and checks what it left.
fn run_case(
    d: &Dirs,
    name: &str,
    client: &kube::Client,
    rt: &tokio::runtime::Runtime,
    n: usize,
    c: &Case,
) {
    let started = Instant::now();
    let what = format!("{} at {} ({:?})", c.file, c.points, c.signal);
    let out = d.out.path().join(format!("run-{n}"));
    std::fs::create_dir_all(&out).unwrap();
    let mut cmd = d.command(&[
        "scenario",
        c.file,
        "--cluster",
        name,
        "--out",
        out.to_str().unwrap(),
    ]);
    cmd.env("NODEFALL_TEST_SIGNAL_AT", &c.points)
        .env("NODEFALL_TEST_SIGNAL", env_name(c.signal));
    let run = Running::start(cmd);
    let (exit, log) = run.finish(Duration::from_secs(240));
    // Every point named fired (a misspelt point would let the run pass).
    for p in c.points.split(',') {
        assert!(
            log.contains(&format!("test point {p}: sending SIG")),
            "{what}: point {p} never reached\n{log}"
        );
    }
    assert_eq!(exit, Some(code(c.signal)), "{what}\n{log}");
    let result = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| {
            nodefall::report::read_result(
                &nodefall::disk::Disk,
                &e.unwrap().path().join("result.json"),
            )
            .unwrap()
        })
        .next()
        .unwrap_or_else(|| panic!("{what}: no report\n{log}"));
    assert_eq!(result.verdict, RunVerdict::Interrupted, "{what}\n{log}");
    // Cleanup closed the journal, or (abandoned) recover closes it.
    if !d.unfinished().is_empty() {
        assert!(c.points.contains(','), "{what}: journal left\n{log}");
        let rec = d.command(&["recover"]).output().unwrap();
        let text = String::from_utf8_lossy(&rec.stdout).into_owned()
            + &String::from_utf8_lossy(&rec.stderr);
        assert_eq!(rec.status.code(), Some(0), "{what}: recover\n{text}\n{log}");
        assert!(d.unfinished().is_empty(), "{what}: recover left it\n{text}");
    }
    // No process of the run's own: whatever names the state root is one
    // the kept cluster records.
    let state = State::load(&d.state.path().join(name).join("state.json")).unwrap();
    let recorded = recorded_pids(&state);
    let strays: Vec<String> = processes_naming(d.state.path())
        .into_iter()
        .filter(|p| {
            let pid: i32 = p.split(':').next().unwrap().parse().unwrap();
            !recorded.contains(&pid)
        })
        .collect();
    assert_eq!(
        strays,
        Vec::<String>::new(),
        "{what}: processes left\n{log}"
    );
    every_agent_running(&state, &what);
    rt.block_on(every_node_ready_and_namespace_gone(client, &what));
    eprintln!("{what}: ok in {:.1}s", started.elapsed().as_secs_f64());
}

/// Every node's agent recorded running and really running: a frozen
/// (SIGSTOPped) kwok still looks Ready until the grace period ends.
fn every_agent_running(state: &State, what: &str) {
    for n in &state.nodes {
        let agent = n.agent.as_ref();
        let proc = agent.and_then(|a| cli_run::proc_state(a.pid));
        assert!(
            n.agent_state == nodefall::sim::AgentState::Running
                && proc.is_some_and(|s| s != 'T' && s != 'Z'),
            "{what}: node {} is {} with agent {:?} in state {proc:?}",
            n.name,
            n.agent_state,
            agent.map(|a| a.pid)
        );
    }
}

async fn every_node_ready_and_namespace_gone(client: &kube::Client, what: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let list = nodes.list(&Default::default()).await.unwrap();
        let not_ready: Vec<String> = list
            .items
            .iter()
            .filter(|n| !is_ready(n))
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect();
        let left: Vec<String> = namespaces
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .filter(|n| n.starts_with("signal-") || n == "kep2268")
            .collect();
        if list.items.len() == 3 && not_ready.is_empty() && left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: nodes {} of 3, not Ready: {not_ready:?}; namespaces left: {left:?}",
            list.items.len()
        );
        // Node conditions and namespace finalisation have no event to wait
        // on through this plain list; a short bounded poll.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[test]
fn a_signal_at_every_point_leaves_every_node_ready_and_no_journal_open() {
    let all = std::env::var("NODEFALL_SIGNAL_POINTS").is_ok_and(|v| v == "all");
    let d = Dirs::new();
    let name = "signals";
    let (rt, sim, client) = cluster(d.state.path(), name);
    let started = Instant::now();
    let mut cases = Vec::new();
    for (fault, file) in [
        ("pause", "tests/fixtures/signals/pause.yaml"),
        ("poweroff", "tests/fixtures/signals/poweroff.yaml"),
        ("stop-kubelet", "tests/fixtures/signals/stop-kubelet.yaml"),
        ("drop-nic", "tests/fixtures/signals/drop-nic.yaml"),
    ] {
        cases.extend(fault_cases(fault, file));
    }
    cases.extend(set_cases());
    cases.extend(seed_cases(all));
    // `NODEFALL_SIGNAL_ONLY=pause.yaml@sim:thaw` replays the cases whose
    // `FILE@POINTS` contains it.
    if let Ok(only) = std::env::var("NODEFALL_SIGNAL_ONLY") {
        cases.retain(|c| format!("{}@{}", c.file, c.points).contains(&only));
        assert!(!cases.is_empty(), "no case matches {only}");
    }
    let n = cases.len();
    for (i, c) in cases.iter().enumerate() {
        run_case(&d, name, &client, &rt, i, c);
    }
    eprintln!(
        "{n} signalled runs in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    drop(sim);
}
