//! The predicted timeline of one node's loss: a row per transition, a bar
//! over the window it is predicted in (a diamond where it is one moment),
//! on an axis from T0 that skips the long quiet stretches (a 300 s
//! toleration).

use super::axis::Axis;
use super::draw::{
    Anchor, BLUE, FAINT, GREY, INK, NORMAL, ORANGE, SMALL, Svg, TITLE, VERMILLION, truncate,
};
use crate::predict::{Mark, NodeForecast, When};

const WIDTH: f64 = 960.0;
const LABEL: f64 = 360.0;
const X0: f64 = LABEL + 20.0;
const X1: f64 = WIDTH - 30.0;
const TOP: f64 = 56.0;
const ROW: f64 = 20.0;
/// Rows drawn; the rest are counted under the last.
const MAX_ROWS: usize = 24;

fn colour(mark: Mark) -> &'static str {
    match mark {
        Mark::Stuck => VERMILLION,
        Mark::Replaced => ORANGE,
        Mark::Node => BLUE,
    }
}

/// The chart, as an SVG document.
pub fn render(n: &NodeForecast, fault: &str) -> String {
    let rows: Vec<(f64, f64, &str, Mark)> = n
        .timeline
        .iter()
        .filter_map(|e| match e.at {
            When::Between { from, to } => Some((from as f64, to as f64, e.what.as_str(), e.mark)),
            When::Never => None,
        })
        .collect();
    let shown = &rows[..rows.len().min(MAX_ROWS)];
    let times: Vec<f64> = shown
        .iter()
        .flat_map(|(from, to, _, _)| [*from, *to])
        .chain([0.0])
        .collect();
    let last = times.iter().copied().fold(0.0, f64::max);
    let axis = Axis::plan(&times, 0.0, last + (last * 0.05).max(1000.0), X0, X1);
    let mut svg = Svg::new(WIDTH);
    svg.heading(
        (10.0, 22.0),
        &format!("Predicted: {fault} of {} (T0 = the fault)", n.node),
        TITLE,
    );
    let bottom = TOP + ROW * shown.len() as f64 + 4.0;
    for b in axis.breaks() {
        svg.rect(
            b.x0,
            TOP - 6.0,
            b.x1 - b.x0,
            bottom - TOP + 6.0,
            FAINT,
            Some("skipped: nothing predicted"),
        );
    }
    for (x, label) in axis.ticks(0.0, "T0", SMALL) {
        svg.line((x, TOP - 8.0), (x, bottom), FAINT, false);
        svg.text((x, TOP - 12.0), &label, SMALL, Anchor::Middle, INK);
    }
    let t0 = axis.x(0.0);
    svg.line((t0, TOP - 8.0), (t0, bottom), INK, true);
    for (i, (from, to, what, mark)) in shown.iter().enumerate() {
        let mid = TOP + ROW * i as f64 + ROW / 2.0;
        svg.text(
            (10.0, mid + 4.0),
            &truncate(what, LABEL - 10.0, NORMAL),
            NORMAL,
            Anchor::Start,
            INK,
        );
        let (x0, x1) = (axis.x(*from), axis.x(*to));
        let title = format!(
            "{what}: T0+{} .. T0+{}",
            crate::duration::format_millis(*from as i64),
            crate::duration::format_millis(*to as i64)
        );
        if x1 - x0 < 3.0 {
            svg.diamond(x0, mid, 5.0, colour(*mark), Some(&title));
        } else {
            svg.rect(x0, mid - 6.0, x1 - x0, 12.0, colour(*mark), Some(&title));
        }
    }
    let mut height = bottom + 10.0;
    let hidden = rows.len() - shown.len() + n.timeline.len() - rows.len();
    if hidden > 0 {
        svg.text(
            (10.0, height + 6.0),
            &format!(
                "{hidden} more transitions in the table below (never, or past the first {MAX_ROWS})"
            ),
            SMALL,
            Anchor::Start,
            GREY,
        );
        height += 16.0;
    }
    svg.finish(height)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::Forecast;

    #[test]
    fn each_transition_is_a_bar_over_its_window_on_an_axis_that_skips_the_toleration() {
        let f = Forecast::example();
        let svg = render(&f.nodes[0], "poweroff");
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let bars: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("height") == Some("12.0"))
            .collect();
        assert_eq!(bars.len(), 3, "Unknown, the taint, the stuck pod: {svg}");
        assert_eq!(bars[2].attribute("fill"), Some(VERMILLION), "stuck: {svg}");
        assert!(svg.contains("Predicted: poweroff of w1"), "{svg}");
        assert!(
            svg.contains("skipped: nothing predicted"),
            "the 5 minutes: {svg}"
        );
    }
}
