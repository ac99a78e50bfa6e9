//! Cleanup: undo what the journal holds. Faults are always reverted; taints,
//! cordons, replicas, applied objects and a namespace the run created follow
//! the scenario's `cleanup` policy. What existed before the run is never
//! deleted, and what the run changed is set back to what it was.

use super::{Run, undo};
use crate::backend::NodeFaults;
use crate::report::result::{RunVerdict, StepKind as RecKind, StepOutcome, StepRecord};
use crate::scenario::model::Cleanup;

impl Run<'_> {
    pub(super) async fn restore<B: NodeFaults>(&mut self, backend: &mut B, verdict: RunVerdict) {
        // Commands of a fault cut short (a signal during its check) belong
        // to the step that was running, not to the first revert.
        let left = backend.take_commands();
        if let Some(step) = self.steps.last_mut() {
            step.commands.extend(left);
        }
        let keep = match self.plan.scenario.cleanup {
            Cleanup::Always => None,
            Cleanup::OnSuccess if verdict == RunVerdict::Pass => None,
            Cleanup::OnSuccess => Some("cleanup: on-success, and the run did not pass"),
            Cleanup::Never => Some("cleanup: never"),
        };
        let rec = self.rec.clone();
        let progress = self.progress;
        let records = &mut self.cleanup;
        let observer = &mut self.observer;
        undo::revert_all(
            self.journal,
            Ok(&self.client),
            backend,
            keep,
            // Deleting what was applied ends the story the observer tells.
            || *observer = None,
            |description, r, commands| {
                let now = rec.now();
                let outcome = match r {
                    Ok(()) => StepOutcome::Ok,
                    Err(e) => StepOutcome::Failed(e),
                };
                progress.log(&format!(
                    "cleanup: {description}: {}",
                    match &outcome {
                        StepOutcome::Failed(e) => format!("FAILED: {e}"),
                        _ => "ok".into(),
                    }
                ));
                records.push(StepRecord {
                    index: None,
                    label: "cleanup".into(),
                    kind: RecKind::Cleanup,
                    description,
                    started: now,
                    ended: Some(now),
                    outcome,
                    notes: Vec::new(),
                    commands,
                });
            },
        )
        .await;
    }
}
