//! The kubelets' volume managers of a simulated cluster (`kubelet_volumes.rs`
//! decides; this loop feeds it and writes what it decides): every
//! [`TICK`], from watched Pods, claims, volumes, CSIDrivers,
//! VolumeAttachments and Nodes, and from the cluster's state file (which
//! nodes' agents run), it annotates the pods that may start and writes each
//! running node's `status.volumesInUse`, at most once per node status
//! update period, as a kubelet reports it with its status.
//!
//! It runs as a component of the cluster (`nodefall sim kubelet-volumes`,
//! so a kept cluster's pods still start) or, for a cluster brought up by a
//! library caller without the nodefall executable, as a task of its process.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

use super::Error;
use super::done_unless_gone;
use super::kubelet_volumes::{Gate, Kubelets, PodView, VOLUMES_READY_AT, Volume, World};
use super::state::{AgentState, Layout, State};

/// Component name (its log is `logs/kubelet-volumes.log`).
pub const NAME: &str = "kubelet-volumes";

/// How often the kubelets look: bounds how late a pod's start is decided
/// after its volume is attached.
pub const TICK: Duration = Duration::from_millis(250);

/// The stores the loop reads, each filled by a watch.
struct Stores {
    pods: Store<Pod>,
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    drivers: Store<CSIDriver>,
    attachments: Store<VolumeAttachment>,
    nodes: Store<Node>,
}

/// A watch of every `K` (in every namespace) into a store, driven by a task
/// of its own until the loop ends (its handle aborts it).
fn watched<K>(client: &kube::Client) -> (Store<K>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(Api::<K>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff()
    .touched_objects();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    (reader, task)
}

/// Aborts the watches' tasks when the loop ends, however it ends.
struct Watches(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Watches {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The arguments of `nodefall sim kubelet-volumes` for cluster `name` under
/// `root`.
pub fn args(root: &std::path::Path, name: &str) -> Vec<String> {
    vec![
        "sim".into(),
        "kubelet-volumes".into(),
        "--root".into(),
        root.display().to_string(),
        "--name".into(),
        name.to_owned(),
    ]
}

/// `nodefall sim kubelet-volumes`: [`run`] for the cluster `name` under
/// `root`, with its client and its kubelets' status update period.
pub async fn serve(root: &std::path::Path, name: &str) -> Result<(), Error> {
    let cluster = super::SimCluster::open(root, name)?;
    let client = cluster.client().await?;
    let every = cluster.state().profile.node_status_update_frequency;
    run(client, cluster.layout.clone(), every).await
}

/// Plays the kubelets' volume managers until the cluster's state file is
/// gone (the cluster taken down) or the task is dropped. `status_every` is
/// the kubelets' node status update period.
pub async fn run(
    client: kube::Client,
    layout: Layout,
    status_every: Duration,
) -> Result<(), Error> {
    let (pods, t1) = watched::<Pod>(&client);
    let (claims, t2) = watched::<PersistentVolumeClaim>(&client);
    let (volumes, t3) = watched::<PersistentVolume>(&client);
    let (drivers, t4) = watched::<CSIDriver>(&client);
    let (attachments, t5) = watched::<VolumeAttachment>(&client);
    let (nodes, t6) = watched::<Node>(&client);
    let _watches = Watches(vec![t1, t2, t3, t4, t5, t6]);
    let stores = Stores {
        pods,
        claims,
        volumes,
        drivers,
        attachments,
        nodes,
    };
    for ready in [
        stores.pods.wait_until_ready().await,
        stores.claims.wait_until_ready().await,
        stores.volumes.wait_until_ready().await,
        stores.drivers.wait_until_ready().await,
        stores.attachments.wait_until_ready().await,
        stores.nodes.wait_until_ready().await,
    ] {
        ready.map_err(|e| Error::Other(format!("the kubelets' volume watches ended: {e}")))?;
    }
    let mut kubelets = Kubelets::default();
    let mut gated: BTreeSet<String> = BTreeSet::new();
    let mut written: BTreeMap<String, Instant> = BTreeMap::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Ok(state) = State::load(&layout.state()) else {
            // The cluster is gone (or going): nothing left to play.
            return Ok(());
        };
        let world = world(&stores, &state, &gated);
        let writes = kubelets.decide(&world, jiff::Timestamp::now());
        for Gate {
            namespace,
            name,
            uid,
            at,
        } in writes.gates
        {
            let patch = serde_json::json!({"metadata": {"annotations": {VOLUMES_READY_AT: at.to_string()}}});
            let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            // Gone meanwhile: nothing to start. A failed write (the API
            // server restarting) is tried again at the next tick, as a
            // kubelet tries again; it does not end the loop.
            match done_unless_gone(
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await,
            ) {
                Ok(_) => {
                    gated.insert(uid);
                }
                Err(e) => tracing::warn!(
                    "kubelet-volumes: starting pod {namespace}/{name} once its volumes are there: {e} (trying again)"
                ),
            }
        }
        let now = Instant::now();
        for (node, in_use) in writes.in_use {
            if written
                .get(&node)
                .is_some_and(|&last| now < last + status_every)
            {
                continue; // with the kubelet's next status update
            }
            let patch = serde_json::json!({"status": {"volumesInUse": in_use}});
            let api: Api<Node> = Api::all(client.clone());
            match done_unless_gone(
                api.patch_status(&node, &PatchParams::default(), &Patch::Merge(&patch))
                    .await,
            ) {
                Ok(_) => {
                    written.insert(node, now);
                }
                Err(e) => tracing::warn!(
                    "kubelet-volumes: reporting node {node}'s volumes in use: {e} (trying again)"
                ),
            }
        }
        // Forget the pods that are gone (a pod made again under the same
        // name has another uid, and starts afresh).
        let present: BTreeSet<String> = stores
            .pods
            .state()
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        gated.retain(|uid| present.contains(uid));
    }
}

/// What the stores and the state file say now.
fn world(stores: &Stores, state: &State, gated: &BTreeSet<String>) -> World {
    let running: BTreeMap<String, bool> = state
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.agent_state == AgentState::Running))
        .collect();
    let attach_required: BTreeMap<String, bool> = stores
        .drivers
        .state()
        .iter()
        .filter_map(|d| {
            Some((
                d.metadata.name.clone()?,
                d.spec.attach_required != Some(false),
            ))
        })
        .collect();
    let volumes = stores
        .volumes
        .state()
        .iter()
        .filter_map(|pv| {
            let name = pv.metadata.name.clone()?;
            let spec = pv.spec.as_ref()?;
            let volume = match &spec.csi {
                // A driver without a CSIDriver object needs attaching, as the
                // controller reads it.
                Some(csi) => Volume::csi(
                    &csi.driver,
                    &csi.volume_handle,
                    attach_required.get(&csi.driver).copied().unwrap_or(true),
                ),
                // NFS, hostPath, local: mounted, never attached.
                None => Volume {
                    unique: format!("kubernetes.io/pv/{name}"),
                    attachable: false,
                },
            };
            Some((name, volume))
        })
        .collect();
    let claims = stores
        .claims
        .state()
        .iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .filter_map(|c| {
            Some((
                (c.metadata.namespace.clone()?, c.metadata.name.clone()?),
                c.spec.as_ref()?.volume_name.clone()?,
            ))
        })
        .collect();
    let attached = stores
        .attachments
        .state()
        .iter()
        .filter(|va| va.status.as_ref().is_some_and(|s| s.attached))
        .filter_map(|va| {
            Some((
                va.spec.source.persistent_volume_name.clone()?,
                va.spec.node_name.clone(),
            ))
        })
        .collect();
    let reported = stores
        .nodes
        .state()
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            running.contains_key(&name).then(|| {
                let in_use = n
                    .status
                    .as_ref()
                    .and_then(|s| s.volumes_in_use.clone())
                    .unwrap_or_default();
                (name, in_use)
            })
        })
        .collect();
    let pods = stores
        .pods
        .state()
        .iter()
        .filter_map(|p| pod_view(p, &running, gated))
        .collect();
    World {
        pods,
        claims,
        volumes,
        attached,
        reported,
        running,
    }
}

/// A pod on one of the sim's nodes that has claims, as the kubelets see it.
fn pod_view(
    pod: &Pod,
    nodes: &BTreeMap<String, bool>,
    gated: &BTreeSet<String>,
) -> Option<PodView> {
    let spec = pod.spec.as_ref()?;
    let node = spec.node_name.clone().filter(|n| nodes.contains_key(n))?;
    let claims: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| Some(v.persistent_volume_claim.as_ref()?.claim_name.clone()))
        .collect();
    if claims.is_empty() {
        return None;
    }
    let namespace = pod.metadata.namespace.clone()?;
    let name = pod.metadata.name.clone()?;
    let uid = pod.metadata.uid.clone()?;
    let status = pod.status.as_ref();
    let scheduled_at = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(VOLUMES_READY_AT));
    let terminal = matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    Some(PodView {
        gated: annotated || gated.contains(&uid),
        namespace,
        name,
        uid,
        node,
        claims,
        scheduled_at,
        terminal,
    })
}
