//! Command-line interface (clap derive) and dispatch.

use error::Error;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory as _, Parser, Subcommand};
use error::Context as _;

/// `println!` for the commands' output: a closed stdout (`nodefall validate |
/// head`) is not an error (see [`write_stdout`]).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

mod audit;
pub mod error;
mod flags;
mod grace;
mod kind;
mod machines;
mod plan_ops;
mod plan_zones;
mod predict;
mod predict_zone;
mod recover;
mod repeat;
mod report;
mod resolve;
mod run_scenario;
mod sim;
mod summary;
mod values;
mod version;

pub use crate::discover::inspect::ProfileMismatch;
pub use flags::InvalidFlag;
pub use sim::NodeError as SimNodeError;

use crate::exit;
use crate::plan;
use crate::profile::{ProfileName, TimingProfile};
use crate::scenario::{self, model::BackendKind};

#[derive(Debug, Parser)]
#[command(
    name = "nodefall",
    version = version::SHORT,
    long_version = version::LONG,
    about = "Test how a Kubernetes cluster survives node failures: inject a fault, watch recovery, time it, report.",
    after_help = concat!(
        "Examples:\n",
        "  nodefall scenario scenarios/statefulset-nfs.yaml           run on a throwaway simulated cluster\n",
        "  nodefall scenario scenarios/kind-pause-worker.yaml --backend kind\n",
        "  nodefall validate scenarios/*.yaml                         check files without touching a cluster\n",
        "  nodefall plan scenarios/statefulset-nfs.yaml --profile default\n",
        "  nodefall predict --context prod                             what losing each node would do (read-only)\n",
        "  nodefall scenario scenarios/statefulset-nfs.yaml --repeat 5 five runs and their aggregate\n",
        "  nodefall report compare BASE.json NEW.json --fail-if-slower 20%\n",
        "  nodefall report render reports/RUN/result.json             re-render report.md and junit.xml\n",
        "  nodefall recover                                           revert what a killed run left\n",
        "\n",
        "Exit codes:\n",
        "  0    pass: every expectation held\n",
        "  1    the scenario ran and at least one expectation failed, or an abort guard\n",
        "       stopped it (see the report)\n",
        "  2    invalid input: bad scenario or arguments; nothing was injected\n",
        "  3    infrastructure error: cluster, backend or tooling failed\n",
        "  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM, 129 by SIGHUP; the cluster was\n",
        "       restored first (a second signal abandons cleanup: run `nodefall recover`)"
    )
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// More detail on stderr: -v adds nodefall's debug lines and kube-rs' own
    /// (watch restarts, retries); -vv everything. RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only warnings and errors on stderr, no live progress line.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Log lines as plain text or as one JSON object per line (for CI).
    #[arg(
        long,
        value_enum,
        default_value_t,
        global = true,
        value_name = "FORMAT"
    )]
    pub log_format: crate::logging::Format,
}

impl Cli {
    /// The logging flags.
    pub fn logging(&self) -> crate::logging::Options {
        crate::logging::Options {
            verbose: self.verbose,
            quiet: self.quiet,
            format: self.log_format,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario: set up, inject the fault, watch, remediate, restore, report.
    Scenario(ScenarioArgs),
    /// Check scenario files (syntax, references, windows under every built-in
    /// profile) and command-backend files.
    Validate {
        /// Scenario files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Dry run: print the resolved steps and the expected timeline, touching nothing.
    Plan(PlanArgs),
    /// Predict what a node failure would do to a cluster, read-only (get and
    /// list only): each node's loss ranked, its timeline, the pods that would
    /// hang, the Services left without endpoints, the drains refused; with
    /// `--zone`, a whole zone's, with where the evicted pods fit.
    Predict(predict::PredictArgs),
    /// Manage simulated clusters (a real control plane with nodes played by KWOK).
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// Make and remove kind clusters contained on this machine (real kubelets,
    /// no registry: docs/kind-backend.md).
    #[command(subcommand)]
    Kind(kind::KindCommand),
    /// Work with the reports of past runs (re-render from `result.json`).
    #[command(subcommand)]
    Report(report::ReportCommand),
    /// Check the observer against the API server's audit log; the baselines it is
    /// compared with (a poller, `kubectl get -w`).
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell);
    /// e.g. `nodefall completions bash > ~/.local/share/bash-completion/completions/nodefall`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Revert what killed runs left behind (paused nodes, taints, cordons,
    /// applied objects, throwaway clusters), from their undo journals.
    Recover {
        /// One run (its id or journal path); default: every unfinished run
        /// whose process is gone.
        run: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// Scenario file.
    pub file: PathBuf,
    /// Fault injector (default: the scenario's `backend`, else `sim`).
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Directory for reports.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// Timing profile (default: `fast` on sim, `default` elsewhere; with
    /// `--cluster`, the cluster's own).
    #[arg(long, value_enum)]
    pub profile: Option<ProfileName>,
    /// sim: run on this running cluster (`nodefall sim up --name NAME`)
    /// instead of a throwaway one.
    #[arg(long, value_name = "NAME", value_parser = crate::sim::state::parse_name)]
    pub cluster: Option<String>,
    /// sim: keep the throwaway cluster after the run (prints its kubeconfig).
    #[arg(long)]
    pub keep: bool,
    /// kind: the cluster's name (its containers carry io.x-k8s.kind.cluster=NAME).
    #[arg(long, default_value = "kind", value_name = "NAME")]
    pub kind_cluster: String,
    /// kind: container runtime CLI (default: docker, or podman when docker is absent).
    #[arg(long, value_name = "docker|podman")]
    pub container_runtime: Option<String>,
    /// kubeconfig context of a kind, libvirt, command or vagrant cluster
    /// (default: kind-<kind-cluster> on kind, else the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Run the scenario N times and aggregate the runs (min/p50/p95/max of
    /// each figure, each expectation's pass rate); on sim each run gets a
    /// fresh throwaway cluster, elsewhere the namespace is reset between runs.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = values::whole(1u32, 1000))]
    pub repeat: u32,
    /// sim: number of nodes of the throwaway cluster.
    #[arg(long, default_value_t = 3, value_parser = values::whole(1u16, 3000))]
    pub nodes: u16,
    /// sim: shared kwok processes playing the nodes; 0 gives each node its own kwok.
    /// Default: 0 up to 50 nodes, else one per 500 nodes (docs/sim-backend.md).
    #[arg(long, value_parser = values::whole(0u16, 64))]
    pub shards: Option<u16>,
    /// sim: zones the throwaway cluster's nodes are spread over, round-robin
    /// (`a,b,c`: the label topology.kubernetes.io/zone; default none).
    #[arg(long, value_name = "ZONES", value_parser = values::zones)]
    pub zones: Option<values::Zones>,
    #[command(flatten)]
    pub machines: machines::MachineArgs,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Scenario file.
    pub file: PathBuf,
    /// Fault injector to plan for (default: the scenario's `backend`, else `sim`).
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Timing profile to evaluate bounds with (default: `fast` on sim,
    /// `default` elsewhere; with `--context` or `--cluster`, the cluster's own).
    #[arg(long, value_enum)]
    pub profile: Option<ProfileName>,
    /// Read this kubeconfig context's cluster (read-only): check the
    /// scenario's `cluster:` pins and discover its timing profile.
    #[arg(long, conflicts_with = "cluster")]
    pub context: Option<String>,
    /// Like `--context`, for a running sim cluster (`nodefall sim up --name NAME`).
    #[arg(long, value_name = "NAME", value_parser = crate::sim::state::parse_name)]
    pub cluster: Option<String>,
    /// sim without `--cluster`: the throwaway cluster's number of nodes,
    /// which the targets are resolved against (as `scenario --nodes`).
    #[arg(long, default_value_t = 3, value_parser = values::whole(1u16, 3000),
          conflicts_with_all = ["context", "cluster"])]
    pub nodes: u16,
    /// sim without `--cluster`: the throwaway cluster's zones (as `scenario --zones`).
    #[arg(long, value_name = "ZONES", value_parser = values::zones,
          conflicts_with_all = ["context", "cluster"])]
    pub zones: Option<values::Zones>,
    #[command(flatten)]
    pub machines: machines::MachineArgs,
}

pub use crate::runner::session::default_profile;

/// What `plan` found: the plan, lines about the cluster, and the nodes its
/// targets resolve against (the cluster's, or the throwaway sim's; none
/// for another backend without a cluster).
struct Loaded {
    plan: plan::Plan,
    cluster: Vec<String>,
    nodes: Option<
        Vec<(
            crate::scenario::resolve::NodeLabels,
            crate::disruption::ZoneNode,
        )>,
    >,
}

/// The plan of `nodefall plan`: against the named profile, or against a
/// running cluster's discovered one (read-only; its identity and the
/// discovery's remarks come back as lines to print).
fn load_plan(args: &PlanArgs) -> Result<Loaded, Error> {
    let checked = scenario::load(&crate::disk::Disk, &args.file)?;
    let backend = args.backend.unwrap_or(checked.backend);
    if args.context.is_none() && args.cluster.is_none() {
        let profile =
            TimingProfile::named(args.profile.unwrap_or_else(|| default_profile(backend)));
        let zones = args.zones.as_ref().map_or(&[][..], |z| z.0.as_slice());
        return Ok(Loaded {
            plan: plan::resolve(checked, &profile, Some(backend))?,
            cluster: Vec::new(),
            nodes: (backend == BackendKind::Sim)
                .then(|| crate::sim::throwaway_nodes(usize::from(args.nodes), zones)),
        });
    }
    let (found, nodes) = runtime()?.block_on(async {
        let (config, context) =
            cluster_config(args.cluster.as_deref(), args.context.clone()).await?;
        let found =
            crate::discover::inspect::inspect(&config, context, &checked.pins, args.profile)
                .await?;
        let client = kube::Client::try_from(config)?;
        Ok::<_, Error>((found, crate::discover::nodes::list(&client).await?))
    })?;
    let mut lines = vec![format!("Cluster    {}", found.identity)];
    lines.extend(found.notes.iter().map(|n| format!("  note: {n}")));
    Ok(Loaded {
        plan: plan::resolve(checked, &found.profile, Some(backend))?,
        cluster: lines,
        nodes: Some(nodes),
    })
}

/// The client configuration of `--cluster NAME` (a running sim) or else of
/// `--context` (the current one when absent), and the context's name.
async fn cluster_config(
    cluster: Option<&str>,
    context: Option<String>,
) -> Result<(kube::Config, Option<String>), Error> {
    Ok(match cluster {
        Some(name) => {
            let c = crate::sim::SimCluster::open(&crate::sim::default_root(), name)?;
            (c.config().await?, Some(crate::sim::CONTEXT.to_owned()))
        }
        None => crate::discover::inspect::kube_config(None, context).await?,
    })
}

pub fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Command::Validate { files } => validate(&files),
        Command::Plan(args) => {
            let Loaded {
                plan,
                cluster,
                nodes,
            } = load_plan(&args)?;
            for line in cluster {
                outln!("{line}");
            }
            write_stdout(&plan::render_text(&plan));
            if let Some(zones) = nodes.and_then(|n| plan_zones::section(&plan, &n)) {
                write_stdout(&zones);
            }
            let ops = match plan.backend {
                BackendKind::Kind => plan_ops::kind_commands(&plan),
                BackendKind::Libvirt => plan_ops::libvirt_operations(&plan, &args.machines)?,
                BackendKind::Command => plan_ops::command_lines(&plan, &args.machines.command)?,
                BackendKind::Vagrant => plan_ops::vagrant_operations(&plan, &args)?,
                BackendKind::Sim => String::new(),
            };
            write_stdout(&ops);
            Ok(exit::code(exit::PASS))
        }
        Command::Predict(args) if args.of_a_set() => predict_zone::run(&args),
        Command::Predict(args) => predict::run(&args),
        Command::Sim(cmd) => sim::run(cmd),
        Command::Kind(cmd) => kind::run(cmd),
        Command::Report(cmd) => report::run(cmd),
        Command::Audit(cmd) => audit::run(cmd),
        Command::Scenario(args) => scenario(&args),
        Command::Recover { run } => recover::run(run.as_deref()),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "nodefall", &mut script);
            write_stdout(&String::from_utf8_lossy(&script));
            Ok(exit::code(exit::PASS))
        }
    }
}

/// Writes a command's output to stdout. When the reader has gone (`validate
/// | head`), the rest is dropped and the command goes on to its own exit
/// code instead of panicking; any other failure is said once on stderr.
pub(crate) fn write_stdout(text: &str) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static WARNED: AtomicBool = AtomicBool::new(false);
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            if !WARNED.swap(true, Ordering::Relaxed) {
                eprintln!("warning: writing to standard output: {e}");
            }
        }
    }
}

/// `nodefall scenario`: one run, or a series of them (`--repeat`).
fn scenario(args: &ScenarioArgs) -> Result<ExitCode, Error> {
    // Everything about the input is checked before any cluster is touched.
    let resolved = resolve::resolve(args)?;
    // So is where the reports go: not found out after a whole run.
    resolve::prepare_out(&args.out)?;
    crate::runner::session::warn_unfinished();
    if args.repeat > 1 {
        return repeat::run(args, &resolved);
    }
    let done = crate::runner::session::run(
        &run_scenario::request(args),
        &resolved,
        &crate::runner::session::Once::default(),
    )?;
    run_scenario::print(&done);
    Ok(exit::code(done.code))
}

/// The run was interrupted by Ctrl-C (after cleaning up).
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    crate::runner::session::runtime().context("starting the async runtime")
}

/// Every fault a scenario injects, with the revert of each (what cleanup
/// may run), in order.
fn planned_faults(checked: &scenario::Checked) -> Vec<crate::scenario::model::FaultKind> {
    use crate::scenario::checked::StepKind;
    let mut out = Vec::new();
    for s in &checked.steps {
        if let StepKind::Fault { fault, .. } = &s.kind {
            out.push(*fault);
            out.extend(fault.revert());
        }
    }
    out
}

fn validate(files: &[PathBuf]) -> Result<ExitCode, Error> {
    let mut failed = 0usize;
    for file in files {
        // bounded: a huge file is refused by scenario::load below, unread
        let text =
            scenario::load::read_text(&crate::disk::Disk, file, scenario::load::MAX_FILE_BYTES)
                .unwrap_or_default();
        if crate::scenario::command::looks_like_backend_file(&text) {
            // the text read above, not the file again
            match crate::scenario::command::load_str(&file.display().to_string(), &text) {
                Ok(l) => {
                    for w in &l.warnings {
                        eprintln!("{w}");
                    }
                    outln!(
                        "ok       {} (command backend: {})",
                        file.display(),
                        crate::scenario::model::FaultKind::breaking()
                            .filter(|f| l.spec.defines(*f))
                            .map(|f| f.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
                Err(e) => {
                    failed += 1;
                    outln!("invalid  {}", file.display());
                    eprintln!("{e}");
                }
            }
            continue;
        }
        let result = scenario::load(&crate::disk::Disk, file).and_then(|checked| {
            plan::check_all_profiles(&checked)?;
            Ok(checked.steps.len())
        });
        match result {
            Ok(steps) => outln!("ok       {} ({steps} steps)", file.display()),
            Err(e) => {
                failed += 1;
                outln!("invalid  {}", file.display());
                eprintln!("{e}");
            }
        }
    }
    if failed > 0 {
        eprintln!("{failed} of {} scenario files invalid", files.len());
        return Ok(exit::code(exit::INVALID_INPUT));
    }
    Ok(exit::code(exit::PASS))
}
