//! nodefall's container image (the repository's `Dockerfile`), built from
//! this test build's own binary by `scripts/image/build.sh` with no registry,
//! and nodefall run in it as a user runs it against a kind cluster.
//!
//! Include it from a test crate with
//! `#[path = "support/image.rs"] mod image;` (Cargo builds only the files
//! directly under `tests/` as test crates). Every container started here is
//! named, labelled `io.nodefall.test=<LABEL>` and run with `--rm`; a guard
//! removes it if the test panics or times out while it runs.

#![allow(dead_code, reason = "each test crate uses its own part")]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The label every container started here carries, with this process's own
/// value: `docker ps -a --filter label=io.nodefall.test=<LABEL>` finds them.
pub const LABEL: &str = "io.nodefall.test";

/// This process's value of [`LABEL`].
pub fn label_value() -> String {
    format!("nodefall-image-{}", std::process::id())
}

/// The repository (mounted at `/work` in the container).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `docker ARGS`, waited for.
pub fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run docker {}: {e}", args.join(" ")))
}

/// Why the image cannot be built and run here, if it cannot: no Docker
/// engine, or neither the image nor its base in Docker's store and no
/// mmdebstrap to build the base. The caller skips (`support/skip.rs`).
pub fn missing() -> Option<String> {
    let info = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output();
    match info {
        Err(_) => return Some("docker is not installed (apt-get install docker.io)".into()),
        Ok(o) if !o.status.success() => {
            return Some("no Docker engine answers (docker info failed); start dockerd".into());
        }
        Ok(_) => {}
    }
    let present = |which: &str| {
        let tag = build_script(&[which, env!("CARGO_BIN_EXE_nodefall")]);
        tag.status.success()
            && docker(&[
                "image",
                "inspect",
                String::from_utf8_lossy(&tag.stdout).trim(),
            ])
            .status
            .success()
    };
    let have_mmdebstrap = Command::new("mmdebstrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_mmdebstrap && !present("--tag") && !present("--base-tag") {
        return Some(
            "mmdebstrap is not installed and the image's base is not built (apt-get install \
             mmdebstrap; scripts/image/build.sh builds the base from Debian's mirror)"
                .into(),
        );
    }
    None
}

fn build_script(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(repo().join("scripts/image/build.sh"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/image/build.sh: {e}"))
}

/// The image holding this test build's `nodefall` (`CARGO_BIN_EXE_nodefall`,
/// a debug build) and this host's Docker CLI: its tag,
/// `nodefall/nodefall:<version>-<12 hex>`. Built by `scripts/image/build.sh`
/// once per process, and reused from Docker's store while the inputs (the
/// binary, the Dockerfile, the script, the commit) stay the same: under 1 s
/// then, about 10 s for a new binary, a minute or two more when the base
/// must be made (mmdebstrap, from Debian's mirror). The image stays in
/// Docker's store; the script removes the one it built before from the same
/// binary path. Err: the script's error and its progress lines.
pub fn build() -> Result<String, String> {
    static TAG: OnceLock<Result<String, String>> = OnceLock::new();
    TAG.get_or_init(|| {
        let started = std::time::Instant::now();
        let out = build_script(&[env!("CARGO_BIN_EXE_nodefall")]);
        let progress = String::from_utf8_lossy(&out.stderr).into_owned();
        eprint!("{progress}");
        let tag = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || tag.is_empty() {
            return Err(format!(
                "scripts/image/build.sh {} failed ({}):\n{progress}",
                env!("CARGO_BIN_EXE_nodefall"),
                out.status
            ));
        }
        eprintln!("image {tag}: {:.1} s", started.elapsed().as_secs_f64());
        Ok(tag)
    })
    .clone()
}

/// The Docker socket on this host (`DOCKER_HOST=unix://PATH`, else
/// `/var/run/docker.sock`), mounted at `/var/run/docker.sock` in the
/// container.
pub fn docker_socket() -> PathBuf {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"))
}

/// The `--user` and `--group-add` arguments that run a container as this
/// process's user, able to use the Docker socket (its group): what it writes
/// to mounted directories is this user's, as if nodefall ran on the host.
pub fn as_this_user() -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    // /proc/self belongs to this process's effective user and group.
    let me = std::fs::metadata("/proc/self").unwrap_or_else(|e| panic!("/proc/self: {e}"));
    let mut args = vec!["--user".to_owned(), format!("{}:{}", me.uid(), me.gid())];
    if let Ok(m) = std::fs::metadata(docker_socket()) {
        args.extend(["--group-add".to_owned(), m.gid().to_string()]);
    }
    args
}

/// A container this process started: removed however the test ends.
pub struct Container(pub String);

impl Container {
    /// A fresh name (`nodefall-image-<pid>-<n>`), the guard of the container
    /// that will carry it.
    pub fn fresh() -> Container {
        static N: AtomicU32 = AtomicU32::new(0);
        Container(format!(
            "{}-{}",
            label_value(),
            N.fetch_add(1, Ordering::Relaxed)
        ))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Gone already after a normal end (--rm); this covers a panic or a
        // stop while `docker run` waits.
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

/// `docker run --rm --init [DOCKER_ARGS] IMAGE [ARGS]` under a [`Container`]
/// guard, named and labelled; its status and its stdout and stderr together
/// (printed too, for a failure's log). `ARGS` go to nodefall (the image's
/// entrypoint) unless `DOCKER_ARGS` holds `--entrypoint`.
pub fn run(image: &str, docker_args: &[String], args: &[&str]) -> (ExitStatus, String) {
    let guard = Container::fresh();
    let mut cmd = Command::new("docker");
    cmd.args(["run", "--rm", "--init", "--name", &guard.0, "--label"])
        .arg(format!("{LABEL}={}", label_value()))
        .args(docker_args)
        .arg(image)
        .args(args);
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run docker run: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!(
        "$ docker run {} {image} {}\n{said}",
        docker_args.join(" "),
        args.join(" ")
    );
    drop(guard);
    (o.status, said)
}

/// `nodefall ARGS` in `image`, as a user runs it against a kind cluster on
/// this host (docs/container-image.md), to its end; its status and its
/// stdout and stderr together (printed too).
///
/// - `--network host`: the API server at the kubeconfig's `127.0.0.1:PORT`
///   and the scenarios' probes on `127.0.0.1` are the host's;
/// - the Docker socket mounted (the kind backend's `docker pause`, `kill`,
///   `network connect`, ... reach the host's engine), as this process's user
///   with the socket's group ([`as_this_user`]);
/// - `kubeconfig` mounted read-only at `/kubeconfig`, `KUBECONFIG=/kubeconfig`
///   (its context `kind-NAME` is the one `--kind-cluster NAME` picks;
///   `--context` picks another);
/// - the repository mounted read-only at `/work`, the working directory:
///   `scenarios/...` paths work as on the host;
/// - `reports` mounted read-write at `/work/reports`, nodefall's default
///   `--out` (`--out reports/SUB` writes under `reports/SUB` on the host);
/// - `state` mounted read-write at `/state`, the image's `XDG_STATE_HOME`:
///   pass the directory the host's runs use as `XDG_STATE_HOME` and the run's
///   journal is `state/nodefall/runs/<run>.jsonl` on the host, surviving the
///   container (a `docker kill` of it, a lost runner): `run(.., &["recover"])`
///   with the same `state` reverts what it left. A cluster `nodefall kind up`
///   made is known by its files there too (`state/nodefall/kind/NAME`: its
///   network, and `--kind-cluster NAME` finds its kubeconfig by itself).
///
/// `KIND_EXPERIMENTAL_DOCKER_NETWORK` and `RUST_LOG` are passed on when this
/// process has them. The container is removed however the call ends.
///
/// Pass `--kind-cluster NAME` for a kind scenario: without it the kind
/// backend looks for the cluster `kind`.
///
/// ```ignore
/// let tag = image::build().unwrap();
/// let (status, out) = image::run_for_kind(&tag, &kubeconfig, state, reports, &[
///     "scenario", "scenarios/kind-pause-worker.yaml", "--backend", "kind", "--kind-cluster", NAME,
/// ]);
/// ```
///
/// Measured by hand with these mounts (the release image, a cluster `nodefall
/// kind up --profile fast` made, its `XDG_STATE_HOME` as `state`):
/// kind-pause-worker passed 9/9 in 45 s; with the container killed after the
/// pause, the worker stayed paused and `recover` in the image unpaused it and
/// deleted the namespace in 5.7 s.
pub fn run_for_kind(
    image: &str,
    kubeconfig: &Path,
    state: &Path,
    reports: &Path,
    args: &[&str],
) -> (ExitStatus, String) {
    let mount = |host: &Path, inside: &str, ro: bool| {
        let host = std::fs::canonicalize(host)
            .unwrap_or_else(|e| panic!("{} (to mount at {inside}): {e}", host.display()));
        format!(
            "type=bind,source={},target={inside}{}",
            host.display(),
            if ro { ",readonly" } else { "" }
        )
    };
    let mut docker_args: Vec<String> = vec!["--network".into(), "host".into()];
    docker_args.extend(as_this_user());
    for (host, inside, ro) in [
        (docker_socket().as_path(), "/var/run/docker.sock", false),
        (kubeconfig, "/kubeconfig", true),
        (repo().as_path(), "/work", true),
        (reports, "/work/reports", false),
        (state, "/state", false),
    ] {
        docker_args.extend(["--mount".into(), mount(host, inside, ro)]);
    }
    docker_args.extend(["--env".into(), "KUBECONFIG=/kubeconfig".into()]);
    for name in ["KIND_EXPERIMENTAL_DOCKER_NETWORK", "RUST_LOG"] {
        if let Ok(v) = std::env::var(name) {
            docker_args.extend(["--env".into(), format!("{name}={v}")]);
        }
    }
    run(image, &docker_args, args)
}

/// The containers this process started that are still there (none, after
/// every [`run`] returned).
pub fn leftovers() -> Vec<String> {
    let filter = format!("label={LABEL}={}", label_value());
    let o = docker(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}
