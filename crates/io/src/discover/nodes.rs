//! A cluster's nodes as target resolution and the zone rules see them: each
//! one's labels, zone and whether its Ready condition is True (read-only).

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt as _;
use kube::api::Api;

use crate::actions::{self, ApiError};
use crate::disruption::ZoneNode;
use crate::scenario::resolve::NodeLabels;

/// Whether `node`'s Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `node` for the zone rules.
pub fn zone_node(node: &Node) -> ZoneNode {
    ZoneNode::of(&node.name_any(), node.labels(), is_ready(node))
}

/// `node` for target resolution.
pub fn labelled(node: &Node) -> NodeLabels {
    NodeLabels {
        name: node.name_any(),
        labels: node.labels().clone(),
    }
}

/// Every node of the cluster, both ways, in name order.
pub async fn list(client: &kube::Client) -> Result<Vec<(NodeLabels, ZoneNode)>, ApiError> {
    let api: Api<Node> = Api::all(client.clone());
    let mut out = actions::list_paged(&api, |n: Node| Some((labelled(&n), zone_node(&n)))).await?;
    out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    Ok(out)
}
