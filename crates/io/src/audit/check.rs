//! Compares what an observer saw with the ground truth: every true
//! transition matched to the first equal observation of the same object,
//! in order; what is left over on either side is missed (or cut off, when
//! made as the observer stopped), duplicated or unexplained, and each match
//! gives a lag vs the audit log.

use std::collections::BTreeMap;

use super::{AuditWindow, Check, Match, Report, Seen};
use crate::record::summary::Summary;
use crate::timeline::{Change, ObjectRef};

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

/// Compares `observed` (in the order it was recorded) with `truth` (in the
/// order it happened) over `window`.
pub fn compare(
    source: &str,
    truth: &[Seen],
    observed: &[Report<'_>],
    window: AuditWindow,
    keep_matches: bool,
) -> Check {
    let late = window
        .to
        .checked_add(jiff::SignedDuration::from_micros(LATE_SLACK_US))
        .unwrap_or(window.to);
    let mut per_object: BTreeMap<&ObjectRef, PerObject<'_, '_>> = BTreeMap::new();
    for t in truth.iter().filter(|t| t.at >= window.from && t.at <= late) {
        let entry = per_object.entry(&t.object).or_default();
        if t.at <= window.to {
            entry.truth.push(t);
        } else {
            entry.after.push(&t.change);
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
    let mut unreported: Vec<&Seen> = Vec::new();
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
                .position(|(i, o)| !used[i] && *o.change == t.change);
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
            list(&mut check.cut_off_examples, t.clone());
        } else {
            check.missed += 1;
            list(&mut check.missed_examples, t.clone());
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
    truth: Vec<&'t Seen>,
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
mod tests {
    use super::*;
    use jiff::Timestamp;

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

    fn window() -> AuditWindow {
        AuditWindow {
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
    fn a_change_made_as_the_observer_stopped_and_unreported_is_cut_off_not_missed() {
        let truth = [
            // 60 ms before the end, never reported: missed (the observer's
            // lags were under 50 ms).
            seen(99_940, node("a"), Change::Unschedulable { value: false }),
            // The node controller's taint removal, 5 ms before the cleanup
            // stopped the observer: it had not arrived yet.
            seen(
                99_995,
                node("b"),
                Change::TaintRemoved {
                    key: "node.kubernetes.io/unschedulable".into(),
                    effect: "NoSchedule".into(),
                },
            ),
        ];
        let c = compare("nodefall", &truth, &[], window(), false);
        assert_eq!((c.truth, c.missed, c.cut_off), (2, 1, 1), "{c:?}");
        assert_eq!(c.missed_examples[0].object, node("a"));
        assert_eq!(c.cut_off_examples[0].object, node("b"));
        assert_eq!(c.cut_off_within_ms, Some(50.0));
        // Only the one missed makes it unclean.
        let c = compare("nodefall", &truth[1..], &[], window(), false);
        assert!(c.clean(), "{c:?}");
        assert_eq!(c.cut_off, 1);
        // An observer that took up to 80 ms from T0 on could still have
        // been on its way to the first one.
        let slow = [
            seen(6_000, node("c"), ready("Unknown")),
            seen(7_000, node("c"), ready("True")),
        ];
        let observed = [
            seen(6_080, node("c"), ready("Unknown")),
            seen(7_010, node("c"), ready("True")),
        ];
        let all: Vec<Seen> = truth.iter().chain(&slow).cloned().collect();
        let c = compare("nodefall", &all, &reports(&observed), window(), false);
        assert_eq!((c.missed, c.cut_off), (0, 2), "{c:?}");
        assert_eq!(c.cut_off_within_ms, Some(80.0));
    }

    #[test]
    fn every_unexplained_report_is_listed_up_to_the_cap_with_its_count() {
        let observed: Vec<Seen> = (0..25)
            .map(|i| seen(1000 + i, node(&format!("n{i}")), Change::NodeDeleted))
            .collect();
        let c = compare("nodefall", &[], &reports(&observed), window(), false);
        assert_eq!(c.unexplained, 25);
        assert_eq!(c.unexplained_examples.len(), LIST_MAX);
        assert_eq!(c.unexplained_examples[0], observed[0]);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json["unexplainedExamples"][0]["change"]["type"],
            "nodeDeleted"
        );
        assert!(json.get("cutOff").is_none(), "{json}");
    }

    #[test]
    fn a_report_in_the_windows_last_ms_of_a_change_just_after_it_is_not_unexplained() {
        // Stamped 0.4 ms after the window's end by the API server, reported
        // at its last millisecond by nodefall's (1 ms) clock.
        let truth = [Seen {
            at: at(100_000)
                .checked_add(jiff::SignedDuration::from_micros(400))
                .unwrap(),
            object: node("a"),
            change: ready("True"),
        }];
        let observed = [seen(100_000, node("a"), ready("True"))];
        let c = compare("nodefall", &truth, &reports(&observed), window(), false);
        assert!(c.clean(), "{c:?}");
        assert_eq!((c.truth, c.matched), (0, 0));
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
