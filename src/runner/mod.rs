//! Runs a plan against a cluster: setup, target resolution, the steps in
//! order (faults through the backend, actions through kube-rs, expectations
//! decided on the observed timeline), then cleanup, which always runs: on
//! success, on error and on Ctrl-C. Produces the [`RunResult`].

pub mod progress;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt as _;
use kube::api::Api;

pub use progress::Progress;

use crate::actions;
use crate::backend::{self, NodeFaults};
use crate::expect::{self, Decision, Subject};
use crate::observe::{Observer, Recorder};
use crate::plan::{Plan, time};
use crate::report::result::{
    ExpectationResult, RunResult, RunVerdict, SCHEMA_VERSION, StepKind as RecKind, StepOutcome,
    StepRecord, Verdict,
};
use crate::scenario::checked::{
    Action, Anchor, Condition, Expectation, StepKind, Subject as CheckedSubject, TargetSelector,
};
use crate::scenario::model::{Cleanup, FaultKind};
use crate::timeline::{Ms, metrics};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("setup failed")]
    Setup(#[source] Box<actions::Error>),
    #[error("{0}")]
    Target(String),
    /// The scenario names something the cluster does not have (checked
    /// before any fault): bad input, not a cluster failure.
    #[error("{0}; nothing was injected")]
    Preflight(String),
    #[error(transparent)]
    Fault(#[from] Box<backend::Error>),
    #[error("step {step} failed")]
    Action {
        step: String,
        #[source]
        source: Box<actions::Error>,
    },
    #[error("wait {step}: condition not reached within {}", crate::scenario::duration::format_millis(*.after))]
    WaitTimeout { step: String, after: Ms },
    #[error("interrupted")]
    Interrupted,
}

/// What a run produced.
#[derive(Debug)]
pub struct Outcome {
    pub result: RunResult,
    /// It stopped before any fault because the scenario names something the
    /// cluster does not have (exit code 2, not 3).
    pub invalid_input: bool,
}

/// Runs the whole scenario and returns its result; never skips cleanup.
pub async fn run<B: NodeFaults>(
    plan: &Plan,
    backend: &mut B,
    config: kube::Config,
    file: &str,
    progress: &Progress,
) -> Outcome {
    let start = Instant::now();
    let recorder = Recorder::new(start);
    let client = kube::Client::try_from(config.clone());
    // Evictions need every 429 seen, not retried away by the client.
    let mut strict_config = config;
    strict_config.default_retry = false;
    let strict = kube::Client::try_from(strict_config);
    let (client, strict) = match (client, strict) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(e), _) | (_, Err(e)) => {
            return Outcome {
                result: failed_to_start(plan, file, &format!("building a kube client: {e}")),
                invalid_input: false,
            };
        }
    };
    let mut run = Run {
        plan,
        client,
        strict,
        rec: recorder,
        started_at: Timestamp::now(),
        cluster_version: None,
        targets: BTreeMap::new(),
        steps: Vec::new(),
        expectations: Vec::new(),
        cleanup: Vec::new(),
        anchors: HashMap::new(),
        setup_end: 0,
        t0: None,
        broken: BTreeMap::new(),
        taints: Vec::new(),
        cordoned: BTreeSet::new(),
        created_namespace: false,
        observer: None,
        progress,
        late: Vec::new(),
        steps_end: None,
    };
    let outcome = tokio::select! {
        r = run.execute(backend) => r,
        _ = tokio::signal::ctrl_c() => Err(Error::Interrupted),
    };
    let error = outcome.err();
    if let Some(e) = &error {
        progress.log(&format!("stopping: {}", chain(e)));
    }
    let failed = run.expectations.iter().any(|e| e.verdict == Verdict::Fail);
    let verdict = match &error {
        Some(Error::Interrupted) => RunVerdict::Interrupted,
        Some(_) => RunVerdict::Error,
        None if failed => RunVerdict::Fail,
        None => RunVerdict::Pass,
    };
    run.steps_end = Some(run.now());
    run.restore(backend, verdict).await;
    let invalid_input = matches!(error, Some(Error::Preflight(_)));
    Outcome {
        result: run.finish(file, verdict, error.as_ref().map(|e| chain(e))),
        invalid_input,
    }
}

/// The result of a run that could not even start.
fn failed_to_start(plan: &Plan, file: &str, error: &str) -> RunResult {
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
        started_at: Timestamp::now(),
        t0: None,
        finished: 0,
        verdict: RunVerdict::Error,
        error: Some(error.to_owned()),
        steps: Vec::new(),
        expectations: Vec::new(),
        cleanup: Vec::new(),
        metrics: metrics::Metrics::default(),
        transitions: Vec::new(),
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

struct Run<'a> {
    plan: &'a Plan,
    client: kube::Client,
    /// The same API without the client's automatic retries (evictions).
    strict: kube::Client,
    rec: Arc<Recorder>,
    started_at: Timestamp,
    cluster_version: Option<String>,
    targets: BTreeMap<String, String>,
    steps: Vec<StepRecord>,
    expectations: Vec<ExpectationResult>,
    cleanup: Vec<StepRecord>,
    /// Step index -> its anchor time (faults/actions: start; waits: end;
    /// expectations: when the condition first held).
    anchors: HashMap<usize, Ms>,
    setup_end: Ms,
    t0: Option<Ms>,
    /// Node -> the fault that left it broken.
    broken: BTreeMap<String, FaultKind>,
    /// Taints the scenario added and did not remove: (node, key, effect).
    taints: Vec<(String, String, String)>,
    cordoned: BTreeSet<String>,
    created_namespace: bool,
    observer: Option<Observer>,
    progress: &'a Progress,
    /// Expectations that failed unseen: looked at again over the whole run
    /// at the end, to report when (and so by how much) they did hold.
    late: Vec<Late>,
    /// When the steps ended and cleanup began.
    steps_end: Option<Ms>,
}

struct Late {
    result: usize,
    subject: Subject,
    conditions: Vec<Condition>,
    anchor: Ms,
}

impl Run<'_> {
    fn now(&self) -> Ms {
        self.rec.now()
    }

    fn begin(
        &mut self,
        index: Option<usize>,
        label: String,
        kind: RecKind,
        description: String,
    ) -> usize {
        self.progress.log(&format!("{label}: {description}"));
        self.steps.push(StepRecord {
            index,
            label,
            kind,
            description,
            started: self.now(),
            ended: None,
            outcome: StepOutcome::Ok,
            notes: Vec::new(),
        });
        self.steps.len() - 1
    }

    fn end(&mut self, slot: usize, outcome: StepOutcome) {
        let now = self.now();
        let step = &mut self.steps[slot];
        step.ended = Some(now);
        step.outcome = outcome;
    }

    async fn execute<B: NodeFaults>(&mut self, backend: &mut B) -> Result<(), Error> {
        let c = &self.plan.scenario;
        let ns = c.namespace.clone();
        self.cluster_version = actions::server_version(&self.client).await.ok();

        // Setup: namespace, watchers, manifests, readiness.
        let slot = self.begin(
            None,
            "setup".into(),
            RecKind::Setup,
            format!("namespace {ns}, apply, wait ready"),
        );
        let result = self.setup(&ns).await;
        self.end(slot, outcome(&result));
        result.map_err(|e| Error::Setup(Box::new(e)))?;

        self.resolve_targets().await?;
        self.check_namespaces().await?;
        self.setup_end = self.now();

        for step in &c.steps {
            let label = step.label();
            match &step.kind {
                StepKind::Fault { fault, node } => {
                    let node_name = self.node(node)?;
                    let slot = self.begin(
                        Some(step.index),
                        label,
                        RecKind::Fault,
                        backend.describe(&node_name, *fault),
                    );
                    let started = self.steps[slot].started;
                    self.t0.get_or_insert(started);
                    self.anchors.insert(step.index, started);
                    let r = backend.inject(&node_name, *fault).await;
                    self.end(slot, outcome(&r));
                    r.map_err(Box::new)?;
                    if fault.revert().is_some() {
                        self.broken.insert(node_name, *fault);
                    } else {
                        self.broken.remove(&node_name);
                    }
                }
                StepKind::Action(action) => {
                    let slot = self.begin(
                        Some(step.index),
                        label.clone(),
                        RecKind::Action,
                        self.describe_action(action),
                    );
                    let started = self.steps[slot].started;
                    if self.t0.is_none()
                        && !matches!(
                            action,
                            Action::Apply(_) | Action::WaitFor { .. } | Action::WaitUntil { .. }
                        )
                    {
                        self.t0 = Some(started);
                    }
                    self.anchors.insert(step.index, started);
                    let r = self.action(step.index, &label, action, &ns).await;
                    self.end(slot, outcome(&r));
                    r?;
                    if matches!(action, Action::WaitFor { .. } | Action::WaitUntil { .. }) {
                        let now = self.now();
                        self.anchors.insert(step.index, now);
                    }
                }
                StepKind::Expect(exp) => {
                    self.expectation(step.index, label, exp).await;
                }
            }
        }
        Ok(())
    }

    async fn setup(&mut self, ns: &str) -> Result<(), actions::Error> {
        self.created_namespace = actions::ensure_namespace(&self.client, ns).await?;
        let mut observer = Observer::start(&self.client, ns, &self.rec);
        tokio::time::timeout(Duration::from_secs(60), observer.synced())
            .await
            .map_err(|_| actions::Error::Timeout {
                what: "the watchers' first list".into(),
                after: Duration::from_secs(60),
            })?;
        self.observer = Some(observer);
        let setup = &self.plan.scenario.setup;
        for file in setup
            .apply
            .iter()
            .filter(|f| f.applies_to(self.plan.backend))
        {
            let applied = actions::apply_file(&self.client, &file.path, ns).await?;
            self.progress
                .log(&format!("  applied {}: {}", file.file, applied.join(", ")));
        }
        for check in &setup.wait_ready {
            let msg = format!(
                "setup: waiting for {} {} to be ready",
                check.kind.name(),
                check.name
            );
            self.progress.waiting(&msg, &msg);
            actions::wait_ready(&self.client, ns, check).await?;
        }
        Ok(())
    }

    /// Resolves every target to a node before anything is injected.
    async fn resolve_targets(&mut self) -> Result<(), Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        let nodes = api
            .list(&Default::default())
            .await
            .map_err(|source| Error::Target(format!("listing nodes: {source}")))?;
        let mut names: Vec<String> = nodes.items.iter().map(|n| n.name_any()).collect();
        names.sort();
        // Read pods from the API, not the recorder: right after setup the
        // watch may not have delivered the last pods yet.
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &self.plan.scenario.namespace);
        let pods = pods
            .list(&Default::default())
            .await
            .map_err(|source| Error::Target(format!("listing pods: {source}")))?;
        for target in &self.plan.scenario.targets {
            let excluded: Vec<&String> = target
                .exclude
                .iter()
                .filter_map(|t| self.targets.get(t))
                .collect();
            let candidates: Vec<&Node> = nodes
                .items
                .iter()
                .filter(|n| !excluded.contains(&&n.name_any()))
                .collect();
            let chosen = match &target.selector {
                TargetSelector::Name(n) => candidates
                    .iter()
                    .find(|c| c.name_any() == *n)
                    .map(|c| c.name_any()),
                TargetSelector::Role(role) => {
                    let mut with_role: Vec<String> = candidates
                        .iter()
                        .filter(|n| {
                            let labels = n.labels();
                            if role == "worker" {
                                !labels.contains_key("node-role.kubernetes.io/control-plane")
                            } else {
                                labels.contains_key(&format!("node-role.kubernetes.io/{role}"))
                            }
                        })
                        .map(|n| n.name_any())
                        .collect();
                    with_role.sort();
                    with_role.into_iter().next()
                }
                TargetSelector::MostPods(sel) => {
                    let mut counts: BTreeMap<String, usize> =
                        candidates.iter().map(|n| (n.name_any(), 0)).collect();
                    for pod in pods.items.iter().filter(|p| {
                        p.metadata.deletion_timestamp.is_none() && sel.matches(p.labels())
                    }) {
                        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_ref());
                        if let Some(c) = node.and_then(|n| counts.get_mut(n)) {
                            *c += 1;
                        }
                    }
                    // Most pods; ties go to the first name.
                    counts
                        .into_iter()
                        .filter(|(_, n)| *n > 0)
                        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                        .map(|(n, _)| n)
                }
            };
            let Some(node) = chosen else {
                return Err(Error::Preflight(format!(
                    "target `{}` ({}) matches no node; nodes: {}",
                    target.name,
                    target.describe(),
                    names.join(", ")
                )));
            };
            self.progress
                .log(&format!("target {} = node {node}", target.name));
            self.targets.insert(target.name.clone(), node);
        }
        Ok(())
    }

    /// Namespaces that actions name must exist before any fault.
    async fn check_namespaces(&self) -> Result<(), Error> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        for step in &self.plan.scenario.steps {
            if let StepKind::Action(Action::DeleteNamespace { name }) = &step.kind {
                let found = api.get_opt(name).await.map_err(|source| {
                    Error::Target(format!("reading namespace {name}: {source}"))
                })?;
                if found.is_none() {
                    return Err(Error::Preflight(format!(
                        "step {} deletes namespace `{name}`, which does not exist (and setup does not create it)",
                        step.label()
                    )));
                }
            }
        }
        Ok(())
    }

    fn node(&self, target: &str) -> Result<String, Error> {
        self.targets
            .get(target)
            .cloned()
            .ok_or_else(|| Error::Target(format!("target `{target}` was not resolved")))
    }

    fn describe_action(&self, action: &Action) -> String {
        let mut text = action.to_string();
        for (t, n) in &self.targets {
            text = text.replace(&format!(" {t}"), &format!(" {t} ({n})"));
        }
        text
    }

    async fn action(
        &mut self,
        index: usize,
        label: &str,
        action: &Action,
        ns: &str,
    ) -> Result<(), Error> {
        let client = self.client.clone();
        let wrap = |source| Error::Action {
            step: label.to_owned(),
            source: Box::new(source),
        };
        match action {
            Action::Apply(files) => {
                for f in files.iter().filter(|f| f.applies_to(self.plan.backend)) {
                    actions::apply_file(&client, &f.path, ns)
                        .await
                        .map_err(wrap)?;
                }
            }
            Action::Taint {
                node,
                key,
                value,
                effect,
            } => {
                let n = self.node(node)?;
                actions::taint(&client, &n, key, value.as_deref(), *effect)
                    .await
                    .map_err(wrap)?;
                self.taints.push((n, key.clone(), effect.to_string()));
            }
            Action::Untaint { node, key, effect } => {
                let n = self.node(node)?;
                actions::untaint(&client, &n, key, *effect)
                    .await
                    .map_err(wrap)?;
                let eff = effect.map(|e| e.to_string());
                self.taints.retain(|(tn, tk, te)| {
                    !(*tn == n && tk == key && eff.as_ref().is_none_or(|e| e == te))
                });
            }
            Action::Cordon { node } => {
                let n = self.node(node)?;
                actions::set_unschedulable(&client, &n, true)
                    .await
                    .map_err(wrap)?;
                self.cordoned.insert(n);
            }
            Action::Uncordon { node } => {
                let n = self.node(node)?;
                actions::set_unschedulable(&client, &n, false)
                    .await
                    .map_err(wrap)?;
                self.cordoned.remove(&n);
            }
            Action::DeleteNode { node } => {
                let n = self.node(node)?;
                actions::delete_node(&client, &n).await.map_err(wrap)?;
            }
            Action::ForceDeletePods { selector, node } => {
                let n = node.as_ref().map(|t| self.node(t)).transpose()?;
                let deleted =
                    actions::force_delete_pods(&client, ns, selector.as_ref(), n.as_deref())
                        .await
                        .map_err(wrap)?;
                self.note(&format!(
                    "force-deleted {}",
                    if deleted.is_empty() {
                        "no pods".into()
                    } else {
                        deleted.join(", ")
                    }
                ));
            }
            Action::Scale {
                kind,
                name,
                replicas,
            } => {
                actions::scale(&client, ns, *kind, name, *replicas)
                    .await
                    .map_err(wrap)?;
            }
            Action::WaitFor { .. } => {
                let ms = self.plan.steps[index].blocks_for.unwrap_or(0);
                self.progress.waiting(
                    label,
                    &format!(
                        "{label}: waiting {}",
                        crate::scenario::duration::format_millis(ms)
                    ),
                );
                tokio::time::sleep(Duration::from_millis(u64::try_from(ms).unwrap_or(0))).await;
            }
            Action::WaitUntil {
                subject,
                conditions,
                ..
            } => {
                let after = self.plan.steps[index].blocks_for.unwrap_or(0);
                let subject = self.subject(subject)?;
                let deadline = self.now() + after;
                let mut rx = self.rec.subscribe();
                loop {
                    if expect::holds(&self.rec.world(), &subject, conditions) {
                        break;
                    }
                    let left = deadline - self.now();
                    if left <= 0 {
                        return Err(Error::WaitTimeout {
                            step: label.to_owned(),
                            after,
                        });
                    }
                    self.progress.waiting(
                        label,
                        &format!(
                            "{label}: waiting until {} ({}s left)",
                            describe_conditions(conditions),
                            left / 1000
                        ),
                    );
                    let _ = tokio::time::timeout(
                        Duration::from_millis(u64::try_from(left).unwrap_or(0)),
                        rx.changed(),
                    )
                    .await;
                }
            }
            Action::DeleteNamespace { name } => {
                actions::delete_namespace(&client, name, Duration::from_secs(120))
                    .await
                    .map_err(wrap)?;
            }
            Action::Drain(d) => {
                let nodes: Vec<String> = d
                    .nodes
                    .iter()
                    .map(|t| self.node(t))
                    .collect::<Result<_, _>>()?;
                self.cordoned.extend(nodes.iter().cloned());
                let notes = std::sync::Mutex::new(Vec::new());
                let rec = self.rec.clone();
                let progress = self.progress;
                let note = |text: String| {
                    progress.log(&format!("  {text}"));
                    notes
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((rec.now(), text));
                };
                progress.waiting(label, &format!("{label}: draining {}", nodes.join(", ")));
                let r = actions::drain(&self.strict, &nodes, d, &note).await;
                let notes = notes
                    .into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(step) = self.steps.last_mut() {
                    step.notes.extend(notes);
                }
                let summary = r.map_err(wrap)?;
                self.note(&format!(
                    "drained {}: {} pods evicted, {} refusals (429), {} skipped",
                    nodes.join(", "),
                    summary.evicted.len(),
                    summary.refusals,
                    summary.skipped.len()
                ));
            }
        }
        Ok(())
    }

    fn note(&mut self, text: &str) {
        let now = self.now();
        self.progress.log(&format!("  {text}"));
        if let Some(step) = self.steps.last_mut() {
            step.notes.push((now, text.to_owned()));
        }
    }

    fn subject(&self, s: &CheckedSubject) -> Result<Subject, Error> {
        Ok(match s {
            CheckedSubject::Node(t) => Subject::Node(self.node(t)?),
            CheckedSubject::Pods {
                selector,
                on,
                not_on,
            } => Subject::Pods {
                selector: selector.clone(),
                on: on.as_ref().map(|t| self.node(t)).transpose()?,
                not_on: not_on.as_ref().map(|t| self.node(t)).transpose()?,
            },
        })
    }

    fn describe_subject(&self, s: &CheckedSubject) -> String {
        let with = |t: &String| match self.targets.get(t) {
            Some(n) => format!("{t} ({n})"),
            None => t.clone(),
        };
        match s {
            CheckedSubject::Node(t) => format!("node {}", with(t)),
            CheckedSubject::Pods {
                selector,
                on,
                not_on,
            } => {
                let mut text = format!("pods {selector}");
                if let Some(t) = on {
                    text.push_str(&format!(" on {}", with(t)));
                }
                if let Some(t) = not_on {
                    text.push_str(&format!(" not on {}", with(t)));
                }
                text
            }
        }
    }

    /// Decides one expectation, watching the timeline until it can.
    async fn expectation(&mut self, index: usize, label: String, exp: &Expectation) {
        let planned = &self.plan.steps[index];
        let window = planned
            .window
            .unwrap_or(crate::scenario::expr::Window::HoldsFor { duration: 0 });
        let description = format!(
            "{}: {}",
            self.describe_subject(&exp.subject),
            describe_conditions(&exp.conditions)
        );
        let start = self.now();
        let (anchor_name, anchor_at) = match exp.anchor {
            Anchor::Start => ("setup".to_owned(), Some(self.setup_end)),
            Anchor::Step(i) => (
                self.plan.scenario.steps[i].label(),
                self.anchors.get(&i).copied(),
            ),
        };
        let mut result = ExpectationResult {
            index,
            label: label.clone(),
            description: description.clone(),
            window_written: exp.window.source(),
            window,
            anchor: anchor_name,
            anchor_at: anchor_at.unwrap_or(start),
            window_from: None,
            window_to: None,
            observed: None,
            verdict: Verdict::NotRun,
            detail: String::new(),
            missed_by: None,
        };
        let (Some(anchor_at), Ok(subject)) = (anchor_at, self.subject(&exp.subject)) else {
            result.detail = "its anchor step never happened (an earlier expectation failed)".into();
            self.progress
                .log(&format!("{label}: not run: {}", result.detail));
            self.expectations.push(result);
            return;
        };
        let window_start = time::window_start(window, exp.explicit_anchor, anchor_at, start);
        let deadline = time::deadline(window, anchor_at, window_start);
        let (window_from, window_to) = time::evaluated_span(window, anchor_at, window_start);
        (result.window_from, result.window_to) = (Some(window_from), Some(window_to));
        if time::counts_from(window, exp.explicit_anchor) == time::CountsFrom::StepStart {
            result.anchor = time::recorded_step_start(&self.plan.scenario.steps, index);
            result.anchor_at = window_start;
        }
        let mut rx = self.rec.subscribe();
        loop {
            rx.borrow_and_update();
            let now = self.now();
            let series = expect::truth_series(
                &self.rec.transitions(),
                &subject,
                &exp.conditions,
                anchor_at.min(window_start),
            );
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
                    let _ = tokio::time::timeout(
                        Duration::from_millis(u64::try_from(left).unwrap_or(1)),
                        rx.changed(),
                    )
                    .await;
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
                    result.detail = detail;
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

    /// Reverts faults, undoes taints and cordons, deletes the namespace as
    /// the scenario's cleanup policy says. Errors are recorded, not raised.
    async fn restore<B: NodeFaults>(&mut self, backend: &mut B, verdict: RunVerdict) {
        let broken: Vec<(String, FaultKind)> =
            std::mem::take(&mut self.broken).into_iter().collect();
        for (node, fault) in broken {
            let Some(revert) = fault.revert() else {
                continue;
            };
            let r = backend.inject(&node, revert).await;
            self.record_cleanup(backend.describe(&node, revert), r.map_err(|e| chain(&e)));
        }
        let policy = self.plan.scenario.cleanup;
        let tidy = match policy {
            Cleanup::Always => true,
            Cleanup::OnSuccess => verdict == RunVerdict::Pass,
            Cleanup::Never => false,
        };
        if !tidy {
            return;
        }
        for (node, key, effect) in std::mem::take(&mut self.taints) {
            let eff = match effect.as_str() {
                "NoSchedule" => Some(crate::scenario::model::TaintEffect::NoSchedule),
                "PreferNoSchedule" => Some(crate::scenario::model::TaintEffect::PreferNoSchedule),
                _ => Some(crate::scenario::model::TaintEffect::NoExecute),
            };
            let r = actions::untaint(&self.client, &node, &key, eff).await;
            self.record_cleanup(
                format!("untaint {node} {key}:{effect}"),
                r.map(|_| ()).map_err(|e| chain(&e)),
            );
        }
        for node in std::mem::take(&mut self.cordoned) {
            let r = actions::set_unschedulable(&self.client, &node, false).await;
            self.record_cleanup(format!("uncordon {node}"), r.map_err(|e| chain(&e)));
        }
        let ns = self.plan.scenario.namespace.clone();
        self.observer = None;
        let r = actions::delete_namespace(&self.client, &ns, Duration::from_secs(60)).await;
        self.record_cleanup(format!("delete namespace {ns}"), r.map_err(|e| chain(&e)));
    }

    fn record_cleanup(&mut self, description: String, r: Result<(), String>) {
        let now = self.now();
        let outcome = match r {
            Ok(()) => StepOutcome::Ok,
            Err(e) => StepOutcome::Failed(e),
        };
        self.progress.log(&format!(
            "cleanup: {description}: {}",
            if outcome == StepOutcome::Ok {
                "ok".into()
            } else {
                format!("{outcome:?}")
            }
        ));
        self.cleanup.push(StepRecord {
            index: None,
            label: "cleanup".into(),
            kind: RecKind::Cleanup,
            description,
            started: now,
            ended: Some(now),
            outcome,
            notes: Vec::new(),
        });
    }

    fn finish(self, file: &str, verdict: RunVerdict, error: Option<String>) -> RunResult {
        self.progress.finish();
        let c = &self.plan.scenario;
        let transitions = self.rec.transitions();
        let finished = self.rec.now();
        let t0 = self.t0;
        let targets: Vec<String> = self.targets.values().cloned().collect();
        let metrics = t0
            .map(|t0| metrics::compute(&transitions, t0, &targets, finished, self.started_at))
            .unwrap_or_default();
        let mut expectations = self.expectations;
        // A window missed unseen: did it hold later, before cleanup began?
        let steps_end = self.steps_end.unwrap_or(finished);
        let before_cleanup: Vec<_> = transitions
            .iter()
            .filter(|t| t.at <= steps_end)
            .cloned()
            .collect();
        for late in &self.late {
            let e = &mut expectations[late.result];
            let series = expect::truth_series(
                &before_cleanup,
                &late.subject,
                &late.conditions,
                late.anchor,
            );
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
                    window_from: None,
                    window_to: None,
                    observed: None,
                    verdict: Verdict::NotRun,
                    detail: "the run stopped before this step".into(),
                    missed_by: None,
                });
            }
        }
        RunResult {
            schema_version: SCHEMA_VERSION,
            scenario: c.name.clone(),
            description: c.description.clone(),
            file: file.to_owned(),
            backend: self.plan.backend.to_string(),
            cluster_version: self.cluster_version,
            profile: self.plan.profile.clone(),
            namespace: c.namespace.clone(),
            targets: self.targets,
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
        }
    }
}

fn outcome<T, E: std::error::Error>(r: &Result<T, E>) -> StepOutcome {
    match r {
        Ok(_) => StepOutcome::Ok,
        Err(e) => StepOutcome::Failed(chain(e)),
    }
}

fn describe_conditions(conditions: &[Condition]) -> String {
    conditions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
