//! One logging path: nodefall's progress lines and warnings, and the logs of
//! the crates it runs on (kube-rs' watch restarts and retries, hyper), all go
//! through `tracing` to stderr.
//!
//! - text (default): each line as nodefall words it, no level or target
//!   prefix, so what users read is unchanged; lines go around the live
//!   progress line instead of through it;
//! - `--log-format json`: one JSON object per line (for CI log collectors);
//! - `-v`: nodefall's debug lines and kube-rs' own; `-vv`: everything at
//!   trace; `--quiet`: warnings and errors only, no live line;
//! - `RUST_LOG` (an `EnvFilter` directive) replaces the level flags.

use std::io::Write as _;
use std::sync::{Mutex, OnceLock, PoisonError};

use indicatif::ProgressBar;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Plain lines, as nodefall words them.
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, target, fields.
    Json,
}

/// The logging flags, resolved.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// `-v` count.
    pub verbose: u8,
    pub quiet: bool,
    pub format: Format,
}

impl Options {
    /// The filter when `RUST_LOG` is not set.
    pub fn default_filter(self) -> &'static str {
        match (self.quiet, self.verbose) {
            // nodefall's own, as without -q: kube-rs logs every 5xx of the
            // API server starting up at error level, which nodefall handles
            (true, _) => "nodefall=warn",
            (false, 0) => "nodefall=info",
            (false, 1) => "info,nodefall=debug,kube=debug,kube_runtime=debug,kube_client=debug",
            (false, _) => "trace",
        }
    }
}

/// The subscriber could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("RUST_LOG is not a valid filter ({0}); e.g. RUST_LOG=nodefall=debug,kube=debug")]
    Filter(String),
    #[error("a logger is already installed")]
    Installed,
}

static OPTIONS: OnceLock<Options> = OnceLock::new();
/// The live progress line being drawn, if any: log lines are written around it.
static LIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Installs the process-wide subscriber (once, at the binary's edge).
pub fn init(options: Options) -> Result<(), Error> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => {
            EnvFilter::try_new(&directives).map_err(|e| Error::Filter(e.to_string()))?
        }
        _ => EnvFilter::new(options.default_filter()),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Stderr);
    let installed = match options.format {
        Format::Text => builder
            .without_time()
            .with_level(false)
            .with_target(false)
            .with_ansi(false)
            .try_init(),
        Format::Json => builder.json().with_current_span(false).try_init(),
    };
    installed.map_err(|_| Error::Installed)?;
    let _ = OPTIONS.set(options);
    Ok(())
}

/// Whether a live progress line may be drawn: text logs, not quiet (the
/// caller checks that stderr is a terminal).
pub fn live_line_allowed() -> bool {
    OPTIONS
        .get()
        .is_none_or(|o| !o.quiet && o.format == Format::Text)
}

/// The logs' format (text when logging was not set up).
pub fn format() -> Format {
    OPTIONS.get().map(|o| o.format).unwrap_or_default()
}

/// Registers the live progress line (or clears it with `None`).
pub fn set_live(bar: Option<ProgressBar>) {
    *LIVE.lock().unwrap_or_else(PoisonError::into_inner) = bar;
}

/// Where the subscriber writes: stderr, one whole event at a time.
#[derive(Debug, Clone, Copy)]
struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Event;

    fn make_writer(&'a self) -> Event {
        Event(Vec::new())
    }
}

/// One event's bytes, written when the event is complete (on drop).
#[derive(Debug)]
struct Event(Vec<u8>);

impl std::io::Write for Event {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let write = || {
            // Nowhere left to report a failure to write to stderr.
            let _ = std::io::stderr().lock().write_all(&self.0);
        };
        let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner).clone();
        match live {
            Some(bar) if !bar.is_finished() => bar.suspend(write),
            _ => write(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_choose_the_default_filter() {
        let f = |verbose, quiet| {
            Options {
                verbose,
                quiet,
                format: Format::Text,
            }
            .default_filter()
        };
        assert_eq!(f(0, false), "nodefall=info");
        assert!(f(1, false).contains("kube=debug") && f(1, false).contains("nodefall=debug"));
        assert_eq!(f(2, false), "trace");
        assert_eq!(f(2, true), "nodefall=warn");
        for v in 0..3 {
            assert!(EnvFilter::try_new(f(v, false)).is_ok());
        }
    }
}
