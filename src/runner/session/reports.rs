//! The end of a session: the reports written (elsewhere if they cannot go
//! where asked), the journal closed when nothing is left to undo, the exit
//! code the run stands for.

use std::path::{Path, PathBuf};

use super::super::journal;
use super::super::{Journal, RunOutcome};
use super::{Done, Error, Once};
use crate::exit;
use crate::record::RunVerdict;
use crate::report;

/// Writes the reports (elsewhere if they cannot go where asked), closes
/// the journal when nothing is left to undo (or says what is), prints the
/// verdict, maps it to the exit code. The journal's fate does not hang on
/// the report's: a run whose changes were all reverted closes it, report
/// written or not, so later runs do not take it for a killed one.
pub(super) fn conclude(
    out: &std::path::Path,
    once: &Once,
    outcome: &RunOutcome,
    journal: Journal,
) -> Result<Done, Error> {
    let result = &outcome.result;
    let dir = once
        .dir
        .clone()
        .unwrap_or_else(|| out.join(report::run_dir_name(&result.scenario, result.started_at)));
    let run_id = journal.state().header.as_ref().map_or_else(
        || report::run_dir_name(&result.scenario, result.started_at),
        |h| h.run.clone(),
    );
    let fallback = journal::fallback_reports_dir().join(run_id);
    let written = write_or_fallback(&dir, &fallback, |d| report::write_all(d, result));
    let left = outcome.unreverted.clone();
    let journal_path = journal.path().to_owned();
    if journal.state().pending.is_empty() {
        close(journal);
    }
    let mut code = exit_code(outcome);
    let dir = match written {
        Ok(Written::Asked(())) => dir,
        Ok(Written::Fallback { value: (), at, why }) => {
            tracing::error!(
                "error: the report could not be written where asked: {}; it was written to {} \
                 instead",
                crate::errors::chain(&why),
                at.display()
            );
            // The reports are not where the caller looks for them.
            if matches!(code, exit::PASS | exit::EXPECTATION_FAILED) {
                code = exit::INFRASTRUCTURE;
            }
            at
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Done {
        code,
        result: result.clone(),
        dir,
        abandoned: outcome.abandoned.clone(),
        unreverted: left,
        journal: journal_path,
    })
}

/// Where reports went.
#[derive(Debug)]
pub enum Written<T> {
    /// Where asked.
    Asked(T),
    /// Into the fallback directory `at`, because of `why`.
    Fallback {
        value: T,
        at: PathBuf,
        why: report::Error,
    },
}

/// Reports that could be written neither where asked nor in the fallback
/// directory.
#[derive(Debug, thiserror::Error)]
#[error(
    "the report could not be written: {}; nor in the fallback directory: {}",
    crate::errors::chain(&**.asked),
    crate::errors::chain(&**.fallback)
)]
pub struct ReportNotWritten {
    asked: Box<report::Error>,
    fallback: Box<report::Error>,
}

/// Writes with `write` into `asked`, else into `fallback` (the run's
/// results are not lost because the directory went away or became
/// read-only while it ran).
pub fn write_or_fallback<T>(
    asked: &Path,
    fallback: &Path,
    write: impl Fn(&Path) -> Result<T, report::Error>,
) -> Result<Written<T>, ReportNotWritten> {
    let why = match write(asked) {
        Ok(v) => return Ok(Written::Asked(v)),
        Err(e) => e,
    };
    match write(fallback) {
        Ok(value) => Ok(Written::Fallback {
            value,
            at: fallback.to_owned(),
            why,
        }),
        Err(fallback) => Err(ReportNotWritten {
            asked: Box::new(why),
            fallback: Box::new(fallback),
        }),
    }
}

pub(super) fn close(journal: Journal) {
    if let Err(e) = journal.close() {
        tracing::warn!("warning: {}", crate::errors::chain(&e));
    }
}

fn exit_code(outcome: &RunOutcome) -> u8 {
    if let Some(stop) = outcome.stopped_by {
        return stop.exit_code();
    }
    match outcome.result.verdict {
        _ if outcome.invalid_input => exit::INVALID_INPUT,
        // A change that could not be put back is an infrastructure failure,
        // whatever the expectations said.
        _ if !outcome.unreverted.is_empty() => exit::INFRASTRUCTURE,
        RunVerdict::Pass => exit::PASS,
        RunVerdict::Fail => exit::EXPECTATION_FAILED,
        RunVerdict::Error => exit::INFRASTRUCTURE,
        RunVerdict::Interrupted => exit::INTERRUPTED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_marker(dir: &Path) -> Result<PathBuf, report::Error> {
        std::fs::create_dir_all(dir).map_err(|source| report::Error::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join("result.json");
        std::fs::write(&path, "{}").map_err(|source| report::Error::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    #[test]
    fn a_report_goes_where_asked_else_to_the_fallback_else_both_are_named() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let asked = tmp.path().join("out").join("run");
        let fallback = tmp.path().join("state").join("reports").join("run-1");
        let w = write_or_fallback(&asked, &fallback, write_marker).expect("written");
        assert!(matches!(w, Written::Asked(p) if p == asked.join("result.json")));
        assert!(!fallback.exists());

        // The directory was replaced by a file during the run.
        std::fs::remove_dir_all(tmp.path().join("out")).expect("removed");
        std::fs::write(tmp.path().join("out"), "x").expect("written");
        match write_or_fallback(&asked, &fallback, write_marker).expect("written") {
            Written::Fallback { value, at, why } => {
                assert_eq!(value, fallback.join("result.json"));
                assert_eq!(at, fallback);
                assert!(
                    why.to_string().starts_with(&format!(
                        "cannot create report directory {}",
                        asked.display()
                    )),
                    "{why}"
                );
            }
            Written::Asked(_) => panic!("written under a file"),
        }
        assert!(fallback.join("result.json").is_file());

        // Neither: both are named.
        let nowhere = tmp.path().join("out").join("fallback");
        let e = write_or_fallback(&asked, &nowhere, write_marker).unwrap_err();
        let e = e.to_string();
        assert!(e.contains(&asked.display().to_string()), "{e}");
        assert!(e.contains(&nowhere.display().to_string()), "{e}");
    }
}
