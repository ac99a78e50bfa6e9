//! The remediation judged from constructed runs: fencing, release,
//! recovery, clean-up and the audit log's authors.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use super::*;
use crate::record::{FaultStep, StepOutcome};
use crate::timeline::metrics::PodRecovery;

const T0: Ms = 1_000;

fn node(at: Ms, name: &str, change: Change, by: Option<&str>) -> Transition {
    Transition {
        at: T0 + at,
        server_time: None,
        object: ObjectRef::Node { name: name.into() },
        change,
        by: by.map(str::to_owned),
    }
}

fn taint(at: Ms, name: &str, key: &str, by: &str) -> Transition {
    node(
        at,
        name,
        Change::TaintAdded {
            key: key.into(),
            value: None,
            effect: "NoExecute".into(),
        },
        Some(by),
    )
}

fn attachment(at: Ms, change: Change) -> Transition {
    Transition {
        at: T0 + at,
        server_time: None,
        object: ObjectRef::VolumeAttachment {
            name: "va-1".into(),
        },
        change,
        by: None,
    }
}

fn fault(at: Ms, took: Ms, fault: FaultKind, node: &str) -> StepRecord {
    StepRecord {
        index: Some(0),
        label: "#1".into(),
        kind: StepKind::Fault,
        description: String::new(),
        started: T0 + at,
        ended: Some(T0 + at + took),
        outcome: StepOutcome::Ok,
        notes: Vec::new(),
        commands: Vec::new(),
        evictions: Vec::new(),
        fault: Some(FaultStep {
            fault,
            node: node.into(),
            nodes: Vec::new(),
        }),
    }
}

fn metrics(not_ready: Ms, ready: &[Option<Ms>]) -> Metrics {
    Metrics {
        node_not_ready: Some(not_ready),
        pods: ready
            .iter()
            .enumerate()
            .map(|(i, r)| PodRecovery {
                pod: format!("db-{i}"),
                node: "w1".into(),
                owner: Some("StatefulSet/db".into()),
                replacement_ready: *r,
                ..PodRecovery::default()
            })
            .collect(),
        ..Metrics::default()
    }
}

/// A poweroff remediated with the out-of-service taint: the machine off
/// before the act, its volume released and its pods replaced after it,
/// the taint taken off after the node came back.
#[test]
fn a_powered_off_node_released_by_the_out_of_service_taint() {
    let oos = "node.kubernetes.io/out-of-service";
    let transitions = vec![
        attachment(
            -5_000,
            Change::VolumeAttachment {
                node: "w1".into(),
                volume: "pv-1".into(),
                attached: true,
            },
        ),
        node(
            40_000,
            "w1",
            Change::NodeReady {
                status: "Unknown".into(),
                reason: None,
                message: None,
            },
            None,
        ),
        taint(
            40_100,
            "w1",
            "node.kubernetes.io/unreachable",
            "kube-controller-manager",
        ),
        taint(60_000, "w1", oos, "nodefall"),
        attachment(66_000, Change::VolumeAttachmentDeleted),
        node(
            120_000,
            "w1",
            Change::TaintRemoved {
                key: oos.into(),
                effect: "NoExecute".into(),
            },
            Some("nodefall"),
        ),
    ];
    let steps = [
        fault(0, 100, FaultKind::Poweroff, "w1"),
        fault(100_000, 200, FaultKind::Poweron, "w1"),
    ];
    let r = judge(
        &transitions,
        T0,
        &["w1".to_owned()],
        &steps,
        &metrics(40_000, &[Some(75_000), Some(80_000)]),
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(
        r.acts,
        [Act {
            at: 60_000,
            node: "w1".into(),
            what: format!("taint + {oos}:NoExecute"),
            by: Some("nodefall".into()),
            user: None,
            not_ready_for: Some(20_000),
            ready_again: None,
        }],
        "the lifecycle controller's unreachable taint is the failure, not an act"
    );
    assert_eq!((r.detection, r.decision), (Some(40_000), Some(20_000)));
    assert_eq!(
        r.fencing,
        Fencing::OffBefore {
            off: 100,
            lead: 59_900
        }
    );
    assert_eq!(r.release, Release::Released { after: 6_000 });
    assert_eq!((r.recovery, r.replaced, r.pods), (Some(20_000), 2, 2));
    assert_eq!(
        r.cleanup,
        [Leftover {
            node: "w1".into(),
            taint: format!("{oos}:NoExecute"),
            removed: Some(120_000),
            removed_by: Some("nodefall".into()),
        }]
    );
}

/// A node cut off from the network and deleted: it never went off, it had
/// no volume attached (nothing to release, not "0 s"), one pod was never
/// replaced; an act on another node is not this one's.
#[test]
fn a_partitioned_node_deleted_while_it_ran_on() {
    let transitions = vec![
        taint(30_000, "w2", "example.com/fenced", "someone-else"),
        node(40_000, "w1", Change::NodeDeleted, None),
    ];
    let steps = [fault(0, 50, FaultKind::DropNic, "w1")];
    let r = judge(
        &transitions,
        T0,
        &["w1".to_owned()],
        &steps,
        &metrics(35_000, &[Some(50_000), None]),
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(r.acts.len(), 1, "{:?}", r.acts);
    assert_eq!(r.acts[0].what, "deleted");
    assert_eq!(r.decision, Some(5_000));
    assert_eq!(
        r.fencing,
        Fencing::NotOff {
            fault: Some(FaultKind::DropNic)
        }
    );
    assert_eq!(r.release, Release::NoAttachments);
    assert_eq!((r.recovery, r.replaced, r.pods), (None, 1, 2));
    assert!(r.cleanup.is_empty(), "a deletion leaves no taint");
}

/// Powered off only after its pods were released; and a run where nothing
/// remediated the node has no remediation at all.
#[test]
fn fenced_too_late_and_never_remediated() {
    let transitions = vec![taint(
        20_000,
        "w1",
        "medik8s.io/remediation",
        "self-node-remediation",
    )];
    let steps = [
        fault(0, 50, FaultKind::PauseVm, "w1"),
        fault(30_000, 500, FaultKind::Poweroff, "w1"),
    ];
    let r = judge(
        &transitions,
        T0,
        &["w1".to_owned()],
        &steps,
        &metrics(10_000, &[]),
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(
        r.fencing,
        Fencing::OffAfter {
            off: 30_500,
            after: 10_500
        }
    );
    assert_eq!(r.acts[0].by.as_deref(), Some("self-node-remediation"));
    assert_eq!(r.cleanup[0].removed, None, "left behind");
    assert_eq!((r.recovery, r.pods), (None, 0));

    let quiet = vec![taint(
        20_000,
        "w1",
        "node.kubernetes.io/unreachable",
        "kube-controller-manager",
    )];
    assert_eq!(
        judge(
            &quiet,
            T0,
            &["w1".to_owned()],
            &steps,
            &metrics(10_000, &[]),
            &[],
            &[],
        ),
        None
    );
}

/// A flapping node: NotReady, Ready again, NotReady again; the act comes
/// 1 s into the second stretch.
#[test]
fn an_act_on_a_flapping_node_says_it_was_ready_again_and_for_how_long_it_was_down() {
    let status = |at: Ms, s: &str| {
        node(
            at,
            "w1",
            Change::NodeReady {
                status: s.into(),
                reason: None,
                message: None,
            },
            None,
        )
    };
    let transitions = vec![
        status(8_000, "Unknown"),
        status(12_000, "True"),
        status(25_000, "Unknown"),
        taint(
            26_000,
            "w1",
            "node.kubernetes.io/out-of-service",
            "example-remediator",
        ),
    ];
    let r = judge(
        &transitions,
        T0,
        &["w1".to_owned()],
        &[fault(0, 100, FaultKind::DropNic, "w1")],
        &metrics(8_000, &[]),
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(r.acts[0].not_ready_for, Some(1_000));
    assert_eq!(r.acts[0].ready_again, Some(12_000));
    assert_eq!(r.decision, Some(18_000), "from the first NotReady");
}

/// The audit log names who deleted a Node (no field manager does), and a
/// pod on the failed node force-deleted by a person is an act of its own;
/// the kubelet's and pod GC's deletions are not.
#[test]
fn the_audit_log_names_deletions_and_force_deletions_are_acts() {
    let pod = |at: Ms, name: &str, change: Change| Transition {
        at: T0 + at,
        server_time: None,
        object: ObjectRef::Pod {
            name: name.into(),
            uid: format!("{name}-uid"),
        },
        change,
        by: None,
    };
    let transitions = vec![
        pod(-5_000, "db-0", Change::PodScheduled { node: "w1".into() }),
        pod(-5_000, "web-1", Change::PodScheduled { node: "w2".into() }),
        node(
            8_000,
            "w1",
            Change::NodeReady {
                status: "Unknown".into(),
                reason: None,
                message: None,
            },
            None,
        ),
        pod(12_050, "db-0", Change::PodDeleted),
        // its replacement, of the same name, on another node
        Transition {
            at: T0 + 12_060,
            server_time: None,
            object: ObjectRef::Pod {
                name: "db-0".into(),
                uid: "replacement".into(),
            },
            change: Change::PodScheduled { node: "w2".into() },
            by: None,
        },
        pod(12_550, "web-1", Change::PodDeleted),
        node(20_000, "w1", Change::NodeDeleted, None),
    ];
    let deleted = |at: Ms, resource: &str, name: &str, user: &str, force: bool| AuditDeletion {
        at: T0 + at,
        resource: resource.into(),
        namespace: (resource == "pods").then(|| "ns".into()),
        name: name.into(),
        user: user.into(),
        agent: Some("nodefall/1.0".into()),
        force,
    };
    let deletions = [
        deleted(12_000, "pods", "db-0", "kubernetes-admin", true),
        // not on a failed node
        deleted(12_500, "pods", "web-1", "kubernetes-admin", true),
        // the kubelet's final deletion, pod GC's: not acts
        deleted(13_000, "pods", "db-0", "system:node:w1", true),
        deleted(
            14_000,
            "pods",
            "db-0",
            "system:serviceaccount:kube-system:pod-garbage-collector",
            true,
        ),
        deleted(19_900, "nodes", "w1", "kubernetes-admin", false),
    ];
    let r = judge(
        &transitions,
        T0,
        &["w1".to_owned()],
        &[fault(0, 100, FaultKind::StopKubelet, "w1")],
        &metrics(8_000, &[]),
        &[],
        &deletions,
    )
    .unwrap();
    let acts: Vec<(&str, Option<&str>)> = r
        .acts
        .iter()
        .map(|a| (a.what.as_str(), a.user.as_deref()))
        .collect();
    assert_eq!(
        acts,
        [
            (
                "pod db-0 force-deleted",
                Some("kubernetes-admin (nodefall/1.0)")
            ),
            ("deleted", Some("kubernetes-admin (nodefall/1.0)")),
        ]
    );
    assert_eq!(
        r.decision,
        Some(4_000),
        "from NotReady to the force deletion"
    );
}
