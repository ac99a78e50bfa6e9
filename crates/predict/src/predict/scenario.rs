//! A prediction as a scenario that checks it: `predict NODE --fault F
//! --write-scenario FILE` writes the fault, each predicted transition as an
//! expectation (the node's in the cluster's own timing expressions, the
//! pods' with the tolerations and replica counts read now, so a cluster
//! changed since fails it), and the revert.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::fate::{NodeForecast, PodFate, Replacement};
use super::snapshot::{Owner, Pod, Snapshot, Toleration};
use super::{Fault, Forecast};

/// Labels that differ pod by pod within one owner: not a selector's.
const PER_POD: [&str; 4] = [
    "pod-template-hash",
    "controller-revision-hash",
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
];

/// Why a forecast cannot be written as a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not one node: `--write-scenario` checks one node's loss.
    NotOneNode(usize),
    /// The fault's course has no scenario form yet.
    Unsupported(String),
    /// No pod of the node is in a namespace the scenario could watch.
    NothingToCheck(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NotOneNode(n) => write!(
                f,
                "--write-scenario writes one node's prediction, and {n} nodes were asked for; name \
                 exactly one node (`nodefall predict NODE --write-scenario FILE`)"
            ),
            Error::Unsupported(why) => write!(f, "--write-scenario: {why}"),
            Error::NothingToCheck(node) => write!(
                f,
                "--write-scenario: no pod on {node} would be disrupted; nothing to check"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// The fault's step and its revert, as scenario steps write them.
fn steps_of(fault: Fault) -> Option<(&'static str, &'static str)> {
    match fault {
        Fault::Poweroff => Some(("poweroff", "poweron")),
        Fault::Pause => Some(("pause-vm", "resume-vm")),
        Fault::DropNic => Some(("drop-nic", "restore-nic")),
        Fault::StopKubelet => Some(("stop-kubelet", "start-kubelet")),
        Fault::Shutdown => Some(("shutdown", "poweron")),
        Fault::Drain => None,
    }
}

/// The labels every pod of `pods` carries, less those that differ pod by
/// pod: `app=web,tier=front`.
fn selector(pods: &[&Pod]) -> String {
    let mut common: BTreeMap<&String, &String> = pods
        .first()
        .map(|p| p.labels.iter().collect())
        .unwrap_or_default();
    for p in pods {
        common.retain(|k, v| p.labels.get(*k) == Some(*v));
    }
    common
        .into_iter()
        .filter(|(k, _)| !PER_POD.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The namespace holding most of the node's disrupted pods (ties: by name).
pub fn busiest_namespace(n: &NodeForecast) -> Option<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for f in n
        .pods
        .iter()
        .filter(|f| f.replacement != Replacement::Stays)
    {
        let ns = f.pod.split('/').next().unwrap_or_default();
        *count.entry(ns).or_default() += 1;
    }
    let best = count.values().copied().max()?;
    count
        .into_iter()
        .find(|(_, c)| *c == best)
        .map(|(ns, _)| ns.to_owned())
}

/// One owner's pods on the node, with what the forecast says of them.
struct Group<'a> {
    owner: &'a Owner,
    pods: Vec<&'a Pod>,
    fates: Vec<&'a PodFate>,
}

/// The scenario text for the one node of `forecast`, watching `namespace`.
pub fn write(forecast: &Forecast, snap: &Snapshot, namespace: &str) -> Result<String, Error> {
    let [n] = forecast.nodes.as_slice() else {
        return Err(Error::NotOneNode(forecast.nodes.len()));
    };
    let Some((fault, revert)) = steps_of(forecast.fault) else {
        return Err(Error::Unsupported(
            "a drain's prediction has no scenario form yet; predict a fault".into(),
        ));
    };
    if n.timeline
        .first()
        .is_some_and(|e| !e.what.starts_with("Ready=Unknown"))
    {
        return Err(Error::Unsupported(
            "a graceful shutdown's prediction has no scenario form yet; predict it without \
             --configz (as a poweroff)"
                .into(),
        ));
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    for f in n
        .pods
        .iter()
        .filter(|f| f.pod.starts_with(&format!("{namespace}/")))
    {
        let Some(p) = snap.pods.iter().find(|p| p.key() == f.pod) else {
            continue;
        };
        if f.replacement == Replacement::Stays {
            continue;
        }
        match groups.iter_mut().find(|g| *g.owner == p.owner) {
            Some(g) => {
                g.pods.push(p);
                g.fates.push(f);
            }
            None => groups.push(Group {
                owner: &p.owner,
                pods: vec![p],
                fates: vec![f],
            }),
        }
    }
    if groups.is_empty() {
        return Err(Error::NothingToCheck(n.node.clone()));
    }
    let mut out = String::new();
    let name = format!("predict-{}-{}", forecast.fault.name(), n.node)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(63)
        .collect::<String>();
    let _ = writeln!(
        out,
        "# Written by `nodefall predict --write-scenario`: the prediction for"
    );
    let _ = writeln!(
        out,
        "# {} of {}, checked. Windows on the node are in the cluster's",
        forecast.fault.name(),
        n.node
    );
    let _ = writeln!(
        out,
        "# own timings; the pods' are the tolerations and replicas read then."
    );
    let _ = writeln!(out, "name: {}", name.trim_end_matches('-'));
    let _ = writeln!(out, "namespace: {namespace}");
    let _ = writeln!(out, "target: {{name: {}}}", n.node);
    out.push_str("steps:\n");
    let _ = writeln!(out, "  - id: fault\n    fault: {fault}");
    out.push_str(
        "  - expect: {node: target, ready: Unknown, within: grace - 0.25*lease - 1s .. grace + monitorPeriod + 2s}\n",
    );
    out.push_str(
        "  - id: tainted\n    expect: {node: target, taint: \"node.kubernetes.io/unreachable:NoExecute\", within: grace - 0.25*lease - 1s .. grace + monitorPeriod + 13s}\n",
    );
    for s in n
        .services
        .iter()
        .filter(|s| s.ready_here == s.ready_total)
        .filter_map(|s| s.service.strip_prefix(&format!("{namespace}/")))
    {
        let _ = writeln!(
            out,
            "  - expect: {{service: {s}, on: target, readyEndpoints: 0, within: grace - 0.25*lease - 1s .. grace + monitorPeriod + 3s, since: fault}}"
        );
    }
    let mut stuck = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let sel = selector(&g.pods);
        if sel.is_empty() {
            // no label all its pods share: nothing a scenario can select
            continue;
        }
        let mut tolerations: Vec<Toleration> = Vec::new();
        for p in &g.pods {
            if !tolerations.contains(&p.unreachable) {
                tolerations.push(p.unreachable);
            }
        }
        let id = format!("evicted-{}", i + 1);
        match tolerations.as_slice() {
            [Toleration::Seconds(s)] => {
                let _ = writeln!(
                    out,
                    "  - id: {id}\n    name: {} evicted after its tolerationSeconds {s}\n    expect: {{pods: \"{sel}\", on: target, terminating: true, within: {}s .. {}s, since: tainted}}",
                    g.owner.label(),
                    (s - 1).max(0),
                    s + 3
                );
            }
            [Toleration::None] => {
                let _ = writeln!(
                    out,
                    "  - id: {id}\n    name: {} evicted with the taint\n    expect: {{pods: \"{sel}\", on: target, terminating: true, within: 3s, since: tainted}}",
                    g.owner.label()
                );
            }
            _ => continue,
        }
        match g.fates[0].replacement {
            Replacement::AtEviction => {
                let replicas = replicas(snap, g.owner, namespace);
                if let Some(r) = replicas {
                    // at least, then exactly: a replica added since
                    // the prediction shows as one more
                    let _ = writeln!(
                        out,
                        "  - name: {owner} replaced on other nodes while the old pods are Terminating\n    expect: {{pods: \"{sel}\", notOn: target, readyAtLeast: {r}, within: 1m, since: {id}}}\n  - name: {owner} runs its {r} replicas, no more\n    expect: {{pods: \"{sel}\", notOn: target, ready: {r}, holdsFor: 10s}}",
                        owner = g.owner.label()
                    );
                }
            }
            Replacement::Stuck { .. } | Replacement::Never => stuck.push((g.owner.label(), sel)),
            _ => {}
        }
    }
    for (owner, sel) in stuck {
        let _ = writeln!(
            out,
            "  - name: {owner} stuck Terminating, not replaced\n    expect: {{pods: \"{sel}\", on: target, terminating: true, holdsFor: 2*podGcPeriod}}"
        );
    }
    let _ = writeln!(out, "  - fault: {revert}");
    out.push_str("  - expect: {node: target, ready: \"True\", within: 2m}\n");
    out.push_str("cleanup: always\n");
    Ok(out)
}

/// The replicas a Deployment or StatefulSet asks for now.
fn replicas(snap: &Snapshot, owner: &Owner, namespace: &str) -> Option<i32> {
    let (kind, name) = match owner {
        Owner::Deployment(n) => ("Deployment", n),
        Owner::StatefulSet(n) => ("StatefulSet", n),
        _ => return None,
    };
    snap.workloads
        .iter()
        .find(|w| w.kind == kind && w.namespace == namespace && w.name == *name)
        .map(|w| w.replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Memory;
    use crate::predict::fate::tests_support::cluster;
    use crate::predict::{Ask, forecast};
    use crate::profile::TimingProfile;
    use crate::scenario::{load::load_str, validate::validate};

    fn written(fault: Fault) -> Result<String, Error> {
        let snap = cluster();
        let f = forecast(
            &snap,
            &TimingProfile::upstream_default(),
            fault,
            &Ask {
                nodes: &["w1".to_owned()],
                graceful: &[],
            },
        )
        .unwrap();
        write(&f, &snap, "shop")
    }

    #[test]
    fn the_written_scenario_holds_the_prediction_and_validates() {
        let text = written(Fault::Pause).unwrap();
        for line in [
            "target: {name: w1}",
            "    fault: pause-vm",
            "  - expect: {service: db, on: target, readyEndpoints: 0,",
            "    expect: {pods: \"app=web\", on: target, terminating: true, within: 299s .. 303s, since: tainted}",
            "    expect: {pods: \"app=web\", notOn: target, readyAtLeast: 3, within: 1m, since: evicted-1}",
            "    expect: {pods: \"app=web\", notOn: target, ready: 3, holdsFor: 10s}",
            "    expect: {pods: \"app=db\", on: target, terminating: true, holdsFor: 2*podGcPeriod}",
            "  - fault: resume-vm",
        ] {
            assert!(text.contains(line), "{line}\nin\n{text}");
        }
        let checked = load_str("predicted.yaml", std::path::Path::new("."), &text)
            .and_then(|l| validate(l, &Memory::default()))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(checked.name, "predict-pause-w1");
    }

    #[test]
    fn a_drain_or_many_nodes_are_refused_by_name() {
        assert!(
            written(Fault::Drain)
                .unwrap_err()
                .to_string()
                .contains("drain")
        );
        let snap = cluster();
        let all = forecast(
            &snap,
            &TimingProfile::fast(),
            Fault::Poweroff,
            &Ask::default(),
        )
        .unwrap();
        assert_eq!(
            write(&all, &snap, "shop").unwrap_err(),
            Error::NotOneNode(3)
        );
    }
}
