//! Probe expectations: decided once, over a stopped probe's requests.

use crate::probe::{ProbeRecord, windows};
use crate::profile::TimingProfile;
use crate::scenario::checked::Condition;
use crate::scenario::duration::format_millis;
use crate::timeline::Ms;

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
        match c {
            Condition::ProbeErrors(most) => {
                let (failed, sent) = windows::errors_between(&record.samples, from, to);
                pass &= failed <= *most;
                found.push(format!("{failed} of {sent} requests failed"));
            }
            Condition::ErrorWindow { cmp, limit } => {
                let longest = windows::longest(&record.windows, from, to);
                let duration = longest.map_or(0, |w| w.duration);
                let limit_ms = limit.eval(profile);
                pass &= cmp.holds(duration, limit_ms);
                found.push(match longest {
                    Some(w) => format!(
                        "longest error window {} ({} of {} requests failed in it){}, limit {} {}",
                        format_millis(duration),
                        w.errors,
                        w.total,
                        if w.end.is_none() {
                            ", still open at the end"
                        } else {
                            ""
                        },
                        cmp.symbol(),
                        format_millis(limit_ms)
                    ),
                    None => format!(
                        "no error window, limit {} {}",
                        cmp.symbol(),
                        format_millis(limit_ms)
                    ),
                });
            }
            _ => {}
        }
    }
    (pass, found.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{Outcome, ProbeSpec, Sample, StopReason};
    use crate::scenario::checked::Cmp;
    use crate::scenario::expr::Expr;

    fn record() -> ProbeRecord {
        let spec = ProbeSpec {
            name: "web".into(),
            urls: vec![http::Uri::from_static("http://127.0.0.1:30080/")],
            interval: std::time::Duration::from_millis(500),
            timeout: std::time::Duration::from_secs(1),
            expect: vec![(200, 399)],
            max_requests: 1_000,
            max_duration: std::time::Duration::from_secs(600),
            gap: std::time::Duration::from_secs(5),
        };
        // errors from 10 s to 17.5 s, all fine before and after
        let samples = (0..60)
            .map(|i| Sample {
                at: i * 500,
                url: 0,
                latency: 2,
                outcome: if (20..35).contains(&i) {
                    Outcome::Refused
                } else {
                    Outcome::Ok { status: 200 }
                },
            })
            .collect();
        ProbeRecord::new(&spec, samples, 0, 30_000, StopReason::Stopped)
    }

    #[test]
    fn errors_and_error_window_in_the_window() {
        let r = record();
        let p = TimingProfile::fast();
        let errors = |n| [Condition::ProbeErrors(n)];
        assert!(
            decide(&r, &errors(0), 18_000, None, &p).0,
            "none after 17.5s"
        );
        let (pass, detail) = decide(&r, &errors(0), 0, None, &p);
        assert!(!pass);
        assert_eq!(detail, "15 of 60 requests failed");
        let window = |text: &str, cmp| {
            [Condition::ErrorWindow {
                cmp,
                limit: Expr::parse(text).unwrap_or_else(|e| panic!("{e}")),
            }]
        };
        // 7.5 s; the fast profile's grace is 8 s
        assert!(decide(&r, &window("grace", Cmp::Le), 0, None, &p).0);
        let (pass, detail) = decide(&r, &window("7s", Cmp::Le), 0, None, &p);
        assert!(!pass, "{detail}");
        assert!(
            detail.starts_with("longest error window 7.5s (15 of 15"),
            "{detail}"
        );
        // A window that began before `from` is not this expectation's.
        assert!(decide(&r, &window("1s", Cmp::Le), 11_000, None, &p).0);
        assert!(decide(&r, &window("5s", Cmp::Ge), 0, Some(12_000), &p).0);
        // A window the probe never reached fails, whatever the condition.
        let (pass, detail) = decide(&r, &errors(0), 40_000, None, &p);
        assert!(!pass);
        assert!(
            detail.starts_with("no request was sent in the window"),
            "{detail}"
        );
    }
}
