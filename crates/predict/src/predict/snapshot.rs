//! A cluster as `predict` reads it: only what the rules need, in plain
//! types (the I/O crate fills them from one paged list per kind).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::timeline::Toleration;

/// What was read, all of it at about the same moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    /// Deployments and StatefulSets, for their replica counts.
    pub workloads: Vec<Workload>,
    pub services: Vec<Service>,
    pub budgets: Vec<Budget>,
    /// PersistentVolumeClaims with what their volumes allow and where they
    /// are attached.
    pub claims: Vec<Claim>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    pub name: String,
    /// `True`, `False`, `Unknown`, or empty when the Node has no Ready condition.
    pub ready: String,
    pub unschedulable: bool,
    /// Carries `node-role.kubernetes.io/control-plane`.
    pub control_plane: bool,
    /// `key:Effect` of each taint.
    pub taints: Vec<String>,
}

/// Who keeps a pod alive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "name")]
pub enum Owner {
    /// Through its ReplicaSet (the Deployment's name when the ReplicaSet
    /// has one as its owner, else the ReplicaSet's).
    Deployment(String),
    ReplicaSet(String),
    StatefulSet(String),
    DaemonSet(String),
    Job(String),
    /// A static pod: the API server holds its mirror; the kubelet owns it.
    Static,
    /// An owner of another kind: `Kind/name`.
    Other(String),
    /// A bare pod: nothing recreates it.
    None,
}

impl Owner {
    /// `Deployment/web`, `StatefulSet/db`, `static`, `none`.
    pub fn label(&self) -> String {
        match self {
            Owner::Deployment(n) => format!("Deployment/{n}"),
            Owner::ReplicaSet(n) => format!("ReplicaSet/{n}"),
            Owner::StatefulSet(n) => format!("StatefulSet/{n}"),
            Owner::DaemonSet(n) => format!("DaemonSet/{n}"),
            Owner::Job(n) => format!("Job/{n}"),
            Owner::Static => "static pod".to_owned(),
            Owner::Other(k) => k.clone(),
            Owner::None => "no owner".to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    /// Where it is bound (none: not scheduled).
    pub node: Option<String>,
    pub owner: Owner,
    pub phase: String,
    pub ready: bool,
    /// Has a deletionTimestamp already.
    pub terminating: bool,
    pub labels: BTreeMap<String, String>,
    /// `node.kubernetes.io/unreachable:NoExecute`.
    pub unreachable: Toleration,
    /// `node.kubernetes.io/not-ready:NoExecute`.
    pub not_ready: Toleration,
    /// The PersistentVolumeClaims its volumes name.
    pub claims: Vec<String>,
    /// Has an emptyDir volume (a drain must be told to delete its data).
    pub empty_dir: bool,
    /// `terminationGracePeriodSeconds` (30 when unset): how long a pod
    /// asked to stop may take.
    pub grace_seconds: i64,
    pub priority: i32,
}

/// Examples for tests (here and in the crates above, feature `examples`).
#[cfg(any(test, feature = "examples"))]
impl Node {
    /// A Ready worker.
    pub fn example(name: &str) -> Node {
        Node {
            name: name.into(),
            ready: "True".into(),
            ..Node::default()
        }
    }
}

#[cfg(any(test, feature = "examples"))]
impl Pod {
    /// A Running, Ready pod of `owner` on `node`, labelled `app=APP`,
    /// tolerating both taints 300 s (the admission plugin's default; a
    /// DaemonSet's pod tolerates unreachable for ever, as its controller
    /// sets).
    pub fn example(namespace: &str, name: &str, node: &str, owner: Owner, app: &str) -> Pod {
        let daemon = matches!(owner, Owner::DaemonSet(_));
        Pod {
            namespace: namespace.into(),
            name: name.into(),
            node: Some(node.into()),
            owner,
            phase: "Running".into(),
            ready: true,
            terminating: false,
            labels: BTreeMap::from([("app".to_owned(), app.to_owned())]),
            unreachable: if daemon {
                Toleration::Forever
            } else {
                Toleration::Seconds(300)
            },
            not_ready: Toleration::Seconds(300),
            claims: Vec::new(),
            empty_dir: false,
            grace_seconds: 30,
            priority: 0,
        }
    }
}

impl Pod {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Running, or about to: what a node failure can take away.
    pub fn live(&self) -> bool {
        !matches!(self.phase.as_str(), "Succeeded" | "Failed")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// `Deployment` or `StatefulSet`.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
}

/// A Service with the endpoints its EndpointSlices list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    pub namespace: String,
    pub name: String,
    pub endpoints: Vec<Endpoint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The pod behind it (`targetRef`), when it is one.
    pub pod: Option<String>,
    pub node: Option<String>,
    pub ready: bool,
}

/// A label selector: `matchLabels` and `matchExpressions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`.
    pub operator: String,
    pub values: Vec<String>,
}

impl LabelSelector {
    /// As the API server matches: every label and every expression holds
    /// (an empty selector matches every pod; an unknown operator none).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator.as_str() {
                    "In" => value.is_some_and(|v| r.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !r.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

/// A PodDisruptionBudget as its status says now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub namespace: String,
    pub name: String,
    /// None: the budget selects no pod (a null selector).
    pub selector: Option<LabelSelector>,
    pub disruptions_allowed: i32,
    pub current_healthy: i32,
    pub desired_healthy: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub namespace: String,
    pub name: String,
    /// Its bound volume, if any.
    pub volume: Option<String>,
    /// `ReadWriteOnce` or `ReadWriteOncePod` among its access modes.
    pub single_node: bool,
    /// Nodes a VolumeAttachment attaches its volume to.
    pub attached_to: Vec<String>,
}
