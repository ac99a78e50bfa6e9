//! The reaper of a throwaway simulated cluster (`nodefall sim reap`): a
//! cluster never outlives the nodefall process that owns it, and a kept one
//! is never torn down.
//!
//! The first tests run the reaper against a stand-in cluster (a state file
//! recording `sleep` processes), so they need no control-plane binaries. The
//! others run `nodefall` on real binaries from the cache and, like
//! `tests/sim_cluster.rs`, one at a time.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "support/cli_run.rs"]
mod cli_run;

use nodefall::profile::TimingProfile;
use nodefall::sim::binaries::Versions;
use nodefall::sim::process::{self, Proc, ProcRecord, is_alive};
use nodefall::sim::reaper::ReapOptions;
use nodefall::sim::state::SCHEMA;
use nodefall::sim::{SimCluster, State};

const NODEFALL: &str = env!("CARGO_BIN_EXE_nodefall");

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Every process of a cluster, the reaper included.
fn records(state: &State) -> Vec<ProcRecord> {
    state
        .components
        .iter()
        .chain(state.nodes.iter().filter_map(|n| n.agent.as_ref()))
        .chain(state.reaper.as_ref())
        .cloned()
        .collect()
}

/// Live `nodefall sim reap` processes watching a cluster under `root`,
/// found in /proc (so also one nobody recorded).
fn reapers_under(root: &Path) -> Vec<ProcRecord> {
    let root = root.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_reaper = args.windows(2).any(|w| w[0] == "sim" && w[1] == "reap")
            && args.windows(2).any(|w| w[0] == "--root" && w[1] == root);
        if let (true, Some(start_ticks)) = (is_reaper, process::start_ticks(pid))
            && process::runs(pid, start_ticks)
        {
            found.push(ProcRecord {
                name: format!("reaper pid {pid}"),
                pid,
                start_ticks,
                log: PathBuf::new(),
                program: PathBuf::new(),
                args,
            });
        }
    }
    found
}

/// Polls `cond` every 50 ms (a process that is not our child cannot be
/// waited for) until it holds; false after `timeout`.
fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whatever a test started, killed when it ends, also when an assertion
/// failed: the nodefall child, every process seen recorded, and any reaper
/// still watching the test's state root.
struct Leftovers {
    root: PathBuf,
    child: Option<Child>,
    seen: Vec<ProcRecord>,
}

impl Leftovers {
    fn new(root: &Path) -> Leftovers {
        Leftovers {
            root: root.to_owned(),
            child: None,
            seen: Vec::new(),
        }
    }

    fn note(&mut self, records: &[ProcRecord]) {
        self.seen.extend_from_slice(records);
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().unwrap()
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Reapers first, so none races the cleanup below.
        for record in reapers_under(&self.root) {
            Proc::adopt(record).kill();
        }
        for name in nodefall::sim::state::list(&self.root) {
            if let Ok(state) = State::load(&self.root.join(&name).join("state.json")) {
                self.seen.extend(records(&state));
            }
        }
        for record in self.seen.drain(..) {
            Proc::adopt(record).kill();
        }
    }
}

// ----- against a stand-in cluster -----

/// A cluster directory whose state records two `sleep` processes as its
/// control plane (each in its own process group, as the real ones).
fn stand_in(root: &Path, name: &str) -> (State, Vec<Proc>) {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let procs: Vec<Proc> = ["etcd", "kube-apiserver"]
        .iter()
        .map(|c| {
            let log = dir.join("logs").join(format!("{c}.log"));
            Proc::spawn(c, Path::new("sleep"), &["600".to_owned()], &log).unwrap()
        })
        .collect();
    let state = State {
        schema: SCHEMA,
        name: name.to_owned(),
        server: "https://127.0.0.1:1".into(),
        versions: Versions::from_env(),
        profile: TimingProfile::fast(),
        started_at_ms: 1,
        components: procs.iter().map(|p| p.record.clone()).collect(),
        nodes: Vec::new(),
        reaper: None,
        kept: false,
        node_boot_ms: 8000,
        pleg_threshold_ms: 180_000,
        shutdown_grace_ms: 0,
        shutdown_grace_critical_ms: 0,
    };
    state.save(&dir.join("state.json")).unwrap();
    (state, procs)
}

/// A stand-in for the nodefall process that owns the cluster.
fn parent(root: &Path) -> Proc {
    Proc::spawn(
        "parent",
        Path::new("sleep"),
        &["600".to_owned()],
        &root.join("parent.log"),
    )
    .unwrap()
}

/// Starts `nodefall sim reap` for `name`, watching `parent`, recorded in the
/// state as the owner does. Its log is kept outside the cluster directory.
fn reaper(root: &Path, name: &str, parent: &Proc, state: &mut State) -> Proc {
    let opts = ReapOptions {
        name: name.to_owned(),
        root: root.to_owned(),
        parent: parent.record.pid,
        parent_start: parent.record.start_ticks,
    };
    let log = root.join(format!("reaper-{name}.log"));
    let proc = Proc::spawn("reaper", Path::new(NODEFALL), &opts.args(), &log).unwrap();
    state.reaper = Some(proc.record.clone());
    state.save(&root.join(name).join("state.json")).unwrap();
    proc
}

/// Waits for a reaper (our child here) to exit; its exit status.
fn reaper_exit(reaper: &mut Proc, within: Duration) -> Option<std::process::ExitStatus> {
    let mut status = None;
    eventually(within, || {
        status = reaper.exit_status();
        status.is_some()
    });
    status
}

#[test]
fn stand_in_cluster_is_taken_down_once_its_parent_is_killed() {
    let root = tempfile::tempdir().unwrap();
    let mut leftovers = Leftovers::new(root.path());
    let (mut state, _procs) = stand_in(root.path(), "orphan");
    let mut parent = parent(root.path());
    let mut reaper = reaper(root.path(), "orphan", &parent, &mut state);
    leftovers.note(&records(&state));
    leftovers.note(std::slice::from_ref(&parent.record));
    let log = reaper.record.log.clone();
    // The reaper is running and has looked at least once before the kill.
    assert!(
        eventually(Duration::from_secs(10), || process::log_tail(&log, 5)
            .contains("watching nodefall pid")),
        "the reaper did not start: {}",
        process::log_tail(&log, 20)
    );
    assert!(reaper.is_alive(), "{}", process::log_tail(&log, 20));
    let status = Command::new(NODEFALL)
        .args(["sim", "status"])
        .env("NODEFALL_STATE_DIR", root.path())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(
        table.contains(&format!("pid {}", reaper.record.pid)),
        "`sim status` shows the reaper:\n{table}"
    );

    parent.kill();
    let status = reaper_exit(&mut reaper, Duration::from_secs(30));
    let tail = process::log_tail(&log, 20);
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{tail}");
    for p in &state.components {
        assert!(
            !is_alive(p),
            "{} (pid {}) outlived its parent\n{tail}",
            p.name,
            p.pid
        );
    }
    assert!(!root.path().join("orphan").exists(), "{tail}");
    assert!(tail.contains("stopped and removed"), "{tail}");
}

#[test]
fn stand_in_cluster_kept_is_left_alone() {
    let root = tempfile::tempdir().unwrap();
    let mut leftovers = Leftovers::new(root.path());
    let (mut state, _procs) = stand_in(root.path(), "kept");
    let mut parent = parent(root.path());
    let mut reaper = reaper(root.path(), "kept", &parent, &mut state);
    leftovers.note(&records(&state));
    leftovers.note(std::slice::from_ref(&parent.record));

    // What `detach` writes (it also stops the reaper; this one is left to
    // find out by itself, as one that missed the signal would).
    state.kept = true;
    state.reaper = None;
    state
        .save(&root.path().join("kept").join("state.json"))
        .unwrap();
    let status = reaper_exit(&mut reaper, Duration::from_secs(10));
    let tail = process::log_tail(&reaper.record.log, 20);
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{tail}");
    assert!(tail.contains("kept"), "{tail}");

    parent.kill();
    assert!(state.components.iter().all(is_alive), "{tail}");
    assert!(root.path().join("kept").join("state.json").is_file());
    assert!(reapers_under(root.path()).is_empty());
}

#[test]
fn stand_in_cluster_taken_down_normally_lets_the_reaper_leave() {
    let root = tempfile::tempdir().unwrap();
    let mut leftovers = Leftovers::new(root.path());
    let (mut state, mut procs) = stand_in(root.path(), "normal");
    let parent = parent(root.path());
    let mut reaper = reaper(root.path(), "normal", &parent, &mut state);
    leftovers.note(&records(&state));
    leftovers.note(std::slice::from_ref(&parent.record));

    // A `down` by someone who did not stop the reaper: processes, then state.
    for p in &mut procs {
        p.stop(Duration::from_secs(5));
    }
    std::fs::remove_dir_all(root.path().join("normal")).unwrap();
    let status = reaper_exit(&mut reaper, Duration::from_secs(10));
    let tail = process::log_tail(&reaper.record.log, 20);
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{tail}");
    assert!(tail.contains("state is gone"), "{tail}");
    assert!(is_alive(&parent.record), "the reaper signals no one");
}

#[test]
fn stand_in_cluster_sim_down_stops_the_reaper_of_another_process() {
    use std::os::unix::process::ExitStatusExt as _;
    let root = tempfile::tempdir().unwrap();
    let mut leftovers = Leftovers::new(root.path());
    let (mut state, _procs) = stand_in(root.path(), "owned");
    let parent = parent(root.path());
    let mut reaper = reaper(root.path(), "owned", &parent, &mut state);
    leftovers.note(&records(&state));
    leftovers.note(std::slice::from_ref(&parent.record));

    let down = Command::new(NODEFALL)
        .args(["sim", "down", "--name", "owned"])
        .env("NODEFALL_STATE_DIR", root.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert_eq!(down.status.code(), Some(0), "{stderr}");
    assert!(!root.path().join("owned").exists());
    assert!(!state.components.iter().any(is_alive), "{stderr}");
    // Stopped by `down` (SIGTERM), not left to notice the state is gone.
    let status = reaper_exit(&mut reaper, Duration::from_secs(1));
    assert_eq!(status.and_then(|s| s.signal()), Some(15), "{status:?}");
}

// ----- nodefall on real binaries -----

/// Provisions the binaries here, before any nodefall child starts: a child
/// killed on a test timeout while it provisions would orphan the build.
fn binaries() {
    nodefall::sim::binaries::Binaries::ensure().unwrap();
}

/// A scenario that does nothing but wait `duration` on its throwaway cluster.
fn waiting_scenario(dir: &Path, duration: &str) -> PathBuf {
    let file = dir.join("wait.yaml");
    std::fs::write(
        &file,
        format!(
            "name: reaper-wait\nnamespace: reaper\nsteps:\n  - action: {{wait: {{duration: {duration}}}}}\n"
        ),
    )
    .unwrap();
    file
}

/// `nodefall scenario FILE` with its state under `root`, stderr piped.
fn start_scenario(file: &Path, root: &Path, out: &Path, extra: &[&str]) -> Child {
    Command::new(NODEFALL)
        .arg("scenario")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(["--nodes", "1"])
        .args(extra)
        .env("NODEFALL_STATE_DIR", root)
        // Journals beside the clusters, not in the user's state directory.
        .env("NODEFALL_JOURNAL_DIR", root.join(".journals"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads the child's stderr (in a thread, so a full pipe never blocks it)
/// until a line contains `marker`; all lines read so far.
fn stderr_until(child: &mut Child, marker: &str, timeout: Duration) -> Vec<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains(marker);
                lines.push(line);
                if done {
                    // Keep draining in the background thread; drop the rest.
                    std::thread::spawn(move || rx.iter().for_each(drop));
                    return lines;
                }
            }
            Err(_) => panic!(
                "no line with `{marker}` within {timeout:?}; stderr so far:\n{}",
                lines.join("\n")
            ),
        }
    }
}

#[test]
fn killing_nodefall_mid_run_takes_its_throwaway_cluster_down() {
    let _serial = serial();
    binaries();
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut leftovers = Leftovers::new(root.path());
    let file = waiting_scenario(out.path(), "10m");
    leftovers.child = Some(start_scenario(&file, root.path(), out.path(), &[]));
    let name = format!("scenario-{}", leftovers.child().id());
    let lines = stderr_until(leftovers.child(), "wait 10m", Duration::from_secs(180));

    let state = State::load(&root.path().join(&name).join("state.json"))
        .unwrap_or_else(|e| panic!("{e}\n{}", lines.join("\n")));
    let procs = records(&state);
    leftovers.note(&procs);
    assert_eq!(
        procs.len(),
        6 + cli_run::helpers(true),
        "etcd, apiserver, kcm, scheduler, 1 kwok, reaper and the helpers"
    );
    assert!(state.reaper.is_some() && !state.kept);
    assert!(procs.iter().all(is_alive), "{procs:?}");

    // SIGKILL: nodefall gets no chance to clean up.
    leftovers.child().kill().unwrap();
    leftovers.child().wait().unwrap();
    let killed_at = Instant::now();
    let gone = eventually(Duration::from_secs(30), || {
        !procs.iter().any(is_alive) && !root.path().join(&name).exists()
    });
    let alive: Vec<_> = procs
        .iter()
        .filter(|p| is_alive(p))
        .map(|p| &p.name)
        .collect();
    assert!(
        gone,
        "30 s after SIGKILL: still running {alive:?}, state dir exists: {}",
        root.path().join(&name).exists()
    );
    eprintln!("cluster gone {:?} after the SIGKILL", killed_at.elapsed());
    assert!(reapers_under(root.path()).is_empty());
}

#[test]
fn a_finished_run_leaves_no_reaper_behind() {
    let _serial = serial();
    binaries();
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut leftovers = Leftovers::new(root.path());
    let file = waiting_scenario(out.path(), "3s");
    leftovers.child = Some(start_scenario(&file, root.path(), out.path(), &[]));
    let name = format!("scenario-{}", leftovers.child().id());
    let lines = stderr_until(leftovers.child(), "wait 3s", Duration::from_secs(180));
    let state = State::load(&root.path().join(&name).join("state.json"))
        .unwrap_or_else(|e| panic!("{e}\n{}", lines.join("\n")));
    leftovers.note(&records(&state));
    let reaper = state
        .reaper
        .clone()
        .expect("a throwaway cluster has a reaper");
    assert!(is_alive(&reaper));

    let status = leftovers.child().wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", lines.join("\n"));
    // `down` stopped and reaped it before nodefall exited.
    assert!(
        !is_alive(&reaper),
        "reaper pid {} outlived the run",
        reaper.pid
    );
    assert!(reapers_under(root.path()).is_empty());
    assert!(!records(&state).iter().any(is_alive));
    assert!(nodefall::sim::state::list(root.path()).is_empty());
}

#[test]
fn a_kept_scenario_cluster_and_a_sim_up_cluster_survive_their_nodefall() {
    let _serial = serial();
    binaries();
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut leftovers = Leftovers::new(root.path());

    // `scenario --keep`: the run ends, the cluster stays, its reaper does not.
    let file = waiting_scenario(out.path(), "1s");
    leftovers.child = Some(start_scenario(&file, root.path(), out.path(), &["--keep"]));
    let kept = format!("scenario-{}", leftovers.child().id());
    let lines = stderr_until(leftovers.child(), "kept cluster", Duration::from_secs(180));
    let code = leftovers.child().wait().unwrap().code();
    assert_eq!(code, Some(0), "{}", lines.join("\n"));

    // `sim up`: a named cluster, kept when the command exits.
    let up = Command::new(NODEFALL)
        .args(["sim", "up", "--name", "named", "--nodes", "1"])
        .env("NODEFALL_STATE_DIR", root.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&up.stderr);
    assert_eq!(up.status.code(), Some(0), "{stderr}");

    for name in [kept.as_str(), "named"] {
        let state = State::load(&root.path().join(name).join("state.json")).unwrap();
        let procs = records(&state);
        leftovers.note(&procs);
        assert!(state.kept, "{name} is marked kept");
        assert!(state.reaper.is_none(), "{name} records no reaper");
        assert_eq!(
            procs.len(),
            5 + cli_run::helpers(true),
            "{name}: control plane, one kwok and the helpers"
        );
        assert!(procs.iter().all(is_alive), "{name} still runs: {procs:?}");
    }
    // Nothing is left that could take them down.
    assert!(reapers_under(root.path()).is_empty());
    let status = Command::new(NODEFALL)
        .args(["sim", "status"])
        .env("NODEFALL_STATE_DIR", root.path())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(
        table.contains("REAPER") || table.contains("reaper"),
        "{table}"
    );
    assert!(table.contains("none"), "{table}");

    for name in [kept.as_str(), "named"] {
        SimCluster::open(root.path(), name).unwrap().down().unwrap();
    }
}
