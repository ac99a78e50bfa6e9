//! Unit tests of the fold with fabricated watcher events (no cluster).

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use k8s_openapi::api::core::v1::{Event as KubeEvent, Node, Pod};
use kube::runtime::watcher::Event;

use super::super::kinds::{EventDiff, NodeDiff, PodDiff, PvcDiff};
use super::{Changes, Fold};
use crate::timeline::{Change, ObjectRef, Transition, World};

fn node(name: &str, uid: &str, ready: &str, cordoned: bool) -> Node {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "uid": uid},
        "spec": {"unschedulable": cordoned},
        "status": {"conditions": [{"type": "Ready", "status": ready}]}
    }))
    .unwrap()
}

fn pod(name: &str, uid: &str, node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "uid": uid},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": "Running"}
    }))
    .unwrap()
}

fn event(name: &str, uid: &str, reason: &str) -> KubeEvent {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "uid": uid},
        "involvedObject": {"kind": "Node", "name": "w1"},
        "reason": reason,
        "message": "m"
    }))
    .unwrap()
}

/// Flattens the fold's output to (object name, change), the part asserted.
fn flat(out: Vec<(ObjectRef, Changes)>) -> Vec<(String, Change)> {
    out.into_iter()
        .flat_map(|(o, cs)| cs.into_iter().map(move |s| (o.name().to_owned(), s.change)))
        .collect()
}

fn feed<K, D: super::Differ<K>>(
    fold: &mut Fold<K, D>,
    events: Vec<Event<K>>,
) -> Vec<(String, Change)> {
    events
        .into_iter()
        .flat_map(|e| flat(fold.handle(e)))
        .collect()
}

fn ready(status: &str) -> Change {
    Change::NodeReady {
        status: status.into(),
        reason: None,
        message: None,
    }
}

fn s(x: &str) -> String {
    x.to_owned()
}

/// A fold that has seen the first list of `nodes`.
fn synced_nodes(nodes: Vec<Node>) -> Fold<Node, NodeDiff> {
    let mut fold = Fold::new(NodeDiff);
    let mut events = vec![Event::Init];
    events.extend(nodes.into_iter().map(Event::InitApply));
    events.push(Event::InitDone);
    feed(&mut fold, events);
    assert!(fold.listed_once());
    fold
}

/// A pod fold whose first list held `p`.
fn synced_pod(p: Pod) -> Fold<Pod, PodDiff> {
    let mut fold = Fold::new(PodDiff);
    feed(
        &mut fold,
        vec![Event::Init, Event::InitApply(p), Event::InitDone],
    );
    fold
}

#[test]
fn the_first_list_records_every_node_once_it_is_complete() {
    let mut fold = Fold::new(NodeDiff);
    assert!(feed(&mut fold, vec![Event::Init]).is_empty());
    assert!(!fold.listed_once(), "Init alone is not a complete list");
    let buffered = feed(
        &mut fold,
        vec![Event::InitApply(node("w1", "u1", "True", false))],
    );
    assert!(buffered.is_empty(), "nothing before InitDone: {buffered:?}");
    assert!(!fold.listed_once());
    let out = feed(&mut fold, vec![Event::InitDone]);
    assert_eq!(
        out,
        [(s("w1"), Change::NodeAdded), (s("w1"), ready("True"))]
    );
    assert!(fold.listed_once());
}

#[test]
fn a_relist_that_restarts_halfway_deletes_nothing() {
    let mut fold = synced_nodes(vec![
        node("w1", "u1", "True", false),
        node("w2", "u2", "True", false),
    ]);
    // The first page listed w1 only, then the list failed and started over.
    let out = feed(
        &mut fold,
        vec![
            Event::Init,
            Event::InitApply(node("w1", "u1", "True", false)),
            Event::Init,
            Event::InitApply(node("w1", "u1", "True", false)),
            Event::InitApply(node("w2", "u2", "True", false)),
            Event::InitDone,
        ],
    );
    assert!(out.is_empty(), "false transitions: {out:?}");
}

#[test]
fn a_relist_records_what_changed_and_what_vanished_during_the_gap() {
    let mut fold = synced_nodes(vec![
        node("w1", "u1", "True", false),
        node("w2", "u2", "True", false),
    ]);
    let out = feed(
        &mut fold,
        vec![
            Event::Init,
            Event::InitApply(node("w1", "u1", "Unknown", true)),
            Event::InitApply(node("w3", "u3", "True", false)),
            Event::InitDone,
        ],
    );
    assert_eq!(
        out,
        [
            (s("w2"), Change::NodeDeleted),
            (s("w1"), ready("Unknown")),
            (s("w1"), Change::Unschedulable { value: true }),
            (s("w3"), Change::NodeAdded),
            (s("w3"), ready("True")),
        ]
    );
}

#[test]
fn a_node_re_registered_during_a_watch_gap_is_a_deletion_then_a_creation() {
    let mut fold = synced_nodes(vec![node("w1", "old", "True", true)]);
    let out = fold.handle(Event::Init);
    assert!(out.is_empty());
    fold.handle(Event::InitApply(node("w1", "new", "True", false)));
    let out = fold.handle(Event::InitDone);
    assert_eq!(
        flat(out.clone()),
        [
            (s("w1"), Change::NodeDeleted),
            (s("w1"), Change::NodeAdded),
            (s("w1"), ready("True")),
        ]
    );
    // Folded into the world the new node has none of the old one's state.
    let mut world = World::default();
    for (object, changes) in out {
        for seen in changes {
            world.apply(&Transition {
                by: seen.by,
                at: 0,
                server_time: seen.server_time,
                object: object.clone(),
                change: seen.change,
            });
        }
    }
    let w1 = &world.nodes["w1"];
    assert!(w1.exists && !w1.unschedulable, "{w1:?}");
    // A later Delete of the old incarnation changes nothing; of the new one,
    // deletes it.
    assert!(
        fold.handle(Event::Delete(node("w1", "old", "True", true)))
            .is_empty()
    );
    assert_eq!(
        feed(
            &mut fold,
            vec![Event::Delete(node("w1", "new", "True", false))]
        ),
        [(s("w1"), Change::NodeDeleted)]
    );
}

#[test]
fn a_new_uid_under_a_known_name_without_a_delete_ends_the_old_node_first() {
    let mut fold = synced_nodes(vec![node("w1", "old", "True", false)]);
    let out = feed(
        &mut fold,
        vec![Event::Apply(node("w1", "new", "False", false))],
    );
    assert_eq!(
        out,
        [
            (s("w1"), Change::NodeDeleted),
            (s("w1"), Change::NodeAdded),
            (s("w1"), ready("False")),
        ]
    );
}

#[test]
fn live_changes_are_recorded_once_and_unchanged_objects_not_at_all() {
    let mut fold = synced_nodes(vec![node("w1", "u1", "True", false)]);
    let out = feed(
        &mut fold,
        vec![
            Event::Apply(node("w1", "u1", "True", false)),
            Event::Apply(node("w1", "u1", "True", true)),
            Event::Apply(node("w1", "u1", "True", true)),
        ],
    );
    assert_eq!(out, [(s("w1"), Change::Unschedulable { value: true })]);
    // The same state again in a relist is no change either.
    let out = feed(
        &mut fold,
        vec![
            Event::Init,
            Event::InitApply(node("w1", "u1", "True", true)),
            Event::InitDone,
        ],
    );
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn pods_are_keyed_by_uid_and_a_recreated_pod_is_two_pods() {
    let mut fold = synced_pod(pod("web-0", "a", "w1"));
    let out = fold.handle(Event::Init);
    assert!(out.is_empty());
    fold.handle(Event::InitApply(pod("web-0", "b", "w2")));
    let out = fold.handle(Event::InitDone);
    let objects: Vec<(ObjectRef, Change)> = out
        .into_iter()
        .flat_map(|(o, cs)| cs.into_iter().map(move |c| (o.clone(), c.change)))
        .collect();
    let uid = |u: &str| ObjectRef::Pod {
        name: "web-0".into(),
        uid: u.into(),
    };
    assert_eq!(objects[0], (uid("a"), Change::PodDeleted));
    assert!(
        objects[1..]
            .iter()
            .all(|(o, c)| *o == uid("b") && *c != Change::PodDeleted),
        "{objects:?}"
    );
    assert!(
        objects.contains(&(uid("b"), Change::PodScheduled { node: "w2".into() })),
        "{objects:?}"
    );
}

/// A kubelet may write a pod's phase and its reason in two updates: the
/// reason's arrival is recorded too, with the phase it belongs to.
#[test]
fn a_reason_that_comes_after_its_phase_is_recorded() {
    let mut fold = synced_pod(pod("web-0", "a", "w1"));
    let with = |phase: &str, reason: Option<&str>| {
        let mut p = pod("web-0", "a", "w1");
        let status = p.status.as_mut().unwrap();
        status.phase = Some(phase.into());
        status.reason = reason.map(Into::into);
        p
    };
    let out = feed(
        &mut fold,
        vec![
            Event::Apply(with("Failed", None)),
            Event::Apply(with("Failed", Some("Terminated"))),
            Event::Apply(with("Failed", Some("Terminated"))),
        ],
    );
    let phases: Vec<_> = out
        .into_iter()
        .filter(|(_, c)| matches!(c, Change::PodPhase { .. }))
        .map(|(_, c)| c)
        .collect();
    assert_eq!(
        phases,
        [
            Change::PodPhase {
                phase: "Failed".into(),
                reason: None
            },
            Change::PodPhase {
                phase: "Failed".into(),
                reason: Some("Terminated".into())
            },
        ]
    );
}

#[test]
fn a_delete_of_an_unknown_object_records_nothing() {
    let mut fold = synced_nodes(vec![]);
    assert!(
        fold.handle(Event::Delete(node("w9", "u9", "True", false)))
            .is_empty()
    );
}

#[test]
fn events_already_there_are_skipped_and_new_ones_recorded_once() {
    let mut fold = Fold::new(EventDiff::default());
    let old = event("e1", "1", "NodeNotReady");
    let out = feed(
        &mut fold,
        vec![Event::Init, Event::InitApply(old.clone()), Event::InitDone],
    );
    assert!(out.is_empty(), "events from before the run: {out:?}");
    // Created during a watch gap: found by the relist, recorded once.
    let new = event("e2", "2", "NodeNotReady");
    let relist = || {
        vec![
            Event::Init,
            Event::InitApply(old.clone()),
            Event::InitApply(new.clone()),
            Event::InitDone,
        ]
    };
    let out = feed(&mut fold, relist());
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(matches!(&out[0].1, Change::Event { reason, .. } if reason == "NodeNotReady"));
    assert!(feed(&mut fold, relist()).is_empty(), "recorded twice");
    // Events expiring is no transition.
    let out = feed(&mut fold, vec![Event::Init, Event::InitDone]);
    assert!(out.is_empty(), "{out:?}");
}

fn counted(mut e: KubeEvent, count: i32) -> KubeEvent {
    e.count = Some(count);
    e
}

#[test]
fn a_repeated_event_is_recorded_again_and_scenario_reasons_pass() {
    let mut fold = Fold::new(EventDiff {
        extra: vec![s("SuccessfulAttachVolume")],
    });
    let before = counted(event("e1", "1", "FailedAttachVolume"), 1);
    feed(
        &mut fold,
        vec![
            Event::Init,
            Event::InitApply(before.clone()),
            Event::InitDone,
        ],
    );
    // Listed before the run, then repeated during it: the repeat counts.
    let out = feed(&mut fold, vec![Event::Apply(counted(before, 2))]);
    assert!(
        matches!(&out[..], [(_, Change::Event { count: Some(2), .. })]),
        "{out:?}"
    );
    let mine = event("e2", "2", "SuccessfulAttachVolume");
    assert_eq!(feed(&mut fold, vec![Event::Apply(mine)]).len(), 1);
    let noise = event("e3", "3", "Pulled");
    assert!(feed(&mut fold, vec![Event::Apply(noise)]).is_empty());
}

#[test]
fn a_claim_is_recorded_once_bound() {
    let claim = |volume: Option<&str>| -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data-web-0", "uid": "c1"},
            "spec": {"volumeName": volume},
        }))
        .unwrap()
    };
    let mut fold = Fold::new(PvcDiff);
    let out = feed(
        &mut fold,
        vec![Event::Init, Event::InitApply(claim(None)), Event::InitDone],
    );
    assert!(out.is_empty(), "unbound: {out:?}");
    let out = feed(&mut fold, vec![Event::Apply(claim(Some("pv-1")))]);
    assert_eq!(
        out,
        [(s("data-web-0"), Change::PvcBound { volume: s("pv-1") })]
    );
    let out = feed(&mut fold, vec![Event::Delete(claim(Some("pv-1")))]);
    assert_eq!(out, [(s("data-web-0"), Change::PvcDeleted)]);
}

/// A taint change is put down to the field manager that last wrote the
/// node's taints; a cordon to the one that wrote `unschedulable`; the last
/// taint's removal to no one (the field is gone with it).
#[test]
fn a_node_s_taints_and_cordon_are_put_down_to_their_field_manager() {
    let with = |taints: serde_json::Value, fields: serde_json::Value| -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w1", "uid": "u1", "managedFields": fields},
            "spec": {"taints": taints, "unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}
        }))
        .unwrap()
    };
    let entry = |manager: &str, time: &str, spec: serde_json::Value| {
        serde_json::json!({"manager": manager, "operation": "Update", "time": time,
                           "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": spec}})
    };
    let unreachable =
        serde_json::json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]);
    let both = serde_json::json!([
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]);
    let first = with(
        unreachable,
        serde_json::json!([
            entry(
                "kubectl",
                "2026-11-26T10:00:00Z",
                serde_json::json!({"f:unschedulable": {}})
            ),
            entry(
                "kube-controller-manager",
                "2026-11-26T10:00:50Z",
                serde_json::json!({"f:taints": {}})
            ),
        ]),
    );
    let second = with(
        both,
        serde_json::json!([
            entry(
                "kubectl",
                "2026-11-26T10:00:00Z",
                serde_json::json!({"f:unschedulable": {}})
            ),
            entry(
                "kube-controller-manager",
                "2026-11-26T10:00:50Z",
                serde_json::json!({})
            ),
            entry(
                "my-remediator",
                "2026-11-26T10:06:00Z",
                serde_json::json!({"f:taints": {}})
            ),
        ]),
    );
    let gone = with(
        serde_json::json!([]),
        serde_json::json!([entry(
            "kubectl",
            "2026-11-26T10:00:00Z",
            serde_json::json!({"f:unschedulable": {}})
        )]),
    );
    let mut fold = Fold::new(NodeDiff);
    let mut seen = Vec::new();
    for n in [first, second, gone] {
        for (_, changes) in fold.handle(Event::Apply(n)) {
            seen.extend(changes.into_iter().map(|c| (c.change.describe(), c.by)));
        }
    }
    let by = |what: &str| {
        seen.iter()
            .find(|(d, _)| d.as_str() == what)
            .unwrap_or_else(|| panic!("no {what} in {seen:?}"))
            .1
            .clone()
    };
    assert_eq!(
        by("taint + node.kubernetes.io/unreachable:NoExecute"),
        Some("kube-controller-manager".into())
    );
    assert_eq!(by("cordoned"), Some("kubectl".into()));
    assert_eq!(
        by("taint + node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"),
        Some("my-remediator".into())
    );
    assert_eq!(
        by("taint - node.kubernetes.io/out-of-service:NoExecute"),
        None
    );
    assert_eq!(
        by("Ready=Unknown"),
        None,
        "a status change has no writer here"
    );
}

#[test]
fn a_ready_change_keeps_its_reason_and_message_and_a_new_message_alone_is_no_change() {
    let with = |status: &str, reason: &str, message: &str| -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w1", "uid": "u1"},
            "status": {"conditions": [{"type": "Ready", "status": status,
                                       "reason": reason, "message": message}]}
        }))
        .unwrap()
    };
    let mut fold = synced_nodes(vec![with(
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    )]);
    let out = feed(
        &mut fold,
        vec![
            Event::Apply(with(
                "False",
                "KubeletNotReady",
                "container runtime is down",
            )),
            // The same status with another message: not a Ready change.
            Event::Apply(with("False", "KubeletNotReady", "PLEG is not healthy")),
        ],
    );
    assert_eq!(
        out,
        [(
            s("w1"),
            Change::NodeReady {
                status: "False".into(),
                reason: Some("KubeletNotReady".into()),
                message: Some("container runtime is down".into()),
            }
        )]
    );
}
