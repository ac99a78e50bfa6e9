//! `report.md`'s Steps: the scenario's steps and the cleanup's, each with
//! its start, duration, outcome and the notes it left.

use std::fmt::Write as _;

use super::format::{MISSING, cell, rel, secs, table};
use crate::record::{RunResult, StepOutcome, StepRecord};

/// The Steps table.
pub(super) fn section(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "## Steps\n");
    let all: Vec<&StepRecord> = r.steps.iter().chain(&r.cleanup).collect();
    if all.is_empty() {
        let _ = writeln!(out, "No step was recorded.\n");
        return;
    }
    let rows = all
        .into_iter()
        .map(|s| {
            let duration = match s.ended {
                Some(end) => secs(end - s.started),
                None if s.outcome == StepOutcome::Skipped => MISSING.into(),
                None => "did not finish".into(),
            };
            let notes = s
                .notes
                .iter()
                .map(|(at, note)| format!("{}: {}", rel(r, *at), cell(note)))
                .collect::<Vec<_>>()
                .join("<br>");
            let start = if s.outcome == StepOutcome::Skipped {
                MISSING.into()
            } else {
                rel(r, s.started)
            };
            [
                cell(&s.label),
                s.kind.name().into(),
                cell(&s.description),
                start,
                duration,
                outcome(&s.outcome),
                notes,
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "step",
            "kind",
            "description",
            "start",
            "duration",
            "outcome",
            "notes",
        ],
        rows,
    ));
    out.push('\n');
}

fn outcome(o: &StepOutcome) -> String {
    match o {
        StepOutcome::Ok => "ok".into(),
        StepOutcome::Failed(msg) => format!("**failed**: {}", cell(msg)),
        StepOutcome::Skipped => "skipped".into(),
    }
}
