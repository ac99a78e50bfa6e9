//! Ground truth from the API server's audit log, and how close an observer
//! came to it.
//!
//! The sim's kube-apiserver records every write to a Node or Pod with the
//! stored object and a microsecond `stageTimestamp` (`src/sim/audit-policy.yaml`).
//! [`log::read`] folds those states into the same typed transitions the
//! observer records; [`check::compare`] matches what an observer (nodefall,
//! or a baseline such as a 5 s poller or `kubectl get -w`) reported against
//! them: transitions missed, duplicated, out of order or unexplained, and
//! the detection lag of each match (observed - written).

pub mod check;
pub mod log;

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use check::{Check, Match, Window, compare};
pub use log::{Scope, Truth};

use crate::report::RunResult;
use crate::timeline::{Change, ObjectRef};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: not an audit event (a JSON line of audit.k8s.io/v1 Event)", .path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}:{line}: not an observation (a JSON line with at, object and change)", .path.display())]
    Observation {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{} has no observer start (observedFrom): it was written by a nodefall before the audit check, \
         or the run stopped before its watchers had listed",
        .path.display()
    )]
    NoWindow { path: PathBuf },
}

/// One transition with its wall-clock time: true (audit) or observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub at: Timestamp,
    pub object: ObjectRef,
    pub change: Change,
}

/// A run's observer against its cluster's audit log (in result.json and
/// report.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// The audit log read.
    pub log: String,
    pub window: Window,
    /// Audit events read, and the writes to Nodes and Pods in scope.
    pub events: usize,
    pub writes: usize,
    /// nodefall first, then any baselines.
    pub checks: Vec<Check>,
}

/// Reads an audit log.
pub fn read_truth(path: &Path, scope: &Scope) -> Result<Truth, Error> {
    let file = std::fs::File::open(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    log::read(std::io::BufReader::new(file), path, scope)
}

/// What nodefall's observer reported in a run (Nodes and Pods only, the
/// kinds the audit log covers), and the window to compare: from when its
/// watchers had listed to when the cleanup began.
pub fn observed_in_run(result: &RunResult) -> Option<(Vec<Seen>, Window)> {
    let from = result.observed_from?;
    let end = result
        .cleanup
        .iter()
        .map(|s| s.started)
        .min()
        .unwrap_or(result.finished);
    let seen = result
        .transitions
        .iter()
        .filter(|t| matches!(t.object, ObjectRef::Node { .. } | ObjectRef::Pod { .. }))
        .map(|t| Seen {
            at: result.wall_clock(t.at),
            object: t.object.clone(),
            change: t.change.clone(),
        })
        .collect();
    let window = Window {
        from: result.wall_clock(from),
        to: result.wall_clock(end),
        t0: result.t0.map(|t0| result.wall_clock(t0)),
    };
    Some((seen, window))
}

/// Checks a run against an audit log, with baselines (name, observations
/// in time order) compared over the same window.
pub fn check_run(
    result: &RunResult,
    result_path: &Path,
    audit_log: &Path,
    baselines: &[(String, Vec<Seen>)],
) -> Result<AuditReport, Error> {
    let (seen, window) = observed_in_run(result).ok_or_else(|| Error::NoWindow {
        path: result_path.to_owned(),
    })?;
    let scope = Scope {
        namespace: Some(result.namespace.clone()),
    };
    let truth = read_truth(audit_log, &scope)?;
    let mut checks = vec![compare("nodefall", &truth.transitions, &seen, window)];
    for (name, observed) in baselines {
        checks.push(compare(name, &truth.transitions, observed, window));
    }
    Ok(AuditReport {
        log: audit_log.display().to_string(),
        window,
        events: truth.events,
        writes: truth.writes,
        checks,
    })
}

/// Reads a baseline's observations (JSON lines of [`Seen`]).
pub fn read_observations(path: &Path) -> Result<Vec<Seen>, Error> {
    let file = std::fs::File::open(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(
            serde_json::from_str(&line).map_err(|source| Error::Observation {
                path: path.to_owned(),
                line: i + 1,
                source,
            })?,
        );
    }
    Ok(out)
}
