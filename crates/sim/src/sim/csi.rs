//! The kind clusters' CSI driver (`scripts/kind/csi`), reused by the
//! simulated cluster: its attacher answers the sim's VolumeAttachments as it
//! answers a kind cluster's (the same decisions, records and status writes),
//! run as one more process beside the control plane. Its Go sources are
//! embedded here and built by the provisioning script like the rest
//! (`binaries.rs`), into a directory named after their fingerprint.

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSINodeDriver, CSINodeSpec, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};

use super::Error;

/// The driver's sources the binary is built from (its tests and docs left
/// out), relative to `scripts/kind/csi`. A unit test checks the list against
/// the directory, so a file added there cannot be left out here.
pub const SOURCES: [(&str, &str); 9] = [
    (
        "go.mod",
        include_str!("../../../../scripts/kind/csi/go.mod"),
    ),
    (
        "go.sum",
        include_str!("../../../../scripts/kind/csi/go.sum"),
    ),
    (
        "attacher.go",
        include_str!("../../../../scripts/kind/csi/attacher.go"),
    ),
    (
        "decide.go",
        include_str!("../../../../scripts/kind/csi/decide.go"),
    ),
    (
        "main.go",
        include_str!("../../../../scripts/kind/csi/main.go"),
    ),
    (
        "mount.go",
        include_str!("../../../../scripts/kind/csi/mount.go"),
    ),
    (
        "node.go",
        include_str!("../../../../scripts/kind/csi/node.go"),
    ),
    (
        "store.go",
        include_str!("../../../../scripts/kind/csi/store.go"),
    ),
    (
        "deploy.yaml",
        include_str!("../../../../scripts/kind/csi/deploy.yaml"),
    ),
];

/// The driver's name (`driverName` in `main.go`).
pub const DRIVER: &str = "csi.nodefall.dev";

/// A short fingerprint of [`SOURCES`] (FNV-1a, 64 bits, over each name and
/// text): the binary's cache directory is named after it, so a changed
/// driver is built again and an unchanged one never is.
pub fn fingerprint() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, text) in SOURCES {
        for byte in name.bytes().chain([0]).chain(text.bytes()).chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// The field manager of what the simulated cluster applies for the driver.
const FIELD_MANAGER: &str = "nodefall-sim";

/// The driver's cluster-wide objects as the kind clusters have them: the
/// first two documents of its `deploy.yaml`, the CSIDriver (attach
/// required) and the StorageClass `nodefall-csi` (no provisioner, the
/// volumes made by hand). Its workloads are not applied: the attacher runs
/// as a process, and the node plugin's DaemonSet would have KWOK report a
/// pod Running on every node.
pub fn objects() -> Result<(CSIDriver, StorageClass), Error> {
    let deploy = SOURCES
        .iter()
        .find(|(name, _)| *name == "deploy.yaml")
        .map_or("", |(_, text)| text);
    let mut docs = deploy.split("\n---\n");
    let parse_error = |what: &str, e: serde_yaml_ng::Error| {
        Error::Other(format!("scripts/kind/csi/deploy.yaml's {what}: {e}"))
    };
    let driver: CSIDriver = serde_yaml_ng::from_str(docs.next().unwrap_or_default())
        .map_err(|e| parse_error("CSIDriver", e))?;
    let class: StorageClass = serde_yaml_ng::from_str(docs.next().unwrap_or_default())
        .map_err(|e| parse_error("StorageClass", e))?;
    Ok((driver, class))
}

/// Applies [`objects`] (server-side), before the attacher starts.
pub async fn install(client: &kube::Client) -> Result<(), Error> {
    let (driver, class) = objects()?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let kube_error = |what: &str, source: kube::Error| Error::Kube {
        what: format!("applying the CSI driver's {what}"),
        source: source.into(),
    };
    let name = driver.metadata.name.clone().unwrap_or_default();
    Api::<CSIDriver>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(&driver))
        .await
        .map_err(|e| kube_error("CSIDriver", e))?;
    let name = class.metadata.name.clone().unwrap_or_default();
    Api::<StorageClass>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(&class))
        .await
        .map_err(|e| kube_error("StorageClass", e))?;
    Ok(())
}

/// The attacher's component name (its log is `logs/csi-attacher.log`).
pub const ATTACHER: &str = "csi-attacher";

/// The CSINode a kubelet writes once the driver's node plugin registers
/// (its node id the Node's name, as kind-csi's NodeGetInfo says), owned by
/// the Node so that it goes with it; a node registered again writes it again.
pub fn csi_node(node: &Node) -> CSINode {
    let name = node.metadata.name.clone().unwrap_or_default();
    CSINode {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: name.clone(),
                uid: node.metadata.uid.clone().unwrap_or_default(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: CSINodeSpec {
            drivers: vec![CSINodeDriver {
                name: DRIVER.into(),
                node_id: name,
                ..CSINodeDriver::default()
            }],
        },
    }
}

/// Creates the Node's [`csi_node`] unless one exists.
pub async fn register_node(client: &kube::Client, node: &Node) -> Result<(), Error> {
    let api: Api<CSINode> = Api::all(client.clone());
    match api.create(&PostParams::default(), &csi_node(node)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(source) => Err(Error::Kube {
            what: format!(
                "registering the CSI driver on node {}",
                node.metadata.name.as_deref().unwrap_or_default()
            ),
            source: source.into(),
        }),
    }
}

/// The attacher's arguments: the cluster's kubeconfig, its records under
/// `records` (the cluster's own directory).
pub fn attacher_args(kubeconfig: &Path, records: &Path) -> Vec<String> {
    vec![
        "--mode=attacher".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--root={}", records.display()),
    ]
}

/// Writes [`SOURCES`] into `dir` (made if missing), for `go build`.
pub fn write_sources(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("making {}", dir.display()), e))?;
    for (name, text) in SOURCES {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_of_the_driver_is_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kind/csi");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with("_test.go") && !n.ends_with(".md"))
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = SOURCES.iter().map(|(n, _)| (*n).to_owned()).collect();
        embedded.sort();
        assert_eq!(
            embedded, on_disk,
            "scripts/kind/csi and csi::SOURCES differ"
        );
        for (name, text) in SOURCES {
            assert_eq!(
                std::fs::read_to_string(dir.join(name)).unwrap(),
                text,
                "{name}"
            );
        }
        assert!(
            SOURCES[4]
                .1
                .contains(&format!("driverName    = \"{DRIVER}\""))
        );
    }

    #[test]
    fn the_objects_are_deploy_yamls_driver_and_class() {
        let (driver, class) = objects().unwrap();
        assert_eq!(driver.metadata.name.as_deref(), Some(DRIVER));
        assert_eq!(driver.spec.attach_required, Some(true));
        assert_eq!(class.metadata.name.as_deref(), Some("nodefall-csi"));
        assert_eq!(class.provisioner, "kubernetes.io/no-provisioner");
        assert_eq!(class.volume_binding_mode.as_deref(), Some("Immediate"));
    }

    #[test]
    fn a_nodes_csi_node_lists_the_driver_and_is_owned_by_the_node() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("sim-2".into()),
                uid: Some("u-2".into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        let c = csi_node(&node);
        assert_eq!(c.metadata.name.as_deref(), Some("sim-2"));
        let owner = &c.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Node", "u-2"));
        assert_eq!(c.spec.drivers.len(), 1);
        assert_eq!(
            (
                c.spec.drivers[0].name.as_str(),
                c.spec.drivers[0].node_id.as_str()
            ),
            (DRIVER, "sim-2")
        );
    }

    #[test]
    fn the_fingerprint_follows_the_sources() {
        let f = fingerprint();
        assert_eq!(f.len(), 16);
        assert_eq!(f, fingerprint());
        let root = tempfile::tempdir().unwrap();
        write_sources(&root.path().join("src")).unwrap();
        let main = std::fs::read_to_string(root.path().join("src/main.go")).unwrap();
        assert!(main.contains("--mode=attacher"));
    }
}
