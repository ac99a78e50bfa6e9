//! The questions a span of the run asks of a probe's requests and error
//! windows (`record::probe::windows` folds them from the samples): which
//! window counts over the span (the longest, measured whole when it began
//! before), how much of it lies in the span, and how many requests failed
//! there. The probes' expectations and the run's `errorWindow` use them.

use crate::record::probe::{ErrorWindow, Sample};
use crate::timeline::Ms;

/// The longest window (by its whole `duration`) that overlaps `[from, to]`
/// (`to` absent: no end): one that began in it, or one that began before
/// `from` and was still failing at `from` (see [`reaches`]). A window that
/// began before `from` is measured whole, from its first error: clients were
/// already failing when the span opened, and cutting it at `from` would make
/// an outage that never ended look as short as the span.
pub fn longest(windows: &[ErrorWindow], from: Ms, to: Option<Ms>) -> Option<&ErrorWindow> {
    windows
        .iter()
        .filter(|w| reaches(w, from) && to.is_none_or(|to| w.start <= to))
        .max_by_key(|w| w.duration)
}

/// Whether `w` had not ended by `from`: its first success after its last
/// error was sent after `from` (open: its last error was answered, or timed
/// out, after `from`).
pub fn reaches(w: &ErrorWindow, from: Ms) -> bool {
    w.end.unwrap_or(w.start + w.duration) > from
}

/// How much of `w` lies after `from` (all of it when it began at or after).
pub fn after(w: &ErrorWindow, from: Ms) -> Ms {
    (w.start + w.duration - from.max(w.start)).max(0)
}

/// `(failed, sent)` among the requests sent in `[from, to]`.
pub fn errors_between(samples: &[Sample], from: Ms, to: Option<Ms>) -> (u64, u64) {
    let sent: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.at >= from && to.is_none_or(|to| s.at <= to))
        .collect();
    let failed = sent.iter().filter(|s| s.outcome.is_error()).count();
    (failed as u64, sent.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::probe::examples::{ok, refused, timeout};
    use crate::record::probe::windows::error_windows;

    #[test]
    fn errors_between_and_the_longest_window() {
        let s: Vec<Sample> = (1..=100)
            .map(|i| Sample {
                latency: i,
                ..ok(i * 10)
            })
            .chain([timeout(2_000)])
            .collect();
        assert_eq!(errors_between(&s, 0, None), (1, 101));
        assert_eq!(errors_between(&s, 0, Some(1_000)), (0, 100));
        let w = error_windows(
            &[
                refused(0),
                ok(100),
                refused(10_000),
                refused(10_100),
                ok(13_000),
            ],
            1_000,
        );
        assert_eq!(longest(&w, 0, None).map(|w| w.start), Some(10_000));
        assert_eq!(longest(&w, 0, Some(5_000)).map(|w| w.start), Some(0));
        let at_11s = longest(&w, 11_000, None).map(|w| w.start);
        assert_eq!(at_11s, Some(10_000), "still failing at 11 s");
        assert!(longest(&w, 13_000, None).is_none(), "ended at 13 s");
    }

    #[test]
    fn a_window_that_began_before_from_and_still_fails_counts_whole() {
        // No request ever succeeds: one window, open, from the probe's start.
        let all: Vec<Sample> = (0..20).map(|i| refused(i * 500)).collect();
        let w = error_windows(&all, 5_000);
        let found = longest(&w, 3_000, None).map(|w| (w.start, w.duration));
        assert_eq!(found, Some((0, 9_501)), "whole, not cut at `from`");
        assert_eq!(after(&w[0], 3_000), 6_501);
        assert_eq!(after(&w[0], 0), 9_501);
        assert!(longest(&w, 3_000, Some(4_000)).is_some());
        // Began before `from`, still failing at it, success after it.
        let w = error_windows(&[refused(0), refused(9_000), ok(10_000)], 10_000);
        assert_eq!(longest(&w, 9_500, None).map(|w| w.duration), Some(10_000));
    }

    #[test]
    fn a_window_that_ended_by_from_is_not_counted() {
        let w = error_windows(&[refused(0), refused(500), ok(1_000), ok(5_000)], 5_000);
        assert!(
            longest(&w, 1_000, None).is_none(),
            "its first success at 1 s"
        );
        assert_eq!(longest(&w, 999, None).map(|w| w.duration), Some(1_000));
        // Open but answered before `from`: the probe stopped before it.
        let w = error_windows(&[ok(0), refused(500)], 5_000);
        assert!(!reaches(&w[0], 501) && reaches(&w[0], 500));
    }
}
