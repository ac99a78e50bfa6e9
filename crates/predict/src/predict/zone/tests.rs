use std::collections::BTreeMap;

use super::*;
use crate::disruption::{EXCLUDE_DISRUPTION, ZoneState};
use crate::predict::snapshot::{
    Budget, Claim, Endpoint, LabelSelector, Node, Requirement, Service, Workload,
};

fn by_app(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: BTreeMap::from([("app".to_owned(), app.to_owned())]),
        match_expressions: Vec::new(),
    }
}

/// Three zones of three nodes (4 CPUs each); a Deployment `web` of 6 (two
/// per zone: a0, a1, b0, b1, c0, c1), a StatefulSet `db` of 3 (one per
/// zone, on a2, b2, c2) behind Service `db`, `solo` (one replica, on b0)
/// behind Service `solo`, and a budget keeping 5 web pods.
pub(crate) fn cluster() -> Snapshot {
    let mut nodes = Vec::new();
    for z in ["a", "b", "c"] {
        for i in 0..3 {
            nodes.push(Node::in_zone(&format!("{z}{i}"), z, 4000));
        }
    }
    let mut pods = Vec::new();
    for (i, n) in ["a0", "a1", "b0", "b1", "c0", "c1"].iter().enumerate() {
        pods.push(Pod::example(
            "shop",
            &format!("web-{i}"),
            n,
            Owner::Deployment("web".into()),
            "web",
        ));
    }
    for (i, n) in ["a2", "b2", "c2"].iter().enumerate() {
        pods.push(Pod::example(
            "shop",
            &format!("db-{i}"),
            n,
            Owner::StatefulSet("db".into()),
            "db",
        ));
    }
    pods.push(Pod::example(
        "shop",
        "solo-1",
        "b0",
        Owner::Deployment("solo".into()),
        "solo",
    ));
    for p in &mut pods {
        p.scheduling.requests.cpu_milli = 500;
    }
    let endpoints = |app: &str| {
        pods.iter()
            .filter(|p| p.labels["app"] == app)
            .map(|p| Endpoint {
                pod: Some(p.name.clone()),
                node: p.node.clone(),
                ready: true,
            })
            .collect()
    };
    let services = vec![
        Service {
            namespace: "shop".into(),
            name: "db".into(),
            endpoints: endpoints("db"),
        },
        Service {
            namespace: "shop".into(),
            name: "solo".into(),
            endpoints: endpoints("solo"),
        },
    ];
    Snapshot {
        nodes,
        workloads: vec![
            Workload {
                kind: "Deployment".into(),
                namespace: "shop".into(),
                name: "web".into(),
                replicas: 6,
            },
            Workload {
                kind: "StatefulSet".into(),
                namespace: "shop".into(),
                name: "db".into(),
                replicas: 3,
            },
            Workload {
                kind: "Deployment".into(),
                namespace: "shop".into(),
                name: "solo".into(),
                replicas: 1,
            },
        ],
        services,
        budgets: vec![Budget {
            namespace: "shop".into(),
            name: "web".into(),
            selector: Some(by_app("web")),
            disruptions_allowed: 1,
            current_healthy: 6,
            desired_healthy: 5,
        }],
        pods,
        claims: Vec::new(),
    }
}

fn zone_b(snap: &Snapshot, profile: &TimingProfile) -> SetForecast {
    let set = Set::zone(snap, "b").unwrap();
    let f = forecast(snap, profile, Fault::Poweroff, &[set]).unwrap();
    f.sets.into_iter().next().unwrap()
}

fn moved<'a>(s: &'a SetForecast, pod: &str) -> &'a Moved {
    s.pods
        .iter()
        .find(|m| m.pod == format!("shop/{pod}"))
        .unwrap_or_else(|| panic!("{pod} not in {s:#?}"))
}

#[test]
fn a_dark_zone_is_tainted_at_the_normal_pace_and_its_pods_land_in_the_other_zones() {
    let p = TimingProfile::upstream_default();
    let s = zone_b(&cluster(), &p);
    assert_eq!(s.selector, "topology.kubernetes.io/zone=b");
    assert_eq!(s.nodes, ["b0", "b1", "b2"]);
    let b = s.zones.zones.iter().find(|z| z.zone == "b").unwrap();
    assert_eq!((b.state, b.failing), (ZoneState::FullDisruption, 3));
    // Unknown between grace - lease/4 and grace + monitorPeriod (40 .. 55 s);
    // one taint per 10 s, each up to a token later
    let taints: Vec<When> = s.turns.iter().map(|t| t.taint).collect();
    assert_eq!(
        taints,
        [
            When::Between {
                from: 40_000,
                to: 65_000
            },
            When::Between {
                from: 50_000,
                to: 75_000
            },
            When::Between {
                from: 60_000,
                to: 85_000
            },
        ]
    );
    // web-2 on b0 (turn 1) evicted 300 s after its taint; replaced in a or c
    let w = moved(&s, "web-2");
    assert_eq!(
        w.evicted,
        When::Between {
            from: 340_000,
            to: 365_000
        }
    );
    let Outcome::Replaced { zone, .. } = &w.outcome else {
        panic!("{w:#?}")
    };
    assert!(zone == "a" || zone == "c", "{w:#?}");
    assert!(matches!(moved(&s, "db-1").outcome, Outcome::Stuck { .. }));
    // solo's only replica: its Service dark from Unknown until its
    // replacement, at its eviction
    let solo = s
        .services
        .iter()
        .find(|x| x.service == "shop/solo")
        .unwrap();
    assert_eq!(solo.until, moved(&s, "solo-1").evicted);
    assert!(
        s.services.iter().all(|x| x.service != "shop/db"),
        "db keeps 2"
    );
    let w = |name: &str| s.workloads.iter().find(|w| w.workload == name).unwrap();
    assert!(w("Deployment shop/solo").at_zero);
    let db = w("StatefulSet shop/db");
    assert_eq!(
        (db.lost, db.majority_lost),
        (1, false),
        "2 of 3 is a majority"
    );
    assert_eq!(
        (
            w("Deployment shop/web").lost,
            w("Deployment shop/web").replaced
        ),
        (2, 2)
    );
    // the budget keeps 5 of 6: losing 2 breaks it, and refuses a drain of 1
    let budget = &s.budgets[0];
    assert_eq!(
        (budget.lost, budget.below, budget.drain_refused),
        (2, true, 1)
    );
    assert_eq!(
        (
            s.cost.services_dark,
            s.cost.workloads_at_zero,
            s.cost.not_running
        ),
        (1, 1, 1),
        "db-1 stuck"
    );
}

#[test]
fn the_zones_are_ranked_and_a_statefulset_majority_is_lost_with_two_zones_of_it() {
    let p = TimingProfile::upstream_default();
    let snap = cluster();
    let f = forecast(&snap, &p, Fault::Poweroff, &Set::zones(&snap)).unwrap();
    let order: Vec<&str> = f.sets.iter().map(|s| s.set.as_str()).collect();
    assert_eq!(order[0], "zone b", "solo's zone costs most: {order:?}");
    assert_eq!(f.sets[0].rank, 1);
    assert!(f.not_modelled.contains("scoring"));
    // two zones picked by a selector: db loses 2 of 3
    let pick =
        |l: &BTreeMap<String, String>| l.get(ZONE_LABEL).is_some_and(|z| z == "a" || z == "b");
    let set = Set::selected(&snap, "topology.kubernetes.io/zone in (a,b)", pick).unwrap();
    let s = &forecast(&snap, &p, Fault::Pause, &[set]).unwrap().sets[0];
    let db = s
        .workloads
        .iter()
        .find(|w| w.workload == "StatefulSet shop/db")
        .unwrap();
    assert!(db.majority_lost, "{db:#?}");
    assert!(s.services.iter().any(|x| x.service == "shop/solo"));
    assert!(matches!(
        Set::selected(&snap, "x=y", |_| false),
        Err(Error::NoNode(_))
    ));
    assert!(matches!(
        Set::zone(&snap, "d"),
        Err(Error::UnknownZone { .. })
    ));
    assert!(matches!(
        forecast(&snap, &p, Fault::Drain, &[]),
        Err(Error::Fault(Fault::Drain))
    ));
}

#[test]
fn a_partially_disrupted_small_zone_strands_its_pods_and_an_excluded_node_is_not_counted() {
    let p = TimingProfile::upstream_default();
    let mut snap = cluster();
    // zone b gets two more nodes, b3 (failing, with a pod of its own) and b4
    // (staying): 4 of 5 not ready is partial, and a zone of 5 (<= 50) stops
    // tainting once it tips, at its third node
    snap.nodes.push(Node::in_zone("b3", "b", 4000));
    snap.nodes.push(Node::in_zone("b4", "b", 4000));
    snap.pods.push(Pod::example(
        "shop",
        "lone",
        "b3",
        Owner::Deployment("lone".into()),
        "lone",
    ));
    let set = Set::selected(&snap, "zone b but b4", |l| {
        l.get(ZONE_LABEL).is_some_and(|z| z == "b")
            && l.get("kubernetes.io/hostname").is_some_and(|h| h != "b4")
    })
    .unwrap();
    let s = &forecast(&snap, &p, Fault::Poweroff, std::slice::from_ref(&set))
        .unwrap()
        .sets[0];
    let b = s.zones.zones.iter().find(|z| z.zone == "b").unwrap();
    assert_eq!(b.state, ZoneState::PartialDisruption);
    // the first three race the tipping: evicted if tainted before it
    let w = moved(s, "web-2");
    assert!(w.maybe, "{w:#?}");
    assert!(s.turns[0].slot.contains("if taken before the zone tips"));
    // the fourth is never tainted: its pod stays, stranded
    let lone = moved(s, "lone");
    assert_eq!(lone.evicted, When::Never);
    let Outcome::Stranded { why } = &lone.outcome else {
        panic!("{lone:#?}")
    };
    assert!(why.contains("largeClusterSizeThreshold"), "{why}");
    assert_eq!(s.turns[3].taint, When::Never);
    let dark = s
        .services
        .iter()
        .find(|x| x.service == "shop/solo")
        .unwrap();
    assert_eq!(dark.until, moved(s, "solo-1").evicted);

    // b4 excluded from the disruption checks: zone b counts 4, all failing
    snap.nodes
        .last_mut()
        .unwrap()
        .labels
        .insert(EXCLUDE_DISRUPTION.into(), String::new());
    let s = &forecast(&snap, &p, Fault::Poweroff, &[set]).unwrap().sets[0];
    let b = s.zones.zones.iter().find(|z| z.zone == "b").unwrap();
    assert_eq!((b.nodes, b.state), (4, ZoneState::FullDisruption));
    assert!(matches!(moved(s, "lone").outcome, Outcome::Replaced { .. }));
    assert!(!moved(s, "web-2").maybe);
}

#[test]
fn a_replacement_waits_for_an_attached_volume_and_one_bound_to_the_zone_cannot_move() {
    let mut p = TimingProfile::upstream_default();
    let mut snap = cluster();
    let solo = snap.pods.iter_mut().find(|x| x.name == "solo-1").unwrap();
    solo.claims.push("data".into());
    let web = snap.pods.iter_mut().find(|x| x.name == "web-3").unwrap();
    web.claims.push("local".into());
    snap.claims = vec![
        Claim {
            namespace: "shop".into(),
            name: "data".into(),
            volume: Some("pv-data".into()),
            single_node: true,
            attached_to: vec!["b0".into()],
            node_terms: Vec::new(),
        },
        Claim {
            namespace: "shop".into(),
            name: "local".into(),
            volume: Some("pv-local".into()),
            single_node: true,
            attached_to: Vec::new(),
            node_terms: vec![crate::predict::snapshot::NodeTerm {
                labels: vec![Requirement {
                    key: ZONE_LABEL.into(),
                    operator: "In".into(),
                    values: vec!["b".into()],
                }],
                fields: Vec::new(),
            }],
        },
    ];
    let s = zone_b(&snap, &p);
    let Outcome::WaitsForDetach {
        claims, release, ..
    } = &moved(&s, "solo-1").outcome
    else {
        panic!("{s:#?}")
    };
    assert_eq!(claims, &["data"]);
    assert!(release.contains("6-minute force detach"), "{release}");
    let Outcome::CannotMove { why } = &moved(&s, "web-3").outcome else {
        panic!("{s:#?}")
    };
    assert!(
        why.contains("claim local") && why.contains("volume node affinity"),
        "{why}"
    );
    // solo's Service stays dark: its replacement waits
    let dark = s
        .services
        .iter()
        .find(|x| x.service == "shop/solo")
        .unwrap();
    assert_eq!(dark.until, When::Never);
    p.force_detach_on_timeout = false;
    let s = zone_b(&snap, &p);
    let Outcome::WaitsForDetach { release, .. } = &moved(&s, "solo-1").outcome else {
        panic!("{s:#?}")
    };
    assert!(release.contains("no force detach, ever"), "{release}");
}
