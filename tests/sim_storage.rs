//! The sim's stand-in for kind's default storage (`crates/sim/src/sim/provisioner.rs`)
//! against a real control plane: a StatefulSet whose claims name no class
//! gets volumes from the default class `standard`, each pinned to the node
//! its pod was scheduled on, bound by the controller manager's PV controller;
//! once the claims are deleted, the provisioner deletes the volumes.
//!
//! And volumes that really attach (issue 59): a claim on the kind clusters'
//! CSI driver is attached to a sim node by the real attach-detach controller
//! and the driver's own attacher, reported in use by the node, its pod
//! started only then, and the volume detached once its pod is gone.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use nodefall::actions;
use nodefall::profile::TimingProfile;
use nodefall::sim::provisioner::{self, Provisioner};
use nodefall::sim::{SimCluster, UpOptions};
use serde_json::json;

#[path = "support/skip.rs"]
mod skip;

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

/// Issue 59: the sim's volumes attach as kind's do. A pod on a sim node with
/// a claim on a volume of the kind clusters' CSI driver gets a
/// VolumeAttachment from the real attach-detach controller (the node is
/// annotated as a kubelet annotates it), and the driver's own attacher, run
/// by the cluster, attaches it (its record names the node); once the pod is
/// gone the controller detaches it and the record goes.
#[test]
fn a_csi_volume_on_a_sim_node_is_attached_by_the_kind_drivers_attacher() {
    tokio::runtime::Runtime::new().unwrap().block_on(csi_flow());
}

const CSI_NS: &str = "csi";
const HANDLE: &str = "sim-vol-0";

fn csi_objects(node: &str) -> (PersistentVolume, PersistentVolumeClaim, Pod) {
    let pv = serde_json::from_value(json!({
        "metadata": {"name": HANDLE},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "nodefall-csi",
            "claimRef": {"namespace": CSI_NS, "name": "data-0"},
            "csi": {"driver": "csi.nodefall.dev", "volumeHandle": HANDLE}
        }
    }))
    .unwrap();
    let pvc = serde_json::from_value(json!({
        "metadata": {"name": "data-0"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "nodefall-csi",
            "volumeName": HANDLE,
            "resources": {"requests": {"storage": "1Gi"}}
        }
    }))
    .unwrap();
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "disk-0", "labels": {"app": "disk"}},
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "disk",
                "image": "registry.invalid/disk:1",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}]
        }
    }))
    .unwrap();
    (pv, pvc, pod)
}

/// Watches VolumeAttachments until `done` holds for the one of [`HANDLE`]
/// (`None` once it is gone).
async fn attachment_until(
    client: &kube::Client,
    what: &str,
    done: impl Fn(Option<&VolumeAttachment>) -> bool,
) -> Option<VolumeAttachment> {
    let api: Api<VolumeAttachment> = Api::all(client.clone());
    let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
    let mut ours: Option<VolumeAttachment> = None;
    let r = tokio::time::timeout(LIMIT, async {
        loop {
            if let Some(Ok(event)) = stream.next().await {
                let of_ours = |va: &VolumeAttachment| {
                    va.spec.source.persistent_volume_name.as_deref() == Some(HANDLE)
                };
                // Judged once the list is whole, then at each change.
                let settled = match event {
                    watcher::Event::Init => {
                        ours = None;
                        false
                    }
                    watcher::Event::InitApply(va) => {
                        if of_ours(&va) {
                            ours = Some(va);
                        }
                        false
                    }
                    watcher::Event::InitDone => true,
                    watcher::Event::Apply(va) => {
                        if of_ours(&va) {
                            ours = Some(va);
                        }
                        true
                    }
                    watcher::Event::Delete(va) => {
                        if of_ours(&va) {
                            ours = None;
                        }
                        true
                    }
                };
                if settled && done(ours.as_ref()) {
                    return;
                }
            }
        }
    })
    .await;
    assert!(r.is_ok(), "{what} not within {LIMIT:?}: last seen {ours:?}");
    ours
}

async fn csi_flow() {
    let root = tempfile::tempdir().unwrap();
    let mut opts = UpOptions::new("csi", TimingProfile::fast());
    opts.root = root.path().to_owned();
    opts.nodes = 2;
    let mut quiet = |_: &str| {};
    let cluster = SimCluster::up(&opts, &mut quiet).await.unwrap();
    if !skip::unless_csi_attacher(
        &cluster,
        "a_csi_volume_on_a_sim_node_is_attached_by_the_kind_drivers_attacher",
    ) {
        return;
    }
    let client = cluster.client().await.unwrap();
    let nodes: Vec<String> = cluster
        .state()
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    // Each node lists the driver, as a kubelet's plugin registration makes it.
    let csi_nodes: Api<CSINode> = Api::all(client.clone());
    for node in &nodes {
        let c = csi_nodes.get(node).await.unwrap();
        let drivers: Vec<_> = c.spec.drivers.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(drivers, ["csi.nodefall.dev"], "{node}");
    }

    actions::ensure_namespace(&client, CSI_NS).await.unwrap();
    let (pv, pvc, pod) = csi_objects(&nodes[0]);
    let pp = PostParams::default();
    Api::<PersistentVolume>::all(client.clone())
        .create(&pp, &pv)
        .await
        .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), CSI_NS)
        .create(&pp, &pvc)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), CSI_NS);
    pods.create(&pp, &pod).await.unwrap();

    let va = attachment_until(&client, "attached", |va| {
        va.and_then(|va| va.status.as_ref())
            .is_some_and(|s| s.attached)
    })
    .await
    .unwrap();
    let attached_seen = std::time::Instant::now();
    // The pod has not started: it starts once its volume is attached and
    // reported in use by its node's kubelet.
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    let pod = pods.get("disk-0").await.unwrap();
    assert_eq!(
        phase(&pod).as_deref(),
        Some("Pending"),
        "started before its volume was attached"
    );
    let running = tokio::time::timeout(
        LIMIT,
        kube::runtime::wait::await_condition(pods.clone(), "disk-0", |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref()?.phase.clone()).as_deref() == Some("Running")
        }),
    )
    .await;
    assert!(running.is_ok(), "disk-0 not Running within {LIMIT:?}");
    let waited = attached_seen.elapsed();
    assert!(
        waited >= Duration::from_millis(1500) && waited <= Duration::from_secs(5),
        "Running {waited:?} after its volume was attached (a kubelet: 1.77-2.32 s)"
    );
    let unique = format!("kubernetes.io/csi/csi.nodefall.dev^{HANDLE}");
    let node = Api::<Node>::all(client.clone())
        .get(&nodes[0])
        .await
        .unwrap();
    let in_use = node
        .status
        .and_then(|s| s.volumes_in_use)
        .unwrap_or_default();
    assert_eq!(in_use, [unique], "{}", nodes[0]);
    assert_eq!(va.spec.attacher, "csi.nodefall.dev");
    assert_eq!(va.spec.node_name, nodes[0]);
    let managers: BTreeSet<_> = va
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| f.subresource.as_deref() == Some("status"))
        .filter_map(|f| f.manager.clone())
        .collect();
    assert!(managers.contains("nodefall-csi-attacher"), "{managers:?}");
    let record = cluster.dir().join("csi/.published").join(HANDLE);
    assert_eq!(
        std::fs::read_to_string(&record).unwrap().trim(),
        nodes[0],
        "{}",
        record.display()
    );

    // The pod gone: its kubelet stops reporting the volume, the controller
    // detaches it, the attacher unpublishes it.
    pods.delete("disk-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    attachment_until(&client, "detached and deleted", |va| va.is_none()).await;
    assert!(!record.exists(), "{} left", record.display());
}
