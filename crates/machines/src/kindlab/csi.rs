//! nodefall's CSI driver on a `kind up` cluster (`scripts/kind/csi/`): volumes
//! that really attach. Its manifest (the CSIDriver with `attachRequired`, the
//! StorageClass, the attacher Deployment and the node DaemonSet) is applied
//! server-side; the driver is ready once its attacher is available and every
//! node's kubelet has registered it (the node's CSINode lists it).

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::Api;

use super::Error;

/// The driver's name, as PersistentVolumes and VolumeAttachments name it.
pub const DRIVER: &str = "csi.nodefall.dev";
/// The StorageClass of its statically provisioned volumes.
pub const STORAGE_CLASS: &str = "nodefall-csi";
/// The field manager its attacher writes `status.attached` under.
pub const ATTACHER_MANAGER: &str = "nodefall-csi-attacher";
/// Where its objects live.
const NAMESPACE: &str = "kube-system";
const ATTACHER: &str = "kind-csi-attacher";
const NODE_PLUGIN: &str = "kind-csi-node";

/// The manifest, as `scripts/kind/csi/deploy.yaml` has it (its image is
/// preloaded in the node image `scripts/kind/image.sh` builds).
pub const MANIFEST: &str = include_str!("../../../../scripts/kind/csi/deploy.yaml");
const MANIFEST_PATH: &str = "scripts/kind/csi/deploy.yaml";

/// Applies the driver and waits, watching, until its attacher is available
/// and all `nodes` list it in their CSINode.
pub async fn install(client: &kube::Client, nodes: usize, limit: Duration) -> Result<(), Error> {
    crate::actions::apply_documents(client, Path::new(MANIFEST_PATH), MANIFEST, NAMESPACE)
        .await
        .map_err(|e| kube_error("applying the CSI driver's manifest", e))?;
    let deadline = Instant::now() + limit;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let available =
        kube::runtime::wait::await_condition(deployments, ATTACHER, |d: Option<&Deployment>| {
            d.and_then(|d| d.status.as_ref())
                .is_some_and(|s| s.available_replicas.unwrap_or(0) >= 1)
        });
    match tokio::time::timeout_at(deadline.into(), available).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return Err(kube_error(
                format!("waiting for Deployment {NAMESPACE}/{ATTACHER}"),
                e,
            ));
        }
        Err(_) => {
            return Err(Error::Timeout {
                what: format!("the CSI attacher (Deployment {NAMESPACE}/{ATTACHER}) available"),
                after: limit,
            });
        }
    }
    registered(client, nodes, deadline, limit).await
}

fn kube_error(what: impl Into<String>, e: impl std::error::Error) -> Error {
    Error::Kube {
        what: what.into(),
        message: crate::errors::chain(&e),
    }
}

/// Waits until `nodes` CSINodes list the driver: each node's kubelet took
/// the node plugin's registration.
async fn registered(
    client: &kube::Client,
    nodes: usize,
    deadline: Instant,
    limit: Duration,
) -> Result<(), Error> {
    let api: Api<CSINode> = Api::all(client.clone());
    match super::watch_until_count(api, nodes, deadline, lists_driver, "CSINodes").await? {
        super::Counted::Reached => Ok(()),
        super::Counted::TimedOut(so_far) => {
            let daemonset = node_plugin_state(client).await;
            Err(Error::Timeout {
                what: format!(
                    "{nodes} nodes to register the CSI driver {DRIVER} ({so_far} so far; \
                     DaemonSet {NAMESPACE}/{NODE_PLUGIN}: {daemonset})"
                ),
                after: limit,
            })
        }
    }
}

/// Whether a CSINode lists nodefall's driver.
pub fn lists_driver(c: &CSINode) -> bool {
    c.spec.drivers.iter().any(|d| d.name == DRIVER)
}

/// `2 of 3 ready`, or why it could not be read.
async fn node_plugin_state(client: &kube::Client) -> String {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    match api.get_opt(NODE_PLUGIN).await {
        Ok(Some(d)) => d.status.map_or_else(
            || "no status".to_owned(),
            |s| format!("{} of {} ready", s.number_ready, s.desired_number_scheduled),
        ),
        Ok(None) => "missing".to_owned(),
        Err(e) => crate::actions::api_text(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The manifest names what the code waits for and what tests check.
    #[test]
    fn the_manifest_names_the_driver_its_class_and_its_workloads() {
        let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(MANIFEST)
            .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
            .filter(|v: &serde_yaml_ng::Value| !v.is_null())
            .collect();
        let find = |kind: &str, name: &str| {
            docs.iter()
                .find(|d| {
                    d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name)
                })
                .unwrap_or_else(|| panic!("{kind} {name} in {MANIFEST_PATH}"))
        };
        let driver = find("CSIDriver", DRIVER);
        assert_eq!(driver["spec"]["attachRequired"].as_bool(), Some(true));
        let class = find("StorageClass", STORAGE_CLASS);
        assert_eq!(
            class["provisioner"].as_str(),
            Some("kubernetes.io/no-provisioner")
        );
        for (kind, name) in [("Deployment", ATTACHER), ("DaemonSet", NODE_PLUGIN)] {
            let w = find(kind, name);
            assert_eq!(
                w["metadata"]["namespace"].as_str(),
                Some(NAMESPACE),
                "{kind} {name}"
            );
            let image = w["spec"]["template"]["spec"]["containers"][0]["image"].as_str();
            assert_eq!(
                image,
                Some("nodefall.local/kind-csi:v0.1.0"),
                "{kind} {name}"
            );
        }
        assert!(
            include_str!("../../../../scripts/kind/image.sh")
                .contains("nodefall.local/kind-csi:v0.1.0"),
            "the node image preloads the driver's image"
        );
    }
}
