//! `report.md`'s Timeline section: the SVG written next to `report.md`
//! (see [`super::svg::timeline`]), and a sentence saying what its rows are
//! and which stretches its axis skips.

use std::fmt::Write as _;

use super::format::{secs, utc_time};
use super::output::TIMELINE_SVG;
use crate::record::RunResult;
use crate::timeline::Ms;

/// The timeline section: the SVG written next to `report.md`, and what
/// its rows are.
pub(super) fn section(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "## Timeline\n");
    let lanes = super::lanes::build(r);
    let has = |section: &str, word: &str| {
        lanes
            .sections
            .iter()
            .filter(|s| s.name == section)
            .flat_map(|s| &s.rows)
            .any(|row| row.label.contains(word))
    };
    let mut rows = vec![format!(
        "steps in scenario order with their expectation windows as they ran (a hollow diamond \
         where each was seen){}{}",
        if r.steps.iter().any(|s| !s.evictions.is_empty()) {
            ", a drain's evictions and refusals (429)"
        } else {
            ""
        },
        if r.cleanup.is_empty() {
            ""
        } else {
            ", cleanup in one row"
        }
    )];
    if lanes.sections.iter().any(|s| s.name == "Nodes") {
        rows.push(format!(
            "each target node's lane (Ready, NotReady, Unknown, or deleted){}",
            if has("Nodes", "cordoned") {
                " and its cordons"
            } else {
                ""
            }
        ));
    }
    if lanes.sections.iter().any(|s| s.name == "Pods") {
        rows.push("Terminating pods and their replacements".into());
    }
    if lanes.sections.iter().any(|s| s.name == "Volumes") {
        rows.push(
            "each volume's attachments (attached, attaching, detaching, Multi-Attach errors)"
                .into(),
        );
    }
    if lanes.sections.iter().any(|s| s.name == "Clients") {
        rows.push("what clients saw".into());
    }
    let mut text = rows.join("; ");
    if let Some(first) = text.get(..1) {
        text = first.to_uppercase() + &text[1..];
    }
    let skipped = super::svg::timeline::skipped(&lanes);
    let _ = writeln!(
        out,
        "{text}. Seconds from T0{}.{}\n",
        match r.t0 {
            Some(t0) => format!(" ({} UTC)", utc_time(r.wall_clock(t0))),
            None => " (not reached: seconds from the start)".into(),
        },
        match skipped.len() {
            0 => String::new(),
            n => format!(
                " The axis skips {n} stretch{} in which nothing began or ended ({} in all; grey \
                 bands marked //), so the short phases keep their width.",
                if n == 1 { "" } else { "es" },
                secs(skipped.iter().map(|(a, b)| (b - a) as Ms).sum())
            ),
        }
    );
    let _ = writeln!(out, "![Timeline of the run]({})\n", TIMELINE_SVG);
}
