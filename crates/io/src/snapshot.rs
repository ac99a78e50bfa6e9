//! Reads a cluster into a `predict::Snapshot`, read-only: one paged list
//! per kind (the list verb only, no per-pod call), so the reads on a
//! cluster of 10,000 pods are a few dozen requests.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Node, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod, PodSpec,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use serde::de::DeserializeOwned;

use crate::actions::list_paged;
use crate::observe::endpoints;
use crate::observe::kinds::toleration;
use crate::predict::snapshot::{self as snap, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot list {what}")]
    List {
        what: &'static str,
        #[source]
        source: crate::actions::ApiError,
    },
}

fn all<K>(client: &kube::Client) -> Api<K>
where
    K: kube::Resource<Scope = NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    Api::all(client.clone())
}

/// Every object of a kind, a page at a time, each boiled down by `keep` as
/// it arrives (10,000 pods never sit in memory whole).
async fn list<K, T>(
    api: Api<K>,
    what: &'static str,
    keep: impl Fn(K) -> Option<T>,
) -> Result<Vec<T>, Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    list_paged(&api, keep)
        .await
        .map_err(|source| Error::List { what, source })
}

/// Reads the snapshot. A kind the caller may not list is an error naming
/// it (the Role in docs/predict.md lists what is read).
pub async fn read(client: &kube::Client) -> Result<Snapshot, Error> {
    let nodes = list(Api::<Node>::all(client.clone()), "nodes", |n| {
        Some(node(&n))
    })
    .await?;
    let deployment_of: BTreeMap<(String, String), String> =
        list(all::<ReplicaSet>(client), "replicasets", |rs| {
            deployment_of(&rs)
        })
        .await?
        .into_iter()
        .collect();
    let pods = list(all::<Pod>(client), "pods", |p| {
        Some(pod(&p, &deployment_of))
    })
    .await?;
    let mut workloads = list(all::<Deployment>(client), "deployments", |d| {
        Some(deployment(&d))
    })
    .await?;
    workloads.extend(
        list(all::<StatefulSet>(client), "statefulsets", |s| {
            Some(stateful_set(&s))
        })
        .await?,
    );
    let slices = list(all::<EndpointSlice>(client), "endpointslices", Some).await?;
    let budgets = list(
        all::<PodDisruptionBudget>(client),
        "poddisruptionbudgets",
        |b| Some(budget(&b)),
    )
    .await?;
    let claims = list(
        all::<PersistentVolumeClaim>(client),
        "persistentvolumeclaims",
        Some,
    )
    .await?;
    let attachments = list(
        Api::<VolumeAttachment>::all(client.clone()),
        "volumeattachments",
        Some,
    )
    .await?;
    let volumes = list(
        Api::<PersistentVolume>::all(client.clone()),
        "persistentvolumes",
        |v| Some(volume_terms(&v)),
    )
    .await?
    .into_iter()
    .collect();
    Ok(Snapshot {
        nodes,
        pods,
        workloads,
        services: services(&slices),
        budgets,
        claims: self::claims(&claims, &attachments, &volumes),
    })
}

/// What was listed, before it is boiled down.
#[derive(Debug, Default)]
pub struct Objects {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub sets: Vec<ReplicaSet>,
    pub deployments: Vec<Deployment>,
    pub stateful: Vec<StatefulSet>,
    pub slices: Vec<EndpointSlice>,
    pub budgets: Vec<PodDisruptionBudget>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub attachments: Vec<VolumeAttachment>,
    pub volumes: Vec<PersistentVolume>,
}

fn name_of(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

fn controller(refs: Option<&Vec<OwnerReference>>) -> Option<&OwnerReference> {
    let refs = refs?;
    refs.iter()
        .find(|r| r.controller == Some(true))
        .or(refs.first())
}

/// Boils listed objects down as [`read`] does (the tests' way in).
pub fn build(o: Objects) -> Snapshot {
    let deployment_of: BTreeMap<(String, String), String> =
        o.sets.iter().filter_map(deployment_of).collect();
    let mut workloads: Vec<snap::Workload> = o.deployments.iter().map(deployment).collect();
    workloads.extend(o.stateful.iter().map(stateful_set));
    Snapshot {
        nodes: o.nodes.iter().map(node).collect(),
        pods: o.pods.iter().map(|p| pod(p, &deployment_of)).collect(),
        workloads,
        services: services(&o.slices),
        budgets: o.budgets.iter().map(budget).collect(),
        claims: claims(
            &o.claims,
            &o.attachments,
            &o.volumes.iter().map(volume_terms).collect(),
        ),
    }
}

/// A PersistentVolume's required node affinity, by its name.
fn volume_terms(v: &PersistentVolume) -> (String, Vec<snap::NodeTerm>) {
    let terms = v
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| node_terms(&r.node_selector_terms))
        .unwrap_or_default();
    (v.metadata.name.clone().unwrap_or_default(), terms)
}

fn node_terms(terms: &[NodeSelectorTerm]) -> Vec<snap::NodeTerm> {
    let reqs = |rs: Option<&Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement>>| {
        rs.into_iter()
            .flatten()
            .map(|r| snap::Requirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone().unwrap_or_default(),
            })
            .collect()
    };
    terms
        .iter()
        .map(|t| snap::NodeTerm {
            labels: reqs(t.match_expressions.as_ref()),
            fields: reqs(t.match_fields.as_ref()),
        })
        .collect()
}

/// A ReplicaSet's Deployment, keyed by the ReplicaSet's namespace and name.
fn deployment_of(rs: &ReplicaSet) -> Option<((String, String), String)> {
    let owner = controller(rs.metadata.owner_references.as_ref())?;
    (owner.kind == "Deployment").then(|| (name_of(&rs.metadata), owner.name.clone()))
}

fn node(n: &Node) -> snap::Node {
    let spec = n.spec.as_ref();
    snap::Node {
        name: n.metadata.name.clone().unwrap_or_default(),
        ready: n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
            .unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        control_plane: n
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key("node-role.kubernetes.io/control-plane")),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| snap::Taint {
                        key: t.key.clone(),
                        value: t.value.clone().unwrap_or_default(),
                        effect: t.effect.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        allocatable: n
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .map(|a| snap::Resources {
                cpu_milli: a.get("cpu").map_or(0, |q| quantity::milli(&q.0)),
                memory: a.get("memory").map_or(0, |q| quantity::units(&q.0)),
                pods: a.get("pods").map_or(0, |q| quantity::units(&q.0)),
            }),
    }
}

fn deployment(d: &Deployment) -> snap::Workload {
    let (namespace, name) = name_of(&d.metadata);
    snap::Workload {
        kind: "Deployment".into(),
        namespace,
        name,
        replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
    }
}

fn stateful_set(s: &StatefulSet) -> snap::Workload {
    let (namespace, name) = name_of(&s.metadata);
    snap::Workload {
        kind: "StatefulSet".into(),
        namespace,
        name,
        replicas: s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
    }
}

fn pod(p: &Pod, deployment_of: &BTreeMap<(String, String), String>) -> snap::Pod {
    let (namespace, name) = name_of(&p.metadata);
    let spec = p.spec.as_ref();
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let owner = match controller(p.metadata.owner_references.as_ref()) {
        _ if mirror => snap::Owner::Static,
        None => snap::Owner::None,
        Some(r) => match r.kind.as_str() {
            "ReplicaSet" => match deployment_of.get(&(namespace.clone(), r.name.clone())) {
                Some(d) => snap::Owner::Deployment(d.clone()),
                None => snap::Owner::ReplicaSet(r.name.clone()),
            },
            "StatefulSet" => snap::Owner::StatefulSet(r.name.clone()),
            "DaemonSet" => snap::Owner::DaemonSet(r.name.clone()),
            "Job" => snap::Owner::Job(r.name.clone()),
            "Node" => snap::Owner::Static,
            other => snap::Owner::Other(format!("{other}/{}", r.name)),
        },
    };
    let tolerations = spec
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let status = p.status.as_ref();
    snap::Pod {
        namespace,
        name,
        node: spec.and_then(|s| s.node_name.clone()),
        owner,
        phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True"),
        terminating: p.metadata.deletion_timestamp.is_some(),
        labels: p.metadata.labels.clone().unwrap_or_default(),
        unreachable: toleration(tolerations, "node.kubernetes.io/unreachable"),
        not_ready: toleration(tolerations, "node.kubernetes.io/not-ready"),
        claims: volumes
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.clone())
            .collect(),
        empty_dir: volumes.iter().any(|v| v.empty_dir.is_some()),
        grace_seconds: spec
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30),
        priority: spec.and_then(|s| s.priority).unwrap_or(0),
        scheduling: spec
            .map(|s| scheduling(s, &p.metadata.labels.clone().unwrap_or_default()))
            .unwrap_or_default(),
    }
}

/// What the scheduler weighs to place a pod like this one.
fn scheduling(s: &PodSpec, labels: &BTreeMap<String, String>) -> snap::Scheduling {
    let sum = |cs: &[k8s_openapi::api::core::v1::Container]| {
        cs.iter().fold(snap::Resources::default(), |acc, c| {
            let r = c.resources.as_ref().and_then(|r| r.requests.as_ref());
            acc.plus(snap::Resources {
                cpu_milli: r
                    .and_then(|r| r.get("cpu"))
                    .map_or(0, |q| quantity::milli(&q.0)),
                memory: r
                    .and_then(|r| r.get("memory"))
                    .map_or(0, |q| quantity::units(&q.0)),
                pods: 0,
            })
        })
    };
    let main = sum(&s.containers);
    // an init container runs alone: the pod needs the larger of the two
    let init = s
        .init_containers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|c| sum(std::slice::from_ref(c)))
        .fold(snap::Resources::default(), |a, b| snap::Resources {
            cpu_milli: a.cpu_milli.max(b.cpu_milli),
            memory: a.memory.max(b.memory),
            pods: 0,
        });
    let requests = snap::Resources {
        cpu_milli: main.cpu_milli.max(init.cpu_milli),
        memory: main.memory.max(init.memory),
        pods: 1,
    };
    let affinity = s.affinity.as_ref();
    snap::Scheduling {
        requests,
        tolerations: s
            .tolerations
            .iter()
            .flatten()
            .map(|t| snap::TolerationSpec {
                key: t.key.clone().unwrap_or_default(),
                operator: t.operator.clone().unwrap_or_default(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone().unwrap_or_default(),
            })
            .collect(),
        node_selector: s.node_selector.clone().unwrap_or_default(),
        node_terms: affinity
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|r| node_terms(&r.node_selector_terms))
            .unwrap_or_default(),
        spread: s
            .topology_spread_constraints
            .iter()
            .flatten()
            .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
            .filter_map(|c| {
                // a constraint without a selector, or an empty one, counts
                // no pod: never a skew (countPodsMatchSelector)
                let given = c.label_selector.as_ref()?;
                let mut sel = selector(given);
                if sel.match_labels.is_empty() && sel.match_expressions.is_empty() {
                    return None;
                }
                for key in c.match_label_keys.iter().flatten() {
                    if let Some(v) = labels.get(key) {
                        sel.match_labels.insert(key.clone(), v.clone());
                    }
                }
                Some(snap::Spread {
                    max_skew: c.max_skew,
                    topology_key: c.topology_key.clone(),
                    selector: sel,
                })
            })
            .collect(),
        anti_affinity: affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
            .filter_map(|t| {
                Some(snap::AntiAffinity {
                    topology_key: t.topology_key.clone(),
                    selector: selector(t.label_selector.as_ref()?),
                    namespaces: t.namespaces.clone().unwrap_or_default(),
                })
            })
            .collect(),
    }
}

fn services(slices: &[EndpointSlice]) -> Vec<snap::Service> {
    let mut by_service: BTreeMap<(String, String), Vec<snap::Endpoint>> = BTreeMap::new();
    for s in slices {
        let Some(service) = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(endpoints::SERVICE_LABEL))
        else {
            continue;
        };
        let ns = s.metadata.namespace.clone().unwrap_or_default();
        let eps = by_service.entry((ns, service.clone())).or_default();
        for e in &s.endpoints {
            eps.push(snap::Endpoint {
                pod: endpoints::pod_ref(e).and_then(|r| r.name.clone()),
                node: e.node_name.clone(),
                ready: endpoints::conditions(e).0,
            });
        }
    }
    by_service
        .into_iter()
        .map(|((namespace, name), endpoints)| snap::Service {
            namespace,
            name,
            endpoints,
        })
        .collect()
}

fn selector(s: &LabelSelector) -> snap::LabelSelector {
    snap::LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|r| snap::Requirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

fn budget(b: &PodDisruptionBudget) -> snap::Budget {
    let (namespace, name) = name_of(&b.metadata);
    let status = b.status.as_ref();
    snap::Budget {
        namespace,
        name,
        selector: b
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .map(selector),
        disruptions_allowed: status.map_or(0, |s| s.disruptions_allowed),
        current_healthy: status.map_or(0, |s| s.current_healthy),
        desired_healthy: status.map_or(0, |s| s.desired_healthy),
    }
}

fn claims(
    claims: &[PersistentVolumeClaim],
    attachments: &[VolumeAttachment],
    volumes: &BTreeMap<String, Vec<snap::NodeTerm>>,
) -> Vec<snap::Claim> {
    claims
        .iter()
        .map(|c| {
            let (namespace, name) = name_of(&c.metadata);
            let volume = c.spec.as_ref().and_then(|s| s.volume_name.clone());
            let modes = c
                .status
                .as_ref()
                .and_then(|s| s.access_modes.clone())
                .or_else(|| c.spec.as_ref().and_then(|s| s.access_modes.clone()))
                .unwrap_or_default();
            snap::Claim {
                namespace,
                name,
                single_node: modes
                    .iter()
                    .any(|m| m == "ReadWriteOnce" || m == "ReadWriteOncePod"),
                attached_to: attachments
                    .iter()
                    .filter(|a| {
                        volume.is_some()
                            && a.spec.source.persistent_volume_name.as_ref() == volume.as_ref()
                    })
                    .map(|a| a.spec.node_name.clone())
                    .collect(),
                node_terms: volume
                    .as_ref()
                    .and_then(|v| volumes.get(v))
                    .cloned()
                    .unwrap_or_default(),
                volume,
            }
        })
        .collect()
}

mod quantity;
#[cfg(test)]
mod tests;
