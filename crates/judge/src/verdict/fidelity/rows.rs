//! What the comparison is made of and judged against: a run's timed
//! points, the rows pairing kind's with the sim's and each row's verdict,
//! and the goal (within 10 % or 1 s).

use serde::Serialize;

use crate::timeline::Ms;

/// The goal: within 10 % of the kind figure, or within this.
pub const SLACK_MS: Ms = 1000;
/// ... or within this share of it.
pub const SLACK_SHARE: f64 = 0.10;

/// One timed transition of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// What happened (`target: Ready=Unknown (NodeStatusUnknown)`,
    /// `pods on target: Terminating (first of 4)`).
    pub what: String,
    /// The fault or action step it followed (its label), and that step's
    /// position among them.
    pub step: String,
    pub step_index: usize,
    /// Since that step started.
    pub after: Ms,
    /// How many transitions the point stands for (pods of a group).
    pub count: usize,
}

/// A point's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum RowVerdict {
    /// Within 10 % or 1 s (and the same count).
    Within,
    /// Further apart than that.
    Off,
    /// Both saw it, a different number of times.
    Count,
    /// Apart by more than the goal, both inside the window of the
    /// controller's timer that makes the transition (see `gaps::timers`).
    Timer {
        rule: String,
    },
    /// Present, counted or timed differently because a race went one way
    /// on one side and the other way on the other, a race the sim plays
    /// (see `races::judge_thaw_races`).
    Race {
        rule: String,
    },
    OnlyKind,
    OnlySim,
    /// The sim cannot show it: what the kubelet does that KWOK does not.
    Cannot {
        lacks: String,
    },
}

impl RowVerdict {
    pub fn meets_goal(&self) -> bool {
        matches!(
            self,
            RowVerdict::Within | RowVerdict::Timer { .. } | RowVerdict::Race { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub what: String,
    pub step: String,
    pub kind: Option<Ms>,
    pub sim: Option<Ms>,
    pub kind_count: usize,
    pub sim_count: usize,
    /// Since the row before it (or the step) on each side: what the
    /// verdict judges.
    pub kind_gap: Option<Ms>,
    pub sim_gap: Option<Ms>,
    pub verdict: RowVerdict,
}

/// Two points seen in one order on one side and the other on the other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inversion {
    /// First on kind.
    pub first: String,
    pub then: String,
    pub step: String,
}

/// One scenario on both.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioFidelity {
    pub scenario: String,
    pub kind_verdict: String,
    pub sim_verdict: String,
    pub rows: Vec<Row>,
    pub inversions: Vec<Inversion>,
}

impl ScenarioFidelity {
    /// Every row within the goal or a "cannot", and no inversion.
    pub fn meets_goal(&self) -> bool {
        self.inversions.is_empty()
            && self
                .rows
                .iter()
                .all(|r| r.verdict.meets_goal() || matches!(r.verdict, RowVerdict::Cannot { .. }))
    }
}

pub(super) fn row(kind: Option<&Point>, sim: Option<&Point>) -> Row {
    let either = kind.or(sim).expect("a point on one side at least");
    // Both: judged in `judge_gaps`.
    let verdict = match (kind, sim) {
        (Some(k), Some(s)) if k.count != s.count => RowVerdict::Count,
        (Some(_), Some(_)) => RowVerdict::Within,
        (Some(_), None) => RowVerdict::OnlyKind,
        _ => RowVerdict::OnlySim,
    };
    Row {
        what: either.what.clone(),
        step: either.step.clone(),
        kind: kind.map(|p| p.after),
        sim: sim.map(|p| p.after),
        kind_count: kind.map_or(0, |p| p.count),
        sim_count: sim.map_or(0, |p| p.count),
        kind_gap: None,
        sim_gap: None,
        verdict,
    }
}

/// Whether `sim` is within 10 % of `kind`, or within 1 s.
pub fn within(kind: Ms, sim: Ms) -> bool {
    let slack = SLACK_MS.max((kind.abs() as f64 * SLACK_SHARE).round() as Ms);
    (sim - kind).abs() <= slack
}

/// `48.3 s`.
pub(super) fn secs(ms: Ms) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// `40.0-80.0 s`.
pub(super) fn span(from: Ms, to: Ms) -> String {
    format!("{:.1}-{}", from as f64 / 1000.0, secs(to))
}
