//! One shutdown path for SIGINT, SIGTERM and SIGHUP: whichever arrives first
//! stops the run, which then reverts, reports and exits with 128 + the
//! signal's number; a second one during cleanup abandons it (the journal keeps
//! what is left for `nodefall recover`).
//!
//! CI runners, `timeout`, systemd and Kubernetes Jobs stop with SIGTERM and a
//! closed terminal sends SIGHUP, so all three take the same path as Ctrl-C.

use std::fmt;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// A signal that stops a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Interrupt,
    Terminate,
    Hangup,
}

impl Stop {
    /// The signal's name (`SIGTERM`).
    pub fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
            Stop::Hangup => "SIGHUP",
        }
    }

    /// The conventional exit code of a process stopped by it: 128 + signo.
    pub fn exit_code(self) -> u8 {
        match self {
            Stop::Interrupt => 130,
            Stop::Terminate => 143,
            Stop::Hangup => 129,
        }
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Signals received so far; clones share them, each with its own cursor.
#[derive(Debug, Clone)]
pub struct Signals {
    rx: watch::Receiver<(u32, Option<Stop>)>,
    first: watch::Receiver<Option<Stop>>,
}

/// Installs the handlers (inside a Tokio runtime). From here on the three
/// signals no longer end the process by themselves: the run decides.
pub fn install() -> std::io::Result<Signals> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let (raise, signals) = by_hand();
    tokio::spawn(async move {
        loop {
            let stop = tokio::select! {
                Some(()) = int.recv() => Stop::Interrupt,
                Some(()) = term.recv() => Stop::Terminate,
                Some(()) = hup.recv() => Stop::Hangup,
                else => break,
            };
            raise.raise(stop);
        }
    });
    Ok(signals)
}

/// Delivers signals to a [`Signals`]: the handlers do, and a test does by
/// hand.
#[derive(Debug)]
pub struct Raise {
    tx: watch::Sender<(u32, Option<Stop>)>,
    first: watch::Sender<Option<Stop>>,
}

impl Raise {
    /// As if the process had received `stop`.
    pub fn raise(&self, stop: Stop) {
        self.first.send_if_modified(|f| {
            if f.is_none() {
                *f = Some(stop);
                true
            } else {
                false
            }
        });
        self.tx.send_modify(|(n, last)| {
            *n += 1;
            *last = Some(stop);
        });
    }
}

/// Signals that only [`Raise::raise`] delivers (no handler installed).
pub fn by_hand() -> (Raise, Signals) {
    let (tx, rx) = watch::channel((0u32, None));
    let (first_tx, first) = watch::channel(None);
    (
        Raise {
            tx,
            first: first_tx,
        },
        Signals { rx, first },
    )
}

impl Signals {
    /// Waits for the next signal not yet seen through this handle. A signal
    /// that arrived before the first call counts as not yet seen.
    pub async fn next(&mut self) -> Stop {
        loop {
            if self.rx.changed().await.is_err() {
                // The listener is gone (runtime shutting down): nothing more
                // will arrive.
                std::future::pending::<()>().await;
            }
            if let (_, Some(stop)) = *self.rx.borrow_and_update() {
                return stop;
            }
        }
    }

    /// The first signal received, if any.
    pub fn first(&self) -> Option<Stop> {
        *self.first.borrow()
    }

    /// Marks every signal so far as seen (so `next` waits for a new one).
    pub fn mark_seen(&mut self) {
        self.rx.borrow_and_update();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_128_plus_the_signal_number() {
        assert_eq!(Stop::Interrupt.exit_code(), 128 + 2);
        assert_eq!(Stop::Hangup.exit_code(), 128 + 1);
        assert_eq!(Stop::Terminate.exit_code(), 128 + 15);
    }
}
