//! Semantic checks on a parsed scenario, turning it into [`Checked`]:
//! exactly-one-of rules, references to targets and steps, fault pairing,
//! durations and bound expressions, manifest paths. All problems are
//! collected, each with its position, before anything is returned.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::checked::{
    Action, Anchor, Checked, Condition, Drain, Expectation, ManifestFile, ReadyCheck, Setup, Step,
    StepKind, Subject, Target, TargetSelector, WorkloadKind,
};
use super::duration::Dur;
use super::expr::{Expr, ExprError, WindowSpec};
use super::load::{Diagnostic, Diagnostics, Error, Loaded, Result, Source};
use super::model::{self, ApplyItem, BackendKind, FaultKind, ReadyValue, TaintEffect};
use super::suggest::closest;
use crate::profile::Var;
use crate::selector::Selector;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_RETRY: Duration = Duration::from_secs(5);

struct Ctx<'a> {
    src: &'a Source,
    diags: Vec<Diagnostic>,
    targets: Vec<String>,
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

impl Ctx<'_> {
    fn err(&mut self, path: &str, message: impl Into<String>, help: impl Into<Option<String>>) {
        let d = self.src.diag(path, message, help.into());
        self.diags.push(d);
    }

    fn err_key(&mut self, path: &str, message: impl Into<String>, help: impl Into<Option<String>>) {
        let d = self.src.diag_key(path, message, help.into());
        self.diags.push(d);
    }

    /// Checks a reference to a target; returns it if defined.
    fn target_ref(&mut self, path: &str, name: &str) -> Option<String> {
        if self.targets.iter().any(|t| t == name) {
            return Some(name.to_string());
        }
        let help = if self.targets.is_empty() {
            "define one with `target:` (or `targets: {NAME: ...}`) at the top of the scenario"
                .to_string()
        } else {
            let mut h = String::new();
            if let Some(s) = closest(name, self.targets.iter().map(String::as_str)) {
                h.push_str(&format!("did you mean `{s}`? "));
            }
            h.push_str(&format!("defined targets: {}", self.targets.join(", ")));
            h
        };
        self.err(path, format!("undefined target `{name}`"), help);
        None
    }

    fn selector(&mut self, path: &str, text: &str) -> Option<Selector> {
        match Selector::parse(text) {
            Ok(s) => Some(s),
            Err(e) => {
                self.err(path, e, None);
                None
            }
        }
    }

    fn expr(&mut self, path: &str, text: &str) -> Option<Expr> {
        match Expr::parse(text) {
            Ok(e) => Some(e),
            Err(e) => {
                self.expr_err(path, e);
                None
            }
        }
    }

    fn expr_err(&mut self, path: &str, e: ExprError) {
        let help = e
            .suggestion
            .as_ref()
            .map(|s| format!("did you mean `{s}`?"));
        let message = match e.suggestion {
            Some(_) => e
                .message
                .split("; known:")
                .next()
                .unwrap_or_default()
                .to_string(),
            None => e.message,
        };
        self.err(path, message, help);
    }

    fn manifests(&mut self, path: &str, items: &[ApplyItem]) -> Vec<ManifestFile> {
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let resolved = self.src.dir.join(&item.file);
            if !resolved.is_file() {
                self.err(
                    &p,
                    format!(
                        "manifest `{}` not found (looked for {})",
                        item.file,
                        resolved.display()
                    ),
                    Some("paths are relative to the scenario file's directory".to_string()),
                );
            }
            out.push(ManifestFile {
                file: item.file.clone(),
                path: resolved,
                only: item.only.clone(),
            });
        }
        out
    }
}

/// Names of the `Some` fields among `(name, present)` pairs.
fn present<'a>(fields: &[(&'a str, bool)]) -> Vec<&'a str> {
    fields.iter().filter(|(_, p)| *p).map(|(n, _)| *n).collect()
}

fn one_of(list: &[&str]) -> String {
    list.iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn validate(loaded: Loaded) -> Result<Checked> {
    let Loaded {
        source,
        scenario: s,
    } = loaded;
    let mut cx = Ctx {
        src: &source,
        diags: Vec::new(),
        targets: Vec::new(),
    };

    if !is_dns_label(&s.name) {
        cx.err(
            "name",
            format!(
                "scenario name `{}` must be lowercase letters, digits and `-`",
                s.name
            ),
            None,
        );
    }
    if !is_dns_label(&s.namespace) {
        cx.err(
            "namespace",
            format!("`{}` is not a valid namespace name", s.namespace),
            Some("use lowercase letters, digits and `-`, at most 63 characters".into()),
        );
    }

    let timing = timing_overrides(&mut cx, &s.timing);
    let targets = targets(&mut cx, &s);
    let setup = setup(&mut cx, &s.setup);
    let steps = steps(&mut cx, &s, &s.namespace);

    let Ctx { diags, .. } = cx;
    if !diags.is_empty() {
        let mut diags = diags;
        diags.sort_by_key(|d| d.pos);
        return Err(Error::Invalid(Diagnostics(diags)));
    }
    Ok(Checked {
        name: s.name,
        description: s.description,
        namespace: s.namespace,
        backend: s.backend.unwrap_or(BackendKind::Sim),
        timing,
        setup,
        targets,
        steps,
        cleanup: s.cleanup,
        source,
    })
}

fn timing_overrides(cx: &mut Ctx<'_>, t: &model::TimingOverrides) -> Vec<(Var, Duration)> {
    let fields = [
        (Var::NodeMonitorGracePeriod, t.node_monitor_grace_period),
        (Var::NodeMonitorPeriod, t.node_monitor_period),
        (Var::NodeStartupGracePeriod, t.node_startup_grace_period),
        (
            Var::UnreachableTolerationSeconds,
            t.unreachable_toleration_seconds,
        ),
        (
            Var::NotReadyTolerationSeconds,
            t.not_ready_toleration_seconds,
        ),
        (Var::NodeLeaseDuration, t.node_lease_duration),
        (
            Var::NodeStatusUpdateFrequency,
            t.node_status_update_frequency,
        ),
        (Var::PodGcPeriod, t.pod_gc_period),
        (Var::OrphanQuarantine, t.orphan_quarantine),
    ];
    let mut out = Vec::new();
    for (var, value) in fields {
        if let Some(Dur(d)) = value {
            if d.is_zero() {
                cx.err(
                    &format!("timing.{}", var.name()),
                    format!("`{}` must be positive", var.name()),
                    None,
                );
            }
            out.push((var, d));
        }
    }
    out
}

fn targets(cx: &mut Ctx<'_>, s: &model::Scenario) -> Vec<Target> {
    let mut specs: BTreeMap<String, (String, &model::TargetSpec)> = BTreeMap::new();
    if let Some(t) = &s.target {
        if s.targets.contains_key("target") {
            cx.err_key(
                "target",
                "`target` is defined twice: here and under `targets`",
                None,
            );
        }
        specs.insert("target".into(), ("target".into(), t));
    }
    for (name, t) in &s.targets {
        specs
            .entry(name.clone())
            .or_insert((format!("targets.{name}"), t));
    }
    cx.targets = specs.keys().cloned().collect();
    let mut out = Vec::new();
    for (name, (path, spec)) in &specs {
        let chosen = present(&[
            ("name", spec.name.is_some()),
            ("role", spec.role.is_some()),
            ("mostPods", spec.most_pods.is_some()),
        ]);
        let selector = match (chosen.as_slice(), spec) {
            ([_], model::TargetSpec { name: Some(n), .. }) => Some(TargetSelector::Name(n.clone())),
            ([_], model::TargetSpec { role: Some(r), .. }) => Some(TargetSelector::Role(r.clone())),
            (
                [_],
                model::TargetSpec {
                    most_pods: Some(m), ..
                },
            ) => cx
                .selector(&format!("{path}.mostPods"), m)
                .map(TargetSelector::MostPods),
            _ => {
                let msg = if chosen.is_empty() {
                    format!("target `{name}` does not say which node")
                } else {
                    format!("target `{name}` sets {} at once", one_of(&chosen))
                };
                cx.err(
                    path,
                    msg,
                    Some("give exactly one of `name`, `role`, `mostPods`".into()),
                );
                None
            }
        };
        let mut exclude = Vec::new();
        for (i, other) in spec.exclude.0.iter().enumerate() {
            let p = format!("{path}.exclude[{i}]");
            if other == name {
                cx.err(&p, format!("target `{name}` excludes itself"), None);
            } else if let Some(o) = cx.target_ref(&p, other) {
                exclude.push(o);
            }
        }
        if let Some(selector) = selector {
            out.push(Target {
                name: name.clone(),
                selector,
                exclude,
            });
        }
    }
    // exclusions must not go round in a circle, or neither could be chosen first
    for t in &out {
        for o in &t.exclude {
            if out
                .iter()
                .any(|u| &u.name == o && u.exclude.contains(&t.name))
                && t.name < *o
            {
                let path = specs
                    .get(&t.name)
                    .map(|(p, _)| p.clone())
                    .unwrap_or_default();
                cx.err(
                    &path,
                    format!("targets `{}` and `{o}` exclude each other", t.name),
                    Some("let only the later one exclude the earlier".into()),
                );
            }
        }
    }
    out
}

fn workload(
    cx: &mut Ctx<'_>,
    path: &str,
    fields: &[(WorkloadKind, &Option<String>)],
) -> Option<(WorkloadKind, String)> {
    let given: Vec<(WorkloadKind, &String)> = fields
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (*k, v)))
        .collect();
    match given.as_slice() {
        [(k, n)] => Some((*k, (*n).clone())),
        _ => {
            let names: Vec<&str> = fields.iter().map(|(k, _)| k.name()).collect();
            cx.err(
                path,
                if given.is_empty() {
                    "no workload named".to_string()
                } else {
                    "more than one workload named".to_string()
                },
                Some(format!("give exactly one of {}", one_of(&names))),
            );
            None
        }
    }
}

fn setup(cx: &mut Ctx<'_>, s: &model::Setup) -> Setup {
    let apply = cx.manifests("setup.apply", &s.apply.0);
    let mut wait_ready = Vec::new();
    for (i, w) in s.wait_ready.0.iter().enumerate() {
        let path = format!("setup.waitReady[{i}]");
        let fields = [
            (WorkloadKind::Deployment, &w.deployment),
            (WorkloadKind::StatefulSet, &w.statefulset),
            (WorkloadKind::DaemonSet, &w.daemonset),
            (WorkloadKind::Pvc, &w.pvc),
            (WorkloadKind::Pdb, &w.pdb),
        ];
        if let Some((kind, name)) = workload(cx, &path, &fields) {
            if w.replicas.is_some() && matches!(kind, WorkloadKind::Pvc | WorkloadKind::Pdb) {
                cx.err(
                    &format!("{path}.replicas"),
                    format!("`replicas` does not apply to a {}", kind.name()),
                    None,
                );
            }
            wait_ready.push(ReadyCheck {
                kind,
                name,
                replicas: w.replicas,
                timeout: w.timeout.map_or(DEFAULT_TIMEOUT, |d| d.0),
            });
        }
    }
    Setup { apply, wait_ready }
}

/// Which node each target currently has broken, and by which step.
type Broken = HashMap<String, (FaultKind, usize)>;

fn steps(cx: &mut Ctx<'_>, s: &model::Scenario, namespace: &str) -> Vec<Step> {
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

    for (i, st) in s.steps.iter().enumerate() {
        let path = format!("steps[{i}]");
        if let Some(id) = &st.id {
            if !is_dns_label(id) {
                cx.err(
                    &format!("{path}.id"),
                    format!("step id `{id}` must be lowercase letters, digits and `-`"),
                    None,
                );
            }
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
            let Some(node) = cx.target_ref(&node_path, &node) else {
                continue;
            };
            check_fault_order(cx, &path, fault, &node, i, &mut broken);
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
            let anchor = match &e.since {
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
    out
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
    if fault.revert().is_some() {
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
            Some((prev, _)) if fault.undoes().contains(prev) => {
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
                let undoes: Vec<&str> = fault.undoes().iter().map(|f| f.name()).collect();
                cx.err(
                    &p,
                    format!("`{fault}` on `{node}`, but no earlier step broke it"),
                    Some(format!("`{fault}` reverts {}", one_of(&undoes))),
                );
            }
        }
    }
}

fn action(cx: &mut Ctx<'_>, path: &str, a: &model::ActionSpec, namespace: &str) -> Option<Action> {
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
        let node = node(cx, "taint", &t.node)?;
        return Some(Action::Taint {
            node,
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect,
        });
    }
    if let Some(t) = &a.untaint {
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
        if retry_interval >= timeout || retry_interval.is_zero() {
            cx.err(
                &format!("{p}.retryInterval"),
                "`retryInterval` must be positive and shorter than `timeout`",
                None,
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
        return Some(Action::DeleteNamespace {
            name: d.name.clone().unwrap_or_else(|| namespace.to_string()),
        });
    }
    None
}

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
fn condition(cx: &mut Ctx<'_>, p: &str, e: &model::Expect) -> Option<(Subject, Vec<Condition>)> {
    let mut conds = Vec::new();
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
            Subject::Node(cx.target_ref(&format!("{p}.node"), n)?)
        }
        (None, Some(sel)) => {
            let selector = cx.selector(&format!("{p}.pods"), sel)?;
            let on = match &e.on {
                Some(t) => Some(cx.target_ref(&format!("{p}.on"), t)?),
                None => None,
            };
            let not_on = match &e.not_on {
                Some(t) => Some(cx.target_ref(&format!("{p}.notOn"), t)?),
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
    wrong(cx, "exists", e.exists.is_some(), true);
    wrong(cx, "terminating", e.terminating.is_some(), false);
    wrong(cx, "count", e.count.is_some(), false);
    wrong(cx, "readyAtLeast", e.ready_at_least.is_some(), false);
    wrong(cx, "phase", e.phase.is_some(), false);
    wrong(cx, "reason", e.reason.is_some(), false);

    match (e.ready, is_node) {
        (None, _) => {}
        (Some(ReadyValue::Status(s)), true) => conds.push(Condition::NodeReady(s)),
        (Some(ReadyValue::Count(n)), false) => conds.push(Condition::PodsReady(Some(n))),
        (Some(ReadyValue::All), false) => conds.push(Condition::PodsReady(None)),
        (Some(ReadyValue::Status(s)), false) => {
            cx.err(
                &format!("{p}.ready"),
                format!("`ready: {s}` is a node status; for pods give a count or `all`"),
                None,
            );
        }
        (Some(_), true) => {
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
                Ok((key, effect)) => conds.push(if negate {
                    Condition::NoTaint { key, effect }
                } else {
                    Condition::Taint { key, effect }
                }),
                Err(m) => cx.err(&format!("{p}.{field}"), m, None),
            }
        }
    }
    if is_node {
        conds.extend(e.unschedulable.map(Condition::Unschedulable));
        conds.extend(e.exists.map(Condition::Exists));
    } else {
        conds.extend(e.terminating.map(Condition::Terminating));
        conds.extend(e.count.map(Condition::Count));
        conds.extend(e.ready_at_least.map(Condition::ReadyAtLeast));
        conds.extend(e.phase.map(Condition::Phase));
        conds.extend(e.reason.clone().map(Condition::Reason));
    }
    if conds.is_empty() && cx.diags.len() == errors_before {
        let allowed = if is_node {
            "`ready`, `taint`, `noTaint`, `unschedulable`, `exists`"
        } else {
            "`ready`, `readyAtLeast`, `terminating`, `count`, `phase`, `reason`"
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

/// The window of an expectation. `wanted` is false inside `wait.until`, which has none.
fn window(cx: &mut Ctx<'_>, p: &str, e: &model::Expect, wanted: bool) -> Option<WindowSpec> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::load::load_str;

    fn check(text: &str) -> std::result::Result<Checked, String> {
        load_str("s.yaml", std::path::Path::new("."), text)
            .and_then(validate)
            .map_err(|e| e.to_string())
    }

    const HEAD: &str = "name: t\nnamespace: ns\ntarget: {mostPods: app=web}\n";

    #[test]
    fn anchors_default_to_the_latest_fault_or_action() {
        let c = check(&format!(
            "{HEAD}steps:\n  - expect: {{pods: app=web, ready: all, within: 1m}}\n  - id: pause\n    fault: pause-vm\n  - expect: {{node: target, ready: Unknown, within: grace + 20s}}\n  - action: {{cordon: {{node: target}}}}\n  - expect: {{node: target, unschedulable: true, since: pause, within: 5m}}\n  - expect: {{node: target, unschedulable: true, within: 5s}}\n  - fault: resume-vm\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let anchors: Vec<Anchor> = c
            .steps
            .iter()
            .filter_map(|s| match &s.kind {
                StepKind::Expect(e) => Some(e.anchor),
                _ => None,
            })
            .collect();
        assert_eq!(
            anchors,
            vec![
                Anchor::Start,
                Anchor::Step(1),
                Anchor::Step(1),
                Anchor::Step(3)
            ]
        );
    }

    #[test]
    fn collects_every_problem_in_file_order() {
        let e = check(&format!(
            "{HEAD}steps:\n  - fault: resume-vm\n  - expect: {{node: victim, ready: Unknown, within: 1m}}\n  - expect: {{pods: app=web, ready: True, within: 1m}}\n"
        ))
        .unwrap_err();
        let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("s.yaml")).collect();
        assert_eq!(lines.len(), 3, "{e}");
        assert!(
            lines[0]
                .starts_with("s.yaml:5:12: `resume-vm` on `target`, but no earlier step broke it"),
            "{e}"
        );
        assert!(
            lines[1].starts_with("s.yaml:6:20: undefined target `victim`"),
            "{e}"
        );
        assert!(lines[2].contains("`ready: True` is a node status"), "{e}");
    }

    #[test]
    fn double_break_is_refused() {
        let e = check(&format!(
            "{HEAD}steps:\n  - fault: pause-vm\n  - fault: poweroff\n"
        ))
        .unwrap_err();
        assert!(e.contains("still down from `pause-vm` at step #1"), "{e}");
        assert!(e.contains("revert it first with `resume-vm`"), "{e}");
    }
}
