//! The remediation of a failed node as `result.json` keeps it: every act
//! that released its pods (who, when), and the figures remediators are asked
//! for: detection, decision, fencing, release, recovery, clean-up
//! (docs/remediation.md). Judging them from the timeline, the fault steps'
//! account of the machines and the metrics is the judge crate's
//! (`verdict::remediation`).

use serde::{Deserialize, Serialize};

use crate::scenario::model::FaultKind;
use crate::timeline::Ms;

/// The node lifecycle controller's own NoExecute taints: the failure, not
/// its remediation.
pub const LIFECYCLE_TAINTS: [&str; 2] = [
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/not-ready",
];

/// Whether a taint is a remediation act's: NoExecute, and not the node
/// lifecycle controller's own.
pub fn is_act(key: &str, effect: &str) -> bool {
    effect == "NoExecute" && !LIFECYCLE_TAINTS.contains(&key)
}

/// One remediation act: a NoExecute taint other than the node lifecycle
/// controller's own (the out-of-service taint, a remediator's), a failed
/// node's deletion, a medik8s remediation created for it (Self Node,
/// Fence Agents, Machine Deletion Remediation), or its cluster-api
/// Machine's deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Act {
    /// When nodefall saw it, relative to T0.
    pub at: Ms,
    pub node: String,
    /// `taint + node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`,
    /// `deleted`.
    pub what: String,
    /// Who did it, where known (a field manager).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Who did it by the API server's audit log (sim): its user and user
    /// agent, for a deletion (which writes no field, so has no manager).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// How long the node had been NotReady without a break at the act (ms;
    /// None: it was Ready then, or never NotReady).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_ready_for: Option<Ms>,
    /// The node was Ready again after it first went NotReady, before the
    /// act: when, relative to T0 (a flapping node, acted on for a failure
    /// it had recovered from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_again: Option<Ms>,
}

/// Whether the failed machine was off when the first act released its pods
/// (by the backend's own account: nodefall's poweroff and shutdown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Fencing {
    /// Off at `off` (relative to T0), `lead` before the act.
    OffBefore { off: Ms, lead: Ms },
    /// Off only at `off`, `after` the act: its pods were released while
    /// it could still run them.
    OffAfter { off: Ms, after: Ms },
    /// Not off during the run: the fault (`pause-vm`, `drop-nic`,
    /// `stop-kubelet`, or none of nodefall's) left it able to run its pods.
    NotOff { fault: Option<FaultKind> },
}

/// Whether the failed node's volumes were released after the first act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Release {
    /// Every VolumeAttachment to the node at the act gone (deleted,
    /// detached or moved) `after` it.
    Released { after: Ms },
    /// The node had no VolumeAttachment at the act: nothing to release.
    NoAttachments,
    /// Still attached when the observation ended.
    NotReleased { left: Vec<String> },
}

/// A remediator's taint, and whether it was taken off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Leftover {
    pub node: String,
    /// `node.kubernetes.io/out-of-service:NoExecute`.
    pub taint: String,
    /// When it was removed, relative to T0 (None: left behind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_by: Option<String>,
}

/// The remediation of a run whose failed node was remediated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remediation {
    pub acts: Vec<Act>,
    /// Fault -> the node NotReady (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<Ms>,
    /// NotReady -> the first act (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Ms>,
    pub fencing: Fencing,
    /// How the machine's power was known, when the backend looked at it
    /// through the run (else from nodefall's own faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_seen: Option<String>,
    pub release: Release,
    /// The first act -> the last replacement Ready, of the pods that were on
    /// the failed nodes at T0 (ms; None: not all were replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Ms>,
    /// Pods replaced and Ready, of those that were on the failed nodes.
    pub replaced: usize,
    pub pods: usize,
    /// Each act's taint after the node was Ready again: taken off, or left.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cleanup: Vec<Leftover>,
}

/// A deletion the API server's audit log recorded, with its author (the
/// sim's log; see `audit::deletions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditDeletion {
    /// When it completed, ms since the run's start.
    pub at: Ms,
    /// `nodes`, `pods`.
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub user: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// A pod deleted with no grace period.
    pub force: bool,
}

impl AuditDeletion {
    /// `user (agent)`.
    pub fn author(&self) -> String {
        match &self.agent {
            Some(a) => format!("{} ({a})", self.user),
            None => self.user.clone(),
        }
    }

    /// By the control plane's own components (a kubelet ending a graceful
    /// deletion, pod GC freeing a node's pods, the node lifecycle
    /// controller): the consequence of a failure or of an act, not an act.
    /// Known by the user, or by the user agent where the components share
    /// one user (the sim's; kwok plays its kubelets).
    pub fn by_control_plane(&self) -> bool {
        let agent = self.agent.as_deref().unwrap_or_default();
        self.user.starts_with("system:node:")
            || self.user.starts_with("system:serviceaccount:kube-system:")
            || matches!(
                self.user.as_str(),
                "system:kube-controller-manager" | "system:kube-scheduler"
            )
            || [
                "kube-controller-manager/",
                "kube-scheduler/",
                "kubelet/",
                "kwok",
            ]
            .iter()
            .any(|p| agent.starts_with(p))
    }
}
