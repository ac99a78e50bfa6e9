//! `action:` steps: exactly one action each, its targets, selectors and bounds.

use super::expect::{condition, window};
use super::{Ctx, DEFAULT_RETRY, DEFAULT_TIMEOUT, one_of, present, workload};
use crate::scenario::checked::{Action, Drain, WorkloadKind};
use crate::scenario::expr::Expr;
use crate::scenario::model;

pub(super) fn action(
    cx: &mut Ctx<'_>,
    path: &str,
    a: &model::ActionSpec,
    namespace: &str,
) -> Option<Action> {
    let kinds = present(&[
        ("apply", a.apply.is_some()),
        ("taint", a.taint.is_some()),
        ("untaint", a.untaint.is_some()),
        ("cordon", a.cordon.is_some()),
        ("uncordon", a.uncordon.is_some()),
        ("drain", a.drain.is_some()),
        ("delete-node", a.delete_node.is_some()),
        ("force-delete-pods", a.force_delete_pods.is_some()),
        ("scale", a.scale.is_some()),
        ("wait", a.wait.is_some()),
        ("delete-namespace", a.delete_namespace.is_some()),
    ]);
    if kinds.len() != 1 {
        let msg = if kinds.is_empty() {
            "empty action".to_string()
        } else {
            format!("action has {} at once", one_of(&kinds))
        };
        cx.err(
            path,
            msg,
            Some(format!(
                "an action is exactly one of {}",
                one_of(&model::ACTION_NAMES)
            )),
        );
        return None;
    }
    let node =
        |cx: &mut Ctx<'_>, key: &str, n: &str| cx.target_ref(&format!("{path}.{key}.node"), n);
    if let Some(files) = &a.apply {
        return Some(Action::Apply(
            cx.manifests(&format!("{path}.apply"), &files.0),
        ));
    }
    if let Some(t) = &a.taint {
        cx.taint_key(&format!("{path}.taint.key"), &t.key);
        if let Some(v) = &t.value {
            cx.taint_value(&format!("{path}.taint.value"), v);
        }
        let node = node(cx, "taint", &t.node)?;
        return Some(Action::Taint {
            node,
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect,
        });
    }
    if let Some(t) = &a.untaint {
        cx.taint_key(&format!("{path}.untaint.key"), &t.key);
        let node = node(cx, "untaint", &t.node)?;
        return Some(Action::Untaint {
            node,
            key: t.key.clone(),
            effect: t.effect,
        });
    }
    if let Some(t) = &a.cordon {
        return Some(Action::Cordon {
            node: node(cx, "cordon", &t.node)?,
        });
    }
    if let Some(t) = &a.uncordon {
        return Some(Action::Uncordon {
            node: node(cx, "uncordon", &t.node)?,
        });
    }
    if let Some(t) = &a.delete_node {
        return Some(Action::DeleteNode {
            node: node(cx, "delete-node", &t.node)?,
        });
    }
    if let Some(d) = &a.drain {
        let p = format!("{path}.drain");
        if d.nodes.0.is_empty() {
            cx.err(&format!("{p}.nodes"), "drain names no node", None);
        }
        let mut nodes = Vec::new();
        for (i, n) in d.nodes.0.iter().enumerate() {
            let np = if d.nodes.0.len() == 1 {
                format!("{p}.nodes")
            } else {
                format!("{p}.nodes[{i}]")
            };
            let np = if cx.src.spans.value(&np).is_none() {
                format!("{p}.node")
            } else {
                np
            };
            if nodes.contains(n) {
                cx.err(&np, format!("node `{n}` is listed twice"), None);
            }
            nodes.extend(cx.target_ref(&np, n));
        }
        let pod_selector = match &d.pod_selector {
            Some(s) => Some(cx.selector(&format!("{p}.podSelector"), s)?),
            None => None,
        };
        let timeout = d.timeout.map_or(DEFAULT_TIMEOUT, |t| t.0);
        let retry_interval = d.retry_interval.map_or(DEFAULT_RETRY, |t| t.0);
        // blame what the file says, not a default it does not show
        let shown = |d| crate::duration::format_duration(d);
        if timeout.is_zero() {
            cx.err(
                &format!("{p}.timeout"),
                "a drain's `timeout` must be positive",
                Some(format!(
                    "how long to keep evicting before giving up, e.g. `{}` (the default)",
                    shown(DEFAULT_TIMEOUT)
                )),
            );
        } else if retry_interval.is_zero() {
            cx.err(
                &format!("{p}.retryInterval"),
                "`retryInterval` must be positive",
                Some(format!("e.g. `{}` (the default)", shown(DEFAULT_RETRY))),
            );
        } else if retry_interval >= timeout {
            let (path, message) = match (d.retry_interval, d.timeout) {
                (Some(_), Some(_)) => (
                    "retryInterval",
                    format!(
                        "`retryInterval: {}` is not shorter than `timeout: {}`",
                        shown(retry_interval),
                        shown(timeout)
                    ),
                ),
                (Some(_), None) => (
                    "retryInterval",
                    format!(
                        "`retryInterval: {}` is not shorter than the default `timeout` of {}",
                        shown(retry_interval),
                        shown(timeout)
                    ),
                ),
                (None, _) => (
                    "timeout",
                    format!(
                        "`timeout: {}` is not longer than the default `retryInterval` of {} (the pause between refused evictions)",
                        shown(timeout),
                        shown(retry_interval)
                    ),
                ),
            };
            cx.err(
                &format!("{p}.{path}"),
                message,
                Some("give a longer `timeout` or a shorter `retryInterval`".into()),
            );
        }
        return Some(Action::Drain(Drain {
            nodes,
            ignore_daemonsets: d.ignore_daemonsets,
            delete_emptydir_data: d.delete_emptydir_data,
            force: d.force,
            grace_period: d.grace_period.map(|g| g.0),
            timeout,
            pod_selector,
            retry_interval,
        }));
    }
    if let Some(f) = &a.force_delete_pods {
        let p = format!("{path}.force-delete-pods");
        if f.selector.is_none() && f.node.is_none() {
            cx.err(
                &p,
                "force-delete-pods needs `selector`, `node` or both",
                Some("it would otherwise delete every pod of the namespace".into()),
            );
            return None;
        }
        let selector = match &f.selector {
            Some(s) => Some(cx.selector(&format!("{p}.selector"), s)?),
            None => None,
        };
        let node = match &f.node {
            Some(n) => Some(cx.target_ref(&format!("{p}.node"), n)?),
            None => None,
        };
        return Some(Action::ForceDeletePods { selector, node });
    }
    if let Some(s) = &a.scale {
        let p = format!("{path}.scale");
        let fields = [
            (WorkloadKind::Deployment, &s.deployment),
            (WorkloadKind::StatefulSet, &s.statefulset),
        ];
        let (kind, name) = workload(cx, &p, &fields)?;
        return Some(Action::Scale {
            kind,
            name,
            replicas: s.replicas,
        });
    }
    if let Some(w) = &a.wait {
        let p = format!("{path}.wait");
        return match (&w.duration, &w.until) {
            (Some(d), None) => {
                if w.timeout.is_some() {
                    cx.err_key(
                        &format!("{p}.timeout"),
                        "`timeout` goes with `until`, not `duration`",
                        None,
                    );
                }
                Some(Action::WaitFor {
                    duration: cx.expr(&format!("{p}.duration"), d)?,
                })
            }
            (None, Some(until)) => {
                let up = format!("{p}.until");
                let (subject, conditions) = condition(cx, &up, until)?;
                window(cx, &up, until, false)?;
                let timeout = match &w.timeout {
                    Some(t) => cx.expr(&format!("{p}.timeout"), t)?,
                    None => Expr::parse("5m").ok()?,
                };
                Some(Action::WaitUntil {
                    subject,
                    conditions,
                    timeout,
                })
            }
            _ => {
                cx.err(&p, "wait needs exactly one of `duration` and `until`", Some("e.g. `wait: {duration: 30s}` or `wait: {until: {node: target, ready: True}, timeout: 2m}`".into()));
                None
            }
        };
    }
    if let Some(d) = &a.delete_namespace {
        if let Some(name) = &d.name {
            cx.deleted_namespace(&format!("{path}.delete-namespace.name"), name);
        }
        return Some(Action::DeleteNamespace {
            name: d.name.clone().unwrap_or_else(|| namespace.to_string()),
        });
    }
    None
}
