//! One run of a scenario, as a session: the undo journal opened, the
//! cluster started (a throwaway sim) or inspected (an existing one: its
//! identity against the pins, its timings), the scenario run, the observer
//! checked against the sim's audit log, the cluster torn down or kept, the
//! reports written (elsewhere if they cannot go where asked) and the journal
//! closed. It returns what the run ended with and the exit code that says
//! so; the CLI only turns flags into a [`Resolved`] and prints.

use std::path::PathBuf;

use jiff::Timestamp;

use super::journal::{self, BackendRef, Header, KubeRef, Settled};
use super::{Cluster, Context, Journal, Limits, Progress, RunOutcome};
use crate::discover::inspect;
use crate::exit;
use crate::plan::{self, Plan};
use crate::profile::ProfileName;
use crate::record::{RunResult, RunVerdict};
use crate::scenario::{self, model::BackendKind};
use crate::shutdown::{self, Signals};
use crate::sim;

/// What a `nodefall scenario` invocation runs, and where: built from the
/// flags before any I/O on a cluster or machine.
#[derive(Debug)]
pub struct Resolved {
    pub checked: scenario::Checked,
    pub backend: BackendKind,
    pub on: On,
}

/// Where the runs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum On {
    Sim(SimTarget),
    /// An existing cluster whose nodes are machines, reached the way the
    /// undo journal records it (so `nodefall recover` reaches them too),
    /// through this kubeconfig file and context (None: KUBECONFIG or
    /// ~/.kube/config; its current context).
    Machines {
        backend: BackendRef,
        kube: KubeRef,
    },
}

/// A simulated cluster: the running one named `cluster`, else a throwaway
/// one of `nodes` nodes played by `shards` kwok processes (0: one kwok per
/// node), spread over `zones` (none: no zone label), kept afterwards with
/// `keep`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimTarget {
    pub cluster: Option<String>,
    pub nodes: usize,
    pub shards: usize,
    pub zones: Vec<String>,
    pub keep: bool,
}

mod lab;
pub(crate) mod reports;

use lab::{ClusterEnd, Lab, Started};
pub use reports::{ReportNotWritten, Written, write_or_fallback};
use reports::{close, conclude};

/// The run's file, where its reports go, and `--profile`.
#[derive(Debug, Clone)]
pub struct Request {
    pub file: PathBuf,
    pub out: PathBuf,
    /// Timings named on the command line (else the cluster's own, or the
    /// backend's default for a throwaway sim).
    pub profile: Option<ProfileName>,
}

/// Why a run could not be carried out (its own failures are in its result).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("installing signal handlers")]
    Signals(#[source] std::io::Error),
    #[error(transparent)]
    Sim(#[from] sim::Error),
    #[error("starting the simulated cluster")]
    SimUp(#[source] sim::Error),
    #[error("locating the nodefall executable (the cluster's reaper runs it)")]
    Exe(#[source] std::io::Error),
    #[error("starting the simulated cluster's volume provisioner")]
    Provisioner(#[source] sim::Error),
    #[error(transparent)]
    Inspect(#[from] inspect::Error),
    #[error(transparent)]
    Plan(#[from] scenario::Error),
    #[error(transparent)]
    Backend(#[from] crate::backend::Error),
    #[error("opening the undo journal")]
    JournalOpen(#[source] journal::Error),
    #[error(transparent)]
    Journal(#[from] journal::Error),
    #[error(transparent)]
    Reports(#[from] ReportNotWritten),
}

impl Error {
    /// The exit code it stands for: 2 when the input is at fault (the
    /// scenario, a flag, a pin, a cluster or node that does not exist),
    /// else 3. Nothing was injected either way.
    pub fn exit_code(&self) -> u8 {
        let bad_input = match self {
            Error::Sim(e) | Error::SimUp(e) => e.is_unknown_cluster(),
            Error::Inspect(e) => e.is_bad_input(),
            Error::Plan(_) => true,
            Error::Backend(e) => e.invalid_input(),
            _ => false,
        };
        if bad_input {
            exit::INVALID_INPUT
        } else {
            exit::INFRASTRUCTURE
        }
    }
}

/// The profile a throwaway cluster of `backend` starts with.
pub fn default_profile(backend: BackendKind) -> ProfileName {
    match backend {
        BackendKind::Sim => ProfileName::Fast,
        _ => ProfileName::Default,
    }
}

/// A multi-threaded runtime with every driver on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// How one run of a series differs from a run on its own.
#[derive(Debug, Default)]
pub struct Once {
    /// Its number in the series (names its throwaway cluster).
    pub run: Option<usize>,
    /// Its report directory (default: `<out>/<scenario>-<UTC start>`).
    pub dir: Option<PathBuf>,
    /// Cleanup in place of the scenario's (a series resets the namespace
    /// between runs on the same cluster).
    pub cleanup: Option<scenario::model::Cleanup>,
    /// The series' signal handlers (a signal that came between two runs
    /// stops the next one at once); default: the run installs its own.
    pub signals: Option<Signals>,
}

impl Once {
    /// The series' handlers, else new ones (inside the run's runtime).
    fn signals(&self) -> Result<Signals, Error> {
        match &self.signals {
            Some(s) => Ok(s.clone()),
            None => shutdown::install().map_err(Error::Signals),
        }
    }
}

/// What one run ended with: its exit code, its result and where its
/// reports are, and what it could not put back.
#[derive(Debug)]
pub struct Done {
    pub code: u8,
    pub result: RunResult,
    /// The report directory (the fallback one when the asked one failed).
    pub dir: PathBuf,
    /// Cleanup was cut short by a second signal or its deadline.
    pub abandoned: Option<String>,
    /// Changes still not reverted, in words (they stay in the journal).
    pub unreverted: Vec<String>,
    /// The run's undo journal.
    pub journal: PathBuf,
}

impl Done {
    /// Says what the run left: an abandoned cleanup, changes still in place
    /// (and how to revert them). After the verdict line.
    pub fn warn_leftovers(&self) {
        if let Some(why) = &self.abandoned {
            tracing::warn!("cleanup abandoned: {why}");
        }
        if !self.unreverted.is_empty() {
            tracing::warn!(
                "still not reverted: {}\n  journal: {}\n  run `nodefall recover` to revert it",
                self.unreverted.join(", "),
                self.journal.display()
            );
        }
    }
}

/// One run of the resolved scenario, on any backend: the lab's timings,
/// the plan, the journal (with a throwaway cluster in it first), the lab
/// started, the run, the lab ended, the reports.
pub fn run(req: &Request, resolved: &Resolved, once: &Once) -> Result<Done, Error> {
    let mut lab = Lab::new(&resolved.on, resolved.backend, once)?;
    let sim_target = match &resolved.on {
        On::Sim(t) => Some(t.clone()),
        On::Machines { .. } => None,
    };
    // Which cluster this is and its timings, before anything is touched.
    let rt = runtime().map_err(Error::Runtime)?;
    let (profile, config) = rt.block_on(lab.timings(req, &resolved.checked.pins))?;
    let mut plan = plan::resolve(resolved.checked.clone(), &profile, Some(lab.kind()))?;
    if let Some(c) = once.cleanup {
        plan.scenario.cleanup = c;
    }
    lab.open()?;
    let file = req.file.display().to_string();
    let (backend_ref, kube_ref) = lab.refs()?;
    let mut journal = Journal::create(
        &journal::default_dir(),
        header(&plan, &file, backend_ref.clone(), kube_ref),
    )
    .map_err(Error::JournalOpen)?;
    let cluster_entry = match lab.throwaway() {
        Some(undo) => Some(journal.will(undo)?),
        None => None,
    };
    let result = rt.block_on(async {
        let mut signals = once.signals()?;
        let progress = Progress::auto();
        let (config, mut backend) =
            match lab.start(config, &profile, &mut signals, &progress).await? {
                Started::Up(up) => *up,
                Started::Interrupted(stop) => {
                    let why = format!("interrupted by {stop} while starting the simulated cluster");
                    tracing::warn!("stopping: {why}");
                    let outcome = RunOutcome {
                        stopped_by: Some(stop),
                        ..RunOutcome::not_started(&plan, &file, &why, RunVerdict::Interrupted)
                    };
                    return Ok::<_, Error>((outcome, ClusterEnd::NeverUp));
                }
            };
        let mut outcome = match Cluster::connect(config) {
            Ok(cluster) => {
                super::run(Context {
                    plan: &plan,
                    file: &file,
                    cluster,
                    backend: &mut backend,
                    journal: &mut journal,
                    signals: &mut signals,
                    progress: &progress,
                    limits: Limits::default(),
                })
                .await
            }
            Err(e) => {
                let why = format!("building a kube client: {e}");
                RunOutcome::not_started(&plan, &file, &why, RunVerdict::Error)
            }
        };
        crate::memory::phase_done("the run, up to its result");
        let end = lab::end(
            backend,
            sim_target.as_ref(),
            &mut signals,
            &progress,
            &mut outcome,
        )
        .await;
        Ok((outcome, end))
    });
    let (mut outcome, end) = match result {
        Ok(r) => r,
        Err(e) => {
            // The cluster never came up (its start cleans up after itself).
            if let Some(id) = cluster_entry {
                journal.settle(id, Settled::Reverted).ok();
            }
            close(journal);
            return Err(e);
        }
    };
    crate::memory::phase_done("the lab's end (the audit check, the sim's teardown)");
    drop(rt);
    if let Some(id) = cluster_entry {
        match end {
            ClusterEnd::NeverUp | ClusterEnd::Gone => journal.settle(id, Settled::Reverted)?,
            ClusterEnd::Kept => journal.settle(id, Settled::Kept)?,
            ClusterEnd::Left => {
                if let BackendRef::Sim { cluster, .. } = &backend_ref {
                    outcome
                        .unreverted
                        .push(format!("tear down throwaway sim cluster {cluster}"));
                }
            }
        }
    }
    let done = conclude(&req.out, once, outcome, journal);
    crate::memory::phase_done("the reports");
    done
}

/// Unfinished journals of killed runs: their faults may still be in place.
/// A damaged journal is one of them (its run left it unfinished, and what
/// it changed cannot be read), named with what is wrong with it.
pub fn warn_unfinished() {
    let dir = journal::default_dir();
    let scan = match journal::unfinished(&dir) {
        Ok(scan) => scan,
        Err(e) => {
            tracing::warn!(
                "warning: cannot check for earlier runs killed before they could clean up: {}",
                crate::errors::chain(&e)
            );
            return;
        }
    };
    // A detached journal (`nodefall kind up`) is work left running on purpose.
    let dead: Vec<_> = scan.runs.iter().filter(|u| u.abandoned()).collect();
    if dead.is_empty() && scan.damaged.is_empty() {
        return;
    }
    tracing::warn!(
        "warning: {} earlier run(s) were killed before they could clean up:",
        dead.len() + scan.damaged.len()
    );
    for u in dead {
        let what: Vec<String> = u
            .state
            .undo_order()
            .iter()
            .map(|p| p.undo.describe())
            .collect();
        tracing::warn!(
            "  {}: still to undo: {}",
            u.path.display(),
            if what.is_empty() {
                "nothing".into()
            } else {
                what.join(", ")
            }
        );
    }
    for e in &scan.damaged {
        tracing::warn!(
            "  damaged {}: what its run left cannot be read",
            crate::errors::chain(e)
        );
    }
    tracing::warn!("  run `nodefall recover` to revert what they left");
}

fn header(plan: &Plan, file: &str, backend: BackendRef, kube: KubeRef) -> Header {
    let started_at = Timestamp::now();
    // Unreadable only without /proc, where nothing else here works either.
    let (pid, pid_start) = crate::sim::process::current().unwrap_or((0, 0));
    Header {
        run: journal::run_id(&plan.scenario.name, started_at),
        pid,
        pid_start,
        started_at,
        scenario: plan.scenario.name.clone(),
        file: file.to_owned(),
        namespace: plan.scenario.namespace.clone(),
        cleanup: plan.scenario.cleanup,
        backend,
        kube,
    }
}

/// The discovery's remarks, before the run begins.
fn tell(notes: &[String]) {
    for n in notes {
        tracing::info!("timing: {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_error_stands_for_bad_input_only_when_the_input_is_at_fault() {
        let no_cluster = || sim::Error::NoCluster {
            name: "gone".into(),
            root: "/tmp/x".into(),
            known: Vec::new(),
        };
        assert_eq!(Error::Sim(no_cluster()).exit_code(), exit::INVALID_INPUT);
        assert_eq!(Error::SimUp(no_cluster()).exit_code(), exit::INVALID_INPUT);
        let unknown = crate::backend::Error::UnknownNode {
            node: "worker-9".into(),
            what: "kind cluster's node containers",
            known: vec!["worker-1".into()],
        };
        assert_eq!(Error::Backend(unknown).exit_code(), exit::INVALID_INPUT);
        let io = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(Error::Runtime(io()).exit_code(), exit::INFRASTRUCTURE);
        assert_eq!(Error::Exe(io()).exit_code(), exit::INFRASTRUCTURE);
    }
}
