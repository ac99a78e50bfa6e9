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
#[cfg(any(test, feature = "fake"))]
pub mod fake;

#[cfg(test)]
mod tests;
