//! `report.md`: a run result rendered as Markdown for people (summary, the
//! graceful-shutdown preflight, expectations, metrics, pods, node
//! transitions, steps, and the SVG timeline beside it).
//!
//! Pure: everything shown comes from the [`RunResult`]; nothing is measured
//! or estimated here. Times are shown relative to T0 (`T0+8.012s`) and as UTC.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::format::{
    MISSING, cell, fence_for, had_fault, inline, nodes_word, rel, secs, signed_secs, t0_rel, table,
    utc_full, utc_time,
};
use crate::duration::format_duration;
use crate::profile::Var;
use crate::record::{ExpectationResult, RunResult, StepOutcome, StepRecord, Verdict};
use crate::scenario::expr::Window;
use crate::timeline::metrics::PodRecovery;
use crate::timeline::{Change, Ms, ObjectRef, Transition};

/// Renders `report.md`.
pub fn render(result: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# nodefall report: {}\n", inline(&result.scenario));
    super::guard::banner(&mut out, result);
    summary(&mut out, result);
    super::guard::section(&mut out, result);
    super::graceful::section(&mut out, result);
    expectations(&mut out, result);
    super::timing::section(&mut out, result);
    key_metrics(&mut out, result);
    super::remediation::section(&mut out, result);
    pods(&mut out, result);
    node_transitions(&mut out, result);
    super::clients::section(&mut out, result);
    super::volumes::sections(&mut out, result);
    steps(&mut out, result);
    super::commands::section(&mut out, result);
    super::audit::section(&mut out, result);
    timeline(&mut out, result);
    out
}

/// A metric relative to T0, with its UTC time.
fn metric_time(result: &RunResult, rel_t0: Option<Ms>) -> [String; 2] {
    match rel_t0 {
        None => ["not observed".into(), MISSING.into()],
        Some(ms) => [
            t0_rel(ms),
            result
                .t0_plus(ms)
                .map(|at| utc_time(result.wall_clock(at)))
                .unwrap_or_else(|| MISSING.into()),
        ],
    }
}

/// The window as written and as evaluated, with what its numbers rest on.
fn window_cell(e: &crate::record::ExpectationResult) -> String {
    let mut text = format!("{} [{}]", e.window_written, e.window);
    for n in &e.notes {
        let _ = write!(text, " ({n})");
    }
    text
}

fn opt_t0(ms: Option<Ms>) -> String {
    ms.map(t0_rel).unwrap_or_else(|| MISSING.into())
}

fn summary(out: &mut String, r: &RunResult) {
    let p = &r.profile;
    let profile = format!(
        "{}: grace period {}, monitor period {}, unreachable toleration {}, lease {}",
        p.name,
        format_duration(p.get(Var::NodeMonitorGracePeriod)),
        format_duration(p.get(Var::NodeMonitorPeriod)),
        format_duration(p.get(Var::UnreachableTolerationSeconds)),
        format_duration(p.get(Var::NodeLeaseDuration)),
    );
    let targets = if r.targets.is_empty() {
        "not resolved".to_string()
    } else {
        r.targets
            .iter()
            .map(|(name, node)| format!("{name} → {node}"))
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

fn expectations(out: &mut String, r: &RunResult) {
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

fn key_metrics(out: &mut String, r: &RunResult) {
    let m = &r.metrics;
    let _ = writeln!(out, "## Key metrics\n");
    if r.t0.is_none() {
        let _ = writeln!(
            out,
            "No fault or action started (no T0), so nothing was measured.\n"
        );
    }
    let fault = had_fault(r);
    if !fault && r.t0.is_some() {
        let _ = writeln!(
            out,
            "No fault was injected (no `fault` step ran), so node-failure metrics are listed only \
             where a target node did fail.\n"
        );
    }
    let time_row = |name: &str, v: Option<Ms>| {
        let [value, utc] = metric_time(r, v);
        [name.to_string(), value, utc]
    };
    // A node failure not observed is news after a fault (or once a target
    // node failed anyway), not after a drain.
    let failed = fault || m.node_not_ready.is_some();
    let failure_row =
        |name: &str, v: Option<Ms>| (failed || v.is_some()).then(|| time_row(name, v));
    let lag = |v: Option<Ms>| v.map(secs).unwrap_or_else(|| "not observed".into());
    let mut rows: Vec<[String; 3]> = [
        failure_row("Target node NotReady/Unknown", m.node_not_ready),
        failure_row("NoExecute taint on the target node", m.no_execute_taint),
    ]
    .into_iter()
    .flatten()
    .collect();
    rows.extend([
        time_row(
            "First eviction (pod on a target node Terminating)",
            m.first_eviction,
        ),
        time_row(
            "Workload ready again (as many Ready pods as before T0)",
            m.workload_ready_again,
        ),
    ]);
    rows.extend(failure_row("Target node Ready again", m.node_ready_again));
    rows.extend([
        [
            "Ready pods before T0".into(),
            m.ready_before.to_string(),
            MISSING.into(),
        ],
        [
            "Most Ready pods missing at once after T0".into(),
            m.max_unavailable.to_string(),
            MISSING.into(),
        ],
        [
            format!("{LAG_VS}, median"),
            lag(m.detection_lag_median),
            MISSING.into(),
        ],
        [
            format!("{LAG_VS}, max"),
            lag(m.detection_lag_max),
            MISSING.into(),
        ],
    ]);
    out.push_str(&table(["metric", "value", "UTC"], rows));
    if m.detection_lag_median.is_some() {
        let _ = writeln!(
            out,
            "\nDetection lag is when nodefall saw a change after T0 minus the time the API server \
             wrote into the object for it (conditions' `lastTransitionTime`, taints' `timeAdded`, \
             pods' `deletionTimestamp`). Those stamps are whole seconds, so a lag reads up to 1s \
             longer than it was{}.",
            if r.audit.is_some() {
                "; the audit section's lag is measured against the audit log's microsecond \
                 stamps instead"
            } else {
                ""
            }
        );
    }
    out.push('\n');
}

/// The Key-metrics lag says what it is measured against: the objects' own
/// whole-second stamps, not the audit log's.
const LAG_VS: &str = "Detection lag vs whole-second server timestamps";

/// How the replacement's creation relates to its predecessor's lifetime.
fn replacement_vs_old(p: &PodRecovery) -> Option<(bool, String)> {
    let created = p.replacement_created?;
    Some(match (p.deleted_at, p.terminating_at) {
        (Some(deleted), _) if created >= deleted => (
            true,
            format!("{} after the old pod was deleted", secs(created - deleted)),
        ),
        (_, Some(term)) if created >= term => (
            false,
            format!(
                "while the old pod was Terminating ({} after it began)",
                secs(created - term)
            ),
        ),
        _ => (false, "while the old pod still existed".into()),
    })
}

fn pods(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "## Pods on the {} node(s)\n", nodes_word(r));
    let pods = &r.metrics.pods;
    if pods.is_empty() {
        let _ = writeln!(out, "No pod was recorded on a target node at T0.\n");
        return;
    }
    if had_fault(r) {
        let _ = writeln!(out, "Times are relative to T0.\n");
    } else {
        let _ = writeln!(
            out,
            "The pods on the target nodes at T0 and what replaced them (no fault was injected). \
             Times are relative to T0.\n"
        );
    }
    let rows = pods
        .iter()
        .map(|p| {
            let terminating_for = match (p.terminating_at, p.terminating_for) {
                (None, _) => MISSING.to_string(),
                (Some(_), Some(d)) if p.still_present => {
                    format!("still Terminating at end ({} so far)", secs(d))
                }
                (Some(_), None) if p.still_present => "still Terminating at end".into(),
                (Some(_), Some(d)) => secs(d),
                (Some(_), None) => MISSING.into(),
            };
            let terminating_at = match p.terminating_at {
                Some(t) => t0_rel(t),
                None if p.still_present => "not evicted".into(),
                None => MISSING.into(),
            };
            let deleted = match p.deleted_at {
                Some(d) => t0_rel(d),
                None if p.still_present => "still present at end".into(),
                None => MISSING.into(),
            };
            let created = match (p.replacement_created, replacement_vs_old(p)) {
                (Some(c), Some((_, how))) => format!("{}<br>{}", t0_rel(c), cell(&how)),
                (Some(c), None) => t0_rel(c),
                (None, _) => MISSING.into(),
            };
            [
                cell(&p.pod),
                cell(p.owner.as_deref().unwrap_or(MISSING)),
                cell(&p.node),
                terminating_at,
                terminating_for,
                deleted,
                cell(p.replacement.as_deref().unwrap_or("none by the end")),
                cell(p.replacement_node.as_deref().unwrap_or(MISSING)),
                created,
                opt_t0(p.replacement_scheduled),
                opt_t0(p.replacement_running),
                opt_t0(p.replacement_ready),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "pod",
            "owner",
            "node",
            "Terminating at",
            "Terminating for",
            "deleted",
            "replacement",
            "on node",
            "created",
            "scheduled",
            "Running",
            "Ready",
        ],
        rows,
    ));
    out.push('\n');
    // Per owner: were replacements created only after the old pod was gone?
    let owners: BTreeSet<Option<&str>> = pods.iter().map(|p| p.owner.as_deref()).collect();
    for owner in owners {
        let group: Vec<&PodRecovery> = pods
            .iter()
            .filter(|p| p.owner.as_deref() == owner)
            .collect();
        let (mut after, mut during, mut none) = (0, 0, 0);
        for p in &group {
            match replacement_vs_old(p) {
                Some((true, _)) => after += 1,
                Some((false, _)) => during += 1,
                None => none += 1,
            }
        }
        let mut parts = Vec::new();
        if after > 0 {
            parts.push(format!(
                "{after} replaced only after the old pod was deleted"
            ));
        }
        if during > 0 {
            parts.push(format!("{during} replaced while the old pod still existed"));
        }
        if none > 0 {
            parts.push(format!("{none} not replaced by the end of the run"));
        }
        let _ = writeln!(
            out,
            "- {} ({} pod{}): {}.",
            cell(owner.unwrap_or("no owner")),
            group.len(),
            if group.len() == 1 { "" } else { "s" },
            parts.join(", ")
        );
    }
    out.push('\n');
}

/// A server stamp this much older than something it must postdate is not
/// the change's own time (stamps are whole seconds: 1 s is their slack).
const STAMP_SLACK: Ms = 1_000;

/// The server lag of a node's transition: seen minus the server's stamp,
/// unless that is no lag. The change was there before the watch began (in
/// its first list, or stamped before the run: the object's age, not a
/// lag), or, for a Ready change, the stamp is older than the node's
/// previous Ready change nodefall saw (not this change's time).
/// The flag says the stamp was set aside.
fn server_lag(r: &RunResult, node: &str, t: &Transition, earlier: &[Transition]) -> (String, bool) {
    let Some(stamp) = t.server_time else {
        return (MISSING.into(), false);
    };
    let stamp = stamp.as_millisecond();
    let seen = r.wall_clock(t.at).as_millisecond();
    let listed = r.observed_from.is_some_and(|from| t.at <= from);
    if listed || stamp + STAMP_SLACK < r.started_at.as_millisecond() {
        return (format!("{MISSING} (before the watch began)"), true);
    }
    let previous_ready = matches!(t.change, Change::NodeReady { .. })
        .then(|| {
            earlier.iter().rev().find(|p| {
                matches!(&p.object, ObjectRef::Node { name } if name == node)
                    && matches!(p.change, Change::NodeReady { .. })
            })
        })
        .flatten();
    match previous_ready {
        Some(p) if stamp + STAMP_SLACK < r.wall_clock(p.at).as_millisecond() => (
            format!("{MISSING} (stale stamp, {} old)", secs(seen - stamp)),
            true,
        ),
        _ => (signed_secs(seen - stamp), false),
    }
}

fn node_transitions(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "## Node transitions\n");
    let mut stale = false;
    let rows: Vec<[String; 5]> = r
        .transitions
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match &t.object {
            ObjectRef::Node { name } => Some((i, t, name)),
            _ => None,
        })
        .map(|(i, t, name)| {
            let seen = r.wall_clock(t.at);
            let (lag, set_aside) = server_lag(r, name, t, &r.transitions[..i]);
            stale |= set_aside;
            [
                rel(r, t.at),
                utc_time(seen),
                cell(name),
                cell(&match &t.by {
                    Some(by) => format!("{} (by {by})", t.change.describe()),
                    None => t.change.describe(),
                }),
                lag,
            ]
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "No node transition was observed.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Server lag is when nodefall saw the change minus the server's own timestamp for it \
         (condition `lastTransitionTime`, taint `timeAdded`), which has whole-second precision.{}\n",
        if stale {
            " A change already there when the watch began gives no lag (its stamp says how old \
             it was), nor does a Ready stamp older than the node's previous Ready change: it is \
             not the change's own time (a simulated node keeps its first Ready stamp)."
        } else {
            ""
        }
    );
    out.push_str(&table(
        ["time", "UTC", "node", "change", "server lag"],
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

fn steps(out: &mut String, r: &RunResult) {
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

/// The timeline section: the SVG written next to `report.md`, and what
/// its rows are.
fn timeline(out: &mut String, r: &RunResult) {
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
    let _ = writeln!(out, "![Timeline of the run]({})\n", super::TIMELINE_SVG);
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
