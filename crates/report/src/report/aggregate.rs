//! The report of repeated runs: `aggregate.json`, `aggregate.md` and the
//! per-figure distribution chart `distribution.svg`, in the series'
//! directory beside each run's own (`run-1/`, `run-2/`, ...).

use std::fmt::Write as _;
use std::path::Path;

use super::format::{cell, code, inline, link_path, table, utc_full};
use super::output::{self, Error};
use super::svg::{self, Distribution, Point};
use crate::record::RunVerdict;
use crate::stats::Aggregate;
use crate::stats::figures::{self, Unit};

pub const AGGREGATE_JSON: &str = "aggregate.json";
pub const AGGREGATE_MD: &str = "aggregate.md";
pub const DISTRIBUTION_SVG: &str = "distribution.svg";

/// Writes the three files into `dir` (created if missing); returns the
/// path of `aggregate.md`.
pub fn write(
    files: &dyn crate::files::Files,
    dir: &Path,
    a: &Aggregate,
) -> Result<std::path::PathBuf, Error> {
    output::create_dir(files, dir)?;
    let path = dir.join(AGGREGATE_JSON);
    let mut json = serde_json::to_string_pretty(a).map_err(|source| Error::Serialize {
        path: path.clone(),
        source,
    })?;
    json.push('\n');
    output::write(files, path, &json)?;
    output::write(
        files,
        dir.join(DISTRIBUTION_SVG),
        &svg::distribution::render(&distribution(a)),
    )?;
    let md = dir.join(AGGREGATE_MD);
    output::write(files, md.clone(), &render(a))?;
    Ok(md)
}

fn chart_unit(u: Unit) -> svg::Unit {
    match u {
        Unit::Ms => svg::Unit::Ms,
        Unit::Count => svg::Unit::Count,
    }
}

/// Each figure's values over the counted runs, the slowest run marked.
pub fn distribution(a: &Aggregate) -> Distribution {
    let slowest = a.slowest.as_ref().map(|s| s.run);
    Distribution {
        title: format!("{}: {} runs", a.series.scenario, counted(a)),
        series: a
            .metrics
            .iter()
            .map(|m| svg::Series {
                name: m.name.clone(),
                unit: chart_unit(m.unit),
                points: a
                    .runs
                    .iter()
                    .filter(|r| r.counted())
                    .filter_map(|r| {
                        Some(Point {
                            run: r.run,
                            value: *r.figures.get(&m.name)? as f64,
                            highlight: Some(r.run) == slowest,
                        })
                    })
                    .collect(),
                p50: Some(m.summary.p50),
                p95: Some(m.summary.p95),
            })
            .collect(),
    }
}

fn counted(a: &Aggregate) -> usize {
    a.runs.iter().filter(|r| r.counted()).count()
}

fn verdict_word(v: RunVerdict) -> &'static str {
    match v {
        RunVerdict::Pass => "PASS",
        RunVerdict::Fail => "FAIL",
        RunVerdict::Error => "ERROR",
        RunVerdict::Interrupted => "INTERRUPTED",
    }
}

/// `aggregate.md`.
pub fn render(a: &Aggregate) -> String {
    let mut out = String::new();
    let n = counted(a);
    let passed = a
        .runs
        .iter()
        .filter(|r| r.verdict == RunVerdict::Pass)
        .count();
    let _ = writeln!(
        out,
        "# nodefall: {} over {n} runs\n",
        inline(&a.series.scenario)
    );
    let _ = writeln!(
        out,
        "- **Runs**: {passed} of {n} passed ({} requested{})",
        a.series.requested,
        match &a.stopped_early {
            Some(why) => format!("; stopped early: {}", inline(why)),
            None => String::new(),
        }
    );
    let _ = writeln!(
        out,
        "- **Scenario**: {}, backend {}, profile {}",
        code(&a.series.file),
        inline(&a.series.backend),
        inline(&a.series.profile)
    );
    let _ = writeln!(out, "- **Started**: {}", utc_full(a.series.started_at));
    if let Some(s) = &a.slowest {
        let unit = figures::find(&s.metric).map_or(Unit::Ms, |d| d.unit);
        let dir = a
            .runs
            .iter()
            .find(|r| r.run == s.run)
            .map_or_else(String::new, |r| r.dir.clone());
        let _ = writeln!(
            out,
            "- **Slowest run**: [run {}]({dir}/report.md), {} {}",
            s.run,
            s.metric,
            unit.show(s.value as f64)
        );
    }
    out.push('\n');
    metrics(&mut out, a);
    expectations(&mut out, a);
    runs(&mut out, a);
    out
}

fn metrics(out: &mut String, a: &Aggregate) {
    let _ = writeln!(out, "## Figures\n");
    if a.metrics.is_empty() {
        let _ = writeln!(out, "No run completed, so there is nothing to summarise.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Times are after T0 (the first fault or action) unless the figure is a duration. Percentiles \
         interpolate between the closest runs (with 5 runs, p95 lies between the two slowest); \
         n counts the runs that observed the figure.\n"
    );
    let rows = a
        .metrics
        .iter()
        .map(|m| {
            let s = &m.summary;
            let show = |v: f64| m.unit.show(v);
            [
                format!("`{}`", m.name),
                s.n.to_string(),
                show(s.min),
                show(s.p50),
                show(s.p95),
                show(s.max),
                format!("run {}", m.slowest_run),
                cell(figures::find(&m.name).map_or("", |d| d.about)),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "figure",
            "n",
            "min",
            "p50",
            "p95",
            "max",
            "largest in",
            "what",
        ],
        rows,
    ));
    let _ = writeln!(out, "\n![Each figure over the runs]({DISTRIBUTION_SVG})\n");
}

fn expectations(out: &mut String, a: &Aggregate) {
    if a.expectations.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Expectations\n");
    let flaky = a.expectations.iter().filter(|e| e.flaky()).count();
    if flaky > 0 {
        let _ = writeln!(
            out,
            "{flaky} expectation(s) passed in some runs and failed in others (marked **flaky**).\n"
        );
    }
    let rows = a
        .expectations
        .iter()
        .map(|e| {
            let rate = if e.flaky() {
                format!("**{}** flaky", e.rate())
            } else {
                e.rate()
            };
            let seen = e.observed.map_or_else(
                || "—".to_owned(),
                |s| {
                    format!(
                        "{} .. {} (p50 {}, n={})",
                        Unit::Ms.show_delta(s.min),
                        Unit::Ms.show_delta(s.max),
                        Unit::Ms.show_delta(s.p50),
                        s.n
                    )
                },
            );
            [
                cell(&e.label),
                cell(&e.description),
                rate,
                e.not_run.to_string(),
                seen,
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "expectation",
            "condition",
            "passed",
            "not run",
            "seen (after its anchor)",
        ],
        rows,
    ));
    out.push('\n');
}

fn runs(out: &mut String, a: &Aggregate) {
    let _ = writeln!(out, "## Runs\n");
    let rows = a
        .runs
        .iter()
        .map(|r| {
            let headline = a
                .slowest
                .as_ref()
                .and_then(|s| {
                    let v = *r.figures.get(&s.metric)?;
                    let unit = figures::find(&s.metric).map_or(Unit::Ms, |d| d.unit);
                    Some(format!("{} {}", s.metric, unit.show(v as f64)))
                })
                .unwrap_or_else(|| "—".into());
            [
                format!("[run {}]({}/report.md)", r.run, link_path(&r.dir)),
                verdict_word(r.verdict).to_owned(),
                format!("{}/{}", r.passed, r.expectations),
                headline,
                utc_full(r.started_at),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "run",
            "verdict",
            "expectations held",
            "headline",
            "started (UTC)",
        ],
        rows,
    ));
    if a.runs.iter().any(|r| !r.counted()) {
        let _ = writeln!(
            out,
            "\nRuns that stopped on an error or a signal are listed but not counted."
        );
    }
    out.push('\n');
}
