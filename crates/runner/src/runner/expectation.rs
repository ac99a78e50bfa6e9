//! Deciding an expectation: its subject resolved to nodes, its window
//! watched on the recorded timeline until it can be decided.

use super::{Error, Run};
use crate::duration::format_millis;
use crate::expect::{self, Decision, ResolvedSubject, Truth};
use crate::plan::time;
use crate::profile::Var;
use crate::record::{ExpectationResult, Verdict};
use crate::scenario::checked::{
    Anchor, Condition, Expectation, StepKind, Subject as CheckedSubject,
};
use crate::scenario::expr::Window;
use crate::timeline::{Ms, Toleration};

pub(super) struct Late {
    pub(super) result: usize,
    pub(super) subject: ResolvedSubject,
    pub(super) conditions: Vec<Condition>,
    pub(super) anchor: Ms,
}

impl Run<'_> {
    pub(super) fn subject(&self, s: &CheckedSubject) -> Result<ResolvedSubject, Error> {
        Ok(match s {
            CheckedSubject::Node(t) => match self.sets.get(t) {
                Some(nodes) => ResolvedSubject::Nodes(nodes.clone()),
                None => ResolvedSubject::Node(self.node(t)?),
            },
            CheckedSubject::Pods {
                selector,
                on,
                not_on,
            } => ResolvedSubject::Pods {
                selector: selector.clone(),
                on: on.as_ref().map(|t| self.nodes_of(t)).transpose()?,
                not_on: not_on.as_ref().map(|t| self.nodes_of(t)).transpose()?,
            },
            CheckedSubject::Pvc { claim, on } => ResolvedSubject::Pvc {
                claim: claim.clone(),
                node: on.as_ref().map(|t| self.node(t)).transpose()?,
            },
            CheckedSubject::Service { name, on, not_on } => ResolvedSubject::Service {
                name: name.clone(),
                on: on.as_ref().map(|t| self.node(t)).transpose()?,
                not_on: not_on.as_ref().map(|t| self.node(t)).transpose()?,
            },
            CheckedSubject::Probe(name) => ResolvedSubject::Probe(name.clone()),
        })
    }

    /// The result of an expectation reached at `now`, not decided yet, and
    /// when its anchor happened (`None`: the anchor step never completed).
    pub(super) fn new_result(
        &self,
        index: usize,
        label: &str,
        exp: &Expectation,
        window: Window,
        now: Ms,
    ) -> (ExpectationResult, Option<Ms>) {
        let (anchor, anchor_at) = match exp.anchor {
            Anchor::Start => ("setup".to_owned(), Some(self.setup_end)),
            Anchor::Step(i) => (
                self.plan.scenario.steps[i].label(),
                self.anchors.get(&i).copied(),
            ),
        };
        let result = ExpectationResult {
            index,
            label: label.to_owned(),
            description: format!(
                "{}: {}",
                self.describe_subject(&exp.subject),
                describe_conditions(&exp.conditions)
            ),
            window_written: exp.window.source(),
            window,
            anchor,
            anchor_at: anchor_at.unwrap_or(now),
            observed: None,
            verdict: Verdict::NotRun,
            detail: String::new(),
            missed_by: None,
            notes: Vec::new(),
            window_from: None,
            window_to: None,
        };
        (result, anchor_at)
    }

    /// Records an expectation that cannot be measured: its anchor never happened.
    pub(super) fn never_anchored(&mut self, mut result: ExpectationResult) {
        result.detail = "its anchor step never happened (an earlier expectation failed)".into();
        self.progress
            .log(&format!("{}: not run: {}", result.label, result.detail));
        self.expectations.push(result);
    }

    pub(super) fn describe_subject(&self, s: &CheckedSubject) -> String {
        // A node condition holds on each node of a set; pods are on any.
        let with = |t: &String, each: &str| match (self.targets.get(t), self.sets.get(t)) {
            (Some(n), _) => format!("{t} ({n})"),
            (None, Some(nodes)) => format!("{t} ({each} {})", nodes.join(", ")),
            (None, None) => t.clone(),
        };
        let filtered = |mut text: String, on: &Option<String>, not_on: &Option<String>| {
            if let Some(t) = on {
                text.push_str(&format!(" on {}", with(t, "any of")));
            }
            if let Some(t) = not_on {
                text.push_str(&format!(" not on {}", with(t, "any of")));
            }
            text
        };
        match s {
            CheckedSubject::Node(t) => format!("node {}", with(t, "each of")),
            CheckedSubject::Pods {
                selector,
                on,
                not_on,
            } => filtered(format!("pods {selector}"), on, not_on),
            CheckedSubject::Service { name, on, not_on } => {
                filtered(format!("service {name}"), on, not_on)
            }
            CheckedSubject::Pvc { claim, on: None } => format!("pvc {claim}"),
            CheckedSubject::Pvc { claim, on: Some(t) } => {
                format!("pvc {claim} on {}", with(t, "each of"))
            }
            CheckedSubject::Probe(name) => format!("probe {name}"),
        }
    }

    /// Decides a `gracefulShutdown` expectation from what the preflight
    /// found on its node (`None`: no preflight report for it, so the
    /// requirement cannot be established and fails).
    pub(super) fn graceful_shutdown(
        &mut self,
        index: usize,
        label: String,
        exp: &Expectation,
        report: Option<&crate::gns::NodeReport>,
    ) {
        let Some(required) = crate::verdict::graceful::requirement(exp) else {
            return;
        };
        let unknown = crate::gns::ShutdownVerdict::Unknown {
            reason: "no graceful-shutdown preflight was run for this node".into(),
        };
        let verdict = report.map_or(&unknown, |r| &r.verdict);
        let (outcome, detail) = crate::expect::graceful::decide(required, verdict);
        // the "window" is the moment the facts were read
        let at = report.map_or(self.setup_end, |r| r.at);
        let result = ExpectationResult {
            index,
            label: label.clone(),
            description: format!(
                "{}: {}",
                self.describe_subject(&exp.subject),
                describe_conditions(&exp.conditions)
            ),
            window_written: exp.window.source(),
            window: crate::scenario::expr::Window::Preflight,
            anchor: "preflight".into(),
            anchor_at: at,
            observed: None,
            verdict: outcome,
            detail,
            missed_by: None,
            notes: Vec::new(),
            window_from: Some(at),
            window_to: Some(at),
        };
        let word = if outcome == Verdict::Pass {
            "pass"
        } else {
            "FAIL"
        };
        self.progress.log(&format!(
            "{label}: {word}: {}: {}",
            result.description, result.detail
        ));
        self.expectations.push(result);
    }

    /// Decides one expectation, watching the timeline until it can.
    pub(super) async fn expectation(&mut self, index: usize, label: String, exp: &Expectation) {
        if let CheckedSubject::Probe(name) = &exp.subject {
            self.defer_probe(index, label, exp, name.clone());
            return;
        }
        if matches!(exp.window, crate::scenario::expr::WindowSpec::EndOfRun) {
            let now = self.now();
            let (mut result, _) = self.new_result(
                index,
                &label,
                exp,
                crate::scenario::expr::Window::EndOfRun,
                now,
            );
            result.anchor = "the end of the run".into();
            result.detail =
                "decided at the end of the run, from the failed machines' record".into();
            self.progress.log(&format!(
                "{label}: {}: decided at the end of the run",
                result.description
            ));
            self.end_checks.push((self.expectations.len(), exp.clone()));
            self.expectations.push(result);
            return;
        }
        if crate::verdict::graceful::requirement(exp).is_some() {
            let report = match &exp.subject {
                CheckedSubject::Node(t) => self
                    .node(t)
                    .ok()
                    .and_then(|n| self.gns.iter().find(|r| r.node == n).cloned()),
                _ => None,
            };
            self.graceful_shutdown(index, label, exp, report.as_ref());
            return;
        }
        let planned = &self.plan.steps[index];
        let window = planned
            .window
            .unwrap_or(crate::scenario::expr::Window::HoldsFor { duration: 0 });
        let start = self.now();
        let (mut result, anchor_at) = self.new_result(index, &label, exp, window, start);
        let description = result.description.clone();
        let (Some(anchor_at), Ok(subject)) = (anchor_at, self.subject(&exp.subject)) else {
            self.never_anchored(result);
            return;
        };
        let (window, mut notes) = self.window_for(exp, window, &subject, anchor_at);
        let window = self.stretched_by_fault(exp, window, &mut notes);
        result.window = window;
        result.notes = notes;
        let window_start = time::window_start(window, exp.explicit_anchor, anchor_at, start);
        let deadline = time::deadline(window, anchor_at, window_start);
        let (window_from, window_to) = time::evaluated_span(window, anchor_at, window_start);
        (result.window_from, result.window_to) = (Some(window_from), Some(window_to));
        if time::counts_from(window, exp.explicit_anchor) == time::CountsFrom::StepStart {
            result.anchor = time::recorded_step_start(&self.plan.scenario.steps, index);
            result.anchor_at = window_start;
        }
        let mut rx = self.rec.subscribe();
        let mut truth = Truth::new(
            subject.clone(),
            exp.conditions.clone(),
            anchor_at.min(window_start),
        );
        let mut cursor = 0;
        loop {
            rx.borrow_and_update();
            // `now` first: whatever is recorded after it is later than it.
            let now = self.now();
            self.rec.follow(&mut cursor, |chunk| truth.extend(chunk));
            let series = truth.series(now);
            match expect::decide(&series, window, anchor_at, window_start, now) {
                Decision::Pending => {
                    let left = (deadline - now).max(0) + 1;
                    self.progress.waiting(
                        &label,
                        &format!(
                            "{label}: {description}, {window} (decided in {:.0}s)",
                            left as f64 / 1000.0
                        ),
                    );
                    super::wait::change_or_deadline(&mut rx, now, deadline).await;
                }
                Decision::Pass { observed, detail } => {
                    result.verdict = Verdict::Pass;
                    result.observed = observed;
                    result.detail = detail;
                    // Later steps anchored here count from when it first held.
                    let first = series.iter().find(|(_, v)| *v).map_or(now, |(t, _)| *t);
                    self.anchors
                        .insert(index, observed.map_or(first, |o| anchor_at + o));
                    break;
                }
                Decision::Fail {
                    observed,
                    missed_by,
                    detail,
                } => {
                    if observed.is_none()
                        && matches!(window, crate::scenario::expr::Window::Between { .. })
                    {
                        self.late.push(Late {
                            result: self.expectations.len(),
                            subject: subject.clone(),
                            conditions: exp.conditions.clone(),
                            anchor: anchor_at,
                        });
                    }
                    result.verdict = Verdict::Fail;
                    result.observed = observed;
                    result.missed_by = missed_by;
                    result.detail = match truth.seen().filter(|_| observed.is_none()) {
                        Some(seen) => format!("{detail} (seen: {seen})"),
                        None => detail,
                    };
                    if let Some(o) = observed
                        .filter(|_| matches!(window, crate::scenario::expr::Window::Between { .. }))
                    {
                        self.anchors.insert(index, anchor_at + o);
                    }
                    break;
                }
            }
        }
        let verdict = if result.verdict == Verdict::Pass {
            "pass"
        } else {
            "FAIL"
        };
        self.progress.log(&format!(
            "{label}: {verdict}: {description}: {}",
            result.detail
        ));
        self.expectations.push(result);
    }
}

impl Run<'_> {
    /// The window once its anchor fault's step has ended: a `within`/`after`
    /// closes later by the step's length ([`time::stretched_by_fault`]),
    /// said in a note.
    fn stretched_by_fault(
        &self,
        exp: &Expectation,
        window: Window,
        notes: &mut Vec<String>,
    ) -> Window {
        let Anchor::Step(i) = exp.anchor else {
            return window;
        };
        let step = &self.plan.scenario.steps[i];
        if !matches!(step.kind, StepKind::Fault { .. }) {
            return window;
        }
        let Some(took) = self
            .steps
            .iter()
            .find(|s| s.index == Some(i))
            .and_then(|s| Some(s.ended? - s.started))
        else {
            return window;
        };
        let stretched = time::stretched_by_fault(window, took);
        if stretched != window {
            notes.push(format!(
                "closes {} late: fault step {} took that long",
                format_millis(took),
                step.label()
            ));
        }
        stretched
    }

    /// The window as this run evaluates it, with what its numbers rest on:
    /// a window about pods that names a toleration takes the selected pods'
    /// own `tolerationSeconds` (as they were when the window began), not
    /// the profile's.
    fn window_for(
        &self,
        exp: &Expectation,
        planned: Window,
        subject: &ResolvedSubject,
        anchor_at: Ms,
    ) -> (Window, Vec<String>) {
        let profile = &self.plan.profile;
        let own = crate::plan::pod_tolerations(exp);
        let mut notes = crate::plan::assumed_notes(profile, exp);
        if own.is_empty() {
            return (planned, notes);
        }
        let world = self.rec.world_at(anchor_at);
        let pods = expect::selected_pods(&world, subject);
        let mut p = profile.clone();
        for var in own {
            let values: Vec<Toleration> = pods
                .iter()
                .filter_map(|pod| pod.tolerations)
                .map(|(unreachable, not_ready)| match var {
                    Var::NotReadyTolerationSeconds => not_ready,
                    _ => unreachable,
                })
                .collect();
            let (seconds, why) =
                expect::toleration::effective(var.alias().unwrap_or(var.name()), &values);
            if let Some(s) = seconds {
                p.set(
                    var,
                    std::time::Duration::from_secs(u64::try_from(s).unwrap_or(0)),
                );
            }
            notes.push(why);
        }
        match exp.window.resolve(&p) {
            Ok(w) => (w, notes),
            Err(e) => {
                notes.push(format!(
                    "with the pods' own tolerations the window is invalid ({e}); the planned one is used"
                ));
                (planned, notes)
            }
        }
    }
}

pub(super) fn describe_conditions(conditions: &[Condition]) -> String {
    conditions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
