//! Running external commands (docker, podman) with their output kept, so a
//! failure shows the exact command line and its stderr.

use std::fmt;
use std::io::Read;
use std::process::Command;
use std::time::Duration;

/// A command line: program and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    pub program: String,
    pub args: Vec<String>,
}

impl Cmd {
    pub fn new(program: &str, args: &[&str]) -> Cmd {
        Cmd {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.program)?;
        for a in &self.args {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\{}".contains(c)) {
                write!(f, " '{}'", a.replace('\'', r"'\''"))?;
            } else {
                write!(f, " {a}")?;
            }
        }
        Ok(())
    }
}

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
    /// `exit status: 1`, `signal: 9 (SIGKILL)`, or `timed out after 60s`.
    pub status: String,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub elapsed: Duration,
}

impl Captured {
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }
}

/// Runs commands. A trait so backends can be tested without the tools.
pub trait Exec: Send + Sync {
    /// Runs `cmd` to completion; returns its stdout, or an error with stderr.
    fn run(&self, cmd: &Cmd, timeout: Duration) -> Result<String, Error>;
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
        Err(e) => Err(Error::Spawn {
            cmd: shown,
            source: std::io::Error::other(e.to_string()),
        }),
    }
}

/// Runs commands for real, each in its own process group (stdin closed),
/// reaped always; on timeout the whole group is killed.
#[derive(Debug, Clone, Copy, Default)]
pub struct System;

impl Exec for System {
    fn run(&self, cmd: &Cmd, timeout: Duration) -> Result<String, Error> {
        let c = self.capture(cmd, timeout)?;
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

impl System {
    /// Runs `cmd` to completion or `timeout`, whatever its exit: an error
    /// only when it could not be started.
    pub fn capture(&self, cmd: &Cmd, timeout: Duration) -> Result<Captured, Error> {
        use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};

        tracing::debug!("running `{cmd}`");
        let started = std::time::Instant::now();
        let mut child = Command::new(&cmd.program)
            .args(&cmd.args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|source| Error::Spawn {
                cmd: cmd.clone(),
                source,
            })?;
        // Read both pipes on threads so a chatty command cannot block.
        let read = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut bytes);
                }
                String::from_utf8_lossy(&bytes).into_owned()
            })
        };
        let out_t = read(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let err_t = read(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let deadline = started + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().ok().flatten() {
                break Some(status);
            }
            if std::time::Instant::now() >= deadline {
                // The whole group: a shell's children go too.
                if let Ok(pid) = i32::try_from(child.id()) {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // A grandchild that left the group could hold the pipes open: the
        // readers are not waited for past a short grace after the exit.
        let stdout = join_within(out_t, Duration::from_secs(2));
        let stderr = join_within(err_t, Duration::from_secs(2));
        let elapsed = started.elapsed();
        Ok(match status {
            None => Captured {
                code: None,
                status: format!("timed out after {}s", timeout.as_secs()),
                stdout,
                stderr,
                timed_out: true,
                elapsed,
            },
            Some(s) => Captured {
                code: s.code(),
                status: match s.signal() {
                    Some(sig) => format!("killed by signal {sig}"),
                    None => s.to_string(),
                },
                stdout,
                stderr,
                timed_out: false,
                elapsed,
            },
        })
    }
}

/// A reader thread's text, or what it has not got when it is still blocked
/// after `grace` (a background process kept the pipe open).
fn join_within(t: std::thread::JoinHandle<String>, grace: Duration) -> String {
    let deadline = std::time::Instant::now() + grace;
    while !t.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if t.is_finished() {
        t.join().unwrap_or_default()
    } else {
        String::from("(output not read: a background process kept it open)")
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
}
