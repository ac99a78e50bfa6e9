//! Cleanup: undo what the journal holds. Faults are always reverted; taints,
//! cordons, replicas, applied objects and a namespace the run created follow
//! the scenario's `cleanup` policy. What existed before the run is never
//! deleted, and what the run changed is set back to what it was.

use std::cell::Cell;

use super::journal::Journal;
use super::progress::Progress;
use super::{Run, undo};
use crate::backend::NodeFaults;
use crate::observe::Recorder;
use crate::record::{RunVerdict, StepKind as RecKind, StepOutcome, StepRecord};
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
        let observer = &mut self.observer;
        revert_recorded(
            self.journal,
            Ok(&self.client),
            backend,
            keep,
            &self.rec,
            self.progress,
            &mut self.cleanup,
            // Deleting what was applied ends the story the observer tells.
            || *observer = None,
        )
        .await;
    }
}

/// Reverts what the journal holds (see [`undo::revert_each`]) and records
/// each revert in `records` as a cleanup step, from when it began to when
/// it finished, its waits included (a namespace's deletion lasts until the
/// namespace is gone). Each record is pushed as its revert ends, so a
/// cleanup cut short keeps those that finished.
#[allow(clippy::too_many_arguments)]
async fn revert_recorded<B: NodeFaults>(
    journal: &mut Journal,
    client: Result<&kube::Client, &str>,
    backend: &mut B,
    keep: Option<&str>,
    rec: &Recorder,
    progress: &Progress,
    records: &mut Vec<StepRecord>,
    on_delete: impl FnMut(),
) {
    let began = Cell::new(rec.now());
    undo::revert_each(
        journal,
        client,
        backend,
        keep,
        || began.set(rec.now()),
        on_delete,
        |description, r, commands| {
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
                started: began.get(),
                ended: Some(rec.now()),
                outcome,
                notes: Vec::new(),
                commands,
                evictions: Vec::new(),
                fault: None,
            });
        },
    )
    .await;
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::backend::Error as BackendError;
    use crate::runner::journal::{Undo, test_header};
    use crate::scenario::model::FaultKind;

    /// A backend whose revert takes `wait` (a VM that needs time to come back).
    struct Slow {
        wait: Duration,
    }

    impl NodeFaults for Slow {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn describe(&self, node: &str, fault: FaultKind) -> String {
            format!("{} {node}", fault.name())
        }
        async fn inject(&mut self, _node: &str, _fault: FaultKind) -> Result<(), BackendError> {
            tokio::time::sleep(self.wait).await;
            Ok(())
        }
    }

    /// The issue-32 regression: every cleanup step was recorded when it
    /// ended, with a duration of 0, however long its revert waited.
    #[tokio::test]
    async fn a_cleanup_step_lasts_from_its_start_to_its_end_waits_included() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = Journal::create(dir.path(), test_header("cleanup-1")).unwrap();
        journal
            .will(Undo::Namespace {
                name: "ns".into(),
                uid: None,
            })
            .unwrap();
        journal
            .will(Undo::Fault {
                node: "w1".into(),
                fault: FaultKind::PauseVm,
                revert: FaultKind::ResumeVm,
                memo: None,
            })
            .unwrap();
        let rec = Recorder::new(Instant::now());
        let wait = Duration::from_millis(300);
        let mut records = Vec::new();
        let mut deletes = 0;
        let before = rec.now();
        revert_recorded(
            &mut journal,
            Err("no cluster in this test"),
            &mut Slow { wait },
            None,
            &rec,
            &Progress::quiet(),
            &mut records,
            || deletes += 1,
        )
        .await;
        let after = rec.now();
        assert_eq!(deletes, 1);
        let [fault, namespace] = records.as_slice() else {
            panic!("two cleanup steps: {records:?}")
        };
        assert_eq!(fault.description, "resume-vm w1");
        assert_eq!(fault.outcome, StepOutcome::Ok);
        let fault_end = fault.ended.unwrap();
        assert!(fault.started >= before, "{fault:?}");
        assert!(
            fault_end - fault.started >= 300,
            "the revert's wait is the step's: {fault:?}"
        );
        // The next one begins when the first ended, not at its own end
        // after the first's duration.
        assert!(namespace.started >= fault_end, "{namespace:?}");
        assert!(namespace.ended.unwrap() <= after, "{namespace:?}");
        assert!(
            namespace.started < fault_end + 300,
            "begun right after the fault's revert: {records:?}"
        );
        assert!(
            matches!(&namespace.outcome, StepOutcome::Failed(e) if e.contains("could not be reached")),
            "{namespace:?}"
        );
    }
}
