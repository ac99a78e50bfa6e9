//! Each figure over repeated runs: one strip per figure on its own scale,
//! a dot per run (the slowest run apart, labelled), the p50 and p95 marked,
//! and the numbers in words beside it.

use super::data::{Distribution, Series};
use super::draw::{
    Anchor, BLUE, FAINT, INK, NORMAL, ORANGE, SMALL, Svg, TITLE, VERMILLION, show, truncate,
};

const WIDTH: f64 = 1000.0;
const LABELS: f64 = 300.0;
const X0: f64 = LABELS + 20.0;
const X1: f64 = WIDTH - 40.0;
const TOP: f64 = 64.0;
const ROW: f64 = 66.0;

pub fn render(d: &Distribution) -> String {
    let mut svg = Svg::new(WIDTH);
    svg.heading(
        (10.0, 22.0),
        &truncate(&d.title, WIDTH - 20.0, TITLE),
        TITLE,
    );
    legend(&mut svg);
    if d.series.is_empty() {
        svg.text(
            (10.0, TOP + 14.0),
            "No figure was observed in any run.",
            NORMAL,
            Anchor::Start,
            INK,
        );
        return svg.finish(TOP + 28.0);
    }
    let mut y = TOP;
    for s in &d.series {
        strip(&mut svg, s, y);
        y += ROW;
    }
    svg.finish(y + 6.0)
}

fn legend(svg: &mut Svg) {
    svg.circle(15.0, 39.0, 4.5, BLUE, None);
    svg.text((24.0, 43.0), "a run", SMALL, Anchor::Start, INK);
    svg.circle(75.0, 39.0, 4.5, VERMILLION, None);
    svg.text((84.0, 43.0), "the slowest run", SMALL, Anchor::Start, INK);
    svg.line((185.0, 33.0), (185.0, 45.0), INK, false);
    svg.text((190.0, 43.0), "p50", SMALL, Anchor::Start, INK);
    svg.line((225.0, 33.0), (225.0, 45.0), ORANGE, true);
    svg.text((230.0, 43.0), "p95", SMALL, Anchor::Start, INK);
    svg.text(
        (270.0, 43.0),
        "(each figure on its own scale)",
        SMALL,
        Anchor::Start,
        INK,
    );
}

fn strip(svg: &mut Svg, s: &Series, y: f64) {
    svg.line((8.0, y), (WIDTH - 8.0, y), FAINT, false);
    svg.heading(
        (10.0, y + 20.0),
        &truncate(&s.name, LABELS - 10.0, NORMAL + 1.0),
        NORMAL + 1.0,
    );
    let mid = y + 32.0;
    if s.points.is_empty() {
        svg.text((10.0, y + 38.0), "not observed", NORMAL, Anchor::Start, INK);
        return;
    }
    let words = format!(
        "{}p95 {} · n={}",
        s.p50
            .map_or_else(String::new, |p| format!("p50 {} · ", show(s.unit, p))),
        s.p95.map_or_else(|| "—".to_owned(), |p| show(s.unit, p)),
        s.points.len()
    );
    svg.text(
        (10.0, y + 38.0),
        &truncate(&words, LABELS - 10.0, NORMAL),
        NORMAL,
        Anchor::Start,
        INK,
    );
    let lo = s
        .points
        .iter()
        .map(|p| p.value)
        .fold(f64::INFINITY, f64::min);
    let hi = s
        .points
        .iter()
        .map(|p| p.value)
        .fold(f64::NEG_INFINITY, f64::max);
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1.0);
    let (from, to) = (lo - pad, hi + pad);
    let x = |v: f64| X0 + ((v - from) / (to - from)).clamp(0.0, 1.0) * (X1 - X0);
    svg.line((X0, mid), (X1, mid), FAINT, false);
    svg.line((x(lo), mid), (x(hi), mid), INK, false);
    svg.text(
        (x(lo), mid + 30.0),
        &show(s.unit, lo),
        SMALL,
        Anchor::Middle,
        INK,
    );
    if x(hi) - x(lo) > 60.0 {
        svg.text(
            (x(hi), mid + 30.0),
            &show(s.unit, hi),
            SMALL,
            Anchor::Middle,
            INK,
        );
    }
    if let Some(p) = s.p50 {
        svg.line((x(p), mid - 10.0), (x(p), mid + 10.0), INK, false);
    }
    if let Some(p) = s.p95 {
        svg.line((x(p), mid - 10.0), (x(p), mid + 10.0), ORANGE, true);
    }
    // Dots that would overlap are stacked above and below the line.
    let mut placed: Vec<(f64, f64)> = Vec::new();
    for p in &s.points {
        let px = x(p.value);
        let near = placed
            .iter()
            .filter(|(ox, _)| (ox - px).abs() < 8.0)
            .count();
        let k = near.div_ceil(2) as f64 * 7.0;
        let dy = if near % 2 == 1 { -k } else { k };
        let dy = dy.clamp(-14.0, 14.0);
        placed.push((px, dy));
        let (fill, title) = (
            if p.highlight { VERMILLION } else { BLUE },
            format!("run {}: {}", p.run, show(s.unit, p.value)),
        );
        svg.circle(px, mid + dy, 4.5, fill, Some(&title));
        if p.highlight {
            let label = format!("run {}", p.run);
            let (lx, anchor) = if px > X1 - 50.0 {
                (px - 8.0, Anchor::End)
            } else {
                (px + 8.0, Anchor::Start)
            };
            svg.text((lx, mid + dy + 4.0), &label, SMALL, anchor, VERMILLION);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::data::{Point, Unit};
    use super::*;

    pub fn sample() -> Distribution {
        let pts = |vs: &[f64], slow: usize| {
            vs.iter()
                .enumerate()
                .map(|(i, v)| Point {
                    run: i + 1,
                    value: *v,
                    highlight: i + 1 == slow,
                })
                .collect()
        };
        Distribution {
            title: "statefulset-nfs: 5 runs".into(),
            series: vec![
                Series {
                    name: "nodeNotReady".into(),
                    unit: Unit::Ms,
                    points: pts(&[7_512.0, 7_600.0, 7_600.0, 7_655.0, 8_012.0], 5),
                    p50: Some(7_600.0),
                    p95: Some(7_940.6),
                },
                Series {
                    name: "maxUnavailable".into(),
                    unit: Unit::Count,
                    points: pts(&[3.0, 3.0, 3.0, 3.0, 3.0], 0),
                    p50: Some(3.0),
                    p95: Some(3.0),
                },
                Series {
                    name: "errorWindow <never>".into(),
                    unit: Unit::Ms,
                    points: vec![],
                    p50: None,
                    p95: None,
                },
            ],
        }
    }

    #[test]
    fn strips_stack_equal_values_and_name_the_slowest() {
        let svg = render(&sample());
        roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(svg.matches("<circle").count(), 2 + 10, "legend + points");
        assert!(svg.contains(">run 5</text>"));
        assert!(svg.contains("not observed"));
        assert!(svg.contains("&lt;never&gt;"));
        assert!(svg.contains("p50 7.6s · p95 7.941s · n=5"), "{svg}");
        let empty = render(&Distribution {
            title: "x".into(),
            series: vec![],
        });
        assert!(empty.contains("No figure was observed"));
    }
}
