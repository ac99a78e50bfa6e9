//! `report.md`'s pods section: each pod on a target node at T0, when it
//! was evicted and deleted, and its replacement's milestones; then, per
//! owner, whether the replacements came only after the old pods were gone.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::format::{MISSING, cell, had_fault, nodes_word, secs, t0_rel, table};
use crate::record::RunResult;
use crate::timeline::Ms;
use crate::timeline::metrics::PodRecovery;

/// The pods table and the per-owner lines under it.
pub(super) fn section(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "## Pods on the {} node(s)\n", nodes_word(r));
    let pods = &r.metrics.pods;
    if pods.is_empty() {
        let _ = writeln!(out, "No pod was recorded on a target node at T0.\n");
        return;
    }
    if had_fault(r) {
        let _ = writeln!(out, "Times are relative to T0.\n");
    } else {
        let _ = writeln!(
            out,
            "The pods on the target nodes at T0 and what replaced them (no fault was injected). \
             Times are relative to T0.\n"
        );
    }
    let rows = pods
        .iter()
        .map(|p| {
            let terminating_for = match (p.terminating_at, p.terminating_for) {
                (None, _) => MISSING.to_string(),
                (Some(_), Some(d)) if p.still_present => {
                    format!("still Terminating at end ({} so far)", secs(d))
                }
                (Some(_), None) if p.still_present => "still Terminating at end".into(),
                (Some(_), Some(d)) => secs(d),
                (Some(_), None) => MISSING.into(),
            };
            let terminating_at = match p.terminating_at {
                Some(t) => t0_rel(t),
                None if p.still_present => "not evicted".into(),
                None => MISSING.into(),
            };
            let deleted = match p.deleted_at {
                Some(d) => t0_rel(d),
                None if p.still_present => "still present at end".into(),
                None => MISSING.into(),
            };
            let created = match (p.replacement_created, replacement_vs_old(p)) {
                (Some(c), Some((_, how))) => format!("{}<br>{}", t0_rel(c), cell(&how)),
                (Some(c), None) => t0_rel(c),
                (None, _) => MISSING.into(),
            };
            [
                cell(&p.pod),
                cell(p.owner.as_deref().unwrap_or(MISSING)),
                cell(&p.node),
                terminating_at,
                terminating_for,
                deleted,
                replacement(p),
                cell(p.replacement_node.as_deref().unwrap_or(MISSING)),
                created,
                opt_t0(p.replacement_scheduled),
                opt_t0(p.replacement_running),
                opt_t0(p.replacement_ready),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "pod",
            "owner",
            "node",
            "Terminating at",
            "Terminating for",
            "deleted",
            "replacement",
            "on node",
            "created",
            "scheduled",
            "Running",
            "Ready",
        ],
        rows,
    ));
    out.push('\n');
    // Per owner: were replacements created only after the old pod was gone?
    let owners: BTreeSet<Option<&str>> = pods.iter().map(|p| p.owner.as_deref()).collect();
    for owner in owners {
        let group: Vec<&PodRecovery> = pods
            .iter()
            .filter(|p| p.owner.as_deref() == owner)
            .collect();
        let (mut after, mut during, mut none) = (0, 0, 0);
        for p in &group {
            match replacement_vs_old(p) {
                Some((true, _)) => after += 1,
                Some((false, _)) => during += 1,
                None => none += 1,
            }
        }
        let mut parts = Vec::new();
        if after > 0 {
            parts.push(format!(
                "{after} replaced only after the old pod was deleted"
            ));
        }
        if during > 0 {
            parts.push(format!("{during} replaced while the old pod still existed"));
        }
        if none > 0 {
            parts.push(format!("{none} not replaced by the end of the run"));
        }
        let _ = writeln!(
            out,
            "- {} ({} pod{}): {}.",
            cell(owner.unwrap_or("no owner")),
            group.len(),
            if group.len() == 1 { "" } else { "s" },
            parts.join(", ")
        );
    }
    out.push('\n');
}

/// The replacement's name, after those stranded on a failed node before it.
fn replacement(p: &PodRecovery) -> String {
    let mut out = cell(p.replacement.as_deref().unwrap_or("none by the end"));
    for s in &p.stranded {
        let deleted = match s.deleted {
            Some(d) => format!("deleted there at {}", t0_rel(d)),
            None => "still there at the end".into(),
        };
        let _ = write!(
            out,
            "<br>after {} stranded on {} (made {}, never ran, {deleted})",
            cell(&s.pod),
            cell(&s.node),
            t0_rel(s.created)
        );
    }
    out
}

/// How the replacement's creation relates to its predecessor's lifetime.
fn replacement_vs_old(p: &PodRecovery) -> Option<(bool, String)> {
    let created = p.replacement_created?;
    Some(match (p.deleted_at, p.terminating_at) {
        (Some(deleted), _) if created >= deleted => (
            true,
            format!("{} after the old pod was deleted", secs(created - deleted)),
        ),
        (_, Some(term)) if created >= term => (
            false,
            format!(
                "while the old pod was Terminating ({} after it began)",
                secs(created - term)
            ),
        ),
        _ => (false, "while the old pod still existed".into()),
    })
}

fn opt_t0(ms: Option<Ms>) -> String {
    ms.map(t0_rel).unwrap_or_else(|| MISSING.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::metrics::Stranded;

    #[test]
    fn the_replacement_names_what_was_stranded_before_it() {
        let p = PodRecovery {
            replacement: Some("db-0".into()),
            stranded: vec![Stranded {
                pod: "db-0".into(),
                node: "worker-1".into(),
                created: 53,
                deleted: Some(8_010),
            }],
            ..PodRecovery::default()
        };
        assert_eq!(
            replacement(&p),
            "db-0<br>after db-0 stranded on worker-1 (made T0+0.053s, never ran, \
             deleted there at T0+8.010s)"
        );
        let none = PodRecovery::default();
        assert_eq!(replacement(&none), "none by the end");
    }
}
