//! What `nodefall --version` says about the build, as `NODEFALL_BUILD_*`
//! compile-time variables (src/cli/version.rs puts them together): the commit
//! (`git rev-parse --short=12 HEAD`, with `-dirty` when the binary's sources
//! differ from it), the commit's date, the enabled features, the target and
//! the profile.
//!
//! Without a `.git` here (a source tarball, a container build), or without
//! git, the commit is `unknown` unless `NODEFALL_COMMIT` (and
//! `NODEFALL_COMMIT_DATE`) say it; each also overrides what git says.
//!
//! The script runs again when HEAD moves (`.git/HEAD`, the branch's ref or
//! `packed-refs`), when an override changes, and when a source changes (which
//! recompiles the binary anyway), not on every build: a commit is named right
//! after it is made, and an edit to the docs or tests rebuilds nothing. (A
//! `.git` that appears after a build without one is noticed at the next
//! change to a source.)

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the binary is built from, relative to this manifest: `-dirty` means a
/// change under one of these (untracked files included), and a change under
/// them makes this script run again. (crates/sim embeds
/// scripts/provision-binaries.sh; the tests and docs are not in the binary.)
const SOURCES: &[&str] = &[
    "build.rs",
    "Cargo.toml",
    "Cargo.lock",
    "src",
    "crates",
    "scripts/provision-binaries.sh",
];

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo::rerun-if-env-changed=NODEFALL_COMMIT");
    println!("cargo::rerun-if-env-changed=NODEFALL_COMMIT_DATE");
    for source in SOURCES {
        // A path that does not exist would make cargo run this script on
        // every build.
        if dir.join(source).exists() {
            println!("cargo::rerun-if-changed={source}");
        }
    }

    let commit_override = setting(
        "NODEFALL_COMMIT",
        "a commit id (7 to 64 hex digits, then -dirty or not)",
        commit_id,
    );
    let date_override = setting(
        "NODEFALL_COMMIT_DATE",
        "a date, YYYY-MM-DD (alone or starting an ISO 8601 time)",
        day,
    );
    let (commit, git_date) = match commit_override {
        Some(commit) => (Some(commit), None),
        None => match git_commit(&dir) {
            Some((commit, date)) => (Some(commit), date),
            None => (None, None),
        },
    };
    let date = date_override.or(git_date);

    // CARGO_FEATURE_LIBVIRT for the feature `libvirt`; `default` is no
    // feature of its own.
    let mut features: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| {
            k.to_str()?
                .strip_prefix("CARGO_FEATURE_")
                .map(str::to_lowercase)
        })
        .filter(|f| f != "default")
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(",")
    };

    let short = match (&commit, &date) {
        (Some(c), Some(d)) => format!("{c} {d}"),
        (Some(c), None) => c.clone(),
        (None, _) => "commit unknown".to_owned(),
    };
    let unknown = || "unknown".to_owned();
    emit("NODEFALL_BUILD_SUMMARY", &short);
    emit("NODEFALL_BUILD_COMMIT", &commit.unwrap_or_else(unknown));
    emit("NODEFALL_BUILD_COMMIT_DATE", &date.unwrap_or_else(unknown));
    emit("NODEFALL_BUILD_FEATURES", &features);
    emit("NODEFALL_BUILD_TARGET", &env_or_unknown("TARGET"));
    emit("NODEFALL_BUILD_PROFILE", &env_or_unknown("PROFILE"));
}

fn emit(name: &str, value: &str) {
    println!("cargo::rustc-env={name}={value}");
}

fn env_or_unknown(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| "unknown".to_owned())
}

/// An override from the environment, checked by `parse`; unset or empty is
/// none. A value `parse` refuses (not `what` it should be) stops the build:
/// whoever set it meant the binary to say something.
fn setting(name: &str, what: &str, parse: fn(&str) -> Option<String>) -> Option<String> {
    let value = std::env::var(name).ok()?;
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    match parse(value) {
        Some(v) => Some(v),
        None => {
            eprintln!("{name}={value:?} is not {what}");
            std::process::exit(1);
        }
    }
}

/// A commit id of 7 to 64 hex digits, with `-dirty` or not; shortened to 12
/// digits, as git names it here (`NODEFALL_COMMIT=$GITHUB_SHA` works).
fn commit_id(v: &str) -> Option<String> {
    let (hex, dirty) = match v.strip_suffix("-dirty") {
        Some(hex) => (hex, "-dirty"),
        None => (v, ""),
    };
    let ok = (7..=64).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| format!("{}{dirty}", hex[..hex.len().min(12)].to_ascii_lowercase()))
}

/// A date as `YYYY-MM-DD`, alone or starting an ISO 8601 time (`git log
/// --format=%cI`); the day is kept.
fn day(v: &str) -> Option<String> {
    let d = v.get(..10)?;
    let shape = d.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'-',
        _ => b.is_ascii_digit(),
    });
    let rest = &v[10..];
    (shape && (rest.is_empty() || rest.starts_with('T') || rest.starts_with(' ')))
        .then(|| d.to_owned())
}

/// git run in `dir` on this checkout as it is on disk: the variables a git
/// hook sets (which could point elsewhere) are dropped. Its trimmed stdout,
/// or none if it cannot run or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .output();
    match out {
        Ok(out) if out.status.success() => {
            Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err.lines().next().unwrap_or("").trim();
            println!(
                "cargo::warning=commit unknown: `git {}` failed: {first}",
                args.join(" ")
            );
            None
        }
        Err(e) => {
            println!("cargo::warning=commit unknown: cannot run git: {e}");
            None
        }
    }
}

/// This checkout's commit (with `-dirty`) and its date, if `dir` is the top of
/// a git work tree (`.git` there, a directory or a worktree's file) and git
/// runs. Also says which files to watch for HEAD moving.
fn git_commit(dir: &Path) -> Option<(String, Option<String>)> {
    let dot_git = dir.join(".git");
    // No .git here: not a checkout (or a crate inside someone else's
    // repository, whose commit is not this one's).
    let (git_dir, common_dir) = if dot_git.is_dir() {
        (dot_git.clone(), dot_git)
    } else if dot_git.is_file() {
        // A worktree (or a submodule): HEAD in its own git directory, the
        // branches in the common one.
        let dirs = git(dir, &["rev-parse", "--git-dir", "--git-common-dir"])?;
        let mut lines = dirs.lines().map(|l| dir.join(l));
        let git_dir = lines.next()?;
        let common = lines.next().unwrap_or_else(|| git_dir.clone());
        (git_dir, common)
    } else {
        return None;
    };
    watch_head(&git_dir, &common_dir);

    let commit = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    let date = git(
        dir,
        &[
            "show",
            "-s",
            "--no-show-signature",
            "--date=short",
            "--format=%cd",
            "HEAD",
        ],
    )
    .filter(|d| day(d).is_some());
    // --no-optional-locks: reading the status must not rewrite the index
    // (which another git command may hold).
    let mut status = vec![
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=normal",
        "--",
    ];
    status.extend(SOURCES);
    let dirty = match git(dir, &status) {
        Some(changes) => !changes.is_empty(),
        None => true, // cannot tell: not claimed clean
    };
    let commit = if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    };
    Some((commit, date))
}

/// Asks cargo to run this script again when HEAD moves: HEAD itself (a
/// checkout, a commit on a detached HEAD), the branch's ref (a commit, a
/// reset), or, for a branch whose ref is packed, `packed-refs` and the
/// directory its loose ref would appear in.
fn watch_head(git_dir: &Path, common_dir: &Path) {
    let head = git_dir.join("HEAD");
    watch(&head);
    let Ok(text) = std::fs::read_to_string(&head) else {
        return;
    };
    if let Some(name) = text.trim().strip_prefix("ref: ") {
        // Branches live in the common directory; a worktree's own refs in its
        // git directory.
        let own = git_dir.join(name);
        let loose = if own.is_file() {
            own
        } else {
            common_dir.join(name)
        };
        if loose.is_file() {
            watch(&loose);
        } else if let Some(parent) = loose.parent() {
            watch(parent);
        }
    }
    watch(&common_dir.join("packed-refs"));
    // The reftable format (git 2.45+) keeps every ref there.
    watch(&common_dir.join("reftable"));
}

fn watch(path: &Path) {
    if path.exists() {
        println!("cargo::rerun-if-changed={}", path.display());
    }
}
