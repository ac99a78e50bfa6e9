//! Two runs or aggregates side by side: per figure a bar for each side,
//! scaled to the larger of the two, the values and the difference, and
//! regressions in red.

use super::data::{Paired, PairedRow, Unit};
use super::draw::{
    Anchor, BLUE, FAINT, GREY, INK, NORMAL, SMALL, Svg, TITLE, VERMILLION, show, truncate,
};

const WIDTH: f64 = 1000.0;
const LABELS: f64 = 250.0;
const X0: f64 = LABELS + 10.0;
/// Room right of the longest bar for its value.
const X1: f64 = WIDTH - 110.0;
const TOP: f64 = 64.0;
const ROW: f64 = 44.0;

pub fn render(p: &Paired) -> String {
    let mut svg = Svg::new(WIDTH);
    svg.heading(
        (10.0, 22.0),
        &truncate(&p.title, WIDTH - 20.0, TITLE),
        TITLE,
    );
    let half = WIDTH / 2.0 - 40.0;
    svg.rect(10.0, 34.0, 10.0, 10.0, GREY, None);
    svg.text(
        (24.0, 43.0),
        &truncate(&p.base_label, half, SMALL),
        SMALL,
        Anchor::Start,
        INK,
    );
    svg.rect(WIDTH / 2.0, 34.0, 10.0, 10.0, BLUE, None);
    svg.text(
        (WIDTH / 2.0 + 14.0, 43.0),
        &truncate(&p.new_label, half, SMALL),
        SMALL,
        Anchor::Start,
        INK,
    );
    if p.rows.is_empty() {
        svg.text(
            (10.0, TOP + 14.0),
            "Neither side observed any figure.",
            NORMAL,
            Anchor::Start,
            INK,
        );
        return svg.finish(TOP + 28.0);
    }
    let mut y = TOP;
    for r in &p.rows {
        row(&mut svg, r, y);
        y += ROW;
    }
    svg.finish(y + 6.0)
}

fn delta(r: &PairedRow) -> Option<String> {
    let (b, n) = (r.base?, r.new?);
    let d = n - b;
    let sign = if d > 0.0 {
        "+"
    } else if d < 0.0 {
        "-"
    } else {
        ""
    };
    let pct = if b == 0.0 {
        String::new()
    } else {
        format!(" ({:+.0}%)", d / b * 100.0)
    };
    Some(format!("{sign}{}{pct}", show(r.unit, d.abs())))
}

fn row(svg: &mut Svg, r: &PairedRow, y: f64) {
    svg.line((8.0, y), (WIDTH - 8.0, y), FAINT, false);
    let colour = if r.regressed { VERMILLION } else { INK };
    svg.heading(
        (10.0, y + 18.0),
        &truncate(&r.name, LABELS - 10.0, NORMAL + 1.0),
        NORMAL + 1.0,
    );
    let words = match (delta(r), r.regressed) {
        (Some(d), true) => format!("{d}: slower than allowed"),
        (Some(d), false) => d,
        (None, _) => "one side only".to_owned(),
    };
    svg.text(
        (10.0, y + 34.0),
        &truncate(&words, LABELS - 10.0, NORMAL),
        NORMAL,
        Anchor::Start,
        colour,
    );
    let top = r
        .base
        .unwrap_or(0.0)
        .max(r.new.unwrap_or(0.0))
        .max(f64::MIN_POSITIVE);
    let new_fill = if r.regressed { VERMILLION } else { BLUE };
    for (i, (v, fill)) in [(r.base, GREY), (r.new, new_fill)].into_iter().enumerate() {
        let by = y + 8.0 + i as f64 * 15.0;
        match v {
            Some(v) => {
                let w = (v.max(0.0) / top * (X1 - X0)).max(1.0);
                svg.rect(X0, by, w, 11.0, fill, Some(&show(r.unit, v)));
                svg.text(
                    (X0 + w + 6.0, by + 10.0),
                    &value(r.unit, v),
                    SMALL,
                    Anchor::Start,
                    INK,
                );
            }
            None => svg.text((X0, by + 10.0), "—", SMALL, Anchor::Start, INK),
        }
    }
}

fn value(unit: Unit, v: f64) -> String {
    truncate(&show(unit, v), WIDTH - X1 - 16.0, SMALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn sample() -> Paired {
        let row = |name: &str, unit, base, new, regressed| PairedRow {
            name: name.into(),
            unit,
            base,
            new,
            regressed,
        };
        Paired {
            title: "statefulset-nfs: base vs new".into(),
            base_label: "base: baseline/aggregate.json (5 runs, p50)".into(),
            new_label: "new: reports/x/aggregate.json (3 runs, p50)".into(),
            rows: vec![
                row(
                    "nodeNotReady",
                    Unit::Ms,
                    Some(8_012.0),
                    Some(12_819.0),
                    true,
                ),
                row(
                    "workloadReadyAgain",
                    Unit::Ms,
                    Some(101_417.0),
                    Some(99_000.0),
                    false,
                ),
                row("maxUnavailable", Unit::Count, Some(3.0), Some(3.0), false),
                row("errorWindow", Unit::Ms, None, Some(7_400.0), false),
                row("probeErrors", Unit::Count, Some(0.0), Some(0.0), false),
            ],
        }
    }

    #[test]
    fn both_sides_the_delta_and_the_regression() {
        let svg = render(&sample());
        roxmltree::Document::parse(&svg).unwrap();
        assert!(svg.contains("+4.807s (+60%): slower than allowed"), "{svg}");
        assert!(svg.contains("-2.417s (-2%)"));
        assert!(svg.contains("one side only"));
        assert!(svg.contains(">—</text>"));
        assert!(svg.contains(VERMILLION));
        let empty = render(&Paired {
            title: "x".into(),
            base_label: "a".into(),
            new_label: "b".into(),
            rows: vec![],
        });
        assert!(empty.contains("Neither side"));
    }
}
