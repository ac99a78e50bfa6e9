//! What each `probe:` of a run did, as `result.json` keeps it: every
//! request with its outcome, and the error windows and latency figures
//! [`windows`] computes from them. The clients themselves are `crate::probe`.

pub mod windows;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::timeline::Ms;

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
pub enum RequestOutcome {
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

impl RequestOutcome {
    pub fn is_error(&self) -> bool {
        !matches!(self, RequestOutcome::Ok { .. })
    }

    /// A short word for tables: `ok`, `status 503`, `timeout`, ...
    pub fn kind(&self) -> String {
        match self {
            RequestOutcome::Ok { .. } => "ok".into(),
            RequestOutcome::BadStatus { status } => format!("status {status}"),
            RequestOutcome::Timeout {
                phase: Phase::Connect,
            } => "connect timeout".into(),
            RequestOutcome::Timeout {
                phase: Phase::Response,
            } => "timeout".into(),
            RequestOutcome::Refused => "refused".into(),
            RequestOutcome::Reset => "reset".into(),
            RequestOutcome::Unreachable => "unreachable".into(),
            RequestOutcome::Error { .. } => "error".into(),
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
    pub outcome: RequestOutcome,
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

/// The requests a probe sent before the first step, while the run waited
/// for every URL to answer several in a row: what clients saw of the
/// workload before anything failed. None of them counts in the probe's
/// figures or error windows, which start at `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Baseline {
    /// When the probe started (during setup).
    pub from: Ms,
    /// When every URL had answered; the first step started then.
    pub to: Ms,
    pub requests: u64,
    pub errors: u64,
    /// Error kind -> how many.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kinds: BTreeMap<String, u64>,
    pub latency: Latency,
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
    /// Requests sent from the first step on (`baseline.to`), of which
    /// `errors` failed; `latency` and `windows` are theirs too.
    pub requests: u64,
    pub errors: u64,
    pub latency: Latency,
    pub windows: Vec<ErrorWindow>,
    /// The requests before the first step (absent before schema 9, and when
    /// the run stopped before the probe had settled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// Every request, the baseline's included.
    pub samples: Vec<Sample>,
}

/// How a probe sent its requests, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    pub interval: Ms,
    pub timeout: Ms,
    /// Successes that close an error window must follow this long a gap.
    pub gap: Ms,
}

impl ProbeRecord {
    /// The record of `samples` (any order) sent from `span[0]` (started)
    /// to `span[1]` (stopped); those sent before `baseline_until` (the first
    /// step) are the baseline, apart from every other figure.
    pub fn new(
        name: &str,
        urls: Vec<String>,
        cadence: Cadence,
        mut samples: Vec<Sample>,
        span: [Ms; 2],
        baseline_until: Option<Ms>,
        stop_reason: StopReason,
    ) -> ProbeRecord {
        samples.sort_by_key(|s| (s.at, s.url));
        let split = baseline_until.map_or(0, |to| samples.partition_point(|s| s.at < to));
        let (before, after) = samples.split_at(split);
        let failed = |s: &[Sample]| s.iter().filter(|s| s.outcome.is_error()).count() as u64;
        let baseline = baseline_until.map(|to| Baseline {
            from: span[0],
            to,
            requests: before.len() as u64,
            errors: failed(before),
            kinds: windows::kinds(before.iter().filter(|s| s.outcome.is_error())),
            latency: windows::latency(before),
        });
        ProbeRecord {
            name: name.to_owned(),
            urls,
            interval: cadence.interval,
            timeout: cadence.timeout,
            gap: cadence.gap,
            started: span[0],
            stopped: span[1],
            stop_reason,
            requests: after.len() as u64,
            errors: failed(after),
            latency: windows::latency(after),
            windows: windows::error_windows(after, cadence.gap),
            baseline,
            samples,
        }
    }

    /// A probe `web` of `http://127.0.0.1:30080/` every 500 ms (1 s
    /// timeout, 5 s gap) from 0 to 30 s, for unit tests.
    #[cfg(any(test, feature = "examples"))]
    pub fn example(samples: Vec<Sample>) -> ProbeRecord {
        let cadence = Cadence {
            interval: 500,
            timeout: 1_000,
            gap: 5_000,
        };
        let urls = vec!["http://127.0.0.1:30080/".to_owned()];
        ProbeRecord::new(
            "web",
            urls,
            cadence,
            samples,
            [0, 30_000],
            None,
            StopReason::Stopped,
        )
    }
}

/// Example requests for tests (here and in the crates above, through the
/// `examples` feature).
#[cfg(any(test, feature = "examples"))]
pub mod examples {
    use super::{Phase, RequestOutcome, Sample};
    use crate::timeline::Ms;

    /// A request answered 200 at `at` (a latency from its time).
    pub fn ok(at: Ms) -> Sample {
        Sample {
            at,
            url: 0,
            latency: at % 7 + 1,
            outcome: RequestOutcome::Ok { status: 200 },
        }
    }

    /// A request that timed out connecting at `at`.
    pub fn timeout(at: Ms) -> Sample {
        Sample {
            at,
            url: 0,
            latency: 1_000,
            outcome: RequestOutcome::Timeout {
                phase: Phase::Connect,
            },
        }
    }

    /// A request refused at `at`.
    pub fn refused(at: Ms) -> Sample {
        Sample {
            outcome: RequestOutcome::Refused,
            latency: 1,
            ..ok(at)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: Ms, outcome: RequestOutcome) -> Sample {
        Sample {
            at,
            url: 0,
            latency: 3,
            outcome,
        }
    }

    /// Resets before the first step (a Service not yet answering as
    /// clients reach it) are the baseline's, never an error window of the
    /// run's.
    #[test]
    fn errors_before_the_first_step_are_the_baseline_s_alone() {
        let cadence = Cadence {
            interval: 250,
            timeout: 1_000,
            gap: 5_000,
        };
        let mut samples = vec![
            sample(0, RequestOutcome::Reset),
            sample(250, RequestOutcome::Reset),
        ];
        samples.extend((2..12).map(|i| sample(i * 250, RequestOutcome::Ok { status: 200 })));
        let r = ProbeRecord::new(
            "web",
            vec![],
            cadence,
            samples.clone(),
            [0, 3_000],
            Some(1_750),
            StopReason::Stopped,
        );
        let b = r.baseline.as_ref().unwrap();
        assert_eq!((b.from, b.to, b.requests, b.errors), (0, 1_750, 7, 2));
        assert_eq!(b.kinds["reset"], 2);
        assert_eq!(b.latency.p50, Some(3));
        assert_eq!((r.requests, r.errors), (5, 0));
        assert!(r.windows.is_empty(), "{:?}", r.windows);
        assert_eq!(r.samples.len(), 12, "every request is kept");
        // Without a baseline the same requests make a window.
        let r = ProbeRecord::new(
            "web",
            vec![],
            cadence,
            samples,
            [0, 3_000],
            None,
            StopReason::Stopped,
        );
        assert_eq!((r.requests, r.errors, r.windows.len()), (12, 2, 1));
        assert!(r.baseline.is_none());
    }
}
