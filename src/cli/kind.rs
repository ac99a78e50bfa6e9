//! `nodefall kind up|down`: a kind cluster contained on this machine, every
//! change to the host journaled before it is made and put back by `down`, by
//! a signal, by a failure, or (after a kill) by `nodefall recover`. The
//! session is `runner::kind_up`'s; this parses the flags and prints.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::InvalidFlag;
use super::error::Error;
use super::runtime;
use crate::exit;
use crate::kind_up::{self, Tell, Up, UpOptions};
use crate::profile::ProfileName;

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
    /// Zones to spread the workers over, round-robin (`a,b`: each worker's
    /// kubelet labels its node topology.kubernetes.io/zone; default none).
    #[arg(long, value_name = "ZONES", value_parser = super::values::zones)]
    pub zones: Option<super::values::Zones>,
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

/// `kind up`: the session in `runner::kind_up`, its lines printed here.
async fn up_session(args: UpArgs) -> Result<ExitCode, Error> {
    let shutdown_grace = match args.grace.checked() {
        Ok(g) => g,
        Err(e) => return Err(InvalidFlag(format!("{e}; nothing was made")).into()),
    };
    let zones = args.zones.unwrap_or_default();
    if let Err(e) = super::values::check_zones(&zones, args.workers.into(), "workers") {
        return Err(InvalidFlag(format!("{e}; nothing was made")).into());
    }
    let opts = UpOptions {
        name: args.name.clone(),
        image: args.image,
        workers: args.workers,
        profile: args.profile,
        kind_binary: args.kind_binary,
        wait: args.wait,
        stock_network: args.stock_network,
        disable_force_detach_on_timeout: args.disable_force_detach_on_timeout,
        shutdown_grace,
        zones: zones.0,
    };
    let name = &args.name;
    match kind_up::up(&opts, &mut Printed).await? {
        Up::Made {
            journal,
            kubeconfig,
            network,
            bridge,
        } => {
            outln!("kind cluster {name} is up (journal {})", journal.display());
            outln!(
                "  kubeconfig: {} (context kind-{name})",
                kubeconfig.display()
            );
            outln!(
                "  network {network} (bridge {bridge}), guarded: nothing it sends leaves this machine"
            );
            outln!(
                "  run a scenario on it: nodefall scenario scenarios/kind-pause-worker.yaml --backend kind --kind-cluster {name}"
            );
            outln!("  remove it: nodefall kind down {name}");
            Ok(exit::code(exit::PASS))
        }
        Up::Stopped(s) => Ok(ExitCode::from(s.exit_code())),
    }
}

/// The session's lines: what was made on stdout, the rest on stderr.
struct Printed;

impl Tell for Printed {
    fn out(&mut self, line: String) {
        outln!("{line}");
    }
    fn err(&mut self, line: String) {
        eprintln!("{line}");
    }
}

fn down(name: &str) -> Result<ExitCode, Error> {
    let all_ok = kind_up::down(name, &mut Printed)?;
    Ok(exit::code(if all_ok {
        exit::PASS
    } else {
        exit::INFRASTRUCTURE
    }))
}
