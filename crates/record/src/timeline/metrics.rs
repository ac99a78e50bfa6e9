//! Recovery metrics derived from a timeline (pure).

use serde::{Deserialize, Serialize};

use super::Ms;

/// Key figures of a run, relative to T0 (ms) unless said otherwise.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    /// First target node: Ready left True (Unknown or False).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_not_ready: Option<Ms>,
    /// First `node.kubernetes.io/unreachable` or `not-ready` NoExecute taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_execute_taint: Option<Ms>,
    /// First pod on a target node marked Terminating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_eviction: Option<Ms>,
    /// First time after T0 when as many watched pods were Ready as before T0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_ready_again: Option<Ms>,
    /// Pods Ready just before T0 (the baseline).
    pub ready_before: u32,
    /// Most Ready pods missing from the baseline at any time after T0.
    pub max_unavailable: u32,
    /// Target node Ready again after `node_not_ready` (absent when it never
    /// left Ready, as on a run without a fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ready_again: Option<Ms>,
    /// Median of (observed - server timestamp) over the transitions after T0
    /// whose stamp the control plane sets (see [`compute`]), in ms. The
    /// stamps are the objects' own (`lastTransitionTime`, `timeAdded`,
    /// `deletionTimestamp`), whole seconds: each lag is up to 1 s longer
    /// than it was. The audit check measures against the audit log instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection_lag_median: Option<Ms>,
    /// Largest such lag, in ms (the same whole-second stamps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection_lag_max: Option<Ms>,
    pub pods: Vec<PodRecovery>,
    /// Each failed node's own times, when the faults hit more than one
    /// node (a set, or several targets); their spread is
    /// [`node_times::spread`](super::node_times::spread).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<super::node_times::NodeTimes>,
    /// Volumes attached to a target node at T0 whose node got the
    /// out-of-service taint: when they were detached (see `volumes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_detaches: Vec<super::volumes::VolumeDetach>,
    /// Largest `detachAfter` of `volumeDetaches`, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detach_after_out_of_service_max: Option<Ms>,
    /// The target nodes' endpoints and each Service's ready endpoints
    /// (`staleEndpointWindow`, `staleEndpoints`, `readyEndpoints`), up to
    /// the end of the steps.
    #[serde(flatten)]
    pub endpoints: super::endpoints::EndpointMetrics,
    /// The longest error window of any probe still failing at or after T0,
    /// in ms, measured whole: one that began before T0 (clients already
    /// failing before the first fault, or never reaching the workload)
    /// counts from its first error (the judge's `verdict::windows::longest`;
    /// see `probes` in the result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_window: Option<Ms>,
}

pub use super::replacements::{PodRecovery, Stranded};

use jiff::{SignedDuration, Timestamp};

use super::{Change, Transition, World};

/// Derives the metrics of a run from its transitions. `t0` is the first
/// fault (ms since start), `targets` the node names it hit, `end` when the
/// observation stopped, `started_at` the wall time of ms 0.
pub fn compute(
    transitions: &[Transition],
    t0: Ms,
    targets: &[String],
    end: Ms,
    started_at: Timestamp,
) -> Metrics {
    let after: Vec<&Transition> = transitions.iter().filter(|t| t.at >= t0).collect();
    let rel = |at: Ms| at - t0;
    let super::node_times::Milestones {
        not_ready: node_not_ready,
        no_execute_taint,
        ready_again: node_ready_again,
    } = super::node_times::milestones(&after, t0, |name| targets.iter().any(|t| t == name));

    // Ready pods over time, against the count just before T0.
    let before = World::at(transitions, t0 - 1);
    let ready_count = |w: &World| {
        w.pods
            .values()
            .filter(|p| p.ready && !p.terminating)
            .count()
    };
    let ready_before = ready_count(&before);
    let mut world = before.clone();
    let mut max_unavailable = 0usize;
    let mut dropped = false;
    let mut workload_ready_again = None;
    for t in &after {
        world.apply(t);
        let ready = ready_count(&world);
        let missing = ready_before.saturating_sub(ready);
        max_unavailable = max_unavailable.max(missing);
        if missing > 0 {
            dropped = true;
        } else if dropped && workload_ready_again.is_none() {
            workload_ready_again = Some(rel(t.at));
        }
    }

    let pods = super::replacements::recoveries(transitions, &after, &before, t0, targets, end);

    // Detection lag: when nodefall saw a change minus when the server says it happened.
    let mut lags: Vec<Ms> = after
        .iter()
        // Only times the control plane sets; kwok's own (Ready=True, pod
        // Ready) carry the object's creation time, not the change's.
        .filter(|t| match &t.change {
            Change::NodeReady { status, .. } => status != "True",
            Change::TaintAdded { .. }
            | Change::PodTerminating
            | Change::PodScheduled { .. }
            | Change::PodDisruptionTarget { .. } => true,
            _ => false,
        })
        .filter_map(|t| {
            let seen = started_at
                .checked_add(SignedDuration::from_millis(t.at))
                .ok()?;
            let lag = seen.duration_since(t.server_time?).as_millis();
            i64::try_from(lag).ok()
        })
        .collect();
    lags.sort_unstable();
    let mut metrics = Metrics {
        node_not_ready: node_not_ready.map(rel),
        no_execute_taint,
        first_eviction: pods.iter().filter_map(|p| p.terminating_at).min(),
        workload_ready_again,
        ready_before: u32::try_from(ready_before).unwrap_or(u32::MAX),
        max_unavailable: u32::try_from(max_unavailable).unwrap_or(u32::MAX),
        node_ready_again,
        detection_lag_median: lags.get(lags.len() / 2).copied(),
        detection_lag_max: lags.last().copied(),
        pods,
        ..Metrics::default()
    };
    metrics.nodes = super::node_times::per_node(&after, t0, targets, &metrics.pods);
    metrics.volume_detaches = super::volumes::detaches(transitions, t0, targets);
    metrics.detach_after_out_of_service_max = metrics
        .volume_detaches
        .iter()
        .filter_map(|d| d.detach_after)
        .max();
    for p in &mut metrics.pods {
        let (Some(name), Some(node), Some(created), Some(scheduled)) = (
            &p.replacement,
            &p.replacement_node,
            p.replacement_created,
            p.replacement_scheduled,
        ) else {
            continue;
        };
        if let Some((attached, wait)) =
            super::volumes::replacement_wait(transitions, t0, name, node, created, scheduled)
        {
            p.replacement_volume_attached = Some(attached);
            p.replacement_volume_wait = Some(wait);
        }
    }
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::ObjectRef;
    use crate::timeline::seen as t;

    fn pod(name: &str, uid: &str) -> ObjectRef {
        ObjectRef::Pod {
            name: name.into(),
            uid: uid.into(),
        }
    }
    fn node(name: &str) -> ObjectRef {
        ObjectRef::Node { name: name.into() }
    }
    fn added(owner: &str) -> Change {
        Change::PodAdded {
            labels: Default::default(),
            owner: Some(owner.into()),
            claims: Vec::new(),
        }
    }

    #[test]
    fn statefulset_pod_is_replaced_only_after_deletion() {
        let sts = "StatefulSet/web";
        let ts = vec![
            t(0, node("a"), Change::NodeAdded),
            t(
                0,
                node("a"),
                Change::NodeReady {
                    status: "True".into(),
                    reason: None,
                    message: None,
                },
            ),
            t(1, pod("web-0", "old"), added(sts)),
            t(
                1,
                pod("web-0", "old"),
                Change::PodScheduled { node: "a".into() },
            ),
            t(2, pod("web-0", "old"), Change::PodReady { ready: true }),
            // T0 = 1000
            t(
                9_000,
                node("a"),
                Change::NodeReady {
                    status: "Unknown".into(),
                    reason: None,
                    message: None,
                },
            ),
            t(
                9_100,
                pod("web-0", "old"),
                Change::PodReady { ready: false },
            ),
            t(29_000, pod("web-0", "old"), Change::PodTerminating),
            t(90_000, pod("web-0", "old"), Change::PodDeleted),
            t(90_050, pod("web-0", "new"), added(sts)),
            t(
                90_060,
                pod("web-0", "new"),
                Change::PodScheduled { node: "b".into() },
            ),
            t(
                90_100,
                pod("web-0", "new"),
                Change::PodPhase {
                    phase: "Running".into(),
                    reason: None,
                },
            ),
            t(
                90_100,
                pod("web-0", "new"),
                Change::PodReady { ready: true },
            ),
        ];
        let m = compute(&ts, 1_000, &["a".into()], 100_000, Timestamp::UNIX_EPOCH);
        assert_eq!(m.node_not_ready, Some(8_000));
        assert_eq!(m.ready_before, 1);
        assert_eq!(m.max_unavailable, 1);
        assert_eq!(m.workload_ready_again, Some(89_100));
        let p = &m.pods[0];
        assert_eq!(
            (p.terminating_at, p.deleted_at, p.terminating_for),
            (Some(28_000), Some(89_000), Some(61_000))
        );
        assert_eq!(p.replacement.as_deref(), Some("web-0"));
        assert_eq!(p.replacement_node.as_deref(), Some("b"));
        assert_eq!(p.replacement_ready, Some(89_100));
        assert_eq!(m.first_eviction, Some(28_000));
    }

    #[test]
    fn deployment_pod_is_replaced_while_the_old_one_is_terminating() {
        let rs = "ReplicaSet/web-1";
        let ts = vec![
            t(1, pod("web-1-x", "old"), added(rs)),
            t(
                1,
                pod("web-1-x", "old"),
                Change::PodScheduled { node: "a".into() },
            ),
            t(2, pod("web-1-x", "old"), Change::PodReady { ready: true }),
            t(29_000, pod("web-1-x", "old"), Change::PodTerminating),
            t(29_010, pod("web-1-y", "new"), added(rs)),
            t(
                29_020,
                pod("web-1-y", "new"),
                Change::PodScheduled { node: "b".into() },
            ),
            t(
                29_030,
                pod("web-1-y", "new"),
                Change::PodReady { ready: true },
            ),
        ];
        let m = compute(&ts, 1_000, &["a".into()], 60_000, Timestamp::UNIX_EPOCH);
        let p = &m.pods[0];
        assert!(p.still_present);
        assert_eq!(p.terminating_for, Some(31_000), "until the end of the run");
        assert_eq!(p.replacement.as_deref(), Some("web-1-y"));
        assert_eq!(p.replacement_created, Some(28_010));
    }
    /// A drain evicts one node's pod long before the other's: each gets the
    /// replacement created after it went, whatever their names' order (the
    /// drain-pdb run paired the second-evicted pod with the first's
    /// replacement, "created while the old pod still existed", 5 s early).
    #[test]
    fn replacements_go_to_the_pods_in_the_order_they_left() {
        let rs = "ReplicaSet/web-1";
        let ts = vec![
            t(1, pod("web-1-a", "a"), added(rs)),
            t(
                1,
                pod("web-1-a", "a"),
                Change::PodScheduled { node: "n2".into() },
            ),
            t(1, pod("web-1-z", "z"), added(rs)),
            t(
                1,
                pod("web-1-z", "z"),
                Change::PodScheduled { node: "n1".into() },
            ),
            // T0 = 1000: n1's pod goes first, n2's five seconds later.
            t(1_100, pod("web-1-z", "z"), Change::PodTerminating),
            t(1_120, pod("web-1-m", "m"), added(rs)),
            t(1_150, pod("web-1-z", "z"), Change::PodDeleted),
            t(6_000, pod("web-1-a", "a"), Change::PodTerminating),
            t(6_020, pod("web-1-b", "b"), added(rs)),
            t(6_050, pod("web-1-a", "a"), Change::PodDeleted),
        ];
        let targets = ["n1".to_string(), "n2".to_string()];
        let m = compute(&ts, 1_000, &targets, 10_000, Timestamp::UNIX_EPOCH);
        let pairs: Vec<_> = m
            .pods
            .iter()
            .map(|p| {
                (
                    p.pod.as_str(),
                    p.replacement.as_deref(),
                    p.replacement_created,
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("web-1-a", Some("web-1-b"), Some(5_020)),
                ("web-1-z", Some("web-1-m"), Some(120)),
            ]
        );
    }
}
