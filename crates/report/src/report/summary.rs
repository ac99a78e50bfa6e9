//! A batch's summary in Markdown (`nodefall report summary`), fit for a CI
//! job's summary page: a verdict line, one row per scenario with its key
//! figures, then every failure in one line.

use std::fmt::Write as _;

use tabled::builder::Builder;
use tabled::settings::Style;

use super::format::cell;
use crate::stats::figures::{DEFS, Unit};
use crate::stats::summary::{Outcome, Summary};

/// The figures given a column, when some scenario has them: the recovery's
/// milestones after T0, then what clients saw.
const COLUMNS: [(&str, &str); 6] = [
    ("nodeNotReady", "node NotReady"),
    ("firstEviction", "first eviction"),
    ("lastReplacementReady", "last replacement Ready"),
    ("workloadReadyAgain", "workload Ready again"),
    ("nodeReadyAgain", "node Ready again"),
    ("errorWindow", "longest client error window"),
];

/// The whole summary.
pub fn render(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## nodefall: {}\n", headline(s));
    if s.entries.is_empty() {
        out.push_str("No run was found.\n");
        return out;
    }
    out.push_str(&table(s));
    let series = s.entries.iter().any(|e| e.runs > 1);
    out.push_str("\nTimes are after T0, the first fault (the error window is a duration)");
    out.push_str(if series {
        "; a series of repeated runs shows its median.\n"
    } else {
        ".\n"
    });
    let failures = failures(s);
    if !failures.is_empty() {
        out.push_str("\n### What failed\n\n");
        out.push_str(&failures);
    }
    if !s.not_run.is_empty() {
        let _ = writeln!(
            out,
            "\nIn the baseline but not run here: {}.",
            s.not_run.join(", ")
        );
    }
    out
}

/// `2 of 3 scenarios passed`, `every scenario passed (3)`.
fn headline(s: &Summary) -> String {
    match (s.outcome, s.scenarios) {
        (_, 0) => "nothing ran".to_owned(),
        (Outcome::Pass, 1) => "PASS".to_owned(),
        (Outcome::Pass, n) => format!("PASS, all {n} scenarios"),
        (o, n) => format!("{}, {} of {n} scenarios passed", o.word(), s.passed),
    }
}

fn table(s: &Summary) -> String {
    let columns: Vec<_> = COLUMNS
        .iter()
        .filter(|(name, _)| s.entries.iter().any(|e| e.figures.contains_key(*name)))
        .collect();
    let mut builder = Builder::default();
    let mut header = vec![
        "Scenario".to_owned(),
        "Verdict".to_owned(),
        "Expectations held".to_owned(),
    ];
    header.extend(columns.iter().map(|(_, title)| (*title).to_owned()));
    header.push("Report".to_owned());
    builder.push_record(header);
    for e in &s.entries {
        let verdict = if e.runs > 1 {
            format!(
                "{} ({}/{} runs passed)",
                e.outcome.word(),
                e.runs_passed,
                e.runs
            )
        } else {
            e.outcome.word().to_owned()
        };
        let mut row = vec![
            cell(&e.scenario),
            verdict,
            format!("{}/{}", e.expectations_held, e.expectations),
        ];
        for (name, _) in &columns {
            row.push(
                e.figures
                    .get(*name)
                    .map_or_else(|| "—".to_owned(), |v| show(name, *v)),
            );
        }
        row.push(format!("`{}`", cell(&report_dir(&e.source))));
        builder.push_record(row);
    }
    let mut table = builder.build();
    table.with(Style::markdown());
    format!("{table}\n")
}

/// A figure for people, in its unit.
fn show(name: &str, v: f64) -> String {
    let unit = DEFS
        .iter()
        .find(|d| d.name == name)
        .map_or(Unit::Ms, |d| d.unit);
    unit.show(v)
}

/// The run's directory, as the artifact holds it: the file's parent's name.
fn report_dir(source: &str) -> String {
    let path = std::path::Path::new(source);
    path.parent()
        .and_then(|p| p.file_name())
        .map_or_else(|| source.to_owned(), |n| n.to_string_lossy().into_owned())
}

/// Every failure, one line each: a stopped run, a failed expectation, a
/// figure slower than the baseline allows.
fn failures(s: &Summary) -> String {
    let mut out = String::new();
    for e in &s.entries {
        let name = one_line(&e.scenario);
        if let Some(error) = &e.error {
            let _ = writeln!(
                out,
                "- **{name}** {}: {}",
                stopped(e.outcome),
                one_line(error)
            );
        }
        for f in &e.failed {
            let _ = writeln!(
                out,
                "- **{name}** `{}` {}: {}",
                one_line(&f.label),
                one_line(&f.description),
                one_line(&f.detail)
            );
        }
        for r in &e.regressions {
            let _ = writeln!(
                out,
                "- **{name}** slower than the baseline: {}",
                one_line(r)
            );
        }
    }
    out
}

fn stopped(o: Outcome) -> &'static str {
    match o {
        Outcome::Interrupted => "was interrupted",
        Outcome::Error => "could not finish",
        Outcome::Pass | Outcome::Fail => "stopped early",
    }
}

/// Text on one Markdown line: line breaks folded, `<` defused.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('<', "&lt;")
}

#[cfg(test)]
mod tests;
