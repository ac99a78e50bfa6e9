//! Running external commands (docker, podman) with their output kept, so a
//! failure shows the exact command line and its stderr.

use std::fmt;
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

/// Runs commands. A trait so backends can be tested without the tools.
pub trait Exec: Send + Sync {
    /// Runs `cmd` to completion; returns its stdout, or an error with stderr.
    fn run(&self, cmd: &Cmd, timeout: Duration) -> Result<String, Error>;
}

/// Runs commands for real, each in its own process group, reaped always.
#[derive(Debug, Clone, Copy, Default)]
pub struct System;

impl Exec for System {
    fn run(&self, cmd: &Cmd, timeout: Duration) -> Result<String, Error> {
        use std::io::Read as _;
        use std::os::unix::process::CommandExt as _;

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
        let mut out = child.stdout.take();
        let mut err = child.stderr.take();
        let out_t = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(o) = out.as_mut() {
                let _ = o.read_to_string(&mut s);
            }
            s
        });
        let err_t = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(e) = err.as_mut() {
                let _ = e.read_to_string(&mut s);
            }
            s
        });
        let deadline = std::time::Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().ok().flatten() {
                break Some(status);
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = out_t.join().unwrap_or_default();
        let stderr = err_t.join().unwrap_or_default();
        match status {
            None => Err(Error::Timeout {
                cmd: cmd.clone(),
                after: timeout,
            }),
            Some(s) if s.success() => Ok(stdout),
            Some(s) => Err(Error::Failed {
                cmd: cmd.clone(),
                status: s.to_string(),
                stderr: stderr.trim().to_owned(),
            }),
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
    fn a_hanging_command_times_out_and_is_reaped() {
        let err = System
            .run(&Cmd::new("sleep", &["30"]), Duration::from_millis(200))
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
    }
}
