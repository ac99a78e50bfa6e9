//! Bring-up, node faults and tear-down of a simulated cluster.
//!
//! The control plane is real (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler); each node is played by its own kwok process
//! (`--manage-single-node`), so one node can fail alone: freezing, killing or
//! stopping that process is, for the control plane, a node whose kubelet
//! stopped posting status.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt as _, watcher};
use nix::sys::signal::Signal;

use super::Error;
use super::agents;
use super::binaries::Binaries;
use super::evidence;
use super::kubelet::{self, Comeback, Shutdown, ShutdownGrace};
use super::pki::{self, Pki};
use super::process::{self, Proc, ProcRecord};
use super::reaper;
use super::shutdown::{self, Which};
use super::state::{self, AgentState, Layout, SimNode, State};
use crate::profile::TimingProfile;
use crate::testpoint;

/// KWOK stages every node agent runs with (see `src/sim/stages/README.md`).
const STAGES: [&str; 9] = [
    include_str!("stages/node-initialize.yaml"),
    include_str!("stages/node-heartbeat-with-lease.yaml"),
    include_str!("stages/pod-ready.yaml"),
    include_str!("stages/pod-probe-ready.yaml"),
    include_str!("stages/pod-stop.yaml"),
    include_str!("stages/pod-resync.yaml"),
    include_str!("stages/pod-complete.yaml"),
    include_str!("stages/pod-delete.yaml"),
    include_str!("stages/pod-recover.yaml"),
];

/// What the API server's audit log records: every write to Nodes and Pods
/// (status and binding included) with the objects, stamped when the
/// response completed (microseconds). It is the ground truth the observer
/// is checked against (`src/audit/`); leases, events and reads stay out.
const AUDIT_POLICY: &str = include_str!("audit-policy.yaml");

/// How long an invocation waits for another to release a cluster's state
/// lock (held for a node operation or a teardown).
const LOCK_WAIT: Duration = Duration::from_secs(180);
/// How long a component gets to exit on SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

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
    /// The nodefall executable to run as the cluster's reaper (`sim reap`),
    /// which takes the cluster down if this process dies without doing so
    /// (see `reaper.rs`); `detach` stops it. None: no reaper.
    pub reaper: Option<PathBuf>,
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
            reaper: None,
            extra_apiserver_args: Vec::new(),
            node_boot: kubelet::DEFAULT_BOOT,
            pleg_threshold: kubelet::PLEG_RELIST_THRESHOLD,
            shutdown_grace: kubelet::ShutdownGrace::default(),
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
    layout: Layout,
    state: State,
    procs: BTreeMap<String, Proc>,
    /// The reaper process, when there is one (kept apart from `procs`: it is
    /// not part of the cluster and stops last).
    reaper: Option<Proc>,
    teardown_on_drop: bool,
    /// The exclusive lock on `state.lock` taken by [`open_exclusive`],
    /// released when this value is dropped.
    ///
    /// [`open_exclusive`]: SimCluster::open_exclusive
    lock: Option<std::fs::File>,
}

/// The loopback ports a new cluster's etcd and API server listen on.
struct Ports {
    etcd_client: u16,
    etcd_peer: u16,
    api: u16,
}

/// Progress messages of a bring-up, for the CLI to print.
pub type Progress<'a> = &'a mut (dyn FnMut(&str) + Send);

impl SimCluster {
    /// Starts a cluster and waits until every node is Ready.
    pub async fn up(opts: &UpOptions, progress: Progress<'_>) -> Result<SimCluster, Error> {
        // A bad name is refused before anything is built or started.
        let layout = Layout::new(&opts.root, &opts.name)?;
        let started = Instant::now();
        // Provisioning may build for minutes: off the runtime's workers, so
        // a signal is still heard (it cancels the build, see binaries::cancel).
        let binaries = tokio::task::spawn_blocking(Binaries::ensure)
            .await
            .map_err(|e| Error::Other(format!("provisioning stopped: {e}")))??;
        prepare_dir(&layout, &opts.name)?;

        let [etcd_client, etcd_peer, api_port] = free_ports()?;
        let server = format!("https://127.0.0.1:{api_port}");
        let nodes = agents::nodes(opts.nodes, opts.shards);
        let mut cluster = SimCluster {
            layout,
            state: State {
                schema: state::SCHEMA,
                name: opts.name.clone(),
                server: server.clone(),
                versions: binaries.versions.clone(),
                profile: opts.profile.clone(),
                started_at_ms: 0,
                components: Vec::new(),
                nodes,
                reaper: None,
                kept: false,
                node_boot_ms: state::millis(opts.node_boot),
                pleg_threshold_ms: state::millis(opts.pleg_threshold),
                shutdown_grace_ms: state::millis(opts.shutdown_grace.all),
                shutdown_grace_critical_ms: state::millis(opts.shutdown_grace.critical),
            },
            procs: BTreeMap::new(),
            reaper: None,
            teardown_on_drop: true,
            lock: None,
        };
        let ports = Ports {
            etcd_client,
            etcd_peer,
            api: api_port,
        };
        match cluster.bring_up(opts, &binaries, ports, progress).await {
            Ok(()) => {
                progress(&format!(
                    "cluster `{}` ready in {:.1}s",
                    opts.name,
                    started.elapsed().as_secs_f64()
                ));
                Ok(cluster)
            }
            Err(e) => {
                // Its processes stopped, its logs kept where the error says.
                cluster.teardown_on_drop = false;
                cluster.stop_all();
                let (e, kept) = evidence::keep(&cluster.layout, &opts.root, &opts.name, e);
                if let Some(dir) = kept {
                    tracing::warn!("the failed start's logs are kept in {}", dir.display());
                }
                Err(e)
            }
        }
    }

    /// Everything of a bring-up after its directory is ready: processes,
    /// credentials, nodes, and the waits for each stage. Each stage gets the
    /// whole timeout from when it starts: provisioning (minutes on a fresh
    /// machine) happened before and never eats the API server's time.
    async fn bring_up(
        &mut self,
        opts: &UpOptions,
        binaries: &Binaries,
        ports: Ports,
        progress: Progress<'_>,
    ) -> Result<(), Error> {
        let cluster = self;
        let Ports {
            etcd_client,
            etcd_peer,
            api: api_port,
        } = ports;
        let server = cluster.state.server.clone();
        // The state exists before any process, and every process is recorded
        // as soon as it starts, so a reaper always finds what to stop.
        cluster.save()?;
        if let Some(exe) = &opts.reaper {
            let proc = reaper::spawn(
                exe,
                &opts.root,
                &opts.name,
                &cluster.layout.log(reaper::NAME),
            )?;
            cluster.state.reaper = Some(proc.record.clone());
            cluster.reaper = Some(proc);
            cluster.save()?;
        }

        let pki = pki::write(&cluster.layout.pki())?;
        write_kubeconfig(&cluster.layout.kubeconfig(), &server, &pki)?;
        std::fs::write(cluster.layout.stages(), STAGES.join("\n---\n"))
            .map_err(|e| Error::io("writing the kwok stages", e))?;
        std::fs::write(cluster.layout.audit_policy(), AUDIT_POLICY)
            .map_err(|e| Error::io("writing the audit policy", e))?;

        progress("starting etcd and kube-apiserver");
        cluster.spawn_component(
            "etcd",
            &binaries.etcd,
            etcd_args(&cluster.layout, etcd_client, etcd_peer),
        )?;
        let mut api_args = apiserver_args(&pki, etcd_client, api_port, &opts.profile);
        api_args.extend(audit_args(&cluster.layout));
        api_args.extend(opts.extra_apiserver_args.iter().cloned());
        cluster.spawn_component("kube-apiserver", &binaries.kube_apiserver, api_args.clone())?;
        let client = cluster.client().await?;
        cluster.wait_apiserver_ready(&client, opts.timeout).await?;

        progress("starting kube-controller-manager and kube-scheduler");
        let kubeconfig = cluster.layout.kubeconfig();
        let mut kcm = controller_manager_args(&kubeconfig, &pki, &opts.profile);
        let mut sched = scheduler_args(&kubeconfig);
        if opts.shards > 0 {
            // Thousands of pods: the clients' default 20 (controllers) and
            // 50 (scheduler) QPS would take minutes to create and bind them.
            // Not unlimited (as kwokctl does): a storm of creations saturates
            // a small machine's API server and every watch lags behind it.
            kcm.extend(raised_qps());
            sched.extend(raised_qps());
        }
        // What the processes really run with, where kubeadm would say it.
        let version = client
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .unwrap_or_default();
        super::kubeadm_config::publish(
            &client,
            super::kubeadm_config::cluster_configuration(&version, &api_args, &kcm),
            super::kubeadm_config::kubelet_configuration(
                opts.profile.node_lease_duration.as_secs(),
            ),
        )
        .await
        .map_err(|source| Error::Kube {
            what: "publishing the kubeadm-config ConfigMap".into(),
            source,
        })?;
        cluster.spawn_component(
            "kube-controller-manager",
            &binaries.kube_controller_manager,
            kcm,
        )?;
        cluster.spawn_component("kube-scheduler", &binaries.kube_scheduler, sched)?;

        progress(&format!(
            "registering {} nodes and starting their agents",
            opts.nodes
        ));
        let names: Vec<String> = cluster.state.nodes.iter().map(|n| n.name.clone()).collect();
        if opts.shards == 0 {
            for name in &names {
                cluster.start_agent(&client, name).await?;
            }
        } else {
            agents::register_all(&client, &cluster.state.nodes).await?;
            for k in 0..opts.shards {
                let args = agents::shard_args(&cluster.layout, k, &opts.profile);
                cluster.spawn_component(&agents::shard_name(k), &binaries.kwok, args)?;
            }
            for node in &mut cluster.state.nodes {
                node.agent_state = AgentState::Running;
            }
        }
        cluster.save()?;

        progress("waiting for nodes Ready and the controllers to run");
        cluster
            .wait_nodes_ready(&client, &names, opts.timeout)
            .await?;
        cluster.wait_controllers(&client, opts.timeout).await?;
        cluster.state.started_at_ms = unix_ms();
        cluster.save()
    }

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
        let mut procs = BTreeMap::new();
        for record in state
            .components
            .iter()
            .chain(state.nodes.iter().filter_map(|n| n.agent.as_ref()))
        {
            procs.insert(record.name.clone(), Proc::adopt(record.clone()));
        }
        Ok(SimCluster {
            layout,
            state,
            procs,
            reaper,
            teardown_on_drop: false,
            lock: None,
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
        client_for(&self.layout.kubeconfig()).await
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

    // ----- node faults -----

    /// `pause-vm` / `drop-nic`: freezes the node's agent (SIGSTOP), so it
    /// neither renews its lease nor touches its pods. A shared node is taken
    /// out of its shard's managed set instead, with the same effect.
    pub async fn freeze_node(&mut self, node: &str) -> Result<(), Error> {
        // The state is recorded before the act, so a process stopped
        // between the two leaves a record that says where the node was
        // going (see `restore_node`).
        if self.is_shared(node)? {
            self.check_not_stopped(node, "running or frozen")?;
            self.set_agent_state(node, AgentState::Frozen)?;
            testpoint::reached(|| "sim:freeze".to_owned()).await;
            return self.take_out(node, "running or frozen").await;
        }
        self.agent(node)?;
        self.set_agent_state(node, AgentState::Frozen)?;
        self.agent(node)?.signal(Signal::SIGSTOP)?;
        testpoint::reached(|| "sim:freeze".to_owned()).await;
        Ok(())
    }

    /// `pause-vm`: freezes the node as [`freeze_node`] does, remembering
    /// when, since a kubelet resumed after a long pause reports NotReady
    /// first (`kubelet.rs`).
    ///
    /// [`freeze_node`]: SimCluster::freeze_node
    pub async fn pause_node(&mut self, node: &str) -> Result<(), Error> {
        let before = self.node_entry(node)?.paused_at_ms.replace(unix_ms());
        let frozen = self.freeze_node(node).await;
        if frozen.is_err() {
            // Refused (a node not running, say): no pause began.
            self.node_entry(node)?.paused_at_ms = before;
        }
        frozen
    }

    /// `resume-vm` / `restore-nic`: the node comes back. The frozen agent is
    /// replaced by a fresh one rather than thawed with SIGCONT: a thawed
    /// kwok acts on its stale cache and deletes pods by name without a UID
    /// precondition, so it would delete a StatefulSet's replacement pod that
    /// reused the name on another node, which a real kubelet never does. A
    /// shared node goes back into its shard's managed set, whose kwok never
    /// stopped and lists the node's pods afresh.
    pub async fn thaw_node(&mut self, node: &str) -> Result<(), Error> {
        let state = self.node_state(node)?.agent_state;
        if state != AgentState::Frozen {
            return Err(Error::AgentState {
                node: node.to_owned(),
                state,
                wanted: "frozen",
            });
        }
        let how = match self.node_entry(node)?.paused_at_ms.take() {
            Some(at) => Comeback::Resumed {
                paused_for: Duration::from_millis(unix_ms().saturating_sub(at)),
            },
            None => Comeback::Restarted,
        };
        self.report_return(node, how).await?;
        if self.is_shared(node)? {
            self.bring_back(node).await?;
            return self.set_agent_state(node, AgentState::Running);
        }
        self.agent(node)?.kill_async().await;
        self.forget_agent(node)?;
        // The frozen agent is gone and recorded so; no new one yet.
        testpoint::reached(|| "sim:thaw".to_owned()).await;
        self.start_node(node).await
    }

    /// `poweron`: starts the node as [`start_node`] does, after which it
    /// reports Ready only once it has booted (`sim up --node-boot`).
    ///
    /// [`start_node`]: SimCluster::start_node
    pub async fn boot_node(&mut self, node: &str) -> Result<(), Error> {
        self.check_stopped(node)?;
        self.report_return(node, Comeback::Booted).await?;
        self.start_node(node).await
    }

    /// Posts what the node's kubelet reports first on its return `how`
    /// (`kubelet.rs`): Ready=False when it says so, and when KWOK may report
    /// it Ready. A Node that no longer exists is registered afresh instead.
    async fn report_return(&mut self, node: &str, how: Comeback) -> Result<(), Error> {
        let kubelet = kubelet::Kubelet {
            status_update: self.state.profile.node_status_update_frequency,
            boot: Duration::from_millis(self.state.node_boot_ms),
            pleg_threshold: Duration::from_millis(self.state.pleg_threshold_ms),
        };
        let report = kubelet.first_report(how);
        let client = self.client().await?;
        let now = jiff::Timestamp::now();
        agents::report_return(&client, node, &report, now).await?;
        // Its kubelet takes a moment over its pods, too.
        match kubelet.pod_times(how) {
            Some(times) => agents::time_pods(&client, node, &times, now).await,
            None => Ok(()),
        }
    }

    /// `poweroff`: kills the agent at once (SIGKILL), like pulling the plug.
    pub async fn kill_node(&mut self, node: &str) -> Result<(), Error> {
        if self.is_shared(node)? {
            self.take_out(node, "running or frozen").await?;
            return self.set_agent_state(node, AgentState::Stopped);
        }
        // Recorded before the wait, so a run cut short in it leaves a state
        // that says where the node was going (see `restore_node`).
        self.agent(node)?;
        self.set_agent_state(node, AgentState::Stopped)?;
        self.agent(node)?.kill_async().await;
        testpoint::reached(|| "sim:kill".to_owned()).await;
        self.forget_agent(node)
    }

    /// `shutdown`: logind announces a shutdown to the node's kubelet. With
    /// graceful node shutdown on (`sim up --shutdown-grace-period`) it
    /// reports the node NotReady, stops its pods, the critical ones last,
    /// and lets the machine power off (`kubelet.rs`, `shutdown.rs`); with it
    /// off the node goes down as on `poweroff`. The agent goes at once: from
    /// then on nodefall plays the kubelet's last acts.
    pub async fn shutdown_node(&mut self, node: &str) -> Result<(), Error> {
        let began = tokio::time::Instant::now();
        let now = jiff::Timestamp::now();
        self.kill_node(node).await?;
        let Shutdown::Graceful { pods, critical } = self.shutdown_grace().shutdown() else {
            return Ok(());
        };
        let client = self.client().await?;
        shutdown::report_shutting_down(&client, node, now).await?;
        tokio::time::sleep_until(began + pods).await;
        shutdown::stop_pods(&client, node, Which::Others, jiff::Timestamp::now()).await?;
        tokio::time::sleep_until(began + critical).await;
        shutdown::stop_pods(&client, node, Which::Critical, jiff::Timestamp::now()).await?;
        Ok(())
    }

    /// The kubelets' graceful node shutdown settings.
    pub fn shutdown_grace(&self) -> ShutdownGrace {
        ShutdownGrace {
            all: Duration::from_millis(self.state.shutdown_grace_ms),
            critical: Duration::from_millis(self.state.shutdown_grace_critical_ms),
        }
    }

    /// `stop-kubelet`: stops the agent cleanly (SIGTERM).
    pub async fn stop_node(&mut self, node: &str) -> Result<(), Error> {
        if self.is_shared(node)? {
            self.take_out(node, "running or frozen").await?;
            return self.set_agent_state(node, AgentState::Stopped);
        }
        self.agent(node)?;
        self.set_agent_state(node, AgentState::Stopped)?;
        testpoint::reached(|| "sim:stop".to_owned()).await;
        self.agent(node)?.stop_async(STOP_GRACE).await;
        self.forget_agent(node)
    }

    /// The revert of every node fault: brings the node's agent back to
    /// running from whatever state it was left in, including one an inject
    /// or a revert cut short by a signal left half-way (a frozen agent
    /// killed but no new one started yet, an agent recorded frozen that is
    /// gone, a fresh one already running). Says what it found.
    pub async fn restore_node(&mut self, node: &str) -> Result<String, Error> {
        self.node_entry(node)?.paused_at_ms = None;
        let spec = self.node_state(node)?.clone();
        if spec.shard.is_some() {
            // Putting the shard label back is the same act from any state.
            self.bring_back(node).await?;
            self.set_agent_state(node, AgentState::Running)?;
            return Ok(format!("found it {}", spec.agent_state));
        }
        let found = match &spec.agent {
            None => format!("found it {} with no agent", spec.agent_state),
            Some(record) => {
                let pid = record.pid;
                let alive = self.agent(node)?.is_alive();
                // Stopped by a signal whatever the record says (a freeze cut
                // short before its record was written, or someone's SIGSTOP).
                let stopped = process::is_stopped(record);
                if alive && !stopped && spec.agent_state == AgentState::Running {
                    return Ok(format!("found it running (kwok pid {pid}); nothing to do"));
                }
                // A frozen kwok is replaced, never thawed (see `thaw_node`);
                // one cut short on its way down is finished off.
                self.agent(node)?.kill_async().await;
                testpoint::reached(|| "sim:restore".to_owned()).await;
                let was = match (alive, stopped) {
                    (false, _) => " but gone",
                    (true, true) if spec.agent_state != AgentState::Frozen => " but frozen",
                    _ => "",
                };
                format!("found it {}{was} (kwok pid {pid})", spec.agent_state)
            }
        };
        self.forget_agent(node)?;
        self.start_node(node).await?;
        Ok(format!("{found}; started a new kwok"))
    }

    /// `poweron` / `start-kubelet`: starts a new agent for the node,
    /// registering the Node again first if it was deleted meanwhile (as a
    /// kubelet does on start).
    pub async fn start_node(&mut self, node: &str) -> Result<(), Error> {
        self.check_stopped(node)?;
        if self.is_shared(node)? {
            self.bring_back(node).await?;
            return self.set_agent_state(node, AgentState::Running);
        }
        let client = self.client().await?;
        self.start_agent(&client, node).await?;
        self.save()
    }

    /// A start needs the node's agent stopped.
    fn check_stopped(&self, node: &str) -> Result<(), Error> {
        let state = self.node_state(node)?.agent_state;
        if state != AgentState::Stopped {
            return Err(Error::AgentState {
                node: node.to_owned(),
                state,
                wanted: "stopped",
            });
        }
        Ok(())
    }

    /// Whether a shard (not its own kwok) plays the node.
    fn is_shared(&self, node: &str) -> Result<bool, Error> {
        Ok(self.node_state(node)?.shard.is_some())
    }

    /// Takes a shared node out of its shard's managed set; its agent must
    /// not be stopped already (as a per-node agent must exist).
    async fn take_out(&mut self, node: &str, wanted: &'static str) -> Result<(), Error> {
        self.check_not_stopped(node, wanted)?;
        let spec = self.node_state(node)?.clone();
        self.check_shard(&spec)?;
        let client = self.client().await?;
        agents::set_managed(&client, &spec, false).await
    }

    /// A shared node's fault needs it in its shard's managed set or frozen.
    fn check_not_stopped(&self, node: &str, wanted: &'static str) -> Result<(), Error> {
        let state = self.node_state(node)?.agent_state;
        if state == AgentState::Stopped {
            return Err(Error::AgentState {
                node: node.to_owned(),
                state,
                wanted,
            });
        }
        Ok(())
    }

    /// Puts a shared node back in its shard's managed set.
    async fn bring_back(&mut self, node: &str) -> Result<(), Error> {
        let spec = self.node_state(node)?.clone();
        self.check_shard(&spec)?;
        let client = self.client().await?;
        agents::set_managed(&client, &spec, true).await
    }

    /// A fault on a shared node needs its shard's kwok running (else a node
    /// put back would stay NotReady with nobody to say why).
    fn check_shard(&mut self, node: &SimNode) -> Result<(), Error> {
        let Some(k) = node.shard else { return Ok(()) };
        let name = agents::shard_name(k);
        match self.procs.get_mut(&name) {
            Some(p) => {
                if p.is_alive() {
                    Ok(())
                } else {
                    Err(Error::NotRunning {
                        component: name,
                        pid: p.record.pid,
                    })
                }
            }
            None => Err(Error::io_msg(format!(
                "cluster `{}` records no {name} for node {}",
                self.state.name, node.name
            ))),
        }
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
        std::fs::remove_dir_all(&self.layout.dir)
            .map_err(|e| Error::io(format!("removing {}", self.layout.dir.display()), e))?;
        Ok(killed)
    }

    /// Processes another invocation started on this cluster since this value
    /// read its state (a node agent replaced by a run with `--cluster`, or
    /// by `recover`): adopted from the state file, so they stop too.
    fn adopt_newer(&mut self) {
        let Ok(disk) = State::load(&self.layout.state()) else {
            return;
        };
        for record in disk
            .components
            .iter()
            .chain(disk.nodes.iter().filter_map(|n| n.agent.as_ref()))
        {
            let known = self
                .procs
                .values()
                .any(|p| p.record.pid == record.pid && p.record.start_ticks == record.start_ticks);
            if !known {
                let key = format!("{}#{}", record.name, record.pid);
                self.procs.insert(key, Proc::adopt(record.clone()));
            }
        }
    }

    fn stop_all(&mut self) -> Vec<String> {
        self.adopt_newer();
        let mut killed = Vec::new();
        // Node agents first, then the control plane in reverse start order.
        let mut order: Vec<String> = self
            .state
            .nodes
            .iter()
            .filter_map(|n| n.agent.as_ref().map(|a| a.name.clone()))
            .collect();
        order.extend(self.state.components.iter().rev().map(|c| c.name.clone()));
        // Anything else this value holds (e.g. a component that failed to record).
        let extra: Vec<String> = self
            .procs
            .keys()
            .filter(|k| !order.contains(k))
            .cloned()
            .collect();
        order.extend(extra);
        for name in order {
            if let Some(mut p) = self.procs.remove(&name)
                && p.stop(STOP_GRACE)
            {
                killed.push(name);
            }
        }
        // The reaper goes last: if this process dies half-way through, the
        // reaper finishes the job. When the reaper itself runs this, it must
        // not signal its own process group.
        if let Some(mut reaper) = self.reaper.take()
            && u32::try_from(reaper.record.pid).ok() != Some(std::process::id())
            && reaper.stop(STOP_GRACE)
        {
            killed.push(reaper::NAME.to_owned());
        }
        killed
    }

    // ----- internals -----

    fn spawn_component(
        &mut self,
        name: &str,
        program: &Path,
        args: Vec<String>,
    ) -> Result<(), Error> {
        let proc = Proc::spawn(name, program, &args, &self.layout.log(name))?;
        self.state.components.push(proc.record.clone());
        self.procs.insert(name.to_owned(), proc);
        self.save()
    }

    async fn start_agent(&mut self, client: &kube::Client, node: &str) -> Result<(), Error> {
        let spec = self.node_state(node)?.clone();
        agents::register(client, &spec).await?;
        agents::drop_stale_lease(client, node).await?;
        testpoint::reached(|| "sim:start".to_owned()).await;
        let binaries = Binaries::at(&super::binaries::cache_root(), self.state.versions.clone());
        let name = format!("kwok/{node}");
        let args = agents::single_args(&self.layout, &spec, &self.state.profile);
        let proc = Proc::spawn(&name, &binaries.kwok, &args, &self.layout.log(&name))?;
        let record = proc.record.clone();
        self.procs.insert(name, proc);
        let entry = self.node_entry(node)?;
        entry.agent = Some(record);
        entry.agent_state = AgentState::Running;
        self.save()
    }

    fn agent(&mut self, node: &str) -> Result<&mut Proc, Error> {
        let state = self.node_state(node)?;
        let Some(record) = &state.agent else {
            return Err(Error::AgentState {
                node: node.to_owned(),
                state: state.agent_state,
                wanted: "running or frozen",
            });
        };
        let name = record.name.clone();
        let record = record.clone();
        Ok(self
            .procs
            .entry(name)
            .or_insert_with(|| Proc::adopt(record)))
    }

    fn forget_agent(&mut self, node: &str) -> Result<(), Error> {
        let entry = self.node_entry(node)?;
        if let Some(record) = entry.agent.take() {
            self.procs.remove(&record.name);
        }
        self.set_agent_state(node, AgentState::Stopped)
    }

    fn set_agent_state(&mut self, node: &str, state: AgentState) -> Result<(), Error> {
        self.node_entry(node)?.agent_state = state;
        self.save()
    }

    /// The node's record; [`Error::UnknownNode`] (naming the cluster's
    /// nodes) when there is none.
    pub fn node_state(&self, node: &str) -> Result<&SimNode, Error> {
        self.state.node(node).ok_or_else(|| self.unknown_node(node))
    }

    fn node_entry(&mut self, node: &str) -> Result<&mut SimNode, Error> {
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

    fn save(&self) -> Result<(), Error> {
        self.state.save(&self.layout.state())
    }

    /// Fails early, with the log tail, if a component exited.
    fn check_components(&mut self) -> Result<(), Error> {
        for proc in self.procs.values_mut() {
            if let Some(status) = proc.exit_status() {
                return Err(Error::Exited {
                    component: proc.record.name.clone(),
                    status,
                    log: proc.record.log.clone(),
                    tail: process::log_tail(&proc.record.log, 15),
                });
            }
        }
        Ok(())
    }

    /// Nothing to watch before the API server serves: ask `/readyz` every 100 ms.
    async fn wait_apiserver_ready(
        &mut self,
        client: &kube::Client,
        limit: Duration,
    ) -> Result<(), Error> {
        let since = Instant::now();
        let deadline = since + limit;
        loop {
            self.check_components()?;
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::io_msg(e.to_string()))?;
            if let Ok(body) = client.request_text(request).await
                && body.trim() == "ok"
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.timeout("kube-apiserver /readyz", "kube-apiserver", since, limit));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_nodes_ready(
        &mut self,
        client: &kube::Client,
        names: &[String],
        limit: Duration,
    ) -> Result<(), Error> {
        let since = Instant::now();
        let deadline = since + limit;
        let api: Api<Node> = Api::all(client.clone());
        let mut pending: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let mut stream = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while !pending.is_empty() {
            let next = tokio::time::timeout_at(deadline.into(), stream.try_next()).await;
            match next {
                Err(_) => {
                    let what = format!("nodes Ready (still waiting for {})", join(&pending));
                    let agent = names
                        .first()
                        .and_then(|n| self.state.node(n))
                        .map_or_else(|| "kwok/worker-1".to_owned(), agents::agent_log_component);
                    return Err(self.timeout(&what, &agent, since, limit));
                }
                // The watcher retries on its own; a component may have died.
                Ok(Err(_)) => self.check_components()?,
                Ok(Ok(None)) => return Err(Error::io_msg("node watch ended")),
                Ok(Ok(Some(node))) => {
                    if ready_for_pods(&node) {
                        let name = node.metadata.name.unwrap_or_default();
                        pending.remove(name.as_str());
                    }
                }
            }
        }
        Ok(())
    }

    /// The controller manager runs its controllers once it has created the
    /// `default` ServiceAccount; scenarios need it before creating pods.
    async fn wait_controllers(
        &mut self,
        client: &kube::Client,
        limit: Duration,
    ) -> Result<(), Error> {
        let since = Instant::now();
        let deadline = since + limit;
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        let cond =
            kube::runtime::wait::await_condition(api, "default", |sa: Option<&ServiceAccount>| {
                sa.is_some()
            });
        match tokio::time::timeout_at(deadline.into(), cond).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(Error::io_msg(format!(
                "waiting for the default ServiceAccount: {e}"
            ))),
            Err(_) => Err(self.timeout(
                "kube-controller-manager to create the default ServiceAccount",
                "kube-controller-manager",
                since,
                limit,
            )),
        }
    }

    fn timeout(&mut self, what: &str, component: &str, since: Instant, limit: Duration) -> Error {
        if let Err(exited) = self.check_components() {
            return exited;
        }
        let log = self.layout.log(component);
        Error::Timeout {
            what: what.to_owned(),
            waited: since.elapsed(),
            limit,
            tail: process::log_tail(&log, 10),
            log,
        }
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        if self.teardown_on_drop {
            self.stop_all();
            let _ = std::fs::remove_dir_all(&self.layout.dir);
        }
    }
}

fn join(set: &BTreeSet<&str>) -> String {
    set.iter().copied().collect::<Vec<_>>().join(", ")
}

fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

/// Ready, and the controller has lifted the not-ready taint (until then the
/// scheduler may avoid the node).
pub fn ready_for_pods(node: &Node) -> bool {
    is_ready(node) && !has_taint(node, "node.kubernetes.io/not-ready")
}

pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// Creates the node's directory, refusing to reuse one whose processes run.
fn prepare_dir(layout: &Layout, name: &str) -> Result<(), Error> {
    if layout.state().is_file() {
        let stale = match State::load(&layout.state()) {
            Ok(old) => !old
                .components
                .iter()
                .chain(old.nodes.iter().filter_map(|n| n.agent.as_ref()))
                // A live reaper may be taking the old cluster down right
                // now and would remove the new directory with it.
                .chain(old.reaper.as_ref())
                .any(process::is_alive),
            Err(_) => true,
        };
        if !stale {
            return Err(Error::AlreadyRunning {
                name: name.to_owned(),
                dir: layout.dir.clone(),
            });
        }
    }
    if layout.dir.exists() {
        // Only what a cluster's bring-up writes is removed: a directory
        // holding anything else is not ours to delete.
        if let Some(stranger) = foreign_entry(layout) {
            return Err(Error::io_msg(format!(
                "{} holds {}, which no simulated cluster writes; nodefall deletes only its own \
                 files: move it away or pick another --name",
                layout.dir.display(),
                stranger.display()
            )));
        }
        std::fs::remove_dir_all(&layout.dir)
            .map_err(|e| Error::io(format!("removing stale {}", layout.dir.display()), e))?;
    }
    for dir in [layout.dir.clone(), layout.logs(), layout.etcd_data()] {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    Ok(())
}

/// The first entry of a cluster directory that a bring-up does not write
/// (top level only: what a cluster writes lives in its own subdirectories).
fn foreign_entry(layout: &Layout) -> Option<PathBuf> {
    let ours = |name: &str| {
        matches!(
            name,
            "state.json"
                | "state.json.tmp"
                | "state.lock"
                | "kubeconfig"
                | "audit-policy.yaml"
                | "kwok-stages.yaml"
                | "pki"
                | "etcd"
                | "logs"
        )
    };
    let entries = match std::fs::read_dir(&layout.dir) {
        Ok(entries) => entries,
        // Not a directory (a file of that name): not ours either.
        Err(_) => return Some(layout.dir.clone()),
    };
    entries
        .filter_map(Result::ok)
        .find(|e| !e.file_name().to_str().is_some_and(ours))
        .map(|e| e.path())
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
        source,
    })
}

/// The kubeconfig context of every sim cluster.
pub const CONTEXT: &str = "nodefall-sim";

fn write_kubeconfig(path: &Path, server: &str, pki: &Pki) -> Result<(), Error> {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: nodefall-sim\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: nodefall-admin\n  user:\n    token: {token}\ncontexts:\n- name: {CONTEXT}\n  context:\n    cluster: nodefall-sim\n    user: nodefall-admin\ncurrent-context: {CONTEXT}\n",
        ca = pki.ca_cert.display(),
        token = pki.token,
    );
    std::fs::write(path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// Three distinct free loopback ports (bound, read, released).
fn free_ports() -> Result<[u16; 3], Error> {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| Error::io("finding free loopback ports", e))?;
    let mut ports = [0u16; 3];
    for (slot, l) in ports.iter_mut().zip(&listeners) {
        *slot = l
            .local_addr()
            .map_err(|e| Error::io("finding free loopback ports", e))?
            .port();
    }
    Ok(ports)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn secs(d: Duration) -> String {
    d.as_secs().max(1).to_string()
}

fn go_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

fn strings<const N: usize>(args: [&str; N]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

fn etcd_args(layout: &Layout, client: u16, peer: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client}");
    let peer = format!("http://127.0.0.1:{peer}");
    let data = layout.etcd_data().display().to_string();
    let initial = format!("nodefall={peer}");
    strings([
        "--name",
        "nodefall",
        "--data-dir",
        &data,
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-peer-urls",
        &peer,
        "--initial-advertise-peer-urls",
        &peer,
        "--initial-cluster",
        &initial,
        // A throwaway cluster: durability is not worth the fsync latency.
        "--unsafe-no-fsync",
        "--log-level",
        "warn",
    ])
}

fn apiserver_args(pki: &Pki, etcd_client: u16, port: u16, profile: &TimingProfile) -> Vec<String> {
    let etcd = format!("http://127.0.0.1:{etcd_client}");
    let port = port.to_string();
    let unreachable = secs(profile.unreachable_toleration);
    let not_ready = secs(profile.not_ready_toleration);
    let p = |p: &PathBuf| p.display().to_string();
    let (cert, key, tokens) = (
        p(&pki.serving_cert),
        p(&pki.serving_key),
        p(&pki.token_file),
    );
    let (sa_key, sa_pub) = (p(&pki.service_account_key), p(&pki.service_account_pub));
    strings([
        "--etcd-servers",
        &etcd,
        "--bind-address",
        "127.0.0.1",
        "--advertise-address",
        "127.0.0.1",
        "--secure-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-private-key-file",
        &key,
        "--token-auth-file",
        &tokens,
        "--authorization-mode",
        "RBAC",
        "--service-account-issuer",
        "https://kubernetes.default.svc",
        "--service-account-key-file",
        &sa_pub,
        "--service-account-signing-key-file",
        &sa_key,
        "--service-cluster-ip-range",
        "10.96.0.0/16",
        "--default-unreachable-toleration-seconds",
        &unreachable,
        "--default-not-ready-toleration-seconds",
        &not_ready,
        "--allow-privileged=true",
        "--profiling=false",
    ])
}

fn controller_manager_args(kubeconfig: &Path, pki: &Pki, profile: &TimingProfile) -> Vec<String> {
    let kc = kubeconfig.display().to_string();
    let sa = pki.service_account_key.display().to_string();
    let ca = pki.ca_cert.display().to_string();
    let grace = go_duration(profile.node_monitor_grace_period);
    let period = go_duration(profile.node_monitor_period);
    let startup = go_duration(profile.node_startup_grace_period);
    strings([
        "--kubeconfig",
        &kc,
        "--authentication-kubeconfig",
        &kc,
        "--authorization-kubeconfig",
        &kc,
        "--secure-port",
        "0",
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        "--controllers",
        "*,-serviceaccount-token",
        "--service-account-private-key-file",
        &sa,
        "--root-ca-file",
        &ca,
        "--node-monitor-grace-period",
        &grace,
        "--node-monitor-period",
        &period,
        "--node-startup-grace-period",
        &startup,
        "--profiling=false",
    ])
}

fn scheduler_args(kubeconfig: &Path) -> Vec<String> {
    let kc = kubeconfig.display().to_string();
    strings([
        "--kubeconfig",
        &kc,
        "--authentication-kubeconfig",
        &kc,
        "--authorization-kubeconfig",
        &kc,
        "--secure-port",
        "0",
        "--leader-elect=false",
        "--profiling=false",
    ])
}

fn audit_args(layout: &Layout) -> Vec<String> {
    vec![
        "--audit-policy-file".to_owned(),
        layout.audit_policy().display().to_string(),
        "--audit-log-path".to_owned(),
        layout.audit_log().display().to_string(),
        "--audit-log-format".to_owned(),
        "json".to_owned(),
        // Written before the response is sent: complete when read.
        "--audit-log-mode".to_owned(),
        "blocking".to_owned(),
        // Rotated at 100 MB by default; a 10,000-pod run writes more. The
        // reader also reads rotated files (audit-<time>.log) before it.
        "--audit-log-maxsize".to_owned(),
        "4096".to_owned(),
    ]
}

fn raised_qps() -> [String; 2] {
    [
        "--kube-api-qps=200".to_owned(),
        "--kube-api-burst=400".to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_directory_is_removed_only_when_all_it_holds_is_a_clusters() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::new(root.path(), "c1").unwrap();
        // A cluster's own leftovers (no state.json: a start that failed).
        for dir in [layout.logs(), layout.etcd_data(), layout.pki()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(layout.kubeconfig(), "").unwrap();
        std::fs::write(layout.log("etcd"), "old").unwrap();
        prepare_dir(&layout, "c1").unwrap();
        assert!(!layout.log("etcd").exists(), "the stale log went");
        assert!(layout.logs().is_dir() && layout.etcd_data().is_dir());
        // Something no cluster writes: refused, and left as it was.
        std::fs::write(layout.dir.join("notes.txt"), "mine").unwrap();
        let e = prepare_dir(&layout, "c1").unwrap_err().to_string();
        assert!(
            e.contains("notes.txt") && e.contains("deletes only its own"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(layout.dir.join("notes.txt")).unwrap(),
            "mine"
        );
        // A file where the directory would be: refused too.
        let file = Layout::new(root.path(), "c2").unwrap();
        std::fs::write(&file.dir, "a file").unwrap();
        assert!(prepare_dir(&file, "c2").is_err());
        assert_eq!(std::fs::read_to_string(&file.dir).unwrap(), "a file");
    }

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
