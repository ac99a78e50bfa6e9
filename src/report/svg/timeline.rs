//! The run's timeline as SVG: a row per bar under its section, labels on
//! the left (cut to fit, the full text as a tooltip), seconds from T0 on the
//! axis, a dashed T0 line, bars coloured by what they mean.

use super::draw::{
    Anchor, FAINT, GREEN, GREY, INK, NORMAL, ORANGE, SMALL, Svg, TITLE, VERMILLION, offset_label,
    tick_step, truncate,
};
use crate::report::lanes::{Bar, Lanes, Tone};

const WIDTH: f64 = 1000.0;
const LABELS: f64 = 330.0;
const X0: f64 = LABELS + 12.0;
const X1: f64 = WIDTH - 36.0;
const TOP: f64 = 84.0;
const ROW: f64 = 18.0;
const SECTION: f64 = 22.0;

fn colour(t: Tone) -> &'static str {
    match t {
        Tone::Ok => GREEN,
        Tone::Fault => ORANGE,
        Tone::Bad => VERMILLION,
        Tone::Neutral => GREY,
    }
}

/// The chart's time scale: ms since start -> x.
struct Scale {
    from: f64,
    to: f64,
    /// `to - from`, at least a second (also where `from + 1000` is `from`
    /// in floating point, for times near i64's ends).
    span: f64,
}

impl Scale {
    fn new(from: f64, to: f64) -> Scale {
        Scale {
            from,
            to,
            span: (to - from).max(1000.0),
        }
    }

    fn x(&self, ms: f64) -> f64 {
        let f = ((ms - self.from) / self.span).clamp(0.0, 1.0);
        X0 + f * (X1 - X0)
    }
}

pub fn render(lanes: &Lanes) -> String {
    let mut svg = Svg::new(WIDTH);
    svg.heading(
        (10.0, 22.0),
        &truncate(&lanes.title, WIDTH - 20.0, TITLE),
        TITLE,
    );
    legend(&mut svg);
    let rows: usize = lanes.sections.iter().map(|s| s.bars.len()).sum();
    if rows == 0 {
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
    let first = lanes
        .sections
        .iter()
        .flat_map(|s| &s.bars)
        .map(|b| b.from.min(b.mark.unwrap_or(b.from)))
        .min()
        .unwrap_or(0)
        .min(0) as f64;
    let last = (lanes.end as f64).max(first + 1000.0);
    let scale = Scale::new(first, last);
    let bottom = TOP
        + lanes
            .sections
            .iter()
            .map(|s| SECTION + ROW * s.bars.len() as f64)
            .sum::<f64>();
    axis(&mut svg, &scale, origin, lanes.t0.is_some(), bottom);
    let mut y = TOP;
    for s in &lanes.sections {
        svg.heading((8.0, y + 15.0), &s.name, NORMAL + 1.0);
        svg.line(
            (8.0, y + SECTION - 2.0),
            (X1, y + SECTION - 2.0),
            FAINT,
            false,
        );
        y += SECTION;
        for b in &s.bars {
            bar(&mut svg, &scale, b, y);
            y += ROW;
        }
    }
    svg.finish(bottom + 12.0)
}

fn legend(svg: &mut Svg) {
    let items = [
        (GREEN, "held / Ready / served"),
        (ORANGE, "fault / NotReady / Terminating"),
        (VERMILLION, "failed / Unknown / stuck / errors"),
        (GREY, "setup, actions, cleanup"),
    ];
    let mut x = 10.0;
    for (c, label) in items {
        svg.rect(x, 34.0, 10.0, 10.0, c, None);
        svg.text((x + 14.0, 43.0), label, SMALL, Anchor::Start, INK);
        x += 14.0 + super::draw::text_width(label, SMALL) + 16.0;
    }
    svg.diamond(x + 5.0, 39.0, 5.0, "white", None);
    svg.text(
        (x + 14.0, 43.0),
        "seen / a moment",
        SMALL,
        Anchor::Start,
        INK,
    );
}

/// Ticks in seconds from the origin (T0, else the start), grid lines and
/// the dashed origin line.
fn axis(svg: &mut Svg, scale: &Scale, origin: f64, has_t0: bool, bottom: f64) {
    // counted, not stepped: adding `step` to a huge `t` can leave it unchanged
    let step = tick_step(scale.span, 9.0);
    let first = ((scale.from - origin) / step).ceil();
    let last = ((scale.to - origin) / step).floor();
    // tick_step gives about 9; the cap holds whatever the floats did
    let count = (last - first + 1.0).clamp(0.0, 20.0) as usize;
    for i in 0..count {
        let t = (first + i as f64) * step;
        let x = scale.x(origin + t);
        svg.line((x, TOP - 8.0), (x, bottom), FAINT, false);
        let label = if t == 0.0 {
            if has_t0 {
                "T0".to_owned()
            } else {
                "start".to_owned()
            }
        } else {
            offset_label(t)
        };
        svg.text((x, TOP - 12.0), &label, SMALL, Anchor::Middle, INK);
    }
    if has_t0 {
        let x = scale.x(origin);
        svg.line((x, TOP - 8.0), (x, bottom), INK, true);
    }
}

fn bar(svg: &mut Svg, scale: &Scale, b: &Bar, y: f64) {
    let label = truncate(&b.label, LABELS - 22.0, NORMAL);
    let full = (label != b.label).then_some(b.label.as_str());
    svg.text_titled((18.0, y + 13.0), &label, NORMAL, Anchor::Start, INK, full);
    let (x1, x2) = (scale.x(b.from as f64), scale.x(b.to as f64));
    let mid = y + ROW / 2.0;
    if b.to > b.from && x2 - x1 >= 1.0 {
        svg.rect(
            x1,
            y + 3.0,
            x2 - x1,
            ROW - 6.0,
            colour(b.tone),
            Some(&b.label),
        );
    } else {
        svg.diamond(x1, mid, 5.0, colour(b.tone), Some(&b.label));
    }
    if let Some(m) = b.mark {
        svg.diamond(scale.x(m as f64), mid, 4.5, "white", Some(&b.label));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::lanes::Section;

    fn lanes(bars: Vec<Bar>) -> Lanes {
        Lanes {
            title: "t <&> \"x\"".into(),
            t0: Some(2_000),
            end: 60_000,
            sections: vec![Section {
                name: "Steps".into(),
                bars,
            }],
        }
    }

    fn bar(label: &str, tone: Tone, from: i64, to: i64, mark: Option<i64>) -> Bar {
        Bar {
            label: label.into(),
            tone,
            from,
            to,
            mark,
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
