//! A new cluster's directory: made fresh, over a stale one left by a cluster
//! whose processes are gone, never over a running cluster nor over files
//! nodefall did not write.

use std::path::PathBuf;

use super::Error;
use super::process;
use super::state::{Layout, State};

/// Creates the cluster's directory, refusing to reuse one whose processes run.
pub(super) fn prepare_dir(layout: &Layout, name: &str) -> Result<(), Error> {
    if layout.state().is_file() {
        let stale = match State::load(&layout.state()) {
            Ok(old) => !old
                .components
                .iter()
                .chain(old.nodes.iter().filter_map(|n| n.agent.as_ref()))
                // A live reaper may be taking the old cluster down right
                // now and would remove the new directory with it.
                .chain(old.reaper.as_ref())
                .any(process::is_alive),
            Err(_) => true,
        };
        if !stale {
            return Err(Error::AlreadyRunning {
                name: name.to_owned(),
                dir: layout.dir.clone(),
            });
        }
    }
    if layout.dir.exists() {
        // Only what a cluster's bring-up writes is removed: a directory
        // holding anything else is not ours to delete.
        if let Some(stranger) = foreign_entry(layout) {
            return Err(Error::io_msg(format!(
                "{} holds {}, which no simulated cluster writes; nodefall deletes only its own \
                 files: move it away or pick another --name",
                layout.dir.display(),
                stranger.display()
            )));
        }
        std::fs::remove_dir_all(&layout.dir)
            .map_err(|e| Error::io(format!("removing stale {}", layout.dir.display()), e))?;
    }
    for dir in [
        layout.dir.clone(),
        layout.logs(),
        layout.etcd_data(),
        layout.csi(),
    ] {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    Ok(())
}

/// The first entry of a cluster directory that a bring-up does not write
/// (top level only: what a cluster writes lives in its own subdirectories).
fn foreign_entry(layout: &Layout) -> Option<PathBuf> {
    let ours = |name: &str| {
        matches!(
            name,
            "state.json"
                | "state.json.tmp"
                | "state.lock"
                | "kubeconfig"
                | "audit-policy.yaml"
                | "kwok-stages.yaml"
                | "pki"
                | "etcd"
                | "logs"
                | "csi"
        )
    };
    let entries = match std::fs::read_dir(&layout.dir) {
        Ok(entries) => entries,
        // Not a directory (a file of that name): not ours either.
        Err(_) => return Some(layout.dir.clone()),
    };
    entries
        .filter_map(Result::ok)
        .find(|e| !e.file_name().to_str().is_some_and(ours))
        .map(|e| e.path())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_directory_is_removed_only_when_all_it_holds_is_a_clusters() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::new(root.path(), "c1").unwrap();
        // A cluster's own leftovers (no state.json: a start that failed).
        for dir in [layout.logs(), layout.etcd_data(), layout.pki()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(layout.kubeconfig(), "").unwrap();
        std::fs::write(layout.log("etcd"), "old").unwrap();
        prepare_dir(&layout, "c1").unwrap();
        assert!(!layout.log("etcd").exists(), "the stale log went");
        assert!(layout.logs().is_dir() && layout.etcd_data().is_dir());
        // Something no cluster writes: refused, and left as it was.
        std::fs::write(layout.dir.join("notes.txt"), "mine").unwrap();
        let e = prepare_dir(&layout, "c1").unwrap_err().to_string();
        assert!(
            e.contains("notes.txt") && e.contains("deletes only its own"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(layout.dir.join("notes.txt")).unwrap(),
            "mine"
        );
        // A file where the directory would be: refused too.
        let file = Layout::new(root.path(), "c2").unwrap();
        std::fs::write(&file.dir, "a file").unwrap();
        assert!(prepare_dir(&file, "c2").is_err());
        assert_eq!(std::fs::read_to_string(&file.dir).unwrap(), "a file");
    }
}
