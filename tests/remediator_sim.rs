//! The example remediator (`examples/remediator.rs`, built by `cargo test`
//! with the tests) against a sim, judged: the node running a StatefulSet's
//! pod is paused, the remediator taints it out of service 5 s after it
//! went NotReady, pod GC frees the pod and its replacement runs elsewhere;
//! after the resume the remediator takes its taint off. The record puts the
//! act down to `example-remediator`, with its decision time, says the
//! paused machine was never off, and when the taint came off. A second test
//! judges a whole run on a machine powered off before the out-of-service
//! taint: no two copies, fenced first, and a remediation that did not wait.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::Path;

use nodefall::record::machines::Power;
use nodefall::record::remediation::Fencing;
use nodefall::record::{RunResult, Verdict};
use nodefall::report::read_result;
use nodefall::scenario::model::FaultKind;

#[path = "support/cli_run.rs"]
mod cli_run;
#[path = "support/remediator.rs"]
mod remediator;
use cli_run::{Dirs, cluster};
use remediator::Remediator;

/// `nodefall scenario FILE --cluster NAME`: its exit code, stdout and stderr
/// together, its result and its report.
fn scenario(d: &Dirs, file: &Path, cluster: &str) -> (Option<i32>, String, RunResult, String) {
    let o = d
        .command(&[
            "scenario",
            file.to_str().unwrap(),
            "--cluster",
            cluster,
            "--out",
            d.out.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = std::fs::read_dir(d.out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .unwrap_or_else(|| panic!("no report directory:\n{said}"));
    let result = read_result(&nodefall::disk::Disk, &dir.join("result.json")).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    (o.status.code(), said, result, md)
}

const MANIFEST: &str = "\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: registry.invalid/db:1}]
";

const SCENARIO: &str = "\
name: example-remediator
namespace: remediated
setup:
  apply: db.yaml
  waitReady: {statefulset: db, replicas: 1, timeout: 2m}
target: {mostPods: app=db}
steps:
  - id: pause
    fault: pause-vm
  - expect: {node: target, ready: Unknown, within: grace - 0.25*lease - 1s .. grace + monitorPeriod + 2s}
  - id: remediated
    name: the remediator taints it out of service
    expect: {node: target, remediatedBy: example-remediator, within: 40s, since: pause}
  - name: no one else acted on it
    expect: {node: target, remediatedBy: nodefall, never: 5s}
  - name: pod GC frees the pod, the StatefulSet replaces it elsewhere
    expect: {pods: app=db, notOn: target, ready: 1, within: podGcPeriod + 20s, since: remediated}
  - fault: resume-vm
  - expect: {node: target, ready: \"True\", within: 1m}
  - name: the remediator takes its taint off
    expect: {node: target, noTaint: node.kubernetes.io/out-of-service, within: 10s}
cleanup: always
";

#[test]
fn the_example_remediator_is_judged() {
    let d = Dirs::new();
    let (_rt, cluster, _client) = cluster(d.state.path(), "remedied");
    d.write("db.yaml", MANIFEST);
    let file = d.write("remediated.yaml", SCENARIO);
    let _remediator = Remediator::start(&cluster.kubeconfig_path(), &["--after", "5s"]);
    let (code, said, r, md) = scenario(&d, &file, "remedied");
    assert_eq!(code, Some(0), "{said}");
    let rem = r.remediation.as_ref().expect("the remediation judged");
    assert_eq!(rem.acts.len(), 1, "{rem:#?}");
    assert_eq!(rem.acts[0].by.as_deref(), Some("example-remediator"));
    // 5 s after the remediator saw it NotReady, on its next 1 s tick
    let decision = rem.decision.unwrap();
    assert!((4_000..=8_000).contains(&decision), "{rem:#?}");
    assert_eq!(
        rem.fencing,
        Fencing::NotOff {
            fault: Some(FaultKind::PauseVm)
        }
    );
    assert_eq!((rem.replaced, rem.pods), (1, 1), "{rem:#?}");
    // Taken off after the resume, by the remediator where the Node can say:
    // when its taint went last (after the lifecycle controller's), the
    // field went with it and nobody owns it (docs/remediation.md); which
    // goes first is a race.
    let resumed = r
        .steps
        .iter()
        .find(|s| {
            s.fault
                .as_ref()
                .is_some_and(|f| f.fault == FaultKind::ResumeVm)
        })
        .unwrap();
    let removed = rem.cleanup[0].removed.expect("the taint taken off");
    assert!(removed > resumed.started - r.t0.unwrap(), "{rem:#?}");
    assert!(
        matches!(
            rem.cleanup[0].removed_by.as_deref(),
            None | Some("example-remediator")
        ),
        "{rem:#?}"
    );
    // The sim's machines run no containers: the paused machine's own
    // account says paused, then on, and the pod's two copies cannot be told.
    let m = r
        .machines
        .iter()
        .find(|m| m.node == rem.acts[0].node)
        .unwrap();
    assert!(m.power.iter().any(|(_, p)| *p == Power::Paused), "{m:?}");
    assert!(rem.fencing_seen.is_some(), "{rem:#?}");
    assert_eq!(r.duplicates.len(), 1, "{:#?}", r.duplicates);
    assert_eq!(r.duplicates[0].window, None, "{:#?}", r.duplicates);
    assert!(
        r.duplicates[0]
            .note
            .as_deref()
            .unwrap()
            .contains("a sim node runs no containers"),
        "{:#?}",
        r.duplicates
    );
    assert!(
        md.contains("| example-remediator |"),
        "the report names who acted:\n{md}"
    );
    drop(cluster);
}

const FENCED: &str = "\
name: fenced-first
namespace: fenced
setup:
  apply: db.yaml
  waitReady: {statefulset: db, replicas: 1, timeout: 2m}
target: {mostPods: app=db}
steps:
  - id: off
    fault: poweroff
  - expect: {node: target, ready: Unknown, within: grace - 0.25*lease - 1s .. grace + monitorPeriod + 2s}
  - action: {force-delete-pods: {selector: app=db, node: target}}
  - action: {taint: {node: target, key: node.kubernetes.io/out-of-service, value: nodeshutdown, effect: NoExecute}}
  - expect: {pods: app=db, notOn: target, ready: 1, within: podGcPeriod + 20s}
  - fault: poweron
  - expect: {node: target, ready: \"True\", within: 1m}
  - action: {untaint: {node: target, key: node.kubernetes.io/out-of-service}}
  - name: no two copies
    expect: {duplicateWindow: {pods: app=db}, max: 0s}
  - name: fenced
    expect: {fencedBefore: replacement, pods: app=db}
  - name: remediated
    expect: {node: target, remediation: {by: nodefall}}
  - name: after 30s NotReady
    expect: {node: target, remediation: {by: nodefall, notReadyFor: 30s}}
cleanup: always
";

/// The verdicts of the whole run on a sim: a machine powered off before the
/// out-of-service taint, so no two copies ran (`duplicateWindow` with `max:
/// 0s` and `fencedBefore: replacement` pass, from the sim's own account of
/// the machine); the acts were nodefall's (a force deletion, its author
/// from the audit log, then the taint); they came at once, not after 30 s
/// of NotReady, and that expectation fails saying so.
#[test]
fn whole_run_verdicts_on_a_machine_powered_off_first() {
    let d = Dirs::new();
    let (_rt, cluster, _client) = cluster(d.state.path(), "fenced");
    d.write("db.yaml", MANIFEST);
    let file = d.write("fenced.yaml", FENCED);
    let (code, said, r, _) = scenario(&d, &file, "fenced");
    assert_eq!(code, Some(1), "{said}");
    let verdict = |name: &str| {
        r.expectations
            .iter()
            .find(|e| e.label.contains(name))
            .unwrap_or_else(|| panic!("{name}: {said}"))
    };
    for name in ["(no two copies)", "(fenced)", "(remediated)"] {
        assert_eq!(verdict(name).verdict, Verdict::Pass, "{name}: {said}");
    }
    let late = verdict("(after 30s NotReady)");
    assert_eq!(late.verdict, Verdict::Fail, "{said}");
    assert!(
        late.detail
            .starts_with("acted before the node had been NotReady 30s: "),
        "{}",
        late.detail
    );
    assert_eq!(r.duplicates[0].window, Some(0), "{:#?}", r.duplicates);
    // The force deletion came 0.1-0.2 s after NotReady: the StatefulSet's
    // next db-0 may be bound to the failed node before its NoSchedule
    // taint (CI, stop 69); that one is stranded there, the one after it
    // is the replacement.
    let p = &r.metrics.pods[0];
    assert_ne!(p.replacement_node, Some(p.node.clone()), "{p:#?}");
    assert!(p.replacement_running.is_some(), "{p:#?}");
    assert!(p.stranded.iter().all(|s| s.node == p.node), "{p:#?}");
    let rem = r.remediation.as_ref().unwrap();
    assert!(matches!(rem.fencing, Fencing::OffBefore { .. }), "{rem:#?}");
    // The force deletion is an act, its author from the audit log (it
    // writes no field); the taint is the second, by nodefall's manager.
    assert_eq!(rem.acts.len(), 2, "{rem:#?}");
    assert_eq!(rem.acts[0].what, "pod db-0 force-deleted", "{rem:#?}");
    assert!(
        rem.acts[0]
            .user
            .as_deref()
            .is_some_and(|u| u.starts_with("nodefall-admin")),
        "{rem:#?}"
    );
    assert_eq!(rem.acts[1].by.as_deref(), Some("nodefall"), "{rem:#?}");
    assert!(rem.fencing_seen.is_some(), "{rem:#?}");
    assert!(said.contains("(no two copies): pass"), "{said}");
    drop(cluster);
}

/// A remediator's objects, as their operators write them: the CRDs of a
/// medik8s Self Node Remediation and of a cluster-api Machine (their
/// schemas kept open), a Machine of the target node made beforehand.
const CRDS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: selfnoderemediations.self-node-remediation.medik8s.io}
spec:
  group: self-node-remediation.medik8s.io
  scope: Namespaced
  names: {kind: SelfNodeRemediation, plural: selfnoderemediations, singular: selfnoderemediation}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: machines.cluster.x-k8s.io}
spec:
  group: cluster.x-k8s.io
  scope: Namespaced
  names: {kind: Machine, plural: machines, singular: machine}
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"#;

/// Node Health Check creating a Self Node Remediation for a failed node, and
/// a MachineHealthCheck's controller deleting its Machine, written under
/// the operators' field managers while a scenario pauses the node: both are
/// acts of the remediation, the first with who created it.
#[test]
fn remediators_objects_are_acts_with_their_creators() {
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::core::{ApiResource, GroupVersionKind};

    let d = Dirs::new();
    let (rt, cluster, client) = cluster(d.state.path(), "objects");
    let snr = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "self-node-remediation.medik8s.io",
            "v1alpha1",
            "SelfNodeRemediation",
        ),
        "selfnoderemediations",
    );
    let machine = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "Machine"),
        "machines",
    );
    let node = rt.block_on(async {
        let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
            Api::all(client.clone());
        for doc in CRDS.split("\n---\n") {
            let crd = serde_yaml_ng::from_str(doc).unwrap();
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        for ns in ["medik8s", "capi"] {
            let n = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
            namespaces.create(&PostParams::default(), &n).await.unwrap();
        }
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let node = nodes.list(&Default::default()).await.unwrap().items[0]
            .metadata
            .name
            .clone()
            .unwrap();
        // Served once established: until then a create is refused (404).
        let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), "capi", &machine);
        let m: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": "m-1"},
            "status": {"nodeRef": {"kind": "Node", "name": node}},
        }))
        .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while let Err(e) = machines.create(&PostParams::default(), &m).await {
            assert!(std::time::Instant::now() < deadline, "{e}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let remediations: Api<DynamicObject> = Api::namespaced_with(client.clone(), "medik8s", &snr);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while let Err(e) = remediations.list(&Default::default()).await {
            assert!(std::time::Instant::now() < deadline, "{e}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        node
    });
    let text = format!(
        "\
name: remediation-objects
namespace: objects
target: {{name: {node}}}
steps:
  - fault: pause-vm
  - id: unknown
    expect: {{node: target, ready: Unknown, within: grace + monitorPeriod + 5s}}
  - name: the operators act
    action: {{wait: {{duration: 10s}}}}
  - fault: resume-vm
  - expect: {{node: target, ready: \"True\", within: 1m}}
  - name: Node Health Check remediated it
    expect: {{node: target, remediation: {{by: node-healthcheck-operator}}}}
cleanup: always
"
    );
    let file = d.write("objects.yaml", &text);
    // The operators: once the node is NotReady, NHC creates the node's
    // SelfNodeRemediation and the Machine is deleted.
    let operators = rt.spawn({
        let (client, node) = (client.clone(), node.clone());
        async move {
            let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
            let not_ready = |n: &k8s_openapi::api::core::v1::Node| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                    .is_some_and(|c| c.status != "True")
            };
            let cond = kube::runtime::wait::await_condition(
                nodes,
                &node,
                move |n: Option<&k8s_openapi::api::core::v1::Node>| n.is_some_and(not_ready),
            );
            tokio::time::timeout(std::time::Duration::from_secs(60), cond)
                .await
                .expect("the node NotReady within 60s")
                .unwrap();
            let pp = PostParams {
                field_manager: Some("node-healthcheck-operator".into()),
                ..PostParams::default()
            };
            let r: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "self-node-remediation.medik8s.io/v1alpha1",
                "kind": "SelfNodeRemediation",
                "metadata": {"name": node},
                "spec": {"remediationStrategy": "OutOfServiceTaint"},
            }))
            .unwrap();
            let remediations: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), "medik8s", &snr);
            remediations.create(&pp, &r).await.unwrap();
            let machines: Api<DynamicObject> = Api::namespaced_with(client, "capi", &machine);
            machines.delete("m-1", &Default::default()).await.unwrap();
        }
    });
    let (code, said, r, md) = scenario(&d, &file, "objects");
    rt.block_on(operators).unwrap();
    assert_eq!(code, Some(0), "{said}");
    let rem = r.remediation.as_ref().expect("the remediation judged");
    // two watchers: either may be seen first
    let mut acts: Vec<(&str, Option<&str>)> = rem
        .acts
        .iter()
        .map(|a| (a.what.as_str(), a.by.as_deref()))
        .collect();
    acts.sort_unstable();
    assert_eq!(
        acts,
        [
            ("Machine capi/m-1 deleted", None),
            (
                format!("SelfNodeRemediation medik8s/{node} created").as_str(),
                Some("node-healthcheck-operator")
            ),
        ],
        "{rem:#?}"
    );
    assert!(md.contains("| node-healthcheck-operator |"), "{md}");
    drop(cluster);
}
