//! Right on real clusters, through the CLI on a running sim cluster used as
//! an existing one: `plan --cluster` shows the timings discovered from the
//! sim's kubeadm-config (and where they came from), a scenario pinned to
//! another cluster is refused before anything changes, and a pod with its
//! own `tolerationSeconds` is expected on its own schedule.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use nodefall::record::{RunVerdict, Verdict};
use nodefall::scenario::expr::Window;

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::{Dirs, cluster};

/// Two pods that stay 40 s on an unreachable node, where the cluster's
/// default (the fast profile) is 20 s.
const PATIENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: patient}
spec:
  replicas: 2
  selector: {matchLabels: {app: patient}}
  template:
    metadata: {labels: {app: patient}}
    spec:
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 40}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 40}
      containers: [{name: web, image: registry.invalid/web:1}]
";

fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `plan` and `scenario` of `file` on the cluster `found`, with `extra` flags.
fn plan_and_run<'a>(file: &'a str, out: &'a str, extra: &[&'a str]) -> [Vec<&'a str>; 2] {
    [
        vec!["plan", file, "--cluster", "found"],
        vec!["scenario", file, "--cluster", "found", "--out", out],
    ]
    .map(|mut args| {
        args.extend(extra);
        args
    })
}

#[test]
fn a_running_sim_is_discovered_pinned_and_pods_keep_their_own_toleration() {
    let d = Dirs::new();
    let (rt, _sim, client) = cluster(d.state.path(), "found");
    let uid = rt.block_on(async {
        Api::<Namespace>::all(client.clone())
            .get("kube-system")
            .await
            .unwrap()
            .metadata
            .uid
            .unwrap()
    });
    d.write("patient.yaml", PATIENT);
    let scenario = |name: &str, pin: &str| {
        d.write(
            &format!("{name}.yaml"),
            &format!(
                "name: {name}\nnamespace: {name}\n{pin}\nsetup:\n  apply: patient.yaml\n  \
                 waitReady: {{deployment: patient, timeout: 1m}}\ntarget: {{mostPods: app=patient}}\n\
                 steps:\n  - fault: pause-vm\n  \
                 - expect: {{pods: app=patient, on: target, terminating: true, within: \"grace + toleration - 8s .. grace + toleration + 14s\"}}\n  \
                 - fault: resume-vm\n  - expect: {{node: target, ready: \"True\", within: 1m}}\n"
            ),
        )
    };

    // plan: the discovered profile, with where each value came from
    let own = scenario(
        "own",
        &format!("cluster: [{{context: elsewhere}}, {{uid: {uid}}}]"),
    );
    let out = d
        .command(&["plan", own.to_str().unwrap(), "--cluster", "found"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let flat = words(&text);
    for line in [
        "grace 8s discovered ConfigMap kube-system/kubeadm-config: --node-monitor-grace-period=8000ms",
        "toleration 20s discovered ConfigMap kube-system/kubeadm-config: --default-unreachable-toleration-seconds=20",
        "lease 4s discovered ConfigMap kube-system/kubelet-config: nodeLeaseDurationSeconds: 4",
        "podGc 20s assumed",
        "(toleration from the pods' own tolerationSeconds)",
    ] {
        assert!(flat.contains(line), "`{line}` not in:\n{text}");
    }
    assert!(flat.contains(&format!("uid {uid}")), "{text}");

    let out_dir = d.out.path().to_str().unwrap();
    // a refused run created nothing, left nothing to undo, wrote no report
    let left_nothing = |namespace: &str| {
        let ns = rt.block_on(async {
            Api::<Namespace>::all(client.clone())
                .get_opt(namespace)
                .await
                .unwrap()
        });
        assert!(ns.is_none(), "the refused run created its namespace");
        assert!(d.unfinished().is_empty());
        assert!(d.results().is_empty(), "a refused run wrote a report");
    };

    // a scenario pinned to another cluster: exit 2, nothing created
    let pinned = scenario("pinned", "cluster: {context: kind-nodefall}");
    for args in plan_and_run(pinned.to_str().unwrap(), out_dir, &[]) {
        let out = d.command(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("this scenario may only run against context `kind-nodefall`, but this cluster is context `nodefall-sim`"),
            "{err}"
        );
    }
    left_nothing("pinned");

    // --profile default on a cluster that runs the fast timings: exit 2,
    // each contradiction named, nothing created; --profile fast agrees
    let own_file = own.to_str().unwrap();
    for args in plan_and_run(own_file, out_dir, &["--profile", "default"]) {
        let out = d.command(&args).output().unwrap();
        let err = words(&String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for part in [
            "--profile default contradicts what this cluster runs:",
            "grace is 50s in `default`, 8s on the cluster (ConfigMap kube-system/kubeadm-config: --node-monitor-grace-period=8000ms)",
            "drop --profile to use the cluster's own timings",
        ] {
            assert!(err.contains(part), "`{part}` not in: {err}");
        }
    }
    let [plan_fast, _] = plan_and_run(own_file, out_dir, &["--profile", "fast"]);
    let agrees = d.command(&plan_fast).output().unwrap();
    assert_eq!(
        agrees.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&agrees.stderr)
    );
    left_nothing("own");

    // the pods' own 40 s, not the cluster's 20 s: eviction at grace + 40 s,
    // or up to 10 s later: the taint manager's queue spends its token
    // (`--node-eviction-rate` 0.1/s) on a pass that still reads the node
    // Ready from its cache, and taints it at the next token (CI saw it)
    let out = d
        .command(&[
            "scenario",
            own.to_str().unwrap(),
            "--cluster",
            "found",
            "--out",
        ])
        .arg(d.out.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let results = d.results();
    let r = &results[0];
    let e = &r.expectations[0];
    // The window closes later by the pause step's own length
    // (docs/scenario-format.md §6.3), and says so.
    let pause = r.steps.iter().find(|s| s.index == Some(0)).unwrap();
    let took = pause.ended.unwrap() - pause.started;
    assert_eq!(
        e.window,
        Window::Between {
            from: 40_000,
            to: 62_000 + took
        },
        "{err}"
    );
    let mut notes = vec!["toleration = 40s, the pods' own tolerationSeconds".to_owned()];
    if took > 0 {
        notes.push(format!(
            "closes {} late: fault step #1 took that long",
            nodefall::duration::format_millis(took)
        ));
    }
    assert_eq!(e.notes, notes, "{err}");
    assert_eq!(e.verdict, Verdict::Pass, "{}: {err}", e.detail);
    assert_eq!(r.verdict, RunVerdict::Pass, "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(r.profile.name, "discovered");
    assert_eq!(
        r.profile
            .origin(nodefall::profile::Var::NodeMonitorGracePeriod)
            .word(),
        "discovered"
    );
    let md = std::fs::read_to_string(
        d.out
            .path()
            .join(nodefall::report::run_dir_name(&r.scenario, r.started_at))
            .join("report.md"),
    )
    .unwrap();
    assert!(md.contains("## Timing"), "{md}");
    assert!(
        md.contains("(toleration = 40s, the pods' own tolerationSeconds)"),
        "{md}"
    );
}
