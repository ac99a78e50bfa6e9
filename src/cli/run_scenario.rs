//! `nodefall scenario FILE`: plan, bring up (or open) the cluster, run,
//! restore, write the reports, map the verdict to the exit code.
//!
//! The undo journal is opened before the cluster is touched and closed once
//! nothing is left to undo; SIGINT, SIGTERM and SIGHUP take one path at any
//! moment: stop, revert, write the partial report, tear down a throwaway
//! cluster, exit with 128 + the signal's number.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use jiff::Timestamp;

use super::resolve::{On, Resolved, SimTarget};
use super::{ScenarioArgs, default_profile, runtime};
use crate::backend::any::AnyBackend;
use crate::backend::sim::SimBackend;
use crate::exit;
use crate::plan::{self, Plan};
use crate::profile::TimingProfile;
use crate::record;
use crate::record::{RunResult, RunVerdict};
use crate::report;
use crate::runner::journal::{self, BackendRef, Header, KubeRef, Settled, Undo};
use crate::runner::{self, Journal, Limits, Outcome, Progress};
use crate::scenario::{self, model::BackendKind};
use crate::shutdown::{self, Signals};
use crate::sim::{self, SimCluster, UpOptions};

pub fn run(args: &ScenarioArgs) -> anyhow::Result<ExitCode> {
    // Everything about the input is checked before any cluster is touched.
    let resolved = super::resolve::resolve(args)?;
    // So is where the reports go: not found out after a whole run.
    super::resolve::prepare_out(&args.out)?;
    warn_unfinished();
    if args.repeat > 1 {
        return super::repeat::run(args, &resolved);
    }
    let done = run_once(args, &resolved, &Once::default())?;
    Ok(exit::code(done.code))
}

/// How one run of a series differs from a run on its own.
#[derive(Debug, Default)]
pub(super) struct Once {
    /// Its number in the series (names its throwaway cluster).
    pub run: Option<usize>,
    /// Its report directory (default: `<out>/<scenario>-<UTC start>`).
    pub dir: Option<PathBuf>,
    /// Cleanup in place of the scenario's (a series resets the namespace
    /// between runs on the same cluster).
    pub cleanup: Option<scenario::model::Cleanup>,
    /// The series' signal handlers (a signal that came between two runs
    /// stops the next one at once); default: the run installs its own.
    pub signals: Option<Signals>,
}

impl Once {
    /// The series' handlers, else new ones (inside the run's runtime).
    fn signals(&self) -> anyhow::Result<Signals> {
        match &self.signals {
            Some(s) => Ok(s.clone()),
            None => shutdown::install().context("installing signal handlers"),
        }
    }
}

/// What one run ended with: its exit code and result.
#[derive(Debug)]
pub(super) struct Done {
    pub code: u8,
    pub result: RunResult,
}

/// One run of the resolved scenario.
pub(super) fn run_once(
    args: &ScenarioArgs,
    resolved: &Resolved,
    once: &Once,
) -> anyhow::Result<Done> {
    let checked = resolved.checked.clone();
    match &resolved.on {
        On::Sim(sim) => run_on_sim(args, checked, sim, once),
        On::Machines { backend, context } => run_on_machines(
            args,
            checked,
            resolved.backend,
            backend,
            context.clone(),
            once,
        ),
    }
}

/// Unfinished journals of killed runs: their faults may still be in place.
/// A damaged journal is one of them (its run left it unfinished, and what
/// it changed cannot be read), named with what is wrong with it.
fn warn_unfinished() {
    let dir = journal::default_dir();
    let scan = match journal::unfinished(&dir) {
        Ok(scan) => scan,
        Err(e) => {
            tracing::warn!(
                "warning: cannot check for earlier runs killed before they could clean up: {}",
                crate::errors::chain(&e)
            );
            return;
        }
    };
    // A detached journal (`nodefall kind up`) is work left running on purpose.
    let dead: Vec<_> = scan.runs.iter().filter(|u| u.abandoned()).collect();
    if dead.is_empty() && scan.damaged.is_empty() {
        return;
    }
    tracing::warn!(
        "warning: {} earlier run(s) were killed before they could clean up:",
        dead.len() + scan.damaged.len()
    );
    for u in dead {
        let what: Vec<String> = u
            .state
            .undo_order()
            .iter()
            .map(|p| p.undo.describe())
            .collect();
        tracing::warn!(
            "  {}: still to undo: {}",
            u.path.display(),
            if what.is_empty() {
                "nothing".into()
            } else {
                what.join(", ")
            }
        );
    }
    for e in &scan.damaged {
        tracing::warn!(
            "  damaged {}: what its run left cannot be read",
            crate::errors::chain(e)
        );
    }
    tracing::warn!("  run `nodefall recover` to revert what they left");
}

fn header(plan: &Plan, file: &str, backend: BackendRef, kube: KubeRef) -> Header {
    let started_at = Timestamp::now();
    // Unreadable only without /proc, where nothing else here works either.
    let (pid, pid_start) = crate::sim::process::current().unwrap_or((0, 0));
    Header {
        run: journal::run_id(&plan.scenario.name, started_at),
        pid,
        pid_start,
        started_at,
        scenario: plan.scenario.name.clone(),
        file: file.to_owned(),
        namespace: plan.scenario.namespace.clone(),
        cleanup: plan.scenario.cleanup,
        backend,
        kube,
    }
}

fn run_on_sim(
    args: &ScenarioArgs,
    checked: scenario::Checked,
    sim_run: &SimTarget,
    once: &Once,
) -> anyhow::Result<Done> {
    let root = sim::default_root();
    let existing = sim_run
        .cluster
        .as_deref()
        .map(|name| SimCluster::open(&root, name))
        .transpose()?;
    let profile = match &existing {
        // An existing cluster is one like any other: checked against the
        // pins, its timings discovered.
        Some(c) => {
            let rt = runtime()?;
            let found = rt.block_on(async {
                let config = c.config().await?;
                let found = crate::discover::inspect::inspect(
                    &config,
                    Some(sim::CONTEXT.to_owned()),
                    &checked.pins,
                    args.profile,
                )
                .await?;
                anyhow::Ok(found)
            })?;
            tell(&found.notes);
            found.profile
        }
        None => {
            let p = args
                .profile
                .unwrap_or_else(|| default_profile(BackendKind::Sim));
            TimingProfile::named(p).set_by(&format!(
                "nodefall started the simulated cluster with the `{p}` profile"
            ))
        }
    };
    let mut plan = plan::resolve(checked, &profile, Some(BackendKind::Sim))?;
    if let Some(c) = once.cleanup {
        plan.scenario.cleanup = c;
    }
    let file = args.file.display().to_string();
    let throwaway = existing.is_none();
    let name = existing.as_ref().map_or_else(
        || match once.run {
            Some(k) => format!("scenario-{}-{k}", std::process::id()),
            None => format!("scenario-{}", std::process::id()),
        },
        |c| c.name().to_owned(),
    );
    let mut journal = Journal::create(
        &journal::default_dir(),
        header(
            &plan,
            &file,
            BackendRef::Sim {
                root: root.clone(),
                cluster: name.clone(),
                throwaway,
            },
            KubeRef {
                kubeconfig: Some(sim::state::Layout::new(&root, &name)?.kubeconfig()),
                context: None,
            },
        ),
    )
    .context("opening the undo journal")?;
    let cluster_entry = if throwaway {
        Some(journal.will(Undo::Cluster {
            root: root.clone(),
            name: name.clone(),
        })?)
    } else {
        None
    };

    let rt = runtime()?;
    let result = rt.block_on(async {
        let mut signals = once.signals()?;
        let progress = Progress::auto();
        let cluster = match existing {
            Some(c) => c,
            None => {
                let mut opts = UpOptions::new(name.clone(), profile.clone());
                opts.root = root.clone();
                opts.nodes = sim_run.nodes;
                opts.shards = sim_run.shards;
                opts.reaper = Some(std::env::current_exe().context("locating the nodefall executable (the cluster's reaper runs it)")?);
                let mut log = |m: &str| progress.log(&format!("sim: {m}"));
                tokio::select! {
                    up = SimCluster::up(&opts, &mut log) => up.context("starting the simulated cluster")?,
                    stop = signals.next() => {
                        // Dropping the start tears down what it had started;
                        // a build of the binaries in progress is stopped.
                        sim::binaries::cancel();
                        progress.finish();
                        let why = format!("interrupted by {stop} while starting the simulated cluster");
                        tracing::warn!("stopping: {why}");
                        let outcome = Outcome {
                            result: runner::failed_to_start(&plan, &file, &why, RunVerdict::Interrupted),
                            invalid_input: false,
                            stopped_by: Some(stop),
                            unreverted: Vec::new(),
                            abandoned: None,
                        };
                        return anyhow::Ok((outcome, ClusterEnd::NeverUp));
                    }
                }
            }
        };
        let config = cluster.config().await?;
        let mut backend = SimBackend::for_run(cluster)
            .await
            .context("starting the simulated cluster's volume provisioner")?;
        let mut outcome = runner::run(
            &plan,
            &mut backend,
            config,
            &file,
            &progress,
            &mut journal,
            &mut signals,
            Limits::default(),
        )
        .await;
        let cluster = backend.into_cluster();
        check_audit(&cluster.audit_log_path(), &progress, &mut outcome.result).await;
        // A throwaway cluster goes away now (inside the runtime, so a
        // further signal can still cut it short: the cluster's reaper and
        // `nodefall recover` finish the job then).
        let end = if outcome.abandoned.is_none() {
            finish_cluster(cluster, !throwaway, sim_run.keep, &mut signals, &mut outcome).await
        } else {
            // Dropped here: a cluster this process started is torn down on
            // drop; the journal keeps it for `nodefall recover` in case.
            ClusterEnd::Left
        };
        anyhow::Ok((outcome, end))
    });
    let (mut outcome, end) = match result {
        Ok(r) => r,
        Err(e) => {
            // The cluster never came up (its start cleans up after itself).
            if let Some(id) = cluster_entry {
                journal.settle(id, Settled::Reverted).ok();
            }
            close(journal);
            return Err(e);
        }
    };
    drop(rt);
    if let Some(id) = cluster_entry {
        match end {
            ClusterEnd::NeverUp | ClusterEnd::Gone => journal.settle(id, Settled::Reverted)?,
            ClusterEnd::Kept => journal.settle(id, Settled::Kept)?,
            ClusterEnd::Left => outcome
                .unreverted
                .push(format!("tear down throwaway sim cluster {name}")),
        }
    }
    conclude(&args.out, once, &outcome, journal)
}

/// Checks the observer against the sim's audit log (before a throwaway
/// cluster takes it away) and puts the figures in the result. A failure is
/// a note, not the run's: the figures are about nodefall, not the cluster.
async fn check_audit(log: &Path, progress: &Progress, result: &mut RunResult) {
    if !log.is_file() || result.observed_from.is_none() {
        return;
    }
    progress.log(&format!(
        "audit: checking the observer against {}",
        log.display()
    ));
    // Blocking file reading, off the other tasks' worker; in place, so the
    // run's record (tens of MB at 10,000 pods) is not copied for it.
    let checked = tokio::task::block_in_place(|| {
        crate::audit::check_run(result, Path::new("result.json"), log, &[], false)
    });
    match checked {
        Ok(report) => {
            if let Some(c) = report.checks.first() {
                progress.log(&format!("audit: {}", crate::report::audit_line(c)));
            }
            result.audit = Some(report);
        }
        Err(e) => progress.log(&format!("audit: not checked: {}", crate::errors::chain(&e))),
    }
}

/// How a run's sim cluster ended.
enum ClusterEnd {
    /// Its start was interrupted (the start cleans up after itself).
    NeverUp,
    /// Torn down.
    Gone,
    /// Named or `--keep`: left running on purpose.
    Kept,
    /// Its teardown failed or was cut short: `nodefall recover` finishes it.
    Left,
}

/// Tears down a throwaway cluster, or leaves a named or kept one running.
/// A failed teardown is reported, not raised: the reports come first.
async fn finish_cluster(
    mut cluster: SimCluster,
    named: bool,
    keep: bool,
    signals: &mut Signals,
    outcome: &mut Outcome,
) -> ClusterEnd {
    if named {
        cluster.detach();
        return ClusterEnd::Kept;
    }
    if keep {
        cluster.detach();
        tracing::info!(
            "sim: kept cluster `{0}`: export KUBECONFIG={1}; stop it with `nodefall sim down --name {0}`",
            cluster.name(),
            cluster.kubeconfig_path().display()
        );
        return ClusterEnd::Kept;
    }
    let down = tokio::task::spawn_blocking(move || cluster.down());
    tokio::pin!(down);
    loop {
        tokio::select! {
            r = &mut down => {
                let r = r.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| crate::errors::chain(&e)));
                return match r {
                    Ok(_) => ClusterEnd::Gone,
                    Err(e) => {
                        tracing::error!("error: removing the throwaway simulated cluster: {e}");
                        ClusterEnd::Left
                    }
                };
            }
            stop = signals.next() => {
                if outcome.stopped_by.is_none() {
                    // A first signal now: the teardown is the shutdown path.
                    outcome.stopped_by = Some(stop);
                } else {
                    // The teardown goes on in its thread; the runtime waits
                    // for it when it shuts down, so the cluster still goes.
                    outcome.abandoned = Some(format!("{stop} during the teardown of the throwaway cluster"));
                    return ClusterEnd::Left;
                }
            }
        }
    }
}

/// On an existing cluster whose nodes are machines (kind containers,
/// libvirt domains): one path for every such backend. The backend is opened
/// from the same [`BackendRef`] the journal keeps, so `nodefall recover`
/// reaches the machines the same way.
fn run_on_machines(
    args: &ScenarioArgs,
    checked: scenario::Checked,
    kind: BackendKind,
    backend_ref: &BackendRef,
    context: Option<String>,
    once: &Once,
) -> anyhow::Result<Done> {
    // Which cluster this is and its timings, before anything is touched.
    let rt = runtime()?;
    let (config, found) = rt.block_on(async {
        let (config, context) = crate::discover::inspect::kube_config(context.clone()).await?;
        let found = crate::discover::inspect::inspect(&config, context, &checked.pins, args.profile).await?;
        anyhow::Ok((config, found))
    })?;
    tell(&found.notes);
    let mut plan = plan::resolve(checked, &found.profile, Some(kind))?;
    if let Some(c) = once.cleanup {
        plan.scenario.cleanup = c;
    }
    let file = args.file.display().to_string();
    let mut backend = AnyBackend::open(backend_ref)?;
    let kubeconfig = std::env::var_os("KUBECONFIG")
        .and_then(|v| std::env::split_paths(&v).next())
        .filter(|p| !p.as_os_str().is_empty());
    let mut journal = Journal::create(
        &journal::default_dir(),
        header(
            &plan,
            &file,
            backend_ref.clone(),
            KubeRef {
                kubeconfig,
                context: context.clone(),
            },
        ),
    )
    .context("opening the undo journal")?;
    let outcome = rt.block_on(async {
        let mut signals = once.signals()?;
        let progress = Progress::auto();
        anyhow::Ok(
            runner::run(
                &plan,
                &mut backend,
                config,
                &file,
                &progress,
                &mut journal,
                &mut signals,
                Limits::default(),
            )
            .await,
        )
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            close(journal);
            return Err(e);
        }
    };
    drop(rt);
    conclude(&args.out, once, &outcome, journal)
}

/// The discovery's remarks, before the run begins.
fn tell(notes: &[String]) {
    for n in notes {
        tracing::info!("timing: {n}");
    }
}

/// A flag's value is wrong (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidFlag(pub String);

/// Writes the reports (elsewhere if they cannot go where asked), closes
/// the journal when nothing is left to undo (or says what is), prints the
/// verdict, maps it to the exit code. The journal's fate does not hang on
/// the report's: a run whose changes were all reverted closes it, report
/// written or not, so later runs do not take it for a killed one.
fn conclude(
    out: &std::path::Path,
    once: &Once,
    outcome: &Outcome,
    journal: Journal,
) -> anyhow::Result<Done> {
    let result = &outcome.result;
    let dir = once
        .dir
        .clone()
        .unwrap_or_else(|| out.join(report::run_dir_name(&result.scenario, result.started_at)));
    let run_id = journal.state().header.as_ref().map_or_else(
        || report::run_dir_name(&result.scenario, result.started_at),
        |h| h.run.clone(),
    );
    let fallback = journal::fallback_reports_dir().join(run_id);
    let written = write_or_fallback(&dir, &fallback, |d| report::write_all(d, result));
    let left = outcome.unreverted.clone();
    let journal_path = journal.path().to_owned();
    if journal.state().pending.is_empty() {
        close(journal);
    }
    let mut code = exit_code(outcome);
    let dir = match written {
        Ok(Written::Asked(())) => dir,
        Ok(Written::Fallback { value: (), at, why }) => {
            tracing::error!(
                "error: the report could not be written where asked: {}; it was written to {} \
                 instead",
                crate::errors::chain(&why),
                at.display()
            );
            // The reports are not where the caller looks for them.
            if matches!(code, exit::PASS | exit::EXPECTATION_FAILED) {
                code = exit::INFRASTRUCTURE;
            }
            at
        }
        Err(e) => return Err(e.into()),
    };
    summarize(result, &dir);
    if let Some(why) = &outcome.abandoned {
        tracing::warn!("cleanup abandoned: {why}");
    }
    if !left.is_empty() {
        tracing::warn!(
            "still not reverted: {}\n  journal: {}\n  run `nodefall recover` to revert it",
            left.join(", "),
            journal_path.display()
        );
    }
    Ok(Done {
        code,
        result: result.clone(),
    })
}

/// Where reports went.
#[derive(Debug)]
pub(super) enum Written<T> {
    /// Where asked.
    Asked(T),
    /// Into the fallback directory `at`, because of `why`.
    Fallback {
        value: T,
        at: PathBuf,
        why: report::Error,
    },
}

/// Reports that could be written neither where asked nor in the fallback
/// directory.
#[derive(Debug, thiserror::Error)]
#[error(
    "the report could not be written: {}; nor in the fallback directory: {}",
    crate::errors::chain(&**.asked),
    crate::errors::chain(&**.fallback)
)]
pub struct ReportNotWritten {
    asked: Box<report::Error>,
    fallback: Box<report::Error>,
}

/// Writes with `write` into `asked`, else into `fallback` (the run's
/// results are not lost because the directory went away or became
/// read-only while it ran).
pub(super) fn write_or_fallback<T>(
    asked: &Path,
    fallback: &Path,
    write: impl Fn(&Path) -> Result<T, report::Error>,
) -> Result<Written<T>, ReportNotWritten> {
    let why = match write(asked) {
        Ok(v) => return Ok(Written::Asked(v)),
        Err(e) => e,
    };
    match write(fallback) {
        Ok(value) => Ok(Written::Fallback {
            value,
            at: fallback.to_owned(),
            why,
        }),
        Err(fallback) => Err(ReportNotWritten {
            asked: Box::new(why),
            fallback: Box::new(fallback),
        }),
    }
}

fn close(journal: Journal) {
    if let Err(e) = journal.close() {
        tracing::warn!("warning: {}", crate::errors::chain(&e));
    }
}

fn exit_code(outcome: &Outcome) -> u8 {
    if let Some(stop) = outcome.stopped_by {
        return stop.exit_code();
    }
    match outcome.result.verdict {
        _ if outcome.invalid_input => exit::INVALID_INPUT,
        // A change that could not be put back is an infrastructure failure,
        // whatever the expectations said.
        _ if !outcome.unreverted.is_empty() => exit::INFRASTRUCTURE,
        RunVerdict::Pass => exit::PASS,
        RunVerdict::Fail => exit::EXPECTATION_FAILED,
        RunVerdict::Error => exit::INFRASTRUCTURE,
        RunVerdict::Interrupted => exit::INTERRUPTED,
    }
}

fn summarize(result: &RunResult, dir: &std::path::Path) {
    let passed = result
        .expectations
        .iter()
        .filter(|e| e.verdict == record::Verdict::Pass)
        .count();
    let verdict = match result.verdict {
        RunVerdict::Pass => "PASS",
        RunVerdict::Fail => "FAIL",
        RunVerdict::Error => "ERROR",
        RunVerdict::Interrupted => "INTERRUPTED",
    };
    let aborted = result
        .aborted
        .as_ref()
        .map(|a| format!(" (aborted by guard `{}`)", a.guard))
        .unwrap_or_default();
    // The error itself was printed when the run stopped ("stopping: ...").
    outln!(
        "{verdict}{aborted}: {passed}/{} expectations held; report: {}",
        result.expectations.len(),
        dir.join("report.md").display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_marker(dir: &Path) -> Result<PathBuf, report::Error> {
        std::fs::create_dir_all(dir).map_err(|source| report::Error::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join("result.json");
        std::fs::write(&path, "{}").map_err(|source| report::Error::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    #[test]
    fn a_report_goes_where_asked_else_to_the_fallback_else_both_are_named() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let asked = tmp.path().join("out").join("run");
        let fallback = tmp.path().join("state").join("reports").join("run-1");
        let w = write_or_fallback(&asked, &fallback, write_marker).expect("written");
        assert!(matches!(w, Written::Asked(p) if p == asked.join("result.json")));
        assert!(!fallback.exists());

        // The directory was replaced by a file during the run.
        std::fs::remove_dir_all(tmp.path().join("out")).expect("removed");
        std::fs::write(tmp.path().join("out"), "x").expect("written");
        match write_or_fallback(&asked, &fallback, write_marker).expect("written") {
            Written::Fallback { value, at, why } => {
                assert_eq!(value, fallback.join("result.json"));
                assert_eq!(at, fallback);
                assert!(
                    why.to_string().starts_with(&format!(
                        "cannot create report directory {}",
                        asked.display()
                    )),
                    "{why}"
                );
            }
            Written::Asked(_) => panic!("written under a file"),
        }
        assert!(fallback.join("result.json").is_file());

        // Neither: both are named.
        let nowhere = tmp.path().join("out").join("fallback");
        let e = write_or_fallback(&asked, &nowhere, write_marker).unwrap_err();
        let e = e.to_string();
        assert!(e.contains(&asked.display().to_string()), "{e}");
        assert!(e.contains(&nowhere.display().to_string()), "{e}");
    }
}
