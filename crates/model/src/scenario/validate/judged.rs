//! Expectations decided at the end of the run from the failed machines'
//! record: `duplicateWindow: {pods: SELECTOR}` with `max`,
//! `fencedBefore: replacement` with `pods`, and `remediation: {by,
//! notReadyFor}` with `node`. They take no window.

#![deny(clippy::wildcard_enum_match_arm)]

use super::Ctx;
use crate::duration::parse_duration;
use crate::scenario::checked::{Condition, EndOfRunCond, Subject};
use crate::scenario::expr::WindowSpec;
use crate::scenario::model;

/// Whether `e` is one of these.
pub(super) fn is_judged(e: &model::Expect) -> bool {
    e.duplicate_window.is_some() || e.fenced_before.is_some() || e.remediation.is_some()
}

/// Which of them `e` is, for messages.
fn name(e: &model::Expect) -> &'static str {
    if e.duplicate_window.is_some() {
        "duplicateWindow"
    } else if e.fenced_before.is_some() {
        "fencedBefore"
    } else {
        "remediation"
    }
}

/// `remediation: {by, notReadyFor}` on `node: TARGET`.
fn remediation(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
    spec: &model::RemediationSpec,
) -> Option<(Subject, Vec<Condition>)> {
    if e.pods.is_some() {
        cx.err_key(
            &format!("{p}.pods"),
            "`remediation` is about a node",
            Some("write `node: TARGET`".into()),
        );
        return None;
    }
    let Some(node) = &e.node else {
        cx.err(
            p,
            "`remediation` names no node",
            Some("add `node: TARGET`: the failed node whose remediation it judges".into()),
        );
        return None;
    };
    let node = cx.target_ref(&format!("{p}.node"), node)?;
    if spec.by.as_deref().is_some_and(str::is_empty) {
        cx.err(
            &format!("{p}.remediation.by"),
            "`by` names a field manager, and is empty",
            Some("write the remediator's field manager, e.g. `by: example-remediator`".into()),
        );
        return None;
    }
    let not_ready_for = match &spec.not_ready_for {
        None => None,
        Some(d) => match parse_duration(d) {
            Ok(d) => Some(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            Err(why) => {
                cx.err(
                    &format!("{p}.remediation.notReadyFor"),
                    why,
                    Some("write a duration: `30s`".into()),
                );
                return None;
            }
        },
    };
    Some((
        Subject::Node(node),
        vec![Condition::EndOfRun(EndOfRunCond::Remediation {
            by: spec.by.clone(),
            not_ready_for,
        })],
    ))
}

/// Its subject and condition; None (not Some(None)) when `e` is not one.
pub(super) fn condition(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
) -> Option<Option<(Subject, Vec<Condition>)>> {
    if !is_judged(e) {
        if e.max.is_some() {
            cx.err_key(
                &format!("{p}.max"),
                "`max` belongs to `duplicateWindow`",
                Some("write `duplicateWindow: {pods: SELECTOR}` with it".into()),
            );
        }
        return None;
    }
    let others = [
        ("node", e.node.is_some() && e.remediation.is_none()),
        ("on", e.on.is_some()),
        ("notOn", e.not_on.is_some()),
        ("ready", e.ready.is_some()),
        ("readyAtLeast", e.ready_at_least.is_some()),
        ("count", e.count.is_some()),
        ("terminating", e.terminating.is_some()),
        ("phase", e.phase.is_some()),
        ("taint", e.taint.is_some()),
        ("noTaint", e.no_taint.is_some()),
        ("exists", e.exists.is_some()),
        ("remediatedBy", e.remediated_by.is_some()),
    ];
    let what = name(e);
    for (field, _) in others.iter().filter(|(_, set)| *set) {
        cx.err_key(
            &format!("{p}.{field}"),
            format!("`{field}` cannot share an expectation with `{what}`, which is decided once at the end of the run"),
            Some(format!("put `{field}` in an expectation of its own")),
        );
    }
    if let Some(spec) = &e.remediation {
        if e.duplicate_window.is_some() || e.fenced_before.is_some() {
            cx.err(
                p,
                format!("expectation has `remediation` and `{}` at once", name(e)),
                Some("split it into two expectations".into()),
            );
            return Some(None);
        }
        return Some(remediation(cx, p, e, spec));
    }
    Some(match (&e.duplicate_window, e.fenced_before) {
        (Some(_), Some(_)) => {
            cx.err(
                p,
                "expectation has `duplicateWindow` and `fencedBefore` at once",
                Some("split it into two expectations".into()),
            );
            None
        }
        (Some(d), None) => {
            if e.pods.is_some() {
                cx.err_key(
                    &format!("{p}.pods"),
                    "`duplicateWindow` names its pods itself",
                    Some("write `duplicateWindow: {pods: SELECTOR}`".into()),
                );
                return Some(None);
            }
            let selector = cx.selector(&format!("{p}.duplicateWindow.pods"), &d.pods)?;
            let Some(max) = &e.max else {
                cx.err(
                    p,
                    "`duplicateWindow` needs `max`: the longest time two copies may run at once",
                    Some("add `max: 0s`".into()),
                );
                return Some(None);
            };
            let max = match parse_duration(max) {
                Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
                Err(why) => {
                    cx.err(
                        &format!("{p}.max"),
                        why,
                        Some("write a duration: `0s`, `5s`".into()),
                    );
                    return Some(None);
                }
            };
            Some((
                Subject::Pods {
                    selector,
                    on: None,
                    not_on: None,
                },
                vec![Condition::EndOfRun(EndOfRunCond::DuplicateWindowAtMost(
                    max,
                ))],
            ))
        }
        (None, Some(model::FencedBefore::Replacement)) => {
            if e.max.is_some() {
                cx.err_key(
                    &format!("{p}.max"),
                    "`max` belongs to `duplicateWindow`",
                    None,
                );
            }
            let Some(sel) = &e.pods else {
                cx.err(
                    p,
                    "`fencedBefore` names no pods",
                    Some("add `pods: SELECTOR`: the pods whose replacements it is about".into()),
                );
                return Some(None);
            };
            let selector = cx.selector(&format!("{p}.pods"), sel)?;
            Some((
                Subject::Pods {
                    selector,
                    on: None,
                    not_on: None,
                },
                vec![Condition::EndOfRun(EndOfRunCond::FencedBeforeReplacement)],
            ))
        }
        (None, None) => None,
    })
}

/// Its "window": none may be written, nor `since`; never inside a wait.
pub(super) fn window(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
    wanted: bool,
) -> Option<WindowSpec> {
    let what = name(e);
    if !wanted {
        cx.err_key(
            &format!("{p}.{what}"),
            format!("`{what}` cannot be waited for: it is decided once, at the end of the run"),
            Some("write it as an expectation step".into()),
        );
        return None;
    }
    let ok = super::no_window(cx, p, e, what, "at the end of the run, over the whole run");
    ok.then_some(WindowSpec::EndOfRun)
}
