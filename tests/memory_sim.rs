//! The `nodefall scenario` process's memory, kept from growing again
//! (issue 65): a run at 200 nodes and 2,000 pods on a simulated cluster (10
//! nodes paused at once, then resumed), its peak resident memory read phase
//! by phase from the process's own debug lines (`memory: peak RSS ... in
//! ...`, crates/io/src/memory.rs), each held under a ceiling: the figure
//! measured here plus a stated margin. docs/observer-precision.md has the
//! figures and the 1,000-node benchmark (scripts/bench-scale.sh).

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use nodefall::profile::TimingProfile;
use nodefall::sim::{SimCluster, UpOptions};

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::Dirs;

const NODES: usize = 200;
const PODS: usize = 2000;
const FAILED: usize = 10;

/// The whole process's ceiling (its peak over every phase), in MiB: the
/// debug build's peak, 130.0 MiB in two runs and 126.6 MiB in a third
/// beside other tests (2026-12-07), plus 4 MiB (3%). A copy of every transition kept to the end (planted once in
/// the recorder) made it 135.6 MiB. docs/observer-precision.md.
const CEILING_MIB: f64 = 134.0;

fn scenario() -> String {
    let mut s = format!(
        "name: memory\nnamespace: memory\nsetup:\n  apply: pods.yaml\n  \
         waitReady: {{deployment: bench, replicas: {PODS}, timeout: 10m}}\ntargets:\n"
    );
    for i in 1..=FAILED {
        s += &format!(
            "  n{i}: {{name: worker-{}}}\n",
            (i - 1) * (NODES / FAILED) + 1
        );
    }
    s += "steps:\n";
    for i in 1..=FAILED {
        s += &format!("  - {{fault: pause-vm, node: n{i}}}\n");
    }
    s += "  - expect: {node: n1, ready: Unknown, within: grace + monitorPeriod + 30s}\n";
    for i in 1..=FAILED {
        s += &format!("  - {{fault: resume-vm, node: n{i}}}\n");
    }
    s += &format!(
        "  - expect: {{node: n1, ready: \"True\", within: 2m}}\n  \
         - expect: {{pods: app=bench, ready: {PODS}, within: 5m}}\ncleanup: always\n"
    );
    s
}

const PODS_YAML: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: bench}
spec:
  replicas: 2000
  selector: {matchLabels: {app: bench}}
  template:
    metadata: {labels: {app: bench}}
    spec:
      containers: [{name: app, image: registry.k8s.io/pause:3.10}]
";

/// Each `memory: after PHASE: peak RSS N MiB so far, M MiB resident` line:
/// (phase, the peak so far, resident then), in MiB.
fn phases(log: &str) -> Vec<(String, f64, f64)> {
    log.lines()
        .filter_map(|l| {
            let rest = &l[l.find("memory: after ")? + "memory: after ".len()..];
            let (phase, rest) = rest.split_once(": peak RSS ")?;
            let (peak, rest) = rest.split_once(" MiB so far, ")?;
            let resident = rest.strip_suffix(" MiB resident")?;
            Some((phase.to_owned(), peak.parse().ok()?, resident.parse().ok()?))
        })
        .collect()
}

#[test]
#[ignore = "not in CI yet: at this size it slows the sim tier's other tests (issue 65); \
            run it alone with --ignored"]
fn a_run_at_200_nodes_and_2000_pods_stays_under_its_memory_ceiling() {
    let d = Dirs::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut opts = UpOptions::new("memory", TimingProfile::fast());
    opts.root = d.state.path().to_owned();
    opts.nodes = NODES;
    let sim = rt
        .block_on(SimCluster::up(&opts, &mut |m: &str| eprintln!("sim: {m}")))
        .unwrap();
    d.write("pods.yaml", PODS_YAML);
    let file = d.write("memory.yaml", &scenario());
    let out = d
        .command(&[
            "scenario",
            file.to_str().unwrap(),
            "--out",
            d.out.path().to_str().unwrap(),
            "--cluster",
            "memory",
        ])
        .env("RUST_LOG", "info,nodefall_io::memory=debug")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    drop(sim);
    assert_eq!(out.status.code(), Some(0), "{log}");
    let seen = phases(&log);
    for (phase, peak, resident) in &seen {
        eprintln!(
            "memory: peak {peak:>7.1} MiB so far, {resident:>7.1} MiB resident, after {phase}"
        );
    }
    assert_eq!(seen.len(), 3, "three phases logged: {log}");
    let peak = seen.iter().map(|(_, p, _)| *p).fold(0.0, f64::max);
    assert!(
        peak < CEILING_MIB,
        "peak RSS {peak:.1} MiB over the ceiling {CEILING_MIB} MiB: {seen:?}"
    );
}
