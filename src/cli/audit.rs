//! `nodefall audit ...`: check what an observer saw against the API
//! server's audit log, and the two baselines the check is compared with (a
//! poller, and `kubectl get -w` with arrival times).

use super::error::Error;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::error::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::watcher::Event;
use serde_json::Value;

use super::flags::InvalidFlag;
use crate::actions;
use crate::audit::{self, Seen};
use crate::exit;
use crate::observe::fold::{Differ, Fold};
use crate::observe::kinds::{NodeDiff, PodDiff};
use crate::report;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Compare a run's observed transitions (and baselines) with an audit log.
    #[command(after_help = concat!(
        "Every Node and Pod write in the audit log (JSON lines of audit.k8s.io/v1 events at\n",
        "level RequestResponse, as the sim's API server writes them to logs/audit.log) is\n",
        "folded into transitions; each is matched to the observer's first equal report of the\n",
        "same object, between the observer's first list and the cleanup.\n",
        "\n",
        "Exit codes: 0 nodefall missed, duplicated, reordered and made up nothing (clean);\n",
        "1 it did (a change made as the observer stopped, cut off, does not count);\n",
        "2 bad input (unreadable file, no observer start in the result) or nothing to check:\n",
        "an empty audit log, or one without a Node or Pod change in the run's window (not\n",
        "this run's cluster, or not written during the run) is refused, never a pass."
    ))]
    Check(CheckArgs),
    /// Baseline: list Nodes and Pods every INTERVAL, as most tools do, and write the
    /// changes each list shows (JSON lines) until SIGINT/SIGTERM or --duration.
    Poll(PollArgs),
    /// Baseline: stamp `kubectl get -w -o json --output-watch-events` output (stdin) with
    /// its arrival time and write the changes it shows (JSON lines).
    Stamp(StampArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The run's result.json.
    pub result: PathBuf,
    /// The API server's audit log.
    #[arg(long)]
    pub audit_log: PathBuf,
    /// A baseline's observations, NAME=FILE (from `audit poll` or `audit stamp`);
    /// repeat a NAME to merge files (e.g. kubectl's node and pod watches).
    #[arg(long = "baseline", value_name = "NAME=FILE")]
    pub baselines: Vec<String>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write every match of nodefall's reports (true transition, when seen, lag) to
    /// this file, as JSON lines in the order they happened.
    #[arg(long)]
    pub matches: Option<PathBuf>,
    /// Also store the check in result.json and re-render report.md beside it.
    #[arg(long)]
    pub update: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct PollArgs {
    /// The cluster's kubeconfig (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the pods to poll (every Node is polled).
    #[arg(long)]
    pub namespace: String,
    /// Time between two lists: seconds (`5`, `0.5`) or a duration (`500ms`),
    /// from 1ms to 1h.
    #[arg(long, value_name = "SECONDS", default_value = "5",
          value_parser = super::values::duration(super::values::POLL_INTERVAL))]
    pub interval: Duration,
    /// Stop after this long, like --interval, up to 168h (default: at
    /// SIGINT/SIGTERM).
    #[arg(long, value_name = "SECONDS",
          value_parser = super::values::duration(super::values::POLL_DURATION))]
    pub duration: Option<Duration>,
    /// Where to write the observations (JSON lines).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct StampArgs {
    /// Where to write the observations (JSON lines).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(cmd: AuditCommand) -> Result<ExitCode, Error> {
    match cmd {
        AuditCommand::Check(args) => check(&args),
        AuditCommand::Poll(args) => poll(&args),
        AuditCommand::Stamp(args) => stamp(&args),
    }
}

fn check(args: &CheckArgs) -> Result<ExitCode, Error> {
    let mut baselines: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for b in &args.baselines {
        let Some((name, file)) = b
            .split_once('=')
            .filter(|(n, f)| !n.is_empty() && !f.is_empty())
        else {
            return Err(InvalidFlag(format!(
                "--baseline `{b}`: expected NAME=FILE, e.g. --baseline poller-5s=poll.jsonl"
            ))
            .into());
        };
        match baselines.iter_mut().find(|(n, _)| n == name) {
            Some((_, files)) => files.push(file.into()),
            None => baselines.push((name.to_owned(), vec![file.into()])),
        }
    }
    let mut observed = Vec::new();
    for (name, files) in baselines {
        let mut seen = Vec::new();
        for f in &files {
            seen.extend(audit::read_observations(f)?);
        }
        seen.sort_by_key(|s| s.at);
        observed.push((name, seen));
    }
    let result = report::read_result(&crate::disk::Disk, &args.result)?;
    let report = audit::check_run(
        &result,
        &args.result,
        &args.audit_log,
        &observed,
        args.matches.is_some(),
    )?;
    if let (Some(path), Some(ours)) = (&args.matches, report.checks.first()) {
        let mut sink = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| {
            InvalidFlag(format!(
                "--matches {}: cannot be created: {e}",
                path.display()
            ))
        })?);
        let mut matches: Vec<&audit::Match> = ours.matches.iter().collect();
        matches.sort_by_key(|m| m.truth.at);
        for m in matches {
            serde_json::to_writer(&mut sink, m)?;
            sink.write_all(b"\n")?;
        }
        sink.flush()?;
    }
    match args.format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => {
            outln!(
                "audit log {}: {} events, {} Node/Pod writes in scope; window {} .. {}",
                report.log,
                report.events,
                report.writes,
                report.window.from,
                report.window.to
            );
            for c in &report.checks {
                outln!("{:<16} {}", c.source, report::audit_line(c));
                for (what, list) in [
                    ("missed", &c.missed_examples),
                    ("unexplained", &c.unexplained_examples),
                ] {
                    for m in list.iter().take(5) {
                        outln!(
                            "  {what}: {} {} at {}",
                            m.object.name(),
                            m.change.describe(),
                            m.at
                        );
                    }
                }
            }
        }
    }
    let clean = report.checks.first().is_some_and(|c| c.clean());
    if args.update {
        let mut result = result;
        result.audit = Some(report);
        let dir = args.result.parent().unwrap_or(Path::new("."));
        report::write_rendered(&crate::disk::Disk, dir, &result)
            .with_context(|| format!("writing the reports in {}", dir.display()))?;
    }
    Ok(exit::code(if clean {
        exit::PASS
    } else {
        exit::EXPECTATION_FAILED
    }))
}

// ----- baselines -----

/// Writes observations as JSON lines, flushed per batch.
struct Sink {
    out: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
}

impl Sink {
    /// The file of `--out`: one that cannot be created is the flag's fault
    /// (exit 2).
    fn create(path: &Path) -> Result<Sink, Error> {
        let file = std::fs::File::create(path).map_err(|e| {
            InvalidFlag(format!("--out {}: cannot be created: {e}", path.display()))
        })?;
        Ok(Sink {
            out: std::io::BufWriter::new(file),
            path: path.to_owned(),
        })
    }

    fn write(
        &mut self,
        at: Timestamp,
        batch: Vec<(crate::timeline::ObjectRef, crate::observe::fold::Changes)>,
    ) -> Result<(), Error> {
        for (object, changes) in batch {
            for c in changes {
                let seen = Seen {
                    at,
                    object: object.clone(),
                    change: c.change,
                };
                serde_json::to_writer(&mut self.out, &seen)?;
                self.out.write_all(b"\n")?;
            }
        }
        self.out
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

fn poll(args: &PollArgs) -> Result<ExitCode, Error> {
    // --interval and --duration are within their spans (`values`): the
    // timer below cannot be given a zero period.
    let mut sink = Sink::create(&args.out)?;
    let rt = super::runtime()?;
    rt.block_on(async {
        let client = client(args.kubeconfig.as_deref()).await?;
        let nodes: Api<Node> = Api::all(client.clone());
        let pods: Api<Pod> = Api::namespaced(client, &args.namespace);
        let mut node_fold = Fold::new(NodeDiff);
        let mut pod_fold = Fold::new(PodDiff);
        let started = Instant::now();
        let mut ticks = tokio::time::interval(args.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
            }
            if args.duration.is_some_and(|d| started.elapsed() >= d) {
                break;
            }
            let listed = actions::list_paged(&nodes, Some)
                .await
                .context("listing nodes")?;
            let at = Timestamp::now();
            sink.write(at, relist(&mut node_fold, listed))?;
            let listed = actions::list_paged(&pods, Some)
                .await
                .context("listing pods")?;
            let at = Timestamp::now();
            sink.write(at, relist(&mut pod_fold, listed))?;
        }
        Ok::<_, Error>(())
    })?;
    Ok(exit::code(exit::PASS))
}

/// Feeds a complete list to a fold as a relist: changes and deletions since
/// the last one.
fn relist<K, D: Differ<K>>(
    fold: &mut Fold<K, D>,
    items: Vec<K>,
) -> Vec<(crate::timeline::ObjectRef, crate::observe::fold::Changes)> {
    let mut out = fold.handle(Event::Init);
    for item in items {
        out.extend(fold.handle(Event::InitApply(item)));
    }
    out.extend(fold.handle(Event::InitDone));
    out
}

fn stamp(args: &StampArgs) -> Result<ExitCode, Error> {
    let mut sink = Sink::create(&args.out)?;
    let mut node_fold = Fold::new(NodeDiff);
    let mut pod_fold = Fold::new(PodDiff);
    let stdin = std::io::stdin().lock();
    let stream =
        serde_json::Deserializer::from_reader(std::io::BufReader::new(stdin)).into_iter::<Value>();
    for value in stream {
        // Stamped as soon as the whole event has arrived.
        let at = Timestamp::now();
        let value =
            value.context("reading kubectl's output (expected -o json --output-watch-events)")?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let Some(object) = value.get("object").cloned() else {
            continue;
        };
        let batch = match object.get("kind").and_then(Value::as_str) {
            Some("Node") => watch_event::<Node>(&kind, object).map(|e| node_fold.handle(e)),
            Some("Pod") => watch_event::<Pod>(&kind, object).map(|e| pod_fold.handle(e)),
            _ => None,
        };
        if let Some(batch) = batch {
            sink.write(at, batch)?;
        }
    }
    Ok(exit::code(exit::PASS))
}

fn watch_event<K: serde::de::DeserializeOwned>(kind: &str, object: Value) -> Option<Event<K>> {
    let obj: K = serde_json::from_value(object).ok()?;
    match kind {
        "ADDED" | "MODIFIED" => Some(Event::Apply(obj)),
        "DELETED" => Some(Event::Delete(obj)),
        _ => None,
    }
}

/// A client from `--kubeconfig` (a file that does not hold one is the
/// flag's fault, exit 2), else from the environment's.
async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, Error> {
    let config = match crate::discover::inspect::kube_config_at(kubeconfig, None).await {
        Ok(config) => config,
        Err(e) => {
            return Err(match kubeconfig {
                Some(path) => InvalidFlag(format!("--kubeconfig {}: {e}", path.display())).into(),
                None => Error::Context {
                    what: "reading the kubeconfig".into(),
                    source: Box::new(Error::msg(e)),
                },
            });
        }
    };
    kube::Client::try_from(config).context("building a kube client")
}
