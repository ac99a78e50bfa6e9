//! The audit check of a run, as `result.json` keeps it: each observer
//! (nodefall first, then any baselines) against the API server's audit log.
//! The check itself is `crate::audit`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::summary::Summary;
use crate::timeline::{Change, ObjectRef};

/// A run's observer against its cluster's audit log (in result.json and
/// report.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// The audit log read.
    pub log: String,
    pub window: AuditWindow,
    /// Audit events read, and the writes to Nodes and Pods in scope.
    pub events: usize,
    pub writes: usize,
    /// nodefall first, then any baselines.
    pub checks: Vec<Check>,
}

/// One transition with its wall-clock time: true (audit) or observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub at: Timestamp,
    pub object: ObjectRef,
    pub change: Change,
}

/// The time window compared: from when the observer had listed everything
/// to when the cleanup began. nodefall's observer reports until then (it
/// stops as the cleanup deletes what the run applied), and the cleanup's
/// own changes are not compared: it deletes the namespace, whose pods the
/// API server removes without a per-pod audit event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditWindow {
    pub from: Timestamp,
    pub to: Timestamp,
    /// T0 (the first fault), when the run reached it: the lag from then on
    /// is reported apart from the setup's (a burst of pod creations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0: Option<Timestamp>,
}

/// One observer against the truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// Who observed: `nodefall`, `poller-5s`, `kubectl-get-w`.
    pub source: String,
    /// True transitions in the window.
    pub truth: usize,
    pub matched: usize,
    /// True transitions the observer never reported.
    pub missed: usize,
    /// Reports of a change of an object that was already matched to its one
    /// true occurrence.
    pub duplicated: usize,
    /// Matched reports that came before a report of an earlier change of
    /// the same object.
    pub out_of_order: usize,
    /// Reports with no true counterpart at all.
    pub unexplained: usize,
    /// True transitions made within `cut_off_within_ms` of the window's
    /// end and not reported: made just before the observer stopped, they
    /// may not have reached it yet. Not counted as missed; listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut_off: usize,
    /// How close to the window's end a change had to be made to be cut off
    /// rather than missed (ms): the observer's longest lag from T0 on,
    /// between 50 ms and 1 s. Given when some were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_off_within_ms: Option<f64>,
    /// Lag vs the audit log of the matched transitions (ms): observed −
    /// the audit event's `stageTimestamp` (ResponseComplete, µs), not the
    /// objects' own whole-second timestamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_ms: Option<Summary>,
    /// The lag of the transitions from T0 on (the fault and recovery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_from_t0_ms: Option<Summary>,
    /// The lag per kind of change (NodeReady, PodReady, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lag_by_change_ms: BTreeMap<String, Summary>,
    /// The first missed transitions (true time), for a person to look at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_examples: Vec<Seen>,
    /// The first unexplained reports (as reported, at the observer's time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexplained_examples: Vec<Seen>,
    /// The first cut-off transitions (true time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut_off_examples: Vec<Seen>,
    /// Every match (not serialized: `audit check --matches FILE` writes them).
    #[serde(skip)]
    pub matches: Vec<Match>,
}

/// One true transition and the report matched to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Match {
    pub truth: Seen,
    pub seen_at: Timestamp,
    pub lag_ms: f64,
}

impl Check {
    /// Nothing missed, duplicated, out of order or unexplained.
    pub fn clean(&self) -> bool {
        self.missed == 0 && self.duplicated == 0 && self.out_of_order == 0 && self.unexplained == 0
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
