//! The step list: exactly one kind per step, ids, `since` anchors, and the
//! order of faults (a node is broken once, then reverted by the matching fault).

use std::collections::{HashMap, HashSet};

use super::action::action;
use super::expect::{condition, window};
use super::{Ctx, one_of, present};
use crate::scenario::checked::{Anchor, Expectation, Step, StepKind};
use crate::scenario::model::{self, FaultKind};
use crate::scenario::suggest::closest;

/// Which node each target currently has broken, and by which step.
type Broken = HashMap<String, (FaultKind, usize)>;

pub(super) fn steps(cx: &mut Ctx<'_>, s: &model::Scenario, namespace: &str) -> Vec<Step> {
    if s.steps.is_empty() {
        cx.err(
            "steps",
            "the scenario has no steps",
            Some("add at least a `fault` and an `expect`".into()),
        );
    }
    let mut out = Vec::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut broken: Broken = HashMap::new();
    let mut last_event: Option<usize> = None;
    let mut last_fault: Option<usize> = None;
    // `gracefulShutdown` expectations (index, path, target) and `shutdown`
    // faults (index, target), checked against each other at the end.
    let mut preflight: Vec<(usize, String, String)> = Vec::new();
    let mut preflight_steps: HashSet<usize> = HashSet::new();
    let mut shutdowns: Vec<(usize, String)> = Vec::new();

    for (i, st) in s.steps.iter().enumerate() {
        let path = format!("steps[{i}]");
        if let Some(id) = &st.id {
            cx.dns_label(&format!("{path}.id"), "step id", id);
            if ids.insert(id.clone(), i).is_some() {
                cx.err(
                    &format!("{path}.id"),
                    format!("step id `{id}` is used twice"),
                    None,
                );
            }
        }
        let kinds = present(&[
            ("fault", st.fault.is_some()),
            ("action", st.action.is_some()),
            ("expect", st.expect.is_some()),
        ]);
        if kinds.len() != 1 {
            let msg = if kinds.is_empty() {
                "step does nothing".to_string()
            } else {
                format!("step has {} at once", one_of(&kinds))
            };
            cx.err(&path, msg, Some("each step is exactly one of `fault`, `action`, `expect`; split it into several steps".into()));
            continue;
        }
        if st.node.is_some() && st.fault.is_none() {
            cx.err_key(
                &format!("{path}.node"),
                "`node` goes with `fault` only",
                Some("actions and expectations name their node inside".into()),
            );
        }
        let kind = if let Some(fault) = st.fault {
            let node = st.node.clone().unwrap_or_else(|| "target".into());
            let node_path = if st.node.is_some() {
                format!("{path}.node")
            } else {
                format!("{path}.fault")
            };
            let Some(node) = cx.any_target_ref(&node_path, &node) else {
                continue;
            };
            check_fault_order(cx, &path, fault, &node, i, &mut broken);
            if fault == FaultKind::Shutdown {
                shutdowns.push((i, node.clone()));
            }
            last_event = Some(i);
            last_fault = Some(i);
            StepKind::Fault { fault, node }
        } else if let Some(a) = &st.action {
            let Some(action) = action(cx, &format!("{path}.action"), a, namespace) else {
                continue;
            };
            last_event = Some(i);
            StepKind::Action(action)
        } else if let Some(e) = &st.expect {
            let p = format!("{path}.expect");
            let is_preflight = e.graceful_shutdown.is_some();
            let anchor = match &e.since {
                // read before the first fault; `window` refuses a `since`
                _ if is_preflight => Anchor::Start,
                None => last_event.map_or(Anchor::Start, Anchor::Step),
                Some(since) if since == "fault" => match last_fault {
                    Some(f) => Anchor::Step(f),
                    None => {
                        cx.err(
                            &format!("{p}.since"),
                            "`since: fault` but no fault comes before this step",
                            None,
                        );
                        continue;
                    }
                },
                Some(since) => match ids.get(since) {
                    Some(&j) if preflight_steps.contains(&j) => {
                        cx.err(
                            &format!("{p}.since"),
                            format!("`since: {since}` names a `gracefulShutdown` expectation, which is decided at preflight and has no moment on the timeline"),
                            Some("anchor it on a fault or an action".into()),
                        );
                        continue;
                    }
                    Some(&j) if j < i => Anchor::Step(j),
                    _ => {
                        let known: Vec<&str> = ids.keys().map(String::as_str).collect();
                        let help = closest(since, known.iter().copied())
                            .map(|c| format!("did you mean `{c}`? "))
                            .unwrap_or_default()
                            + "`since` takes `fault` or the `id` of an earlier step";
                        cx.err(
                            &format!("{p}.since"),
                            format!("no earlier step has id `{since}`"),
                            help,
                        );
                        continue;
                    }
                },
            };
            let Some((subject, conditions)) = condition(cx, &p, e) else {
                continue;
            };
            let Some(window) = window(cx, &p, e, true) else {
                continue;
            };
            if let (true, crate::scenario::checked::Subject::Node(t)) = (is_preflight, &subject) {
                preflight.push((i, p.clone(), t.clone()));
                preflight_steps.insert(i);
            }
            StepKind::Expect(Expectation {
                subject,
                conditions,
                window,
                anchor,
                explicit_anchor: e.since.is_some(),
            })
        } else {
            continue;
        };
        out.push(Step {
            index: i,
            id: st.id.clone(),
            name: st.name.clone(),
            path,
            kind,
        });
    }
    check_preflight_order(cx, &preflight, &shutdowns);
    out
}

/// A `gracefulShutdown` expectation is about a `shutdown` fault on its
/// target that comes later: the verdict is read before any fault, and means
/// nothing for a node that is never shut down.
fn check_preflight_order(
    cx: &mut Ctx<'_>,
    preflight: &[(usize, String, String)],
    shutdowns: &[(usize, String)],
) {
    for (i, p, target) in preflight {
        let on_target = || shutdowns.iter().filter(|(_, t)| t == target);
        if on_target().any(|(j, _)| j > i) {
            continue;
        }
        let path = format!("{p}.gracefulShutdown");
        match on_target().map(|(j, _)| *j).max() {
            Some(j) => cx.err(
                &path,
                format!(
                    "`gracefulShutdown` on `{target}` comes after its `shutdown` fault at step #{}: the verdict is read at preflight, before any fault",
                    j + 1
                ),
                Some(format!("move this expectation before step #{}", j + 1)),
            ),
            None => cx.err(
                &path,
                format!("`gracefulShutdown` on `{target}`, but no step shuts `{target}` down"),
                Some(format!(
                    "graceful node shutdown runs only when the node is shut down through its init system: add a `fault: shutdown`{} after this step, or remove it",
                    if target == "target" {
                        String::new()
                    } else {
                        format!(" with `node: {target}`")
                    }
                )),
            ),
        }
    }
}

fn check_fault_order(
    cx: &mut Ctx<'_>,
    path: &str,
    fault: FaultKind,
    node: &str,
    i: usize,
    broken: &mut Broken,
) {
    let p = format!("{path}.fault");
    if fault.breaks() {
        if let Some((prev, at)) = broken.get(node) {
            cx.err(
                &p,
                format!(
                    "`{fault}` on `{node}`, which is still down from `{prev}` at step #{}",
                    at + 1
                ),
                Some(format!(
                    "revert it first with `{}`",
                    prev.revert().map_or("", FaultKind::name)
                )),
            );
        } else {
            broken.insert(node.to_string(), (fault, i));
        }
    } else {
        match broken.get(node) {
            Some((prev, _)) if fault.undoes().any(|u| u == *prev) => {
                broken.remove(node);
            }
            Some((prev, at)) => cx.err(
                &p,
                format!(
                    "`{fault}` cannot undo `{prev}` (step #{}) on `{node}`",
                    at + 1
                ),
                Some(format!(
                    "use `{}`",
                    prev.revert().map_or("", FaultKind::name)
                )),
            ),
            None => {
                let undoes: Vec<&str> = fault.undoes().map(FaultKind::name).collect();
                cx.err(
                    &p,
                    format!("`{fault}` on `{node}`, but no earlier step broke it"),
                    Some(format!("`{fault}` reverts {}", one_of(&undoes))),
                );
            }
        }
    }
}
