//! The figures of one run that repeat runs aggregate and `report compare`
//! sets side by side: each recovery metric of `result.json`, under the same
//! name, plus a few derived from the per-pod and probe records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::RunResult;
use crate::record::remediation::Release;
use crate::timeline::Ms;

/// How a figure reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Milliseconds (after T0, or a duration).
    Ms,
    /// A count (pods, requests).
    Count,
}

impl Unit {
    /// A value of this unit for people: `12.3s`, `4`.
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Ms => crate::duration::secs(v.round() as i64),
            Unit::Count => {
                if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.1}")
                }
            }
        }
    }

    /// A difference of this unit, signed: `+2.1s`, `-1`.
    pub fn show_delta(self, v: f64) -> String {
        let sign = if v > 0.0 {
            "+"
        } else if v < 0.0 {
            "-"
        } else {
            "±"
        };
        format!("{sign}{}", self.show(v.abs()))
    }
}

/// One kind of figure: its name in `result.json`, unit and meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Def {
    pub name: &'static str,
    pub unit: Unit,
    pub about: &'static str,
    /// Whether `--fail-if-slower` looks at it: the cluster's recovery, not
    /// the baseline count or nodefall's own detection lag.
    pub gated: bool,
}

/// Every figure, in the order reports list them.
pub const DEFS: [Def; 17] = [
    def(
        "nodeNotReady",
        Unit::Ms,
        "a target node's Ready left True",
        true,
    ),
    def("noExecuteTaint", Unit::Ms, "the NoExecute taint", true),
    def(
        "firstEviction",
        Unit::Ms,
        "first pod Terminating on a target node",
        true,
    ),
    def(
        "workloadReadyAgain",
        Unit::Ms,
        "as many pods Ready as before T0",
        true,
    ),
    def(
        "lastReplacementReady",
        Unit::Ms,
        "the last replacement pod Ready",
        true,
    ),
    def(
        "longestTerminating",
        Unit::Ms,
        "longest a target pod stayed Terminating",
        true,
    ),
    def(
        "nodeReadyAgain",
        Unit::Ms,
        "the target node Ready again",
        true,
    ),
    def(
        "staleEndpointWindow",
        Unit::Ms,
        "the target nodes' endpoints unready",
        true,
    ),
    def("errorWindow", Unit::Ms, "longest probe error window", true),
    def(
        "detachAfterOutOfServiceMax",
        Unit::Ms,
        "volumes detached after the out-of-service taint",
        true,
    ),
    def(
        "maxUnavailable",
        Unit::Count,
        "most Ready pods missing",
        true,
    ),
    def("probeErrors", Unit::Count, "failed probe requests", true),
    def(
        "remediationDecision",
        Unit::Ms,
        "the node NotReady .. the first remediation act",
        true,
    ),
    def(
        "remediationRelease",
        Unit::Ms,
        "the first act .. the node's VolumeAttachments gone",
        true,
    ),
    def(
        "remediationRecovery",
        Unit::Ms,
        "the first act .. the last replacement Ready",
        true,
    ),
    def(
        "detectionLagMedian",
        Unit::Ms,
        "nodefall's observation lag, median",
        false,
    ),
    def(
        "detectionLagMax",
        Unit::Ms,
        "nodefall's observation lag, largest",
        false,
    ),
];

const fn def(name: &'static str, unit: Unit, about: &'static str, gated: bool) -> Def {
    Def {
        name,
        unit,
        about,
        gated,
    }
}

/// The definition of a figure by name.
pub fn find(name: &str) -> Option<&'static Def> {
    DEFS.iter().find(|d| d.name == name)
}

/// The figures a run observed, by name (absent: not observed). Times are ms
/// after T0, as in `result.json`'s `metrics`.
pub fn of(r: &RunResult) -> BTreeMap<String, i64> {
    let m = &r.metrics;
    let max = |it: &mut dyn Iterator<Item = Ms>| it.max();
    let remediation = r.remediation.as_ref();
    let values: [(&str, Option<i64>); 17] = [
        ("nodeNotReady", m.node_not_ready),
        ("noExecuteTaint", m.no_execute_taint),
        ("firstEviction", m.first_eviction),
        ("workloadReadyAgain", m.workload_ready_again),
        (
            "lastReplacementReady",
            max(&mut m.pods.iter().filter_map(|p| p.replacement_ready)),
        ),
        (
            "longestTerminating",
            max(&mut m.pods.iter().filter_map(|p| p.terminating_for)),
        ),
        ("nodeReadyAgain", m.node_ready_again),
        ("staleEndpointWindow", m.endpoints.stale_endpoint_window),
        ("errorWindow", m.error_window),
        (
            "detachAfterOutOfServiceMax",
            m.detach_after_out_of_service_max,
        ),
        ("maxUnavailable", r.t0.map(|_| i64::from(m.max_unavailable))),
        (
            "probeErrors",
            (!r.probes.is_empty()).then(|| {
                r.probes
                    .iter()
                    .map(|p| i64::try_from(p.errors).unwrap_or(i64::MAX))
                    .sum()
            }),
        ),
        ("remediationDecision", remediation.and_then(|x| x.decision)),
        (
            "remediationRelease",
            remediation.and_then(|x| match x.release {
                Release::Released { after } => Some(after),
                Release::NoAttachments | Release::NotReleased { .. } => None,
            }),
        ),
        ("remediationRecovery", remediation.and_then(|x| x.recovery)),
        ("detectionLagMedian", m.detection_lag_median),
        ("detectionLagMax", m.detection_lag_max),
    ];
    values
        .into_iter()
        .filter_map(|(name, v)| Some((name.to_owned(), v?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_has_a_definition_in_order() {
        let r: RunResult = serde_json::from_str(include_str!(
            "../../../../tests/fixtures/results/statefulset-pass.json"
        ))
        .unwrap();
        let figures = of(&r);
        assert!(!figures.is_empty());
        for name in figures.keys() {
            assert!(find(name).is_some(), "{name} has no definition");
        }
        assert_eq!(
            figures.get("nodeNotReady").copied(),
            r.metrics.node_not_ready
        );
    }

    #[test]
    fn units_read_as_people_write_them() {
        assert_eq!(Unit::Ms.show(12_345.0), "12.345s");
        assert_eq!(Unit::Count.show(4.0), "4");
        assert_eq!(Unit::Count.show(2.5), "2.5");
        assert_eq!(Unit::Ms.show_delta(-1500.0), "-1.500s");
        assert_eq!(Unit::Count.show_delta(2.0), "+2");
    }
}
