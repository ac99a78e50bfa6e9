//! A node played by KWOK going down as a kubelet with graceful node shutdown
//! goes down (`kubelet.rs` decides when): once logind has announced the
//! shutdown, the kubelet reports its node NotReady, stops its pods (the
//! critical ones last), gives each a DisruptionTarget condition and lets the
//! machine power off. The node's kwok is gone by then (`SimCluster::
//! shutdown_node`), so nodefall posts what that kubelet would have posted.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::kubelet::{
    CRITICAL_PRIORITY, SHUTDOWN_MESSAGE, SHUTDOWN_REASON, SHUTTING_DOWN, STOP_PHASE,
};
use super::{Error, done_unless_gone};

/// Which of a node's pods a step of the shutdown stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Those below [`CRITICAL_PRIORITY`], stopped first.
    Others,
    Critical,
}

impl Which {
    fn of(pod: &Pod) -> Which {
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        if priority >= CRITICAL_PRIORITY {
            Which::Critical
        } else {
            Which::Others
        }
    }
}

/// Posts the shutting-down kubelet's last node status: Ready=False
/// (`KubeletNotReady`, "node is shutting down"). A Node that no longer
/// exists has nothing to report.
pub async fn report_shutting_down(
    client: &kube::Client,
    node: &str,
    now: jiff::Timestamp,
) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    let status = json!({"status": {"conditions": [{
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": SHUTTING_DOWN,
        "lastHeartbeatTime": now.to_string(),
        "lastTransitionTime": now.to_string(),
    }]}});
    done_unless_gone(
        api.patch_status(node, &PatchParams::default(), &Patch::Strategic(&status))
            .await,
    )
    .map(drop)
    .map_err(|source| Error::Kube {
        what: format!("reporting node {node} shutting down"),
        source: source.into(),
    })
}

/// Stops `which` pods of `node` that still run: not Ready, in their
/// containers' phase ([`STOP_PHASE`] when the pod asks for one, else
/// `Succeeded`: they exit on SIGTERM), with the kubelet's DisruptionTarget
/// condition. Returns how many it stopped.
pub async fn stop_pods(
    client: &kube::Client,
    node: &str,
    which: Which,
    now: jiff::Timestamp,
) -> Result<usize, Error> {
    let all: Api<Pod> = Api::all(client.clone());
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let pods = all.list(&params).await.map_err(|source| Error::Kube {
        what: format!("listing the pods of shutting-down node {node}"),
        source: source.into(),
    })?;
    let mut stopped = 0;
    for pod in pods.items.iter().filter(|p| Which::of(p) == which) {
        let Some(patch) = stopped_status(pod, now) else {
            continue;
        };
        let (Some(name), Some(ns)) = (
            pod.metadata.name.as_deref(),
            pod.metadata.namespace.as_deref(),
        ) else {
            continue;
        };
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        // Gone meanwhile: nothing left to stop.
        let there = done_unless_gone(
            api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await,
        )
        .map_err(|source| Error::Kube {
            what: format!("stopping pod {ns}/{name} of shutting-down node {node}"),
            source: source.into(),
        })?;
        stopped += usize::from(there);
    }
    Ok(stopped)
}

/// The status patch of a pod its kubelet stopped for a shutdown; none for a
/// pod that no longer runs.
fn stopped_status(pod: &Pod, now: jiff::Timestamp) -> Option<Value> {
    let status = pod.status.as_ref()?;
    if !matches!(status.phase.as_deref(), Some("Running" | "Pending")) {
        return None;
    }
    let phase = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STOP_PHASE))
        .map_or("Succeeded", String::as_str);
    let (exit_code, reason) = if phase == "Succeeded" {
        (0, "Completed")
    } else {
        // SIGTERM's exit status.
        (143, "Error")
    };
    let now = now.to_string();
    let containers: Vec<Value> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let started = status
                .container_statuses
                .iter()
                .flatten()
                .find(|s| s.name == c.name)
                .and_then(|s| s.state.as_ref()?.running.as_ref()?.started_at.as_ref())
                .map_or_else(|| now.clone(), |t| t.0.to_string());
            json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": "",
                "ready": false,
                "started": false,
                "restartCount": 0,
                "state": {"terminated": {
                    "exitCode": exit_code,
                    "reason": reason,
                    "startedAt": started,
                    "finishedAt": now,
                }},
            })
        })
        .collect();
    let condition = |kind: &str, state: &str, reason: &str| json!({"type": kind, "status": state, "reason": reason, "lastTransitionTime": now});
    let mut disruption = condition("DisruptionTarget", "True", SHUTDOWN_REASON);
    disruption["message"] = SHUTDOWN_MESSAGE.into();
    Some(json!({"status": {
        "phase": phase,
        "conditions": [
            disruption,
            condition("Ready", "False", "PodCompleted"),
            condition("ContainersReady", "False", "PodCompleted"),
        ],
        "containerStatuses": containers,
    }}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, priority: Option<i32>, annotations: &[(&str, &str)]) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "web-0", "namespace": "ns",
                "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<std::collections::BTreeMap<_, _>>(),
            },
            "spec": {"priority": priority, "containers": [{"name": "web", "image": "agnhost"}]},
            "status": {"phase": phase, "containerStatuses": [{
                "name": "web", "image": "agnhost", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {"startedAt": "2026-11-26T06:58:19Z"}},
            }]},
        }))
        .unwrap()
    }

    fn now() -> jiff::Timestamp {
        "2026-11-26T06:58:22.667Z".parse().unwrap()
    }

    #[test]
    fn a_running_pod_is_stopped_not_ready_with_the_kubelets_disruption_target() {
        let p = stopped_status(&pod("Running", None, &[]), now()).unwrap();
        let s = &p["status"];
        assert_eq!(s["phase"], "Succeeded");
        let c = &s["conditions"];
        assert_eq!(c[0]["type"], "DisruptionTarget");
        assert_eq!(c[0]["reason"], "TerminationByKubelet");
        assert_eq!(c[0]["message"], SHUTDOWN_MESSAGE);
        assert_eq!(
            (&c[1]["type"], &c[1]["status"]),
            (&"Ready".into(), &"False".into())
        );
        let t = &s["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(t["exitCode"], 0);
        assert_eq!(t["startedAt"], "2026-11-26T06:58:19Z");
        assert_eq!(t["finishedAt"], "2026-11-26T06:58:22.667Z");
    }

    #[test]
    fn a_pod_can_ask_for_another_phase_and_a_finished_one_is_left_alone() {
        let p = stopped_status(&pod("Running", None, &[(STOP_PHASE, "Failed")]), now()).unwrap();
        assert_eq!(p["status"]["phase"], "Failed");
        assert_eq!(
            p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            143
        );
        for done in ["Succeeded", "Failed"] {
            assert_eq!(stopped_status(&pod(done, None, &[]), now()), None);
        }
    }

    #[test]
    fn critical_pods_are_those_of_the_system_priority_classes() {
        assert_eq!(Which::of(&pod("Running", None, &[])), Which::Others);
        assert_eq!(Which::of(&pod("Running", Some(1000), &[])), Which::Others);
        assert_eq!(
            Which::of(&pod("Running", Some(2_000_001_000), &[])),
            Which::Critical
        );
    }
}
