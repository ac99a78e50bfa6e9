//! `setup.waitReady`: a workload is ready when its controller counts its
//! pods ready **and** every Service selecting them lists them as ready
//! endpoints. The second half matters: the EndpointSlice controller marks a
//! Ready pod's endpoint ready a moment later (up to about a second on kind),
//! and a run whose step began in that moment saw endpoints turn ready after
//! T0, as if the fault had caused it.

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams};
use kube::runtime::wait::await_condition;
use kube::runtime::watcher::{self, Event};
use std::collections::{BTreeMap, BTreeSet};
use tokio::time::Instant;

use super::{Error, Result, kube_err, with_timeout};
use crate::scenario::checked::{ReadyCheck, WorkloadKind};

/// The label naming an EndpointSlice's Service.
const SERVICE_LABEL: &str = "kubernetes.io/service-name";

/// Waits (watching) until a workload is ready, then until the Services that
/// select its pods have that many ready endpoints; all within `check.timeout`.
pub async fn wait_ready(client: &kube::Client, namespace: &str, check: &ReadyCheck) -> Result<()> {
    let deadline = Instant::now() + check.timeout;
    let Some(pods) = wait_workload(client, namespace, check).await? else {
        return Ok(());
    };
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let list = services
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing Services in {namespace}")))?;
    for svc in list.items.iter().filter(|s| selects(s, &pods.labels)) {
        let name = svc.name_any();
        let what = format!(
            "Service {name} to list {} ready endpoint(s) of {} {}",
            pods.ready,
            check.kind.name(),
            check.name
        );
        let left = deadline.saturating_duration_since(Instant::now());
        with_timeout(
            what,
            left,
            ready_endpoints_at_least(client, namespace, &name, pods.ready),
        )
        .await?;
    }
    Ok(())
}

/// A ready workload's pods: their labels and how many were ready.
struct ReadyPods {
    labels: BTreeMap<String, String>,
    ready: usize,
}

impl ReadyPods {
    fn of(template: &PodTemplateSpec, ready: i32) -> ReadyPods {
        ReadyPods {
            labels: template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default(),
            ready: usize::try_from(ready).unwrap_or(0),
        }
    }
}

/// The ready replicas a check waits for: the count it names, or the spec's
/// (1 when the spec names none, as the API defaults it).
fn wanted(named: Option<u32>, spec: Option<i32>) -> i32 {
    named.map_or(spec.unwrap_or(1), |w| i32::try_from(w).unwrap_or(i32::MAX))
}

/// Waits for the workload itself; for the kinds that run pods, returns them.
async fn wait_workload(
    client: &kube::Client,
    namespace: &str,
    check: &ReadyCheck,
) -> Result<Option<ReadyPods>> {
    let name = check.name.as_str();
    let what = format!("{} {name} to be ready", check.kind.name());
    let c = client.clone();
    let ready = match check.kind {
        WorkloadKind::StatefulSet => {
            wait_replicated::<StatefulSet>(Api::namespaced(c, namespace), check, what).await?
        }
        WorkloadKind::Deployment => {
            wait_replicated::<Deployment>(Api::namespaced(c, namespace), check, what).await?
        }
        WorkloadKind::DaemonSet => {
            let api: Api<DaemonSet> = Api::namespaced(c, namespace);
            let d = with_timeout(
                what,
                check.timeout,
                await_condition(api, name, |o: Option<&DaemonSet>| {
                    o.and_then(|d| d.status.as_ref()).is_some_and(|s| {
                        s.desired_number_scheduled > 0
                            && s.number_ready == s.desired_number_scheduled
                    })
                }),
            )
            .await?;
            d.and_then(|d| {
                let ready = d.status.as_ref().map_or(0, |s| s.number_ready);
                Some(ReadyPods::of(&d.spec?.template, ready))
            })
        }
        WorkloadKind::Pvc => {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(c, namespace);
            with_timeout(
                what,
                check.timeout,
                await_condition(api, name, |o: Option<&PersistentVolumeClaim>| {
                    o.and_then(|p| p.status.as_ref())
                        .is_some_and(|s| s.phase.as_deref() == Some("Bound"))
                }),
            )
            .await?;
            None
        }
        WorkloadKind::Pdb => {
            let api: Api<PodDisruptionBudget> = Api::namespaced(c, namespace);
            with_timeout(
                what,
                check.timeout,
                await_condition(api, name, |o: Option<&PodDisruptionBudget>| {
                    o.and_then(|p| p.status.as_ref())
                        .is_some_and(|s| s.observed_generation.is_some())
                }),
            )
            .await?;
            None
        }
    };
    Ok(ready)
}

/// A workload that runs `replicas` copies of one pod template.
trait Replicated {
    fn replicas(&self) -> Option<i32>;
    fn ready_replicas(&self) -> Option<i32>;
    fn template(self) -> Option<PodTemplateSpec>;
}

/// Both keep the count in `spec.replicas`, the ready count in
/// `status.readyReplicas` and the pods' template in `spec.template`.
macro_rules! replicated {
    ($($kind:ty),+) => {$(
        impl Replicated for $kind {
            fn replicas(&self) -> Option<i32> {
                self.spec.as_ref().and_then(|s| s.replicas)
            }
            fn ready_replicas(&self) -> Option<i32> {
                self.status.as_ref().and_then(|s| s.ready_replicas)
            }
            fn template(self) -> Option<PodTemplateSpec> {
                self.spec.map(|s| s.template)
            }
        }
    )+};
}

replicated!(StatefulSet, Deployment);

/// Waits (watching) until a StatefulSet or Deployment has the ready
/// replicas the check wants; returns its pods.
async fn wait_replicated<K>(
    api: Api<K>,
    check: &ReadyCheck,
    what: String,
) -> Result<Option<ReadyPods>>
where
    K: Replicated
        + kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let named = check.replicas;
    let want_of = move |k: &K| wanted(named, k.replicas());
    let found = with_timeout(
        what,
        check.timeout,
        await_condition(api, &check.name, move |o: Option<&K>| {
            o.is_some_and(|k| ready_of(k.ready_replicas()) >= want_of(k))
        }),
    )
    .await?;
    Ok(found.and_then(|k| {
        let want = want_of(&k);
        Some(ReadyPods::of(&k.template()?, want))
    }))
}

fn ready_of(n: Option<i32>) -> i32 {
    n.unwrap_or(0)
}

/// Whether a Service routes to pods with these labels: a selector, all of
/// whose pairs the labels hold (a Service without one has its endpoints
/// managed by someone else).
fn selects(svc: &Service, labels: &BTreeMap<String, String>) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .is_some_and(|sel| !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// Ready endpoints across a Service's slices, each pod (or address) once:
/// an endpoint without a `ready` condition counts as ready, as the API says.
fn ready_count<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> usize {
    let mut ready = BTreeSet::new();
    for s in slices {
        for e in &s.endpoints {
            if e.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            let pod = e.target_ref.as_ref().and_then(|r| r.name.clone());
            if let Some(id) = pod.or_else(|| e.addresses.first().cloned()) {
                ready.insert(id);
            }
        }
    }
    ready.len()
}

/// Watches a Service's EndpointSlices until they hold `want` ready endpoints.
async fn ready_endpoints_at_least(
    client: &kube::Client,
    namespace: &str,
    service: &str,
    want: usize,
) -> Result<()> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().labels(&format!("{SERVICE_LABEL}={service}"));
    let mut stream = std::pin::pin!(watcher::watcher(api, config));
    let mut slices: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let mut relist: Option<BTreeMap<String, EndpointSlice>> = None;
    while let Some(event) = stream.next().await {
        match event.map_err(|e| {
            Error::Watch(format!(
                "EndpointSlices of {service}: {}",
                super::api_text(&e)
            ))
        })? {
            Event::Init => relist = Some(BTreeMap::new()),
            Event::InitApply(s) => {
                if let Some(r) = relist.as_mut() {
                    r.insert(s.name_any(), s);
                }
            }
            Event::InitDone => slices = relist.take().unwrap_or_default(),
            Event::Apply(s) => {
                slices.insert(s.name_any(), s);
            }
            Event::Delete(s) => {
                slices.remove(&s.name_any());
            }
        }
        if relist.is_none() && ready_count(slices.values()) >= want {
            return Ok(());
        }
    }
    Err(Error::Watch(format!(
        "the watch of {service}'s EndpointSlices ended"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(selector: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"selector": selector}
        }))
        .unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_service_selects_pods_holding_every_pair_of_its_selector() {
        let pods = labels(&[("app", "web"), ("tier", "front")]);
        assert!(selects(&service(json!({"app": "web"})), &pods));
        assert!(selects(
            &service(json!({"app": "web", "tier": "front"})),
            &pods
        ));
        assert!(!selects(&service(json!({"app": "db"})), &pods));
        assert!(!selects(
            &service(json!({"app": "web", "zone": "a"})),
            &pods
        ));
        // No selector: someone else manages its endpoints.
        assert!(!selects(&service(json!({})), &pods));
        let bare: Service = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        assert!(!selects(&bare, &pods));
    }

    fn slice(name: &str, endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "addressType": "IPv4",
            "endpoints": endpoints
        }))
        .unwrap()
    }

    #[test]
    fn ready_endpoints_count_each_pod_once_and_absent_ready_as_ready() {
        let a = slice(
            "web-a",
            json!([
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "web-1"}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}, "targetRef": {"kind": "Pod", "name": "web-2"}},
                {"addresses": ["10.0.0.3"], "targetRef": {"kind": "Pod", "name": "web-3"}}
            ]),
        );
        let b = slice(
            "web-b",
            json!([
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "web-1"}},
                {"addresses": ["10.0.0.9"], "conditions": {"ready": true}}
            ]),
        );
        assert_eq!(ready_count([&a]), 2);
        assert_eq!(ready_count([&a, &b]), 3);
        assert_eq!(ready_count([]), 0);
    }

    #[test]
    fn the_wanted_count_is_the_named_one_or_the_specs() {
        assert_eq!(wanted(Some(2), Some(4)), 2);
        assert_eq!(wanted(None, Some(4)), 4);
        assert_eq!(wanted(None, None), 1);
    }
}
