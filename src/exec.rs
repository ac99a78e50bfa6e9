//! Running external commands to completion (docker, podman, kind, ssh,
//! VBoxManage, vagrant, the command backend's lines) with their output
//! kept, so a failure shows the exact command line and its stderr. Every
//! command goes through the [`Exec`] seam: [`System`] runs it for real,
//! each in its own process group ([`group`]), and tests put a fake in its
//! place. Async callers run it with [`call_blocking`] or [`run_blocking`],
//! on tokio's blocking pool, never on a runtime worker.

pub mod group;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::record::CommandRecord;

pub use crate::scenario::command::Cmd;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("could not run `{cmd}`")]
    Spawn {
        cmd: Cmd,
        #[source]
        source: std::io::Error,
    },
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Failed {
        cmd: Cmd,
        status: String,
        stderr: String,
    },
    #[error("`{cmd}` did not finish within {}s", .after.as_secs())]
    Timeout { cmd: Cmd, after: Duration },
}

/// What a finished (or timed-out) command left: its exit, stdout and
/// stderr, kept whole for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The exit code; None when it was killed by a signal or timed out.
    pub code: Option<i32>,
    /// `exit status: 1`, `killed by signal 9`, or `timed out after 1m`.
    pub status: String,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub elapsed: Duration,
}

impl Captured {
    /// What this command did, for the report (each stream's end, at most
    /// [`CommandRecord::KEEP`] bytes).
    pub fn record(&self, role: &str, cmd: &Cmd, attempts: u32) -> CommandRecord {
        CommandRecord {
            role: role.to_owned(),
            line: cmd.to_string(),
            status: self.status.clone(),
            ok: self.success(),
            ms: u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX),
            attempts,
            stdout: CommandRecord::tail(&self.stdout),
            stderr: CommandRecord::tail(&self.stderr),
        }
    }
}

impl Captured {
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }
}

/// Stops a [`Job`] early from another thread or task: its process group is
/// killed (an async caller that went away, see [`call_blocking`]).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Bytes of each output stream a [`Job::acting`] keeps (the end).
pub const KEEP: usize = 64 * 1024;

/// One command to run to completion, and how.
#[derive(Debug, Clone)]
pub struct Job {
    pub cmd: Cmd,
    /// Past it the command's group is killed.
    pub timeout: Duration,
    /// Where it runs (default: where nodefall runs).
    pub dir: Option<PathBuf>,
    /// Bytes kept of each output stream, its end (default: all of it).
    pub keep: Option<usize>,
    /// Whether what the command left in its group is killed once it exits.
    pub kill_leftovers: bool,
    pub cancel: Cancel,
}

impl Job {
    /// `cmd` with a time limit, all its output kept, nothing killed after
    /// it exited.
    pub fn new(cmd: Cmd, timeout: Duration) -> Job {
        Job {
            cmd,
            timeout,
            dir: None,
            keep: None,
            kill_leftovers: false,
            cancel: Cancel::default(),
        }
    }

    /// A command that acts on a machine (the command and vagrant backends):
    /// once it exits, what it left in its group is killed (it would
    /// otherwise go on acting on a machine nodefall believes reverted), and
    /// each output stream keeps its last [`KEEP`] bytes.
    pub fn acting(cmd: Cmd, timeout: Duration) -> Job {
        Job {
            keep: Some(KEEP),
            kill_leftovers: true,
            ..Job::new(cmd, timeout)
        }
    }

    /// The job run in `dir` (`vagrant` reads the project it is run in).
    #[must_use]
    pub fn in_dir(mut self, dir: impl Into<PathBuf>) -> Job {
        self.dir = Some(dir.into());
        self
    }
}

/// Runs commands. A trait so backends can be tested without the tools.
pub trait Exec: Send + Sync {
    /// Runs `job` until it exits, times out or is cancelled, whatever its
    /// exit: an error only when it could not be started.
    fn call(&self, job: &Job) -> Result<Captured, Error>;

    /// Runs `cmd` to completion; returns its stdout, or an error with stderr.
    fn run(&self, cmd: &Cmd, timeout: Duration) -> Result<String, Error> {
        let c = self.call(&Job::new(cmd.clone(), timeout))?;
        if c.timed_out {
            return Err(Error::Timeout {
                cmd: cmd.clone(),
                after: timeout,
            });
        }
        if c.success() {
            return Ok(c.stdout);
        }
        Err(Error::Failed {
            cmd: cmd.clone(),
            status: c.status,
            stderr: c.stderr.trim().to_owned(),
        })
    }
}

/// Runs `cmd` through `exec` on tokio's blocking pool, never on a runtime
/// worker (the workers carry the watchers whose timestamps are the
/// measurement).
pub async fn run_blocking<E: Exec + Clone + 'static>(
    exec: &E,
    cmd: Cmd,
    timeout: Duration,
) -> Result<String, Error> {
    let exec = exec.clone();
    let shown = cmd.clone();
    match tokio::task::spawn_blocking(move || exec.run(&cmd, timeout)).await {
        Ok(r) => r,
        Err(e) => Err(joined(shown, &e)),
    }
}

/// Runs `job` through `exec` on tokio's blocking pool, never on a runtime
/// worker; dropping the future (a run stopped by a signal) cancels the job,
/// which kills its process group.
pub async fn call_blocking<E: Exec + Clone + 'static>(
    exec: &E,
    job: Job,
) -> Result<Captured, Error> {
    /// Cancels the job when the future is dropped (after it finished: no
    /// matter).
    struct OnDrop(Cancel);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.cancel();
        }
    }
    let _cancel = OnDrop(job.cancel.clone());
    let exec = exec.clone();
    let shown = job.cmd.clone();
    match tokio::task::spawn_blocking(move || exec.call(&job)).await {
        Ok(r) => r,
        Err(e) => Err(joined(shown, &e)),
    }
}

/// A blocking task that did not finish (it panicked, or the runtime is
/// going away), as the command's error.
fn joined(cmd: Cmd, e: &tokio::task::JoinError) -> Error {
    Error::Spawn {
        cmd,
        source: std::io::Error::other(e.to_string()),
    }
}

/// Runs commands for real, each in its own process group (stdin closed),
/// reaped always; on timeout or cancellation the whole group is killed.
#[derive(Debug, Clone, Copy, Default)]
pub struct System;

/// How long output is still read after the command exited (a process that
/// left its group may hold the pipes open).
const DRAIN: Duration = Duration::from_secs(2);
/// The longest wait between two looks at a running command.
const POLL: Duration = Duration::from_millis(20);
/// How long a killed command may take to be reaped.
const REAP: Duration = Duration::from_secs(10);

impl Exec for System {
    fn call(&self, job: &Job) -> Result<Captured, Error> {
        use std::os::unix::process::ExitStatusExt as _;

        let cmd = &job.cmd;
        tracing::debug!("running `{cmd}`");
        let started = Instant::now();
        let mut command = Command::new(&cmd.program);
        command
            .args(&cmd.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = &job.dir {
            command.current_dir(dir);
        }
        let mut child = group::spawn(&mut command).map_err(|source| Error::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
        let pgid = group::of(&child);
        // Read both pipes on threads so a chatty command cannot block.
        let keep = job.keep.unwrap_or(usize::MAX);
        let out = Reader::start(child.stdout.take(), keep);
        let err = Reader::start(child.stderr.take(), keep);
        let deadline = started + job.timeout;
        let end = loop {
            match child.try_wait() {
                Ok(Some(status)) => break End::Exited(status),
                Ok(None) => {}
                Err(e) => {
                    group::kill_and_reap(&mut child, REAP);
                    break End::Unwaited(e);
                }
            }
            let cancelled = job.cancel.is_cancelled();
            if cancelled || Instant::now() >= deadline {
                // The whole group: a shell's children go too.
                group::kill_and_reap(&mut child, REAP);
                break if cancelled {
                    End::Cancelled
                } else {
                    End::TimedOut
                };
            }
            // Soon after a quick command exits, at most POLL after a slow one.
            std::thread::sleep((started.elapsed() / 10).clamp(Duration::from_millis(1), POLL));
        };
        if job.kill_leftovers
            && let (End::Exited(_), Some(pgid)) = (&end, pgid)
        {
            // What it left behind in its group goes with it.
            let _ = group::signal(pgid, nix::sys::signal::Signal::SIGKILL);
        }
        // A process that left the group could hold the pipes open: the
        // readers are not waited for past a short grace after the exit.
        let drained = Instant::now() + DRAIN;
        let stdout = out.text(drained);
        let stderr = err.text(drained);
        let elapsed = started.elapsed();
        let (code, status, timed_out) = match end {
            End::Exited(s) => (
                s.code(),
                match s.signal() {
                    Some(sig) => format!("killed by signal {sig}"),
                    None => s.to_string(),
                },
                false,
            ),
            End::TimedOut => (
                None,
                format!("timed out after {}", crate::duration::Dur(job.timeout)),
                true,
            ),
            End::Cancelled => (None, "cancelled".to_owned(), false),
            End::Unwaited(e) => (None, format!("could not be waited for: {e}"), false),
        };
        Ok(Captured {
            code,
            status,
            stdout,
            stderr,
            timed_out,
            elapsed,
        })
    }
}

impl System {
    /// Runs `cmd` to completion or `timeout`, whatever its exit: an error
    /// only when it could not be started.
    pub fn capture(&self, cmd: &Cmd, timeout: Duration) -> Result<Captured, Error> {
        self.call(&Job::new(cmd.clone(), timeout))
    }
}

/// How a command's run ended.
enum End {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
    Unwaited(std::io::Error),
}

/// The last bytes of a stream, up to a limit.
#[derive(Debug)]
struct Tail {
    keep: usize,
    bytes: Vec<u8>,
    cut: usize,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > self.keep {
            let drop = self.bytes.len() - self.keep;
            self.bytes.drain(..drop);
            self.cut += drop;
        }
    }

    fn text(&self) -> String {
        let s = String::from_utf8_lossy(&self.bytes);
        if self.cut > 0 {
            format!("[{} bytes cut]...{s}", self.cut)
        } else {
            s.into_owned()
        }
    }
}

/// A pipe read on a thread as it comes; what was read is there whether or
/// not the pipe was closed.
struct Reader {
    tail: Arc<Mutex<Tail>>,
    thread: std::thread::JoinHandle<()>,
}

impl Reader {
    fn start<R: Read + Send + 'static>(pipe: Option<R>, keep: usize) -> Reader {
        let tail = Arc::new(Mutex::new(Tail {
            keep,
            bytes: Vec::new(),
            cut: 0,
        }));
        let kept = Arc::clone(&tail);
        let thread = std::thread::spawn(move || {
            let Some(mut pipe) = pipe else { return };
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => kept
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        });
        Reader { tail, thread }
    }

    /// What was read once the pipe is closed, or by `until`.
    fn text(self, until: Instant) -> String {
        while !self.thread.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .text()
    }
}

/// A recording [`Exec`] for tests: it keeps every job and answers from a
/// script, the first answer whose prefix the command line starts with, else
/// a success that printed nothing.
#[cfg(test)]
pub mod fake {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::{Captured, Error, Exec, Job};

    type Answer = Arc<dyn Fn(&Job) -> Result<Captured, Error> + Send + Sync>;

    #[derive(Clone, Default)]
    pub struct Fake {
        jobs: Arc<Mutex<Vec<Job>>>,
        answers: Arc<Mutex<Vec<(String, Answer)>>>,
    }

    impl std::fmt::Debug for Fake {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Fake").field("jobs", &self.lines()).finish()
        }
    }

    impl Fake {
        /// Lines starting with `prefix` exit with `code`, printing `stdout`
        /// and `stderr`.
        pub fn answer(&self, prefix: &str, code: i32, stdout: &str, stderr: &str) -> &Fake {
            let c = exited(code, stdout, stderr);
            self.answer_with(prefix, move |_| Ok(c.clone()))
        }

        /// Lines starting with `prefix` get what `f` says.
        pub fn answer_with(
            &self,
            prefix: &str,
            f: impl Fn(&Job) -> Result<Captured, Error> + Send + Sync + 'static,
        ) -> &Fake {
            self.answers
                .lock()
                .expect("lock")
                .push((prefix.to_owned(), Arc::new(f)));
            self
        }

        /// The jobs run so far, in order.
        pub fn jobs(&self) -> Vec<Job> {
            self.jobs.lock().expect("lock").clone()
        }

        /// The command lines run so far, in order.
        pub fn lines(&self) -> Vec<String> {
            self.jobs().iter().map(|j| j.cmd.to_string()).collect()
        }
    }

    /// A command that exited with `code`.
    pub fn exited(code: i32, stdout: &str, stderr: &str) -> Captured {
        Captured {
            code: Some(code),
            status: format!("exit status: {code}"),
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            timed_out: false,
            elapsed: Duration::from_millis(1),
        }
    }

    impl Exec for Fake {
        fn call(&self, job: &Job) -> Result<Captured, Error> {
            self.jobs.lock().expect("lock").push(job.clone());
            let line = job.cmd.to_string();
            let answer = self
                .answers
                .lock()
                .expect("lock")
                .iter()
                .find(|(prefix, _)| line.starts_with(prefix.as_str()))
                .map(|(_, a)| Arc::clone(a));
            match answer {
                Some(a) => a(job),
                None => Ok(exited(0, "", "")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_the_command_and_its_stderr_on_failure() {
        let cmd = Cmd::new(
            "sh",
            &["-c", "echo out; echo 'no such container' >&2; exit 3"],
        );
        let err = System.run(&cmd, Duration::from_secs(10)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`sh -c 'echo out; echo '\\''no such container'\\'' >&2; exit 3'` failed (exit status: 3): no such container"
        );
        assert_eq!(
            System
                .run(&Cmd::new("echo", &["ok"]), Duration::from_secs(10))
                .unwrap(),
            "ok\n"
        );
    }

    #[test]
    fn a_timeout_kills_the_whole_process_group() {
        // The shell's child would outlive a kill of the shell alone.
        let dir = std::env::temp_dir().join(format!("nodefall-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pidfile = dir.join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let c = System
            .capture(
                &Cmd::new("sh", &["-c", &script]),
                Duration::from_millis(500),
            )
            .unwrap();
        assert!(c.timed_out && !c.success(), "{c:?}");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed and reaped by init (or zombie until then): not running.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().unwrap_or("").chars().next();
        assert!(
            matches!(state, None | Some('Z')),
            "sleep {pid} still runs: {stat}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn capture_keeps_stdout_and_stderr_of_a_failure() {
        let c = System
            .capture(
                &Cmd::new("sh", &["-c", "echo out; echo err >&2; exit 4"]),
                Duration::from_secs(10),
            )
            .unwrap();
        assert_eq!(
            (c.code, c.stdout.as_str(), c.stderr.as_str()),
            (Some(4), "out\n", "err\n")
        );
        assert_eq!(c.status, "exit status: 4");
        assert!(!c.success());
    }

    #[test]
    fn a_hanging_command_times_out_and_is_reaped() {
        let err = System
            .run(&Cmd::new("sleep", &["30"]), Duration::from_millis(200))
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
    }

    fn sh(script: &str) -> Cmd {
        Cmd::new("sh", &["-c", script])
    }

    fn running(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }

    fn pid_in(file: &std::path::Path) -> i32 {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .trim()
            .parse()
            .unwrap_or(0)
    }

    /// A backend's command, as the command and vagrant backends run it.
    async fn capture(cmd: &Cmd, timeout: Duration) -> Result<Captured, Error> {
        call_blocking(&System, Job::acting(cmd.clone(), timeout)).await
    }

    #[tokio::test]
    async fn output_is_kept_and_what_a_command_leaves_behind_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!(
            "echo out; echo err >&2; sleep 60 >/dev/null 2>&1 & echo $! > {}; exit 3",
            pidfile.display()
        );
        let c = capture(&sh(&script), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(
            (c.code, c.stdout.as_str(), c.stderr.as_str()),
            (Some(3), "out\n", "err\n")
        );
        assert!(c.elapsed < Duration::from_secs(5), "{c:?}");
        let pid = pid_in(&pidfile);
        assert!(pid > 0);
        // Killed with its group; reaped by init.
        let t = Instant::now();
        while running(pid) && t.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!running(pid), "the background sleep {pid} survived");
    }

    #[tokio::test]
    async fn a_timeout_keeps_what_was_printed() {
        let c = capture(&sh("echo before; sleep 30"), Duration::from_millis(500))
            .await
            .unwrap();
        assert!(c.timed_out && !c.success(), "{c:?}");
        assert_eq!(c.stdout, "before\n");
        assert_eq!(c.status, "timed out after 0.5s");
    }

    #[tokio::test]
    async fn a_dropped_run_kills_its_command() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("echo $$ > {}; sleep 60", pidfile.display());
        let cmd = sh(&script);
        let run = capture(&cmd, Duration::from_secs(60));
        // Cancelled like a run stopped by a signal.
        let _ = tokio::time::timeout(Duration::from_millis(500), run).await;
        let pid = pid_in(&pidfile);
        assert!(pid > 0);
        let t = Instant::now();
        while running(pid) && t.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!running(pid), "the command {pid} outlived its run");
    }

    #[tokio::test]
    async fn a_flood_keeps_only_its_end() {
        let c = capture(
            &sh("head -c 200000 /dev/zero | tr '\\0' a; echo END"),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert!(
            c.stdout.starts_with("[134468 bytes cut]...") && c.stdout.ends_with("aEND\n"),
            "{}",
            &c.stdout[..40]
        );
    }

    #[test]
    fn a_job_runs_in_its_directory_and_a_plain_one_keeps_all_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let c = System
            .call(
                &Job::new(
                    sh("pwd; head -c 70000 /dev/zero | tr '\\0' a"),
                    Duration::from_secs(10),
                )
                .in_dir(dir.path()),
            )
            .unwrap();
        let (pwd, rest) = c.stdout.split_once('\n').unwrap();
        assert_eq!(
            std::fs::canonicalize(pwd).unwrap(),
            std::fs::canonicalize(dir.path()).unwrap()
        );
        assert_eq!(rest.len(), 70000);
    }
}
