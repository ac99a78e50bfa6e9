//! What each watched kind (Node, Pod, Event, VolumeAttachment, PVC) contributes
//! to the timeline: its identity key, the fields compared, and the typed
//! changes between two states of it.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::ResourceExt as _;

use super::fold::{Diff, Differ};
use crate::timeline::{Change, ObjectRef, Toleration};

/// Identity of an object across watch gaps: its UID, so a deleted and
/// re-created object with the same name is two objects. The name is only a
/// fallback for objects without one (never the case from an API server).
fn uid_key<K: kube::Resource>(o: &K) -> String {
    o.uid().unwrap_or_else(|| o.name_any())
}

fn time(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<Timestamp> {
    t.map(|t| t.0)
}

// ----- nodes -----

#[derive(Debug)]
pub struct NodeDiff;

#[derive(Debug, Clone, PartialEq)]
pub struct NodeSnap {
    /// The Ready condition's status, reason and message.
    ready: Option<(String, Option<String>, Option<String>)>,
    taints: BTreeMap<(String, String), Option<String>>,
    unschedulable: bool,
}

/// The field manager that last wrote `spec.<field>` of the node: of the
/// managedFields entries that hold it, the newest. A Node's taints are an
/// atomic list, so whoever changed them last owns all of them; a field
/// removed (the last taint gone) is owned by no one, and then None.
fn spec_writer(n: &Node, field: &str) -> Option<String> {
    n.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.get("f:spec").and_then(|s| s.get(field)).is_some())
        })
        .max_by_key(|m| m.time.as_ref().map(|t| t.0))
        .and_then(|m| m.manager.clone())
}

impl Differ<Node> for NodeDiff {
    type Snap = NodeSnap;
    fn key(&self, n: &Node) -> String {
        uid_key(n)
    }
    fn object(&self, n: &Node) -> ObjectRef {
        ObjectRef::Node { name: n.name_any() }
    }
    fn snap(&self, n: &Node) -> NodeSnap {
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()));
        let spec = n.spec.as_ref();
        NodeSnap {
            ready,
            taints: spec
                .and_then(|s| s.taints.as_ref())
                .map(|ts| {
                    ts.iter()
                        .map(|t| ((t.key.clone(), t.effect.clone()), t.value.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        }
    }
    fn by(&self, n: &Node, change: &Change) -> Option<String> {
        match change {
            Change::TaintAdded { .. } | Change::TaintRemoved { .. } => spec_writer(n, "f:taints"),
            Change::Unschedulable { .. } => spec_writer(n, "f:unschedulable"),
            _ => None,
        }
    }
    fn diff(&self, prev: Option<&NodeSnap>, n: &Node, _initial: bool) -> Diff {
        let cur = self.snap(n);
        let mut out = Vec::new();
        if prev.is_none() {
            out.push((
                time(n.metadata.creation_timestamp.as_ref()),
                Change::NodeAdded,
            ));
        }
        let ready_time = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .and_then(|c| time(c.last_transition_time.as_ref()));
        if let Some((status, reason, message)) = &cur.ready
            && prev.and_then(|p| p.ready.as_ref().map(|r| &r.0)) != Some(status)
        {
            out.push((
                ready_time,
                Change::NodeReady {
                    status: status.clone(),
                    reason: reason.clone(),
                    message: message.clone(),
                },
            ));
        }
        let empty = BTreeMap::new();
        let before = prev.map_or(&empty, |p| &p.taints);
        let added_time = |key: &str, effect: &str| {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .and_then(|ts| ts.iter().find(|t| t.key == key && t.effect == effect))
                .and_then(|t| time(t.time_added.as_ref()))
        };
        for ((key, effect), value) in &cur.taints {
            if !before.contains_key(&(key.clone(), effect.clone())) {
                out.push((
                    added_time(key, effect),
                    Change::TaintAdded {
                        key: key.clone(),
                        value: value.clone(),
                        effect: effect.clone(),
                    },
                ));
            }
        }
        for (key, effect) in before.keys() {
            if !cur.taints.contains_key(&(key.clone(), effect.clone())) {
                out.push((
                    None,
                    Change::TaintRemoved {
                        key: key.clone(),
                        effect: effect.clone(),
                    },
                ));
            }
        }
        if prev.map_or(cur.unschedulable, |p| p.unschedulable != cur.unschedulable) {
            out.push((
                None,
                Change::Unschedulable {
                    value: cur.unschedulable,
                },
            ));
        }
        out
    }
    fn deleted(&self) -> Option<Change> {
        Some(Change::NodeDeleted)
    }
}

// ----- pods -----

#[derive(Debug)]
pub struct PodDiff;

#[derive(Debug, Clone, PartialEq)]
pub struct PodSnap {
    node: Option<String>,
    ready: bool,
    phase: String,
    reason: Option<String>,
    terminating: bool,
    disruption: Option<Option<String>>,
    tolerations: (Toleration, Toleration),
}

/// How long a pod tolerates a NoExecute taint with `key` (and no value),
/// as the taint-eviction controller computes it: the smallest
/// `tolerationSeconds` among the matching tolerations (<= 0: none), forever
/// when none of them has one, none without a matching toleration.
pub fn toleration(tolerations: &[k8s_openapi::api::core::v1::Toleration], key: &str) -> Toleration {
    let matching: Vec<_> = tolerations
        .iter()
        .filter(|t| {
            t.effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == "NoExecute")
        })
        .filter(|t| match t.operator.as_deref() {
            Some("Exists") => t.key.as_deref().is_none_or(|k| k.is_empty() || k == key),
            // Equal (the default): the key and the taint's (empty) value
            _ => t.key.as_deref() == Some(key) && t.value.as_deref().unwrap_or("").is_empty(),
        })
        .collect();
    if matching.is_empty() {
        return Toleration::None;
    }
    match matching.iter().filter_map(|t| t.toleration_seconds).min() {
        Some(s) if s <= 0 => Toleration::Seconds(0),
        Some(s) => Toleration::Seconds(s),
        None => Toleration::Forever,
    }
}

/// The taint the node lifecycle controller puts on an unreachable node.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint it puts on a node that is not ready.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// How long `p` tolerates the [`UNREACHABLE`] and the [`NOT_READY`] taint.
pub fn pod_tolerations(p: &Pod) -> (Toleration, Toleration) {
    let ts = p
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    (toleration(ts, UNREACHABLE), toleration(ts, NOT_READY))
}

fn condition<'a>(p: &'a Pod, type_: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
}

/// The PersistentVolumeClaims a pod's volumes use (spec order).
fn claims(p: &Pod) -> Vec<String> {
    p.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect()
}

impl Differ<Pod> for PodDiff {
    type Snap = PodSnap;
    fn key(&self, p: &Pod) -> String {
        uid_key(p)
    }
    fn object(&self, p: &Pod) -> ObjectRef {
        ObjectRef::Pod {
            name: p.name_any(),
            uid: self.key(p),
        }
    }
    fn snap(&self, p: &Pod) -> PodSnap {
        let status = p.status.as_ref();
        PodSnap {
            node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
            ready: condition(p, "Ready").is_some_and(|c| c.status == "True"),
            phase: status
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Pending".into()),
            reason: status.and_then(|s| s.reason.clone()),
            terminating: p.metadata.deletion_timestamp.is_some(),
            disruption: condition(p, "DisruptionTarget")
                .filter(|c| c.status == "True")
                .map(|c| c.reason.clone()),
            tolerations: pod_tolerations(p),
        }
    }
    fn diff(&self, prev: Option<&PodSnap>, p: &Pod, _initial: bool) -> Diff {
        let cur = self.snap(p);
        let mut out = Vec::new();
        if prev.is_none() {
            let owner = p
                .owner_references()
                .first()
                .map(|o| format!("{}/{}", o.kind, o.name));
            out.push((
                time(p.metadata.creation_timestamp.as_ref()),
                Change::PodAdded {
                    labels: p.labels().clone().into(),
                    owner,
                    claims: claims(p),
                },
            ));
        }
        if prev.is_none_or(|x| x.tolerations != cur.tolerations) {
            let (unreachable, not_ready) = cur.tolerations;
            out.push((
                None,
                Change::PodTolerations {
                    unreachable,
                    not_ready,
                },
            ));
        }
        if let Some(node) = &cur.node
            && prev.and_then(|x| x.node.as_ref()) != Some(node)
        {
            let at =
                condition(p, "PodScheduled").and_then(|c| time(c.last_transition_time.as_ref()));
            out.push((at, Change::PodScheduled { node: node.clone() }));
        }
        // The reason may come in a later status than the phase (a real
        // kubelet's graceful shutdown: Succeeded first, `Terminated` next).
        if prev.map_or(cur.phase != "Pending", |x| {
            x.phase != cur.phase || x.reason != cur.reason
        }) {
            out.push((
                None,
                Change::PodPhase {
                    phase: cur.phase.clone(),
                    reason: cur.reason.clone(),
                },
            ));
        }
        if prev.map_or(cur.ready, |x| x.ready != cur.ready) {
            let at = condition(p, "Ready").and_then(|c| time(c.last_transition_time.as_ref()));
            out.push((at, Change::PodReady { ready: cur.ready }));
        }
        if let Some(reason) = &cur.disruption
            && prev.is_none_or(|x| x.disruption.is_none())
        {
            let at = condition(p, "DisruptionTarget")
                .and_then(|c| time(c.last_transition_time.as_ref()));
            out.push((
                at,
                Change::PodDisruptionTarget {
                    reason: reason.clone(),
                },
            ));
        }
        if cur.terminating && prev.is_none_or(|x| !x.terminating) {
            // deletionTimestamp is "deleted at + grace period": subtract it back.
            let at = p.metadata.deletion_timestamp.as_ref().map(|t| {
                let grace = p.metadata.deletion_grace_period_seconds.unwrap_or(0);
                t.0 - jiff::SignedDuration::from_secs(grace)
            });
            out.push((at, Change::PodTerminating));
        }
        out
    }
    fn deleted(&self) -> Option<Change> {
        Some(Change::PodDeleted)
    }
}

// ----- events -----

/// Records events whose reason is in [`EVENT_REASONS`] or among `extra`
/// (the reasons a scenario's expectations name).
#[derive(Debug, Default)]
pub struct EventDiff {
    pub extra: Vec<String>,
}

/// Event reasons shown on the timeline (others are noise for node failures).
const EVENT_REASONS: [&str; 11] = [
    "NodeNotReady",
    "TaintManagerEviction",
    "RemovingNode",
    "RegisteredNode",
    "DeletingNode",
    "NodeNotSchedulable",
    "NodeSchedulable",
    "FailedAttachVolume",
    // The kubelet could not mount a pod's volumes (and retries the pod later).
    "FailedMount",
    "Evicted",
    "FailedScheduling",
];

/// How many times the event happened: core/v1 `count`, or the
/// events.k8s.io-style `series.count` of a newer reporter.
fn event_count(e: &KubeEvent) -> Option<i32> {
    e.count.or_else(|| e.series.as_ref().and_then(|s| s.count))
}

impl Differ<KubeEvent> for EventDiff {
    /// The count: an event object is recorded when first seen and again each
    /// time the reporter bumps its count (the same thing happened again).
    type Snap = Option<i32>;
    fn key(&self, e: &KubeEvent) -> String {
        uid_key(e)
    }
    fn object(&self, e: &KubeEvent) -> ObjectRef {
        ObjectRef::Event { name: e.name_any() }
    }
    fn snap(&self, e: &KubeEvent) -> Option<i32> {
        event_count(e)
    }
    fn diff(&self, _prev: Option<&Option<i32>>, e: &KubeEvent, initial: bool) -> Diff {
        let reason = e.reason.clone().unwrap_or_default();
        // Listed at the first sync: it happened before the run. Its snap is
        // kept all the same, so a later repeat is recorded.
        if initial || !(EVENT_REASONS.contains(&reason.as_str()) || self.extra.contains(&reason)) {
            return Vec::new();
        }
        let involved = format!(
            "{}/{}",
            e.involved_object.kind.clone().unwrap_or_default(),
            e.involved_object.name.clone().unwrap_or_default()
        );
        let at = e
            .last_timestamp
            .as_ref()
            .or(e.first_timestamp.as_ref())
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0));
        vec![(
            at,
            Change::Event {
                reason,
                involved,
                message: e.message.clone().unwrap_or_default(),
                count: event_count(e),
            },
        )]
    }
    fn deleted(&self) -> Option<Change> {
        None
    }
}

// ----- claims -----

/// PersistentVolumeClaims: which PersistentVolume each is bound to, so a
/// claim named in a scenario can be followed to its VolumeAttachments.
#[derive(Debug)]
pub struct PvcDiff;

impl Differ<PersistentVolumeClaim> for PvcDiff {
    type Snap = Option<String>;
    fn key(&self, c: &PersistentVolumeClaim) -> String {
        uid_key(c)
    }
    fn object(&self, c: &PersistentVolumeClaim) -> ObjectRef {
        ObjectRef::Pvc { name: c.name_any() }
    }
    fn snap(&self, c: &PersistentVolumeClaim) -> Option<String> {
        c.spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|v| !v.is_empty())
    }
    fn diff(
        &self,
        _prev: Option<&Option<String>>,
        c: &PersistentVolumeClaim,
        _initial: bool,
    ) -> Diff {
        // Only a bound claim says anything about volumes; an unbound one is
        // recorded once it binds (its snap changes then).
        self.snap(c)
            .map(|volume| vec![(None, Change::PvcBound { volume })])
            .unwrap_or_default()
    }
    fn deleted(&self) -> Option<Change> {
        Some(Change::PvcDeleted)
    }
}

// ----- volume attachments -----

#[derive(Debug)]
pub struct AttachmentDiff;

impl Differ<VolumeAttachment> for AttachmentDiff {
    type Snap = (String, String, bool);
    fn key(&self, v: &VolumeAttachment) -> String {
        uid_key(v)
    }
    fn object(&self, v: &VolumeAttachment) -> ObjectRef {
        ObjectRef::VolumeAttachment { name: v.name_any() }
    }
    fn snap(&self, v: &VolumeAttachment) -> Self::Snap {
        (
            v.spec.node_name.clone(),
            v.spec
                .source
                .persistent_volume_name
                .clone()
                .unwrap_or_default(),
            v.status.as_ref().is_some_and(|s| s.attached),
        )
    }
    fn diff(&self, _prev: Option<&Self::Snap>, v: &VolumeAttachment, _initial: bool) -> Diff {
        let (node, volume, attached) = self.snap(v);
        vec![(
            None,
            Change::VolumeAttachment {
                node,
                volume,
                attached,
            },
        )]
    }
    fn deleted(&self) -> Option<Change> {
        Some(Change::VolumeAttachmentDeleted)
    }
}
