//! Watches Nodes, the scenario's Pods, claims, Events and EndpointSlices, and
//! VolumeAttachments (and remediators' objects, where their APIs are
//! installed: [`remediators`]) with kube-rs watchers and
//! records every change as a typed [`Transition`] with its observation time.
//!
//! Each watcher feeds a [`fold::Fold`] that keeps the last state it saw of
//! every object (by UID) and emits only differences. When a watch restarts
//! (API server restart, expired resource version) the complete relist is
//! reconciled: objects that vanished meanwhile are recorded as deleted,
//! changes that happened meanwhile as changes, so no transition of the ground
//! truth is lost, only observed later.

pub mod endpoints;
pub mod fold;
pub mod kinds;
pub mod remediators;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::time::Instant;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Resource;
use kube::api::{Api, DynamicObject};
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
    /// A record whose clock starts at `start`. The clock is tokio's: the
    /// real one, except in a test whose runtime pauses time, where a whole
    /// run (its waits and its record) moves on virtual time.
    pub fn new(start: impl Into<Instant>) -> Arc<Recorder> {
        Arc::new(Recorder {
            start: start.into(),
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
            for seen in changes {
                let t = Transition {
                    at,
                    server_time: seen.server_time,
                    object: object.clone(),
                    change: seen.change,
                    by: seen.by,
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
        self.push(vec![(
            object,
            vec![fold::Seen {
                server_time: None,
                change,
                by: None,
            }],
        )]);
    }

    /// A copy of the whole record.
    pub fn transitions(&self) -> Vec<Transition> {
        self.lock().transitions.clone()
    }

    /// The whole record, moved out for the run's result (at 10,000 pods a
    /// copy was the run's peak memory). Taken when the steps have ended and
    /// nothing follows the record any more; what is recorded afterwards is
    /// not part of the result.
    pub fn take_transitions(&self) -> Vec<Transition> {
        let mut transitions = std::mem::take(&mut self.lock().transitions);
        // Grown by doubling: up to half of it spare.
        transitions.shrink_to_fit();
        transitions
    }

    /// Takes the world the transitions folded into (an empty one is left):
    /// at the end of a run, freed before the result builds its own.
    pub fn take_world(&self) -> World {
        std::mem::take(&mut self.lock().world)
    }

    /// Hands the transitions recorded since `*cursor` to `f` a bounded chunk
    /// at a time, advancing the cursor: a follower copies only what is new,
    /// and the watchers wait for the lock at most one chunk's copy.
    pub fn follow(&self, cursor: &mut usize, mut f: impl FnMut(&[Transition])) {
        const CHUNK: usize = 2048;
        loop {
            let chunk = {
                let inner = self.lock();
                let len = inner.transitions.len();
                if *cursor >= len {
                    Vec::new()
                } else {
                    inner.transitions[*cursor..(*cursor + CHUNK).min(len)].to_vec()
                }
            };
            if chunk.is_empty() {
                return;
            }
            *cursor += chunk.len();
            f(&chunk);
        }
    }

    /// The world as the transitions recorded by `at` describe it.
    pub fn world_at(&self, at: Ms) -> World {
        let mut world = World::default();
        let mut cursor = 0;
        self.follow(&mut cursor, |chunk| {
            for t in chunk.iter().take_while(|t| t.at <= at) {
                world.apply(t);
            }
        });
        world
    }

    /// A copy of the current world.
    pub fn world(&self) -> World {
        self.lock().world.clone()
    }

    /// Reads the current world in place (under the lock: keep `f` short).
    pub fn with_world<R>(&self, f: impl FnOnce(&World) -> R) -> R {
        f(&self.lock().world)
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
///
/// They run on a thread of their own with its own single-threaded runtime
/// and kube client (whose connections live on that runtime), so the time
/// each change is recorded at is taken when it arrives, whatever the run's
/// own runtime is busy with (a blocking call, thousands of pods to apply).
#[derive(Debug)]
pub struct Observer {
    /// Dropping it stops the watchers' runtime.
    _stop: tokio::sync::oneshot::Sender<()>,
    synced: watch::Receiver<usize>,
    total: usize,
}

/// The observer could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting the observer thread")]
    Thread(#[source] std::io::Error),
    #[error("building the observer's kube client")]
    Client(#[source] crate::actions::ApiError),
    #[error("the observer thread ended while starting")]
    Ended,
}

impl Observer {
    /// Starts watching Nodes, Pods, PersistentVolumeClaims, Events and
    /// EndpointSlices of `namespace`, Node events, and VolumeAttachments (CSI attach/detach;
    /// none on the sim backend unless a test creates them).
    pub async fn start(
        config: &kube::Config,
        namespace: &str,
        recorder: &Arc<Recorder>,
    ) -> Result<Observer, Error> {
        Observer::start_with_reasons(config, namespace, recorder, &[]).await
    }

    /// Like [`Observer::start`], also recording events of these reasons (the
    /// ones a scenario's expectations name) besides the built-in list.
    pub async fn start_with_reasons(
        config: &kube::Config,
        namespace: &str,
        recorder: &Arc<Recorder>,
        reasons: &[String],
    ) -> Result<Observer, Error> {
        let (synced_tx, synced) = watch::channel(0usize);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready) = tokio::sync::oneshot::channel::<Result<usize, Error>>();
        let (config, namespace, recorder, reasons) = (
            config.clone(),
            namespace.to_owned(),
            recorder.clone(),
            reasons.to_vec(),
        );
        std::thread::Builder::new()
            .name("nodefall-observer".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(Error::Thread(e)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let client = match kube::Client::try_from(config) {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready_tx.send(Err(Error::Client(e.into())));
                            return;
                        }
                    };
                    let tasks = spawn_watchers(&client, &namespace, &recorder, &reasons, synced_tx);
                    let _ = ready_tx.send(Ok(tasks.len()));
                    // Until the Observer is dropped (the sender with it).
                    let _ = stopped.await;
                    for t in tasks {
                        t.abort();
                    }
                });
            })
            .map_err(Error::Thread)?;
        let total = ready.await.map_err(|_| Error::Ended)??;
        Ok(Observer {
            _stop: stop,
            synced,
            total,
        })
    }

    /// The same watchers through `client`, on the current runtime (a test's
    /// in-memory API, whose client lives on the test's runtime; the run's
    /// times are then the test's clock, paused or not).
    pub fn on_this_runtime(
        client: &kube::Client,
        namespace: &str,
        recorder: &Arc<Recorder>,
        reasons: &[String],
    ) -> Observer {
        let (synced_tx, synced) = watch::channel(0usize);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let tasks = spawn_watchers(client, namespace, recorder, reasons, synced_tx);
        let total = tasks.len();
        tokio::spawn(async move {
            let _ = stopped.await;
            for t in tasks {
                t.abort();
            }
        });
        Observer {
            _stop: stop,
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

/// The watchers, on the observer's runtime.
fn spawn_watchers(
    client: &kube::Client,
    namespace: &str,
    recorder: &Arc<Recorder>,
    reasons: &[String],
    synced_tx: watch::Sender<usize>,
) -> Vec<JoinHandle<()>> {
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
    for known in &remediators::KNOWN {
        let resource = known.resource();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let (rec, synced, differ) = (
            recorder.clone(),
            synced_tx.clone(),
            remediators::RemediationDiff::new(known),
        );
        tasks.push(tokio::spawn(async move {
            // Not installed (404), or not ours to read (403): nothing to
            // watch, and listed all the same.
            let one = kube::api::ListParams::default().limit(1);
            if let Err(e) = api.list_metadata(&one).await {
                tracing::debug!(
                    kind = differ.kind,
                    "not watched: {}",
                    crate::actions::api_text(&e)
                );
                synced.send_modify(|n| *n += 1);
                return;
            }
            track(api, rec, synced, differ).await;
        }));
    }
    tasks
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
            Err(e) => {
                tracing::debug!(
                    kind = std::any::type_name::<K>(),
                    "watch error, the watcher relists: {}",
                    crate::actions::api_text(&e)
                );
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
