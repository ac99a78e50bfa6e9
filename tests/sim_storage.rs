//! The sim's stand-in for kind's default storage (`crates/sim/src/sim/provisioner.rs`)
//! against a real control plane: a StatefulSet whose claims name no class
//! gets volumes from the default class `standard`, each pinned to the node
//! its pod was scheduled on, bound by the controller manager's PV controller;
//! once the claims are deleted, the provisioner deletes the volumes.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use nodefall::actions;
use nodefall::profile::TimingProfile;
use nodefall::sim::provisioner::{self, Provisioner};
use nodefall::sim::{SimCluster, UpOptions};
use serde_json::json;

const NS: &str = "storage";
const LIMIT: Duration = Duration::from_secs(90);

fn stateful_set() -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "serviceName": "web",
            "replicas": 2,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    // One pod per node, so both nodes get a volume.
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}},
                         "topologyKey": "kubernetes.io/hostname"}
                    ]}},
                    "containers": [{
                        "name": "web",
                        "image": "registry.invalid/web:1",
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]
                    }]
                }
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "100Mi"}}
                }
            }]
        }
    }))
    .unwrap()
}

fn running_and_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Watches the StatefulSet's pods until both are Running and Ready; returns
/// each pod's node.
async fn pods_ready(client: &kube::Client) -> BTreeMap<String, String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut stream = std::pin::pin!(
        watcher(api, watcher::Config::default().labels("app=web"))
            .default_backoff()
            .applied_objects()
    );
    let mut ready = BTreeMap::new();
    let r = tokio::time::timeout(LIMIT, async {
        while ready.len() < 2 {
            let Some(Ok(pod)) = stream.next().await else {
                continue;
            };
            let name = pod.metadata.name.clone().unwrap();
            match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                Some(node) if running_and_ready(&pod) => ready.insert(name, node),
                _ => ready.remove(&name),
            };
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "pods not Running and Ready within {LIMIT:?}: {ready:?}"
    );
    ready
}

fn pinned_to(pv: &PersistentVolume) -> Vec<String> {
    let terms = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    terms
        .iter()
        .flat_map(|t| t.match_expressions.clone().unwrap_or_default())
        .filter(|e| e.key == "kubernetes.io/hostname" && e.operator == "In")
        .flat_map(|e| e.values.unwrap_or_default())
        .collect()
}

#[test]
fn a_statefulset_without_a_class_gets_pinned_local_volumes() {
    tokio::runtime::Runtime::new().unwrap().block_on(flow());
}

async fn flow() {
    let root = tempfile::tempdir().unwrap();
    let mut opts = UpOptions::new("storage", TimingProfile::fast());
    opts.root = root.path().to_owned();
    opts.nodes = 2;
    let mut quiet = |_: &str| {};
    let cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    let client = cluster.client().await.unwrap();

    provisioner::ensure_class(&client).await.unwrap();
    // A second call leaves the class as it is.
    provisioner::ensure_class(&client).await.unwrap();
    let _provisioner = Provisioner::spawn(client.clone());

    actions::ensure_namespace(&client, NS).await.unwrap();
    Api::<StatefulSet>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &stateful_set())
        .await
        .unwrap();
    let nodes = pods_ready(&client).await;
    let distinct: BTreeSet<&String> = nodes.values().collect();
    assert_eq!(distinct.len(), 2, "one pod per node: {nodes:?}");

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let mut made = Vec::new();
    for (pod, node) in &nodes {
        let claim = claims.get(&format!("data-{pod}")).await.unwrap();
        let phase = claim.status.as_ref().and_then(|s| s.phase.clone());
        assert_eq!(phase.as_deref(), Some("Bound"), "claim of {pod}: {claim:?}");
        let spec = claim.spec.unwrap();
        assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
        let pv = pvs.get(&spec.volume_name.unwrap()).await.unwrap();
        let uid = claim.metadata.uid.unwrap();
        assert_eq!(pv.metadata.name.as_deref(), Some(&*format!("pvc-{uid}")));
        let pv_spec = pv.spec.as_ref().unwrap();
        assert_eq!(pv_spec.storage_class_name.as_deref(), Some("standard"));
        assert_eq!(
            pinned_to(&pv),
            std::slice::from_ref(node),
            "volume of {pod}: {pv:?}"
        );
        let claim_ref = pv_spec.claim_ref.as_ref().unwrap();
        assert_eq!(claim_ref.uid.as_deref(), Some(&*uid));
        made.push(pv.metadata.name.clone().unwrap());
    }

    // Delete the StatefulSet, then its claims: they go once their pods have
    // gone, their volumes turn Released, and the provisioner deletes them.
    let volumes = watcher(pvs.clone(), watcher::Config::default());
    let mut volumes = std::pin::pin!(volumes.default_backoff());
    Api::<StatefulSet>::namespaced(client.clone(), NS)
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    for pod in nodes.keys() {
        claims
            .delete(&format!("data-{pod}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    let mut left: BTreeSet<String> = made.iter().cloned().collect();
    let r = tokio::time::timeout(LIMIT, async {
        while !left.is_empty() {
            match volumes.next().await {
                Some(Ok(watcher::Event::Delete(pv))) => {
                    left.remove(pv.metadata.name.as_deref().unwrap_or_default());
                }
                // A relist: whatever it does not show is gone.
                Some(Ok(watcher::Event::InitDone)) => {
                    let now = pvs.list(&ListParams::default()).await.unwrap();
                    let names: BTreeSet<String> = now
                        .items
                        .into_iter()
                        .filter_map(|p| p.metadata.name)
                        .collect();
                    left.retain(|n| names.contains(n));
                }
                _ => {}
            }
        }
    })
    .await;
    let still = pvs.list(&ListParams::default()).await.unwrap();
    assert!(
        r.is_ok(),
        "volumes not deleted within {LIMIT:?}: {left:?}; volumes now: {:?}",
        still
            .items
            .iter()
            .map(|p| (
                &p.metadata.name,
                p.status.as_ref().and_then(|s| s.phase.clone())
            ))
            .collect::<Vec<_>>()
    );
    drop(cluster);
}
