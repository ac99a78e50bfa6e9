//! A validated scenario: every reference resolved, every name typed, windows
//! parsed (not yet evaluated: that needs a timing profile, see `plan`).
//! Its conditions, by family, are in [`condition`].

pub mod condition;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::expr::{Expr, WindowSpec};
use super::load::Source;
use super::manifest::ManifestDoc;
use super::model::{BackendKind, Cleanup, FaultKind, TaintEffect};
use crate::profile::Var;
use crate::scenario::selector::Selector;

pub use condition::{
    Cmp, Condition, EndOfRunCond, EventCond, NodeCond, PodsCond, PreflightCond, ProbeCond,
    ServiceCond, VolumeCond,
};

#[derive(Debug, Clone)]
pub struct Checked {
    pub source: Source,
    pub name: String,
    pub description: Option<String>,
    pub namespace: String,
    pub backend: BackendKind,
    /// The clusters it may touch (empty: any), checked before anything changes.
    pub pins: Vec<super::model::ClusterPin>,
    pub timing: Vec<(Var, Duration)>,
    pub setup: Setup,
    pub targets: Vec<Target>,
    pub steps: Vec<Step>,
    pub cleanup: Cleanup,
    pub libvirt: super::model::LibvirtMachines,
    /// The `command:` section (command backend), checked.
    pub command: Option<crate::scenario::command::CommandFile>,
    /// `abortIf:` guards, in file order.
    pub guards: Vec<Guard>,
    /// `probe:`: HTTP probes, in file order.
    pub probes: Vec<Probe>,
}

/// A checked `probe:` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    pub name: String,
    pub urls: Vec<String>,
    pub interval: Duration,
    pub timeout: Duration,
    /// Inclusive status ranges counted as success.
    pub status: Vec<(u16, u16)>,
    pub max_requests: u64,
    pub max_duration: Duration,
    pub gap: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct ManifestFile {
    /// As written in the scenario.
    pub file: String,
    /// Resolved against the scenario's directory.
    pub path: PathBuf,
    /// Backends it applies to (empty: all).
    pub only: Vec<BackendKind>,
    /// Its objects, read and checked at validate time (empty documents left out).
    #[serde(skip)]
    pub docs: Vec<ManifestDoc>,
}

impl ManifestFile {
    pub fn applies_to(&self, backend: BackendKind) -> bool {
        self.only.is_empty() || self.only.contains(&backend)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
    Pvc,
    Pdb,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "deployment",
            WorkloadKind::StatefulSet => "statefulset",
            WorkloadKind::DaemonSet => "daemonset",
            WorkloadKind::Pvc => "pvc",
            WorkloadKind::Pdb => "pdb",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ReadyCheck {
    pub kind: WorkloadKind,
    pub name: String,
    pub replicas: Option<u32>,
    pub timeout: Duration,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Setup {
    pub apply: Vec<ManifestFile>,
    pub wait_ready: Vec<ReadyCheck>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TargetSelector {
    Name(String),
    Role(String),
    MostPods(Selector),
    /// A set: the nodes that match, or the first of them by name.
    Nodes {
        selector: Selector,
        pick: Pick,
    },
}

/// Which of the nodes a set's selector matches it takes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Pick {
    All,
    /// The first this many, by name.
    Count(u32),
    /// The first this share (0-100, rounded up to a whole node), by name.
    Percent(f64),
}

impl Pick {
    /// How many of `matched` nodes it takes; None when it wants more than
    /// there are.
    pub fn of(self, matched: usize) -> Option<usize> {
        match self {
            Pick::All => Some(matched),
            Pick::Count(n) => usize::try_from(n).ok().filter(|n| *n <= matched),
            Pick::Percent(p) => {
                // 0 <= share <= matched: validation keeps p in (0, 100].
                let share = (matched as f64 * p / 100.0).ceil();
                Some((share as usize).clamp(matched.min(1), matched))
            }
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: String,
    pub selector: TargetSelector,
    pub exclude: Vec<String>,
}

impl Target {
    /// A set of nodes (`nodes:`), which only a fault step can name.
    pub fn is_set(&self) -> bool {
        matches!(self.selector, TargetSelector::Nodes { .. })
    }

    pub fn describe(&self) -> String {
        let base = match &self.selector {
            TargetSelector::Name(n) => format!("node `{n}`"),
            TargetSelector::Role(r) => format!("first node (by name) with role `{r}`"),
            TargetSelector::MostPods(s) => format!("node running most pods matching `{s}`"),
            TargetSelector::Nodes { selector, pick } => match pick {
                Pick::All => format!("every node matching `{selector}`"),
                Pick::Count(n) => format!("the first {n} nodes (by name) matching `{selector}`"),
                Pick::Percent(p) => format!(
                    "the first {p}% (rounded up, by name) of the nodes matching `{selector}`"
                ),
            },
        };
        if self.exclude.is_empty() {
            base
        } else {
            format!("{base}, other than {}", self.exclude.join(", "))
        }
    }
}

#[derive(Debug, Clone)]
pub struct Step {
    /// Position in `steps` (0-based).
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    /// YAML path, for diagnostics (`steps[3]`).
    pub path: String,
    pub kind: StepKind,
}

impl Step {
    /// `#4` or `#4 (id)`, for messages and reports.
    pub fn label(&self) -> String {
        match (&self.id, &self.name) {
            (Some(id), _) => format!("#{} ({id})", self.index + 1),
            (None, Some(n)) => format!("#{} ({n})", self.index + 1),
            _ => format!("#{}", self.index + 1),
        }
    }
}

#[derive(Debug, Clone)]
pub enum StepKind {
    Fault { fault: FaultKind, node: String },
    Action(Action),
    Expect(Expectation),
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Drain {
    pub nodes: Vec<String>,
    pub ignore_daemonsets: bool,
    pub delete_emptydir_data: bool,
    pub force: bool,
    pub grace_period: Option<Duration>,
    pub timeout: Duration,
    pub pod_selector: Option<Selector>,
    pub retry_interval: Duration,
}

#[derive(Debug, Clone)]
pub enum Action {
    Apply(Vec<ManifestFile>),
    Taint {
        node: String,
        key: String,
        value: Option<String>,
        effect: TaintEffect,
    },
    Untaint {
        node: String,
        key: String,
        effect: Option<TaintEffect>,
    },
    Cordon {
        node: String,
    },
    Uncordon {
        node: String,
    },
    Drain(Drain),
    DeleteNode {
        node: String,
    },
    ForceDeletePods {
        selector: Option<Selector>,
        node: Option<String>,
    },
    Scale {
        kind: WorkloadKind,
        name: String,
        replicas: u32,
    },
    /// Sleep for a profile-relative duration.
    WaitFor {
        duration: Expr,
    },
    /// Wait until a condition holds, failing after `timeout`.
    WaitUntil {
        subject: Subject,
        conditions: Vec<Condition>,
        timeout: Expr,
    },
    DeleteNamespace {
        name: String,
    },
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::Apply(_) => "apply",
            Action::Taint { .. } => "taint",
            Action::Untaint { .. } => "untaint",
            Action::Cordon { .. } => "cordon",
            Action::Uncordon { .. } => "uncordon",
            Action::Drain(_) => "drain",
            Action::DeleteNode { .. } => "delete-node",
            Action::ForceDeletePods { .. } => "force-delete-pods",
            Action::Scale { .. } => "scale",
            Action::WaitFor { .. } | Action::WaitUntil { .. } => "wait",
            Action::DeleteNamespace { .. } => "delete-namespace",
        }
    }
}

/// What an expectation looks at.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Subject {
    /// A target's Node object.
    Node(String),
    /// Pods of the scenario namespace matching a selector, optionally only
    /// those on (or not on) a target.
    Pods {
        selector: Selector,
        on: Option<String>,
        not_on: Option<String>,
    },
    /// A PersistentVolumeClaim of the scenario namespace (its bound volume's
    /// VolumeAttachments), optionally only on a target's node.
    Pvc { claim: String, on: Option<String> },
    /// A Service of the scenario namespace (its EndpointSlices'
    /// endpoints), optionally only those on (or not on) a target's node.
    Service {
        name: String,
        on: Option<String>,
        not_on: Option<String>,
    },
    /// A `probe:` by name: its requests, not a state on the timeline.
    Probe(String),
}

/// When an expectation is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Anchor {
    /// The end of setup (no fault or action before this expectation).
    Start,
    /// A fault or action: the moment it began (a `wait`: the moment it
    /// ended). An expectation: the moment its condition was first seen to hold.
    Step(usize),
}

#[derive(Debug, Clone)]
pub struct Expectation {
    pub subject: Subject,
    pub conditions: Vec<Condition>,
    pub window: WindowSpec,
    pub anchor: Anchor,
    /// `since:` was written: `holdsFor`/`never` then count from the anchor
    /// (reading recorded history) instead of from this step's start.
    pub explicit_anchor: bool,
}

/// An `abortIf:` guard: while the steps run, once `conditions` have held on
/// `subject` for `hold` without a break, the steps stop and the run restores.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Position in `abortIf` (0-based).
    pub index: usize,
    pub name: Option<String>,
    /// YAML path, for diagnostics (`abortIf[0]`).
    pub path: String,
    pub subject: Subject,
    pub conditions: Vec<Condition>,
    /// `for:` (default `0s`), evaluated under the profile by `plan`.
    pub hold: Expr,
}

impl Guard {
    /// Its name, else its place in the file: `abortIf[0]`.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.path.clone())
    }
}
