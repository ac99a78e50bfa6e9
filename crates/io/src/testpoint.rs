//! Named points where a test stops a run with a signal, deterministically:
//! not after a sleep, but the moment the run reaches the point.
//!
//! With `NODEFALL_TEST_SIGNAL_AT=POINT[,POINT...]` (and
//! `NODEFALL_TEST_SIGNAL=INT`, `TERM` or `HUP`; INT by default) the process
//! sends itself the signal the first time it reaches each `POINT`, logs that
//! it did, and then waits there (at most [`HOLD`]), so the signal takes the
//! run exactly at that point: a step in progress is dropped there. In
//! cleanup a first signal does not stop the revert, so a second point there
//! (`step-2,sim:restore`) abandons the cleanup half-way through a revert.
//! Without the variable a point costs one load of an initialised cell.
//!
//! The points (`#N` as the progress lines number steps):
//! - `step-N`: before step N starts; `steps-end`: after the last step;
//! - `fault-N:journaled`: fault step N is journaled, not yet injected;
//!   `fault-N:injected`: injected, its journal entry not yet settled;
//! - `sim:freeze`, `sim:kill`, `sim:stop`, `sim:thaw`, `sim:start`,
//!   `sim:restore`: half-way through the sim's node operation (a fault's
//!   state recorded and the agent signalled; the frozen agent killed and
//!   forgotten, no new one started; the Node registered, its agent not
//!   started; in cleanup's revert, the old agent killed, no new one yet);
//! - `kind:guarded`: `nodefall kind up` has its network and guard (and the
//!   host's sysctls journaled), no cluster yet.
//!
//! `NODEFALL_TEST_SIGNAL=KILL` kills the process at the point (what a
//! SIGKILL leaves, for `nodefall recover`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, raise};

/// How long a point holds the run after its signal.
pub const HOLD: Duration = Duration::from_secs(30);

struct Armed {
    /// Each point, and whether it fired already.
    points: Vec<(String, AtomicBool)>,
    signal: Signal,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let points: Vec<(String, AtomicBool)> = std::env::var("NODEFALL_TEST_SIGNAL_AT")
                .ok()?
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| (p.to_owned(), AtomicBool::new(false)))
                .collect();
            if points.is_empty() {
                return None;
            }
            let signal = match std::env::var("NODEFALL_TEST_SIGNAL").as_deref() {
                Ok("TERM") => Signal::SIGTERM,
                Ok("HUP") => Signal::SIGHUP,
                // The process dies on the spot: what a kill leaves for `recover`.
                Ok("KILL") => Signal::SIGKILL,
                _ => Signal::SIGINT,
            };
            Some(Armed { points, signal })
        })
        .as_ref()
}

/// The run reached `point` (its name built only when a test armed one).
pub async fn reached(point: impl FnOnce() -> String) {
    let Some(a) = armed() else { return };
    let name = point();
    let Some((_, fired)) = a.points.iter().find(|(p, _)| *p == name) else {
        return;
    };
    if fired.swap(true, Ordering::Relaxed) {
        return;
    }
    tracing::warn!("test point {name}: sending {}", a.signal);
    if let Err(e) = raise(a.signal) {
        tracing::warn!("test point {name}: raise failed: {e}");
        return;
    }
    tokio::time::sleep(HOLD).await;
    tracing::warn!(
        "test point {name}: not stopped within {}s; going on",
        HOLD.as_secs()
    );
}
