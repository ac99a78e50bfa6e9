//! Rows that are one transition seen across a race, not a difference the
//! sim makes: a transition on either side of a step's start; a pod late
//! on one side after the node authorizer refused its kubelet's first read
//! (what KWOK, without a node identity, cannot show); a thawed kubelet's
//! first status, "container runtime is down" or Ready, which the sim plays
//! as the coin toss it is.

use std::collections::BTreeMap;

use super::points::{anchor, anchors, roles};
use super::rows::{Row, RowVerdict, SLACK_MS};
use crate::record::RunResult;
use crate::scenario::model::FaultKind;
use crate::timeline::{Change, Ms, ObjectRef};

/// The race a thawed kubelet's first status runs.
pub const THAW_RACE_RULE: &str = "a thawed kubelet's first status update against its first \
    runtime check, both overdue: status first after a pause of more than 30 s \
    (`maxWaitForContainerRuntime`), Ready=False \"container runtime is down\" and Ready=True a \
    status update later, the controller swapping the unreachable taints for not-ready ones; \
    check first, Ready=True at once; seen on kind too: no status until the next update; each \
    node by chance";

/// The message of the Ready=False a kubelet posts when its last runtime
/// check is too old.
const RUNTIME_DOWN: &str = "container runtime is down";

/// How one role's kubelets came back after one resume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Thaws {
    /// Posted Ready=False "container runtime is down" first.
    lost: usize,
    /// Posted nothing until a Ready=True later than the goal's slack after
    /// the resume (a later status update).
    silent: usize,
}

/// How each role's thawed kubelets came back after each `resume-vm` step
/// (step index, role).
pub(super) fn thaw_races(run: &RunResult) -> BTreeMap<(usize, String), Thaws> {
    let steps = anchors(run);
    let role = roles(run);
    let mut out: BTreeMap<(usize, String), Thaws> = BTreeMap::new();
    for s in &run.steps {
        let Some(f) = s.fault.as_ref().filter(|f| f.fault == FaultKind::ResumeVm) else {
            continue;
        };
        let Some(step) = anchor(&steps, s.started) else {
            continue;
        };
        let (from, to) = (steps[step].0, steps.get(step + 1).map_or(Ms::MAX, |n| n.0));
        let nodes: Vec<&str> = if f.nodes.is_empty() {
            vec![f.node.as_str()]
        } else {
            f.nodes.iter().map(|n| n.node.as_str()).collect()
        };
        for node in nodes {
            let Some(role) = role.get(node) else {
                continue;
            };
            let mut ready = run
                .transitions
                .iter()
                .filter_map(|t| match (&t.object, &t.change) {
                    (
                        ObjectRef::Node { name },
                        Change::NodeReady {
                            status, message, ..
                        },
                    ) if name == node && (from..to).contains(&t.at) => {
                        Some((t.at, status.as_str(), message.as_deref()))
                    }
                    _ => None,
                });
            let first = ready.next();
            let lost = first.is_some_and(|(_, status, message)| {
                status == "False" && message.is_some_and(|m| m.contains(RUNTIME_DOWN))
            });
            let silent =
                first.is_none_or(|(at, status, _)| status == "True" && at - from > SLACK_MS);
            let t = out.entry((step, (*role).to_owned())).or_default();
            t.lost += usize::from(lost);
            t.silent += usize::from(silent);
        }
    }
    out
}

/// What a thaw race makes of a node: its Ready=False, its Ready=True a
/// status update late, and the controller's taint swaps for it.
fn made_by_thaw_race(change: &str) -> bool {
    change.starts_with("Ready=False (KubeletNotReady)")
        || change.starts_with("Ready=True")
        || change.starts_with("taint + node.kubernetes.io/not-ready:")
        || change.starts_with("taint - node.kubernetes.io/not-ready:")
        || change.starts_with("taint - node.kubernetes.io/unreachable:")
}

/// A row of a role's nodes not within the goal, after a resume whose
/// kubelets came back differently on the two sides (lost the race, or were
/// silent, a different number of times), and one such a race makes: the
/// race went its way on each side. Two sides whose kubelets came back alike
/// must meet the goal as any rows do; a kubelet NotReady for another reason
/// is no part of it.
pub(super) fn judge_thaw_races(
    rows: &mut [(usize, Ms, Row)],
    kind: &BTreeMap<(usize, String), Thaws>,
    sim: &BTreeMap<(usize, String), Thaws>,
) {
    for (step, _, r) in rows.iter_mut() {
        if r.verdict.meets_goal() || matches!(r.verdict, RowVerdict::Cannot { .. }) {
            continue;
        }
        let Some((role, change)) = r.what.split_once(": ") else {
            continue;
        };
        let key = (*step, role.to_owned());
        // Both sides resumed the role's nodes there (a run from before
        // faults were recorded says nothing of how they came back).
        let (Some(k), Some(s)) = (kind.get(&key), sim.get(&key)) else {
            continue;
        };
        if k != s && made_by_thaw_race(change) {
            r.verdict = RowVerdict::Race {
                rule: format!(
                    "{THAW_RACE_RULE}; \"runtime is down\" from {} node(s) on kind, {} on the \
                     sim; silent: {} and {}",
                    k.lost, s.lost, k.silent, s.silent
                ),
            };
        }
    }
}

/// What the sim lacks when a kubelet's first sync of a pod was refused by
/// the node authorizer.
pub const AUTHORIZER_LACK: &str = "the node authorizer's race: a kubelet may read a new pod's \
    claim before the API server has linked the pod to its node (event FailedMount, \"no \
    relationship found between node ... and this object\") and syncs the pod again after its \
    pod worker's backoff, 10-15 s (`backOffPeriod` 10 s, jitter 0.5); KWOK plays nodes without \
    a node identity, so on the sim the pod starts on time";

/// When (step, time after it) a kubelet's read of a pod's volumes was
/// refused by the node authorizer, from the run's FailedMount events.
pub(super) fn authorizer_races(run: &RunResult) -> Vec<(usize, Ms)> {
    let steps = anchors(run);
    run.transitions
        .iter()
        .filter(|t| {
            matches!(&t.change, Change::Event { reason, message, .. }
                if reason == "FailedMount" && message.contains("no relationship found between node"))
        })
        .filter_map(|t| {
            let step = anchor(&steps, t.at)?;
            Some((step, t.at - steps[step].0))
        })
        .collect()
}

/// A row off on one side only after that side's kubelet retried a pod the
/// node authorizer had refused (in the same step, before the row), the
/// other side seeing no such refusal: what the sim lacks, not a difference
/// in what it plays.
pub(super) fn excuse_authorizer_races(
    rows: &mut [(usize, Ms, Row)],
    kind: &[(usize, Ms)],
    sim: &[(usize, Ms)],
) {
    for (step, _, r) in rows.iter_mut() {
        if r.verdict != RowVerdict::Off {
            continue;
        }
        let refused = |races: &[(usize, Ms)], at: Option<Ms>| {
            at.is_some_and(|at| races.iter().any(|(s, t)| s == step && *t <= at))
        };
        let on_kind = refused(kind, r.kind);
        let on_sim = refused(sim, r.sim);
        if on_kind != on_sim {
            r.verdict = RowVerdict::Cannot {
                lacks: AUTHORIZER_LACK.into(),
            };
        }
    }
}

/// A transition seen right at a step's start falls before the step on one
/// side and after it on the other (a race between the watch and a step that
/// began the moment an expectation held). A row seen on kind only and one of
/// the same name seen on the sim only, in the step before or after, are that
/// one transition: the sim's time is taken from kind's step.
pub(super) fn join_boundary_races(rows: &mut Vec<(usize, Ms, Row)>, sim_steps: &[(Ms, String)]) {
    let mut i = 0;
    while i < rows.len() {
        let (step, _, r) = &rows[i];
        let found = (r.verdict == RowVerdict::OnlyKind)
            .then(|| {
                rows.iter().position(|(s, _, o)| {
                    o.verdict == RowVerdict::OnlySim && o.what == r.what && s.abs_diff(*step) == 1
                })
            })
            .flatten();
        let Some(j) = found else {
            i += 1;
            continue;
        };
        let (sim_step, sim_after, sim_row) = rows.remove(j);
        if j < i {
            i -= 1;
        }
        let (step, _, r) = &mut rows[i];
        let (Some(from), Some(to)) = (sim_steps.get(sim_step), sim_steps.get(*step)) else {
            i += 1;
            continue;
        };
        r.sim = Some(from.0 + sim_after - to.0);
        r.sim_count = sim_row.sim_count;
        r.verdict = if r.kind_count == r.sim_count {
            RowVerdict::Within
        } else {
            RowVerdict::Count
        };
        i += 1;
    }
}
