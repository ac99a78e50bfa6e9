//! `nodefall scenario`'s two ends around [`crate::runner::session`]: the
//! session's view of the flags, and the verdict printed.

use super::ScenarioArgs;
use crate::record::{self, RunResult, RunVerdict};
use crate::runner::session::{Done, Request};

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
