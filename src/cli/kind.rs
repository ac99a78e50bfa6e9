//! `nodefall kind up|down`: a kind cluster contained on this machine, every
//! change to the host journaled before it is made and put back by `down`, by
//! a signal, by a failure, or (after a kill) by `nodefall recover`.

use super::InvalidFlag;
use super::error::{Error, KindUpFailed};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use super::error::Context as _;
use clap::{Args, Subcommand};

use super::runtime;
use crate::exec::{Exec as _, System};
use crate::exit;
use crate::kindlab::{self, config, host};
use crate::profile::{ProfileName, TimingProfile};
use crate::runner::Journal;
use crate::runner::journal::{self, BackendRef, Header, KubeRef, Settled, Undo};
use crate::scenario::model::Cleanup;
use crate::shutdown::{self, Stop};

#[derive(Debug, Subcommand)]
pub enum KindCommand {
    /// Create a kind cluster contained on this machine: its own Docker network,
    /// guarded so no packet of it leaves the host, CoreDNS without upstream,
    /// the host's sysctls put back. Leaves it running; `kind down` removes it.
    #[command(after_help = concat!(
        "The node image comes from scripts/kind/image.sh (built from Debian packages and Go\n",
        "modules, no registry): `nodefall kind up --image \"$(scripts/kind/image.sh)\"`.\n",
        "The kubeconfig is written under $XDG_STATE_HOME/nodefall/kind/NAME (never to\n",
        "~/.kube/config); its path is printed. docs/kind-backend.md has the whole recipe.\n",
        "\n",
        "Exit codes: 0 up; 2 bad input or a check failed before anything was made;\n",
        "3 a step failed (what was made is removed again); 130/143/129 stopped by a signal."
    ))]
    Up(UpArgs),
    /// Delete a cluster `kind up` made, then its guard and network, and put the
    /// host's sysctls back.
    Down {
        /// The cluster's name.
        #[arg(default_value = "nodefall")]
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// The cluster's name (its nodes are NAME-control-plane, NAME-worker, ...).
    #[arg(long, default_value = "nodefall")]
    pub name: String,
    /// The node image (the tag scripts/kind/image.sh prints).
    #[arg(long)]
    pub image: String,
    /// Worker nodes beside the control plane.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=6))]
    pub workers: u8,
    /// Timings: `default` leaves Kubernetes' own; `fast` compresses the
    /// controller manager's, the API server's default tolerations and the
    /// kubelets' lease and status updates as the sim's fast profile.
    #[arg(long, value_enum, default_value_t = ProfileName::Default)]
    pub profile: ProfileName,
    /// The kind binary (default: the one scripts/kind/image.sh builds into
    /// the nodefall cache).
    #[arg(long, value_name = "PATH")]
    pub kind_binary: Option<PathBuf>,
    /// How long to wait for every node to be Ready.
    #[arg(long, default_value = "5m", value_parser = super::values::duration(super::values::KIND_WAIT))]
    pub wait: Duration,
    /// Make the cluster's network as `kind create cluster` makes its own:
    /// the IPv4 subnet left to Docker, so a node taken off it cannot be
    /// given its old address back (what users' kind clusters are like; by
    /// default nodefall gives the network a subnet of its own).
    #[arg(long)]
    pub stock_network: bool,
    /// Start the controller manager with `--disable-force-detach-on-timeout`:
    /// a volume still mounted on an unhealthy node is never force-detached
    /// after the attach-detach controller's 6 minutes; only the
    /// out-of-service taint (or the node coming back) releases it.
    #[arg(long)]
    pub disable_force_detach_on_timeout: bool,
    #[command(flatten)]
    pub grace: super::grace::ShutdownGraceArgs,
}

pub fn run(cmd: KindCommand) -> Result<ExitCode, Error> {
    match cmd {
        KindCommand::Up(args) => up(args),
        KindCommand::Down { name } => down(&name),
    }
}

fn up(args: UpArgs) -> Result<ExitCode, Error> {
    let rt = runtime()?;
    rt.block_on(up_session(args))
}

/// Runs one blocking step off the runtime's workers; a signal meanwhile is
/// remembered (the step finishes, then everything made is removed).
async fn blocking<T: Send + 'static>(
    signals: &mut shutdown::Signals,
    stop: &mut Option<Stop>,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let mut handle = tokio::task::spawn_blocking(f);
    loop {
        tokio::select! {
            r = &mut handle => return r.expect("a blocking step panicked"),
            s = signals.next(), if stop.is_none() => {
                eprintln!("{s}: stopping once `{what}` ends, then removing what was made");
                *stop = Some(s);
            }
        }
    }
}

async fn up_session(args: UpArgs) -> Result<ExitCode, Error> {
    let mut signals = shutdown::install().context("installing the signal handlers")?;
    let mut stop = None;
    let runtime_cli = crate::backend::kind::pick_runtime(None);
    let kind = args
        .kind_binary
        .clone()
        .unwrap_or_else(kindlab::default_kind_binary);
    let name = args.name.clone();
    let shutdown_grace = match args.grace.checked() {
        Ok(g) => g,
        Err(e) => return Err(InvalidFlag(format!("{e}; nothing was made")).into()),
    };
    {
        let (rt, k, image, n) = (
            runtime_cli.clone(),
            kind.clone(),
            args.image.clone(),
            name.clone(),
        );
        let checked = blocking(&mut signals, &mut stop, "checks", move || {
            kindlab::preflight(&System, &rt, &k, &image, &n)
        })
        .await;
        checked.map_err(|e| Error::KindChecks(Box::new(e)))?;
    }
    if let Some(s) = stop {
        return Ok(ExitCode::from(s.exit_code()));
    }
    let dir = kindlab::cluster_dir(&kindlab::state_root(), &name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kubeconfig = kindlab::kubeconfig_file(&kindlab::state_root(), &name);
    let config_path = dir.join("kind-config.yaml");
    let timings = match args.profile {
        ProfileName::Default => None,
        ProfileName::Fast => Some(TimingProfile::fast()),
    };
    // Every node mounts it: a volume all nodes share, as an NFS export
    // would be (seed 000); it goes with the cluster's state directory.
    let shared = dir.join("shared");
    std::fs::create_dir_all(&shared).with_context(|| format!("creating {}", shared.display()))?;
    let spec = config::Spec {
        workers: args.workers,
        node_ports: config::SCENARIO_NODE_PORTS.to_vec(),
        timings,
        quirks: kindlab::host_quirks(),
        shared_dir: Some(shared),
        shutdown_grace,
        force_detach_on_timeout: !args.disable_force_detach_on_timeout,
    };
    std::fs::write(&config_path, config::kind_config(&spec))
        .with_context(|| format!("writing {}", config_path.display()))?;

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
        &args,
        &runtime_cli,
        &kind,
        &config_path,
        &kubeconfig,
        &dir,
    )
    .await;
    // What ends the command once what was made is removed: a signal's exit
    // code, or the failure (printed once, by main, after the teardown).
    let end: Result<ExitCode, Error> = match (made, stop) {
        (Ok(()), None) => {
            journal.detach()?;
            outln!(
                "kind cluster {name} is up (journal {})",
                journal.path().display()
            );
            outln!(
                "  kubeconfig: {} (context kind-{name})",
                kubeconfig.display()
            );
            outln!(
                "  network {} (bridge {}), guarded: nothing it sends leaves this machine",
                kindlab::network_name(&name),
                host::bridge_name(&run)
            );
            outln!(
                "  run a scenario on it: nodefall scenario scenarios/kind-pause-worker.yaml --backend kind --kind-cluster {name}"
            );
            outln!("  remove it: nodefall kind down {name}");
            return Ok(exit::code(exit::PASS));
        }
        (Ok(()), Some(s)) => Ok(ExitCode::from(s.exit_code())),
        (Err(error), stop) => Err(Error::KindUp(KindUpFailed { error, stop })),
    };
    eprintln!("removing what was made for kind cluster {name}");
    let ok = tokio::task::block_in_place(|| teardown(&mut journal, &mut |l| eprintln!("  {l}")));
    if ok {
        journal.close()?;
        std::fs::remove_dir_all(&dir).ok();
    } else {
        eprintln!(
            "  left: see `nodefall recover {run}` (journal {})",
            journal.path().display()
        );
    }
    end
}

/// The steps of `kind up`, each journaled before it is made.
#[allow(clippy::too_many_arguments)]
async fn make(
    journal: &mut Journal,
    signals: &mut shutdown::Signals,
    stop: &mut Option<Stop>,
    args: &UpArgs,
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
    let subnet = blocking(signals, stop, "docker network create", move || {
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
    outln!("network {network}: {subnet}, bridge {bridge}");
    if stop.is_some() {
        return Ok(());
    }
    journal.will(Undo::Guard {
        bridge: bridge.clone(),
        tag: tag.clone(),
    })?;
    let (b, t) = (bridge.clone(), tag.clone());
    blocking(signals, stop, "iptables -I DOCKER-USER", move || {
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
    outln!("guard in place: iptables -I DOCKER-USER -i {bridge} ! -o {bridge} -j DROP ({tag})");
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
    outln!(
        "creating kind cluster {name} (1 control plane, {} workers, {} timings; kind's output: {})",
        args.workers,
        args.profile,
        dir.join("kind-create.log").display()
    );
    let create = kindlab::create_command(
        runtime_cli,
        kind,
        &name,
        &args.image,
        config_path,
        kubeconfig,
    );
    let log = dir.join("kind-create.log");
    let took = blocking(signals, stop, "kind create cluster", move || {
        kindlab::create(&create, &log)
    })
    .await?;
    outln!("kind create cluster: {:.1} s", took.as_secs_f64());
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
    outln!("{count} nodes Ready");
    let restored = host::restore_sysctls(proc_sys, &values)?;
    if !restored.is_empty() {
        outln!(
            "sysctls the kubelets had changed, put back: {}",
            restored.join(", ")
        );
    }
    // 5. CoreDNS answers cluster names only.
    tokio::select! {
        r = kindlab::contain_dns(&client, Duration::from_secs(180)) => {
            if r? { outln!("CoreDNS restarted without `forward`: it answers cluster names only"); }
        }
        s = signals.next() => { *stop = Some(s); return Ok(()); }
    }
    // 6. Volumes that attach: nodefall's CSI driver, registered on every node.
    let started = std::time::Instant::now();
    tokio::select! {
        r = kindlab::csi::install(&client, count, Duration::from_secs(180)) => r?,
        s = signals.next() => { *stop = Some(s); return Ok(()); }
    }
    outln!(
        "CSI driver {} registered on {count} nodes in {:.1} s (StorageClass {}: static PersistentVolumes that attach)",
        kindlab::csi::DRIVER,
        started.elapsed().as_secs_f64(),
        kindlab::csi::STORAGE_CLASS
    );
    Ok(())
}

/// Undoes a kind cluster's host changes in their order: the cluster, and
/// only once none of its nodes is left the guard and the network; the
/// sysctls always. Settles each success in the journal; false if any is left.
pub fn teardown(journal: &mut Journal, say: &mut dyn FnMut(String)) -> bool {
    let pending = journal.state().undo_order();
    let of = |f: fn(&Undo) -> bool| {
        pending
            .iter()
            .filter(|p| f(&p.undo))
            .cloned()
            .collect::<Vec<_>>()
    };
    let mut ok = true;
    let mut nodes_gone = true;
    for p in of(|u| matches!(u, Undo::KindCluster { .. })) {
        if let Undo::KindCluster {
            kind,
            name,
            runtime,
            kubeconfig,
        } = &p.undo
        {
            let r = kindlab::delete(&System, runtime, kind, name, kubeconfig)
                .map_err(|e| crate::errors::chain(&e));
            nodes_gone &= r.is_ok();
            ok &= settle(journal, &p, r, say);
        }
    }
    for p in of(|u| matches!(u, Undo::Guard { .. } | Undo::Network { .. })) {
        if !nodes_gone {
            ok = false;
            say(format!("{}: kept while nodes are left", p.undo.describe()));
            continue;
        }
        let r = match &p.undo {
            Undo::Guard { bridge, tag } => host::guard_remove(&System, bridge, tag),
            Undo::Network {
                runtime,
                name,
                cluster,
            } => host::network_remove(&System, runtime, name, cluster),
            _ => Ok(()),
        };
        ok &= settle(journal, &p, r.map_err(|e| crate::errors::chain(&e)), say);
    }
    for p in of(|u| matches!(u, Undo::Sysctls { .. })) {
        if let Undo::Sysctls { values } = &p.undo {
            let r = match host::restore_sysctls(Path::new("/proc/sys"), values) {
                Ok(changed) => {
                    if !changed.is_empty() {
                        say(format!("sysctls put back: {}", changed.join(", ")));
                    }
                    Ok(())
                }
                Err(e) => Err(crate::errors::chain(&e)),
            };
            ok &= settle(journal, &p, r, say);
        }
    }
    ok
}

/// Settles one undo that succeeded and says how it went; false if it failed.
fn settle(
    journal: &mut Journal,
    p: &journal::Pending,
    r: Result<(), String>,
    say: &mut dyn FnMut(String),
) -> bool {
    let what = p.undo.describe();
    match r.and_then(|()| {
        journal
            .settle(p.id, Settled::Reverted)
            .map_err(|e| crate::errors::chain(&e))
    }) {
        Ok(()) => {
            say(format!("{what}: ok"));
            true
        }
        Err(e) => {
            say(format!("{what}: FAILED: {e}"));
            false
        }
    }
}

fn down(name: &str) -> Result<ExitCode, Error> {
    kindlab::check_name(name).map_err(Error::msg)?;
    let dir = journal::default_dir();
    let scan = journal::unfinished(&dir)
        .with_context(|| format!("reading the journals in {}", dir.display()))?;
    let ours: Vec<_> = scan
        .runs
        .into_iter()
        .filter(|u| {
            u.state.pending.iter().any(|p| matches!(&p.undo, Undo::KindCluster { name: n, .. } if n == name))
                || (u.state.pending.iter().any(|p| p.undo.is_host())
                    && matches!(&u.header.backend, BackendRef::Kind { cluster, .. } if cluster == name))
        })
        .collect();
    if ours.is_empty() {
        return Err(InvalidFlag(format!(
            "no kind cluster {name} made by `nodefall kind up` (no unfinished journal for it \
             in {}); a cluster made by kind itself is removed with `kind delete cluster --name {name}`",
            dir.display()
        ))
        .into());
    }
    let mut all_ok = true;
    for u in ours {
        if u.in_use() {
            outln!(
                "{}: `kind up` is still running (pid {}); left alone",
                u.header.run,
                u.header.pid
            );
            all_ok = false;
            continue;
        }
        outln!("removing kind cluster {name} ({})", u.header.run);
        let mut journal = Journal::reopen(&u.path)?;
        let ok = teardown(&mut journal, &mut |l| outln!("  {l}"));
        if ok {
            journal.close()?;
            std::fs::remove_dir_all(kindlab::cluster_dir(&kindlab::state_root(), name)).ok();
            outln!("  done");
        } else {
            all_ok = false;
            outln!("  left: run `nodefall kind down {name}` again once the cause is fixed");
        }
    }
    Ok(exit::code(if all_ok {
        exit::PASS
    } else {
        exit::INFRASTRUCTURE
    }))
}
