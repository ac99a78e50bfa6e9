//! Where a session's run happens, from before its journal opens to after
//! the run: the session's side of the cluster seam. A throwaway simulated
//! cluster is started for the run (under the signal handlers: a signal during
//! the start stops it cleanly) and torn down after it; a running one named
//! with `--cluster` is inspected like any other and left running; existing
//! machines (a kind cluster, libvirt domains, Vagrant boxes, commands) are
//! inspected, and their backend opened from the same [`BackendRef`] the
//! journal keeps, so `nodefall recover` reaches them the same way. Each gives
//! the run its kube config and its fault backend; a sim's audit log checks
//! the observer afterwards.

use std::path::{Path, PathBuf};

use super::super::journal::{BackendRef, KubeRef, Undo};
use super::super::{Progress, RunOutcome};
use super::{Error, On, Once, Request, SimTarget, default_profile, tell};
use crate::backend::any::AnyBackend;
use crate::backend::sim::SimBackend;
use crate::discover::inspect;
use crate::profile::TimingProfile;
use crate::record::RunResult;
use crate::scenario::model::BackendKind;
use crate::scenario::model::ClusterPin;
use crate::shutdown::{Signals, Stop};
use crate::sim::{self, SimCluster, UpOptions};

/// The cluster of one run, before it starts.
pub(super) enum Lab {
    Sim {
        root: PathBuf,
        /// The running cluster's name, or the throwaway one's to be.
        name: String,
        /// A running cluster named with `--cluster` (None: a throwaway one).
        existing: Option<Box<SimCluster>>,
        target: SimTarget,
    },
    Machines {
        kind: BackendKind,
        backend_ref: BackendRef,
        kube: KubeRef,
        /// Opened before the journal: a machine that cannot be reached is
        /// bad input, and nothing is journaled for it.
        backend: Option<Box<AnyBackend>>,
    },
}

/// A started lab: how to reach its API, and its faults.
pub(super) enum Started {
    Up(Box<(kube::Config, AnyBackend)>),
    /// A signal came while a throwaway cluster was starting.
    Interrupted(Stop),
}

/// How a run's cluster ended.
pub(super) enum ClusterEnd {
    /// Its start was interrupted (the start cleans up after itself).
    NeverUp,
    /// Torn down.
    Gone,
    /// Named, `--keep`, or not the session's (machines): left running.
    Kept,
    /// Its teardown failed or was cut short: `nodefall recover` finishes it.
    Left,
}

impl Lab {
    /// The lab `on` names; a simulated cluster named there must exist.
    pub(super) fn new(on: &On, kind: BackendKind, once: &Once) -> Result<Lab, Error> {
        Ok(match on {
            On::Sim(target) => {
                let root = sim::default_root();
                let existing = target
                    .cluster
                    .as_deref()
                    .map(|name| SimCluster::open(&root, name).map(Box::new))
                    .transpose()?;
                let name = existing.as_ref().map_or_else(
                    || match once.run {
                        Some(k) => format!("scenario-{}-{k}", std::process::id()),
                        None => format!("scenario-{}", std::process::id()),
                    },
                    |c| c.name().to_owned(),
                );
                Lab::Sim {
                    root,
                    name,
                    existing,
                    target: target.clone(),
                }
            }
            On::Machines { backend, kube } => Lab::Machines {
                kind,
                backend_ref: backend.clone(),
                kube: kube.clone(),
                backend: None,
            },
        })
    }

    pub(super) fn kind(&self) -> BackendKind {
        match self {
            Lab::Sim { .. } => BackendKind::Sim,
            Lab::Machines { kind, .. } => *kind,
        }
    }

    /// The timings to plan with: a running cluster's own (checked against
    /// the pins, discovered, told), a throwaway sim's named ones; and the
    /// kube config of a running cluster.
    pub(super) async fn timings(
        &mut self,
        req: &Request,
        pins: &[ClusterPin],
    ) -> Result<(TimingProfile, Option<kube::Config>), Error> {
        let (config, context) = match self {
            Lab::Sim { existing: None, .. } => {
                let p = req
                    .profile
                    .unwrap_or_else(|| default_profile(BackendKind::Sim));
                let profile = TimingProfile::named(p).set_by(&format!(
                    "nodefall started the simulated cluster with the `{p}` profile"
                ));
                return Ok((profile, None));
            }
            Lab::Sim {
                existing: Some(c), ..
            } => (c.config().await?, Some(sim::CONTEXT.to_owned())),
            Lab::Machines { kube, .. } => {
                inspect::kube_config(kube.kubeconfig.as_deref(), kube.context.clone()).await?
            }
        };
        let found = inspect::inspect(&config, context, pins, req.profile).await?;
        tell(&found.notes);
        Ok((found.profile, Some(config)))
    }

    /// Opens what must be reachable before the journal opens (a machines
    /// backend).
    pub(super) fn open(&mut self) -> Result<(), Error> {
        if let Lab::Machines {
            backend_ref,
            backend,
            ..
        } = self
        {
            *backend = Some(Box::new(AnyBackend::open(backend_ref)?));
        }
        Ok(())
    }

    /// How the journal records the lab, for `nodefall recover`.
    pub(super) fn refs(&self) -> Result<(BackendRef, KubeRef), Error> {
        Ok(match self {
            Lab::Sim {
                root,
                name,
                existing,
                ..
            } => (
                BackendRef::Sim {
                    root: root.clone(),
                    cluster: name.clone(),
                    throwaway: existing.is_none(),
                },
                KubeRef {
                    kubeconfig: Some(sim::state::Layout::new(root, name)?.kubeconfig()),
                    context: None,
                },
            ),
            Lab::Machines {
                backend_ref, kube, ..
            } => {
                // The file the client read, for `nodefall recover`.
                let kubeconfig = kube.kubeconfig.clone().or_else(|| {
                    std::env::var_os("KUBECONFIG")
                        .and_then(|v| std::env::split_paths(&v).next())
                        .filter(|p| !p.as_os_str().is_empty())
                });
                (
                    backend_ref.clone(),
                    KubeRef {
                        kubeconfig,
                        context: kube.context.clone(),
                    },
                )
            }
        })
    }

    /// What the journal holds before the lab starts: a throwaway cluster.
    pub(super) fn throwaway(&self) -> Option<Undo> {
        match self {
            Lab::Sim {
                root,
                name,
                existing: None,
                ..
            } => Some(Undo::Cluster {
                root: root.clone(),
                name: name.clone(),
            }),
            _ => None,
        }
    }

    /// Starts a throwaway cluster (a signal meanwhile stops the start), and
    /// gives the run its API and backend.
    pub(super) async fn start(
        self,
        config: Option<kube::Config>,
        profile: &TimingProfile,
        signals: &mut Signals,
        progress: &Progress,
    ) -> Result<Started, Error> {
        let (root, name, existing, target) = match self {
            Lab::Machines { backend, .. } => {
                let config = config.expect("a running cluster's config, from its timings");
                let backend = backend.expect("the backend, opened before the journal");
                return Ok(Started::Up(Box::new((config, *backend))));
            }
            Lab::Sim {
                root,
                name,
                existing,
                target,
            } => (root, name, existing, target),
        };
        let cluster = match existing {
            Some(c) => *c,
            None => {
                let mut opts = UpOptions::new(name, profile.clone());
                opts.root = root;
                opts.nodes = target.nodes;
                opts.shards = target.shards;
                opts.zones.clone_from(&target.zones);
                opts.exe = Some(std::env::current_exe().map_err(Error::Exe)?);
                let mut log = |m: &str| progress.log(&format!("sim: {m}"));
                tokio::select! {
                    up = SimCluster::up(&opts, &mut log) => up.map_err(Error::SimUp)?,
                    stop = signals.next() => {
                        // Dropping the start tears down what it had started;
                        // a build of the binaries in progress is stopped.
                        sim::binaries::cancel().await;
                        progress.finish();
                        return Ok(Started::Interrupted(stop));
                    }
                }
            }
        };
        let config = cluster.config().await?;
        let backend = SimBackend::for_run(cluster)
            .await
            .map_err(Error::Provisioner)?;
        Ok(Started::Up(Box::new((
            config,
            AnyBackend::Sim(Box::new(backend)),
        ))))
    }
}

/// After the run: a sim's audit log checks the observer, and a throwaway
/// cluster goes away now (inside the runtime, so a further signal can still
/// cut it short: the cluster's reaper and `nodefall recover` finish the job
/// then). Machines are not the session's to end.
pub(super) async fn end(
    backend: AnyBackend,
    target: Option<&SimTarget>,
    signals: &mut Signals,
    progress: &Progress,
    outcome: &mut RunOutcome,
) -> ClusterEnd {
    let AnyBackend::Sim(sim) = backend else {
        return ClusterEnd::Kept;
    };
    let cluster = sim.into_cluster();
    check_audit(&cluster.audit_log_path(), progress, &mut outcome.result).await;
    if outcome.abandoned.is_some() {
        // Dropped here: a cluster this process started is torn down on
        // drop; the journal keeps it for `nodefall recover` in case.
        return ClusterEnd::Left;
    }
    let (named, keep) = target.map_or((true, false), |t| (t.cluster.is_some(), t.keep));
    finish_cluster(cluster, named, keep, signals, outcome).await
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
