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
    pub taints: Vec<Taint>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// What the scheduler may give pods here (none: not reported, no limit).
    #[serde(default)]
    pub allocatable: Option<Resources>,
}

/// A node's taint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.key, self.effect)
    }
}

/// CPU, memory and a pod slot: a pod's requests or a node's allocatable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub cpu_milli: i64,
    /// Bytes.
    pub memory: i64,
    pub pods: i64,
}

impl Resources {
    pub fn plus(self, o: Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli.saturating_add(o.cpu_milli),
            memory: self.memory.saturating_add(o.memory),
            pods: self.pods.saturating_add(o.pods),
        }
    }

    pub fn minus(self, o: Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli.saturating_sub(o.cpu_milli),
            memory: self.memory.saturating_sub(o.memory),
            pods: self.pods.saturating_sub(o.pods),
        }
    }
}

/// A pod's toleration, as the scheduler matches it against a taint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TolerationSpec {
    /// Empty with `Exists`: every key.
    pub key: String,
    /// `Exists`, or `Equal` (the default).
    pub operator: String,
    pub value: String,
    /// Empty: every effect.
    pub effect: String,
}

impl TolerationSpec {
    /// `ToleratesTaint` (k8s.io/api/core/v1/toleration.go).
    pub fn tolerates(&self, t: &Taint) -> bool {
        if !self.effect.is_empty() && self.effect != t.effect {
            return false;
        }
        if !self.key.is_empty() && self.key != t.key {
            return false;
        }
        match self.operator.as_str() {
            "Exists" => true,
            "" | "Equal" => self.value == t.value,
            _ => false,
        }
    }
}

/// One of a node selector's terms (the terms are ORed, a term's
/// requirements ANDed): `matchExpressions` on labels, `matchFields` on
/// `metadata.name`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTerm {
    pub labels: Vec<Requirement>,
    pub fields: Vec<Requirement>,
}

impl NodeTerm {
    /// As the scheduler's node affinity matches (an empty term matches no
    /// node; `Gt`/`Lt` compare integers).
    pub fn matches(&self, node: &Node) -> bool {
        if self.labels.is_empty() && self.fields.is_empty() {
            return false;
        }
        let name = BTreeMap::from([("metadata.name".to_owned(), node.name.clone())]);
        self.labels.iter().all(|r| r.matches_node(&node.labels))
            && self.fields.iter().all(|r| r.matches_node(&name))
    }
}

/// Any term matches (none given: every node).
pub fn terms_match(terms: &[NodeTerm], node: &Node) -> bool {
    terms.is_empty() || terms.iter().any(|t| t.matches(node))
}

/// A hard topology spread constraint (`whenUnsatisfiable: DoNotSchedule`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spread {
    pub max_skew: i32,
    pub topology_key: String,
    pub selector: LabelSelector,
}

/// A required pod anti-affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AntiAffinity {
    pub topology_key: String,
    pub selector: LabelSelector,
    /// The namespaces it looks in (empty: the pod's own).
    pub namespaces: Vec<String>,
}

/// What the scheduler weighs to place a pod (the filters `predict` models).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    pub requests: Resources,
    pub tolerations: Vec<TolerationSpec>,
    pub node_selector: BTreeMap<String, String>,
    /// `requiredDuringSchedulingIgnoredDuringExecution` node affinity.
    pub node_terms: Vec<NodeTerm>,
    pub spread: Vec<Spread>,
    pub anti_affinity: Vec<AntiAffinity>,
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
    #[serde(default)]
    pub scheduling: Scheduling,
}

/// Examples for tests (here and in the crates above, feature `examples`).
#[cfg(any(test, feature = "examples"))]
impl Node {
    /// A Ready worker.
    pub fn example(name: &str) -> Node {
        Node {
            name: name.into(),
            ready: "True".into(),
            labels: BTreeMap::from([("kubernetes.io/hostname".to_owned(), name.to_owned())]),
            ..Node::default()
        }
    }

    /// A Ready worker in `zone`, with room for `cpu_milli` of requests.
    pub fn in_zone(name: &str, zone: &str, cpu_milli: i64) -> Node {
        let mut n = Node::example(name);
        n.labels
            .insert(crate::disruption::ZONE_LABEL.to_owned(), zone.to_owned());
        n.allocatable = Some(Resources {
            cpu_milli,
            memory: 1 << 40,
            pods: 110,
        });
        n
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
            scheduling: Scheduling {
                requests: Resources {
                    pods: 1,
                    ..Resources::default()
                },
                ..Scheduling::default()
            },
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

impl Requirement {
    /// As a node selector requirement matches labels (`Gt`/`Lt` compare
    /// the value as an integer with the one given).
    pub fn matches_node(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let int = |s: &str| s.parse::<i64>().ok();
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| self.values.contains(v)),
            "NotIn" => value.is_none_or(|v| !self.values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            "Gt" | "Lt" => {
                let (Some(v), [bound]) = (value.and_then(|v| int(v)), self.values.as_slice())
                else {
                    return false;
                };
                let Some(b) = int(bound) else { return false };
                if self.operator == "Gt" { v > b } else { v < b }
            }
            _ => false,
        }
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
    /// Its volume's required node affinity (a local or zonal volume): the
    /// nodes a pod using it can run on (empty: any).
    #[serde(default)]
    pub node_terms: Vec<NodeTerm>,
}
