//! What the `predict` tests share: a reader's kubeconfig (a ServiceAccount
//! token, so the audit log tells its requests apart), `nodefall predict`
//! and `nodefall scenario` run as a user would, and the audit check that a
//! prediction only read.

#![allow(dead_code, reason = "each test binary uses its own part")]

use std::collections::BTreeSet;
use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use nodefall::sim::SimCluster;
use serde_json::{Value, json};

/// Every request, with who made it and its verb.
pub const AUDIT_ALL: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\n\
                             omitStages: [RequestReceived]\nrules:\n- level: Metadata\n";

/// A ServiceAccount `name` in `ns` bound to a ClusterRole of get, list and
/// watch on everything (the test's own role: the audit log, not RBAC, is
/// what proves predict only read).
pub fn reader_objects(ns: &str, name: &str) -> Vec<Value> {
    let role = format!("{name}-{ns}-read-all");
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": role},
               "rules": [{"apiGroups": ["*"], "resources": ["*"],
                          "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": role},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}),
    ]
}

/// Writes a kubeconfig for the cluster that authenticates as the
/// ServiceAccount `ns/name`, with a token asked for now.
pub async fn reader_kubeconfig(
    client: &kube::Client,
    cluster: &SimCluster,
    ns: &str,
    name: &str,
    to: &Path,
) {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let text = std::fs::read_to_string(cluster.kubeconfig_path()).unwrap();
    let mut config: Value = serde_yaml_ng::from_str(&text).unwrap();
    for user in config["users"].as_array_mut().unwrap() {
        user["user"] = json!({"token": token});
    }
    std::fs::write(to, serde_yaml_ng::to_string(&config).unwrap()).unwrap();
}

/// Runs `nodefall predict ARGS --out OUT` with `kubeconfig`; its
/// `prediction.json`, once it passed and wrote a report.
pub fn predict(kubeconfig: &Path, out: &Path, args: &[&str]) -> Value {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .arg("predict")
        .args(args)
        .arg("--out")
        .arg(out)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{said}");
    let dir = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("prediction.json").is_file())
        .unwrap_or_else(|| panic!("no prediction.json under {}: {said}", out.display()));
    let md = std::fs::read_to_string(dir.join("prediction.md")).unwrap();
    assert!(md.starts_with("# Prediction: "), "{md}");
    serde_json::from_str(&std::fs::read_to_string(dir.join("prediction.json")).unwrap()).unwrap()
}

/// Runs a scenario on the sim cluster `name`; its exit code and output
/// (with the scenario's text, to read a failure by).
pub fn scenario_on(state: &Path, name: &str, file: &Path) -> (Option<i32>, String) {
    let out = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .arg("scenario")
        .arg(file)
        .args(["--cluster", name, "--out"])
        .arg(out.path())
        .env("NODEFALL_STATE_DIR", state)
        .output()
        .unwrap();
    let said = format!(
        "{}{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        std::fs::read_to_string(file).unwrap_or_default()
    );
    (o.status.code(), said)
}

/// Asserts every request `user` made (in the cluster's audit log) was a
/// get, a list or a watch, and that it read each of `kinds`.
pub fn only_read(cluster: &SimCluster, user: &str, kinds: &[&str]) {
    let log = std::fs::read_to_string(cluster.audit_log_path()).unwrap();
    let mine: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["user"]["username"] == user)
        .collect();
    let verbs: BTreeSet<&str> = mine.iter().map(|e| e["verb"].as_str().unwrap()).collect();
    let resources: BTreeSet<&str> = mine
        .iter()
        .filter_map(|e| e["objectRef"]["resource"].as_str())
        .collect();
    for kind in kinds {
        assert!(resources.contains(kind), "{kind} not read: {resources:?}");
    }
    assert!(
        verbs.iter().all(|v| ["get", "list", "watch"].contains(v)),
        "predict wrote: {verbs:?} in {:#?}",
        mine.iter()
            .filter(|e| !["get", "list", "watch"].contains(&e["verb"].as_str().unwrap()))
            .collect::<Vec<_>>()
    );
}
