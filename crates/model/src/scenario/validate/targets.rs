//! Targets: which node each named target picks, and exclusions between them.

use std::collections::BTreeMap;

use super::{Ctx, one_of, present};
use crate::scenario::checked::{Target, TargetSelector};
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
    let mut out = Vec::new();
    for (name, (path, spec)) in &specs {
        let chosen = present(&[
            ("name", spec.name.is_some()),
            ("role", spec.role.is_some()),
            ("mostPods", spec.most_pods.is_some()),
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
            _ => {
                let msg = if chosen.is_empty() {
                    format!("target `{name}` does not say which node")
                } else {
                    format!("target `{name}` sets {} at once", one_of(&chosen))
                };
                cx.err(
                    path,
                    msg,
                    Some("give exactly one of `name`, `role`, `mostPods`".into()),
                );
                None
            }
        };
        let mut exclude = Vec::new();
        for (i, other) in spec.exclude.0.iter().enumerate() {
            let p = format!("{path}.exclude[{i}]");
            if other == name {
                cx.err(&p, format!("target `{name}` excludes itself"), None);
            } else if let Some(o) = cx.target_ref(&p, other) {
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
