//! The audit check's judgement: what an observer saw against the ground
//! truth of the API server's audit log (read by the io crate's `audit`).
//! Every true transition is matched to the first equal observation of the
//! same object, in order; what is left over on either side is missed (or
//! cut off, when made as the observer stopped), duplicated or unexplained,
//! and each match gives a lag vs the audit log. The figures are
//! `record::audit`'s schema.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::record::RunResult;
use crate::record::audit::{AuditWindow, Check, Match, Seen};
use crate::record::summary::Summary;
use crate::timeline::{Change, ObjectRef};

/// An observer's report, borrowed from where it is kept (the run's record,
/// a baseline's file): the check copies none of them.
#[derive(Debug, Clone, Copy)]
pub struct Report<'a> {
    pub at: Timestamp,
    pub object: &'a ObjectRef,
    pub change: &'a Change,
}

impl Report<'_> {
    /// The report as the record keeps it (a copy).
    pub fn seen(&self) -> Seen {
        Seen {
            at: self.at,
            object: self.object.clone(),
            change: self.change.clone(),
        }
    }
}

impl<'a> From<&'a Seen> for Report<'a> {
    fn from(s: &'a Seen) -> Report<'a> {
        Report {
            at: s.at,
            object: &s.object,
            change: &s.change,
        }
    }
}

/// What nodefall's observer reported in a run (Nodes and Pods only, the
/// kinds the audit log covers), and the window to compare: from when its
/// watchers had listed to when the cleanup began (its first record's start:
/// the steps' end), which is where the observer stops reporting; a run
/// without cleanup ends at its end.
pub fn observed_in_run(result: &RunResult) -> Option<(Vec<Report<'_>>, AuditWindow)> {
    let from = result.observed_from?;
    let end = result
        .cleanup
        .iter()
        .map(|s| s.started)
        .min()
        .unwrap_or(result.finished);
    let seen = result
        .transitions
        .iter()
        .filter(|t| matches!(t.object, ObjectRef::Node { .. } | ObjectRef::Pod { .. }))
        .map(|t| Report {
            at: result.wall_clock(t.at),
            object: &t.object,
            change: &t.change,
        })
        .collect();
    let window = AuditWindow {
        from: result.wall_clock(from),
        to: result.wall_clock(end),
        t0: result.t0.map(|t0| result.wall_clock(t0)),
    };
    Some((seen, window))
}

/// How far after the window's end an observation still counts (a change
/// just before the end is seen a little later).
const LATE_SLACK_US: i64 = 10_000_000;
/// How long before the window's end a true change may have been made and
/// still not have reached an observer that stopped there: nodefall's stops
/// as the cleanup begins deleting what the run applied, and a change made
/// in the steps' last moments (a taint the node controller removes a few
/// ms after an uncordon) can still be on its way. That is the longest lag
/// the observer showed in the run (from T0 on, where the setup's burst of
/// creations does not count), within these bounds; a change made within it
/// and unreported is cut off, not missed.
const STOP_GRACE_MIN_MS: f64 = 50.0;
const STOP_GRACE_MAX_MS: f64 = 1000.0;
/// Missed, unexplained and cut-off transitions listed by name, each up to
/// this many (the counts are always complete).
const LIST_MAX: usize = 20;

/// Adds `s` to `list` unless it holds [`LIST_MAX`] already.
fn list(list: &mut Vec<Seen>, s: Seen) {
    if list.len() < LIST_MAX {
        list.push(s);
    }
}

/// The span of the truth a comparison over `window` reads: the window,
/// and the slack after it in which a change seen late is still matched.
pub fn span(window: AuditWindow) -> (Timestamp, Timestamp) {
    let late = window
        .to
        .checked_add(jiff::SignedDuration::from_micros(LATE_SLACK_US))
        .unwrap_or(window.to);
    (window.from, late)
}

/// Compares `observed` (in the order it was recorded) with `truth` (each
/// object's in the order it happened) over `window`.
pub fn compare<'t>(
    source: &str,
    truth: impl IntoIterator<Item = Report<'t>>,
    observed: &[Report<'_>],
    window: AuditWindow,
    keep_matches: bool,
) -> Check {
    let (_, late) = span(window);
    let mut per_object: BTreeMap<&ObjectRef, PerObject<'_, '_>> = BTreeMap::new();
    for t in truth
        .into_iter()
        .filter(|t| t.at >= window.from && t.at <= late)
    {
        let entry = per_object.entry(t.object).or_default();
        if t.at <= window.to {
            entry.truth.push(t);
        } else {
            entry.after.push(t.change);
        }
    }
    for o in observed
        .iter()
        .filter(|o| o.at > window.from && o.at <= late)
    {
        per_object.entry(o.object).or_default().seen.push(o);
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
        cut_off: 0,
        cut_off_within_ms: None,
        lag_by_change_ms: BTreeMap::new(),
        missed_examples: Vec::new(),
        unexplained_examples: Vec::new(),
        cut_off_examples: Vec::new(),
        matches: Vec::new(),
    };
    let mut lags: Vec<f64> = Vec::new();
    let mut after_t0: Vec<f64> = Vec::new();
    let mut by_change: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    // True transitions never reported: missed or cut off, once the lags say
    // how long a report could take.
    let mut unreported: Vec<&Report<'t>> = Vec::new();
    for PerObject {
        truth: trues,
        seen,
        after,
    } in per_object.values()
    {
        check.truth += trues.len();
        let mut used = vec![false; seen.len()];
        let mut last_index: Option<usize> = None;
        let mut matched_changes: Vec<&Change> = Vec::new();
        for t in trues {
            let found = seen
                .iter()
                .enumerate()
                .position(|(i, o)| !used[i] && o.change == t.change);
            let Some(i) = found else {
                unreported.push(t);
                continue;
            };
            used[i] = true;
            check.matched += 1;
            if last_index.is_some_and(|last| i < last) {
                check.out_of_order += 1;
            }
            last_index = Some(last_index.map_or(i, |last| last.max(i)));
            matched_changes.push(t.change);
            let lag = seen[i].at.duration_since(t.at).as_secs_f64() * 1000.0;
            lags.push(lag);
            if keep_matches {
                check.matches.push(Match {
                    truth: t.seen(),
                    seen_at: seen[i].at,
                    lag_ms: lag,
                });
            }
            if window.t0.is_some_and(|t0| t.at >= t0) {
                after_t0.push(lag);
            }
            by_change.entry(kind(t.change)).or_default().push(lag);
        }
        // Late reports only count when they match: after the window, the
        // cleanup's own changes are not in the truth. A report inside it of
        // a change made just after its end (the two clocks' last
        // millisecond) is not compared either.
        let mut after_used = vec![false; after.len()];
        let unmatched = seen
            .iter()
            .zip(&used)
            .filter(|(o, u)| !**u && o.at <= window.to);
        for (o, _) in unmatched {
            if matched_changes.contains(&o.change) {
                check.duplicated += 1;
            } else if let Some(j) =
                (0..after.len()).find(|&j| !after_used[j] && *after[j] == *o.change)
            {
                after_used[j] = true;
            } else {
                check.unexplained += 1;
                list(
                    &mut check.unexplained_examples,
                    Seen {
                        at: o.at,
                        object: o.object.clone(),
                        change: o.change.clone(),
                    },
                );
            }
        }
    }
    let longest = |v: &[f64]| v.iter().copied().reduce(f64::max);
    let grace_ms = longest(&after_t0)
        .or_else(|| longest(&lags))
        .unwrap_or(0.0)
        .clamp(STOP_GRACE_MIN_MS, STOP_GRACE_MAX_MS);
    // Whole microseconds, as the audit log's times are.
    #[allow(clippy::cast_possible_truncation, reason = "at most 1 s in µs")]
    let grace = jiff::SignedDuration::from_micros((grace_ms * 1000.0).round() as i64);
    let stopping = window.to.checked_sub(grace).unwrap_or(window.to);
    for t in unreported {
        if t.at > stopping {
            check.cut_off += 1;
            list(&mut check.cut_off_examples, t.seen());
        } else {
            check.missed += 1;
            list(&mut check.missed_examples, t.seen());
        }
    }
    if check.cut_off > 0 {
        check.cut_off_within_ms = Some(grace_ms);
    }
    check.lag_ms = Summary::of(&lags);
    check.lag_from_t0_ms = Summary::of(&after_t0);
    check.lag_by_change_ms = by_change
        .into_iter()
        .filter_map(|(k, v)| Summary::of(&v).map(|s| (k, s)))
        .collect();
    check
}

/// One object's true transitions in the window, those just after it (up to
/// the late slack), and its reports.
#[derive(Default)]
struct PerObject<'t, 'r> {
    truth: Vec<Report<'t>>,
    after: Vec<&'t Change>,
    seen: Vec<&'r Report<'r>>,
}

/// The change's kind, as its serde tag names it (`nodeReady`, `podReady`).
fn kind(change: &Change) -> String {
    serde_json::to_value(change)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str().map(str::to_owned)))
        .unwrap_or_else(|| "other".to_owned())
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
