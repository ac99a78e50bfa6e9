//! `nodefall recover [RUN]`: reverts what killed runs left, from their undo
//! journals: resumes paused nodes, restarts stopped agents, powers nodes
//! back on, puts taints and cordons back, deletes what the runs applied,
//! tears down their throwaway clusters, and prints what it did.

use super::error::Error;
use std::path::Path;
use std::process::ExitCode;

use super::error::Context as _;

use super::runtime;
use crate::backend::NodeFaults;
use crate::backend::any::AnyBackend;
use crate::backend::sim::SimBackend;
use crate::exit;
use crate::runner::journal::{self, BackendRef, Header, Settled, Undo};
use crate::runner::{Journal, undo};
use crate::scenario::model::Cleanup;
use crate::sim::SimCluster;

pub fn run(only: Option<&str>) -> Result<ExitCode, Error> {
    let dir = journal::default_dir();
    let scan = journal::unfinished(&dir)
        .with_context(|| format!("reading the journals in {}", dir.display()))?;
    let named = |path: &Path, run: Option<&str>| {
        only.is_none_or(|r| {
            path.to_string_lossy() == r
                || path.file_stem().is_some_and(|s| s.to_string_lossy() == r)
                || run == Some(r)
        })
    };
    // A damaged journal is named and skipped; it neither stops the others
    // nor hides behind them (the exit code says something is left).
    let damaged: Vec<_> = scan
        .damaged
        .iter()
        .filter(|e| named(e.path(), None))
        .collect();
    for e in &damaged {
        outln!(
            "damaged {}; skipped: what its run changed cannot be read (check it by hand, then \
             move it out of {})",
            crate::errors::chain(*e),
            dir.display()
        );
    }
    let chosen: Vec<_> = scan
        .runs
        .into_iter()
        .filter(|u| named(&u.path, Some(&u.header.run)))
        .collect();
    if chosen.is_empty() {
        if !damaged.is_empty() {
            return Ok(exit::code(exit::INFRASTRUCTURE));
        }
        if let Some(r) = only {
            return Err(Error::msg(format!(
                "no unfinished run `{r}` in {} (see `ls {}`)",
                dir.display(),
                dir.display()
            )));
        }
        outln!("nothing to recover: no unfinished run in {}", dir.display());
        return Ok(exit::code(exit::PASS));
    }
    let rt = runtime()?;
    let mut failed = damaged.len();
    for u in chosen {
        let in_use = u.in_use();
        let header = u.header;
        if u.state.detached && only.is_none() {
            outln!(
                "{}: {} left running on purpose; `nodefall recover {}` (or `nodefall kind down`) \
                 removes it",
                header.run,
                header.scenario,
                header.run
            );
            continue;
        }
        if in_use {
            outln!(
                "{}: still running (pid {}); left alone",
                header.run,
                header.pid
            );
            continue;
        }
        outln!(
            "recovering {} (scenario {}, namespace {}, started {}, pid {} gone)",
            header.run,
            header.scenario,
            header.namespace,
            header.started_at,
            header.pid
        );
        let mut journal = Journal::reopen(&u.path)?;
        let ok = rt.block_on(recover_one(&header, &mut journal));
        if ok && journal.state().pending.is_empty() {
            let closed = journal.close()?;
            outln!("  done; journal closed: {}", closed.display());
        } else {
            failed += 1;
            outln!(
                "  left unreverted: {}; journal kept: {}",
                journal
                    .state()
                    .undo_order()
                    .iter()
                    .map(|p| p.undo.describe())
                    .collect::<Vec<_>>()
                    .join(", "),
                journal.path().display()
            );
        }
    }
    Ok(exit::code(if failed == 0 {
        exit::PASS
    } else {
        exit::INFRASTRUCTURE
    }))
}

fn print(description: String, r: Result<(), String>) {
    match r {
        Ok(()) => outln!("  {description}: ok"),
        Err(e) => outln!("  {description}: FAILED: {e}"),
    }
}

/// The commands a revert ran (command backend), under its line.
fn print_commands(commands: &[crate::record::CommandRecord]) {
    for c in commands {
        outln!("    ran `{}`: {}", c.line, c.status);
    }
}

/// Reverts one journal's pending changes; false if any failed.
async fn recover_one(header: &Header, journal: &mut Journal) -> bool {
    // A contained kind cluster (`nodefall kind up`): its host changes go
    // together, in their own order.
    if journal.state().pending.iter().any(|p| p.undo.is_host()) {
        return tokio::task::block_in_place(|| {
            crate::kind_up::teardown(journal, &mut |l| outln!("  {l}"))
        });
    }
    let keep = match header.cleanup {
        Cleanup::Always => None,
        // A killed run did not pass: what it left stays for a look.
        Cleanup::OnSuccess => Some("cleanup: on-success, and the run was killed"),
        Cleanup::Never => Some("cleanup: never"),
    };
    match &header.backend {
        BackendRef::Sim {
            root,
            cluster,
            throwaway: true,
        } => {
            // Its cluster is the run's own: tearing it down undoes all.
            let r = match SimCluster::open(root, cluster) {
                Ok(c) => tokio::task::spawn_blocking(move || c.down())
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map(|_| ()).map_err(|e| crate::errors::chain(&e))),
                Err(_) => Ok(()),
            };
            let ok = r.is_ok();
            print(format!("tear down throwaway sim cluster {cluster}"), r);
            if ok {
                for p in journal.state().pending.clone() {
                    let how = if matches!(p.undo, Undo::Cluster { .. }) {
                        Settled::Reverted
                    } else {
                        Settled::Superseded
                    };
                    journal.settle(p.id, how).ok();
                }
            }
            ok
        }
        BackendRef::Sim { root, cluster, .. } => {
            let opened = SimCluster::open(root, cluster).map_err(|e| crate::errors::chain(&e));
            let config = match &opened {
                Ok(c) => c.config().await.map_err(|e| crate::errors::chain(&e)),
                Err(e) => Err(e.clone()),
            };
            match (opened, config) {
                (Ok(c), Ok(config)) => {
                    let mut backend = SimBackend::new(c);
                    let ok = revert(journal, Ok(config), &mut backend, keep).await;
                    backend.cluster.detach();
                    ok
                }
                (Err(e), _) | (_, Err(e)) => {
                    print(format!("open sim cluster {cluster}"), Err(e));
                    false
                }
            }
        }
        other => {
            // kind, libvirt, command: the backend is opened from what the
            // journal says (libvirt: the URI and mapping; each fault's memo
            // holds its domain's UUID, or its revert's command line). Faults
            // are reverted even when the cluster cannot be reached.
            match AnyBackend::open(other) {
                Ok(mut b) => {
                    revert(
                        journal,
                        crate::discover::inspect::kube_config_at(
                            header.kube.kubeconfig.as_deref(),
                            header.kube.context.clone(),
                        )
                        .await,
                        &mut b,
                        keep,
                    )
                    .await
                }
                Err(e) => {
                    print(
                        format!("open the {} backend", other.kind()),
                        Err(crate::errors::chain(&e)),
                    );
                    false
                }
            }
        }
    }
}

/// Reverts a journal's changes; without a cluster (`config` failed) only
/// its faults, through the backend.
async fn revert<B: NodeFaults>(
    journal: &mut Journal,
    config: Result<kube::Config, String>,
    backend: &mut B,
    keep: Option<&str>,
) -> bool {
    let client = config.and_then(|c| kube::Client::try_from(c).map_err(|e| e.to_string()));
    if let Err(e) = &client {
        print(
            "reach the cluster (faults are still reverted)".into(),
            Err(e.clone()),
        );
    }
    let mut ok = client.is_ok();
    undo::revert_all(
        journal,
        client.as_ref().map_err(String::as_str),
        backend,
        keep,
        || {},
        |d, r, commands| {
            ok &= r.is_ok();
            print(d, r);
            print_commands(&commands);
        },
    )
    .await;
    ok
}
