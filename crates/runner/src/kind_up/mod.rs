//! `nodefall kind up|down`'s session: a kind cluster contained on this
//! machine, every change to the host journaled before it is made and put
//! back by `down`, by a signal, by a failure, or (after a kill) by `nodefall
//! recover`. The CLI turns its flags into [`UpOptions`] and prints what the
//! session tells it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::{Exec as _, System};
use crate::kindlab::{self, config, host};
use crate::profile::{ProfileName, TimingProfile};
use crate::runner::Journal;
use crate::runner::journal::{self, BackendRef, Header, KubeRef, Undo};
use crate::scenario::model::Cleanup;
use crate::shutdown::{self, Stop};

mod teardown;

pub use teardown::{down, teardown};

/// What `kind up` makes.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The cluster's name (its nodes are NAME-control-plane, NAME-worker, ...).
    pub name: String,
    /// The node image.
    pub image: String,
    /// Worker nodes beside the control plane.
    pub workers: u8,
    /// `fast` compresses the cluster's timings as the sim's fast profile.
    pub profile: ProfileName,
    /// The kind binary (None: the one scripts/kind/image.sh builds).
    pub kind_binary: Option<PathBuf>,
    /// How long to wait for every node to be Ready.
    pub wait: Duration,
    /// The network as `kind create cluster` makes its own (Docker's subnet).
    pub stock_network: bool,
    /// The controller manager with `--disable-force-detach-on-timeout`.
    pub disable_force_detach_on_timeout: bool,
    /// The kubelets' `shutdownGracePeriod` and its critical pods' part.
    pub shutdown_grace: Option<(Duration, Duration)>,
    /// Zones the workers are spread over, round-robin (none: no zone label).
    pub zones: Vec<String>,
}

/// Where the session's lines go: `out` what it made, `err` what it is
/// stopping for and removing.
pub trait Tell: Send {
    fn out(&mut self, line: String);
    fn err(&mut self, line: String);
}

/// How `kind up` ended without an error.
#[derive(Debug)]
pub enum Up {
    /// The cluster is up; its journal is detached (work left running).
    Made {
        journal: PathBuf,
        kubeconfig: PathBuf,
        network: String,
        bridge: String,
    },
    /// A signal stopped it; what was made is removed.
    Stopped(Stop),
}

/// Why `kind up` or `kind down` failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("installing the signal handlers")]
    Signals(#[source] std::io::Error),
    /// The checks refused the cluster (a name, a runtime, an image): nothing was made.
    #[error(transparent)]
    Checks(Box<kindlab::Error>),
    /// No such cluster of `kind up`'s, or a bad name.
    #[error("{0}")]
    NoCluster(String),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Journal(#[from] journal::Error),
    /// A step failed (or a signal came) after something was made; what was
    /// made was removed first.
    #[error(transparent)]
    Failed(Failed),
}

impl Error {
    fn io(what: String, source: std::io::Error) -> Error {
        Error::Io { what, source }
    }

    /// 2 when the input is at fault and nothing was made; the signal's
    /// code when one stopped a failed `up`; else 3.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Checks(_) | Error::NoCluster(_) => crate::exit::INVALID_INPUT,
            Error::Failed(f) => f.stop.map_or(crate::exit::INFRASTRUCTURE, Stop::exit_code),
            _ => crate::exit::INFRASTRUCTURE,
        }
    }
}

/// A failed `kind up`, and the signal that had come meanwhile, if one did.
#[derive(Debug)]
pub struct Failed {
    pub error: Box<dyn std::error::Error + Send + Sync>,
    pub stop: Option<Stop>,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// Runs one blocking step off the runtime's workers; a signal meanwhile is
/// remembered (the step finishes, then everything made is removed).
async fn blocking<T: Send + 'static>(
    signals: &mut shutdown::Signals,
    stop: &mut Option<Stop>,
    tell: &mut dyn Tell,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let mut handle = tokio::task::spawn_blocking(f);
    loop {
        tokio::select! {
            r = &mut handle => return r.expect("a blocking step panicked"),
            s = signals.next(), if stop.is_none() => {
                tell.err(format!("{s}: stopping once `{what}` ends, then removing what was made"));
                *stop = Some(s);
            }
        }
    }
}

/// Makes the cluster `args` describes, journaling each change to the host
/// first; on a failure or a signal, removes what was made before returning.
pub async fn up(args: &UpOptions, tell: &mut dyn Tell) -> Result<Up, Error> {
    let mut signals = shutdown::install().map_err(Error::Signals)?;
    let mut stop = None;
    let runtime_cli = crate::backend::kind::pick_runtime(None);
    let kind = args
        .kind_binary
        .clone()
        .unwrap_or_else(kindlab::default_kind_binary);
    let name = args.name.clone();
    {
        let (rt, k, image, n) = (
            runtime_cli.clone(),
            kind.clone(),
            args.image.clone(),
            name.clone(),
        );
        let checked = blocking(&mut signals, &mut stop, tell, "checks", move || {
            kindlab::preflight(&System, &rt, &k, &image, &n)
        })
        .await;
        checked.map_err(|e| Error::Checks(Box::new(e)))?;
    }
    if let Some(s) = stop {
        return Ok(Up::Stopped(s));
    }
    let dir = kindlab::cluster_dir(&kindlab::state_root(), &name);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let kubeconfig = kindlab::kubeconfig_file(&kindlab::state_root(), &name);
    let config_path = dir.join("kind-config.yaml");
    let timings = match args.profile {
        ProfileName::Default => None,
        ProfileName::Fast => Some(TimingProfile::fast()),
    };
    // Every node mounts it: a volume all nodes share, as an NFS export
    // would be (seed 000); it goes with the cluster's state directory.
    let shared = dir.join("shared");
    std::fs::create_dir_all(&shared)
        .map_err(|e| Error::io(format!("creating {}", shared.display()), e))?;
    let spec = config::Spec {
        workers: args.workers,
        node_ports: config::SCENARIO_NODE_PORTS.to_vec(),
        timings,
        quirks: kindlab::host_quirks(),
        shared_dir: Some(shared),
        shutdown_grace: args.shutdown_grace,
        force_detach_on_timeout: !args.disable_force_detach_on_timeout,
        zones: args.zones.clone(),
    };
    std::fs::write(&config_path, config::kind_config(&spec))
        .map_err(|e| Error::io(format!("writing {}", config_path.display()), e))?;

    let (pid, pid_start) = crate::sim::process::current().unwrap_or((0, 0));
    let started = jiff::Timestamp::now();
    let run = journal::run_id(&format!("kind-up-{name}"), started);
    let header = Header {
        run: run.clone(),
        pid,
        pid_start,
        started_at: started,
        scenario: format!("kind up {name}"),
        file: config_path.display().to_string(),
        namespace: String::new(),
        cleanup: Cleanup::Always,
        backend: BackendRef::Kind {
            cluster: name.clone(),
            runtime: runtime_cli.clone(),
        },
        kube: KubeRef {
            kubeconfig: Some(kubeconfig.clone()),
            context: Some(format!("kind-{name}")),
        },
    };
    let mut journal = Journal::create(&journal::default_dir(), header)?;
    let made = make(
        &mut journal,
        &mut signals,
        &mut stop,
        tell,
        args,
        &runtime_cli,
        &kind,
        &config_path,
        &kubeconfig,
        &dir,
    )
    .await;
    // What ends the session once what was made is removed: a signal, or
    // the failure (printed once, by the caller, after the teardown).
    let end: Result<Up, Error> = match (made, stop) {
        (Ok(()), None) => {
            journal.detach()?;
            return Ok(Up::Made {
                journal: journal.path().to_owned(),
                kubeconfig,
                network: kindlab::network_name(&name),
                bridge: host::bridge_name(&run),
            });
        }
        (Ok(()), Some(s)) => Ok(Up::Stopped(s)),
        (Err(error), stop) => Err(Error::Failed(Failed { error, stop })),
    };
    tell.err(format!("removing what was made for kind cluster {name}"));
    let ok =
        tokio::task::block_in_place(|| teardown(&mut journal, &mut |l| tell.err(format!("  {l}"))));
    if ok {
        journal.close()?;
        std::fs::remove_dir_all(&dir).ok();
    } else {
        tell.err(format!(
            "  left: see `nodefall recover {run}` (journal {})",
            journal.path().display()
        ));
    }
    end
}

/// The steps of `kind up`, each journaled before it is made.
#[allow(clippy::too_many_arguments)]
async fn make(
    journal: &mut Journal,
    signals: &mut shutdown::Signals,
    stop: &mut Option<Stop>,
    tell: &mut dyn Tell,
    args: &UpOptions,
    runtime_cli: &str,
    kind: &Path,
    config_path: &Path,
    kubeconfig: &Path,
    dir: &Path,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let name = args.name.clone();
    let run = journal
        .state()
        .header
        .as_ref()
        .map(|h| h.run.clone())
        .unwrap_or_default();
    let proc_sys = Path::new("/proc/sys");
    // 1. The host's sysctls, before any kubelet can write them.
    let values = host::read_sysctls(proc_sys, &host::KUBELET_SYSCTLS)?;
    journal.will(Undo::Sysctls {
        values: values.clone(),
    })?;
    // For later runs on the cluster: the kind backend puts the sysctls back
    // after a kubelet starts again.
    let made = kindlab::Made {
        network: kindlab::network_name(&name),
        sysctls: values.clone(),
    };
    std::fs::write(
        kindlab::made_file(&kindlab::state_root(), &name),
        serde_json::to_string_pretty(&made)?,
    )?;
    // 2. The cluster's own network, then the guard on its bridge: both
    //    before the first node exists.
    let network = kindlab::network_name(&name);
    let bridge = host::bridge_name(&run);
    let tag = host::guard_tag(&run);
    journal.will(Undo::Network {
        runtime: runtime_cli.to_owned(),
        name: network.clone(),
        cluster: name.clone(),
    })?;
    let (rt, net, br, cluster) = (
        runtime_cli.to_owned(),
        network.clone(),
        bridge.clone(),
        name.clone(),
    );
    let stock = args.stock_network;
    let subnet = blocking(signals, stop, tell, "docker network create", move || {
        let subnet = if stock {
            None
        } else {
            let taken = host::taken_subnets(&System, &rt)?;
            Some(host::free_subnet(&taken).ok_or(host::Error::NoSubnet)?)
        };
        System.run(
            &host::network_create(&rt, &net, &br, &cluster, subnet.as_deref()),
            Duration::from_secs(60),
        )?;
        match subnet {
            Some(s) => Ok::<_, host::Error>(s),
            None => Ok(format!(
                "{} (chosen by Docker, as kind does)",
                host::network_subnets(&System, &rt, &net)?
            )),
        }
    })
    .await?;
    tell.out(format!("network {network}: {subnet}, bridge {bridge}"));
    if stop.is_some() {
        return Ok(());
    }
    journal.will(Undo::Guard {
        bridge: bridge.clone(),
        tag: tag.clone(),
    })?;
    let (b, t) = (bridge.clone(), tag.clone());
    blocking(signals, stop, tell, "iptables -I DOCKER-USER", move || {
        System.run(&host::guard_rule("-I", &b, &t), Duration::from_secs(30))?;
        if host::guard_present(&System, &b, &t)? {
            Ok(())
        } else {
            Err(host::Error::Command(crate::exec::Error::Failed {
                cmd: host::guard_rule("-C", &b, &t),
                status: "rule not found after insertion".into(),
                stderr: String::new(),
            }))
        }
    })
    .await?;
    tell.out(format!(
        "guard in place: iptables -I DOCKER-USER -i {bridge} ! -o {bridge} -j DROP ({tag})"
    ));
    if stop.is_some() {
        return Ok(());
    }
    tokio::select! {
        () = crate::testpoint::reached(|| "kind:guarded".into()) => {}
        s = signals.next() => { *stop = Some(s); return Ok(()); }
    }
    // 3. The cluster.
    journal.will(Undo::KindCluster {
        kind: kind.to_owned(),
        name: name.clone(),
        runtime: runtime_cli.to_owned(),
        kubeconfig: kubeconfig.to_owned(),
    })?;
    tell.out(format!(
        "creating kind cluster {name} (1 control plane, {} workers, {} timings; kind's output: {})",
        args.workers,
        args.profile,
        dir.join("kind-create.log").display()
    ));
    let create = kindlab::create_command(
        runtime_cli,
        kind,
        &name,
        &args.image,
        config_path,
        kubeconfig,
    );
    let log = dir.join("kind-create.log");
    let took = blocking(signals, stop, tell, "kind create cluster", move || {
        kindlab::create(&create, &log)
    })
    .await?;
    tell.out(format!("kind create cluster: {:.1} s", took.as_secs_f64()));
    if stop.is_some() {
        return Ok(());
    }
    // 4. Every node Ready; then the sysctls the kubelets wrote go back.
    let config =
        crate::discover::inspect::kube_config_at(Some(kubeconfig), Some(format!("kind-{name}")))
            .await
            .map_err(|e| format!("reading {}: {e}", kubeconfig.display()))?;
    let client = kube::Client::try_from(config)?;
    let count = 1 + usize::from(args.workers);
    tokio::select! {
        r = kindlab::wait_nodes_ready(&client, count, args.wait) => r?,
        s = signals.next() => { *stop = Some(s); return Ok(()); }
    }
    tell.out(format!("{count} nodes Ready"));
    let restored = host::restore_sysctls(proc_sys, &values)?;
    if !restored.is_empty() {
        tell.out(format!(
            "sysctls the kubelets had changed, put back: {}",
            restored.join(", ")
        ));
    }
    // 5. CoreDNS answers cluster names only.
    tokio::select! {
        r = kindlab::contain_dns(&client, Duration::from_secs(180)) => {
            if r? { tell.out("CoreDNS restarted without `forward`: it answers cluster names only".into()); }
        }
        s = signals.next() => { *stop = Some(s); return Ok(()); }
    }
    // 6. Volumes that attach: nodefall's CSI driver, registered on every node.
    let started = std::time::Instant::now();
    tokio::select! {
        r = kindlab::csi::install(&client, count, Duration::from_secs(180)) => r?,
        s = signals.next() => { *stop = Some(s); return Ok(()); }
    }
    tell.out(format!(
        "CSI driver {} registered on {count} nodes in {:.1} s (StorageClass {}: static PersistentVolumes that attach)",
        kindlab::csi::DRIVER,
        started.elapsed().as_secs_f64(),
        kindlab::csi::STORAGE_CLASS
    ));
    Ok(())
}
