//! `nodefall report compare`'s output: Markdown fit for
//! `$GITHUB_STEP_SUMMARY`, JSON, and with `--out` the side-by-side chart.

use std::fmt::Write as _;
use std::path::Path;

use super::format::{cell, code, inline, table};
use super::output::{self, Error};
use super::svg::{self, Paired, PairedRow};
use crate::stats::Comparison;
use crate::stats::figures::Unit;

pub const COMPARE_JSON: &str = "compare.json";
pub const COMPARE_MD: &str = "compare.md";
pub const COMPARE_SVG: &str = "compare.svg";

/// Shown for a value a side did not observe.
const MISSING: &str = "—";

/// Writes `compare.md` (with the chart), `compare.json` and `compare.svg`
/// into `dir`; returns the path of `compare.md`.
pub fn write(
    files: &dyn crate::files::Files,
    dir: &Path,
    c: &Comparison,
) -> Result<std::path::PathBuf, Error> {
    output::create_dir(files, dir)?;
    let path = dir.join(COMPARE_JSON);
    output::write(
        files,
        path.clone(),
        &json(c).map_err(|source| Error::Serialize { path, source })?,
    )?;
    output::write(
        files,
        dir.join(COMPARE_SVG),
        &svg::paired::render(&chart(c)),
    )?;
    let md = dir.join(COMPARE_MD);
    output::write(files, md.clone(), &render(c, Some(COMPARE_SVG)))?;
    Ok(md)
}

/// `compare.json`.
pub fn json(c: &Comparison) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string_pretty(c)?;
    s.push('\n');
    Ok(s)
}

/// The chart's rows: every figure both sides have or either has.
pub fn chart(c: &Comparison) -> Paired {
    Paired {
        title: format!("{}: base vs new", c.new.scenario),
        base_label: format!("base: {}", c.base.describe()),
        new_label: format!("new: {}", c.new.describe()),
        rows: c
            .rows
            .iter()
            .map(|r| PairedRow {
                name: r.name.clone(),
                unit: match r.unit {
                    Unit::Ms => svg::Unit::Ms,
                    Unit::Count => svg::Unit::Count,
                },
                base: r.base,
                new: r.new,
                regressed: r.regressed,
            })
            .collect(),
    }
}

/// The Markdown; `chart` names the SVG to embed, when one is written.
pub fn render(c: &Comparison, chart: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## nodefall compare: {}\n", inline(&c.new.scenario));
    let _ = writeln!(out, "- **Base**: {}", code(&c.base.describe()));
    let _ = writeln!(out, "- **New**: {}", code(&c.new.describe()));
    if c.base.scenario != c.new.scenario {
        let _ = writeln!(
            out,
            "- **Note**: different scenarios ({} and {}): the figures may not be comparable",
            code(&c.base.scenario),
            code(&c.new.scenario)
        );
    }
    out.push('\n');
    if c.regressions.is_empty() {
        let _ = writeln!(out, "**No regression.**\n");
    } else {
        let _ = writeln!(out, "**{} regression(s):**\n", c.regressions.len());
        for r in &c.regressions {
            let _ = writeln!(out, "- {}", cell(r));
        }
        out.push('\n');
    }
    let rows = c
        .rows
        .iter()
        .map(|r| {
            let show = |v: Option<f64>| v.map_or_else(|| MISSING.to_owned(), |v| r.unit.show(v));
            [
                format!("`{}`", r.name),
                show(r.base),
                show(r.new),
                r.delta
                    .map_or_else(|| MISSING.to_owned(), |d| r.unit.show_delta(d)),
                r.ratio
                    .map_or_else(|| MISSING.to_owned(), |x| format!("{x:.2}x")),
                r.limit
                    .map_or_else(|| MISSING.to_owned(), |l| l.show(r.unit)),
                if r.regressed {
                    "**slower**".to_owned()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    out.push_str(&table(
        ["figure", "base", "new", "delta", "ratio", "limit", ""],
        rows,
    ));
    out.push('\n');
    if !c.verdict_changes.is_empty() {
        let _ = writeln!(out, "### Expectations whose verdict changed\n");
        let rows = c
            .verdict_changes
            .iter()
            .map(|v| {
                [
                    cell(&v.label),
                    cell(&v.description),
                    v.base.clone().unwrap_or_else(|| "absent".into()),
                    v.new.clone().unwrap_or_else(|| "absent".into()),
                    if v.worse {
                        "**worse**".into()
                    } else {
                        String::new()
                    },
                ]
            })
            .collect();
        out.push_str(&table(
            ["expectation", "condition", "base passed", "new passed", ""],
            rows,
        ));
        out.push('\n');
    }
    if let Some(svg) = chart {
        let _ = writeln!(out, "![Base and new side by side]({svg})\n");
    }
    out
}
