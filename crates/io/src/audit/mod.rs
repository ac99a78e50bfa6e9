//! Ground truth from the API server's audit log, and how close an observer
//! came to it.
//!
//! The sim's kube-apiserver records every write to a Node or Pod with the
//! stored object and a microsecond `stageTimestamp`, and every eviction
//! (`crates/sim/src/sim/audit-policy.yaml`).
//! [`log::read`] folds those states into the same typed transitions the
//! observer records; the judge crate's `verdict::audit::compare` matches
//! what an observer (nodefall, or a baseline such as a 5 s poller or
//! `kubectl get -w`) reported against them: transitions missed, duplicated,
//! out of order or unexplained (and cut off: made just before the observer
//! stopped), and the lag vs the audit log of each match (observed − written,
//! the log's µs stamp). [`check_run`] reads the log and runs that check.

pub mod deletions;
pub mod log;

use std::io::Read as _;
use std::path::{Path, PathBuf};

pub use crate::record::audit::{AuditReport, AuditWindow, Check, Match, Seen};
pub use log::{AuditTruth, Scope};

use crate::record::RunResult;
use crate::verdict::audit::{Report, compare, observed_in_run, span};

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
    #[error(
        "{} holds no audit events: nothing was checked (expected JSON lines of \
         audit.k8s.io/v1 events, as the API server writes them at level RequestResponse)",
        .path.display()
    )]
    Empty { path: PathBuf },
    #[error(
        "{}: none of its {events} audit events is a change of a Node or of a Pod in namespace \
         `{namespace}` between {} and {} (the run's observed window): nothing was checked; \
         is it the audit log of the cluster this run used, written during the run?",
        .path.display(), .window.from, .window.to
    )]
    NothingInWindow {
        path: PathBuf,
        events: usize,
        namespace: String,
        window: AuditWindow,
    },
}

/// Reads an audit log, after the files the API server rotated it into
/// (`audit-<time>.log` beside `audit.log`, oldest first).
pub fn read_truth(path: &Path, scope: &Scope) -> Result<AuditTruth, Error> {
    let files = with_rotated(path);
    let mut readers: Vec<Box<dyn std::io::Read>> = Vec::new();
    for f in &files {
        let file = std::fs::File::open(f).map_err(|source| Error::Read {
            path: f.clone(),
            source,
        })?;
        readers.push(Box::new(file));
    }
    let chained = readers
        .into_iter()
        .reduce(|a, b| Box::new(a.chain(b)))
        .ok_or_else(|| Error::Read {
            path: path.to_owned(),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
    log::read(std::io::BufReader::new(chained), path, scope)
}

/// `path` preceded by its rotated files (lumberjack names them
/// `<stem>-<UTC time>.<ext>`, which sorts by time).
fn with_rotated(path: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(stem), ext) = (
        path.parent(),
        path.file_stem().and_then(|s| s.to_str()),
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
    ) else {
        return vec![path.to_owned()];
    };
    let prefix = format!("{stem}-");
    let suffix = format!(".{ext}");
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })
    .map(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(&suffix))
            })
            .collect()
    })
    .unwrap_or_default();
    rotated.sort();
    rotated.push(path.to_owned());
    rotated
}

/// Checks a run against an audit log, with baselines (name, observations
/// in time order) compared over the same window. `keep_matches`: keep
/// nodefall's matches (for `audit check --matches`; a copy of the truth).
pub fn check_run(
    result: &RunResult,
    result_path: &Path,
    audit_log: &Path,
    baselines: &[(String, Vec<Seen>)],
    keep_matches: bool,
) -> Result<AuditReport, Error> {
    let (seen, window) = observed_in_run(result).ok_or_else(|| Error::NoWindow {
        path: result_path.to_owned(),
    })?;
    let scope = Scope {
        namespace: Some(result.namespace.clone()),
        kept: Some(span(window)),
    };
    let truth = read_truth(audit_log, &scope)?;
    // Nothing to compare with is no pass: an empty log, or one that is not
    // this run's, is refused rather than reported as nothing missed.
    if truth.events == 0 {
        return Err(Error::Empty {
            path: audit_log.to_owned(),
        });
    }
    if !truth
        .reports()
        .any(|t| t.at >= window.from && t.at <= window.to)
    {
        return Err(Error::NothingInWindow {
            path: audit_log.to_owned(),
            events: truth.events,
            namespace: result.namespace.clone(),
            window,
        });
    }
    let mut checks = vec![compare(
        "nodefall",
        truth.reports(),
        &seen,
        window,
        keep_matches,
    )];
    drop(seen);
    for (name, observed) in baselines {
        let observed: Vec<Report<'_>> = observed.iter().map(Report::from).collect();
        checks.push(compare(name, truth.reports(), &observed, window, false));
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
    json_lines(
        std::io::BufReader::new(file),
        path,
        |path, line, source| Error::Observation { path, line, source },
        |_, seen| {
            out.push(seen);
            Ok(())
        },
    )?;
    Ok(out)
}

/// Calls `each` with every non-blank line of `reader` parsed as JSON, and
/// its line number (from 1); `bad` names a line that does not parse.
fn json_lines<T: serde::de::DeserializeOwned>(
    reader: impl std::io::BufRead,
    path: &Path,
    bad: fn(PathBuf, usize, serde_json::Error) -> Error,
    mut each: impl FnMut(usize, T) -> Result<(), Error>,
) -> Result<(), Error> {
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let value =
            serde_json::from_str(&line).map_err(|source| bad(path.to_owned(), i + 1, source))?;
        each(i + 1, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_files_are_read_first_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "audit.log",
            "audit-2026-11-22T19-15-11.123.log",
            "audit-2026-11-22T19-14-02.001.log",
            "audit-policy.yaml",
            "kube-apiserver.log",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let names: Vec<String> = with_rotated(&dir.path().join("audit.log"))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "audit-2026-11-22T19-14-02.001.log",
                "audit-2026-11-22T19-15-11.123.log",
                "audit.log"
            ]
        );
    }
}
