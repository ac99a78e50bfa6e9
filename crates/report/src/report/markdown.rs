//! `report.md`: a run result rendered as Markdown for people (summary, the
//! graceful-shutdown preflight, expectations, metrics, pods, node
//! transitions, steps, and the SVG timeline beside it).
//!
//! Pure: everything shown comes from the [`RunResult`]; nothing is measured
//! or estimated here. Times are shown relative to T0 (`T0+8.012s`) and as UTC.
//!
//! This file only puts the sections in order. Each section is a file of its
//! own beside it with a `section(out, result)` (or `sections`) function;
//! what they share (tables, times, cells, [`super::format::had_fault`]) is
//! in `format.rs`, which imports no section. A new section is a new file,
//! its `mod` line in `report/mod.rs` and its call here; a section never
//! imports this file, so the files of `report/` form no import ring.

use std::fmt::Write as _;

use super::format::inline;
use super::{
    audit, clients, commands, expectations, graceful, guard, key_metrics, node_transitions,
    overview, pods, remediation, steps, timeline_section, timing, volumes, zones,
};
use crate::record::RunResult;

/// Renders `report.md`.
pub fn render(result: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# nodefall report: {}\n", inline(&result.scenario));
    guard::banner(&mut out, result);
    overview::section(&mut out, result);
    guard::section(&mut out, result);
    graceful::section(&mut out, result);
    expectations::section(&mut out, result);
    timing::section(&mut out, result);
    key_metrics::section(&mut out, result);
    zones::section(&mut out, result);
    remediation::section(&mut out, result);
    pods::section(&mut out, result);
    node_transitions::section(&mut out, result);
    clients::section(&mut out, result);
    volumes::sections(&mut out, result);
    steps::section(&mut out, result);
    commands::section(&mut out, result);
    audit::section(&mut out, result);
    timeline_section::section(&mut out, result);
    out
}
