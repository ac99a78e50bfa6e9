//! `report.md`'s Key metrics: the recovery's milestones after T0 (node
//! NotReady, NoExecute taint, first eviction, workload and node Ready
//! again) with their UTC times, the Ready-pod counts and the detection lag.

use std::fmt::Write as _;

use super::format::{MISSING, had_fault, secs, t0_rel, table, utc_time};
use crate::record::RunResult;
use crate::timeline::Ms;

/// The Key metrics table, and what its detection lag is measured against.
pub(super) fn section(out: &mut String, r: &RunResult) {
    let m = &r.metrics;
    let _ = writeln!(out, "## Key metrics\n");
    if r.t0.is_none() {
        let _ = writeln!(
            out,
            "No fault or action started (no T0), so nothing was measured.\n"
        );
    }
    let fault = had_fault(r);
    if !fault && r.t0.is_some() {
        let _ = writeln!(
            out,
            "No fault was injected (no `fault` step ran), so node-failure metrics are listed only \
             where a target node did fail.\n"
        );
    }
    let time_row = |name: &str, v: Option<Ms>| {
        let [value, utc] = metric_time(r, v);
        [name.to_string(), value, utc]
    };
    // A node failure not observed is news after a fault (or once a target
    // node failed anyway), not after a drain.
    let failed = fault || m.node_not_ready.is_some();
    let failure_row =
        |name: &str, v: Option<Ms>| (failed || v.is_some()).then(|| time_row(name, v));
    let lag = |v: Option<Ms>| v.map(secs).unwrap_or_else(|| "not observed".into());
    let mut rows: Vec<[String; 3]> = [
        failure_row("Target node NotReady/Unknown", m.node_not_ready),
        failure_row("NoExecute taint on the target node", m.no_execute_taint),
    ]
    .into_iter()
    .flatten()
    .collect();
    rows.extend([
        time_row(
            "First eviction (pod on a target node Terminating)",
            m.first_eviction,
        ),
        time_row(
            "Workload ready again (as many Ready pods as before T0)",
            m.workload_ready_again,
        ),
    ]);
    rows.extend(failure_row("Target node Ready again", m.node_ready_again));
    rows.extend([
        [
            "Ready pods before T0".into(),
            m.ready_before.to_string(),
            MISSING.into(),
        ],
        [
            "Most Ready pods missing at once after T0".into(),
            m.max_unavailable.to_string(),
            MISSING.into(),
        ],
        [
            format!("{LAG_VS}, median"),
            lag(m.detection_lag_median),
            MISSING.into(),
        ],
        [
            format!("{LAG_VS}, max"),
            lag(m.detection_lag_max),
            MISSING.into(),
        ],
    ]);
    out.push_str(&table(["metric", "value", "UTC"], rows));
    // Each node's failure, as the rows above: not after a drain.
    if failed {
        per_node(out, &m.nodes);
    }
    if m.detection_lag_median.is_some() {
        let _ = writeln!(
            out,
            "\nDetection lag is when nodefall saw a change after T0 minus the time the API server \
             wrote into the object for it (conditions' `lastTransitionTime`, taints' `timeAdded`, \
             pods' `deletionTimestamp`). Those stamps are whole seconds, so a lag reads up to 1s \
             longer than it was{}.",
            if r.audit.is_some() {
                "; the audit section's lag is measured against the audit log's microsecond \
                 stamps instead"
            } else {
                ""
            }
        );
    }
    out.push('\n');
}

/// Each failed node's milestones (the run's faults hit more than one), and
/// how far apart they were: the first and last node to be detected,
/// tainted, evicted and back.
fn per_node(out: &mut String, nodes: &[crate::timeline::node_times::NodeTimes]) {
    if nodes.is_empty() {
        return;
    }
    let at = |v: Option<Ms>| v.map_or_else(|| "not observed".into(), t0_rel);
    let mut rows: Vec<[String; 6]> = nodes
        .iter()
        .map(|n| {
            [
                format!("`{}`", n.node),
                at(n.not_ready),
                at(n.no_schedule_taint),
                at(n.no_execute_taint),
                at(n.first_eviction),
                at(n.ready_again),
            ]
        })
        .collect();
    let s = crate::timeline::node_times::spread(nodes);
    let spread = |v: Option<(Ms, usize)>| match v {
        Some((ms, count)) => format!("{} over {count} node{}", secs(ms), plural(count)),
        None => MISSING.into(),
    };
    rows.push([
        "spread (last - first)".into(),
        spread(s.not_ready),
        MISSING.into(),
        spread(s.no_execute_taint),
        spread(s.first_eviction),
        spread(s.ready_again),
    ]);
    let _ = writeln!(
        out,
        "
Per node ({} target nodes):
",
        nodes.len()
    );
    out.push_str(&table(
        [
            "node",
            "NotReady/Unknown",
            "NoSchedule taint",
            "NoExecute taint",
            "first eviction",
            "Ready again",
        ],
        rows,
    ));
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The Key-metrics lag says what it is measured against: the objects' own
/// whole-second stamps, not the audit log's.
const LAG_VS: &str = "Detection lag vs whole-second server timestamps";

/// A metric relative to T0, with its UTC time.
fn metric_time(result: &RunResult, rel_t0: Option<Ms>) -> [String; 2] {
    match rel_t0 {
        None => ["not observed".into(), MISSING.into()],
        Some(ms) => [
            t0_rel(ms),
            result
                .t0_plus(ms)
                .map(|at| utc_time(result.wall_clock(at)))
                .unwrap_or_else(|| MISSING.into()),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::node_times::NodeTimes;
    use serde_json::json;

    #[test]
    fn a_set_s_nodes_have_a_row_each_and_a_spread() {
        let mut r: RunResult = serde_json::from_value(json!({
            "schemaVersion": crate::record::SCHEMA_VERSION,
            "scenario": "s", "file": "s.yaml", "backend": "kind",
            "profile": crate::profile::TimingProfile::fast(),
            "namespace": "ns", "targets": {}, "sets": {"zone-a": ["w1", "w2"]},
            "startedAt": "2026-11-25T15:01:56.691Z", "t0": 1_000,
            "finished": 60_000, "verdict": "pass",
            "steps": [{"label": "#1", "kind": "fault", "description": "poweroff", "started": 1_000,
                       "ended": 1_100, "outcome": {"status": "ok"},
                       "fault": {"fault": "poweroff", "node": "zone-a"}}],
            "expectations": [], "cleanup": [],
            "metrics": crate::timeline::metrics::Metrics::default(),
            "transitions": [],
        }))
        .unwrap();
        let mut drained = r.clone();
        drained.steps.clear();
        r.metrics.nodes = vec![
            NodeTimes {
                node: "w1".into(),
                not_ready: Some(8_000),
                ready_again: Some(30_500),
                ..NodeTimes::default()
            },
            NodeTimes {
                node: "w2".into(),
                not_ready: Some(8_400),
                no_schedule_taint: Some(8_450),
                no_execute_taint: Some(18_000),
                ready_again: Some(29_000),
                ..NodeTimes::default()
            },
        ];
        let mut out = String::new();
        section(&mut out, &r);
        let rows: Vec<Vec<&str>> = out
            .lines()
            .skip_while(|l| !l.starts_with("Per node"))
            .filter(|l| l.starts_with("| `") || l.starts_with("| spread"))
            .map(|l| {
                l.split('|')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .collect();
        assert_eq!(
            rows,
            [
                [
                    "`w1`",
                    "T0+8.000s",
                    "not observed",
                    "not observed",
                    "not observed",
                    "T0+30.500s"
                ],
                [
                    "`w2`",
                    "T0+8.400s",
                    "T0+8.450s",
                    "T0+18.000s",
                    "not observed",
                    "T0+29.000s"
                ],
                [
                    "spread (last - first)",
                    "0.400s over 2 nodes",
                    MISSING,
                    "0.000s over 1 node",
                    MISSING,
                    "1.500s over 2 nodes"
                ],
            ],
            "{out}"
        );
        // After a drain (no fault, no node failed): no node failure to list.
        drained.metrics.nodes = r.metrics.nodes.clone();
        for n in &mut drained.metrics.nodes {
            n.not_ready = None;
        }
        let mut out = String::new();
        section(&mut out, &drained);
        assert!(!out.contains("Per node"), "{out}");
    }
}
