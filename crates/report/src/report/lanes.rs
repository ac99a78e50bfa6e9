//! The run's timeline as rows of segments (pure): the steps in scenario
//! order with their expectation windows as they really ran, a drain's
//! evictions and refusals, cleanup folded into one row, one lane per target
//! node (Ready, NotReady, Unknown, deleted) with its cordons, the
//! Terminating pods and their replacements, one lane per PersistentVolume
//! that had a VolumeAttachment (attached, attaching, detaching, Multi-Attach;
//! built in `storage_lane.rs`), the remediation (the failed machines, the
//! acts, two copies at once), and what clients saw. The row types are in
//! `rows.rs`, re-exported here. The SVG timeline draws it (see
//! [`super::svg::timeline`]).

use std::collections::BTreeSet;

use super::format::{secs, t0_rel};
use crate::record::machines::Power;
use crate::record::{ExpectationResult, RunResult, StepKind, StepOutcome, StepRecord, Verdict};
use crate::scenario::expr::Window;
use crate::timeline::{Change, Ms, ObjectRef};

pub use super::rows::{Lanes, Mark, Row, Section, Segment, Tone};

/// The lanes of a run.
pub fn build(r: &RunResult) -> Lanes {
    let mut sections = vec![Section {
        name: "Steps".into(),
        rows: steps(r),
    }];
    for (name, rows) in [
        ("Nodes", nodes(r)),
        ("Pods", pods(r)),
        ("Volumes", super::storage_lane::rows(r)),
    ] {
        if !rows.is_empty() {
            sections.push(Section {
                name: name.into(),
                rows,
            });
        }
    }
    let remediation = remediation(r);
    if !remediation.is_empty() {
        sections.push(Section {
            name: "Remediation".into(),
            rows: remediation,
        });
    }
    let clients: Vec<Row> = super::clients::bars(r)
        .into_iter()
        .map(|(label, tag, from, to)| Row::one(label, tone_of(tag), from, to))
        .collect();
    if !clients.is_empty() {
        sections.push(Section {
            name: "Clients".into(),
            rows: clients,
        });
    }
    let end = sections
        .iter()
        .flat_map(|s| &s.rows)
        .flat_map(Row::times)
        .fold(r.finished, Ms::max);
    Lanes {
        title: r.scenario.clone(),
        t0: r.t0,
        end,
        sections,
    }
}

/// The failed machines as the witness saw them (on, paused, off), the
/// remediation's decision and acts, and each pod's two copies at once.
fn remediation(r: &RunResult) -> Vec<Row> {
    let Some(t0) = r.t0 else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for m in r
        .machines
        .iter()
        .filter(|m| r.fault_nodes().any(|n| n == m.node))
    {
        let segments = m
            .power
            .iter()
            .enumerate()
            .map(|(i, (at, power))| {
                let to = m.power.get(i + 1).map_or(m.to, |(next, _)| *next);
                let (tone, word) = match power {
                    Power::On => (Tone::Ok, "on"),
                    Power::Paused => (Tone::Fault, "paused"),
                    Power::Off => (Tone::Neutral, "off"),
                    Power::Unknown => (Tone::Bad, "unknown"),
                };
                Segment {
                    from: *at,
                    to,
                    tone,
                    title: format!("{} machine {word} for {}", m.node, secs(to - at)),
                }
            })
            .collect();
        rows.push(Row {
            label: format!("{} machine", m.node),
            segments,
            marks: Vec::new(),
        });
    }
    if let Some(rem) = &r.remediation {
        let segments = match (rem.detection, rem.decision) {
            (Some(d), Some(decision)) => vec![Segment {
                from: t0 + d,
                to: t0 + d + decision,
                tone: Tone::Fault,
                title: format!("NotReady until the first act: decision {}", secs(decision)),
            }],
            _ => Vec::new(),
        };
        let marks = rem
            .acts
            .iter()
            .map(|a| Mark {
                at: t0 + a.at,
                tone: Some(Tone::Cordon),
                title: format!(
                    "{} on {} at {} by {}",
                    a.what,
                    a.node,
                    t0_rel(a.at),
                    a.by.as_deref().unwrap_or("unknown")
                ),
            })
            .collect();
        rows.push(Row {
            label: "remediation".into(),
            segments,
            marks,
        });
    }
    for d in &r.duplicates {
        let (Some(window), Some(last)) = (d.window, d.original_last_seen) else {
            continue;
        };
        let from = t0 + d.replacement_seen.unwrap_or(d.replacement_running);
        rows.push(Row::one(
            format!("{} two copies for {}", d.pod, secs(window)),
            Tone::Bad,
            from,
            t0 + last,
        ));
    }
    rows
}

fn tone_of(tag: &str) -> Tone {
    match tag {
        "done" => Tone::Ok,
        "active" => Tone::Fault,
        "crit" => Tone::Bad,
        _ => Tone::Neutral,
    }
}

/// Setup, then the steps and expectations in scenario order (a drain's
/// evictions under it), then cleanup as one row.
fn steps(r: &RunResult) -> Vec<Row> {
    // (setup first, scenario index, the step before what it adds)
    let mut keyed: Vec<((u8, usize, u8), Row)> = Vec::new();
    let mut shown = BTreeSet::new();
    for s in &r.steps {
        let exp = match (s.kind, s.index) {
            (StepKind::Expect, Some(i)) => r.expectations.iter().find(|e| e.index == i),
            _ => None,
        };
        let key = match s.kind {
            StepKind::Setup => (0, 0),
            _ => (1, s.index.unwrap_or(usize::MAX)),
        };
        if let Some(e) = exp {
            shown.insert(e.index);
            keyed.extend(expectation(e, r.finished).map(|row| ((key.0, key.1, 0), row)));
            continue;
        }
        keyed.extend(step(s, r.finished).map(|row| ((key.0, key.1, 0), row)));
        keyed.extend(evictions(s).into_iter().map(|row| ((key.0, key.1, 1), row)));
    }
    for e in r.expectations.iter().filter(|e| !shown.contains(&e.index)) {
        keyed.extend(expectation(e, r.finished).map(|row| ((1, e.index, 0), row)));
    }
    keyed.sort_by_key(|(k, _)| *k);
    let mut out: Vec<Row> = keyed.into_iter().map(|(_, row)| row).collect();
    out.extend(cleanup(r));
    out
}

fn step(s: &StepRecord, finished: Ms) -> Option<Row> {
    if s.outcome == StepOutcome::Skipped {
        return None;
    }
    let tone = match (&s.outcome, s.kind) {
        (StepOutcome::Failed(_), _) => Tone::Bad,
        (_, StepKind::Fault) => Tone::Fault,
        _ => Tone::Neutral,
    };
    let end = s.ended.unwrap_or(finished);
    Some(Row::one(
        format!("{} {}", s.label, s.description),
        tone,
        s.started,
        end,
    ))
}

/// A drain's calls of the Eviction API: a row of the pods it evicted and
/// one of the refusals (429), a mark each.
fn evictions(s: &StepRecord) -> Vec<Row> {
    let mut out = Vec::new();
    for (refused, tone, what) in [
        (false, Tone::Cordon, "evicted"),
        (true, Tone::Fault, "refused (429)"),
    ] {
        let marks: Vec<Mark> = s
            .evictions
            .iter()
            .filter(|e| e.refused == refused)
            .map(|e| Mark {
                at: e.at,
                tone: Some(tone),
                title: format!("{what}: {}", e.pod),
            })
            .collect();
        if marks.is_empty() {
            continue;
        }
        let n = marks.len();
        let label = if refused {
            format!("{} evictions refused (429): {n}", s.label)
        } else {
            format!("{} pods evicted: {n}", s.label)
        };
        out.push(Row {
            label,
            segments: Vec::new(),
            marks,
        });
    }
    out
}

/// All cleanup steps as one row from the first's start to the last's end;
/// each is in `result.json` and in report.md's Steps table.
fn cleanup(r: &RunResult) -> Option<Row> {
    let first = r.cleanup.first()?;
    let from = first.started;
    let to = r
        .cleanup
        .iter()
        .map(|s| s.ended.unwrap_or(r.finished).max(s.started))
        .max()
        .unwrap_or(from);
    let failed = r
        .cleanup
        .iter()
        .filter(|s| matches!(s.outcome, StepOutcome::Failed(_)))
        .count();
    let n = r.cleanup.len();
    let label = match failed {
        0 => format!(
            "cleanup: {n} step{} put back, took {}",
            plural(n),
            secs(to - from)
        ),
        f => format!("cleanup: {f} of {n} step{} FAILED", plural(n)),
    };
    let tone = if failed > 0 { Tone::Bad } else { Tone::Neutral };
    let segments = r
        .cleanup
        .iter()
        .map(|s| Segment {
            from: s.started,
            to: s.ended.unwrap_or(r.finished).max(s.started),
            tone: match s.outcome {
                StepOutcome::Failed(_) => Tone::Bad,
                _ => tone,
            },
            title: format!(
                "{}: {}{}",
                s.description,
                secs(s.ended.unwrap_or(r.finished) - s.started),
                match &s.outcome {
                    StepOutcome::Failed(e) => format!(", FAILED: {e}"),
                    _ => String::new(),
                }
            ),
        })
        .collect();
    Some(Row {
        label,
        segments,
        marks: Vec::new(),
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// When the observation `ms` (relative to what the window counted from) was,
/// ms since start; `None` for a schema-1 `holdsFor`/`never` whose start is unknown.
pub(super) fn observed_at(e: &ExpectationResult, ms: Ms) -> Option<Ms> {
    match e.window {
        Window::HoldsFor { .. } | Window::Never { .. } => e.window_from.map(|f| f + ms),
        Window::Between { .. } | Window::NotBefore { .. } => Some(e.anchor_at + ms),
        Window::Preflight | Window::EndOfRun => Some(e.anchor_at),
        Window::Requests { .. } => Some(e.anchor_at + ms),
    }
}

/// The window the expectation was decided over, with a mark where it was
/// seen; a preflight check is a point at its anchor.
fn expectation(e: &ExpectationResult, finished: Ms) -> Option<Row> {
    let (verdict, tone) = match e.verdict {
        Verdict::Pass => ("pass", Tone::Ok),
        Verdict::Fail => ("FAIL", Tone::Bad),
        Verdict::NotRun => return None,
    };
    let label = format!("{} {verdict}: {}", e.label, e.description);
    if matches!(e.window, Window::Preflight | Window::EndOfRun) {
        return Some(Row::one(label, tone, e.anchor_at, e.anchor_at));
    }
    let seen = e.observed.and_then(|ms| observed_at(e, ms));
    let marks = seen
        .map(|at| Mark {
            at,
            tone: None,
            title: format!("{label} (seen)"),
        })
        .into_iter()
        .collect();
    match (e.window_from, e.window_to, seen) {
        (Some(from), Some(to), _) => Some(Row {
            marks,
            ..Row::one(label, tone, from, to.min(finished))
        }),
        (_, _, Some(at)) => Some(Row {
            marks,
            ..Row::one(label, tone, at, at)
        }),
        // a schema-1 `holdsFor`/`never`: where it ran was not recorded
        _ => None,
    }
}

/// One lane per target node: its Ready condition from one change to the
/// next, ending where the Node was deleted (a grey "deleted" stretch until
/// it registered again); and a row of its cordons, if any.
fn nodes(r: &RunResult) -> Vec<Row> {
    let names: BTreeSet<&str> = r.fault_nodes().collect();
    let mut out = Vec::new();
    for node in names {
        let changes = r
            .transitions
            .iter()
            .filter(|t| matches!(&t.object, ObjectRef::Node { name } if name == node));
        let mut lane = Lane::new(node, r);
        let mut cordons = Lane::new(node, r);
        for t in changes {
            match &t.change {
                Change::NodeReady { status, .. } => {
                    let (state, tone) = match status.as_str() {
                        "True" => ("Ready", Tone::Ok),
                        "False" => ("NotReady", Tone::Fault),
                        "Unknown" => ("Unknown", Tone::Bad),
                        other => (other, Tone::Neutral),
                    };
                    lane.enter(t.at, Some((state.to_owned(), tone)));
                }
                Change::NodeDeleted => {
                    lane.enter(t.at, Some(("deleted".to_owned(), Tone::Neutral)));
                    cordons.enter(t.at, None);
                }
                // its Ready condition follows, seen in the same event
                Change::NodeAdded => lane.enter(t.at, None),
                Change::Unschedulable { value } => {
                    cordons.enter(t.at, value.then(|| ("cordoned".to_owned(), Tone::Cordon)))
                }
                _ => {}
            }
        }
        out.extend(lane.finish(node.to_owned()));
        out.extend(cordons.finish(format!("{node} cordoned (unschedulable)")));
    }
    out
}

/// Builds a row from state changes: each state lasts until the next.
struct Lane<'a> {
    node: &'a str,
    r: &'a RunResult,
    open: Option<(Ms, String, Tone)>,
    segments: Vec<Segment>,
}

impl<'a> Lane<'a> {
    fn new(node: &'a str, r: &'a RunResult) -> Lane<'a> {
        Lane {
            node,
            r,
            open: None,
            segments: Vec::new(),
        }
    }

    /// Ends the open state at `at` and begins `next` (`None`: no state).
    fn enter(&mut self, at: Ms, next: Option<(String, Tone)>) {
        if let Some((from, state, tone)) = self.open.take() {
            if state == next.as_ref().map_or("", |(s, _)| s.as_str()) {
                self.open = Some((from, state, tone));
                return;
            }
            self.close(from, at, &state, tone);
        }
        self.open = next.map(|(state, tone)| (at, state, tone));
    }

    fn close(&mut self, from: Ms, to: Ms, state: &str, tone: Tone) {
        let since = self
            .r
            .since_t0(from)
            .map_or_else(String::new, |t| format!(" from {}", t0_rel(t)));
        self.segments.push(Segment {
            from,
            to: to.max(from),
            tone,
            title: format!("{} {state}{since} for {}", self.node, secs(to - from)),
        });
    }

    fn finish(mut self, label: String) -> Option<Row> {
        if let Some((from, state, tone)) = self.open.take() {
            let end = self.r.finished;
            self.close(from, end, &state, tone);
        }
        (!self.segments.is_empty()).then(|| Row {
            label,
            segments: self.segments,
            marks: Vec::new(),
        })
    }
}

/// Terminating periods that began before cleanup, and the replacements
/// from creation to Ready.
fn pods(r: &RunResult) -> Vec<Row> {
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
            Some(d) => Row::one(format!("{name} Terminating"), Tone::Fault, t.at, d.at),
            None => Row::one(
                format!("{name} Terminating until the end"),
                Tone::Bad,
                t.at,
                r.finished,
            ),
        });
    }
    let mut replacements = Vec::new();
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
        replacements.push(Row::one(
            format!("{replacement} new on {on} {what}"),
            tone,
            from,
            to,
        ));
    }
    replacements.sort_by_key(|row| row.segments[0].from);
    out.extend(replacements);
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
