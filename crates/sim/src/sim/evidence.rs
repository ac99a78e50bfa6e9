//! What a failed bring-up leaves for a look: its components' logs, moved
//! out of the cluster directory (which goes) to `<root>/.failed/NAME-UNIX/`,
//! where the error's log paths then point. The newest [`KEEP`] are kept.
//! `.failed` cannot be a cluster's name (names are DNS labels), so it never
//! meets one.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::Error;
use super::state::Layout;

/// Failed starts kept; older ones are removed.
pub const KEEP: usize = 5;

/// The directory holding the failed starts under a state root.
pub fn root_of(root: &Path) -> PathBuf {
    root.join(".failed")
}

/// Moves the logs of the failed cluster at `layout` to the failed-starts
/// directory, removes the cluster directory, prunes old failures, and
/// points `error`'s log path at the kept copy. The cluster's processes
/// must be stopped already. When the logs cannot be moved, the cluster
/// directory stays as it is (the error's paths stay right) and `error` is
/// returned unchanged.
pub fn keep(
    layout: &Layout,
    root: &Path,
    name: &str,
    mut error: Error,
) -> (Error, Option<PathBuf>) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let failed = root_of(root);
    let dest = failed.join(format!("{name}-{secs}"));
    let moved =
        std::fs::create_dir_all(&failed).and_then(|()| std::fs::rename(layout.logs(), &dest));
    if moved.is_err() {
        return (error, None);
    }
    let _ = std::fs::remove_dir_all(&layout.dir);
    prune(&failed, KEEP);
    if let Error::Timeout { log, .. } | Error::Exited { log, .. } = &mut error
        && let Ok(rel) = log.strip_prefix(layout.logs())
    {
        *log = dest.join(rel);
    }
    (error, Some(dest))
}

/// Removes all but the `keep` newest entries of `dir` (by modification time).
fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut all: Vec<(SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    all.sort();
    let extra = all.len().saturating_sub(keep);
    for (_, old) in all.into_iter().take(extra) {
        let _ = std::fs::remove_dir_all(old);
    }
}

/// A log's last lines for an error message, or that it printed nothing.
pub fn said(log: &Path, tail: &str) -> String {
    if tail.trim().is_empty() {
        format!("{} printed nothing", log.display())
    } else {
        format!("last lines of {}:\n{tail}", log.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_start_keeps_its_logs_and_the_newest_few() {
        let root = tempfile::tempdir().unwrap();
        for i in 0..KEEP + 2 {
            let layout = Layout::new(root.path(), &format!("c{i}")).unwrap();
            std::fs::create_dir_all(layout.logs()).unwrap();
            std::fs::write(layout.log("etcd"), format!("run {i}")).unwrap();
            let e = Error::Timeout {
                what: "x".into(),
                waited: std::time::Duration::from_secs(1),
                limit: std::time::Duration::from_secs(1),
                log: layout.log("etcd"),
                tail: String::new(),
            };
            let (e, kept) = keep(&layout, root.path(), &format!("c{i}"), e);
            let kept = kept.expect("kept");
            assert!(!layout.dir.exists(), "the cluster directory went");
            let Error::Timeout { log, .. } = &e else {
                panic!("{e}")
            };
            assert_eq!(log, &kept.join("etcd.log"));
            assert_eq!(std::fs::read_to_string(log).unwrap(), format!("run {i}"));
            // Distinct modification times for the pruning order.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let left = std::fs::read_dir(root_of(root.path())).unwrap().count();
        assert_eq!(left, KEEP);
        assert!(said(Path::new("/l"), " \n").ends_with("/l printed nothing"));
        assert!(said(Path::new("/l"), "boom").starts_with("last lines of /l:\nboom"));
    }
}
