//! `drain`: like `kubectl drain`: cordon the nodes, then evict their pods
//! through the policy/v1 Eviction API, all at once, retrying evictions a
//! PodDisruptionBudget refuses (HTTP 429) until the timeout.

use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, EvictParams, ListParams};
use kube::runtime::wait::{await_condition, conditions::is_deleted};

use super::{Error, Result, kube_err, set_unschedulable};
use crate::scenario::checked::Drain;

/// What a drain did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainSummary {
    /// `namespace/name` of every evicted pod.
    pub evicted: Vec<String>,
    /// Evictions refused with 429, in total.
    pub refusals: usize,
    /// Pods left alone: DaemonSet-managed and mirror pods.
    pub skipped: Vec<String>,
}

/// Why a pod is skipped, refused, or evicted.
fn classify(pod: &Pod, d: &Drain) -> std::result::Result<bool, String> {
    let name = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
    if pod
        .annotations()
        .contains_key("kubernetes.io/config.mirror")
    {
        return Ok(false);
    }
    let controller = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    if controller.is_some_and(|o| o.kind == "DaemonSet") {
        return if d.ignore_daemonsets {
            Ok(false)
        } else {
            Err(format!(
                "{name} is managed by a DaemonSet (set ignoreDaemonsets: true)"
            ))
        };
    }
    if controller.is_none() && !d.force {
        return Err(format!(
            "{name} has no controller, nothing would recreate it (set force: true to evict it anyway)"
        ));
    }
    let empty_dir = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|vs| vs.iter().any(|v| v.empty_dir.is_some()));
    if empty_dir && !d.delete_emptydir_data {
        return Err(format!(
            "{name} uses emptyDir data that eviction deletes (set deleteEmptydirData: true)"
        ));
    }
    Ok(true)
}

/// What a drain reports as it goes: each answer of the Eviction API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainEvent {
    /// Refused with 429 (a PodDisruptionBudget allows no more disruptions),
    /// the `refusal`-th time for this pod (`namespace/name`).
    Refused {
        pod: String,
        refusal: usize,
        message: String,
    },
    /// Evicted, after `refusals` refusals.
    Evicted { pod: String, refusals: usize },
}

impl std::fmt::Display for DrainEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DrainEvent::Refused {
                pod,
                refusal,
                message,
            } => write!(f, "429 evicting {pod} (refusal {refusal}): {message}"),
            DrainEvent::Evicted { pod, refusals } => {
                write!(f, "evicted {pod} after {refusals} refusal(s)")
            }
        }
    }
}

/// Drains `nodes` (node names) concurrently. `note` receives each eviction
/// and refusal as it happens.
pub async fn drain(
    client: &kube::Client,
    nodes: &[String],
    d: &Drain,
    note: &(dyn Fn(DrainEvent) + Sync),
) -> Result<DrainSummary> {
    let deadline = Instant::now() + d.timeout;
    for node in nodes {
        set_unschedulable(client, node, true).await?;
    }
    let all: Api<Pod> = Api::all(client.clone());
    let mut pods = Vec::new();
    let mut summary = DrainSummary::default();
    let mut blocked = Vec::new();
    for node in nodes {
        let mut lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        if let Some(s) = &d.pod_selector {
            lp = lp.labels(&s.to_string());
        }
        let list = all
            .list(&lp)
            .await
            .map_err(kube_err(format!("listing the pods of node {node}")))?;
        for pod in list.items {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            match classify(&pod, d) {
                Ok(true) => pods.push(pod),
                Ok(false) => summary.skipped.push(format!(
                    "{}/{}",
                    pod.namespace().unwrap_or_default(),
                    pod.name_any()
                )),
                Err(why) => blocked.push(why),
            }
        }
    }
    if !blocked.is_empty() {
        return Err(Error::DrainBlocked(blocked));
    }
    let results = join_all(pods.iter().map(|pod| evict(client, pod, d, deadline, note))).await;
    for r in results {
        let (name, refusals) = r?;
        summary.refusals += refusals;
        summary.evicted.push(name);
    }
    Ok(summary)
}

/// Evicts one pod, retrying 429s, and waits until it is gone.
async fn evict(
    client: &kube::Client,
    pod: &Pod,
    d: &Drain,
    deadline: Instant,
    note: &(dyn Fn(DrainEvent) + Sync),
) -> Result<(String, usize)> {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let full = format!("{ns}/{name}");
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut params = EvictParams::default();
    if let Some(g) = d.grace_period {
        params.delete_options = Some(
            DeleteParams::default().grace_period(u32::try_from(g.as_secs()).unwrap_or(u32::MAX)),
        );
    }
    let mut refusals = 0usize;
    loop {
        match api.evict(&name, &params).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok((full, refusals)),
            Err(kube::Error::Api(s)) if s.code == 429 => {
                refusals += 1;
                note(DrainEvent::Refused {
                    pod: full.clone(),
                    refusal: refusals,
                    message: s.message.clone(),
                });
                if Instant::now() + d.retry_interval > deadline {
                    return Err(Error::Timeout {
                        what: format!(
                            "the eviction of {full} ({refusals} refusals, last: {})",
                            s.message
                        ),
                        after: d.timeout,
                    });
                }
                // Like kubectl: a fixed pause between retries.
                tokio::time::sleep(d.retry_interval).await;
            }
            Err(e) => return Err(kube_err(format!("evicting {full}"))(e)),
        }
    }
    note(DrainEvent::Evicted {
        pod: full.clone(),
        refusals,
    });
    let uid = pod.uid().unwrap_or_default();
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    match tokio::time::timeout(left, await_condition(api, &name, is_deleted(&uid))).await {
        Ok(Ok(_)) => Ok((full, refusals)),
        Ok(Err(e)) => Err(Error::Watch(format!(
            "waiting for {full} to be deleted: {}",
            super::api_text(&e)
        ))),
        Err(_) => Err(Error::Timeout {
            what: format!("{full} to be deleted after its eviction"),
            after: d.timeout,
        }),
    }
}
