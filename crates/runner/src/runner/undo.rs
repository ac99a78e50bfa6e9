//! Reverting one journaled change: used by a run's cleanup and by
//! `nodefall recover` for a run that was killed.

use std::time::Duration;

use super::journal::{Journal, Settled, Undo};
use crate::actions;
use crate::backend::NodeFaults;
use crate::record::CommandRecord;

/// Taints the node lifecycle controller owns: whether they are there is the
/// controller's call, so cleanup never puts one back.
fn controller_owned(key: &str) -> bool {
    matches!(
        key,
        "node.kubernetes.io/not-ready"
            | "node.kubernetes.io/unreachable"
            | "node.kubernetes.io/unschedulable"
            | "node.kubernetes.io/memory-pressure"
            | "node.kubernetes.io/disk-pressure"
            | "node.kubernetes.io/pid-pressure"
            | "node.kubernetes.io/network-unavailable"
    )
}

/// Reverts one change. An object or node already gone counts as reverted.
/// Without a client (`nodefall recover` could not reach the cluster) only
/// faults can be reverted: they go through the backend alone. Returns what
/// the revert found, in words (empty: nothing to say).
pub async fn revert<B: NodeFaults>(
    undo: &Undo,
    client: Result<&kube::Client, &str>,
    backend: &mut B,
) -> Result<String, String> {
    match (undo, client) {
        (
            Undo::Fault {
                node, revert, memo, ..
            },
            _,
        ) => revert_fault(backend, node, *revert, memo.as_deref()).await,
        (_, Err(why)) => Err(format!("the cluster could not be reached: {why}")),
        (_, Ok(client)) => revert_change(undo, client).await.map(|()| String::new()),
    }
}

/// Reverts a change that is not a fault, through the API server.
async fn revert_change(undo: &Undo, client: &kube::Client) -> Result<(), String> {
    let kube = |e: actions::Error| crate::errors::chain(&e);
    match undo {
        // Reverted through the backend by `revert`.
        Undo::Fault { .. } => Ok(()),
        Undo::Taint {
            node,
            key,
            effect,
            was,
        } => {
            let Some((now, _)) = actions::node_marks(client, node, key, &effect.to_string())
                .await
                .map_err(kube)?
            else {
                return Ok(());
            };
            match was {
                None if now.is_some() => actions::untaint(client, node, key, Some(*effect))
                    .await
                    .map(|_| ())
                    .map_err(kube),
                Some(w) if now.as_ref() != Some(&w.value) && !controller_owned(key) => {
                    actions::taint(client, node, key, w.value.as_deref(), *effect)
                        .await
                        .map_err(kube)
                }
                _ => Ok(()),
            }
        }
        Undo::Unschedulable { node, was } => {
            match actions::node_marks(client, node, "", "")
                .await
                .map_err(kube)?
            {
                Some((_, now)) if now != *was => actions::set_unschedulable(client, node, *was)
                    .await
                    .map_err(kube),
                _ => Ok(()),
            }
        }
        Undo::Object {
            api_version,
            kind,
            namespace,
            name,
            uid,
        } => actions::delete_object(
            client,
            api_version,
            kind,
            namespace.as_deref(),
            name,
            uid.as_deref(),
        )
        .await
        .map(|_| ())
        .map_err(kube),
        Undo::Namespace { name, uid } => {
            let now = actions::namespace_uid(client, name).await.map_err(kube)?;
            match (now, uid) {
                (None, _) => Ok(()),
                // Recreated by someone else since: not ours.
                (Some(now), Some(uid)) if now != *uid => Ok(()),
                // Thousands of pods take minutes to go; the cleanup deadline
                // (180 s by default) bounds it anyway.
                _ => actions::delete_namespace(client, name, Duration::from_secs(170))
                    .await
                    .map_err(kube),
            }
        }
        Undo::Replicas {
            kind,
            namespace,
            name,
            was,
        } => {
            let replicas = u32::try_from(*was).unwrap_or(0);
            match actions::replicas(client, namespace, *kind, name)
                .await
                .map_err(kube)?
            {
                Some(now) if now != *was => {
                    actions::scale(client, namespace, *kind, name, replicas)
                        .await
                        .map_err(kube)
                }
                _ => Ok(()),
            }
        }
        Undo::Cluster { name, .. } => Err(format!(
            "the throwaway cluster {name} is torn down by the process that started it"
        )),
        Undo::Sysctls { .. }
        | Undo::Network { .. }
        | Undo::Guard { .. }
        | Undo::KindCluster { .. } => Err(format!(
            "{}: undone with its kind cluster (`nodefall kind down`, `nodefall recover`)",
            undo.describe()
        )),
    }
}

async fn revert_fault<B: NodeFaults>(
    backend: &mut B,
    node: &str,
    revert: crate::scenario::model::FaultKind,
    memo: Option<&str>,
) -> Result<String, String> {
    if let Some(m) = memo {
        backend.remember(node, m);
    }
    backend
        .restore(node, revert)
        .await
        .map_err(|e| crate::errors::chain(&e))
}

/// Reverts every pending change of a journal in undo order (faults first,
/// then the rest newest first) and settles each that succeeded; when `tidy`
/// names a policy that keeps changes (`Some("cleanup: never")`), only faults are reverted and the rest is settled as kept.
/// `on_delete` runs before the first deletion; `report` hears each outcome
/// with the external commands it ran (command backend).
/// Throwaway clusters are left to the caller.
pub async fn revert_all<B: NodeFaults>(
    journal: &mut Journal,
    client: Result<&kube::Client, &str>,
    backend: &mut B,
    tidy: Option<&str>,
    on_delete: impl FnMut(),
    report: impl FnMut(String, Result<(), String>, Vec<CommandRecord>),
) {
    revert_each(journal, client, backend, tidy, || {}, on_delete, report).await;
}

/// [`revert_all`], calling `begin` as each revert (or keep) begins, before
/// `on_delete`: what happens between `begin` and `report` (the revert with
/// its waits, a namespace's deletion until it is gone) is that revert's.
pub async fn revert_each<B: NodeFaults>(
    journal: &mut Journal,
    client: Result<&kube::Client, &str>,
    backend: &mut B,
    tidy: Option<&str>,
    mut begin: impl FnMut(),
    mut on_delete: impl FnMut(),
    mut report: impl FnMut(String, Result<(), String>, Vec<CommandRecord>),
) {
    for p in journal.state().undo_order() {
        if matches!(p.undo, Undo::Cluster { .. }) || p.undo.is_host() {
            continue;
        }
        begin();
        if let (Some(policy), false) = (tidy, p.undo.always()) {
            let r = journal
                .settle(p.id, Settled::Kept)
                .map_err(|e| crate::errors::chain(&e));
            report(
                format!("kept ({policy}): {}", p.undo.describe()),
                r,
                Vec::new(),
            );
            continue;
        }
        if matches!(p.undo, Undo::Namespace { .. } | Undo::Object { .. }) {
            on_delete();
        }
        let r = revert(&p.undo, client, backend).await;
        let commands = backend.take_commands();
        let description = match &r {
            Ok(found) if !found.is_empty() => format!("{} ({found})", p.undo.describe()),
            _ => p.undo.describe(),
        };
        let r = r.and_then(|_| {
            journal
                .settle(p.id, Settled::Reverted)
                .map_err(|e| crate::errors::chain(&e))
        });
        report(description, r, commands);
    }
}
