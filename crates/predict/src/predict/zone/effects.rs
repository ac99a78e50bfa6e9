//! What a set's loss takes with it, from each pod's outcome: the workloads
//! (at zero, a StatefulSet's majority), the Services left dark and until
//! when, the budgets broken, and the set's timeline.

use std::collections::{BTreeMap, BTreeSet};

use super::{BudgetLoss, Moved, Outcome, ServiceDark, Turn, WorkloadLoss};
use crate::disruption::{self, zone_name};
use crate::plan::time::Ms;
use crate::predict::fate::{Event, Mark, PodFate, When};
use crate::predict::snapshot::{Owner, Pod, Snapshot};

/// `(kind, namespace, name)` of the owner that keeps replicas, if any.
fn replicated(p: &Pod) -> Option<(&'static str, &str)> {
    match &p.owner {
        Owner::Deployment(n) => Some(("Deployment", n)),
        Owner::ReplicaSet(n) => Some(("ReplicaSet", n)),
        Owner::StatefulSet(n) => Some(("StatefulSet", n)),
        _ => None,
    }
}

/// The replicas the pod's Deployment or StatefulSet asks for (its
/// ReplicaSet's pods counted where no workload object says).
pub(super) fn replicas_of(snap: &Snapshot, p: &Pod) -> Option<usize> {
    let (kind, name) = replicated(p)?;
    Some(
        snap.workloads
            .iter()
            .find(|w| w.kind == kind && w.namespace == p.namespace && w.name == name)
            .map_or_else(
                || {
                    snap.pods
                        .iter()
                        .filter(|q| {
                            q.live()
                                && !q.terminating
                                && q.namespace == p.namespace
                                && replicated(q) == Some((kind, name))
                        })
                        .count()
                },
                |w| usize::try_from(w.replicas).unwrap_or(0),
            ),
    )
}

pub(super) fn workloads(
    snap: &Snapshot,
    here: &[(&Pod, PodFate)],
    pods: &[Moved],
) -> Vec<WorkloadLoss> {
    // each owner with pods in the set, and one of them
    let mut keys: BTreeMap<(&'static str, &str, &str), &Pod> = BTreeMap::new();
    for (p, _) in here {
        if let Some((kind, name)) = replicated(p) {
            keys.entry((kind, p.namespace.as_str(), name)).or_insert(p);
        }
    }
    let of = |p: &Pod, kind: &str, ns: &str, name: &str| {
        p.namespace == ns && replicated(p).is_some_and(|(k, n)| k == kind && n == name)
    };
    keys.into_iter()
        .map(|((kind, ns, name), one)| {
            let live: Vec<&Pod> = snap
                .pods
                .iter()
                .filter(|p| p.live() && !p.terminating && of(p, kind, ns, name))
                .collect();
            let replicas = replicas_of(snap, one).unwrap_or(live.len());
            let ready = live.iter().filter(|p| p.ready).count();
            let mine: Vec<&Moved> = pods
                .iter()
                .zip(here)
                .filter(|(_, (p, _))| of(p, kind, ns, name))
                .map(|(m, _)| m)
                .collect();
            let lost = here
                .iter()
                .filter(|(p, _)| of(p, kind, ns, name) && p.ready && !p.terminating)
                .count();
            let left = ready.saturating_sub(lost);
            let quorum = replicas / 2 + 1;
            WorkloadLoss {
                workload: format!("{kind} {ns}/{name}"),
                replicas,
                ready,
                lost,
                replaced: mine
                    .iter()
                    .filter(|m| matches!(m.outcome, Outcome::Replaced { .. }))
                    .count(),
                pending: mine
                    .iter()
                    .filter(|m| {
                        matches!(
                            m.outcome,
                            Outcome::Pending { .. } | Outcome::CannotMove { .. }
                        )
                    })
                    .count(),
                at_zero: lost > 0 && left == 0,
                majority_lost: kind == "StatefulSet"
                    && lost > 0
                    && left < quorum
                    && ready >= quorum,
            }
        })
        .collect()
}

pub(super) fn services(
    snap: &Snapshot,
    nodes: &BTreeSet<String>,
    unknown: When,
    pods: &[Moved],
) -> Vec<ServiceDark> {
    let mut out = Vec::new();
    for s in &snap.services {
        let ready: Vec<_> = s.endpoints.iter().filter(|e| e.ready).collect();
        if ready.is_empty()
            || !ready
                .iter()
                .all(|e| e.node.as_ref().is_some_and(|n| nodes.contains(n)))
        {
            continue;
        }
        let mine: Vec<&Moved> = ready
            .iter()
            .filter_map(|e| {
                let key = format!("{}/{}", s.namespace, e.pod.as_deref()?);
                pods.iter().find(|m| m.pod == key)
            })
            .collect();
        let first = mine
            .iter()
            .filter(|m| matches!(m.outcome, Outcome::Replaced { .. }))
            .min_by_key(|m| m.evicted.from().unwrap_or(Ms::MAX));
        let (until, why) = match first {
            Some(m) => (
                m.evicted,
                format!(
                    "until a replacement of {} runs (created when it is evicted; how long it takes to start is not predicted)",
                    m.pod
                ),
            ),
            None => (
                When::Never,
                "no replacement of its pods runs elsewhere: dark until the nodes are back, or remediation"
                    .into(),
            ),
        };
        out.push(ServiceDark {
            service: format!("{}/{}", s.namespace, s.name),
            endpoints: ready.len(),
            from: unknown,
            until,
            why,
        });
    }
    out
}

pub(super) fn budgets(snap: &Snapshot, nodes: &BTreeSet<String>) -> Vec<BudgetLoss> {
    let mut out = Vec::new();
    for b in &snap.budgets {
        let Some(sel) = &b.selector else { continue };
        let lost = snap
            .pods
            .iter()
            .filter(|p| p.namespace == b.namespace && sel.matches(&p.labels))
            .filter(|p| p.live() && p.ready && !p.terminating)
            .filter(|p| p.node.as_ref().is_some_and(|n| nodes.contains(n)))
            .count();
        let lost = i32::try_from(lost).unwrap_or(i32::MAX);
        if lost == 0 {
            continue;
        }
        out.push(BudgetLoss {
            budget: format!("{}/{}", b.namespace, b.name),
            healthy: b.current_healthy,
            desired: b.desired_healthy,
            lost,
            below: b.current_healthy - lost < b.desired_healthy,
            drain_refused: (lost - b.disruptions_allowed.max(0)).max(0),
        });
    }
    out
}

/// The set's timeline: the nodes, each zone's state, each taint, each
/// owner's evictions and where its replacements go, the Services.
pub(super) fn timeline(
    rules: &disruption::Forecast,
    turns: &[Turn],
    unknown: When,
    pods: &[Moved],
    services: &[ServiceDark],
) -> Vec<Event> {
    let mut out = vec![Event {
        at: unknown,
        mark: Mark::Node,
        what: format!(
            "{} node(s) Ready=Unknown (no lease renewal for the grace period); their pods Ready=False, out of their Services' ready endpoints",
            turns.len()
        ),
    }];
    for z in rules.zones.iter().filter(|z| z.failing > 0) {
        out.push(Event {
            at: unknown,
            mark: Mark::Node,
            what: format!(
                "zone {}: {} of {} nodes not ready ({} before): {}, NoExecute taints {}",
                zone_name(&z.zone),
                z.down_before + z.failing,
                z.nodes,
                z.down_before,
                z.state,
                z.pace.words()
            ),
        });
    }
    for x in turns.iter().filter(|x| x.taint != When::Never) {
        out.push(Event {
            at: x.taint,
            mark: Mark::Node,
            what: format!(
                "{} tainted node.kubernetes.io/unreachable:NoExecute ({})",
                x.node, x.slot
            ),
        });
    }
    let mut owners: BTreeMap<&str, Vec<&Moved>> = BTreeMap::new();
    for m in pods.iter().filter(|m| m.evicted != When::Never) {
        owners.entry(m.owner.as_str()).or_default().push(m);
    }
    for (owner, ms) in owners {
        let from = ms
            .iter()
            .filter_map(|m| m.evicted.from())
            .min()
            .unwrap_or(0);
        let to = ms
            .iter()
            .filter_map(|m| match m.evicted {
                When::Between { to, .. } => Some(to),
                When::Never => None,
            })
            .max()
            .unwrap_or(from);
        let mut zones: BTreeMap<&str, usize> = BTreeMap::new();
        let (mut stuck, mut pending, mut waiting) = (0, 0, 0);
        for m in &ms {
            match &m.outcome {
                Outcome::Replaced { zone, .. } => *zones.entry(zone_name(zone)).or_default() += 1,
                Outcome::Pending { .. } | Outcome::CannotMove { .. } => pending += 1,
                Outcome::WaitsForDetach { .. } => waiting += 1,
                Outcome::Stuck { .. } | Outcome::Never => stuck += 1,
                Outcome::Stranded { .. } | Outcome::Stays => {}
            }
        }
        let mut parts: Vec<String> = Vec::new();
        if !zones.is_empty() {
            let each: Vec<String> = zones
                .iter()
                .map(|(z, n)| format!("{n} in zone {z}"))
                .collect();
            parts.push(format!("replacements run: {}", each.join(", ")));
        }
        if pending > 0 {
            parts.push(format!("{pending} replacement(s) stay Pending"));
        }
        if waiting > 0 {
            parts.push(format!("{waiting} replacement(s) wait for a volume"));
        }
        if stuck > 0 {
            parts.push(format!("{stuck} not replaced (stuck Terminating)"));
        }
        out.push(Event {
            at: When::Between { from, to },
            mark: if pending + waiting + stuck > 0 {
                Mark::Stuck
            } else {
                Mark::Replaced
            },
            what: format!("{owner}: {} pod(s) evicted; {}", ms.len(), parts.join("; ")),
        });
    }
    for s in services {
        out.push(Event {
            at: s.from,
            mark: Mark::Stuck,
            what: format!("Service {} has no ready endpoint, {}", s.service, s.why),
        });
    }
    out.sort_by_key(|e| e.at.from().unwrap_or(Ms::MAX));
    out
}
