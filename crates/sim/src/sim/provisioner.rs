//! The sim's stand-in for kind's default storage: the StorageClass `standard`
//! and a dynamic provisioner in the role of kind's `rancher.io/local-path`
//! (local-path-provisioner).
//!
//! On kind, a claim naming no class gets a volume on the node its first pod
//! was scheduled on (WaitForFirstConsumer), pinned there by a required node
//! affinity on `kubernetes.io/hostname`; once that node fails, the scheduler
//! cannot place the pod anywhere else (FailedScheduling: "didn't match
//! PersistentVolume's node affinity"). This module gives the sim the same
//! objects: [`ensure_class`] makes the class, and [`Provisioner`] watches
//! claims and volumes and does what an external provisioner does through the
//! API: it creates a pre-bound PersistentVolume for each claim of our
//! [`PROVISIONER`] whose node the scheduler selected (the PV controller of
//! kube-controller-manager binds them, then the scheduler binds the pod),
//! and deletes the volumes it made once their claim is gone (`Released`,
//! reclaim policy `Delete`).
//!
//! What it does not do: no directory is made or removed anywhere (KWOK runs
//! no containers, so nothing would use it); the `hostPath` is a label, as a
//! pod's IP is on the sim. No capacity tracking, no expansion, no snapshots.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};

use super::Error;

/// The provisioner name our StorageClass names and our volumes carry.
pub const PROVISIONER: &str = "nodefall.dev/sim-local-path";
/// The default StorageClass's name, as on kind.
pub const CLASS: &str = "standard";
/// Root of the (never created) volume directories, as local-path-provisioner's.
const ROOT: &str = "/var/local-path-provisioner";
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const MANAGER: &str = "nodefall-sim";
/// Set on a claim by the PV controller: which provisioner is to make its volume.
const ANN_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const ANN_PROVISIONER_BETA: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// Set on a claim by the scheduler: the node its pod is being bound to.
const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const HOSTNAME: &str = "kubernetes.io/hostname";
/// Attempts of one create or delete before it is left to the next event.
const ATTEMPTS: u32 = 6;

/// Creates the default StorageClass `standard` (our provisioner,
/// WaitForFirstConsumer, reclaim Delete) unless a class of that name exists,
/// which is left as it is.
pub async fn ensure_class(client: &kube::Client) -> Result<(), Error> {
    let api: Api<StorageClass> = Api::all(client.clone());
    let kube_err = |what: &str, source: kube::Error| Error::Kube {
        what: format!("{what} StorageClass {CLASS}"),
        source: source.into(),
    };
    if api
        .get_opt(CLASS)
        .await
        .map_err(|e| kube_err("reading", e))?
        .is_some()
    {
        return Ok(());
    }
    match api.create(&PostParams::default(), &class()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(kube_err("creating", e)),
    }
}

fn class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(CLASS.to_owned()),
            annotations: Some(BTreeMap::from([(
                DEFAULT_CLASS.to_owned(),
                "true".to_owned(),
            )])),
            labels: Some(BTreeMap::from([(
                MANAGED_BY.to_owned(),
                MANAGER.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        provisioner: PROVISIONER.to_owned(),
        volume_binding_mode: Some("WaitForFirstConsumer".to_owned()),
        reclaim_policy: Some("Delete".to_owned()),
        ..StorageClass::default()
    }
}

/// The provisioner's task: runs until this value is dropped.
#[derive(Debug)]
pub struct Provisioner {
    task: tokio::task::JoinHandle<()>,
}

impl Provisioner {
    /// Starts watching claims and volumes (on the current tokio runtime).
    pub fn spawn(client: kube::Client) -> Provisioner {
        Provisioner {
            task: tokio::spawn(run(client)),
        }
    }
}

impl Drop for Provisioner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

enum Seen {
    Claim(Box<PersistentVolumeClaim>),
    Volume(Box<PersistentVolume>),
}

/// Acts on every claim and volume seen, including those listed again after a
/// watch restarts (which is how an action that ran out of attempts is retried).
async fn run(client: kube::Client) {
    let claims = watcher(Api::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .map(|r| r.map(|c| Seen::Claim(Box::new(c))));
    let volumes = watcher(Api::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .map(|r| r.map(|v| Seen::Volume(Box::new(v))));
    let mut seen = std::pin::pin!(futures::stream::select(claims, volumes));
    let pvs: Api<PersistentVolume> = Api::all(client);
    while let Some(item) = seen.next().await {
        match item {
            Err(e) => tracing::debug!(
                "provisioner: watch error, the watcher relists: {}",
                crate::actions::api_text(&e)
            ),
            Ok(Seen::Claim(pvc)) => {
                let Some(node) = needs_volume(&pvc) else {
                    continue;
                };
                match volume_for(&pvc, node) {
                    Ok(pv) => {
                        let what = format!("creating PersistentVolume {}", name_of(&pv));
                        retry(&what, || create(&pvs, &pv)).await;
                    }
                    Err(why) => tracing::warn!(
                        "provisioner: no volume for claim {}/{}: {why}",
                        pvc.metadata.namespace.as_deref().unwrap_or_default(),
                        pvc.metadata.name.as_deref().unwrap_or_default()
                    ),
                }
            }
            Ok(Seen::Volume(pv)) if needs_deletion(&pv) => {
                let what = format!("deleting released PersistentVolume {}", name_of(&pv));
                retry(&what, || delete(&pvs, &pv)).await;
            }
            Ok(Seen::Volume(_)) => {}
        }
    }
}

async fn create(api: &Api<PersistentVolume>, pv: &PersistentVolume) -> Result<(), kube::Error> {
    match api.create(&PostParams::default(), pv).await {
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        r => r.map(drop),
    }
}

async fn delete(api: &Api<PersistentVolume>, pv: &PersistentVolume) -> Result<(), kube::Error> {
    let mut params = DeleteParams::default();
    if let Some(uid) = &pv.metadata.uid {
        params = params.preconditions(kube::api::Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        });
    }
    match api.delete(name_of(pv), &params).await {
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        r => r.map(drop),
    }
}

/// Runs `op` up to [`ATTEMPTS`] times, waiting [`backoff`] between tries.
async fn retry<F, Fut>(what: &str, mut op: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), kube::Error>>,
{
    for attempt in 1..=ATTEMPTS {
        match op().await {
            Ok(()) => return,
            Err(e) if attempt == ATTEMPTS => {
                tracing::warn!(
                    "provisioner: {what} failed {ATTEMPTS} times, giving up: {}",
                    crate::actions::api_text(&e)
                );
            }
            Err(e) => {
                tracing::debug!(
                    "provisioner: {what} (attempt {attempt}): {}",
                    crate::actions::api_text(&e)
                );
                tokio::time::sleep(backoff(attempt)).await;
            }
        }
    }
}

/// The wait after failed attempt `n` (from 1): 200 ms, doubling, at most 5 s.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(200u64 << n.saturating_sub(1).min(5)).min(Duration::from_secs(5))
}

fn name_of(pv: &PersistentVolume) -> &str {
    pv.metadata.name.as_deref().unwrap_or_default()
}

/// The node a claim's volume is to be made on, if the claim is ours, its
/// node selected and it is not bound yet.
fn needs_volume(pvc: &PersistentVolumeClaim) -> Option<&str> {
    let ann = pvc.metadata.annotations.as_ref()?;
    let ours = [ANN_PROVISIONER, ANN_PROVISIONER_BETA]
        .iter()
        .any(|k| ann.get(*k).is_some_and(|v| v == PROVISIONER));
    let bound = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    if !ours || bound || pvc.metadata.deletion_timestamp.is_some() {
        return None;
    }
    ann.get(ANN_SELECTED_NODE)
        .map(String::as_str)
        .filter(|n| !n.is_empty())
}

/// Whether a volume is one we made whose claim is gone, to be deleted.
fn needs_deletion(pv: &PersistentVolume) -> bool {
    let ours = pv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_PROVISIONED_BY))
        .is_some_and(|p| p == PROVISIONER);
    let released = pv
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Released");
    let delete = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .is_some_and(|p| p == "Delete");
    ours && released && delete && pv.metadata.deletion_timestamp.is_none()
}

/// The volume for a claim on `node`, pre-bound to it (`claimRef` with its
/// UID), as local-path-provisioner makes it.
fn volume_for(pvc: &PersistentVolumeClaim, node: &str) -> Result<PersistentVolume, &'static str> {
    let meta = &pvc.metadata;
    let (Some(ns), Some(name), Some(uid)) = (&meta.namespace, &meta.name, &meta.uid) else {
        return Err("it has no namespace, name or UID");
    };
    let spec = pvc.spec.as_ref().ok_or("it has no spec")?;
    let size = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .ok_or("it requests no storage")?;
    let pv_name = format!("pvc-{uid}");
    let affinity = NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: HOSTNAME.to_owned(),
            operator: "In".to_owned(),
            values: Some(vec![node.to_owned()]),
        }]),
        ..NodeSelectorTerm::default()
    };
    Ok(PersistentVolume {
        metadata: ObjectMeta {
            annotations: Some(BTreeMap::from([(
                ANN_PROVISIONED_BY.to_owned(),
                PROVISIONER.to_owned(),
            )])),
            labels: Some(BTreeMap::from([(
                MANAGED_BY.to_owned(),
                MANAGER.to_owned(),
            )])),
            name: Some(pv_name.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_owned(), size.clone())])),
            access_modes: spec.access_modes.clone(),
            storage_class_name: spec.storage_class_name.clone(),
            volume_mode: spec.volume_mode.clone(),
            persistent_volume_reclaim_policy: Some("Delete".to_owned()),
            host_path: Some(HostPathVolumeSource {
                path: format!("{ROOT}/{pv_name}_{ns}_{name}"),
                type_: Some("DirectoryOrCreate".to_owned()),
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![affinity],
                }),
            }),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("PersistentVolumeClaim".to_owned()),
                namespace: Some(ns.clone()),
                name: Some(name.clone()),
                uid: Some(uid.clone()),
                ..ObjectReference::default()
            }),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(ann: serde_json::Value, volume_name: Option<&str>) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data-web-0", "namespace": "ns", "uid": "u1", "annotations": ann},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": CLASS,
                "volumeName": volume_name,
                "resources": {"requests": {"storage": "100Mi"}}
            }
        }))
        .expect("a claim")
    }

    fn ours(node: &str) -> serde_json::Value {
        json!({ANN_PROVISIONER: PROVISIONER, ANN_SELECTED_NODE: node})
    }

    #[test]
    fn a_selected_unbound_claim_of_ours_needs_a_volume_on_its_node() {
        assert_eq!(
            needs_volume(&claim(ours("worker-2"), None)),
            Some("worker-2")
        );
        let beta = json!({ANN_PROVISIONER_BETA: PROVISIONER, ANN_SELECTED_NODE: "w"});
        assert_eq!(needs_volume(&claim(beta, None)), Some("w"));
    }

    #[test]
    fn other_claims_need_nothing() {
        let bound = claim(ours("w"), Some("pvc-u1"));
        let not_selected = claim(json!({ANN_PROVISIONER: PROVISIONER}), None);
        let theirs = claim(
            json!({ANN_PROVISIONER: "rancher.io/local-path", ANN_SELECTED_NODE: "w"}),
            None,
        );
        let bare = claim(json!({}), None);
        for c in [bound, not_selected, theirs, bare] {
            assert_eq!(needs_volume(&c), None, "{c:?}");
        }
        let mut deleted = claim(ours("w"), None);
        deleted.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert_eq!(needs_volume(&deleted), None);
    }

    #[test]
    fn the_volume_is_pinned_to_the_node_and_pre_bound_to_the_claim() {
        let pv = volume_for(&claim(ours("worker-2"), None), "worker-2").expect("a volume");
        let want = json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": "pvc-u1",
                "annotations": {ANN_PROVISIONED_BY: PROVISIONER},
                "labels": {MANAGED_BY: MANAGER}
            },
            "spec": {
                "capacity": {"storage": "100Mi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "standard",
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {
                    "path": "/var/local-path-provisioner/pvc-u1_ns_data-web-0",
                    "type": "DirectoryOrCreate"
                },
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker-2"]}
                ]}]}},
                "claimRef": {
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "namespace": "ns", "name": "data-web-0", "uid": "u1"
                }
            }
        });
        assert_eq!(serde_json::to_value(&pv).expect("json"), want);
    }

    #[test]
    fn a_claim_without_uid_or_request_gets_no_volume() {
        let mut c = claim(ours("w"), None);
        c.metadata.uid = None;
        assert!(volume_for(&c, "w").is_err());
        let mut c = claim(ours("w"), None);
        if let Some(r) = c.spec.as_mut().and_then(|s| s.resources.as_mut()) {
            r.requests = None;
        }
        assert!(volume_for(&c, "w").is_err());
    }

    fn volume(by: &str, phase: &str, policy: &str) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": "pvc-u1", "annotations": {ANN_PROVISIONED_BY: by}},
            "spec": {"persistentVolumeReclaimPolicy": policy},
            "status": {"phase": phase}
        }))
        .expect("a volume")
    }

    #[test]
    fn only_our_released_volumes_to_delete_are_deleted() {
        assert!(needs_deletion(&volume(PROVISIONER, "Released", "Delete")));
        assert!(!needs_deletion(&volume(PROVISIONER, "Bound", "Delete")));
        assert!(!needs_deletion(&volume(PROVISIONER, "Released", "Retain")));
        assert!(!needs_deletion(&volume(
            "rancher.io/local-path",
            "Released",
            "Delete"
        )));
    }

    #[test]
    fn the_class_is_the_default_and_waits_for_the_first_consumer() {
        let c = class();
        let ann = c.metadata.annotations.unwrap_or_default();
        assert_eq!(ann.get(DEFAULT_CLASS).map(String::as_str), Some("true"));
        assert_eq!(c.provisioner, PROVISIONER);
        assert_eq!(
            c.volume_binding_mode.as_deref(),
            Some("WaitForFirstConsumer")
        );
        assert_eq!(c.reclaim_policy.as_deref(), Some("Delete"));
    }

    #[test]
    fn the_backoff_doubles_up_to_five_seconds() {
        let waits: Vec<u64> = (1..=8).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
    }
}
