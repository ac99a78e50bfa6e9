//! The provisioning script (`scripts/provision-binaries.sh`, also embedded in
//! the binary) on a fresh machine: an empty cache and a fake `go` first on
//! PATH, so the script's real code paths run in a second without a network.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

#[path = "support/skip.rs"]
mod skip;

/// A stand-in for `go` that does what the script asks of it:
/// `mod download -json` writes an upstream go.mod with a dependency that is
/// replaced by a local path but not required (as k8s.io/sample-cli-plugin in
/// k8s.io/kubernetes) and prints the JSON the script parses; `mod tidy` keeps a
/// copy of the wrapper go.mod for the test to read (for kwok: a source tree
/// holding upstream's `ipPool()`); `build` writes an executable where asked (a second later with FAKE_GO_SLOW_BUILD;
/// with FAKE_GO_REAL_BIN, a copy of the real binary of that name from there,
/// kube-apiserver's after FAKE_GO_APISERVER_SECS), or `build` fails when
/// FAKE_GO_FAIL_BUILD is set. Anything else is an error, so a new go command in the script shows.
const FAKE_GO: &str = r#"#!/usr/bin/env bash
set -eu
case "$1 ${2:-}" in
  "mod download")
    mod="${*: -1}"
    gomod="$FAKE_GO_DIR/upstream.go.mod"
    cat >"$gomod" <<MOD
module ${mod%@*}

go 1.24

require (
	k8s.io/api v0.0.0
	github.com/example/pinned v1.2.3
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/sample-cli-plugin => ./staging/src/k8s.io/sample-cli-plugin
	github.com/example/pinned => ./third_party/pinned
)
MOD
    src="$FAKE_GO_DIR/src-$(basename "${mod%@*}")"
    if [[ "$mod" == sigs.k8s.io/kwok@* ]]; then
      # kwok's ipPool() and onNodeManaged() as upstream writes them
      # (FAKE_GO_KWOK_CHANGED=pool or =lease: one as a later version might),
      # read-only as in the module cache.
      c="$src/pkg/kwok/controllers"
      mkdir -p "$c"
      if [[ "${FAKE_GO_KWOK_CHANGED:-}" == pool ]]; then
        printf '\tpool = c.newPool(cidr)\n' >"$c/pod_controller.go"
      else
        printf '\tpool = newIPPool(ipnet)\n\tc.ipPools.Store(cidr, pool)\n\treturn pool, nil\n' \
          >"$c/pod_controller.go"
      fi
      printf 'import (\n\t"time"\n)\n\n' >"$c/node_lease_controller.go"
      if [[ "${FAKE_GO_KWOK_CHANGED:-}" == lease ]]; then
        printf 'func (c *NodeLeaseController) onNodeManaged(ctx context.Context, nodeName string) {\n' \
          >>"$c/node_lease_controller.go"
      else
        printf 'func (c *NodeLeaseController) onNodeManaged(nodeName string) {\n' \
          >>"$c/node_lease_controller.go"
      fi
      printf '\tc.onNodeManagedFunc(nodeName)\n}\n' >>"$c/node_lease_controller.go"
      chmod a-w "$c"/*.go
    fi
    printf '{\n\t"Path": "%s",\n\t"Version": "%s",\n\t"GoMod": "%s",\n\t"Dir": "%s"\n}\n' "${mod%@*}" "${mod#*@}" "$gomod" "$src"
    ;;
  "mod tidy")
    cp go.mod "$FAKE_GO_DIR/tidied-$(basename "$PWD").go.mod"
    ;;
  "build "*)
    if [[ -n "${FAKE_GO_HANG_BUILD:-}" ]]; then
      echo $$ >"$FAKE_GO_DIR/hang.pid"
      exec sleep 600
    fi
    if [[ -n "${FAKE_GO_SLOW_BUILD:-}" ]]; then
      sleep 1
    fi
    if [[ -n "${FAKE_GO_FAIL_BUILD:-}" ]]; then
      echo "fake go: cannot build ${*: -1}: undefined: frobnicate" >&2
      exit 1
    fi
    if [[ "${*: -1}" == ./cmd/kwok ]]; then
      cp pkg/kwok/controllers/pod_controller.go "$FAKE_GO_DIR/built-kwok-pod_controller.go"
      cp pkg/kwok/controllers/node_lease_controller.go "$FAKE_GO_DIR/built-kwok-node_lease_controller.go"
    fi
    while [[ "$1" != -o ]]; do shift; done
    if [[ -n "${FAKE_GO_REAL_BIN:-}" ]]; then
      name="$(basename "$2" .tmp)"
      [[ "$name" != kube-apiserver ]] || sleep "${FAKE_GO_APISERVER_SECS:-0}"
      cp "$FAKE_GO_REAL_BIN/$name" "$2"
    else
      printf '#!/bin/sh\n' >"$2" && chmod +x "$2"
    fi
    ;;
  *)
    echo "fake go: unexpected arguments: $*" >&2
    exit 2
    ;;
esac
"#;

/// A fresh machine: empty cache, state and temp dirs, the fake go on PATH.
struct Machine {
    dir: TempDir,
}

impl Machine {
    fn new() -> Machine {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["bin", "cache", "fake-go", "tmp", "state", "reports"] {
            std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
        }
        let go = dir.path().join("bin/go");
        std::fs::write(&go, FAKE_GO).expect("write fake go");
        let mut perms = std::fs::metadata(&go).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&go, perms).expect("chmod");
        Machine { dir }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    fn cache(&self) -> PathBuf {
        self.path("cache")
    }

    /// `command` with this machine's environment.
    fn env(&self, mut command: Command) -> Command {
        let path = format!(
            "{}:{}",
            self.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .env("PATH", path)
            .env("NODEFALL_CACHE", self.cache())
            .env("NODEFALL_STATE_DIR", self.path("state"))
            .env("NODEFALL_JOURNAL_DIR", self.path("state").join("runs"))
            .env("FAKE_GO_DIR", self.path("fake-go"))
            .env("TMPDIR", self.path("tmp"))
            // Versions from the script's defaults, not the caller's environment.
            .env_remove("NODEFALL_K8S_VERSION")
            .env_remove("NODEFALL_ETCD_VERSION")
            .env_remove("NODEFALL_KWOK_VERSION");
        command
    }

    fn provision(&self, fail_build: bool) -> Output {
        let mut command = Command::new("bash");
        command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/provision-binaries.sh"));
        let mut command = self.env(command);
        if fail_build {
            command.env("FAKE_GO_FAIL_BUILD", "1");
        }
        command.output().expect("bash runs")
    }

    fn read(&self, sub: &str) -> String {
        std::fs::read_to_string(self.path(sub)).unwrap_or_else(|e| panic!("reading {sub}: {e}"))
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_failing_go_build_is_named_with_its_exit_code_and_output() {
    let machine = Machine::new();
    let out = machine.provision(true);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: `go build -trimpath")
            && stderr.contains("k8s.io/kubernetes/cmd/kube-apiserver` (in ")
            && stderr.contains("failed with exit code 1 at provision-binaries.sh line "),
        "the failing command, its exit code and line are named:\n{stderr}"
    );
    assert!(
        stderr.contains(
            "  | fake go: cannot build k8s.io/kubernetes/cmd/kube-apiserver: undefined: frobnicate"
        ),
        "the command's output is shown:\n{stderr}"
    );
    let log = machine.cache().join("provision.log");
    assert!(
        stderr.contains(&format!("full log: {}", log.display())),
        "{stderr}"
    );
    assert!(
        machine
            .read("cache/provision.log")
            .contains("fake go: cannot build k8s.io/kubernetes/cmd/kube-apiserver"),
        "the log keeps the output"
    );
    // The work dir is removed however the script ends.
    assert_eq!(
        std::fs::read_dir(machine.path("tmp")).expect("tmp").count(),
        0
    );
}

#[test]
fn a_replaced_but_not_required_module_does_not_end_the_script() {
    let machine = Machine::new();
    let out = machine.provision(false);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("binaries ready under"),
        "ran to the end:\n{stderr}"
    );
    for bin in [
        "kubernetes-v1.35.4/kube-apiserver",
        "kubernetes-v1.35.4/kube-controller-manager",
        "kubernetes-v1.35.4/kube-scheduler",
        "etcd-v3.5.35/etcd",
        "kwok-v0.8.0+nodefall.2/kwok",
    ] {
        assert!(machine.cache().join("bin").join(bin).is_file(), "{bin}");
    }
    // The wrapper module: the v0.0.0 placeholder becomes the staging version,
    // a real requirement is kept, the unrequired module gets no line.
    let gomod = machine.read("fake-go/tidied-kubernetes.go.mod");
    assert!(
        gomod.contains("require k8s.io/kubernetes v1.35.4\n"),
        "{gomod}"
    );
    assert!(
        gomod.contains("replace k8s.io/api => k8s.io/api v0.35.4\n"),
        "{gomod}"
    );
    assert!(
        gomod.contains("replace github.com/example/pinned => github.com/example/pinned v1.2.3\n"),
        "{gomod}"
    );
    assert!(!gomod.contains("sample-cli-plugin"), "{gomod}");
    let etcd = machine.read("fake-go/tidied-etcd.go.mod");
    assert!(
        etcd.contains("replace k8s.io/api => k8s.io/api v3.5.35\n"),
        "{etcd}"
    );
    // kwok is built from a copy of its source with the pod-IP pool made once
    // and the node's pods listed once its Lease cache says Held.
    assert_eq!(
        machine.read("fake-go/built-kwok-pod_controller.go"),
        "\tpool, _ = c.ipPools.LoadOrStore(cidr, newIPPool(ipnet))\n\treturn pool, nil\n"
    );
    let lease = machine.read("fake-go/built-kwok-node_lease_controller.go");
    assert!(
        lease.ends_with(
            "func (c *NodeLeaseController) onNodeManaged(nodeName string) {\n\
             \t// nodefall: the pods' sync this starts skips a pod unless Held(), read\n\
             \t// from the Lease cache: wait until the Lease just written is there.\n\
             \tfor i := 0; i < 500 && !c.Held(nodeName); i++ {\n\
             \t\ttime.Sleep(10 * time.Millisecond)\n\
             \t}\n\
             \tc.onNodeManagedFunc(nodeName)\n}\n"
        ),
        "{lease}"
    );
}

/// A kwok whose `ipPool()` or `onNodeManaged()` is not the code the fixes
/// change is not built unfixed: the script stops and says which version it
/// knows.
#[test]
fn a_kwok_the_fix_does_not_fit_is_not_built() {
    for (changed, says) in [
        ("pool", "ipPool() is not the code kwok_fix changes"),
        ("lease", "onNodeManaged() is not the code kwok_fix changes"),
    ] {
        let machine = Machine::new();
        let mut command = Command::new("bash");
        command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/provision-binaries.sh"));
        let out = machine
            .env(command)
            .env("FAKE_GO_KWOK_CHANGED", changed)
            .output()
            .expect("bash runs");
        let stderr = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("NODEFALL_KWOK_VERSION=v0.8.0"),
            "{changed}: {stderr}"
        );
        assert!(
            !machine
                .cache()
                .join("bin/kwok-v0.8.0+nodefall.2/kwok")
                .exists(),
            "{changed}: no kwok cached"
        );
    }
}

/// The README's first command on a fresh machine whose Go cannot build: the
/// error names the failing command and the full log, not just an exit code.
#[test]
fn the_readme_command_reports_why_provisioning_failed() {
    let machine = Machine::new();
    let mut command = machine.env(Command::new(env!("CARGO_BIN_EXE_nodefall")));
    command
        .args(["scenario", "scenarios/statefulset-nfs.yaml", "--out"])
        .arg(machine.path("reports"))
        .env("FAKE_GO_FAIL_BUILD", "1");
    let out = command.output().expect("nodefall runs");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let error = stderr
        .split_once("provisioning the simulated cluster's binaries failed: the embedded")
        .map(|(_, error)| error)
        .unwrap_or_else(|| panic!("no provisioning error in:\n{stderr}"));
    assert!(
        error.contains(" exited (exit status: 1); its last lines of output:")
            && error.contains("error: `go build -trimpath")
            && error.contains("fake go: cannot build k8s.io/kubernetes/cmd/kube-apiserver"),
        "the error itself carries the script's report:\n{error}"
    );
    assert!(
        error.contains(&format!(
            "full log of the build commands: {}",
            machine.cache().join("provision.log").display()
        )) && error.contains("fix the cause above and run again"),
        "{error}"
    );
}

#[test]
fn sigterm_during_the_first_build_stops_the_build_and_exits_143() {
    let machine = Machine::new();
    let reports = machine.path("reports").display().to_string();
    sigterm_during_the_first_build(
        &machine,
        &[
            "scenario",
            "scenarios/statefulset-nfs.yaml",
            "--out",
            &reports,
        ],
    );
}

#[test]
fn sigterm_during_sim_up_s_first_build_stops_the_build_and_exits_143() {
    // `sim up` takes SIGTERM (and SIGHUP) as a run does, not only Ctrl-C.
    let machine = Machine::new();
    sigterm_during_the_first_build(&machine, &["sim", "up", "--name", "hung"]);
    assert!(
        !machine.path("state/hung").exists()
            || std::fs::read_dir(machine.path("state/hung")).is_ok_and(|mut d| d.next().is_none()),
        "the stopped start left its cluster"
    );
}

/// Starts nodefall with `args` on an empty cache whose Go build hangs,
/// sends SIGTERM once the build has started, and checks that nodefall
/// exits 143 and the build does not outlive it.
fn sigterm_during_the_first_build(machine: &Machine, args: &[&str]) {
    let mut command = machine.env(Command::new(env!("CARGO_BIN_EXE_nodefall")));
    command
        .args(args)
        .env("FAKE_GO_HANG_BUILD", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = command.spawn().expect("nodefall runs");
    let pid_file = machine.path("fake-go/hang.pid");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    // A file, not a process state, tells when the build started: polled, bounded.
    while !pid_file.is_file() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let build: i32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0);
    let nodefall = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    if build == 0 {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the fake build never started");
    }
    nix::sys::signal::kill(nodefall, nix::sys::signal::Signal::SIGTERM).expect("signal");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nodefall did not exit after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(143));
    let alive = std::fs::read_to_string(format!("/proc/{build}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    });
    if alive {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(build),
            nix::sys::signal::Signal::SIGKILL,
        );
        panic!("the build ({build}) outlived nodefall");
    }
}

#[test]
fn a_second_provisioner_waits_for_the_first_and_finds_its_binaries() {
    let machine = Machine::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/provision-binaries.sh");
    let start = || {
        let mut command = Command::new("bash");
        command.arg(&script);
        machine
            .env(command)
            .env("FAKE_GO_SLOW_BUILD", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("bash runs")
    };
    let first = start();
    // The first one holds the lock once it tidies its first wrapper module.
    let tidied = machine.path("fake-go/tidied-kubernetes.go.mod");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !tidied.is_file() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = start();
    let (first, second) = (
        first.wait_with_output().expect("first ends"),
        second.wait_with_output().expect("second ends"),
    );
    assert!(tidied.is_file(), "the first never started building");
    for (which, out) in [("first", &first), ("second", &second)] {
        assert!(
            out.status.success(),
            "{which}: {:?}\n{}",
            out.status,
            text(&out.stderr)
        );
    }
    let err = text(&second.stderr);
    assert!(
        err.contains("another provisioning is running") && err.contains("all binaries cached"),
        "the second did not wait and reuse: {err}"
    );
    for bin in [
        "kubernetes-v1.35.4/kube-apiserver",
        "etcd-v3.5.35/etcd",
        "kwok-v0.8.0+nodefall.2/kwok",
    ] {
        assert!(
            machine.cache().join("bin").join(bin).is_file(),
            "{bin} missing"
        );
    }
}

/// The real control-plane binaries of the cache this test process uses (the
/// one CI provisions), in one flat directory for the fake go to copy.
fn real_binaries(into: &Path) -> Option<()> {
    let versions = nodefall::sim::binaries::Versions::from_env();
    let bin =
        nodefall::sim::binaries::Binaries::at(&nodefall::sim::binaries::cache_root(), versions);
    std::fs::create_dir_all(into).ok()?;
    for p in [
        &bin.kube_apiserver,
        &bin.kube_controller_manager,
        &bin.kube_scheduler,
        &bin.etcd,
        &bin.kwok,
    ] {
        if !p.is_file() {
            return None;
        }
        std::os::unix::fs::symlink(p, into.join(p.file_name()?)).ok()?;
    }
    // The CSI driver where it was built (the fake go fails its build
    // otherwise, and the cluster runs without it).
    if bin.csi.is_file() {
        std::os::unix::fs::symlink(&bin.csi, into.join("kind-csi")).ok()?;
    }
    Some(())
}

/// Issue 31: provisioning that takes longer than the bring-up timeout must
/// not eat the API server's time (the deadline once started before it).
#[test]
fn a_provisioner_slower_than_the_bring_up_timeout_still_gets_a_cluster() {
    let machine = Machine::new();
    if real_binaries(&machine.path("real")).is_none() {
        skip::skip(
            "a_provisioner_slower_than_the_bring_up_timeout_still_gets_a_cluster",
            "no provisioned control-plane binaries to copy (CI provisions them first)",
        );
        return;
    }
    let timeout_secs = 25;
    let sim = |args: &[&str]| {
        let mut command = machine.env(Command::new(env!("CARGO_BIN_EXE_nodefall")));
        command
            .args(args)
            .env("FAKE_GO_REAL_BIN", machine.path("real"))
            .env("FAKE_GO_APISERVER_SECS", (timeout_secs + 3).to_string())
            .stdin(std::process::Stdio::null());
        command.output().expect("nodefall runs")
    };
    /// Takes the cluster down however the test ends.
    struct Down<'a>(&'a dyn Fn(&[&str]) -> Output);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = (self.0)(&["sim", "down", "--name", "slow"]);
        }
    }
    let started = std::time::Instant::now();
    let up = sim(&[
        "sim",
        "up",
        "--name",
        "slow",
        "--nodes",
        "1",
        "--timeout",
        &timeout_secs.to_string(),
    ]);
    let _down = Down(&sim);
    let took = started.elapsed();
    let stderr = text(&up.stderr);
    assert_eq!(up.status.code(), Some(0), "{stderr}");
    assert!(
        took > std::time::Duration::from_secs(timeout_secs + 3),
        "provisioning was slower than the timeout ({took:?})"
    );
    let down = sim(&["sim", "down", "--name", "slow"]);
    assert_eq!(down.status.code(), Some(0), "{}", text(&down.stderr));
}
