//! nodefall's CSI driver on a `kind up` cluster (scripts/kind/csi/): every
//! node's CSINode lists it, and a pod's ReadWriteOnce volume is attached by
//! the driver's attacher, which writes `status.attached` under its own field
//! manager. Nothing here writes an attachment: the attach-detach controller
//! makes the VolumeAttachment, the driver answers it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

const DRIVER: &str = "csi.nodefall.dev";
const MANAGER: &str = "nodefall-csi-attacher";
const NS: &str = "nodefall-csi-check";
const PV: &str = "nodefall-csi-check";

/// Checks the driver on the cluster `client` reaches, with `nodes` nodes;
/// removes what it made, whatever the outcome. Returns the node the volume
/// was attached to.
pub async fn attaches(client: &kube::Client, nodes: usize) -> String {
    let csinodes: Api<CSINode> = Api::all(client.clone());
    let listed = csinodes.list(&ListParams::default()).await.unwrap();
    let with: Vec<_> = listed
        .items
        .iter()
        .filter(|c| c.spec.drivers.iter().any(|d| d.name == DRIVER))
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(with.len(), nodes, "CSINodes listing {DRIVER}: {with:?}");

    let result = tokio::time::timeout(Duration::from_secs(120), attach_one(client)).await;
    cleanup(client).await;
    result.expect("a pod's volume attached by the driver within 120 s")
}

async fn attach_one(client: &kube::Client) -> String {
    let pp = PatchParams::apply("nodefall-test");
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.patch(
        NS,
        &pp,
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})),
    )
    .await
    .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    pvs.patch(
        PV,
        &pp,
        &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": PV},
            "spec": {
                "storageClassName": "nodefall-csi", "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"}, "persistentVolumeReclaimPolicy": "Retain",
                "claimRef": {"namespace": NS, "name": "data"},
                "csi": {"driver": DRIVER, "volumeHandle": "csi-check"}
            }
        })),
    )
    .await
    .unwrap();
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(client.clone(), NS);
    pvcs.patch(
        "data",
        &pp,
        &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"storageClassName": "nodefall-csi", "accessModes": ["ReadWriteOnce"],
                     "volumeName": PV, "resources": {"requests": {"storage": "1Gi"}}}
        })),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.patch(
        "writer",
        &pp,
        &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "writer"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "w", "image": "docker.io/library/busybox:nodefall",
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "echo written > /data/check && sleep 3600"],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
            }
        })),
    )
    .await
    .unwrap();
    let running = await_condition(pods, "writer", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Running")
    })
    .await
    .unwrap()
    .unwrap();
    let node = running.spec.and_then(|s| s.node_name).unwrap();

    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    let va = vas
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|v| v.spec.source.persistent_volume_name.as_deref() == Some(PV))
        .expect("a VolumeAttachment of the pod's volume");
    assert_eq!(va.spec.attacher, DRIVER);
    assert_eq!(va.spec.node_name, node);
    assert_eq!(va.status.as_ref().map(|s| s.attached), Some(true));
    let managers = va.metadata.managed_fields.clone().unwrap_or_default();
    let attached_by: Vec<_> = managers
        .iter()
        .filter(|m| {
            m.subresource.as_deref() == Some("status")
                && m.fields_v1
                    .as_ref()
                    .is_some_and(|f| f.0.to_string().contains("\"f:attached\""))
        })
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(
        attached_by,
        [MANAGER],
        "who wrote status.attached: {managers:?}"
    );
    node
}

/// Deletes what [`attach_one`] made and waits until the volume is detached
/// (its VolumeAttachment gone) and the PersistentVolume gone.
async fn cleanup(client: &kube::Client) {
    let ns: Api<Namespace> = Api::all(client.clone());
    let _ = ns.delete(NS, &DeleteParams::default()).await;
    let gone = await_condition(ns, NS, |n: Option<&Namespace>| n.is_none());
    let _ = tokio::time::timeout(Duration::from_secs(120), gone).await;
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let _ = pvs.delete(PV, &DeleteParams::default()).await;
    let gone = await_condition(pvs, PV, |p: Option<&PersistentVolume>| p.is_none());
    let _ = tokio::time::timeout(Duration::from_secs(60), gone).await;
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    let detached = async {
        loop {
            let left = vas.list(&ListParams::default()).await.map(|l| {
                l.items
                    .iter()
                    .any(|v| v.spec.source.persistent_volume_name.as_deref() == Some(PV))
            });
            if left.is_ok_and(|l| !l) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(60), detached)
            .await
            .is_ok(),
        "the check's VolumeAttachment was not removed (detach) within 60 s"
    );
}
