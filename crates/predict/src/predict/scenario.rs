//! A prediction as a scenario that checks it: `predict NODE --fault F
//! --write-scenario FILE` writes the fault, each predicted transition as an
//! expectation (the node's in the cluster's own timing expressions, the
//! pods' with the tolerations and replica counts read now, so a cluster
//! changed since fails it), and the revert.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::fate::{
    CRITICAL_PRIORITY, Course, KUBELET_REPORTS_MS, NodeForecast, PodFate, Replacement,
};
use super::snapshot::{Budget, Owner, Pod, Snapshot, Toleration};
use super::{Fault, Forecast, Graceful};

/// Labels that differ pod by pod within one owner: not a selector's. The
/// topology labels are copied from the node at binding (the
/// PodTopologyLabelsAdmission plugin, on by default since v1.35), so a
/// replacement in another zone carries another value.
const PER_POD: [&str; 8] = [
    "pod-template-hash",
    "controller-revision-hash",
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

/// Why a forecast cannot be written as a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not one node: `--write-scenario` checks one node's loss.
    NotOneNode(usize),
    /// The prediction is one no scenario can check to its end.
    Unsupported(String),
    /// No pod of the node is in a namespace the scenario could watch.
    NothingToCheck(String),
    /// Not one set: `--write-scenario` checks one set's loss (0: `--zone`
    /// alone, every zone).
    NotOneSet(usize),
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
            Error::NotOneSet(n) => {
                let asked = if *n == 0 {
                    "`--zone` alone asks for every zone".to_owned()
                } else {
                    format!("{n} were asked for")
                };
                write!(
                    f,
                    "--write-scenario writes one set's prediction, and {asked}; name the zone \
                     (`--zone ZONE`) or give `--nodes SELECTOR`"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

/// The fault's step and its revert, as scenario steps write them, and how
/// long the node may take to be Ready after the revert (the seed
/// scenarios' windows: a booting node registers again within a minute, an
/// unpaused or reconnected one at its next status update).
pub(crate) type Steps = (&'static str, &'static str, &'static str);

pub(crate) fn steps_of(fault: Fault) -> Option<Steps> {
    Some(match fault {
        Fault::Poweroff => ("poweroff", "poweron", "1m"),
        Fault::Shutdown => ("shutdown", "poweron", "1m"),
        Fault::Pause => ("pause-vm", "resume-vm", "2*nodeStatusUpdateFrequency + 5s"),
        Fault::DropNic => (
            "drop-nic",
            "restore-nic",
            "2*nodeStatusUpdateFrequency + 5s",
        ),
        Fault::StopKubelet => ("stop-kubelet", "start-kubelet", "1m"),
        Fault::Drain => return None,
    })
}

/// The labels every pod of `pods` carries, less those that differ pod by
/// pod: `app=web,tier=front`.
pub(crate) fn selector(pods: &[&Pod]) -> String {
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
    /// The labels its pods share (a scenario's selector for them).
    selector: String,
    /// The replicas its Deployment or StatefulSet asks for now.
    replicas: Option<i32>,
}

impl Group<'_> {
    fn replaced(&self) -> bool {
        matches!(
            self.fates[0].replacement,
            Replacement::AtEviction | Replacement::WhenGone
        )
    }

    /// The replacement expectations, from the step `since`: all the
    /// replicas Ready elsewhere, into `replaced`; then
    /// exactly that many (a replica added since the prediction shows as one
    /// more), into `holds`.
    fn replacements(&self, since: &str, replaced: &mut String, holds: &mut String) {
        let (Some(r), true) = (self.replicas, self.replaced()) else {
            return;
        };
        let (owner, sel) = (self.owner.label(), &self.selector);
        // the seeds' windows: seed 002's Deployment 30 s, seed 000's
        // StatefulSet 1m (OrderedReady makes its pods one at a time)
        let within = match self.owner {
            Owner::StatefulSet(_) => "1m",
            _ => "30s",
        };
        let _ = writeln!(
            replaced,
            "  - name: {owner} replaced on other nodes\n    expect: {{pods: \"{sel}\", notOn: target, readyAtLeast: {r}, within: {within}, since: {since}}}"
        );
        let _ = writeln!(
            holds,
            "  - name: {owner} runs its {r} replicas, no more\n    expect: {{pods: \"{sel}\", notOn: target, ready: {r}, holdsFor: 10s}}"
        );
    }
}

/// A scenario's expectations in the order they can be decided: what
/// happens at a moment (each within its window from its anchor) before
/// what must hold for a while, so no window closes before the steps
/// ahead of it are decided.
#[derive(Default)]
struct Phases {
    /// Transitions anchored on the fault or action.
    first: String,
    /// Replacements, anchored on their pods' going.
    replaced: String,
    /// States held for a while.
    holds: String,
}

impl Phases {
    fn into_steps(self, out: &mut String) {
        out.push_str(&self.first);
        out.push_str(&self.replaced);
        out.push_str(&self.holds);
    }
}

/// The node's disrupted pods in `namespace`, by owner (those no label
/// selects as a group left out).
fn groups<'a>(n: &'a NodeForecast, snap: &'a Snapshot, namespace: &str) -> Vec<Group<'a>> {
    let items = n
        .pods
        .iter()
        .filter(|f| f.pod.starts_with(&format!("{namespace}/")))
        .filter(|f| f.replacement != Replacement::Stays)
        .map(|f| (f.pod.as_str(), f));
    let mut groups: Vec<Group<'a>> = by_owner(snap, items)
        .into_iter()
        .map(|(owner, pods, fates)| Group {
            owner,
            pods,
            fates,
            selector: String::new(),
            replicas: replicas(snap, owner, namespace),
        })
        .collect();
    for g in &mut groups {
        g.selector = selector(&g.pods);
    }
    // no label all its pods share: nothing a scenario can select
    groups.retain(|g| !g.selector.is_empty());
    groups
}

/// The pods `items` name (a pod's key, and what the forecast says of it),
/// grouped by owner in the order first seen; keys of no pod left out.
pub(crate) fn by_owner<'a, T>(
    snap: &'a Snapshot,
    items: impl IntoIterator<Item = (&'a str, T)>,
) -> Vec<(&'a Owner, Vec<&'a Pod>, Vec<T>)> {
    let mut out: Vec<(&'a Owner, Vec<&'a Pod>, Vec<T>)> = Vec::new();
    for (key, t) in items {
        let Some(p) = snap.pods.iter().find(|p| p.key() == key) else {
            continue;
        };
        match out.iter_mut().find(|(o, _, _)| **o == p.owner) {
            Some((_, pods, ts)) => {
                pods.push(p);
                ts.push(t);
            }
            None => out.push((&p.owner, vec![p], vec![t])),
        }
    }
    out
}

/// A scenario's name from `text`: lowercase letters, digits and dashes,
/// at most 63 characters, no dash at the end.
pub(crate) fn scenario_name(text: &str) -> String {
    let name: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    name.trim_end_matches('-').to_owned()
}

/// The scenario text for the one node of `forecast`, watching `namespace`.
pub fn write(forecast: &Forecast, snap: &Snapshot, namespace: &str) -> Result<String, Error> {
    let [n] = forecast.nodes.as_slice() else {
        return Err(Error::NotOneNode(forecast.nodes.len()));
    };
    let groups = groups(n, snap, namespace);
    if groups.is_empty() {
        return Err(Error::NothingToCheck(n.node.clone()));
    }
    let name = scenario_name(&format!("predict-{}-{}", forecast.fault.name(), n.node));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by `nodefall predict --write-scenario`: the prediction for\n\
         # {} of {}, checked. Windows on the node are in the cluster's\n\
         # own timings; the pods' are the tolerations and replicas read then.",
        forecast.fault.name(),
        n.node
    );
    let _ = writeln!(out, "name: {name}");
    let _ = writeln!(out, "namespace: {namespace}");
    let _ = writeln!(out, "target: {{name: {}}}", n.node);
    out.push_str("steps:\n");
    match n.course {
        Course::Silent => {
            let Some(steps) = steps_of(forecast.fault) else {
                return Err(Error::Unsupported(
                    "a drain is not a silent node; predict it with --fault drain".into(),
                ));
            };
            silent(&mut out, steps, n, &groups, namespace);
        }
        Course::Graceful(g) => graceful(&mut out, g, &groups),
        Course::Drain => drain(&mut out, n, snap, &groups)?,
    }
    out.push_str("cleanup: always\n");
    Ok(out)
}

/// A node gone silent: Unknown and tainted after the grace period, each
/// group evicted after its toleration, then replaced or stuck.
fn silent(
    out: &mut String,
    (step, revert, back): Steps,
    n: &NodeForecast,
    groups: &[Group<'_>],
    namespace: &str,
) {
    let _ = writeln!(out, "  - id: fault\n    fault: {step}");
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
    let mut ph = Phases::default();
    for (i, g) in groups.iter().enumerate() {
        let mut tolerations: Vec<Toleration> = Vec::new();
        for p in &g.pods {
            if !tolerations.contains(&p.unreachable) {
                tolerations.push(p.unreachable);
            }
        }
        let id = format!("evicted-{}", i + 1);
        let sel = &g.selector;
        match tolerations.as_slice() {
            [Toleration::Seconds(s)] => {
                let _ = writeln!(
                    ph.first,
                    "  - id: {id}\n    name: {} evicted after its tolerationSeconds {s}\n    expect: {{pods: \"{sel}\", on: target, terminating: true, within: {}s .. {}s, since: tainted}}",
                    g.owner.label(),
                    (s - 1).max(0),
                    s + 3
                );
            }
            [Toleration::None] => {
                let _ = writeln!(
                    ph.first,
                    "  - id: {id}\n    name: {} evicted with the taint\n    expect: {{pods: \"{sel}\", on: target, terminating: true, within: 3s, since: tainted}}",
                    g.owner.label()
                );
            }
            // pods of one owner with different tolerations: no one window
            _ => continue,
        }
        // a replacement waiting for a volume the silent node holds is not
        // Ready before remediation: the old pods stay Terminating
        if g.replaced() && g.fates.iter().all(|f| f.waits_for_detach.is_empty()) {
            g.replacements(&id, &mut ph.replaced, &mut ph.holds);
        } else {
            let what = if g.replaced() {
                "its replacement waiting for its volume"
            } else {
                "not replaced"
            };
            let _ = writeln!(
                ph.holds,
                "  - name: {} stuck Terminating, {what}\n    expect: {{pods: \"{}\", on: target, terminating: true, holdsFor: 2*podGcPeriod}}",
                g.owner.label(),
                g.selector
            );
        }
    }
    ph.into_steps(out);
    let _ = writeln!(out, "  - fault: {revert}");
    let _ = writeln!(
        out,
        "  - expect: {{node: target, ready: \"True\", within: {back}}}"
    );
}

/// Whole seconds, rounded up.
pub(crate) fn secs(ms: i64) -> i64 {
    (ms + 999) / 1000
}

/// A graceful node shutdown: the kubelet says NotReady, stops each group's
/// pods within its part of the grace period, their owners replace them;
/// Unknown once the machine is off.
fn graceful(out: &mut String, g: Graceful, groups: &[Group<'_>]) {
    out.push_str(
        "  - name: the kubelet will run its graceful shutdown\n    expect: {node: target, gracefulShutdown: will-run}\n",
    );
    out.push_str("  - id: fault\n    fault: shutdown\n");
    let _ = writeln!(
        out,
        "  - name: the kubelet reports the node NotReady\n    expect: {{node: target, ready: \"False\", within: {}s, since: fault}}",
        secs(KUBELET_REPORTS_MS)
    );
    let mut ph = Phases::default();
    for (i, grp) in groups.iter().enumerate() {
        // critical pods are stopped in the last part of the grace period
        let by = if grp.pods.iter().any(|p| p.priority >= CRITICAL_PRIORITY) {
            g.grace_ms
        } else {
            g.regular_ms()
        };
        let id = format!("stopped-{}", i + 1);
        let _ = writeln!(
            ph.first,
            "  - id: {id}\n    name: {} stopped by the kubelet\n    expect: {{pods: \"{}\", on: target, ready: 0, within: {}s, since: fault}}",
            grp.owner.label(),
            grp.selector,
            secs(by + KUBELET_REPORTS_MS)
        );
        grp.replacements(&id, &mut ph.replaced, &mut ph.holds);
    }
    let _ = writeln!(
        ph.first,
        "  - expect: {{node: target, ready: Unknown, within: {}s + grace + monitorPeriod + 2s, since: fault}}",
        secs(g.grace_ms)
    );
    ph.into_steps(out);
    out.push_str("  - fault: poweron\n  - expect: {node: target, ready: \"True\", within: 1m}\n");
}

/// A drain: cordoned, each group's pods evicted (after the budget's
/// refusals) and gone, replaced elsewhere; uncordoned at the end.
fn drain(
    out: &mut String,
    n: &NodeForecast,
    snap: &Snapshot,
    groups: &[Group<'_>],
) -> Result<(), Error> {
    if let Some(r) = n.refusals.iter().find(|r| r.disruptions_allowed <= 0) {
        return Err(Error::Unsupported(format!(
            "the budget {} refuses every eviction of {}'s pods now ({}); a drain of it would wait \
             for ever, and no scenario can check that to an end: the prediction is the report's",
            r.budget, n.node, r.detail
        )));
    }
    let here: Vec<&Pod> = snap
        .pods
        .iter()
        .filter(|p| p.node.as_deref() == Some(n.node.as_str()) && p.live())
        .collect();
    if let Some(bare) = here.iter().find(|p| p.owner == Owner::None) {
        return Err(Error::Unsupported(format!(
            "a drain of {} stops at {}, a pod no controller recreates (`kubectl drain` needs \
             --force for it); nothing to check to an end",
            n.node,
            bare.key()
        )));
    }
    let empty_dir = here.iter().any(|p| p.empty_dir);
    let _ = writeln!(
        out,
        "  # as `kubectl drain --ignore-daemonsets{}`\n  - id: drain\n    action: {{drain: {{nodes: [target], ignoreDaemonsets: true{}, timeout: 3m}}}}",
        if empty_dir {
            " --delete-emptydir-data"
        } else {
            ""
        },
        if empty_dir {
            ", deleteEmptydirData: true"
        } else {
            ""
        },
    );
    out.push_str("  - expect: {node: target, unschedulable: true, within: 5s, since: drain}\n");
    let mut ph = Phases::default();
    for (i, g) in groups.iter().enumerate() {
        let refused = refusing_budget(snap, n, g);
        let grace = g.pods.iter().map(|p| p.grace_seconds).max().unwrap_or(30);
        let id = format!("gone-{}", i + 1);
        let _ = writeln!(
            ph.first,
            "  - id: {id}\n    name: {} evicted{} and gone from the node\n    expect: {{pods: \"{}\", on: target, count: 0, terminating: false, within: {}s{}, since: drain}}",
            g.owner.label(),
            if refused.is_some() {
                ", after the budget's refusals,"
            } else {
                ""
            },
            g.selector,
            grace + 5,
            if refused.is_some() { " + 1m" } else { "" }
        );
        if let Some(b) = refused {
            let _ = writeln!(
                ph.holds,
                "  - name: the budget {}/{} holds through the drain\n    expect: {{pods: \"{}\", readyAtLeast: {}, holdsFor: 30s, since: drain}}",
                b.namespace, b.name, g.selector, b.desired_healthy
            );
        }
        g.replacements(&id, &mut ph.replaced, &mut ph.holds);
    }
    ph.into_steps(out);
    out.push_str(
        "  - action: {uncordon: {node: target}}\n  - expect: {node: target, unschedulable: false, within: 10s}\n",
    );
    Ok(())
}

/// The budget that refuses some of the drain's evictions and selects
/// exactly the group's pods' labels (`matchLabels` only, the same as the
/// group's selector), so its floor of healthy pods can be checked on the
/// group's selector.
fn refusing_budget<'a>(snap: &'a Snapshot, n: &NodeForecast, g: &Group<'_>) -> Option<&'a Budget> {
    snap.budgets
        .iter()
        .filter(|b| {
            let name = format!("{}/{}", b.namespace, b.name);
            n.refusals.iter().any(|r| r.budget == name)
        })
        .find(|b| {
            b.selector.as_ref().is_some_and(|s| {
                s.match_expressions.is_empty()
                    && s.match_labels
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                        == g.selector
            })
        })
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

    fn written_from(
        snap: &Snapshot,
        fault: Fault,
        graceful: &[(String, Graceful)],
    ) -> Result<String, Error> {
        let f = forecast(
            snap,
            &TimingProfile::upstream_default(),
            fault,
            &Ask {
                nodes: &["w1".to_owned()],
                graceful,
                ..Ask::default()
            },
        )
        .unwrap();
        write(&f, snap, "shop")
    }

    fn written(fault: Fault) -> Result<String, Error> {
        written_from(&cluster(), fault, &[])
    }

    /// The text holds every line, and loads and validates as a scenario.
    fn holds(text: &str, lines: &[&str]) -> crate::scenario::checked::Checked {
        for line in lines {
            assert!(text.contains(line), "{line}\nin\n{text}");
        }
        let checked = load_str("predicted.yaml", std::path::Path::new("."), text)
            .and_then(|l| validate(l, &Memory::default()))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        // every window reachable after the steps before it, with the
        // timings it was predicted with
        crate::plan::resolve(checked.clone(), &TimingProfile::upstream_default(), None)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        checked
    }

    #[test]
    fn the_written_scenario_holds_the_prediction_and_validates() {
        let text = written(Fault::Pause).unwrap();
        let checked = holds(
            &text,
            &[
                "target: {name: w1}",
                "    fault: pause-vm",
                "  - expect: {service: db, on: target, readyEndpoints: 0,",
                "    expect: {pods: \"app=web\", on: target, terminating: true, within: 299s .. 303s, since: tainted}",
                "    expect: {pods: \"app=web\", notOn: target, readyAtLeast: 3, within: 30s, since: evicted-1}",
                "    expect: {pods: \"app=web\", notOn: target, ready: 3, holdsFor: 10s}",
                "    expect: {pods: \"app=db\", on: target, terminating: true, holdsFor: 2*podGcPeriod}",
                "  - fault: resume-vm",
                "  - expect: {node: target, ready: \"True\", within: 2*nodeStatusUpdateFrequency + 5s}",
            ],
        );
        assert_eq!(checked.name, "predict-pause-w1");
    }

    #[test]
    fn a_graceful_shutdown_is_written_as_the_kubelet_runs_it() {
        let g = [(
            "w1".to_owned(),
            Graceful {
                grace_ms: 20_000,
                critical_ms: 5_000,
            },
        )];
        let text = written_from(&cluster(), Fault::Shutdown, &g).unwrap();
        holds(
            &text,
            &[
                "    expect: {node: target, gracefulShutdown: will-run}",
                "    fault: shutdown",
                "    expect: {node: target, ready: \"False\", within: 5s, since: fault}",
                // 15 s for the pods that are not critical, 5 s for the API
                "    expect: {pods: \"app=web\", on: target, ready: 0, within: 20s, since: fault}",
                "    expect: {pods: \"app=web\", notOn: target, readyAtLeast: 3, within: 30s, since: stopped-1}",
                // a StatefulSet's pod too: a stopped pod is deleted at once
                "    expect: {pods: \"app=db\", notOn: target, readyAtLeast: 1, within: 1m, since: stopped-2}",
                "  - expect: {node: target, ready: Unknown, within: 20s + grace + monitorPeriod + 2s, since: fault}",
                "  - fault: poweron",
            ],
        );
        assert!(!text.contains("terminating"), "{text}");
    }

    #[test]
    fn a_drain_is_written_with_its_budget_and_refused_where_it_would_wait_for_ever() {
        // web's budget allows no disruption: the drain would never end
        let e = written(Fault::Drain).unwrap_err();
        assert!(
            e.to_string()
                .contains("the budget shop/web refuses every eviction of w1"),
            "{e}"
        );
        // one disruption allowed: w1's two web pods go one after the other
        let mut snap = cluster();
        snap.budgets[0].disruptions_allowed = 1;
        snap.budgets[0].desired_healthy = 2;
        snap.pods[0].grace_seconds = 10;
        let text = written_from(&snap, Fault::Drain, &[]).unwrap();
        holds(
            &text,
            &[
                "    action: {drain: {nodes: [target], ignoreDaemonsets: true, timeout: 3m}}",
                "  - expect: {node: target, unschedulable: true, within: 5s, since: drain}",
                "    name: Deployment/web evicted, after the budget's refusals, and gone from the node",
                "    expect: {pods: \"app=web\", on: target, count: 0, terminating: false, within: 35s + 1m, since: drain}",
                "    expect: {pods: \"app=web\", readyAtLeast: 2, holdsFor: 30s, since: drain}",
                "    expect: {pods: \"app=web\", notOn: target, readyAtLeast: 3, within: 30s, since: gone-1}",
                // db's pod: no budget, its own 30 s grace
                "    expect: {pods: \"app=db\", on: target, count: 0, terminating: false, within: 35s, since: drain}",
                "    expect: {pods: \"app=db\", notOn: target, readyAtLeast: 1, within: 1m, since: gone-2}",
                "  - action: {uncordon: {node: target}}",
            ],
        );
        // a bare pod stops a drain without --force
        snap.pods[1].owner = Owner::None;
        let e = written_from(&snap, Fault::Drain, &[]).unwrap_err();
        assert!(e.to_string().contains("stops at shop/web-b"), "{e}");
    }

    #[test]
    fn many_nodes_are_refused_by_name() {
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
