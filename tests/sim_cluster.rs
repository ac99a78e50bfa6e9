//! The simulated cluster on real binaries: bring-up, node faults, tear-down.
//!
//! These tests start real etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler and kwok processes (provisioned into the cache on first
//! use). They run one at a time: timing assertions on a 2-core machine should
//! not compete with another cluster.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::{proc_state, processes_naming};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use nodefall::profile::TimingProfile;
use nodefall::sim::process::{Proc, ProcRecord, is_alive};
use nodefall::sim::{AgentState, SimCluster, State, UpOptions};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn options(root: &std::path::Path, name: &str, nodes: usize) -> UpOptions {
    let mut opts = UpOptions::new(name, TimingProfile::fast());
    opts.root = root.to_owned();
    opts.nodes = nodes;
    opts
}

fn records(state: &State) -> Vec<ProcRecord> {
    state
        .components
        .iter()
        .chain(state.nodes.iter().filter_map(|n| n.agent.as_ref()))
        .cloned()
        .collect()
}

fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

fn ready_status(node: &Node) -> Option<String> {
    ready_condition(node).map(|c| c.status.clone())
}

fn has_unreachable_taints(node: &Node) -> bool {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    ["NoSchedule", "NoExecute"].iter().all(|effect| {
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == *effect)
    })
}

/// Watches one node until `pred` holds; returns the time it took.
async fn wait_node(
    client: &kube::Client,
    name: &str,
    timeout: Duration,
    pred: impl Fn(&Node) -> bool,
) -> Duration {
    let start = Instant::now();
    let api: Api<Node> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    // A broken watch is retried (with backoff) until the timeout, not fatal:
    // the condition is what is under test, not the connection.
    let mut stream = std::pin::pin!(
        watcher(api, config)
            .default_backoff()
            .applied_objects()
            .filter_map(|r| async move { r.ok() })
    );
    let found = tokio::time::timeout(timeout, async {
        while let Some(node) = stream.next().await {
            if pred(&node) {
                return;
            }
        }
    })
    .await;
    assert!(
        found.is_ok(),
        "node {name}: condition not reached within {timeout:?}"
    );
    start.elapsed()
}

async fn wait_pod_ready(client: &kube::Client, name: &str, want: &str, timeout: Duration) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let cond = kube::runtime::wait::await_condition(api, name, |pod: Option<&Pod>| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == want)
    });
    let r = tokio::time::timeout(timeout, cond).await;
    assert!(
        matches!(r, Ok(Ok(_))),
        "pod {name} not Ready={want} within {timeout:?}"
    );
}

/// Checks the time to Unknown + unreachable taints against the profile.
async fn assert_goes_unknown(client: &kube::Client, node: &str, fault: &str) {
    let p = TimingProfile::fast();
    // The controller marks the node once no lease renewal was seen for the
    // grace period; it looks every monitor period. Renewals come every lease/4.
    // The lower bound is exact (load cannot make the controller early); the
    // upper one allows 10 s for a controller slowed by a loaded 2-core
    // machine, still far below the 40 s grace of a default profile.
    let lower = p.node_monitor_grace_period - p.node_lease_duration / 4;
    let upper = p.node_monitor_grace_period + p.node_monitor_period + Duration::from_secs(10);
    let took = wait_node(client, node, upper + Duration::from_secs(20), |n| {
        ready_status(n).as_deref() == Some("Unknown") && has_unreachable_taints(n)
    })
    .await;
    eprintln!("{fault} {node}: Unknown + unreachable taints after {took:?}");
    assert!(
        took >= lower && took <= upper,
        "{fault}: expected Unknown and taints {lower:?}..{upper:?} after the fault, took {took:?}"
    );
}

/// Waits until the node is Ready without the unreachable taints after its
/// agent came back at `back`, and checks Ready's `lastTransitionTime` says
/// when it turned Ready: a kubelet's does (KWOK's stock stages wrote the
/// Node's creation time, so the report showed a "server lag" of minutes).
async fn assert_back_ready(
    client: &kube::Client,
    node: &str,
    fault: &str,
    within: Duration,
    back: jiff::Timestamp,
) {
    let took = wait_node(client, node, within, |n| {
        ready_status(n).as_deref() == Some("True") && !has_unreachable_taints(n)
    })
    .await;
    eprintln!("{fault} {node}: Ready, taints gone after {took:?}");
    let n: Node = Api::all(client.clone()).get(node).await.unwrap();
    let changed = ready_condition(&n)
        .and_then(|c| c.last_transition_time.as_ref())
        .unwrap()
        .0;
    // Whole seconds: up to 1 s before the return it was stamped in.
    assert!(
        changed >= back - jiff::SignedDuration::from_secs(1) && changed <= jiff::Timestamp::now(),
        "{fault} {node}: Ready=True since {changed}, the agent came back at {back}"
    );
}

/// How long a powered-on node boots in [`fail_and_recover`].
const NODE_BOOT: Duration = Duration::from_secs(3);

/// Watches `node` from now until its Ready condition is True again: each
/// Ready status seen (the current one first) with when and its reason.
/// Returns once the current status is seen.
async fn record_readiness(
    nodes: &Api<Node>,
    node: &str,
) -> tokio::task::JoinHandle<Vec<(Instant, String, Option<String>)>> {
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let stream = watcher(nodes.clone(), config).applied_objects();
    let node = node.to_owned();
    let (started, watching) = tokio::sync::oneshot::channel();
    let mut started = Some(started);
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut seen: Vec<(Instant, String, Option<String>)> = Vec::new();
        let deadline = Duration::from_secs(60);
        while let Some(n) = tokio::time::timeout(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("{node} not Ready again within {deadline:?}: {seen:?}"))
        {
            let n = n.unwrap();
            let Some(c) = ready_condition(&n) else {
                continue;
            };
            if seen.last().is_none_or(|(_, s, _)| *s != c.status) {
                seen.push((Instant::now(), c.status.clone(), c.reason.clone()));
            }
            if let Some(tx) = started.take() {
                let _ = tx.send(());
            }
            if c.status == "True" {
                break;
            }
        }
        seen
    });
    tokio::time::timeout(Duration::from_secs(30), watching)
        .await
        .expect("the node's current status within 30 s")
        .expect("the watch ended before the node's current status");
    task
}

fn pinned_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}
    }))
    .unwrap()
}

#[test]
fn three_nodes_fail_and_recover_one_at_a_time() {
    let _serial = serial();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(fail_and_recover(0));
}

/// The same faults with the nodes played by two shared kwok processes
/// (shards): each fault takes one node out of its shard's managed set.
#[test]
fn shared_kwok_nodes_fail_and_recover_one_at_a_time() {
    let _serial = serial();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(fail_and_recover(2));
}

/// A set of shared nodes in one batch (`sim::batch`): both powered off
/// together and on again; a batch that does not fit a node's state is
/// refused before any node is begun.
async fn batch_of_two(cluster: &mut SimCluster, client: &kube::Client) {
    use nodefall::sim::batch::BatchOp;
    let pair = ["worker-1", "worker-2"].map(String::from);
    assert!(cluster.batches(&pair));
    let hits = cluster.batch(&pair, BatchOp::Stop, 16).await;
    let spans: Vec<_> = hits
        .iter()
        .map(|h| {
            let (began, ended, r) = h.done.as_ref().expect("begun");
            assert!(r.is_ok(), "{}: {r:?}", h.node);
            (*began, *ended)
        })
        .collect();
    // Together: each began before the other ended.
    assert!(
        spans[0].0 < spans[1].1 && spans[1].0 < spans[0].1,
        "{spans:?}"
    );
    // Unknown only: two nodes lost together get their NoExecute taints one
    // per 10 s (`--node-eviction-rate`), so the second waits for a token.
    let p = TimingProfile::fast();
    let upper = p.node_monitor_grace_period + p.node_monitor_period + Duration::from_secs(10);
    for node in &pair {
        let took = wait_node(client, node, upper + Duration::from_secs(20), |n| {
            ready_status(n).as_deref() == Some("Unknown")
        })
        .await;
        eprintln!("poweroff (batch) {node}: Unknown after {took:?}");
        assert!(took <= upper, "{node}: Unknown after {took:?}");
        let state = cluster.node_state(node).unwrap().agent_state;
        assert_eq!(state, AgentState::Stopped, "{node}");
    }
    // Thawing nodes that are stopped: refused on the first, none begun.
    let refused = cluster.batch(&pair, BatchOp::Thaw, 16).await;
    assert!(
        matches!(&refused[0].done, Some((_, _, Err(_)))) && refused[1].done.is_none(),
        "{refused:?}"
    );
    let back = jiff::Timestamp::now();
    let hits = cluster.batch(&pair, BatchOp::Boot, 16).await;
    assert!(
        hits.iter().all(|h| matches!(&h.done, Some((_, _, Ok(()))))),
        "{hits:?}"
    );
    for node in &pair {
        assert_back_ready(
            client,
            node,
            "poweron (batch)",
            Duration::from_secs(60),
            back,
        )
        .await;
        let state = cluster.node_state(node).unwrap().agent_state;
        assert_eq!(state, AgentState::Running, "{node}");
    }
}

/// A node proxy request (what `kubectl logs` and the graceful-shutdown
/// preflight's `/configz` make) on a sim fails on this machine: the API
/// server's node traffic goes to a socket nothing listens on, never to the
/// nodes' made-up addresses or through DNS for their names. Asked without
/// kube's default retries, as the preflight asks: they retry a 503 15 times
/// with a doubling backoff, which held this test about 300 s.
async fn node_proxy_stays_here(cluster: &SimCluster) {
    let mut config = cluster.config().await.unwrap();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let req = http::Request::get("/api/v1/nodes/worker-1/proxy/configz")
        .body(Vec::new())
        .unwrap();
    let asked = Instant::now();
    let err = client
        .request_text(req)
        .await
        .expect_err("no kubelet to reach");
    let socket = cluster.dir().join("no-egress.sock");
    assert!(
        err.to_string().contains(&socket.display().to_string()),
        "refused at the egress socket {}: {err}",
        socket.display()
    );
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(10), "refused after {took:?}");
}

async fn fail_and_recover(shards: usize) {
    let root = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut progress = |m: &str| eprintln!("sim: {m}");
    let mut opts = options(root.path(), "faults", 3);
    opts.shards = shards;
    // A kubelet resumed after a pause longer than this reports NotReady
    // first (its own is 3 min; the pause below lasts about 10 s).
    opts.pleg_threshold = Duration::from_secs(2);
    opts.node_boot = NODE_BOOT;
    let mut cluster = SimCluster::up(&opts, &mut progress).await.unwrap();
    let kwoks = records(cluster.state())
        .iter()
        .filter(|r| r.name.starts_with("kwok/"))
        .count();
    assert_eq!(
        kwoks,
        if shards == 0 { 3 } else { shards },
        "kwok processes"
    );
    let up = started.elapsed();
    eprintln!("sim up (3 nodes Ready): {up:?}");
    // About 10 s when idle; the bound catches a hang, not slowness under load.
    assert!(up < Duration::from_secs(120), "sim up took {up:?}");

    let client = cluster.client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&Default::default()).await.unwrap();
    let ready: Vec<_> = list
        .items
        .iter()
        .filter(|n| ready_status(n).as_deref() == Some("True"))
        .collect();
    assert_eq!(ready.len(), 3, "3 nodes Ready after sim up");
    if shards == 0 {
        node_proxy_stays_here(&cluster).await;
    }

    // Two pods on worker-1, Running and Ready as under a kubelet: one with
    // a readiness probe, Ready once it first succeeds.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut probed = pinned_pod("probed", "worker-1");
    probed.spec.as_mut().unwrap().containers[0].readiness_probe = Some(
        serde_json::from_value(serde_json::json!({"httpGet": {"path": "/", "port": 8080}}))
            .unwrap(),
    );
    for pod in [pinned_pod("probe", "worker-1"), probed] {
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    for pod in ["probe", "probed"] {
        wait_pod_ready(&client, pod, "True", Duration::from_secs(60)).await;
    }

    // pause-vm: freeze worker-1's agent.
    cluster.pause_node("worker-1").await.unwrap();
    assert_goes_unknown(&client, "worker-1", "pause-vm").await;
    // Only worker-1: its shard (or neighbours) still play the others.
    for other in ["worker-2", "worker-3"] {
        let n = nodes.get(other).await.unwrap();
        assert_eq!(
            ready_status(&n).as_deref(),
            Some("True"),
            "{other} while worker-1 is frozen"
        );
    }
    // The node lifecycle controller marks its pods not Ready ...
    for pod in ["probe", "probed"] {
        wait_pod_ready(&client, pod, "False", Duration::from_secs(30)).await;
    }
    let readiness = record_readiness(&nodes, "worker-1").await;
    // When each pod is Ready again, watched from before the resume.
    let ready_at = |pod: &'static str| {
        let client = client.clone();
        tokio::spawn(async move {
            wait_pod_ready(&client, pod, "True", Duration::from_secs(60)).await;
            Instant::now()
        })
    };
    let pods_ready = [("probe", ready_at("probe")), ("probed", ready_at("probed"))];
    let back = jiff::Timestamp::now();
    let resumed = Instant::now();
    cluster.thaw_node("worker-1").await.unwrap();
    // Past the PLEG threshold: Ready=False (KubeletNotReady) at once, Ready
    // one status update (1 s) later, as a kubelet resumed from a long pause.
    let seen = readiness.await.unwrap();
    let statuses: Vec<&str> = seen.iter().map(|(_, s, _)| s.as_str()).collect();
    assert_eq!(
        statuses,
        ["Unknown", "False", "True"],
        "worker-1 after resume: {seen:?}"
    );
    assert_eq!(seen[1].2.as_deref(), Some("KubeletNotReady"), "{seen:?}");
    let not_ready_for = seen[2].0 - seen[1].0;
    assert!(
        not_ready_for >= Duration::from_millis(500),
        "Ready=False for only {not_ready_for:?} after a long pause"
    );
    assert_back_ready(
        &client,
        "worker-1",
        "resume-vm",
        Duration::from_secs(60),
        back,
    )
    .await;
    // ... and the returning node reports them Ready again, like a kubelet,
    // a moment after the resume (kind: 2.2-2.7 s), the probed one too (its
    // probe's first success is long past).
    for (pod, ready) in pods_ready {
        let took = ready.await.unwrap() - resumed;
        assert!(
            took >= Duration::from_millis(2200),
            "pod {pod} Ready again {took:?} after the resume"
        );
    }

    // poweroff / poweron: kill worker-2's agent, start a new one.
    cluster.kill_node("worker-2").await.unwrap();
    assert_goes_unknown(&client, "worker-2", "poweroff").await;
    let back = jiff::Timestamp::now();
    let booted = Instant::now();
    cluster.boot_node("worker-2").await.unwrap();
    assert_back_ready(
        &client,
        "worker-2",
        "poweron",
        Duration::from_secs(60),
        back,
    )
    .await;
    // Ready once booted, not as soon as its agent runs.
    let took = booted.elapsed();
    assert!(
        took >= NODE_BOOT - Duration::from_millis(200),
        "poweron: Ready after {took:?}"
    );

    // stop-kubelet / start-kubelet on worker-3.
    // Its Node deleted meanwhile (seed 001's remedy), the agent registers it
    // again as a kubelet does: the Node's first version is NotReady
    // (KubeletNotReady) with the not-ready NoSchedule taint, then Ready.
    cluster.stop_node("worker-3").await.unwrap();
    assert_goes_unknown(&client, "worker-3", "stop-kubelet").await;
    let config = watcher::Config::default().fields("metadata.name=worker-3");
    let mut events = std::pin::pin!(watcher(nodes.clone(), config));
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("a worker-3 event within 30 s")
            .unwrap()
            .unwrap()
    };
    while !matches!(next().await, watcher::Event::InitDone) {}
    nodes.delete("worker-3", &Default::default()).await.unwrap();
    assert!(matches!(next().await, watcher::Event::Delete(_)));
    let back = jiff::Timestamp::now();
    cluster.start_node("worker-3").await.unwrap();
    let watcher::Event::Apply(first) = next().await else {
        panic!("worker-3 not registered again");
    };
    let ready = ready_condition(&first)
        .unwrap_or_else(|| panic!("registered with no Ready condition: {first:?}"));
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("KubeletNotReady")),
        "{first:?}"
    );
    let tainted = first
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == "node.kubernetes.io/not-ready" && t.effect == "NoSchedule")
        });
    assert!(tainted, "registered without the not-ready taint: {first:?}");
    assert_back_ready(
        &client,
        "worker-3",
        "start-kubelet",
        Duration::from_secs(60),
        back,
    )
    .await;

    // Faults that do not fit the agent's state are refused, not ignored.
    assert!(cluster.start_node("worker-3").await.is_err());
    assert!(cluster.freeze_node("worker-9").await.is_err());

    if shards > 0 {
        batch_of_two(&mut cluster, &client).await;
    }

    let rss = cluster.rss_bytes();
    eprintln!("cluster RSS: {} MiB", rss / (1024 * 1024));
    assert!(rss < 1536 * 1024 * 1024, "cluster RSS {rss} bytes");

    let procs = records(cluster.state());
    let dir = cluster.dir().to_owned();
    cluster.down().unwrap();
    for p in &procs {
        assert!(
            !is_alive(p),
            "{} (pid {}) still runs after down",
            p.name,
            p.pid
        );
    }
    assert!(!dir.exists(), "cluster directory removed");
}

#[test]
fn a_failing_test_leaves_no_process_behind() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let opts = options(root.path(), "panics", 1);
    let state_file = root.path().join("panics").join("state.json");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            let mut quiet = |_: &str| {};
            let _cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
            let state = State::load(&state_file).unwrap();
            // Hand the records out through the panic payload.
            std::panic::panic_any(records(&state));
        })
    }));
    let procs = *outcome
        .expect_err("the closure panics")
        .downcast::<Vec<ProcRecord>>()
        .unwrap();
    assert_eq!(
        procs.len(),
        5 + cli_run::helpers(false),
        "etcd, apiserver, kcm, scheduler, one kwok, the CSI attacher: {procs:?}"
    );
    for p in &procs {
        assert!(
            !is_alive(p),
            "{} (pid {}) survived the panic",
            p.name,
            p.pid
        );
    }
    assert!(!state_file.exists());
}

/// Zone a's nodes powered off together and on again; worker-2 (zone b)
/// stays up. A node expectation over the set holds when it holds on each;
/// with `count`, on that many of them (2 of the 3 workers).
const ZONE_DOWN: &str = r#"
name: zone-a-down
namespace: zone-a-down
targets:
  zone-a: {nodes: topology.kubernetes.io/zone=a}
  other: {name: worker-2}
  every: {nodes: topology.kubernetes.io/zone}
steps:
  - fault: poweroff
    node: zone-a
  - expect: {node: zone-a, ready: Unknown, within: grace + monitorPeriod + 10s}
  - expect: {node: every, ready: Unknown, count: 2, holdsFor: 1s}
  - expect: {node: other, ready: "True", holdsFor: 1s}
  - fault: poweron
    node: zone-a
  - expect: {node: zone-a, ready: "True", within: 1m}
cleanup: always
"#;

/// The one run directory under `out`.
fn result_dir(out: &Path) -> PathBuf {
    std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("result.json").exists())
        .expect("a run directory")
}

#[test]
fn cli_up_status_kubeconfig_down() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_nodefall"))
            .args(args)
            .env("NODEFALL_STATE_DIR", root.path())
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    // Takes the cluster down however the test ends.
    let mut guard = CliCluster {
        root: root.path().to_owned(),
        name: "cli".into(),
        seen: Vec::new(),
    };
    // More zones than nodes: refused before anything starts.
    let (code, _, stderr) = run(&[
        "sim", "up", "--name", "cli", "--nodes", "2", "--zones", "a,b,c",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--zones names 3 zones for 2 nodes") && !root.path().join("cli").exists(),
        "{stderr}"
    );
    let (code, stdout, stderr) = run(&[
        "sim", "up", "--name", "cli", "--nodes", "3", "--zones", "a,b",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    guard.state();
    let kubeconfig = stdout.trim().to_owned();
    assert!(kubeconfig.ends_with("cli/kubeconfig"), "{stdout}");
    let state = State::load(&root.path().join("cli/state.json")).unwrap();
    let procs = records(&state);
    assert_eq!(procs.len(), 7 + cli_run::helpers(true), "{procs:?}");
    assert!(
        procs.iter().all(is_alive),
        "cluster keeps running after `sim up` exits"
    );

    let (code, stdout, _) = run(&["sim", "kubeconfig", "--name", "cli"]);
    assert_eq!((code, stdout.trim()), (Some(0), kubeconfig.as_str()));
    let (code, stdout, _) = run(&["sim", "status"]);
    assert_eq!(code, Some(0));
    let all = format!("{n}/{n} running", n = 7 + cli_run::helpers(true));
    assert!(
        stdout.contains(&all) && stdout.contains("worker-2 running (zone b)"),
        "{stdout}"
    );
    // Each node carries its zone's label, as a cloud provider's kubelet sets it.
    let zones = tokio::runtime::Runtime::new().unwrap().block_on(async {
        use kube::ResourceExt as _;
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
        let nodes: Api<Node> = Api::all(kube::Client::try_from(config).unwrap());
        let list = nodes.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .map(|n| {
                let zone = n.labels().get(nodefall::sim::ZONE_LABEL).cloned();
                (n.name_any(), zone.unwrap_or_default())
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(
        zones,
        [
            ("worker-1".into(), "a".into()),
            ("worker-2".into(), "b".into()),
            ("worker-3".into(), "a".into())
        ]
    );

    // Zone a goes dark: a fault on the set of its nodes, named by its label.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zone.yaml");
    std::fs::write(&file, ZONE_DOWN).unwrap();
    let out = dir.path().join("out");
    let (code, stdout, stderr) = run(&[
        "scenario",
        file.to_str().unwrap(),
        "--cluster",
        "cli",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let run_dir = result_dir(&out);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("result.json")).unwrap())
            .unwrap();
    assert_eq!(
        r["sets"]["zone-a"],
        serde_json::json!(["worker-1", "worker-3"])
    );
    for (step, fault) in [(0, "poweroff"), (4, "poweron")] {
        let steps = r["steps"].as_array().unwrap();
        let f = &steps.iter().find(|s| s["index"] == step).unwrap()["fault"];
        assert_eq!(f["fault"], fault, "{f}");
        let hit: Vec<&str> = f["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["node"].as_str().unwrap())
            .collect();
        assert_eq!(hit, ["worker-1", "worker-3"], "{f}");
    }
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(report.contains("2 of 2 nodes hit; spread"), "{report}");

    let (code, _, stderr) = run(&["sim", "up", "--name", "cli"]);
    assert_eq!(code, Some(3));
    assert!(stderr.contains("already running"), "{stderr}");

    let (code, _, stderr) = run(&["sim", "down", "--name", "cli"]);
    assert_eq!(code, Some(0), "{stderr}");
    for p in &procs {
        assert!(
            !is_alive(p),
            "{} (pid {}) still runs after sim down",
            p.name,
            p.pid
        );
    }
    // Gone now: an unknown cluster is bad input.
    let (code, _, stderr) = run(&["sim", "down", "--name", "cli"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("no simulated cluster named `cli`"),
        "{stderr}"
    );
}

/// `shutdown` on a sim whose kubelets have graceful node shutdown on: the
/// preflight reads the settings the sim plays, the node goes NotReady at
/// once, its pods end stopped by the kubelet and are replaced at once, the
/// node goes Unknown once its lease lapses, and powers on again (seed 003 on
/// real kubelets, `scenarios/kind-graceful-shutdown.yaml`, on the sim).
#[test]
fn a_shutdown_is_played_as_a_kubelet_with_graceful_shutdown_plays_it() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut cluster = CliCluster {
        root: root.path().to_owned(),
        name: "gns".into(),
        seen: Vec::new(),
    };
    let (code, _, stderr) = nodefall(
        root.path(),
        &[
            "sim",
            "up",
            "--name",
            "gns",
            "--nodes",
            "3",
            "--shutdown-grace-period",
            "20s",
            "--shutdown-grace-period-critical-pods",
            "5s",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    cluster.state();
    let out_dir = out.path().to_str().unwrap();
    let (code, stdout, stderr) = nodefall(
        root.path(),
        &[
            "scenario",
            "scenarios/kind-graceful-shutdown.yaml",
            "--backend",
            "sim",
            "--cluster",
            "gns",
            "--out",
            out_dir,
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let result = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path().join("result.json"))
        .find(|p| p.exists())
        .expect("a result.json");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(result).unwrap()).unwrap();
    let gns = &r["gracefulShutdown"][0];
    assert_eq!(gns["verdict"]["verdict"], "will-run", "{gns}");
    assert!(
        gns["config"]["source"]
            .as_str()
            .unwrap()
            .contains("--shutdown-grace-period 20s --shutdown-grace-period-critical-pods 5s"),
        "{gns}"
    );
    let node = r["targets"]["target"].as_str().unwrap().to_owned();
    let changes: Vec<&serde_json::Value> = r["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["at"].as_i64() >= r["t0"].as_i64())
        .map(|t| &t["change"])
        .collect();
    let stopped = changes
        .iter()
        .filter(|c| c["type"] == "podDisruptionTarget" && c["reason"] == "TerminationByKubelet")
        .count();
    assert_eq!(
        stopped, 2,
        "pods stopped by the kubelet on {node}: {changes:?}"
    );
    let not_ready = changes
        .iter()
        .position(|c| c["type"] == "nodeReady" && c["reason"] == "KubeletNotReady");
    let unknown = changes
        .iter()
        .position(|c| c["type"] == "nodeReady" && c["status"] == "Unknown");
    assert!(
        matches!((not_ready, unknown), (Some(a), Some(b)) if a < b),
        "NotReady from the kubelet, then Unknown: {changes:?}"
    );
    let (code, _, stderr) = nodefall(root.path(), &["sim", "down", "--name", "gns"]);
    assert_eq!(code, Some(0), "{stderr}");
}

/// A node agent that another invocation started on this cluster (a run with
/// `--cluster`, or `recover`, replacing a frozen agent) stops with the
/// cluster, though the owner never started it.
#[test]
fn agents_started_by_another_invocation_stop_with_the_cluster() {
    let _s = serial();
    let root = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let owner = rt
        .block_on(SimCluster::up(
            &options(root.path(), "shared", 1),
            &mut |_| {},
        ))
        .unwrap();
    let node = owner.state().nodes[0].name.clone();
    let before = records(owner.state());
    // Another invocation: freezes the node and replaces its agent.
    let mut other = SimCluster::open(root.path(), "shared").unwrap();
    rt.block_on(other.freeze_node(&node)).unwrap();
    rt.block_on(other.thaw_node(&node)).unwrap();
    let after = records(other.state());
    drop(other);
    let started: Vec<ProcRecord> = after
        .into_iter()
        .filter(|r| !before.iter().any(|b| b.pid == r.pid))
        .collect();
    assert_eq!(started.len(), 1, "one new agent: {started:?}");
    assert!(is_alive(&started[0]));
    owner.down().unwrap();
    assert!(
        !is_alive(&started[0]),
        "the new agent {started:?} outlived the cluster"
    );
}

/// Runs `nodefall ARGS` with its state under `root`: exit code, stdout, stderr.
fn nodefall(root: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .args(args)
        .env("NODEFALL_STATE_DIR", root)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Polls `cond` every 20 ms (a process that is not our child cannot be
/// waited for) until it holds; false after `timeout`.
fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A cluster a test started with `nodefall sim up`: taken down when the test
/// ends, also when an assertion failed, with every process it was seen
/// running (an agent started by `sim node` included).
struct CliCluster {
    root: PathBuf,
    name: String,
    seen: Vec<ProcRecord>,
}

impl CliCluster {
    /// The state on disk now; its processes are noted for the clean-up.
    fn state(&mut self) -> State {
        let state = State::load(&self.root.join(&self.name).join("state.json")).unwrap();
        for r in records(&state) {
            if !self.seen.contains(&r) {
                self.seen.push(r);
            }
        }
        state
    }

    fn agent(&mut self, node: &str) -> (AgentState, Option<ProcRecord>) {
        let state = self.state();
        let n = state.node(node).unwrap();
        (n.agent_state, n.agent.clone())
    }
}

impl Drop for CliCluster {
    fn drop(&mut self) {
        if let Ok(cluster) = SimCluster::open(&self.root, &self.name) {
            let _ = cluster.down();
        }
        for r in self.seen.drain(..) {
            Proc::adopt(r).kill();
        }
    }
}

/// `nodefall sim node ACTION NODE`, each call a process of its own, drives a
/// cluster another process started: the agents it starts outlive it, its
/// changes are recorded for the next call, `sim status` and `sim down`.
#[test]
fn cli_node_actions_persist_between_processes() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let run = |args: &[&str]| nodefall(root, args);
    let node = |action: &str, node: &str| run(&["sim", "node", action, node, "--name", "nodes"]);
    let (code, _, stderr) = run(&["sim", "up", "--name", "nodes", "--nodes", "2"]);
    assert_eq!(code, Some(0), "{stderr}");
    let mut c = CliCluster {
        root: root.to_owned(),
        name: "nodes".into(),
        seen: Vec::new(),
    };
    let first = records(&c.state());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(async {
        SimCluster::open(root, "nodes")
            .unwrap()
            .client()
            .await
            .unwrap()
    });
    let wait_ready = |status: &'static str| {
        rt.block_on(wait_node(
            &client,
            "worker-1",
            Duration::from_secs(60),
            |n| ready_status(n).as_deref() == Some(status),
        ))
    };

    // freeze: the agent is stopped (T), the node goes Unknown.
    let (_, agent) = c.agent("worker-1");
    let frozen = agent.unwrap();
    let (code, stdout, stderr) = node("freeze", "worker-1");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout.trim(),
        format!("froze worker-1 (kwok pid {}, SIGSTOP)", frozen.pid)
    );
    // SIGSTOP was sent; the threads stop as soon as they are scheduled.
    assert!(
        eventually(Duration::from_secs(5), || proc_state(frozen.pid)
            == Some('T')),
        "kwok pid {} is {:?}, not T (stopped)",
        frozen.pid,
        proc_state(frozen.pid)
    );
    assert_eq!(c.agent("worker-1").0, AgentState::Frozen);
    // Opening the cluster from `sim node` tore nothing down.
    assert!(first.iter().all(is_alive), "{first:?}");
    let took = wait_ready("Unknown");
    eprintln!("sim node freeze: Ready=Unknown after {took:?}");
    let (code, stdout, _) = run(&["sim", "status"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("worker-1 frozen"), "{stdout}");
    let (code, _, stderr) = node("freeze", "worker-1");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("is frozen") && stderr.contains("needs it running"),
        "{stderr}"
    );

    // thaw: a fresh agent that outlives the `sim node` process.
    let (code, stdout, stderr) = node("thaw", "worker-1");
    assert_eq!(code, Some(0), "{stderr}");
    let (state, agent) = c.agent("worker-1");
    let thawed = agent.unwrap();
    assert_eq!(state, AgentState::Running);
    assert_eq!(
        stdout.trim(),
        format!(
            "thawed worker-1 (frozen kwok pid {} killed, new kwok pid {})",
            frozen.pid, thawed.pid
        )
    );
    assert!(!is_alive(&frozen), "the frozen kwok is gone");
    assert!(
        is_alive(&thawed),
        "the new kwok runs after `sim node` exited"
    );
    let took = wait_ready("True");
    eprintln!("sim node thaw: Ready=True after {took:?}");

    // kill: the process is gone at once; the node goes Unknown.
    let (code, stdout, stderr) = node("kill", "worker-1");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout.trim(),
        format!("killed worker-1 (kwok pid {}, SIGKILL)", thawed.pid)
    );
    assert!(!is_alive(&thawed), "kwok pid {} survived kill", thawed.pid);
    assert_eq!(c.agent("worker-1"), (AgentState::Stopped, None));
    wait_ready("Unknown");
    let (code, _, stderr) = node("kill", "worker-1");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("is stopped") && stderr.contains("start fits"),
        "{stderr}"
    );

    // start: a new agent, the node Ready again.
    let (code, stdout, stderr) = node("start", "worker-1");
    assert_eq!(code, Some(0), "{stderr}");
    let started = c.agent("worker-1").1.unwrap();
    assert_eq!(
        stdout.trim(),
        format!("started worker-1 (new kwok pid {})", started.pid)
    );
    assert!(is_alive(&started));
    let took = wait_ready("True");
    eprintln!("sim node start: Ready=True after {took:?}");

    // Bad input: exit 2, nothing changed.
    let (code, _, stderr) = node("freeze", "worker-9");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("node `worker-9` is not in simulated cluster `nodes`")
            && stderr.contains("worker-1, worker-2"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["sim", "node", "stop", "worker-1", "--name", "nope"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("no simulated cluster named `nope`"),
        "{stderr}"
    );
    assert!(is_alive(&started));

    // Two calls at once, on both nodes: each sees what the other recorded
    // (they take turns on the state), so no agent goes unrecorded.
    let both = |action: &str| {
        let spawn = |n: &str| {
            Command::new(env!("CARGO_BIN_EXE_nodefall"))
                .args(["sim", "node", action, n, "--name", "nodes"])
                .env("NODEFALL_STATE_DIR", root)
                .output()
                .unwrap()
        };
        std::thread::scope(|s| {
            let a = s.spawn(|| spawn("worker-1"));
            let b = s.spawn(|| spawn("worker-2"));
            for out in [a.join().unwrap(), b.join().unwrap()] {
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        });
    };
    let before = records(&c.state());
    both("stop");
    assert_eq!(c.agent("worker-1"), (AgentState::Stopped, None));
    assert_eq!(c.agent("worker-2"), (AgentState::Stopped, None));
    for r in before.iter().filter(|r| r.name.starts_with("kwok/")) {
        assert!(!is_alive(r), "{} (pid {}) survived stop", r.name, r.pid);
    }
    both("start");
    for n in ["worker-1", "worker-2"] {
        let (state, agent) = c.agent(n);
        assert_eq!(state, AgentState::Running, "{n}");
        assert!(is_alive(&agent.unwrap()), "{n}: recorded agent runs");
    }

    // down stops every agent, also those `sim node` started.
    let seen = c.seen.clone();
    let (code, _, stderr) = run(&["sim", "down", "--name", "nodes"]);
    assert_eq!(code, Some(0), "{stderr}");
    for p in &seen {
        assert!(
            !is_alive(p),
            "{} (pid {}) still runs after sim down",
            p.name,
            p.pid
        );
    }
    let left = processes_naming(root);
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Issue 31: a failed start keeps its evidence where the error says, and
/// an empty log is called empty.
#[test]
fn a_failed_start_keeps_its_logs_where_the_error_says() {
    let _s = serial();
    let root = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut opts = options(root.path(), "broken", 1);
    opts.extra_apiserver_args = vec!["--no-such-flag=1".into()];
    let mut quiet = |_: &str| {};
    let e = rt
        .block_on(SimCluster::up(&opts, &mut quiet))
        .map(|_| ())
        .unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("kube-apiserver exited"), "{text}");
    let failed = root.path().join(".failed");
    let kept: Vec<PathBuf> = std::fs::read_dir(&failed)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let log = kept[0].join("kube-apiserver.log");
    assert!(
        text.contains(&format!("last lines of {}", log.display())),
        "the error points at the kept log: {text}"
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("no-such-flag"),
        "the kept log holds the cause"
    );
    assert!(
        !root.path().join("broken").exists(),
        "the cluster directory went"
    );
    assert_eq!(processes_naming(root.path()), Vec::<String>::new());
}
