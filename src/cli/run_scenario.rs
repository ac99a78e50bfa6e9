//! `nodefall scenario`: the flags resolved into a run (or a series of
//! them), the run carried out by [`crate::runner::session`], its verdict
//! printed.

use super::error::Error;
use std::process::ExitCode;

use super::ScenarioArgs;
use crate::exit;
use crate::record::{self, RunResult, RunVerdict};
use crate::runner::session::{self, Done, Once, Request};

pub fn run(args: &ScenarioArgs) -> Result<ExitCode, Error> {
    // Everything about the input is checked before any cluster is touched.
    let resolved = super::resolve::resolve(args)?;
    // So is where the reports go: not found out after a whole run.
    super::resolve::prepare_out(&args.out)?;
    session::warn_unfinished();
    if args.repeat > 1 {
        return super::repeat::run(args, &resolved);
    }
    let done = session::run(&request(args), &resolved, &Once::default())?;
    print(&done);
    Ok(exit::code(done.code))
}

/// The session's view of the flags.
pub(super) fn request(args: &ScenarioArgs) -> Request {
    Request {
        file: args.file.clone(),
        out: args.out.clone(),
        profile: args.profile,
    }
}

/// The verdict line, then what the run left behind.
pub(super) fn print(done: &Done) {
    summarize(&done.result, &done.dir);
    done.warn_leftovers();
}

/// A flag's value is wrong (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidFlag(pub String);

fn summarize(result: &RunResult, dir: &std::path::Path) {
    let passed = result
        .expectations
        .iter()
        .filter(|e| e.verdict == record::Verdict::Pass)
        .count();
    let verdict = match result.verdict {
        RunVerdict::Pass => "PASS",
        RunVerdict::Fail => "FAIL",
        RunVerdict::Error => "ERROR",
        RunVerdict::Interrupted => "INTERRUPTED",
    };
    let aborted = result
        .aborted
        .as_ref()
        .map(|a| format!(" (aborted by guard `{}`)", a.guard))
        .unwrap_or_default();
    // The error itself was printed when the run stopped ("stopping: ...").
    outln!(
        "{verdict}{aborted}: {passed}/{} expectations held; report: {}",
        result.expectations.len(),
        dir.join("report.md").display()
    );
}
