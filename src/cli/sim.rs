//! `nodefall sim ...`: manage simulated clusters by hand.

use super::InvalidFlag;
use super::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use super::error::Context as _;
use clap::{Args, Subcommand};
use tabled::settings::Style;
use tabled::{Table, Tabled};

use crate::exit;
use crate::profile::{ProfileName, TimingProfile};
use crate::sim::reaper::{self, ReapOptions, Reaped};
use crate::sim::{self, AgentState, SimCluster, UpOptions, state};

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Start a simulated cluster and leave it running.
    Up(UpArgs),
    /// Stop a simulated cluster and remove its state.
    Down(NameArg),
    /// List simulated clusters with their processes and nodes.
    Status,
    /// Print the path of a cluster's kubeconfig (for `KUBECONFIG=$(...)`).
    Kubeconfig(NameArg),
    /// Freeze, thaw, kill, stop or start one node's agent (its kwok process)
    /// on a running cluster: the sim backend's node faults as a command.
    #[command(after_help = concat!(
        "Each action is one fault of the sim backend (docs/sim-backend.md); the change is\n",
        "recorded in the cluster's state.json, so `sim status`, `sim down` and later `sim node`\n",
        "calls see it, and an agent started here keeps running after this command exits.\n",
        "Prints one line on success. Does not wait for the Node's conditions to change.\n",
        "\n",
        "Examples:\n",
        "  nodefall sim node freeze worker-2 --name c1   node stops posting status (Ready=Unknown)\n",
        "  nodefall sim node thaw worker-2 --name c1     fresh kwok takes the node over\n",
        "  nodefall sim node kill worker-2 && nodefall sim node start worker-2\n",
        "\n",
        "Exit codes: 0 done; 2 no such cluster or node, or the agent is in the wrong state\n",
        "(nothing changed); 3 the operation failed (signal, process, API server)."
    ))]
    Node(NodeArgs),
    /// Internal: the reaper of a throwaway cluster, started by nodefall
    /// itself. Takes the cluster down when the nodefall process that started
    /// it (PID + start time) is gone.
    #[command(hide = true)]
    Reap(ReapArgs),
    /// Internal: the kubelets' volume managers of a cluster (the volumes
    /// its nodes report in use, its pods started once their volumes are
    /// attached), one of the cluster's processes, started by nodefall itself.
    #[command(hide = true)]
    KubeletVolumes(KubeletVolumesArgs),
}

#[derive(Debug, Args)]
pub struct KubeletVolumesArgs {
    /// Cluster name.
    #[arg(long, value_parser = state::parse_name)]
    pub name: String,
    /// Directory holding one directory per cluster.
    #[arg(long)]
    pub root: PathBuf,
}

#[derive(Debug, Args)]
pub struct ReapArgs {
    /// Cluster name.
    #[arg(long, value_parser = state::parse_name)]
    pub name: String,
    /// Directory holding one directory per cluster.
    #[arg(long)]
    pub root: PathBuf,
    /// PID of the nodefall process that owns the cluster.
    #[arg(long)]
    pub parent: i32,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22).
    #[arg(long)]
    pub parent_start: u64,
}

#[derive(Debug, Args)]
pub struct NodeArgs {
    /// What to do to the node's agent.
    #[arg(value_enum)]
    pub action: NodeAction,
    /// The node (as `kubectl get nodes` names it, e.g. worker-1).
    pub node: String,
    /// Cluster name (1-63 of a-z, 0-9 and `-`: a name, never a path).
    #[arg(long, default_value = "nodefall", value_parser = state::parse_name)]
    pub name: String,
}

/// An operation on one node's agent; each needs the agent in certain states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NodeAction {
    /// SIGSTOP the agent: no lease renewals, no status (pause-vm, drop-nic). Needs it running.
    Freeze,
    /// Replace the frozen agent by a fresh kwok (resume-vm, restore-nic). Needs it frozen.
    Thaw,
    /// SIGKILL the agent (poweroff). Needs it running or frozen.
    Kill,
    /// SIGTERM the agent, SIGKILL after 10 s (stop-kubelet). Needs it running or frozen.
    Stop,
    /// Start a new agent, registering the Node again if it was deleted
    /// (poweron, start-kubelet). Needs it stopped.
    Start,
}

impl NodeAction {
    fn verb(self) -> &'static str {
        match self {
            NodeAction::Freeze => "freeze",
            NodeAction::Thaw => "thaw",
            NodeAction::Kill => "kill",
            NodeAction::Stop => "stop",
            NodeAction::Start => "start",
        }
    }
}

impl std::fmt::Display for NodeAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.verb())
    }
}

/// `sim node` failed. Bad input (exit 2) when the cluster or node is not
/// there or the agent is in the wrong state (nothing was changed); otherwise
/// an infrastructure error (exit 3).
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} node `{node}` of simulated cluster `{cluster}`{}", hint(.source))]
pub struct NodeError {
    pub action: NodeAction,
    pub node: String,
    pub cluster: String,
    #[source]
    pub source: sim::Error,
}

impl NodeError {
    pub fn is_bad_input(&self) -> bool {
        self.source.is_bad_input()
    }
}

/// What to do instead, when the agent's state is the problem.
fn hint(source: &sim::Error) -> &'static str {
    match source {
        sim::Error::AgentState { state, .. } => match state {
            AgentState::Running => " (its agent is running: freeze, kill or stop fit that)",
            AgentState::Frozen => " (its agent is frozen: thaw, kill or stop fit that)",
            AgentState::Stopped => " (its agent is stopped: start fits that)",
        },
        sim::Error::NotRunning { .. } => {
            " (its kwok is recorded but gone: kill or stop records it stopped, then start)"
        }
        _ => "",
    }
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// Cluster name (1-63 of a-z, 0-9 and `-`: a name, never a path).
    #[arg(long, default_value = "nodefall", value_parser = state::parse_name)]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Cluster name (1-63 of a-z, 0-9 and `-`: a name, never a path).
    #[arg(long, default_value = "nodefall", value_parser = state::parse_name)]
    pub name: String,
    /// Number of (worker) nodes (more than 50 are played by shared kwok processes).
    #[arg(long, default_value_t = 3, value_parser = super::values::whole(1u16, 3000))]
    pub nodes: u16,
    /// Shared kwok processes playing the nodes; 0 gives each node its own kwok.
    /// Default: 0 up to 50 nodes, else one per 500 nodes (docs/sim-backend.md).
    #[arg(long, value_parser = super::values::whole(0u16, 64))]
    pub shards: Option<u16>,
    /// Zones to spread the nodes over, round-robin (`a,b,c`: the label
    /// topology.kubernetes.io/zone, as a cloud provider sets it; default none).
    #[arg(long, value_name = "ZONES", value_parser = super::values::zones)]
    pub zones: Option<super::values::Zones>,
    /// Add a node named `control-plane`, labelled and tainted
    /// (node-role.kubernetes.io/control-plane, NoSchedule) as kubeadm
    /// registers a kind cluster's control plane: it runs no workload but
    /// counts in its zone (the first), as kind's does for the zone rules.
    #[arg(long)]
    pub control_plane_node: bool,
    /// Timing profile of the control plane.
    #[arg(long, value_enum, default_value_t = ProfileName::Fast)]
    pub profile: ProfileName,
    /// Give up when the cluster is not ready after this many seconds (1 to 86400).
    #[arg(long, default_value_t = 120, value_parser = super::values::whole(1u64, 86_400))]
    pub timeout: u64,
    /// How long a powered-on node takes to boot before it reports Ready
    /// (`poweron`; default measured on a kind node: docs/fidelity.md).
    #[arg(long, value_name = "DURATION", default_value = "8s",
          value_parser = super::values::duration(super::values::NODE_BOOT))]
    pub node_boot: Duration,
    /// The kubelets' graceful node shutdown, played by nodefall on a
    /// `shutdown` fault (docs/sim-backend.md).
    #[command(flatten)]
    pub grace: super::grace::ShutdownGraceArgs,
}

pub fn run(cmd: SimCommand) -> Result<ExitCode, Error> {
    let root = sim::default_root();
    match cmd {
        SimCommand::Up(args) => {
            let mut opts = UpOptions::new(&args.name, TimingProfile::named(args.profile));
            opts.nodes = usize::from(args.nodes);
            opts.shards = args
                .shards
                .map_or_else(|| sim::auto_shards(opts.nodes), usize::from);
            opts.root = root;
            opts.timeout = Duration::from_secs(args.timeout);
            opts.node_boot = args.node_boot;
            let zones = args.zones.unwrap_or_default();
            if let Err(e) = super::values::check_zones(&zones, args.nodes.into(), "nodes") {
                return Err(InvalidFlag(format!("{e}; nothing was started")).into());
            }
            opts.zones = zones.0;
            opts.control_plane_node = args.control_plane_node;
            match args.grace.checked() {
                Ok(g) => {
                    let (all, critical) = g.unwrap_or_default();
                    opts.shutdown_grace = sim::kubelet::ShutdownGrace { all, critical };
                }
                Err(e) => return Err(InvalidFlag(format!("{e}; nothing was started")).into()),
            }
            // Until it is ready and detached, the cluster is as throwaway as
            // a scenario's: if this process is killed half-way, the reaper
            // removes the half-started cluster. `detach` stops the reaper.
            opts.exe = Some(
                std::env::current_exe()
                    .context("locating the nodefall executable (the reaper runs it)")?,
            );
            let runtime = super::runtime()?;
            let started = runtime.block_on(async {
                // SIGINT, SIGTERM and SIGHUP alike, as for a run.
                let mut signals =
                    crate::shutdown::install().context("installing the signal handlers")?;
                let mut progress = |msg: &str| tracing::info!("sim: {msg}");
                tokio::select! {
                    up = SimCluster::up(&opts, &mut progress) => up.map(Ok).map_err(Error::from),
                    // Dropping the bring-up future tears down what was
                    // started; a build of the binaries in progress is stopped.
                    stop = signals.next() => {
                        sim::binaries::cancel().await;
                        Ok(Err(stop))
                    }
                }
            })?;
            let mut cluster = match started {
                Ok(c) => c,
                Err(stop) => {
                    tracing::warn!(
                        "sim: {stop}: stopped starting cluster `{}`; what was started is removed",
                        args.name
                    );
                    return Ok(ExitCode::from(stop.exit_code()));
                }
            };
            cluster.detach();
            outln!("{}", cluster.kubeconfig_path().display());
            tracing::info!(
                "sim: use it with: export KUBECONFIG={}\nsim: stop it with: nodefall sim down --name {}",
                cluster.kubeconfig_path().display(),
                cluster.name()
            );
            Ok(exit::code(exit::PASS))
        }
        SimCommand::Down(NameArg { name }) => {
            // Takes turns with `sim node`, so an agent it is starting is
            // recorded before down reads the state, and stopped with the rest.
            let cluster = SimCluster::open_exclusive(&root, &name, || waiting(&name))?;
            let killed = cluster
                .down()
                .with_context(|| format!("stopping simulated cluster `{name}`"))?;
            if !killed.is_empty() {
                tracing::warn!("sim: needed SIGKILL for {}", killed.join(", "));
            }
            tracing::info!("sim: cluster `{name}` stopped and removed");
            Ok(exit::code(exit::PASS))
        }
        SimCommand::Kubeconfig(NameArg { name }) => {
            let cluster = SimCluster::open(&root, &name)?;
            outln!("{}", cluster.kubeconfig_path().display());
            Ok(exit::code(exit::PASS))
        }
        SimCommand::Node(args) => node(&root, &args),
        SimCommand::Status => status(&root),
        SimCommand::Reap(args) => reap(args),
        SimCommand::KubeletVolumes(args) => kubelet_volumes(&args),
    }
}

fn waiting(cluster: &str) {
    tracing::info!("sim: waiting for another nodefall that is changing cluster `{cluster}`");
}

/// `sim node ACTION NODE`: one operation on one node's agent of a running
/// cluster, recorded in its state. The cluster is only opened (not started
/// by this process), so dropping it tears nothing down, and an agent
/// started here runs on in its own process group when this process exits.
fn node(root: &Path, args: &NodeArgs) -> Result<ExitCode, Error> {
    let fail = |source: sim::Error| NodeError {
        action: args.action,
        node: args.node.clone(),
        cluster: args.name.clone(),
        source,
    };
    let mut cluster =
        SimCluster::open_exclusive(root, &args.name, || waiting(&args.name)).map_err(fail)?;
    // thaw and start talk to the API server (start registers the Node).
    let line = super::runtime()?
        .block_on(node_action(&mut cluster, args.action, &args.node))
        .map_err(fail)?;
    outln!("{line}");
    Ok(exit::code(exit::PASS))
}

/// Performs the action; the line to print.
async fn node_action(
    cluster: &mut SimCluster,
    action: NodeAction,
    node: &str,
) -> Result<String, sim::Error> {
    let record = cluster.node_state(node)?;
    let state = record.agent_state;
    let pid = |c: &SimCluster| -> Result<i32, sim::Error> {
        Ok(c.node_state(node)?.agent.as_ref().map_or(0, |a| a.pid))
    };
    let old = pid(cluster)?;
    // A shared node's fault is a label change, not a signal (agents.rs).
    let shard = record.shard;
    let how = |signal: &str| match shard {
        Some(k) => format!("taken out of kwok shard {k}"),
        None => format!("kwok pid {old}, {signal}"),
    };
    Ok(match action {
        NodeAction::Freeze => {
            // The backend lets a pause repeat; a command that freezes a
            // frozen node is more likely a mistake in what drives it.
            if state != AgentState::Running {
                return Err(sim::Error::AgentState {
                    node: node.to_owned(),
                    state,
                    wanted: "running",
                });
            }
            cluster.freeze_node(node).await?;
            format!("froze {node} ({})", how("SIGSTOP"))
        }
        NodeAction::Thaw => {
            cluster.thaw_node(node).await?;
            match shard {
                Some(k) => format!("thawed {node} (back in kwok shard {k})"),
                None => format!(
                    "thawed {node} (frozen kwok pid {old} killed, new kwok pid {})",
                    pid(cluster)?
                ),
            }
        }
        NodeAction::Kill => {
            cluster.kill_node(node).await?;
            format!("killed {node} ({})", how("SIGKILL"))
        }
        NodeAction::Stop => {
            cluster.stop_node(node).await?;
            format!("stopped {node} ({})", how("SIGTERM"))
        }
        NodeAction::Start => {
            cluster.start_node(node).await?;
            match shard {
                Some(k) => format!("started {node} (back in kwok shard {k})"),
                None => format!("started {node} (new kwok pid {})", pid(cluster)?),
            }
        }
    })
}

/// Plays the cluster's kubelets' volume managers until the cluster is gone
/// or a signal ends it; its stderr is `logs/kubelet-volumes.log`.
fn kubelet_volumes(args: &KubeletVolumesArgs) -> Result<ExitCode, Error> {
    let runtime = super::runtime()?;
    let why = runtime.block_on(async {
        let mut signals = crate::shutdown::install()?;
        tokio::select! {
            r = sim::volume_agent::serve(&args.root, &args.name) => {
                r.map(|()| "the cluster is gone").map_err(Error::from)
            }
            stop = signals.next() => Ok(stop.name()),
        }
    })?;
    eprintln!(
        "{} kubelet-volumes: stopping: {why}",
        jiff::Timestamp::now()
    );
    Ok(exit::code(exit::PASS))
}

/// Runs the reaper; its stderr is `logs/reaper.log` of the cluster.
fn reap(args: ReapArgs) -> Result<ExitCode, Error> {
    let opts = ReapOptions {
        name: args.name,
        root: args.root,
        parent: args.parent,
        parent_start: args.parent_start,
    };
    let mut log = |msg: &str| eprintln!("{} reaper: {msg}", jiff::Timestamp::now());
    let outcome = reaper::run(&opts, &mut log)
        .with_context(|| format!("reaping simulated cluster `{}`", opts.name))?;
    match outcome {
        Reaped::Left(why) => log(&format!("leaving: {why}")),
        Reaped::TornDown { killed } if killed.is_empty() => {
            log(&format!("cluster `{}` stopped and removed", opts.name));
        }
        Reaped::TornDown { killed } => log(&format!(
            "cluster `{}` stopped and removed; needed SIGKILL for {}",
            opts.name,
            killed.join(", ")
        )),
    }
    Ok(exit::code(exit::PASS))
}

/// One line per node, or for a large cluster the count per agent state
/// with the nodes that are not running.
fn node_summary(nodes: &[sim::state::SimNode]) -> String {
    const LIST_MAX: usize = 12;
    if nodes.len() <= LIST_MAX {
        return nodes
            .iter()
            .map(|n| match &n.zone {
                Some(zone) => format!("{} {} (zone {zone})", n.name, n.agent_state),
                None => format!("{} {}", n.name, n.agent_state),
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    let shards = nodes
        .iter()
        .filter_map(|n| n.shard)
        .max()
        .map_or(0, |k| k + 1);
    let mut lines = vec![if shards > 0 {
        format!("{} nodes on {shards} kwok shards", nodes.len())
    } else {
        format!("{} nodes", nodes.len())
    }];
    let mut zones: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for zone in nodes.iter().filter_map(|n| n.zone.as_deref()) {
        *zones.entry(zone).or_default() += 1;
    }
    if !zones.is_empty() {
        let each: Vec<String> = zones.iter().map(|(z, n)| format!("{z} {n}")).collect();
        lines.push(format!("zones: {}", each.join(", ")));
    }
    for state in [AgentState::Running, AgentState::Frozen, AgentState::Stopped] {
        let these: Vec<&str> = nodes
            .iter()
            .filter(|n| n.agent_state == state)
            .map(|n| n.name.as_str())
            .collect();
        match these.len() {
            0 => {}
            n if state == AgentState::Running => lines.push(format!("{n} {state}")),
            n if n <= LIST_MAX => lines.push(format!("{n} {state}: {}", these.join(", "))),
            n => lines.push(format!(
                "{n} {state}: {}, ...",
                these[..LIST_MAX].join(", ")
            )),
        }
    }
    lines.join("\n")
}

#[derive(Tabled)]
struct Row {
    cluster: String,
    server: String,
    profile: String,
    processes: String,
    nodes: String,
    #[tabled(rename = "RSS")]
    rss: String,
    reaper: String,
}

fn status(root: &std::path::Path) -> Result<ExitCode, Error> {
    let names = sim::state::list(root);
    if names.is_empty() {
        outln!("no simulated clusters under {}", root.display());
        return Ok(exit::code(exit::PASS));
    }
    let mut rows = Vec::new();
    for name in names {
        let mut cluster = SimCluster::open(root, &name)?;
        let health = cluster.health();
        let alive = health.iter().filter(|(_, a)| *a).count();
        let dead: Vec<String> = health
            .iter()
            .filter(|(_, a)| !*a)
            .map(|(r, _)| r.name.clone())
            .collect();
        let mut processes = format!("{alive}/{} running", health.len());
        if !dead.is_empty() {
            processes.push_str(&format!(" (gone: {})", dead.join(", ")));
        }
        let state = cluster.state();
        let nodes = node_summary(&state.nodes);
        let (server, profile) = (state.server.clone(), state.profile.name.clone());
        let reaper = match cluster.reaper() {
            None => "none".to_owned(),
            Some((r, true)) => format!("pid {}", r.pid),
            Some((r, false)) => format!("gone (pid {})", r.pid),
        };
        rows.push(Row {
            cluster: name,
            server,
            profile,
            processes,
            nodes,
            rss: format!("{} MiB", cluster.rss_bytes() / (1024 * 1024)),
            reaper,
        });
    }
    outln!("{}", Table::new(rows).with(Style::sharp()));
    Ok(exit::code(exit::PASS))
}
