//! The runner's core without a cluster: a whole run of a scenario on an
//! in-memory API ([`fake_api`]), watched by the observer's own watchers over
//! it, faults through a backend that records them and plays the node
//! lifecycle controller's part (a node it stops goes `Unknown` and is tainted
//! after a grace period; put back, `Ready` again), on tokio's paused clock:
//! a run whose windows last minutes takes milliseconds.

mod fake_api;
mod runs;
mod sets;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;

use super::{Cluster, ClusterView, Context, Journal, Limits, Observing, Progress, RunOutcome};
use crate::backend::{Error as BackendError, NodeFaults};
use crate::files::Memory;
use crate::observe::{Observer, Recorder};
use crate::probe::{AnyFetch, Fetch, RequestOutcome};
use crate::profile::TimingProfile;
use crate::scenario::model::FaultKind;
use crate::shutdown::{Raise, Stop};
use fake_api::FakeApi;

/// What the fake backend did, in order, shared with the test.
type Log = Arc<Mutex<Vec<String>>>;

fn push(log: &Log, line: String) {
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(line);
}

/// When, during a fault's inject or revert, a signal arrives.
#[derive(Debug, Clone)]
pub(super) struct SignalAt {
    /// `inject pause-vm worker-1` or `revert resume-vm worker-1`.
    pub(super) during: String,
    pub(super) stop: Stop,
}

/// Records every inject and revert; a stopped node goes `Unknown` and is
/// tainted `grace` later (the node lifecycle controller's part), and comes
/// back `Ready` when reverted. Each act takes `act` (a VM's pause takes a
/// moment), during which a planned signal arrives.
struct FakeBackend {
    api: FakeApi,
    /// The workload is down: a node is paused (its pods' clients are refused).
    down: Arc<AtomicBool>,
    log: Log,
    grace: Duration,
    act: Duration,
    /// An inject or revert that fails (`inject pause-vm worker-1`).
    fail: Vec<String>,
    signal: Option<(SignalAt, Arc<Raise>)>,
    /// It can fork, so a set is hit at once (kind); else in turn (the sim).
    forks: bool,
    /// It makes a set's injects one batch itself (the sim's shared nodes;
    /// here the trait's default batch, one node after another).
    batches: bool,
}

impl FakeBackend {
    async fn act(&mut self, what: String) -> Result<(), BackendError> {
        push(&self.log, format!("{what}: begun"));
        if self
            .signal
            .as_ref()
            .is_some_and(|(at, _)| at.during == what)
            && let Some((at, raise)) = self.signal.take()
        {
            raise.raise(at.stop);
            // A signal arrives while the act runs; the act itself is not
            // cut short by it (a `virsh suspend` in flight completes).
            tokio::time::sleep(self.act).await;
        }
        tokio::time::sleep(self.act).await;
        if self.fail.contains(&what) {
            push(&self.log, format!("{what}: failed"));
            return Err(BackendError::Missing(format!("{what}: refused (planted)")));
        }
        push(&self.log, format!("{what}: done"));
        Ok(())
    }
}

impl NodeFaults for FakeBackend {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn fork(&self) -> Option<FakeBackend> {
        self.forks.then(|| FakeBackend {
            api: self.api.clone(),
            down: self.down.clone(),
            log: self.log.clone(),
            grace: self.grace,
            act: self.act,
            fail: self.fail.clone(),
            signal: self.signal.clone(),
            forks: false,
            batches: false,
        })
    }

    fn batches(&self, _nodes: &[String], _fault: FaultKind) -> bool {
        self.batches
    }

    fn join(&mut self, _node: &str, fork: FakeBackend) {
        // A signal raised by a fork is raised once.
        if fork.signal.is_none() {
            self.signal = None;
        }
    }

    fn describe(&self, node: &str, fault: FaultKind) -> String {
        format!("{} {node}", fault.name())
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), BackendError> {
        let verb = if fault.revert().is_some() {
            "inject"
        } else {
            "revert"
        };
        self.act(format!("{verb} {} {node}", fault.name())).await?;
        let path = format!("api/v1/nodes/{node}");
        self.down.store(fault.revert().is_some(), Ordering::SeqCst);
        if fault.revert().is_some() {
            // The controller's part: the node stops renewing, and after the
            // grace period it is Unknown and tainted.
            let (api, grace) = (self.api.clone(), self.grace);
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                api.patch(&path, &unreachable());
            });
        } else {
            self.api.patch(&path, &ready_node());
        }
        Ok(())
    }
}

/// The probes' way to the workload: refused while a node is down, else 200
/// after a millisecond.
struct Clients {
    down: Arc<AtomicBool>,
}

impl Fetch for Clients {
    async fn get(&self, _url: &http::Uri, _timeout: Duration) -> (RequestOutcome, Duration) {
        let took = Duration::from_millis(1);
        tokio::time::sleep(took).await;
        match self.down.load(Ordering::SeqCst) {
            true => (RequestOutcome::Refused, took),
            false => (RequestOutcome::Ok { status: 200 }, took),
        }
    }
}

/// A Ready node's status and no taints.
fn ready_node() -> serde_json::Value {
    json!({"spec": {"taints": null},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
}

fn unreachable() -> serde_json::Value {
    json!({"spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown",
            "reason": "NodeStatusUnknown"}]}})
}

/// The observer's watchers on the test's runtime, over the fake API.
struct Watching {
    client: kube::Client,
}

impl ClusterView for Watching {
    fn observe<'a>(
        &'a self,
        namespace: &'a str,
        rec: &'a Arc<Recorder>,
        reasons: &'a [String],
    ) -> Observing<'a> {
        let observer = Observer::on_this_runtime(&self.client, namespace, rec, reasons);
        Box::pin(async move { Ok(observer) })
    }
}

/// A run to make: the scenario, the cluster's nodes, and what goes wrong.
pub(super) struct Setup {
    pub(super) yaml: &'static str,
    pub(super) nodes: &'static [&'static str],
    pub(super) grace: Duration,
    pub(super) act: Duration,
    pub(super) fail: Vec<String>,
    pub(super) signal: Option<SignalAt>,
    pub(super) cleanup_deadline: Duration,
    /// The backend can fork: a set is hit at once, `parallel` at a time.
    pub(super) forks: bool,
    /// Without forks, it makes a set's injects one batch.
    pub(super) batches: bool,
    pub(super) parallel: usize,
    /// Manifests beside the scenario: (file name, text).
    pub(super) manifests: &'static [(&'static str, &'static str)],
}

impl Setup {
    pub(super) fn new(yaml: &'static str) -> Setup {
        Setup {
            yaml,
            nodes: &["control-plane", "worker-1", "worker-2"],
            grace: Duration::from_secs(8),
            act: Duration::from_millis(200),
            fail: Vec::new(),
            signal: None,
            cleanup_deadline: Duration::from_secs(180),
            forks: true,
            batches: false,
            parallel: Limits::default().set_parallelism,
            manifests: &[],
        }
    }
}

/// What a run did: its outcome, the backend's acts, the API's requests and
/// what the journal still holds.
pub(super) struct Ran {
    pub(super) outcome: RunOutcome,
    pub(super) acts: Vec<String>,
    pub(super) api: FakeApi,
    /// The journal's open entries after the run, in words.
    pub(super) open: Vec<String>,
    /// The journal's file could be closed (nothing open) or kept.
    pub(super) journal_closed: bool,
}

/// Runs `setup`'s scenario on the fake cluster, on paused time.
pub(super) async fn run(setup: Setup) -> Ran {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let files = Memory::default();
    let scenario = dir.path().join("scenario.yaml");
    files.put(&scenario, setup.yaml);
    for (name, text) in setup.manifests {
        // Validated through `files`, applied from the disk.
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("writing a manifest");
        files.put(path, *text);
    }
    let checked = crate::scenario::load(&files, &scenario)
        .unwrap_or_else(|e| panic!("the test's scenario: {e}"));
    let plan = crate::plan::resolve(checked, &TimingProfile::upstream_default(), None)
        .unwrap_or_else(|e| panic!("the test's plan: {e}"));
    let api = FakeApi::new();
    for n in setup.nodes {
        api.put(
            &format!("api/v1/nodes/{n}"),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n,
                "labels": {"kubernetes.io/hostname": n}}}),
        );
        api.patch(&format!("api/v1/nodes/{n}"), &ready_node());
    }
    let log = Log::default();
    let down = Arc::new(AtomicBool::new(false));
    let (raise, mut signals) = crate::shutdown::by_hand();
    let raise = Arc::new(raise);
    let mut backend = FakeBackend {
        api: api.clone(),
        down: down.clone(),
        log: log.clone(),
        grace: setup.grace,
        act: setup.act,
        fail: setup.fail,
        signal: setup.signal.map(|s| (s, raise.clone())),
        forks: setup.forks,
        batches: setup.batches,
    };
    let mut journal =
        Journal::create(dir.path(), super::journal::test_header("runner-test")).expect("a journal");
    let client = api.client();
    let cluster = Cluster {
        client: client.clone(),
        strict: client.clone(),
        view: Box::new(Watching { client }),
        clients: AnyFetch::new(Clients { down }),
    };
    let progress = Progress::quiet();
    let outcome = super::run(Context {
        plan: &plan,
        file: "scenario.yaml",
        cluster,
        backend: &mut backend,
        journal: &mut journal,
        signals: &mut signals,
        progress: &progress,
        limits: Limits {
            cleanup_deadline: setup.cleanup_deadline,
            set_parallelism: setup.parallel,
        },
    })
    .await;
    let open: Vec<String> = journal
        .state()
        .undo_order()
        .iter()
        .map(|p| p.undo.describe())
        .collect();
    let journal_closed = journal.close().is_ok();
    let acts = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
    Ran {
        outcome,
        acts,
        api,
        open,
        journal_closed,
    }
}
