//! Watches Nodes, the scenario's Pods and Events with kube-rs watchers and
//! records every change as a typed [`Transition`] with its observation time.
//!
//! Each watcher keeps the last state it saw of every object and emits only
//! differences. When a watch restarts (API server restart, expired resource
//! version) the relist is reconciled: objects that vanished meanwhile are
//! recorded as deleted, changes that happened meanwhile as changes, so no
//! transition of the ground truth is lost, only observed later.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Node, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt as _};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::timeline::{Change, Ms, ObjectRef, Transition, World};

/// The shared record: transitions in observation order and the world they fold into.
#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    inner: Mutex<Inner>,
    generation: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    transitions: Vec<Transition>,
    world: World,
    watch_errors: u64,
}

impl Recorder {
    pub fn new(start: Instant) -> Arc<Recorder> {
        Arc::new(Recorder {
            start,
            inner: Mutex::new(Inner::default()),
            generation: watch::channel(0).0,
        })
    }

    /// Milliseconds since the run started.
    pub fn now(&self) -> Ms {
        i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, object: ObjectRef, changes: Vec<(Option<Timestamp>, Change)>) {
        if changes.is_empty() {
            return;
        }
        let mut inner = self.lock();
        let at = self.now();
        for (server_time, change) in changes {
            let t = Transition {
                at,
                server_time,
                object: object.clone(),
                change,
            };
            inner.world.apply(&t);
            inner.transitions.push(t);
        }
        drop(inner);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Records a change nodefall itself knows of (not seen on a watch).
    pub fn note(&self, object: ObjectRef, change: Change) {
        self.push(object, vec![(None, change)]);
    }

    pub fn transitions(&self) -> Vec<Transition> {
        self.lock().transitions.clone()
    }

    pub fn world(&self) -> World {
        self.lock().world.clone()
    }

    pub fn watch_errors(&self) -> u64 {
        self.lock().watch_errors
    }

    /// A receiver that changes whenever a transition is recorded.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

/// The running watchers; they stop when this is dropped.
#[derive(Debug)]
pub struct Observer {
    tasks: Vec<JoinHandle<()>>,
    synced: watch::Receiver<usize>,
    total: usize,
}

impl Drop for Observer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Observer {
    /// Starts watching Nodes, Pods and Events of `namespace`, Node events,
    /// and VolumeAttachments (CSI attach/detach; none on the sim backend).
    pub fn start(client: &kube::Client, namespace: &str, recorder: &Arc<Recorder>) -> Observer {
        let (synced_tx, synced) = watch::channel(0usize);
        let synced_tx = Arc::new(synced_tx);
        let mut tasks = Vec::new();
        let nodes: Api<Node> = Api::all(client.clone());
        tasks.push(tokio::spawn(track(
            nodes,
            recorder.clone(),
            synced_tx.clone(),
            NodeDiff,
        )));
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        tasks.push(tokio::spawn(track(
            pods,
            recorder.clone(),
            synced_tx.clone(),
            PodDiff,
        )));
        for ns in dedup([namespace, "default"]) {
            let events: Api<KubeEvent> = Api::namespaced(client.clone(), ns);
            tasks.push(tokio::spawn(track(
                events,
                recorder.clone(),
                synced_tx.clone(),
                EventDiff,
            )));
        }
        let attachments: Api<VolumeAttachment> = Api::all(client.clone());
        tasks.push(tokio::spawn(track(
            attachments,
            recorder.clone(),
            synced_tx.clone(),
            AttachmentDiff,
        )));
        let total = tasks.len();
        Observer {
            tasks,
            synced,
            total,
        }
    }

    /// Waits until every watcher has listed its objects once.
    pub async fn synced(&mut self) {
        let total = self.total;
        let _ = self.synced.wait_for(|n| *n >= total).await;
    }
}

fn dedup(names: [&str; 2]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// How one kind's objects are compared and turned into transitions.
trait Differ<K>: Send + 'static {
    type Snap: Clone + PartialEq + Send;
    fn key(&self, obj: &K) -> String;
    fn object(&self, obj: &K) -> ObjectRef;
    fn snap(&self, obj: &K) -> Self::Snap;
    /// Changes from `prev` (None: first sight) to `obj`. `initial`: seen in
    /// the first list of the run (already there before the run started).
    fn diff(
        &self,
        prev: Option<&Self::Snap>,
        obj: &K,
        initial: bool,
    ) -> Vec<(Option<Timestamp>, Change)>;
    fn deleted(&self) -> Option<Change>;
}

async fn track<K, D>(api: Api<K>, rec: Arc<Recorder>, synced: Arc<watch::Sender<usize>>, differ: D)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
    D: Differ<K>,
{
    let mut known: HashMap<String, (ObjectRef, D::Snap)> = HashMap::new();
    let mut relist: Option<HashSet<String>> = None;
    let mut first_list_done = false;
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => e,
            Err(_) => {
                rec.lock().watch_errors += 1;
                continue;
            }
        };
        match event {
            Event::Init => relist = Some(HashSet::new()),
            Event::InitApply(obj) | Event::Apply(obj) => {
                let key = differ.key(&obj);
                if let Some(seen) = relist.as_mut() {
                    seen.insert(key.clone());
                }
                let snap = differ.snap(&obj);
                let prev = known.get(&key).map(|(_, s)| s);
                if prev != Some(&snap) {
                    let changes = differ.diff(prev, &obj, !first_list_done);
                    let object = differ.object(&obj);
                    rec.push(object.clone(), changes);
                    known.insert(key, (object, snap));
                }
            }
            Event::Delete(obj) => {
                if let Some((object, _)) = known.remove(&differ.key(&obj))
                    && let Some(change) = differ.deleted()
                {
                    rec.push(object, vec![(None, change)]);
                }
            }
            Event::InitDone => {
                if let Some(seen) = relist.take() {
                    let gone: Vec<String> = known
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for key in gone {
                        if let Some((object, _)) = known.remove(&key)
                            && let Some(change) = differ.deleted()
                        {
                            rec.push(object, vec![(None, change)]);
                        }
                    }
                }
                if !first_list_done {
                    first_list_done = true;
                    synced.send_modify(|n| *n += 1);
                }
            }
        }
    }
}

fn time(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<Timestamp> {
    t.map(|t| t.0)
}

// ----- nodes -----

struct NodeDiff;

#[derive(Clone, PartialEq)]
struct NodeSnap {
    ready: Option<(String, Option<String>)>,
    taints: BTreeMap<(String, String), Option<String>>,
    unschedulable: bool,
}

impl Differ<Node> for NodeDiff {
    type Snap = NodeSnap;
    fn key(&self, n: &Node) -> String {
        n.name_any()
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
            .map(|c| (c.status.clone(), c.reason.clone()));
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
    fn diff(
        &self,
        prev: Option<&NodeSnap>,
        n: &Node,
        _initial: bool,
    ) -> Vec<(Option<Timestamp>, Change)> {
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
        if let Some((status, reason)) = &cur.ready
            && prev.and_then(|p| p.ready.as_ref().map(|r| &r.0)) != Some(status)
        {
            out.push((
                ready_time,
                Change::NodeReady {
                    status: status.clone(),
                    reason: reason.clone(),
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

struct PodDiff;

#[derive(Clone, PartialEq)]
struct PodSnap {
    node: Option<String>,
    ready: bool,
    phase: String,
    reason: Option<String>,
    terminating: bool,
    disruption: Option<Option<String>>,
}

fn condition<'a>(p: &'a Pod, type_: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
}

impl Differ<Pod> for PodDiff {
    type Snap = PodSnap;
    fn key(&self, p: &Pod) -> String {
        p.uid().unwrap_or_else(|| p.name_any())
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
        }
    }
    fn diff(
        &self,
        prev: Option<&PodSnap>,
        p: &Pod,
        _initial: bool,
    ) -> Vec<(Option<Timestamp>, Change)> {
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
                    labels: p.labels().clone(),
                    owner,
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
        if prev.map_or(cur.phase != "Pending", |x| x.phase != cur.phase) {
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

struct EventDiff;

/// Event reasons shown on the timeline (others are noise for node failures).
const EVENT_REASONS: [&str; 10] = [
    "NodeNotReady",
    "TaintManagerEviction",
    "RemovingNode",
    "RegisteredNode",
    "DeletingNode",
    "NodeNotSchedulable",
    "NodeSchedulable",
    "FailedAttachVolume",
    "Evicted",
    "FailedScheduling",
];

impl Differ<KubeEvent> for EventDiff {
    /// Events are recorded once, when first seen.
    type Snap = ();
    fn key(&self, e: &KubeEvent) -> String {
        e.uid().unwrap_or_else(|| e.name_any())
    }
    fn object(&self, e: &KubeEvent) -> ObjectRef {
        ObjectRef::Event { name: e.name_any() }
    }
    fn snap(&self, _e: &KubeEvent) {}
    fn diff(
        &self,
        _prev: Option<&()>,
        e: &KubeEvent,
        initial: bool,
    ) -> Vec<(Option<Timestamp>, Change)> {
        let reason = e.reason.clone().unwrap_or_default();
        if initial || !EVENT_REASONS.contains(&reason.as_str()) {
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
            },
        )]
    }
    fn deleted(&self) -> Option<Change> {
        None
    }
}

// ----- volume attachments -----

struct AttachmentDiff;

impl Differ<VolumeAttachment> for AttachmentDiff {
    type Snap = (String, String, bool);
    fn key(&self, v: &VolumeAttachment) -> String {
        v.name_any()
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
    fn diff(
        &self,
        _prev: Option<&Self::Snap>,
        v: &VolumeAttachment,
        _initial: bool,
    ) -> Vec<(Option<Timestamp>, Change)> {
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
