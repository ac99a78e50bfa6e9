//! "Observer precision": nodefall's observer checked against the API
//! server's audit log (sim clusters write one), with any baselines.

use std::fmt::Write as _;

use super::format::cell;
use super::markdown::table;
use super::result::RunResult;
use crate::audit::Check;
use crate::stats::aggregate::Summary;

/// Shown for a value the run did not observe.
const MISSING: &str = "—";

/// One line for progress output: `1234 transitions: 0 missed, ... lag p50 3.1 ms ...`.
pub fn audit_line(c: &Check) -> String {
    let lag = c.lag_ms.as_ref().map_or_else(String::new, |l| {
        format!(
            "; lag p50 {} p95 {} max {}",
            ms(l.p50),
            ms(l.p95),
            ms(l.max)
        )
    });
    format!(
        "{} true transitions: {} missed, {} duplicated, {} out of order, {} unexplained{lag}",
        c.truth, c.missed, c.duplicated, c.out_of_order, c.unexplained
    )
}

fn ms(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn opt(s: Option<&Summary>, f: impl Fn(&Summary) -> f64) -> String {
    s.map_or_else(|| MISSING.to_owned(), |s| ms(f(s)))
}

pub(super) fn section(out: &mut String, r: &RunResult) {
    let Some(a) = &r.audit else { return };
    let _ = writeln!(out, "## Observer precision\n");
    let _ = writeln!(
        out,
        "Every Node and Pod transition the API server stored between the observer's first \
         list and the cleanup ({} audit events, {} writes in scope, from {}), matched to what \
         each observer reported. Lag: reported − audit `stageTimestamp` (ResponseComplete, µs); \
         nodefall's own times have 1 ms resolution.\n",
        a.events,
        a.writes,
        super::format::code(&a.log)
    );
    let rows = a
        .checks
        .iter()
        .map(|c| {
            let lag = c.lag_ms.as_ref();
            [
                cell(&c.source),
                c.truth.to_string(),
                c.missed.to_string(),
                c.duplicated.to_string(),
                c.out_of_order.to_string(),
                c.unexplained.to_string(),
                opt(lag, |s| s.p50),
                opt(lag, |s| s.p95),
                opt(lag, |s| s.max),
                opt(c.lag_from_t0_ms.as_ref(), |s| s.p95),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "observer",
            "transitions",
            "missed",
            "duplicated",
            "out of order",
            "unexplained",
            "lag p50",
            "lag p95",
            "lag max",
            "lag p95 from T0",
        ],
        rows,
    ));
    out.push('\n');
    if r.watch_errors > 0 {
        let _ = writeln!(
            out,
            "nodefall's watchers recovered from {} watch error(s) by relisting; changes made \
             meanwhile were seen late, at the relist.\n",
            r.watch_errors
        );
    }
    if let Some(c) = a.checks.first() {
        for m in &c.missed_examples {
            let _ = writeln!(
                out,
                "- missed: {} {} at {}",
                cell(&format!("{:?}", m.object)),
                cell(&format!("{:?}", m.change)),
                m.at
            );
        }
        if !c.missed_examples.is_empty() {
            out.push('\n');
        }
    }
}
