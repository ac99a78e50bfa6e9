//! Expectations (and `wait.until`): the subject, its conditions, the window.
//! A node subject takes [`NodeCond`]s (and `gracefulShutdown`, a
//! [`PreflightCond`]), pods take [`PodsCond`]s; the other subjects are
//! checked in `judged`, `clients` and `volumes`.

#![deny(clippy::wildcard_enum_match_arm)]

use super::{Ctx, no_window, one_of};
use crate::scenario::checked::{Condition, NodeCond, PodsCond, PreflightCond, Subject};
use crate::scenario::expr::{Expr, WindowSpec};
use crate::scenario::model::{self, ReadyValue, TaintEffect};
use crate::scenario::suggest::closest;

fn taint_ref(text: &str) -> Result<(String, Option<TaintEffect>), String> {
    let (key, effect) = match text.rsplit_once(':') {
        Some((k, e)) => (k, Some(e)),
        None => (text, None),
    };
    let effect = match effect {
        None => None,
        Some("NoSchedule") => Some(TaintEffect::NoSchedule),
        Some("PreferNoSchedule") => Some(TaintEffect::PreferNoSchedule),
        Some("NoExecute") => Some(TaintEffect::NoExecute),
        Some(e) => {
            let s = closest(e, ["NoSchedule", "PreferNoSchedule", "NoExecute"])
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return Err(format!(
                "unknown taint effect `{e}`{s}; use NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
    };
    if key.is_empty() || key.contains('=') {
        return Err(format!(
            "`{text}` is not a taint reference; write `KEY` or `KEY:EFFECT`"
        ));
    }
    Ok((key.to_string(), effect))
}

/// Subject and conditions of an `expect` (or a `wait.until`).
pub(super) fn condition(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
) -> Option<(Subject, Vec<Condition>)> {
    if let Some(judged) = super::judged::condition(cx, p, e) {
        return judged;
    }
    if let Some(client) = super::clients::condition(cx, p, e) {
        return client;
    }
    if let Some(volume_or_event) = super::volumes::condition(cx, p, e) {
        return volume_or_event;
    }
    let errors_before = cx.diags.len();
    let subject = match (&e.node, &e.pods) {
        (Some(n), None) => {
            for (field, set) in [("on", e.on.is_some()), ("notOn", e.not_on.is_some())] {
                if set {
                    cx.err_key(
                        &format!("{p}.{field}"),
                        format!("`{field}` filters pods; this expectation is about a node"),
                        None,
                    );
                }
            }
            // A node condition over a set holds when it holds on each node;
            // a graceful-shutdown verdict is one node's.
            let node = if e.graceful_shutdown.is_some() {
                cx.target_ref(&format!("{p}.node"), n)?
            } else {
                cx.any_target_ref(&format!("{p}.node"), n)?
            };
            Subject::Node(node)
        }
        (None, Some(sel)) => {
            let selector = cx.selector(&format!("{p}.pods"), sel)?;
            // A set's pods are those on any of its nodes.
            let on = match &e.on {
                Some(t) => Some(cx.any_target_ref(&format!("{p}.on"), t)?),
                None => None,
            };
            let not_on = match &e.not_on {
                Some(t) => Some(cx.any_target_ref(&format!("{p}.notOn"), t)?),
                None => None,
            };
            Subject::Pods {
                selector,
                on,
                not_on,
            }
        }
        (Some(_), Some(_)) => {
            cx.err(
                p,
                "expectation names both `node` and `pods`",
                Some("split it into two expectations".into()),
            );
            return None;
        }
        (None, None) => {
            cx.err(
                p,
                "expectation names no subject",
                Some("add `node: TARGET` or `pods: SELECTOR`".into()),
            );
            return None;
        }
    };
    let is_node = matches!(subject, Subject::Node(_));
    let wrong = |cx: &mut Ctx<'_>, field: &str, set: bool, for_node: bool| {
        if set && for_node != is_node {
            let (applies, other) = if for_node {
                ("a node", "pods")
            } else {
                ("pods", "a node")
            };
            cx.err_key(
                &format!("{p}.{field}"),
                format!("`{field}` applies to {applies}, but this expectation is about {other}"),
                None,
            );
        }
    };
    wrong(cx, "taint", e.taint.is_some(), true);
    wrong(cx, "noTaint", e.no_taint.is_some(), true);
    wrong(cx, "unschedulable", e.unschedulable.is_some(), true);
    wrong(cx, "remediatedBy", e.remediated_by.is_some(), true);
    wrong(cx, "exists", e.exists.is_some(), true);
    wrong(cx, "terminating", e.terminating.is_some(), false);
    // On a set of nodes `count` is how many of them; on one node, nothing.
    let set = match &subject {
        Subject::Node(t) => cx.sets.contains(t).then_some(t.as_str()),
        Subject::Pods { .. }
        | Subject::Pvc { .. }
        | Subject::Service { .. }
        | Subject::Probe(_) => None,
    };
    match (&subject, e.count.is_some()) {
        (Subject::Node(t), true) if set.is_none() => cx.err_key(
            &format!("{p}.count"),
            format!("`count` on a node expectation counts the nodes of a set, and target `{t}` is one node"),
            Some("name a target with `nodes:`, or drop `count`".into()),
        ),
        _ => wrong(cx, "count", e.count.is_some() && set.is_none(), false),
    }
    wrong(cx, "readyAtLeast", e.ready_at_least.is_some(), false);
    wrong(cx, "readyBelow", e.ready_below.is_some(), false);
    if e.ready_below == Some(0) && !is_node {
        cx.err(
            &format!("{p}.readyBelow"),
            "`readyBelow: 0` can never hold: no count of pods is below 0",
            Some("use `ready: 0` for no ready pods".into()),
        );
    }
    wrong(cx, "phase", e.phase.is_some(), false);
    wrong(cx, "reason", e.reason.is_some(), false);
    wrong(cx, "gracefulShutdown", e.graceful_shutdown.is_some(), true);

    // Each subject's own family: the pairing the judge relies on.
    let mut node: Vec<NodeCond> = Vec::new();
    let mut pods: Vec<PodsCond> = Vec::new();
    match (e.ready, is_node) {
        (None, _) => {}
        (Some(ReadyValue::Status(s)), true) => node.push(NodeCond::Ready(s)),
        (Some(ReadyValue::Count(n)), false) => pods.push(PodsCond::Ready(Some(n))),
        (Some(ReadyValue::All), false) => pods.push(PodsCond::Ready(None)),
        (Some(ReadyValue::Status(s)), false) => {
            cx.err(
                &format!("{p}.ready"),
                format!("`ready: {s}` is a node status; for pods give a count or `all`"),
                None,
            );
        }
        (Some(ReadyValue::Count(_) | ReadyValue::All), true) => {
            cx.err(
                &format!("{p}.ready"),
                "a node's `ready` is `True`, `False` or `Unknown`",
                None,
            );
        }
    }
    for (field, text, negate) in [("taint", &e.taint, false), ("noTaint", &e.no_taint, true)] {
        if let Some(t) = text {
            match taint_ref(t) {
                Ok((key, effect)) => {
                    cx.taint_key(&format!("{p}.{field}"), &key);
                    node.push(if negate {
                        NodeCond::NoTaint { key, effect }
                    } else {
                        NodeCond::Taint { key, effect }
                    });
                }
                Err(m) => cx.err(&format!("{p}.{field}"), m, None),
            }
        }
    }
    let mut preflight = None;
    if is_node {
        node.extend(e.unschedulable.map(NodeCond::Unschedulable));
        node.extend(e.exists.map(NodeCond::Exists));
        if let (Some(n), Some(t)) = (e.count, set) {
            let counted = node.len() + usize::from(e.remediated_by.is_some());
            if counted == 0 {
                cx.err_key(
                    &format!("{p}.count"),
                    format!("`count: {n}` counts the nodes of `{t}` that meet a condition, and there is none"),
                    Some("add the condition they meet, e.g. `ready: Unknown`".into()),
                );
            } else {
                node.push(NodeCond::Count(n));
            }
        }
        if let Some(manager) = &e.remediated_by {
            if manager.trim().is_empty() {
                cx.err(
                    &format!("{p}.remediatedBy"),
                    "`remediatedBy` names a field manager, and is empty",
                    Some("write the remediator's field manager, e.g. `remediatedBy: example-remediator`".into()),
                );
            } else {
                node.push(NodeCond::RemediatedBy(manager.clone()));
            }
        }
        if let Some(required) = e.graceful_shutdown {
            alone(cx, p, e);
            preflight = Some(PreflightCond::GracefulShutdown(required));
        }
    } else {
        pods.extend(e.terminating.map(PodsCond::Terminating));
        pods.extend(e.count.map(PodsCond::Count));
        pods.extend(e.ready_at_least.map(PodsCond::ReadyAtLeast));
        pods.extend(e.ready_below.map(PodsCond::ReadyBelow));
        pods.extend(e.phase.map(PodsCond::Phase));
        pods.extend(e.reason.clone().map(PodsCond::Reason));
    }
    // A condition of the other subject's family was refused above (`wrong`).
    let conds: Vec<Condition> = node
        .into_iter()
        .map(Condition::Node)
        .chain(preflight.map(Condition::Preflight))
        .chain(pods.into_iter().map(Condition::Pods))
        .collect();
    if conds.is_empty() && cx.diags.len() == errors_before {
        let allowed = if is_node {
            "`ready`, `taint`, `noTaint`, `unschedulable`, `exists`, `remediatedBy`, `gracefulShutdown` (and on a set, `count`)"
        } else {
            "`ready`, `readyAtLeast`, `readyBelow`, `terminating`, `count`, `phase`, `reason`"
        };
        cx.err(
            p,
            "expectation has no condition",
            Some(format!("add one of {allowed}")),
        );
        return None;
    }
    Some((subject, conds))
}

/// `gracefulShutdown` shares its expectation with no other condition: it is
/// read once at preflight, the others are watched on the timeline.
fn alone(cx: &mut Ctx<'_>, p: &str, e: &model::Expect) {
    let others = [
        ("ready", e.ready.is_some()),
        ("taint", e.taint.is_some()),
        ("noTaint", e.no_taint.is_some()),
        ("unschedulable", e.unschedulable.is_some()),
        ("exists", e.exists.is_some()),
    ];
    for (field, _) in others.iter().filter(|(_, set)| *set) {
        cx.err_key(
            &format!("{p}.{field}"),
            format!(
                "`{field}` cannot share an expectation with `gracefulShutdown`, which is decided once at preflight, before the first fault"
            ),
            Some(format!("put `{field}` in an expectation of its own")),
        );
    }
}

/// The preflight "window" of a `gracefulShutdown` expectation: none may be
/// written, nor `since`.
fn preflight_window(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
    wanted: bool,
) -> Option<WindowSpec> {
    if !wanted {
        cx.err_key(
            &format!("{p}.gracefulShutdown"),
            "`gracefulShutdown` has no meaning inside `wait.until`: it is read once, at preflight",
            Some("write it as an expectation step before the `shutdown` fault".into()),
        );
        return None;
    }
    let ok = no_window(
        cx,
        p,
        e,
        "gracefulShutdown",
        "at preflight, before the first fault",
    );
    ok.then_some(WindowSpec::Preflight)
}

/// The window of an expectation. `wanted` is false inside `wait.until`, which has none.
pub(super) fn window(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
    wanted: bool,
) -> Option<WindowSpec> {
    if e.graceful_shutdown.is_some() {
        return preflight_window(cx, p, e, wanted);
    }
    if e.probe.is_some() {
        return super::clients::probe_window(cx, p, e, wanted);
    }
    if super::judged::is_judged(e) {
        return super::judged::window(cx, p, e, wanted);
    }
    if !wanted && e.event.is_some() {
        super::volumes::event_in_wait(cx, p);
        return None;
    }
    let given: Vec<(&str, &String)> = [
        ("within", &e.within),
        ("after", &e.after),
        ("notBefore", &e.not_before),
        ("holdsFor", &e.holds_for),
        ("never", &e.never),
    ]
    .into_iter()
    .filter_map(|(n, v)| v.as_ref().map(|v| (n, v)))
    .collect();
    if !wanted {
        if let Some((n, _)) = given.first() {
            cx.err_key(
                &format!("{p}.{n}"),
                format!("`{n}` has no meaning inside `wait.until`"),
                Some("the wait's `timeout` bounds it".into()),
            );
            return None;
        }
        if e.since.is_some() {
            cx.err_key(
                &format!("{p}.since"),
                "`since` has no meaning inside `wait.until`",
                None,
            );
            return None;
        }
        return Some(WindowSpec::HoldsFor(Expr::parse("0s").ok()?));
    }
    let [(name, text)] = given.as_slice() else {
        let msg = if given.is_empty() {
            "expectation has no time window".to_string()
        } else {
            let names: Vec<&str> = given.iter().map(|(n, _)| *n).collect();
            format!("expectation has {} at once", one_of(&names))
        };
        cx.err(
            p,
            msg,
            Some("give exactly one of `within`, `after`, `notBefore`, `holdsFor`, `never`".into()),
        );
        return None;
    };
    let path = format!("{p}.{name}");
    let parsed = match *name {
        "within" => WindowSpec::parse_within(text),
        "after" => WindowSpec::parse_after(text),
        other => Expr::parse(text).map(|x| match other {
            "notBefore" => WindowSpec::NotBefore(x),
            "holdsFor" => WindowSpec::HoldsFor(x),
            _ => WindowSpec::Never(x),
        }),
    };
    match parsed {
        Ok(w) => Some(w),
        Err(e) => {
            cx.expr_err(&path, e);
            None
        }
    }
}
