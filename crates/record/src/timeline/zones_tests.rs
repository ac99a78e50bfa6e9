//! Zone states inferred from Ready conditions, and the untainted and kept
//! nodes explained, on the sim's nine nodes in two zones.

use std::collections::BTreeSet;

use super::*;
use crate::disruption::forecast;
use crate::timeline::seen as t;

fn nine() -> Vec<ZoneNode> {
    (1..=9)
        .map(|i| ZoneNode {
            name: format!("worker-{i}"),
            zone: if i % 2 == 1 { "a" } else { "b" }.into(),
            ready: true,
            excluded: false,
        })
        .collect()
}

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

fn times(node: &str, not_ready: Ms, taint: Option<Ms>, removed: Option<Ms>) -> NodeTimes {
    NodeTimes {
        node: node.into(),
        not_ready: Some(not_ready),
        no_execute_taint: taint,
        no_execute_removed: removed,
        ..NodeTimes::default()
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn a_small_zone_tips_at_its_third_node_and_the_untainted_are_explained() {
    let p = TimingProfile::fast();
    let down = ["worker-2", "worker-4", "worker-6"];
    let all = [
        t(10_000, node("worker-2"), ready("Unknown")),
        t(10_300, node("worker-4"), ready("Unknown")),
        t(10_900, node("worker-6"), ready("Unknown")),
        t(60_000, node("worker-2"), ready("True")),
        t(60_100, node("worker-4"), ready("True")),
        t(60_200, node("worker-6"), ready("True")),
    ];
    let after: Vec<&Transition> = all.iter().collect();
    let f = forecast(&nine(), &set(&down), &p);
    let failed = [
        times("worker-2", 9_000, Some(9_100), Some(59_000)),
        times("worker-4", 9_300, None, None),
        times("worker-6", 9_900, None, None),
    ];
    let r = record(nine(), f, &after, 1_000, &failed, &p);
    let b: Vec<(Ms, ZoneState, usize)> = r
        .states
        .iter()
        .filter(|c| c.zone == "b")
        .map(|c| (c.at, c.state, c.not_ready))
        .collect();
    assert_eq!(
        b,
        [
            (0, ZoneState::Normal, 0),
            (9_900, ZoneState::PartialDisruption, 3),
            (59_000, ZoneState::Normal, 2),
        ]
    );
    assert!(r.dark.is_empty());
    assert_eq!(
        r.untainted
            .iter()
            .map(|u| (u.node.as_str(), u.rule))
            .collect::<Vec<_>>(),
        [
            ("worker-4", Some(Stop::SmallZone)),
            ("worker-6", Some(Stop::SmallZone))
        ]
    );
    assert!(r.kept_dark.is_empty());
    let json = serde_json::to_string(&r).unwrap();
    let back: ZonesRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn every_zone_dark_is_a_span_and_a_taint_that_stayed_through_it_is_kept() {
    let p = TimingProfile::fast();
    let nodes = nine();
    let mut all: Vec<Transition> = (1..=9)
        .map(|i| {
            t(
                10_000 + i * 100,
                node(&format!("worker-{i}")),
                ready("Unknown"),
            )
        })
        .collect();
    all.extend((1..=9).map(|i| {
        t(
            70_000 + i * 100,
            node(&format!("worker-{i}")),
            ready("True"),
        )
    }));
    let after: Vec<&Transition> = all.iter().collect();
    let names: Vec<String> = (1..=9).map(|i| format!("worker-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let f = forecast(&nodes, &set(&refs), &p);
    let mut failed: Vec<NodeTimes> = names.iter().map(|n| times(n, 9_000, None, None)).collect();
    // worker-1 tainted then untainted when the last zone went dark;
    // worker-2 tainted in that very pass: kept until it was back.
    failed[0] = times("worker-1", 9_100, Some(9_150), Some(9_950));
    failed[1] = times("worker-2", 9_200, Some(9_850), Some(69_300));
    let r = record(nodes, f, &after, 1_000, &failed, &p);
    // the last node (worker-9) darkened zone a at 9,900
    assert_eq!(r.dark, [(9_900, Some(69_100))]);
    assert_eq!(r.kept_dark, ["worker-2"]);
    assert_eq!(r.untainted.len(), 7);
    assert!(r.untainted.iter().all(|u| u.rule == Some(Stop::AllDark)));
}

/// Seen on kind (3 workers and a control plane, one zone): two workers
/// NotReady in one pass, one tainted, the other's token not yet come when the
/// third tipped the zone a second later: the small-zone rule explains it.
#[test]
fn a_node_down_before_the_zone_tipped_is_explained_by_the_tip() {
    let p = TimingProfile::fast();
    let nodes: Vec<ZoneNode> = ["cp", "w1", "w2", "w3"]
        .iter()
        .map(|n| ZoneNode {
            name: (*n).into(),
            zone: String::new(),
            ready: true,
            excluded: false,
        })
        .collect();
    let all = [
        t(9_097, node("w3"), ready("Unknown")),
        t(9_111, node("w1"), ready("Unknown")),
        t(10_245, node("w2"), ready("Unknown")),
        t(50_301, node("w1"), ready("True")),
    ];
    let after: Vec<&Transition> = all.iter().collect();
    let f = forecast(&nodes, &set(&["w1", "w2", "w3"]), &p);
    let mut w3 = times("w3", 8_097, None, None);
    w3.ready_again = Some(50_400);
    let failed = [
        times("w1", 8_111, Some(8_320), None),
        times("w2", 9_245, None, None),
        w3,
    ];
    let r = record(nodes, f, &after, 1_000, &failed, &p);
    assert_eq!(
        r.untainted
            .iter()
            .map(|u| (u.node.as_str(), u.rule))
            .collect::<Vec<_>>(),
        [("w2", Some(Stop::SmallZone)), ("w3", Some(Stop::SmallZone))]
    );
    // A node back before the zone tipped is not explained by it.
    assert!(!partial_while(&r.states, "", 8_097, 9_000));
    assert!(partial_while(&r.states, "", 8_097, 9_300));
}

#[test]
fn excluded_nodes_are_not_counted() {
    let p = TimingProfile::fast();
    let mut nodes = nine();
    nodes[7].excluded = true; // worker-8 of zone b
    let all = [
        t(10_000, node("worker-2"), ready("Unknown")),
        t(10_100, node("worker-4"), ready("Unknown")),
        t(10_200, node("worker-6"), ready("Unknown")),
        t(10_300, node("worker-8"), ready("Unknown")),
    ];
    let after: Vec<&Transition> = all.iter().collect();
    let h = history(&nodes, &after, 0, &p);
    let last_b = h.iter().rfind(|c| c.zone == "b").unwrap();
    assert_eq!(
        (last_b.state, last_b.not_ready, last_b.nodes),
        (ZoneState::FullDisruption, 3, 3)
    );
}
