//! Probe expectations: decided once, over a stopped probe's requests.

use crate::duration::format_millis;
use crate::profile::TimingProfile;
use crate::record::probe::ProbeRecord;
use crate::scenario::checked::{Cmp, Condition, ProbeCond};
use crate::timeline::Ms;
use crate::verdict::windows;

/// Whether every condition holds over the requests `record` sent in
/// `[from, to]` (`to` absent: until it stopped), with what was found.
pub fn decide(
    record: &ProbeRecord,
    conditions: &[Condition],
    from: Ms,
    to: Option<Ms>,
    profile: &TimingProfile,
) -> (bool, String) {
    // Nothing sent in the window says nothing about it.
    if windows::errors_between(&record.samples, from, to).1 == 0 {
        let why = if record.stopped < from {
            format!(
                ": the probe stopped with the steps {} before it opened",
                format_millis(from - record.stopped)
            )
        } else {
            String::new()
        };
        return (false, format!("no request was sent in the window{why}"));
    }
    let mut pass = true;
    let mut found = Vec::new();
    for c in conditions {
        // A probe expectation has only its probe's conditions (validated).
        let Condition::Probe(c) = c else {
            continue;
        };
        let (holds, what) = match c {
            ProbeCond::Errors(most) => errors(record, *most, from, to),
            ProbeCond::ErrorWindow { cmp, limit } => {
                error_window(record, *cmp, limit.eval(profile), from, to)
            }
        };
        pass &= holds;
        found.push(what);
    }
    if let Some(all) = all_failed(record) {
        found.push(all);
    }
    (pass, found.join("; "))
}

/// `errors: N`: every failed request sent in `[from, to]` counts, whatever
/// error window it belongs to (one that began before `from` included).
fn errors(record: &ProbeRecord, most: u64, from: Ms, to: Option<Ms>) -> (bool, String) {
    let (failed, sent) = windows::errors_between(&record.samples, from, to);
    (
        failed <= most,
        format!("{failed} of {sent} requests failed"),
    )
}

/// `errorWindow`: the longest window overlapping `[from, to]`, measured
/// whole (see [`windows::longest`]); the detail says when it began before
/// `from` and how much of it lies after.
fn error_window(
    record: &ProbeRecord,
    cmp: Cmp,
    limit_ms: Ms,
    from: Ms,
    to: Option<Ms>,
) -> (bool, String) {
    let limit = format!("limit {} {}", cmp.symbol(), format_millis(limit_ms));
    let Some(w) = windows::longest(&record.windows, from, to) else {
        return (cmp.holds(0, limit_ms), format!("no error window, {limit}"));
    };
    let mut what = format!(
        "longest error window {} ({} of {} requests failed in it)",
        format_millis(w.duration),
        w.errors,
        w.total
    );
    if w.start < from {
        what.push_str(&format!(
            ", whole: requests were already failing {} before the window opened, {} of it \
             after",
            format_millis(from - w.start),
            format_millis(windows::after(w, from))
        ));
    }
    if w.end.is_none() {
        what.push_str(", still open at the end");
    }
    (cmp.holds(w.duration, limit_ms), format!("{what}, {limit}"))
}

/// When no request the probe sent succeeded: what that means.
fn all_failed(record: &ProbeRecord) -> Option<String> {
    (record.requests > 0 && record.errors == record.requests).then(|| {
        format!(
            "every one of the probe's {} requests failed: clients never reached the workload",
            record.requests
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::probe::{RequestOutcome, Sample};
    use crate::scenario::expr::Expr;

    fn record() -> ProbeRecord {
        // errors from 10 s to 17.5 s, all fine before and after
        let samples = (0..60)
            .map(|i| Sample {
                at: i * 500,
                url: 0,
                latency: 2,
                outcome: if (20..35).contains(&i) {
                    RequestOutcome::Refused
                } else {
                    RequestOutcome::Ok { status: 200 }
                },
            })
            .collect();
        ProbeRecord::example(samples)
    }

    /// A probe none of whose 60 requests (every 500 ms from 0) succeeded.
    fn all_failing() -> ProbeRecord {
        let samples = (0..60)
            .map(|i| Sample {
                at: i * 500,
                url: 0,
                latency: 2,
                outcome: RequestOutcome::Refused,
            })
            .collect();
        ProbeRecord::example(samples)
    }

    fn window(text: &str, cmp: Cmp) -> [Condition; 1] {
        [Condition::Probe(ProbeCond::ErrorWindow {
            cmp,
            limit: Expr::parse(text).unwrap_or_else(|e| panic!("{e}")),
        })]
    }

    #[test]
    fn errors_and_error_window_in_the_window() {
        let r = record();
        let p = TimingProfile::fast();
        let errors = |n| [Condition::Probe(ProbeCond::Errors(n))];
        assert!(
            decide(&r, &errors(0), 18_000, None, &p).0,
            "none after 17.5s"
        );
        let (pass, detail) = decide(&r, &errors(0), 0, None, &p);
        assert!(!pass);
        assert_eq!(detail, "15 of 60 requests failed");
        // 7.5 s; the fast profile's grace is 8 s
        assert!(decide(&r, &window("grace", Cmp::Le), 0, None, &p).0);
        let (pass, detail) = decide(&r, &window("7s", Cmp::Le), 0, None, &p);
        assert!(!pass, "{detail}");
        assert!(
            detail.starts_with("longest error window 7.5s (15 of 15"),
            "{detail}"
        );
        // A window over before `from` is not this expectation's.
        assert!(decide(&r, &window("1s", Cmp::Le), 17_500, None, &p).0);
        assert!(decide(&r, &window("5s", Cmp::Ge), 0, Some(12_000), &p).0);
        // A window the probe never reached fails, whatever the condition.
        let (pass, detail) = decide(&r, &errors(0), 40_000, None, &p);
        assert!(!pass);
        assert!(
            detail.starts_with("no request was sent in the window"),
            "{detail}"
        );
    }

    #[test]
    fn an_error_window_open_before_the_anchor_counts_whole() {
        let (r, p) = (all_failing(), TimingProfile::fast());
        // The fault at 10 s; the requests failed from 0 s to the end.
        let (pass, detail) = decide(&r, &window("5s", Cmp::Le), 10_000, None, &p);
        assert!(!pass, "{detail}");
        assert!(
            detail.starts_with(
                "longest error window 29.502s (60 of 60 requests failed in it), whole: \
                 requests were already failing 10s before the window opened, 19.502s of \
                 it after, still open at the end, limit <= 5s"
            ),
            "{detail}"
        );
        assert!(
            detail.ends_with(
                "every one of the probe's 60 requests failed: clients never reached the workload"
            ),
            "{detail}"
        );
        // Also within a bounded span that opened inside the window.
        assert!(!decide(&r, &window("5s", Cmp::Le), 10_000, Some(12_000), &p).0);
    }

    #[test]
    fn errors_count_every_failed_request_in_the_span_whatever_its_window() {
        let (r, p) = (all_failing(), TimingProfile::fast());
        let (pass, detail) = decide(
            &r,
            &[Condition::Probe(ProbeCond::Errors(0))],
            13_000,
            None,
            &p,
        );
        assert!(!pass, "{detail}");
        assert!(
            detail.starts_with("34 of 34 requests failed; every one"),
            "{detail}"
        );
        // The window from 10 s to 17.5 s, its requests after 12 s.
        let (pass, detail) = decide(
            &record(),
            &[Condition::Probe(ProbeCond::Errors(0))],
            12_000,
            None,
            &p,
        );
        assert!(!pass);
        assert_eq!(detail, "11 of 36 requests failed");
    }
}
