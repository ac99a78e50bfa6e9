//! Who plays each node's kubelet.
//!
//! - **Per node** (the default up to [`PER_NODE_MAX`] nodes): one kwok
//!   process per node (`--manage-single-node`). A node fault is a signal to
//!   that process, as close as kwok gets to a real kubelet going away.
//! - **Shared** (shards): a few kwok processes, each managing every Node that
//!   carries its [`SHARD_LABEL`] value (`--manage-nodes-with-label-selector`).
//!   A node fault takes the node out of its shard's managed set by removing
//!   the label: the shard's watch sees the Node leave, cancels its pending
//!   status updates and stops renewing its lease and touching its pods, so
//!   the control plane sees what it sees of a frozen or dead kubelet. Putting
//!   the label back makes the shard take the node over again: it renews the
//!   lease and lists the node's pods afresh (Terminating ones are finalised,
//!   Running ones reported Ready), like the fresh kwok of the per-node mode.
//!   This is what lets `sim up --nodes 1000` run on a 2-core machine.

use std::collections::BTreeMap;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use super::kubelet;
use super::state::{Layout, SimNode};
use super::{Error, done_unless_gone};
use crate::profile::TimingProfile;

/// The label that puts a Node in a shard's managed set (value: the shard).
pub const SHARD_LABEL: &str = "nodefall.dev/kwok-shard";
/// Marks the Node objects nodefall made, and tells kwok they are fake.
pub const SIM_NODE_LABEL: &str = "nodefall.dev/sim";
/// The most nodes `sim up` starts (the address scheme's limit).
pub const MAX_NODES: usize = 3000;
/// Up to this many nodes, each node gets its own kwok by default.
pub const PER_NODE_MAX: usize = 50;
/// Nodes per shard when the shard count is chosen automatically.
const NODES_PER_SHARD: usize = 500;
/// Registrations in flight at once when a cluster comes up.
const REGISTER_PARALLELISM: usize = 32;

/// The default shard count: 0 (one kwok per node) up to [`PER_NODE_MAX`]
/// nodes, else one shard per 500 nodes.
pub fn auto_shards(nodes: usize) -> usize {
    if nodes <= PER_NODE_MAX {
        0
    } else {
        nodes.div_ceil(NODES_PER_SHARD)
    }
}

/// The label a zone's nodes carry (the well-known one the node lifecycle
/// controller, the scheduler and cloud providers read).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The node records of a new cluster: `worker-1` .. `worker-N`, each with its
/// shard when `shards > 0`, and its zone, round-robin, when `zones` names
/// some: with 3 zones, worker-1 in the first, worker-2 in the second, ...
pub fn nodes(count: usize, shards: usize, zones: &[String]) -> Vec<SimNode> {
    (1..=count)
        .map(|i| SimNode {
            name: format!("worker-{i}"),
            ip: node_ip(i),
            pod_cidr: pod_cidr(i),
            agent_state: super::AgentState::Stopped,
            agent: None,
            shard: (shards > 0).then(|| (i - 1) % shards),
            paused_at_ms: None,
            zone: (!zones.is_empty()).then(|| zones[(i - 1) % zones.len()].clone()),
            control_plane: false,
        })
        .collect()
}

/// The name of the node `sim up --control-plane-node` adds.
pub const CONTROL_PLANE_NODE: &str = "control-plane";

/// The label and the NoSchedule taint kubeadm gives a control plane's node
/// (a kind cluster's `NAME-control-plane`).
pub const CONTROL_PLANE_ROLE: &str = "node-role.kubernetes.io/control-plane";

/// A node standing for a kind cluster's control plane: it runs no
/// workload (its taint) but counts in its zone (the first one) as kind's
/// does, so a zone of N workers and it has N + 1 nodes on both. Its own
/// address and pod range (10.89.0.1, 10.244.0.0/24, as kind's control plane
/// has the first range), its shard the first.
pub fn control_plane_node(shards: usize, zones: &[String]) -> SimNode {
    SimNode {
        name: CONTROL_PLANE_NODE.to_owned(),
        ip: node_ip(0),
        pod_cidr: pod_cidr(0),
        agent_state: super::AgentState::Stopped,
        agent: None,
        shard: (shards > 0).then_some(0),
        paused_at_ms: None,
        zone: zones.first().cloned(),
        control_plane: true,
    }
}

/// The nodes of a throwaway cluster of `count` nodes over `zones`, as
/// target resolution and the zone rules see them once it is up (every node
/// Ready): what `plan` resolves a sim scenario against without a cluster.
pub fn throwaway_nodes(
    count: usize,
    zones: &[String],
) -> Vec<(
    crate::scenario::resolve::NodeLabels,
    crate::disruption::ZoneNode,
)> {
    nodes(count, auto_shards(count), zones)
        .iter()
        .map(|n| {
            let labels = node_labels(n);
            (
                crate::scenario::resolve::NodeLabels {
                    name: n.name.clone(),
                    labels: labels.clone(),
                },
                crate::disruption::ZoneNode::of(&n.name, &labels, true),
            )
        })
        .collect()
}

/// 10.89.0.2 for worker-1, on through 10.89.11.185 for worker-3000.
fn node_ip(i: usize) -> String {
    format!("10.89.{}.{}", (i + 1) / 256, (i + 1) % 256)
}

/// 10.244.1.0/24 for worker-1, through 10.255.184.0/24 for worker-3000.
fn pod_cidr(i: usize) -> String {
    format!("10.{}.{}.0/24", 244 + i / 256, i % 256)
}

/// The component name of shard `k`'s kwok process (its log is
/// `logs/kwok-shard-K.log`).
pub fn shard_name(k: usize) -> String {
    format!("kwok/shard-{k}")
}

/// The arguments of shard `k`'s kwok.
pub fn shard_args(layout: &Layout, k: usize, profile: &TimingProfile) -> Vec<String> {
    let selector = format!("{SHARD_LABEL}={k}");
    let mut args = common_args(layout, profile);
    args.extend([
        "--manage-nodes-with-label-selector".to_owned(),
        selector,
        // Nodes carry their own addresses and pod CIDRs; these are fallbacks.
        "--node-ip".to_owned(),
        format!("10.90.0.{}", k + 1),
        "--cidr".to_owned(),
        format!("10.{}.0.0/16", 128 + k),
        // At info level a shard logs every lease renewal (hundreds a second).
        "-v".to_owned(),
        "WARN".to_owned(),
    ]);
    args
}

/// The arguments of the per-node kwok of `node`.
pub fn single_args(layout: &Layout, node: &SimNode, profile: &TimingProfile) -> Vec<String> {
    let mut args = common_args(layout, profile);
    args.extend([
        "--manage-single-node".to_owned(),
        node.name.clone(),
        "--node-ip".to_owned(),
        node.ip.clone(),
        "--cidr".to_owned(),
        node.pod_cidr.clone(),
    ]);
    args
}

fn common_args(layout: &Layout, profile: &TimingProfile) -> Vec<String> {
    vec![
        "--kubeconfig".to_owned(),
        layout.kubeconfig().display().to_string(),
        "--config".to_owned(),
        layout.stages().display().to_string(),
        "--node-lease-duration-seconds".to_owned(),
        profile.node_lease_duration.as_secs().max(1).to_string(),
        "--server-address".to_owned(),
        "127.0.0.1:0".to_owned(),
    ]
}

/// Registers the Node unless it exists (a kubelet does so on start). A
/// shared node is created with its shard label and its addresses. With `csi`
/// (the cluster runs the CSI driver's attacher), its CSINode lists the driver.
pub async fn register(client: &kube::Client, node: &SimNode, csi: bool) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    let exists = api
        .get_metadata_opt(&node.name)
        .await
        .map_err(|source| Error::Kube {
            what: format!("reading node {}", node.name),
            source: source.into(),
        })?
        .is_some();
    if exists {
        return Ok(());
    }
    create(&api, node, csi).await
}

/// Deletes the node's Lease a kwok that is gone left behind, before a new
/// kwok starts for the node. A kubelet owns its Lease by name; a new kwok
/// manages a node only once it holds its Lease, and its first sync, reading
/// a cache not filled yet, tries to create it, fails on the old one and tries
/// again a renew interval (`lease`/4) later: 10 s with default timings,
/// during which the node stays as it was (seen: a powered-on node Ready
/// 10.5 s after `poweron` instead of once booted, 8 s). No Lease is fine.
pub async fn drop_stale_lease(client: &kube::Client, node: &str) -> Result<(), Error> {
    use k8s_openapi::api::coordination::v1::Lease;
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    done_unless_gone(api.delete(node, &Default::default()).await)
        .map(drop)
        .map_err(|source| Error::Kube {
            what: format!("deleting the Lease node {node}'s last kwok left"),
            source: source.into(),
        })
}

/// Registers many nodes, [`REGISTER_PARALLELISM`] at a time.
pub async fn register_all(
    client: &kube::Client,
    nodes: &[SimNode],
    csi: bool,
) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    let mut results = futures::stream::iter(nodes)
        .map(|n| create(&api, n, csi))
        .buffer_unordered(REGISTER_PARALLELISM);
    while let Some(r) = results.next().await {
        r?;
    }
    Ok(())
}

async fn create(api: &Api<Node>, node: &SimNode, csi: bool) -> Result<(), Error> {
    let object = node_object(node, jiff::Timestamp::now());
    let kube_error = |source: kube::Error| Error::Kube {
        what: format!("registering node {}", node.name),
        source: source.into(),
    };
    let created = match api.create(&PostParams::default(), &object).await {
        Ok(created) => Some(created),
        Err(kube::Error::Api(s)) if s.code == 409 => None,
        Err(source) => return Err(kube_error(source)),
    };
    if !csi {
        return Ok(());
    }
    let created = match created {
        Some(created) => created,
        None => api.get(&node.name).await.map_err(kube_error)?,
    };
    super::csi::register_node(&api.clone().into_client(), &created).await
}

/// The Node annotation a kubelet sets when the attach-detach controller
/// attaches its volumes (kubelet's `volumes.kubernetes.io/controller-managed-attach-detach`).
const CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";

/// The Node a kubelet registers, as the kubelet does it: with its
/// conditions (Ready=False, KubeletNotReady, until its first status update)
/// and the `node.kubernetes.io/not-ready:NoSchedule` taint, which the node
/// lifecycle controller removes once the node is Ready (seen on kind: both in
/// the Node's first event, Ready=True 0.19 s later). KWOK's node-initialize
/// stage then reports it Ready. A shared node also brings its addresses (a
/// shared kwok has one --node-ip for all its nodes; it keeps the addresses
/// it finds). A node in a zone carries [`ZONE_LABEL`], as a cloud
/// provider's kubelet labels it.
/// A sim node's labels: its hostname, `type: kwok`, [`SIM_NODE_LABEL`], its
/// shard and its zone.
pub fn node_labels(node: &SimNode) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", node.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("type", "kwok"),
        (SIM_NODE_LABEL, "true"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    if let Some(k) = node.shard {
        labels.insert(SHARD_LABEL.to_owned(), k.to_string());
    }
    if let Some(zone) = &node.zone {
        labels.insert(ZONE_LABEL.to_owned(), zone.clone());
    }
    if node.control_plane {
        labels.insert(CONTROL_PLANE_ROLE.to_owned(), String::new());
    }
    labels
}

fn node_object(node: &SimNode, now: jiff::Timestamp) -> Node {
    use k8s_openapi::api::core::v1::{NodeCondition, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let labels = node_labels(node);
    let addresses = node.shard.map(|_| {
        vec![
            NodeAddress {
                address: node.ip.clone(),
                type_: "InternalIP".into(),
            },
            NodeAddress {
                address: node.name.clone(),
                type_: "Hostname".into(),
            },
        ]
    });
    let ready = NodeCondition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: Some("KubeletNotReady".into()),
        message: Some("container runtime status check may not have completed yet".into()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    Node {
        metadata: ObjectMeta {
            name: Some(node.name.clone()),
            labels: Some(labels.into_iter().collect()),
            annotations: Some(
                [
                    ("kwok.x-k8s.io/node", "fake"),
                    // As a kubelet registers (its default
                    // enableControllerAttachDetach): the attach-detach
                    // controller attaches and detaches this node's volumes
                    // only when the key is there.
                    (CONTROLLER_MANAGED_ATTACH_DETACH, "true"),
                ]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(node.pod_cidr.clone()),
            taints: Some(
                std::iter::once("node.kubernetes.io/not-ready")
                    .chain(node.control_plane.then_some(CONTROL_PLANE_ROLE))
                    .map(|key| Taint {
                        key: key.into(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    })
                    .collect(),
            ),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses,
            conditions: Some(vec![ready]),
            ..NodeStatus::default()
        }),
    }
}

/// Posts what a returning node's kubelet reports first (`kubelet.rs`):
/// Ready=False when the report says so, and the time KWOK's node-initialize
/// stage may report it Ready ([`kubelet::READY_AT`]). A Node that no longer
/// exists is left to be registered afresh.
pub async fn report_return(
    client: &kube::Client,
    node: &str,
    report: &kubelet::FirstReport,
    now: jiff::Timestamp,
) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    let ready_at = after(now, report.ready_after);
    let kube_err = |what: &str, source: kube::Error| Error::Kube {
        what: format!("{what} of returning node {node}"),
        source: source.into(),
    };
    let meta =
        serde_json::json!({"metadata": {"annotations": {kubelet::READY_AT: ready_at.to_string()}}});
    let there = done_unless_gone(
        api.patch(node, &PatchParams::default(), &Patch::Merge(&meta))
            .await,
    )
    .map_err(|source| kube_err("annotating", source))?;
    if !there {
        return Ok(());
    }
    if let Some(message) = &report.not_ready {
        let status = serde_json::json!({"status": {"conditions": [{
            "type": "Ready",
            "status": "False",
            "reason": "KubeletNotReady",
            "message": message,
            "lastHeartbeatTime": now.to_string(),
            "lastTransitionTime": now.to_string(),
        }]}});
        done_unless_gone(
            api.patch_status(node, &PatchParams::default(), &Patch::Strategic(&status))
                .await,
        )
        .map_err(|source| kube_err("reporting the status", source))?;
    }
    Ok(())
}

/// Times what a returning node's kubelet does with its pods (`kubelet.rs`):
/// each running pod of `node` is re-reported as it was
/// ([`kubelet::RESYNC_AT`]) and one deleted meanwhile is stopped
/// ([`kubelet::STOP_DELAY`], [`kubelet::STOP_PHASE`]) and removed
/// ([`kubelet::DELETE_DELAY`]) when that kubelet would, not the instant KWOK
/// sees it.
pub async fn time_pods(
    client: &kube::Client,
    node: &str,
    times: &kubelet::PodTimes,
    now: jiff::Timestamp,
) -> Result<(), Error> {
    use k8s_openapi::api::core::v1::Pod;
    let at = |d| serde_json::Value::from(after(now, d).to_string());
    let all: Api<Pod> = Api::all(client.clone());
    let params = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
    let pods = all.list(&params).await.map_err(|source| Error::Kube {
        what: format!("listing the pods of returning node {node}"),
        source: source.into(),
    })?;
    for pod in pods.items {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let (Some(name), Some(ns)) = (
            pod.metadata.name.as_deref(),
            pod.metadata.namespace.as_deref(),
        ) else {
            continue;
        };
        let mut annotations = serde_json::Map::new();
        if let Some(d) = times.resync {
            annotations.insert(kubelet::RESYNC_AT.into(), at(d));
        }
        if pod.metadata.deletion_timestamp.is_some() {
            annotations.insert(kubelet::STOP_DELAY.into(), at(times.stop));
            if let Some(phase) = times.stop_phase {
                annotations.insert(kubelet::STOP_PHASE.into(), phase.into());
            }
            if let Some(d) = times.delete {
                annotations.insert(kubelet::DELETE_DELAY.into(), at(d));
            }
        }
        if !running || annotations.is_empty() {
            continue;
        }
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        // Gone meanwhile: nothing to time.
        done_unless_gone(
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )
        .map_err(|source| Error::Kube {
            what: format!("timing pod {ns}/{name} of returning node {node}"),
            source: source.into(),
        })?;
    }
    Ok(())
}

/// `d` after `now` (now itself past the representable range).
fn after(now: jiff::Timestamp, d: std::time::Duration) -> jiff::Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| now.checked_add(d).ok())
        .unwrap_or(now)
}

/// Puts a shared node in its shard's managed set (registering it again if it
/// was deleted) or takes it out. Taking out a Node that no longer exists is
/// done already.
pub async fn set_managed(
    client: &kube::Client,
    node: &SimNode,
    managed: bool,
    csi: bool,
) -> Result<(), Error> {
    let Some(shard) = node.shard else {
        return Err(Error::io_msg(format!(
            "node `{}` has its own kwok, not a shard",
            node.name
        )));
    };
    let api: Api<Node> = Api::all(client.clone());
    let value = managed.then(|| shard.to_string());
    let patch = serde_json::json!({ "metadata": { "labels": { SHARD_LABEL: value } } });
    let there = done_unless_gone(
        api.patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    match there {
        Ok(true) => Ok(()),
        Ok(false) if managed => create(&api, node, csi).await,
        Ok(false) => Ok(()),
        Err(source) => Err(Error::Kube {
            what: format!(
                "{} node {} {} kwok shard {shard}",
                if managed { "returning" } else { "taking" },
                node.name,
                if managed { "to" } else { "out of" }
            ),
            source: source.into(),
        }),
    }
}

/// The shard processes' log name for messages about node agents.
pub fn agent_log_component(first: &SimNode) -> String {
    match first.shard {
        Some(k) => shard_name(k),
        None => format!("kwok/{}", first.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_keep_the_small_cluster_scheme_and_stay_distinct() {
        assert_eq!(node_ip(1), "10.89.0.2");
        assert_eq!(pod_cidr(1), "10.244.1.0/24");
        assert_eq!(pod_cidr(255), "10.244.255.0/24");
        let ips: std::collections::BTreeSet<_> = (1..=MAX_NODES).map(node_ip).collect();
        let cidrs: std::collections::BTreeSet<_> = (1..=MAX_NODES).map(pod_cidr).collect();
        assert_eq!(ips.len(), MAX_NODES);
        assert_eq!(cidrs.len(), MAX_NODES);
        assert_eq!(pod_cidr(MAX_NODES), "10.255.184.0/24");
    }

    #[test]
    fn shards_are_chosen_by_size_and_spread_round_robin() {
        assert_eq!(auto_shards(3), 0);
        assert_eq!(auto_shards(50), 0);
        assert_eq!(auto_shards(51), 1);
        assert_eq!(auto_shards(1000), 2);
        let n = nodes(5, 2, &[]);
        let shards: Vec<_> = n.iter().map(|n| n.shard).collect();
        assert_eq!(shards, [Some(0), Some(1), Some(0), Some(1), Some(0)]);
        assert!(nodes(3, 0, &[]).iter().all(|n| n.shard.is_none()));
    }

    #[test]
    fn zones_are_spread_round_robin() {
        let zones = ["a", "b", "c"].map(String::from);
        let n = nodes(7, 0, &zones);
        let got: Vec<_> = n.iter().map(|n| n.zone.as_deref().unwrap()).collect();
        assert_eq!(got, ["a", "b", "c", "a", "b", "c", "a"]);
        assert!(nodes(2, 0, &[]).iter().all(|n| n.zone.is_none()));
    }

    #[test]
    fn a_control_plane_node_is_labelled_and_tainted_as_kubeadm_registers_it() {
        let now: jiff::Timestamp = "2026-12-06T20:00:00Z".parse().unwrap();
        let cp = control_plane_node(0, &["a".to_owned(), "b".to_owned()]);
        assert_eq!(
            (cp.name.as_str(), cp.zone.as_deref(), cp.pod_cidr.as_str()),
            ("control-plane", Some("a"), "10.244.0.0/24")
        );
        let o = node_object(&cp, now);
        let labels = o.metadata.labels.unwrap();
        assert_eq!(labels.get(CONTROL_PLANE_ROLE).map(String::as_str), Some(""));
        let taints: Vec<_> = o
            .spec
            .unwrap()
            .taints
            .unwrap()
            .into_iter()
            .map(|t| (t.key, t.effect))
            .collect();
        assert_eq!(
            taints,
            [
                ("node.kubernetes.io/not-ready".into(), "NoSchedule".into()),
                (CONTROL_PLANE_ROLE.into(), "NoSchedule".into())
            ]
        );
        // A worker has neither.
        let w = node_object(&nodes(1, 0, &[]).remove(0), now);
        assert!(!w.metadata.labels.unwrap().contains_key(CONTROL_PLANE_ROLE));
        assert_eq!(w.spec.unwrap().taints.unwrap().len(), 1);
    }

    #[test]
    fn a_node_registers_not_ready_and_tainted_as_a_kubelet_registers_it() {
        let now: jiff::Timestamp = "2026-11-26T04:15:01Z".parse().unwrap();
        for (node, shared) in [
            (nodes(1, 0, &[]).remove(0), false),
            (nodes(1, 1, &["a".to_owned()]).remove(0), true),
        ] {
            let o = node_object(&node, now);
            let spec = o.spec.unwrap();
            let taints = spec.taints.unwrap();
            assert_eq!(taints.len(), 1);
            assert_eq!(
                (taints[0].key.as_str(), taints[0].effect.as_str()),
                ("node.kubernetes.io/not-ready", "NoSchedule")
            );
            assert_eq!(spec.pod_cidr.as_deref(), Some(node.pod_cidr.as_str()));
            let status = o.status.unwrap();
            let conditions = status.conditions.unwrap();
            assert_eq!(conditions.len(), 1);
            let ready = &conditions[0];
            assert_eq!(
                (ready.type_.as_str(), ready.status.as_str()),
                ("Ready", "False")
            );
            assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
            assert_eq!(ready.last_transition_time.as_ref().map(|t| t.0), Some(now));
            assert_eq!(status.addresses.is_some(), shared, "{node:?}");
            let labels = o.metadata.labels.unwrap();
            assert_eq!(labels.contains_key(SHARD_LABEL), shared);
            assert_eq!(labels[SIM_NODE_LABEL], "true");
            // The shared one of the two is in zone a, the other in none.
            assert_eq!(
                labels.get(ZONE_LABEL).map(String::as_str),
                shared.then_some("a")
            );
            let annotations = o.metadata.annotations.unwrap();
            assert_eq!(annotations[CONTROLLER_MANAGED_ATTACH_DETACH], "true");
        }
    }
}
