//! A cluster's name is a name, never a path: whatever a user passes as
//! `--name` or `--cluster`, nothing outside the state directory's own
//! cluster directories is read, created or deleted, and the refusal comes
//! before anything is built or started.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Files planted around the state root, none of them nodefall's.
const PLANTED: [&str; 5] = [
    "outer/canary",
    "outer/victim/canary",
    "outer/victim/sub/file",
    "abs/dir/canary",
    "abs/dir/sub/file",
];

/// A private tree: `outer/state` is the state root; beside it a planted
/// file, a planted directory, and an absolute directory elsewhere in it.
struct Tree {
    root: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let root = tempfile::tempdir().unwrap();
        let p = root.path();
        for dir in ["outer/state", "outer/victim/sub", "abs/dir/sub"] {
            std::fs::create_dir_all(p.join(dir)).unwrap();
        }
        for file in PLANTED {
            std::fs::write(p.join(file), "keep me").unwrap();
        }
        Tree { root }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.root.path().join(rel)
    }

    /// nodefall with this tree's state root and a cache that cannot be
    /// provisioned (a file where the directory should be): a build of
    /// the control plane fails at once instead of starting anything.
    fn nodefall(&self, args: &[&str]) -> Output {
        let cache = self.path("cache-is-a-file");
        std::fs::write(&cache, "").unwrap();
        Command::new(env!("CARGO_BIN_EXE_nodefall"))
            .args(args)
            .env("NODEFALL_STATE_DIR", self.path("outer/state"))
            .env("NODEFALL_JOURNAL_DIR", self.path("journals"))
            .env("NODEFALL_CACHE", &cache)
            .stdin(Stdio::null())
            .output()
            .expect("nodefall runs")
    }

    fn planted_all_there(&self) {
        for file in PLANTED {
            assert_eq!(
                std::fs::read_to_string(self.path(file)).ok().as_deref(),
                Some("keep me"),
                "{file} was touched"
            );
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Names that are paths, or not DNS labels.
fn bad_names(t: &Tree) -> Vec<String> {
    vec![
        "..".into(),
        ".".into(),
        "../victim".into(),
        "../../abs/dir".into(),
        t.path("abs/dir").display().to_string(),
        "a/b".into(),
        String::new(),
        "Upper".into(),
        "-lead".into(),
        "x".repeat(64),
        "tab\there".into(),
    ]
}

#[test]
fn sim_up_refuses_a_name_that_is_a_path_and_deletes_nothing() {
    let t = Tree::new();
    for name in bad_names(&t) {
        let out = t.nodefall(&["sim", "up", &format!("--name={name}")]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--name {name:?}: {err}");
        assert!(
            err.contains("a name, never a path"),
            "--name {name:?}: {err}"
        );
        t.planted_all_there();
    }
    // Nothing was created beside the state root either.
    let mut outer: Vec<String> = std::fs::read_dir(t.path("outer"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outer.sort();
    assert_eq!(outer, ["canary", "state", "victim"]);
    assert!(is_empty(&t.path("outer/state")));
}

#[test]
fn every_command_that_takes_a_cluster_name_refuses_a_path() {
    let t = Tree::new();
    let scenario = "scenarios/statefulset-nfs.yaml";
    for name in ["../victim", "..", "../../etc"] {
        for args in [
            vec!["sim", "down", "--name", name],
            vec!["sim", "kubeconfig", "--name", name],
            vec!["sim", "node", "freeze", "worker-1", "--name", name],
            vec!["scenario", scenario, "--cluster", name],
            vec!["plan", scenario, "--cluster", name],
        ] {
            let out = t.nodefall(&args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("a name, never a path"), "{args:?}: {err}");
            // No suggestion to start a cluster under that "name".
            assert!(!err.contains("sim up --name"), "{args:?}: {err}");
            t.planted_all_there();
        }
    }
    assert!(is_empty(&t.path("outer/state")));
}

#[test]
fn a_valid_name_is_refused_nothing_for_its_shape() {
    // The rule is a DNS label: these pass the name check and fail later
    // (no such cluster), as before.
    let t = Tree::new();
    for name in ["nodefall", "a", "scenario-3182", &"x".repeat(63)] {
        let out = t.nodefall(&["sim", "down", "--name", name]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains("no simulated cluster named"), "{name}: {err}");
    }
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}
