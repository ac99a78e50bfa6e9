//! The run's timeline as lanes of bars (pure): steps with their expectation
//! windows as they really ran, each target node's Ready periods, the
//! Terminating pods and their replacements, and what clients saw. The SVG
//! timeline draws it (see [`super::svg::timeline`]).

use std::collections::BTreeSet;

use super::result::{ExpectationResult, RunResult, StepKind, StepOutcome, StepRecord, Verdict};
use crate::scenario::expr::Window;
use crate::timeline::{Change, Ms, ObjectRef};

/// What a bar means, which decides its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Held, Ready, served: good.
    Ok,
    /// A fault in place, a node NotReady, a pod Terminating: the failure
    /// being measured.
    Fault,
    /// Failed, Unknown, stuck, error window: what went wrong.
    Bad,
    /// Setup, cleanup, actions, an expectation not run.
    Neutral,
}

/// One bar: `from..to` in ms since the start of the run (equal for a point
/// in time), with an optional mark inside it (when an expectation was seen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    pub label: String,
    pub tone: Tone,
    pub from: Ms,
    pub to: Ms,
    pub mark: Option<Ms>,
}

impl Bar {
    fn span(label: String, tone: Tone, from: Ms, to: Ms) -> Bar {
        Bar {
            label,
            tone,
            from,
            to: to.max(from),
            mark: None,
        }
    }
}

/// A named group of bars (`Steps`, `Nodes`, `Pods`, `Clients`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub bars: Vec<Bar>,
}

/// The whole chart: ms since start from 0 to `end`, with T0 when reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lanes {
    pub title: String,
    pub t0: Option<Ms>,
    pub end: Ms,
    pub sections: Vec<Section>,
}

/// The lanes of a run.
pub fn build(r: &RunResult) -> Lanes {
    let mut sections = vec![Section {
        name: "Steps".into(),
        bars: steps(r),
    }];
    let nodes = nodes(r);
    if !nodes.is_empty() {
        sections.push(Section {
            name: "Nodes".into(),
            bars: nodes,
        });
    }
    let pods = pods(r);
    if !pods.is_empty() {
        sections.push(Section {
            name: "Pods".into(),
            bars: pods,
        });
    }
    let clients: Vec<Bar> = super::clients::bars(r)
        .into_iter()
        .map(|(label, tag, from, to)| Bar::span(label, tone_of(tag), from, to))
        .collect();
    if !clients.is_empty() {
        sections.push(Section {
            name: "Clients".into(),
            bars: clients,
        });
    }
    let end = sections
        .iter()
        .flat_map(|s| &s.bars)
        .map(|b| b.to.max(b.mark.unwrap_or(b.to)))
        .fold(r.finished, Ms::max);
    Lanes {
        title: r.scenario.clone(),
        t0: r.t0,
        end,
        sections,
    }
}

fn tone_of(tag: &str) -> Tone {
    match tag {
        "done" => Tone::Ok,
        "active" => Tone::Fault,
        "crit" => Tone::Bad,
        _ => Tone::Neutral,
    }
}

/// Steps and expectation windows in the order they began, then cleanup.
fn steps(r: &RunResult) -> Vec<Bar> {
    let mut out = Vec::new();
    let mut shown = BTreeSet::new();
    for s in &r.steps {
        let exp = match (s.kind, s.index) {
            (StepKind::Expect, Some(i)) => r.expectations.iter().find(|e| e.index == i),
            _ => None,
        };
        match exp {
            Some(e) => {
                shown.insert(e.index);
                out.extend(expectation(e, r.finished));
            }
            None => out.extend(step(s, r.finished)),
        }
    }
    for e in r.expectations.iter().filter(|e| !shown.contains(&e.index)) {
        out.extend(expectation(e, r.finished));
    }
    // in the order they began (stable: a step before its own expectation)
    out.sort_by_key(|b| b.from);
    out.extend(r.cleanup.iter().filter_map(|s| step(s, r.finished)));
    out
}

fn step(s: &StepRecord, finished: Ms) -> Option<Bar> {
    if s.outcome == StepOutcome::Skipped {
        return None;
    }
    let tone = match (&s.outcome, s.kind) {
        (StepOutcome::Failed(_), _) => Tone::Bad,
        (_, StepKind::Fault) => Tone::Fault,
        _ => Tone::Neutral,
    };
    let end = s.ended.unwrap_or(finished);
    Some(Bar::span(
        format!("{} {}", s.label, s.description),
        tone,
        s.started,
        end,
    ))
}

/// When the observation `ms` (relative to what the window counted from) was,
/// ms since start; `None` for a schema-1 `holdsFor`/`never` whose start is unknown.
pub(super) fn observed_at(e: &ExpectationResult, ms: Ms) -> Option<Ms> {
    match e.window {
        Window::HoldsFor { .. } | Window::Never { .. } => e.window_from.map(|f| f + ms),
        Window::Between { .. } | Window::NotBefore { .. } => Some(e.anchor_at + ms),
        Window::Preflight => Some(e.anchor_at),
        Window::Requests { .. } => Some(e.anchor_at + ms),
    }
}

/// The window the expectation was decided over, with a mark where it was
/// seen; a preflight check is a point at its anchor.
fn expectation(e: &ExpectationResult, finished: Ms) -> Option<Bar> {
    let (verdict, tone) = match e.verdict {
        Verdict::Pass => ("pass", Tone::Ok),
        Verdict::Fail => ("FAIL", Tone::Bad),
        Verdict::NotRun => return None,
    };
    let label = format!("{} {verdict}: {}", e.label, e.description);
    if e.window == Window::Preflight {
        return Some(Bar::span(label, tone, e.anchor_at, e.anchor_at));
    }
    let mark = e.observed.and_then(|ms| observed_at(e, ms));
    match (e.window_from, e.window_to, mark) {
        (Some(from), Some(to), _) => Some(Bar {
            mark,
            ..Bar::span(label, tone, from, to.min(finished))
        }),
        (_, _, Some(at)) => Some(Bar {
            mark: Some(at),
            ..Bar::span(label, tone, at, at)
        }),
        // a schema-1 `holdsFor`/`never`: where it ran was not recorded
        _ => None,
    }
}

/// Each target node's Ready condition periods.
fn nodes(r: &RunResult) -> Vec<Bar> {
    let names: BTreeSet<&str> = r.targets.values().map(String::as_str).collect();
    let mut out = Vec::new();
    for node in names {
        let changes: Vec<(Ms, &str)> = r
            .transitions
            .iter()
            .filter(|t| matches!(&t.object, ObjectRef::Node { name } if name == node))
            .filter_map(|t| match &t.change {
                Change::NodeReady { status, .. } => Some((t.at, status.as_str())),
                _ => None,
            })
            .collect();
        for (i, (at, status)) in changes.iter().enumerate() {
            let end = changes.get(i + 1).map_or(r.finished, |(next, _)| *next);
            let (state, tone) = match *status {
                "True" => ("Ready", Tone::Ok),
                "False" => ("NotReady", Tone::Fault),
                "Unknown" => ("Unknown", Tone::Bad),
                other => (other, Tone::Neutral),
            };
            out.push(Bar::span(format!("{node} {state}"), tone, *at, end));
        }
    }
    out
}

/// Terminating periods that began before cleanup, and the replacements
/// from creation to Ready.
fn pods(r: &RunResult) -> Vec<Bar> {
    let cleanup_from = r.cleanup.iter().map(|s| s.started).min().unwrap_or(Ms::MAX);
    let mut out = Vec::new();
    for (i, t) in r.transitions.iter().enumerate() {
        let (ObjectRef::Pod { name, uid }, Change::PodTerminating) = (&t.object, &t.change) else {
            continue;
        };
        if t.at >= cleanup_from {
            continue;
        }
        let deleted = r.transitions[i..].iter().find(|d| {
            d.change == Change::PodDeleted
                && matches!(&d.object, ObjectRef::Pod { uid: u, .. } if u == uid)
        });
        out.push(match deleted {
            Some(d) => Bar::span(format!("{name} Terminating"), Tone::Fault, t.at, d.at),
            None => Bar::span(
                format!("{name} Terminating until the end"),
                Tone::Bad,
                t.at,
                r.finished,
            ),
        });
    }
    for p in &r.metrics.pods {
        let (Some(replacement), Some(created)) = (&p.replacement, p.replacement_created) else {
            continue;
        };
        let Some(from) = r.t0_plus(created) else {
            continue;
        };
        let on = p.replacement_node.as_deref().unwrap_or("unscheduled");
        let (what, to, tone) = match p.replacement_ready.and_then(|e| r.t0_plus(e)) {
            Some(to) => ("created to Ready", to, Tone::Ok),
            None => ("created, not Ready by the end", r.finished, Tone::Bad),
        };
        out.push(Bar::span(
            format!("{replacement} new on {on} {what}"),
            tone,
            from,
            to,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_map_to_tones() {
        assert_eq!(tone_of("done"), Tone::Ok);
        assert_eq!(tone_of("active"), Tone::Fault);
        assert_eq!(tone_of("crit"), Tone::Bad);
        assert_eq!(tone_of(""), Tone::Neutral);
    }
}
