//! What `nodefall -V` and `nodefall --version` print: the package version and
//! what build.rs found out about the build (the commit, with `-dirty` when the
//! binary's sources differ from it; its date; the features; the target).

/// `-V`: one line, `0.1.0 (abc123def456 2025-11-28)`, or `0.1.0 (commit
/// unknown)` for a build from sources without git and without
/// `NODEFALL_COMMIT` (clap puts the name in front).
pub const SHORT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("NODEFALL_BUILD_SUMMARY"),
    ")"
);

/// `--version`: the line `-V` prints, then one `key: value` line each, as
/// `rustc -vV` does.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("NODEFALL_BUILD_SUMMARY"),
    ")\ncommit-hash: ",
    env!("NODEFALL_BUILD_COMMIT"),
    "\ncommit-date: ",
    env!("NODEFALL_BUILD_COMMIT_DATE"),
    "\nfeatures: ",
    env!("NODEFALL_BUILD_FEATURES"),
    "\ntarget: ",
    env!("NODEFALL_BUILD_TARGET"),
    "\nprofile: ",
    env!("NODEFALL_BUILD_PROFILE"),
);
