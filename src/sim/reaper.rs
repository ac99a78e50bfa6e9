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
//! PID does not keep it waiting. It leaves on its own when the cluster's
//! state is gone (a normal `down`) or when the cluster no longer names it as
//! its reaper (kept with `--keep`, or a named cluster: `detach`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Error;
use super::cluster::SimCluster;
use super::process::{self, Proc};
use super::state::{Layout, State};

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
pub(crate) fn spawn(exe: &Path, root: &Path, name: &str, log: &Path) -> Result<Proc, Error> {
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

/// How the cluster's state names its reaper, seen from a reaper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// This process.
    Me,
    /// Another process (a newer reaper took over).
    Other,
    /// No reaper recorded.
    Nobody,
    /// `state.json` exists but cannot be read.
    Unreadable,
}

/// One look at the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// `state.json` exists.
    pub state_present: bool,
    pub recorded: Recorded,
    /// This reaper has seen itself recorded before: a record that is gone
    /// since means the cluster was detached, while a record not yet written
    /// means the parent has not saved it yet (or died before it could).
    pub seen_self: bool,
    pub parent_alive: bool,
}

/// Why a reaper left without tearing anything down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// The cluster's state is gone: it was taken down normally.
    Removed,
    /// The cluster no longer names this reaper: it is kept.
    Detached,
    /// Another reaper is recorded.
    Replaced,
}

impl std::fmt::Display for Left {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Left::Removed => "the cluster's state is gone (taken down normally)",
            Left::Detached => "the cluster was kept (detached); not touching it",
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
pub fn decide(look: Look) -> Decision {
    if !look.state_present {
        return Decision::Leave(Left::Removed);
    }
    match look.recorded {
        Recorded::Other => return Decision::Leave(Left::Replaced),
        Recorded::Nobody if look.seen_self => return Decision::Leave(Left::Detached),
        _ => {}
    }
    if look.parent_alive {
        Decision::Wait
    } else {
        Decision::TearDown
    }
}

/// What a reaper did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
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
pub fn run(opts: &ReapOptions, log: &mut dyn FnMut(&str)) -> Result<Outcome, Error> {
    let (me, my_start) = process::current()?;
    let layout = Layout::new(&opts.root, &opts.name);
    log(&format!(
        "watching nodefall pid {} (start {}) for cluster `{}` in {}",
        opts.parent,
        opts.parent_start,
        opts.name,
        layout.dir.display()
    ));
    let mut seen_self = false;
    let mut unreadable_logged = false;
    loop {
        let state_present = layout.state().is_file();
        let recorded = match State::load(&layout.state()) {
            Ok(state) => match state.reaper {
                Some(r) if r.pid == me && r.start_ticks == my_start => Recorded::Me,
                Some(_) => Recorded::Other,
                None => Recorded::Nobody,
            },
            Err(e) => {
                // Saves are atomic (rename), so this is not a torn write;
                // say it once and keep watching the parent.
                if state_present && !unreadable_logged {
                    log(&format!("cannot read the cluster state: {e}"));
                    unreadable_logged = true;
                }
                Recorded::Unreadable
            }
        };
        let look = Look {
            state_present,
            recorded,
            seen_self,
            parent_alive: process::runs(opts.parent, opts.parent_start),
        };
        seen_self |= recorded == Recorded::Me;
        match decide(look) {
            Decision::Wait => std::thread::sleep(POLL),
            Decision::Leave(why) => return Ok(Outcome::Left(why)),
            Decision::TearDown => {
                log(&format!(
                    "nodefall pid {} is gone; taking cluster `{}` down",
                    opts.parent, opts.name
                ));
                return match SimCluster::open(&opts.root, &opts.name) {
                    Ok(cluster) => Ok(Outcome::TornDown {
                        killed: cluster.down()?,
                    }),
                    // Removed between the look and now: nothing left to do.
                    Err(Error::NoCluster { .. }) => Ok(Outcome::Left(Left::Removed)),
                    Err(e) => Err(e),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(state_present: bool, recorded: Recorded, seen_self: bool, parent: bool) -> Look {
        Look {
            state_present,
            recorded,
            seen_self,
            parent_alive: parent,
        }
    }

    #[test]
    fn waits_while_the_parent_runs() {
        for recorded in [Recorded::Me, Recorded::Nobody, Recorded::Unreadable] {
            assert_eq!(decide(look(true, recorded, false, true)), Decision::Wait);
        }
        assert_eq!(decide(look(true, Recorded::Me, true, true)), Decision::Wait);
    }

    #[test]
    fn tears_down_when_the_parent_is_gone() {
        assert_eq!(
            decide(look(true, Recorded::Me, true, false)),
            Decision::TearDown
        );
        // The parent died between starting the reaper and recording it.
        assert_eq!(
            decide(look(true, Recorded::Nobody, false, false)),
            Decision::TearDown
        );
        assert_eq!(
            decide(look(true, Recorded::Unreadable, true, false)),
            Decision::TearDown
        );
    }

    #[test]
    fn never_tears_down_a_kept_cluster() {
        for parent in [true, false] {
            assert_eq!(
                decide(look(true, Recorded::Nobody, true, parent)),
                Decision::Leave(Left::Detached)
            );
            assert_eq!(
                decide(look(true, Recorded::Other, true, parent)),
                Decision::Leave(Left::Replaced)
            );
        }
    }

    #[test]
    fn leaves_when_the_cluster_is_gone() {
        for parent in [true, false] {
            assert_eq!(
                decide(look(false, Recorded::Unreadable, true, parent)),
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
