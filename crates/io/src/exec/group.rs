//! Process groups: every process nodefall starts (a command run to
//! completion by [`super::System`], a daemon of the sim kept as
//! `sim::process::Proc`) leads a group of its own, so that what it starts
//! in turn is signalled with it, and nothing else is.

use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How often a killed child is looked at until it is reaped.
const POLL: Duration = Duration::from_millis(10);

/// Starts `command` as the leader of a new process group (its PGID is its
/// PID).
pub fn spawn(command: &mut Command) -> io::Result<Child> {
    command.process_group(0).spawn()
}

/// The group `child` leads (see [`spawn`]).
pub fn of(child: &Child) -> Option<i32> {
    i32::try_from(child.id()).ok()
}

/// Sends `signal` to the process group `pgid`.
pub fn signal(pgid: i32, signal: Signal) -> nix::Result<()> {
    killpg(Pid::from_raw(pgid), signal)
}

/// Kills the group `child` leads (SIGKILL) and reaps `child`, waiting at
/// most `within`; its exit status once reaped. The group is signalled only
/// while `child` is not reaped, so a recycled PID is never signalled.
pub fn kill_and_reap(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    if let Some(pgid) = of(child) {
        // Gone already is fine.
        let _ = signal(pgid, Signal::SIGKILL);
    }
    let deadline = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_goes_with_its_leader_and_the_leader_is_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let mut child = spawn(Command::new("sh").args(["-c", &script])).unwrap();
        let t = Instant::now();
        while !std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
            && t.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let status = kill_and_reap(&mut child, Duration::from_secs(10)).expect("reaped");
        assert!(!status.success());
        // The shell's child went too (a zombie until init reaps it).
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let t = Instant::now();
        let runs = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.rsplit(") ").next().unwrap_or("").starts_with('Z'))
        };
        while runs() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!runs(), "sleep {pid} survived its group");
        // Reaped already: its status again, nothing signalled.
        assert_eq!(kill_and_reap(&mut child, Duration::ZERO), Some(status));
    }
}
