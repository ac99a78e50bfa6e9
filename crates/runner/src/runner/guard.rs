//! Abort guards (`abortIf:`) while the steps run: armed when the steps
//! begin, each followed on the recorded timeline; the first whose conditions
//! have held for its `for` stops the steps, and the run then restores like
//! after any other stop. Deciding "held long enough" is pure
//! ([`crate::expect::held_for`]); this file only watches and records.

use std::sync::Arc;

use super::expectation::describe_conditions;
use super::{Error, Run};
use crate::duration::format_millis;
use crate::expect::{self, Held, ResolvedSubject, Truth};
use crate::observe::Recorder;
use crate::record::{AbortRecord, GuardRecord, StepOutcome};
use crate::scenario::checked::{Condition, Guard};
use crate::timeline::Ms;

/// A guard with its subject resolved to node names.
pub(super) struct Armed {
    index: usize,
    subject: ResolvedSubject,
    conditions: Vec<Condition>,
    hold: Ms,
}

/// The guard that fired, and when its hold was complete (ms since start).
pub(super) struct Fired {
    index: usize,
    at: Ms,
}

/// The guards as the result lists them before the run resolves targets
/// (a run that stops in setup still shows what it would have watched).
pub(super) fn records(guards: &[Guard], holds: &[Ms]) -> Vec<GuardRecord> {
    guards
        .iter()
        .zip(holds)
        .map(|(g, &hold)| GuardRecord {
            label: g.label(),
            description: format!("{}: {}", g.subject, describe_conditions(&g.conditions)),
            for_written: g.hold.to_string(),
            for_ms: hold,
            fired_at: None,
        })
        .collect()
}

impl Run<'_> {
    /// Resolves each guard's subject (the targets are known by now) and
    /// words it with the nodes it names.
    pub(super) fn arm_guards(&mut self) -> Result<Vec<Armed>, Error> {
        let guards = &self.plan.scenario.guards;
        let mut armed = Vec::with_capacity(guards.len());
        for (g, &hold) in guards.iter().zip(&self.plan.guard_holds) {
            armed.push(Armed {
                index: g.index,
                subject: self.subject(&g.subject)?,
                conditions: g.conditions.clone(),
                hold,
            });
            let description = format!(
                "{}: {}",
                self.describe_subject(&g.subject),
                describe_conditions(&g.conditions)
            );
            if let Some(r) = self.guard_records.get_mut(g.index) {
                r.description = description;
            }
        }
        if !armed.is_empty() {
            self.progress.log(&format!(
                "abort guards armed: {}",
                self.guard_records
                    .iter()
                    .map(|r| format!(
                        "{} ({} for {})",
                        r.label,
                        r.description,
                        format_millis(r.for_ms)
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        Ok(armed)
    }

    /// Records a fired guard, ends the step it cut short, and returns the
    /// error that stops the run.
    pub(super) fn aborted_by(&mut self, fired: Fired) -> Error {
        let now = self.now();
        let Some(record) = self.guard_records.get_mut(fired.index) else {
            // Unreachable: guards are armed from the same list.
            return Error::Target(format!("abort guard #{} is unknown", fired.index + 1));
        };
        record.fired_at = Some(fired.at);
        let record = record.clone();
        let when = match self.t0 {
            Some(t0) if fired.at >= t0 => format!("T0+{}", format_millis(fired.at - t0)),
            Some(t0) => format!("T0-{}", format_millis(t0 - fired.at)),
            None => format!("start+{} (before T0)", format_millis(fired.at)),
        };
        let reason = format!("stopped: abort guard `{}` fired at {when}", record.label);
        for step in self.steps.iter_mut().filter(|s| s.ended.is_none()) {
            step.ended = Some(now);
            step.outcome = StepOutcome::Failed(reason.clone());
        }
        self.aborted = Some(AbortRecord {
            guard: record.label.clone(),
            description: record.description.clone(),
            for_ms: record.for_ms,
            at: fired.at,
        });
        Error::Aborted {
            guard: record.label,
            when,
            what: format!(
                "{} held for {}",
                record.description,
                format_millis(record.for_ms)
            ),
        }
    }
}

/// Follows the recorder from `from` (the arming time) until a guard fires;
/// never returns when there is none. Dropped (disarmed) when the steps end.
pub(super) async fn watch(rec: Arc<Recorder>, guards: Vec<Armed>, from: Ms) -> Fired {
    if guards.is_empty() {
        return std::future::pending().await;
    }
    let mut rx = rec.subscribe();
    let mut truths: Vec<Truth> = guards
        .iter()
        .map(|g| Truth::new(g.subject.clone(), g.conditions.clone(), from))
        .collect();
    let mut cursor = 0;
    loop {
        rx.borrow_and_update();
        // `now` first: whatever is recorded after it is later than it.
        let now = rec.now();
        rec.follow(&mut cursor, |chunk| {
            for truth in &mut truths {
                truth.extend(chunk);
            }
        });
        // When to look again without a change: the earliest pending hold.
        let mut next: Option<Ms> = None;
        for (g, truth) in guards.iter().zip(&mut truths) {
            let series = truth.series(now);
            match expect::held_for(&series, g.hold, now) {
                Held::Fired(at) => return Fired { index: g.index, at },
                Held::Pending(Some(t)) => next = Some(next.map_or(t, |n| n.min(t))),
                Held::Pending(None) => {}
            }
        }
        // Without a pending hold only a change can fire one; the minute is
        // a safety net, not a decision.
        let deadline = next.unwrap_or(now + 60_000);
        super::wait::change_or_deadline(&mut rx, now, deadline).await;
    }
}
