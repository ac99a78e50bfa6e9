//! The "What clients see" section of `report.md`: how long the failed
//! nodes' endpoints stayed ready (the Kubernetes part of the client error
//! window), each Service's ready endpoints over time, and the HTTP probes'
//! error windows and latency.

use std::fmt::Write as _;

use super::format::{cell, secs, t0_rel};
use super::markdown::table;
use crate::record::RunResult;
use crate::timeline::endpoints::EndpointMetrics;

/// The Clients band of the mermaid timeline: each failed node's endpoint
/// from T0 until it stopped being ready (active: still routed to), then the
/// probes' error windows and the spans between them.
pub(super) fn bars(r: &RunResult) -> Vec<(String, &'static str, i64, i64)> {
    let mut out = Vec::new();
    if let Some(t0) = r.t0 {
        for s in &r.metrics.endpoints.stale_endpoints {
            let end = s.unready_at.map_or(r.finished, |u| t0 + u);
            out.push((
                format!(
                    "{} endpoint {} on {} still ready",
                    s.service, s.address, s.node
                ),
                "active",
                t0,
                end,
            ));
        }
    }
    out.extend(super::probes::bars(r));
    out
}

/// Shown for a value the run did not observe.
const MISSING: &str = "—";

/// Ready-endpoint changes listed per Service before the rest is summarised.
const MAX_POINTS: usize = 12;

pub(super) fn section(out: &mut String, r: &RunResult) {
    let e = &r.metrics.endpoints;
    if e.ready_endpoints.is_empty() && e.stale_endpoints.is_empty() && r.probes.is_empty() {
        return;
    }
    let _ = writeln!(out, "## What clients see\n");
    endpoints(out, e, super::markdown::had_fault(r));
    super::probes::section(out, r);
}

/// `fault`: the run injected one, so the target nodes failed (else they
/// were drained or changed by actions, and were not dead).
fn endpoints(out: &mut String, e: &EndpointMetrics, fault: bool) {
    // What the nodes were, what clients routed there met, and where they
    // could be routed.
    let (nodes, dead, routed_to) = if fault {
        ("failed", "reached a dead node", "a dead node")
    } else {
        ("target", "were routed to those nodes", "them")
    };
    if !e.stale_endpoints.is_empty() {
        let still = e
            .stale_endpoints
            .iter()
            .filter(|s| s.unready_at.is_none())
            .count();
        match e.stale_endpoint_window {
            Some(ms) => {
                let _ = writeln!(
                    out,
                    "The {nodes} nodes' endpoints stayed ready for **{}** after T0 (`staleEndpointWindow`): \
                     clients routed to them meanwhile {dead}. This is the Kubernetes part of \
                     the client error window.\n",
                    secs(ms)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "**{still} of the {nodes} nodes' {} endpoints were still ready when the steps ended**: \
                     clients could be routed to {routed_to} throughout.\n",
                    e.stale_endpoints.len(),
                );
            }
        }
        let rows = e
            .stale_endpoints
            .iter()
            .map(|s| {
                [
                    cell(&s.service),
                    cell(&s.address),
                    s.pod.as_deref().map_or_else(|| MISSING.to_owned(), cell),
                    cell(&s.node),
                    s.unready_at
                        .map_or_else(|| "still ready".to_owned(), t0_rel),
                ]
            })
            .collect();
        out.push_str(&table(
            ["Service", "Endpoint", "Pod", "Node", "Not ready at"],
            rows,
        ));
        out.push('\n');
    } else if !e.ready_endpoints.is_empty() {
        let _ = writeln!(
            out,
            "No endpoint on the {nodes} nodes was ready at T0, so none stayed ready after it.\n"
        );
    }
    if e.ready_endpoints.is_empty() {
        return;
    }
    let rows = e
        .ready_endpoints
        .iter()
        .map(|s| {
            let mut changes: Vec<String> = s
                .points
                .iter()
                .skip(1)
                .take(MAX_POINTS)
                .map(|(at, n)| format!("{}: {n}", t0_rel(*at)))
                .collect();
            let more = s.points.len().saturating_sub(MAX_POINTS + 1);
            if more > 0 {
                changes.push(format!("{more} more in result.json"));
            }
            [
                cell(&s.service),
                s.ready_before.to_string(),
                s.min_ready.to_string(),
                if changes.is_empty() {
                    "no change".to_owned()
                } else {
                    cell(&changes.join(", "))
                },
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "Service",
            "Ready endpoints before T0",
            "Fewest after T0",
            "Changes",
        ],
        rows,
    ));
    out.push('\n');
}
