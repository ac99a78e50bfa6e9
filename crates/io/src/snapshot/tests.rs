use serde_json::json;

use super::*;
use crate::predict::snapshot::{Owner, Toleration};

fn from<K: DeserializeOwned>(v: serde_json::Value) -> K {
    serde_json::from_value(v).unwrap()
}

fn objects() -> Objects {
    Objects {
        nodes: vec![from(json!({
            "metadata": {"name": "w1", "labels": {"topology.kubernetes.io/zone": "a"}},
            "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "allocatable": {"cpu": "3500m", "memory": "8Gi", "pods": "110"}}
        }))],
        pods: vec![
            from(json!({
                "metadata": {"namespace": "shop", "name": "web-1", "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": "web-5d8", "uid": "u1", "controller": true}]},
                "spec": {"nodeName": "w1",
                    "containers": [
                        {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                        {"name": "b", "resources": {"requests": {"cpu": "1"}}}],
                    "initContainers": [
                        {"name": "i", "resources": {"requests": {"cpu": "2", "memory": "1Mi"}}}],
                    "nodeSelector": {"disk": "ssd"},
                    "affinity": {
                        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
                                "operator": "NotIn", "values": ["w9"]}]}]}},
                        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "kubernetes.io/hostname",
                             "labelSelector": {"matchLabels": {"app": "web"}}}]}},
                    "topologySpreadConstraints": [
                        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                         "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["app"],
                         "labelSelector": {"matchLabels": {"tier": "front"}}},
                        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                         "whenUnsatisfiable": "ScheduleAnyway",
                         "labelSelector": {"matchLabels": {"app": "web"}}}],
                    "tolerations": [
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 40}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                                {"name": "t", "emptyDir": {}}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            })),
            from(json!({
                "metadata": {"namespace": "kube-system", "name": "etcd-cp",
                    "annotations": {"kubernetes.io/config.mirror": "abc"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "cp",
                        "uid": "u2", "controller": true}]},
                "spec": {"nodeName": "cp", "containers": [], "priority": 2000001000,
                    "tolerations": [{"operator": "Exists", "effect": "NoExecute"}]},
                "status": {"phase": "Running"}
            })),
            from(json!({
                "metadata": {"namespace": "kube-system", "name": "proxy-x",
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                        "name": "proxy", "uid": "u3", "controller": true}]},
                "spec": {"nodeName": "w1", "containers": [],
                    "tolerations": [{"key": "node.kubernetes.io/unreachable",
                        "operator": "Exists", "effect": "NoExecute"}]},
                "status": {"phase": "Running"}
            })),
        ],
        sets: vec![from(json!({
            "metadata": {"namespace": "shop", "name": "web-5d8",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "web", "uid": "u4", "controller": true}]}
        }))],
        slices: vec![from(json!({
            "metadata": {"namespace": "shop", "name": "web-abc",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"], "nodeName": "w1",
                 "targetRef": {"kind": "Pod", "name": "web-1"}, "conditions": {}},
                {"addresses": ["10.0.0.2"], "nodeName": "w2",
                 "targetRef": {"kind": "Pod", "name": "web-2"}, "conditions": {"ready": false}}
            ]
        }))],
        budgets: vec![from(json!({
            "metadata": {"namespace": "shop", "name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["batch"]}]}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                "expectedPods": 1}
        }))],
        claims: vec![from(json!({
            "metadata": {"namespace": "shop", "name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-9"}
        }))],
        attachments: vec![from(json!({
            "metadata": {"name": "csi-1"},
            "spec": {"attacher": "x", "nodeName": "w1", "source": {"persistentVolumeName": "pv-9"}}
        }))],
        volumes: vec![from(json!({
            "metadata": {"name": "pv-9"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}}}
        }))],
        ..Objects::default()
    }
}

#[test]
fn objects_boil_down_to_owners_tolerations_endpoints_budgets_and_attachments() {
    let s = build(objects());
    assert_eq!(s.nodes[0].ready, "True");
    let taints: Vec<String> = s.nodes[0].taints.iter().map(ToString::to_string).collect();
    assert_eq!(taints, ["node.kubernetes.io/unreachable:NoSchedule"]);
    let a = s.nodes[0].allocatable.unwrap();
    assert_eq!((a.cpu_milli, a.memory, a.pods), (3500, 8 << 30, 110));
    assert_eq!(s.nodes[0].labels["topology.kubernetes.io/zone"], "a");
    let web = &s.pods[0];
    assert_eq!(
        web.owner,
        Owner::Deployment("web".into()),
        "through its ReplicaSet"
    );
    assert_eq!(
        web.unreachable,
        Toleration::Seconds(40),
        "the smallest matching"
    );
    assert_eq!(web.not_ready, Toleration::None);
    assert_eq!(web.claims, ["data"]);
    // what the fit weighs: requests (an init container's larger CPU, the
    // containers' memory summed), selector and affinity, the hard spread
    // only (with its matchLabelKeys), anti-affinity
    let sched = &web.scheduling;
    assert_eq!(
        (
            sched.requests.cpu_milli,
            sched.requests.memory,
            sched.requests.pods
        ),
        (2000, 64 << 20, 1)
    );
    assert_eq!(sched.node_selector["disk"], "ssd");
    assert_eq!(sched.node_terms[0].fields[0].operator, "NotIn");
    assert_eq!(
        sched.spread.len(),
        1,
        "ScheduleAnyway is soft: {:?}",
        sched.spread
    );
    assert_eq!(sched.spread[0].selector.match_labels["app"], "web");
    assert_eq!(
        sched.anti_affinity[0].topology_key,
        "kubernetes.io/hostname"
    );
    assert_eq!(sched.tolerations.len(), 2);
    assert_eq!(s.claims[0].node_terms[0].labels[0].values, ["a"]);
    assert!(web.empty_dir && web.ready);
    let etcd = &s.pods[1];
    assert_eq!(etcd.owner, Owner::Static, "a mirror pod");
    assert_eq!(etcd.unreachable, Toleration::Forever);
    assert_eq!(etcd.priority, 2_000_001_000);
    assert_eq!(s.pods[2].owner, Owner::DaemonSet("proxy".into()));
    assert_eq!(s.services.len(), 1);
    let eps = &s.services[0].endpoints;
    assert_eq!(
        (eps[0].pod.as_deref(), eps[0].node.as_deref(), eps[0].ready),
        (Some("web-1"), Some("w1"), true),
        "no `ready` condition means ready"
    );
    assert!(!eps[1].ready);
    let b = &s.budgets[0];
    assert_eq!(b.disruptions_allowed, 0);
    let sel = b.selector.as_ref().unwrap();
    assert!(sel.matches(&web.labels));
    assert_eq!(s.claims[0].attached_to, ["w1"]);
    assert!(s.claims[0].single_node);
}
