//! Reads the API server's audit log into the ground truth: every change of
//! a Node or Pod, at the moment its write completed.
//!
//! Each audited write carries the object as stored (`responseObject`), so
//! the same folds as the observer's (`observe::kinds`) turn the sequence of
//! stored states into the same typed changes nodefall records, each stamped
//! with the event's `stageTimestamp` (ResponseComplete, microseconds).
//!
//! Two writes answer with a Status instead of the pod, and change it inside
//! the API server with no audited write of the pod: a binding (the pod's
//! node) and an eviction (`pods/eviction`: the DisruptionTarget condition,
//! then the pod's deletion). Both are applied to the pod's last stored
//! state, found by namespace and name (which gives its UID).

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, PodSpec, PodStatus, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::runtime::watcher::Event as WatchEvent;
use serde::Deserialize;
use serde_json::Value;

use super::Error;
use crate::observe::fold::{Changes, Fold};
use crate::observe::kinds::{NOT_READY, NodeDiff, PodDiff, UNREACHABLE, pod_tolerations};
use crate::timeline::{Change, ObjectRef, Toleration as Tolerates};
use crate::verdict::audit::Report;

/// Which objects the truth covers: every Node, and the Pods of one
/// namespace (what a run's observer watches) or of all.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub namespace: Option<String>,
    /// The transitions kept, by when they happened (both ends included):
    /// the rest are folded in (they make the objects' states) but not kept.
    /// None: all.
    pub kept: Option<(Timestamp, Timestamp)>,
}

/// The ground truth read from one audit log.
#[derive(Debug, Default)]
pub struct AuditTruth {
    /// Each object's transitions, in the order its writes completed: by
    /// object, so a transition does not repeat its object's name and UID
    /// (51,000 transitions of 10,000 pods' in a 1,000-node benchmark).
    pub objects: BTreeMap<ObjectRef, Vec<(Timestamp, Change)>>,
    /// Audit events read (every line).
    pub events: usize,
    /// Writes to Nodes and Pods in scope that were folded in.
    pub writes: usize,
    /// When the log starts and ends.
    pub first: Option<Timestamp>,
    pub last: Option<Timestamp>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    stage: String,
    verb: String,
    #[serde(default)]
    request_uri: String,
    #[serde(default)]
    object_ref: Option<ObjectRefJson>,
    #[serde(default)]
    response_status: Option<StatusJson>,
    #[serde(default)]
    request_object: Option<Value>,
    #[serde(default)]
    response_object: Option<Value>,
    stage_timestamp: Timestamp,
}

#[derive(Debug, Deserialize)]
pub(super) struct ObjectRefJson {
    #[serde(default)]
    pub(super) resource: Option<String>,
    #[serde(default)]
    pub(super) namespace: Option<String>,
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) subresource: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct StatusJson {
    #[serde(default)]
    pub(super) code: Option<u16>,
}

/// One write, decoded: what it did to which object.
enum Write {
    Node(Box<WatchEvent<Node>>),
    Pod(Box<WatchEvent<Pod>>),
    /// `pods/binding`: the scheduler set the pod's node (the response is a
    /// Status, not the pod).
    Bind {
        namespace: String,
        name: String,
        node: String,
    },
    /// `pods/eviction` answered 2xx: the API server set the pod's
    /// DisruptionTarget condition, then deleted it (the response is a
    /// Status). A refused eviction (429) changed nothing and is not one.
    Evict {
        namespace: String,
        name: String,
        /// `deleteOptions.gracePeriodSeconds` of the request, if it set one.
        grace: Option<i64>,
    },
}

/// How far back in the log a write may complete before one logged earlier
/// (the log is written at completion, so nearly in order): writes are held
/// this long and folded in time order.
const REORDER_US: i64 = 2_000_000;

/// Reads a whole audit log, folding as it goes (memory: the objects' last
/// states, not the log). `path` only names the file in errors.
pub fn read(
    reader: impl BufRead,
    path: &std::path::Path,
    scope: &Scope,
) -> Result<AuditTruth, Error> {
    let mut truth = AuditTruth::default();
    let mut folder = Folder::default();
    // Writes not folded yet, by (completion time, position in the log).
    let mut pending: BTreeMap<(Timestamp, usize), Write> = BTreeMap::new();
    super::json_lines(
        reader,
        path,
        |path, line, source| Error::Parse { path, line, source },
        |line, event: Event| {
            truth.events += 1;
            truth.first.get_or_insert(event.stage_timestamp);
            let newest = truth
                .last
                .map_or(event.stage_timestamp, |l| l.max(event.stage_timestamp));
            truth.last = Some(newest);
            if let Some((at, write)) = decode(event, scope) {
                truth.writes += 1;
                pending.insert((at, line), write);
            }
            let horizon = newest
                .checked_sub(jiff::SignedDuration::from_micros(REORDER_US))
                .unwrap_or(newest);
            while let Some(entry) = pending.first_entry() {
                if entry.key().0 >= horizon {
                    break;
                }
                let ((at, _), write) = entry.remove_entry();
                fold_kept(&mut folder, scope, at, write, &mut truth);
            }
            Ok(())
        },
    )?;
    for ((at, _), write) in pending {
        fold_kept(&mut folder, scope, at, write, &mut truth);
    }
    Ok(truth)
}

impl AuditTruth {
    /// Every transition, object by object, each object's in order.
    pub fn reports(&self) -> impl Iterator<Item = Report<'_>> {
        self.objects.iter().flat_map(|(object, changes)| {
            changes.iter().map(move |(at, change)| Report {
                at: *at,
                object,
                change,
            })
        })
    }

    fn keep(&mut self, at: Timestamp, object: ObjectRef, change: Change) {
        match self.objects.get_mut(&object) {
            Some(changes) => changes.push((at, change)),
            None => {
                self.objects.insert(object, vec![(at, change)]);
            }
        }
    }
}

/// Folds a write in; keeps the transitions it made only inside the
/// scope's span (at 10,000 pods the bring-up and the cleanup are most of
/// the log, and of no comparison).
fn fold_kept(
    folder: &mut Folder,
    scope: &Scope,
    at: Timestamp,
    write: Write,
    truth: &mut AuditTruth,
) {
    let batch = folder.fold(at, write);
    if scope.kept.is_some_and(|(from, to)| at < from || at > to) {
        return;
    }
    for (object, changes) in batch {
        for seen in changes {
            truth.keep(at, object.clone(), seen.change);
        }
    }
}

fn decode(e: Event, scope: &Scope) -> Option<(Timestamp, Write)> {
    let at = e.stage_timestamp;
    if e.stage != "ResponseComplete" {
        return None;
    }
    let code = e.response_status.as_ref().and_then(|s| s.code).unwrap_or(0);
    if !(200..300).contains(&code) {
        return None;
    }
    let r = e.object_ref?;
    let resource = r.resource.as_deref()?;
    let sub = r.subresource.as_deref().unwrap_or("");
    match (resource, sub) {
        ("nodes", "" | "status") => {
            let mut node: Node = serde_json::from_value(e.response_object?).ok()?;
            node.metadata.managed_fields = None;
            Some((
                at,
                Write::Node(Box::new(watch_event(&e.verb, node, is_gone_node)?)),
            ))
        }
        ("pods", "" | "status") => {
            if !in_scope(scope, r.namespace.as_deref()) {
                return None;
            }
            let mut pod: Pod = serde_json::from_value(e.response_object?).ok()?;
            // Most of a stored pod, and of no use here.
            pod.metadata.managed_fields = None;
            Some((
                at,
                Write::Pod(Box::new(watch_event(&e.verb, pod, is_gone_pod)?)),
            ))
        }
        ("pods", "eviction") => {
            if e.verb != "create" || !in_scope(scope, r.namespace.as_deref()) {
                return None;
            }
            let request = e.request_object.unwrap_or(Value::Null);
            // A dry run is answered 201 too, and changes nothing.
            let dry =
                |v: Option<&Value>| v.and_then(Value::as_array).is_some_and(|a| !a.is_empty());
            if e.request_uri.contains("dryRun=") || dry(request.pointer("/deleteOptions/dryRun")) {
                return None;
            }
            // The Eviction is named after its pod (the API server refuses
            // one whose name differs from the URL's).
            let name = request
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or(r.name)?;
            Some((
                at,
                Write::Evict {
                    namespace: r.namespace.unwrap_or_default(),
                    name,
                    grace: request
                        .pointer("/deleteOptions/gracePeriodSeconds")
                        .and_then(Value::as_i64),
                },
            ))
        }
        ("pods", "binding") => {
            if !in_scope(scope, r.namespace.as_deref()) {
                return None;
            }
            let node = e
                .request_object?
                .pointer("/target/name")?
                .as_str()?
                .to_owned();
            Some((
                at,
                Write::Bind {
                    namespace: r.namespace.unwrap_or_default(),
                    name: r.name?,
                    node,
                },
            ))
        }
        _ => None,
    }
}

impl Folder {
    /// A write whose response holds an older version of the object than one
    /// already folded in: a no-op write answers with the object as it was
    /// read, which can be older than a write completed meanwhile (seen: a
    /// kwok status patch answered with resourceVersion 7006 after 7015).
    fn is_stale(&mut self, meta: &ObjectMeta) -> bool {
        let (Some(uid), Some(rv)) = (
            meta.uid.as_ref(),
            meta.resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok()),
        ) else {
            return false;
        };
        match self.newest.get(uid) {
            Some(newest) if rv <= *newest => true,
            _ => {
                self.newest.insert(uid.clone(), rv);
                false
            }
        }
    }
}

/// The metadata of an object a write stored (not of a deletion).
fn applied_meta<K: kube::Resource>(e: &WatchEvent<K>) -> Option<&ObjectMeta> {
    match e {
        WatchEvent::Apply(o) => Some(o.meta()),
        _ => None,
    }
}

fn in_scope(scope: &Scope, namespace: Option<&str>) -> bool {
    scope
        .namespace
        .as_deref()
        .is_none_or(|ns| Some(ns) == namespace)
}

fn watch_event<K>(verb: &str, obj: K, gone: fn(&K) -> bool) -> Option<WatchEvent<K>> {
    match verb {
        "create" | "update" | "patch" => Some(WatchEvent::Apply(obj)),
        // A DELETE answers with the object in both cases: removed, or only
        // marked for graceful deletion (a pod with a grace period).
        "delete" if gone(&obj) => Some(WatchEvent::Delete(obj)),
        "delete" => Some(WatchEvent::Apply(obj)),
        _ => None,
    }
}

/// A Node has no graceful deletion: a successful DELETE removed it unless
/// a finalizer holds it.
fn is_gone_node(n: &Node) -> bool {
    n.metadata.finalizers.as_ref().is_none_or(Vec::is_empty)
}

/// A pod DELETE removed the pod when no grace period is left (force, or a
/// pod never scheduled or finished) and no finalizer holds it.
fn is_gone_pod(p: &Pod) -> bool {
    let m = &p.metadata;
    let no_grace = m.deletion_timestamp.is_none() || m.deletion_grace_period_seconds == Some(0);
    no_grace && m.finalizers.as_ref().is_none_or(Vec::is_empty)
}

/// The truth's folds: the observer's own, fed the stored states in order.
struct Folder {
    nodes: Fold<Node, NodeDiff>,
    pods: Fold<Pod, PodDiff>,
    /// The last stored state of each live pod, by namespace/name, as far as
    /// the fold reads it ([`Kept`]): a binding changes it without
    /// returning it.
    last_pod: HashMap<(String, String), Kept>,
    /// The newest resourceVersion folded in per object (UID).
    newest: HashMap<String, u64>,
}

impl Default for Folder {
    fn default() -> Self {
        Folder {
            nodes: Fold::new(NodeDiff),
            pods: Fold::new(PodDiff),
            last_pod: HashMap::new(),
            newest: HashMap::new(),
        }
    }
}

impl Folder {
    /// The transitions `write`, completed `at`, makes.
    fn fold(&mut self, at: Timestamp, write: Write) -> Vec<(ObjectRef, Changes)> {
        let meta = match &write {
            Write::Node(e) => applied_meta(e),
            Write::Pod(e) => applied_meta(e),
            Write::Bind { .. } | Write::Evict { .. } => None,
        };
        if let Some(meta) = meta
            && self.is_stale(meta)
        {
            return Vec::new();
        }
        match write {
            Write::Node(e) => self.nodes.handle(*e),
            Write::Pod(e) => {
                let key = |p: &Pod| {
                    (
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default(),
                    )
                };
                match *e {
                    WatchEvent::Apply(p) => {
                        self.last_pod.insert(key(&p), Kept::of(&p));
                        self.pods.handle(WatchEvent::Apply(p))
                    }
                    WatchEvent::Delete(p) => {
                        self.last_pod.remove(&key(&p));
                        // A pod's DELETE is graceful even with no grace
                        // left: the API server stores it marked for deletion
                        // (a watch sees it Terminating), then removes it.
                        let mut batch = self.pods.handle(WatchEvent::Apply(p.clone()));
                        batch.extend(self.pods.handle(WatchEvent::Delete(p)));
                        batch
                    }
                    e => self.pods.handle(e),
                }
            }
            Write::Bind {
                namespace,
                name,
                node,
            } => {
                let key = (namespace, name);
                let Some(kept) = self.last_pod.get_mut(&key) else {
                    return Vec::new();
                };
                kept.node_name = Some(node);
                self.pods.handle(WatchEvent::Apply(kept.pod(&key)))
            }
            Write::Evict {
                namespace,
                name,
                grace,
            } => {
                let key = (namespace, name);
                // Evicted before it was ever seen (or of another namespace's
                // pod): nothing to change.
                let Some(kept) = self.last_pod.get_mut(&key) else {
                    return Vec::new();
                };
                // First the condition (its own update), then the deletion.
                kept.disrupt();
                let mut batch = self.pods.handle(WatchEvent::Apply(kept.pod(&key)));
                let gone = kept.delete(at, grace);
                let pod = kept.pod(&key);
                batch.extend(self.pods.handle(WatchEvent::Apply(pod.clone())));
                if gone {
                    self.last_pod.remove(&key);
                    batch.extend(self.pods.handle(WatchEvent::Delete(pod)));
                }
                batch
            }
        }
    }
}

/// What of a pod the observer's fold reads after its first sight, kept for
/// bindings and evictions (which change a pod without returning it): its
/// name and UID, deletion, node, grace period, the two NoExecute
/// tolerations as the fold computes them, phase and reason, and the three
/// conditions it looks at, without their messages. A kept pod is never a
/// first sight (it is kept as its write is folded in), so what only a
/// first sight reads (labels, owner, claims, creation) is not kept: at
/// 10,000 pods a trimmed `ObjectMeta` and the whole conditions and
/// tolerations were a quarter of the check's memory (about 1.6 kB a pod;
/// this is about 300 bytes).
struct Kept {
    uid: Option<String>,
    deletion: Option<Time>,
    deletion_grace: Option<i64>,
    /// A finalizer holds it (it stays, marked for deletion, when none is left).
    held: bool,
    has_spec: bool,
    node_name: Option<String>,
    /// `spec.terminationGracePeriodSeconds`: an eviction's deletion grace.
    grace: Option<i64>,
    /// `node.kubernetes.io/unreachable` and `not-ready`, as the fold reads them.
    tolerations: (Tolerates, Tolerates),
    has_status: bool,
    phase: Option<String>,
    reason: Option<String>,
    conditions: Vec<PodCondition>,
}

/// The conditions the fold reads (`observe::kinds::PodDiff`).
const READ_CONDITIONS: [&str; 3] = ["Ready", "PodScheduled", "DisruptionTarget"];

impl Kept {
    fn of(p: &Pod) -> Kept {
        let m = &p.metadata;
        let spec = p.spec.as_ref();
        let status = p.status.as_ref();
        Kept {
            uid: m.uid.clone(),
            deletion: m.deletion_timestamp.clone(),
            deletion_grace: m.deletion_grace_period_seconds,
            held: m.finalizers.as_ref().is_some_and(|f| !f.is_empty()),
            has_spec: spec.is_some(),
            node_name: spec.and_then(|s| s.node_name.clone()),
            grace: spec.and_then(|s| s.termination_grace_period_seconds),
            tolerations: pod_tolerations(p),
            has_status: status.is_some(),
            phase: status.and_then(|s| s.phase.clone()),
            reason: status.and_then(|s| s.reason.clone()),
            conditions: status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .filter(|c| READ_CONDITIONS.contains(&c.type_.as_str()))
                .map(|c| PodCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    last_transition_time: c.last_transition_time.clone(),
                    ..PodCondition::default()
                })
                .collect(),
        }
    }

    /// What an eviction's update does first (`addConditionAndDeletePod` in
    /// kubernetes' pkg/registry/core/pod/storage/eviction.go): the
    /// DisruptionTarget condition, True, reason EvictionByEvictionAPI
    /// (replacing one the pod had).
    fn disrupt(&mut self) {
        self.has_status = true;
        self.conditions.retain(|c| c.type_ != "DisruptionTarget");
        self.conditions.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("EvictionByEvictionAPI".into()),
            ..PodCondition::default()
        });
    }

    /// What the eviction's deletion does next, as the API server decides
    /// it (`BeforeDelete`, and the pod strategy's `CheckGracefulDelete`):
    /// the request's grace period, else the pod's (30 s by default), none
    /// for a pod never scheduled or finished; a pod already being deleted
    /// only takes a shorter one. It is marked for deletion (Terminating)
    /// either way, and then removed (true) when none is left and no
    /// finalizer holds it.
    fn delete(&mut self, at: Timestamp, grace: Option<i64>) -> bool {
        // A negative grace period counts as 1 s.
        let grace = grace.map(|g| if g < 0 { 1 } else { g });
        let finished = matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"));
        let period = if self.deletion.is_some() {
            let was = self.deletion_grace.unwrap_or(0);
            grace.map_or(was, |g| g.min(was))
        } else if self.node_name.is_none() || finished {
            0
        } else {
            grace.or(self.grace).unwrap_or(30).max(0)
        };
        // Stored marked for deletion first, even with no grace left (see
        // `fold`), then removed unless a finalizer holds it.
        if self.deletion.is_none() {
            let when = at
                .checked_add(jiff::SignedDuration::from_secs(period))
                .unwrap_or(at);
            self.deletion = Some(Time(when));
        }
        self.deletion_grace = Some(period);
        period == 0 && !self.held
    }

    /// The pod `namespace/name` as the fold reads it (a binding gives it a
    /// spec).
    fn pod(&self, (namespace, name): &(String, String)) -> Pod {
        let tolerations = [
            (UNREACHABLE, self.tolerations.0),
            (NOT_READY, self.tolerations.1),
        ]
        .into_iter()
        .filter_map(|(key, t)| tolerating(key, t))
        .collect::<Vec<_>>();
        let spec = (self.has_spec || self.node_name.is_some()).then(|| PodSpec {
            node_name: self.node_name.clone(),
            termination_grace_period_seconds: self.grace,
            tolerations: (!tolerations.is_empty()).then_some(tolerations),
            ..PodSpec::default()
        });
        let status = self.has_status.then(|| PodStatus {
            phase: self.phase.clone(),
            reason: self.reason.clone(),
            conditions: (!self.conditions.is_empty()).then(|| self.conditions.clone()),
            ..PodStatus::default()
        });
        Pod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                uid: self.uid.clone(),
                deletion_timestamp: self.deletion.clone(),
                deletion_grace_period_seconds: self.deletion_grace,
                finalizers: self.held.then(|| vec!["nodefall.dev/held".to_owned()]),
                ..ObjectMeta::default()
            },
            spec,
            status,
        }
    }
}

/// One toleration of the NoExecute taint `key` that the fold reads as `t`
/// (None: no matching toleration).
fn tolerating(key: &str, t: Tolerates) -> Option<Toleration> {
    let seconds = match t {
        Tolerates::None => return None,
        Tolerates::Seconds(s) => Some(s),
        Tolerates::Forever => None,
    };
    Some(Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: seconds,
        ..Toleration::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One audit event (ResponseComplete) as the API server writes it.
    fn event(
        at: &str,
        verb: &str,
        sub: Option<&str>,
        name: &str,
        code: u16,
        request: serde_json::Value,
        response: serde_json::Value,
    ) -> String {
        let mut object_ref = serde_json::json!({"resource": "pods", "namespace": "ns", "name": name, "apiVersion": "v1"});
        if let Some(sub) = sub {
            object_ref["subresource"] = sub.into();
        }
        let uri = format!(
            "/api/v1/namespaces/ns/pods/{name}{}?",
            sub.map(|s| format!("/{s}")).unwrap_or_default()
        );
        serde_json::json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
            "stage": "ResponseComplete", "requestURI": uri, "verb": verb, "objectRef": object_ref,
            "responseStatus": {"metadata": {}, "code": code},
            "requestObject": request, "responseObject": response,
            "stageTimestamp": format!("2026-11-25T15:08:{at}Z"),
        })
        .to_string()
    }

    /// web-0 stored Running and Ready on worker-1, at resourceVersion `rv`.
    fn running(rv: u32, extra_meta: serde_json::Value) -> serde_json::Value {
        let mut pod = serde_json::json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "web-0", "namespace": "ns", "uid": "u-web-0",
                         "resourceVersion": rv.to_string(), "labels": {"app": "web"}},
            "spec": {"nodeName": "worker-1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}
        });
        for (k, v) in extra_meta.as_object().unwrap() {
            pod["metadata"][k] = v.clone();
        }
        pod
    }

    fn eviction(at: &str, code: u16, request: serde_json::Value) -> String {
        let status = serde_json::json!({"kind": "Status", "apiVersion": "v1", "code": code});
        event(
            at,
            "create",
            Some("eviction"),
            "web-0",
            code,
            request,
            status,
        )
    }

    /// The pod's changes in the truth, as `seconds-of-minute change`.
    fn changes(lines: &[String]) -> Vec<String> {
        changes_kept(lines, None)
    }

    /// The same, keeping only the transitions in `kept`.
    fn changes_kept(lines: &[String], kept: Option<(Timestamp, Timestamp)>) -> Vec<String> {
        let log = lines.join("\n");
        let scope = Scope {
            namespace: Some("ns".into()),
            kept,
        };
        let truth = read(log.as_bytes(), std::path::Path::new("audit.log"), &scope).unwrap();
        truth
            .reports()
            .map(|t| {
                assert!(
                    matches!(t.object, ObjectRef::Pod { uid, .. } if uid == "u-web-0"),
                    "{t:?}"
                );
                let second = t.at.strftime("%S%.3f");
                let change = match t.change {
                    Change::PodDisruptionTarget { reason } => {
                        format!("DisruptionTarget {}", reason.as_deref().unwrap_or("-"))
                    }
                    other => serde_json::to_value(other).unwrap()["type"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                };
                format!("{second} {change}")
            })
            .collect()
    }

    /// web-0's kubelet reporting it Running at 50 s.
    fn web_0_running() -> String {
        event(
            "50.000000",
            "patch",
            Some("status"),
            "web-0",
            200,
            serde_json::Value::Null,
            running(10, serde_json::json!({})),
        )
    }

    fn evicted_pod_log(code: u16) -> Vec<String> {
        let eviction_request = serde_json::json!({"kind": "Eviction", "apiVersion": "policy/v1",
                                                  "metadata": {"name": "web-0"}});
        // kwok's removal of the Terminating pod, answered with it as stored.
        let removed = running(
            12,
            serde_json::json!({"deletionTimestamp": "2026-11-25T15:08:59Z",
                               "deletionGracePeriodSeconds": 0}),
        );
        vec![
            web_0_running(),
            eviction("59.433300", code, eviction_request),
            event(
                "59.513577",
                "delete",
                None,
                "web-0",
                200,
                serde_json::json!({"gracePeriodSeconds": 0}),
                removed,
            ),
        ]
    }

    #[test]
    fn a_successful_eviction_is_the_pods_disruption_target_then_its_deletion() {
        let got = changes(&evicted_pod_log(201));
        assert_eq!(
            got[got.len() - 3..],
            [
                "59.433 DisruptionTarget EvictionByEvictionAPI",
                "59.433 podTerminating",
                "59.513 podDeleted",
            ],
            "{got:?}"
        );
    }

    #[test]
    fn transitions_outside_the_kept_span_are_folded_in_but_not_kept() {
        let all = changes(&evicted_pod_log(201));
        let at = |s: &str| -> Timestamp { format!("2026-11-25T15:08:{s}Z").parse().unwrap() };
        // From the eviction on: the pod's earlier states made what follows.
        let kept = changes_kept(
            &evicted_pod_log(201),
            Some((at("59.400000"), at("59.600000"))),
        );
        assert_eq!(kept, all[all.len() - 3..], "{all:?}");
        assert!(all.len() > kept.len(), "{all:?}");
        // A span that ends before the deletion drops it.
        let kept = changes_kept(
            &evicted_pod_log(201),
            Some((at("59.400000"), at("59.500000"))),
        );
        assert_eq!(kept, all[all.len() - 3..all.len() - 1], "{all:?}");
    }

    #[test]
    fn a_refused_eviction_changes_nothing() {
        let got = changes(&evicted_pod_log(429));
        assert!(
            got.iter()
                .all(|c| !c.contains("DisruptionTarget") && !c.starts_with("59.433")),
            "{got:?}"
        );
        // Only the later DELETE (no grace): stored Terminating, then removed,
        // as a watch sees a force deletion.
        assert_eq!(
            got[got.len() - 2..],
            ["59.513 podTerminating", "59.513 podDeleted"]
        );
        // A dry run is answered 201 and changes nothing either.
        let mut dry = evicted_pod_log(201);
        dry[1] = eviction(
            "59.433300",
            201,
            serde_json::json!({"kind": "Eviction", "metadata": {"name": "web-0"},
                               "deleteOptions": {"dryRun": ["All"]}}),
        );
        assert_eq!(changes(&dry), got);
    }

    #[test]
    fn an_eviction_without_grace_removes_the_pod_and_one_of_another_pod_is_not_this_ones() {
        let request = |name: &str, grace: i64| {
            serde_json::json!({"kind": "Eviction", "metadata": {"name": name},
                               "deleteOptions": {"gracePeriodSeconds": grace}})
        };
        let lines = vec![
            web_0_running(),
            // Another pod's eviction: web-0 stays as it was.
            event(
                "51.000000",
                "create",
                Some("eviction"),
                "web-1",
                201,
                request("web-1", 0),
                serde_json::Value::Null,
            ),
            eviction("52.000000", 201, request("web-0", 0)),
        ];
        let got = changes(&lines);
        assert_eq!(
            got[got.len() - 3..],
            [
                "52.000 DisruptionTarget EvictionByEvictionAPI",
                "52.000 podTerminating",
                "52.000 podDeleted"
            ],
            "{got:?}"
        );
        assert!(!got.iter().any(|c| c.starts_with("51.")), "{got:?}");
    }

    #[test]
    fn a_kept_pod_holds_what_the_fold_reads_and_takes_its_binding() {
        use crate::observe::fold::Differ as _;
        let pod = |tolerations: serde_json::Value, deleting: bool| -> Pod {
            let mut meta = serde_json::json!({"name": "web-0", "namespace": "ns", "uid": "u1",
                "labels": {"app": "web"}, "annotations": {"big": "x"},
                "finalizers": ["example.com/hold"]});
            if deleting {
                meta["deletionTimestamp"] = "2026-12-07T10:00:00Z".into();
                meta["deletionGracePeriodSeconds"] = 30.into();
            }
            serde_json::from_value(serde_json::json!({
                "metadata": meta,
                "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "worker-1",
                         "tolerations": tolerations,
                         "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]},
                "status": {"phase": "Running", "reason": "R", "conditions": [
                    {"type": "PodScheduled", "status": "True",
                     "lastTransitionTime": "2026-12-07T09:00:00Z"},
                    {"type": "Initialized", "status": "True"},
                    {"type": "Ready", "status": "True", "message": "long",
                     "lastTransitionTime": "2026-12-07T09:00:01Z"},
                    {"type": "DisruptionTarget", "status": "True", "reason": "TaintManagerEviction",
                     "lastTransitionTime": "2026-12-07T09:00:02Z"}]}
            }))
            .unwrap()
        };
        let key = ("ns".to_owned(), "web-0".to_owned());
        let tolerations = [
            serde_json::json!([]),
            serde_json::json!([{"operator": "Exists"}]),
            serde_json::json!([
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": -5}]),
            serde_json::json!([{"key": "node.kubernetes.io/not-ready", "operator": "Equal"}]),
        ];
        let first = PodDiff.snap(&Pod::default());
        for t in tolerations {
            for deleting in [false, true] {
                let p = pod(t.clone(), deleting);
                let back = Kept::of(&p).pod(&key);
                // What the fold compares and what it reports from a known pod.
                assert_eq!(PodDiff.key(&back), PodDiff.key(&p));
                assert_eq!(PodDiff.object(&back), PodDiff.object(&p));
                assert_eq!(PodDiff.snap(&back), PodDiff.snap(&p), "{t} {deleting}");
                assert_eq!(
                    PodDiff.diff(Some(&first), &back, false),
                    PodDiff.diff(Some(&first), &p, false),
                    "{t} {deleting}"
                );
                assert_eq!(is_gone_pod(&back), is_gone_pod(&p));
            }
        }
        // a binding: the node is set on the kept state
        let mut kept = Kept::of(&pod(serde_json::json!([]), false));
        kept.node_name = Some("worker-3".into());
        assert_eq!(
            kept.pod(&key).spec.unwrap().node_name.as_deref(),
            Some("worker-3")
        );
        // a pod stored without spec or status stays without them
        let bare = Kept::of(&Pod::default()).pod(&key);
        assert!(bare.spec.is_none() && bare.status.is_none());
    }
}
