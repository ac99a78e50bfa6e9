//! Points: named by role and group, timed from their step, and the races
//! that decide which step a point counts for.

use super::*;

#[test]
fn points_are_named_by_role_and_group_and_timed_from_their_step() {
    assert_eq!(
        names(&points(&kind_run())),
        [
            ("target: Ready=Unknown", "#1 (pause)", 48_000, 1),
            (
                "target: taint + node.kubernetes.io/unreachable:NoExecute",
                "#1 (pause)",
                48_100,
                1
            ),
            (
                "pods on target: Terminating (first)",
                "#1 (pause)",
                70_000,
                2
            ),
            (
                "pods on target: Terminating (last)",
                "#1 (pause)",
                70_500,
                2
            ),
            ("new pods: created", "#1 (pause)", 71_000, 1),
            ("new pods: Ready=True", "#1 (pause)", 74_000, 1),
            ("target: Ready=False", "#5 (resume)", 300, 1),
            ("target: Ready=True", "#5 (resume)", 10_300, 1),
        ],
        "nothing before the first fault, nothing from the clean-up on"
    );
}

#[test]
fn an_endpoint_not_ready_for_a_blink_before_ready_is_not_a_transition() {
    let w = "nfscen-worker";
    let ep = |at: i64, address: &str, ready: bool| {
        json!({"at": at, "object": {"kind": "endpointSlice", "name": "web-x", "service": "web"},
               "change": {"type": "endpoint", "address": address, "node": "other",
                          "ready": ready, "serving": ready, "terminating": false}})
    };
    // After the resume (100 s): one pod's endpoint not ready for 30 ms,
    // another's for 1.9 s.
    let r = run(
        w,
        json!([
            ep(101_000, "10.0.0.1", false),
            ep(101_030, "10.0.0.1", true),
            ep(101_100, "10.0.0.2", false),
            ep(103_000, "10.0.0.2", true),
        ]),
    );
    let got: Vec<(String, usize)> = points(&r).into_iter().map(|p| (p.what, p.count)).collect();
    assert_eq!(
        got,
        [
            ("endpoints elsewhere: ready (first)".to_owned(), 2),
            ("endpoints elsewhere: not ready".to_owned(), 1),
            ("endpoints elsewhere: ready (last)".to_owned(), 2),
        ]
    );
}

#[test]
fn a_blip_across_a_step_start_is_readiness_of_the_step_before_and_serving_alone_no_row() {
    let w = "nfscen-worker";
    let ep = |at: i64, address: &str, ready: bool, serving: bool| {
        json!({"at": at, "object": {"kind": "endpointSlice", "name": "web-x", "service": "web"},
               "change": {"type": "endpoint", "address": address, "node": "other",
                          "ready": ready, "serving": serving, "terminating": !ready}})
    };
    let r = run(
        w,
        json!([
            // Not ready 10 ms before the resume (100 s), ready 1 s after it.
            ep(99_990, "10.0.0.3", false, false),
            ep(100_996, "10.0.0.3", true, true),
            // A terminating endpoint serving again: still not ready.
            ep(50_000, "10.0.0.4", false, false),
            ep(102_172, "10.0.0.4", false, true),
        ]),
    );
    let got: Vec<(String, String, Ms)> = points(&r)
        .into_iter()
        .map(|p| (p.what, p.step, p.after))
        .collect();
    assert_eq!(
        got,
        [
            (
                "endpoints elsewhere: not ready".to_owned(),
                "#1 (pause)".to_owned(),
                40_000
            ),
            (
                "endpoints elsewhere: ready".to_owned(),
                "#1 (pause)".to_owned(),
                90_996
            ),
        ]
    );
}

#[test]
fn a_noexecute_taint_belongs_to_the_step_of_the_ready_change_it_follows() {
    let w = "nfscen-worker";
    let r = run(
        w,
        json!([
            node(97_000, w, ready("True")),
            node(
                100_300,
                w,
                json!({"type": "taintRemoved",
                "key": "node.kubernetes.io/not-ready", "effect": "NoExecute"})
            ),
            // Not the controller's: where it came.
            node(
                100_400,
                w,
                json!({"type": "taintRemoved",
                "key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"})
            ),
        ]),
    );
    let got: Vec<(String, String)> = points(&r).into_iter().map(|p| (p.what, p.step)).collect();
    assert_eq!(
        got,
        [
            ("target: Ready=True".to_owned(), "#1 (pause)".to_owned()),
            (
                "target: taint - node.kubernetes.io/not-ready:NoExecute".to_owned(),
                "#1 (pause)".to_owned()
            ),
            (
                "target: taint - node.kubernetes.io/out-of-service:NoExecute".to_owned(),
                "#5 (resume)".to_owned()
            ),
        ]
    );
}

#[test]
fn steps_taken_back_to_back_share_one_anchor() {
    let mut r = run("n", json!([node(100_030, "n", ready("True"))]));
    // A second action 20 ms after the resume: the transition is timed
    // from the resume either way.
    r.steps.push(
        serde_json::from_value(json!({"label": "#6", "kind": "action", "description": "x",
            "started": 100_020, "ended": 100_040, "outcome": {"status": "ok"}}))
        .unwrap(),
    );
    assert_eq!(
        names(&points(&r)),
        [("target: Ready=True", "#5 (resume) + #6", 30, 1)]
    );
}

#[test]
fn a_steps_error_windows_are_one_span_however_many() {
    let mut sim = with_probe(kind_run(), 10_400, 40_000);
    let mut second = sim.probes[0].windows[0].clone();
    (second.start, second.end) = (44_000, Some(59_300));
    sim.probes[0].windows.push(second);
    let got: Vec<(String, Ms, usize)> = points(&sim)
        .into_iter()
        .filter(|p| p.what.starts_with("clients"))
        .map(|p| (p.what, p.after, p.count))
        .collect();
    assert_eq!(
        got,
        [
            ("clients web: errors begin".to_owned(), 400, 1),
            ("clients web: errors end".to_owned(), 49_300, 1)
        ]
    );
}

#[test]
fn attachments_are_grouped_by_where_they_were_and_a_pods_first_multi_attach_error_is_a_point() {
    let w = "nfscen-worker";
    let va = |at: i64, name: &str, change: serde_json::Value| json!({"at": at, "object": {"kind": "volumeAttachment", "name": name}, "change": change});
    let attached = |node: &str, attached: bool| json!({"type": "volumeAttachment", "node": node, "volume": "pv-0", "attached": attached});
    let multi = |at: i64, pod: &str, count: i32| {
        json!({"at": at, "object": {"kind": "event", "name": format!("{pod}.multi")},
               "change": {"type": "event", "reason": "FailedAttachVolume", "involved": format!("Pod/{pod}"),
                          "message": "Multi-Attach error for volume \"pv-0\" Volume is already exclusively attached to one node and can't be attached to another",
                          "count": count}})
    };
    let run = run(
        w,
        json!([
            va(1_000, "csi-old", attached(w, false)),
            va(1_500, "csi-old", attached(w, true)),
            va(2_000, "csi-other", attached("nfscen-worker2", true)),
            multi(40_000, "disk-0", 1),
            multi(41_000, "disk-0", 2),
            va(
                60_000,
                "csi-old",
                json!({"type": "volumeAttachmentDeleted"})
            ),
            va(60_500, "csi-new", attached("nfscen-worker2", false)),
            va(60_600, "csi-new", attached("nfscen-worker2", true)),
        ]),
    );
    assert_eq!(
        names(&points(&run)),
        [
            ("pods: Multi-Attach error", "#1 (pause)", 30_000, 1),
            (
                "volume attachments on target: deleted",
                "#1 (pause)",
                50_000,
                1
            ),
            (
                "new volume attachments: not attached",
                "#1 (pause)",
                50_500,
                1
            ),
            ("new volume attachments: attached", "#1 (pause)", 50_600, 1),
        ],
        "the setup's attachments are no points, a repeated error is none either"
    );
}

#[test]
fn a_sets_nodes_are_grouped_under_its_name_as_its_pods_are() {
    // Three workers paused as one set `workers` (no single target): which
    // of them went Unknown or got the taint first is chance, so they meet
    // the other side's as a group, first and last.
    let mut r = run("unused", json!([]));
    r.targets.clear();
    let nodes = ["w1", "w2", "w3"];
    r.sets
        .insert("workers".into(), nodes.map(String::from).into());
    let taint = json!({"type": "taintAdded", "key": "node.kubernetes.io/unreachable", "effect": "NoExecute"});
    r.transitions = serde_json::from_value(json!([
        pod(1_000, "a", json!({"type": "podScheduled", "node": "w2"})),
        node(18_000, "w1", ready("Unknown")),
        node(18_010, "w2", ready("Unknown")),
        node(19_200, "w3", ready("Unknown")),
        node(18_200, "w1", taint),
        pod(18_100, "a", json!({"type": "podReady", "ready": false})),
        node(100_500, "w3", ready("True")),
    ]))
    .unwrap();
    r.transitions.sort_by_key(|t| t.at);
    assert_eq!(
        names(&points(&r)),
        [
            ("workers: Ready=Unknown (first)", "#1 (pause)", 8_000, 3),
            ("pods on workers: Ready=False", "#1 (pause)", 8_100, 1),
            (
                "workers: taint + node.kubernetes.io/unreachable:NoExecute",
                "#1 (pause)",
                8_200,
                1
            ),
            ("workers: Ready=Unknown (last)", "#1 (pause)", 9_200, 3),
            ("workers: Ready=True", "#5 (resume)", 500, 1),
        ]
    );
}
