//! Objects a run applies, one at a time, so that the run can record what
//! existed before each change and later delete exactly what it created: a
//! manifest resolved through discovery, existence checks, apply, and deletion
//! guarded by the object's UID.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};

use super::{Error, MANAGER, Result, kube_err};
use crate::scenario::checked::WorkloadKind;

/// One document of a manifest, resolved against the cluster's API.
#[derive(Debug, Clone)]
pub struct ManifestObject {
    pub file: PathBuf,
    /// 1-based document number in the file.
    pub doc: usize,
    pub api_version: String,
    pub kind: String,
    /// The namespace it lands in (None for cluster-scoped kinds).
    pub namespace: Option<String>,
    pub name: String,
    resource: ApiResource,
    object: DynamicObject,
}

impl ManifestObject {
    /// `Deployment kep2268/web` or `PersistentVolume nfs-pv-1`.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// The CSI driver a PersistentVolume's volume belongs to (`spec.csi.driver`).
    pub fn csi_driver(&self) -> Option<&str> {
        (self.kind == "PersistentVolume")
            .then(|| self.object.data.pointer("/spec/csi/driver"))
            .flatten()
            .and_then(serde_json::Value::as_str)
    }

    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        api_for(client, &self.resource, self.namespace.as_deref())
    }
}

fn api_for(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Reads a multi-document manifest and resolves each document's kind
/// through discovery; namespaced objects land in `namespace`.
pub async fn resolve_manifest(
    client: &kube::Client,
    path: &Path,
    namespace: &str,
) -> Result<Vec<ManifestObject>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    resolve_documents(client, path, &text, namespace).await
}

/// [`resolve_manifest`] of a manifest's text; `path` names it in errors.
pub async fn resolve_documents(
    client: &kube::Client,
    path: &Path,
    text: &str,
    namespace: &str,
) -> Result<Vec<ManifestObject>> {
    let text = crate::scenario::load::strip_bom(text);
    let mut out = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let manifest = |message: String| Error::Manifest {
            path: path.to_owned(),
            doc: i + 1,
            message,
        };
        let value = <serde_yaml_ng::Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| manifest(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let object: DynamicObject =
            serde_yaml_ng::from_value(value).map_err(|e| manifest(e.to_string()))?;
        let types = object
            .types
            .clone()
            .ok_or_else(|| manifest("no apiVersion/kind".into()))?;
        let gvk = GroupVersionKind::try_from(&types).map_err(|e| manifest(e.to_string()))?;
        let (resource, caps) = discovery::pinned_kind(client, &gvk)
            .await
            .map_err(kube_err(format!(
                "looking up kind {} ({})",
                types.kind,
                path.display()
            )))?;
        out.push(ManifestObject {
            file: path.to_owned(),
            doc: i + 1,
            api_version: types.api_version.clone(),
            kind: types.kind.clone(),
            namespace: (caps.scope == Scope::Namespaced).then(|| namespace.to_owned()),
            name: object.name_any(),
            resource,
            object,
        });
    }
    Ok(out)
}

/// The object's UID when it exists.
pub async fn existing_uid(client: &kube::Client, o: &ManifestObject) -> Result<Option<String>> {
    let found = o
        .api(client)
        .get_opt(&o.name)
        .await
        .map_err(kube_err(format!("reading {}", o.describe())))?;
    Ok(found.map(|f| f.uid().unwrap_or_default()))
}

/// Server-side applies one object; returns its UID.
pub async fn apply_object(client: &kube::Client, o: &ManifestObject) -> Result<String> {
    let applied = o
        .api(client)
        .patch(
            &o.name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&o.object),
        )
        .await
        .map_err(kube_err(format!(
            "applying {} from {}",
            o.describe(),
            o.file.display()
        )))?;
    Ok(applied.uid().unwrap_or_default())
}

/// Deletes an object by kind and name, only if its UID is still `uid` (when
/// given): a same-named object created by someone else is never touched.
/// True when something was deleted; an object already gone is fine.
pub async fn delete_object(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    uid: Option<&str>,
) -> Result<bool> {
    let gvk = GroupVersionKind::try_from(&kube::core::TypeMeta {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    })
    .map_err(|e| Error::Watch(format!("{kind} {name}: {e}")))?;
    let (resource, _) = discovery::pinned_kind(client, &gvk)
        .await
        .map_err(kube_err(format!("looking up kind {kind}")))?;
    let api = api_for(client, &resource, namespace);
    let mut dp = DeleteParams::background();
    if let Some(uid) = uid {
        dp.preconditions = Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        });
    }
    match api.delete(name, &dp).await {
        Ok(_) => Ok(true),
        // Gone already, or the name now belongs to another object.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(kube_err(format!("deleting {kind} {name}"))(e)),
    }
}

/// The namespace's UID when it exists.
pub async fn namespace_uid(client: &kube::Client, name: &str) -> Result<Option<String>> {
    let api: Api<Namespace> = Api::all(client.clone());
    let found = api
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading namespace {name}")))?;
    Ok(found.map(|n| n.uid().unwrap_or_default()))
}

/// A node's taint `key:effect` (Some(value) when present), and whether it
/// is cordoned; None when the node does not exist.
pub async fn node_marks(
    client: &kube::Client,
    node: &str,
    key: &str,
    effect: &str,
) -> Result<Option<(Option<Option<String>>, bool)>> {
    let api: Api<Node> = Api::all(client.clone());
    let Some(n) = api
        .get_opt(node)
        .await
        .map_err(kube_err(format!("reading node {node}")))?
    else {
        return Ok(None);
    };
    let spec = n.spec.unwrap_or_default();
    let taint = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .find(|t| t.key == key && t.effect == effect)
        .map(|t| t.value);
    Ok(Some((taint, spec.unschedulable.unwrap_or(false))))
}

/// Current replicas of a Deployment or StatefulSet (None when it does not exist).
pub async fn replicas(
    client: &kube::Client,
    namespace: &str,
    kind: WorkloadKind,
    name: &str,
) -> Result<Option<i32>> {
    let what = format!("reading {} {name}", kind.name());
    Ok(match kind {
        WorkloadKind::StatefulSet => {
            let api: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
            api.get_opt(name)
                .await
                .map_err(kube_err(what))?
                .map(|o| o.spec.and_then(|s| s.replicas).unwrap_or(1))
        }
        _ => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            api.get_opt(name)
                .await
                .map_err(kube_err(what))?
                .map(|o| o.spec.and_then(|s| s.replicas).unwrap_or(1))
        }
    })
}
