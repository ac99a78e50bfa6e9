//! A time axis that stays readable on long runs: where nothing happens for
//! a long stretch (waiting out a 300 s toleration), the axis breaks, so the
//! seconds in which things do happen (a remediation, pods coming back)
//! keep their width. Each kept piece is drawn to its own linear scale; each
//! break is a narrow band of fixed width. Runs of a few minutes are drawn
//! to one linear scale, as before.

use super::draw::{offset_label, text_width, tick_step};

/// Runs up to this long (ms) keep one linear scale.
const LINEAR_UP_TO: f64 = 180_000.0;
/// Only quiet stretches at least this long (ms) are broken.
const MIN_GAP: f64 = 10_000.0;
/// What is kept on each side of a break (ms), so a moment at its edge is
/// not drawn on the break.
const PAD: f64 = 1_000.0;
/// The width of a break (px).
pub const BREAK_PX: f64 = 30.0;
/// The narrowest a kept piece is drawn (px).
const MIN_PIECE_PX: f64 = 24.0;
/// At most this many breaks (the longest gaps).
const MAX_BREAKS: usize = 8;
/// Stop breaking once the kept time is drawn at least this wide (px per s).
const ENOUGH_PX_PER_S: f64 = 12.0;

/// A stretch of the axis: real time `from..to` (ms) drawn at `x0..x1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    pub from: f64,
    pub to: f64,
    pub x0: f64,
    pub x1: f64,
    /// A break: quiet time drawn narrow, not to scale.
    pub broken: bool,
}

impl Piece {
    fn x(&self, ms: f64) -> f64 {
        let span = self.to - self.from;
        if span <= 0.0 {
            return (self.x0 + self.x1) / 2.0;
        }
        self.x0 + (ms - self.from) / span * (self.x1 - self.x0)
    }
}

/// Ms since start -> x, piece by piece.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pieces: Vec<Piece>,
}

impl Axis {
    /// The axis for `from..to` (ms) drawn at `x0..x1`, breaking the longest
    /// quiet stretches between `times` (every moment drawn) when the run is
    /// long enough to need it.
    pub fn plan(times: &[f64], from: f64, to: f64, x0: f64, x1: f64) -> Axis {
        let to = to.max(from + 1000.0);
        let linear = Axis {
            pieces: vec![Piece {
                from,
                to,
                x0,
                x1,
                broken: false,
            }],
        };
        if !(to - from).is_finite() || to - from <= LINEAR_UP_TO {
            return linear;
        }
        let mut moments: Vec<f64> = times
            .iter()
            .copied()
            .filter(|t| t.is_finite() && (from..=to).contains(t))
            .chain([from, to])
            .collect();
        moments.sort_by(f64::total_cmp);
        moments.dedup();
        let mut gaps: Vec<(f64, f64)> = moments
            .windows(2)
            .map(|w| (w[0] + PAD, w[1] - PAD))
            .filter(|(a, b)| b - a >= MIN_GAP - 2.0 * PAD)
            .collect();
        // the longest first, until what is kept is drawn wide enough
        gaps.sort_by(|a, b| (b.1 - b.0).total_cmp(&(a.1 - a.0)));
        let mut chosen: Vec<(f64, f64)> = Vec::new();
        let mut kept = to - from;
        for g in gaps.into_iter().take(MAX_BREAKS) {
            let room = (x1 - x0) - BREAK_PX * chosen.len() as f64;
            if kept <= 0.0 || room / (kept / 1000.0) >= ENOUGH_PX_PER_S {
                break;
            }
            kept -= g.1 - g.0;
            chosen.push(g);
        }
        if chosen.is_empty() {
            return linear;
        }
        chosen.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut spans = Vec::new();
        let mut at = from;
        for (a, b) in &chosen {
            spans.push((at, *a, false));
            spans.push((*a, *b, true));
            at = *b;
        }
        spans.push((at, to, false));
        let widths = widths(&spans, x1 - x0 - BREAK_PX * chosen.len() as f64);
        let mut x = x0;
        let pieces = spans
            .iter()
            .zip(widths)
            .map(|(&(from, to, broken), w)| {
                let p = Piece {
                    from,
                    to,
                    x0: x,
                    x1: x + w,
                    broken,
                };
                x += w;
                p
            })
            .collect();
        Axis { pieces }
    }

    /// Where `ms` is drawn (clamped to the axis).
    pub fn x(&self, ms: f64) -> f64 {
        let (first, last) = (self.pieces[0], self.pieces[self.pieces.len() - 1]);
        if ms <= first.from {
            return first.x0;
        }
        if ms >= last.to {
            return last.x1;
        }
        self.pieces
            .iter()
            .find(|p| ms <= p.to)
            .map_or(last.x1, |p| p.x(ms))
    }

    pub fn breaks(&self) -> impl Iterator<Item = &Piece> {
        self.pieces.iter().filter(|p| p.broken)
    }

    /// Tick marks: (x, label), in seconds from `origin`, a step per kept
    /// piece that suits its width, labels that do not overlap (`origin`
    /// itself, labelled `zero`, first).
    pub fn ticks(&self, origin: f64, zero: &str, size: f64) -> Vec<(f64, String)> {
        let mut candidates: Vec<(f64, String)> = Vec::new();
        if (self.pieces[0].from..=self.pieces[self.pieces.len() - 1].to).contains(&origin) {
            candidates.push((self.x(origin), zero.to_owned()));
        }
        for p in self.pieces.iter().filter(|p| !p.broken) {
            let span = p.to - p.from;
            if p.x1 - p.x0 < 90.0 {
                // too narrow for round ticks: its middle, to the second
                let t = ((p.from + p.to) / 2.0 - origin) / 1000.0;
                let t = t.round() * 1000.0;
                if t != 0.0 {
                    candidates.push((p.x(origin + t), offset_label(t)));
                }
                continue;
            }
            let step = tick_step(span.max(1000.0), ((p.x1 - p.x0) / 70.0).max(1.0));
            let first = ((p.from - origin) / step).ceil();
            let last = ((p.to - origin) / step).floor();
            let count = (last - first + 1.0).clamp(0.0, 20.0) as usize;
            for i in 0..count {
                let t = (first + i as f64) * step;
                if t != 0.0 {
                    candidates.push((p.x(origin + t), offset_label(t)));
                }
            }
        }
        let mut placed: Vec<(f64, f64)> = Vec::new();
        let mut out = Vec::new();
        for (x, label) in candidates {
            let half = text_width(&label, size) / 2.0 + 4.0;
            if placed.iter().any(|(l, r)| x + half > *l && x - half < *r) {
                continue;
            }
            placed.push((x - half, x + half));
            out.push((x, label));
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }
}

/// Kept pieces share `room` in proportion to their time, none narrower
/// than [`MIN_PIECE_PX`]; breaks get [`BREAK_PX`].
fn widths(spans: &[(f64, f64, bool)], room: f64) -> Vec<f64> {
    let kept: Vec<usize> = (0..spans.len()).filter(|&i| !spans[i].2).collect();
    let mut fixed = vec![false; spans.len()];
    let mut out = vec![BREAK_PX; spans.len()];
    loop {
        let free: Vec<usize> = kept.iter().copied().filter(|&i| !fixed[i]).collect();
        let taken: f64 = kept
            .iter()
            .filter(|&&i| fixed[i])
            .map(|_| MIN_PIECE_PX)
            .sum();
        let time: f64 = free.iter().map(|&i| spans[i].1 - spans[i].0).sum();
        let mut again = false;
        for &i in &free {
            let share = if time > 0.0 {
                (room - taken) * (spans[i].1 - spans[i].0) / time
            } else {
                (room - taken) / free.len() as f64
            };
            if share < MIN_PIECE_PX {
                fixed[i] = true;
                again = true;
            }
            out[i] = share.max(MIN_PIECE_PX);
        }
        if !again {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X0: f64 = 100.0;
    const X1: f64 = 900.0;

    #[test]
    fn a_short_run_is_one_linear_scale() {
        let a = Axis::plan(&[0.0, 20_000.0, 40_000.0], -5_000.0, 60_000.0, X0, X1);
        assert_eq!(a.breaks().count(), 0);
        assert_eq!(a.x(-5_000.0), X0);
        assert_eq!(a.x(60_000.0), X1);
        assert!((a.x(27_500.0) - 500.0).abs() < 1e-9);
    }

    /// Seed 000 on upstream timings: the fault, NotReady after 40 s, the
    /// eviction 300 s later, a remediation of 8 s, cleanup; an 11-minute run.
    #[test]
    fn a_long_run_breaks_its_quiet_stretches_and_keeps_the_remediation_wide() {
        let times = [
            -20_000.0, 0.0, 40_000.0, 41_000.0, 340_000.0, 341_000.0, 400_000.0, 401_000.0,
            405_000.0, 409_000.0, 640_000.0, 660_000.0,
        ];
        let a = Axis::plan(&times, -20_000.0, 660_000.0, X0, X1);
        let breaks: Vec<_> = a.breaks().collect();
        assert!(!breaks.is_empty());
        // the 8 s from the taint to the pods Ready: over 60 px (a linear
        // 11-minute axis gives it about 9)
        let remediation = a.x(409_000.0) - a.x(401_000.0);
        assert!(remediation > 60.0, "{remediation} px: {a:?}");
        // monotonic, inside, every moment apart from the next
        let mut last = f64::MIN;
        for t in (-20..=660).map(|s| f64::from(s) * 1000.0) {
            let x = a.x(t);
            assert!(x >= last && (X0..=X1).contains(&x), "{t}: {x}");
            last = x;
        }
        assert!((a.x(660_000.0) - X1).abs() < 1e-6, "{}", a.x(660_000.0));
        // no moment falls on a break
        for t in times {
            assert!(
                !breaks.iter().any(|b| t > b.from && t < b.to),
                "{t} in a break"
            );
        }
    }

    #[test]
    fn ticks_do_not_overlap_and_t0_is_labelled() {
        let times = [0.0, 1_000.0, 300_000.0, 302_000.0, 600_000.0];
        let a = Axis::plan(&times, -10_000.0, 600_000.0, X0, X1);
        let ticks = a.ticks(0.0, "T0", 10.0);
        assert!(ticks.iter().any(|(_, l)| l == "T0"), "{ticks:?}");
        for w in ticks.windows(2) {
            let gap = w[1].0 - w[0].0;
            let need = (text_width(&w[0].1, 10.0) + text_width(&w[1].1, 10.0)) / 2.0;
            assert!(gap >= need, "{ticks:?}");
        }
        // every piece kept shows where it is
        assert!(ticks.iter().any(|(_, l)| l.starts_with("+5m")), "{ticks:?}");
    }

    #[test]
    fn widths_fill_the_room_with_a_floor() {
        let spans = [
            (0.0, 1.0, false),
            (1.0, 100.0, true),
            (100.0, 10_000.0, false),
        ];
        let w = widths(&spans, 500.0);
        assert_eq!(w[0], MIN_PIECE_PX);
        assert_eq!(w[1], BREAK_PX);
        assert!((w[0] + w[2] - 500.0).abs() < 1e-9, "{w:?}");
    }
}
