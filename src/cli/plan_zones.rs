//! `plan`'s Zones section: the scenario's targets resolved against the
//! cluster's nodes (or the throwaway sim's), and when its faults break more
//! than one node, what the node lifecycle controller's zone rules make of
//! them (`disruption::forecast`).

use crate::disruption::{self, ZoneNode};
use crate::plan::Plan;
use crate::scenario::resolve::{self, NodeLabels};

/// Whether the scenario's faults may break more than one node: a fault on
/// a set, or faults on two targets (which may still be one node).
fn wanted(plan: &Plan) -> bool {
    let broken = resolve::broken_targets(&plan.scenario);
    broken.len() > 1
        || plan
            .scenario
            .targets
            .iter()
            .any(|t| t.is_set() && broken.contains(t.name.as_str()))
}

/// The section, or None when the faults break fewer than two nodes.
pub fn section(plan: &Plan, nodes: &[(NodeLabels, ZoneNode)]) -> Option<String> {
    if !wanted(plan) {
        return None;
    }
    let labelled: Vec<NodeLabels> = nodes.iter().map(|(l, _)| l.clone()).collect();
    // `mostPods` needs the pods, which exist only once setup has run.
    let resolved = match resolve::resolve(&plan.scenario.targets, &labelled, &[]) {
        Ok(r) => r,
        Err(why) => return Some(format!("Zones      not forecast: {why}\n")),
    };
    let broken = resolved.broken_nodes(&plan.scenario);
    if broken.len() < 2 {
        return None;
    }
    let zone_nodes: Vec<ZoneNode> = nodes.iter().map(|(_, z)| z.clone()).collect();
    let forecast = disruption::forecast(&zone_nodes, &broken, &plan.profile);
    let mut out = String::new();
    for line in &resolved.lines {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&disruption::render(&forecast, &plan.profile));
    Some(out)
}
