//! `nodefall sim ...`: manage simulated clusters by hand.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::Interrupted;
use crate::exit;
use crate::profile::{ProfileName, TimingProfile};
use crate::sim::reaper::{self, Outcome, ReapOptions};
use crate::sim::{self, SimCluster, UpOptions};

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
    /// Internal: the reaper of a throwaway cluster, started by nodefall
    /// itself. Takes the cluster down when the nodefall process that started
    /// it (PID + start time) is gone.
    #[command(hide = true)]
    Reap(ReapArgs),
}

#[derive(Debug, Args)]
pub struct ReapArgs {
    /// Cluster name.
    #[arg(long)]
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
pub struct NameArg {
    /// Cluster name.
    #[arg(long, default_value = "nodefall")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Cluster name.
    #[arg(long, default_value = "nodefall")]
    pub name: String,
    /// Number of (worker) nodes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=50))]
    pub nodes: u16,
    /// Timing profile of the control plane.
    #[arg(long, value_enum, default_value_t = ProfileName::Fast)]
    pub profile: ProfileName,
    /// Give up when the cluster is not ready after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

pub fn run(cmd: SimCommand) -> anyhow::Result<ExitCode> {
    let root = sim::default_root();
    match cmd {
        SimCommand::Up(args) => {
            let mut opts = UpOptions::new(&args.name, TimingProfile::named(args.profile));
            opts.nodes = usize::from(args.nodes);
            opts.root = root;
            opts.timeout = Duration::from_secs(args.timeout);
            // Until it is ready and detached, the cluster is as throwaway as
            // a scenario's: if this process is killed half-way, the reaper
            // removes the half-started cluster. `detach` stops the reaper.
            opts.reaper = Some(
                std::env::current_exe()
                    .context("locating the nodefall executable (the reaper runs it)")?,
            );
            let runtime = super::runtime()?;
            let mut cluster = runtime.block_on(async {
                let mut progress = |msg: &str| eprintln!("sim: {msg}");
                tokio::select! {
                    up = SimCluster::up(&opts, &mut progress) => up.map_err(anyhow::Error::from),
                    // Dropping the bring-up future tears down what was started.
                    _ = tokio::signal::ctrl_c() => Err(Interrupted.into()),
                }
            })?;
            cluster.detach();
            println!("{}", cluster.kubeconfig_path().display());
            eprintln!(
                "sim: use it with: export KUBECONFIG={}\nsim: stop it with: nodefall sim down --name {}",
                cluster.kubeconfig_path().display(),
                cluster.name()
            );
            Ok(exit::code(exit::PASS))
        }
        SimCommand::Down(NameArg { name }) => {
            let cluster = SimCluster::open(&root, &name)?;
            let killed = cluster
                .down()
                .with_context(|| format!("stopping simulated cluster `{name}`"))?;
            if !killed.is_empty() {
                eprintln!("sim: needed SIGKILL for {}", killed.join(", "));
            }
            eprintln!("sim: cluster `{name}` stopped and removed");
            Ok(exit::code(exit::PASS))
        }
        SimCommand::Kubeconfig(NameArg { name }) => {
            let cluster = SimCluster::open(&root, &name)?;
            println!("{}", cluster.kubeconfig_path().display());
            Ok(exit::code(exit::PASS))
        }
        SimCommand::Status => status(&root),
        SimCommand::Reap(args) => reap(args),
    }
}

/// Runs the reaper; its stderr is `logs/reaper.log` of the cluster.
fn reap(args: ReapArgs) -> anyhow::Result<ExitCode> {
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
        Outcome::Left(why) => log(&format!("leaving: {why}")),
        Outcome::TornDown { killed } if killed.is_empty() => {
            log(&format!("cluster `{}` stopped and removed", opts.name));
        }
        Outcome::TornDown { killed } => log(&format!(
            "cluster `{}` stopped and removed; needed SIGKILL for {}",
            opts.name,
            killed.join(", ")
        )),
    }
    Ok(exit::code(exit::PASS))
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

fn status(root: &std::path::Path) -> anyhow::Result<ExitCode> {
    let names = sim::state::list(root);
    if names.is_empty() {
        println!("no simulated clusters under {}", root.display());
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
        let nodes = state
            .nodes
            .iter()
            .map(|n| format!("{} {}", n.name, n.agent_state))
            .collect::<Vec<_>>()
            .join("\n");
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
    println!("{}", Table::new(rows).with(Style::sharp()));
    Ok(exit::code(exit::PASS))
}
