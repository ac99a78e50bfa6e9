//! When a condition held: its truth over time, folded from the transitions
//! once, as they are recorded, instead of replaying the whole record at each
//! judgement (at 10,000 pods a replay cost a copy of the record and a world
//! built from scratch every time a pod changed).

use std::borrow::Cow;

use super::{ResolvedSubject, holds};
use crate::scenario::checked::Condition;
use crate::timeline::{Ms, ObjectRef, Transition, World};

/// The truth of `conditions` for a subject from time `from` on, kept up to
/// date by [`Truth::extend`] with the transitions in the order they were
/// recorded (non-decreasing `at`).
#[derive(Debug, Clone)]
pub struct Truth {
    subject: ResolvedSubject,
    conditions: Vec<Condition>,
    from: Ms,
    world: World,
    /// Empty until the series starts: until a transition after `from` is
    /// folded in or the series is read after `from`. Its first point is
    /// `from`, each later one a flip.
    series: Vec<(Ms, bool)>,
}

impl Truth {
    pub fn new(subject: ResolvedSubject, conditions: Vec<Condition>, from: Ms) -> Truth {
        Truth {
            subject,
            conditions,
            from,
            world: World::default(),
            series: Vec::new(),
        }
    }

    /// Whether a transition can bear on the truth. A node's conditions read
    /// only that node and the events about it, so its world keeps no pods
    /// (at 10,000 pods, tens of MB per expectation); other subjects read
    /// the whole world.
    fn relevant(&self, t: &Transition) -> bool {
        match (&self.subject, &t.object) {
            (ResolvedSubject::Node(name), ObjectRef::Node { name: n }) => n == name,
            (ResolvedSubject::Nodes(names), ObjectRef::Node { name: n }) => names.contains(n),
            (ResolvedSubject::Node(_) | ResolvedSubject::Nodes(_), ObjectRef::Event { .. }) => true,
            (ResolvedSubject::Node(_) | ResolvedSubject::Nodes(_), _) => false,
            _ => true,
        }
    }

    fn apply(&mut self, t: &Transition) {
        if self.relevant(t) {
            self.world.apply(t);
        }
    }

    fn holds(&self) -> bool {
        holds(&self.world, &self.subject, &self.conditions)
    }

    fn start(&mut self) {
        // Event conditions count occurrences from the series start on.
        self.world.forget_events();
        let now = self.holds();
        self.series.push((self.from, now));
    }

    /// Folds in the next transitions. Every transition of one instant is
    /// applied before the truth is judged; an instant split across two calls
    /// is judged again when its rest arrives.
    pub fn extend(&mut self, transitions: &[Transition]) {
        let mut i = 0;
        if self.series.is_empty() {
            while i < transitions.len() && transitions[i].at <= self.from {
                self.apply(&transitions[i]);
                i += 1;
            }
            if i == transitions.len() {
                return;
            }
            self.start();
        }
        while i < transitions.len() {
            let at = transitions[i].at;
            while i < transitions.len() && transitions[i].at == at {
                self.apply(&transitions[i]);
                i += 1;
            }
            let now = self.holds();
            self.record(at, now);
        }
    }

    fn record(&mut self, at: Ms, now: bool) {
        // The same instant judged again: its earlier verdict was partial.
        if self.series.len() > 1 && self.series.last().is_some_and(|&(t, _)| t == at) {
            self.series.pop();
        }
        if self.series.last().is_some_and(|&(_, last)| last != now) {
            self.series.push((at, now));
        }
    }

    /// `(time, holds)` pairs as of `now`: the first at `from` with the truth
    /// then, each later one a flip. Nothing recorded later can be at or
    /// before `now`, so once `now` is past `from` the series starts.
    pub fn series(&mut self, now: Ms) -> Cow<'_, [(Ms, bool)]> {
        if self.series.is_empty() {
            if now <= self.from {
                self.world.forget_events();
                return Cow::Owned(vec![(self.from, self.holds())]);
            }
            self.start();
        }
        Cow::Borrowed(&self.series)
    }
}

impl Truth {
    /// What the subject shows now, in words, where a subject says more
    /// than whether its condition holds (a Service: its ready endpoints;
    /// pods: each one's phase, reason and state).
    pub fn seen(&self) -> Option<String> {
        match &self.subject {
            ResolvedSubject::Pods { .. } => Some(super::states::pods_seen(&super::selected_pods(
                &self.world,
                &self.subject,
            ))),
            ResolvedSubject::Service { .. } => {
                super::states::service_seen(&self.world, &self.subject)
            }
            ResolvedSubject::Node(_)
            | ResolvedSubject::Nodes(_)
            | ResolvedSubject::Pvc { .. }
            | ResolvedSubject::Probe(_) => None,
        }
    }
}

/// When the condition's truth changed over `transitions`: `(time, holds)`
/// pairs, the first at time `from` with the truth then, each later one a flip.
pub fn truth_series(
    transitions: &[Transition],
    subject: &ResolvedSubject,
    conditions: &[Condition],
    from: Ms,
) -> Vec<(Ms, bool)> {
    let mut truth = Truth::new(subject.clone(), conditions.to_vec(), from);
    truth.extend(transitions);
    truth.series(Ms::MAX).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::checked::NodeCond;
    use crate::scenario::model::NodeReady;
    use crate::timeline::Change;

    fn t(at: Ms, change: Change) -> Transition {
        crate::timeline::node_change(at, "w", change)
    }

    fn ready(at: Ms, status: &str) -> Transition {
        t(
            at,
            Change::NodeReady {
                status: status.into(),
                reason: None,
                message: None,
            },
        )
    }

    fn unknown() -> Truth {
        Truth::new(
            ResolvedSubject::Node("w".into()),
            vec![Condition::Node(NodeCond::Ready(NodeReady::Unknown))],
            10,
        )
    }

    /// A record with flips before, at and after `from`, and instants whose
    /// transitions cancel each other out.
    fn record() -> Vec<Transition> {
        vec![
            t(0, Change::NodeAdded),
            ready(5, "Unknown"),
            ready(10, "True"),
            ready(12, "Unknown"),
            ready(12, "True"),
            ready(15, "Unknown"),
            ready(20, "True"),
            ready(20, "Unknown"),
            ready(20, "True"),
            ready(30, "Unknown"),
        ]
    }

    #[test]
    fn folded_in_any_pieces_it_equals_the_whole_replay() {
        let all = record();
        let whole = truth_series(
            &all,
            &ResolvedSubject::Node("w".into()),
            &[Condition::Node(NodeCond::Ready(NodeReady::Unknown))],
            10,
        );
        assert_eq!(
            whole,
            vec![(10, false), (15, true), (20, false), (30, true)]
        );
        // Every way of cutting the record in two or three pieces.
        for a in 0..=all.len() {
            for b in a..=all.len() {
                let mut truth = unknown();
                truth.extend(&all[..a]);
                truth.extend(&all[a..b]);
                truth.extend(&all[b..]);
                assert_eq!(truth.series(Ms::MAX).as_ref(), whole, "cut at {a} and {b}");
            }
        }
    }

    #[test]
    fn one_at_a_time_with_reads_between_it_equals_the_replay_so_far() {
        let all = record();
        let mut truth = unknown();
        for (i, tr) in all.iter().enumerate() {
            truth.extend(std::slice::from_ref(tr));
            let now = tr.at;
            let replay = truth_series(
                &all[..=i],
                &ResolvedSubject::Node("w".into()),
                &[Condition::Node(NodeCond::Ready(NodeReady::Unknown))],
                10,
            );
            // A read at `now` sees the instant as recorded so far.
            let got = truth.series(now).into_owned();
            if now > 10 {
                assert_eq!(got, replay, "after transition {i}");
            } else {
                assert_eq!(got, vec![(10, now >= 5 && i == 1)], "before from, {i}");
            }
        }
    }

    #[test]
    fn read_before_from_is_a_preview_and_does_not_start_the_series() {
        let mut truth = unknown();
        truth.extend(&[t(0, Change::NodeAdded), ready(5, "Unknown")]);
        assert_eq!(truth.series(8).as_ref(), [(10, true)]);
        // A transition at `from` itself still counts as before the start.
        truth.extend(&[ready(10, "True")]);
        assert_eq!(truth.series(10).as_ref(), [(10, false)]);
        truth.extend(&[ready(11, "Unknown")]);
        assert_eq!(truth.series(11).as_ref(), [(10, false), (11, true)]);
    }

    #[test]
    fn a_node_truth_keeps_no_pods_and_still_sees_its_node() {
        let pod = Transition {
            by: None,
            at: 1,
            server_time: None,
            object: ObjectRef::Pod {
                name: "p".into(),
                uid: "u".into(),
            },
            change: Change::PodAdded {
                labels: Default::default(),
                owner: None,
                claims: Vec::new(),
            },
        };
        let other = Transition {
            by: None,
            at: 2,
            server_time: None,
            object: ObjectRef::Node { name: "x".into() },
            change: Change::NodeAdded,
        };
        let mut truth = unknown();
        truth.extend(&[pod, other]);
        truth.extend(&record());
        assert!(truth.world.pods.is_empty() && truth.world.nodes.len() == 1);
        assert_eq!(
            truth.series(Ms::MAX).as_ref(),
            [(10, false), (15, true), (20, false), (30, true)]
        );
    }

    /// Pods never seen as expected say what they showed instead: the
    /// selected ones only, each with its phase, reason and state.
    #[test]
    fn pods_say_their_phase_reason_and_state() {
        use crate::scenario::checked::PodsCond;
        use crate::scenario::model::PodPhase;
        use crate::scenario::selector::Selector;
        let pod = |at: Ms, name: &str, change: Change| Transition {
            by: None,
            at,
            server_time: None,
            object: ObjectRef::Pod {
                name: name.into(),
                uid: format!("uid-{name}"),
            },
            change,
        };
        let labels = |app: &str| std::sync::Arc::new([("app".to_owned(), app.to_owned())].into());
        let mut ts = Vec::new();
        for (name, app, node) in [
            ("web-a", "web", "w"),
            ("web-b", "web", "w"),
            ("web-c", "web", "x"),
            ("db-0", "db", "w"),
        ] {
            ts.push(pod(
                0,
                name,
                Change::PodAdded {
                    labels: labels(app),
                    owner: None,
                    claims: Vec::new(),
                },
            ));
            ts.push(pod(0, name, Change::PodScheduled { node: node.into() }));
            ts.push(pod(
                0,
                name,
                Change::PodPhase {
                    phase: "Running".into(),
                    reason: None,
                },
            ));
        }
        ts.push(pod(
            5,
            "web-a",
            Change::PodPhase {
                phase: "Failed".into(),
                reason: Some("Terminated".into()),
            },
        ));
        ts.push(pod(5, "web-b", Change::PodReady { ready: true }));
        ts.push(pod(6, "web-b", Change::PodTerminating));
        let on_w = |app: &str| ResolvedSubject::Pods {
            selector: Selector::parse(&format!("app={app}")).unwrap(),
            on: Some(vec!["w".into()]),
            not_on: None,
        };
        let succeeded = vec![Condition::Pods(PodsCond::Phase(PodPhase::Succeeded))];
        let mut web = Truth::new(on_w("web"), succeeded.clone(), 0);
        web.extend(&ts);
        assert_eq!(
            web.seen().as_deref(),
            Some("2 pods: web-a (Failed, Terminated), web-b (Running, ready, terminating)")
        );
        let mut none = Truth::new(on_w("cache"), succeeded, 0);
        none.extend(&ts);
        assert_eq!(none.seen().as_deref(), Some("0 pods"));
        let node = Truth::new(
            ResolvedSubject::Node("w".into()),
            vec![Condition::Node(NodeCond::Ready(NodeReady::Unknown))],
            0,
        );
        assert_eq!(node.seen(), None);
    }
}
