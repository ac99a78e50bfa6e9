//! The HTTP probe: a client of the workload run by nodefall itself, so a
//! report can say what users saw while a node failed.
//!
//! A probe sends a `GET` to each of its URLs every `interval` (`run`), each
//! over a new TCP connection (`send`), and records every result on the run's
//! clock as a [`Sample`]. When it stops, its error windows and latency are
//! derived from the samples (`windows`, pure).
//!
//! Bounds: one request in flight per URL, ticks that fall inside a slow
//! request are skipped (no burst afterwards), a request budget shared by the
//! probe's URLs (`max_requests`) and a time limit (`max_duration`); the
//! scenario validator caps the rate of all probes together.

mod run;
mod send;

use std::time::Duration;

pub use run::{Running, spawn};
pub use send::{AnyFetch, Fetch, Http};

pub use crate::record::probe::{
    Cadence, ErrorWindow, Latency, Phase, ProbeRecord, RequestOutcome, Sample, StopReason, windows,
};
use crate::timeline::Ms;

/// What to probe, from a checked scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSpec {
    pub name: String,
    pub urls: Vec<http::Uri>,
    pub interval: Duration,
    pub timeout: Duration,
    /// Inclusive status ranges counted as success.
    pub expect: Vec<(u16, u16)>,
    pub max_requests: u64,
    pub max_duration: Duration,
    pub gap: Duration,
}

/// Before the first step, each URL of each probe must answer this many
/// requests in a row: the baseline clients are measured from.
pub const SETTLE_SUCCESSES: usize = 5;

/// How long the run waits for that before it gives up (no fault injected),
/// unless the probe's interval needs longer (`Running::settle_limit`).
pub const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// Why a probe's URL could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("probe `{probe}`: `{url}` is not a URL")]
    Url {
        probe: String,
        url: String,
        source: http::uri::InvalidUri,
    },
    /// A URL never answered [`SETTLE_SUCCESSES`] requests in a row before
    /// the first step: clients cannot be measured from a settled baseline.
    #[error(
        "probe `{probe}`: {url} did not answer {SETTLE_SUCCESSES} requests in a row within {}s \
         before the first step (nothing was injected); it answered {answered}: check the URL \
         and that the Service answers from this machine",
        .waited.as_secs()
    )]
    Unsettled {
        probe: String,
        url: String,
        waited: Duration,
        /// What its requests met, e.g. `12 requests: ok ×9, reset ×3; the last: reset`.
        answered: String,
    },
}

impl ProbeSpec {
    /// A probe of `http://127.0.0.1:30080/` every 500 ms with a 1 s
    /// timeout and a 5 s gap, for unit tests.
    #[cfg(test)]
    pub fn example() -> ProbeSpec {
        ProbeSpec {
            name: "web".into(),
            urls: vec![http::Uri::from_static("http://127.0.0.1:30080/")],
            interval: Duration::from_millis(500),
            timeout: Duration::from_secs(1),
            expect: vec![(200, 399)],
            max_requests: 1_000,
            max_duration: Duration::from_secs(600),
            gap: Duration::from_secs(5),
        }
    }

    /// The runtime form of a checked `probe:` entry.
    pub fn from_checked(p: &crate::scenario::checked::Probe) -> Result<ProbeSpec, Error> {
        let urls = p
            .urls
            .iter()
            .map(|u| {
                u.parse::<http::Uri>().map_err(|source| Error::Url {
                    probe: p.name.clone(),
                    url: u.clone(),
                    source,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(ProbeSpec {
            name: p.name.clone(),
            urls,
            interval: p.interval,
            timeout: p.timeout,
            expect: p.status.clone(),
            max_requests: p.max_requests,
            max_duration: p.max_duration,
            gap: p.gap,
        })
    }

    fn accepts(&self, status: u16) -> bool {
        self.expect
            .iter()
            .any(|&(from, to)| (from..=to).contains(&status))
    }
}

impl ProbeSpec {
    /// The record of `samples` (any order) sent from `started` to
    /// `stopped`, those before `baseline_until` as the baseline.
    pub fn record(
        &self,
        samples: Vec<Sample>,
        [started, stopped]: [Ms; 2],
        baseline_until: Option<Ms>,
        stop_reason: StopReason,
    ) -> ProbeRecord {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let cadence = Cadence {
            interval: ms(self.interval),
            timeout: ms(self.timeout),
            gap: ms(self.gap),
        };
        let urls = self.urls.iter().map(ToString::to_string).collect();
        ProbeRecord::new(
            &self.name,
            urls,
            cadence,
            samples,
            [started, stopped],
            baseline_until,
            stop_reason,
        )
    }
}
