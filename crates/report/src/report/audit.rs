//! "Observer precision": nodefall's observer checked against the API
//! server's audit log (sim clusters write one), with any baselines.
//!
//! Its lag is measured against the audit log's `stageTimestamp`
//! (microseconds), and always named so ("lag vs audit log"): the Key
//! metrics' detection lag is another figure, measured against the objects'
//! own whole-second timestamps.

use std::fmt::Write as _;

use super::format::{cell, code, table};
use crate::record::RunResult;
use crate::record::audit::{Check, Seen};
use crate::stats::aggregate::Summary;
use crate::timeline::ObjectRef;

/// Shown for a value the run did not observe.
const MISSING: &str = "—";

/// One line for progress output: `clean: 1234 true transitions: 0 missed,
/// ... lag vs audit log p50 3.1 ms ...`.
pub fn audit_line(c: &Check) -> String {
    let lag = c.lag_ms.as_ref().map_or_else(String::new, |l| {
        format!(
            "; lag vs audit log p50 {} p95 {} max {}",
            ms(l.p50),
            ms(l.p95),
            ms(l.max)
        )
    });
    let cut = if c.cut_off > 0 {
        format!(", {} cut off at the cleanup", c.cut_off)
    } else {
        String::new()
    };
    format!(
        "{}: {} true transitions: {} missed, {} duplicated, {} out of order, {} unexplained{cut}{lag}",
        if c.clean() { "clean" } else { "NOT clean" },
        c.truth,
        c.missed,
        c.duplicated,
        c.out_of_order,
        c.unexplained
    )
}

/// The check's verdict in words: `clean` only when nothing was missed,
/// duplicated, reordered or unexplained.
pub fn verdict(c: &Check) -> String {
    if c.clean() {
        return "clean".to_owned();
    }
    let parts: Vec<String> = [
        (c.missed, "missed"),
        (c.duplicated, "duplicated"),
        (c.out_of_order, "out of order"),
        (c.unexplained, "unexplained"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    format!("NOT clean: {}", parts.join(", "))
}

fn ms(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn opt(s: Option<&Summary>, f: impl Fn(&Summary) -> f64) -> String {
    s.map_or_else(|| MISSING.to_owned(), |s| ms(f(s)))
}

/// `pod `web-0``, `node `worker-2``.
fn object(o: &ObjectRef) -> String {
    let kind = match o {
        ObjectRef::Node { .. } => "node",
        ObjectRef::Pod { .. } => "pod",
        ObjectRef::Event { .. } => "event",
        ObjectRef::VolumeAttachment { .. } => "volume attachment",
        ObjectRef::Pvc { .. } => "claim",
        ObjectRef::EndpointSlice { .. } => "endpoint slice",
        ObjectRef::Remediation { resource, .. } => resource,
    };
    format!("{kind} {}", code(o.name()))
}

/// One list of examples: each with its time, then how many were not listed.
fn examples(out: &mut String, what: &str, when: &str, listed: &[Seen], count: usize) {
    for s in listed {
        let _ = writeln!(
            out,
            "- {what}: {} {} ({when} {:.6})",
            object(&s.object),
            code(&s.change.describe()),
            s.at
        );
    }
    if listed.is_empty() && count > 0 {
        // A result checked before the examples were kept.
        let _ = writeln!(out, "- {count} {what}: not listed in this result");
    } else if count > listed.len() {
        let _ = writeln!(out, "- … and {} more {what}", count - listed.len());
    }
}

pub(super) fn section(out: &mut String, r: &RunResult) {
    let Some(a) = &r.audit else { return };
    let _ = writeln!(out, "## Observer precision\n");
    if let Some(c) = a.checks.first() {
        let listed = if !c.missed_examples.is_empty() || !c.unexplained_examples.is_empty() {
            " (listed below)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "**{}: {}**{listed}: {} true transitions, {} matched, {} missed, {} duplicated, \
             {} out of order, {} unexplained.\n",
            cell(&c.source),
            verdict(c),
            c.truth,
            c.matched,
            c.missed,
            c.duplicated,
            c.out_of_order,
            c.unexplained
        );
    }
    let _ = writeln!(
        out,
        "Every Node and Pod transition the API server stored between the observer's first \
         list and the start of the cleanup, where the observer stops ({} audit events, {} \
         writes in scope, from {}), matched to what each observer reported. **Lag vs audit \
         log**: reported − the audit event's `stageTimestamp` (ResponseComplete, µs stamps); \
         nodefall's own times have 1 ms resolution. It is not the Key metrics' detection lag, \
         which is measured against the objects' own whole-second timestamps.\n",
        a.events,
        a.writes,
        code(&a.log)
    );
    let rows = a
        .checks
        .iter()
        .map(|c| {
            let lag = c.lag_ms.as_ref();
            [
                cell(&c.source),
                c.truth.to_string(),
                c.missed.to_string(),
                c.duplicated.to_string(),
                c.out_of_order.to_string(),
                c.unexplained.to_string(),
                opt(lag, |s| s.p50),
                opt(lag, |s| s.p95),
                opt(lag, |s| s.max),
                opt(c.lag_from_t0_ms.as_ref(), |s| s.p95),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "observer",
            "transitions",
            "missed",
            "duplicated",
            "out of order",
            "unexplained",
            "lag vs audit log p50",
            "lag vs audit log p95",
            "lag vs audit log max",
            "lag vs audit log p95 from T0",
        ],
        rows,
    ));
    out.push('\n');
    if r.watch_errors > 0 {
        let _ = writeln!(
            out,
            "nodefall's watchers recovered from {} watch error(s) by relisting; changes made \
             meanwhile were seen late, at the relist.\n",
            r.watch_errors
        );
    }
    if let Some(c) = a.checks.first() {
        let before = out.len();
        examples(out, "missed", "stored", &c.missed_examples, c.missed);
        examples(
            out,
            "unexplained",
            "reported",
            &c.unexplained_examples,
            c.unexplained,
        );
        examples(out, "cut off", "stored", &c.cut_off_examples, c.cut_off);
        if out.len() > before {
            out.push('\n');
        }
        if c.cut_off > 0 {
            let within = c
                .cut_off_within_ms
                .map_or_else(String::new, |w| format!(" within {}", ms(w)));
            let _ = writeln!(
                out,
                "Cut off: {} true transition(s) stored{within} before the cleanup began (the \
                 observer's longest lag from T0 on, at least 50 ms) that {} had not reported \
                 when the cleanup stopped the observer: they may still have been on their way, \
                 so they are not counted as missed.\n",
                c.cut_off,
                cell(&c.source)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(missed: usize, unexplained: usize, cut_off: usize) -> Check {
        let seen = |i: usize| Seen {
            at: jiff::Timestamp::from_microsecond(1_800_000_000_000_000 + 1234).unwrap(),
            object: ObjectRef::Pod {
                name: format!("web-{i}"),
                uid: format!("u{i}"),
            },
            change: crate::timeline::Change::PodTerminating,
        };
        Check {
            source: "nodefall".into(),
            truth: 30,
            matched: 30 - missed - cut_off,
            missed,
            duplicated: 0,
            out_of_order: 0,
            unexplained,
            cut_off,
            cut_off_within_ms: (cut_off > 0).then_some(50.0),
            lag_ms: Summary::of(&[2.0, 4.0, 10.0]),
            lag_from_t0_ms: None,
            lag_by_change_ms: Default::default(),
            missed_examples: (0..missed.min(20)).map(seen).collect(),
            unexplained_examples: (0..unexplained.min(20)).map(seen).collect(),
            cut_off_examples: (0..cut_off.min(20)).map(seen).collect(),
            matches: Vec::new(),
        }
    }

    fn render(c: Check) -> String {
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "schemaVersion": crate::record::SCHEMA_VERSION,
            "scenario": "s", "file": "s.yaml", "backend": "sim",
            "profile": crate::profile::TimingProfile::fast(),
            "namespace": "ns", "targets": {},
            "startedAt": "2027-01-15T08:00:00Z", "finished": 1, "verdict": "pass",
            "steps": [], "expectations": [], "cleanup": [],
            "metrics": crate::timeline::metrics::Metrics::default(), "transitions": [],
        }))
        .unwrap();
        let from = r.started_at;
        r.audit = Some(crate::record::audit::AuditReport {
            log: "audit.log".into(),
            window: crate::record::audit::AuditWindow {
                from,
                to: from,
                t0: None,
            },
            events: 100,
            writes: 40,
            checks: vec![c],
        });
        let mut out = String::new();
        section(&mut out, &r);
        out
    }

    #[test]
    fn unexplained_reports_make_it_not_clean_and_every_one_is_listed() {
        let md = render(check(0, 4, 0));
        assert!(
            md.contains("**nodefall: NOT clean: 4 unexplained** (listed below)"),
            "{md}"
        );
        assert!(!md.contains(": clean"), "{md}");
        assert_eq!(md.matches("- unexplained: pod `web-").count(), 4, "{md}");
        assert!(
            md.contains(
                "- unexplained: pod `web-0` `Terminating` (reported 2027-01-15T08:00:00.001234Z)"
            ),
            "{md}"
        );
    }

    #[test]
    fn more_than_the_cap_are_counted_and_a_clean_check_says_so() {
        let md = render(check(23, 0, 0));
        assert_eq!(md.matches("- missed: ").count(), 20, "{md}");
        assert!(md.contains("- … and 3 more missed"), "{md}");
        assert!(md.contains("**nodefall: NOT clean: 23 missed**"), "{md}");
        let md = render(check(0, 0, 1));
        assert!(
            md.contains("**nodefall: clean**: 30 true transitions"),
            "{md}"
        );
        assert!(md.contains("- cut off: pod `web-0`"), "{md}");
        assert!(
            md.contains("Cut off: 1 true transition(s) stored within 50.0 ms before"),
            "{md}"
        );
    }

    #[test]
    fn a_result_checked_before_examples_were_kept_says_they_are_not_listed() {
        let mut c = check(0, 4, 0);
        c.unexplained_examples.clear();
        let md = render(c);
        assert!(
            md.contains("**nodefall: NOT clean: 4 unexplained**: 30"),
            "{md}"
        );
        assert!(
            md.contains("- 4 unexplained: not listed in this result"),
            "{md}"
        );
    }

    #[test]
    fn the_lag_is_named_for_what_it_is_measured_against() {
        let md = render(check(0, 0, 0));
        assert!(md.contains("| lag vs audit log p50 "), "{md}");
        assert!(
            md.contains("**Lag vs audit log**: reported − the audit event's `stageTimestamp`"),
            "{md}"
        );
        assert!(md.contains("not the Key metrics' detection lag"), "{md}");
        assert!(!md.contains("| lag p50"), "{md}");
        assert!(audit_line(&check(0, 0, 0)).contains("lag vs audit log p50 4.0 ms"));
        assert!(
            audit_line(&check(0, 4, 0)).starts_with("NOT clean: 30 true transitions: 0 missed"),
            "{}",
            audit_line(&check(0, 4, 0))
        );
    }
}
