//! Child processes of a simulated cluster, each in its own process group.
//!
//! A process is identified by its PID *and* its start time (from
//! `/proc/<pid>/stat`), so a recycled PID is never signalled. Processes this
//! nodefall started are kept as [`Child`] handles and reaped with `wait`;
//! processes of a cluster started by another nodefall invocation are
//! signalled through their group and watched in `/proc` until they are gone.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::Error;
use crate::exec::group;

/// How a process is recorded in the cluster's state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcRecord {
    /// Component name (`etcd`, `kube-apiserver`, `kwok/worker-1`, ...).
    pub name: String,
    pub pid: i32,
    /// Start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub start_ticks: u64,
    pub log: PathBuf,
    /// How it was started, so it can be restarted.
    #[serde(default)]
    pub program: PathBuf,
    #[serde(default)]
    pub args: Vec<String>,
}

/// A running process: its record, plus the handle when this process started it.
#[derive(Debug)]
pub struct Proc {
    pub record: ProcRecord,
    child: Option<Child>,
}

impl Proc {
    /// Starts `program` in a new process group, output appended to `log`.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> Result<Proc, Error> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| Error::io(format!("opening log {}", log.display()), source))?;
        let err = out
            .try_clone()
            .map_err(|source| Error::io(format!("opening log {}", log.display()), source))?;
        let child = group::spawn(
            Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err),
        )
        .map_err(|source| Error::Spawn {
            component: name.to_owned(),
            program: program.to_owned(),
            source,
        })?;
        let pid = i32::try_from(child.id()).map_err(|_| Error::io_msg("PID out of range"))?;
        let start_ticks = stat(pid).map(|s| s.start_ticks).unwrap_or(0);
        Ok(Proc {
            record: ProcRecord {
                name: name.to_owned(),
                pid,
                start_ticks,
                log: log.to_owned(),
                program: program.to_owned(),
                args: args.to_vec(),
            },
            child: Some(child),
        })
    }

    /// A process known only from a state file (started by another invocation).
    pub fn adopt(record: ProcRecord) -> Proc {
        Proc {
            record,
            child: None,
        }
    }

    /// Whether the process still runs (not exited, not a zombie, same start time).
    pub fn is_alive(&mut self) -> bool {
        if let Some(child) = &mut self.child {
            return matches!(child.try_wait(), Ok(None));
        }
        is_alive(&self.record)
    }

    /// The exit status, if this process started it and it has exited.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Sends `signal` to the whole process group, if the process is still ours.
    pub fn signal(&mut self, signal: Signal) -> Result<(), Error> {
        if !self.is_alive() {
            return Err(Error::NotRunning {
                component: self.record.name.clone(),
                pid: self.record.pid,
            });
        }
        group::signal(self.record.pid, signal).map_err(|errno| Error::Signal {
            component: self.record.name.clone(),
            pid: self.record.pid,
            signal: signal.as_str(),
            errno,
        })
    }

    /// Stops the process group: SIGTERM (and SIGCONT, in case it is frozen),
    /// then SIGKILL after `grace`; waits until it is gone and reaps it.
    /// Returns true when SIGKILL was needed.
    pub fn stop(&mut self, grace: Duration) -> bool {
        if !self.is_alive() {
            self.reap();
            return false;
        }
        let pgid = self.record.pid;
        let _ = group::signal(pgid, Signal::SIGTERM);
        let _ = group::signal(pgid, Signal::SIGCONT);
        if self.wait_gone(grace) {
            return false;
        }
        self.kill();
        true
    }

    /// Kills the process group at once (a power cut) and reaps it.
    pub fn kill(&mut self) {
        if let Some(child) = &mut self.child {
            group::kill_and_reap(child, REAP);
            return;
        }
        if self.is_alive() {
            let _ = group::signal(self.record.pid, Signal::SIGKILL);
        }
        self.wait_gone(REAP);
    }

    /// [`Proc::stop`] for async callers (a fault on a running scenario): its
    /// waits yield to the runtime instead of sleeping on a worker.
    pub async fn stop_async(&mut self, grace: Duration) -> bool {
        if self.gone() {
            return false;
        }
        let pgid = self.record.pid;
        let _ = group::signal(pgid, Signal::SIGTERM);
        let _ = group::signal(pgid, Signal::SIGCONT);
        if self.wait_gone_async(grace).await {
            return false;
        }
        self.kill_async().await;
        true
    }

    /// [`Proc::kill`] for async callers.
    pub async fn kill_async(&mut self) {
        if self.is_alive() {
            let _ = group::signal(self.record.pid, Signal::SIGKILL);
        }
        self.wait_gone_async(REAP).await;
    }

    /// Whether the process is gone (reaped if it was our child).
    fn gone(&mut self) -> bool {
        if self.is_alive() {
            return false;
        }
        self.reap();
        true
    }

    async fn wait_gone_async(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.gone() {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL_GONE).await;
        }
        true
    }

    fn reap(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.try_wait();
        }
    }

    /// Waits for the process to disappear. There is no portable way to wait
    /// for a process that is not our child, so this checks every 20 ms.
    fn wait_gone(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.gone() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL_GONE);
        }
        true
    }
}

/// How often a stopping process is looked for (it is not always our child).
const POLL_GONE: Duration = Duration::from_millis(20);
/// How long a killed process may take to be gone.
const REAP: Duration = Duration::from_secs(10);

/// Whether the recorded process still runs: same PID and start time, not a zombie.
pub fn is_alive(record: &ProcRecord) -> bool {
    runs(record.pid, record.start_ticks)
}

/// Whether process `pid` runs and started at `start_ticks` (not a zombie).
pub fn runs(pid: i32, start_ticks: u64) -> bool {
    match stat(pid) {
        Some(s) => s.state != 'Z' && s.state != 'X' && s.start_ticks == start_ticks,
        None => false,
    }
}

/// Whether the recorded process runs but is stopped (SIGSTOP: `T`).
pub fn is_stopped(record: &ProcRecord) -> bool {
    stat(record.pid).is_some_and(|s| s.state == 'T' && s.start_ticks == record.start_ticks)
}

/// The start time of process `pid` in clock ticks since boot, if it exists.
pub fn start_ticks(pid: i32) -> Option<u64> {
    stat(pid).map(|s| s.start_ticks)
}

/// This process's PID and start time, to name it to a process that watches it.
pub fn current() -> Result<(i32, u64), Error> {
    let pid = i32::try_from(std::process::id()).map_err(|_| Error::io_msg("PID out of range"))?;
    let ticks = start_ticks(pid).ok_or_else(|| {
        Error::io_msg(format!(
            "cannot read /proc/{pid}/stat (this process's start time); is /proc mounted?"
        ))
    })?;
    Ok((pid, ticks))
}

/// Resident memory of a process in bytes (`VmRSS`), if it runs.
pub fn rss_bytes(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The last `lines` lines of a log file, for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

struct Stat {
    state: char,
    start_ticks: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state); start time is field 22.
    Some(Stat {
        state: fields.first()?.chars().next()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawned_group_is_stopped_and_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sleep.log");
        let mut p = Proc::spawn(
            "sleeper",
            Path::new("/bin/sh"),
            &["-c".into(), "sleep 30 & wait".into()],
            &log,
        )
        .unwrap();
        assert!(p.is_alive());
        assert!(is_alive(&p.record));
        p.signal(Signal::SIGSTOP).unwrap();
        // A frozen group still stops on SIGTERM because stop() also sends SIGCONT.
        let killed = p.stop(Duration::from_secs(5));
        assert!(!killed, "sh and sleep exit on SIGTERM");
        assert!(!is_alive(&p.record));
        assert!(
            p.signal(Signal::SIGCONT).is_err(),
            "no signal to a gone process"
        );
    }

    #[test]
    fn recycled_pid_is_not_ours() {
        let record = ProcRecord {
            name: "self".into(),
            pid: i32::try_from(std::process::id()).unwrap(),
            start_ticks: 1,
            log: PathBuf::new(),
            program: PathBuf::new(),
            args: Vec::new(),
        };
        assert!(
            !is_alive(&record),
            "a different start time means a different process"
        );
    }
}
