//! What the user sees while a scenario runs: one live line (step, elapsed,
//! what is awaited) on a terminal, plain log lines otherwise; both through
//! `tracing` (see `crate::logging`).

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
    quiet: bool,
    /// Plain mode: the last awaited thing printed, so it is printed once.
    last_wait: std::sync::Mutex<String>,
}

impl Progress {
    /// Live line when stderr is a terminal (and the logs are plain text,
    /// not `--quiet`), else plain lines. Lines go out as `tracing` events.
    pub fn auto() -> Progress {
        let live = std::io::stderr().is_terminal() && crate::logging::live_line_allowed();
        let bar = live.then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            crate::logging::set_live(Some(bar.clone()));
            bar
        });
        Progress {
            bar,
            start: Instant::now(),
            quiet: false,
            last_wait: std::sync::Mutex::default(),
        }
    }

    /// Prints nothing (tests).
    pub fn quiet() -> Progress {
        Progress {
            bar: None,
            start: Instant::now(),
            quiet: true,
            last_wait: std::sync::Mutex::default(),
        }
    }

    /// A line that stays (step results, notes).
    pub fn log(&self, msg: &str) {
        if self.quiet {
            return;
        }
        let elapsed = self.start.elapsed().as_secs_f64();
        match crate::logging::format() {
            crate::logging::Format::Text => tracing::info!("[{elapsed:>7.1}s] {msg}"),
            crate::logging::Format::Json => tracing::info!(elapsed_s = elapsed, "{msg}"),
        }
    }

    /// What is awaited now (`key` names it, `msg` may carry a countdown):
    /// the live line on a terminal, else one log line per key.
    pub fn waiting(&self, key: &str, msg: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(msg.to_owned()),
            None => {
                let mut last = self
                    .last_wait
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if *last != key {
                    key.clone_into(&mut last);
                    drop(last);
                    self.log(msg);
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            crate::logging::set_live(None);
        }
    }
}
