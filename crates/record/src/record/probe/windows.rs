//! Error windows and latency from a probe's samples (pure): the figures
//! `result.json` keeps of a probe, folded from its requests. Which window
//! counts over a span of the run is the judge's (`verdict::windows`).

use std::collections::BTreeMap;

use super::{ErrorWindow, Latency, Sample};
use crate::timeline::Ms;

/// The error windows of `samples` (sorted by send time, all URLs merged):
/// a window opens at a failed request; errors less than `gap` after the
/// window's previous error join it, successes in between or not (some
/// backends dead, others fine); it ends at the first success sent after its
/// last error.
pub fn error_windows(samples: &[Sample], gap: Ms) -> Vec<ErrorWindow> {
    let mut out: Vec<ErrorWindow> = Vec::new();
    // (window, index of its last error)
    let mut open: Option<(ErrorWindow, usize)> = None;
    for (i, s) in samples.iter().enumerate() {
        if !s.outcome.is_error() {
            continue;
        }
        match open.as_mut() {
            Some((w, last)) if s.at - samples[*last].at < gap => {
                w.errors += 1;
                *w.kinds.entry(s.outcome.kind()).or_default() += 1;
                *last = i;
            }
            _ => {
                if let Some((w, last)) = open.take() {
                    out.push(close(w, samples, last));
                }
                let mut w = ErrorWindow {
                    start: s.at,
                    end: None,
                    duration: 0,
                    errors: 1,
                    total: 0,
                    kinds: Default::default(),
                };
                w.kinds.insert(s.outcome.kind(), 1);
                open = Some((w, i));
            }
        }
    }
    if let Some((w, last)) = open {
        out.push(close(w, samples, last));
    }
    out
}

/// Ends `w` at the first success after its last error (`samples[last]`).
fn close(mut w: ErrorWindow, samples: &[Sample], last: usize) -> ErrorWindow {
    let last_error = &samples[last];
    w.end = samples[last..]
        .iter()
        .find(|s| !s.outcome.is_error())
        .map(|s| s.at);
    w.duration = match w.end {
        Some(end) => end - w.start,
        None => last_error.at + last_error.latency - w.start,
    };
    let to = w.end.unwrap_or(Ms::MAX);
    w.total = samples
        .iter()
        .filter(|s| s.at >= w.start && s.at < to)
        .count() as u64;
    w
}

/// How many of `samples` met each outcome (`ok`, `reset`, `status 503`, ...).
pub fn kinds<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> BTreeMap<String, u64> {
    let mut kinds = BTreeMap::new();
    for s in samples {
        *kinds.entry(s.outcome.kind()).or_default() += 1;
    }
    kinds
}

/// [`kinds`] in words: `reset ×3, ok ×9`.
pub fn kinds_text(kinds: &BTreeMap<String, u64>) -> String {
    kinds
        .iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Percentiles (nearest rank) and maximum of the successful requests' latency.
pub fn latency<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Latency {
    let mut ok: Vec<Ms> = samples
        .into_iter()
        .filter(|s| !s.outcome.is_error())
        .map(|s| s.latency)
        .collect();
    ok.sort_unstable();
    let rank = |p: usize| -> Option<Ms> {
        if ok.is_empty() {
            return None;
        }
        let i = (p * ok.len()).div_ceil(100).clamp(1, ok.len()) - 1;
        ok.get(i).copied()
    };
    Latency {
        p50: rank(50),
        p90: rank(90),
        p99: rank(99),
        max: ok.last().copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::examples::{ok, refused, timeout};
    use super::*;

    #[test]
    fn one_outage_is_one_window_ending_at_the_first_success() {
        let s: Vec<Sample> = (0..20)
            .map(|i| {
                let at = i * 500;
                if (4..10).contains(&i) {
                    refused(at)
                } else {
                    ok(at)
                }
            })
            .collect();
        let w = error_windows(&s, 5_000);
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].start, w[0].end, w[0].duration),
            (2_000, Some(5_000), 3_000)
        );
        assert_eq!((w[0].errors, w[0].total), (6, 6));
        assert_eq!(w[0].kinds["refused"], 6);
    }

    #[test]
    fn intermittent_errors_join_within_the_gap_and_split_beyond_it() {
        // Every third request fails for 10 s (a dead backend among three),
        // then nothing fails for 10 s, then one more error.
        let mut s: Vec<Sample> = (0..20)
            .map(|i| {
                if i % 3 == 0 {
                    timeout(i * 500)
                } else {
                    ok(i * 500)
                }
            })
            .collect();
        s.extend((20..40).map(|i| ok(i * 500)));
        s.push(refused(20_000));
        s.push(ok(20_500));
        let w = error_windows(&s, 5_000);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!((w[0].start, w[0].end), (0, Some(9_500)));
        assert_eq!((w[0].errors, w[0].total), (7, 19));
        assert_eq!(w[0].kinds["connect timeout"], 7);
        assert_eq!(
            (w[1].start, w[1].end, w[1].duration),
            (20_000, Some(20_500), 500)
        );
        // A gap shorter than the spacing of the errors splits them all.
        assert_eq!(error_windows(&s[..20], 1_000).len(), 7);
    }

    #[test]
    fn a_window_still_open_when_the_probe_stops() {
        let s = vec![ok(0), refused(500), timeout(1_000)];
        let w = error_windows(&s, 5_000);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].end, None);
        assert_eq!(w[0].duration, 1_500, "to the last error's timeout");
        assert!(error_windows(&[ok(0), ok(1)], 5_000).is_empty());
    }

    #[test]
    fn latency_of_the_successful_requests() {
        let s: Vec<Sample> = (1..=100)
            .map(|i| Sample {
                latency: i,
                ..ok(i * 10)
            })
            .chain([timeout(2_000)])
            .collect();
        let l = latency(&s);
        assert_eq!(
            (l.p50, l.p90, l.p99, l.max),
            (Some(50), Some(90), Some(99), Some(100))
        );
        assert_eq!(latency(&[timeout(0)]), Latency::default());
    }
}
