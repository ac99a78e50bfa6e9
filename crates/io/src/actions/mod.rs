//! Kubernetes-side actions through kube-rs: server-side apply of manifests,
//! waiting for workloads, taints, cordons, node deletion, force deletion,
//! scaling, namespace deletion, and drain (`drain.rs`). A kube-rs error
//! becomes text only through [`ApiError`] (`api_error.rs`).

mod api_error;
mod drain;
mod objects;
mod ready;

pub use api_error::{ApiError, text as api_text};
pub use drain::{DrainEvent, DrainSummary, drain};
pub use objects::{
    ManifestObject, apply_object, delete_object, existing_uid, namespace_uid, node_marks, replicas,
    resolve_manifest,
};
pub use ready::wait_ready;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount, Taint};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

use crate::scenario::checked::WorkloadKind;
use crate::scenario::model::TaintEffect;
use crate::scenario::selector::Selector;

/// Field manager for server-side apply.
pub const MANAGER: &str = "nodefall";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading manifest {}", .path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest {}, document {doc}: {message}", .path.display())]
    Manifest {
        path: std::path::PathBuf,
        doc: usize,
        message: String,
    },
    #[error("{what}")]
    Kube {
        what: String,
        #[source]
        source: ApiError,
    },
    #[error("timed out after {}s waiting for {what}", .after.as_secs())]
    Timeout { what: String, after: Duration },
    #[error("node `{0}` does not exist")]
    NoNode(String),
    #[error("cannot drain: {}", .0.join("; "))]
    DrainBlocked(Vec<String>),
    #[error("{0}")]
    Watch(String),
}

type Result<T, E = Error> = std::result::Result<T, E>;

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube {
        what,
        source: source.into(),
    }
}

/// Server-side applies every document of a multi-document manifest, into
/// `namespace` for namespaced kinds. Returns `Kind/name` of each object.
/// (The runner applies object by object through [`resolve_manifest`] and
/// [`apply_object`], to journal each creation first.)
pub async fn apply_file(
    client: &kube::Client,
    path: &Path,
    namespace: &str,
) -> Result<Vec<String>> {
    apply_all(client, resolve_manifest(client, path, namespace).await?).await
}

/// [`apply_file`] of a manifest's text; `path` names it in errors.
pub async fn apply_documents(
    client: &kube::Client,
    path: &Path,
    text: &str,
    namespace: &str,
) -> Result<Vec<String>> {
    apply_all(
        client,
        objects::resolve_documents(client, path, text, namespace).await?,
    )
    .await
}

async fn apply_all(client: &kube::Client, objects: Vec<ManifestObject>) -> Result<Vec<String>> {
    let mut applied = Vec::new();
    for o in objects {
        apply_object(client, &o).await?;
        applied.push(format!("{}/{}", o.kind, o.name));
    }
    Ok(applied)
}

/// Creates the namespace unless it exists; true when it was created.
pub async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<bool> {
    let api: Api<Namespace> = Api::all(client.clone());
    if api
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading namespace {name}")))?
        .is_some()
    {
        return Ok(false);
    }
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": MANAGER}}
    }))
    .map_err(|e| Error::Manifest {
        path: "namespace".into(),
        doc: 1,
        message: e.to_string(),
    })?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(false),
        Err(e) => return Err(kube_err(format!("creating namespace {name}"))(e)),
    }
    // Pods cannot be created before the namespace's default ServiceAccount exists.
    let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let timeout = Duration::from_secs(30);
    with_timeout(
        format!("the default ServiceAccount of namespace {name}"),
        timeout,
        await_condition(sa, "default", |o: Option<&ServiceAccount>| o.is_some()),
    )
    .await?;
    Ok(true)
}

async fn with_timeout<T, E>(
    what: String,
    after: Duration,
    fut: impl std::future::Future<Output = std::result::Result<T, E>>,
) -> Result<T>
where
    E: std::error::Error + 'static,
{
    match tokio::time::timeout(after, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Error::Watch(format!("{what}: {}", api_error::text(&e)))),
        Err(_) => Err(Error::Timeout { what, after }),
    }
}

async fn node(client: &kube::Client, name: &str) -> Result<Node> {
    let api: Api<Node> = Api::all(client.clone());
    api.get_opt(name)
        .await
        .map_err(kube_err(format!("reading node {name}")))?
        .ok_or_else(|| Error::NoNode(name.to_owned()))
}

/// Adds a taint (replacing one with the same key and effect).
pub async fn taint(
    client: &kube::Client,
    name: &str,
    key: &str,
    value: Option<&str>,
    effect: TaintEffect,
) -> Result<()> {
    let effect = effect.to_string();
    update_taints(client, name, |taints| {
        taints.retain(|t| !(t.key == key && t.effect == effect));
        taints.push(Taint {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            effect: effect.clone(),
            time_added: None,
        });
        true
    })
    .await
    .map(|_| ())
}

/// Removes a taint by key (and effect, when given). Returns whether one was there.
pub async fn untaint(
    client: &kube::Client,
    name: &str,
    key: &str,
    effect: Option<TaintEffect>,
) -> Result<bool> {
    let effect = effect.map(|e| e.to_string());
    update_taints(client, name, |taints| {
        let before = taints.len();
        taints.retain(|t| !(t.key == key && effect.as_ref().is_none_or(|e| *e == t.effect)));
        taints.len() != before
    })
    .await
}

/// Read-modify-write of a node's taints with optimistic concurrency: the
/// node lifecycle controller edits the same list (unreachable taints), so a
/// write based on a stale read must fail (409) and be redone, never undo
/// the controller's change.
async fn update_taints(
    client: &kube::Client,
    name: &str,
    mut edit: impl FnMut(&mut Vec<Taint>) -> bool,
) -> Result<bool> {
    let api: Api<Node> = Api::all(client.clone());
    for _ in 0..10 {
        let current = node(client, name).await?;
        let mut taints = current.spec.and_then(|s| s.taints).unwrap_or_default();
        if !edit(&mut taints) {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match api.patch(name, &changes(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(kube_err(format!("updating taints of node {name}"))(e)),
        }
    }
    Err(Error::Timeout {
        what: format!("a conflict-free update of node {name}'s taints (10 attempts)"),
        after: Duration::ZERO,
    })
}

/// A patch's parameters, under nodefall's field manager: a run's own
/// changes are put down to `nodefall` in the record and a cluster's
/// managedFields.
fn changes() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

pub async fn set_unschedulable(client: &kube::Client, name: &str, value: bool) -> Result<()> {
    node(client, name).await?;
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({"spec": {"unschedulable": value}});
    api.patch(name, &changes(), &Patch::Merge(&patch))
        .await
        .map_err(kube_err(format!("cordoning node {name}")))?;
    Ok(())
}

pub async fn delete_node(client: &kube::Client, name: &str) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    api.delete(name, &DeleteParams::default())
        .await
        .map_err(kube_err(format!("deleting node {name}")))?;
    Ok(())
}

/// Deletes matching pods with grace period 0; returns their names.
pub async fn force_delete_pods(
    client: &kube::Client,
    namespace: &str,
    selector: Option<&Selector>,
    node: Option<&str>,
) -> Result<Vec<String>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut lp = ListParams::default();
    if let Some(s) = selector {
        lp = lp.labels(&s.to_string());
    }
    if let Some(n) = node {
        lp = lp.fields(&format!("spec.nodeName={n}"));
    }
    let pods = api
        .list(&lp)
        .await
        .map_err(kube_err("listing pods to force-delete"))?;
    let mut deleted = Vec::new();
    for pod in pods {
        let name = pod.name_any();
        match api
            .delete(&name, &DeleteParams::default().grace_period(0))
            .await
        {
            Ok(_) => deleted.push(name),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err(format!("force-deleting pod {name}"))(e)),
        }
    }
    Ok(deleted)
}

pub async fn scale(
    client: &kube::Client,
    namespace: &str,
    kind: WorkloadKind,
    name: &str,
    replicas: u32,
) -> Result<()> {
    let patch = json!({"spec": {"replicas": replicas}});
    let pp = changes();
    let what = format!("scaling {} {name}", kind.name());
    match kind {
        WorkloadKind::StatefulSet => {
            let api: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
            api.patch(name, &pp, &Patch::Merge(&patch))
                .await
                .map_err(kube_err(what))?;
        }
        _ => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            api.patch(name, &pp, &Patch::Merge(&patch))
                .await
                .map_err(kube_err(what))?;
        }
    }
    Ok(())
}

/// Deletes a namespace and waits (watching) until it is gone.
pub async fn delete_namespace(client: &kube::Client, name: &str, timeout: Duration) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(kube_err(format!("deleting namespace {name}"))(e)),
    }
    with_timeout(
        format!("namespace {name} to be deleted"),
        timeout,
        await_condition(api, name, |o: Option<&Namespace>| o.is_none()),
    )
    .await?;
    Ok(())
}

/// The API server's version (`v1.35.4`).
pub async fn server_version(client: &kube::Client) -> Result<String> {
    let info = client
        .apiserver_version()
        .await
        .map_err(kube_err("reading the server version"))?;
    Ok(info.git_version)
}

/// Objects a list asks for at once. A page is read whole, then decoded
/// whole (managed fields and all) before `keep` reduces it: at the end of a
/// 10,000-pod setup (its pods listed, then 1,000 nodes) the run's resident
/// memory went from 94 to 145 MiB in pages of 500, from 99 to 121 MiB in
/// pages of 100 (docs/observer-precision.md); the extra requests cost
/// milliseconds.
pub const PAGE: u32 = 100;

/// Every object of a list, a page of [`PAGE`] at a time, each reduced by
/// `keep` as it arrives (None: left out): 10,000 pods never sit in memory
/// whole.
pub async fn list_paged<K, T>(
    api: &Api<K>,
    keep: impl Fn(K) -> Option<T>,
) -> Result<Vec<T>, ApiError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut out = Vec::new();
    let mut params = kube::api::ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        out.extend(page.items.into_iter().filter_map(&keep));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}
