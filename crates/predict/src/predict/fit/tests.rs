use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::predict::snapshot::{Claim, Owner, Requirement, Taint, TolerationSpec};

fn web(name: &str, node: &str, cpu: i64) -> Pod {
    let mut p = Pod::example("shop", name, node, Owner::Deployment("web".into()), "web");
    p.scheduling.requests.cpu_milli = cpu;
    p
}

fn zones(per_zone: usize, cpu: i64) -> Vec<Node> {
    let mut nodes = Vec::new();
    for z in ["a", "b", "c"] {
        for i in 0..per_zone {
            nodes.push(Node::in_zone(&format!("{z}{i}"), z, cpu));
        }
    }
    nodes
}

fn place_all(snap: &Snapshot, lost: &[&str], moving: &[&str]) -> Vec<Placement> {
    let lost: BTreeSet<&str> = lost.iter().copied().collect();
    let gone: BTreeSet<String> = moving.iter().map(|m| format!("shop/{m}")).collect();
    let mut placer = Placer::new(snap, &lost, &gone);
    let pods: Vec<&Pod> = moving
        .iter()
        .map(|m| snap.pods.iter().find(|p| p.name == *m).unwrap())
        .collect();
    pods.into_iter().map(|p| placer.place(p)).collect()
}

fn on(p: &Placement) -> &str {
    match p {
        Placement::On { node } => node,
        Placement::Pending { why } => panic!("pending: {why}"),
    }
}

fn pending(p: &Placement) -> &str {
    match p {
        Placement::Pending { why } => why,
        Placement::On { node } => panic!("placed on {node}"),
    }
}

#[test]
fn each_placement_takes_its_room_and_the_rest_stay_pending_with_the_schedulers_reasons() {
    // two nodes left of 1000m each, 600m used on b0: three pods of 400m
    let mut snap = Snapshot {
        nodes: vec![
            Node::in_zone("a0", "a", 1000),
            Node::in_zone("b0", "b", 1000),
            Node::in_zone("c0", "c", 1000),
        ],
        pods: vec![
            web("w1", "a0", 400),
            web("w2", "a0", 400),
            web("w3", "a0", 100),
            web("busy", "b0", 600),
        ],
        ..Snapshot::default()
    };
    snap.nodes[2].taints.push(Taint {
        key: "dedicated".into(),
        value: "gpu".into(),
        effect: "NoSchedule".into(),
    });
    let got = place_all(&snap, &["a0"], &["w1", "w2", "w3"]);
    assert_eq!(on(&got[0]), "b0", "the only room: {got:?}");
    let why = pending(&got[1]);
    assert_eq!(
        why,
        "0/3 nodes are available: 1 node(s) lost with the set (tainted unreachable), 1 node(s) \
         had untolerated taint {dedicated: gpu}, 1 Insufficient cpu."
    );
    // 100m still fits beside the first two on b0 (1000 - 600 - 400 = 0): no
    assert!(pending(&got[2]).contains("Insufficient cpu"), "{got:?}");

    // tolerated, the taint is no bar
    snap.pods[1].scheduling.tolerations.push(TolerationSpec {
        key: "dedicated".into(),
        operator: "Equal".into(),
        value: "gpu".into(),
        effect: "NoSchedule".into(),
    });
    let got = place_all(&snap, &["a0"], &["w1", "w2", "w3"]);
    assert_eq!(on(&got[1]), "c0");
}

#[test]
fn a_hard_zone_spread_holds_the_replacements_of_a_lost_zone_back() {
    // nine pods, three per zone, maxSkew 1 over zones. Zone a lost, its
    // nodes still count as a domain (tainted, but `nodeTaintsPolicy:
    // Ignore`) holding 0 pods (Terminating ones count none), so b and c at
    // 3 are already past the skew: no replacement fits anywhere
    let mut pods = Vec::new();
    for (i, z) in ["a", "b", "c"].iter().enumerate() {
        for k in 0..3 {
            let mut p = web(&format!("w{}", i * 3 + k), &format!("{z}{k}"), 100);
            p.scheduling.spread.push(crate::predict::snapshot::Spread {
                max_skew: 1,
                topology_key: crate::disruption::ZONE_LABEL.into(),
                selector: LabelSelector {
                    match_labels: BTreeMap::from([("app".into(), "web".into())]),
                    match_expressions: Vec::new(),
                },
            });
            pods.push(p);
        }
    }
    let snap = Snapshot {
        nodes: zones(3, 4000),
        pods,
        ..Snapshot::default()
    };
    let got = place_all(&snap, &["a0", "a1", "a2"], &["w0", "w1", "w2"]);
    for p in &got {
        assert_eq!(
            pending(p),
            "0/9 nodes are available: 3 node(s) lost with the set (tainted unreachable), 6 \
             node(s) didn't match pod topology spread constraints."
        );
    }
    // maxSkew 4: one more in each of b and c (4 - 0), not a third
    let mut snap = snap;
    for p in &mut snap.pods {
        p.scheduling.spread[0].max_skew = 4;
    }
    let got = place_all(&snap, &["a0", "a1", "a2"], &["w0", "w1", "w2"]);
    let zones: BTreeSet<&str> = got[..2].iter().map(|p| &on(p)[..1]).collect();
    assert_eq!(zones, BTreeSet::from(["b", "c"]), "{got:?}");
    assert!(matches!(got[2], Placement::Pending { .. }), "{got:?}");
}

#[test]
fn anti_affinity_counts_both_ways_and_node_affinity_and_volumes_pin() {
    let anti = crate::predict::snapshot::AntiAffinity {
        topology_key: "kubernetes.io/hostname".into(),
        selector: LabelSelector {
            match_labels: BTreeMap::from([("app".into(), "web".into())]),
            match_expressions: Vec::new(),
        },
        namespaces: Vec::new(),
    };
    let mut a = web("w1", "a0", 0);
    a.scheduling.anti_affinity.push(anti.clone());
    let mut other = web("w2", "b0", 0);
    other.scheduling.anti_affinity.push(anti);
    let plain = web("w3", "a1", 0);
    let snap = Snapshot {
        nodes: zones(2, 4000),
        pods: vec![a, other, plain],
        ..Snapshot::default()
    };
    // w1 may not join w2 (its own term), and w3 may not join w2 (w2's)
    let got = place_all(&snap, &["a0", "a1"], &["w1", "w3"]);
    assert!(matches!(on(&got[0]), "b1" | "c0" | "c1"), "{got:?}");
    assert_ne!(on(&got[1]), "b0", "{got:?}");
    assert_ne!(on(&got[1]), on(&got[0]), "w1 placed now repels w3: {got:?}");

    // node affinity to zone a only: nowhere once zone a is lost
    let mut snap = snap;
    snap.pods[2]
        .scheduling
        .node_terms
        .push(crate::predict::snapshot::NodeTerm {
            labels: vec![Requirement {
                key: crate::disruption::ZONE_LABEL.into(),
                operator: "In".into(),
                values: vec!["a".into()],
            }],
            fields: Vec::new(),
        });
    let got = place_all(&snap, &["a0", "a1"], &["w3"]);
    assert!(
        pending(&got[0]).contains("4 node(s) didn't match Pod's node affinity/selector"),
        "{got:?}"
    );

    // a volume bound to node a1
    snap.pods[2].scheduling.node_terms.clear();
    snap.pods[2].claims.push("data".into());
    snap.claims.push(Claim {
        namespace: "shop".into(),
        name: "data".into(),
        volume: Some("pv-1".into()),
        single_node: true,
        attached_to: Vec::new(),
        node_terms: vec![crate::predict::snapshot::NodeTerm {
            labels: vec![Requirement {
                key: "kubernetes.io/hostname".into(),
                operator: "In".into(),
                values: vec!["a1".into()],
            }],
            fields: Vec::new(),
        }],
    });
    let got = place_all(&snap, &["a0", "a1"], &["w3"]);
    assert!(
        pending(&got[0]).contains("4 node(s) had volume node affinity conflict"),
        "{got:?}"
    );
}

#[test]
fn the_emptiest_node_is_chosen_and_unreported_allocatable_is_no_limit() {
    let mut nodes = zones(1, 1000);
    nodes[2].allocatable = None;
    let snap = Snapshot {
        nodes,
        pods: vec![web("w1", "a0", 900), web("busy", "b0", 500)],
        ..Snapshot::default()
    };
    let got = place_all(&snap, &["a0"], &["w1"]);
    assert_eq!(on(&got[0]), "c0", "{got:?}");
}
