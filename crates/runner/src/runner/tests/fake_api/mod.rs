//! An in-memory Kubernetes API for the runner's tests: objects by group,
//! version, resource, namespace and name; get, list (label and field
//! selectors), watch (list then a stream of changes from a resource
//! version, as kube-rs's watcher reads it), create, merge and apply patches,
//! replace, delete, evictions, and `/version`. A kube client is built on it
//! with [`FakeApi::client`]; the observer's own watchers run over it, so the
//! runner's changes (taints, deletions) reach the timeline as on a cluster.
//!
//! Not modelled: controllers (nothing schedules, evicts or garbage-collects
//! unless a test does it), admission, discovery, server-side apply's field
//! ownership (an apply is a merge patch), finalizers.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use serde_json::{Value, json};
use tokio::sync::watch;

mod wire;

use wire::{created, key, listed, merge, not_found, ok, query, status, target};

type Body = BoxBody<Bytes, Infallible>;

/// Where an object lives: `api/v1` or `apis/GROUP/VERSION`, the resource
/// (plural), its namespace (None: cluster-scoped) and its name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    gv: String,
    resource: String,
    ns: Option<String>,
    name: String,
}

/// A request's target: a collection (name None) or one object.
#[derive(Debug)]
struct Target {
    gv: String,
    resource: String,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

#[derive(Debug)]
struct Change {
    rv: u64,
    kind: &'static str,
    key: Key,
    object: Value,
}

#[derive(Debug, Default)]
struct State {
    objects: BTreeMap<Key, Value>,
    log: Vec<Change>,
    rv: u64,
    /// Every request, `METHOD path?query`, in order.
    requests: Vec<String>,
}

/// The API; clones share it.
#[derive(Debug, Clone)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
    changed: watch::Sender<u64>,
}

impl FakeApi {
    pub fn new() -> FakeApi {
        FakeApi {
            state: Arc::default(),
            changed: watch::channel(0).0,
        }
    }

    /// A kube client whose requests this API answers.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The requests so far, `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.clone()
    }

    /// Creates or replaces an object as a controller would (`path` as in a
    /// request: `api/v1/nodes/worker-1`).
    pub fn put(&self, path: &str, object: Value) {
        let t = target(path).expect("a path to an object");
        let name = t.name.clone().expect("a path to an object");
        self.write(key(&t, name), object);
    }

    /// Changes an object by a merge patch, as a controller or kubelet would.
    pub fn patch(&self, path: &str, patch: &Value) {
        let t = target(path).expect("a path to an object");
        let k = key(&t, t.name.clone().expect("a path to an object"));
        let mut object = self.lock().objects.get(&k).cloned().unwrap_or(json!({}));
        merge(&mut object, patch);
        self.write(k, object);
    }

    /// The object at `path`, if it exists.
    pub fn get(&self, path: &str) -> Option<Value> {
        let t = target(path)?;
        let k = key(&t, t.name.clone()?);
        self.lock().objects.get(&k).cloned()
    }

    /// Stores `object` under `k` (created or modified), stamped with a new
    /// resource version, and tells the watches.
    fn write(&self, k: Key, mut object: Value) -> Value {
        let mut s = self.lock();
        s.rv += 1;
        let rv = s.rv;
        let meta = &mut object["metadata"];
        meta["name"] = json!(k.name);
        if let Some(ns) = &k.ns {
            meta["namespace"] = json!(ns);
        }
        if meta.get("uid").is_none() {
            meta["uid"] = json!(format!("uid-{rv}"));
            meta["creationTimestamp"] = json!("2026-11-29T00:00:00Z");
        }
        meta["resourceVersion"] = json!(rv.to_string());
        let kind = if s.objects.contains_key(&k) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        s.objects.insert(k.clone(), object.clone());
        s.log.push(Change {
            rv,
            kind,
            key: k,
            object: object.clone(),
        });
        drop(s);
        self.changed.send_replace(rv);
        object
    }

    fn delete(&self, k: &Key) -> Option<Value> {
        let mut s = self.lock();
        let object = s.objects.remove(k)?;
        s.rv += 1;
        let rv = s.rv;
        s.log.push(Change {
            rv,
            kind: "DELETED",
            key: k.clone(),
            object: object.clone(),
        });
        drop(s);
        self.changed.send_replace(rv);
        Some(object)
    }

    async fn answer(self, req: Request<kube::client::Body>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().trim_start_matches('/').to_owned();
        let query = query(parts.uri.query().unwrap_or(""));
        self.lock().requests.push(format!(
            "{} {}{}",
            parts.method,
            path,
            parts
                .uri
                .query()
                .map(|q| format!("?{q}"))
                .unwrap_or_default()
        ));
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if path == "version" {
            return ok(
                &json!({"major": "1", "minor": "35", "gitVersion": "v1.35.4-fake",
                "platform": "linux/amd64"}),
            );
        }
        if path == "api/v1" {
            // Discovery of the core group, for manifests applied by kind.
            let r = |name: &str, kind: &str, namespaced: bool| {
                json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
            };
            return ok(
                &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                "resources": [r("configmaps", "ConfigMap", true), r("namespaces", "Namespace", false),
                    r("nodes", "Node", false), r("pods", "Pod", true)]}),
            );
        }
        let Some(t) = target(&path) else {
            return status(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("no route {path}"),
            );
        };
        let sent: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        match (&parts.method, t.name.clone(), t.sub.as_deref()) {
            (&Method::GET, None, _)
                if query.get("watch").is_some_and(|w| w == "true" || w == "1") =>
            {
                self.watch(&t, &query)
            }
            (&Method::GET, None, _) => {
                let s = self.lock();
                let items: Vec<Value> = s
                    .objects
                    .iter()
                    .filter(|(k, o)| listed(&t, k, o, &query))
                    .map(|(_, o)| o.clone())
                    .collect();
                ok(&json!({"apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": s.rv.to_string()}, "items": items}))
            }
            (&Method::GET, Some(name), _) => match self.lock().objects.get(&key(&t, name)) {
                Some(o) => ok(o),
                None => not_found(&t),
            },
            (&Method::POST, None, _) => {
                let Some(name) = sent["metadata"]["name"].as_str().map(str::to_owned) else {
                    return status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", "no name");
                };
                let k = key(&t, name);
                if self.lock().objects.contains_key(&k) {
                    return status(StatusCode::CONFLICT, "AlreadyExists", "already exists");
                }
                let object = self.write(k, sent);
                if t.resource == "namespaces" && t.ns.is_none() && t.gv == "api/v1" {
                    // The ServiceAccount controller's part.
                    let ns = object["metadata"]["name"].as_str().unwrap_or_default();
                    self.put(
                        &format!("api/v1/namespaces/{ns}/serviceaccounts/default"),
                        json!({"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": "default"}}),
                    );
                }
                created(&object)
            }
            // An eviction deletes the pod (no disruption budget here).
            (&Method::POST, Some(name), Some("eviction")) => match self.delete(&key(&t, name)) {
                Some(_) => {
                    created(&json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}))
                }
                None => not_found(&t),
            },
            (&Method::PATCH, Some(name), _) => {
                let k = key(&t, name);
                let apply = parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
                let existing = self.lock().objects.get(&k).cloned();
                let mut object = match existing {
                    Some(o) => o,
                    None if apply => json!({}),
                    None => return not_found(&t),
                };
                merge(&mut object, &sent);
                ok(&self.write(k, object))
            }
            (&Method::PUT, Some(name), _) => {
                let k = key(&t, name);
                if !self.lock().objects.contains_key(&k) {
                    return not_found(&t);
                }
                ok(&self.write(k, sent))
            }
            (&Method::DELETE, Some(name), _) => {
                let k = key(&t, name.clone());
                if k.resource == "namespaces" && k.ns.is_none() && k.gv == "api/v1" {
                    // The namespace controller's part: what is in it goes first.
                    let inside: Vec<Key> = self
                        .lock()
                        .objects
                        .keys()
                        .filter(|o| o.ns.as_deref() == Some(name.as_str()))
                        .cloned()
                        .collect();
                    for o in &inside {
                        self.delete(o);
                    }
                }
                match self.delete(&k) {
                    Some(o) => ok(&o),
                    None => not_found(&t),
                }
            }
            _ => status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                &format!("{} {path} is not modelled", parts.method),
            ),
        }
    }

    /// The changes after the request's resource version, then each new one
    /// as it happens, as JSON lines.
    fn watch(&self, t: &Target, query: &BTreeMap<String, String>) -> Response<Body> {
        let from: u64 = query
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let api = self.clone();
        let rx = self.changed.subscribe();
        let (t, query) = (
            Target {
                gv: t.gv.clone(),
                resource: t.resource.clone(),
                ns: t.ns.clone(),
                name: None,
                sub: None,
            },
            query.clone(),
        );
        let stream = futures::stream::unfold((from, rx), move |(seen, mut rx)| {
            let s = api.lock();
            let lines: Vec<String> = s
                .log
                .iter()
                .filter(|c| c.rv > seen && listed(&t, &c.key, &c.object, &query))
                .map(|c| json!({"type": c.kind, "object": c.object}).to_string() + "\n")
                .collect();
            let last = s.rv;
            drop(s);
            async move {
                if lines.is_empty() {
                    // Nothing new: wait for the next write, then look again.
                    rx.changed().await.ok()?;
                    return Some((Bytes::new(), (last, rx)));
                }
                Some((Bytes::from(lines.concat()), (last, rx)))
            }
        })
        .filter(|b| std::future::ready(!b.is_empty()))
        .map(|b| Ok::<_, Infallible>(http_body::Frame::data(b)));
        Response::new(BodyExt::boxed(StreamBody::new(stream)))
    }
}

impl tower_service::Service<Request<kube::client::Body>> for FakeApi {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let api = self.clone();
        Box::pin(async move { Ok(api.answer(req).await) })
    }
}
