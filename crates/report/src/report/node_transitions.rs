//! `report.md`'s Node transitions: every change nodefall saw on a node,
//! with its UTC time and the lag behind the API server's own stamp (set
//! aside where the stamp is not the change's time).

use std::fmt::Write as _;

use super::format::{MISSING, cell, rel, secs, signed_secs, table, utc_time};
use crate::record::RunResult;
use crate::timeline::{Change, Ms, ObjectRef, Transition};

/// The Node transitions table.
pub(super) fn section(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "## Node transitions\n");
    let mut stale = false;
    let rows: Vec<[String; 5]> = r
        .transitions
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match &t.object {
            ObjectRef::Node { name } => Some((i, t, name)),
            _ => None,
        })
        .map(|(i, t, name)| {
            let seen = r.wall_clock(t.at);
            let (lag, set_aside) = server_lag(r, name, t, &r.transitions[..i]);
            stale |= set_aside;
            [
                rel(r, t.at),
                utc_time(seen),
                cell(name),
                cell(&match &t.by {
                    Some(by) => format!("{} (by {by})", t.change.describe()),
                    None => t.change.describe() + &why_not_ready(&t.change),
                }),
                lag,
            ]
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "No node transition was observed.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Server lag is when nodefall saw the change minus the server's own timestamp for it \
         (condition `lastTransitionTime`, taint `timeAdded`), which has whole-second precision.{}\n",
        if stale {
            " A change already there when the watch began gives no lag (its stamp says how old \
             it was), nor does a Ready stamp older than the node's previous Ready change: it is \
             not the change's own time (a simulated node keeps its first Ready stamp)."
        } else {
            ""
        }
    );
    out.push_str(&table(
        ["time", "UTC", "node", "change", "server lag"],
        rows,
    ));
    out.push('\n');
}

/// Why a node is not Ready, in its condition's own words (`: container
/// runtime is down`), where it was recorded; nothing for Ready=True.
fn why_not_ready(c: &Change) -> String {
    match c {
        Change::NodeReady {
            status,
            message: Some(m),
            ..
        } if status != "True" && !m.is_empty() => format!(": {m}"),
        _ => String::new(),
    }
}

/// A server stamp this much older than something it must postdate is not
/// the change's own time (stamps are whole seconds: 1 s is their slack).
const STAMP_SLACK: Ms = 1_000;

/// The server lag of a node's transition: seen minus the server's stamp,
/// unless that is no lag. The change was there before the watch began (in
/// its first list, or stamped before the run: the object's age, not a
/// lag), or, for a Ready change, the stamp is older than the node's
/// previous Ready change nodefall saw (not this change's time).
/// The flag says the stamp was set aside.
fn server_lag(r: &RunResult, node: &str, t: &Transition, earlier: &[Transition]) -> (String, bool) {
    let Some(stamp) = t.server_time else {
        return (MISSING.into(), false);
    };
    let stamp = stamp.as_millisecond();
    let seen = r.wall_clock(t.at).as_millisecond();
    let listed = r.observed_from.is_some_and(|from| t.at <= from);
    if listed || stamp + STAMP_SLACK < r.started_at.as_millisecond() {
        return (format!("{MISSING} (before the watch began)"), true);
    }
    let previous_ready = matches!(t.change, Change::NodeReady { .. })
        .then(|| {
            earlier.iter().rev().find(|p| {
                matches!(&p.object, ObjectRef::Node { name } if name == node)
                    && matches!(p.change, Change::NodeReady { .. })
            })
        })
        .flatten();
    match previous_ready {
        Some(p) if stamp + STAMP_SLACK < r.wall_clock(p.at).as_millisecond() => (
            format!("{MISSING} (stale stamp, {} old)", secs(seen - stamp)),
            true,
        ),
        _ => (signed_secs(seen - stamp), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_not_ready_says_why_in_its_conditions_words_and_ready_says_nothing() {
        let ready = |status: &str, message: Option<&str>| Change::NodeReady {
            status: status.into(),
            reason: Some("KubeletNotReady".into()),
            message: message.map(Into::into),
        };
        assert_eq!(
            why_not_ready(&ready("False", Some("container runtime is down"))),
            ": container runtime is down"
        );
        assert_eq!(
            why_not_ready(&ready("True", Some("kubelet is posting ready status"))),
            ""
        );
        assert_eq!(why_not_ready(&ready("Unknown", None)), "");
        assert_eq!(why_not_ready(&ready("False", Some(""))), "");
    }
}
