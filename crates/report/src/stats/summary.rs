//! A batch of runs in one line each (`nodefall report summary`): what a CI
//! job says about every scenario it ran, their key figures, each failed
//! expectation, and what got slower than a baseline allows. The GitHub
//! Action writes its Markdown to the job summary and its JSON to the
//! step's outputs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::aggregate::{Aggregate, Stat};
use super::compare::{self, Gate, Side};
use crate::record::{RunResult, RunVerdict, Verdict};

/// One scenario's newest run, or its newest series of `--repeat` runs.
#[derive(Debug, Clone)]
pub enum Input {
    Run(Box<RunResult>),
    Series(Box<Aggregate>),
}

impl Input {
    pub fn scenario(&self) -> &str {
        match self {
            Input::Run(r) => &r.scenario,
            Input::Series(a) => &a.series.scenario,
        }
    }

    /// As one side of a comparison (a series under its median).
    fn side(&self, source: &str) -> Side {
        match self {
            Input::Run(r) => Side::of_run(source, r),
            Input::Series(a) => Side::of_aggregate(source, a, Stat::P50),
        }
    }
}

/// How a scenario (or the whole batch) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    /// An expectation failed, a guard stopped the run, or a figure got
    /// slower than the baseline allows.
    Fail,
    /// The run could not be completed (cluster, backend, tooling).
    Error,
    /// Stopped by a signal (a cancelled job).
    Interrupted,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Error => "ERROR",
            Outcome::Interrupted => "INTERRUPTED",
        }
    }

    fn of_run(v: RunVerdict) -> Outcome {
        match v {
            RunVerdict::Pass => Outcome::Pass,
            RunVerdict::Fail => Outcome::Fail,
            RunVerdict::Error => Outcome::Error,
            RunVerdict::Interrupted => Outcome::Interrupted,
        }
    }
}

/// An expectation that did not hold, in one line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    pub label: String,
    pub description: String,
    /// Observed against expected, with by how much it missed (for a series:
    /// in how many runs it failed).
    pub detail: String,
}

/// One scenario of the batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub scenario: String,
    /// The `result.json` or `aggregate.json` it was read from.
    pub source: String,
    pub outcome: Outcome,
    /// 1 for a single run; for a series, the runs that completed.
    pub runs: usize,
    /// Runs that passed (of `runs`).
    pub runs_passed: usize,
    pub expectations_held: usize,
    pub expectations: usize,
    /// Every figure of the run (a series: its median), by name, in ms or a
    /// count (`stats::figures::DEFS`).
    pub figures: BTreeMap<String, f64>,
    pub failed: Vec<Failed>,
    /// Why the run stopped early, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What got slower than the baseline allows, one per line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regressions: Vec<String>,
    /// The baseline it was compared with, when one was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
}

/// The batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The worst outcome of any scenario.
    pub outcome: Outcome,
    pub scenarios: usize,
    pub passed: usize,
    /// Scenarios that did not pass (failed, errored or interrupted).
    pub failed: usize,
    pub entries: Vec<Entry>,
    /// Scenarios of the baseline that this batch has no run of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
}

/// A baseline to hold the batch to: its runs by scenario, and the gate.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    pub runs: BTreeMap<String, (String, Input)>,
    pub gate: Gate,
}

/// The summary of `runs` (source path, run), each scenario compared with
/// its run in `baseline` when there is one.
pub fn summarize(runs: Vec<(String, Input)>, baseline: Option<&Baseline>) -> Summary {
    let mut entries: Vec<Entry> = runs
        .into_iter()
        .map(|(source, input)| entry(source, &input, baseline))
        .collect();
    entries.sort_by(|a, b| a.scenario.cmp(&b.scenario));
    let passed = entries
        .iter()
        .filter(|e| e.outcome == Outcome::Pass)
        .count();
    let not_run = baseline
        .map(|b| {
            b.runs
                .keys()
                .filter(|s| !entries.iter().any(|e| &&e.scenario == s))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    Summary {
        outcome: entries
            .iter()
            .map(|e| e.outcome)
            .max()
            .unwrap_or(Outcome::Pass),
        scenarios: entries.len(),
        passed,
        failed: entries.len() - passed,
        entries,
        not_run,
    }
}

fn entry(source: String, input: &Input, baseline: Option<&Baseline>) -> Entry {
    let side = input.side(&source);
    let mut e = match input {
        Input::Run(r) => of_run(&source, r),
        Input::Series(a) => of_series(&source, a),
    };
    e.figures = side.values().clone();
    if let Some((base_source, base)) = baseline.and_then(|b| b.runs.get(input.scenario())) {
        let gate = baseline.map(|b| b.gate.clone()).unwrap_or_default();
        let c = compare::compare(base.side(base_source), side, &gate);
        e.regressions = c.regressions;
        e.baseline = Some(base_source.clone());
        if !e.regressions.is_empty() && e.outcome == Outcome::Pass {
            e.outcome = Outcome::Fail;
        }
    }
    e
}

fn of_run(source: &str, r: &RunResult) -> Entry {
    let decided = r
        .expectations
        .iter()
        .filter(|x| x.verdict != Verdict::NotRun);
    let outcome = Outcome::of_run(r.verdict);
    Entry {
        scenario: r.scenario.clone(),
        source: source.to_owned(),
        outcome,
        runs: 1,
        runs_passed: usize::from(outcome == Outcome::Pass),
        expectations_held: decided
            .clone()
            .filter(|x| x.verdict == Verdict::Pass)
            .count(),
        expectations: r.expectations.len(),
        figures: BTreeMap::new(),
        failed: r
            .expectations
            .iter()
            .filter(|x| x.verdict == Verdict::Fail)
            .map(|x| Failed {
                label: x.label.clone(),
                description: x.description.clone(),
                detail: x.detail.clone(),
            })
            .collect(),
        error: r.error.clone().or_else(|| {
            r.aborted
                .as_ref()
                .map(|a| format!("aborted by guard `{}`", a.guard))
        }),
        regressions: Vec::new(),
        baseline: None,
    }
}

fn of_series(source: &str, a: &Aggregate) -> Entry {
    let completed: Vec<_> = a.runs.iter().filter(|r| r.counted()).collect();
    let runs_passed = completed
        .iter()
        .filter(|r| r.verdict == RunVerdict::Pass)
        .count();
    let worst = a
        .runs
        .iter()
        .map(|r| Outcome::of_run(r.verdict))
        .max()
        .unwrap_or(Outcome::Error);
    Entry {
        scenario: a.series.scenario.clone(),
        source: source.to_owned(),
        outcome: worst,
        runs: completed.len(),
        runs_passed,
        expectations_held: a
            .expectations
            .iter()
            .filter(|e| e.failed == 0 && e.passed > 0)
            .count(),
        expectations: a.expectations.len(),
        figures: BTreeMap::new(),
        failed: a
            .expectations
            .iter()
            .filter(|e| e.failed > 0)
            .map(|e| Failed {
                label: e.label.clone(),
                description: e.description.clone(),
                detail: format!("failed in {} of {} runs", e.failed, e.passed + e.failed),
            })
            .collect(),
        error: a.stopped_early.clone(),
        regressions: Vec::new(),
        baseline: None,
    }
}

#[cfg(test)]
mod tests;
