//! Time and text formatting shared by the report renderers: seconds with
//! millisecond precision, `T0+x.xxxs`, UTC wall-clock times, Markdown cells
//! and tables, and the few facts of a run that decide a section's wording
//! ([`had_fault`], [`nodes_word`]).
//!
//! A leaf: the sections import these helpers, and this file imports no
//! section (nor `markdown.rs`, which only calls the sections in order).

use jiff::Timestamp;
use tabled::builder::Builder;
use tabled::settings::Style;

use crate::record::{RunResult, StepKind, StepOutcome};
use crate::timeline::Ms;

pub use crate::duration::secs;

/// Shown for a value the run did not observe.
pub const MISSING: &str = "—";

/// `+27.412s`, `-0.300s`: like [`secs`], always signed.
pub fn signed_secs(ms: Ms) -> String {
    if ms < 0 {
        secs(ms)
    } else {
        format!("+{}", secs(ms))
    }
}

/// `T0+8.012s`, `T0-14.230s`.
pub fn t0_rel(ms_since_t0: Ms) -> String {
    format!("T0{}", signed_secs(ms_since_t0))
}

/// `at` (ms since start) relative to T0, or to the start when T0 was never reached.
pub fn rel(result: &RunResult, at: Ms) -> String {
    match result.since_t0(at) {
        Some(ms) => t0_rel(ms),
        None => format!("start{}", signed_secs(at)),
    }
}

/// A Markdown table; the cells must already be escaped with [`cell`].
pub fn table<const N: usize>(header: [&str; N], rows: Vec<[String; N]>) -> String {
    let mut builder = Builder::default();
    builder.push_record(header);
    for row in rows {
        builder.push_record(row);
    }
    let mut table = builder.build();
    table.with(Style::markdown());
    format!("{table}\n")
}

/// Whether a fault ran: a step of kind `fault` that was not skipped. A run
/// without one (a drain, a cordon, a taint) has target nodes, not failed
/// ones, and no node failure to measure.
pub fn had_fault(r: &RunResult) -> bool {
    r.steps
        .iter()
        .any(|s| s.kind == StepKind::Fault && s.outcome != StepOutcome::Skipped)
}

/// What the target nodes were, for headings and sentences: `failed` on a
/// run with a fault, else `target` (`Pods on the target node(s)`).
pub fn nodes_word(r: &RunResult) -> &'static str {
    if had_fault(r) { "failed" } else { "target" }
}

/// `2026-11-21T11:04:25.118Z`: RFC 3339 in UTC with milliseconds.
pub fn utc_full(ts: Timestamp) -> String {
    format!("{ts:.3}")
}

/// `11:04:25.118`: the UTC time of day with milliseconds.
pub fn utc_time(ts: Timestamp) -> String {
    let ms = ts.as_millisecond().rem_euclid(86_400_000);
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// Text made safe for one Markdown table cell: `|` and `*` escaped (`2*grace ..
/// 3*grace` is not emphasis), `<` defused (GitHub would swallow `<none>` as a
/// tag), line breaks as `<br>`.
pub fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.trim_end().lines().peekable();
    while let Some(line) = lines.next() {
        for c in line.chars() {
            match c {
                '|' => out.push_str("\\|"),
                '*' => out.push_str("\\*"),
                '<' => out.push_str("&lt;"),
                '\r' => {}
                c => out.push(c),
            }
        }
        if lines.peek().is_some() {
            out.push_str("<br>");
        }
    }
    out
}

/// Free text (a scenario's name or description, as `result.json` holds
/// it) made safe for running Markdown: a heading, a list item, a quote.
/// HTML is defused (`<`, `>` and `&` as entities), the punctuation that
/// starts emphasis, code, links or a heading's end is backslash-escaped,
/// and a line break becomes a space (it would end the heading and start
/// Markdown of its own).
pub fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.trim().chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '|' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Free text as one Markdown code span (HTML inside is shown, not
/// interpreted): delimited by more backticks than it holds, on one line.
pub fn code(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let ticks = "`".repeat(longest + 1);
    if text.starts_with('`') || text.ends_with('`') || text.trim().is_empty() {
        format!("{ticks} {text} {ticks}")
    } else {
        format!("{ticks}{text}{ticks}")
    }
}

/// A relative path as a Markdown link's destination: every byte outside
/// `A-Z a-z 0-9 - . _ ~ /` percent-encoded, so the link cannot end early.
pub fn link_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(b));
            }
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A Markdown code fence longer than any run of backticks in `text`.
pub fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat(longest.max(2) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keep_milliseconds_and_sign() {
        assert_eq!(secs(27_412), "27.412s");
        assert_eq!(secs(0), "0.000s");
        assert_eq!(secs(-300), "-0.300s");
        assert_eq!(signed_secs(8_012), "+8.012s");
        assert_eq!(t0_rel(-14_230), "T0-14.230s");
        assert_eq!(t0_rel(89_005), "T0+89.005s");
    }

    #[test]
    fn utc_times_have_milliseconds() {
        let ts: Timestamp = "2026-11-21T11:04:25.118Z".parse().unwrap();
        assert_eq!(utc_full(ts), "2026-11-21T11:04:25.118Z");
        assert_eq!(utc_time(ts), "11:04:25.118");
        let whole: Timestamp = "2026-11-21T11:04:25Z".parse().unwrap();
        assert_eq!(utc_full(whole), "2026-11-21T11:04:25.000Z");
    }

    #[test]
    fn cells_escape_pipes_tags_and_newlines() {
        assert_eq!(cell("a|b <none>\nc\r\n"), "a\\|b &lt;none><br>c");
        assert_eq!(cell("2*grace .. 3*grace"), "2\\*grace .. 3\\*grace");
    }

    #[test]
    fn inline_text_cannot_open_html_or_markdown() {
        assert_eq!(
            inline("<img src=x onerror=alert(1)> & *b* [l](u)\n# h"),
            "&lt;img src=x onerror=alert(1)&gt; &amp; \\*b\\* \\[l\\](u) \\# h"
        );
        assert_eq!(inline("statefulset-nfs"), "statefulset-nfs");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x"), "`` `x ``");
        assert_eq!(code("s.yaml\n<b>"), "`s.yaml <b>`");
        assert_eq!(link_path("run-1"), "run-1");
        assert_eq!(link_path("a) <b"), "a%29%20%3Cb");
    }

    #[test]
    fn fences_outrun_backticks() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ```` b"), "`````");
    }
}
