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
