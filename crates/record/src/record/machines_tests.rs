#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use super::*;
use crate::timeline::Change;

const T0: Ms = 10_000;

fn db(uid: &str) -> PodContainer {
    PodContainer {
        namespace: "ns".into(),
        pod: "db-0".into(),
        uid: uid.into(),
        container: "app".into(),
    }
}

fn look(at: Ms, power: Power, containers: Result<Vec<PodContainer>, &str>) -> Look {
    Look {
        at,
        power,
        containers: containers.map_err(str::to_owned),
    }
}

/// db-0 (uid `old`) on w1 at T0.
fn history() -> Vec<Transition> {
    let pod = ObjectRef::Pod {
        name: "db-0".into(),
        uid: "old".into(),
    };
    vec![
        Transition {
            at: 1_000,
            server_time: None,
            object: pod.clone(),
            change: Change::PodAdded {
                labels: Default::default(),
                owner: Some("StatefulSet/db".into()),
                claims: Vec::new(),
            },
            by: None,
        },
        Transition {
            at: 1_100,
            server_time: None,
            object: pod,
            change: Change::PodScheduled { node: "w1".into() },
            by: None,
        },
    ]
}

/// db-0 replaced on w2, its containers running 30 s after T0.
fn replaced() -> Vec<PodRecovery> {
    vec![PodRecovery {
        pod: "db-0".into(),
        node: "w1".into(),
        owner: Some("StatefulSet/db".into()),
        replacement: Some("db-0".into()),
        replacement_node: Some("w2".into()),
        replacement_running: Some(30_000),
        ..PodRecovery::default()
    }]
}

#[test]
fn a_track_keeps_power_changes_running_spans_and_blind_stretches() {
    let looks = [
        look(T0, Power::On, Ok(vec![db("old")])),
        look(T0 + 1_000, Power::On, Ok(vec![db("old"), db("old")])),
        look(T0 + 2_000, Power::On, Err("exec refused")),
        look(T0 + 3_000, Power::On, Err("exec refused")),
        look(T0 + 4_000, Power::Paused, Err("container paused")),
        look(T0 + 5_000, Power::On, Ok(vec![db("old")])),
        look(T0 + 6_000, Power::Off, Err("not running")),
    ];
    let t = MachineTrack::of("w1", "docker exec w1", 1_000, &looks);
    assert_eq!(t.samples, 7);
    assert_eq!((t.from, t.to), (T0, T0 + 6_000));
    assert_eq!(
        t.power,
        vec![
            (T0, Power::On),
            (T0 + 4_000, Power::Paused),
            (T0 + 5_000, Power::On),
            (T0 + 6_000, Power::Off),
        ]
    );
    // a paused or off machine is not blind: nothing runs on it
    assert_eq!(
        t.blind,
        vec![Blind {
            from: T0 + 2_000,
            to: T0 + 3_000,
            why: "exec refused".into()
        }]
    );
    assert_eq!(t.pods.len(), 1, "one pod, its containers counted once");
    assert_eq!(
        t.pods[0].running,
        vec![
            Span {
                from: T0,
                to: T0 + 1_000
            },
            Span {
                from: T0 + 5_000,
                to: T0 + 5_000
            },
        ]
    );
    assert_eq!(t.power_at(T0 + 4_500), Some(Power::Paused));
    assert_eq!(t.power_at(T0 - 1), None);
    assert_eq!(t.off_from(T0), Some(T0 + 6_000));
    assert_eq!(t.off_from(T0 + 7_000), Some(T0 + 7_000));
}

#[test]
fn the_original_seen_running_after_its_replacement_started_is_a_duplicate() {
    // a partition: the original runs on until the node is back, 52 s
    let looks: Vec<Look> = (0..=60)
        .map(|s| {
            let running = if s <= 52 { vec![db("old")] } else { vec![] };
            look(T0 + s * 1_000, Power::On, Ok(running))
        })
        .collect();
    let track = MachineTrack::of("w1", "docker exec w1", 1_000, &looks);
    let w = duplicate_windows(&history(), T0, &replaced(), &[track]);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].window, Some(22_000), "{w:?}");
    assert_eq!(w[0].original_last_seen, Some(52_000));
    assert_eq!(w[0].replacement_node.as_deref(), Some("w2"));
    assert_eq!(w[0].note, None);
}

#[test]
fn a_machine_off_before_the_replacement_ran_means_no_duplicate() {
    let looks = [
        look(T0, Power::On, Ok(vec![db("old")])),
        look(T0 + 1_000, Power::Off, Err("not running")),
        look(T0 + 40_000, Power::Off, Err("not running")),
    ];
    let track = MachineTrack::of("w1", "docker exec w1", 1_000, &looks);
    let w = duplicate_windows(&history(), T0, &replaced(), &[track]);
    assert_eq!(w[0].window, Some(0));
    assert_eq!(w[0].original_last_seen, None);
    assert_eq!(w[0].note.as_deref(), Some("w1 off"));
}

#[test]
fn a_machine_on_but_unseen_leaves_the_window_unknown() {
    let looks = [
        look(T0, Power::On, Ok(vec![db("old")])),
        look(T0 + 20_000, Power::On, Err("exec: timeout")),
        look(T0 + 40_000, Power::On, Err("exec: timeout")),
    ];
    let track = MachineTrack::of("w1", "docker exec w1", 1_000, &looks);
    let w = duplicate_windows(&history(), T0, &replaced(), &[track]);
    assert_eq!(w[0].window, None);
    assert!(
        w[0].note.as_deref().unwrap().starts_with("unknown: w1 on"),
        "{w:?}"
    );
    // another pod of the same name (the replacement, back on w1 later) is
    // not the original
    let looks = [
        look(T0, Power::On, Ok(vec![db("old")])),
        look(T0 + 45_000, Power::On, Ok(vec![db("new")])),
    ];
    let track = MachineTrack::of("w1", "docker exec w1", 1_000, &looks);
    let w = duplicate_windows(&history(), T0, &replaced(), &[track]);
    assert_eq!(w[0].window, Some(0), "{w:?}");
}

#[test]
fn no_track_of_the_node_no_window() {
    assert!(duplicate_windows(&history(), T0, &replaced(), &[]).is_empty());
}

#[test]
fn both_copies_seen_by_the_witness_count_the_looks_that_saw_both() {
    // the original runs on w1 until 52 s; the replacement on w2 from 28 s
    // (the API server said 30 s: its status came later)
    let w1: Vec<Look> = (0..=60)
        .map(|s| {
            let running = if s <= 52 { vec![db("old")] } else { vec![] };
            look(T0 + s * 1_000, Power::On, Ok(running))
        })
        .collect();
    let w2: Vec<Look> = (0..=60)
        .map(|s| {
            let running = if s >= 28 { vec![db("new")] } else { vec![] };
            look(T0 + s * 1_000, Power::On, Ok(running))
        })
        .collect();
    let tracks = [
        MachineTrack::of("w1", "docker exec w1", 1_000, &w1),
        MachineTrack::of("w2", "docker exec w2", 1_000, &w2),
    ];
    let w = duplicate_windows(&history(), T0, &replaced(), &tracks);
    assert_eq!(w[0].replacement_seen, Some(28_000));
    assert_eq!(w[0].original_last_seen, Some(52_000));
    // looks 28..=52 saw both: 25 looks of 1 s
    assert_eq!(w[0].window, Some(25_000), "{w:?}");
}

#[test]
fn a_machine_unseen_while_it_boots_again_after_its_pods_were_deleted_hides_nothing() {
    let mut looks = vec![
        look(T0, Power::On, Ok(vec![db("old")])),
        look(T0 + 1_000, Power::Off, Err("not running")),
        look(T0 + 27_000, Power::Off, Err("not running")),
    ];
    // powered on at 28 s: its shell does not answer while it boots
    looks.extend((28..=35).map(|s| look(T0 + s * 1_000, Power::On, Err("timeout"))));
    let track = MachineTrack::of("w1", "docker exec w1", 1_000, &looks);
    let mut pods = replaced();
    pods[0].deleted_at = Some(20_000);
    let w = duplicate_windows(&history(), T0, &pods, std::slice::from_ref(&track));
    assert_eq!(w[0].window, Some(0), "{w:?}");
    assert_eq!(
        w[0].note.as_deref(),
        Some("w1 off since the original last ran")
    );
    // the pod not deleted: the kubelet may start it again once booted
    let w = duplicate_windows(&history(), T0, &replaced(), &[track]);
    assert_eq!(w[0].window, None, "{w:?}");
}

/// db-0 with claim data-db-0 (volume pv-0 attached to w1 before T0): its
/// volume attached to w2 after T0 is what both copies had; one attached to
/// w2 before T0 was not taken over.
#[test]
fn the_volume_the_replacement_took_over_is_named() {
    let mut h = history();
    let Change::PodAdded { claims, .. } = &mut h[0].change else {
        unreachable!()
    };
    claims.push("data-db-0".into());
    let at = |at: Ms, object: ObjectRef, change: Change| Transition {
        at,
        server_time: None,
        object,
        change,
        by: None,
    };
    let va = |name: &str| ObjectRef::VolumeAttachment { name: name.into() };
    let attached = |node: &str, yes: bool| Change::VolumeAttachment {
        node: node.into(),
        volume: "pv-0".into(),
        attached: yes,
    };
    h.push(at(
        1_200,
        ObjectRef::Pvc {
            name: "data-db-0".into(),
        },
        Change::PvcBound {
            volume: "pv-0".into(),
        },
    ));
    h.push(at(1_300, va("va-1"), attached("w1", true)));
    h.push(at(T0 + 20_000, va("va-1"), attached("w1", false)));
    h.push(at(T0 + 20_500, va("va-2"), attached("w2", false)));
    h.push(at(T0 + 21_000, va("va-2"), attached("w2", true)));
    let w1: Vec<Look> = (0..=60)
        .map(|s| look(T0 + s * 1_000, Power::On, Ok(vec![db("old")])))
        .collect();
    let track = MachineTrack::of("w1", "docker exec w1", 1_000, &w1);
    let w = duplicate_windows(&h, T0, &replaced(), std::slice::from_ref(&track));
    assert_eq!(
        w[0].volumes,
        [SharedVolume {
            claim: "data-db-0".into(),
            volume: "pv-0".into(),
            node: "w2".into(),
            attached_at: 21_000,
        }],
        "{w:?}"
    );
    // Attached to w2 before T0: nothing taken over.
    let mut early = h.clone();
    early.truncate(4);
    early.push(at(T0 - 500, va("va-2"), attached("w2", true)));
    let w = duplicate_windows(&early, T0, &replaced(), &[track]);
    assert!(w[0].volumes.is_empty(), "{w:?}");
}
