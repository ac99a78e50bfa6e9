//! Recovery metrics derived from a timeline (pure).

use serde::{Deserialize, Serialize};

use super::Ms;

/// Key figures of a run, relative to T0 (ms) unless said otherwise.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    /// First target node: Ready left True (Unknown or False).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_not_ready: Option<Ms>,
    /// First `node.kubernetes.io/unreachable` or `not-ready` NoExecute taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_execute_taint: Option<Ms>,
    /// First pod on a target node marked Terminating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_eviction: Option<Ms>,
    /// First time after T0 when as many watched pods were Ready as before T0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_ready_again: Option<Ms>,
    /// Pods Ready just before T0 (the baseline).
    pub ready_before: u32,
    /// Most Ready pods missing from the baseline at any time after T0.
    pub max_unavailable: u32,
    /// Target node Ready again after the fault was reverted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ready_again: Option<Ms>,
    /// Median of (observed - server timestamp) over transitions with one, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection_lag_median: Option<Ms>,
    /// Largest such lag, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection_lag_max: Option<Ms>,
    pub pods: Vec<PodRecovery>,
}

/// One pod that was on a target node at T0, and what replaced it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRecovery {
    pub pod: String,
    pub node: String,
    /// Owner (`StatefulSet/web`, `ReplicaSet/web-7d9f`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating_at: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<Ms>,
    /// How long it stayed Terminating (to deletion, or to the end of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating_for: Option<Ms>,
    /// Still present (Terminating or not) when the run ended.
    pub still_present: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_created: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_scheduled: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_running: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_ready: Option<Ms>,
}
