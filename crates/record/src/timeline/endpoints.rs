//! What a Service's clients are routed to: the endpoints of its
//! EndpointSlices, folded from their transitions, and the metrics on them
//! (pure).
//!
//! kube-proxy (and most Service meshes and ingress controllers) send traffic
//! only to endpoints whose `ready` condition is true. After a node fails, its
//! pods' endpoints stay ready until the node lifecycle controller marks the
//! pods not Ready (about the node monitor grace period): requests routed to
//! them meanwhile time out. That span is the Kubernetes part of what clients
//! see ([`EndpointMetrics::stale_endpoint_window`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Change, Ms, ObjectRef, Transition, World};

/// One endpoint as last seen in its slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointView {
    /// The Service (`kubernetes.io/service-name` label of the slice).
    pub service: String,
    pub address: String,
    /// The pod behind it (`targetRef`), if it is one.
    pub pod: Option<String>,
    /// `nodeName`.
    pub node: Option<String>,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

/// Where one endpoint lives: (slice, address).
pub type EndpointKey = (String, String);

impl World {
    /// Ready endpoints of `service` (distinct addresses, over all its
    /// slices), optionally only those on (or not on) a node.
    pub fn ready_endpoints(&self, service: &str, on: Option<&str>, not_on: Option<&str>) -> usize {
        self.ready_endpoint_views(service, on, not_on)
            .map(|e| e.address.as_str())
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// The ready endpoints [`World::ready_endpoints`] counts, one per slice
    /// an address is in.
    pub fn ready_endpoint_views<'w>(
        &'w self,
        service: &'w str,
        on: Option<&'w str>,
        not_on: Option<&'w str>,
    ) -> impl Iterator<Item = &'w EndpointView> {
        self.endpoints
            .values()
            .filter(move |e| e.service == service && e.ready)
            .filter(move |e| on.is_none_or(|n| e.node.as_deref() == Some(n)))
            .filter(move |e| not_on.is_none_or(|n| e.node.as_deref() != Some(n)))
    }
}

/// Folds a transition of an EndpointSlice.
pub(super) fn apply(world: &mut World, t: &Transition) {
    let ObjectRef::EndpointSlice { name, service } = &t.object else {
        return;
    };
    match &t.change {
        Change::Endpoint {
            address,
            pod,
            node,
            ready,
            serving,
            terminating,
        } => {
            world.endpoints.insert(
                (name.clone(), address.clone()),
                EndpointView {
                    service: service.clone(),
                    address: address.clone(),
                    pod: pod.clone(),
                    node: node.clone(),
                    ready: *ready,
                    serving: *serving,
                    terminating: *terminating,
                },
            );
        }
        Change::EndpointRemoved { address } => {
            world.endpoints.remove(&(name.clone(), address.clone()));
        }
        Change::EndpointSliceDeleted => world.endpoints.retain(|(slice, _), _| slice != name),
        _ => {}
    }
}

/// An endpoint on a failed node that was ready at T0, and when it stopped
/// being ready (not ready, or removed from its slice).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StaleEndpoint {
    pub service: String,
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    pub node: String,
    /// Relative to T0; absent: still ready when the steps ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unready_at: Option<Ms>,
}

/// A Service's ready endpoints, each time the count changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceEndpoints {
    pub service: String,
    /// Ready endpoints just before T0.
    pub ready_before: u32,
    /// Fewest ready endpoints after T0.
    pub min_ready: u32,
    /// `(ms relative to T0, ready endpoints)`, from T0 on, one per change.
    pub points: Vec<(Ms, u32)>,
}

/// The endpoint figures of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointMetrics {
    /// How long the failed nodes' endpoints stayed ready after T0: the last
    /// of their `unreadyAt` (ms). Absent when none was ready at T0, or one
    /// was still ready when the steps ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_endpoint_window: Option<Ms>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_endpoints: Vec<StaleEndpoint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ready_endpoints: Vec<ServiceEndpoints>,
}

/// Endpoint metrics from the transitions up to the end of the steps. `t0`
/// is the first fault, `failed` the nodes the faults hit.
pub fn metrics(transitions: &[Transition], t0: Ms, failed: &[String]) -> EndpointMetrics {
    let mut world = World::at(transitions, t0 - 1);
    let ready_count = |w: &World, service: &str| {
        u32::try_from(w.ready_endpoints(service, None, None)).unwrap_or(u32::MAX)
    };
    let mut stale: BTreeMap<EndpointKey, StaleEndpoint> = world
        .endpoints
        .iter()
        .filter(|(_, e)| e.ready)
        .filter_map(|(key, e)| {
            let node = e.node.clone().filter(|n| failed.contains(n))?;
            Some((
                key.clone(),
                StaleEndpoint {
                    service: e.service.clone(),
                    address: e.address.clone(),
                    pod: e.pod.clone(),
                    node,
                    unready_at: None,
                },
            ))
        })
        .collect();
    let mut series: BTreeMap<String, ServiceEndpoints> = BTreeMap::new();
    let services = |w: &World| -> BTreeSet<String> {
        w.endpoints.values().map(|e| e.service.clone()).collect()
    };
    for service in services(&world) {
        let n = ready_count(&world, &service);
        series.insert(
            service.clone(),
            ServiceEndpoints {
                service,
                ready_before: n,
                min_ready: n,
                points: vec![(0, n)],
            },
        );
    }
    let after: Vec<&Transition> = transitions.iter().filter(|t| t.at >= t0).collect();
    let mut i = 0;
    while i < after.len() {
        // Every change of the same instant before counting.
        let at = after[i].at;
        while i < after.len() && after[i].at == at {
            world.apply(after[i]);
            i += 1;
        }
        for (key, s) in stale.iter_mut().filter(|(_, s)| s.unready_at.is_none()) {
            if world.endpoints.get(key).is_none_or(|e| !e.ready) {
                s.unready_at = Some(at - t0);
            }
        }
        let mut names = services(&world);
        names.extend(series.keys().cloned());
        for service in names {
            let n = ready_count(&world, &service);
            let entry = series
                .entry(service.clone())
                .or_insert_with(|| ServiceEndpoints {
                    service,
                    ready_before: 0,
                    min_ready: 0,
                    points: vec![(0, 0)],
                });
            if entry.points.last().is_none_or(|&(_, last)| last != n) {
                entry.points.push((at - t0, n));
            }
            entry.min_ready = entry.min_ready.min(n);
        }
    }
    let stale: Vec<StaleEndpoint> = stale.into_values().collect();
    let stale_endpoint_window = if stale.is_empty() {
        None
    } else {
        stale
            .iter()
            .map(|s| s.unready_at)
            .collect::<Option<Vec<Ms>>>()
            .and_then(|v| v.into_iter().max())
    };
    EndpointMetrics {
        stale_endpoint_window,
        stale_endpoints: stale,
        ready_endpoints: series.into_values().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::seen as t;

    fn slice(name: &str) -> ObjectRef {
        ObjectRef::EndpointSlice {
            name: name.into(),
            service: "web".into(),
        }
    }

    fn ep(address: &str, node: &str, ready: bool) -> Change {
        Change::Endpoint {
            address: address.into(),
            pod: Some(format!("pod-{address}")),
            node: Some(node.into()),
            ready,
            serving: ready,
            terminating: false,
        }
    }

    fn timeline() -> Vec<Transition> {
        vec![
            t(0, slice("web-a"), ep("10.0.1.1", "w1", true)),
            t(0, slice("web-a"), ep("10.0.1.2", "w1", true)),
            t(0, slice("web-a"), ep("10.0.2.1", "w2", true)),
            // T0 = 1_000; w1 fails. One endpoint goes not ready at +40s,
            // the other is removed at +41s; a replacement appears on w2.
            t(41_000, slice("web-a"), ep("10.0.1.1", "w1", false)),
            t(
                42_000,
                slice("web-a"),
                Change::EndpointRemoved {
                    address: "10.0.1.2".into(),
                },
            ),
            t(50_000, slice("web-b"), ep("10.0.2.2", "w2", false)),
            t(52_000, slice("web-b"), ep("10.0.2.2", "w2", true)),
        ]
    }

    #[test]
    fn counts_ready_endpoints_by_node() {
        let ts = timeline();
        let w = World::at(&ts, 0);
        assert_eq!(w.ready_endpoints("web", None, None), 3);
        assert_eq!(w.ready_endpoints("web", Some("w1"), None), 2);
        assert_eq!(w.ready_endpoints("web", None, Some("w1")), 1);
        assert_eq!(w.ready_endpoints("other", None, None), 0);
        let w = World::at(&ts, 41_000);
        assert_eq!(w.ready_endpoints("web", Some("w1"), None), 1);
        let w = World::at(&ts, 52_000);
        assert_eq!(w.ready_endpoints("web", Some("w1"), None), 0);
        assert_eq!(w.ready_endpoints("web", None, None), 2);
        // A deleted slice takes its endpoints with it.
        let mut ts = ts;
        ts.push(t(60_000, slice("web-b"), Change::EndpointSliceDeleted));
        assert_eq!(World::at(&ts, 60_000).ready_endpoints("web", None, None), 1);
    }

    #[test]
    fn stale_window_is_the_last_failed_endpoint_going_unready() {
        let m = metrics(&timeline(), 1_000, &["w1".into()]);
        assert_eq!(m.stale_endpoints.len(), 2);
        assert_eq!(m.stale_endpoints[0].unready_at, Some(40_000));
        assert_eq!(m.stale_endpoints[1].unready_at, Some(41_000));
        assert_eq!(m.stale_endpoint_window, Some(41_000));
        let web = &m.ready_endpoints[0];
        assert_eq!((web.ready_before, web.min_ready), (3, 1));
        assert_eq!(
            web.points,
            vec![(0, 3), (40_000, 2), (41_000, 1), (51_000, 2)]
        );
    }

    #[test]
    fn no_window_when_an_endpoint_stays_ready_or_none_was() {
        let ts: Vec<Transition> = timeline().into_iter().take(4).collect();
        let m = metrics(&ts, 1_000, &["w1".into()]);
        assert_eq!(m.stale_endpoints[1].unready_at, None);
        assert_eq!(m.stale_endpoint_window, None, "10.0.1.2 still ready");
        let m = metrics(&timeline(), 1_000, &["w9".into()]);
        assert!(m.stale_endpoints.is_empty());
        assert_eq!(m.stale_endpoint_window, None);
    }
}
