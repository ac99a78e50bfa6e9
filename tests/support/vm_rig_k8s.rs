//! The rig's Kubernetes side: the Node object a rig VM plays, and watches on
//! its Ready condition and Lease.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};

use super::{NODE_IP, RIG_NODE_LABEL, Rig};

/// Creates the Node `rig` plays (kwok registers none): kwok's annotation, the
/// domain UUID as `systemUUID`, the guest's address as InternalIP.
pub async fn create_node(client: &kube::Client, rig: &Rig) -> Result<(), String> {
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": rig.node,
            "labels": {
                "kubernetes.io/hostname": rig.node,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                RIG_NODE_LABEL: "true",
            },
            // kwok manages only Nodes that say they are its (it registers none).
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "status": {
            "nodeInfo": {"systemUUID": rig.uuid},
            "addresses": [
                {"type": "InternalIP", "address": NODE_IP},
                {"type": "Hostname", "address": rig.node},
            ],
        },
    }))
    .map_err(|e| format!("the Node object: {e}"))?;
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .map(|_| ())
        .map_err(|e| format!("creating Node {}: {e}", rig.node))
}

/// Watches a Node until `done` says so; the time it took, or `None` when
/// `timeout` passed first.
async fn watch_node(
    client: &kube::Client,
    node: &str,
    timeout: Duration,
    mut done: impl FnMut(&Node) -> bool,
) -> Option<Duration> {
    let start = Instant::now();
    let api: Api<Node> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    // A broken watch is retried (with backoff) until the timeout.
    let mut stream = std::pin::pin!(
        watcher(api, config)
            .default_backoff()
            .applied_objects()
            .filter_map(|r| async move { r.ok() })
    );
    let found = tokio::time::timeout(timeout, async {
        while let Some(n) = stream.next().await {
            if done(&n) {
                return;
            }
        }
    })
    .await;
    found.ok().map(|()| start.elapsed())
}

/// Watches a Node until its Ready condition has status `want`; the time it
/// took, or an error naming what was seen last.
pub async fn wait_node_ready(
    client: &kube::Client,
    node: &str,
    want: &str,
    timeout: Duration,
) -> Result<Duration, String> {
    let mut last = None;
    let seen = watch_node(client, node, timeout, |n| {
        last = ready_status(n);
        last.as_deref() == Some(want)
    })
    .await;
    seen.ok_or_else(|| {
        format!(
            "node {node}: Ready={want} not reached within {timeout:?} (last seen Ready={})",
            last.as_deref().unwrap_or("none")
        )
    })
}

/// Watches a Node until it carries none of the node lifecycle controller's
/// taints (`node.kubernetes.io/...`): a Node just Ready keeps its not-ready
/// or unreachable NoSchedule taint until the controller's next pass, and
/// pods made meanwhile go elsewhere.
pub async fn wait_node_untainted(
    client: &kube::Client,
    node: &str,
    timeout: Duration,
) -> Result<Duration, String> {
    let mut last = Vec::new();
    let seen = watch_node(client, node, timeout, |n| {
        last = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| t.key.starts_with("node.kubernetes.io/"))
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        last.is_empty()
    })
    .await;
    seen.ok_or_else(|| {
        format!(
            "node {node}: still tainted after {timeout:?} ({})",
            last.join(", ")
        )
    })
}

/// Watches the node's Lease (`kube-node-lease/<node>`) until its renewTime
/// differs from the one first seen: the agent heartbeats again.
pub async fn wait_lease_renewed(
    client: &kube::Client,
    node: &str,
    timeout: Duration,
) -> Result<Duration, String> {
    let start = Instant::now();
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut stream = std::pin::pin!(
        watcher(api, config)
            .default_backoff()
            .applied_objects()
            .filter_map(|r| async move { r.ok() })
    );
    let renewed = |l: &Lease| l.spec.as_ref().and_then(|s| s.renew_time.clone());
    let found = tokio::time::timeout(timeout, async {
        let mut first = None;
        while let Some(lease) = stream.next().await {
            let seen = renewed(&lease);
            match &first {
                None => first = Some(seen),
                Some(f) if *f != seen => return,
                Some(_) => {}
            }
        }
    })
    .await;
    found
        .map(|()| start.elapsed())
        .map_err(|_| format!("node {node}: lease not renewed within {timeout:?}"))
}

/// The status of a Node's Ready condition.
pub fn ready_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}
