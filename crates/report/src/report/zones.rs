//! The Zones section: when the faults broke more than one node, what the
//! node lifecycle controller's zone rules forecast before the first fault,
//! the zone states nodefall inferred from the Ready conditions over time,
//! each failed node's taints beside its forecast turn, and the evictions
//! that never came with the rule that explains each.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::format::{MISSING, cell, signed_secs, t0_rel, table};
use crate::disruption::{self, Slot, Stop, zone_name};
use crate::record::RunResult;
use crate::timeline::Ms;
use crate::timeline::node_times::NodeTimes;

pub fn section(out: &mut String, r: &RunResult) {
    let Some(z) = &r.zones else {
        return;
    };
    let p = &r.profile;
    let _ = writeln!(
        out,
        "## Zones\n\nThe node lifecycle controller's rules on this cluster: a zone with more than 2 \
         and at least {}% of its nodes not ready is partially disrupted; it taints one node NoExecute \
         per {} in a zone that is healthy (or wholly dark while another is not), one per {} in a \
         partially disrupted zone of more than {} nodes, and none in a smaller one; when every zone is \
         dark it removes the taints and taints none. The states below are inferred from the Ready \
         conditions nodefall saw (the controller logs its zone states and sends no Event).\n",
        (p.zones.unhealthy_zone_threshold * 100.0).round(),
        crate::profile::interval_words(p.node_eviction_interval),
        crate::profile::interval_words(p.secondary_eviction_interval),
        p.zones.large_cluster_size_threshold,
    );
    let rows = z
        .forecast
        .zones
        .iter()
        .filter(|f| f.failing > 0 || z.forecast.all_dark)
        .map(|f| {
            [
                cell(zone_name(&f.zone)),
                f.nodes.to_string(),
                f.down_before.to_string(),
                f.failing.to_string(),
                f.state.to_string(),
                cell(&f.pace.words()),
            ]
        })
        .collect();
    out.push_str("Forecast before the first fault:\n\n");
    out.push_str(&table(
        [
            "zone",
            "nodes",
            "down before",
            "failing",
            "state after the faults",
            "NoExecute taints",
        ],
        rows,
    ));
    let rows = z
        .states
        .iter()
        .map(|c| {
            [
                t0_rel(c.at),
                cell(zone_name(&c.zone)),
                c.state.to_string(),
                format!("{} of {}", c.not_ready, c.nodes),
            ]
        })
        .collect();
    out.push_str("\nZone states, as the controller counts them:\n\n");
    out.push_str(&table(["from", "zone", "state", "not ready"], rows));
    for (from, to) in &z.dark {
        let _ = writeln!(
            out,
            "\nEvery zone dark from {}{}.",
            t0_rel(*from),
            to.map_or_else(
                || " to the end of the run".into(),
                |t| format!(" to {}", t0_rel(t))
            )
        );
    }
    per_node(out, r);
    if !z.untainted.is_empty() {
        out.push_str("\nNever tainted NoExecute (so never evicted by the taint):\n\n");
        for u in &z.untainted {
            let why = u.rule.map_or_else(
                || "no zone rule explains it (back before its turn came?)".to_owned(),
                |rule| rule.rule(p),
            );
            let _ = writeln!(
                out,
                "- `{}` (zone {}): {why}.",
                u.node,
                cell(zone_name(&u.zone))
            );
        }
    }
    if !z.kept_dark.is_empty() {
        let _ = writeln!(
            out,
            "\nTainted NoExecute in the controller's pass that darkened the last zone, and kept \
             while every zone was dark (it removes only the taints the nodes had when that pass \
             began): {}.",
            z.kept_dark
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    out.push('\n');
}

/// Each failed node's taints beside its forecast turn: the NoExecute taint
/// also counted from the first NotReady of its zone's failed nodes, as the
/// forecast counts.
fn per_node(out: &mut String, r: &RunResult) {
    let Some(z) = &r.zones else {
        return;
    };
    // Which zone each forecast node is in; each zone's slots by turn.
    let zone_of: HashMap<&str, &str> = z
        .forecast
        .slots
        .iter()
        .map(|s| (s.node.as_str(), s.zone.as_str()))
        .collect();
    let mut turns: BTreeMap<&str, Vec<&disruption::NodeSlot>> = BTreeMap::new();
    for s in &z.forecast.slots {
        turns.entry(s.zone.as_str()).or_default().push(s);
    }
    // The failed nodes of each zone in the order they took their turns:
    // tainted first, by when; the others after, by when they went NotReady.
    let mut by_zone: BTreeMap<&str, Vec<&NodeTimes>> = BTreeMap::new();
    for n in &r.metrics.nodes {
        if let Some(zone) = zone_of.get(n.node.as_str()) {
            by_zone.entry(zone).or_default().push(n);
        }
    }
    let at = |v: Option<Ms>| v.map_or_else(|| MISSING.to_owned(), t0_rel);
    let mut rows: Vec<[String; 8]> = Vec::new();
    for (zone, mut nodes) in by_zone {
        nodes.sort_by_key(|n| (n.no_execute_taint.unwrap_or(Ms::MAX), n.not_ready, &n.node));
        let first_down = nodes.iter().filter_map(|n| n.not_ready).min();
        let slots = turns.get(zone).map_or(&[][..], Vec::as_slice);
        for (i, n) in nodes.iter().enumerate() {
            let after_first = n
                .no_execute_taint
                .zip(first_down)
                .map_or_else(|| MISSING.to_owned(), |(t, f)| signed_secs(t - f));
            rows.push([
                format!("`{}`", n.node),
                cell(zone_name(zone)),
                slots.get(i).map_or_else(
                    || MISSING.to_owned(),
                    |s| cell(&format!("{}: {}", s.turn, s.slot.words())),
                ),
                at(n.not_ready),
                at(n.no_schedule_taint),
                at(n.no_execute_taint),
                after_first,
                at(n.no_execute_removed),
            ]);
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str(
        "\nEach failed node, in the order its zone's nodes got their NoExecute taint (those never \
         tainted last), beside the forecast for that turn:\n\n",
    );
    out.push_str(&table(
        [
            "node",
            "zone",
            "turn: forecast NoExecute taint",
            "NotReady",
            "NoSchedule taint",
            "NoExecute taint",
            "after the zone's first NotReady",
            "NoExecute taint removed",
        ],
        rows,
    ));
    let races = z
        .forecast
        .slots
        .iter()
        .any(|s| matches!(s.slot, Slot::Maybe(_) | Slot::Never(Stop::AllDark)));
    if races {
        out.push_str(
            "\nA node is queued for its NoExecute taint in the controller's pass before that pass \
             computes the zone's new state, so where the forecast says \"if taken before the zone \
             tips\" the first one or two may get theirs, and none does when they all went NotReady \
             in one pass.\n",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::{ZoneNode, forecast};
    use crate::timeline::node_times::NodeTimes;
    use crate::timeline::zones::record;

    #[test]
    fn the_section_shows_the_forecast_the_states_and_the_untainted() {
        let p = crate::profile::TimingProfile::fast();
        let nodes: Vec<ZoneNode> = (1..=4)
            .map(|i| ZoneNode {
                name: format!("w{i}"),
                zone: "b".into(),
                ready: true,
                excluded: false,
            })
            .collect();
        let down = ["w1", "w2", "w3"].map(String::from);
        let f = forecast(&nodes, &down.iter().cloned().collect(), &p);
        let times = |n: &str, nr: Ms, taint: Option<Ms>| NodeTimes {
            node: n.into(),
            not_ready: Some(nr),
            no_schedule_taint: Some(nr + 20),
            no_execute_taint: taint,
            ..NodeTimes::default()
        };
        let failed = vec![
            times("w1", 9_000, Some(9_060)),
            times("w2", 9_200, None),
            times("w3", 9_500, None),
        ];
        let transitions: Vec<crate::timeline::Transition> =
            [("w1", 10_000), ("w2", 10_200), ("w3", 10_500)]
                .iter()
                .map(|(n, at)| {
                    crate::timeline::seen(
                        *at,
                        crate::timeline::ObjectRef::Node { name: (*n).into() },
                        crate::timeline::Change::NodeReady {
                            status: "Unknown".into(),
                            reason: None,
                            message: None,
                        },
                    )
                })
                .collect();
        let after: Vec<&crate::timeline::Transition> = transitions.iter().collect();
        let zones = record(nodes, f, &after, 1_000, &failed, &p);
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "schemaVersion": crate::record::SCHEMA_VERSION,
            "scenario": "s", "file": "s.yaml", "backend": "sim",
            "profile": p,
            "namespace": "ns", "targets": {}, "sets": {"down": down},
            "startedAt": "2026-11-25T15:01:56.691Z", "t0": 1_000,
            "finished": 60_000, "verdict": "pass",
            "steps": [], "expectations": [], "cleanup": [],
            "metrics": crate::timeline::metrics::Metrics::default(),
            "transitions": [],
        }))
        .unwrap();
        r.metrics.nodes = failed;
        r.zones = Some(zones);
        let mut out = String::new();
        section(&mut out, &r);
        for want in [
            "## Zones",
            "| b    | 4     | 0           | 3       | PartialDisruption",
            "| T0+9.500s | b    | PartialDisruption | 3 of 4",
            "| `w1` | b    | 1: at once if taken before the zone tips, else never",
            "+0.060s",
            "- `w2` (zone b): the zone is partially disrupted",
            "no more than 4 nodes",
            "none does when they all went NotReady",
        ] {
            assert!(out.contains(want), "`{want}` not in:\n{out}");
        }
        // Round trip: the record reads back and renders the same.
        let back: RunResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        let mut again = String::new();
        section(&mut again, &back);
        assert_eq!(again, out);
    }
}
