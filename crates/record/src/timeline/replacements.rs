//! Which pod replaced each pod that was on a failed node at T0 (pure): the
//! pods table of the report and the duplicate windows start from here.
//!
//! A replacement created while the failed node still looked schedulable
//! (Ready, or NotReady before the node lifecycle controller's
//! `node.kubernetes.io/unreachable:NoSchedule` taint reached the
//! scheduler) can be bound to that very node and never run there; it is
//! deleted with the node's other pods (the out-of-service taint, pod GC,
//! the node's deletion), and the pod made after it is the one that serves.
//! Such a pod is *stranded*: recorded on the pod it replaced, never taken
//! for its replacement while a later one exists.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Change, ObjectRef, Transition, World};
use crate::plan::time::Ms;

/// One pod that was on a target node at T0, and what replaced it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRecovery {
    pub pod: String,
    pub node: String,
    /// Owner (`StatefulSet/web`, `ReplicaSet/web-7d9f`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating_at: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<Ms>,
    /// How long it stayed Terminating (to deletion, or to the end of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating_for: Option<Ms>,
    /// Still present (Terminating or not) when the run ended.
    pub still_present: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_created: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_scheduled: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_running: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_ready: Option<Ms>,
    /// When the last of the replacement's claims' volumes was attached to
    /// its node (relative to T0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_volume_attached: Option<Ms>,
    /// How long the replacement waited on its volumes: from its scheduling
    /// to `replacementVolumeAttached`, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_volume_wait: Option<Ms>,
    /// Pods made to replace it before `replacement` that were bound to a
    /// failed node and never ran (see `replacements`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stranded: Vec<Stranded>,
}

/// A replacement bound to a failed node that never ran there.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stranded {
    pub pod: String,
    pub node: String,
    /// Relative to T0.
    pub created: Ms,
    /// Relative to T0; None: still there when the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Ms>,
}

/// Every pod on a target node at T0 (from `before`, the world just before
/// it) and what replaced it; `after` holds the transitions from T0, `end`
/// when the observation stopped. Sorted by pod name.
pub(super) fn recoveries(
    transitions: &[Transition],
    after: &[&Transition],
    before: &World,
    t0: Ms,
    targets: &[String],
    end: Ms,
) -> Vec<PodRecovery> {
    let rel = |at: Ms| at - t0;
    let mut pods: Vec<PodRecovery> = Vec::new();
    let mut owners: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut created: BTreeMap<String, (Ms, String)> = BTreeMap::new();
    for t in transitions {
        if let (ObjectRef::Pod { uid, name }, Change::PodAdded { owner, .. }) =
            (&t.object, &t.change)
        {
            owners.insert(uid.clone(), owner.clone());
            created.insert(uid.clone(), (t.at, name.clone()));
        }
    }
    let mut taken: Vec<String> = Vec::new();
    let own = |uid: &str, change: fn(&Change) -> bool| {
        after
            .iter()
            .find(|t| {
                matches!(&t.object, ObjectRef::Pod { uid: u, .. } if u == uid) && change(&t.change)
            })
            .map(|t| t.at)
    };
    let stranded_pods = stranded(after, targets);
    let stranded = |uid: &str| stranded_pods.get(uid).copied();
    let mut victims: Vec<Victim> = before
        .pods
        .iter()
        .filter(|(_, p)| p.node.as_ref().is_some_and(|n| targets.contains(n)))
        .map(|(uid, pod)| {
            let terminating_at = own(uid, |c| *c == Change::PodTerminating);
            let deleted_at = own(uid, |c| *c == Change::PodDeleted);
            // A pod its kubelet shut down (Failed, no deletion) is replaced too.
            let ended = own(uid, is_terminal_phase);
            let left = [terminating_at, deleted_at, ended]
                .into_iter()
                .flatten()
                .min();
            Victim {
                uid,
                pod,
                terminating_at,
                deleted_at,
                left,
            }
        })
        .collect();
    // Replacements go to the pods in the order they left: the controller
    // replaces a pod once it is going, so the first to go gets the first
    // replacement created after it went (a drain's second pod is evicted
    // long after the first).
    victims.sort_by(|a, b| {
        (a.left.is_none(), a.left, &a.pod.name).cmp(&(b.left.is_none(), b.left, &b.pod.name))
    });
    for Victim {
        uid,
        pod,
        terminating_at,
        deleted_at,
        left,
    } in victims
    {
        let owner = owners.get(uid).cloned().flatten();
        // The replacement: same name (StatefulSet), else the first unclaimed
        // pod of the same owner created after T0 on another node; created
        // once this one was going, when such a pod exists.
        let candidates: Vec<(&String, Ms, &String)> = created
            .iter()
            .filter(|(u, (at, _))| *at >= t0 && *u != uid && !taken.contains(u))
            .filter(|(u, (_, name))| {
                *name == pod.name
                    || (owner.is_some()
                        && owners.get(*u).cloned().flatten() == owner
                        && !owner_is_statefulset(owner.as_deref()))
            })
            .map(|(u, (at, name))| (u, *at, name))
            .collect();
        // The first created once this one was going (else the first at
        // all), passing over those stranded on a failed node while a
        // later one exists.
        let first = |after_left: bool, stranded_too: bool| {
            candidates
                .iter()
                .filter(|(_, at, _)| !after_left || left.is_some_and(|l| *at >= l))
                .filter(|(u, _, _)| stranded_too || stranded(u).is_none())
                .min_by_key(|(_, at, _)| *at)
                .map(|(u, at, name)| ((*u).clone(), *at, (*name).clone()))
        };
        let replacement = first(true, false)
            .or_else(|| first(false, false))
            .or_else(|| first(true, true))
            .or_else(|| first(false, true));
        let mut rec = PodRecovery {
            pod: pod.name.clone(),
            node: pod.node.clone().unwrap_or_default(),
            owner: owner.clone(),
            terminating_at: terminating_at.map(rel),
            deleted_at: deleted_at.map(rel),
            terminating_for: terminating_at.map(|s| deleted_at.unwrap_or(end) - s),
            still_present: deleted_at.is_none(),
            ..PodRecovery::default()
        };
        if let Some((u, at, name)) = replacement {
            // The stranded ones made before it, since this one went.
            for (s, s_at, s_name) in &candidates {
                let since_left = left.is_none_or(|l| *s_at >= l);
                let Some(node) = stranded(s).filter(|_| *s_at < at && since_left) else {
                    continue;
                };
                taken.push((*s).clone());
                rec.stranded.push(Stranded {
                    pod: (*s_name).clone(),
                    node: node.clone(),
                    created: rel(*s_at),
                    deleted: own(s, |c| *c == Change::PodDeleted).map(rel),
                });
            }
            taken.push(u.clone());
            let of =
                |t: &&&Transition| matches!(&t.object, ObjectRef::Pod { uid: x, .. } if *x == u);
            rec.replacement = Some(name);
            rec.replacement_created = Some(rel(at));
            for t in after.iter().filter(of) {
                match &t.change {
                    Change::PodScheduled { node } if rec.replacement_scheduled.is_none() => {
                        rec.replacement_scheduled = Some(rel(t.at));
                        rec.replacement_node = Some(node.clone());
                    }
                    Change::PodPhase { phase, .. }
                        if phase == "Running" && rec.replacement_running.is_none() =>
                    {
                        rec.replacement_running = Some(rel(t.at));
                    }
                    Change::PodReady { ready: true } if rec.replacement_ready.is_none() => {
                        rec.replacement_ready = Some(rel(t.at));
                    }
                    _ => {}
                }
            }
        }
        pods.push(rec);
    }
    pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    pods
}

/// Every pod bound to a failed node that never ran anywhere, with that
/// node: the first node it was scheduled to after T0 is a target and no
/// phase Running was seen. One pass over `after`.
fn stranded<'a>(after: &[&'a Transition], targets: &[String]) -> BTreeMap<&'a str, &'a String> {
    let mut first_node: BTreeMap<&'a str, &'a String> = BTreeMap::new();
    let mut ran: std::collections::BTreeSet<&'a str> = Default::default();
    for t in after {
        let ObjectRef::Pod { uid, .. } = &t.object else {
            continue;
        };
        match &t.change {
            Change::PodScheduled { node } => {
                first_node.entry(uid.as_str()).or_insert(node);
            }
            Change::PodPhase { phase, .. } if phase == "Running" => {
                ran.insert(uid.as_str());
            }
            _ => {}
        }
    }
    first_node.retain(|uid, node| targets.contains(*node) && !ran.contains(uid));
    first_node
}

fn is_terminal_phase(c: &Change) -> bool {
    matches!(c, Change::PodPhase { phase, .. } if phase == "Failed" || phase == "Succeeded")
}

/// A pod on a target node at T0, and when it was seen going.
struct Victim<'a> {
    uid: &'a String,
    pod: &'a super::PodView,
    terminating_at: Option<Ms>,
    deleted_at: Option<Ms>,
    /// The first of Terminating, deleted, or a terminal phase.
    left: Option<Ms>,
}

fn owner_is_statefulset(owner: Option<&str>) -> bool {
    owner.is_some_and(|o| o.starts_with("StatefulSet/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::seen as t;

    fn pod(uid: &str) -> ObjectRef {
        ObjectRef::Pod {
            name: "db-0".into(),
            uid: uid.into(),
        }
    }
    fn added() -> Change {
        Change::PodAdded {
            labels: Default::default(),
            owner: Some("StatefulSet/db".into()),
            claims: Vec::new(),
        }
    }
    fn on(node: &str) -> Change {
        Change::PodScheduled { node: node.into() }
    }
    fn running() -> Change {
        Change::PodPhase {
            phase: "Running".into(),
            reason: None,
        }
    }
    fn recover(ts: &[Transition], t0: Ms) -> Vec<PodRecovery> {
        let after: Vec<&Transition> = ts.iter().filter(|t| t.at >= t0).collect();
        let before = World::at(ts, t0 - 1);
        recoveries(ts, &after, &before, t0, &["a".into()], 30_000)
    }

    /// What a sim run recorded (CI, stop 69): db-0 force-deleted 0.16 s
    /// after its powered-off node went NotReady, before the NoSchedule
    /// taint; the StatefulSet's next db-0 was bound to that node, deleted
    /// there after the out-of-service taint, and the one after it ran on b.
    /// Taking the stranded one for the replacement left nothing replaced.
    #[test]
    fn a_replacement_bound_to_the_failed_node_is_passed_over() {
        let ts = vec![
            t(1, pod("old"), added()),
            t(1, pod("old"), on("a")),
            t(2, pod("old"), running()),
            // T0 = 1000
            t(1_041, pod("old"), Change::PodDeleted),
            t(1_053, pod("lost"), added()),
            t(1_061, pod("lost"), on("a")),
            t(9_000, pod("lost"), Change::PodTerminating),
            t(9_010, pod("lost"), Change::PodDeleted),
            t(9_020, pod("new"), added()),
            t(9_030, pod("new"), on("b")),
            t(10_000, pod("new"), running()),
        ];
        let p = &recover(&ts, 1_000)[0];
        assert_eq!(p.replacement_node.as_deref(), Some("b"));
        assert_eq!(
            (p.replacement_created, p.replacement_running),
            (Some(8_020), Some(9_000))
        );
        assert_eq!(
            p.stranded,
            [Stranded {
                pod: "db-0".into(),
                node: "a".into(),
                created: 53,
                deleted: Some(8_010),
            }]
        );
    }

    /// Stranded with nothing after it: it is the replacement, never Running
    /// (the node never came back), and not listed twice.
    #[test]
    fn a_stranded_pod_without_a_successor_is_the_replacement() {
        let ts = vec![
            t(1, pod("old"), added()),
            t(1, pod("old"), on("a")),
            t(1_041, pod("old"), Change::PodDeleted),
            t(1_053, pod("lost"), added()),
            t(1_061, pod("lost"), on("a")),
        ];
        let p = &recover(&ts, 1_000)[0];
        assert_eq!(p.replacement_node.as_deref(), Some("a"));
        assert_eq!(p.replacement_running, None);
        assert!(p.stranded.is_empty(), "{p:?}");
    }

    /// A replacement that ran on the failed node once it was back is not
    /// stranded.
    #[test]
    fn a_replacement_that_ran_on_the_node_is_kept() {
        let ts = vec![
            t(1, pod("old"), added()),
            t(1, pod("old"), on("a")),
            t(1_041, pod("old"), Change::PodDeleted),
            t(1_053, pod("back"), added()),
            t(1_061, pod("back"), on("a")),
            t(20_000, pod("back"), running()),
        ];
        let p = &recover(&ts, 1_000)[0];
        assert_eq!(p.replacement_running, Some(19_000));
        assert!(p.stranded.is_empty(), "{p:?}");
    }
}
