//! A set's prediction as a scenario that checks it (`predict --zone Z
//! --write-scenario FILE`): the set's nodes, pinned by name, fail together;
//! each predicted transition is an expectation (the node's in the cluster's
//! own timing expressions, the taints at the zone's pace, the pods' with the
//! tolerations and replica counts read now, how many replacements find a
//! node and how many stay Pending), then the revert. A cluster changed since
//! (a node added to the zone, which can stop its taints; a workload grown)
//! fails it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Outcome, SetForecast, ZoneForecast};
use crate::disruption::{Pace, ZoneState};
use crate::predict::scenario::{Error, by_owner, scenario_name, selector, steps_of};
use crate::predict::snapshot::{Owner, Pod, Snapshot, Toleration};

/// The hostname label, which a kubelet sets to its node's name.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// One owner's pods in the set, with their outcomes.
struct Group<'a> {
    owner: &'a Owner,
    pods: Vec<&'a Pod>,
    outcomes: Vec<&'a super::Moved>,
    selector: String,
    replicas: Option<usize>,
}

/// The namespace holding most of the set's disrupted pods (ties: by name).
pub fn busiest_namespace(s: &SetForecast) -> Option<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for m in s
        .pods
        .iter()
        .filter(|m| !matches!(m.outcome, Outcome::Stays))
    {
        *count
            .entry(m.pod.split('/').next().unwrap_or_default())
            .or_default() += 1;
    }
    let best = count.values().copied().max()?;
    count
        .into_iter()
        .find(|(_, c)| *c == best)
        .map(|(ns, _)| ns.to_owned())
}

/// The selector that pins the set: its nodes' hostnames when each is its
/// node's name (so a node added to the zone later is not in it), else the
/// set's own selector.
fn pinned(s: &SetForecast, snap: &Snapshot) -> String {
    let named = s.nodes.iter().all(|name| {
        snap.nodes
            .iter()
            .find(|n| &n.name == name)
            .is_some_and(|n| n.labels.get(HOSTNAME) == Some(name))
    });
    if named {
        format!("{HOSTNAME} in ({})", s.nodes.join(","))
    } else {
        s.selector.clone()
    }
}

fn groups<'a>(s: &'a SetForecast, snap: &'a Snapshot, namespace: &str) -> Vec<Group<'a>> {
    let items = s
        .pods
        .iter()
        .filter(|m| m.pod.starts_with(&format!("{namespace}/")))
        .filter(|m| !matches!(m.outcome, Outcome::Stays))
        .map(|m| (m.pod.as_str(), m));
    let mut out: Vec<Group<'a>> = by_owner(snap, items)
        .into_iter()
        .map(|(owner, pods, outcomes)| Group {
            owner,
            pods,
            outcomes,
            selector: String::new(),
            replicas: None,
        })
        .collect();
    for g in &mut out {
        g.selector = selector(&g.pods);
        g.replicas = super::effects::replicas_of(snap, g.pods[0]);
    }
    out.retain(|g| !g.selector.is_empty());
    out
}

/// The scenario text for the one set of `f`, watching `namespace`.
pub fn write(f: &ZoneForecast, snap: &Snapshot, namespace: &str) -> Result<String, Error> {
    let [s] = f.sets.as_slice() else {
        return Err(Error::NotOneSet(f.sets.len()));
    };
    let Some((step, revert, back)) = steps_of(f.fault) else {
        return Err(Error::Unsupported(
            "a set's prediction is of a silent fault".into(),
        ));
    };
    let groups = groups(s, snap, namespace);
    if groups.is_empty() {
        return Err(Error::NothingToCheck(s.set.clone()));
    }
    let name = scenario_name(&format!("predict-{}-{}", f.fault.name(), s.set));
    let n = s.nodes.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by `nodefall predict --write-scenario`: the prediction for\n\
         # {} of {} ({} nodes, together), checked. Windows on the nodes\n\
         # are in the cluster's own timings and the zone's pace; the pods' are\n\
         # the tolerations, replica counts and fit read then.",
        f.fault.name(),
        s.set,
        n
    );
    let _ = writeln!(out, "name: {name}");
    let _ = writeln!(out, "namespace: {namespace}");
    let _ = writeln!(out, "targets:\n  lost: {{nodes: \"{}\"}}", pinned(s, snap));
    out.push_str("steps:\n");
    let _ = writeln!(out, "  - id: fault\n    fault: {step}\n    node: lost");
    out.push_str(
        "  - expect: {node: lost, ready: Unknown, within: grace - 0.25*lease - 1s .. grace + monitorPeriod + 2s}\n",
    );
    let zones: Vec<_> = s.zones.zones.iter().filter(|z| z.failing > 0).collect();
    // the taints, where one zone's pace decides them all
    let tainted = match zones.as_slice() {
        [z] => match z.pace {
            Pace::Every(_) if z.state != ZoneState::PartialDisruption || z.down_before == 0 => {
                let _ = writeln!(
                    out,
                    "  - id: tainted\n    name: every node tainted at the zone's pace ({}, one node per evictionInterval)\n    expect: {{node: lost, taint: \"node.kubernetes.io/unreachable:NoExecute\", within: grace - 0.25*lease - 1s .. grace + monitorPeriod + {n}*evictionInterval + 20s, since: fault}}",
                    z.state
                );
                true
            }
            Pace::Stopped(_) => {
                let _ = writeln!(
                    out,
                    "  # zone {}: {}, its taints stopped: the first nodes race the tipping",
                    crate::disruption::zone_name(&z.zone),
                    z.state
                );
                false
            }
            Pace::Every(_) => false,
        },
        _ => false,
    };
    for d in s
        .services
        .iter()
        .filter_map(|d| d.service.strip_prefix(&format!("{namespace}/")))
    {
        let _ = writeln!(
            out,
            "  - expect: {{service: {d}, readyEndpoints: 0, within: grace - 0.25*lease - 1s .. grace + monitorPeriod + 3s, since: fault}}"
        );
    }
    let (mut first, mut replaced, mut holds) = (String::new(), String::new(), String::new());
    for (i, g) in groups.iter().enumerate() {
        if !tainted || g.outcomes.iter().any(|m| m.maybe) {
            continue;
        }
        let mut tolerations: Vec<Toleration> = Vec::new();
        for p in &g.pods {
            if !tolerations.contains(&p.unreachable) {
                tolerations.push(p.unreachable);
            }
        }
        let seconds = match tolerations.as_slice() {
            [Toleration::Seconds(x)] => *x,
            [Toleration::None] => 0,
            _ => continue,
        };
        let id = format!("evicted-{}", i + 1);
        let (owner, sel) = (g.owner.label(), &g.selector);
        let _ = writeln!(
            first,
            "  - id: {id}\n    name: {owner} evicted after its tolerationSeconds {seconds}\n    expect: {{pods: \"{sel}\", on: lost, terminating: true, within: grace - 0.25*lease + {}s .. grace + monitorPeriod + {n}*evictionInterval + {}s, since: fault}}",
            (seconds - 1).max(0),
            seconds + 23
        );
        let count = |f: fn(&Outcome) -> bool| g.outcomes.iter().filter(|m| f(&m.outcome)).count();
        let stuck = count(|o| matches!(o, Outcome::Stuck { .. }));
        let waiting = count(|o| matches!(o, Outcome::WaitsForDetach { .. }));
        let pending = count(|o| matches!(o, Outcome::Pending { .. } | Outcome::CannotMove { .. }));
        let landed = count(|o| matches!(o, Outcome::Replaced { .. }));
        if stuck + waiting > 0 {
            let _ = writeln!(
                holds,
                "  - name: {owner} stuck Terminating\n    expect: {{pods: \"{sel}\", on: lost, terminating: true, holdsFor: 2*podGcPeriod}}"
            );
        }
        let Some(r) = g.replicas else { continue };
        if landed == 0 && pending == 0 {
            continue;
        }
        // a stuck StatefulSet pod has no replacement; a waiting one has
        // one, not Ready
        let runs = r.saturating_sub(pending + stuck + waiting);
        let within = match g.owner {
            Owner::StatefulSet(_) => "1m",
            _ => "30s",
        };
        let _ = writeln!(
            replaced,
            "  - name: {owner} runs {runs} of {r} off the set ({landed} replaced)\n    expect: {{pods: \"{sel}\", notOn: lost, readyAtLeast: {runs}, within: {within}, since: {id}}}"
        );
        let pending_words = if pending > 0 {
            format!(", {pending} Pending")
        } else {
            String::new()
        };
        let _ = writeln!(
            holds,
            "  - name: {owner} holds {runs} Ready{pending_words}, no more\n    expect: {{pods: \"{sel}\", notOn: lost, ready: {runs}, count: {}, holdsFor: 10s}}",
            r.saturating_sub(stuck)
        );
    }
    out.push_str(&first);
    out.push_str(&replaced);
    out.push_str(&holds);
    let _ = writeln!(out, "  - fault: {revert}\n    node: lost");
    let _ = writeln!(
        out,
        "  - expect: {{node: lost, ready: \"True\", within: {back}}}"
    );
    out.push_str("cleanup: always\n");
    Ok(out)
}

#[cfg(test)]
mod tests;
