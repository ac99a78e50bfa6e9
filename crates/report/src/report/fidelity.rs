//! `nodefall report fidelity`'s Markdown: the sim against real kubelets,
//! scenario by scenario (docs/fidelity.md is this, generated).

use std::fmt::Write as _;

use super::format::{cell, secs, signed_secs, table};
use crate::record::RunResult;
use crate::verdict::fidelity::{Row, RowVerdict, SLACK_MS, SLACK_SHARE, ScenarioFidelity};

/// A scenario run on one side only.
#[derive(Debug, Clone)]
pub struct Unpaired {
    pub scenario: String,
    /// The side that has it (`kind`, `sim`).
    pub side: &'static str,
}

/// The document: a summary, then each scenario's rows.
pub fn render(
    title_note: &str,
    kind: &[&RunResult],
    sim: &[&RunResult],
    scenarios: &[ScenarioFidelity],
    unpaired: &[Unpaired],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# The simulator against real kubelets\n");
    out.push_str(title_note);
    if !title_note.ends_with("\n\n") {
        out.push_str("\n\n");
    }
    let _ = writeln!(
        out,
        "Each scenario ran on a real kind cluster and on the simulator with the same timings. \
         Every transition is timed from the fault or action step it followed (both runs take \
         the same steps, not at the same moments), and judged by its own latency: the time since \
         the row before it (in kind's order, seen on both sides) or since its step, so a \
         transition late on one side does not make every later one late. The goal: every \
         transition on both, in the same order, each latency within {:.0} % of kind's or {}.\n",
        SLACK_SHARE * 100.0,
        secs(SLACK_MS)
    );
    timings(&mut out, kind, sim);
    let all = scenarios.iter().flat_map(|s| &s.rows);
    let (total, met) = (
        all.clone().count(),
        all.clone().filter(|r| r.verdict.meets_goal()).count(),
    );
    // Each behaviour the sim lacks, with the scenarios that need it.
    let mut lacks: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for s in scenarios {
        for r in &s.rows {
            if let RowVerdict::Cannot { lacks: l } = &r.verdict {
                lacks.entry(l).or_default().push(&s.scenario);
            }
        }
    }
    let cannot: usize = lacks.values().map(Vec::len).sum();
    let _ = writeln!(
        out,
        "## Summary\n\n**{met} of {total} rows within the goal, {cannot} the sim cannot show \
         ({} behaviour(s) it lacks), {} not met; {} scenario(s) with transitions in another \
         order; {} run on one side only.**\n",
        lacks.len(),
        total - met - cannot,
        scenarios
            .iter()
            .filter(|s| !s.inversions.is_empty())
            .count(),
        unpaired.len()
    );
    let rows = scenarios
        .iter()
        .map(|s| {
            let count =
                |f: fn(&RowVerdict) -> bool| s.rows.iter().filter(|r| f(&r.verdict)).count();
            [
                format!("[`{}`](#{})", s.scenario, s.scenario),
                s.kind_verdict.clone(),
                s.sim_verdict.clone(),
                s.rows.len().to_string(),
                count(RowVerdict::meets_goal).to_string(),
                count(|v| !v.meets_goal() && !matches!(v, RowVerdict::Cannot { .. })).to_string(),
                count(|v| matches!(v, RowVerdict::Cannot { .. })).to_string(),
                if s.inversions.is_empty() {
                    "same".into()
                } else {
                    format!("**{} inverted**", s.inversions.len())
                },
            ]
        })
        .chain(unpaired.iter().map(|u| {
            let [a, b] = if u.side == "kind" {
                ["ran", "no run"]
            } else {
                ["no run", "ran"]
            };
            [
                format!("`{}`", u.scenario),
                a.into(),
                b.into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]
        }))
        .collect();
    out.push_str(&table(
        [
            "scenario", "kind", "sim", "rows", "within", "not met", "cannot", "order",
        ],
        rows,
    ));
    out.push('\n');
    if !lacks.is_empty() {
        let _ = writeln!(out, "What the sim cannot show, and why:\n");
        for (l, in_scenarios) in &lacks {
            let _ = writeln!(
                out,
                "- {} ({}): it lacks {}.",
                in_scenarios
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if in_scenarios.len() == 1 {
                    "one row"
                } else {
                    "one row each"
                },
                cell(l)
            );
        }
        out.push('\n');
    }
    for s in scenarios {
        scenario(&mut out, s);
    }
    out
}

fn timings(out: &mut String, kind: &[&RunResult], sim: &[&RunResult]) {
    let (Some(k), Some(s)) = (kind.first(), sim.first()) else {
        return;
    };
    let _ = writeln!(out, "## Timings\n");
    let rows: Vec<[String; 3]> = k
        .profile
        .rows()
        .into_iter()
        .zip(s.profile.rows())
        .map(|(k, s)| {
            let same = k[1] == s[1];
            [
                format!("`{}`", k[0]),
                format!("{} ({} {})", k[1], k[2], cell(&k[3])),
                if same {
                    s[1].clone()
                } else {
                    format!("**{}**", s[1])
                },
            ]
        })
        .collect();
    let differ = rows.iter().filter(|r| r[2].starts_with("**")).count();
    let count = rows.len();
    out.push_str(&table(["timing", "kind (where from)", "sim"], rows));
    let _ = writeln!(
        out,
        "\n{}\n",
        if differ == 0 {
            format!("The same {count} timings on both.")
        } else {
            format!("**{differ} timing(s) differ**: those rows compare different clusters.")
        }
    );
}

fn scenario(out: &mut String, s: &ScenarioFidelity) {
    let _ = writeln!(out, "## {}\n", s.scenario);
    let _ = writeln!(out, "kind: {}; sim: {}.\n", s.kind_verdict, s.sim_verdict);
    let rows = s.rows.iter().map(row).collect();
    out.push_str(&table(
        [
            "transition",
            "after step",
            "kind",
            "sim",
            "kind: since the row before",
            "sim: since the row before",
            "verdict",
        ],
        rows,
    ));
    out.push('\n');
    for i in &s.inversions {
        let _ = writeln!(
            out,
            "- **Order**: after {}, kind saw {} before {}; the sim the other way round.",
            cell(&i.step),
            cell(&i.first),
            cell(&i.then)
        );
    }
    if !s.inversions.is_empty() {
        out.push('\n');
    }
}

fn row(r: &Row) -> [String; 7] {
    let time = |t: Option<i64>, n: usize| match t {
        Some(t) if n > 1 => format!("{} ({n})", signed_secs(t)),
        Some(t) => signed_secs(t),
        None => "-".into(),
    };
    let verdict = match &r.verdict {
        RowVerdict::Within => "ok".into(),
        RowVerdict::Off => "**off**".into(),
        RowVerdict::Timer { rule } => {
            format!("ok: both inside the timer's window ({})", cell(rule))
        }
        RowVerdict::Race { rule } => format!("ok: one race, each side's way ({})", cell(rule)),
        RowVerdict::Count => format!("**{} on kind, {} on sim**", r.kind_count, r.sim_count),
        RowVerdict::OnlyKind => "**kind only**".into(),
        RowVerdict::OnlySim => "**sim only**".into(),
        RowVerdict::Cannot { lacks } => format!("cannot: the sim lacks {}", cell(lacks)),
    };
    [
        cell(&r.what),
        cell(&r.step),
        time(r.kind, r.kind_count),
        time(r.sim, r.sim_count),
        r.kind_gap.map_or_else(|| "-".into(), signed_secs),
        r.sim_gap.map_or_else(|| "-".into(), signed_secs),
        verdict,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_as_the_doc_shows_them() {
        let r = Row {
            what: "pods on target: Terminating (first)".into(),
            step: "#1 (pause)".into(),
            kind: Some(348_381),
            sim: Some(347_900),
            kind_count: 4,
            sim_count: 4,
            kind_gap: Some(300),
            sim_gap: Some(-20),
            verdict: RowVerdict::Within,
        };
        assert_eq!(
            row(&r),
            [
                "pods on target: Terminating (first)",
                "#1 (pause)",
                "+348.381s (4)",
                "+347.900s (4)",
                "+0.300s",
                "-0.020s",
                "ok"
            ]
            .map(String::from)
        );
        let r = Row {
            sim: None,
            sim_count: 0,
            kind_gap: None,
            sim_gap: None,
            verdict: RowVerdict::OnlyKind,
            ..r
        };
        assert_eq!(
            row(&r)[3..],
            ["-", "-", "-", "**kind only**"].map(String::from)
        );
        // A race row meets the goal and says which race.
        let r = Row {
            verdict: RowVerdict::Race {
                rule: "a | b".into(),
            },
            ..r
        };
        assert!(r.verdict.meets_goal());
        assert_eq!(row(&r)[6], r"ok: one race, each side's way (a \| b)");
    }
}
