//! `report.md`'s first table: what ran (scenario, backend, cluster,
//! timing profile, targets), when (start, T0, duration) and the verdict,
//! then the run's error text when it stopped on one.

use std::fmt::Write as _;

use super::format::{cell, fence_for, secs, signed_secs, table, utc_full};
use crate::duration::format_duration;
use crate::profile::Var;
use crate::record::{RunResult, Verdict};

/// The run table, and the error block under it.
pub(super) fn section(out: &mut String, r: &RunResult) {
    let p = &r.profile;
    let profile = format!(
        "{}: grace period {}, monitor period {}, unreachable toleration {}, lease {}",
        p.name,
        format_duration(p.get(Var::NodeMonitorGracePeriod)),
        format_duration(p.get(Var::NodeMonitorPeriod)),
        format_duration(p.get(Var::UnreachableTolerationSeconds)),
        format_duration(p.get(Var::NodeLeaseDuration)),
    );
    let targets = if r.targets.is_empty() && r.sets.is_empty() {
        "not resolved".to_string()
    } else {
        let sets = r
            .sets
            .iter()
            .map(|(name, nodes)| format!("{name} → {} ({} nodes)", nodes.join(", "), nodes.len()));
        r.targets
            .iter()
            .map(|(name, node)| format!("{name} → {node}"))
            .chain(sets)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let t0 = match r.t0 {
        Some(t0) => format!(
            "{} (start{}; first fault or action)",
            utc_full(r.wall_clock(t0)),
            signed_secs(t0)
        ),
        None => "not reached (no fault or action started)".into(),
    };
    let counts = format!(
        "{} passed, {} failed, {} not run of {}",
        r.count(Verdict::Pass),
        r.count(Verdict::Fail),
        r.count(Verdict::NotRun),
        r.expectations.len()
    );
    let mut rows = vec![["scenario".into(), cell(&r.scenario)]];
    if let Some(d) = &r.description {
        rows.push(["description".into(), cell(d)]);
    }
    rows.extend([
        ["file".into(), cell(&r.file)],
        ["backend".into(), cell(&r.backend)],
        [
            "cluster version".into(),
            cell(
                r.cluster_version
                    .as_deref()
                    .unwrap_or("unknown (not reached)"),
            ),
        ],
        ["timing profile".into(), cell(&profile)],
        ["namespace".into(), cell(&r.namespace)],
        ["targets".into(), cell(&targets)],
        ["started".into(), utc_full(r.started_at)],
        ["T0".into(), t0],
        [
            "duration".into(),
            format!(
                "{} (cleanup included; ended {})",
                secs(r.finished),
                utc_full(r.wall_clock(r.finished))
            ),
        ],
        [
            "verdict".into(),
            format!("**{}**: {counts}", r.verdict.headline()),
        ],
    ]);
    out.push_str(&table(["run", ""], rows));
    // An abort has its own banner above; its error text would only repeat it.
    if let Some(error) = r.error.as_ref().filter(|_| r.aborted.is_none()) {
        let what = if r.verdict.is_partial() {
            "The run stopped early; the sections below cover only what happened until then."
        } else {
            "The run reported an error."
        };
        let fence = fence_for(error);
        let _ = writeln!(out, "\n> **Error.** {what}\n>");
        let _ = writeln!(out, "> {fence}text");
        for line in error.lines() {
            let _ = writeln!(out, "> {line}");
        }
        let _ = writeln!(out, "> {fence}");
    } else if r.verdict.is_partial() {
        let _ = writeln!(
            out,
            "\n> **Partial report.** The run stopped early; no error text was recorded."
        );
    }
    out.push('\n');
}
