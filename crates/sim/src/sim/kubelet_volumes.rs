//! What a kubelet's volume manager does that the attach-detach controller
//! and a pod's start depend on (pure; the loop that feeds it is
//! `volume_agent.rs`).
//!
//! - **Volumes in use.** A kubelet reports in its Node's
//!   `status.volumesInUse` the attachable volumes its pods want or still have
//!   mounted (kubelet `volume_manager.go` `GetVolumesInUse`), with each node
//!   status update. The attach-detach controller detaches a volume from a
//!   node only once the node stops reporting it, unless the node is
//!   unhealthy for 6 minutes or carries the out-of-service taint
//!   (`reconciler.go`): so a paused, cut off or stopped kubelet, which reports
//!   nothing, keeps its volumes attached, and its list stays as it last wrote
//!   it. A kubelet that returns drops the volumes of the pods deleted
//!   meanwhile once it has stopped them ([`STOP_AFTER`]).
//! - **A pod's start.** A kubelet starts a pod's containers once its
//!   volumes are mounted, and mounts an attachable volume only once it is
//!   attached to the node and reported in use there. KWOK starts a pod at
//!   once; the sim holds it (`stages/pod-ready.yaml`) until the
//!   [`VOLUMES_READY_AT`] annotation this module decides: [`POD_START`] after
//!   its scheduling when no volume needs attaching (KWOK's own delay), else
//!   [`ATTACHED_TO_RUNNING`] after the last of its volumes is attached and
//!   reported in use.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

use super::kubelet::STOP_AFTER;

/// The pod annotation (an RFC 3339 time) from which KWOK's pod-ready stage
/// may start a pod that has claims (`stages/pod-ready.yaml`).
pub const VOLUMES_READY_AT: &str = "nodefall.dev/volumes-ready-at";

/// From a pod's volume attached to its node (its VolumeAttachment's status)
/// to the pod Running: 1.77-2.32 s on kind (`kind up --profile fast`, six
/// pods of `scenarios/kind-rwo-force-delete.yaml`: four at its setup, two
/// after the out-of-service taint released their volumes); the kubelet's
/// status update that reports the volume in use, the mount and the
/// container's start.
pub const ATTACHED_TO_RUNNING: Duration = Duration::from_millis(2100);

/// A pod whose claims need no attaching starts as KWOK starts any pod, this
/// long after it is scheduled (pod-ready.yaml's default delay).
pub const POD_START: Duration = Duration::from_millis(1500);

/// A volume as the kubelet names it: `kubernetes.io/csi/<driver>^<handle>`
/// (`csi_plugin.go` GetVolumeName, `util.GetUniqueVolumeName`), and whether
/// it is attached before a mount (its CSIDriver's `attachRequired`, true
/// when the driver has no CSIDriver object, as the controller reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub unique: String,
    pub attachable: bool,
}

impl Volume {
    /// A CSI volume of `driver` with `handle`.
    pub fn csi(driver: &str, handle: &str, attachable: bool) -> Volume {
        Volume {
            unique: format!("kubernetes.io/csi/{driver}^{handle}"),
            attachable,
        }
    }
}

/// A pod bound to a node, as far as its volumes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    /// Its uid: a pod made again under the same name is another pod.
    pub uid: String,
    pub node: String,
    /// Its claims' names (in its namespace).
    pub claims: Vec<String>,
    /// When it was scheduled (its PodScheduled condition).
    pub scheduled_at: Option<Timestamp>,
    /// It has its [`VOLUMES_READY_AT`] already.
    pub gated: bool,
    /// Succeeded or Failed: its containers are gone.
    pub terminal: bool,
}

/// What the API says now.
#[derive(Debug, Clone, Default)]
pub struct World {
    pub pods: Vec<PodView>,
    /// Bound claims: (namespace, claim) -> PersistentVolume name.
    pub claims: BTreeMap<(String, String), String>,
    /// PersistentVolume name -> the volume.
    pub volumes: BTreeMap<String, Volume>,
    /// (PersistentVolume, node) of every VolumeAttachment attached.
    pub attached: BTreeSet<(String, String)>,
    /// Each existing Node's `status.volumesInUse`.
    pub reported: BTreeMap<String, Vec<String>>,
    /// The sim's nodes and whether each one's kubelet runs (its agent not
    /// frozen or stopped).
    pub running: BTreeMap<String, bool>,
}

/// What the kubelets write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writes {
    /// Nodes whose `volumesInUse` is to be this (sorted), where it differs
    /// from what they report.
    pub in_use: BTreeMap<String, Vec<String>>,
    /// Pods to annotate with [`VOLUMES_READY_AT`].
    pub gates: Vec<Gate>,
}

/// A pod that may start at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub at: Timestamp,
}

/// The kubelets' memory: the volumes mounted on each node, and when each
/// node's kubelet last came back.
#[derive(Debug, Clone, Default)]
pub struct Kubelets {
    mounted: BTreeMap<String, BTreeSet<String>>,
    back_at: BTreeMap<String, Timestamp>,
    was_running: BTreeMap<String, bool>,
}

impl Kubelets {
    /// What each running kubelet writes now.
    pub fn decide(&mut self, world: &World, now: Timestamp) -> Writes {
        let mut writes = Writes::default();
        for (node, &running) in &world.running {
            let was = self.was_running.insert(node.clone(), running);
            if !running {
                continue;
            }
            if was == Some(false) {
                self.back_at.insert(node.clone(), now);
            }
            let Some(reported) = world.reported.get(node) else {
                // Not registered (deleted): nothing to write to yet.
                continue;
            };
            let pods: Vec<&PodView> = world
                .pods
                .iter()
                .filter(|p| &p.node == node && !p.terminal)
                .collect();
            let desired: BTreeSet<String> = pods
                .iter()
                .flat_map(|p| volumes_of(world, p))
                .flatten()
                .filter(|(_, v)| v.attachable)
                .map(|(_, v)| v.unique.clone())
                .collect();
            let mounted = self.mounted.entry(node.clone()).or_default();
            // A returned kubelet tears down the volumes of pods deleted
            // meanwhile once it has stopped them; a running one at once.
            let tearing_down = self
                .back_at
                .get(node)
                .is_some_and(|&back| now < back + STOP_AFTER);
            if !tearing_down {
                mounted.retain(|v| desired.contains(v));
            }
            for pod in pods.iter().filter(|p| !p.gated) {
                let Some(volumes) = volumes_of(world, pod) else {
                    continue; // a claim not bound yet
                };
                let attachable: Vec<(&str, &Volume)> =
                    volumes.into_iter().filter(|(_, v)| v.attachable).collect();
                let at = if attachable.is_empty() {
                    pod.scheduled_at.unwrap_or(now) + POD_START
                } else if attachable.iter().all(|(pv, v)| {
                    reported.contains(&v.unique)
                        && world.attached.contains(&((*pv).to_owned(), node.clone()))
                }) {
                    now + ATTACHED_TO_RUNNING
                } else {
                    continue;
                };
                mounted.extend(attachable.iter().map(|(_, v)| v.unique.clone()));
                writes.gates.push(Gate {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                    at,
                });
            }
            let in_use: Vec<String> = desired.union(mounted).cloned().collect();
            let mut now_reported = reported.clone();
            now_reported.sort();
            if in_use != now_reported {
                writes.in_use.insert(node.clone(), in_use);
            }
        }
        writes
    }
}

/// The pod's volumes through its claims, each with its PersistentVolume's
/// name; `None` while a claim is not bound or its PersistentVolume unknown.
fn volumes_of<'w>(world: &'w World, pod: &PodView) -> Option<Vec<(&'w str, &'w Volume)>> {
    pod.claims
        .iter()
        .map(|c| {
            let pv = world.claims.get(&(pod.namespace.clone(), c.clone()))?;
            Some((pv.as_str(), world.volumes.get(pv)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: f64) -> Timestamp {
        Timestamp::from_millisecond(1_800_000_000_000 + (s * 1000.0) as i64).unwrap()
    }

    const DISK: &str = "kubernetes.io/csi/csi.nodefall.dev^disk-0";

    fn gate(at: Timestamp) -> Gate {
        Gate {
            namespace: "ns".into(),
            name: "disk-0".into(),
            uid: "u0".into(),
            at,
        }
    }

    /// Pod disk-0 on `node` with claim data-0 bound to PV pv-0 of the CSI
    /// driver, nodes a and b running, nothing attached or reported.
    fn world(node: &str) -> World {
        World {
            pods: vec![PodView {
                namespace: "ns".into(),
                name: "disk-0".into(),
                uid: "u0".into(),
                node: node.into(),
                claims: vec!["data-0".into()],
                scheduled_at: Some(t(0.0)),
                gated: false,
                terminal: false,
            }],
            claims: [(("ns".into(), "data-0".into()), "pv-0".into())].into(),
            volumes: [(
                "pv-0".into(),
                Volume::csi("csi.nodefall.dev", "disk-0", true),
            )]
            .into(),
            attached: BTreeSet::new(),
            reported: [("a".into(), vec![]), ("b".into(), vec![])].into(),
            running: [("a".into(), true), ("b".into(), true)].into(),
        }
    }

    #[test]
    fn a_pod_starts_once_its_volume_is_reported_in_use_and_attached() {
        let mut k = Kubelets::default();
        let mut w = world("a");
        // Scheduled: the kubelet reports the volume in use; no start yet.
        let writes = k.decide(&w, t(0.1));
        assert_eq!(writes.in_use["a"], [DISK]);
        assert!(writes.gates.is_empty());
        w.reported.insert("a".into(), vec![DISK.into()]);
        assert_eq!(k.decide(&w, t(0.5)), Writes::default());
        // Attached: it starts ATTACHED_TO_RUNNING later.
        w.attached.insert(("pv-0".into(), "a".into()));
        let writes = k.decide(&w, t(1.0));
        assert_eq!(writes.gates, [gate(t(1.0) + ATTACHED_TO_RUNNING)]);
        assert!(writes.in_use.is_empty());
    }

    #[test]
    fn a_volume_that_needs_no_attaching_starts_as_kwok_starts_a_pod() {
        let mut k = Kubelets::default();
        let mut w = world("a");
        w.volumes.insert(
            "pv-0".into(),
            Volume {
                unique: "kubernetes.io/nfs/pv-0".into(),
                attachable: false,
            },
        );
        let writes = k.decide(&w, t(0.2));
        assert!(writes.in_use.is_empty(), "not attachable: never in use");
        assert_eq!(writes.gates, [gate(t(0.0) + POD_START)]);
    }

    #[test]
    fn an_unbound_claim_holds_the_pod_and_reports_nothing() {
        let mut k = Kubelets::default();
        let mut w = world("a");
        w.claims.clear();
        assert_eq!(k.decide(&w, t(1.0)), Writes::default());
    }

    #[test]
    fn a_frozen_kubelet_writes_nothing_and_a_returned_one_drops_deleted_pods_volumes_after_stopping_them()
     {
        let mut k = Kubelets::default();
        let mut w = world("a");
        w.reported.insert("a".into(), vec![DISK.into()]);
        w.attached.insert(("pv-0".into(), "a".into()));
        let writes = k.decide(&w, t(1.0));
        assert_eq!(writes.gates.len(), 1);
        // The node freezes; its pod is force-deleted and made again on b.
        w.running.insert("a".into(), false);
        w.pods[0].node = "b".into();
        let writes = k.decide(&w, t(10.0));
        assert!(
            !writes.in_use.contains_key("a"),
            "a frozen kubelet writes nothing"
        );
        assert_eq!(writes.in_use["b"], [DISK], "b wants it (Multi-Attach)");
        assert!(writes.gates.is_empty(), "not attached to b");
        w.reported.insert("b".into(), vec![DISK.into()]);
        // a comes back: it still has the volume mounted until it has
        // stopped the deleted pod.
        w.running.insert("a".into(), true);
        assert!(!k.decide(&w, t(20.0)).in_use.contains_key("a"));
        assert!(
            !k.decide(&w, t(20.0) + STOP_AFTER - Duration::from_millis(1))
                .in_use
                .contains_key("a")
        );
        let writes = k.decide(&w, t(20.0) + STOP_AFTER);
        assert_eq!(writes.in_use["a"], Vec::<String>::new());
    }

    #[test]
    fn a_running_kubelet_drops_a_deleted_pods_volume_at_once() {
        let mut k = Kubelets::default();
        let mut w = world("a");
        w.reported.insert("a".into(), vec![DISK.into()]);
        w.attached.insert(("pv-0".into(), "a".into()));
        k.decide(&w, t(1.0));
        w.pods.clear();
        assert_eq!(k.decide(&w, t(2.0)).in_use["a"], Vec::<String>::new());
    }

    #[test]
    fn a_terminal_pod_keeps_no_volume_in_use() {
        let mut k = Kubelets::default();
        let mut w = world("a");
        w.pods[0].terminal = true;
        assert_eq!(k.decide(&w, t(1.0)), Writes::default());
    }

    #[test]
    fn a_deleted_node_is_written_once_registered_again() {
        let mut k = Kubelets::default();
        let mut w = world("a");
        w.reported.remove("a");
        assert!(!k.decide(&w, t(1.0)).in_use.contains_key("a"));
        w.reported.insert("a".into(), vec![]);
        assert_eq!(k.decide(&w, t(2.0)).in_use["a"], [DISK]);
    }
}
