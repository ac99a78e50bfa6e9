//! The order of a step's points: two seen more than the goal's slack apart
//! on one side must come in the same order on the other, unless one is a
//! controller's timer (anywhere in its window) or they are two groups'
//! first and last (each object on its own clock).

use std::collections::HashMap;

use super::gaps::timers;
use super::rows::{Inversion, Point, SLACK_MS};
use crate::profile::TimingProfile;
use crate::timeline::Ms;

/// Pairs of points of one step that one side saw more than 1 s apart and
/// the other in the opposite order (closer than that, two transitions of
/// one controller pass come in either order).
pub(super) fn inversions(kind: &[Point], sim: &[Point], profile: &TimingProfile) -> Vec<Inversion> {
    let key = |p: &Point| (p.step_index, p.what.clone());
    let sim_at: HashMap<_, Ms> = sim.iter().map(|p| (key(p), p.after)).collect();
    // A transition made on a controller's own timer comes anywhere in its
    // window, before or after the others: its order is not the sim's doing.
    let both: Vec<(&Point, Ms)> = kind
        .iter()
        .filter(|p| timers(&p.what, profile, None, None).is_empty())
        .filter_map(|p| sim_at.get(&key(p)).map(|s| (p, *s)))
        .collect();
    let mut out = Vec::new();
    for (i, (a, a_sim)) in both.iter().enumerate() {
        for (b, b_sim) in &both[i + 1..] {
            // A group's first and its last may be different objects, each
            // on its own clock (a kubelet stops one pod half a second after
            // a shutdown and the other two seconds after it): which of two
            // such rows comes first is how those clocks fell in this run.
            if a.step_index != b.step_index || mixes_first_and_last(&a.what, &b.what) {
                continue;
            }
            let (kind_gap, sim_gap) = (b.after - a.after, b_sim - a_sim);
            let inverted = (kind_gap > SLACK_MS && sim_gap < 0)
                || (sim_gap > SLACK_MS && kind_gap < 0)
                || (kind_gap < -SLACK_MS && sim_gap > 0)
                || (sim_gap < -SLACK_MS && kind_gap > 0);
            if inverted {
                let (first, then) = if kind_gap >= 0 { (a, b) } else { (b, a) };
                out.push(Inversion {
                    first: first.what.clone(),
                    then: then.what.clone(),
                    step: a.step.clone(),
                });
            }
        }
    }
    out
}

/// One row a group's first, the other a group's last.
pub(super) fn mixes_first_and_last(a: &str, b: &str) -> bool {
    let first = |w: &str| w.ends_with(" (first)");
    let last = |w: &str| w.ends_with(" (last)");
    (first(a) && last(b)) || (last(a) && first(b))
}
