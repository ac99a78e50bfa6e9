//! The "Remediation" section of `report.md`: each act that released the
//! failed node's pods (who, when) and the figures of the remediation,
//! from the record's judgement (`record::remediation`), and the duplicate
//! windows (`record::machines`). Shown when something remediated the node
//! or a replaced pod's duplicate window was measured.

use std::fmt::Write as _;

use super::format::{cell, secs, t0_rel, table};
use crate::record::RunResult;
use crate::record::remediation::{Fencing, Release, Remediation};
use crate::scenario::model::{Does, Effect};

/// Shown for a value the run did not observe.
const MISSING: &str = "—";

pub(super) fn section(out: &mut String, r: &RunResult) {
    if r.remediation.is_none() && r.duplicates.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Remediation\n");
    if let Some(m) = &r.remediation {
        acts(out, m);
    } else {
        out.push_str("Nothing remediated the failed nodes (no act).\n\n");
    }
    duplicates(out, r);
}

/// Each replaced pod: how long its original still ran on the failed node
/// once its replacement ran.
fn duplicates(out: &mut String, r: &RunResult) {
    if r.duplicates.is_empty() {
        return;
    }
    let rows = r
        .duplicates
        .iter()
        .map(|d| {
            let window = match d.window {
                Some(0) => "0 s".to_owned(),
                Some(w) => format!("**{}**", secs(w)),
                None => "unknown".into(),
            };
            [
                cell(&d.pod),
                cell(&d.node),
                cell(&format!(
                    "{} on {}",
                    d.replacement,
                    d.replacement_node.as_deref().unwrap_or("?")
                )),
                match d.replacement_seen {
                    Some(seen) => format!(
                        "{} (API), {} (seen)",
                        t0_rel(d.replacement_running),
                        t0_rel(seen)
                    ),
                    None => t0_rel(d.replacement_running),
                },
                d.original_last_seen.map_or_else(|| MISSING.into(), t0_rel),
                window,
                cell(d.note.as_deref().unwrap_or("")),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "pod",
            "failed node",
            "replacement",
            "replacement running",
            "original last seen running",
            "duplicate window",
            "note",
        ],
        rows,
    ));
    let how: Vec<String> = r
        .machines
        .iter()
        .map(|m| format!("{}: {} ({} looks)", m.node, m.how, m.samples))
        .collect();
    let _ = writeln!(
        out,
        "\nDuplicate window: the time both copies ran, by each node's own container runtime \
         (looked at once a second; each look that saw both counts one interval), or, where the \
         replacement's node was not looked at, from its start by the API server to the \
         original's last sighting; 0 when the original was not seen running after the \
         replacement started (a machine off or paused runs none). Looked at: {}.\n",
        how.join("; ")
    );
    shared_volumes(out, r);
}

/// The volumes the replacements took over from originals that ran on (or
/// may have): two writers on one volume.
fn shared_volumes(out: &mut String, r: &RunResult) {
    let rows: Vec<[String; 6]> = r
        .duplicates
        .iter()
        .filter(|d| d.window != Some(0))
        .flat_map(|d| {
            d.volumes.iter().map(move |v| {
                [
                    cell(&d.pod),
                    cell(&v.claim),
                    cell(&v.volume),
                    cell(&v.node),
                    t0_rel(v.attached_at),
                    d.window
                        .map_or_else(|| "unknown".into(), |w| format!("**{}**", secs(w))),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Volumes the replacements took over while their originals ran on (two writers on one \
         volume for up to the duplicate window):\n"
    );
    out.push_str(&table(
        [
            "pod",
            "claim",
            "volume",
            "attached to",
            "attached at",
            "duplicate window",
        ],
        rows,
    ));
    out.push('\n');
}

fn acts(out: &mut String, m: &Remediation) {
    let rows = m
        .acts
        .iter()
        .map(|a| {
            [
                t0_rel(a.at),
                cell(&a.node),
                cell(&a.what),
                cell(&match (&a.by, &a.user) {
                    (Some(by), _) => by.clone(),
                    (None, Some(user)) => format!("{user} (audit log)"),
                    (None, None) => "unknown".into(),
                }),
                match (a.not_ready_for, a.ready_again) {
                    (Some(d), None) => secs(d),
                    (Some(d), Some(r)) => format!("{} (Ready again at {})", secs(d), t0_rel(r)),
                    (None, _) => "**Ready** when acted on".into(),
                },
            ]
        })
        .collect();
    out.push_str(&table(["time", "node", "act", "by", "NotReady for"], rows));
    out.push('\n');
    out.push_str(&table(["figure", "value", "from .. to"], figures(m)));
    let _ = writeln!(
        out,
        "\nActs: NoExecute taints other than the node lifecycle controller's own, and failed \
         Nodes deleted, remediators' objects; \"by\" is the field manager that wrote the act (a \
         deletion's author comes from the API server's audit log where there is one). Fencing is \
         {}.\n",
        match &m.fencing_seen {
            Some(how) => format!("as the backend saw the machine ({how})"),
            None =>
                "by nodefall's own account of the machine (its poweroff and shutdown faults)".into(),
        }
    );
}

fn figures(m: &Remediation) -> Vec<[String; 3]> {
    let opt = |v: Option<i64>| v.map(secs).unwrap_or_else(|| MISSING.into());
    let fencing = match &m.fencing {
        Fencing::OffBefore { off, lead } => {
            format!(
                "off {} before the act (since {})",
                secs(*lead),
                t0_rel(*off)
            )
        }
        Fencing::OffAfter { off, after } => format!(
            "off only {} after the act ({}): its pods were released while it could run them",
            secs(*after),
            t0_rel(*off)
        ),
        Fencing::NotOff { fault: Some(f) } => format!(
            "never off during the run ({})",
            match f.does() {
                Does::Breaks(Effect::Paused) =>
                    "paused, not off: its containers run again when it resumes",
                Does::Breaks(Effect::CutOff) => "cut off, not off: its containers ran on",
                Does::Breaks(Effect::KubeletStopped) =>
                    "its kubelet stopped, not the machine: its containers ran on",
                Does::Breaks(Effect::Off) | Does::Restores(_) => f.name(),
            }
        ),
        Fencing::NotOff { fault: None } if m.fencing_seen.is_some() => {
            "never seen off during the run".into()
        }
        Fencing::NotOff { fault: None } => {
            "never off by nodefall's account (no fault of its on the node)".into()
        }
    };
    let release = match &m.release {
        Release::Released { after } => secs(*after),
        Release::NoAttachments => "no attachments (nothing to release)".into(),
        Release::NotReleased { left } => {
            format!("not released: {} still attached", left.join(", "))
        }
    };
    let cleanup = if m.cleanup.is_empty() {
        "no taint to take off".to_owned()
    } else {
        m.cleanup
            .iter()
            .map(|l| match l.removed {
                Some(at) => format!(
                    "{} off at {}{}",
                    l.taint,
                    t0_rel(at),
                    l.removed_by
                        .as_ref()
                        .map(|b| format!(" by {b}"))
                        .unwrap_or_default()
                ),
                None => format!("{} left behind", l.taint),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    vec![
        [
            "detection".into(),
            opt(m.detection),
            "the fault .. the node NotReady".into(),
        ],
        [
            "decision".into(),
            opt(m.decision),
            "NotReady .. the first act".into(),
        ],
        [
            "fencing".into(),
            cell(&fencing),
            "the first act .. the machine off".into(),
        ],
        [
            "release".into(),
            cell(&release),
            "the first act .. its VolumeAttachments gone".into(),
        ],
        [
            "recovery".into(),
            match m.recovery {
                Some(v) => format!("{} ({} of {} pods)", secs(v), m.replaced, m.pods),
                None => format!("not all replaced ({} of {} pods)", m.replaced, m.pods),
            },
            "the first act .. the last replacement Ready".into(),
        ],
        [
            "clean-up".into(),
            cell(&cleanup),
            "after the node is back".into(),
        ],
    ]
}
