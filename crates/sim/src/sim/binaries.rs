//! The control-plane binaries the simulated cluster runs, in a per-user cache
//! keyed by version. Missing ones are provisioned by the embedded
//! `scripts/provision-binaries.sh` (built with Go where available, else
//! downloaded from the official releases), never rebuilt once cached. When
//! the script fails, the error carries its last lines of output (which name
//! the failing command) and the path of its full log.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::Error;
use crate::exec::group;

/// The provisioning recipe, shared with CI (`scripts/provision-binaries.sh`).
const PROVISION_SCRIPT: &str = include_str!("../../../../scripts/provision-binaries.sh");

/// Component versions. Defaults match the script; the same environment
/// variables override both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Versions {
    pub kubernetes: String,
    pub etcd: String,
    pub kwok: String,
}

impl Versions {
    pub fn from_env() -> Versions {
        let var = |name: &str, default: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        Versions {
            kubernetes: var("NODEFALL_K8S_VERSION", "v1.35.4"),
            etcd: var("NODEFALL_ETCD_VERSION", "v3.5.35"),
            kwok: var("NODEFALL_KWOK_VERSION", "v0.8.0"),
        }
    }
}

/// The suffix of kwok's cache directory: the fixes `provision-binaries.sh`
/// builds kwok with (its `KWOK_FIX`; a binary cached before them is not used).
pub const KWOK_FIX: &str = "nodefall.2";

/// Paths of the binaries of one version set.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub versions: Versions,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    pub etcd: PathBuf,
    pub kwok: PathBuf,
    /// The kind clusters' CSI driver (`csi.rs`), whose attacher the cluster
    /// runs when it is there: built with Go only (it has no release to
    /// download), so a machine without Go runs without it.
    pub csi: PathBuf,
}

/// The cache root: `$NODEFALL_CACHE`, else `$XDG_CACHE_HOME/nodefall`, else `~/.cache/nodefall`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = env_path("NODEFALL_CACHE") {
        return dir;
    }
    if let Some(dir) = env_path("XDG_CACHE_HOME") {
        return dir.join("nodefall");
    }
    home().join(".cache").join("nodefall")
}

pub(super) fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

pub(super) fn home() -> PathBuf {
    env_path("HOME").unwrap_or_else(|| PathBuf::from("/tmp"))
}

impl Binaries {
    /// Where the binaries of `versions` live under `cache`.
    pub fn at(cache: &Path, versions: Versions) -> Binaries {
        let bin = cache.join("bin");
        let k8s = bin.join(format!("kubernetes-{}", versions.kubernetes));
        Binaries {
            kube_apiserver: k8s.join("kube-apiserver"),
            kube_controller_manager: k8s.join("kube-controller-manager"),
            kube_scheduler: k8s.join("kube-scheduler"),
            etcd: bin.join(format!("etcd-{}", versions.etcd)).join("etcd"),
            kwok: bin
                .join(format!("kwok-{}+{KWOK_FIX}", versions.kwok))
                .join("kwok"),
            csi: bin
                .join(format!("kind-csi-{}", super::csi::fingerprint()))
                .join("kind-csi"),
            versions,
        }
    }

    pub fn all(&self) -> [&Path; 5] {
        [
            &self.kube_apiserver,
            &self.kube_controller_manager,
            &self.kube_scheduler,
            &self.etcd,
            &self.kwok,
        ]
    }

    pub fn missing(&self) -> Vec<&Path> {
        self.all().into_iter().filter(|p| !p.is_file()).collect()
    }

    /// The cached binaries, provisioning whatever is missing first (the
    /// CSI driver too, where Go can build it). The script's progress goes to
    /// stderr.
    pub fn ensure() -> Result<Binaries, Error> {
        let cache = cache_root();
        let binaries = Binaries::at(&cache, Versions::from_env());
        let csi_failed = csi_failed(&binaries.csi);
        if binaries.missing().is_empty() && (binaries.csi.is_file() || csi_failed.is_some()) {
            if let Some(at) = csi_failed {
                warn_no_csi(&binaries.csi, &cache, Some(at));
            }
            return Ok(binaries);
        }
        tracing::info!(
            "nodefall: provisioning the simulated cluster's binaries into {} (once per version)",
            cache.display()
        );
        // The driver's sources, for the script to build from; removed after.
        let csi_src = cache.join("src").join(format!(
            "kind-csi-{}.{}",
            super::csi::fingerprint(),
            std::process::id()
        ));
        super::csi::write_sources(&csi_src)?;
        let mut command = provision_command(&cache, &binaries.versions);
        command
            .env("NODEFALL_CSI_SRC", &csi_src)
            .env("NODEFALL_CSI_BIN", &binaries.csi);
        let status = run_provision(command, &cache);
        let _ = std::fs::remove_dir_all(&csi_src);
        let status = status?;
        let missing: Vec<PathBuf> = binaries
            .missing()
            .into_iter()
            .map(Path::to_path_buf)
            .collect();
        if !missing.is_empty() {
            return Err(Error::Provision { status, missing });
        }
        if !binaries.csi.is_file() {
            // Not tried again for an hour: a build that fails (no module
            // proxy) would cost every sim run its time.
            let _ = std::fs::write(
                failed_marker(&binaries.csi),
                jiff::Timestamp::now().to_string(),
            );
            warn_no_csi(&binaries.csi, &cache, None);
        }
        Ok(binaries)
    }
}

/// How long a failed build of the CSI driver is not tried again.
const CSI_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Beside the driver's binary: when its build last failed.
fn failed_marker(csi: &Path) -> PathBuf {
    let mut name = csi.as_os_str().to_owned();
    name.push(".failed");
    PathBuf::from(name)
}

/// When the driver's build failed, if less than [`CSI_RETRY_AFTER`] ago.
fn csi_failed(csi: &Path) -> Option<jiff::Timestamp> {
    let at: jiff::Timestamp = std::fs::read_to_string(failed_marker(csi))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let age = jiff::Timestamp::now().duration_since(at);
    (age.as_secs() >= 0 && age.unsigned_abs() < CSI_RETRY_AFTER).then_some(at)
}

fn warn_no_csi(csi: &Path, cache: &Path, failed_at: Option<jiff::Timestamp>) {
    let when = failed_at.map_or_else(String::new, |at| {
        format!(
            " at {at}, not tried again for an hour (remove {} to try now)",
            failed_marker(csi).display()
        )
    });
    tracing::warn!(
        "nodefall: no CSI driver for the simulated cluster: {} was not built{when} (it needs Go; {} says why), \
         so volumes of {} will not attach on it",
        csi.display(),
        provision_log(cache).display(),
        super::csi::DRIVER
    );
}

/// The log the provisioning script keeps of its build commands' output.
pub fn provision_log(cache: &Path) -> PathBuf {
    cache.join("provision.log")
}

/// A command that runs the embedded provisioning script for `versions` into
/// `cache`; callers may add environment (tests put a fake `go` on `PATH`).
pub fn provision_command(cache: &Path, versions: &Versions) -> Command {
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(PROVISION_SCRIPT)
        .arg("provision-binaries")
        .env("NODEFALL_CACHE", cache)
        .env("NODEFALL_K8S_VERSION", &versions.kubernetes)
        .env("NODEFALL_ETCD_VERSION", &versions.etcd)
        .env("NODEFALL_KWOK_VERSION", &versions.kwok);
    command
}

/// Lines of the script's stderr kept for the error: enough for its failure
/// report (the failing command plus 25 lines of the log's tail).
const STDERR_TAIL_LINES: usize = 40;

/// Runs a [`provision_command`], passing its stderr through as it comes (a
/// cold build takes minutes and prints progress) while keeping the last lines,
/// which the error carries when the script fails: the error may be read
/// where that stream was not (a report, a CI summary).
pub fn run_provision(mut command: Command, cache: &Path) -> Result<ExitStatus, Error> {
    let _running = Running::new();
    // Its own process group, so that a cancelled run stops the script and
    // every `go build` it started, and nothing else.
    let mut child = group::spawn(command.stderr(Stdio::piped()))
        .map_err(|source| Error::io("running bash for provisioning", source))?;
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut tail = VecDeque::with_capacity(STDERR_TAIL_LINES);
        if let Some(stderr) = stderr {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            // A read error only ends the pass-through; the exit status still decides.
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                tracing::info!("{text}");
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(text.to_owned());
                line.clear();
            }
        }
        tail
    });
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|source| Error::io("waiting for the provisioning script", source))?
        {
            break status;
        }
        if CANCELLED.load(Ordering::SeqCst) {
            let pgid = group::of(&child).unwrap_or(i32::MAX);
            let _ = group::signal(pgid, Signal::SIGTERM);
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = group::signal(pgid, Signal::SIGKILL);
            let _ = child.wait();
            return Err(Error::Other(
                "provisioning was cancelled (its builds were stopped; binaries already built stay cached)".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let tail = reader.join().unwrap_or_default();
    if status.success() {
        return Ok(status);
    }
    Err(Error::Other(failure_message(
        status,
        &tail.into_iter().collect::<Vec<_>>(),
        &provision_log(cache),
        cache,
    )))
}

/// Set by the shutdown path: a running provisioning stops its builds.
static CANCELLED: AtomicBool = AtomicBool::new(false);

/// Provisioning runs in progress (each on a blocking thread of its own).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Told when a provisioning run ends.
static ENDED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Counts a provisioning run while it lasts.
struct Running;

impl Running {
    fn new() -> Running {
        RUNNING.fetch_add(1, Ordering::SeqCst);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
        ENDED.notify_waiters();
    }
}

/// How long [`cancel`] waits for the builds to stop (a run's own wait for
/// its script after SIGTERM is 5 s, then it SIGKILLs the group).
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Stops a provisioning run in progress (and any later one in this
/// process), and waits until it has stopped its builds, at most
/// [`CANCEL_WAIT`]: the process may exit right after, and a build must not
/// outlive it (CI saw one outlive a `nodefall scenario` stopped by SIGTERM:
/// the process exited before the run's thread had looked at the flag).
pub async fn cancel() {
    CANCELLED.store(true, Ordering::SeqCst);
    let stopped = async {
        loop {
            // Registered before the count is read, so an end in between
            // is not missed.
            let ended = ENDED.notified();
            let mut ended = std::pin::pin!(ended);
            ended.as_mut().enable();
            if RUNNING.load(Ordering::SeqCst) == 0 {
                return;
            }
            ended.await;
        }
    };
    let _ = tokio::time::timeout(CANCEL_WAIT, stopped).await;
}

/// The error text of a failed provisioning run: what failed, the script's own
/// report, where the full log is and what to do.
fn failure_message(status: ExitStatus, tail: &[String], log: &Path, cache: &Path) -> String {
    let mut text = format!(
        "provisioning the simulated cluster's binaries failed: the embedded \
         scripts/provision-binaries.sh exited ({status})"
    );
    if tail.is_empty() {
        text.push_str(" without output");
    } else {
        text.push_str("; its last lines of output:");
        for line in tail {
            text.push_str("\n  ");
            text.push_str(line);
        }
    }
    // The script creates the log before its first build command.
    if log.is_file() {
        text.push_str(&format!(
            "\n  full log of the build commands: {}",
            log.display()
        ));
    }
    text.push_str(&format!(
        "\n  fix the cause above and run again (binaries already built stay in {}), or put the \
         release binaries there by hand (docs/sim-backend.md, section Binaries)",
        cache.join("bin").display()
    ));
    text
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;

    use super::*;

    #[test]
    fn kwok_is_looked_for_where_the_script_builds_it() {
        assert!(
            PROVISION_SCRIPT.contains(&format!(
                "KWOK_FIX=\"{KWOK_FIX}\"\nkwok_dir=\"$CACHE/bin/kwok-$KWOK_VERSION+$KWOK_FIX\""
            )),
            "scripts/provision-binaries.sh names another kwok directory than {KWOK_FIX}"
        );
        let versions = Versions::from_env();
        let kwok = Binaries::at(Path::new("/c"), versions.clone()).kwok;
        assert_eq!(
            kwok,
            Path::new(&format!("/c/bin/kwok-{}+nodefall.2/kwok", versions.kwok))
        );
    }

    #[test]
    fn failure_message_carries_the_tail_and_names_the_log_only_when_it_exists() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = provision_log(dir.path());
        let status = ExitStatus::from_raw(3 << 8);
        let tail = vec!["[provision] error: `go build x` failed".to_owned()];

        let text = failure_message(status, &tail, &log, dir.path());
        assert!(text.contains("exited (exit status: 3); its last lines of output:\n  [provision] error: `go build x` failed\n"), "{text}");
        assert!(!text.contains("full log"), "no log written yet: {text}");
        assert!(text.contains("fix the cause above"), "{text}");

        std::fs::write(&log, "output").expect("write log");
        let text = failure_message(status, &[], &log, dir.path());
        assert!(
            text.contains("exited (exit status: 3) without output"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "full log of the build commands: {}",
                log.display()
            )),
            "{text}"
        );
    }

    /// A failed build of the driver is not tried again for an hour; a
    /// marker older than that, or unreadable, does not hold it back.
    #[test]
    fn a_failed_csi_build_waits_an_hour() {
        let dir = tempfile::tempdir().expect("temp dir");
        let csi = dir.path().join("kind-csi");
        assert_eq!(csi_failed(&csi), None, "never tried");
        let marker = failed_marker(&csi);
        assert_eq!(marker, dir.path().join("kind-csi.failed"));
        let now = jiff::Timestamp::now();
        std::fs::write(&marker, now.to_string()).expect("write");
        assert_eq!(csi_failed(&csi), Some(now));
        let old = now - jiff::SignedDuration::from_secs(3601);
        std::fs::write(&marker, old.to_string()).expect("write");
        assert_eq!(csi_failed(&csi), None, "an hour ago");
        std::fs::write(&marker, "garbage").expect("write");
        assert_eq!(csi_failed(&csi), None);
    }
}
