//! Running one command of the command backend, asynchronously, so that a
//! run stopped by a signal stops its command too: the command's process
//! group is killed when the future is dropped, when its time is up, and
//! once the command itself has exited (a background process it left would
//! otherwise go on acting on a machine nodefall believes reverted).
//! Output is read as it comes, each stream keeping its last
//! [`KEEP`] bytes, and what was read survives a timeout.

use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::exec::{self, Captured, Cmd};

/// Bytes of each stream kept while reading (the end).
pub const KEEP: usize = 64 * 1024;
/// How long output is still read after the command exited.
const DRAIN: Duration = Duration::from_secs(2);

/// Kills a process group when dropped, unless disarmed.
struct Group(Option<i32>);

impl Group {
    fn kill(&mut self) {
        if let Some(pgid) = self.0 {
            // Gone already is fine.
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last [`KEEP`] bytes of a stream.
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
    cut: usize,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > KEEP {
            let drop = self.bytes.len() - KEEP;
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

/// Reads a chunk into `tail`; false at the end of the stream (or on error).
async fn chunk<R: AsyncRead + Unpin>(r: &mut R, tail: &mut Tail, buf: &mut [u8]) -> bool {
    match r.read(buf).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            tail.push(&buf[..n]);
            true
        }
    }
}

/// Runs `cmd` in its own process group, stdin closed, until it exits or
/// `timeout`; an error only when it could not be started.
pub async fn capture(cmd: &Cmd, timeout: Duration) -> Result<Captured, exec::Error> {
    capture_in(cmd, None, timeout).await
}

/// [`capture`] in a working directory (`vagrant` reads the project it is
/// run in).
pub async fn capture_in(
    cmd: &Cmd,
    dir: Option<&std::path::Path>,
    timeout: Duration,
) -> Result<Captured, exec::Error> {
    let started = Instant::now();
    let mut command = tokio::process::Command::new(&cmd.program);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut child = command
        .args(&cmd.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| exec::Error::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    let mut group = Group(child.id().and_then(|p| i32::try_from(p).ok()));
    let (Some(mut out), Some(mut err)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(exec::Error::Spawn {
            cmd: cmd.clone(),
            source: std::io::Error::other("no pipes to the command"),
        });
    };
    let (mut so, mut se) = (Tail::default(), Tail::default());
    let (mut bo, mut be) = ([0u8; 8192], [0u8; 8192]);
    let (mut out_open, mut err_open) = (true, true);
    let mut status = None;
    let deadline = tokio::time::Instant::from_std(started + timeout);
    let mut drain_until = deadline;
    loop {
        if status.is_some() && !out_open && !err_open {
            break;
        }
        tokio::select! {
            open = chunk(&mut out, &mut so, &mut bo), if out_open => out_open = open,
            open = chunk(&mut err, &mut se, &mut be), if err_open => err_open = open,
            s = child.wait(), if status.is_none() => {
                status = Some(s);
                // What it left behind in its group goes with it.
                group.kill();
                drain_until = drain_until.min(tokio::time::Instant::now() + DRAIN);
            }
            () = tokio::time::sleep_until(drain_until) => break,
        }
    }
    group.kill();
    group.0 = None;
    let elapsed = started.elapsed();
    Ok(match status {
        None => {
            let _ = child.kill().await;
            Captured {
                code: None,
                status: format!(
                    "timed out after {}",
                    crate::scenario::duration::Dur(timeout)
                ),
                stdout: so.text(),
                stderr: se.text(),
                timed_out: true,
                elapsed,
            }
        }
        Some(Err(e)) => Captured {
            code: None,
            status: format!("could not be waited for: {e}"),
            stdout: so.text(),
            stderr: se.text(),
            timed_out: false,
            elapsed,
        },
        Some(Ok(s)) => {
            use std::os::unix::process::ExitStatusExt as _;
            Captured {
                code: s.code(),
                status: match s.signal() {
                    Some(sig) => format!("killed by signal {sig}"),
                    None => s.to_string(),
                },
                stdout: so.text(),
                stderr: se.text(),
                timed_out: false,
                elapsed,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
