use std::collections::BTreeMap;

use super::super::snapshot::{
    Budget, Claim, Endpoint, LabelSelector, Node, Owner, Pod, Service, Snapshot, Toleration,
    Workload,
};
use super::super::{Ask, Fault, Graceful, forecast};
use super::*;
use crate::profile::TimingProfile;

fn node(name: &str) -> Node {
    Node {
        control_plane: name == "cp",
        ..Node::example(name)
    }
}

fn endpoint(pod: &str, node: &str) -> Endpoint {
    Endpoint {
        pod: Some(pod.into()),
        node: Some(node.into()),
        ready: true,
    }
}

/// w1 runs two of web's three pods and db's only pod (with an RWO claim);
/// w2 the third web pod; a DaemonSet on both; web's budget allows 0.
pub fn cluster() -> Snapshot {
    let web = || Owner::Deployment("web".into());
    let mut db0 = Pod::example("shop", "db-0", "w1", Owner::StatefulSet("db".into()), "db");
    db0.claims = vec!["data-db-0".into()];
    Snapshot {
        nodes: vec![node("cp"), node("w1"), node("w2")],
        pods: vec![
            Pod::example("shop", "web-a", "w1", web(), "web"),
            Pod::example("shop", "web-b", "w1", web(), "web"),
            Pod::example("shop", "web-c", "w2", web(), "web"),
            db0,
            Pod::example(
                "kube-system",
                "proxy-1",
                "w1",
                Owner::DaemonSet("proxy".into()),
                "proxy",
            ),
            Pod::example(
                "kube-system",
                "proxy-2",
                "w2",
                Owner::DaemonSet("proxy".into()),
                "proxy",
            ),
        ],
        workloads: vec![
            Workload {
                kind: "Deployment".into(),
                namespace: "shop".into(),
                name: "web".into(),
                replicas: 3,
            },
            Workload {
                kind: "StatefulSet".into(),
                namespace: "shop".into(),
                name: "db".into(),
                replicas: 1,
            },
        ],
        services: vec![
            Service {
                namespace: "shop".into(),
                name: "web".into(),
                endpoints: vec![
                    endpoint("web-a", "w1"),
                    endpoint("web-b", "w1"),
                    endpoint("web-c", "w2"),
                ],
            },
            Service {
                namespace: "shop".into(),
                name: "db".into(),
                endpoints: vec![endpoint("db-0", "w1")],
            },
        ],
        budgets: vec![Budget {
            namespace: "shop".into(),
            name: "web".into(),
            selector: Some(LabelSelector {
                match_labels: BTreeMap::from([("app".to_owned(), "web".to_owned())]),
                match_expressions: Vec::new(),
            }),
            disruptions_allowed: 0,
            current_healthy: 3,
            desired_healthy: 3,
        }],
        claims: vec![Claim {
            namespace: "shop".into(),
            name: "data-db-0".into(),
            volume: Some("pv-1".into()),
            single_node: true,
            attached_to: vec!["w1".into()],
            node_terms: Vec::new(),
        }],
    }
}

fn between(from: Ms, to: Ms) -> When {
    When::Between { from, to }
}

#[test]
fn a_silent_node_goes_unknown_after_the_grace_and_its_pods_after_their_own_toleration() {
    let f = forecast(
        &cluster(),
        &TimingProfile::upstream_default(),
        Fault::Poweroff,
        &Ask::default(),
    )
    .unwrap();
    // default timings: grace 50 s, lease 40 s (renewed every 10 s), monitor 5 s
    let w1 = &f.nodes[0];
    assert_eq!(w1.node, "w1", "the costliest first: {:?}", f.nodes);
    assert_eq!(w1.timeline[0].at, between(40_000, 55_000));
    assert_eq!(
        w1.timeline[1].at,
        between(40_000, 65_000),
        "up to one taint token late"
    );
    let web_a = w1.pods.iter().find(|p| p.pod == "shop/web-a").unwrap();
    assert_eq!(web_a.evicted, between(340_000, 365_000));
    assert_eq!(web_a.replacement, Replacement::AtEviction);
    assert_eq!(web_a.why, "tolerationSeconds: 300");
    let db = w1.pods.iter().find(|p| p.pod == "shop/db-0").unwrap();
    assert!(
        matches!(db.replacement, Replacement::Stuck { .. }),
        "{db:?}"
    );
    let proxy = w1
        .pods
        .iter()
        .find(|p| p.pod == "kube-system/proxy-1")
        .unwrap();
    assert_eq!(
        (proxy.evicted, &proxy.replacement),
        (When::Never, &Replacement::Stays)
    );
    // db loses its only endpoint until remediation; web keeps one of three
    let db_svc = w1.services.iter().find(|s| s.service == "shop/db").unwrap();
    assert_eq!((db_svc.ready_here, db_svc.ready_total), (1, 1));
    assert!(db_svc.until.starts_with("remediation"), "{db_svc:?}");
    let web_svc = w1
        .services
        .iter()
        .find(|s| s.service == "shop/web")
        .unwrap();
    assert_eq!((web_svc.ready_here, web_svc.ready_total), (2, 3));
    assert_eq!(
        w1.cost,
        Cost {
            services_down: 1,
            stuck: 1,
            refused: 0,
            single_replica: 1,
            disrupted: 3
        }
    );
    assert_eq!(w1.single_replica, ["StatefulSet shop/db"]);
    assert_eq!(f.nodes[1].node, "w2");
    assert_eq!(f.nodes[2].node, "cp", "an empty node costs nothing");
    assert_eq!((f.nodes[0].rank, f.nodes[2].rank), (1, 3));
}

#[test]
fn a_pod_s_own_toleration_sets_its_eviction_and_a_short_grace_moves_everything() {
    let mut snap = cluster();
    snap.pods[0].unreachable = Toleration::Seconds(20);
    snap.pods[1].unreachable = Toleration::None;
    let f = forecast(
        &snap,
        &TimingProfile::fast(),
        Fault::Pause,
        &Ask {
            nodes: &["w1".to_owned()],
            graceful: &[],
            ..Ask::default()
        },
    )
    .unwrap();
    assert_eq!(f.nodes.len(), 1);
    let w1 = &f.nodes[0];
    let t = Timings::of(&TimingProfile::fast());
    let unknown = between(t.grace - t.lease / 4, t.grace + t.monitor_period);
    assert_eq!(w1.timeline[0].at, unknown);
    let taint = unknown.later_by(TAINT_TOKEN_MS);
    assert_eq!(w1.pods[0].evicted, taint.plus(20_000));
    assert_eq!(
        w1.pods[1].evicted, taint,
        "not tolerated: evicted with the taint"
    );
}

#[test]
fn a_replacement_with_a_volume_attached_to_a_silent_node_waits_for_remediation() {
    let mut snap = cluster();
    snap.pods[3].owner = Owner::Deployment("db".into());
    snap.workloads[1].kind = "Deployment".into();
    let f = forecast(
        &snap,
        &TimingProfile::upstream_default(),
        Fault::Poweroff,
        &Ask::default(),
    )
    .unwrap();
    let db = f.nodes[0]
        .pods
        .iter()
        .find(|p| p.pod == "shop/db-0")
        .unwrap();
    assert_eq!(db.waits_for_detach, ["data-db-0"]);
    // the old pod never terminates on a silent node, so the volume stays:
    // the replacement's wait is remediation's, and counts as stuck
    assert_eq!(f.nodes[0].cost.stuck, 1);
    let svc = f.nodes[0]
        .services
        .iter()
        .find(|s| s.service == "shop/db")
        .unwrap();
    assert!(svc.until.starts_with("remediation"), "{svc:?}");
    assert!(svc.until.contains("6-minute force detach"), "{svc:?}");
    assert!(
        f.nodes[0]
            .timeline
            .iter()
            .any(|e| e.what.contains("its replacement waits for data-db-0")),
        "{:#?}",
        f.nodes[0].timeline
    );
    // a volume not attached to the node (no VolumeAttachment): no wait
    snap.claims[0].attached_to = vec!["w2".into()];
    let f = forecast(
        &snap,
        &TimingProfile::upstream_default(),
        Fault::Poweroff,
        &Ask::default(),
    )
    .unwrap();
    let db = f
        .nodes
        .iter()
        .flat_map(|n| &n.pods)
        .find(|p| p.pod == "shop/db-0")
        .unwrap();
    assert!(db.waits_for_detach.is_empty(), "{db:?}");
}

#[test]
fn a_drain_is_refused_where_a_budget_allows_no_disruption() {
    let f = forecast(
        &cluster(),
        &TimingProfile::upstream_default(),
        Fault::Drain,
        &Ask::default(),
    )
    .unwrap();
    let w1 = f.nodes.iter().find(|n| n.node == "w1").unwrap();
    assert_eq!(w1.refusals.len(), 1, "{:?}", w1.refusals);
    assert_eq!(w1.refusals[0].pods_here, 2);
    assert!(
        w1.refusals[0].detail.contains("429"),
        "{:?}",
        w1.refusals[0]
    );
    let db = w1.pods.iter().find(|p| p.pod == "shop/db-0").unwrap();
    assert_eq!(
        db.replacement,
        Replacement::WhenGone,
        "a drain terminates it gracefully"
    );
    let proxy = w1
        .pods
        .iter()
        .find(|p| p.pod == "kube-system/proxy-1")
        .unwrap();
    assert_eq!(proxy.evicted, When::Never, "DaemonSet pods are skipped");
    assert_eq!(f.nodes[0].node, "w1");
}

#[test]
fn a_graceful_shutdown_stops_the_pods_at_once_and_a_statefulset_recreates_its_own() {
    let g = [(
        "w1".to_owned(),
        Graceful {
            grace_ms: 20_000,
            critical_ms: 5_000,
        },
    )];
    let f = forecast(
        &cluster(),
        &TimingProfile::upstream_default(),
        Fault::Shutdown,
        &Ask {
            nodes: &[],
            graceful: &g,
            graceful_from: "the kubelet's /configz",
        },
    )
    .unwrap();
    let w1 = f.nodes.iter().find(|n| n.node == "w1").unwrap();
    let db = w1.pods.iter().find(|p| p.pod == "shop/db-0").unwrap();
    assert_eq!(db.evicted, between(0, 15_000));
    assert_eq!(db.replacement, Replacement::WhenGone);
    assert_eq!(w1.cost.stuck, 0);
    assert_eq!(
        w1.notes,
        [
            "graceful node shutdown: 20 s, the last 5 s of it for critical pods (read from the \
          kubelet's /configz)"
        ]
    );
    assert_eq!(w1.course, Course::Graceful(g[0].1));
    // Unknown once the machine is off: as soon as the pods are stopped, at
    // the latest when the grace period ends
    let unknown = w1
        .timeline
        .iter()
        .find(|e| e.what.starts_with("Ready=Unknown"))
        .unwrap();
    assert_eq!(unknown.at, between(40_000, 75_000), "{unknown:?}");
    // w2's kubelet was not asked: a poweroff, said so
    let w2 = f.nodes.iter().find(|n| n.node == "w2").unwrap();
    assert!(w2.notes[0].contains("--configz"), "{:?}", w2.notes);
}

#[test]
fn a_node_not_in_the_cluster_is_refused_by_name() {
    let e = forecast(
        &cluster(),
        &TimingProfile::fast(),
        Fault::Poweroff,
        &Ask {
            nodes: &["w9".to_owned()],
            graceful: &[],
            ..Ask::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "node `w9` is not in the cluster (its nodes: cp, w1, w2); name a node it has, or none for all"
    );
}

#[test]
fn a_selector_matches_as_the_api_server_does() {
    let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let req = |op: &str, values: &[&str]| LabelSelector {
        match_labels: BTreeMap::new(),
        match_expressions: vec![super::super::snapshot::Requirement {
            key: "app".into(),
            operator: op.into(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }],
    };
    assert!(req("In", &["web", "db"]).matches(&labels));
    assert!(!req("NotIn", &["web"]).matches(&labels));
    assert!(req("Exists", &[]).matches(&labels));
    assert!(!req("DoesNotExist", &[]).matches(&labels));
    assert!(!req("Bogus", &[]).matches(&labels));
    assert!(LabelSelector::default().matches(&labels));
}

#[test]
fn critical_pods_given_more_than_the_grace_period_leave_the_others_none() {
    let g = Graceful {
        grace_ms: 5_000,
        critical_ms: 20_000,
    };
    assert_eq!(g.regular_ms(), 0);
    let f = forecast(
        &cluster(),
        &TimingProfile::fast(),
        Fault::Shutdown,
        &Ask {
            nodes: &["w1".to_owned()],
            graceful: &[("w1".to_owned(), g)],
            graceful_from: "the test",
        },
    )
    .unwrap();
    let web = f.nodes[0]
        .pods
        .iter()
        .find(|p| p.pod == "shop/web-a")
        .unwrap();
    assert_eq!(web.evicted, between(0, 0));
}
