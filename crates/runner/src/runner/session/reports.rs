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
    outcome: RunOutcome,
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
    let written = write_or_fallback(&dir, &fallback, |d| {
        report::write_all(&crate::disk::Disk, d, result)
    });
    let journal_path = journal.path().to_owned();
    if journal.state().pending.is_empty() {
        close(journal);
    }
    let mut code = exit_code(&outcome);
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
    // Moved, not copied: at 10,000 pods the result is tens of MB.
    Ok(Done {
        code,
        result: outcome.result,
        dir,
        abandoned: outcome.abandoned,
        unreverted: outcome.unreverted,
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

pub(crate) fn exit_code(outcome: &RunOutcome) -> u8 {
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
    use crate::plan::Plan;
    use crate::profile::TimingProfile;
    use crate::runner::journal::{BackendRef, KubeRef, Undo};
    use crate::shutdown::Stop;

    fn plan() -> Plan {
        let text = "name: t\nnamespace: ns\ntarget: {mostPods: app=web}\nsteps:\n  - fault: pause-vm\n  \
                    - expect: {node: target, ready: Unknown, within: 1m}\n";
        let checked = crate::scenario::load::load_str("s.yaml", Path::new("."), text)
            .and_then(|l| crate::scenario::validate::validate(l, &crate::files::Memory::default()))
            .unwrap_or_else(|e| panic!("{e}"));
        crate::plan::resolve(checked, &TimingProfile::fast(), None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn outcome(plan: &Plan, verdict: RunVerdict) -> RunOutcome {
        RunOutcome {
            result: crate::runner::failed_to_start(plan, "s.yaml", "as written", verdict),
            invalid_input: false,
            stopped_by: None,
            unreverted: Vec::new(),
            abandoned: None,
        }
    }

    #[test]
    fn a_run_ends_with_the_code_its_outcome_stands_for() {
        let plan = plan();
        for (verdict, code) in [
            (RunVerdict::Pass, exit::PASS),
            (RunVerdict::Fail, exit::EXPECTATION_FAILED),
            (RunVerdict::Error, exit::INFRASTRUCTURE),
            (RunVerdict::Interrupted, exit::INTERRUPTED),
        ] {
            assert_eq!(exit_code(&outcome(&plan, verdict)), code, "{verdict:?}");
        }
        let mut o = outcome(&plan, RunVerdict::Error);
        o.invalid_input = true;
        assert_eq!(exit_code(&o), exit::INVALID_INPUT);
        // a change left in place outweighs the expectations
        let mut o = outcome(&plan, RunVerdict::Pass);
        o.unreverted.push("resume worker-1".into());
        assert_eq!(exit_code(&o), exit::INFRASTRUCTURE);
        // a signal outweighs everything: 128 + its number
        o.stopped_by = Some(Stop::Terminate);
        assert_eq!(exit_code(&o), 143);
    }

    #[test]
    fn the_end_writes_the_reports_and_closes_the_journal_only_when_nothing_is_left() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let (out, journals) = (tmp.path().join("out"), tmp.path().join("journals"));
        let plan = plan();
        let backend = BackendRef::Kind {
            cluster: "nodefall".into(),
            runtime: "docker".into(),
        };
        let open = |name: &str| {
            let mut h = super::super::header(&plan, "s.yaml", backend.clone(), KubeRef::default());
            h.run = name.into();
            Journal::create(&journals, h).expect("journal")
        };

        // all put back: reports where asked, journal closed
        let journal = open("settled");
        let path = journal.path().to_owned();
        let done = conclude(
            &out,
            &Once::default(),
            outcome(&plan, RunVerdict::Pass),
            journal,
        )
        .expect("concluded");
        assert_eq!(done.code, exit::PASS);
        assert!(done.dir.starts_with(&out), "{}", done.dir.display());
        assert!(done.dir.join("result.json").is_file());
        assert!(done.dir.join("report.md").is_file());
        assert!(!path.exists(), "a settled journal is closed");
        assert!(
            journals
                .join("closed")
                .join(path.file_name().expect("name"))
                .is_file()
        );

        // a change still pending: the journal stays for `nodefall recover`
        let mut journal = open("pending");
        journal
            .will(Undo::Cluster {
                root: tmp.path().into(),
                name: "left".into(),
            })
            .expect("journaled");
        let path = journal.path().to_owned();
        let mut o = outcome(&plan, RunVerdict::Fail);
        o.unreverted
            .push("tear down throwaway sim cluster left".into());
        let once = Once {
            dir: Some(out.join("second")),
            ..Once::default()
        };
        let unreverted = o.unreverted.clone();
        let done = conclude(&out, &once, o, journal).expect("concluded");
        assert_eq!(done.code, exit::INFRASTRUCTURE);
        assert_eq!(done.dir, out.join("second"));
        assert_eq!(done.unreverted, unreverted);
        assert_eq!(done.journal, path);
        assert!(
            path.is_file(),
            "a journal with work left stays where recover looks"
        );
    }

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
