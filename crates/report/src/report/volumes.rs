//! The "Volumes" and "Events" sections of `report.md`: claim bindings,
//! VolumeAttachment changes and Multi-Attach errors with the two volume
//! metrics, and the recorded
//! events. Each section appears only when the run has something to show.

use std::fmt::Write as _;

use super::format::{cell, rel, secs, t0_rel, table, utc_time};
use crate::record::RunResult;
use crate::timeline::{Attachments, Change, ObjectRef, multi_attach_volume};

/// Shown for a value the run did not observe.
const MISSING: &str = "—";

/// Both sections, in this order.
pub(super) fn sections(out: &mut String, r: &RunResult) {
    volumes(out, r);
    events(out, r);
}

fn opt_t0(ms: Option<i64>) -> String {
    ms.map(t0_rel).unwrap_or_else(|| MISSING.into())
}

fn volumes(out: &mut String, r: &RunResult) {
    let m = &r.metrics;
    let waits: Vec<_> = m
        .pods
        .iter()
        .filter(|p| p.replacement_volume_wait.is_some())
        .collect();
    let mut attachments = Attachments::default();
    let mut changes: Vec<[String; 5]> = Vec::new();
    for t in &r.transitions {
        if let Some(a) = attachments.see(t) {
            let (volume, node) = a.of.unwrap_or(("", ""));
            let what = match a.attached {
                Some(true) => "attached",
                Some(false) => "not attached",
                None => "deleted",
            };
            changes.push([
                rel(r, t.at),
                cell(a.name),
                cell(volume),
                cell(node),
                what.to_owned(),
            ]);
            continue;
        }
        let row = match (&t.object, &t.change) {
            (ObjectRef::Pvc { name }, Change::PvcBound { volume }) => [
                format!("claim {}", cell(name)),
                cell(volume),
                MISSING.into(),
                "bound".to_owned(),
            ],
            (
                _,
                Change::Event {
                    reason,
                    involved,
                    message,
                    ..
                },
            ) => {
                let Some(volume) = multi_attach_volume(reason, message) else {
                    continue;
                };
                [
                    cell(
                        &involved
                            .strip_prefix("Pod/")
                            .map_or_else(|| involved.clone(), |p| format!("pod {p}")),
                    ),
                    cell(volume),
                    MISSING.into(),
                    "Multi-Attach error: attached to another node".to_owned(),
                ]
            }
            (ObjectRef::Pvc { name }, Change::PvcDeleted) => [
                format!("claim {}", cell(name)),
                MISSING.into(),
                MISSING.into(),
                "deleted".to_owned(),
            ],
            _ => continue,
        };
        let [object, volume, node, change] = row;
        changes.push([rel(r, t.at), object, volume, node, change]);
    }
    if changes.is_empty() && m.volume_detaches.is_empty() && waits.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Volumes\n");
    if !m.volume_detaches.is_empty() {
        let _ = writeln!(
            out,
            "Volumes attached to a target node at T0, from the `node.kubernetes.io/out-of-service` \
             taint on that node to their VolumeAttachment seen detached or deleted.\n"
        );
        let rows = m
            .volume_detaches
            .iter()
            .map(|d| {
                [
                    cell(&d.volume),
                    d.claim.as_deref().map_or_else(|| MISSING.into(), cell),
                    cell(&d.node),
                    t0_rel(d.out_of_service_at),
                    opt_t0(d.detached_at),
                    d.detach_after.map_or_else(|| "not detached".into(), secs),
                ]
            })
            .collect();
        out.push_str(&table(
            [
                "volume",
                "claim",
                "node",
                "out-of-service taint",
                "detached",
                "detach after taint",
            ],
            rows,
        ));
        if let Some(max) = m.detach_after_out_of_service_max {
            let _ = writeln!(out, "\nLongest detach after the taint: {}.", secs(max));
        }
        out.push('\n');
    }
    if !waits.is_empty() {
        let _ = writeln!(
            out,
            "Replacement pods with claims: from being scheduled to the last of their volumes \
             attached on their node.\n"
        );
        let rows = waits
            .iter()
            .map(|p| {
                [
                    cell(p.replacement.as_deref().unwrap_or(MISSING)),
                    cell(p.replacement_node.as_deref().unwrap_or(MISSING)),
                    opt_t0(p.replacement_scheduled),
                    opt_t0(p.replacement_volume_attached),
                    p.replacement_volume_wait
                        .map_or_else(|| MISSING.into(), secs),
                ]
            })
            .collect();
        out.push_str(&table(
            [
                "replacement",
                "node",
                "scheduled",
                "volume attached",
                "waited",
            ],
            rows,
        ));
        out.push('\n');
    }
    if !changes.is_empty() {
        let _ = writeln!(
            out,
            "Claim bindings, VolumeAttachment changes and Multi-Attach errors:\n"
        );
        out.push_str(&table(
            ["time", "object", "volume", "node", "change"],
            changes,
        ));
        out.push('\n');
    }
}

fn events(out: &mut String, r: &RunResult) {
    let rows: Vec<[String; 6]> = r
        .transitions
        .iter()
        .filter_map(|t| match &t.change {
            Change::Event {
                reason,
                involved,
                message,
                count,
            } => Some([
                rel(r, t.at),
                utc_time(r.wall_clock(t.at)),
                cell(reason),
                cell(involved),
                count.map_or_else(|| MISSING.into(), |n| n.to_string()),
                cell(message),
            ]),
            _ => None,
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Events\n\nEvents of the watched reasons, when nodefall saw them (a repeat, \
         its count bumped, is listed again).\n"
    );
    out.push_str(&table(
        ["time", "UTC", "reason", "object", "count", "message"],
        rows,
    ));
    out.push('\n');
}
