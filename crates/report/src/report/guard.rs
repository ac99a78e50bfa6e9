//! The abort guards (`abortIf:`) in `report.md`: a banner under the title
//! when one stopped the run, and a table of every guard. (`junit.xml` has
//! one test case per guard, failed when it fired: see `junit.rs`.)

use std::fmt::Write as _;

use super::format::{cell, code, inline, rel, table};
use crate::duration::format_millis;
use crate::record::{GuardRecord, RunResult};

/// `report.md`, right under the title: which guard stopped the run and when.
pub(super) fn banner(out: &mut String, r: &RunResult) {
    let Some(a) = &r.aborted else {
        return;
    };
    let _ = writeln!(
        out,
        "> **Aborted by guard {}** at {}: {} held for {}. The steps stopped there; \
         cleanup ran as after any stop, and the expectations not reached are listed as not run.\n",
        code(&a.guard),
        rel(r, a.at),
        inline(&a.description),
        format_millis(a.for_ms)
    );
}

/// `report.md`: every guard, what it watched, and whether it fired.
pub(super) fn section(out: &mut String, r: &RunResult) {
    if r.guards.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Abort guards\n");
    let rows = r
        .guards
        .iter()
        .map(|g| {
            [
                cell(&g.label),
                cell(&g.description),
                cell(&for_text(g)),
                match g.fired_at {
                    Some(at) => format!("**fired** at {}", rel(r, at)),
                    None => "no".into(),
                },
            ]
        })
        .collect();
    out.push_str(&table(["guard", "condition", "for", "fired"], rows));
    out.push('\n');
}

/// `grace + 2s (10s)`, or `15s` when the two agree.
pub(super) fn for_text(g: &GuardRecord) -> String {
    let ms = format_millis(g.for_ms);
    if g.for_written == ms {
        ms
    } else {
        format!("{} ({ms})", g.for_written)
    }
}
