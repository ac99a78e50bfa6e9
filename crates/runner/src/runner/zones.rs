//! The zone rules in a run: before the first fault, when the faults break
//! more than one node, what the node lifecycle controller's rules make of
//! them (logged, and kept for the record); at the end, what they did.

use k8s_openapi::api::core::v1::Node;

use super::Run;
use crate::discover::nodes::zone_node;
use crate::disruption;
use crate::record::RunResult;
use crate::scenario::resolve;
use crate::timeline::zones::{self, ZonesRecord};

/// What the preflight saw and forecast.
pub(super) struct ZonePlan {
    nodes: Vec<disruption::ZoneNode>,
    forecast: disruption::Forecast,
}

impl Run<'_> {
    /// Forecasts the zones from the cluster's `nodes` once the targets are
    /// resolved, when the faults break two nodes or more.
    pub(super) fn forecast_zones(&mut self, nodes: &[Node]) {
        let broken = resolve::broken_nodes(&self.plan.scenario, &self.targets, &self.sets);
        if broken.len() < 2 {
            return;
        }
        let zone_nodes: Vec<disruption::ZoneNode> = nodes.iter().map(zone_node).collect();
        let forecast = disruption::forecast(&zone_nodes, &broken, &self.plan.profile);
        for line in disruption::render(&forecast, &self.plan.profile).lines() {
            self.progress.log(line);
        }
        self.zone_plan = Some(ZonePlan {
            nodes: zone_nodes,
            forecast,
        });
    }
}

/// What the zone rules did in `result` (its transitions, T0 and failed
/// nodes' times), from what the preflight forecast.
pub(super) fn record(plan: Option<ZonePlan>, result: &RunResult) -> Option<ZonesRecord> {
    let plan = plan?;
    let t0 = result.t0?;
    let after: Vec<&crate::timeline::Transition> =
        result.transitions.iter().filter(|t| t.at >= t0).collect();
    Some(zones::record(
        plan.nodes,
        plan.forecast,
        &after,
        t0,
        &result.metrics.nodes,
        &result.profile,
    ))
}
