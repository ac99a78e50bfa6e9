//! A simulated cluster: its options, its handle ([`SimCluster`]), opening a
//! running one and taking it down. Bring-up is in `up.rs`, node faults in
//! `faults.rs`, readiness waits in `waits.rs`, the control plane's command
//! lines in `args.rs`.
//!
//! The control plane is real (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler); each node is played by its own kwok process
//! (`--manage-single-node`), so one node can fail alone: freezing, killing or
//! stopping that process is, for the control plane, a node whose kubelet
//! stopped posting status.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::Error;
use super::kubelet;
use super::process::{self, Proc, ProcRecord};
use super::state::{self, Layout, SimNode, State};
use super::teardown::{self, STOP_GRACE};
use crate::profile::TimingProfile;

/// How long an invocation waits for another to release a cluster's state
/// lock (held for a node operation or a teardown).
const LOCK_WAIT: Duration = Duration::from_secs(180);

#[derive(Debug, Clone)]
pub struct UpOptions {
    pub name: String,
    /// Nodes played by kwok; 0 gives a bare control plane (nodes come from
    /// elsewhere, e.g. containers in the kind backend's tests).
    pub nodes: usize,
    pub profile: TimingProfile,
    /// Directory holding one directory per cluster.
    pub root: PathBuf,
    /// Limit for the whole bring-up, nodes Ready included.
    pub timeout: Duration,
    /// The nodefall executable the cluster's helpers run: its reaper (`sim
    /// reap`), which takes the cluster down if this process dies without
    /// doing so (see `reaper.rs`; `detach` stops it), and its kubelets'
    /// volume managers (`sim kubelet-volumes`, `volume_agent.rs`), one of its
    /// components. None: no reaper, and the volume managers run as a task of
    /// this process while the cluster value lives.
    pub exe: Option<PathBuf>,
    /// Shared kwok processes playing the nodes; 0: one kwok per node (see
    /// `agents.rs`).
    pub shards: usize,
    /// Appended to kube-apiserver's flags (tests: e.g. an egress selector
    /// that sends the node proxy's traffic through a loopback proxy).
    pub extra_apiserver_args: Vec<String>,
    /// How long a powered-on node takes to boot to its first status.
    pub node_boot: Duration,
    /// The kubelets' PLEG relist threshold: a node resumed after a longer
    /// pause reports NotReady first. The kubelet's is 3 min; tests shorten it.
    pub pleg_threshold: Duration,
    /// The kubelets' graceful node shutdown (off by default, as Kubernetes
    /// has it).
    pub shutdown_grace: kubelet::ShutdownGrace,
    /// Zones the nodes are spread over, round-robin (none: no zone label).
    pub zones: Vec<String>,
    /// One more node, standing for a kind cluster's control plane
    /// ([`agents::control_plane_node`](super::agents::control_plane_node)).
    pub control_plane_node: bool,
}

impl UpOptions {
    pub fn new(name: impl Into<String>, profile: TimingProfile) -> UpOptions {
        UpOptions {
            name: name.into(),
            nodes: 3,
            shards: 0,
            profile,
            root: state::default_root(),
            timeout: Duration::from_secs(120),
            exe: None,
            extra_apiserver_args: Vec::new(),
            node_boot: kubelet::DEFAULT_BOOT,
            pleg_threshold: kubelet::PLEG_RELIST_THRESHOLD,
            shutdown_grace: kubelet::ShutdownGrace::default(),
            zones: Vec::new(),
            control_plane_node: false,
        }
    }
}

/// A simulated cluster, started by this process or opened from its state.
///
/// A cluster this process started is torn down when dropped (also on panic
/// and when a Ctrl-C drops the future that owns it), unless [`detach`]ed.
///
/// [`detach`]: SimCluster::detach
#[derive(Debug)]
pub struct SimCluster {
    pub(super) layout: Layout,
    pub(super) state: State,
    pub(super) procs: BTreeMap<String, Proc>,
    /// The reaper process, when there is one (kept apart from `procs`: it is
    /// not part of the cluster and stops last).
    pub(super) reaper: Option<Proc>,
    pub(super) teardown_on_drop: bool,
    /// The exclusive lock on `state.lock` taken by [`open_exclusive`],
    /// released when this value is dropped.
    ///
    /// [`open_exclusive`]: SimCluster::open_exclusive
    pub(super) lock: Option<std::fs::File>,
    /// The kubelets' volume managers when they run in this process (a
    /// cluster started without [`UpOptions::exe`]): stopped with this value.
    pub(super) volume_task: Option<tokio::task::AbortHandle>,
    /// The client its faults use, given by a run for as long as it lasts
    /// (on that run's runtime); None: each fault makes its own.
    pub(super) shared_client: Option<SharedClient>,
}

/// A client given to the faults ([`SimCluster::share_client`]).
pub(super) struct SharedClient(kube::Client);

impl std::fmt::Debug for SharedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedClient")
    }
}

/// Progress messages of a bring-up, for the CLI to print.
pub type Progress<'a> = &'a mut (dyn FnMut(&str) + Send);

impl SimCluster {
    /// Opens a running cluster recorded under `root`.
    pub fn open(root: &Path, name: &str) -> Result<SimCluster, Error> {
        let layout = Layout::new(root, name)?;
        if !layout.state().is_file() {
            return Err(Error::NoCluster {
                name: name.to_owned(),
                root: root.to_owned(),
                known: state::list(root),
            });
        }
        let state = State::load(&layout.state())?;
        let reaper = state.reaper.clone().map(Proc::adopt);
        let procs = teardown::adopt_recorded(&state);
        Ok(SimCluster {
            layout,
            state,
            procs,
            reaper,
            teardown_on_drop: false,
            lock: None,
            volume_task: None,
            shared_client: None,
        })
    }

    /// Opens a running cluster like [`open`], holding an exclusive lock on
    /// its `state.lock` until the value is dropped. Each invocation saves
    /// the whole `state.json` it read, so two that change the same cluster
    /// at once (e.g. `sim node` on two nodes in parallel) would lose one's
    /// change; with the lock they take turns, and each reads the state the
    /// one before it left. `waiting` is called once when another invocation
    /// holds the lock. Invocations that use [`open`] (a scenario run with
    /// `--cluster`, `recover`) do not take the lock.
    ///
    /// [`open`]: SimCluster::open
    pub fn open_exclusive(
        root: &Path,
        name: &str,
        waiting: impl FnOnce(),
    ) -> Result<SimCluster, Error> {
        let layout = Layout::new(root, name)?;
        let no_cluster = || Error::NoCluster {
            name: name.to_owned(),
            root: root.to_owned(),
            known: state::list(root),
        };
        if !layout.state().is_file() {
            return Err(no_cluster());
        }
        let path = layout.lock();
        let file = match std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
        {
            Ok(f) => f,
            // Taken down (its directory removed) since the check above.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(no_cluster()),
            Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
        };
        // Held for one node operation or a teardown: bounded, polled (a
        // file lock has nothing to watch).
        let deadline = Instant::now() + LOCK_WAIT;
        let mut waiting = Some(waiting);
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    if let Some(w) = waiting.take() {
                        w();
                    }
                    if Instant::now() >= deadline {
                        return Err(Error::io_msg(format!(
                            "another nodefall has held {} for more than {}s; is a `sim down` \
                             or `sim node` of this cluster stuck?",
                            path.display(),
                            LOCK_WAIT.as_secs()
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(Error::io(format!("locking {}", path.display()), e));
                }
            }
        }
        // Read only now: the state the previous holder left (or none, when
        // it was `sim down`).
        let mut cluster = SimCluster::open(root, name)?;
        cluster.lock = Some(file);
        Ok(cluster)
    }

    /// Keeps the cluster running after this value is dropped. A cluster this
    /// process started is marked kept and loses its reaper: the mark is saved
    /// first (a reaper that somehow outlived its stop still leaves on seeing
    /// it), then the reaper is stopped. A cluster only opened here keeps
    /// whatever reaper its owner runs.
    pub fn detach(&mut self) {
        if self.teardown_on_drop {
            self.state.kept = true;
            self.state.reaper = None;
            // Only a failed write of state.json can fail here, and the
            // reaper is stopped below anyway; not worth failing the run.
            let _ = self.save();
            if let Some(mut reaper) = self.reaper.take() {
                reaper.stop(STOP_GRACE);
            }
        }
        self.teardown_on_drop = false;
    }

    /// The reaper's record and whether it runs, if one is recorded.
    pub fn reaper(&mut self) -> Option<(ProcRecord, bool)> {
        self.reaper.as_mut().map(|p| {
            let alive = p.is_alive();
            (p.record.clone(), alive)
        })
    }

    pub fn name(&self) -> &str {
        &self.state.name
    }
    pub fn state(&self) -> &State {
        &self.state
    }
    pub fn dir(&self) -> &Path {
        &self.layout.dir
    }
    /// The API server's audit log (clusters started before nodefall wrote
    /// one have none).
    pub fn audit_log_path(&self) -> PathBuf {
        self.layout.audit_log()
    }
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.layout.kubeconfig()
    }
    pub fn node_names(&self) -> Vec<String> {
        self.state.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// A kube client for this cluster.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        match &self.shared_client {
            Some(SharedClient(client)) => Ok(client.clone()),
            None => client_for(&self.layout.kubeconfig()).await,
        }
    }

    /// Gives the faults a client to share (a run's, on the run's runtime:
    /// a fault then costs no client of its own, with its TLS handshake,
    /// which on a set of 100 nodes was most of the time each node took), or
    /// takes it back (None) when the run ends.
    pub fn share_client(&mut self, client: Option<kube::Client>) {
        self.shared_client = client.map(SharedClient);
    }

    /// The client configuration (for clients with other settings).
    pub async fn config(&self) -> Result<kube::Config, Error> {
        config_for(&self.layout.kubeconfig()).await
    }

    /// Every recorded process with whether it still runs.
    pub fn health(&mut self) -> Vec<(ProcRecord, bool)> {
        self.procs
            .values_mut()
            .map(|p| {
                let alive = p.is_alive();
                (p.record.clone(), alive)
            })
            .collect()
    }

    /// Resident memory of all processes of the cluster, in bytes.
    pub fn rss_bytes(&mut self) -> u64 {
        self.procs
            .values_mut()
            .filter_map(|p| {
                p.is_alive()
                    .then(|| process::rss_bytes(p.record.pid))
                    .flatten()
            })
            .sum()
    }

    /// Restarts a control-plane component with the same arguments (for tests
    /// of what survives an API server restart). Waits for `/readyz` when it
    /// is the API server.
    pub async fn restart_component(&mut self, name: &str) -> Result<(), Error> {
        let pos = self
            .state
            .components
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| {
                Error::io_msg(format!(
                    "no component `{name}` in cluster `{}`",
                    self.state.name
                ))
            })?;
        let record = self.state.components[pos].clone();
        if let Some(mut old) = self.procs.remove(name) {
            old.stop(STOP_GRACE);
        }
        let proc = Proc::spawn(name, &record.program, &record.args, &record.log)?;
        self.state.components[pos] = proc.record.clone();
        self.procs.insert(name.to_owned(), proc);
        self.save()?;
        if name == "kube-apiserver" {
            let client = self.client().await?;
            self.wait_apiserver_ready(&client, Duration::from_secs(60))
                .await?;
        }
        Ok(())
    }

    /// Stops every process of the cluster and removes its directory.
    /// Returns the components that needed SIGKILL.
    pub fn down(mut self) -> Result<Vec<String>, Error> {
        self.teardown_on_drop = false;
        let killed = self.stop_all();
        teardown::remove_dir(&self.layout)?;
        Ok(killed)
    }

    /// Stops every process of the cluster (see [`teardown::stop_all`]).
    /// Returns the ones that needed SIGKILL.
    pub(super) fn stop_all(&mut self) -> Vec<String> {
        teardown::stop_all(
            &self.layout,
            &self.state,
            &mut self.procs,
            self.reaper.take(),
        )
    }

    /// The node's record; [`Error::UnknownNode`] (naming the cluster's
    /// nodes) when there is none.
    pub fn node_state(&self, node: &str) -> Result<&SimNode, Error> {
        self.state.node(node).ok_or_else(|| self.unknown_node(node))
    }

    /// The node's record, to change.
    pub(super) fn node_entry(&mut self, node: &str) -> Result<&mut SimNode, Error> {
        let err = self.unknown_node(node);
        self.state
            .nodes
            .iter_mut()
            .find(|n| n.name == node)
            .ok_or(err)
    }

    fn unknown_node(&self, node: &str) -> Error {
        Error::UnknownNode {
            node: node.to_owned(),
            cluster: self.state.name.clone(),
            known: self.node_names(),
        }
    }

    /// Writes `state.json`.
    pub(super) fn save(&self) -> Result<(), Error> {
        self.state.save(&self.layout.state())
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        if let Some(task) = &self.volume_task {
            task.abort();
        }
        if self.teardown_on_drop {
            self.stop_all();
            let _ = std::fs::remove_dir_all(&self.layout.dir);
        }
    }
}

async fn config_for(kubeconfig: &Path) -> Result<kube::Config, Error> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .map_err(|e| Error::io_msg(format!("{}: {e}", kubeconfig.display())))?;
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::io_msg(format!("{}: {e}", kubeconfig.display())))
}

async fn client_for(kubeconfig: &Path) -> Result<kube::Client, Error> {
    let config = config_for(kubeconfig).await?;
    kube::Client::try_from(config).map_err(|source| Error::Kube {
        what: "building a client".into(),
        source: source.into(),
    })
}

/// The kubeconfig context of every sim cluster.
pub const CONTEXT: &str = "nodefall-sim";

/// Milliseconds since the Unix epoch.
pub(super) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels_never_paths() {
        let root = Path::new("/nonexistent-root");
        for bad in [
            "", ".", "..", "../x", "a/b", "/abs", "A", "-a", "a-", "a.b", "a b",
        ] {
            let e = Layout::new(root, bad).unwrap_err();
            assert!(matches!(e, Error::BadName { .. }), "{bad:?}: {e}");
            assert!(e.is_unknown_cluster() && e.is_bad_input());
        }
        let long = "x".repeat(64);
        assert!(
            Layout::new(root, &long)
                .unwrap_err()
                .to_string()
                .contains("64 characters long, over 63")
        );
        for good in ["a", "0", "nodefall", "scenario-3182", &"x".repeat(63)] {
            assert_eq!(Layout::new(root, good).unwrap().dir, root.join(good));
        }
    }
}
