//! The "What clients see" section of `report.md`: how long the failed
//! nodes' endpoints stayed ready (the Kubernetes part of the client error
//! window), each Service's ready endpoints over time, and the HTTP probes'
//! error windows and latency.

use std::fmt::Write as _;

use super::format::{cell, had_fault, secs, t0_rel, table};
use crate::record::{RunResult, StepKind, StepOutcome};
use crate::scenario::model::FaultKind;
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
    endpoints(out, e, &Met::of(r));
    super::probes::section(out, r);
}

/// What clients routed to the target nodes' endpoints met, as far as the
/// run's faults say: the sentence follows the fault, never assumes a death.
struct Met {
    /// `failed` on a run with a fault, else `target`.
    nodes: &'static str,
    /// What clients routed there met, after "clients routed to them meanwhile".
    met: String,
    /// Where they could be routed, after "clients could be routed to".
    routed_to: String,
    /// Whether a stale endpoint is part of the clients' error window.
    errors: bool,
}

impl Met {
    fn of(r: &RunResult) -> Met {
        let mut faults: Vec<FaultKind> = r
            .steps
            .iter()
            .filter(|s| s.kind == StepKind::Fault && s.outcome != StepOutcome::Skipped)
            .filter_map(|s| s.fault.as_ref().map(|f| f.fault))
            .filter(|f| f.breaks())
            .collect();
        // Each kind once, in the order the run first injected it.
        let mut seen = std::collections::BTreeSet::new();
        faults.retain(|f| seen.insert(*f));
        let done = faults
            .iter()
            .map(|f| f.done_to_node())
            .collect::<Vec<_>>()
            .join(" or ");
        if faults.is_empty() && had_fault(r) {
            // A record from before schema 7 does not say which fault.
            return Met {
                nodes: "failed",
                met: "reached a failed node".into(),
                routed_to: "a failed node".into(),
                errors: true,
            };
        }
        if faults.is_empty() {
            return Met {
                nodes: "target",
                met: "were routed to those nodes".into(),
                routed_to: "them".into(),
                errors: false,
            };
        }
        if faults.iter().all(|f| !f.keeps_serving()) {
            return Met {
                nodes: "failed",
                met: format!("reached a node that could not answer ({done})"),
                routed_to: format!("a node that could not answer ({done})"),
                errors: true,
            };
        }
        if faults.iter().all(|f| f.keeps_serving()) {
            return Met {
                nodes: "failed",
                met: format!(
                    "reached pods on a node {done}, whose containers keep running: they could \
                     still answer (the probes below say what clients met)"
                ),
                routed_to: format!("pods on a node {done}, whose containers keep running"),
                errors: false,
            };
        }
        Met {
            nodes: "failed",
            met: format!("reached a node {done} (the probes below say what they met)"),
            routed_to: format!("a node {done}"),
            errors: true,
        }
    }
}

fn endpoints(out: &mut String, e: &EndpointMetrics, met: &Met) {
    let (nodes, routed_to) = (met.nodes, met.routed_to.as_str());
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
                     clients routed to them meanwhile {}.{}\n",
                    secs(ms),
                    met.met,
                    if met.errors {
                        " This is the Kubernetes part of the client error window."
                    } else {
                        ""
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run whose one fault step is `fault` on node `w`.
    fn run(fault: &str) -> RunResult {
        serde_json::from_value(json!({
            "schemaVersion": crate::record::SCHEMA_VERSION,
            "scenario": "s", "file": "s.yaml", "backend": "kind",
            "profile": crate::profile::TimingProfile::fast(),
            "namespace": "ns", "targets": {"target": "w"},
            "startedAt": "2026-11-25T15:01:56.691Z",
            "finished": 60_000, "verdict": "pass",
            "steps": [{"label": "#1", "kind": "fault", "description": fault, "started": 1_000,
                       "ended": 1_100, "outcome": {"status": "ok"},
                       "fault": {"fault": fault, "node": "w"}}],
            "expectations": [],
            "cleanup": [],
            "metrics": crate::timeline::metrics::Metrics::default(),
            "transitions": [],
        }))
        .unwrap()
    }

    #[test]
    fn what_clients_met_follows_the_fault() {
        let stopped = Met::of(&run("stop-kubelet"));
        assert!(!stopped.errors);
        assert_eq!(
            stopped.met,
            "reached pods on a node left without its kubelet, whose containers keep running: they \
             could still answer (the probes below say what clients met)"
        );
        let off = Met::of(&run("poweroff"));
        assert!(off.errors);
        assert_eq!(
            off.met,
            "reached a node that could not answer (powered off)"
        );
        let cut = Met::of(&run("drop-nic"));
        assert_eq!(
            cut.routed_to,
            "a node that could not answer (cut off its network)"
        );
        // A kind injected twice, another between: each named once.
        let mut twice = run("pause-vm");
        let mut again = twice.steps[0].clone();
        again.fault.as_mut().unwrap().fault = FaultKind::StopKubelet;
        twice.steps.push(again.clone());
        again.fault.as_mut().unwrap().fault = FaultKind::PauseVm;
        twice.steps.push(again);
        assert_eq!(
            Met::of(&twice).routed_to,
            "a node paused or left without its kubelet"
        );
        for m in [stopped, off, cut] {
            assert!(!m.met.contains("dead"), "{}", m.met);
        }
    }
}
