//! The run's timeline as SVG: a row per lane under its section, labels on
//! the left (wrapped to fit, the full text as a tooltip), seconds from T0 on
//! an axis that breaks across long quiet stretches, a dashed T0 line,
//! segments and marks coloured by what they mean.

use super::axis::{Axis, BREAK_PX};
use super::draw::{
    Anchor, BLUE, FAINT, GREEN, GREY, INK, NORMAL, ORANGE, SMALL, Svg, TITLE, VERMILLION,
    text_width, truncate, wrap,
};
use crate::report::lanes::{Lanes, Row, Tone};

const WIDTH: f64 = 1100.0;
const LABELS: f64 = 380.0;
const X0: f64 = LABELS + 12.0;
const X1: f64 = WIDTH - 36.0;
const TOP: f64 = 100.0;
/// One line of a label; a row is as many lines as its label needs.
const LINE: f64 = 13.0;
const ROW_PAD: f64 = 5.0;
const SECTION: f64 = 22.0;
/// Lines of a label before it is cut (the full text stays as a tooltip).
const MAX_LINES: usize = 4;
const BAND: &str = "#f2f2f2";

fn colour(t: Tone) -> &'static str {
    match t {
        Tone::Ok => GREEN,
        Tone::Fault => ORANGE,
        Tone::Bad => VERMILLION,
        Tone::Neutral => GREY,
        Tone::Cordon => BLUE,
    }
}

/// A row as laid out: its label's lines and its height.
struct Placed<'a> {
    row: &'a Row,
    lines: Vec<String>,
    height: f64,
}

fn place(row: &Row) -> Placed<'_> {
    let lines = wrap(&row.label, LABELS - 22.0, NORMAL, MAX_LINES);
    let height = LINE * lines.len().max(1) as f64 + ROW_PAD;
    Placed { row, lines, height }
}

pub fn render(lanes: &Lanes) -> String {
    let mut svg = Svg::new(WIDTH);
    svg.heading(
        (10.0, 22.0),
        &truncate(&lanes.title, WIDTH - 20.0, TITLE),
        TITLE,
    );
    legend(&mut svg);
    let placed: Vec<(&str, Vec<Placed>)> = lanes
        .sections
        .iter()
        .map(|s| (s.name.as_str(), s.rows.iter().map(place).collect()))
        .collect();
    if placed.iter().all(|(_, rows)| rows.is_empty()) {
        svg.text(
            (10.0, TOP),
            "Nothing ran: no steps, nodes or pods to show.",
            NORMAL,
            Anchor::Start,
            INK,
        );
        return svg.finish(TOP + 16.0);
    }
    let origin = lanes.t0.unwrap_or(0) as f64;
    let axis = axis_of(lanes);
    let bottom = TOP
        + placed
            .iter()
            .map(|(_, rows)| SECTION + rows.iter().map(|p| p.height).sum::<f64>())
            .sum::<f64>();
    breaks_behind(&mut svg, &axis, bottom);
    ticks(&mut svg, &axis, origin, lanes.t0.is_some(), bottom);
    let mut y = TOP;
    for (name, rows) in &placed {
        svg.heading((8.0, y + 15.0), name, NORMAL + 1.0);
        svg.line(
            (8.0, y + SECTION - 2.0),
            (X1, y + SECTION - 2.0),
            FAINT,
            false,
        );
        y += SECTION;
        for p in rows {
            row(&mut svg, &axis, p, y);
            y += p.height;
        }
    }
    svg.finish(bottom + 12.0)
}

/// The time axis of a chart: from the start (or the earliest moment) to
/// the end, broken across long quiet stretches.
fn axis_of(lanes: &Lanes) -> Axis {
    let times: Vec<f64> = lanes.times().into_iter().map(|t| t as f64).collect();
    let first = times.first().copied().unwrap_or(0.0).min(0.0);
    let last = (lanes.end as f64).max(first + 1000.0);
    Axis::plan(&times, first, last, X0, X1)
}

/// The stretches (ms since start, from..to) the chart's axis skips.
pub fn skipped(lanes: &Lanes) -> Vec<(f64, f64)> {
    axis_of(lanes).breaks().map(|b| (b.from, b.to)).collect()
}

fn legend(svg: &mut Svg) {
    let items = [
        (GREEN, "held / Ready / served"),
        (ORANGE, "fault / NotReady / Terminating / refused (429)"),
        (VERMILLION, "failed / Unknown / stuck / errors"),
        (BLUE, "cordoned / evicted"),
        (GREY, "setup, actions, cleanup, Node deleted"),
    ];
    let (mut x, mut y) = (10.0, 34.0);
    for (c, label) in items {
        let w = 14.0 + text_width(label, SMALL) + 16.0;
        if x + w > WIDTH - 10.0 {
            (x, y) = (10.0, y + 16.0);
        }
        svg.rect(x, y, 10.0, 10.0, c, None);
        svg.text((x + 14.0, y + 9.0), label, SMALL, Anchor::Start, INK);
        x += w;
    }
    let w = 14.0 + text_width("seen / a moment", SMALL) + 16.0;
    if x + w > WIDTH - 10.0 {
        (x, y) = (10.0, y + 16.0);
    }
    svg.diamond(x + 5.0, y + 5.0, 5.0, "white", None);
    svg.text(
        (x + 14.0, y + 9.0),
        "seen / a moment",
        SMALL,
        Anchor::Start,
        INK,
    );
    x += w;
    if x + 60.0 > WIDTH - 10.0 {
        (x, y) = (10.0, y + 16.0);
    }
    svg.rect(x, y - 1.0, 12.0, 12.0, BAND, None);
    slashes(svg, x + 6.0, y, y + 10.0);
    svg.text(
        (x + 16.0, y + 9.0),
        "time skipped (nothing happened)",
        SMALL,
        Anchor::Start,
        INK,
    );
}

/// The quiet stretches the axis skips, as grey bands behind the rows.
fn breaks_behind(svg: &mut Svg, axis: &Axis, bottom: f64) {
    for b in axis.breaks() {
        let skipped = super::draw::offset_label(b.to - b.from);
        let title = format!(
            "{} skipped: nothing began or ended",
            skipped.trim_start_matches('+')
        );
        svg.rect(
            b.x0,
            TOP - 8.0,
            b.x1 - b.x0,
            bottom - TOP + 8.0,
            BAND,
            Some(&title),
        );
        slashes(svg, (b.x0 + b.x1) / 2.0, TOP - 8.0, TOP - 1.0);
    }
}

/// The `//` of a broken axis, centred on x.
fn slashes(svg: &mut Svg, x: f64, top: f64, bottom: f64) {
    for dx in [-2.5, 2.5] {
        svg.line((x + dx - 2.0, bottom), (x + dx + 2.0, top), INK, false);
    }
}

/// Ticks in seconds from the origin (T0, else the start), grid lines and
/// the dashed origin line.
fn ticks(svg: &mut Svg, axis: &Axis, origin: f64, has_t0: bool, bottom: f64) {
    let zero = if has_t0 { "T0" } else { "start" };
    for (x, label) in axis.ticks(origin, zero, SMALL) {
        svg.line((x, TOP - 8.0), (x, bottom), FAINT, false);
        svg.text((x, TOP - 12.0), &label, SMALL, Anchor::Middle, INK);
    }
    if has_t0 {
        let x = axis.x(origin);
        svg.line((x, TOP - 8.0), (x, bottom), INK, true);
    }
}

fn row(svg: &mut Svg, axis: &Axis, p: &Placed, y: f64) {
    let letters = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let cut = letters(&p.lines.concat()) != letters(&p.row.label);
    for (i, line) in p.lines.iter().enumerate() {
        let full = (cut && i + 1 == p.lines.len()).then_some(p.row.label.as_str());
        svg.text_titled(
            (18.0, y + LINE * (i + 1) as f64),
            line,
            NORMAL,
            Anchor::Start,
            INK,
            full,
        );
    }
    let mid = y + (p.height - ROW_PAD) / 2.0 + 2.0;
    let segments = &p.row.segments;
    if let (Some(a), Some(b)) = (segments.first(), segments.last())
        && segments.len() > 1
    {
        // a lane of states: a faint line under it joins them
        svg.line(
            (axis.x(a.from as f64), mid),
            (axis.x(b.to as f64), mid),
            FAINT,
            false,
        );
    }
    if segments.is_empty()
        && let (Some(a), Some(b)) = (p.row.marks.first(), p.row.marks.last())
    {
        svg.line(
            (axis.x(a.at as f64), mid),
            (axis.x(b.at as f64), mid),
            GREY,
            false,
        );
    }
    for s in segments {
        let (x1, x2) = (axis.x(s.from as f64), axis.x(s.to as f64));
        // narrower than a diamond: drawn as one, so it can be seen
        if s.to > s.from && x2 - x1 >= 5.0 {
            svg.rect(x1, mid - 6.0, x2 - x1, 12.0, colour(s.tone), Some(&s.title));
            for b in axis.breaks() {
                if (s.from as f64) < b.from && (s.to as f64) > b.to {
                    cut_mark(svg, (b.x0 + b.x1) / 2.0, mid);
                }
            }
        } else {
            svg.diamond(x1, mid, 5.0, colour(s.tone), Some(&s.title));
        }
    }
    for m in &p.row.marks {
        let fill = m.tone.map_or("white", colour);
        svg.diamond(axis.x(m.at as f64), mid, 4.5, fill, Some(&m.title));
    }
}

/// Where a bar crosses a break: two white strokes across it.
fn cut_mark(svg: &mut Svg, x: f64, mid: f64) {
    let half = (BREAK_PX / 10.0).min(3.0);
    for dx in [-half, half] {
        svg.stroke(
            (x + dx - 2.0, mid + 7.0),
            (x + dx + 2.0, mid - 7.0),
            "white",
            2.0,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::lanes::{Mark, Section, Segment};

    fn lanes(rows: Vec<Row>) -> Lanes {
        Lanes {
            title: "t <&> \"x\"".into(),
            t0: Some(2_000),
            end: 60_000,
            sections: vec![Section {
                name: "Steps".into(),
                rows,
            }],
        }
    }

    fn bar(label: &str, tone: Tone, from: i64, to: i64, mark: Option<i64>) -> Row {
        Row {
            label: label.into(),
            segments: vec![Segment {
                from,
                to,
                tone,
                title: label.into(),
            }],
            marks: mark
                .map(|at| Mark {
                    at,
                    tone: None,
                    title: label.into(),
                })
                .into_iter()
                .collect(),
        }
    }

    /// Every x/y/width the chart emits lies inside its viewBox.
    fn assert_inside(svg: &str) {
        let doc = roxmltree::Document::parse(svg).unwrap();
        let root = doc.root_element();
        let w: f64 = root.attribute("width").unwrap().parse().unwrap();
        let h: f64 = root.attribute("height").unwrap().parse().unwrap();
        for n in doc.descendants().filter(|n| n.is_element()) {
            let num = |a: &str| n.attribute(a).map(|v| v.parse::<f64>().unwrap());
            for (a, max) in [
                ("x", w),
                ("x1", w),
                ("x2", w),
                ("cx", w),
                ("y", h),
                ("y1", h),
                ("y2", h),
                ("cy", h),
            ] {
                if let Some(v) = num(a) {
                    assert!((0.0..=max).contains(&v), "{a}={v} outside: {:?}", n);
                }
            }
            if let (Some(x), Some(width)) = (num("x"), num("width")) {
                assert!(x + width <= w + 0.01, "{n:?}");
            }
            if n.tag_name().name() == "text" {
                let text: String = n
                    .children()
                    .filter(|c| c.is_text())
                    .map(|c| c.text().unwrap())
                    .collect();
                let size = num("font-size").unwrap();
                let x = num("x").unwrap();
                let tw = super::super::draw::text_width(&text, size);
                let (l, r) = match n.attribute("text-anchor") {
                    Some("middle") => (x - tw / 2.0, x + tw / 2.0),
                    Some("end") => (x - tw, x),
                    _ => (x, x + tw),
                };
                assert!(l >= 0.0 && r <= w, "text {text:?} spans {l}..{r} of {w}");
            }
        }
    }

    #[test]
    fn bars_marks_and_points_are_drawn_inside() {
        let long = "#4 (evicted) pass: pods app=nginx on target (worker-1): all Terminating, between 13s and 43s <b>";
        let svg = render(&lanes(vec![
            bar("#1 pause-vm worker-1", Tone::Fault, 2_000, 2_100, None),
            bar(long, Tone::Ok, 15_000, 45_000, Some(30_000)),
            bar("preflight", Tone::Bad, 1_000, 1_000, None),
            bar("seen too late", Tone::Bad, 5_000, 10_000, Some(70_000)),
        ]));
        assert_inside(&svg);
        assert!(svg.contains("&lt;b&gt;"), "hostile labels are escaped");
        // the cut label keeps its full text as a tooltip
        assert!(svg.contains("<title>#4 (evicted) pass: pods app=nginx"));
        assert!(svg.contains(">T0</text>"));
        assert!(svg.contains("stroke-dasharray"));
    }

    #[test]
    fn an_empty_run_and_a_two_hour_run_render() {
        let empty = render(&Lanes {
            title: "empty".into(),
            t0: None,
            end: 0,
            sections: vec![],
        });
        assert_inside(&empty);
        assert!(empty.contains("Nothing ran"));
        let mut long = lanes(
            (0..80)
                .map(|i| {
                    bar(
                        &format!("row {i}"),
                        Tone::Neutral,
                        i * 90_000,
                        i * 90_000 + 60_000,
                        None,
                    )
                })
                .collect(),
        );
        long.end = 7_300_000;
        let svg = render(&long);
        assert_inside(&svg);
        assert!(svg.contains(">+1h</text>"), "hour ticks");
    }

    #[test]
    fn times_at_the_ends_of_i64_give_a_few_ticks_at_once() {
        for (from, end) in [(0, i64::MAX), (i64::MIN, 0), (i64::MIN, i64::MAX)] {
            let mut l = lanes(vec![bar("x", Tone::Ok, from, from, None)]);
            l.t0 = Some(from);
            l.end = end;
            let svg = render(&l);
            let ticks = svg.matches("text-anchor=\"middle\"").count();
            assert!((1..=20).contains(&ticks), "{ticks} ticks");
        }
    }
}
