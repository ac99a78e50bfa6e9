//! The run's result: expectations never reached listed as not run, windows
//! missed unseen looked at again over the whole run, metrics computed.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::Run;
use super::expectation::describe_conditions;
use crate::expect::{self, Decision};
use crate::plan::Plan;
use crate::record::{
    ExpectationResult, RunResult, RunVerdict, SCHEMA_VERSION, Usage, Verdict, machines,
};
use crate::scenario::checked::{StepKind, Subject as CheckedSubject};
use crate::timeline::{World, endpoints, metrics};

/// The result of a run that could not even start.
pub fn failed_to_start(plan: &Plan, file: &str, error: &str, verdict: RunVerdict) -> RunResult {
    let c = &plan.scenario;
    RunResult {
        schema_version: SCHEMA_VERSION,
        scenario: c.name.clone(),
        description: c.description.clone(),
        file: file.to_owned(),
        backend: plan.backend.to_string(),
        cluster_version: None,
        profile: plan.profile.clone(),
        namespace: c.namespace.clone(),
        targets: BTreeMap::new(),
        sets: BTreeMap::new(),
        graceful_shutdown: Vec::new(),
        started_at: Timestamp::now(),
        t0: None,
        finished: 0,
        verdict,
        error: Some(error.to_owned()),
        steps: Vec::new(),
        expectations: Vec::new(),
        cleanup: Vec::new(),
        metrics: metrics::Metrics::default(),
        transitions: Vec::new(),
        guards: Vec::new(),
        aborted: None,
        probes: Vec::new(),
        observed_from: None,
        watch_errors: 0,
        usage: None,
        audit: None,
        remediation: None,
        machines: Vec::new(),
        duplicates: Vec::new(),
        zones: None,
    }
}

impl Run<'_> {
    pub(super) fn finish(
        self,
        file: &str,
        verdict: RunVerdict,
        error: Option<String>,
    ) -> RunResult {
        self.progress.finish();
        let c = &self.plan.scenario;
        let transitions = self.rec.take_transitions();
        let finished = self.rec.now();
        // Done with: the watchers (their folds go with their thread) and the
        // live world, freed before the metrics build worlds of their own.
        drop(self.observer);
        drop(self.rec.take_world());
        let t0 = self.t0;
        let mut targets: Vec<String> = self.targets.values().cloned().collect();
        for node in self.sets.values().flatten() {
            if !targets.contains(node) {
                targets.push(node.clone());
            }
        }
        let steps_end = self.steps_end.unwrap_or(finished);
        // Recorded in order of `at`: cleanup's transitions are a tail.
        let before_cleanup = &transitions[..transitions.partition_point(|t| t.at <= steps_end)];
        let metrics = t0
            .map(|t0| {
                let mut m = metrics::compute(&transitions, t0, &targets, finished, self.started_at);
                // What clients were routed to while the steps ran (cleanup
                // deletes the Services).
                m.endpoints = endpoints::metrics(before_cleanup, t0, &targets);
                m.error_window = self
                    .probe_records
                    .iter()
                    .filter_map(|p| crate::verdict::windows::longest(&p.windows, t0, None))
                    .map(|w| w.duration)
                    .max();
                m
            })
            .unwrap_or_default();
        let mut expectations = self.expectations;
        // A window missed unseen: did it hold later, before cleanup began?
        for late in &self.late {
            let e = &mut expectations[late.result];
            let series =
                expect::truth_series(before_cleanup, &late.subject, &late.conditions, late.anchor);
            if let Decision::Fail {
                observed: Some(o),
                missed_by,
                detail,
            } = expect::decide(&series, e.window, late.anchor, late.anchor, steps_end)
            {
                e.observed = Some(o);
                e.missed_by = missed_by;
                e.detail = format!("{}; {detail}", e.detail);
            }
        }
        // Expectations never reached are listed as not run.
        for step in &c.steps {
            if let StepKind::Expect(exp) = &step.kind
                && !expectations.iter().any(|e| e.index == step.index)
            {
                expectations.push(ExpectationResult {
                    index: step.index,
                    label: step.label(),
                    description: format!(
                        "{}: {}",
                        exp.subject,
                        describe_conditions(&exp.conditions)
                    ),
                    window_written: exp.window.source(),
                    window: self.plan.steps[step.index]
                        .window
                        .unwrap_or(crate::scenario::expr::Window::HoldsFor { duration: 0 }),
                    anchor: String::new(),
                    anchor_at: 0,
                    observed: None,
                    verdict: Verdict::NotRun,
                    detail: "the run stopped before this step".into(),
                    missed_by: None,
                    notes: Vec::new(),
                    window_from: None,
                    window_to: None,
                });
            }
        }
        let remediation = t0.and_then(|t0| {
            crate::verdict::remediation::judge(
                &transitions,
                t0,
                &targets,
                &self.steps,
                &metrics,
                &self.machines,
                &[],
            )
        });
        let duplicates = t0.map_or_else(Vec::new, |t0| {
            machines::duplicate_windows(&transitions, t0, &metrics.pods, &self.machines)
        });
        let mut verdict = verdict;
        if !self.end_checks.is_empty() {
            let labels = World::at(&transitions, finished).pod_labels;
            for (slot, exp) in &self.end_checks {
                let e = &mut expectations[*slot];
                let (outcome, detail) = match (&exp.subject, exp.conditions.first(), t0) {
                    (CheckedSubject::Pods { selector, .. }, Some(cond), Some(t0)) => {
                        expect::duplicates::decide(
                            cond,
                            selector,
                            &labels,
                            &duplicates,
                            &self.machines,
                            t0,
                        )
                    }
                    (CheckedSubject::Node(target), Some(cond), Some(_)) => {
                        let node = self.targets.get(target).map_or("", String::as_str);
                        expect::duplicates::decide_remediation(cond, node, remediation.as_ref())
                    }
                    _ => (
                        Verdict::Fail,
                        "the run never reached its first fault".into(),
                    ),
                };
                self.progress.log(&format!(
                    "{}: {}: {}: {detail}",
                    e.label,
                    if outcome == Verdict::Pass {
                        "pass"
                    } else {
                        "FAIL"
                    },
                    e.description
                ));
                (e.verdict, e.detail) = (outcome, detail);
                (e.anchor_at, e.window_from, e.window_to) =
                    (finished, Some(finished), Some(finished));
                if outcome == Verdict::Fail && verdict == RunVerdict::Pass {
                    verdict = RunVerdict::Fail;
                }
            }
        }
        let zone_plan = self.zone_plan;
        let mut result = RunResult {
            schema_version: SCHEMA_VERSION,
            scenario: c.name.clone(),
            description: c.description.clone(),
            file: file.to_owned(),
            backend: self.plan.backend.to_string(),
            cluster_version: self.cluster_version,
            profile: self.plan.profile.clone(),
            namespace: c.namespace.clone(),
            targets: self.targets,
            sets: self.sets,
            graceful_shutdown: self.gns,
            started_at: self.started_at,
            t0,
            finished,
            verdict,
            error,
            steps: self.steps,
            expectations,
            cleanup: self.cleanup,
            metrics,
            transitions,
            guards: self.guard_records,
            aborted: self.aborted,
            probes: self.probe_records,
            observed_from: self.observed_from,
            watch_errors: self.rec.watch_errors(),
            usage: usage_of_self(),
            audit: None,
            remediation,
            machines: self.machines,
            duplicates,
            zones: None,
        };
        result.zones = super::zones::record(zone_plan, &result);
        result
    }
}

/// This process's figures so far (getrusage); None where unavailable.
fn usage_of_self() -> Option<Usage> {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).ok()?;
    let ms = |t: nix::sys::time::TimeVal| {
        u64::try_from(t.tv_sec()).unwrap_or(0) * 1000
            + u64::try_from(t.tv_usec()).unwrap_or(0) / 1000
    };
    Some(Usage {
        // Linux reports ru_maxrss in KiB.
        peak_rss_bytes: u64::try_from(u.max_rss()).unwrap_or(0) * 1024,
        cpu_ms: ms(u.user_time()) + ms(u.system_time()),
    })
}
