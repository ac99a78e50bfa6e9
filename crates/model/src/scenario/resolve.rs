//! A scenario's targets resolved against a cluster's nodes (pure): the one
//! rule the run's preflight and `plan --context/--cluster` both follow.

use std::collections::{BTreeMap, BTreeSet};

use super::checked::{Checked, StepKind, Target, TargetSelector};
use super::fault::Does;

/// A node as target resolution sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLabels {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// Every target's node or, for a set, its nodes, with the lines the run logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub targets: BTreeMap<String, String>,
    pub sets: BTreeMap<String, Vec<String>>,
    /// `target down = 3 nodes: worker-2, worker-4, worker-6`, one per target.
    pub lines: Vec<String>,
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Resolves `targets` in order (a target's `exclude` names earlier ones)
/// against `nodes`; `pods` (each one's node and labels) are what `mostPods`
/// counts. The error says which target matched what, and the nodes there are.
pub fn resolve(
    targets: &[Target],
    nodes: &[NodeLabels],
    pods: &[(String, BTreeMap<String, String>)],
) -> Result<Resolved, String> {
    let mut names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    names.sort_unstable();
    let mut out = Resolved::default();
    for target in targets {
        let excluded: BTreeSet<&String> = target
            .exclude
            .iter()
            .flat_map(|t| {
                let set = out.sets.get(t).into_iter().flatten();
                out.targets.get(t).into_iter().chain(set)
            })
            .collect();
        let candidates: Vec<&NodeLabels> = nodes
            .iter()
            .filter(|n| !excluded.contains(&n.name))
            .collect();
        let chosen = match &target.selector {
            TargetSelector::Name(n) => candidates
                .iter()
                .find(|c| c.name == *n)
                .map(|c| c.name.clone()),
            TargetSelector::Role(role) => candidates
                .iter()
                .filter(|n| {
                    if role == "worker" {
                        !n.labels
                            .contains_key("node-role.kubernetes.io/control-plane")
                    } else {
                        n.labels
                            .contains_key(&format!("node-role.kubernetes.io/{role}"))
                    }
                })
                .map(|n| n.name.clone())
                .min(),
            TargetSelector::MostPods(sel) => {
                let mut counts: BTreeMap<&str, usize> =
                    candidates.iter().map(|n| (n.name.as_str(), 0)).collect();
                for (node, _) in pods.iter().filter(|(_, labels)| sel.matches(labels)) {
                    if let Some(c) = counts.get_mut(node.as_str()) {
                        *c += 1;
                    }
                }
                // Most pods; ties go to the first name.
                counts
                    .into_iter()
                    .filter(|(_, n)| *n > 0)
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
                    .map(|(n, _)| n.to_owned())
            }
            TargetSelector::Nodes { selector, pick } => {
                let mut matched: Vec<String> = candidates
                    .iter()
                    .filter(|n| selector.matches(&n.labels))
                    .map(|n| n.name.clone())
                    .collect();
                matched.sort();
                let Some(take) = pick.of(matched.len()).filter(|n| *n > 0) else {
                    return Err(format!(
                        "target `{}` ({}) matches {} node{}: {}",
                        target.name,
                        target.describe(),
                        matched.len(),
                        plural(matched.len()),
                        if matched.is_empty() {
                            format!("the cluster's nodes are {}", names.join(", "))
                        } else {
                            matched.join(", ")
                        }
                    ));
                };
                matched.truncate(take);
                out.lines.push(format!(
                    "target {} = {} node{}: {}",
                    target.name,
                    matched.len(),
                    plural(matched.len()),
                    matched.join(", ")
                ));
                out.sets.insert(target.name.clone(), matched);
                continue;
            }
        };
        let Some(node) = chosen else {
            return Err(format!(
                "target `{}` ({}) matches no node; nodes: {}",
                target.name,
                target.describe(),
                names.join(", ")
            ));
        };
        out.lines
            .push(format!("target {} = node {node}", target.name));
        out.targets.insert(target.name.clone(), node);
    }
    Ok(out)
}

/// The targets a fault step of `scenario` breaks (pauses, powers off, shuts
/// down, stops the kubelet of, cuts off).
pub fn broken_targets(scenario: &Checked) -> BTreeSet<&str> {
    scenario
        .steps
        .iter()
        .filter_map(|step| match &step.kind {
            StepKind::Fault { fault, node } if matches!(fault.props().does, Does::Breaks(_)) => {
                Some(node.as_str())
            }
            _ => None,
        })
        .collect()
}

/// The nodes those targets name in `targets` and `sets`: those that fail.
pub fn broken_nodes(
    scenario: &Checked,
    targets: &BTreeMap<String, String>,
    sets: &BTreeMap<String, Vec<String>>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for target in broken_targets(scenario) {
        out.extend(targets.get(target).cloned());
        out.extend(sets.get(target).into_iter().flatten().cloned());
    }
    out
}

impl Resolved {
    /// The nodes a fault step of `scenario` breaks, as resolved here.
    pub fn broken_nodes(&self, scenario: &Checked) -> BTreeSet<String> {
        broken_nodes(scenario, &self.targets, &self.sets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: &[(&str, &str)]) -> NodeLabels {
        NodeLabels {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn checked(yaml: &str) -> Checked {
        crate::scenario::load::load_str("t.yaml", std::path::Path::new("."), yaml)
            .and_then(|l| crate::scenario::validate::validate(l, &crate::files::Memory::default()))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn sets_names_roles_and_excludes_resolve_in_order() {
        let s = checked(
            "name: t\nnamespace: t\ntargets:\n  \
             cp: {role: control-plane}\n  \
             down: {nodes: topology.kubernetes.io/zone=b, count: 2}\n  \
             other: {role: worker, exclude: [down]}\n\
             steps:\n  - fault: pause-vm\n    node: down\n  - fault: resume-vm\n    node: down\n",
        );
        let nodes = [
            node("cp", &[("node-role.kubernetes.io/control-plane", "")]),
            node("w1", &[("topology.kubernetes.io/zone", "a")]),
            node("w2", &[("topology.kubernetes.io/zone", "b")]),
            node("w4", &[("topology.kubernetes.io/zone", "b")]),
            node("w6", &[("topology.kubernetes.io/zone", "b")]),
        ];
        let r = resolve(&s.targets, &nodes, &[]).unwrap();
        assert_eq!(r.targets["cp"], "cp");
        assert_eq!(r.sets["down"], ["w2", "w4"]);
        assert_eq!(r.targets["other"], "w1");
        assert_eq!(r.lines[1], "target down = 2 nodes: w2, w4");
        let broken: Vec<String> = r.broken_nodes(&s).into_iter().collect();
        assert_eq!(broken, ["w2", "w4"]);
        let err = resolve(&s.targets, &nodes[..3], &[]).unwrap_err();
        assert!(err.contains("matches 1 node: w2"), "{err}");
    }
}
