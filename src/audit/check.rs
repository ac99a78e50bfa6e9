//! Compares what an observer saw with the ground truth: every true
//! transition matched to the first equal observation of the same object,
//! in order; what is left over on either side is missed, duplicated or
//! unexplained, and each match gives a detection lag.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{Report, Seen};
use crate::stats::aggregate::Summary;
use crate::timeline::{Change, ObjectRef};

/// How far after the window's end an observation still counts (a change
/// just before the end is seen a little later).
const LATE_SLACK_US: i64 = 10_000_000;
/// Missed transitions listed by name (the count is always complete).
const LIST_MAX: usize = 20;

/// The time window compared: from when the observer had listed everything
/// to the end of the steps (cleanup deletes the namespace, whose pods the
/// API server deletes without a per-pod audit event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub from: Timestamp,
    pub to: Timestamp,
    /// T0 (the first fault), when the run reached it: the lag from then on
    /// is reported apart from the setup's (a burst of pod creations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0: Option<Timestamp>,
}

/// One observer against the truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// Who observed: `nodefall`, `poller-5s`, `kubectl-get-w`.
    pub source: String,
    /// True transitions in the window.
    pub truth: usize,
    pub matched: usize,
    /// True transitions the observer never reported.
    pub missed: usize,
    /// Reports of a change of an object that was already matched to its one
    /// true occurrence.
    pub duplicated: usize,
    /// Matched reports that came before a report of an earlier change of
    /// the same object.
    pub out_of_order: usize,
    /// Reports with no true counterpart at all.
    pub unexplained: usize,
    /// Detection lag of the matched transitions (ms): observed - audit
    /// ResponseComplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_ms: Option<Summary>,
    /// The lag of the transitions from T0 on (the fault and recovery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_from_t0_ms: Option<Summary>,
    /// The lag per kind of change (NodeReady, PodReady, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lag_by_change_ms: BTreeMap<String, Summary>,
    /// The first missed transitions, for a person to look at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_examples: Vec<Seen>,
    /// Every match (not serialized: `audit check --matches FILE` writes them).
    #[serde(skip)]
    pub matches: Vec<Match>,
}

/// One true transition and the report matched to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Match {
    pub truth: Seen,
    pub seen_at: Timestamp,
    pub lag_ms: f64,
}

impl Check {
    /// Nothing missed, duplicated, out of order or unexplained.
    pub fn clean(&self) -> bool {
        self.missed == 0 && self.duplicated == 0 && self.out_of_order == 0 && self.unexplained == 0
    }
}

/// Compares `observed` (in the order it was recorded) with `truth` (in the
/// order it happened) over `window`.
pub fn compare(
    source: &str,
    truth: &[Seen],
    observed: &[Report<'_>],
    window: Window,
    keep_matches: bool,
) -> Check {
    let late = window
        .to
        .checked_add(jiff::SignedDuration::from_micros(LATE_SLACK_US))
        .unwrap_or(window.to);
    let mut per_object: BTreeMap<&ObjectRef, (Vec<&Seen>, Vec<&Report<'_>>)> = BTreeMap::new();
    for t in truth
        .iter()
        .filter(|t| t.at >= window.from && t.at <= window.to)
    {
        per_object.entry(&t.object).or_default().0.push(t);
    }
    for o in observed
        .iter()
        .filter(|o| o.at > window.from && o.at <= late)
    {
        per_object.entry(o.object).or_default().1.push(o);
    }
    let mut check = Check {
        source: source.to_owned(),
        truth: 0,
        matched: 0,
        missed: 0,
        duplicated: 0,
        out_of_order: 0,
        unexplained: 0,
        lag_ms: None,
        lag_from_t0_ms: None,
        lag_by_change_ms: BTreeMap::new(),
        missed_examples: Vec::new(),
        matches: Vec::new(),
    };
    let mut lags: Vec<f64> = Vec::new();
    let mut after_t0: Vec<f64> = Vec::new();
    let mut by_change: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (trues, seen) in per_object.values() {
        check.truth += trues.len();
        let mut used = vec![false; seen.len()];
        let mut last_index: Option<usize> = None;
        let mut matched_changes: Vec<&Change> = Vec::new();
        for t in trues {
            let found = seen
                .iter()
                .enumerate()
                .position(|(i, o)| !used[i] && *o.change == t.change);
            let Some(i) = found else {
                check.missed += 1;
                if check.missed_examples.len() < LIST_MAX {
                    check.missed_examples.push((*t).clone());
                }
                continue;
            };
            used[i] = true;
            check.matched += 1;
            if last_index.is_some_and(|last| i < last) {
                check.out_of_order += 1;
            }
            last_index = Some(last_index.map_or(i, |last| last.max(i)));
            matched_changes.push(&t.change);
            let lag = seen[i].at.duration_since(t.at).as_secs_f64() * 1000.0;
            lags.push(lag);
            if keep_matches {
                check.matches.push(Match {
                    truth: (*t).clone(),
                    seen_at: seen[i].at,
                    lag_ms: lag,
                });
            }
            if window.t0.is_some_and(|t0| t.at >= t0) {
                after_t0.push(lag);
            }
            by_change.entry(kind(&t.change)).or_default().push(lag);
        }
        // Late reports only count when they match: after the window, the
        // cleanup's own changes are not in the truth.
        let unmatched = seen
            .iter()
            .zip(&used)
            .filter(|(o, u)| !**u && o.at <= window.to);
        for (o, _) in unmatched {
            if matched_changes.contains(&o.change) {
                check.duplicated += 1;
            } else {
                check.unexplained += 1;
            }
        }
    }
    check.lag_ms = Summary::of(&lags);
    check.lag_from_t0_ms = Summary::of(&after_t0);
    check.lag_by_change_ms = by_change
        .into_iter()
        .filter_map(|(k, v)| Summary::of(&v).map(|s| (k, s)))
        .collect();
    check
}

/// The change's kind, as its serde tag names it (`nodeReady`, `podReady`).
fn kind(change: &Change) -> String {
    serde_json::to_value(change)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str().map(str::to_owned)))
        .unwrap_or_else(|| "other".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_800_000_000_000 + ms).unwrap()
    }
    fn node(name: &str) -> ObjectRef {
        ObjectRef::Node { name: name.into() }
    }
    fn ready(status: &str) -> Change {
        Change::NodeReady {
            status: status.into(),
            reason: None,
        }
    }
    fn seen(ms: i64, object: ObjectRef, change: Change) -> Seen {
        Seen {
            at: at(ms),
            object,
            change,
        }
    }

    fn reports(seen: &[Seen]) -> Vec<Report<'_>> {
        seen.iter().map(Report::from).collect()
    }

    fn window() -> Window {
        Window {
            from: at(0),
            to: at(100_000),
            t0: Some(at(5_000)),
        }
    }

    #[test]
    fn every_true_change_seen_once_in_order_is_clean_with_its_lag() {
        let truth = [
            seen(1000, node("a"), ready("Unknown")),
            seen(2000, node("b"), ready("Unknown")),
            seen(9000, node("a"), ready("True")),
        ];
        let observed = [
            seen(1004, node("a"), ready("Unknown")),
            seen(2010, node("b"), ready("Unknown")),
            seen(9002, node("a"), ready("True")),
        ];
        let c = compare("nodefall", &truth, &reports(&observed), window(), true);
        assert!(c.clean(), "{c:?}");
        assert_eq!((c.truth, c.matched), (3, 3));
        let lag = c.lag_ms.unwrap();
        assert_eq!((lag.min, lag.p50, lag.max), (2.0, 4.0, 10.0));
        assert_eq!(c.lag_by_change_ms["nodeReady"].n, 3);
        // Only the return to Ready came after T0.
        assert_eq!(c.lag_from_t0_ms.unwrap().n, 1);
    }

    #[test]
    fn a_poller_that_sleeps_through_a_flap_misses_both_changes() {
        let truth = [
            seen(1000, node("a"), ready("Unknown")),
            seen(3000, node("a"), ready("True")),
        ];
        let c = compare("poller-5s", &truth, &[], window(), true);
        assert_eq!((c.missed, c.matched), (2, 0));
        assert_eq!(c.missed_examples.len(), 2);
        assert!(c.lag_ms.is_none());
        assert!(!c.clean());
    }

    #[test]
    fn repeats_reorders_and_inventions_are_counted_apart() {
        let truth = [
            seen(1000, node("a"), ready("Unknown")),
            seen(2000, node("a"), Change::Unschedulable { value: true }),
        ];
        let observed = [
            seen(2100, node("a"), Change::Unschedulable { value: true }),
            seen(2200, node("a"), ready("Unknown")),
            seen(2300, node("a"), ready("Unknown")),
            seen(2400, node("a"), Change::NodeDeleted),
        ];
        let c = compare("x", &truth, &reports(&observed), window(), true);
        assert_eq!(c.matched, 2);
        assert_eq!(c.out_of_order, 1);
        assert_eq!(c.duplicated, 1);
        assert_eq!(c.unexplained, 1);
        assert_eq!(c.missed, 0);
    }

    #[test]
    fn only_the_window_counts() {
        let truth = [
            // Before the observer had listed: part of its first list.
            seen(-500, node("a"), ready("True")),
            seen(50_000, node("a"), ready("Unknown")),
            // After the steps (cleanup).
            seen(200_000, node("a"), Change::NodeDeleted),
        ];
        let observed = [
            seen(0, node("a"), ready("True")),
            seen(50_300, node("a"), ready("Unknown")),
            seen(200_001, node("a"), Change::NodeDeleted),
            // Cleanup's changes, just after the window: not in the truth.
            seen(100_500, node("b"), Change::NodeDeleted),
        ];
        let c = compare("nodefall", &truth, &reports(&observed), window(), true);
        assert!(c.clean(), "{c:?}");
        assert_eq!(c.truth, 1);
    }
}
