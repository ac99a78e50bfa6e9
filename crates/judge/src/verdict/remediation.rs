//! The remediation of a failed node, judged from the record: every act that
//! released its pods (who, when), and the figures remediators are asked
//! for: detection, decision, fencing, release, recovery, clean-up. Pure:
//! the timeline, the fault steps' account of the machines, the metrics.
//! What it finds is `record::remediation`'s schema (docs/remediation.md).

#![deny(clippy::wildcard_enum_match_arm)]

use crate::record::machines::MachineTrack;
use crate::record::remediation::{
    Act, AuditDeletion, Fencing, Leftover, Release, Remediation, is_act,
};
use crate::record::{StepKind, StepRecord};
use crate::scenario::model::{Does, Effect, FaultKind};
use crate::timeline::metrics::Metrics;
use crate::timeline::{Change, Ms, ObjectRef, Transition, World};

/// How far apart the audit log's time and the observer's may be for one
/// deletion (ms): the observer's lag, and the two clocks.
const AUDIT_SLACK: Ms = 10_000;

/// An act with when it was seen (ms since start) and, for a taint, its key
/// and effect.
type Seen<'a> = (Ms, Act, Option<(&'a str, &'a str)>);

/// Judges the remediation of the nodes in `targets`, or None when nothing
/// remediated them. `transitions` are the run's, `t0` the first fault (ms
/// since start), `steps` the steps' records, `metrics` the run's figures,
/// `machines` the failed machines as the backend saw them (may be empty),
/// `deletions` what the audit log says of deletions (sim; may be empty): a
/// Node deletion's author, and pods on failed nodes force-deleted by
/// someone other than the control plane (acts of their own).
pub fn judge(
    transitions: &[Transition],
    t0: Ms,
    targets: &[String],
    steps: &[StepRecord],
    metrics: &Metrics,
    machines: &[MachineTrack],
    deletions: &[AuditDeletion],
) -> Option<Remediation> {
    // A Machine's deletion is one act, when it begins (or is first seen).
    let mut machines_gone: Vec<&str> = Vec::new();
    let acts: Vec<Seen<'_>> = transitions
        .iter()
        .filter(|t| t.at >= t0)
        .filter_map(|t| {
            let (node, what, taint) = match (&t.object, &t.change) {
                (ObjectRef::Node { name }, Change::TaintAdded { key, effect, .. })
                    if is_act(key, effect) =>
                {
                    (
                        name,
                        t.change.describe(),
                        Some((key.as_str(), effect.as_str())),
                    )
                }
                (ObjectRef::Node { name }, Change::NodeDeleted) => {
                    (name, t.change.describe(), None)
                }
                (
                    ObjectRef::Remediation {
                        resource,
                        name,
                        node,
                    },
                    change,
                ) => {
                    let act = if resource == "Machine" {
                        matches!(
                            change,
                            Change::RemediationDeleting | Change::RemediationDeleted
                        ) && !machines_gone.contains(&name.as_str())
                    } else {
                        *change == Change::RemediationCreated
                    };
                    if !act {
                        return None;
                    }
                    machines_gone.push(name);
                    (
                        node,
                        format!("{resource} {name} {}", change.describe()),
                        None,
                    )
                }
                _ => return None,
            };
            if !targets.contains(node) {
                return None;
            }
            let user = matches!(t.change, Change::NodeDeleted)
                .then(|| {
                    deletions.iter().find(|d| {
                        d.resource == "nodes"
                            && d.name == *node
                            && (d.at - t.at).abs() <= AUDIT_SLACK
                    })
                })
                .flatten()
                .map(AuditDeletion::author);
            let (not_ready_for, ready_again) = readiness(transitions, t0, node, t.at);
            let act = Act {
                at: t.at - t0,
                node: node.clone(),
                what,
                by: t.by.clone(),
                user,
                not_ready_for,
                ready_again: ready_again.map(|r| r - t0),
            };
            Some((t.at, act, taint))
        })
        .chain(force_deletions(transitions, t0, targets, deletions))
        .collect();
    let mut acts = acts;
    acts.sort_by_key(|(at, _, _)| *at);
    let (first_at, first, _) = acts.first()?.clone();
    let detection = metrics.node_not_ready;
    let decision = detection.map(|d| first.at - d);
    let track = machines.iter().find(|m| m.node == first.node);
    let fencing = match track {
        Some(m) => seen_fencing(m, steps, t0, &first),
        None => fencing(steps, t0, &first),
    };
    let release = release(transitions, first_at, &first.node);
    let owned: Vec<_> = metrics.pods.iter().filter(|p| p.owner.is_some()).collect();
    let ready: Vec<Ms> = owned.iter().filter_map(|p| p.replacement_ready).collect();
    let recovery = (!owned.is_empty() && ready.len() == owned.len())
        .then(|| ready.iter().copied().max().map(|last| last - first.at))
        .flatten();
    let cleanup = acts
        .iter()
        .filter_map(|(at, a, taint)| {
            let (key, effect) = (*taint)?;
            let removed = transitions.iter().find(|r| {
                r.at > *at
                    && matches!(&r.object, ObjectRef::Node { name } if *name == a.node)
                    && matches!(&r.change, Change::TaintRemoved { key: k, effect: e } if k == key && e == effect)
            });
            Some(Leftover {
                node: a.node.clone(),
                taint: format!("{key}:{effect}"),
                removed: removed.map(|r| r.at - t0),
                removed_by: removed.and_then(|r| r.by.clone()),
            })
        })
        .collect();
    Some(Remediation {
        acts: acts.into_iter().map(|(_, a, _)| a).collect(),
        detection,
        decision,
        fencing,
        fencing_seen: track.map(|m| m.how.clone()),
        release,
        recovery,
        replaced: ready.len(),
        pods: owned.len(),
        cleanup,
    })
}

/// Pods on a failed node force-deleted after T0 by someone other than the
/// control plane, by the audit log: acts, each with its author.
fn force_deletions<'a>(
    transitions: &[Transition],
    t0: Ms,
    targets: &[String],
    deletions: &[AuditDeletion],
) -> Vec<Seen<'a>> {
    deletions
        .iter()
        .filter(|d| d.resource == "pods" && d.force && d.at >= t0 && !d.by_control_plane())
        .filter_map(|d| {
            // the pod: the one of that name seen deleted nearest the log's
            // time (a StatefulSet's replacement has its name); its node:
            // where it was scheduled
            let uid = transitions
                .iter()
                .filter_map(|t| match (&t.object, &t.change) {
                    (ObjectRef::Pod { name, uid }, Change::PodDeleted) if *name == d.name => {
                        Some(((t.at - d.at).abs(), uid))
                    }
                    _ => None,
                })
                .filter(|(apart, _)| *apart <= AUDIT_SLACK)
                .min_by_key(|(apart, _)| *apart)?
                .1;
            let node = transitions
                .iter()
                .filter_map(|t| match (&t.object, &t.change) {
                    (ObjectRef::Pod { uid: u, .. }, Change::PodScheduled { node }) if u == uid => {
                        Some(node)
                    }
                    _ => None,
                })
                .next_back()?;
            targets.contains(node).then(|| {
                let (not_ready_for, ready_again) = readiness(transitions, t0, node, d.at);
                let act = Act {
                    at: d.at - t0,
                    node: node.clone(),
                    what: format!("pod {} force-deleted", d.name),
                    by: None,
                    user: Some(d.author()),
                    not_ready_for,
                    ready_again: ready_again.map(|r| r - t0),
                };
                (d.at, act, None)
            })
        })
        .collect()
}

/// The node's readiness before an act at `at` (ms since start): how long it
/// had been NotReady without a break, and when (if ever) it was Ready again
/// between first going NotReady after `t0` and the act.
fn readiness(transitions: &[Transition], t0: Ms, node: &str, at: Ms) -> (Option<Ms>, Option<Ms>) {
    let ready: Vec<(Ms, bool)> = transitions
        .iter()
        .filter(|t| t.at <= at)
        .filter_map(|t| match (&t.object, &t.change) {
            (ObjectRef::Node { name }, Change::NodeReady { status, .. }) if name == node => {
                Some((t.at, status == "True"))
            }
            _ => None,
        })
        .collect();
    // the start of the last unbroken NotReady stretch
    let mut since = None;
    for (t, ok) in &ready {
        match (ok, since) {
            (true, _) => since = None,
            (false, None) => since = Some(*t),
            (false, Some(_)) => {}
        }
    }
    let first_down = ready
        .iter()
        .find(|(t, ok)| *t >= t0 && !ok)
        .map(|(t, _)| *t);
    let ready_again = first_down.and_then(|d| {
        ready
            .iter()
            .filter(|(t, ok)| *ok && *t > d)
            .map(|(t, _)| *t)
            .next_back()
    });
    (since.map(|s| at - s), ready_again)
}

/// The machine of the act's node as the backend saw it: the first look
/// after T0 that found it off.
fn seen_fencing(track: &MachineTrack, steps: &[StepRecord], t0: Ms, act: &Act) -> Fencing {
    fenced(
        track.off_from(t0).map(|off| off - t0),
        act.at,
        first_fault(steps, &act.node),
    )
}

/// The machine of the act's node, by nodefall's own faults on it.
fn fencing(steps: &[StepRecord], t0: Ms, act: &Act) -> Fencing {
    let mut off: Option<Ms> = None;
    for (s, fault) in faults_on(steps, &act.node) {
        let at = s.ended.unwrap_or(s.started) - t0;
        match fault.does() {
            Does::Breaks(Effect::Off) => {
                off.get_or_insert(at);
            }
            // back on before the act: it was not off when its pods went
            Does::Restores(Effect::Off) if at <= act.at => off = None,
            Does::Breaks(Effect::Paused | Effect::CutOff | Effect::KubeletStopped)
            | Does::Restores(_) => {}
        }
        if at > act.at && off.is_some() {
            break;
        }
    }
    fenced(off, act.at, first_fault(steps, &act.node))
}

/// The fault steps on `node`, in order, with their faults.
fn faults_on<'a>(
    steps: &'a [StepRecord],
    node: &'a str,
) -> impl Iterator<Item = (&'a StepRecord, FaultKind)> + 'a {
    steps
        .iter()
        .filter(|s| s.kind == StepKind::Fault)
        .filter_map(move |s| {
            let f = s.fault.as_ref()?;
            f.hits(node).then_some((s, f.fault))
        })
}

fn first_fault(steps: &[StepRecord], node: &str) -> Option<FaultKind> {
    faults_on(steps, node).next().map(|(_, f)| f)
}

/// Off at `off` (relative to T0, None: never), against an act at `act`.
fn fenced(off: Option<Ms>, act: Ms, fault: Option<FaultKind>) -> Fencing {
    match off {
        Some(off) if off <= act => Fencing::OffBefore {
            off,
            lead: act - off,
        },
        Some(off) => Fencing::OffAfter {
            off,
            after: off - act,
        },
        None => Fencing::NotOff { fault },
    }
}

/// When the VolumeAttachments to `node` at `at` were all gone.
fn release(transitions: &[Transition], at: Ms, node: &str) -> Release {
    let split = transitions.partition_point(|t| t.at <= at);
    let mut world = World::at(transitions, at);
    let held: Vec<String> = world
        .attachments
        .iter()
        .filter(|(_, a)| a.node == node && a.attached)
        .map(|(name, _)| name.clone())
        .collect();
    if held.is_empty() {
        return Release::NoAttachments;
    }
    let still = |w: &World| -> Vec<String> {
        held.iter()
            .filter(|n| {
                w.attachments
                    .get(*n)
                    .is_some_and(|a| a.node == node && a.attached)
            })
            .cloned()
            .collect()
    };
    for t in &transitions[split..] {
        world.apply(t);
        if matches!(t.object, ObjectRef::VolumeAttachment { .. }) && still(&world).is_empty() {
            return Release::Released { after: t.at - at };
        }
    }
    Release::NotReleased {
        left: still(&world),
    }
}

#[cfg(test)]
#[path = "remediation_tests.rs"]
mod tests;
