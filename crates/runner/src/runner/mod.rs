//! Runs a plan against a cluster: setup, preflight (targets and what the
//! cluster already holds), the steps in order (faults through the backend,
//! actions through kube-rs, expectations decided on the observed timeline),
//! then cleanup, which always runs: on success, on error and on SIGINT,
//! SIGTERM or SIGHUP. Every change is journaled before it is made
//! ([`journal`]), and cleanup undoes exactly what the journal holds.
//!
//! Units: [`preflight`] (targets, namespaces, objects that exist already),
//! [`fault`] (a fault step, on a node or a set), [`dispatch`] (actions),
//! [`expectation`] (deciding windows), [`guard`] (`abortIf` guards, watched
//! beside the steps), [`cleanup`]
//! and [`undo`] (reverting, shared with `nodefall recover`), [`finish`] (the
//! result).

mod cleanup;
mod context;
mod dispatch;
mod expectation;
mod fault;
mod finish;
mod guard;
pub mod journal;
mod preflight;
mod probes;
pub mod progress;
pub mod session;
mod setup;
#[cfg(test)]
mod tests;
pub mod undo;
mod wait;
mod witness;
mod zones;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use jiff::Timestamp;

pub use context::{Cluster, ClusterView, Context, Limits, Observing};
pub use finish::failed_to_start;
pub use journal::Journal;
pub use progress::Progress;

use crate::actions;
use crate::backend::{self, NodeFaults};
use crate::errors::chain;
use crate::observe::{Observer, Recorder};
use crate::plan::Plan;
use crate::record::{
    ExpectationResult, RunResult, RunVerdict, StepKind as RecKind, StepOutcome, StepRecord,
};
use crate::scenario::checked::{Action, StepKind};
use crate::scenario::model::FaultKind;
use crate::shutdown::Stop;
use crate::timeline::Ms;

use journal::Undo;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("setup failed")]
    Setup(#[source] Box<actions::Error>),
    #[error("the observer did not start")]
    Observer(#[from] crate::observe::Error),
    #[error("{0}")]
    Target(String),
    /// The scenario names something the cluster does not have, or would
    /// change something the run did not create (checked before any fault):
    /// bad input, not a cluster failure.
    #[error("{0}; nothing was injected")]
    Preflight(String),
    #[error(transparent)]
    Fault(#[from] Box<backend::Error>),
    /// A fault on a set of nodes failed on one of them: no more of them
    /// were begun, and cleanup reverts every one journaled.
    #[error("{fault} on node {node} of set `{target}`")]
    SetFault {
        target: String,
        node: String,
        fault: FaultKind,
        #[source]
        source: Box<backend::Error>,
    },
    #[error("step {step} failed")]
    Action {
        step: String,
        #[source]
        source: Box<actions::Error>,
    },
    #[error("wait {step}: condition not reached within {}", crate::duration::format_millis(*.after))]
    WaitTimeout { step: String, after: Ms },
    /// The journal could not record a change, so the change was not made.
    #[error("cannot journal the next change, so it was not made")]
    Journal(#[source] journal::Error),
    #[error("interrupted by {0}")]
    Interrupted(Stop),
    #[error(transparent)]
    Probe(#[from] crate::probe::Error),
    /// An `abortIf` guard held long enough: the steps stopped, the run
    /// restores and fails (an outcome of the experiment, not of the tooling).
    #[error("abort guard `{guard}` fired at {when}: {what}")]
    Aborted {
        guard: String,
        when: String,
        what: String,
    },
}

impl From<journal::Error> for Error {
    fn from(e: journal::Error) -> Error {
        Error::Journal(e)
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub result: RunResult,
    /// It stopped before any fault because the scenario names something the
    /// cluster does not have (exit code 2, not 3).
    pub invalid_input: bool,
    /// The signal that stopped it, if one did.
    pub stopped_by: Option<Stop>,
    /// Changes that are still not reverted (a revert failed, or cleanup was
    /// abandoned), in words; they stay in the journal.
    pub unreverted: Vec<String>,
    /// Cleanup was cut short by a second signal or its deadline.
    pub abandoned: Option<String>,
}

/// Runs the whole scenario and returns its result; cleanup is never skipped
/// unless a second signal or the cleanup deadline cuts it short.
pub async fn run<B: NodeFaults>(ctx: Context<'_, B>) -> RunOutcome {
    let Context {
        plan,
        file,
        cluster,
        backend,
        journal,
        signals,
        progress,
        limits,
    } = ctx;
    // Taken together: `at` (ms since `start`) + `started_at` is the wall
    // clock of a transition, compared with the audit log's.
    let (start, started_at) = (tokio::time::Instant::now(), Timestamp::now());
    let mut run = Run {
        plan,
        client: cluster.client,
        strict: cluster.strict,
        view: cluster.view,
        clients: cluster.clients,
        rec: Recorder::new(start),
        started_at,
        cluster_version: None,
        targets: BTreeMap::new(),
        sets: BTreeMap::new(),
        steps: Vec::new(),
        expectations: Vec::new(),
        cleanup: Vec::new(),
        anchors: HashMap::new(),
        setup_end: 0,
        t0: None,
        journal,
        parallel: limits.set_parallelism,
        manifests: Vec::new(),
        applied: BTreeSet::new(),
        observer: None,
        observed_from: None,
        progress,
        late: Vec::new(),
        steps_end: None,
        gns: Vec::new(),
        guard_records: guard::records(&plan.scenario.guards, &plan.guard_holds),
        aborted: None,
        probes: Vec::new(),
        probes_settled: None,
        probe_records: Vec::new(),
        zone_plan: None,
        deferred: Vec::new(),
        witness: None,
        machines: Vec::new(),
        end_checks: Vec::new(),
    };
    let outcome = tokio::select! {
        r = run.execute(backend) => r,
        stop = signals.next() => Err(Error::Interrupted(stop)),
    };
    let error = outcome.err();
    if let Some(e) = &error {
        progress.log(&format!("stopping: {}", chain(e)));
    }
    let mut stopped_by = match &error {
        Some(Error::Interrupted(s)) => Some(*s),
        _ => None,
    };
    run.steps_end = Some(run.now());
    run.stop_probes().await;
    // Cleanup: a first signal arriving now only changes the verdict; a
    // second one (or the deadline) abandons it.
    let mut abandoned = None;
    let failed = run
        .expectations
        .iter()
        .any(|e| e.verdict == crate::record::Verdict::Fail);
    let verdict = verdict_of(error.as_ref(), failed);
    {
        let restore = run.restore(backend, verdict);
        tokio::pin!(restore);
        let deadline = tokio::time::sleep(limits.cleanup_deadline);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut restore => break,
                stop = signals.next() => {
                    if stopped_by.is_none() {
                        stopped_by = Some(stop);
                        progress.log(&format!("{stop} during cleanup: finishing cleanup first (send it again to abandon it)"));
                    } else {
                        abandoned = Some(format!("{stop} received again during cleanup"));
                        break;
                    }
                }
                () = &mut deadline => {
                    abandoned = Some(format!(
                        "cleanup did not finish within its deadline of {}s",
                        limits.cleanup_deadline.as_secs()
                    ));
                    break;
                }
            }
        }
    }
    if let Some(w) = run.witness.take() {
        run.machines = w.stop().await;
    }
    let unreverted: Vec<String> = run
        .journal
        .state()
        .undo_order()
        .iter()
        .filter(|p| !matches!(p.undo, Undo::Cluster { .. }))
        .map(|p| p.undo.describe())
        .collect();
    if let Some(why) = &abandoned {
        progress.log(&format!("cleanup abandoned: {why}"));
    }
    // A signal during cleanup makes the run an interrupted one too.
    let verdict = match stopped_by {
        Some(_) => RunVerdict::Interrupted,
        None => verdict,
    };
    let invalid_input = matches!(error, Some(Error::Preflight(_)));
    let message = match (&error, stopped_by) {
        (Some(e), _) => Some(chain(e)),
        (None, Some(s)) => Some(format!("interrupted by {s} during cleanup")),
        (None, None) => None,
    };
    RunOutcome {
        result: run.finish(file, verdict, message),
        invalid_input,
        stopped_by,
        unreverted,
        abandoned,
    }
}

impl RunOutcome {
    /// A run that never began (no client, a cluster that did not start):
    /// nothing was changed, so nothing is left to revert.
    pub fn not_started(plan: &Plan, file: &str, why: &str, verdict: RunVerdict) -> RunOutcome {
        RunOutcome {
            result: failed_to_start(plan, file, why, verdict),
            invalid_input: false,
            stopped_by: None,
            unreverted: Vec::new(),
            abandoned: None,
        }
    }
}

fn verdict_of(error: Option<&Error>, failed: bool) -> RunVerdict {
    match error {
        Some(Error::Interrupted(_)) => RunVerdict::Interrupted,
        // The experiment stopped itself: a failed run, not a broken one.
        Some(Error::Aborted { .. }) => RunVerdict::Fail,
        Some(_) => RunVerdict::Error,
        None if failed => RunVerdict::Fail,
        None => RunVerdict::Pass,
    }
}

struct Run<'a> {
    plan: &'a Plan,
    client: kube::Client,
    /// The same API without the client's automatic retries (evictions).
    strict: kube::Client,
    /// Records the cluster's objects (the observer's watchers).
    view: Box<dyn ClusterView>,
    /// How the probes reach the workload.
    clients: crate::probe::AnyFetch,
    rec: Arc<Recorder>,
    started_at: Timestamp,
    cluster_version: Option<String>,
    targets: BTreeMap<String, String>,
    /// The targets that are sets of nodes, each with its nodes by name.
    sets: BTreeMap<String, Vec<String>>,
    steps: Vec<StepRecord>,
    expectations: Vec<ExpectationResult>,
    cleanup: Vec<StepRecord>,
    /// Step index -> its anchor time (faults/actions: start; waits: end;
    /// expectations: when the condition first held).
    anchors: HashMap<usize, Ms>,
    setup_end: Ms,
    t0: Option<Ms>,
    /// Every change, journaled before it is made; cleanup undoes what it holds.
    journal: &'a mut Journal,
    /// How many nodes of a set a fault hits at a time.
    parallel: usize,
    /// Every object the scenario applies, resolved once at preflight.
    manifests: Vec<actions::ManifestObject>,
    /// Objects this run created: (kind, namespace, name).
    applied: BTreeSet<(String, Option<String>, String)>,
    observer: Option<Observer>,
    /// When the observer had listed everything once (ms since start).
    observed_from: Option<Ms>,
    progress: &'a Progress,
    /// Expectations that failed unseen: looked at again over the whole run
    /// at the end, to report when (and so by how much) they did hold.
    late: Vec<expectation::Late>,
    /// When the steps ended and cleanup began.
    steps_end: Option<Ms>,
    /// The graceful-shutdown preflight, one report per node a `shutdown`
    /// fault hits, in scenario order.
    gns: Vec<crate::gns::NodeReport>,
    /// The `abortIf` guards, each with when it fired.
    guard_records: Vec<crate::record::GuardRecord>,
    /// The guard that stopped the steps, if one did.
    aborted: Option<crate::record::AbortRecord>,
    /// The `probe:` probes, sending from the end of setup to the end of the steps.
    probes: Vec<crate::probe::Running>,
    /// When every probe had settled (the first step began): their requests
    /// before it are their baseline.
    probes_settled: Option<Ms>,
    /// What they recorded, once stopped.
    probe_records: Vec<crate::probe::ProbeRecord>,
    /// The zones' forecast, when the faults break more than one node.
    zone_plan: Option<zones::ZonePlan>,
    /// Probe expectations reached, decided when the probes stop.
    deferred: Vec<probes::Deferred>,
    /// Looks at the faulted nodes' machines from preflight to the end of
    /// cleanup, where the backend can.
    witness: Option<witness::Witness>,
    /// What it saw, once stopped.
    machines: Vec<crate::record::machines::MachineTrack>,
    /// Expectations decided at the end of the run (`duplicateWindow`,
    /// `fencedBefore`, `remediation`): where their results are.
    end_checks: Vec<(usize, crate::scenario::checked::Expectation)>,
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
            commands: Vec::new(),
            evictions: Vec::new(),
            fault: None,
        });
        self.steps.len() - 1
    }

    fn end(&mut self, slot: usize, outcome: StepOutcome) {
        let now = self.now();
        let step = &mut self.steps[slot];
        step.ended = Some(now);
        step.outcome = outcome;
    }

    fn note(&mut self, text: &str) {
        let now = self.now();
        self.progress.log(&format!("  {text}"));
        if let Some(step) = self.steps.last_mut() {
            step.notes.push((now, text.to_owned()));
        }
    }

    fn node(&self, target: &str) -> Result<String, Error> {
        self.targets
            .get(target)
            .cloned()
            .ok_or_else(|| Error::Target(format!("target `{target}` was not resolved")))
    }

    /// The nodes a fault on `target` hits: a set's, or the one node.
    fn nodes_of(&self, target: &str) -> Result<Vec<String>, Error> {
        match self.sets.get(target) {
            Some(nodes) => Ok(nodes.clone()),
            None => self.node(target).map(|n| vec![n]),
        }
    }

    async fn execute<B: NodeFaults>(&mut self, backend: &mut B) -> Result<(), Error> {
        let c = &self.plan.scenario;
        let ns = c.namespace.clone();
        self.cluster_version = actions::server_version(&self.client).await.ok();

        // Nothing in the cluster changes before the objects the scenario
        // applies are known not to exist already.
        self.check_objects(&ns).await?;

        let slot = self.begin(
            None,
            "setup".into(),
            RecKind::Setup,
            format!("namespace {ns}, apply, wait ready"),
        );
        let result = self.setup(&ns).await;
        self.end(slot, outcome(&result));
        result?;
        // Clients from now on: the preflight's time is the probes' to settle.
        self.start_probes()?;

        let nodes = self.resolve_targets().await?;
        self.resolve_machines(backend, &nodes).await?;
        self.check_drains(&nodes)?;
        self.forecast_zones(&nodes);
        // Not kept through the steps (a thousand Nodes).
        drop(nodes);
        self.check_namespaces().await?;
        self.graceful_shutdown_preflight(backend).await;
        self.start_witness(backend)?;
        self.settle_probes().await?;
        self.setup_end = self.now();

        // The guards watch while the steps run; the first to fire drops the
        // step in progress (as a signal does) and the run restores.
        let armed = self.arm_guards()?;
        let watcher = guard::watch(self.rec.clone(), armed, self.setup_end);
        let fired = tokio::select! {
            r = self.steps(backend, &ns) => {
                r?;
                None
            }
            fired = watcher => Some(fired),
        };
        match fired {
            Some(f) => Err(self.aborted_by(f)),
            None => Ok(()),
        }
    }

    /// Starts the witness on the nodes the faults hit, where the backend
    /// can look at their machines.
    fn start_witness<B: NodeFaults>(&mut self, backend: &B) -> Result<(), Error> {
        let mut nodes = Vec::new();
        for step in &self.plan.scenario.steps {
            if let StepKind::Fault { node, .. } = &step.kind {
                for name in self.nodes_of(node)? {
                    if !nodes.contains(&name) {
                        nodes.push(name);
                    }
                }
            }
        }
        if let (Some(eyes), false) = (backend.eyes(), nodes.is_empty()) {
            for other in eyes.others() {
                if !nodes.contains(&other) {
                    nodes.push(other);
                }
            }
            self.progress.log(&format!(
                "witness: {} ({})",
                nodes.iter().map(|n| eyes.how(n)).next().unwrap_or_default(),
                nodes.join(", ")
            ));
            self.witness = Some(witness::Witness::start(
                eyes,
                nodes,
                self.plan.scenario.namespace.clone(),
                self.rec.clone(),
                witness::EVERY,
            ));
        }
        Ok(())
    }

    /// The scenario's steps, in order.
    async fn steps<B: NodeFaults>(&mut self, backend: &mut B, ns: &str) -> Result<(), Error> {
        let c = &self.plan.scenario;
        for step in &c.steps {
            crate::testpoint::reached(|| format!("step-{}", step.index + 1)).await;
            let label = step.label();
            match &step.kind {
                StepKind::Fault { fault, node } => {
                    self.fault(backend, step.index, label, node, *fault).await?;
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
                    let r = self.action(step.index, &label, action, ns).await;
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
        crate::testpoint::reached(|| "steps-end".to_owned()).await;
        Ok(())
    }
}

fn journal_failed(e: journal::Error) -> actions::Error {
    actions::Error::Watch(format!("the undo journal: {}", chain(&e)))
}

fn outcome<T, E: std::error::Error>(r: &Result<T, E>) -> StepOutcome {
    match r {
        Ok(_) => StepOutcome::Ok,
        Err(e) => StepOutcome::Failed(chain(e)),
    }
}
