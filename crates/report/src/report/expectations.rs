//! `report.md`'s Expectations section: one row per expectation with its
//! window as written and evaluated, what it counted from, where the window
//! ran, what was observed and the verdict.

use std::fmt::Write as _;

use super::format::{MISSING, cell, rel, secs, signed_secs, t0_rel, table};
use crate::record::{ExpectationResult, RunResult, Verdict};
use crate::scenario::expr::Window;

/// The Expectations table.
pub(super) fn section(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "## Expectations\n");
    if r.expectations.is_empty() {
        let _ = writeln!(out, "The scenario has no expectations.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Observed times are relative to what the window counts from (and to T0 in brackets).\n"
    );
    let rows = r
        .expectations
        .iter()
        .map(|e| {
            let name = short_label(&e.label, e.index);
            let what = if name.is_empty() {
                cell(&e.description)
            } else {
                format!("**{}** {}", cell(name), cell(&e.description))
            };
            let mut anchor = match r.since_t0(e.anchor_at) {
                Some(t) => format!("{} at {}", e.anchor, t0_rel(t)),
                None => format!("{} at {}", e.anchor, rel(r, e.anchor_at)),
            };
            if e.window_from.is_none()
                && e.verdict != Verdict::NotRun
                && e.window != Window::Preflight
            {
                // a schema-1 holdsFor/never: it may have counted from its own start
                anchor.push_str(", or this step's start (schema 1 did not record which)");
            }
            let verdict = match e.verdict {
                Verdict::Pass => "pass",
                Verdict::Fail => "**FAIL**",
                Verdict::NotRun => "not run",
            };
            let mut detail = cell(&e.detail);
            if let Some(m) = e.missed_by {
                let side = if m < 0 { "too early" } else { "too late" };
                if !detail.is_empty() {
                    detail.push_str("<br>");
                }
                let _ = write!(detail, "missed by {} ({side})", secs(m.abs()));
            }
            [
                (e.index + 1).to_string(),
                what,
                cell(&window_cell(e)),
                cell(&anchor),
                window_ran(e, r),
                observed(e, r),
                verdict.into(),
                detail,
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "#",
            "expectation",
            "window (evaluated)",
            "counts from",
            "window ran",
            "observed",
            "verdict",
            "detail",
        ],
        rows,
    ));
    out.push('\n');
}

/// The label without the step number the `#` column already shows.
fn short_label(label: &str, index: usize) -> &str {
    let number = format!("#{}", index + 1);
    match label.strip_prefix(&number).map(str::trim) {
        Some(rest) => rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or(rest),
        None => label,
    }
}

fn observed(e: &ExpectationResult, r: &RunResult) -> String {
    if e.window == Window::Preflight && e.verdict != Verdict::NotRun {
        return "read at preflight".into();
    }
    if matches!(e.window, Window::Requests { .. }) && e.verdict != Verdict::NotRun {
        return "over the requests (see detail)".into();
    }
    let holds = matches!(e.window, Window::HoldsFor { .. });
    match e.observed {
        Some(ms) => {
            let at = match super::lanes::observed_at(e, ms).and_then(|at| r.since_t0(at)) {
                Some(t) => format!(" ({})", t0_rel(t)),
                None => String::new(),
            };
            let what = if holds { " stopped holding" } else { "" };
            format!("{}{what}{at}", signed_secs(ms))
        }
        None if e.verdict == Verdict::NotRun => MISSING.into(),
        None if holds => "held throughout".into(),
        None => "never seen".into(),
    }
}

/// Where the window ran: `T0+28.9s .. T0+48.9s`.
fn window_ran(e: &ExpectationResult, r: &RunResult) -> String {
    if e.window == Window::Preflight && e.verdict != Verdict::NotRun {
        return format!("preflight, {}", rel(r, e.anchor_at));
    }
    match (e.window_from, e.window_to) {
        (Some(from), Some(to)) => format!("{} .. {}", rel(r, from), rel(r, to)),
        _ if e.verdict == Verdict::NotRun => MISSING.into(),
        _ => "not recorded (schema-1 result)".into(),
    }
}

/// The window as written and as evaluated, with what its numbers rest on.
fn window_cell(e: &ExpectationResult) -> String {
    let mut text = format!("{} [{}]", e.window_written, e.window);
    for n in &e.notes {
        let _ = write!(text, " ({n})");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels_drop_the_step_number() {
        assert_eq!(short_label("#4 (evicted)", 3), "evicted");
        assert_eq!(
            short_label("#5 (stuck Terminating)", 4),
            "stuck Terminating"
        );
        assert_eq!(short_label("#2", 1), "");
        assert_eq!(short_label("custom", 1), "custom");
    }
}
