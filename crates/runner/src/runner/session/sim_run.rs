//! A run on a simulated cluster: a throwaway one started for it (under
//! the signal handlers: a signal during the start stops it cleanly) and torn
//! down after it, or a running one named with `--cluster`, inspected like
//! any other; the observer checked against its audit log.

use std::path::Path;

use super::super::journal::{self, BackendRef, KubeRef, Settled, Undo};
use super::super::{Cluster, Context, Journal, Limits, Progress, RunOutcome};
use super::{
    Done, Error, Once, Request, SimTarget, close, conclude, default_profile, header, runtime, tell,
};
use crate::backend::sim::SimBackend;
use crate::discover::inspect;
use crate::plan;
use crate::profile::TimingProfile;
use crate::record::{RunResult, RunVerdict};
use crate::scenario::{self, model::BackendKind};
use crate::shutdown::Signals;
use crate::sim::{self, SimCluster, UpOptions};

pub(super) fn run(
    req: &Request,
    checked: scenario::Checked,
    sim_run: &SimTarget,
    once: &Once,
) -> Result<Done, Error> {
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
            let rt = runtime().map_err(Error::Runtime)?;
            let found = rt.block_on(async {
                let config = c.config().await?;
                let found = inspect::inspect(
                    &config,
                    Some(sim::CONTEXT.to_owned()),
                    &checked.pins,
                    req.profile,
                )
                .await?;
                Ok::<_, Error>(found)
            })?;
            tell(&found.notes);
            found.profile
        }
        None => {
            let p = req
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
    let file = req.file.display().to_string();
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
    .map_err(Error::JournalOpen)?;
    let cluster_entry = if throwaway {
        Some(journal.will(Undo::Cluster {
            root: root.clone(),
            name: name.clone(),
        })?)
    } else {
        None
    };

    let rt = runtime().map_err(Error::Runtime)?;
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
                opts.exe = Some(std::env::current_exe().map_err(Error::Exe)?);
                let mut log = |m: &str| progress.log(&format!("sim: {m}"));
                tokio::select! {
                    up = SimCluster::up(&opts, &mut log) => up.map_err(Error::SimUp)?,
                    stop = signals.next() => {
                        // Dropping the start tears down what it had started;
                        // a build of the binaries in progress is stopped.
                        sim::binaries::cancel();
                        progress.finish();
                        let why = format!("interrupted by {stop} while starting the simulated cluster");
                        tracing::warn!("stopping: {why}");
                        let outcome = RunOutcome {
                            stopped_by: Some(stop),
                            ..RunOutcome::not_started(&plan, &file, &why, RunVerdict::Interrupted)
                        };
                        return Ok::<_, Error>((outcome, ClusterEnd::NeverUp));
                    }
                }
            }
        };
        let config = cluster.config().await?;
        let mut backend = SimBackend::for_run(cluster)
            .await
            .map_err(Error::Provisioner)?;
        let mut outcome = match Cluster::connect(config) {
            Ok(cluster) => {
                super::super::run(Context {
                    plan: &plan,
                    file: &file,
                    cluster,
                    backend: &mut backend,
                    journal: &mut journal,
                    signals: &mut signals,
                    progress: &progress,
                    limits: Limits::default(),
                })
                .await
            }
            Err(e) => {
                let why = format!("building a kube client: {e}");
                RunOutcome::not_started(&plan, &file, &why, RunVerdict::Error)
            }
        };
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
        Ok::<_, Error>((outcome, end))
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
    conclude(&req.out, once, &outcome, journal)
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
    // Who deleted what (a deletion has no field manager): the remediation
    // judged again with the log's authors, and force deletions as acts.
    let started = result.started_at;
    match tokio::task::block_in_place(|| crate::audit::deletions::read(log, started)) {
        Ok(deletions) if !deletions.is_empty() => {
            if let Some(t0) = result.t0 {
                let targets: Vec<String> = result.targets.values().cloned().collect();
                result.remediation = crate::verdict::remediation::judge(
                    &result.transitions,
                    t0,
                    &targets,
                    &result.steps,
                    &result.metrics,
                    &result.machines,
                    &deletions,
                );
            }
        }
        Ok(_) => {}
        Err(e) => progress.log(&format!(
            "audit: deletions not read: {}",
            crate::errors::chain(&e)
        )),
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
    outcome: &mut RunOutcome,
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
