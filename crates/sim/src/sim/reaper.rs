//! The reaper of a throwaway simulated cluster: a detached `nodefall sim reap`
//! process that tears the cluster down when the nodefall process that started
//! it dies without doing so (SIGKILL, OOM kill, crash).
//!
//! Why a separate process and not `PR_SET_PDEATHSIG`: the death signal fires
//! when the *thread* that forked exits, and the cluster's processes are
//! spawned from tokio threads that come and go, so it would kill clusters
//! early (and setting it needs `pre_exec`, i.e. unsafe code).
//!
//! The reaper identifies its parent by PID *and* start time, so a recycled
//! PID does not keep it waiting. It leaves on its own, touching nothing, when
//! the cluster's state is gone (a normal `down`), when the cluster is marked
//! kept (`detach`: `sim up`, `scenario --keep`) or when another reaper is
//! recorded. Its owner also stops it in `down` and `detach`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Error;
use super::process::{self, Proc};
use super::state::{Layout, State};
use super::teardown;

/// How often the reaper looks at its parent and the cluster's state. There is
/// no way to wait for a process that is not one's child without a pidfd, so it
/// polls; 250 ms bounds how long a dead nodefall's cluster keeps running.
pub const POLL: Duration = Duration::from_millis(250);

/// Component name of the reaper (its log is `logs/reaper.log`).
pub const NAME: &str = "reaper";

/// What `nodefall sim reap` is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReapOptions {
    /// Cluster name.
    pub name: String,
    /// Directory holding one directory per cluster.
    pub root: PathBuf,
    /// PID of the nodefall process that owns the cluster.
    pub parent: i32,
    /// Its start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub parent_start: u64,
}

impl ReapOptions {
    /// The command-line arguments of the hidden `nodefall sim reap` subcommand.
    pub fn args(&self) -> Vec<String> {
        vec![
            "sim".into(),
            "reap".into(),
            "--name".into(),
            self.name.clone(),
            "--root".into(),
            self.root.display().to_string(),
            "--parent".into(),
            self.parent.to_string(),
            "--parent-start".into(),
            self.parent_start.to_string(),
        ]
    }
}

/// Starts `exe sim reap ...` for the cluster `name` under `root`, watching
/// this process: in its own process group (a Ctrl-C at the terminal does not
/// reach it), stdin from /dev/null, output appended to `log` (never the
/// caller's stdout/stderr, which someone may read until EOF).
pub fn spawn(exe: &Path, root: &Path, name: &str, log: &Path) -> Result<Proc, Error> {
    let (parent, parent_start) = process::current()?;
    // The reaper outlives this process; a relative root would still work (it
    // inherits the working directory) but is fragile to read in `ps`.
    let root = std::path::absolute(root)
        .map_err(|e| Error::io(format!("resolving {}", root.display()), e))?;
    let opts = ReapOptions {
        name: name.to_owned(),
        root,
        parent,
        parent_start,
    };
    Proc::spawn(NAME, exe, &opts.args(), log)
}

/// What the cluster's state says, seen from a reaper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// `state.json` is gone: the cluster was taken down normally.
    Removed,
    /// The cluster is marked kept (`detach`).
    Kept,
    /// Another process is recorded as the reaper (a newer one took over).
    OtherReaper,
    /// This process, or no reaper yet (the parent records the reaper just
    /// after starting it, and may die in between).
    Mine,
    /// `state.json` exists but cannot be read.
    Unreadable,
}

/// Why a reaper left without tearing anything down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    Removed,
    Kept,
    Replaced,
}

impl std::fmt::Display for Left {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Left::Removed => "the cluster's state is gone (taken down normally)",
            Left::Kept => "the cluster is kept; not touching it",
            Left::Replaced => "another reaper is recorded for the cluster",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Wait,
    Leave(Left),
    TearDown,
}

/// What to do after a look. A kept cluster is never torn down, even when
/// the parent is gone as well.
pub fn decide(recorded: Recorded, parent_alive: bool) -> Decision {
    match recorded {
        Recorded::Removed => Decision::Leave(Left::Removed),
        Recorded::Kept => Decision::Leave(Left::Kept),
        Recorded::OtherReaper => Decision::Leave(Left::Replaced),
        Recorded::Mine | Recorded::Unreadable if parent_alive => Decision::Wait,
        Recorded::Mine | Recorded::Unreadable => Decision::TearDown,
    }
}

/// Reads the state as a reaper sees it; says an unreadable state once.
fn look(layout: &Layout, me: (i32, u64), said: &mut bool, log: &mut dyn FnMut(&str)) -> Recorded {
    let path = layout.state();
    if !path.is_file() {
        return Recorded::Removed;
    }
    match State::load(&path) {
        Ok(state) if state.kept => Recorded::Kept,
        Ok(State {
            reaper: Some(r), ..
        }) if (r.pid, r.start_ticks) != me => Recorded::OtherReaper,
        Ok(_) => Recorded::Mine,
        // Removed between the check and the read.
        Err(_) if !path.is_file() => Recorded::Removed,
        Err(e) => {
            // Saves are atomic (rename), so this is no torn write; keep
            // watching the parent, and try `down` (which will say why it
            // cannot) if it dies.
            if !*said {
                log(&format!("cannot read the cluster state: {e}"));
                *said = true;
            }
            Recorded::Unreadable
        }
    }
}

/// What a reaper did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reaped {
    Left(Left),
    /// The parent died; the cluster was stopped and removed. Lists the
    /// components that needed SIGKILL.
    TornDown {
        killed: Vec<String>,
    },
}

/// The reaper's loop: waits (polling every [`POLL`]) until the parent is
/// gone, then takes the cluster down as `nodefall sim down` does. It has no
/// deadline of its own: it lives exactly as long as its parent's run.
pub fn run(opts: &ReapOptions, log: &mut dyn FnMut(&str)) -> Result<Reaped, Error> {
    let (me, my_start) = process::current()?;
    let layout = Layout::new(&opts.root, &opts.name)?;
    log(&format!(
        "watching nodefall pid {} (start {}) for cluster `{}` in {}",
        opts.parent,
        opts.parent_start,
        opts.name,
        layout.dir.display()
    ));
    let mut said = false;
    loop {
        let recorded = look(&layout, (me, my_start), &mut said, log);
        match decide(recorded, process::runs(opts.parent, opts.parent_start)) {
            Decision::Wait => std::thread::sleep(POLL),
            Decision::Leave(why) => return Ok(Reaped::Left(why)),
            Decision::TearDown => {
                log(&format!(
                    "nodefall pid {} is gone; taking cluster `{}` down",
                    opts.parent, opts.name
                ));
                return tear_down(&layout);
            }
        }
    }
}

/// Takes the cluster down as `nodefall sim down` does, from its state file
/// (read afresh: it may have changed since the last look).
fn tear_down(layout: &Layout) -> Result<Reaped, Error> {
    // Removed between the look and now: nothing left to do.
    if !layout.state().is_file() {
        return Ok(Reaped::Left(Left::Removed));
    }
    let state = State::load(&layout.state())?;
    // Kept in the moment between the look and now.
    if state.kept {
        return Ok(Reaped::Left(Left::Kept));
    }
    Ok(Reaped::TornDown {
        killed: teardown::down(layout, &state)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_while_the_parent_runs() {
        assert_eq!(decide(Recorded::Mine, true), Decision::Wait);
        assert_eq!(decide(Recorded::Unreadable, true), Decision::Wait);
    }

    #[test]
    fn tears_down_when_the_parent_is_gone() {
        // `Mine` also covers a parent that died before recording the reaper.
        assert_eq!(decide(Recorded::Mine, false), Decision::TearDown);
        assert_eq!(decide(Recorded::Unreadable, false), Decision::TearDown);
    }

    #[test]
    fn never_tears_down_a_kept_or_removed_cluster() {
        for parent in [true, false] {
            assert_eq!(decide(Recorded::Kept, parent), Decision::Leave(Left::Kept));
            assert_eq!(
                decide(Recorded::OtherReaper, parent),
                Decision::Leave(Left::Replaced)
            );
            assert_eq!(
                decide(Recorded::Removed, parent),
                Decision::Leave(Left::Removed)
            );
        }
    }

    #[test]
    fn arguments_round_trip_through_the_cli_names() {
        let opts = ReapOptions {
            name: "scenario-7".into(),
            root: PathBuf::from("/tmp/state"),
            parent: 42,
            parent_start: 1234,
        };
        assert_eq!(
            opts.args().join(" "),
            "sim reap --name scenario-7 --root /tmp/state --parent 42 --parent-start 1234"
        );
    }
}
