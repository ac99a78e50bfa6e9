//! The states on the timeline of a node, of selected pods and of a
//! Service's endpoints: does one condition of that family hold in a world.
//! Each family is matched exhaustively, so a new condition is a compile
//! error here until it is judged.

use super::ResolvedSubject;
use crate::record::remediation::is_act;
use crate::scenario::checked::{NodeCond, PodsCond, ServiceCond};
use crate::scenario::model::{NodeReady, TaintEffect, Terminating};
use crate::timeline::{NodeView, PodView, World};

/// Whether `c` holds for a node subject (never for another subject); for
/// a set of nodes, on every one of them.
pub(super) fn node(world: &World, subject: &ResolvedSubject, c: &NodeCond) -> bool {
    match subject {
        ResolvedSubject::Node(name) => on_node(world, name, c),
        ResolvedSubject::Nodes(names) => {
            !names.is_empty() && names.iter().all(|name| on_node(world, name, c))
        }
        ResolvedSubject::Pods { .. }
        | ResolvedSubject::Pvc { .. }
        | ResolvedSubject::Service { .. }
        | ResolvedSubject::Probe(_) => false,
    }
}

/// Whether `c` holds on the node `name`.
fn on_node(world: &World, name: &str, c: &NodeCond) -> bool {
    let absent = NodeView::default();
    let node = world.nodes.get(name).unwrap_or(&absent);
    let has_taint = |key: &str, effect: &Option<TaintEffect>| {
        node.taints
            .iter()
            .any(|t| t.key == key && effect.as_ref().is_none_or(|e| e.to_string() == t.effect))
    };
    match c {
        NodeCond::Ready(want) => {
            node.exists
                && node.ready.as_deref()
                    == Some(match want {
                        NodeReady::True => "True",
                        NodeReady::False => "False",
                        NodeReady::Unknown => "Unknown",
                    })
        }
        NodeCond::Taint { key, effect } => node.exists && has_taint(key, effect),
        NodeCond::NoTaint { key, effect } => node.exists && !has_taint(key, effect),
        NodeCond::Unschedulable(want) => node.exists && node.unschedulable == *want,
        // Decided over the set (`holds`), not on one node.
        NodeCond::Count(_) => true,
        NodeCond::RemediatedBy(manager) => {
            node.exists
                && node
                    .taints
                    .iter()
                    .any(|t| is_act(&t.key, &t.effect) && t.by.as_deref() == Some(manager.as_str()))
        }
        NodeCond::Exists(want) => node.exists == *want,
    }
}

/// Whether `c` holds for `pods`, the live pods a pods subject selects.
pub(super) fn pods(pods: &[&PodView], c: &PodsCond) -> bool {
    let ready = pods.iter().filter(|p| p.ready && !p.terminating).count();
    let terminating = pods.iter().filter(|p| p.terminating).count();
    let n = |v: &u32| usize::try_from(*v).unwrap_or(usize::MAX);
    match c {
        PodsCond::Ready(None) => !pods.is_empty() && ready == pods.len(),
        PodsCond::Ready(Some(want)) => ready == n(want),
        PodsCond::ReadyAtLeast(want) => ready >= n(want),
        PodsCond::ReadyBelow(want) => ready < n(want),
        PodsCond::Terminating(Terminating::All(true)) => {
            !pods.is_empty() && terminating == pods.len()
        }
        PodsCond::Terminating(Terminating::All(false)) => terminating == 0,
        PodsCond::Terminating(Terminating::Count(want)) => terminating == n(want),
        PodsCond::Count(want) => pods.len() - terminating == n(want),
        PodsCond::Phase(phase) => {
            !pods.is_empty() && pods.iter().all(|p| p.phase == phase.to_string())
        }
        PodsCond::Reason(reason) => {
            !pods.is_empty() && pods.iter().all(|p| p.reason.as_deref() == Some(reason))
        }
    }
}

/// What the pods a pods subject selects show, for a failure that never saw
/// its condition: how many, and the first few with their phase, reason and
/// state (a pod that was never judged would otherwise be a blank).
pub(super) fn pods_seen(pods: &[&PodView]) -> String {
    let head = format!(
        "{} pod{}",
        pods.len(),
        if pods.len() == 1 { "" } else { "s" }
    );
    let each = pods.iter().map(|p| {
        let mut state = vec![p.phase.clone()];
        state.extend(p.reason.clone());
        if p.ready {
            state.push("ready".into());
        }
        if p.terminating {
            state.push("terminating".into());
        }
        format!("{} ({})", p.name, state.join(", "))
    });
    first_few(head, each, pods.len())
}

/// `head`, then the first few of `items` (of `total`) and how many more.
fn first_few(mut head: String, items: impl Iterator<Item = String>, total: usize) -> String {
    const SHOWN: usize = 8;
    let shown: Vec<String> = items.take(SHOWN).collect();
    if !shown.is_empty() {
        head.push_str(": ");
        head.push_str(&shown.join(", "));
    }
    if total > SHOWN {
        head.push_str(&format!(", and {} more", total - SHOWN));
    }
    head
}

/// Whether `c` holds for a Service subject (never for another subject).
pub(super) fn service(world: &World, subject: &ResolvedSubject, c: &ServiceCond) -> bool {
    let ResolvedSubject::Service { name, on, not_on } = subject else {
        return false;
    };
    let ready = world.ready_endpoints(name, on.as_deref(), not_on.as_deref());
    match c {
        ServiceCond::ReadyEndpoints(n) => usize::try_from(*n).is_ok_and(|n| n == ready),
    }
}

/// What a Service subject shows in `world`, for a failure that never saw
/// its condition: how many ready endpoints, and the first few with their
/// pods (an address is counted once, as clients are routed by address).
pub(super) fn service_seen(world: &World, subject: &ResolvedSubject) -> Option<String> {
    let ResolvedSubject::Service { name, on, not_on } = subject else {
        return None;
    };
    // By address, as `ready_endpoints` counts them.
    let listed: std::collections::BTreeMap<&str, &str> = world
        .ready_endpoint_views(name, on.as_deref(), not_on.as_deref())
        .map(|e| (e.address.as_str(), e.pod.as_deref().unwrap_or("no pod")))
        .collect();
    let ready = listed.len();
    let head = format!(
        "{ready} ready endpoint{}",
        if ready == 1 { "" } else { "s" }
    );
    let each = listed
        .iter()
        .map(|(address, pod)| format!("{address} ({pod})"));
    Some(first_few(head, each, ready))
}

#[cfg(test)]
mod tests {
    use super::super::{holds, truth_series};
    use super::*;
    use crate::scenario::checked::Condition;
    use crate::scenario::selector::Selector;
    use crate::timeline::{Change, Ms, ObjectRef, Transition};

    /// `remediatedBy` holds while the node carries a remediation act's
    /// taint written by that manager: not the lifecycle controller's
    /// unreachable taint, not someone else's, not once it is taken off.
    #[test]
    fn remediated_by_holds_while_that_manager_s_act_is_on_the_node() {
        let node = |at: Ms, change: Change, by: Option<&str>| Transition {
            by: by.map(str::to_owned),
            at,
            server_time: None,
            object: ObjectRef::Node { name: "w".into() },
            change,
        };
        let added = |key: &str| Change::TaintAdded {
            key: key.into(),
            value: None,
            effect: "NoExecute".into(),
        };
        let oos = "node.kubernetes.io/out-of-service";
        let ts = [
            node(0, Change::NodeAdded, None),
            node(10, added("node.kubernetes.io/unreachable"), Some("me")),
            node(20, added("example.com/fenced"), Some("someone-else")),
            node(30, added(oos), Some("me")),
            node(
                40,
                Change::TaintRemoved {
                    key: oos.into(),
                    effect: "NoExecute".into(),
                },
                None,
            ),
        ];
        let series = truth_series(
            &ts,
            &ResolvedSubject::Node("w".into()),
            &[Condition::Node(NodeCond::RemediatedBy("me".into()))],
            0,
        );
        let at = |t: Ms| {
            series
                .iter()
                .rev()
                .find(|(s, _)| *s <= t)
                .map(|(_, v)| *v)
                .unwrap()
        };
        assert_eq!(
            [at(15), at(25), at(35), at(45)],
            [false, false, true, false],
            "{series:?}"
        );
    }

    /// On a set, a node condition holds when it holds on each node; with
    /// `count` when it holds on exactly that many of them.
    #[test]
    fn a_set_s_node_condition_holds_on_each_node_or_on_count_of_them() {
        let mut world = World::default();
        for (name, ready) in [("a", "Unknown"), ("b", "Unknown"), ("c", "True")] {
            world.nodes.insert(
                name.into(),
                NodeView {
                    exists: true,
                    ready: Some(ready.into()),
                    ..NodeView::default()
                },
            );
        }
        let set =
            |names: &[&str]| ResolvedSubject::Nodes(names.iter().map(|&n| n.into()).collect());
        let unknown = Condition::Node(NodeCond::Ready(NodeReady::Unknown));
        let count = |n| Condition::Node(NodeCond::Count(n));
        assert!(holds(
            &world,
            &set(&["a", "b"]),
            std::slice::from_ref(&unknown)
        ));
        assert!(!holds(
            &world,
            &set(&["a", "b", "c"]),
            std::slice::from_ref(&unknown)
        ));
        let all = set(&["a", "b", "c"]);
        assert!(holds(&world, &all, &[unknown.clone(), count(2)]));
        // Exactly: not one, not three.
        assert!(!holds(&world, &all, &[unknown.clone(), count(1)]));
        assert!(!holds(&world, &all, &[unknown.clone(), count(3)]));
        assert!(holds(
            &world,
            &all,
            &[count(1), Condition::Node(NodeCond::Ready(NodeReady::True))]
        ));
    }

    #[test]
    fn pod_conditions_count_ready_and_terminating() {
        let mut world = World::default();
        for (i, node, ready, term) in [
            (1, "a", true, false),
            (2, "b", false, true),
            (3, "b", true, false),
        ] {
            world.pods.insert(
                format!("u{i}"),
                PodView {
                    name: format!("p{i}"),
                    labels: std::sync::Arc::new([("app".to_owned(), "web".to_owned())].into()),
                    node: Some(node.into()),
                    ready,
                    terminating: term,
                    phase: "Running".into(),
                    ..PodView::default()
                },
            );
        }
        let sel = Selector::parse("app=web").unwrap();
        let on_b = ResolvedSubject::Pods {
            selector: sel.clone(),
            on: Some(vec!["b".into()]),
            not_on: None,
        };
        assert!(holds(
            &world,
            &on_b,
            &[Condition::Pods(PodsCond::Terminating(Terminating::Count(
                1
            )))]
        ));
        assert!(!holds(
            &world,
            &on_b,
            &[Condition::Pods(PodsCond::Terminating(Terminating::All(
                true
            )))]
        ));
        assert!(holds(&world, &on_b, &[Condition::Pods(PodsCond::Count(1))]));
        // On a set: on any of its nodes; not on it: on none of them.
        let on = |on: &[&str], not_on: &[&str]| {
            let nodes = |n: &[&str]| (!n.is_empty()).then(|| n.iter().map(|&s| s.into()).collect());
            let subject = ResolvedSubject::Pods {
                selector: sel.clone(),
                on: nodes(on),
                not_on: nodes(not_on),
            };
            let mut names: Vec<String> = super::super::selected_pods(&world, &subject)
                .iter()
                .map(|p| p.name.clone())
                .collect();
            names.sort();
            names
        };
        assert_eq!(on(&["a", "b"], &[]), ["p1", "p2", "p3"]);
        assert_eq!(on(&["b", "c"], &[]), ["p2", "p3"]);
        assert_eq!(on(&[], &["a", "c"]), ["p2", "p3"]);
        assert_eq!(on(&[], &["a", "b"]), Vec::<String>::new());
        let all = ResolvedSubject::Pods {
            selector: sel,
            on: None,
            not_on: None,
        };
        assert!(holds(
            &world,
            &all,
            &[
                Condition::Pods(PodsCond::Ready(Some(2))),
                Condition::Pods(PodsCond::ReadyAtLeast(2))
            ]
        ));
        assert!(!holds(
            &world,
            &all,
            &[Condition::Pods(PodsCond::Ready(None))]
        ));
    }

    /// A family's condition on another subject never holds, even one an
    /// empty selection would satisfy (`readyBelow` on a node); nor does a
    /// condition decided once, which is not a state on the timeline.
    #[test]
    fn a_condition_holds_only_on_its_own_family_s_subject() {
        let world = World::default();
        let node = ResolvedSubject::Node("w".into());
        let pods = ResolvedSubject::Pods {
            selector: Selector::parse("app=web").unwrap(),
            on: None,
            not_on: None,
        };
        let below = [Condition::Pods(PodsCond::ReadyBelow(5))];
        assert!(holds(&world, &pods, &below));
        assert!(!holds(&world, &node, &below));
        let gone = [Condition::Node(NodeCond::Exists(false))];
        assert!(holds(&world, &node, &gone));
        assert!(!holds(&world, &pods, &gone));
        let endpoints = [Condition::Service(ServiceCond::ReadyEndpoints(0))];
        assert!(!holds(&world, &node, &endpoints));
        let once = [Condition::EndOfRun(
            crate::scenario::checked::EndOfRunCond::FencedBeforeReplacement,
        )];
        assert!(!holds(&world, &pods, &once));
    }

    /// A Service never seen as expected says what it showed instead.
    #[test]
    fn a_service_says_its_ready_endpoints_and_their_pods() {
        let slice = ObjectRef::EndpointSlice {
            name: "web-a".into(),
            service: "web".into(),
        };
        let ep = |address: &str, node: &str, ready: bool| Change::Endpoint {
            address: address.into(),
            pod: Some(format!("web-{node}")),
            node: Some(node.into()),
            ready,
            serving: ready,
            terminating: false,
        };
        let mut world = World::default();
        for (address, node, ready) in [
            ("10.0.1.2", "w1", true),
            ("10.0.2.2", "w2", true),
            ("10.0.2.3", "w2", false),
        ] {
            world.apply(&Transition {
                by: None,
                at: 0,
                server_time: None,
                object: slice.clone(),
                change: ep(address, node, ready),
            });
        }
        let web = |on: Option<&str>| ResolvedSubject::Service {
            name: "web".into(),
            on: on.map(str::to_owned),
            not_on: None,
        };
        assert_eq!(
            service_seen(&world, &web(None)).as_deref(),
            Some("2 ready endpoints: 10.0.1.2 (web-w1), 10.0.2.2 (web-w2)")
        );
        assert_eq!(
            service_seen(&world, &web(Some("w1"))).as_deref(),
            Some("1 ready endpoint: 10.0.1.2 (web-w1)")
        );
        assert_eq!(
            service_seen(&world, &web(Some("w3"))).as_deref(),
            Some("0 ready endpoints")
        );
        assert_eq!(
            service_seen(&world, &ResolvedSubject::Node("w1".into())),
            None
        );
    }
}
