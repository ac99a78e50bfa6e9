//! The Volumes lane's tests: small hand-made runs and the real
//! `statefulset-volumes.json`.

use super::*;
use crate::timeline::seen;

fn run(transitions: Vec<Transition>) -> RunResult {
    let mut r: RunResult = serde_json::from_str(include_str!(
        "../../../../tests/fixtures/results/statefulset-pass.json"
    ))
    .unwrap();
    r.t0 = Some(1_000);
    r.finished = 10_000;
    r.transitions = transitions;
    r.metrics.volume_detaches.clear();
    r
}

fn va(at: Ms, name: &str, node: &str, pv: &str, attached: bool) -> Transition {
    seen(
        at,
        ObjectRef::VolumeAttachment { name: name.into() },
        Change::VolumeAttachment {
            node: node.into(),
            volume: pv.into(),
            attached,
        },
    )
}

fn deleted(at: Ms, name: &str) -> Transition {
    seen(
        at,
        ObjectRef::VolumeAttachment { name: name.into() },
        Change::VolumeAttachmentDeleted,
    )
}

fn bound(at: Ms, claim: &str, pv: &str) -> Transition {
    seen(
        at,
        ObjectRef::Pvc { name: claim.into() },
        Change::PvcBound { volume: pv.into() },
    )
}

fn multi_attach_event(at: Ms, pod: &str, pv: &str, count: i32) -> Transition {
    seen(
        at,
        ObjectRef::Event {
            name: format!("{pod}.e"),
        },
        Change::Event {
            reason: "FailedAttachVolume".into(),
            involved: format!("Pod/{pod}"),
            message: format!(
                "Multi-Attach error for volume \"{pv}\" Volume is already exclusively \
                 attached to one node and can't be attached to another"
            ),
            count: Some(count),
        },
    )
}

/// (from, to, tone) of each segment.
fn spans(row: &Row) -> Vec<(Ms, Ms, Tone)> {
    row.segments
        .iter()
        .map(|s| (s.from, s.to, s.tone))
        .collect()
}

fn row<'a>(rows: &'a [Row], pv: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.label.ends_with(&format!("pv {pv})")) || r.label == format!("pv {pv}"))
        .unwrap_or_else(|| panic!("no row of {pv}: {rows:?}"))
}

#[test]
fn attach_detach_and_reattach_elsewhere() {
    let r = run(vec![
        bound(50, "data-web-0", "pv-1"),
        va(100, "csi-a", "w1", "pv-1", false),
        va(200, "csi-a", "w1", "pv-1", true),
        va(2_000, "csi-a", "w1", "pv-1", false),
        deleted(2_500, "csi-a"),
        va(3_000, "csi-b", "w2", "pv-1", false),
        va(4_000, "csi-b", "w2", "pv-1", true),
    ]);
    let rows = rows(&r);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let pv = &rows[0];
    assert_eq!(pv.label, "data-web-0 (pv pv-1)");
    assert_eq!(
        spans(pv),
        [
            (100, 200, Tone::Fault),
            (200, 2_000, Tone::Ok),
            (2_000, 2_500, Tone::Fault),
            (3_000, 4_000, Tone::Fault),
            (4_000, 10_000, Tone::Ok),
        ]
    );
    let titles: Vec<&str> = pv.segments.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "pv-1 attaching on w1 for 0.100s",
            "pv-1 attached to w1 for 1.800s",
            "pv-1 detaching from w1 for 0.500s",
            "pv-1 attaching on w2 for 1.000s",
            "pv-1 attached to w2 for 6.000s",
        ]
    );
    let marks: Vec<(Ms, Option<Tone>, &str)> = pv
        .marks
        .iter()
        .map(|m| (m.at, m.tone, m.title.as_str()))
        .collect();
    assert_eq!(
        marks,
        [
            (
                2_000,
                Some(Tone::Neutral),
                "pv-1 detached from w1 at T0+1.000s"
            ),
            (
                4_000,
                Some(Tone::Ok),
                "pv-1 attached again, on w2 (was on w1) at T0+3.000s"
            ),
        ]
    );
}

#[test]
fn multi_attach_marks_the_volume_it_names() {
    let r = run(vec![
        va(100, "csi-a", "w1", "pv-1", true),
        va(100, "csi-c", "w1", "pv-2", true),
        va(3_000, "csi-b", "w2", "pv-1", false),
        multi_attach_event(3_500, "web-0", "pv-1", 2),
        deleted(6_000, "csi-a"),
        va(7_000, "csi-b", "w2", "pv-1", true),
    ]);
    let rows = rows(&r);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(row(&rows, "pv-2").marks.is_empty(), "{rows:?}");
    let pv1 = row(&rows, "pv-1");
    let bad: Vec<&Mark> = pv1
        .marks
        .iter()
        .filter(|m| m.tone == Some(Tone::Bad))
        .collect();
    assert_eq!(bad.len(), 1, "{pv1:?}");
    assert_eq!(bad[0].at, 3_500);
    assert_eq!(
        bad[0].title,
        "Multi-Attach error at T0+2.500s: pod web-0 cannot attach pv-1 (x2)"
    );
    // attached to w1 while w2 waits, then w2 waits alone, then attached
    assert_eq!(
        spans(pv1),
        [
            (100, 3_000, Tone::Ok),
            (3_000, 6_000, Tone::Bad),
            (6_000, 7_000, Tone::Fault),
            (7_000, 10_000, Tone::Ok),
        ]
    );
    assert_eq!(
        pv1.segments[1].title,
        "pv-1 attached to w1 while the attach on w2 waits (Multi-Attach) for 3.000s"
    );
}

/// What kind showed (issue 58): the attach-detach controller creates no
/// VolumeAttachment for the replacement while the old node holds the
/// volume, it only reports Multi-Attach; the lane is Bad from the error
/// until the old attachment goes, then the new one attaches.
#[test]
fn a_multi_attach_without_a_new_attachment_is_a_wait() {
    let r = run(vec![
        va(100, "csi-a", "w1", "pv-1", true),
        multi_attach_event(3_000, "web-0", "pv-1", 1),
        deleted(8_000, "csi-a"),
        va(8_500, "csi-b", "w2", "pv-1", false),
        va(8_600, "csi-b", "w2", "pv-1", true),
    ]);
    let pv1 = row(&rows(&r), "pv-1").clone();
    assert_eq!(
        spans(&pv1),
        [
            (100, 3_000, Tone::Ok),
            (3_000, 8_000, Tone::Bad),
            (8_500, 8_600, Tone::Fault),
            (8_600, 10_000, Tone::Ok),
        ],
        "{pv1:?}"
    );
    assert_eq!(
        pv1.segments[1].title,
        "pv-1 attached to w1 while pod web-0 waits for it (Multi-Attach) for 5.000s"
    );
    // A Multi-Attach error once the volume is attached to no node: a mark only.
    let r = run(vec![
        va(100, "csi-a", "w1", "pv-1", true),
        va(2_000, "csi-a", "w1", "pv-1", false),
        multi_attach_event(3_000, "web-0", "pv-1", 1),
    ]);
    let pv1 = row(&rows(&r), "pv-1").clone();
    assert!(spans(&pv1).iter().all(|s| s.2 != Tone::Bad), "{pv1:?}");
    assert!(pv1.marks.iter().any(|m| m.tone == Some(Tone::Bad)));
}

#[test]
fn a_deleted_attachment_carries_its_volume() {
    let r = run(vec![
        va(100, "csi-a", "w1", "pv-1", true),
        va(200, "csi-c", "w2", "pv-2", true),
        deleted(5_000, "csi-c"),
        // an attachment never seen before: nothing to carry
        deleted(5_500, "csi-z"),
    ]);
    let rows = rows(&r);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (pv1, pv2) = (row(&rows, "pv-1"), row(&rows, "pv-2"));
    assert_eq!(spans(pv1), [(100, 10_000, Tone::Ok)]);
    assert!(pv1.marks.is_empty(), "{pv1:?}");
    assert_eq!(spans(pv2), [(200, 5_000, Tone::Ok)]);
    assert_eq!(pv2.marks.len(), 1, "{pv2:?}");
    assert_eq!(pv2.marks[0].at, 5_000);
    assert_eq!(
        pv2.marks[0].title,
        "pv-2 detached from w2 (attachment deleted) at T0+4.000s"
    );
}

#[test]
fn no_section_without_attachments() {
    // a claim and a Multi-Attach event, but no VolumeAttachment
    let r = run(vec![
        bound(50, "data-web-0", "pv-1"),
        multi_attach_event(3_500, "web-0", "pv-1", 1),
    ]);
    assert!(rows(&r).is_empty());
    let lanes = super::super::lanes::build(&r);
    assert!(
        lanes.sections.iter().all(|s| s.name != "Volumes"),
        "{lanes:?}"
    );
}

#[test]
fn a_real_run_shows_its_volume_between_pods_and_remediation() {
    let r: RunResult = serde_json::from_str(include_str!(
        "../../../../tests/fixtures/results/statefulset-volumes.json"
    ))
    .unwrap();
    let lanes = super::super::lanes::build(&r);
    let names: Vec<&str> = lanes.sections.iter().map(|s| s.name.as_str()).collect();
    let at = |name: &str| names.iter().position(|n| *n == name);
    let volumes = at("Volumes").unwrap_or_else(|| panic!("{names:?}"));
    assert!(at("Pods").is_some_and(|p| p < volumes), "{names:?}");
    assert!(at("Remediation").is_none_or(|p| p > volumes), "{names:?}");
    let rows = &lanes.sections[volumes].rows;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let pv = &rows[0];
    assert_eq!(
        pv.label,
        "persistent-storage-statefulset-nfs-1 (pv pvc-666b6ab5-b27c-4432-8c9e-2cf4fad83bbf)"
    );
    let tones: Vec<Tone> = pv.segments.iter().map(|s| s.tone).collect();
    // attached to worker-2, detaching, attaching on worker-3, attached
    assert_eq!(tones, [Tone::Ok, Tone::Fault, Tone::Fault, Tone::Ok]);
    assert!(pv.segments[3].title.contains("attached to worker-3"));
    let count = |tone: Tone| pv.marks.iter().filter(|m| m.tone == Some(tone)).count();
    assert_eq!(count(Tone::Bad), 2, "two Multi-Attach events: {pv:?}");
    assert_eq!(count(Tone::Neutral), 1, "one detach: {pv:?}");
    assert_eq!(count(Tone::Ok), 1, "reattached on worker-3: {pv:?}");
    assert_eq!(count(Tone::Cordon), 1, "the out-of-service taint: {pv:?}");
    assert!(pv.marks.windows(2).all(|w| w[0].at <= w[1].at), "{pv:?}");
}
