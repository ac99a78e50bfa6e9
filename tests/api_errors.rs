//! A Kubernetes API server's refusal reaches the user as a sentence (its
//! code, reason, message and field causes), never as kube-rs' `Debug` dump
//! of the `Status` it answered (`ApiError: ... (Status { status:
//! Some(Failure), code: 422, ...`). The real binary runs four scenarios
//! against one simulated cluster, each failing where the API server itself
//! refuses: an apply (a Service's nodePort out of range: 422 with a field
//! cause), a taint and a cordon (refused by a ValidatingAdmissionPolicy:
//! 422 and 403), and a drain (an eviction of a pod under two
//! PodDisruptionBudgets: 500). Each case checks stderr and the result's
//! error.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodefall::sim::binaries::{Binaries, Versions, cache_root};
use serde_json::json;

#[path = "support/cli_run.rs"]
mod cli_run;
#[path = "support/skip.rs"]
mod skip;

use cli_run::{Dirs, cluster};

const CLUSTER: &str = "api-errors";
const NS: &str = "api-errors";

/// What kube-rs' `Display` of an API error holds and a sentence never does.
const DUMPS: [&str; 5] = ["Some(", "{ ", "Status {", "ListMeta", "ApiError:"];

/// Refuses a taint with the key `api-errors.example.com/refused` on any
/// node (422 Invalid) and cordoning a node labelled
/// `api-errors.example.com/uncordonable` (403 Forbidden). Taints and cordons
/// pass nodefall's own checks: only the API server refuses them.
fn policy() -> serde_json::Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "api-errors-nodes"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["UPDATE"], "resources": ["nodes"]
            }]},
            "validations": [
                {
                    "expression": "!has(object.spec.taints) || !object.spec.taints.exists(t, t.key == 'api-errors.example.com/refused')",
                    "message": "taint api-errors.example.com/refused is not allowed here",
                    "reason": "Invalid"
                },
                {
                    "expression": "!has(object.spec.unschedulable) || !object.spec.unschedulable || !has(object.metadata.labels) || !('api-errors.example.com/uncordonable' in object.metadata.labels)",
                    "message": "this node may not be cordoned",
                    "reason": "Forbidden"
                }
            ]
        }
    })
}

/// A Service whose nodePort is outside the API server's range.
const SERVICE: &str = "apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, nodePort: 99999}]
";

/// One pod on worker-1 under two PodDisruptionBudgets: the eviction API
/// refuses to evict it (500).
const VICTIM: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: victim}
spec:
  replicas: 1
  selector: {matchLabels: {app: victim}}
  template:
    metadata: {labels: {app: victim}}
    spec:
      nodeSelector: {kubernetes.io/hostname: worker-1}
      containers: [{name: victim, image: registry.invalid/victim:1}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: victim-a}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: victim}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: victim-b}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: victim}}
";

/// A scenario, and what its failure must say (each on stderr and in the
/// result's error).
struct Case {
    name: &'static str,
    scenario: &'static str,
    says: &'static [&'static str],
}

const CASES: [Case; 4] = [
    Case {
        name: "apply",
        scenario: "name: apply-invalid\nnamespace: api-errors\nsetup: {apply: svc.yaml}\n\
                   target: {name: worker-1}\nsteps:\n  - action: {cordon: {node: target}}\n",
        says: &[
            "applying Service api-errors/web from ",
            "/svc.yaml: the API server refused it (422 \
             Invalid): Service \"web\" is invalid; field spec.ports[0].nodePort: Invalid value: \
             99999: provided port is not in the valid range. The range of valid ports is \
             30000-32767 (FieldValueInvalid)",
        ],
    },
    Case {
        name: "taint",
        scenario: "name: taint-refused\nnamespace: api-errors\ntarget: {name: worker-2}\nsteps:\n\
                   \x20 - action: {taint: {node: target, key: api-errors.example.com/refused, \
                   value: x, effect: NoSchedule}}\n",
        says: &[
            "updating taints of node worker-2: the API server refused it (422 Invalid): nodes \
             \"worker-2\" is forbidden: ValidatingAdmissionPolicy 'api-errors-nodes' with binding \
             'api-errors-nodes' denied request: taint api-errors.example.com/refused is not \
             allowed here",
        ],
    },
    Case {
        name: "cordon",
        scenario: "name: cordon-refused\nnamespace: api-errors\ntarget: {name: worker-3}\nsteps:\n\
                   \x20 - action: {cordon: {node: target}}\n",
        says: &[
            "cordoning node worker-3: the API server refused it (403 Forbidden): nodes \
             \"worker-3\" is forbidden: ValidatingAdmissionPolicy 'api-errors-nodes' with binding \
             'api-errors-nodes' denied request: this node may not be cordoned",
        ],
    },
    Case {
        name: "drain",
        scenario: "name: drain-refused\nnamespace: api-errors\nsetup:\n  apply: victim.yaml\n\
                   \x20 waitReady: {deployment: victim, replicas: 1, timeout: 1m}\n\
                   target: {name: worker-1}\nsteps:\n\
                   \x20 - action: {drain: {nodes: target, podSelector: app=victim, timeout: 30s}}\n",
        says: &[
            "evicting api-errors/victim-",
            ": the API server refused it (500 Internal Server Error): This pod has more than one \
             PodDisruptionBudget, which the eviction subresource does not support",
        ],
    },
];

/// The policy in force, its binding, worker-3 labelled, the namespace made;
/// returns once a dry-run taint is refused (the API server loads policies a
/// moment after they are created).
async fn prepare(client: &kube::Client) {
    let pp = PostParams::default();
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(policy()).unwrap();
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .create(&pp, &policy)
        .await
        .unwrap();
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": "api-errors-nodes"},
        "spec": {"policyName": "api-errors-nodes", "validationActions": ["Deny"]}
    }))
    .unwrap();
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .create(&pp, &binding)
        .await
        .unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&pp, &ns)
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let label = json!({"metadata": {"labels": {"api-errors.example.com/uncordonable": "yes"}}});
    nodes
        .patch("worker-3", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let taint = json!({"spec": {"taints": [
        {"key": "api-errors.example.com/refused", "effect": "NoSchedule"}]}});
    let dry = PatchParams::default().dry_run();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match nodes.patch("worker-2", &dry, &Patch::Merge(&taint)).await {
            Err(kube::Error::Api(s)) if s.code == 422 => return,
            other => assert!(
                Instant::now() < deadline,
                "the policy is not in force after 30s: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn api_refusals_reach_the_user_as_sentences() {
    let binaries = Binaries::at(&cache_root(), Versions::from_env());
    if !binaries.missing().is_empty() {
        skip::skip(
            "api_refusals_reach_the_user_as_sentences",
            &format!(
                "the simulated cluster's binaries are not provisioned (missing: {:?})",
                binaries.missing()
            ),
        );
        return;
    }
    let d = Dirs::new();
    let (rt, _sim, client) = cluster(d.state.path(), CLUSTER);
    rt.block_on(prepare(&client));
    d.write("svc.yaml", SERVICE);
    d.write("victim.yaml", VICTIM);
    let mut failures = Vec::new();
    for case in &CASES {
        let file = d.write(&format!("{}.yaml", case.name), case.scenario);
        let out = d.out.path().join(case.name);
        let run = d
            .command(&["scenario", file.to_str().unwrap(), "--cluster", CLUSTER])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        let error = std::fs::read_dir(&out)
            .ok()
            .and_then(|mut runs| runs.next())
            .and_then(|dir| {
                let path = dir.ok()?.path().join("result.json");
                nodefall::report::read_result(&nodefall::disk::Disk, &path).ok()
            })
            .and_then(|r| r.error)
            .unwrap_or_default();
        let mut wrong = Vec::new();
        if run.status.code() != Some(3) {
            wrong.push(format!("exit {:?}, not 3", run.status.code()));
        }
        for (place, text) in [("stderr", &stderr), ("the result's error", &error)] {
            for said in case.says {
                if !text.contains(said) {
                    wrong.push(format!("{place} lacks `{said}`"));
                }
            }
            for dump in DUMPS {
                if text.contains(dump) {
                    wrong.push(format!("{place} holds `{dump}`"));
                }
            }
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{}: {}\n--- stderr:\n{stderr}\n--- the result's error:\n{error}",
                case.name,
                wrong.join("; ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
