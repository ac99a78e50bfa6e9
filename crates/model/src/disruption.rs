//! The node lifecycle controller's zone rules (pure), as v1.35.4's
//! `pkg/controller/nodelifecycle` applies them (`../shared/ZONES-FACTS.md`):
//! a node's zone, a zone's state from its nodes' Ready conditions, the pace
//! at which the zone's nodes get their NoExecute taint in that state, and the
//! forecast of a set of nodes failing together: each zone's state after the
//! faults and each failed node's turn.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::format_duration;
use crate::profile::{NEVER, TimingProfile};

/// The zone label a cloud provider sets; its region's beside it.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// The deprecated labels, read first by `GetZoneKey`.
pub const BETA_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";
pub const BETA_REGION_LABEL: &str = "failure-domain.beta.kubernetes.io/region";
/// A node so labelled is left out of its zone's counts.
pub const EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";

/// A node's zone as `GetZoneKey` keys it (the beta labels first), written
/// `region/zone`, or `zone` without a region; "" when it has neither: a
/// cluster without zone labels is one zone.
pub fn zone_of(labels: &BTreeMap<String, String>) -> String {
    let get = |beta: &str, ga: &str| {
        labels
            .get(beta)
            .or_else(|| labels.get(ga))
            .cloned()
            .unwrap_or_default()
    };
    let region = get(BETA_REGION_LABEL, REGION_LABEL);
    let zone = get(BETA_ZONE_LABEL, ZONE_LABEL);
    match (region.is_empty(), zone.is_empty()) {
        (true, _) => zone,
        (false, true) => format!("{region}/"),
        (false, false) => format!("{region}/{zone}"),
    }
}

/// How a zone is written in plans and reports: "" is `(no zone)`.
pub fn zone_name(zone: &str) -> &str {
    if zone.is_empty() { "(no zone)" } else { zone }
}

/// A zone's state (`ComputeZoneState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ZoneState {
    Normal,
    PartialDisruption,
    FullDisruption,
}

impl fmt::Display for ZoneState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ZoneState::Normal => "Normal",
            ZoneState::PartialDisruption => "PartialDisruption",
            ZoneState::FullDisruption => "FullDisruption",
        })
    }
}

/// A zone's state from its counted nodes (`ComputeZoneState`): none ready
/// (and some not) is full; more than 2 not ready and at least `threshold`
/// of them (compared as float32, as the controller does) is partial.
pub fn zone_state(not_ready: usize, total: usize, threshold: f64) -> ZoneState {
    let ready = total.saturating_sub(not_ready);
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        reason = "the controller compares float32 shares; zones hold far fewer than 2^24 nodes"
    )]
    let share = not_ready as f32 / total.max(1) as f32;
    #[allow(
        clippy::cast_possible_truncation,
        reason = "--unhealthy-zone-threshold is a float32 flag"
    )]
    let threshold = threshold as f32;
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && share >= threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// How fast a zone's nodes get their NoExecute taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Pace {
    /// One node per interval (a token bucket of 1: the first at once).
    Every(#[serde(with = "crate::profile::millis")] Duration),
    /// No more taints in this zone, and why.
    Stopped(Stop),
}

/// Why a zone's tainting stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Stop {
    /// Partially disrupted, and no larger than `largeClusterSizeThreshold`.
    SmallZone,
    /// Every zone is fully disrupted: taints removed, no eviction.
    AllDark,
    /// The rate for its state is 0.
    RateZero,
}

impl Stop {
    /// The rule, in words, for a plan and a report.
    pub fn rule(self, p: &TimingProfile) -> String {
        match self {
            Stop::SmallZone => format!(
                "the zone is partially disrupted (more than 2 of its nodes and at least {} not \
                 ready) and has no more than {} nodes (largeClusterSizeThreshold): its tainting \
                 stops",
                percent(p.zones.unhealthy_zone_threshold),
                p.zones.large_cluster_size_threshold
            ),
            Stop::AllDark => "every zone is fully disrupted: the controller removes the NoExecute \
                 taints from all nodes and taints none (master disruption mode)"
                .into(),
            Stop::RateZero => "the eviction rate for the zone's state is 0".into(),
        }
    }
}

fn percent(share: f64) -> String {
    format!("{}%", (share * 100.0).round())
}

impl Pace {
    /// The pace of a zone in `state` of `size` counted nodes
    /// (`setLimiterInZone`, `ReducedQPSFunc`, `HealthyQPSFunc`); `all_dark`
    /// when every zone is fully disrupted.
    pub fn of(state: ZoneState, size: usize, all_dark: bool, p: &TimingProfile) -> Pace {
        let every = |d: Duration| {
            if d == NEVER {
                Pace::Stopped(Stop::RateZero)
            } else {
                Pace::Every(d)
            }
        };
        if all_dark {
            return Pace::Stopped(Stop::AllDark);
        }
        match state {
            ZoneState::Normal | ZoneState::FullDisruption => every(p.node_eviction_interval),
            ZoneState::PartialDisruption
                if size > p.zones.large_cluster_size_threshold as usize =>
            {
                every(p.secondary_eviction_interval)
            }
            ZoneState::PartialDisruption => Pace::Stopped(Stop::SmallZone),
        }
    }

    pub fn words(self) -> String {
        match self {
            Pace::Every(d) => format!("one node per {}", format_duration(d)),
            Pace::Stopped(Stop::SmallZone) => "stopped (a small zone)".into(),
            Pace::Stopped(Stop::AllDark) => "stopped (every zone dark)".into(),
            Pace::Stopped(Stop::RateZero) => "stopped (rate 0)".into(),
        }
    }
}

/// A node as the zone rules see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneNode {
    pub name: String,
    pub zone: String,
    /// Its Ready condition was True when the run began.
    pub ready: bool,
    /// Labelled `node.kubernetes.io/exclude-disruption`: not counted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub excluded: bool,
}

impl ZoneNode {
    pub fn of(name: &str, labels: &BTreeMap<String, String>, ready: bool) -> ZoneNode {
        ZoneNode {
            name: name.to_owned(),
            zone: zone_of(labels),
            ready,
            excluded: labels.contains_key(EXCLUDE_DISRUPTION),
        }
    }
}

/// When a failed node is expected to get its NoExecute taint, counted from
/// the first NotReady of its zone's failed nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Slot {
    /// Then (the zone's pace and the node's turn).
    At(#[serde(with = "crate::profile::millis")] Duration),
    /// Then if the tainter takes it before the zone tips into a stopped
    /// pace, else never: the race at the switch.
    Maybe(#[serde(with = "crate::profile::millis")] Duration),
    /// Never, for this rule.
    Never(Stop),
}

impl Slot {
    pub fn words(self) -> String {
        match self {
            Slot::At(d) if d.is_zero() => "at once".into(),
            Slot::At(d) => format!("+{}", format_duration(d)),
            Slot::Maybe(d) if d.is_zero() => {
                "at once if taken before the zone tips, else never".into()
            }
            Slot::Maybe(d) => format!(
                "+{} if taken before the zone tips, else never",
                format_duration(d)
            ),
            Slot::Never(Stop::AllDark) => {
                "none that stays (a taint added in the pass that darkens the last zone may)".into()
            }
            Slot::Never(_) => "never".into(),
        }
    }
}

/// One zone's expected course.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneForecast {
    pub zone: String,
    /// Its counted nodes (the excluded left out).
    pub nodes: usize,
    /// Counted nodes already not ready before the faults.
    pub down_before: usize,
    /// Counted nodes the faults break.
    pub failing: usize,
    pub state: ZoneState,
    pub pace: Pace,
}

/// One failed node's expected NoExecute taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSlot {
    pub node: String,
    pub zone: String,
    /// Its turn in the zone (1 = the first of the zone to go NotReady).
    pub turn: usize,
    pub slot: Slot,
}

/// What the zone rules make of a set of nodes failing together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forecast {
    pub zones: Vec<ZoneForecast>,
    /// Every zone fully disrupted after the faults.
    pub all_dark: bool,
    pub slots: Vec<NodeSlot>,
}

/// The forecast of `failing` (node names) going NotReady together on the
/// cluster of `nodes`. Within a zone the turns follow the order the nodes go
/// NotReady, which no one knows beforehand: they are given in name order.
pub fn forecast(nodes: &[ZoneNode], failing: &BTreeSet<String>, p: &TimingProfile) -> Forecast {
    let mut by_zone: BTreeMap<&str, Vec<&ZoneNode>> = BTreeMap::new();
    for n in nodes {
        by_zone.entry(n.zone.as_str()).or_default().push(n);
    }
    let count = |zone: &[&ZoneNode], f: &dyn Fn(&ZoneNode) -> bool| {
        zone.iter().filter(|n| !n.excluded && f(n)).count()
    };
    let mut zones: Vec<ZoneForecast> = by_zone
        .iter()
        .map(|(zone, members)| {
            let size = count(members, &|_| true);
            let down_before = count(members, &|n| !n.ready && !failing.contains(&n.name));
            let failed = count(members, &|n| failing.contains(&n.name));
            ZoneForecast {
                zone: (*zone).to_owned(),
                nodes: size,
                down_before,
                failing: failed,
                state: zone_state(down_before + failed, size, p.zones.unhealthy_zone_threshold),
                pace: Pace::Stopped(Stop::RateZero), // set below, once all_dark is known
            }
        })
        .collect();
    let all_dark = zones
        .iter()
        .filter(|z| z.nodes > 0)
        .all(|z| z.state == ZoneState::FullDisruption)
        && zones.iter().any(|z| z.nodes > 0);
    for z in &mut zones {
        z.pace = Pace::of(z.state, z.nodes, all_dark, p);
    }
    let mut slots = Vec::new();
    for z in &zones {
        let members = &by_zone[z.zone.as_str()];
        let mine: Vec<&&ZoneNode> = members
            .iter()
            .filter(|n| failing.contains(&n.name))
            .collect();
        // The turn at which the zone leaves Normal, counting the failed
        // nodes in turn (1-based); none if it stays Normal.
        let tips = (1..=z.failing).find(|k| {
            zone_state(z.down_before + k, z.nodes, p.zones.unhealthy_zone_threshold)
                != ZoneState::Normal
        });
        for (i, n) in mine.iter().enumerate() {
            let turn = i + 1;
            let nth = |d: Duration| d * u32::try_from(i).unwrap_or(u32::MAX);
            let slot = match z.pace {
                Pace::Stopped(Stop::AllDark) => Slot::Never(Stop::AllDark),
                // In a large partially disrupted zone the first was taken at
                // the normal pace and the rest wait a secondary token each
                // (the swapped limiter starts drained).
                Pace::Every(d) => Slot::At(nth(d)),
                // Its turn comes before the zone tips, or with it: the
                // nodes of a set often go NotReady in the same pass as the
                // one that tips the zone (seen on the sim: 3 of 4 in one
                // pass, none tainted), so even the first is a race.
                Pace::Stopped(stop) => match tips {
                    Some(t) if turn <= t => Slot::Maybe(nth(p.node_eviction_interval)),
                    _ => Slot::Never(stop),
                },
            };
            slots.push(NodeSlot {
                node: n.name.clone(),
                zone: z.zone.clone(),
                turn,
                slot,
            });
        }
    }
    Forecast {
        zones,
        all_dark,
        slots,
    }
}

/// The forecast as text, for `plan` and the run's log.
pub fn render(f: &Forecast, p: &TimingProfile) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "Zones (a zone is partially disrupted with more than 2 and at least {} of its nodes not \
         ready; normal pace one node per {}; a partially disrupted zone of more than {} nodes goes \
         on at one per {}, a smaller one stops)\n",
        percent(p.zones.unhealthy_zone_threshold),
        crate::profile::interval_words(p.node_eviction_interval),
        p.zones.large_cluster_size_threshold,
        crate::profile::interval_words(p.secondary_eviction_interval),
    );
    for z in f.zones.iter().filter(|z| z.failing > 0 || f.all_dark) {
        let _ = writeln!(
            out,
            "  zone {}: {} of {} nodes fail ({} down before): {}, NoExecute taints {}",
            zone_name(&z.zone),
            z.failing,
            z.nodes,
            z.down_before,
            z.state,
            z.pace.words()
        );
        if let Pace::Stopped(stop) = z.pace
            && stop != Stop::AllDark
        {
            let _ = writeln!(out, "    why: {}", stop.rule(p));
        }
    }
    if f.all_dark {
        let _ = writeln!(out, "  every zone dark: {}", Stop::AllDark.rule(p));
    }
    for s in &f.slots {
        let _ = writeln!(
            out,
            "    {} (zone {}, turn {}): NoExecute taint {}",
            s.node,
            zone_name(&s.zone),
            s.turn,
            s.slot.words()
        );
    }
    if f.slots.iter().any(|s| matches!(s.slot, Slot::Maybe(_))) {
        let _ = writeln!(
            out,
            "  (the race: a node is queued for its taint in the controller's pass before that pass \
             computes the zone's new state, so the first one or two may get theirs; none does when \
             they all go NotReady in one pass)"
        );
    }
    out
}

#[cfg(test)]
#[path = "disruption_tests.rs"]
mod tests;
