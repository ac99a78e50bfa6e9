//! Watches Nodes, the scenario's Pods, claims, Events and EndpointSlices, and
//! VolumeAttachments with kube-rs watchers and
//! records every change as a typed [`Transition`] with its observation time.
//!
//! Each watcher feeds a [`fold::Fold`] that keeps the last state it saw of
//! every object (by UID) and emits only differences. When a watch restarts
//! (API server restart, expired resource version) the complete relist is
//! reconciled: objects that vanished meanwhile are recorded as deleted,
//! changes that happened meanwhile as changes, so no transition of the ground
//! truth is lost, only observed later.

mod endpoints;
pub(crate) mod fold;
pub(crate) mod kinds;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::fold::{Changes, Differ, Fold};
use self::kinds::{AttachmentDiff, EventDiff, NodeDiff, PodDiff, PvcDiff};
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

    /// Records changes of several objects under one lock, so nobody reads a
    /// world with a relist half folded in.
    fn push(&self, batch: Vec<(ObjectRef, Changes)>) {
        if batch.iter().all(|(_, changes)| changes.is_empty()) {
            return;
        }
        let mut inner = self.lock();
        let at = self.now();
        for (object, changes) in batch {
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
        }
        drop(inner);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Records a change nodefall itself knows of (not seen on a watch).
    pub fn note(&self, object: ObjectRef, change: Change) {
        self.push(vec![(object, vec![(None, change)])]);
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
    /// Starts watching Nodes, Pods, PersistentVolumeClaims, Events and
    /// EndpointSlices of `namespace`, Node events, and VolumeAttachments (CSI attach/detach;
    /// none on the sim backend unless a test creates them).
    pub fn start(client: &kube::Client, namespace: &str, recorder: &Arc<Recorder>) -> Observer {
        Observer::start_with_reasons(client, namespace, recorder, &[])
    }

    /// Like [`Observer::start`], also recording events of these reasons (the
    /// ones a scenario's expectations name) besides the built-in list.
    pub fn start_with_reasons(
        client: &kube::Client,
        namespace: &str,
        recorder: &Arc<Recorder>,
        reasons: &[String],
    ) -> Observer {
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
                EventDiff {
                    extra: reasons.to_vec(),
                },
            )));
        }
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
        tasks.push(tokio::spawn(track(
            claims,
            recorder.clone(),
            synced_tx.clone(),
            PvcDiff,
        )));
        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
        tasks.push(tokio::spawn(track(
            slices,
            recorder.clone(),
            synced_tx.clone(),
            endpoints::EndpointSliceDiff,
        )));
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

/// Runs one watcher for the life of the observer, folding its events into
/// the recorder.
async fn track<K, D>(api: Api<K>, rec: Arc<Recorder>, synced: Arc<watch::Sender<usize>>, differ: D)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
    D: Differ<K>,
{
    let mut fold = Fold::new(differ);
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => e,
            // The watcher restarts by itself (with backoff) and relists.
            Err(_) => {
                rec.lock().watch_errors += 1;
                continue;
            }
        };
        let was_synced = fold.listed_once();
        rec.push(fold.handle(event));
        if !was_synced && fold.listed_once() {
            synced.send_modify(|n| *n += 1);
        }
    }
}
