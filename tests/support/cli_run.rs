//! Running the nodefall binary as a user would, from integration tests:
//! private state, journal and report directories per test, a child whose
//! stderr is read line by line as it comes, and a simulated cluster the test
//! owns.

#![allow(dead_code, reason = "each test crate uses its own part")]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use nodefall::profile::TimingProfile;
use nodefall::report::read_result;
use nodefall::sim::{SimCluster, UpOptions};

/// Directories one test's nodefall processes use.
pub struct Dirs {
    pub state: tempfile::TempDir,
    pub journals: tempfile::TempDir,
    pub out: tempfile::TempDir,
    pub files: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Dirs {
        Dirs {
            state: tempfile::tempdir().unwrap(),
            journals: tempfile::tempdir().unwrap(),
            out: tempfile::tempdir().unwrap(),
            files: tempfile::tempdir().unwrap(),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_nodefall"));
        c.args(args)
            .env("NODEFALL_STATE_DIR", self.state.path())
            .env("NODEFALL_JOURNAL_DIR", self.journals.path())
            .stdin(Stdio::null());
        c
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.files.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Journals not closed.
    pub fn unfinished(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.journals.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect()
    }

    pub fn results(&self) -> Vec<nodefall::record::RunResult> {
        std::fs::read_dir(self.out.path())
            .unwrap()
            .map(|e| {
                read_result(
                    &nodefall::disk::Disk,
                    &e.unwrap().path().join("result.json"),
                )
                .unwrap()
            })
            .collect()
    }

    /// Processes whose command line names this test's state directory: a
    /// control plane or node agent left behind.
    pub fn orphans(&self) -> Vec<String> {
        processes_naming(self.state.path())
    }
}

/// A free loopback port below the kernel's ephemeral range, for a server a
/// test stops and later starts again on the same port. The tests running
/// beside it draw their ports (`bind` to port 0) and their outgoing
/// connections' ports from the ephemeral range, so none can take this one in
/// between.
pub fn port_below_ephemeral_range() -> u16 {
    const FIRST: u16 = 10_000;
    let range =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let low: u16 = range
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32_768);
    let span = low.saturating_sub(FIRST).max(1);
    // Start where the process id says, so tests side by side try different ports.
    let offset = u16::try_from(std::process::id() % u32::from(span)).unwrap_or(0);
    (0..span)
        .map(|i| FIRST + (offset + i) % span)
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free loopback port below the ephemeral range")
}

/// The state letter of a process (`R`, `S`, `T` for stopped, `Z`, ...).
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// Processes (zombies aside) whose command line names `root`: a control
/// plane or node agent of a cluster under it, recorded or not.
pub fn processes_naming(root: &Path) -> Vec<String> {
    let needle = root.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&needle) && proc_state(pid).is_some_and(|s| s != 'Z') {
            found.push(format!("{pid}: {cmd}"));
        }
    }
    found
}

/// A nodefall child whose stderr lines are collected as they come.
pub struct Running {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    pub fn start(mut cmd: Command) -> Running {
        let mut child = cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (bounded) for a stderr line containing `needle`.
    pub fn wait_for(&mut self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        if self.seen.iter().any(|l| l.contains(needle)) {
            return;
        }
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("no line with {needle:?} within {within:?}:\n{}", self.log());
    }

    /// Waits (bounded) until `n` stderr lines contain `needle`.
    pub fn wait_for_nth(&mut self, needle: &str, n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        let count = |seen: &[String]| seen.iter().filter(|l| l.contains(needle)).count();
        while count(&self.seen) < n {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => break,
            }
        }
        if count(&self.seen) < n {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "not {n} lines with {needle:?} within {within:?}:\n{}",
                self.log()
            );
        }
    }

    pub fn signal(&self, s: Signal) {
        kill(Pid::from_raw(i32::try_from(self.child.id()).unwrap()), s).unwrap();
    }

    /// Waits (bounded) for the exit; returns the code and the whole stderr.
    pub fn finish(mut self, within: Duration) -> (Option<i32>, String) {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(500)) {
                    self.seen.push(l);
                }
                return (status.code(), self.log());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("did not exit within {within:?}:\n{}", self.log());
            }
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.seen.push(l);
            }
        }
    }

    pub fn log(&self) -> String {
        self.seen.join("\n")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `nodefall scenario FILE --out OUT EXTRA...` as a watched child.
pub fn start_scenario(d: &Dirs, file: &Path, extra: &[&str]) -> Running {
    let mut args = vec![
        "scenario",
        file.to_str().unwrap(),
        "--out",
        d.out.path().to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Running::start(d.command(&args))
}

pub const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.invalid/web:1}]
";

/// A 3-node sim cluster with the `fast` profile under `root`, owned by the
/// test (torn down when the returned cluster is dropped).
pub fn cluster(root: &Path, name: &str) -> (tokio::runtime::Runtime, SimCluster, kube::Client) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (c, client) = rt.block_on(async {
        let mut opts = UpOptions::new(name, TimingProfile::fast());
        opts.root = root.to_owned();
        opts.nodes = 3;
        let mut quiet = |_: &str| {};
        let c = SimCluster::up(&opts, &mut quiet).await.unwrap();
        let client = kube::Client::try_from(c.config().await.unwrap()).unwrap();
        (c, client)
    });
    (rt, c, client)
}

/// How many of the cluster's processes are its helpers, beside the control
/// plane and the kwoks: the CSI driver's attacher where Go built it, and the
/// kubelets' volume managers when nodefall's executable runs them (`cli`).
pub fn helpers(cli: bool) -> usize {
    let csi = nodefall::sim::binaries::Binaries::at(
        &nodefall::sim::binaries::cache_root(),
        nodefall::sim::binaries::Versions::from_env(),
    )
    .csi
    .is_file();
    usize::from(csi) + usize::from(cli)
}
