//! What a run works with besides its plan, in one place: the cluster (its
//! API, and the view that records its objects), the fault backend, the undo
//! journal, the signals, where progress goes and the run's limits.
//!
//! The cluster is a seam: a real one is reached through a kubeconfig and
//! watched by the [`Observer`]'s watchers on their own thread; the runner's
//! own tests give it an in-memory API watched by the same watchers on the
//! test's runtime, and move the whole run on tokio's paused clock (the
//! clock the [`crate::observe::Recorder`] reads).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::observe::{Observer, Recorder};
use crate::plan::Plan;
use crate::probe::{AnyFetch, Http};
use crate::shutdown::Signals;

use super::journal::Journal;
use super::progress::Progress;

/// Everything [`super::run`] needs.
pub struct Context<'a, B> {
    pub plan: &'a Plan,
    /// The scenario file, as the result names it.
    pub file: &'a str,
    pub cluster: Cluster,
    pub backend: &'a mut B,
    /// Every change is journaled here before it is made.
    pub journal: &'a mut Journal,
    pub signals: &'a mut Signals,
    pub progress: &'a Progress,
    pub limits: Limits,
}

impl<B> std::fmt::Debug for Context<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("file", &self.file)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Limits of a run: its cleanup, its faults on sets.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Cleanup as a whole must end within this; what is left stays in the
    /// journal for `nodefall recover`.
    pub cleanup_deadline: Duration,
    /// How many nodes of a set a fault hits at a time, on a backend that
    /// can hit them at once.
    pub set_parallelism: usize,
}

/// A fault on a set hits at most this many nodes at a time, so a set of
/// hundreds does not start hundreds of `docker` processes or libvirt calls
/// at once.
pub const SET_PARALLELISM: usize = 16;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            cleanup_deadline: Duration::from_secs(180),
            set_parallelism: SET_PARALLELISM,
        }
    }
}

/// The cluster as a run reaches it.
pub struct Cluster {
    /// The API, with the client's own retries.
    pub client: kube::Client,
    /// The same API without them: evictions need every 429 seen.
    pub strict: kube::Client,
    /// Records the cluster's objects as they change.
    pub view: Box<dyn ClusterView>,
    /// How the run's `probe:` clients reach the workload (HTTP from this
    /// host).
    pub clients: AnyFetch,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

impl Cluster {
    /// A cluster reached through `config`, watched by the observer.
    pub fn connect(config: kube::Config) -> Result<Cluster, kube::Error> {
        let client = kube::Client::try_from(config.clone())?;
        let mut strict_config = config.clone();
        strict_config.default_retry = false;
        let strict = kube::Client::try_from(strict_config)?;
        Ok(Cluster {
            client,
            strict,
            view: Box::new(Watchers { config }),
            clients: AnyFetch::new(Http),
        })
    }
}

/// What [`ClusterView::observe`] returns.
pub type Observing<'a> = Pin<Box<dyn Future<Output = Result<Observer, ObserveError>> + Send + 'a>>;
type ObserveError = crate::observe::Error;

/// Starts recording the cluster's Nodes, the namespace's Pods and the rest
/// of what a run watches into `rec`, until the returned observer is dropped.
pub trait ClusterView: Send + Sync {
    fn observe<'a>(
        &'a self,
        namespace: &'a str,
        rec: &'a Arc<Recorder>,
        reasons: &'a [String],
    ) -> Observing<'a>;
}

/// The API's watchers, on a thread and runtime of their own.
struct Watchers {
    /// The observer builds its own client from it, on its own runtime.
    config: kube::Config,
}

impl ClusterView for Watchers {
    fn observe<'a>(
        &'a self,
        namespace: &'a str,
        rec: &'a Arc<Recorder>,
        reasons: &'a [String],
    ) -> Observing<'a> {
        Box::pin(Observer::start_with_reasons(
            &self.config,
            namespace,
            rec,
            reasons,
        ))
    }
}
