//! Removing what `kind up` made: by `kind down`, after a failed or stopped
//! `up`, and by `nodefall recover`.

use std::path::Path;

use super::{Error, Tell};
use crate::exec::System;
use crate::kindlab::{self, host};
use crate::runner::Journal;
use crate::runner::journal::{self, BackendRef, Settled, Undo};

/// Undoes a kind cluster's host changes in their order: the cluster, and
/// only once none of its nodes is left the guard and the network; the
/// sysctls always. Settles each success in the journal; false if any is left.
pub fn teardown(journal: &mut Journal, say: &mut dyn FnMut(String)) -> bool {
    let pending = journal.state().undo_order();
    let of = |f: fn(&Undo) -> bool| {
        pending
            .iter()
            .filter(|p| f(&p.undo))
            .cloned()
            .collect::<Vec<_>>()
    };
    let mut ok = true;
    let mut nodes_gone = true;
    for p in of(|u| matches!(u, Undo::KindCluster { .. })) {
        if let Undo::KindCluster {
            kind,
            name,
            runtime,
            kubeconfig,
        } = &p.undo
        {
            let r = kindlab::delete(&System, runtime, kind, name, kubeconfig)
                .map_err(|e| crate::errors::chain(&e));
            nodes_gone &= r.is_ok();
            ok &= settle(journal, &p, r, say);
        }
    }
    for p in of(|u| matches!(u, Undo::Guard { .. } | Undo::Network { .. })) {
        if !nodes_gone {
            ok = false;
            say(format!("{}: kept while nodes are left", p.undo.describe()));
            continue;
        }
        let r = match &p.undo {
            Undo::Guard { bridge, tag } => host::guard_remove(&System, bridge, tag),
            Undo::Network {
                runtime,
                name,
                cluster,
            } => host::network_remove(&System, runtime, name, cluster),
            _ => Ok(()),
        };
        ok &= settle(journal, &p, r.map_err(|e| crate::errors::chain(&e)), say);
    }
    for p in of(|u| matches!(u, Undo::Sysctls { .. })) {
        if let Undo::Sysctls { values } = &p.undo {
            let r = match host::restore_sysctls(Path::new("/proc/sys"), values) {
                Ok(changed) => {
                    if !changed.is_empty() {
                        say(format!("sysctls put back: {}", changed.join(", ")));
                    }
                    Ok(())
                }
                Err(e) => Err(crate::errors::chain(&e)),
            };
            ok &= settle(journal, &p, r, say);
        }
    }
    ok
}

/// Settles one undo that succeeded and says how it went; false if it failed.
fn settle(
    journal: &mut Journal,
    p: &journal::Pending,
    r: Result<(), String>,
    say: &mut dyn FnMut(String),
) -> bool {
    let what = p.undo.describe();
    match r.and_then(|()| {
        journal
            .settle(p.id, Settled::Reverted)
            .map_err(|e| crate::errors::chain(&e))
    }) {
        Ok(()) => {
            say(format!("{what}: ok"));
            true
        }
        Err(e) => {
            say(format!("{what}: FAILED: {e}"));
            false
        }
    }
}

/// Removes the cluster `kind up` made under `name` (every unfinished
/// journal of it whose `kind up` is not running); false if anything is left.
pub fn down(name: &str, tell: &mut dyn Tell) -> Result<bool, Error> {
    kindlab::check_name(name).map_err(|e| Error::NoCluster(e.to_string()))?;
    let dir = journal::default_dir();
    let scan = journal::unfinished(&dir)?;
    let ours: Vec<_> = scan
        .runs
        .into_iter()
        .filter(|u| {
            u.state.pending.iter().any(|p| matches!(&p.undo, Undo::KindCluster { name: n, .. } if n == name))
                || (u.state.pending.iter().any(|p| p.undo.is_host())
                    && matches!(&u.header.backend, BackendRef::Kind { cluster, .. } if cluster == name))
        })
        .collect();
    if ours.is_empty() {
        return Err(Error::NoCluster(format!(
            "no kind cluster {name} made by `nodefall kind up` (no unfinished journal for it \
             in {}); a cluster made by kind itself is removed with `kind delete cluster --name {name}`",
            dir.display()
        )));
    }
    let mut all_ok = true;
    for u in ours {
        if u.in_use() {
            tell.out(format!(
                "{}: `kind up` is still running (pid {}); left alone",
                u.header.run, u.header.pid
            ));
            all_ok = false;
            continue;
        }
        tell.out(format!("removing kind cluster {name} ({})", u.header.run));
        let mut journal = Journal::reopen(&u.path)?;
        let ok = teardown(&mut journal, &mut |l| tell.out(format!("  {l}")));
        if ok {
            journal.close()?;
            std::fs::remove_dir_all(kindlab::cluster_dir(&kindlab::state_root(), name)).ok();
            tell.out("  done".into());
        } else {
            all_ok = false;
            tell.out(format!(
                "  left: run `nodefall kind down {name}` again once the cause is fixed"
            ));
        }
    }
    Ok(all_ok)
}
