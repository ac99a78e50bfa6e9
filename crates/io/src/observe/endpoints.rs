//! EndpointSlices: each endpoint's conditions, with its pod and node, as the
//! Service's clients are routed by them.

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use kube::ResourceExt as _;

use super::fold::{Diff, Differ};
use crate::timeline::{Change, ObjectRef};

/// The label naming a slice's Service.
pub const SERVICE_LABEL: &str = "kubernetes.io/service-name";

#[derive(Debug)]
pub struct EndpointSliceDiff;

/// One endpoint's fields that matter, by its first address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSnap {
    pod: Option<String>,
    node: Option<String>,
    ready: bool,
    serving: bool,
    terminating: bool,
}

/// The conditions as the API defines their absence: `ready` unknown counts
/// as ready, `serving` unknown follows `ready`, `terminating` unknown is false.
fn snap_of(e: &Endpoint) -> EndpointSnap {
    let (ready, serving, terminating) = conditions(e);
    EndpointSnap {
        pod: pod_ref(e).and_then(|r| r.name.clone()),
        node: e.node_name.clone(),
        ready,
        serving,
        terminating,
    }
}

/// An endpoint's `(ready, serving, terminating)`, absent ones as the API
/// defines them.
pub fn conditions(e: &Endpoint) -> (bool, bool, bool) {
    let c = e.conditions.as_ref();
    let ready = c.and_then(|c| c.ready).unwrap_or(true);
    (
        ready,
        c.and_then(|c| c.serving).unwrap_or(ready),
        c.and_then(|c| c.terminating).unwrap_or(false),
    )
}

/// The pod behind an endpoint (its `targetRef`, when that is a Pod).
pub fn pod_ref(e: &Endpoint) -> Option<&k8s_openapi::api::core::v1::ObjectReference> {
    e.target_ref
        .as_ref()
        .filter(|r| r.kind.as_deref().is_none_or(|k| k == "Pod"))
}

impl Differ<EndpointSlice> for EndpointSliceDiff {
    type Snap = BTreeMap<String, EndpointSnap>;
    fn key(&self, s: &EndpointSlice) -> String {
        s.uid().unwrap_or_else(|| s.name_any())
    }
    fn object(&self, s: &EndpointSlice) -> ObjectRef {
        ObjectRef::EndpointSlice {
            name: s.name_any(),
            service: s.labels().get(SERVICE_LABEL).cloned().unwrap_or_default(),
        }
    }
    fn snap(&self, s: &EndpointSlice) -> Self::Snap {
        s.endpoints
            .iter()
            .filter_map(|e| Some((e.addresses.first()?.clone(), snap_of(e))))
            .collect()
    }
    fn diff(&self, prev: Option<&Self::Snap>, s: &EndpointSlice, _initial: bool) -> Diff {
        let cur = self.snap(s);
        let empty = BTreeMap::new();
        let before = prev.unwrap_or(&empty);
        let mut out = Vec::new();
        for (address, e) in &cur {
            if before.get(address) != Some(e) {
                out.push((
                    None,
                    Change::Endpoint {
                        address: address.clone(),
                        pod: e.pod.clone(),
                        node: e.node.clone(),
                        ready: e.ready,
                        serving: e.serving,
                        terminating: e.terminating,
                    },
                ));
            }
        }
        for address in before.keys().filter(|a| !cur.contains_key(*a)) {
            out.push((
                None,
                Change::EndpointRemoved {
                    address: address.clone(),
                },
            ));
        }
        out
    }
    fn deleted(&self) -> Option<Change> {
        Some(Change::EndpointSliceDeleted)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::discovery::v1::EndpointConditions;

    use super::*;

    fn endpoint(address: &str, ready: Option<bool>, terminating: Option<bool>) -> Endpoint {
        Endpoint {
            addresses: vec![address.into()],
            conditions: Some(EndpointConditions {
                ready,
                serving: None,
                terminating,
            }),
            node_name: Some("w1".into()),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                name: Some(format!("web-{address}")),
                ..ObjectReference::default()
            }),
            ..Endpoint::default()
        }
    }

    fn slice(endpoints: Vec<Endpoint>) -> EndpointSlice {
        let mut s = EndpointSlice {
            address_type: "IPv4".into(),
            endpoints,
            ..EndpointSlice::default()
        };
        s.metadata.name = Some("web-abcde".into());
        s.metadata.labels = Some([(SERVICE_LABEL.to_owned(), "web".to_owned())].into());
        s
    }

    #[test]
    fn records_condition_changes_and_removals_per_endpoint() {
        let d = EndpointSliceDiff;
        let first = slice(vec![
            endpoint("10.0.0.1", None, None),
            endpoint("10.0.0.2", Some(true), None),
        ]);
        assert_eq!(
            d.object(&first),
            ObjectRef::EndpointSlice {
                name: "web-abcde".into(),
                service: "web".into()
            }
        );
        let added = d.diff(None, &first, true);
        assert_eq!(added.len(), 2);
        // An unknown `ready` is ready, and `serving` follows it.
        assert_eq!(
            added[0].1,
            Change::Endpoint {
                address: "10.0.0.1".into(),
                pod: Some("web-10.0.0.1".into()),
                node: Some("w1".into()),
                ready: true,
                serving: true,
                terminating: false,
            }
        );
        let prev = d.snap(&first);
        let second = slice(vec![endpoint("10.0.0.1", Some(false), Some(true))]);
        let changes = d.diff(Some(&prev), &second, false);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(matches!(
            &changes[0].1,
            Change::Endpoint {
                ready: false,
                serving: false,
                terminating: true,
                ..
            }
        ));
        assert_eq!(
            changes[1].1,
            Change::EndpointRemoved {
                address: "10.0.0.2".into()
            }
        );
        assert!(d.diff(Some(&d.snap(&second)), &second, false).is_empty());
    }
}
