//! The time model, owned in one place and used by both `plan` and the runner:
//! what an expectation's window counts from (its anchor, or the step's own
//! start), where the window opens and closes, when it is decided, and when the
//! next step can start.
//!
//! Times are plain milliseconds on one clock; the runner passes ms since the
//! run started, the plan passes ms relative to T0 (as [`Span`]s, earliest and
//! latest). The rules are:
//!
//! - `within`/`after` (`Between { from, to }`) open at anchor + from and close
//!   at anchor + to; they are decided when the condition is first seen, at the
//!   latest at the close.
//! - `notBefore: D` covers anchor .. anchor + D and is decided at its close.
//! - `holdsFor: D` / `never: D` cover window start .. window start + D, where
//!   the window start is the anchor when `since:` was written and otherwise
//!   the moment this step starts (after the step before it is decided).

use super::Span;
use crate::scenario::checked::{Action, Step, StepKind};
use crate::scenario::expr::Window;

/// Milliseconds since the run started (monotonic clock), or relative to T0
/// in a plan: the one unit of time of every pure function.
pub type Ms = i64;

/// What a window counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountsFrom {
    /// The anchor: the step named by `since`, else the last fault or action.
    Anchor,
    /// The moment this expectation's step starts (`holdsFor`/`never` without `since`).
    StepStart,
}

/// What `window` counts from; `explicit_anchor` is whether `since:` was written.
pub fn counts_from(window: Window, explicit_anchor: bool) -> CountsFrom {
    match window {
        Window::HoldsFor { .. } | Window::Never { .. } if !explicit_anchor => CountsFrom::StepStart,
        _ => CountsFrom::Anchor,
    }
}

/// Where `holdsFor`/`never` begin watching: the anchor or the step's start.
pub fn window_start(window: Window, explicit_anchor: bool, anchor_at: Ms, step_start: Ms) -> Ms {
    match counts_from(window, explicit_anchor) {
        CountsFrom::Anchor => anchor_at,
        CountsFrom::StepStart => step_start,
    }
}

/// The span of time the window covers, on the clock of its arguments:
/// `(opens, closes)`. `window_start` is from [`window_start`].
pub fn evaluated_span(window: Window, anchor_at: Ms, window_start: Ms) -> (Ms, Ms) {
    match window {
        Window::Between { from, to } => (anchor_at + from, anchor_at + to),
        Window::NotBefore { at } => (anchor_at, anchor_at + at),
        Window::HoldsFor { duration } | Window::Never { duration } => {
            (window_start, window_start + duration)
        }
        Window::Preflight | Window::EndOfRun => (anchor_at, anchor_at),
        // `to` absent: the end of the steps, unknown here (see `Window::Requests`)
        Window::Requests { from, to } => (anchor_at + from, anchor_at + to.unwrap_or(from)),
    }
}

/// A window anchored on a fault, as the run evaluates it once the fault step
/// took `fault_took`: a fault takes effect somewhere between the start of its
/// step (the anchor) and its end (`systemctl stop kubelet` returns once the
/// kubelet has stopped, seconds on a busy machine), so a `within`/`after`
/// window closes that much later; where it opens, and every other window,
/// is unchanged (an effect seen early is early whenever the step ended).
pub fn stretched_by_fault(window: Window, fault_took: Ms) -> Window {
    match window {
        Window::Between { from, to } if fault_took > 0 => Window::Between {
            from,
            to: to + fault_took,
        },
        w => w,
    }
}

/// When the window is decided at the latest: its close.
pub fn deadline(window: Window, anchor_at: Ms, window_start: Ms) -> Ms {
    evaluated_span(window, anchor_at, window_start).1
}

/// The earliest time a passing window can be decided: a `Between` as soon as
/// the condition is seen after it opens; the others only at their close.
pub fn earliest_pass(window: Window, anchor_at: Ms, window_start: Ms) -> Ms {
    let (opens, closes) = evaluated_span(window, anchor_at, window_start);
    match window {
        Window::Between { .. } => opens,
        _ => closes,
    }
}

/// Plan side: the window's opening and closing spans relative to T0, given
/// when its anchor happens and when its step can start. `None` when a time it
/// needs falls before T0 (unknown until the run).
pub fn planned_span(
    window: Window,
    explicit_anchor: bool,
    anchor: Option<Span>,
    step_start: Option<Span>,
) -> Option<(Span, Span)> {
    if matches!(
        window,
        Window::Preflight | Window::EndOfRun | Window::Requests { to: None, .. }
    ) {
        return None;
    }
    let (a, s) = match counts_from(window, explicit_anchor) {
        // the step start is unused when counting from the anchor
        CountsFrom::Anchor => {
            let a = anchor?;
            (a, step_start.unwrap_or(a))
        }
        CountsFrom::StepStart => {
            let s = step_start?;
            (anchor.unwrap_or(s), s)
        }
    };
    let ws_early = window_start(window, explicit_anchor, a.earliest, s.earliest);
    let ws_late = window_start(window, explicit_anchor, a.latest, s.latest);
    let (open_e, close_e) = evaluated_span(window, a.earliest, ws_early);
    let (open_l, close_l) = evaluated_span(window, a.latest, ws_late);
    Some((
        Span {
            earliest: open_e,
            latest: open_l,
        },
        Span {
            earliest: close_e,
            latest: close_l,
        },
    ))
}

/// Plan side: when the step after this expectation can start, assuming it
/// passes: no earlier than this step's start, the earliest pass, and no later
/// than the latest deadline.
pub fn next_start(
    window: Window,
    explicit_anchor: bool,
    anchor: Option<Span>,
    step_start: Option<Span>,
) -> Option<Span> {
    if matches!(
        window,
        Window::Preflight | Window::EndOfRun | Window::Requests { .. }
    ) {
        // decided before T0 from what the preflight read, or when the probe
        // stops at the end of the steps: takes no time here
        return step_start;
    }
    let s = step_start?;
    let a = match counts_from(window, explicit_anchor) {
        CountsFrom::Anchor => anchor?,
        CountsFrom::StepStart => anchor.unwrap_or(s),
    };
    let ws_early = window_start(window, explicit_anchor, a.earliest, s.earliest);
    let ws_late = window_start(window, explicit_anchor, a.latest, s.latest);
    Some(Span {
        earliest: s.earliest.max(earliest_pass(window, a.earliest, ws_early)),
        latest: s.latest.max(deadline(window, a.latest, ws_late)),
    })
}

/// How the step before `index` ends, in words: `#4 (evicted) is decided`
/// (`was decided` when `past`).
pub fn previous_ends(steps: &[Step], index: usize, past: bool) -> Option<String> {
    let prev = steps.iter().rev().find(|s| s.index < index)?;
    let (now, then) = match &prev.kind {
        StepKind::Expect(_) => ("is decided", "was decided"),
        StepKind::Fault { .. } => ("is injected", "was injected"),
        StepKind::Action(Action::WaitFor { .. } | Action::WaitUntil { .. }) => ("ends", "ended"),
        StepKind::Action(_) => ("is done", "was done"),
    };
    Some(format!(
        "{} {}",
        prev.label(),
        if past { then } else { now }
    ))
}

/// Plan text for a window that counts from its step's start:
/// `when this step starts (after #4 (evicted) is decided)`.
pub fn step_start_text(steps: &[Step], index: usize) -> String {
    match previous_ends(steps, index, false) {
        Some(after) => format!("when this step starts (after {after})"),
        None => "when this step starts".into(),
    }
}

/// The anchor a result records for a window that counts from its step's
/// start: `start of #5 (after #4 (evicted) was decided)`.
pub fn recorded_step_start(steps: &[Step], index: usize) -> String {
    match previous_ends(steps, index, true) {
        Some(after) => format!("start of #{} (after {after})", index + 1),
        None => format!("start of #{}", index + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BETWEEN: Window = Window::Between {
        from: 13_000,
        to: 43_000,
    };
    const HOLD: Window = Window::HoldsFor { duration: 20_000 };

    #[test]
    fn a_window_on_a_fault_closes_later_by_the_fault_step_s_length_and_opens_where_it_did() {
        assert_eq!(
            stretched_by_fault(BETWEEN, 3_300),
            Window::Between {
                from: 13_000,
                to: 46_300
            }
        );
        assert_eq!(stretched_by_fault(BETWEEN, 0), BETWEEN);
        assert_eq!(stretched_by_fault(HOLD, 3_300), HOLD);
        let not_before = Window::NotBefore { at: 5_000 };
        assert_eq!(stretched_by_fault(not_before, 3_300), not_before);
    }

    #[test]
    fn between_counts_from_the_anchor_whatever_the_step_start() {
        assert_eq!(counts_from(BETWEEN, false), CountsFrom::Anchor);
        let ws = window_start(BETWEEN, false, 1_000, 30_000);
        assert_eq!(ws, 1_000);
        assert_eq!(evaluated_span(BETWEEN, 1_000, ws), (14_000, 44_000));
        assert_eq!(deadline(BETWEEN, 1_000, ws), 44_000);
        assert_eq!(earliest_pass(BETWEEN, 1_000, ws), 14_000);
    }

    #[test]
    fn holds_for_without_since_counts_from_the_step_start() {
        // the statefulset-nfs case: anchored at the pause (T0), started at T0+28.9s
        assert_eq!(counts_from(HOLD, false), CountsFrom::StepStart);
        let ws = window_start(HOLD, false, 0, 28_900);
        assert_eq!(evaluated_span(HOLD, 0, ws), (28_900, 48_900));
        assert_eq!(deadline(HOLD, 0, ws), 48_900);
        assert_eq!(earliest_pass(HOLD, 0, ws), 48_900);
        let never = Window::Never { duration: 5_000 };
        assert_eq!(
            evaluated_span(never, 0, window_start(never, false, 0, 7)),
            (7, 5_007)
        );
    }

    #[test]
    fn holds_for_with_since_counts_from_the_anchor() {
        assert_eq!(counts_from(HOLD, true), CountsFrom::Anchor);
        let ws = window_start(HOLD, true, 5_000, 60_000);
        assert_eq!(evaluated_span(HOLD, 5_000, ws), (5_000, 25_000));
    }

    #[test]
    fn not_before_covers_anchor_to_its_bound() {
        let w = Window::NotBefore { at: 8_000 };
        assert_eq!(evaluated_span(w, 2_000, 9_999), (2_000, 10_000));
        assert_eq!(earliest_pass(w, 2_000, 9_999), 10_000);
    }

    #[test]
    fn planned_spans_follow_the_same_rules() {
        let at = |e, l| {
            Some(Span {
                earliest: e,
                latest: l,
            })
        };
        // implicit hold: from the step start, whatever the anchor
        assert_eq!(
            planned_span(HOLD, false, at(0, 0), at(13_000, 43_000)),
            Some((
                Span {
                    earliest: 13_000,
                    latest: 43_000
                },
                Span {
                    earliest: 33_000,
                    latest: 63_000
                }
            ))
        );
        assert_eq!(
            next_start(HOLD, false, at(0, 0), at(13_000, 43_000)),
            at(33_000, 63_000)
        );
        // between: from the anchor; next step after the first sighting, at most the close
        assert_eq!(
            planned_span(BETWEEN, false, at(0, 0), at(5_000, 5_000)),
            Some((
                Span {
                    earliest: 13_000,
                    latest: 13_000
                },
                Span {
                    earliest: 43_000,
                    latest: 43_000
                }
            ))
        );
        assert_eq!(
            next_start(BETWEEN, false, at(0, 0), at(5_000, 5_000)),
            at(13_000, 43_000)
        );
        // a step that starts after the close keeps its own start
        assert_eq!(
            next_start(BETWEEN, false, at(0, 0), at(90_000, 90_000)),
            at(90_000, 90_000)
        );
        // before T0 nothing is known
        assert_eq!(planned_span(BETWEEN, false, None, at(0, 0)), None);
        assert_eq!(next_start(HOLD, false, None, None), None);
    }

    #[test]
    fn the_step_start_is_named_after_the_step_before_it() {
        let text = "name: t\nnamespace: ns\ntarget: {name: n1}\nsteps:\n  - id: pause\n    fault: pause-vm\n  - id: evicted\n    expect: {pods: app=web, on: target, terminating: true, within: 1m}\n  - expect: {pods: app=web, on: target, terminating: true, holdsFor: 20s}\n  - action: {wait: {duration: 5s}}\n  - expect: {pods: app=web, on: target, terminating: true, never: 5s}\n";
        let checked = crate::scenario::load::load_str("s.yaml", std::path::Path::new("."), text)
            .and_then(|l| crate::scenario::validate::validate(l, &crate::files::Memory::default()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            recorded_step_start(&checked.steps, 2),
            "start of #3 (after #2 (evicted) was decided)"
        );
        assert_eq!(
            step_start_text(&checked.steps, 2),
            "when this step starts (after #2 (evicted) is decided)"
        );
        assert_eq!(
            recorded_step_start(&checked.steps, 4),
            "start of #5 (after #4 ended)"
        );
        assert_eq!(
            previous_ends(&checked.steps, 1, false).as_deref(),
            Some("#1 (pause) is injected")
        );
        assert_eq!(recorded_step_start(&checked.steps, 0), "start of #1");
    }
}
