//! Honest skips. A test whose prerequisite is missing (a Docker engine,
//! the VM rig, chromium, provisioned binaries) must not pass quietly:
//! under CI it fails; elsewhere it is skipped out loud, with one line
//! `SKIPPED: <test>: <why>` written straight to stderr (libtest captures
//! only `eprintln!`, so the line shows even when the test passes) and
//! appended to the file `NODEFALL_SKIP_LOG` names, if any, for a runner to
//! count (`.ci/run` does; docs/testing.md).

use std::io::Write as _;

/// Whether this is a CI run: `CI` set to anything but empty, `false` or `0`.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "false" | "0"))
}

/// `test` cannot run because `why`: panics under CI, else reports the skip.
/// The caller returns right after.
pub fn skip(test: &str, why: &str) {
    assert!(
        !under_ci(),
        "{test}: {why}; CI must provide it (.ci/run installs and starts what the tests need)"
    );
    let line = format!("SKIPPED: {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os("NODEFALL_SKIP_LOG") {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            let _ = writeln!(
                std::io::stderr(),
                "cannot append to NODEFALL_SKIP_LOG {}: {e}",
                std::path::Path::new(&log).display()
            );
        }
    }
}

/// Whether the simulated cluster runs the kind driver's CSI attacher (Go
/// built it); if not, `test` is skipped (a failure under CI) and the caller
/// returns.
#[allow(dead_code, reason = "only the volume tests use it")]
pub fn unless_csi_attacher(cluster: &nodefall::sim::SimCluster, test: &str) -> bool {
    let runs = cluster
        .state()
        .components
        .iter()
        .any(|c| c.name == nodefall::sim::csi::ATTACHER);
    if !runs {
        skip(
            test,
            "the cluster runs no CSI attacher: Go built no scripts/kind/csi (`apt-get install golang`)",
        );
    }
    runs
}
