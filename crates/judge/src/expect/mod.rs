//! Expectations evaluated on a timeline (pure): does a condition hold in a
//! world, and has a window been met, missed, or not yet decided at `now`;
//! abort guards (`guard`): has a condition held long enough to stop the run.
//! Each condition family has its path (`states`, `volumes` on the timeline;
//! `graceful` at preflight, `duplicates` at the end of the run, `probe` over
//! a probe's requests), and every match over conditions names each one.

#![deny(clippy::wildcard_enum_match_arm)]

pub mod duplicates;
pub mod graceful;
mod guard;

pub use guard::{Held, held_for};

pub mod probe;
mod states;
pub mod toleration;
mod truth;
mod volumes;

pub use truth::{Truth, truth_series};

use std::cell::OnceCell;

use crate::duration::format_millis;
use crate::scenario::checked::{Condition, NodeCond};
use crate::scenario::expr::Window;
use crate::scenario::selector::Selector;
use crate::timeline::{Ms, PodView, World};

/// A subject with its target names resolved to node names.
#[derive(Debug, Clone, PartialEq)]
pub enum ResolvedSubject {
    Node(String),
    /// A set of nodes: a node condition holds when it holds on every one.
    Nodes(Vec<String>),
    /// Pods the selector matches, on (or not on) any of some nodes: a
    /// target's one, a set's.
    Pods {
        selector: Selector,
        on: Option<Vec<String>>,
        not_on: Option<Vec<String>>,
    },
    /// A claim's volume, on a node (or anywhere).
    Pvc {
        claim: String,
        node: Option<String>,
    },
    /// A Service's endpoints, on (or not on) a node.
    Service {
        name: String,
        on: Option<String>,
        not_on: Option<String>,
    },
    /// A probe's requests: decided from the probe's record, not here.
    Probe(String),
}

/// Whether every condition holds for `subject` in `world`: each family by
/// its own path. A condition of another subject's family does not hold, nor
/// does one decided once (preflight, end of run, probe), which is not a
/// state on the timeline; nor anything about a probe's requests.
pub fn holds(world: &World, subject: &ResolvedSubject, conditions: &[Condition]) -> bool {
    if let ResolvedSubject::Probe(_) = subject {
        return false;
    }
    // `count` on a set: how many of its nodes meet the other conditions.
    if let ResolvedSubject::Nodes(names) = subject
        && let Some(want) = conditions.iter().find_map(|c| {
            if let Condition::Node(NodeCond::Count(n)) = c {
                Some(*n)
            } else {
                None
            }
        })
    {
        let others: Vec<Condition> = conditions
            .iter()
            .filter(|c| !matches!(c, Condition::Node(NodeCond::Count(_))))
            .cloned()
            .collect();
        let meeting = names
            .iter()
            .filter(|n| holds(world, &ResolvedSubject::Node((*n).clone()), &others))
            .count();
        return u32::try_from(meeting).is_ok_and(|m| m == want);
    }
    // The selected pods, taken once for all the pods conditions.
    let pods = OnceCell::new();
    conditions.iter().all(|c| match c {
        Condition::Node(c) => states::node(world, subject, c),
        Condition::Pods(c) => {
            matches!(subject, ResolvedSubject::Pods { .. })
                && states::pods(pods.get_or_init(|| selected_pods(world, subject)), c)
        }
        Condition::Volume(c) => volumes::volume(world, subject, c),
        Condition::Event(c) => volumes::event(world, subject, c),
        Condition::Service(c) => states::service(world, subject, c),
        Condition::Preflight(_) | Condition::EndOfRun(_) | Condition::Probe(_) => false,
    })
}

/// The live pods a pods subject selects in `world` (none for a node subject).
pub fn selected_pods<'w>(world: &'w World, subject: &ResolvedSubject) -> Vec<&'w PodView> {
    let ResolvedSubject::Pods {
        selector,
        on,
        not_on,
    } = subject
    else {
        return Vec::new();
    };
    world
        .pods
        .values()
        .filter(|p| selector.matches(&p.labels))
        .filter(|p| {
            let on_any = |nodes: &Vec<String>| p.node.as_ref().is_some_and(|n| nodes.contains(n));
            on.as_ref().is_none_or(on_any) && !not_on.as_ref().is_some_and(on_any)
        })
        .collect()
}

/// The verdict on a window, once it can be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Pending,
    Pass {
        /// Relative to the anchor: when it first held (`Between`), or `None`.
        observed: Option<Ms>,
        detail: String,
    },
    Fail {
        observed: Option<Ms>,
        missed_by: Option<Ms>,
        detail: String,
    },
}

/// Decides `window` for a condition whose truth is `series` (from
/// [`truth_series`] starting at `start`), measured from `anchor`, at `now`.
/// `start` is where `holdsFor`/`never` begin (the anchor when `since` was
/// written, else the expectation's own start); `Between`/`NotBefore` read the
/// series from the anchor.
pub fn decide(series: &[(Ms, bool)], window: Window, anchor: Ms, start: Ms, now: Ms) -> Decision {
    // Only what had been observed by `now` counts.
    let seen = series.partition_point(|&(t, _)| t <= now).max(1);
    let series = &series[..seen.min(series.len())];
    let rel = |t: Ms| t - anchor;
    let first_true = series.iter().find(|&&(_, v)| v).map(|&(t, _)| t);
    let first_false_from = |from: Ms| {
        series
            .iter()
            .enumerate()
            .find(|&(i, &(t, v))| {
                !v && (t >= from || series.get(i + 1).is_none_or(|&(next, _)| next > from))
            })
            .map(|(_, &(t, _))| t.max(from))
    };
    match window {
        // Not a state on the timeline: the runner decides it from the
        // preflight (`expect::graceful::decide`); reaching this is a runner bug.
        Window::Preflight => Decision::Fail {
            observed: None,
            missed_by: None,
            detail: "decided from the graceful-shutdown preflight, not from the timeline".into(),
        },
        // Likewise: decided from the machines' record at the end of the run.
        Window::EndOfRun => Decision::Fail {
            observed: None,
            missed_by: None,
            detail:
                "decided from the machines' record at the end of the run, not from the timeline"
                    .into(),
        },
        // Likewise: decided from the probe's record when it stops.
        Window::Requests { .. } => Decision::Fail {
            observed: None,
            missed_by: None,
            detail: "decided from the probe's requests, not from the timeline".into(),
        },
        Window::Between { from, to } => match first_true {
            Some(t) if rel(t) < from => Decision::Fail {
                observed: Some(rel(t)),
                missed_by: Some(rel(t) - from),
                detail: format!(
                    "held after {}, {} before the window opened at {}",
                    fmt_rel(rel(t)),
                    format_millis(from - rel(t)),
                    format_millis(from)
                ),
            },
            Some(t) if rel(t) <= to => Decision::Pass {
                observed: Some(rel(t)),
                detail: format!("held after {}", fmt_rel(rel(t))),
            },
            Some(t) => Decision::Fail {
                observed: Some(rel(t)),
                missed_by: Some(rel(t) - to),
                detail: format!(
                    "held after {}, {} after the window closed at {}",
                    fmt_rel(rel(t)),
                    format_millis(rel(t) - to),
                    format_millis(to)
                ),
            },
            None if rel(now) > to => Decision::Fail {
                observed: None,
                missed_by: None,
                detail: format!("not seen within {}", format_millis(to)),
            },
            None => Decision::Pending,
        },
        Window::NotBefore { at } => match first_true {
            Some(t) if rel(t) < at => Decision::Fail {
                observed: Some(rel(t)),
                missed_by: Some(rel(t) - at),
                detail: format!(
                    "held after {}, {} too early",
                    fmt_rel(rel(t)),
                    format_millis(at - rel(t))
                ),
            },
            _ if rel(now) >= at => Decision::Pass {
                observed: first_true.map(rel),
                detail: format!("did not hold before {}", format_millis(at)),
            },
            _ => Decision::Pending,
        },
        Window::HoldsFor { duration } => match first_false_from(start) {
            Some(t) if t < start + duration => Decision::Fail {
                observed: Some(t - start),
                missed_by: Some(t - start - duration),
                detail: if t == start {
                    "did not hold when the step started".to_owned()
                } else {
                    format!(
                        "stopped holding after {} of {}",
                        format_millis(t - start),
                        format_millis(duration)
                    )
                },
            },
            _ if now >= start + duration => Decision::Pass {
                observed: None,
                detail: format!("held throughout {}", format_millis(duration)),
            },
            _ => Decision::Pending,
        },
        Window::Never { duration } => {
            let violated = series
                .iter()
                .enumerate()
                .find(|&(i, &(t, v))| {
                    v && (t >= start || series.get(i + 1).is_none_or(|&(next, _)| next > start))
                })
                .map(|(_, &(t, _))| t.max(start));
            match violated {
                Some(t) if t <= start + duration => Decision::Fail {
                    observed: Some(t - start),
                    missed_by: None,
                    detail: format!("held after {}", format_millis(t - start)),
                },
                _ if now >= start + duration => Decision::Pass {
                    observed: None,
                    detail: format!("never held during {}", format_millis(duration)),
                },
                _ => Decision::Pending,
            }
        }
    }
}

fn fmt_rel(ms: Ms) -> String {
    format!("{:.3}s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::checked::NodeCond;
    use crate::scenario::model::NodeReady;
    use crate::timeline::{Change, ObjectRef, Transition};

    fn ready(at: Ms, status: &str) -> Transition {
        Transition {
            by: None,
            at,
            server_time: None,
            object: ObjectRef::Node { name: "w".into() },
            change: Change::NodeReady {
                status: status.into(),
                reason: None,
                message: None,
            },
        }
    }

    fn unknown_series(ts: &[Transition], from: Ms) -> Vec<(Ms, bool)> {
        let mut all = vec![Transition {
            by: None,
            at: 0,
            server_time: None,
            object: ObjectRef::Node { name: "w".into() },
            change: Change::NodeAdded,
        }];
        all.extend_from_slice(ts);
        truth_series(
            &all,
            &ResolvedSubject::Node("w".into()),
            &[Condition::Node(NodeCond::Ready(NodeReady::Unknown))],
            from,
        )
    }

    #[test]
    fn between_passes_inside_fails_outside_and_waits_meanwhile() {
        let s = unknown_series(&[ready(0, "True"), ready(8_500, "Unknown")], 0);
        assert_eq!(s, vec![(0, false), (8_500, true)]);
        let w = Window::Between {
            from: 4_000,
            to: 19_000,
        };
        assert!(matches!(
            decide(&s, w, 0, 0, 30_000),
            Decision::Pass {
                observed: Some(8_500),
                ..
            }
        ));
        // Too late: by 1.5 s.
        let late = Window::Between { from: 0, to: 7_000 };
        let Decision::Fail {
            missed_by, detail, ..
        } = decide(&s, late, 0, 0, 30_000)
        else {
            panic!("late must fail");
        };
        assert_eq!(missed_by, Some(1_500));
        assert!(detail.contains("1.5s after the window closed"), "{detail}");
        // Too early: by 1.5 s.
        let early = Window::Between {
            from: 10_000,
            to: 20_000,
        };
        assert!(matches!(
            decide(&s, early, 0, 0, 9_000),
            Decision::Fail {
                missed_by: Some(-1_500),
                ..
            }
        ));
        // Not yet seen, window still open.
        let s0 = unknown_series(&[ready(0, "True")], 0);
        assert_eq!(decide(&s0, w, 0, 0, 10_000), Decision::Pending);
        assert!(matches!(
            decide(&s0, w, 0, 0, 19_001),
            Decision::Fail { observed: None, .. }
        ));
    }

    #[test]
    fn windows_count_from_the_anchor() {
        let s = unknown_series(&[ready(0, "True"), ready(15_000, "Unknown")], 10_000);
        let w = Window::Between { from: 0, to: 6_000 };
        assert!(matches!(
            decide(&s, w, 10_000, 10_000, 20_000),
            Decision::Pass {
                observed: Some(5_000),
                ..
            }
        ));
    }

    #[test]
    fn holds_for_and_never() {
        let s = unknown_series(&[ready(0, "Unknown"), ready(70_000, "True")], 10_000);
        let hold = Window::HoldsFor { duration: 60_000 };
        assert_eq!(decide(&s, hold, 0, 10_000, 50_000), Decision::Pending);
        assert!(matches!(
            decide(&s, hold, 0, 10_000, 70_000),
            Decision::Pass { .. }
        ));
        let long = Window::HoldsFor { duration: 61_000 };
        assert!(matches!(
            decide(&s, long, 0, 10_000, 71_000),
            Decision::Fail {
                observed: Some(60_000),
                ..
            }
        ));
        // Held from before the start: the flip before `start` counts as holding at start.
        let never = Window::Never { duration: 30_000 };
        assert!(matches!(
            decide(&s, never, 0, 10_000, 10_000),
            Decision::Fail {
                observed: Some(0),
                ..
            }
        ));
        let s2 = unknown_series(&[ready(0, "True")], 0);
        assert!(matches!(
            decide(&s2, never, 0, 0, 30_000),
            Decision::Pass { .. }
        ));
    }

    #[test]
    fn not_before() {
        let s = unknown_series(&[ready(0, "True"), ready(5_000, "Unknown")], 0);
        assert!(matches!(
            decide(&s, Window::NotBefore { at: 8_000 }, 0, 0, 8_000),
            Decision::Fail {
                missed_by: Some(-3_000),
                ..
            }
        ));
        assert!(matches!(
            decide(&s, Window::NotBefore { at: 4_000 }, 0, 0, 4_000),
            Decision::Pass { .. }
        ));
    }
}
