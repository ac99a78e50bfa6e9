//! Two runs compared whole: rows and what the sim cannot show.

use super::*;

#[test]
fn a_sim_without_the_kubelets_not_ready_is_caught_and_one_within_the_goal_is_not() {
    let w = "worker-1";
    // The sim as it was: straight to Ready on resume; else within 10 %
    // or 1 s (Unknown 4.1 s later is within 10 % of 48 s).
    let sim = run(
        w,
        json!([
            pod(1_000, "x", json!({"type": "podScheduled", "node": w})),
            pod(1_000, "y", json!({"type": "podScheduled", "node": w})),
            node(62_100, w, ready("Unknown")),
            node(
                62_200,
                w,
                json!({"type": "taintAdded", "key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})
            ),
            pod(80_100, "x", json!({"type": "podTerminating"})),
            pod(80_200, "y", json!({"type": "podTerminating"})),
            pod(81_000, "z", json!({"type": "podAdded", "labels": {}})),
            pod(83_200, "z", json!({"type": "podReady", "ready": true})),
            node(100_200, w, ready("True")),
        ]),
    );
    let f = compare(&kind_run(), &sim);
    assert!(!f.meets_goal());
    let off = |what: &str| {
        f.rows
            .iter()
            .find(|r| r.what == what)
            .unwrap()
            .verdict
            .clone()
    };
    assert_eq!(off("target: Ready=False"), RowVerdict::OnlyKind);
    assert_eq!(
        off("target: Ready=True"),
        RowVerdict::Off,
        "Ready 10.1 s early"
    );
    assert_eq!(off("target: Ready=Unknown"), RowVerdict::Within);
    assert_eq!(off("new pods: Ready=True"), RowVerdict::Within);
}

#[test]
fn a_pod_late_after_the_node_authorizer_refused_its_kubelet_is_a_row_the_sim_cannot_show() {
    let w = "nfscen-worker";
    let refused = json!({"at": 115_000, "object": {"kind": "event", "name": "web-1.x"},
        "change": {"type": "event", "reason": "FailedMount", "involved": "Pod/web-1",
            "message": "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC ns/data-web-1: failed to fetch PVC from API server: persistentvolumeclaims \"data-web-1\" is forbidden: User \"system:node:w2\" cannot get resource \"persistentvolumeclaims\" in API group \"\" in the namespace \"ns\": no relationship found between node 'w2' and this object"}});
    let ready = |at: i64| pod(at, "r", json!({"type": "podReady", "ready": true}));
    let added = pod(114_900, "r", json!({"type": "podAdded", "labels": {}}));
    // The replacement Ready 16 s after its creation on kind, 1.6 s on the sim.
    let kind = run(w, json!([added.clone(), refused, ready(130_900)]));
    let sim = run(w, json!([added, ready(116_500)]));
    let verdict = |kind: &RunResult| {
        let f = compare(kind, &sim);
        named(&f, "new pods: Ready=True").verdict.clone()
    };
    let got = verdict(&kind);
    assert!(
        matches!(&got, RowVerdict::Cannot { lacks } if lacks.contains("node authorizer")),
        "{got:?}"
    );
    // Without the refusal it is simply off.
    let kind = run(
        w,
        json!([
            pod(114_900, "r", json!({"type": "podAdded", "labels": {}})),
            ready(130_900)
        ]),
    );
    assert_eq!(verdict(&kind), RowVerdict::Off);
}

#[test]
fn a_sim_run_stopped_in_its_setup_is_one_row_naming_what_the_setup_waited_for() {
    let mut sim = kind_run();
    sim.verdict = RunVerdict::Error;
    sim.t0 = None;
    sim.error = Some("setup failed: timed out after 300s waiting for statefulset web".into());
    let f = compare(&kind_run(), &sim);
    assert_eq!(f.rows.len(), 1);
    let RowVerdict::Cannot { lacks } = &f.rows[0].verdict else {
        panic!("{f:?}")
    };
    assert!(lacks.contains("waiting for statefulset web"), "{lacks}");
    assert_eq!(f.sim_verdict, "ERROR 0/0");
}

#[test]
fn clients_error_windows_are_rows_judged_like_the_rest() {
    // The probe's errors from the pause (10 s) to 49 s on kind.
    let kind = with_probe(kind_run(), 10_500, 59_000);
    let f = compare(&kind, &with_probe(kind_run(), 10_400, 59_300));
    let rows: Vec<(&str, RowVerdict)> = f
        .rows
        .iter()
        .filter(|r| r.what.starts_with("clients"))
        .map(|r| (r.what.as_str(), r.verdict.clone()))
        .collect();
    assert_eq!(
        rows,
        [
            ("clients web: errors begin", RowVerdict::Within),
            ("clients web: errors end", RowVerdict::Within)
        ],
        "{f:?}"
    );
    assert!(f.meets_goal(), "{f:?}");
    // The first error a few requests later on one side: chance.
    let f = compare(&kind, &with_probe(kind_run(), 11_900, 59_300));
    let begin = named(&f, "clients web: errors begin");
    assert!(
        matches!(&begin.verdict, RowVerdict::Timer { rule } if rule.contains("at random")),
        "{begin:?}"
    );
    // Errors that end 5 s later on the sim are off (and so far from
    // any endpoint change in this run that no routing explains it).
    let f = compare(&kind, &with_probe(kind_run(), 10_400, 64_000));
    let end = named(&f, "clients web: errors end");
    assert!(!end.verdict.meets_goal(), "{end:?}");
}

#[test]
fn a_probes_errors_end_is_judged_from_the_endpoints_leaving() {
    let gone = |run: &mut RunResult, at: Ms| {
        run.transitions.push(
            serde_json::from_value(json!({"at": at,
                "object": {"kind": "endpointSlice", "name": "web-x", "service": "web"},
                "change": {"type": "endpoint", "address": "10.0.0.1", "node": "nfscen-worker",
                           "ready": false, "serving": false, "terminating": false}}))
            .unwrap(),
        );
        run.transitions.sort_by_key(|t| t.at);
    };
    // kind: the last error's request just before the endpoints left
    // (errors end 0.1 s before); the sim: its request timed out after.
    let mut kind = with_probe(kind_run(), 10_500, 51_000);
    gone(&mut kind, 51_100);
    let mut sim = with_probe(kind_run(), 10_400, 57_500);
    gone(&mut sim, 56_500);
    let f = compare(&kind, &sim);
    let end = named(&f, "clients web: errors end");
    assert!(
        matches!(&end.verdict, RowVerdict::Timer { rule } if rule.contains("kube-proxy")),
        "{end:?}"
    );
    // Errors going on 10 s after the endpoints left: off.
    let mut sim = with_probe(kind_run(), 10_400, 66_500);
    gone(&mut sim, 56_500);
    let f = compare(&kind, &sim);
    let end = named(&f, "clients web: errors end");
    assert_eq!(end.verdict, RowVerdict::Off, "{end:?}");
}

#[test]
fn probes_that_never_reached_the_sims_pods_are_a_row_it_cannot_show() {
    let kind = with_probe(kind_run(), 10_500, 59_000);
    let mut sim = with_probe(kind_run(), 10_400, 59_300);
    for p in &mut sim.probes {
        p.errors = p.requests;
        p.windows.clear();
    }
    let f = compare(&kind, &sim);
    let last = f.rows.last().unwrap();
    assert!(
        matches!(last.verdict, RowVerdict::Cannot { .. }),
        "{last:?}"
    );
}

/// Three workers paused as the set `workers` and resumed at 100 s; on the
/// resume, the nodes in `lost` post Ready=False with `message` first and
/// Ready=True 10 s later (the controller swapping their taints), those in
/// `silent` post nothing until Ready=True 10.5 s later, the others go
/// straight to Ready.
fn thawed(names: [&str; 3], lost: &[&str], silent: &[&str], message: &str) -> RunResult {
    let mut r = run("unused", json!([]));
    r.targets.clear();
    r.sets
        .insert("workers".into(), names.map(String::from).into());
    let resume = r
        .steps
        .iter_mut()
        .find(|s| s.label == "#5 (resume)")
        .unwrap();
    resume.fault = Some(
        serde_json::from_value(json!({"fault": "resume-vm", "node": "workers",
            "nodes": names.map(|n| json!({"node": n, "at": 100_000, "done": 100_100}))}))
        .unwrap(),
    );
    let taint = |sign: &str, key: &str| {
        json!({"type": if sign == "+" { "taintAdded" } else { "taintRemoved" },
               "key": format!("node.kubernetes.io/{key}"), "effect": "NoSchedule"})
    };
    let mut ts = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let at = 100_250 + 90 * i as i64;
        ts.push(node(58_000 + i as i64, n, ready("Unknown")));
        ts.push(node(58_020 + i as i64, n, taint("+", "unreachable")));
        if lost.contains(n) {
            ts.push(node(
                at,
                n,
                json!({"type": "nodeReady", "status": "False", "reason": "KubeletNotReady",
                       "message": message}),
            ));
            ts.push(node(at + 150, n, taint("+", "not-ready")));
            ts.push(node(at + 160, n, taint("-", "unreachable")));
            ts.push(node(at + 10_000, n, ready("True")));
            ts.push(node(at + 10_020, n, taint("-", "not-ready")));
        } else {
            let at = if silent.contains(n) { at + 10_500 } else { at };
            ts.push(node(at, n, ready("True")));
            ts.push(node(at + 20, n, taint("-", "unreachable")));
        }
    }
    r.transitions = serde_json::from_value(serde_json::Value::Array(ts)).unwrap();
    r.transitions.sort_by_key(|t| t.at);
    r
}

#[test]
fn a_thawed_kubelets_race_lost_on_one_side_only_is_one_race_and_any_other_not_ready_is_not() {
    let kind_nodes = ["k1", "k2", "k3"];
    let sim_nodes = ["worker-1", "worker-2", "worker-3"];
    const DOWN: &str = "container runtime is down";
    let sim = |lost: &[&str]| thawed(sim_nodes, lost, &[], DOWN);
    // kind: two of three lost the race; the sim: none.
    let kind = thawed(kind_nodes, &["k2", "k3"], &[], DOWN);
    let f = compare(&kind, &sim(&[]));
    for what in [
        "workers: Ready=False (KubeletNotReady) (first)",
        "workers: taint + node.kubernetes.io/not-ready:NoSchedule (first)",
        "workers: Ready=True (last)",
    ] {
        let r = named(&f, what);
        assert!(
            matches!(&r.verdict, RowVerdict::Race { rule }
                if rule.contains("runtime check")
                    && rule.contains("from 2 node(s) on kind, 0 on the sim; silent: 0 and 0")),
            "{what}: {r:?}"
        );
    }
    assert!(f.meets_goal(), "{f:#?}");
    // A run that recorded no fault steps (before schema 7) says nothing of
    // how its kubelets came back: no allowance.
    let mut unrecorded = sim(&[]);
    unrecorded.steps.iter_mut().for_each(|s| s.fault = None);
    assert!(!compare(&kind, &unrecorded).meets_goal());
    // The sim losing it on one node: the rows still differ in count, one
    // race again.
    assert!(compare(&kind, &sim(&["worker-1"])).meets_goal());
    // Lost as often on both: the rows meet as any rows do, no allowance.
    let f = compare(&kind, &sim(&["worker-1", "worker-3"]));
    assert!(
        f.rows
            .iter()
            .all(|r| !matches!(r.verdict, RowVerdict::Race { .. })),
        "{f:#?}"
    );
    assert!(f.meets_goal(), "{f:#?}");
    // kind's third kubelet silent until its next status update (seen once
    // in five thaws), the other two lost it as on the sim.
    let kind = thawed(kind_nodes, &["k2", "k3"], &["k1"], DOWN);
    let f = compare(&kind, &sim(&["worker-1", "worker-3"]));
    assert!(
        matches!(&named(&f, "workers: Ready=True (first)").verdict, RowVerdict::Race { rule }
            if rule.contains("silent: 1 and 0")),
        "{f:#?}"
    );
    assert!(f.meets_goal(), "{f:#?}");
    // A node NotReady for another reason on kind only is a difference the
    // sim makes, not this race.
    let pleg = "PLEG is not healthy: pleg was last seen active 3m2s ago; threshold is 3m0s";
    let f = compare(&thawed(kind_nodes, &["k2", "k3"], &[], pleg), &sim(&[]));
    assert!(!f.meets_goal());
    assert_eq!(
        named(&f, "workers: Ready=False (KubeletNotReady) (first)").verdict,
        RowVerdict::OnlyKind
    );
}
