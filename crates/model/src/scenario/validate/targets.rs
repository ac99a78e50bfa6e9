//! Targets: which node each named target picks, and exclusions between them.

use std::collections::BTreeMap;

use super::{Ctx, one_of, present};
use crate::scenario::checked::{Pick, Target, TargetSelector};
use crate::scenario::model;

pub(super) fn targets(cx: &mut Ctx<'_>, s: &model::Scenario) -> Vec<Target> {
    let mut specs: BTreeMap<String, (String, &model::TargetSpec)> = BTreeMap::new();
    if let Some(t) = &s.target {
        if s.targets.contains_key("target") {
            cx.err_key(
                "target",
                "`target` is defined twice: here and under `targets`",
                None,
            );
        }
        specs.insert("target".into(), ("target".into(), t));
    }
    for (name, t) in &s.targets {
        specs
            .entry(name.clone())
            .or_insert((format!("targets.{name}"), t));
    }
    cx.targets = specs.keys().cloned().collect();
    cx.sets = specs
        .iter()
        .filter(|(_, (_, spec))| spec.nodes.is_some())
        .map(|(name, _)| name.clone())
        .collect();
    let mut out = Vec::new();
    for (name, (path, spec)) in &specs {
        let chosen = present(&[
            ("name", spec.name.is_some()),
            ("role", spec.role.is_some()),
            ("mostPods", spec.most_pods.is_some()),
            ("nodes", spec.nodes.is_some()),
        ]);
        let selector = match (chosen.as_slice(), spec) {
            ([_], model::TargetSpec { name: Some(n), .. }) => {
                cx.node_name(&format!("{path}.name"), n);
                Some(TargetSelector::Name(n.clone()))
            }
            ([_], model::TargetSpec { role: Some(r), .. }) => {
                cx.node_role(&format!("{path}.role"), r);
                Some(TargetSelector::Role(r.clone()))
            }
            (
                [_],
                model::TargetSpec {
                    most_pods: Some(m), ..
                },
            ) => cx
                .selector(&format!("{path}.mostPods"), m)
                .map(TargetSelector::MostPods),
            ([_], model::TargetSpec { nodes: Some(n), .. }) => {
                let pick = pick(cx, path, spec);
                let selector = cx.selector(&format!("{path}.nodes"), n);
                selector
                    .zip(pick)
                    .map(|(selector, pick)| TargetSelector::Nodes { selector, pick })
            }
            _ => {
                let msg = if chosen.is_empty() {
                    format!("target `{name}` does not say which node")
                } else {
                    format!("target `{name}` sets {} at once", one_of(&chosen))
                };
                cx.err(
                    path,
                    msg,
                    Some("give exactly one of `name`, `role`, `mostPods`, `nodes`".into()),
                );
                None
            }
        };
        let mut exclude = Vec::new();
        if spec.nodes.is_none() {
            for (key, given) in [
                ("count", spec.count.is_some()),
                ("percent", spec.percent.is_some()),
            ] {
                if given {
                    cx.err_key(
                        &format!("{path}.{key}"),
                        format!("`{key}` narrows a set of nodes, and target `{name}` is one node"),
                        Some("give it with `nodes: SELECTOR`".into()),
                    );
                }
            }
        }
        for (i, other) in spec.exclude.0.iter().enumerate() {
            let p = format!("{path}.exclude[{i}]");
            if other == name {
                cx.err(&p, format!("target `{name}` excludes itself"), None);
            } else if let Some(o) = cx.any_target_ref(&p, other) {
                exclude.push(o);
            }
        }
        if let Some(selector) = selector {
            out.push(Target {
                name: name.clone(),
                selector,
                exclude,
            });
        }
    }
    // exclusions must not go round in a circle, or neither could be chosen first
    for t in &out {
        for o in &t.exclude {
            if out
                .iter()
                .any(|u| &u.name == o && u.exclude.contains(&t.name))
                && t.name < *o
            {
                let path = specs
                    .get(&t.name)
                    .map(|(p, _)| p.clone())
                    .unwrap_or_default();
                cx.err(
                    &path,
                    format!("targets `{}` and `{o}` exclude each other", t.name),
                    Some("let only the later one exclude the earlier".into()),
                );
            }
        }
    }
    out
}

/// A set's `count` or `percent` (neither: all the nodes that match).
fn pick(cx: &mut Ctx<'_>, path: &str, spec: &model::TargetSpec) -> Option<Pick> {
    match (spec.count, spec.percent) {
        (None, None) => Some(Pick::All),
        (Some(_), Some(_)) => {
            cx.err(
                path,
                "target sets both `count` and `percent`",
                Some("give one: how many of the matching nodes, or what share of them".into()),
            );
            None
        }
        (Some(0), None) => {
            cx.err(
                &format!("{path}.count"),
                "`count: 0` takes no node",
                Some("give 1 or more".into()),
            );
            None
        }
        (Some(n), None) => Some(Pick::Count(n)),
        (None, Some(p)) if p > 0.0 && p <= 100.0 => Some(Pick::Percent(p)),
        (None, Some(p)) => {
            cx.err(
                &format!("{path}.percent"),
                format!("`percent: {p}` is not a share of the nodes"),
                Some("give more than 0 and at most 100".into()),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::checked::{Checked, Pick, StepKind, TargetSelector};
    use crate::scenario::load::load_str;

    fn check(targets: &str, steps: &str) -> Result<Checked, String> {
        let text = format!("name: t\nnamespace: ns\ntargets:\n{targets}steps:\n{steps}");
        load_str("s.yaml", std::path::Path::new("."), &text)
            .and_then(|l| super::super::validate(l, &crate::files::Memory::default()))
            .map_err(|e| e.to_string())
    }

    const FAULT: &str = "  - fault: poweroff\n    node: zone\n";

    #[test]
    fn a_set_of_nodes_is_a_target_a_fault_and_an_exclusion_can_name() {
        let c = check(
            "  zone: {nodes: topology.kubernetes.io/zone=a, percent: 50}\n  \
             other: {role: worker, exclude: zone}\n",
            "  - fault: poweroff\n    node: zone\n  - expect: {node: other, ready: \"True\", within: 1m}\n  \
             - expect: {node: zone, ready: Unknown, within: 1m}\n  \
             - expect: {pods: app=web, notOn: zone, ready: 2, within: 1m}\n",
        )
        .unwrap();
        let zone = c.targets.iter().find(|t| t.name == "zone").unwrap();
        assert!(zone.is_set());
        assert!(matches!(
            zone.selector,
            TargetSelector::Nodes {
                pick: Pick::Percent(50.0),
                ..
            }
        ));
        assert_eq!(
            zone.describe(),
            "the first 50% (rounded up, by name) of the nodes matching \
             `topology.kubernetes.io/zone=a`"
        );
        assert!(matches!(&c.steps[0].kind, StepKind::Fault { node, .. } if node == "zone"));
        assert!(matches!(
            &c.steps[3].kind,
            StepKind::Expect(e) if matches!(
                &e.subject,
                crate::scenario::checked::Subject::Pods { not_on: Some(t), .. } if t == "zone"
            )
        ));
    }

    #[test]
    fn what_a_set_cannot_be_is_refused_with_where_and_what_to_do() {
        for (targets, steps, says) in [
            (
                "  zone: {nodes: zone=a}\n",
                "  - fault: poweroff\n    node: zone\n  - action: {cordon: {node: zone}}\n",
                "target `zone` is a set of nodes (`nodes:`), and this names one node",
            ),
            (
                "  zone: {nodes: zone=a}\n",
                "  - fault: shutdown\n    node: zone\n  - expect: {node: zone, gracefulShutdown: will-run}\n",
                "target `zone` is a set of nodes (`nodes:`), and this names one node",
            ),
            (
                "  zone: {nodes: zone=a, count: 0}\n",
                FAULT,
                "`count: 0` takes no node",
            ),
            (
                "  zone: {nodes: zone=a, count: 1, percent: 5}\n",
                FAULT,
                "target sets both `count` and `percent`",
            ),
            (
                "  zone: {nodes: zone=a, percent: 150}\n",
                FAULT,
                "`percent: 150` is not a share of the nodes",
            ),
            (
                "  zone: {name: w1, count: 2}\n",
                FAULT,
                "`count` narrows a set of nodes, and target `zone` is one node",
            ),
            (
                "  zone: {nodes: zone=a, mostPods: app=web}\n",
                FAULT,
                "target `zone` sets `mostPods`, `nodes` at once",
            ),
            ("  zone: {nodes: \"zone in (a\"}\n", FAULT, "zone in (a"),
            (
                "  zone: {name: w1}\n",
                "  - fault: poweroff\n    node: zone\n  - expect: {node: zone, ready: Unknown, count: 1, within: 1m}\n",
                "`count` on a node expectation counts the nodes of a set, and target `zone` is one node",
            ),
            (
                "  zone: {nodes: zone=a}\n",
                "  - fault: poweroff\n    node: zone\n  - expect: {node: zone, count: 1, within: 1m}\n",
                "`count: 1` counts the nodes of `zone` that meet a condition, and there is none",
            ),
        ] {
            let e = check(targets, steps).unwrap_err();
            assert!(e.contains(says), "{targets}: {e}");
            assert!(e.contains("s.yaml:"), "{e}");
        }
    }

    #[test]
    fn a_pick_takes_its_share_rounded_up_and_refuses_more_than_there_are() {
        assert_eq!(Pick::All.of(3), Some(3));
        assert_eq!(Pick::Count(2).of(3), Some(2));
        assert_eq!(Pick::Count(4).of(3), None);
        assert_eq!(Pick::Percent(50.0).of(3), Some(2));
        assert_eq!(Pick::Percent(1.0).of(3), Some(1));
        assert_eq!(Pick::Percent(100.0).of(100), Some(100));
        assert_eq!(Pick::Percent(50.0).of(0), Some(0));
    }
}
