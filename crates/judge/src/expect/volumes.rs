//! Volume and event conditions: a claim's volume attached to (or detached
//! from) a node, an event about pods or a node having been seen. Each
//! family is matched exhaustively.

use super::ResolvedSubject;
use crate::scenario::checked::{EventCond, VolumeCond};
use crate::timeline::{EventView, World};

/// Whether `c` holds for a claim subject (never for another subject).
pub(super) fn volume(world: &World, subject: &ResolvedSubject, c: &VolumeCond) -> bool {
    let ResolvedSubject::Pvc { claim, node } = subject else {
        return false;
    };
    match c {
        VolumeCond::Attached(want) => world.claim_attached(claim, node.as_deref()) == *want,
    }
}

/// Whether an event `c` describes has been seen about the subject (a node,
/// or pods; never another subject).
pub(super) fn event(world: &World, subject: &ResolvedSubject, c: &EventCond) -> bool {
    let EventCond { reason, message } = c;
    world
        .events
        .iter()
        .any(|e| e.reason == *reason && mentions(e, message) && about(world, e, subject))
}

fn mentions(e: &EventView, part: &Option<String>) -> bool {
    part.as_ref().is_none_or(|m| e.message.contains(m.as_str()))
}

/// Whether the event's involved object is the subject: the node, or a pod
/// (looked up by name among every pod seen, since the pod an event is about
/// may be gone by now) whose labels match the selector.
fn about(world: &World, e: &EventView, subject: &ResolvedSubject) -> bool {
    match subject {
        ResolvedSubject::Node(name) => e.kind == "Node" && e.name == *name,
        ResolvedSubject::Nodes(names) => e.kind == "Node" && names.contains(&e.name),
        ResolvedSubject::Pods { selector, .. } => {
            e.kind == "Pod"
                && world
                    .pod_labels
                    .get(&e.name)
                    .is_some_and(|labels| selector.matches(labels))
        }
        ResolvedSubject::Pvc { .. }
        | ResolvedSubject::Service { .. }
        | ResolvedSubject::Probe(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Decision, decide, truth_series};
    use super::*;
    use crate::scenario::checked::{Condition, NodeCond};
    use crate::scenario::expr::Window;
    use crate::scenario::selector::Selector;
    use crate::timeline::seen as t;
    use crate::timeline::{Change, Ms, ObjectRef, Transition};

    fn va(node: &str, attached: bool) -> Change {
        Change::VolumeAttachment {
            node: node.into(),
            volume: "pv-web-0".into(),
            attached,
        }
    }
    fn attachment() -> ObjectRef {
        ObjectRef::VolumeAttachment {
            name: "csi-1".into(),
        }
    }
    fn event(at: Ms, pod: &str, message: &str) -> Transition {
        t(
            at,
            ObjectRef::Event {
                name: format!("{pod}.{at}"),
            },
            Change::Event {
                reason: "FailedAttachVolume".into(),
                involved: format!("Pod/{pod}"),
                message: message.into(),
                count: Some(1),
            },
        )
    }

    /// Claim bound, attached to w1 before the fault (ms 0..), the pod
    /// replaced at 20 s, a Multi-Attach event at 25 s, detached at 40 s.
    fn timeline() -> Vec<Transition> {
        let pod = |uid: &str| ObjectRef::Pod {
            name: "web-0".into(),
            uid: uid.into(),
        };
        vec![
            t(
                0,
                ObjectRef::Pvc {
                    name: "data-web-0".into(),
                },
                Change::PvcBound {
                    volume: "pv-web-0".into(),
                },
            ),
            t(0, attachment(), va("w1", true)),
            t(
                0,
                pod("old"),
                Change::PodAdded {
                    labels: std::sync::Arc::new([("app".to_owned(), "web".to_owned())].into()),
                    owner: None,
                    claims: vec!["data-web-0".into()],
                },
            ),
            t(19_000, pod("old"), Change::PodDeleted),
            t(
                20_000,
                pod("new"),
                Change::PodAdded {
                    labels: std::sync::Arc::new([("app".to_owned(), "web".to_owned())].into()),
                    owner: None,
                    claims: vec!["data-web-0".into()],
                },
            ),
            event(
                25_000,
                "web-0",
                "Multi-Attach error for volume \"pv-web-0\"",
            ),
            t(40_000, attachment(), va("w1", false)),
            t(41_000, attachment(), Change::VolumeAttachmentDeleted),
        ]
    }

    fn pvc(node: Option<&str>) -> ResolvedSubject {
        ResolvedSubject::Pvc {
            claim: "data-web-0".into(),
            node: node.map(Into::into),
        }
    }

    #[test]
    fn detached_from_and_attached_to_follow_the_claims_volume() {
        let ts = timeline();
        let detached = [Condition::Volume(VolumeCond::Attached(false))];
        let s = truth_series(&ts, &pvc(Some("w1")), &detached, 10_000);
        assert_eq!(s, vec![(10_000, false), (40_000, true)]);
        let within = |to| Window::Between { from: 0, to };
        assert!(matches!(
            decide(&s, within(60_000), 10_000, 10_000, 60_000),
            Decision::Pass {
                observed: Some(30_000),
                ..
            }
        ));
        // Detach slower than the window: fails.
        assert!(matches!(
            decide(&s, within(20_000), 10_000, 10_000, 40_000),
            Decision::Fail { .. }
        ));
        let attached_w1 = truth_series(
            &ts,
            &pvc(Some("w1")),
            &[Condition::Volume(VolumeCond::Attached(true))],
            0,
        );
        assert_eq!(attached_w1, vec![(0, true), (40_000, false)]);
        let attached_w2 = truth_series(
            &ts,
            &pvc(Some("w2")),
            &[Condition::Volume(VolumeCond::Attached(true))],
            0,
        );
        assert_eq!(attached_w2, vec![(0, false)]);
        let anywhere = truth_series(
            &ts,
            &pvc(None),
            &[Condition::Volume(VolumeCond::Attached(false))],
            0,
        );
        assert_eq!(anywhere, vec![(0, false), (40_000, true)]);
    }

    #[test]
    fn events_count_from_the_series_start_and_match_pods_and_message() {
        let ts = timeline();
        let pods = |sel: &str| ResolvedSubject::Pods {
            selector: Selector::parse(sel).unwrap(),
            on: None,
            not_on: None,
        };
        let multi = |m: Option<&str>| {
            [Condition::Event(EventCond {
                reason: "FailedAttachVolume".into(),
                message: m.map(Into::into),
            })]
        };
        let s = truth_series(&ts, &pods("app=web"), &multi(Some("Multi-Attach")), 10_000);
        assert_eq!(s, vec![(10_000, false), (25_000, true)]);
        // `never` fails once the event is seen ...
        let never = Window::Never { duration: 30_000 };
        assert!(matches!(
            decide(&s, never, 10_000, 10_000, 25_000),
            Decision::Fail {
                observed: Some(15_000),
                ..
            }
        ));
        // ... and an event from before the series start does not count.
        let late = truth_series(&ts, &pods("app=web"), &multi(None), 30_000);
        assert_eq!(late, vec![(30_000, false)]);
        assert!(matches!(
            decide(&late, never, 30_000, 30_000, 60_000),
            Decision::Pass { .. }
        ));
        // Other pods, other messages, a node subject: no match.
        for (subject, cond) in [
            (pods("app=db"), multi(None)),
            (pods("app=web"), multi(Some("timed out"))),
            (ResolvedSubject::Node("w1".into()), multi(None)),
        ] {
            assert_eq!(
                truth_series(&ts, &subject, &cond, 0),
                vec![(0, false)],
                "{subject:?} {cond:?}"
            );
        }
    }

    #[test]
    fn node_events_match_the_node() {
        let mut world = World::default();
        world.events.push(EventView {
            reason: "NodeNotReady".into(),
            kind: "Node".into(),
            name: "w1".into(),
            ..EventView::default()
        });
        let c = EventCond {
            reason: "NodeNotReady".into(),
            message: None,
        };
        assert!(super::event(
            &world,
            &ResolvedSubject::Node("w1".into()),
            &c
        ));
        assert!(!super::event(
            &world,
            &ResolvedSubject::Node("w2".into()),
            &c
        ));
        assert!(
            !super::super::holds(
                &world,
                &ResolvedSubject::Node("w1".into()),
                &[Condition::Node(NodeCond::Exists(true))]
            ),
            "not an event condition: the node's own path decides it"
        );
    }
}
