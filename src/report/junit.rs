//! `junit.xml`: a run result as JUnit XML for CI, one test case per
//! expectation, one per abort guard (failed when it fired), plus an errored
//! `run` case when the run stopped early.

use std::fmt::Write as _;

use super::format::{secs, signed_secs, t0_rel, utc_full};
use super::result::{ExpectationResult, RunResult, RunVerdict, Verdict};
use crate::timeline::Ms;

/// Renders `junit.xml`.
pub fn render(result: &RunResult) -> String {
    let r = result;
    let suite = format!("nodefall.{}", r.scenario);
    let run_error = r.verdict.is_partial();
    let (guards, fired) = super::guard::junit_counts(r);
    let tests = r.expectations.len() + usize::from(run_error) + guards;
    let failures = r.count(Verdict::Fail) + fired;
    let errors = usize::from(run_error);
    let skipped = r.count(Verdict::NotRun);
    let counts = format!(
        "tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{}\"",
        seconds(r.finished)
    );

    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites name=\"nodefall\" {counts}>");
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" {counts} timestamp=\"{}\">",
        attr(&suite),
        utc_full(r.started_at)
    );
    let _ = writeln!(out, "    <properties>");
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
        let _ = writeln!(
            out,
            "      <property name=\"{name}\" value=\"{}\"/>",
            attr(&value)
        );
    }
    for (target, node) in &r.targets {
        let _ = writeln!(
            out,
            "      <property name=\"target.{}\" value=\"{}\"/>",
            attr(target),
            attr(node)
        );
    }
    let _ = writeln!(out, "    </properties>");

    for e in &r.expectations {
        testcase(&mut out, &suite, e, r);
    }
    super::guard::junit_cases(&mut out, &suite, r, attr);
    if run_error {
        let (kind, default) = match r.verdict {
            RunVerdict::Interrupted => ("interrupted", "the run was interrupted"),
            _ => ("error", "the run stopped on an error"),
        };
        let text = r.error.as_deref().unwrap_or(default);
        let message = text.lines().next().unwrap_or(default);
        let _ = writeln!(
            out,
            "    <testcase classname=\"{}\" name=\"run\" time=\"{}\">",
            attr(&suite),
            seconds(r.finished)
        );
        let _ = writeln!(
            out,
            "      <error message=\"{}\" type=\"{kind}\">{}</error>",
            attr(message),
            text_node(text)
        );
        let _ = writeln!(out, "    </testcase>");
    }
    let _ = writeln!(out, "  </testsuite>");
    let _ = writeln!(out, "</testsuites>");
    out
}

fn testcase(out: &mut String, suite: &str, e: &ExpectationResult, r: &RunResult) {
    // How long it was watched: until seen, else the whole window.
    let time = match (e.verdict, e.observed) {
        (_, Some(ms)) => ms,
        (Verdict::NotRun, None) => 0,
        (_, None) => e.window.horizon(),
    };
    let _ = write!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
        attr(suite),
        attr(&format!("{}: {}", e.label, e.description)),
        seconds(time.max(0))
    );
    match e.verdict {
        Verdict::Pass => {
            let _ = writeln!(out, "/>");
        }
        Verdict::NotRun => {
            let _ = writeln!(out, ">");
            let _ = writeln!(
                out,
                "      <skipped message=\"the run stopped before this expectation was decided\"/>"
            );
            let _ = writeln!(out, "    </testcase>");
        }
        Verdict::Fail => {
            let mut message = e.detail.clone();
            if let Some(m) = e.missed_by {
                let side = if m < 0 { "too early" } else { "too late" };
                let _ = write!(
                    message,
                    "{}missed by {} ({side})",
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
            let _ = writeln!(out, ">");
            let _ = writeln!(
                out,
                "      <failure message=\"{}\" type=\"expectation\">{}</failure>",
                attr(&message),
                text_node(&body)
            );
            let _ = writeln!(out, "    </testcase>");
        }
    }
}

/// Seconds with millisecond precision, as JUnit's `time` wants them.
fn seconds(ms: Ms) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let abs = ms.unsigned_abs();
    format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
}

/// A character XML 1.0 cannot carry at all, even escaped.
fn forbidden(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

pub(crate) fn escape(text: &str, in_attribute: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#13;"),
            // Attribute values would have these normalised to spaces.
            '\n' if in_attribute => out.push_str("&#10;"),
            '\t' if in_attribute => out.push_str("&#9;"),
            c if forbidden(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn attr(text: &str) -> String {
    escape(text, true)
}

fn text_node(text: &str) -> String {
    escape(text, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_control_characters() {
        assert_eq!(
            attr("a<b & \"c\" 'd'>\nx\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;&#10;x\u{FFFD}"
        );
        assert_eq!(text_node("l1\nl2\r"), "l1\nl2&#13;");
    }

    #[test]
    fn seconds_have_three_decimals() {
        assert_eq!(seconds(28_512), "28.512");
        assert_eq!(seconds(0), "0.000");
    }
}
