//! Typed transitions of Nodes and Pods, and the world they fold into.
//!
//! The observer turns every watch event into [`Transition`]s; the timeline is
//! the ordered list of them. Folding transitions up to a time gives the
//! [`World`] at that time, which is what expectations are evaluated on. Pure:
//! times are milliseconds since the run started, supplied by the caller.

pub mod endpoints;
pub mod metrics;
pub mod node_times;
mod replacements;
mod storage;
pub mod volumes;
pub mod zones;

pub use storage::{
    AttachmentChange, AttachmentView, Attachments, EventView, FAILED_ATTACH, multi_attach_volume,
};

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use crate::plan::time::Ms;

/// One observed change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// When nodefall saw it.
    pub at: Ms,
    /// The server's own time for it, where the object has one (condition
    /// `lastTransitionTime`, taint `timeAdded`, `deletionTimestamp`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<Timestamp>,
    pub object: ObjectRef,
    pub change: Change,
    /// Who made the change, where known: the field manager that last wrote
    /// the field (a Node's taints or `unschedulable`), or the audit log's
    /// user (sim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A transition seen at `at` without a server time: the tests' timelines.
#[cfg(any(test, feature = "examples"))]
pub fn seen(at: Ms, object: ObjectRef, change: Change) -> Transition {
    Transition {
        by: None,
        at,
        server_time: None,
        object,
        change,
    }
}

/// A pod's labels, shared: the record, every world folded from it and
/// every copy of a transition point at one map (a two-label BTreeMap takes
/// about half a kilobyte; at 10,000 pods the copies were tens of MB).
pub type Labels = std::sync::Arc<BTreeMap<String, String>>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ObjectRef {
    Node {
        name: String,
    },
    Pod {
        name: String,
        uid: String,
    },
    Event {
        name: String,
    },
    VolumeAttachment {
        name: String,
    },
    /// A PersistentVolumeClaim of the scenario namespace.
    Pvc {
        name: String,
    },
    /// An EndpointSlice of a Service of the scenario namespace.
    EndpointSlice {
        name: String,
        service: String,
    },
    /// A remediator's object about a node: a medik8s remediation
    /// (SelfNodeRemediation, FenceAgentsRemediation,
    /// MachineDeletionRemediation: named after the node) or a cluster-api
    /// Machine (its `status.nodeRef`). `name` is `namespace/name`.
    Remediation {
        resource: String,
        name: String,
        node: String,
    },
}

impl ObjectRef {
    pub fn name(&self) -> &str {
        match self {
            ObjectRef::Node { name }
            | ObjectRef::Pod { name, .. }
            | ObjectRef::Event { name }
            | ObjectRef::VolumeAttachment { name }
            | ObjectRef::Pvc { name }
            | ObjectRef::EndpointSlice { name, .. }
            | ObjectRef::Remediation { name, .. } => name,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Change {
    NodeAdded,
    NodeDeleted,
    /// The Ready condition's status (`True`, `False`, `Unknown`), reason
    /// and message (why a kubelet says NotReady: "container runtime is
    /// down", "PLEG is not healthy: ...", "node is shutting down"; absent
    /// from results before it was recorded).
    NodeReady {
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    TaintAdded {
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        effect: String,
    },
    TaintRemoved {
        key: String,
        effect: String,
    },
    Unschedulable {
        value: bool,
    },
    PodAdded {
        labels: Labels,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
        /// The PersistentVolumeClaims its volumes use (absent in results
        /// recorded before volumes were observed).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        claims: Vec<String>,
    },
    PodScheduled {
        node: String,
    },
    PodReady {
        ready: bool,
    },
    PodPhase {
        phase: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The pod's NoExecute tolerations of unreachable and not-ready nodes
    /// (fixed at creation by the pod spec or the DefaultTolerationSeconds
    /// admission plugin): how long it stays on such a node.
    PodTolerations {
        unreachable: Toleration,
        not_ready: Toleration,
    },
    /// deletionTimestamp set.
    PodTerminating,
    PodDeleted,
    PodDisruptionTarget {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A CSI VolumeAttachment: which volume on which node, attached or not.
    VolumeAttachment {
        node: String,
        volume: String,
        attached: bool,
    },
    VolumeAttachmentDeleted,
    /// A Kubernetes Event worth showing (NodeNotReady, TaintManagerEviction, ...).
    Event {
        reason: String,
        involved: String,
        message: String,
        /// The event's `count` (a repeat of the same event bumps it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<i32>,
    },
    /// A claim bound to (or re-bound to) a PersistentVolume (`spec.volumeName`).
    PvcBound {
        volume: String,
    },
    PvcDeleted,
    /// An endpoint of an EndpointSlice appeared or its conditions changed.
    Endpoint {
        address: String,
        /// The pod behind it (`targetRef`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pod: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        ready: bool,
        serving: bool,
        terminating: bool,
    },
    /// An endpoint left its slice.
    EndpointRemoved {
        address: String,
    },
    EndpointSliceDeleted,
    /// A remediator's object created during the run (not found by the
    /// first list).
    RemediationCreated,
    /// Its deletionTimestamp set (a Machine being deleted).
    RemediationDeleting,
    RemediationDeleted,
}

impl Change {
    /// One short line for tables and logs.
    pub fn describe(&self) -> String {
        match self {
            Change::NodeAdded => "registered".into(),
            Change::NodeDeleted => "deleted".into(),
            Change::NodeReady { status, reason, .. } => match reason {
                Some(r) => format!("Ready={status} ({r})"),
                None => format!("Ready={status}"),
            },
            Change::TaintAdded { key, value, effect } => match value {
                Some(v) => format!("taint + {key}={v}:{effect}"),
                None => format!("taint + {key}:{effect}"),
            },
            Change::TaintRemoved { key, effect } => format!("taint - {key}:{effect}"),
            Change::Unschedulable { value: true } => "cordoned".into(),
            Change::Unschedulable { value: false } => "uncordoned".into(),
            Change::PodAdded { owner, .. } => match owner {
                Some(o) => format!("created by {o}"),
                None => "created".into(),
            },
            Change::PodScheduled { node } => format!("scheduled to {node}"),
            Change::PodReady { ready } => {
                format!("Ready={}", if *ready { "True" } else { "False" })
            }
            Change::PodPhase { phase, reason } => match reason {
                Some(r) => format!("phase {phase} ({r})"),
                None => format!("phase {phase}"),
            },
            Change::PodTolerations {
                unreachable,
                not_ready,
            } => format!("tolerates unreachable {unreachable}, not-ready {not_ready}"),
            Change::PodTerminating => "Terminating".into(),
            Change::PodDeleted => "deleted".into(),
            Change::PodDisruptionTarget { reason } => {
                format!("DisruptionTarget ({})", reason.as_deref().unwrap_or("-"))
            }
            Change::Event {
                reason,
                involved,
                message,
                count,
            } => match count {
                Some(n) if *n > 1 => format!("event {reason} on {involved} (x{n}): {message}"),
                _ => format!("event {reason} on {involved}: {message}"),
            },
            Change::PvcBound { volume } => format!("bound to volume {volume}"),
            Change::PvcDeleted => "claim deleted".into(),
            Change::VolumeAttachment {
                node,
                volume,
                attached,
            } => format!(
                "volume {volume} {} {node}",
                if *attached {
                    "attached to"
                } else {
                    "attaching to"
                }
            ),
            Change::VolumeAttachmentDeleted => "volume attachment deleted".into(),
            Change::Endpoint {
                address,
                pod,
                node,
                ready,
                serving,
                terminating,
            } => {
                let mut text = format!("endpoint {address}");
                if let Some(p) = pod {
                    text.push_str(&format!(" (pod {p}"));
                    if let Some(n) = node {
                        text.push_str(&format!(" on {n}"));
                    }
                    text.push(')');
                }
                let state = |b: bool| if b { "True" } else { "False" };
                text.push_str(&format!(
                    " ready={} serving={} terminating={}",
                    state(*ready),
                    state(*serving),
                    state(*terminating)
                ));
                text
            }
            Change::EndpointRemoved { address } => format!("endpoint {address} removed"),
            Change::EndpointSliceDeleted => "endpoint slice deleted".into(),
            Change::RemediationCreated => "created".into(),
            Change::RemediationDeleting => "being deleted".into(),
            Change::RemediationDeleted => "deleted".into(),
        }
    }
}

/// How long a pod stays bound to a node with a NoExecute taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Toleration {
    /// No matching toleration: evicted at once.
    None,
    /// `tolerationSeconds` (the smallest of the matching tolerations).
    Seconds(i64),
    /// Tolerations without `tolerationSeconds`: never evicted.
    Forever,
}

impl std::fmt::Display for Toleration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Toleration::None => f.write_str("0s (none)"),
            Toleration::Seconds(s) => write!(f, "{s}s"),
            Toleration::Forever => f.write_str("forever"),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
    /// Who added it, where known (the transition's `by`).
    pub by: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    pub exists: bool,
    pub ready: Option<String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodView {
    pub name: String,
    pub uid: String,
    pub labels: Labels,
    pub node: Option<String>,
    pub ready: bool,
    pub phase: String,
    pub reason: Option<String>,
    pub terminating: bool,
    /// Unreachable and not-ready NoExecute tolerations, once seen.
    pub tolerations: Option<(Toleration, Toleration)>,
}

/// Nodes, pods, volumes and events as the transitions so far describe them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct World {
    pub nodes: BTreeMap<String, NodeView>,
    /// Live pods by uid (deleted pods are removed).
    pub pods: BTreeMap<String, PodView>,
    /// Labels of every pod seen so far by name, deleted ones included: an
    /// event names its pod by name, and often outlives it.
    pub pod_labels: BTreeMap<String, Labels>,
    /// VolumeAttachments by name (deleted ones are removed).
    pub attachments: BTreeMap<String, AttachmentView>,
    /// Claim name -> bound PersistentVolume name.
    pub claims: BTreeMap<String, String>,
    /// Every recorded event occurrence, in observation order.
    pub events: Vec<EventView>,
    /// Endpoints of the namespace's Services by (slice, address).
    pub endpoints: BTreeMap<endpoints::EndpointKey, endpoints::EndpointView>,
}

impl World {
    pub fn apply(&mut self, t: &Transition) {
        match &t.object {
            ObjectRef::Node { name } => {
                let node = self.nodes.entry(name.clone()).or_default();
                match &t.change {
                    Change::NodeAdded => node.exists = true,
                    Change::NodeDeleted => *node = NodeView::default(),
                    Change::NodeReady { status, .. } => node.ready = Some(status.clone()),
                    Change::TaintAdded { key, value, effect } => node.taints.push(Taint {
                        key: key.clone(),
                        value: value.clone(),
                        effect: effect.clone(),
                        by: t.by.clone(),
                    }),
                    Change::TaintRemoved { key, effect } => {
                        node.taints
                            .retain(|x| !(x.key == *key && x.effect == *effect));
                    }
                    Change::Unschedulable { value } => node.unschedulable = *value,
                    _ => {}
                }
            }
            ObjectRef::Pod { name, uid } => {
                if t.change == Change::PodDeleted {
                    self.pods.remove(uid);
                    return;
                }
                let pod = self.pods.entry(uid.clone()).or_insert_with(|| PodView {
                    name: name.clone(),
                    uid: uid.clone(),
                    phase: "Pending".into(),
                    ..PodView::default()
                });
                match &t.change {
                    Change::PodAdded { labels, .. } => {
                        pod.labels = labels.clone();
                        self.pod_labels.insert(name.clone(), labels.clone());
                    }
                    Change::PodScheduled { node } => pod.node = Some(node.clone()),
                    Change::PodReady { ready } => pod.ready = *ready,
                    Change::PodPhase { phase, reason } => {
                        pod.phase = phase.clone();
                        pod.reason = reason.clone();
                    }
                    Change::PodTerminating => pod.terminating = true,
                    Change::PodTolerations {
                        unreachable,
                        not_ready,
                    } => pod.tolerations = Some((*unreachable, *not_ready)),
                    _ => {}
                }
            }
            ObjectRef::Event { .. }
            | ObjectRef::VolumeAttachment { .. }
            | ObjectRef::Pvc { .. } => {
                storage::apply(self, t);
            }
            ObjectRef::EndpointSlice { .. } => endpoints::apply(self, t),
            // acts, judged from the transitions themselves (record::remediation)
            ObjectRef::Remediation { .. } => {}
        }
    }

    /// The world after every transition observed at or before `at`.
    pub fn at(transitions: &[Transition], at: Ms) -> World {
        let mut world = World::default();
        for t in transitions.iter().take_while(|t| t.at <= at) {
            world.apply(t);
        }
        world
    }
}

/// A change of node `name` at `at`, for tests.
#[cfg(any(test, feature = "examples"))]
pub fn node_change(at: Ms, name: &str, change: Change) -> Transition {
    Transition {
        by: None,
        at,
        server_time: None,
        object: ObjectRef::Node { name: name.into() },
        change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(at: Ms, change: Change) -> Transition {
        node_change(at, "w1", change)
    }

    #[test]
    fn folds_node_and_pod_changes_in_order() {
        let pod = |at, change| Transition {
            by: None,
            at,
            server_time: None,
            object: ObjectRef::Pod {
                name: "web-0".into(),
                uid: "u1".into(),
            },
            change,
        };
        let ts = vec![
            node(0, Change::NodeAdded),
            node(
                0,
                Change::NodeReady {
                    status: "True".into(),
                    reason: None,
                    message: None,
                },
            ),
            pod(
                1,
                Change::PodAdded {
                    labels: Labels::new([("app".to_owned(), "web".to_owned())].into()),
                    owner: None,
                    claims: Vec::new(),
                },
            ),
            pod(2, Change::PodScheduled { node: "w1".into() }),
            pod(3, Change::PodReady { ready: true }),
            node(
                10,
                Change::NodeReady {
                    status: "Unknown".into(),
                    reason: Some("NodeStatusUnknown".into()),
                    message: None,
                },
            ),
            node(
                11,
                Change::TaintAdded {
                    key: "node.kubernetes.io/unreachable".into(),
                    value: None,
                    effect: "NoExecute".into(),
                },
            ),
            pod(30, Change::PodTerminating),
            pod(40, Change::PodDeleted),
        ];
        let w = World::at(&ts, 5);
        assert_eq!(w.nodes["w1"].ready.as_deref(), Some("True"));
        assert!(w.pods["u1"].ready && w.pods["u1"].node.as_deref() == Some("w1"));
        let w = World::at(&ts, 30);
        assert_eq!(w.nodes["w1"].ready.as_deref(), Some("Unknown"));
        assert_eq!(w.nodes["w1"].taints.len(), 1);
        assert!(w.pods["u1"].terminating);
        assert!(World::at(&ts, 40).pods.is_empty());
    }
}
