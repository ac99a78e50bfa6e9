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
pub mod windows;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use run::{Running, spawn};
pub use send::{Fetch, Http};

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

/// Why a probe's URL could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("probe `{probe}`: `{url}` is not a URL")]
    Url {
        probe: String,
        url: String,
        source: http::uri::InvalidUri,
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

/// Where a request timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Opening the TCP connection (SYNs unanswered: a dead or paused node).
    Connect,
    /// Waiting for the response or its body.
    Response,
}

/// The result of one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Outcome {
    Ok {
        status: u16,
    },
    /// A status the probe does not count as success.
    BadStatus {
        status: u16,
    },
    Timeout {
        phase: Phase,
    },
    /// Connection refused (nothing listening, or a REJECT rule).
    Refused,
    /// The connection was reset or closed before a full response.
    Reset,
    /// No route to the host, or its name did not resolve.
    Unreachable,
    Error {
        message: String,
    },
}

impl Outcome {
    pub fn is_error(&self) -> bool {
        !matches!(self, Outcome::Ok { .. })
    }

    /// A short word for tables: `ok`, `status 503`, `timeout`, ...
    pub fn kind(&self) -> String {
        match self {
            Outcome::Ok { .. } => "ok".into(),
            Outcome::BadStatus { status } => format!("status {status}"),
            Outcome::Timeout {
                phase: Phase::Connect,
            } => "connect timeout".into(),
            Outcome::Timeout {
                phase: Phase::Response,
            } => "timeout".into(),
            Outcome::Refused => "refused".into(),
            Outcome::Reset => "reset".into(),
            Outcome::Unreachable => "unreachable".into(),
            Outcome::Error { .. } => "error".into(),
        }
    }
}

/// One request: when it was sent (run clock), to which URL, how long it
/// took, and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    pub at: Ms,
    /// Index into the probe's `urls`.
    pub url: usize,
    pub latency: Ms,
    pub outcome: Outcome,
}

/// A span of failing requests (see [`windows::error_windows`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorWindow {
    /// The first failed request's send time.
    pub start: Ms,
    /// The send time of the first successful request after the window's
    /// last error; absent when none came before the probe stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<Ms>,
    /// `end - start`; when open, up to the last error's answer (or timeout).
    pub duration: Ms,
    pub errors: u64,
    /// Requests sent in the window.
    pub total: u64,
    /// Error kind -> how many.
    pub kinds: BTreeMap<String, u64>,
}

/// Latency of the successful requests, in ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Ms>,
}

/// Why a probe stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The steps ended (or the run stopped).
    Stopped,
    /// `maxRequests` were sent.
    MaxRequests,
    /// `maxDuration` passed.
    MaxDuration,
}

/// Everything one probe did, for `result.json` and the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeRecord {
    pub name: String,
    pub urls: Vec<String>,
    pub interval: Ms,
    pub timeout: Ms,
    pub gap: Ms,
    pub started: Ms,
    pub stopped: Ms,
    pub stop_reason: StopReason,
    pub requests: u64,
    pub errors: u64,
    pub latency: Latency,
    pub windows: Vec<ErrorWindow>,
    pub samples: Vec<Sample>,
}

impl ProbeRecord {
    /// The record of `samples` (any order) sent from `started` to `stopped`.
    pub fn new(
        spec: &ProbeSpec,
        mut samples: Vec<Sample>,
        started: Ms,
        stopped: Ms,
        stop_reason: StopReason,
    ) -> ProbeRecord {
        samples.sort_by_key(|s| (s.at, s.url));
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        ProbeRecord {
            name: spec.name.clone(),
            urls: spec.urls.iter().map(ToString::to_string).collect(),
            interval: ms(spec.interval),
            timeout: ms(spec.timeout),
            gap: ms(spec.gap),
            started,
            stopped,
            stop_reason,
            requests: samples.len() as u64,
            errors: samples.iter().filter(|s| s.outcome.is_error()).count() as u64,
            latency: windows::latency(&samples),
            windows: windows::error_windows(&samples, ms(spec.gap)),
            samples,
        }
    }
}
