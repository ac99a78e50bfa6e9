//! Drawing primitives shared by the charts: an SVG document builder with
//! escaped text, a conservative text-width estimate, truncation, the
//! palette and axis helpers.

use std::fmt::Write as _;

use super::data::Unit;

/// Okabe-Ito colours (safe for colour-blind readers).
pub const GREEN: &str = "#009E73";
pub const ORANGE: &str = "#E69F00";
pub const VERMILLION: &str = "#D55E00";
pub const BLUE: &str = "#0072B2";
pub const GREY: &str = "#999999";
pub const INK: &str = "#222222";
pub const FAINT: &str = "#dddddd";

/// Font sizes.
pub const SMALL: f64 = 10.0;
pub const NORMAL: f64 = 11.0;
pub const TITLE: f64 = 14.0;

/// XML text or attribute value, escaped.
pub fn esc(s: &str) -> String {
    escape(s, true)
}

/// A character XML 1.0 cannot carry at all, even escaped.
fn forbidden(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

fn escape(text: &str, in_attribute: bool) -> String {
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

/// A generous estimate of the width of `s` in a sans-serif font of `size`
/// (wide glyphs counted wider), so text never runs past what is reserved.
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars()
        .map(|c| match c {
            'W' | 'M' | 'm' | 'w' | '@' | '%' => 0.95,
            c if c.is_ascii_uppercase() => 0.72,
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' ' => 0.34,
            c if c.is_ascii() => 0.6,
            _ => 1.0,
        })
        .sum::<f64>()
        * size
}

/// `s` cut to fit `width` at `size`, with an ellipsis when cut.
pub fn truncate(s: &str, width: f64, size: f64) -> String {
    if text_width(s, size) <= width {
        return s.to_owned();
    }
    let mut out = String::new();
    for c in s.chars() {
        let next = format!("{out}{c}…");
        if text_width(&next, size) > width {
            break;
        }
        out.push(c);
    }
    format!("{}…", out.trim_end())
}

/// `s` in lines that fit `width` at `size`, broken between words (a word
/// wider than a line is split), at most `max` lines: the last one cut with
/// an ellipsis when that is not enough.
pub fn wrap(s: &str, width: f64, size: f64, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in s.split_whitespace() {
        let joined = if line.is_empty() {
            word.to_owned()
        } else {
            format!("{line} {word}")
        };
        if text_width(&joined, size) <= width {
            line = joined;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        // a word too wide for a line of its own: split it after `/`, `=`,
        // `:`, `,` or `-` where it can, else anywhere
        for piece in word.split_inclusive(['/', '=', ':', ',', '-']) {
            let next = format!("{line}{piece}");
            if text_width(&next, size) <= width {
                line = next;
                continue;
            }
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            for c in piece.chars() {
                let next = format!("{line}{c}");
                if !line.is_empty() && text_width(&next, size) > width {
                    lines.push(std::mem::take(&mut line));
                    line.push(c);
                } else {
                    line = next;
                }
            }
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    if lines.len() > max.max(1) {
        let rest = lines.split_off(max.max(1) - 1).join(" ");
        lines.push(truncate(&rest, width, size));
    }
    lines
}

/// Text placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// An SVG document being drawn.
#[derive(Debug)]
pub struct Svg {
    pub width: f64,
    body: String,
}

impl Svg {
    pub fn new(width: f64) -> Svg {
        Svg {
            width,
            body: String::new(),
        }
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, title: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{fill}" rx="2">"#,
            w.max(0.0)
        );
        self.title(title);
        self.body.push_str("</rect>\n");
    }

    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, dash: bool) {
        let dash = if dash {
            r#" stroke-dasharray="4 3""#
        } else {
            ""
        };
        let _ = writeln!(
            self.body,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="1"{dash}/>"#
        );
    }

    /// A line of `width` without dashes.
    pub fn stroke(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, width: f64) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="{width}"/>"#
        );
    }

    pub fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str, title: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="{r:.1}" fill="{fill}" stroke="white" stroke-width="1">"#
        );
        self.title(title);
        self.body.push_str("</circle>\n");
    }

    /// A diamond of half-size `r` centred on (x, y).
    pub fn diamond(&mut self, x: f64, y: f64, r: f64, fill: &str, title: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<polygon points="{:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1}" fill="{fill}" stroke="{INK}" stroke-width="1">"#,
            x - r,
            y - r,
            x + r,
            y + r
        );
        self.title(title);
        self.body.push_str("</polygon>\n");
    }

    /// Text at (x, y) (y is the baseline), with a tooltip when given.
    pub fn text(&mut self, (x, y): (f64, f64), s: &str, size: f64, anchor: Anchor, fill: &str) {
        self.text_titled((x, y), s, size, anchor, fill, None);
    }

    pub fn text_titled(
        &mut self,
        (x, y): (f64, f64),
        s: &str,
        size: f64,
        anchor: Anchor,
        fill: &str,
        title: Option<&str>,
    ) {
        let _ = write!(
            self.body,
            r#"<text x="{x:.1}" y="{y:.1}" font-size="{size}" text-anchor="{}" fill="{fill}">"#,
            anchor.name()
        );
        self.title(title);
        let _ = writeln!(self.body, "{}</text>", esc(s));
    }

    /// Bold text.
    pub fn heading(&mut self, (x, y): (f64, f64), s: &str, size: f64) {
        let _ = writeln!(
            self.body,
            r#"<text x="{x:.1}" y="{y:.1}" font-size="{size}" font-weight="bold" fill="{INK}">{}</text>"#,
            esc(s)
        );
    }

    fn title(&mut self, title: Option<&str>) {
        if let Some(t) = title {
            let _ = write!(self.body, "<title>{}</title>", esc(t));
        }
    }

    /// The document, `height` tall, on a white background.
    pub fn finish(self, height: f64) -> String {
        let (w, h) = (self.width, height.ceil());
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\">\n\
             <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n{}</svg>\n",
            self.body
        )
    }
}

/// A value for people: seconds with up to 3 decimals (`7.6s`), or a count.
pub fn show(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Ms => {
            let s = format!("{:.3}", v / 1000.0);
            format!("{}s", s.trim_end_matches('0').trim_end_matches('.'))
        }
        Unit::Count => format!("{v:.0}"),
    }
}

/// A tick step (ms) giving about `ticks` ticks over `span` ms.
pub fn tick_step(span: f64, ticks: f64) -> f64 {
    const STEPS_S: [f64; 16] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        14_400.0, 43_200.0,
    ];
    const DAY: f64 = 86_400_000.0;
    let want = span / ticks.max(1.0);
    if let Some(s) = STEPS_S.iter().map(|s| s * 1000.0).find(|s| *s >= want) {
        return s;
    }
    // past half a day: 1, 2, 5 x 10^k days, so there are about `ticks` of
    // them however long the span (a damaged result can say 292 million years)
    let mut decade = DAY;
    while decade.is_finite() {
        for m in [1.0, 2.0, 5.0] {
            let step = decade * m;
            if step.is_finite() && step >= want {
                return step;
            }
        }
        decade *= 10.0;
    }
    f64::MAX
}

/// An axis label for `ms` relative to the origin: `+30s`, `+1m30s`, `-10s`, `+1h`.
pub fn offset_label(ms: f64) -> String {
    let sign = if ms < 0.0 { "-" } else { "+" };
    let s = (ms.abs() / 1000.0).round() as i64;
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = sign.to_owned();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if m > 0 {
        let _ = write!(out, "{m}m");
    }
    if sec > 0 || (h == 0 && m == 0) {
        let _ = write!(out, "{sec}s");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_control_characters() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>\nx\u{1}", true),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;&#10;x\u{FFFD}"
        );
        assert_eq!(escape("l1\nl2\r", false), "l1\nl2&#13;");
    }

    #[test]
    fn text_is_escaped_and_truncated() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;"
        );
        let long = "pods app=nginx on target (worker-1): all Terminating, between 13s and 43s";
        let cut = truncate(long, 150.0, NORMAL);
        assert!(cut.ends_with('…'));
        assert!(text_width(&cut, NORMAL) <= 150.0);
        assert_eq!(truncate("short", 150.0, NORMAL), "short");
    }

    #[test]
    fn long_text_wraps_between_words_and_is_cut_past_the_last_line() {
        let long = "#4 (evicted) pass: pods app=nginx on target (worker-1): all Terminating, between 13s and 43s";
        let lines = wrap(long, 200.0, NORMAL, 4);
        assert!(lines.len() > 1, "{lines:?}");
        assert!(
            lines.iter().all(|l| text_width(l, NORMAL) <= 200.0),
            "{lines:?}"
        );
        assert_eq!(
            lines.join(" "),
            long,
            "nothing lost when it fits in 4 lines"
        );
        let cut = wrap(long, 60.0, NORMAL, 2);
        assert_eq!(cut.len(), 2);
        assert!(cut[1].ends_with('…'), "{cut:?}");
        let word = wrap(
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            60.0,
            NORMAL,
            9,
        );
        assert!(
            word.len() > 1 && word.iter().all(|l| text_width(l, NORMAL) <= 60.0),
            "{word:?}"
        );
        assert_eq!(wrap("", 60.0, NORMAL, 3), Vec::<String>::new());
        // a taint splits where it reads
        let taint = wrap(
            "#6 taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
            250.0,
            NORMAL,
            4,
        );
        assert_eq!(
            taint,
            [
                "#6 taint",
                "node.kubernetes.io/out-of-service=",
                "nodeshutdown:NoExecute"
            ]
        );
    }

    #[test]
    fn ticks_and_labels() {
        assert_eq!(tick_step(60_000.0, 8.0), 10_000.0);
        assert_eq!(tick_step(7_200_000.0, 8.0), 900_000.0);
        assert_eq!(tick_step(5_000.0, 8.0), 1_000.0);
        assert_eq!(tick_step(8.0 * 86_400_000.0, 8.0), 86_400_000.0);
        assert_eq!(tick_step(9.0 * 86_400_000.0, 8.0), 2.0 * 86_400_000.0);
        // i64's whole range in ms: a handful of ticks, not billions
        let span = 2.0 * i64::MAX as f64;
        let step = tick_step(span, 9.0);
        assert!(span / step <= 9.0 && span / step >= 1.0, "{step}");
        assert_eq!(tick_step(f64::INFINITY, 9.0), f64::MAX);
        assert_eq!(tick_step(f64::NAN, 9.0), f64::MAX);
        assert_eq!(offset_label(90_000.0), "+1m30s");
        assert_eq!(offset_label(-10_000.0), "-10s");
        assert_eq!(offset_label(3_600_000.0), "+1h");
        assert_eq!(offset_label(0.0), "+0s");
    }
}
