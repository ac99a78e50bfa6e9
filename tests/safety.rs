//! Safe on a cluster someone cares about, through the CLI on real control
//! planes: cleanup removes only what the run created and puts back what it
//! changed; SIGINT, SIGTERM and SIGHUP at any phase leave no process and no
//! fault behind and write a partial report; a SIGKILLed run is reverted by
//! `nodefall recover`; a seeded random abort keeps every invariant.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, PersistentVolume};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use nix::sys::signal::Signal;
use nodefall::record::RunVerdict;
use serde_json::json;

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::{DEPLOYMENT, Dirs, cluster, start_scenario};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A short scenario on a throwaway cluster with one phase of each kind.
fn short_scenario(d: &Dirs) -> PathBuf {
    d.write("web.yaml", DEPLOYMENT);
    d.write(
        "short.yaml",
        "name: short\nnamespace: short\nsetup:\n  apply: web.yaml\n  waitReady: {deployment: web, replicas: 2, timeout: 1m}\n\
         target: {mostPods: app=web}\nsteps:\n  - action: {cordon: {node: target}}\n  - fault: pause-vm\n\
         \x20 - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 20s}\n  - action: {wait: {duration: 3s}}\n\
         \x20 - fault: resume-vm\n  - expect: {node: target, ready: \"True\", within: 1m}\ncleanup: always\n",
    )
}

/// After any ending: no process, no cluster, no unfinished journal, one
/// report.
fn assert_nothing_left(d: &Dirs, log: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.orphans().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(d.orphans(), Vec::<String>::new(), "processes left\n{log}");
    let clusters: Vec<_> = std::fs::read_dir(d.state.path()).unwrap().collect();
    assert!(
        clusters.is_empty(),
        "cluster state left: {clusters:?}\n{log}"
    );
    assert_eq!(d.unfinished(), Vec::<PathBuf>::new(), "journal left\n{log}");
    assert_eq!(d.results().len(), 1, "one report\n{log}");
}

/// Sends `sig` once stderr shows `phase`, then checks the run stopped with
/// 128 + signo, reported INTERRUPTED and left nothing.
fn interrupt_at(phase: &str, sig: Signal, code: i32) {
    let d = Dirs::new();
    let file = short_scenario(&d);
    let mut run = start_scenario(&d, &file, &[]);
    run.wait_for(phase, Duration::from_secs(180));
    run.signal(sig);
    let (exit, log) = run.finish(Duration::from_secs(180));
    assert_eq!(exit, Some(code), "{log}");
    assert_nothing_left(&d, &log);
    let r = &d.results()[0];
    assert_eq!(r.verdict, RunVerdict::Interrupted, "{log}");
    assert!(
        r.error
            .as_deref()
            .unwrap_or("")
            .contains(&format!("{sig:?}")),
        "{:?}",
        r.error
    );
}

#[test]
fn sigterm_while_the_cluster_starts() {
    let _s = serial();
    interrupt_at("sim: ", Signal::SIGTERM, 143);
}

#[test]
fn sighup_during_setup() {
    let _s = serial();
    interrupt_at("setup: waiting", Signal::SIGHUP, 129);
}

#[test]
fn sigint_during_the_steps() {
    let _s = serial();
    interrupt_at("#3", Signal::SIGINT, 130);
}

#[test]
fn sigterm_during_the_steps_reverts_the_fault() {
    let _s = serial();
    interrupt_at("#4", Signal::SIGTERM, 143);
}

#[test]
fn sigterm_during_cleanup_finishes_cleanup() {
    let _s = serial();
    interrupt_at("cleanup: ", Signal::SIGTERM, 143);
}

#[test]
fn a_second_signal_abandons_cleanup_and_recover_finishes_it() {
    let _s = serial();
    let d = Dirs::new();
    let file = short_scenario(&d);
    let mut run = start_scenario(&d, &file, &[]);
    run.wait_for("#3", Duration::from_secs(180));
    run.signal(Signal::SIGINT);
    // The first undo (resume-vm: a fresh node agent, then Ready) takes a
    // moment; the second signal lands inside it.
    run.wait_for("stopping: interrupted by SIGINT", Duration::from_secs(30));
    run.signal(Signal::SIGTERM);
    let (exit, log) = run.finish(Duration::from_secs(120));
    assert_eq!(exit, Some(130), "{log}");
    assert!(log.contains("cleanup abandoned: SIGTERM"), "{log}");
    assert!(log.contains("still not reverted:"), "{log}");
    assert_eq!(d.unfinished().len(), 1, "{log}");
    // The throwaway cluster went with its process; recover settles the rest.
    let out = d.command(&["recover"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("journal closed"), "{text}");
    assert_nothing_left(&d, &log);
}

/// xorshift64*: a seeded sequence, so a failing seed can be replayed with
/// NODEFALL_ABORT_SEED.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[test]
fn a_seeded_random_abort_leaves_nothing_behind() {
    let _s = serial();
    let seed: u64 = std::env::var("NODEFALL_ABORT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_121);
    let mut rng = seed | 1;
    for round in 0..3 {
        let d = Dirs::new();
        let file = short_scenario(&d);
        let (sig, code) = [
            (Signal::SIGINT, 130),
            (Signal::SIGTERM, 143),
            (Signal::SIGHUP, 129),
        ][usize::try_from(next(&mut rng) % 3).unwrap()];
        let delay = Duration::from_millis(next(&mut rng) % 25_000);
        eprintln!("seed {seed} round {round}: {sig:?} after {delay:?}");
        let mut run = start_scenario(&d, &file, &[]);
        std::thread::sleep(delay);
        let finished = run.child.try_wait().unwrap().is_some();
        if !finished {
            run.signal(sig);
        }
        let (exit, log) = run.finish(Duration::from_secs(240));
        // It either ran to the end before the signal (0) or stopped with it.
        assert!(
            exit == Some(code) || exit == Some(0),
            "seed {seed} round {round}: exit {exit:?}\n{log}"
        );
        assert_nothing_left(&d, &log);
    }
}

async fn node(client: &kube::Client, name: &str) -> Node {
    Api::<Node>::all(client.clone()).get(name).await.unwrap()
}

fn taint_of(n: &Node, key: &str) -> Option<Option<String>> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .and_then(|t| t.iter().find(|t| t.key == key))
        .map(|t| t.value.clone())
}

fn cordoned(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

#[test]
fn a_namespace_that_existed_keeps_its_objects_and_nodes_keep_their_marks() {
    let _s = serial();
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "safety");
    // What the cluster held before: a namespace with data, a cordoned node
    // with a taint of its own.
    rt.block_on(async {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "precious"}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "data"}, "data": {"k": "v"}}))
                .unwrap();
        Api::<ConfigMap>::namespaced(client.clone(), "precious")
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
        let patch = json!({"spec": {"unschedulable": true, "taints": [
            {"key": "example.com/keep", "value": "yes", "effect": "NoSchedule"}]}});
        Api::<Node>::all(client.clone())
            .patch("worker-1", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    });
    d.write(
        "objects.yaml",
        &format!(
            "{DEPLOYMENT}---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: nodefall-safety-pv}}\n\
             spec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  hostPath: {{path: /tmp/nodefall-safety}}\n"
        ),
    );
    // Applying an object that exists already is refused before anything.
    d.write(
        "data.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: data}\ndata: {k: changed}\n",
    );
    let clash = d.write(
        "clash.yaml",
        "name: clash\nnamespace: precious\nsetup: {apply: data.yaml}\ntarget: {name: worker-1}\n\
         steps:\n  - fault: pause-vm\n  - expect: {node: target, ready: Unknown, within: grace + 20s}\n",
    );
    // A scenario run on the cluster: its exit code and what it said.
    let run = |file: &std::path::Path| {
        let out = d
            .command(&[
                "scenario",
                file.to_str().unwrap(),
                "--cluster",
                "safety",
                "--out",
            ])
            .arg(d.out.path())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A scenario refused before anything: exit 2; what it said.
    let refused = |file: &std::path::Path| {
        let (code, err) = run(file);
        assert_eq!(code, Some(2), "{err}");
        err
    };
    let err = refused(&clash);
    assert!(
        err.contains("already exist: ConfigMap precious/data"),
        "{err}"
    );
    // A volume of a CSI driver no node has registered could never mount: refused
    // before anything, naming the volume and where nodefall's driver comes
    // from (the sim's nodes list that one).
    d.write(
        "csi.yaml",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: nodefall-safety-csi}\nspec:\n  \
         capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  \
         csi: {driver: csi.example.com, volumeHandle: v}\n",
    );
    let no_driver = d.write(
        "no-driver.yaml",
        "name: no-driver\nnamespace: fresh\nsetup: {apply: csi.yaml}\ntarget: {name: worker-1}\n\
         steps:\n  - fault: pause-vm\n  - expect: {node: target, ready: Unknown, within: grace + 20s}\n",
    );
    let err = refused(&no_driver);
    assert!(
        err.contains("PersistentVolume nodefall-safety-csi (from ")
            && err.contains("use the CSI driver csi.example.com, which this cluster does not have")
            && err.contains("comes with `nodefall kind up`"),
        "{err}"
    );
    let file = d.write(
        "keep.yaml",
        "name: keep\nnamespace: precious\nsetup:\n  apply: objects.yaml\n  waitReady: {deployment: web, replicas: 2, timeout: 1m}\n\
         target: {name: worker-1}\nsteps:\n  - action: {uncordon: {node: target}}\n\
         \x20 - action: {taint: {node: target, key: example.com/keep, value: changed, effect: NoSchedule}}\n\
         \x20 - action: {taint: {node: target, key: example.com/run, effect: NoSchedule}}\n\
         \x20 - fault: pause-vm\n  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 20s}\n\
         \x20 - fault: resume-vm\n  - expect: {node: target, ready: \"True\", within: 1m}\ncleanup: always\n",
    );
    let (code, err) = run(&file);
    assert_eq!(code, Some(0), "{err}");
    rt.block_on(async {
        let cm = Api::<ConfigMap>::namespaced(client.clone(), "precious")
            .get("data")
            .await
            .unwrap();
        assert_eq!(cm.data.unwrap()["k"], "v", "{err}");
        let deploy = Api::<Deployment>::namespaced(client.clone(), "precious");
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(deploy, "web", |o: Option<&Deployment>| o.is_none()),
        )
        .await
        .unwrap()
        .unwrap();
        let pv = Api::<PersistentVolume>::all(client.clone())
            .get_opt("nodefall-safety-pv")
            .await
            .unwrap();
        assert!(
            pv.is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
            "the applied PersistentVolume is deleted\n{err}"
        );
        let n = node(&client, "worker-1").await;
        assert!(cordoned(&n), "a node cordoned before stays cordoned\n{err}");
        assert_eq!(
            taint_of(&n, "example.com/keep"),
            Some(Some("yes".into())),
            "{err}"
        );
        assert_eq!(taint_of(&n, "example.com/run"), None, "{err}");
    });
    assert_eq!(d.unfinished(), Vec::<PathBuf>::new());
    drop(sim);
}

#[test]
fn sigkill_then_recover_restores_the_node_its_taints_and_cordon() {
    let _s = serial();
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "killed");
    d.write("web.yaml", DEPLOYMENT);
    let file = d.write(
        "long.yaml",
        "name: long\nnamespace: killed\nsetup:\n  apply: web.yaml\n  waitReady: {deployment: web, replicas: 2, timeout: 1m}\n\
         target: {name: worker-2}\nsteps:\n  - action: {cordon: {node: target}}\n\
         \x20 - action: {taint: {node: target, key: example.com/chaos, value: \"on\", effect: NoSchedule}}\n\
         \x20 - fault: pause-vm\n  - action: {wait: {duration: 10m}}\n  - fault: resume-vm\ncleanup: always\n",
    );
    let mut run = start_scenario(&d, &file, &["--cluster", "killed"]);
    run.wait_for("#4", Duration::from_secs(120));
    run.signal(Signal::SIGKILL);
    let (exit, log) = run.finish(Duration::from_secs(30));
    assert_eq!(exit, None, "killed\n{log}");
    assert_eq!(d.unfinished().len(), 1, "{log}");
    // A new run warns about it.
    let warn = d
        .command(&["scenario", file.to_str().unwrap(), "--cluster", "nope"])
        .output()
        .unwrap();
    let warn = String::from_utf8_lossy(&warn.stderr).into_owned();
    assert!(warn.contains("1 earlier run(s) were killed"), "{warn}");
    assert!(warn.contains("resume-vm worker-2"), "{warn}");
    let out = d.command(&["recover"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    // The revert says what it found: the agent frozen, replaced.
    assert!(
        text.lines()
            .any(|l| l.contains("resume-vm worker-2 (found it frozen")
                && l.contains("started a new kwok)")
                && l.ends_with(": ok")),
        "{text}"
    );
    for did in [
        "untaint worker-2 example.com/chaos:NoSchedule: ok",
        "uncordon worker-2: ok",
        "delete namespace killed: ok",
    ] {
        assert!(text.contains(did), "{did}\n{text}");
    }
    assert_eq!(d.unfinished(), Vec::<PathBuf>::new(), "{text}");
    rt.block_on(async {
        let nodes = Api::<Node>::all(client.clone());
        tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(nodes, "worker-2", |n: Option<&Node>| {
                n.is_some_and(nodefall::sim::is_ready)
            }),
        )
        .await
        .unwrap()
        .unwrap();
        let n = node(&client, "worker-2").await;
        assert!(!cordoned(&n), "{text}");
        assert_eq!(taint_of(&n, "example.com/chaos"), None, "{text}");
        let ns = Api::<Namespace>::all(client.clone())
            .get_opt("killed")
            .await
            .unwrap();
        assert!(ns.is_none(), "{text}");
    });
    // Nothing left to recover.
    let again = d.command(&["recover"]).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to recover"));
    drop(sim);
}
