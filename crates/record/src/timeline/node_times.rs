//! Each failed node's own times, when a run's faults hit more than one node
//! (a set, or several targets), and their spread: how far apart the nodes
//! were detected, tainted, evicted and back (pure).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::replacements::PodRecovery;
use super::{Change, Ms, ObjectRef, Transition};

/// One failed node's times, relative to T0 (ms).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTimes {
    pub node: String,
    /// Ready left True (Unknown or False): the control plane's detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_ready: Option<Ms>,
    /// Its first `unreachable` or `not-ready` NoSchedule taint (absent
    /// before schema 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_schedule_taint: Option<Ms>,
    /// Its first `unreachable` or `not-ready` NoExecute taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_execute_taint: Option<Ms>,
    /// That NoExecute taint taken off again (absent before schema 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_execute_removed: Option<Ms>,
    /// Its first pod marked Terminating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_eviction: Option<Ms>,
    /// Ready again after `not_ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_again: Option<Ms>,
}

/// How far apart the nodes' times were (last minus first), each over the
/// nodes that have it, with how many do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spread {
    pub not_ready: Option<(Ms, usize)>,
    pub no_execute_taint: Option<(Ms, usize)>,
    pub first_eviction: Option<(Ms, usize)>,
    pub ready_again: Option<(Ms, usize)>,
}

/// Each of `targets`' times from the transitions at or after T0 (`after`),
/// in the order given; none when the faults hit fewer than two nodes.
pub fn per_node(
    after: &[&Transition],
    t0: Ms,
    targets: &[String],
    pods: &[PodRecovery],
) -> Vec<NodeTimes> {
    if targets.len() < 2 {
        return Vec::new();
    }
    // One pass over the transitions and the pods, not one per node: a set
    // can be a thousand nodes.
    let mut transitions: HashMap<&str, Vec<&Transition>> = HashMap::new();
    for t in after {
        if let ObjectRef::Node { name } = &t.object {
            transitions.entry(name.as_str()).or_default().push(t);
        }
    }
    let mut evicted: HashMap<&str, Ms> = HashMap::new();
    for p in pods {
        if let Some(at) = p.terminating_at {
            evicted
                .entry(p.node.as_str())
                .and_modify(|first| *first = (*first).min(at))
                .or_insert(at);
        }
    }
    targets
        .iter()
        .map(|node| {
            let mine = transitions
                .get(node.as_str())
                .map_or(&[][..], Vec::as_slice);
            let m = milestones(mine, t0, |_| true);
            let (no_schedule_taint, no_execute_removed) = taints(mine, t0, m.no_execute_taint);
            NodeTimes {
                node: node.clone(),
                not_ready: m.not_ready.map(|at| at - t0),
                no_schedule_taint,
                no_execute_taint: m.no_execute_taint,
                no_execute_removed,
                first_eviction: evicted.get(node.as_str()).copied(),
                ready_again: m.ready_again,
            }
        })
        .collect()
}

/// The node lifecycle controller's taints for an unhealthy node.
fn lifecycle_taint(key: &str) -> bool {
    key == "node.kubernetes.io/unreachable" || key == "node.kubernetes.io/not-ready"
}

/// One node's first NoSchedule taint of the node lifecycle controller, and
/// when its NoExecute taint (added at `no_execute`, relative to T0) was taken
/// off again, from its transitions at or after T0.
fn taints(mine: &[&Transition], t0: Ms, no_execute: Option<Ms>) -> (Option<Ms>, Option<Ms>) {
    let no_schedule = mine
        .iter()
        .find(|t| {
            matches!(&t.change, Change::TaintAdded { key, effect, .. }
                if effect == "NoSchedule" && lifecycle_taint(key))
        })
        .map(|t| t.at - t0);
    let removed = no_execute.and_then(|added| {
        mine.iter()
            .find(|t| {
                t.at - t0 >= added
                    && matches!(&t.change, Change::TaintRemoved { key, effect }
                        if effect == "NoExecute" && lifecycle_taint(key))
            })
            .map(|t| t.at - t0)
    });
    (no_schedule, removed)
}

/// A node's milestones, or the first of some nodes'.
pub(super) struct Milestones {
    /// Ready left True (ms since start).
    pub not_ready: Option<Ms>,
    /// The first `unreachable` or `not-ready` NoExecute taint (after T0).
    pub no_execute_taint: Option<Ms>,
    /// Ready again after `not_ready` (after T0).
    pub ready_again: Option<Ms>,
}

/// The milestones of the nodes `on` says yes to, from the transitions at or
/// after T0 (`after`): the first of each over all of them.
pub(super) fn milestones(after: &[&Transition], t0: Ms, on: impl Fn(&str) -> bool) -> Milestones {
    let mine = || {
        after
            .iter()
            .filter(|t| matches!(&t.object, ObjectRef::Node { name } if on(name)))
    };
    let not_ready = mine()
        .find(|t| matches!(&t.change, Change::NodeReady { status, .. } if status != "True"))
        .map(|t| t.at);
    let no_execute_taint = mine()
        .find(|t| {
            matches!(&t.change, Change::TaintAdded { key, effect, .. }
                if effect == "NoExecute" && lifecycle_taint(key))
        })
        .map(|t| t.at - t0);
    let ready_again = not_ready.and_then(|down| {
        mine()
            .find(|t| {
                t.at > down
                    && matches!(&t.change, Change::NodeReady { status, .. } if status == "True")
            })
            .map(|t| t.at - t0)
    });
    Milestones {
        not_ready,
        no_execute_taint,
        ready_again,
    }
}

/// The spread of each time over `nodes`.
pub fn spread(nodes: &[NodeTimes]) -> Spread {
    let of = |f: fn(&NodeTimes) -> Option<Ms>| {
        let times: Vec<Ms> = nodes.iter().filter_map(f).collect();
        let (min, max) = (times.iter().min()?, times.iter().max()?);
        Some((max - min, times.len()))
    };
    Spread {
        not_ready: of(|n| n.not_ready),
        no_execute_taint: of(|n| n.no_execute_taint),
        first_eviction: of(|n| n.first_eviction),
        ready_again: of(|n| n.ready_again),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::seen as t;

    fn node(name: &str) -> ObjectRef {
        ObjectRef::Node { name: name.into() }
    }

    fn ready(status: &str) -> Change {
        Change::NodeReady {
            status: status.into(),
            reason: None,
            message: None,
        }
    }

    fn taint() -> Change {
        Change::TaintAdded {
            key: "node.kubernetes.io/unreachable".into(),
            effect: "NoExecute".into(),
            value: None,
        }
    }

    #[test]
    fn each_node_has_its_own_times_and_the_spread_is_last_minus_first() {
        let all = [
            // Before T0 (1,000): not counted.
            t(500, node("w1"), ready("Unknown")),
            t(900, node("w1"), ready("True")),
            t(9_000, node("w1"), ready("Unknown")),
            t(9_400, node("w2"), ready("Unknown")),
            t(9_000, node("w1"), taint()),
            t(19_000, node("w2"), taint()),
            t(
                9_001,
                node("w1"),
                Change::TaintAdded {
                    key: "node.kubernetes.io/unreachable".into(),
                    effect: "NoSchedule".into(),
                    value: None,
                },
            ),
            t(
                20_000,
                node("w1"),
                Change::TaintRemoved {
                    key: "node.kubernetes.io/unreachable".into(),
                    effect: "NoExecute".into(),
                },
            ),
            t(30_000, node("w2"), ready("True")),
            t(31_500, node("w1"), ready("True")),
            t(40_000, node("w3"), ready("True")),
        ];
        let after: Vec<&Transition> = all.iter().filter(|t| t.at >= 1_000).collect();
        let pods = [
            PodRecovery {
                pod: "a".into(),
                node: "w2".into(),
                terminating_at: Some(25_000),
                ..PodRecovery::default()
            },
            PodRecovery {
                pod: "b".into(),
                node: "w2".into(),
                terminating_at: Some(24_000),
                ..PodRecovery::default()
            },
        ];
        let targets = ["w1", "w2", "w3"].map(String::from);
        let nodes = per_node(&after, 1_000, &targets, &pods);
        let times: Vec<_> = nodes
            .iter()
            .map(|n| {
                (
                    n.node.as_str(),
                    n.not_ready,
                    n.no_execute_taint,
                    n.first_eviction,
                    n.ready_again,
                )
            })
            .collect();
        assert_eq!(
            times,
            [
                ("w1", Some(8_000), Some(8_000), None, Some(30_500)),
                ("w2", Some(8_400), Some(18_000), Some(24_000), Some(29_000)),
                // Never left Ready: no times.
                ("w3", None, None, None, None),
            ]
        );
        assert_eq!(
            spread(&nodes),
            Spread {
                not_ready: Some((400, 2)),
                no_execute_taint: Some((10_000, 2)),
                first_eviction: Some((0, 1)),
                ready_again: Some((1_500, 2)),
            }
        );
        let w1 = &nodes[0];
        assert_eq!(
            (w1.no_schedule_taint, w1.no_execute_removed),
            (Some(8_001), Some(19_000))
        );
        assert_eq!(
            (nodes[1].no_schedule_taint, nodes[1].no_execute_removed),
            (None, None)
        );
        // One node: nothing per node.
        assert!(per_node(&after, 1_000, &targets[..1], &pods).is_empty());
    }
}
