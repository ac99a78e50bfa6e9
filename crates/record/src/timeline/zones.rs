//! What the zone rules did in a run (pure): each zone's state over time as
//! the node lifecycle controller counts it, inferred from the Ready
//! conditions nodefall saw (the controller logs its zone states and sends no
//! Event); the failed nodes never tainted NoExecute, each with the rule that
//! explains it; and those whose taint stayed while every zone was dark.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::node_times::NodeTimes;
use super::{Change, Ms, ObjectRef, Transition};
use crate::disruption::{Forecast, Stop, ZoneNode, ZoneState, zone_state};
use crate::profile::TimingProfile;

/// A zone's state from `at` (ms after T0) on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneChange {
    pub at: Ms,
    pub zone: String,
    pub state: ZoneState,
    /// Its counted nodes not ready then, of `nodes`.
    pub not_ready: usize,
    pub nodes: usize,
}

/// A failed node that never got its NoExecute taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Untainted {
    pub node: String,
    pub zone: String,
    /// The rule that explains it; none when no zone rule does (the node
    /// was back before its turn came, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Stop>,
}

/// The zones of a run whose faults broke more than one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZonesRecord {
    /// Every node of the cluster when the run began, with its zone.
    pub nodes: Vec<ZoneNode>,
    /// What the rules said before the first fault.
    pub forecast: Forecast,
    /// Each zone's state at T0, then each change.
    pub states: Vec<ZoneChange>,
    /// The spans (ms after T0; the end absent while it lasted to the end)
    /// in which every zone was fully disrupted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dark: Vec<(Ms, Option<Ms>)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untainted: Vec<Untainted>,
    /// Failed nodes whose NoExecute taint stayed through a dark span (added
    /// in the controller's pass that darkened the last zone: it removes only
    /// the taints the nodes had when that pass began).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_dark: Vec<String>,
}

/// The record of a run: `transitions` at or after T0 (`after`, absolute
/// ms), the failed nodes' own times (`failed`, relative to T0).
pub fn record(
    nodes: Vec<ZoneNode>,
    forecast: Forecast,
    after: &[&Transition],
    t0: Ms,
    failed: &[NodeTimes],
    p: &TimingProfile,
) -> ZonesRecord {
    let states = history(&nodes, after, t0, p);
    let dark = dark_spans(&nodes, &states);
    let zone_of: HashMap<&str, &ZoneNode> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let sizes: BTreeMap<&str, usize> = states.iter().map(|c| (c.zone.as_str(), c.nodes)).collect();
    let untainted = failed
        .iter()
        .filter(|n| n.not_ready.is_some() && n.no_execute_taint.is_none())
        .map(|n| {
            let zone = zone_of
                .get(n.node.as_str())
                .map(|z| z.zone.clone())
                .unwrap_or_default();
            let down = n.not_ready.unwrap_or_default();
            let back = n.ready_again.unwrap_or(Ms::MAX);
            let small = sizes.get(zone.as_str()).copied().unwrap_or_default()
                <= p.zones.large_cluster_size_threshold as usize;
            // Partially disrupted at some moment while the node was down:
            // its turn, had it not come yet, never came (on kind, a node
            // that went NotReady in the pass before the zone tipped, its
            // token taken by another, was never tainted).
            let partial = partial_while(&states, &zone, down, back);
            let rule = if !dark.is_empty() {
                Some(Stop::AllDark)
            } else if partial && small {
                Some(Stop::SmallZone)
            } else {
                None
            };
            Untainted {
                node: n.node.clone(),
                zone,
                rule,
            }
        })
        .collect();
    let kept_dark = failed
        .iter()
        .filter(|n| {
            let Some(added) = n.no_execute_taint else {
                return false;
            };
            // still there when the span ended (or at the end of the run)
            dark.iter().any(|(_, to)| {
                let end = to.unwrap_or(Ms::MAX);
                added < end && n.no_execute_removed.is_none_or(|r| r >= end)
            })
        })
        .map(|n| n.node.clone())
        .collect();
    ZonesRecord {
        nodes,
        forecast,
        states,
        dark,
        untainted,
        kept_dark,
    }
}

/// Each zone's state at T0 (from the nodes' Ready conditions when the run
/// began), then at each change of a counted node's Ready condition.
pub fn history(
    nodes: &[ZoneNode],
    after: &[&Transition],
    t0: Ms,
    p: &TimingProfile,
) -> Vec<ZoneChange> {
    let counted: HashMap<&str, &ZoneNode> = nodes
        .iter()
        .filter(|n| !n.excluded)
        .map(|n| (n.name.as_str(), n))
        .collect();
    let mut ready: HashMap<&str, bool> = counted.iter().map(|(k, n)| (*k, n.ready)).collect();
    // Per zone: counted nodes and those not ready.
    let mut zones: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for n in counted.values() {
        let z = zones.entry(n.zone.as_str()).or_default();
        z.0 += 1;
        z.1 += usize::from(!n.ready);
    }
    let threshold = p.zones.unhealthy_zone_threshold;
    let mut out: Vec<ZoneChange> = zones
        .iter()
        .map(|(zone, (size, down))| ZoneChange {
            at: 0,
            zone: (*zone).to_owned(),
            state: zone_state(*down, *size, threshold),
            not_ready: *down,
            nodes: *size,
        })
        .collect();
    let mut last: BTreeMap<&str, ZoneState> = zones
        .iter()
        .map(|(zone, (size, down))| (*zone, zone_state(*down, *size, threshold)))
        .collect();
    let mut sorted: Vec<&&Transition> = after.iter().collect();
    sorted.sort_by_key(|t| t.at);
    for t in sorted {
        let (ObjectRef::Node { name }, Change::NodeReady { status, .. }) = (&t.object, &t.change)
        else {
            continue;
        };
        let Some(node) = counted.get(name.as_str()) else {
            continue;
        };
        let now_ready = status == "True";
        let was = ready.insert(node.name.as_str(), now_ready).unwrap_or(true);
        if was == now_ready {
            continue;
        }
        let Some((size, down)) = zones.get_mut(node.zone.as_str()) else {
            continue;
        };
        if now_ready {
            *down = down.saturating_sub(1);
        } else {
            *down += 1;
        }
        let state = zone_state(*down, *size, threshold);
        if last.get(node.zone.as_str()) != Some(&state) {
            last.insert(node.zone.as_str(), state);
            out.push(ZoneChange {
                at: t.at - t0,
                zone: node.zone.clone(),
                state,
                not_ready: *down,
                nodes: *size,
            });
        }
    }
    out
}

/// Whether `zone` was partially disrupted at some moment of `[from, to)`.
fn partial_while(states: &[ZoneChange], zone: &str, from: Ms, to: Ms) -> bool {
    let mine: Vec<&ZoneChange> = states.iter().filter(|c| c.zone == zone).collect();
    mine.iter().enumerate().any(|(i, c)| {
        let until = mine.get(i + 1).map_or(Ms::MAX, |next| next.at);
        c.state == ZoneState::PartialDisruption && c.at < to && until > from
    })
}

/// The spans in which every zone (with counted nodes) was fully disrupted.
fn dark_spans(nodes: &[ZoneNode], states: &[ZoneChange]) -> Vec<(Ms, Option<Ms>)> {
    let zones: BTreeSet<&str> = nodes
        .iter()
        .filter(|n| !n.excluded)
        .map(|n| n.zone.as_str())
        .collect();
    if zones.is_empty() {
        return Vec::new();
    }
    let mut now: BTreeMap<&str, ZoneState> = BTreeMap::new();
    let mut spans = Vec::new();
    let mut began: Option<Ms> = None;
    for c in states {
        now.insert(c.zone.as_str(), c.state);
        let all = zones
            .iter()
            .all(|z| now.get(z) == Some(&ZoneState::FullDisruption));
        match (all, began) {
            (true, None) => began = Some(c.at),
            (false, Some(from)) => {
                spans.push((from, Some(c.at)));
                began = None;
            }
            _ => {}
        }
    }
    if let Some(from) = began {
        spans.push((from, None));
    }
    spans
}

#[cfg(test)]
#[path = "zones_tests.rs"]
mod tests;
