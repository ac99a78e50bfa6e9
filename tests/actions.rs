//! Every Kubernetes action against a real control plane (the simulated
//! cluster): apply, wait-ready, taint/untaint, cordon/uncordon, scale,
//! force-delete, delete-node with re-registration, a drain held back by a
//! PodDisruptionBudget, namespace deletion.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use nodefall::actions::{self, Error};
use nodefall::expect::{self, ResolvedSubject};
use nodefall::observe::{Observer, Recorder};
use nodefall::profile::TimingProfile;
use nodefall::scenario::checked::{Condition, Drain, PodsCond, ReadyCheck, WorkloadKind};
use nodefall::scenario::model::TaintEffect;
use nodefall::scenario::selector::Selector;
use nodefall::sim::{SimCluster, UpOptions};

const NS: &str = "actions";

const MANIFEST: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: test}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: actions-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/actions-pv}
  claimRef: {namespace: actions, name: data}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: actions-pv
  resources: {requests: {storage: 1Gi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {pod-ready.stage.kwok.x-k8s.io/delay: "3s"}
    spec:
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
           nodeTaintsPolicy: Honor, labelSelector: {matchLabels: {app: web}}}
      containers: [{name: web, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"#;

fn check(kind: WorkloadKind, name: &str, replicas: Option<u32>) -> ReadyCheck {
    ReadyCheck {
        kind,
        name: name.into(),
        replicas,
        timeout: Duration::from_secs(60),
    }
}

async fn node(client: &kube::Client, name: &str) -> Option<Node> {
    Api::<Node>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap()
}

/// The live pods on `node`: not the ones being deleted (a scale-down
/// victim, an evicted pod), which a controller may remove any moment.
async fn pods_on(client: &kube::Client, node: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Exactly `n` pods exist, all of them Ready and none being deleted: the
/// Deployment has settled, no controller is about to remove one.
fn settled(w: &nodefall::timeline::World, n: usize) -> bool {
    w.pods.len() == n && w.pods.values().all(|p| p.ready && !p.terminating)
}

/// Watches the recorder until `pred` holds.
async fn until(rec: &Recorder, what: &str, pred: impl Fn(&nodefall::timeline::World) -> bool) {
    let mut rx = rec.subscribe();
    let r = tokio::time::timeout(Duration::from_secs(60), async {
        while !pred(&rec.world()) {
            rx.changed().await.unwrap();
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "recorder never saw within 60s: {what}; its world: {:?}",
        rec.world()
    );
}

#[test]
fn every_action_against_the_real_control_plane() {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(actions_flow());
}

async fn actions_flow() {
    let root = tempfile::tempdir().unwrap();
    let mut opts = UpOptions::new("actions", TimingProfile::fast());
    opts.root = root.path().to_owned();
    let mut quiet = |_: &str| {};
    let mut cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    let client = cluster.client().await.unwrap();
    let mut strict_config = cluster.config().await.unwrap();
    strict_config.default_retry = false;
    let strict = kube::Client::try_from(strict_config).unwrap();

    // Namespace and watchers.
    assert!(actions::ensure_namespace(&client, NS).await.unwrap());
    assert!(
        !actions::ensure_namespace(&client, NS).await.unwrap(),
        "exists now"
    );
    let rec = Recorder::new(Instant::now());
    let mut observer = Observer::start(&cluster.config().await.unwrap(), NS, &rec)
        .await
        .unwrap();
    observer.synced().await;

    // apply: five documents, cluster-scoped and namespaced kinds found by discovery.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    std::fs::write(&file, MANIFEST).unwrap();
    let applied = actions::apply_file(&client, &file, NS).await.unwrap();
    assert_eq!(
        applied,
        [
            "ConfigMap/settings",
            "PersistentVolume/actions-pv",
            "PersistentVolumeClaim/data",
            "Deployment/web",
            "PodDisruptionBudget/web"
        ]
    );
    // Applying again is idempotent (server-side apply).
    actions::apply_file(&client, &file, NS).await.unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: NoSuchKind\nmetadata: {name: x}\n",
    )
    .unwrap();
    let err = actions::apply_file(&client, &bad, NS).await.unwrap_err();
    assert!(err.to_string().contains("NoSuchKind"), "{err}");

    // wait-ready for each kind.
    actions::wait_ready(
        &client,
        NS,
        &check(WorkloadKind::Deployment, "web", Some(3)),
    )
    .await
    .unwrap();
    actions::wait_ready(&client, NS, &check(WorkloadKind::Pvc, "data", None))
        .await
        .unwrap();
    actions::wait_ready(&client, NS, &check(WorkloadKind::Pdb, "web", None))
        .await
        .unwrap();
    let short = ReadyCheck {
        timeout: Duration::from_millis(300),
        ..check(WorkloadKind::StatefulSet, "none", None)
    };
    assert!(matches!(
        actions::wait_ready(&client, NS, &short).await,
        Err(Error::Timeout { .. })
    ));
    for n in ["worker-1", "worker-2", "worker-3"] {
        assert_eq!(pods_on(&client, n).await.len(), 1, "one web pod per node");
    }

    // taint / untaint.
    actions::taint(
        &client,
        "worker-3",
        "nodefall.dev/test",
        Some("x"),
        TaintEffect::NoSchedule,
    )
    .await
    .unwrap();
    until(&rec, "taint on worker-3", |w| {
        w.nodes["worker-3"]
            .taints
            .iter()
            .any(|t| t.key == "nodefall.dev/test")
    })
    .await;
    assert!(
        actions::untaint(&client, "worker-3", "nodefall.dev/test", None)
            .await
            .unwrap()
    );
    assert!(
        !actions::untaint(&client, "worker-3", "nodefall.dev/test", None)
            .await
            .unwrap(),
        "already gone"
    );
    assert!(matches!(
        actions::taint(&client, "worker-9", "k", None, TaintEffect::NoExecute).await,
        Err(Error::NoNode(_))
    ));

    // cordon / uncordon.
    actions::set_unschedulable(&client, "worker-3", true)
        .await
        .unwrap();
    assert_eq!(
        node(&client, "worker-3")
            .await
            .unwrap()
            .spec
            .unwrap()
            .unschedulable,
        Some(true)
    );
    actions::set_unschedulable(&client, "worker-3", false)
        .await
        .unwrap();
    assert_ne!(
        node(&client, "worker-3")
            .await
            .unwrap()
            .spec
            .unwrap()
            .unschedulable,
        Some(true)
    );

    // scale up and back.
    actions::scale(&client, NS, WorkloadKind::Deployment, "web", 4)
        .await
        .unwrap();
    actions::wait_ready(
        &client,
        NS,
        &check(WorkloadKind::Deployment, "web", Some(4)),
    )
    .await
    .unwrap();
    actions::scale(&client, NS, WorkloadKind::Deployment, "web", 3)
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    assert_eq!(
        deployments.get("web").await.unwrap().spec.unwrap().replicas,
        Some(3)
    );
    // Not just "3 not Terminating": the scale-down victim must be gone too,
    // or it may be the pod picked below and vanish before it is deleted.
    until(&rec, "3 web pods, the 4th gone", |w| settled(w, 3)).await;

    // force-delete-pods: a pod on a frozen node stays Terminating until forced.
    cluster.freeze_node("worker-3").await.unwrap();
    let stuck = pods_on(&client, "worker-3").await;
    assert_eq!(stuck.len(), 1, "one live web pod on worker-3: {stuck:?}");
    let stuck_name = stuck[0].metadata.name.clone().unwrap();
    let stuck_uid = stuck[0].metadata.uid.clone().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.delete(&stuck_name, &DeleteParams::default())
        .await
        .unwrap();
    until(&rec, "stuck pod Terminating", |w| {
        w.pods.get(&stuck_uid).is_some_and(|p| p.terminating)
    })
    .await;
    let web = Selector::parse("app=web").unwrap();
    let forced = actions::force_delete_pods(&client, NS, Some(&web), Some("worker-3"))
        .await
        .unwrap();
    assert!(forced.contains(&stuck_name), "{forced:?}");
    until(&rec, "stuck pod gone", |w| !w.pods.contains_key(&stuck_uid)).await;

    // delete-node, then the node re-registers when its agent starts again.
    actions::delete_node(&client, "worker-3").await.unwrap();
    until(&rec, "worker-3 deleted", |w| {
        w.nodes.get("worker-3").is_none_or(|n| !n.exists)
    })
    .await;
    cluster.thaw_node("worker-3").await.unwrap();
    until(&rec, "worker-3 back and Ready", |w| {
        w.nodes
            .get("worker-3")
            .is_some_and(|n| n.exists && n.ready.as_deref() == Some("True"))
    })
    .await;
    actions::wait_ready(
        &client,
        NS,
        &check(WorkloadKind::Deployment, "web", Some(3)),
    )
    .await
    .unwrap();

    // drain two nodes at once under the PDB: the second eviction is refused
    // (429) until the first pod's replacement is Ready, then succeeds.
    let drain = Drain {
        nodes: vec![],
        ignore_daemonsets: true,
        delete_emptydir_data: false,
        force: false,
        grace_period: None,
        timeout: Duration::from_secs(60),
        pod_selector: None,
        retry_interval: Duration::from_secs(1),
    };
    // Settled first, so the pods to evict are known and none is replaced
    // meanwhile; where they run depends on when worker-3 came back.
    until(&rec, "3 web pods Ready, none Terminating", |w| {
        settled(w, 3)
    })
    .await;
    let on_drained = rec
        .world()
        .pods
        .values()
        .filter(|p| matches!(p.node.as_deref(), Some("worker-1" | "worker-2")))
        .count();
    assert!(
        on_drained >= 2,
        "the spread puts a web pod on each of worker-1 and worker-2: {:?}",
        rec.world().pods
    );
    let drained_from = rec.now();
    let notes = std::sync::Mutex::new(Vec::new());
    let note = |e: actions::DrainEvent| notes.lock().unwrap().push(e);
    let nodes = ["worker-1".to_owned(), "worker-2".to_owned()];
    let summary = actions::drain(&strict, &nodes, &drain, &note)
        .await
        .unwrap();
    let notes = notes.into_inner().unwrap();
    assert_eq!(summary.evicted.len(), on_drained, "{notes:?}");
    assert!(
        summary.refusals >= 1,
        "the PDB refused at least once: {notes:?}"
    );
    let refused = |e: &actions::DrainEvent| matches!(e, actions::DrainEvent::Refused { .. });
    assert_eq!(
        notes.iter().filter(|e| refused(e)).count(),
        summary.refusals,
        "each refusal reported: {notes:?}"
    );
    assert!(
        notes
            .iter()
            .filter(|e| refused(e))
            .all(|e| e.to_string().starts_with("429 evicting")),
        "{notes:?}"
    );
    for n in &nodes {
        assert!(pods_on(&client, n).await.is_empty(), "{n} drained");
        assert_eq!(
            node(&client, n).await.unwrap().spec.unwrap().unschedulable,
            Some(true),
            "{n} cordoned"
        );
    }
    actions::wait_ready(
        &client,
        NS,
        &check(WorkloadKind::Deployment, "web", Some(3)),
    )
    .await
    .unwrap();
    // The budget held throughout: never fewer than 2 Ready pods.
    let subject = ResolvedSubject::Pods {
        selector: web,
        on: None,
        not_on: None,
    };
    let series = expect::truth_series(
        &rec.transitions(),
        &subject,
        &[Condition::Pods(PodsCond::ReadyAtLeast(2))],
        drained_from,
    );
    assert!(
        series.iter().all(|(_, ok)| *ok),
        "Ready pods fell below 2: {series:?}"
    );

    // A drain that cannot finish in time says so.
    actions::set_unschedulable(&client, "worker-1", false)
        .await
        .unwrap();
    actions::scale(&client, NS, WorkloadKind::Deployment, "web", 1)
        .await
        .unwrap();
    let quick = Drain {
        timeout: Duration::from_millis(1500),
        retry_interval: Duration::from_secs(1),
        ..drain
    };
    let pdb_min = dir.path().join("pdb.yaml");
    std::fs::write(&pdb_min, "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  minAvailable: 1\n  selector: {matchLabels: {app: web}}\n").unwrap();
    actions::apply_file(&client, &pdb_min, NS).await.unwrap();
    until(&rec, "1 web pod", |w| settled(w, 1)).await;
    let only = rec
        .world()
        .pods
        .values()
        .find(|p| !p.terminating)
        .and_then(|p| p.node.clone())
        .unwrap();
    let err = actions::drain(&strict, &[only], &quick, &|_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");

    // delete-namespace waits until it is gone.
    drop(observer);
    actions::delete_namespace(&client, NS, Duration::from_secs(60))
        .await
        .unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    assert!(namespaces.get_opt(NS).await.unwrap().is_none());
    cluster.down().unwrap();
}
