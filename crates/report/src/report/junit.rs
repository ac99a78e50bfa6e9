//! `junit.xml`: a run result as JUnit XML for CI, one test case per
//! expectation, one per abort guard (failed when it fired), plus an errored
//! `run` case when the run stopped early. Written with `quick-junit`, which
//! counts the totals and escapes the text.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::format::{rel, secs, signed_secs, t0_rel};
use super::guard;
use crate::record::{ExpectationResult, RunResult, RunVerdict, Verdict};
use crate::timeline::Ms;

/// Renders `junit.xml`.
pub fn render(result: &RunResult) -> String {
    let r = result;
    let suite_name = format!("nodefall.{}", r.scenario);
    let mut suite = TestSuite::new(&suite_name);
    if let Some(at) = timestamp(r.started_at) {
        suite.set_timestamp(at);
    }
    suite.set_time(duration(r.finished));
    let mut props = vec![
        ("scenario.file", r.file.clone()),
        ("backend", r.backend.clone()),
        ("profile", r.profile.name.clone()),
        ("namespace", r.namespace.clone()),
    ];
    if let Some(v) = &r.cluster_version {
        props.push(("clusterVersion", v.clone()));
    }
    props.push(("verdict", r.verdict.headline().to_string()));
    for (name, value) in props {
        suite.add_property(Property::new(name, value));
    }
    for (target, node) in &r.targets {
        suite.add_property(Property::new(format!("target.{target}"), node));
    }
    for e in &r.expectations {
        suite.add_test_case(testcase(&suite_name, e, r));
    }
    suite.add_test_cases(guard_cases(&suite_name, r));
    if r.verdict.is_partial() {
        let (kind, default) = match r.verdict {
            RunVerdict::Interrupted => ("interrupted", "the run was interrupted"),
            _ => ("error", "the run stopped on an error"),
        };
        let text = r.error.as_deref().unwrap_or(default);
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
        status
            .set_message(text.lines().next().unwrap_or(default))
            .set_type(kind)
            .set_description(text);
        suite.add_test_case(case(&suite_name, "run", r.finished, status));
    }
    let mut report = Report::new("nodefall");
    report.set_time(duration(r.finished));
    report.add_test_suite(suite);
    // Serialising into memory cannot fail on I/O; an error here would be a
    // bug in the XML writer, and the report says so rather than panicking.
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- junit.xml could not be written: {e} -->\n"))
}

/// A test case of the run's suite.
fn case(suite: &str, name: &str, time: Ms, status: TestCaseStatus) -> TestCase {
    let mut case = TestCase::new(name, status);
    case.set_classname(suite).set_time(duration(time));
    case
}

fn testcase(suite: &str, e: &ExpectationResult, r: &RunResult) -> TestCase {
    // How long it was watched: until seen, else the whole window.
    let time = match (e.verdict, e.observed) {
        (_, Some(ms)) => ms,
        (Verdict::NotRun, None) => 0,
        (_, None) => e.window.horizon(),
    };
    let name = format!("{}: {}", e.label, e.description);
    let status = match e.verdict {
        Verdict::Pass => TestCaseStatus::success(),
        Verdict::NotRun => {
            let mut s = TestCaseStatus::skipped();
            s.set_message("the run stopped before this expectation was decided");
            s
        }
        Verdict::Fail => {
            let mut message = e.detail.clone();
            if let Some(m) = e.missed_by {
                let side = if m < 0 { "too early" } else { "too late" };
                message = format!(
                    "{message}{}missed by {} ({side})",
                    if message.is_empty() { "" } else { "; " },
                    secs(m.abs())
                );
            }
            let observed = match e.observed {
                Some(ms) => format!("{} after the anchor", signed_secs(ms)),
                None => "never seen".into(),
            };
            let ran = match (e.window_from, e.window_to) {
                (Some(from), Some(to)) => {
                    let at = |ms: Ms| match r.since_t0(ms) {
                        Some(t) => t0_rel(t),
                        None => format!("start{}", signed_secs(ms)),
                    };
                    format!(" (window ran {} .. {})", at(from), at(to))
                }
                _ => String::new(),
            };
            let body = format!(
                "expected: {} [{}] from {}{ran}\nobserved: {observed}\n{message}",
                e.window_written, e.window, e.anchor
            );
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(message)
                .set_type("expectation")
                .set_description(body);
            s
        }
    };
    case(suite, &name, time.max(0), status)
}

/// `junit.xml`: one case per guard; a fired one fails, naming when.
fn guard_cases(suite: &str, r: &RunResult) -> Vec<TestCase> {
    r.guards
        .iter()
        .map(|g| {
            let name = format!("abort guard {}: {}", g.label, g.description);
            let status = match g.fired_at {
                None => TestCaseStatus::success(),
                Some(at) => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    s.set_message(format!(
                        "abort guard `{}` fired at {}: {} held for {}",
                        g.label,
                        rel(r, at),
                        g.description,
                        guard::for_text(g)
                    ))
                    .set_type("aborted")
                    .set_description(format!(
                        "the steps stopped at {}; the run restored the cluster",
                        rel(r, at)
                    ));
                    s
                }
            };
            case(suite, &name, 0, status)
        })
        .collect()
}

/// JUnit's `time`: milliseconds as a duration (negative ones as zero).
fn duration(ms: Ms) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The suite's start, for JUnit's `timestamp`.
fn timestamp(at: jiff::Timestamp) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::from_timestamp(at.as_second(), at.subsec_nanosecond().unsigned_abs())
        .map(|t| t.fixed_offset())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_milliseconds_and_never_negative() {
        assert_eq!(duration(28_512), Duration::from_millis(28_512));
        assert_eq!(duration(-5), Duration::ZERO);
    }

    #[test]
    fn the_timestamp_keeps_the_instant() {
        let at: jiff::Timestamp = "2026-11-22T10:00:01.250Z".parse().unwrap();
        let t = timestamp(at).unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-22T10:00:01.250+00:00");
    }
}
