//! Two runs, or two aggregates, set side by side (`nodefall report
//! compare`): every figure with its delta and ratio, the expectations whose
//! verdict changed, and what crossed a threshold.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::aggregate::{Aggregate, Stat};
use super::figures::{self, Unit};
use crate::record::RunResult;
use crate::record::Verdict;

/// One side of a comparison: a run (N = 1) or an aggregate under one statistic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// The file it was read from.
    pub source: String,
    pub scenario: String,
    pub runs: usize,
    /// The statistic standing for an aggregate (absent for one run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stat: Option<Stat>,
    #[serde(skip)]
    values: BTreeMap<String, f64>,
    #[serde(skip)]
    expectations: Vec<(String, String, usize, usize)>,
}

impl Side {
    /// A single run.
    pub fn of_run(source: &str, r: &RunResult) -> Side {
        Side {
            source: source.to_owned(),
            scenario: r.scenario.clone(),
            runs: 1,
            stat: None,
            values: figures::of(r)
                .into_iter()
                .map(|(k, v)| (k, v as f64))
                .collect(),
            expectations: r
                .expectations
                .iter()
                .filter(|e| e.verdict != Verdict::NotRun)
                .map(|e| {
                    let pass = usize::from(e.verdict == Verdict::Pass);
                    (e.label.clone(), e.description.clone(), pass, 1)
                })
                .collect(),
        }
    }

    /// An aggregate, each figure as its `stat`.
    pub fn of_aggregate(source: &str, a: &Aggregate, stat: Stat) -> Side {
        Side {
            source: source.to_owned(),
            scenario: a.series.scenario.clone(),
            runs: a.runs.iter().filter(|r| r.counted()).count(),
            stat: Some(stat),
            values: a
                .metrics
                .iter()
                .map(|m| (m.name.clone(), m.summary.get(stat)))
                .collect(),
            expectations: a
                .expectations
                .iter()
                .map(|e| {
                    let decided = e.passed + e.failed;
                    (e.label.clone(), e.description.clone(), e.passed, decided)
                })
                .collect(),
        }
    }

    /// Every figure it has, by name (ms or a count).
    pub fn values(&self) -> &BTreeMap<String, f64> {
        &self.values
    }

    /// `base.json (5 runs, p50)`.
    pub fn describe(&self) -> String {
        match self.stat {
            Some(s) => format!("{} ({} runs, {})", self.source, self.runs, s.name()),
            None => format!("{} (1 run)", self.source),
        }
    }
}

/// How much slower a figure may get.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "value")]
pub enum Limit {
    /// At most this many percent above the base.
    Percent(f64),
    /// At most this much above the base (ms, or a count).
    Absolute(f64),
}

impl Limit {
    /// `+20%`, `+5s`.
    pub fn show(self, unit: Unit) -> String {
        match self {
            Limit::Percent(p) => format!("+{p}%"),
            Limit::Absolute(a) => unit.show_delta(a),
        }
    }
}

/// What counts as a regression.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gate {
    /// `--fail-if-slower PCT`: for every gated figure.
    pub fail_if_slower: Option<f64>,
    /// `--threshold NAME=LIMIT`: per figure, over the above, gated or not.
    pub per_metric: BTreeMap<String, Limit>,
    /// Percentage limits ignore a difference of at most this many ms (or
    /// counts): run-to-run noise on small figures.
    pub min_delta: f64,
}

impl Gate {
    fn limit(&self, def: &figures::Def) -> Option<Limit> {
        self.per_metric.get(def.name).copied().or_else(|| {
            def.gated
                .then_some(self.fail_if_slower?)
                .map(Limit::Percent)
        })
    }
}

/// One figure of both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub name: String,
    pub unit: Unit,
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// new - base.
    pub delta: Option<f64>,
    /// new / base (absent when the base is 0).
    pub ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    pub regressed: bool,
}

/// An expectation whose verdict (pass rate) differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerdictChange {
    pub label: String,
    pub description: String,
    /// `passed/decided`, absent when that side has no such expectation.
    pub base: Option<String>,
    pub new: Option<String>,
    /// Its pass rate fell: a regression.
    pub worse: bool,
}

/// The comparison (`compare.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub base: Side,
    pub new: Side,
    pub rows: Vec<Row>,
    pub verdict_changes: Vec<VerdictChange>,
    /// What got worse, in words, one per line (empty: no regression).
    pub regressions: Vec<String>,
}

/// Compares `new` against `base` under `gate`.
pub fn compare(base: Side, new: Side, gate: &Gate) -> Comparison {
    let mut regressions = Vec::new();
    let rows: Vec<Row> = figures::DEFS
        .iter()
        .filter_map(|d| {
            let (b, n) = (
                base.values.get(d.name).copied(),
                new.values.get(d.name).copied(),
            );
            if b.is_none() && n.is_none() {
                return None;
            }
            let delta = b.zip(n).map(|(b, n)| n - b);
            let ratio = b.zip(n).and_then(|(b, n)| (b != 0.0).then(|| n / b));
            let limit = gate.limit(d);
            let regressed = match (limit, b, delta) {
                (Some(Limit::Percent(p)), Some(b), Some(delta)) => {
                    delta > b.abs() * p / 100.0 && delta > gate.min_delta
                }
                (Some(Limit::Absolute(a)), _, Some(delta)) => delta > a,
                _ => false,
            };
            if let (true, Some(b), Some(n), Some(l)) = (regressed, b, n, limit) {
                let pct =
                    ratio.map_or_else(String::new, |r| format!(", {:+.0}%", (r - 1.0) * 100.0));
                regressions.push(format!(
                    "{} got slower: {} -> {} ({}{pct}; limit {})",
                    d.name,
                    d.unit.show(b),
                    d.unit.show(n),
                    d.unit.show_delta(n - b),
                    l.show(d.unit)
                ));
            }
            Some(Row {
                name: d.name.to_owned(),
                unit: d.unit,
                base: b,
                new: n,
                delta,
                ratio,
                limit,
                regressed,
            })
        })
        .collect();
    let verdict_changes = verdict_changes(&base, &new);
    for c in verdict_changes.iter().filter(|c| c.worse) {
        regressions.push(format!(
            "{} ({}) passed {} in the base, {} now",
            c.label,
            c.description,
            c.base.as_deref().unwrap_or("-"),
            c.new.as_deref().unwrap_or("-")
        ));
    }
    Comparison {
        base,
        new,
        rows,
        verdict_changes,
        regressions,
    }
}

fn verdict_changes(base: &Side, new: &Side) -> Vec<VerdictChange> {
    let rate = |p: usize, d: usize| format!("{p}/{d}");
    let mut out = Vec::new();
    for (label, description, bp, bd) in &base.expectations {
        let other = new.expectations.iter().find(|(l, ..)| l == label);
        let Some((_, _, np, nd)) = other else {
            out.push(VerdictChange {
                label: label.clone(),
                description: description.clone(),
                base: Some(rate(*bp, *bd)),
                new: None,
                worse: false,
            });
            continue;
        };
        // Pass rates compared without division: bp/bd vs np/nd.
        let (b, n) = (bp * nd, np * bd);
        if b != n {
            out.push(VerdictChange {
                label: label.clone(),
                description: description.clone(),
                base: Some(rate(*bp, *bd)),
                new: Some(rate(*np, *nd)),
                worse: n < b,
            });
        }
    }
    for (label, description, np, nd) in &new.expectations {
        if !base.expectations.iter().any(|(l, ..)| l == label) {
            out.push(VerdictChange {
                label: label.clone(),
                description: description.clone(),
                base: None,
                new: Some(rate(*np, *nd)),
                worse: false,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> RunResult {
        serde_json::from_str(include_str!(
            "../../../../tests/fixtures/results/statefulset-pass.json"
        ))
        .unwrap()
    }

    fn gate(pct: f64) -> Gate {
        Gate {
            fail_if_slower: Some(pct),
            ..Gate::default()
        }
    }

    #[test]
    fn a_run_against_itself_has_no_regression() {
        let r = run();
        let c = compare(Side::of_run("a", &r), Side::of_run("a", &r), &gate(20.0));
        assert!(c.regressions.is_empty(), "{:?}", c.regressions);
        assert!(c.verdict_changes.is_empty());
        assert!(c.rows.iter().all(|r| r.delta == Some(0.0)));
    }

    #[test]
    fn sixty_percent_slower_detection_crosses_twenty_percent() {
        let base = run();
        let mut slow = run();
        let nr = base.metrics.node_not_ready.unwrap();
        slow.metrics.node_not_ready = Some(nr * 16 / 10);
        let c = compare(
            Side::of_run("a", &base),
            Side::of_run("b", &slow),
            &gate(20.0),
        );
        assert_eq!(c.regressions.len(), 1, "{:?}", c.regressions);
        assert!(c.regressions[0].starts_with("nodeNotReady got slower"));
        assert!(c.regressions[0].contains("+60%"), "{}", c.regressions[0]);
        let row = c.rows.iter().find(|r| r.name == "nodeNotReady").unwrap();
        assert!(row.regressed);
        assert!((row.ratio.unwrap() - 1.6).abs() < 0.01);
        // under a looser limit, or below the noise floor, it passes
        assert!(
            compare(
                Side::of_run("a", &base),
                Side::of_run("b", &slow),
                &gate(70.0)
            )
            .regressions
            .is_empty()
        );
        let floor = Gate {
            min_delta: 1e9,
            ..gate(20.0)
        };
        assert!(
            compare(Side::of_run("a", &base), Side::of_run("b", &slow), &floor)
                .regressions
                .is_empty()
        );
    }

    #[test]
    fn per_metric_limits_and_ungated_figures() {
        let base = run();
        let mut slow = run();
        slow.metrics.detection_lag_max = Some(base.metrics.detection_lag_max.unwrap_or(0) + 5000);
        // detection lag is nodefall's own: not under --fail-if-slower ...
        let c = compare(
            Side::of_run("a", &base),
            Side::of_run("b", &slow),
            &gate(1.0),
        );
        assert!(c.regressions.is_empty(), "{:?}", c.regressions);
        // ... but under its own threshold
        let mut g = gate(1.0);
        g.per_metric
            .insert("detectionLagMax".into(), Limit::Absolute(1000.0));
        let c = compare(Side::of_run("a", &base), Side::of_run("b", &slow), &g);
        assert_eq!(c.regressions.len(), 1);
    }

    #[test]
    fn a_newly_failing_expectation_is_a_regression() {
        let base = run();
        let mut bad = run();
        bad.expectations[0].verdict = Verdict::Fail;
        let c = compare(
            Side::of_run("a", &base),
            Side::of_run("b", &bad),
            &Gate::default(),
        );
        assert_eq!(c.verdict_changes.len(), 1);
        assert!(c.verdict_changes[0].worse);
        assert_eq!(c.regressions.len(), 1);
        // the other way round it is a change, not a regression
        let c = compare(
            Side::of_run("b", &bad),
            Side::of_run("a", &base),
            &Gate::default(),
        );
        assert!(!c.verdict_changes[0].worse);
        assert!(c.regressions.is_empty());
    }
}
