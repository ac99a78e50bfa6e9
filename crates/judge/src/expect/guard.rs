//! Abort guards decided on a truth series (pure): has a condition held
//! without a break for a given time, and if not yet, when could it first.

use crate::timeline::Ms;

/// Where a guard stands at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The conditions had held for the whole `for` at this time (ms since
    /// start): the moment the guard fired.
    Fired(Ms),
    /// Not yet. `Some(t)`: it holds now and fires at `t` unless it breaks
    /// first; `None`: it does not hold now, so only a change can fire it.
    Pending(Option<Ms>),
}

/// The first time `series` (from [`super::truth_series`]: `(time, holds)`,
/// the first at the arming time, each later one a flip) had held
/// continuously for `hold` ms, considering only what was seen by `now`.
///
/// A run that began before a later flip counts only if it lasted `hold`
/// before that flip: a guard fires on an unbroken stretch, never on the sum
/// of several.
pub fn held_for(series: &[(Ms, bool)], hold: Ms, now: Ms) -> Held {
    let hold = hold.max(0);
    let seen = series.partition_point(|&(t, _)| t <= now);
    let series = &series[..seen];
    for (i, &(began, holds)) in series.iter().enumerate() {
        if !holds {
            continue;
        }
        let fires = began + hold;
        match series.get(i + 1) {
            // It broke at `broke`: enough only if it had lasted `hold` by then.
            Some(&(broke, _)) if fires < broke => return Held::Fired(fires),
            Some(_) => {}
            None if fires <= now => return Held::Fired(fires),
            None => return Held::Pending(Some(fires)),
        }
    }
    Held::Pending(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_once_an_unbroken_stretch_lasts_the_hold() {
        let s = [(0, false), (10_000, true)];
        assert_eq!(held_for(&s, 15_000, 9_000), Held::Pending(None));
        assert_eq!(held_for(&s, 15_000, 12_000), Held::Pending(Some(25_000)));
        assert_eq!(held_for(&s, 15_000, 24_999), Held::Pending(Some(25_000)));
        assert_eq!(held_for(&s, 15_000, 25_000), Held::Fired(25_000));
        // Seen late, it still fires at the moment the hold was complete.
        assert_eq!(held_for(&s, 15_000, 60_000), Held::Fired(25_000));
    }

    #[test]
    fn a_break_resets_the_hold() {
        // Held 10 s, broke, held again from 30 s.
        let s = [(0, false), (10_000, true), (20_000, false), (30_000, true)];
        assert_eq!(held_for(&s, 15_000, 28_000), Held::Pending(None));
        assert_eq!(held_for(&s, 15_000, 40_000), Held::Pending(Some(45_000)));
        assert_eq!(held_for(&s, 15_000, 45_000), Held::Fired(45_000));
        // A stretch exactly as long as the hold, broken at its end, is not enough.
        let exact = [(0, true), (15_000, false)];
        assert_eq!(held_for(&exact, 15_000, 20_000), Held::Pending(None));
        // An earlier stretch that was long enough fires at its own time.
        let long = [(0, true), (16_000, false), (30_000, true)];
        assert_eq!(held_for(&long, 15_000, 40_000), Held::Fired(15_000));
    }

    #[test]
    fn a_zero_hold_fires_as_soon_as_it_holds() {
        assert_eq!(held_for(&[(5_000, true)], 0, 5_000), Held::Fired(5_000));
        assert_eq!(
            held_for(&[(0, false), (7_000, true)], 0, 7_000),
            Held::Fired(7_000)
        );
        assert_eq!(
            held_for(&[(0, false), (7_000, true)], 0, 6_999),
            Held::Pending(None)
        );
        // holding at arming time counts from the arming time
        assert_eq!(
            held_for(&[(3_000, true)], 2_000, 4_000),
            Held::Pending(Some(5_000))
        );
    }

    #[test]
    fn flips_not_yet_seen_do_not_count() {
        let s = [(0, true), (8_000, false)];
        // at 6 s the break at 8 s has not happened yet
        assert_eq!(held_for(&s, 5_000, 6_000), Held::Fired(5_000));
        assert_eq!(held_for(&s, 10_000, 7_000), Held::Pending(Some(10_000)));
        assert_eq!(held_for(&s, 10_000, 9_000), Held::Pending(None));
    }
}
