//! `duplicateWindow`, `fencedBefore` and `remediation`: decided once at the
//! end of the run, from the duplicate windows, the failed machines' record
//! (what the backend saw) and the remediation's acts, not from the
//! timeline's states.

use crate::duration::format_millis;
use crate::record::Verdict;
use crate::record::machines::{DuplicateWindow, MachineTrack};
use crate::record::remediation::Remediation;
use crate::scenario::checked::{Condition, EndOfRunCond};
use crate::scenario::selector::Selector;
use crate::timeline::{Labels, Ms};

/// The verdict of an end-of-run condition on the pods `selector` picks
/// (`labels`: every pod's labels by name), with what was seen, in words.
/// `t0` is ms since start; the windows are relative to it.
pub fn decide(
    condition: &Condition,
    selector: &Selector,
    labels: &std::collections::BTreeMap<String, Labels>,
    windows: &[DuplicateWindow],
    machines: &[MachineTrack],
    t0: Ms,
) -> (Verdict, String) {
    let picked: Vec<&DuplicateWindow> = windows
        .iter()
        .filter(|w| labels.get(&w.pod).is_some_and(|l| selector.matches(l)))
        .collect();
    if picked.is_empty() {
        let why = if machines.is_empty() {
            "the backend did not look at the failed machines"
        } else {
            "no selected pod was replaced while the failed machines were looked at"
        };
        return (Verdict::Fail, format!("nothing to judge: {why}"));
    }
    let not_here = || {
        (
            Verdict::Fail,
            format!("`{condition}` is not decided at the end of the run"),
        )
    };
    let Condition::EndOfRun(end_of_run) = condition else {
        return not_here();
    };
    match end_of_run {
        EndOfRunCond::DuplicateWindowAtMost(max) => duplicate(&picked, *max),
        EndOfRunCond::FencedBeforeReplacement => fenced(&picked, machines, t0),
        // About a node: `decide_remediation` decides it.
        EndOfRunCond::Remediation { .. } => not_here(),
    }
}

/// `remediation: {by, notReadyFor}` on `node`: at least one act on it (by
/// `by`), each after `notReadyFor` of unbroken NotReady.
pub fn decide_remediation(
    condition: &Condition,
    node: &str,
    remediation: Option<&Remediation>,
) -> (Verdict, String) {
    let not_remediation = || {
        (
            Verdict::Fail,
            format!("`{condition}` is not a remediation condition"),
        )
    };
    let Condition::EndOfRun(end_of_run) = condition else {
        return not_remediation();
    };
    let (by, not_ready_for) = match end_of_run {
        EndOfRunCond::Remediation { by, not_ready_for } => (by, not_ready_for),
        // About pods: `decide` decides them.
        EndOfRunCond::DuplicateWindowAtMost(_) | EndOfRunCond::FencedBeforeReplacement => {
            return not_remediation();
        }
    };
    let acts: Vec<_> = remediation
        .map(|r| r.acts.iter())
        .into_iter()
        .flatten()
        .filter(|a| a.node == node && by.as_ref().is_none_or(|b| a.by.as_ref() == Some(b)))
        .collect();
    let who = by
        .as_deref()
        .map(|b| format!(" by {b}"))
        .unwrap_or_default();
    if acts.is_empty() {
        return (Verdict::Fail, format!("no remediation act{who} on {node}"));
    }
    let mut early = Vec::new();
    if let Some(least) = not_ready_for {
        for a in &acts {
            let again = a
                .ready_again
                .map(|r| format!(", Ready again at T0+{} before it", format_millis(r)))
                .unwrap_or_default();
            match a.not_ready_for {
                Some(d) if d >= *least => {}
                Some(d) => early.push(format!(
                    "{} at T0+{} after {} NotReady{again}",
                    a.what,
                    format_millis(a.at),
                    format_millis(d)
                )),
                None => early.push(format!(
                    "{} at T0+{} on a Ready node{again}",
                    a.what,
                    format_millis(a.at)
                )),
            }
        }
    }
    if early.is_empty() {
        let first = acts[0];
        (
            Verdict::Pass,
            format!(
                "{} act{}{who}, the first at T0+{}{}",
                acts.len(),
                if acts.len() == 1 { "" } else { "s" },
                format_millis(first.at),
                first
                    .not_ready_for
                    .map(|d| format!(" after {} NotReady", format_millis(d)))
                    .unwrap_or_default()
            ),
        )
    } else {
        (
            Verdict::Fail,
            format!(
                "acted before the node had been NotReady {}: {}",
                not_ready_for.map(format_millis).unwrap_or_default(),
                early.join("; ")
            ),
        )
    }
}

fn duplicate(picked: &[&DuplicateWindow], max: Ms) -> (Verdict, String) {
    let mut over = Vec::new();
    let mut unknown = Vec::new();
    for w in picked {
        match (w.window, w.original_last_seen) {
            (None, _) => unknown.push(format!(
                "{} ({})",
                w.pod,
                w.note.as_deref().unwrap_or("unknown")
            )),
            // seen at once with its replacement: two copies, even where the
            // samples put them 0 ms apart
            (Some(d), Some(_)) if d > max || max == 0 => over.push(format!(
                "{} ran on {} {} after its replacement started on {}{}",
                w.pod,
                w.node,
                format_millis(d),
                w.replacement_node.as_deref().unwrap_or("another node"),
                shared(w)
            )),
            _ => {}
        }
    }
    let longest = picked.iter().filter_map(|w| w.window).max().unwrap_or(0);
    if !over.is_empty() {
        return (
            Verdict::Fail,
            format!(
                "two copies at once: {} (allowed {})",
                over.join("; "),
                format_millis(max)
            ),
        );
    }
    if !unknown.is_empty() {
        return (
            Verdict::Fail,
            format!("cannot be known for {}", unknown.join("; ")),
        );
    }
    (
        Verdict::Pass,
        format!(
            "{} pod{} replaced, the longest duplicate window {} (allowed {})",
            picked.len(),
            if picked.len() == 1 { "" } else { "s" },
            format_millis(longest),
            format_millis(max)
        ),
    )
}

/// The volumes both copies had, in words (empty when none was seen taken
/// over).
fn shared(w: &DuplicateWindow) -> String {
    if w.volumes.is_empty() {
        return String::new();
    }
    let each: Vec<String> = w
        .volumes
        .iter()
        .map(|v| {
            format!(
                "{} (claim {}) attached to {} at T0+{}",
                v.volume,
                v.claim,
                v.node,
                format_millis(v.attached_at)
            )
        })
        .collect();
    let plural = if each.len() == 1 { "" } else { "s" };
    format!(", with its volume{plural} {}", each.join(" and "))
}

fn fenced(picked: &[&DuplicateWindow], machines: &[MachineTrack], t0: Ms) -> (Verdict, String) {
    let mut late = Vec::new();
    for w in picked {
        let ran = t0 + w.replacement_running;
        let off = machines
            .iter()
            .find(|m| m.node == w.node)
            .and_then(|m| m.off_from(t0));
        match off {
            Some(off) if off <= ran => {}
            Some(off) => late.push(format!(
                "{}'s replacement ran {} before {} was off",
                w.pod,
                format_millis(off - ran),
                w.node
            )),
            None => late.push(format!(
                "{}'s replacement ran while {} was never seen off",
                w.pod, w.node
            )),
        }
    }
    if late.is_empty() {
        (
            Verdict::Pass,
            format!(
                "the failed machine was off before each of {} replacement{} ran",
                picked.len(),
                if picked.len() == 1 { "" } else { "s" }
            ),
        )
    } else {
        (Verdict::Fail, late.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::volumes::SharedVolume;

    fn window(pod: &str, window: Option<Ms>, volumes: &[&str]) -> DuplicateWindow {
        DuplicateWindow {
            pod: pod.into(),
            node: "w1".into(),
            replacement: pod.into(),
            replacement_node: Some("w2".into()),
            replacement_running: 30_000,
            replacement_seen: Some(30_000),
            original_last_seen: window.map(|w| 30_000 + w),
            window,
            note: None,
            volumes: volumes
                .iter()
                .map(|v| SharedVolume {
                    claim: format!("data-{pod}"),
                    volume: (*v).into(),
                    node: "w2".into(),
                    attached_at: 28_654,
                })
                .collect(),
        }
    }

    /// Two copies at once fail, naming the pod and the volumes its
    /// replacement took over; none taken over, none named; 0 passes.
    #[test]
    fn two_copies_name_the_volumes_they_shared() {
        let (one, two, none) = (
            window("disk-0", Some(17_000), &["pv-0"]),
            window("disk-1", Some(16_000), &["pv-1", "pv-9"]),
            window("web-0", Some(3_000), &[]),
        );
        let (v, detail) = duplicate(&[&one, &two, &none], 0);
        assert_eq!(v, Verdict::Fail);
        assert!(
            detail.contains(
                "disk-0 ran on w1 17s after its replacement started on w2, with its volume \
                 pv-0 (claim data-disk-0) attached to w2 at T0+28.654s;"
            ),
            "{detail}"
        );
        assert!(
            detail.contains(
                "with its volumes pv-1 (claim data-disk-1) attached to w2 at T0+28.654s and pv-9"
            ),
            "{detail}"
        );
        // none taken over: nothing said of volumes
        assert!(
            detail
                .ends_with("; web-0 ran on w1 3s after its replacement started on w2 (allowed 0s)"),
            "{detail}"
        );
        let zero = window("disk-0", Some(0), &["pv-0"]);
        let zero = DuplicateWindow {
            original_last_seen: None,
            ..zero
        };
        assert_eq!(duplicate(&[&zero], 0).0, Verdict::Pass);
    }
}
