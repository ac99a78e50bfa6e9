//! Repeated runs of one scenario, summarised (`aggregate.json`): per figure
//! min/p50/p95/max/mean and N, per expectation its pass rate and when it was
//! seen, and the slowest run.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::figures::{self, Unit};
use crate::record::RunResult;
pub use crate::record::summary::{Stat, Summary};
use crate::record::{RunVerdict, Verdict};
use crate::timeline::Ms;

/// The `kind` of an aggregate file (a `result.json` has none).
pub const KIND: &str = "nodefall-aggregate";
/// Bumped on any incompatible change of [`Aggregate`].
pub const SCHEMA_VERSION: u32 = 1;

/// Figures that name the slowest run, first observed wins: the recovery
/// users wait for, then the detection.
const HEADLINE: [&str; 6] = [
    "workloadReadyAgain",
    "lastReplacementReady",
    "staleEndpointWindow",
    "errorWindow",
    "nodeReadyAgain",
    "nodeNotReady",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Aggregate {
    /// Always [`KIND`].
    pub kind: String,
    pub schema_version: u32,
    #[serde(flatten)]
    pub series: Series,
    /// Why fewer than `requested` runs were made, when so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
    pub runs: Vec<RunEntry>,
    /// Over the runs that completed (passed or failed).
    pub metrics: Vec<MetricStats>,
    pub expectations: Vec<ExpectationStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest: Option<Slowest>,
}

/// One run of the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEntry {
    /// From 1.
    pub run: usize,
    /// Its report directory, relative to the aggregate's.
    pub dir: String,
    pub verdict: RunVerdict,
    pub started_at: Timestamp,
    pub passed: usize,
    pub expectations: usize,
    /// Its figures, by name (see [`figures::DEFS`]).
    pub figures: BTreeMap<String, i64>,
}

impl RunEntry {
    /// Whether the run completed (passed or failed): only those are counted.
    pub fn counted(&self) -> bool {
        matches!(self.verdict, RunVerdict::Pass | RunVerdict::Fail)
    }
}

/// One figure over the counted runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricStats {
    pub name: String,
    pub unit: Unit,
    #[serde(flatten)]
    pub summary: Summary,
    /// The run with the largest value.
    pub slowest_run: usize,
}

/// One expectation over the runs that decided it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectationStats {
    pub label: String,
    pub description: String,
    pub passed: usize,
    pub failed: usize,
    pub not_run: usize,
    /// When it was seen (ms after what its window counted from), over the
    /// runs that saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Summary>,
}

impl ExpectationStats {
    /// Passed in some counted runs and failed in others.
    pub fn flaky(&self) -> bool {
        self.passed > 0 && self.failed > 0
    }

    /// `4/5`: passed over decided.
    pub fn rate(&self) -> String {
        format!("{}/{}", self.passed, self.passed + self.failed)
    }
}

/// The run with the largest headline figure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Slowest {
    pub run: usize,
    pub metric: String,
    pub value: Ms,
}

/// What a series of runs was, before its runs: the scenario and how it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    pub scenario: String,
    /// The scenario file as given.
    pub file: String,
    pub backend: String,
    /// The profile's name (`fast`, `default`, `discovered`).
    pub profile: String,
    /// `--repeat N`.
    pub requested: u32,
    pub started_at: Timestamp,
}

/// The entry of run `run` whose report is in `dir`.
pub fn entry(run: usize, dir: &str, r: &RunResult) -> RunEntry {
    RunEntry {
        run,
        dir: dir.to_owned(),
        verdict: r.verdict,
        started_at: r.started_at,
        passed: r.count(Verdict::Pass),
        expectations: r.expectations.len(),
        figures: figures::of(r),
    }
}

/// Summarises `runs` (their results in the same order as `entries`).
pub fn build(
    series: &Series,
    entries: Vec<RunEntry>,
    results: &[&RunResult],
    stopped_early: Option<String>,
) -> Aggregate {
    let counted: Vec<(&RunEntry, &RunResult)> = entries
        .iter()
        .zip(results.iter().copied())
        .filter(|(e, _)| e.counted())
        .collect();
    let metrics = figures::DEFS
        .iter()
        .filter_map(|d| {
            let values: Vec<(usize, i64)> = counted
                .iter()
                .filter_map(|(e, _)| Some((e.run, *e.figures.get(d.name)?)))
                .collect();
            let floats: Vec<f64> = values.iter().map(|(_, v)| *v as f64).collect();
            let summary = Summary::of(&floats)?;
            let slowest_run = values
                .iter()
                .max_by_key(|(run, v)| (*v, std::cmp::Reverse(*run)))
                .map_or(0, |(run, _)| *run);
            Some(MetricStats {
                name: d.name.to_owned(),
                unit: d.unit,
                summary,
                slowest_run,
            })
        })
        .collect();
    let slowest = HEADLINE.iter().find_map(|name| {
        counted
            .iter()
            .filter_map(|(e, _)| Some((e.run, *e.figures.get(*name)?)))
            .max_by_key(|(run, v)| (*v, std::cmp::Reverse(*run)))
            .map(|(run, value)| Slowest {
                run,
                metric: (*name).to_owned(),
                value,
            })
    });
    Aggregate {
        kind: KIND.to_owned(),
        schema_version: SCHEMA_VERSION,
        series: series.clone(),
        stopped_early,
        metrics,
        expectations: expectations(counted.iter().map(|(_, r)| *r)),
        slowest,
        runs: entries,
    }
}

/// Each expectation (by label, in scenario order) over the results.
fn expectations<'a>(results: impl Iterator<Item = &'a RunResult>) -> Vec<ExpectationStats> {
    let mut order: Vec<(usize, String)> = Vec::new();
    let mut by_label: BTreeMap<String, (ExpectationStats, Vec<f64>)> = BTreeMap::new();
    for r in results {
        for e in &r.expectations {
            let (s, seen) = by_label.entry(e.label.clone()).or_insert_with(|| {
                order.push((e.index, e.label.clone()));
                (
                    ExpectationStats {
                        label: e.label.clone(),
                        description: e.description.clone(),
                        passed: 0,
                        failed: 0,
                        not_run: 0,
                        observed: None,
                    },
                    Vec::new(),
                )
            });
            match e.verdict {
                Verdict::Pass => s.passed += 1,
                Verdict::Fail => s.failed += 1,
                Verdict::NotRun => s.not_run += 1,
            }
            if let Some(ms) = e.observed {
                seen.push(ms as f64);
            }
        }
    }
    order.sort();
    order
        .into_iter()
        .filter_map(|(_, label)| {
            let (mut s, seen) = by_label.remove(&label)?;
            s.observed = Summary::of(&seen);
            Some(s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(verdict: RunVerdict, not_ready: i64, ready_again: i64, pass: bool) -> RunResult {
        let mut r: RunResult = serde_json::from_str(include_str!(
            "../../../../tests/fixtures/results/statefulset-pass.json"
        ))
        .unwrap();
        r.verdict = verdict;
        r.metrics.node_not_ready = Some(not_ready);
        r.metrics.workload_ready_again = Some(ready_again);
        r.expectations[0].verdict = if pass { Verdict::Pass } else { Verdict::Fail };
        r
    }

    fn series() -> Series {
        Series {
            scenario: "s".into(),
            file: "s.yaml".into(),
            backend: "sim".into(),
            profile: "fast".into(),
            requested: 4,
            started_at: Timestamp::UNIX_EPOCH,
        }
    }

    #[test]
    fn runs_are_summarised_and_the_slowest_is_named() {
        let rs = [
            result(RunVerdict::Pass, 8000, 30_000, true),
            result(RunVerdict::Fail, 9000, 45_000, false),
            result(RunVerdict::Pass, 7000, 31_000, true),
            // stopped by an infrastructure error: listed, not counted
            result(RunVerdict::Error, 1, 99_000, false),
        ];
        let entries = rs
            .iter()
            .enumerate()
            .map(|(i, r)| entry(i + 1, &format!("run-{}", i + 1), r))
            .collect();
        let refs: Vec<&RunResult> = rs.iter().collect();
        let a = build(&series(), entries, &refs, Some("run 4: error".into()));
        assert_eq!(a.kind, KIND);
        assert_eq!(a.runs.len(), 4);
        let nr = a.metrics.iter().find(|m| m.name == "nodeNotReady").unwrap();
        assert_eq!(
            (nr.summary.n, nr.summary.min, nr.summary.p50, nr.summary.max),
            (3, 7000.0, 8000.0, 9000.0)
        );
        assert_eq!(nr.slowest_run, 2);
        assert_eq!(
            a.slowest,
            Some(Slowest {
                run: 2,
                metric: "workloadReadyAgain".into(),
                value: 45_000
            })
        );
        let first = &a.expectations[0];
        assert_eq!((first.passed, first.failed), (2, 1));
        assert!(first.flaky());
        assert_eq!(first.rate(), "2/3");
        // the aggregate reads back as it was written
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Aggregate>(&json).unwrap(), a);
    }
}
