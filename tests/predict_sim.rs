//! `nodefall predict` on a sim running a Deployment of four behind a budget
//! that allows no disruption and a one-replica StatefulSet, each behind a
//! Service. The node holding the StatefulSet's pod ranks first (its Service
//! left with no endpoint, its pod stuck); a drain of a node with web pods is
//! refused by the budget. Read-only, proven: the API server records every
//! request (an audit policy of the test's own), predict runs as a
//! ServiceAccount whose role has only get, list and watch, and every request
//! it made is a get or a list.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use nodefall::actions;
use nodefall::profile::TimingProfile;
use nodefall::sim::{SimCluster, UpOptions};
use serde_json::{Value, json};

#[path = "support/predict.rs"]
mod support;
use support::{AUDIT_ALL, only_read, predict, reader_kubeconfig, reader_objects, scenario_on};

const NS: &str = "shop";
const LIMIT: Duration = Duration::from_secs(120);
const READER: &str = "system:serviceaccount:shop:reader";
fn objects(min_available: u32) -> Vec<Value> {
    let template = |app: &str| {
        json!({"metadata": {"labels": {"app": app}},
               "spec": {"containers": [{"name": app, "image": "registry.invalid/app:1"}]}})
    };
    let service = |app: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": app},
               "spec": {"selector": {"app": app}, "ports": [{"port": 80}]}})
    };
    let mut objects = vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                        "template": template("web")}}),
        service("web"),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
               "spec": {"replicas": 1, "serviceName": "db",
                        "selector": {"matchLabels": {"app": "db"}}, "template": template("db")}}),
        service("db"),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "web"},
               "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}}),
    ];
    objects.extend(reader_objects(NS, "reader"));
    objects
}

/// Watches until `web` pods of web and db's one are Ready and both Services
/// list them as ready endpoints; returns each pod's node.
async fn settled(client: &kube::Client, web: usize) -> BTreeMap<String, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut stream = std::pin::pin!(
        watcher(pods, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    let mut ready: BTreeMap<String, String> = BTreeMap::new();
    let r = tokio::time::timeout(LIMIT, async {
        while ready.keys().filter(|p| p.starts_with("web-")).count() != web
            || !ready.contains_key("db-0")
        {
            let Some(Ok(pod)) = stream.next().await else {
                continue;
            };
            let ok = pod.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            });
            let name = pod.metadata.name.clone().unwrap();
            let going = pod.metadata.deletion_timestamp.is_some();
            match pod.spec.and_then(|s| s.node_name) {
                Some(node) if ok && !going => ready.insert(name, node),
                _ => ready.remove(&name),
            };
        }
    })
    .await;
    assert!(r.is_ok(), "pods not Ready within {LIMIT:?}: {ready:?}");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let mut stream = std::pin::pin!(
        watcher(slices, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    let mut endpoints: BTreeMap<String, usize> = BTreeMap::new();
    let r = tokio::time::timeout(LIMIT, async {
        while endpoints.get("web") != Some(&web) || endpoints.get("db") != Some(&1) {
            let Some(Ok(s)) = stream.next().await else {
                continue;
            };
            let service =
                s.metadata.labels.unwrap_or_default()["kubernetes.io/service-name"].clone();
            let n = s
                .endpoints
                .iter()
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
                .count();
            endpoints.insert(service, n);
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "endpoints not ready within {LIMIT:?}: {endpoints:?}"
    );
    ready
}

#[test]
fn predict_ranks_the_nodes_and_only_reads() {
    tokio::runtime::Runtime::new().unwrap().block_on(flow());
}

async fn flow() {
    let root = tempfile::tempdir().unwrap();
    let policy = root.path().join("audit-all.yaml");
    std::fs::write(&policy, AUDIT_ALL).unwrap();
    let mut opts = UpOptions::new("predict", TimingProfile::fast());
    opts.root = root.path().join("sim");
    opts.nodes = 3;
    opts.extra_apiserver_args = vec![format!("--audit-policy-file={}", policy.display())];
    let mut quiet = |_: &str| {};
    let cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    let client = cluster.client().await.unwrap();
    actions::ensure_namespace(&client, NS).await.unwrap();
    let manifest = root.path().join("shop.yaml");
    let docs: Vec<String> = objects(4)
        .iter()
        .map(|o| serde_yaml_ng::to_string(o).unwrap())
        .collect();
    std::fs::write(&manifest, docs.join("---\n")).unwrap();
    actions::apply_file(&client, &manifest, NS).await.unwrap();
    let nodes = settled(&client, 4).await;
    let db_node = nodes["db-0"].clone();
    let web_nodes: BTreeSet<&String> = nodes
        .iter()
        .filter(|(p, _)| p.starts_with("web-"))
        .map(|(_, n)| n)
        .collect();

    let kubeconfig = root.path().join("reader.kubeconfig");
    reader_kubeconfig(&client, &cluster, NS, "reader", &kubeconfig).await;

    let out = tempfile::tempdir().unwrap();
    let p = predict(&kubeconfig, out.path(), &[]);
    let ranked = p["forecast"]["nodes"].as_array().unwrap();
    assert_eq!(ranked.len(), 3, "{p:#}");
    assert_eq!(
        ranked[0]["node"],
        db_node.as_str(),
        "the StatefulSet's node first: {p:#}"
    );
    assert_eq!(ranked[0]["cost"]["stuck"], 1, "{p:#}");
    assert!(
        ranked[0]["cost"]["servicesDown"].as_u64().unwrap() >= 1,
        "{p:#}"
    );
    for n in &ranked[1..] {
        assert_eq!(n["cost"]["stuck"], 0, "{n:#}");
    }
    // the sim's fast timings, discovered: Unknown between grace - lease/4
    // and grace + monitorPeriod
    let fast = TimingProfile::fast();
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap();
    let unknown = &ranked[0]["timeline"][0]["at"];
    assert_eq!(
        (unknown["from"].as_i64(), unknown["to"].as_i64()),
        (
            Some(ms(fast.node_monitor_grace_period) - ms(fast.node_lease_duration) / 4),
            Some(ms(fast.node_monitor_grace_period) + ms(fast.node_monitor_period))
        ),
        "{p:#}"
    );

    let out = tempfile::tempdir().unwrap();
    let drain = predict(&kubeconfig, out.path(), &["--fault", "drain"]);
    for n in drain["forecast"]["nodes"].as_array().unwrap() {
        let refused = n["refusals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["budget"] == "shop/web");
        let has_web = web_nodes.contains(&n["node"].as_str().unwrap().to_owned());
        assert_eq!(refused, has_web, "the budget refuses a drain of {n:#}");
    }

    // read-only: every request the reader made was a get, a list or a watch
    only_read(
        &cluster,
        READER,
        &[
            "nodes",
            "pods",
            "endpointslices",
            "poddisruptionbudgets",
            "volumeattachments",
            "persistentvolumes",
        ],
    );

    // The prediction for the StatefulSet's node, written as a scenario and
    // run on the same cluster, holds.
    let state = root.path().join("sim");
    let file = root.path().join("db-node.yaml");
    let out = tempfile::tempdir().unwrap();
    predict(
        &kubeconfig,
        out.path(),
        &[&db_node, "--write-scenario", file.to_str().unwrap()],
    );
    let (code, said) = scenario(&state, &file);
    assert_eq!(code, Some(0), "the prediction failed:\n{said}");

    // A replica added after the prediction: the written scenario fails, and
    // says which expectation.
    let (file, text) = web_node_written(&client, &kubeconfig, root.path(), 4, "web-node").await;
    assert!(text.contains("notOn: target, ready: 4"), "{text}");
    actions::scale(
        &client,
        NS,
        nodefall::scenario::checked::WorkloadKind::Deployment,
        "web",
        5,
    )
    .await
    .unwrap();
    settled(&client, 5).await;
    let (code, said) = scenario(&state, &file);
    assert_eq!(code, Some(1), "a stale prediction must fail:\n{said}");
    assert!(
        said.lines()
            .any(|l| l.contains("runs its 4 replicas, no more") && l.contains("FAIL")),
        "the replica count is what failed:\n{said}"
    );

    // A toleration edited after the prediction: the web pods now tolerate
    // the unreachable taint for 2 s, where the scenario says the 20 s read
    // then; it fails on the eviction. (The run before moved web_node's pods
    // away, and nothing moves back: a node holding web pods now.)
    let (file, text) =
        web_node_written(&client, &kubeconfig, root.path(), 5, "web-node-toleration").await;
    assert!(
        text.contains("evicted after its tolerationSeconds 20"),
        "{text}"
    );
    let patch = json!({"spec": {"template": {"spec": {"tolerations": [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "effect": "NoExecute", "tolerationSeconds": 2}]}}}});
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), NS)
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    rolled_out(&client, 5, 2).await;
    let (code, said) = scenario(&state, &file);
    assert_eq!(code, Some(1), "a stale prediction must fail:\n{said}");
    assert!(
        said.lines()
            .any(|l| l.contains("(evicted-1): FAIL") && l.contains("before the window opened")),
        "the eviction is what failed:\n{said}"
    );
    drop(cluster);
}

/// Once `web` web pods are settled, writes the prediction for a node running
/// some of them (not the db's) as `DIR/NAME.yaml`: its path and text.
async fn web_node_written(
    client: &kube::Client,
    kubeconfig: &Path,
    dir: &Path,
    web: usize,
    name: &str,
) -> (std::path::PathBuf, String) {
    let nodes = settled(client, web).await;
    let web_node = nodes
        .iter()
        .find(|(p, n)| p.starts_with("web-") && **n != nodes["db-0"])
        .map(|(_, n)| n.clone())
        .unwrap_or_else(|| panic!("no web pod off the db node: {nodes:?}"));
    let file = dir.join(format!("{name}.yaml"));
    let out = tempfile::tempdir().unwrap();
    predict(
        kubeconfig,
        out.path(),
        &[
            &web_node,
            "--write-scenario",
            file.to_str().unwrap(),
            "--namespace",
            NS,
        ],
    );
    let text = std::fs::read_to_string(&file).unwrap();
    (file, text)
}

/// Watches until exactly `web` web pods exist, each Ready and tolerating
/// the unreachable taint for `seconds`.
async fn rolled_out(client: &kube::Client, web: usize, seconds: i64) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let config = watcher::Config::default().labels("app=web");
    let mut stream = std::pin::pin!(watcher(pods, config).default_backoff());
    let mut state: BTreeMap<String, bool> = BTreeMap::new();
    let r = tokio::time::timeout(LIMIT, async {
        loop {
            let Some(Ok(event)) = stream.next().await else {
                continue;
            };
            let seen = |pod: Pod| {
                let name = pod.metadata.name.clone().unwrap();
                let done = pod.metadata.deletion_timestamp.is_none()
                    && pod.spec.as_ref().is_some_and(|s| {
                        s.tolerations.iter().flatten().any(|t| {
                            t.key.as_deref() == Some("node.kubernetes.io/unreachable")
                                && t.toleration_seconds == Some(seconds)
                        })
                    })
                    && pod.status.as_ref().is_some_and(|s| {
                        s.conditions
                            .iter()
                            .flatten()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                    });
                (name, done)
            };
            match event {
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                    let (name, done) = seen(pod);
                    state.insert(name, done);
                }
                watcher::Event::Delete(pod) => {
                    state.remove(&pod.metadata.name.unwrap());
                }
                watcher::Event::Init => state.clear(),
                watcher::Event::InitDone => {}
            }
            if state.len() == web && state.values().all(|d| *d) {
                return;
            }
        }
    })
    .await;
    assert!(r.is_ok(), "web not rolled out within {LIMIT:?}: {state:?}");
}

/// The other courses a prediction can take, each written and run on the
/// cluster it was made on: a graceful node shutdown the sim plays (the
/// kubelet stops the pods and their owners replace them at once, the
/// StatefulSet's too), and a drain a budget slows (one web pod at a time).
#[test]
fn written_shutdown_and_drain_predictions_hold() {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(other_courses());
}

async fn other_courses() {
    let root = tempfile::tempdir().unwrap();
    let mut opts = UpOptions::new("courses", TimingProfile::fast());
    opts.root = root.path().join("sim");
    opts.nodes = 3;
    opts.shutdown_grace = nodefall::sim::kubelet::ShutdownGrace {
        all: Duration::from_secs(6),
        critical: Duration::from_secs(2),
    };
    let mut quiet = |_: &str| {};
    let cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    let client = cluster.client().await.unwrap();
    actions::ensure_namespace(&client, NS).await.unwrap();
    let manifest = root.path().join("shop.yaml");
    let docs: Vec<String> = objects(3)
        .iter()
        .take(5)
        .map(|o| serde_yaml_ng::to_string(o).unwrap())
        .collect();
    std::fs::write(&manifest, docs.join("---\n")).unwrap();
    actions::apply_file(&client, &manifest, NS).await.unwrap();
    let state = root.path().join("sim");
    let predict_on = |node: &str, fault: &str, file: &Path| {
        let out = tempfile::tempdir().unwrap();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_nodefall"))
            .args(["predict", node, "--cluster", "courses", "--fault", fault])
            .arg("--write-scenario")
            .arg(file)
            .arg("--out")
            .arg(out.path())
            .env("NODEFALL_STATE_DIR", &state)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(0), "{said}");
        std::fs::read_to_string(file).unwrap()
    };

    // A shutdown of the StatefulSet's node, as the sim's kubelet plays it.
    let nodes = settled(&client, 4).await;
    let file = root.path().join("shutdown.yaml");
    let text = predict_on(&nodes["db-0"], "shutdown", &file);
    for line in [
        "expect: {node: target, gracefulShutdown: will-run}",
        "expect: {pods: \"app=db\", on: target, ready: 0, within: 9s, since: fault}",
        "expect: {pods: \"app=db\", notOn: target, readyAtLeast: 1, within: 1m",
    ] {
        assert!(text.contains(line), "{line}\nin\n{text}");
    }
    let (code, said) = scenario_on(&state, "courses", &file);
    assert_eq!(code, Some(0), "the shutdown's prediction failed:\n{said}");

    // A drain of a node running web pods, which the budget (one
    // disruption) lets go one at a time.
    let nodes = settled(&client, 4).await;
    let mut per_node: BTreeMap<&String, usize> = BTreeMap::new();
    for (p, n) in &nodes {
        if p.starts_with("web-") {
            *per_node.entry(n).or_default() += 1;
        }
    }
    let (busiest, web_here) = per_node.iter().max_by_key(|(_, c)| **c).unwrap();
    let file = root.path().join("drain.yaml");
    let text = predict_on(busiest, "drain", &file);
    assert!(
        text.contains("action: {drain: {nodes: [target], ignoreDaemonsets: true, timeout: 3m}}"),
        "{text}"
    );
    assert_eq!(
        text.contains("expect: {pods: \"app=web\", readyAtLeast: 3, holdsFor: 30s, since: drain}"),
        *web_here > 1,
        "the budget's floor is checked where it refuses ({web_here} web pods here):\n{text}"
    );
    let (code, said) = scenario_on(&state, "courses", &file);
    assert_eq!(code, Some(0), "the drain's prediction failed:\n{said}");
    drop(cluster);
}

/// Runs a scenario on the test's sim cluster; its exit code and output.
fn scenario(state: &Path, file: &Path) -> (Option<i32>, String) {
    scenario_on(state, "predict", file)
}
