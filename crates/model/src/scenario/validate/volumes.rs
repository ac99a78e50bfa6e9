//! Volume and event expectations: the `pvc` subject with `attachedTo`,
//! `detachedFrom`, `attached`, and `event` (with `message`) on pods or a
//! node. Kept apart from `expect` so the pod/node checks stay as they were.

#![deny(clippy::wildcard_enum_match_arm)]

use super::Ctx;
use crate::scenario::checked::{Condition, EventCond, Subject, VolumeCond};
use crate::scenario::model;

/// The pod and node conditions and filters, none of which shares an
/// expectation with a volume or an event condition.
fn others(e: &model::Expect) -> [(&'static str, bool); 13] {
    [
        ("ready", e.ready.is_some()),
        ("taint", e.taint.is_some()),
        ("noTaint", e.no_taint.is_some()),
        ("unschedulable", e.unschedulable.is_some()),
        ("exists", e.exists.is_some()),
        ("terminating", e.terminating.is_some()),
        ("count", e.count.is_some()),
        ("readyAtLeast", e.ready_at_least.is_some()),
        ("phase", e.phase.is_some()),
        ("reason", e.reason.is_some()),
        ("gracefulShutdown", e.graceful_shutdown.is_some()),
        ("on", e.on.is_some()),
        ("notOn", e.not_on.is_some()),
    ]
}

/// Subject and conditions of an expectation that uses a volume or event
/// field; `None` when it uses none (the pod/node checks then apply). The
/// inner `None`: refused, with the errors recorded.
pub(super) fn condition(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
) -> Option<Option<(Subject, Vec<Condition>)>> {
    let volume_fields = [
        ("attachedTo", e.attached_to.is_some()),
        ("detachedFrom", e.detached_from.is_some()),
        ("attached", e.attached.is_some()),
    ];
    if e.pvc.is_some() {
        return Some(pvc(cx, p, e, &volume_fields));
    }
    if e.event.is_some() {
        for (field, _) in volume_fields.iter().filter(|(_, set)| *set) {
            cx.err_key(
                &format!("{p}.{field}"),
                format!(
                    "`{field}` is about a claim's volume, but this expectation is about an event"
                ),
                Some("put it in an expectation with `pvc: CLAIM`".into()),
            );
        }
        return Some(event(cx, p, e));
    }
    let mut refused = false;
    let about = match (&e.node, &e.pods) {
        (Some(_), _) => "is about a node",
        (None, Some(_)) => "is about pods",
        (None, None) => "names no `pvc`",
    };
    for (field, _) in volume_fields.iter().filter(|(_, set)| *set) {
        cx.err_key(
            &format!("{p}.{field}"),
            format!("`{field}` applies to a claim's volume, but this expectation {about}"),
            Some("add `pvc: CLAIM` (a PersistentVolumeClaim of the scenario namespace)".into()),
        );
        refused = true;
    }
    if e.message.is_some() {
        cx.err_key(
            &format!("{p}.message"),
            "`message` narrows an `event` expectation, but this one names no `event`",
            Some("add `event: REASON` (e.g. `event: FailedAttachVolume`)".into()),
        );
        refused = true;
    }
    refused.then_some(None)
}

fn pvc(
    cx: &mut Ctx<'_>,
    p: &str,
    e: &model::Expect,
    volume_fields: &[(&'static str, bool); 3],
) -> Option<(Subject, Vec<Condition>)> {
    let claim = e.pvc.clone().unwrap_or_default();
    let errors_before = cx.diags.len();
    for (field, set) in [("node", e.node.is_some()), ("pods", e.pods.is_some())] {
        if set {
            cx.err_key(
                &format!("{p}.{field}"),
                format!("expectation names both `pvc` and `{field}`"),
                Some("split it into two expectations".into()),
            );
        }
    }
    for (field, set) in [
        ("event", e.event.is_some()),
        ("message", e.message.is_some()),
    ] {
        if set {
            cx.err_key(
                &format!("{p}.{field}"),
                format!("`{field}` applies to pods or a node, but this expectation is about a claim"),
                Some("write `event` with `pods: SELECTOR` (the pods using the claim) or `node: TARGET`".into()),
            );
        }
    }
    for (field, _) in others(e).iter().filter(|(_, set)| *set) {
        cx.err_key(
            &format!("{p}.{field}"),
            format!("`{field}` applies to pods or a node, but this expectation is about a claim"),
            Some("use `attachedTo`, `detachedFrom` or `attached`".into()),
        );
    }
    if let Err(why) = crate::scenario::names::dns1123_subdomain(&claim) {
        cx.err(
            &format!("{p}.pvc"),
            format!("`{claim}` is not a valid PersistentVolumeClaim name: {why}"),
            Some(
                "e.g. `data-web-0` (a StatefulSet's claim is TEMPLATE-STATEFULSET-ORDINAL)".into(),
            ),
        );
    }
    let given: Vec<&str> = volume_fields
        .iter()
        .filter(|(_, set)| *set)
        .map(|(n, _)| *n)
        .collect();
    let (on, attached) = match given.as_slice() {
        ["attachedTo"] => (
            Some(cx.target_ref(&format!("{p}.attachedTo"), e.attached_to.as_deref()?)?),
            true,
        ),
        ["detachedFrom"] => (
            Some(cx.target_ref(&format!("{p}.detachedFrom"), e.detached_from.as_deref()?)?),
            false,
        ),
        ["attached"] => (None, e.attached?),
        [] => {
            cx.err(
                p,
                "expectation has no condition",
                Some("add one of `attachedTo`, `detachedFrom`, `attached`".into()),
            );
            return None;
        }
        several => {
            cx.err(
                p,
                format!("expectation has {} at once", super::one_of(several)),
                Some("give one of `attachedTo`, `detachedFrom`, `attached` per expectation".into()),
            );
            return None;
        }
    };
    (cx.diags.len() == errors_before).then(|| {
        (
            Subject::Pvc { claim, on },
            vec![Condition::Volume(VolumeCond::Attached(attached))],
        )
    })
}

fn event(cx: &mut Ctx<'_>, p: &str, e: &model::Expect) -> Option<(Subject, Vec<Condition>)> {
    let errors_before = cx.diags.len();
    let reason = e.event.clone().unwrap_or_default();
    // An event reason is a CamelCase word (`FailedAttachVolume`).
    if reason.is_empty() || !reason.chars().all(|c| c.is_ascii_alphanumeric()) {
        cx.err(
            &format!("{p}.event"),
            format!("`{reason}` is not an event reason"),
            Some("an event reason is one word, e.g. `FailedAttachVolume`".into()),
        );
    }
    if e.message.as_deref() == Some("") {
        cx.err(
            &format!("{p}.message"),
            "`message` is empty",
            Some("give a part of the message to look for, or leave `message` out".into()),
        );
    }
    for (field, _) in others(e).iter().filter(|(_, set)| *set) {
        let (message, help) = if *field == "on" || *field == "notOn" {
            (
                format!(
                    "`{field}` cannot filter an `event` expectation: its pods are matched by name and labels, wherever they ran"
                ),
                "narrow the selector in `pods` instead".to_owned(),
            )
        } else {
            (
                format!(
                    "`{field}` cannot share an expectation with `event`, which is about something happening, not a state"
                ),
                format!("put `{field}` in an expectation of its own"),
            )
        };
        cx.err_key(&format!("{p}.{field}"), message, Some(help));
    }
    let subject = match (&e.node, &e.pods) {
        (Some(n), None) => Subject::Node(cx.target_ref(&format!("{p}.node"), n)?),
        (None, Some(sel)) => Subject::Pods {
            selector: cx.selector(&format!("{p}.pods"), sel)?,
            on: None,
            not_on: None,
        },
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
                "`event` names no object it is about",
                Some("add `pods: SELECTOR` (events about those pods) or `node: TARGET`".into()),
            );
            return None;
        }
    };
    (cx.diags.len() == errors_before).then(|| {
        (
            subject,
            vec![Condition::Event(EventCond {
                reason,
                message: e.message.clone(),
            })],
        )
    })
}

/// `event` inside `wait.until`: refused, an event is an occurrence to be
/// expected within a window, and a wait has none to count it from.
pub(super) fn event_in_wait(cx: &mut Ctx<'_>, p: &str) {
    cx.err_key(
        &format!("{p}.event"),
        "`event` has no meaning inside `wait.until`: it is something happening, not a state to wait for",
        Some("write it as an expectation step with `within`".into()),
    );
}

#[cfg(test)]
mod tests {
    use crate::scenario::checked::{Condition, EventCond, StepKind, Subject, VolumeCond};
    use crate::scenario::load::load_str;

    /// The seed-000 shape: out-of-service taint, then the claim's volume
    /// detached from the target, the replacement's volume attached
    /// elsewhere, and Multi-Attach events expected (or not).
    const SEED_000: &str = "name: t\nnamespace: ns\ntarget: {mostPods: app=web}\nsteps:\n  - fault: pause-vm\n  - action: {taint: {node: target, key: node.kubernetes.io/out-of-service, value: nodeshutdown, effect: NoExecute}}\n  - expect: {pvc: data-web-0, detachedFrom: target, within: 60s}\n  - expect: {pvc: data-web-0, attached: true, within: 2m}\n  - expect: {event: FailedAttachVolume, pods: app=web, message: Multi-Attach, never: 3m}\n  - expect: {event: NodeNotReady, node: target, within: 1m}\n";

    #[test]
    fn seed_000_volume_and_event_expectations_check() {
        let c = load_str("s.yaml", std::path::Path::new("."), SEED_000)
            .and_then(|l| crate::scenario::validate::validate(l, &crate::files::Memory::default()))
            .unwrap_or_else(|e| panic!("{e}"));
        let exps: Vec<(Subject, Vec<Condition>)> = c
            .steps
            .iter()
            .filter_map(|s| {
                let StepKind::Expect(e) = &s.kind else {
                    return None;
                };
                Some((e.subject.clone(), e.conditions.clone()))
            })
            .collect();
        assert_eq!(
            exps[0],
            (
                Subject::Pvc {
                    claim: "data-web-0".into(),
                    on: Some("target".into())
                },
                vec![Condition::Volume(VolumeCond::Attached(false))]
            )
        );
        assert_eq!(
            exps[1].0,
            Subject::Pvc {
                claim: "data-web-0".into(),
                on: None
            }
        );
        assert_eq!(
            exps[2].1,
            vec![Condition::Event(EventCond {
                reason: "FailedAttachVolume".into(),
                message: Some("Multi-Attach".into())
            })]
        );
        assert_eq!(exps[3].0, Subject::Node("target".into()));
    }
}
