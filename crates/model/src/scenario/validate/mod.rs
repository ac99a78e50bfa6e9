//! Semantic checks on a parsed scenario, turning it into [`Checked`]. This
//! module owns the entry point and the shared context; the checks live by
//! concern in `targets`, `setup` (manifests), `steps` (fault order, anchors),
//! `action`, `expect` (conditions, windows), `guard` (`abortIf`) and `k8s`
//! (names the API would refuse). All problems are collected, each with its position, before
//! anything is returned.

mod action;
mod clients;
mod expect;
mod guard;
mod judged;
mod k8s;
mod setup;
mod steps;
mod targets;
mod volumes;
#[cfg(test)]
mod written;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use super::checked::{Checked, WorkloadKind};
use super::expr::{Expr, ExprError};
use super::load::{Diagnostic, Diagnostics, Error, Loaded, Result, Source};
use super::manifest::ManifestDoc;
use super::model::{self, BackendKind};
use super::spans::Pos;
use super::suggest::closest;
use crate::duration::Dur;
use crate::files::Files;
use crate::profile::Var;
use crate::scenario::selector::Selector;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_RETRY: Duration = Duration::from_secs(5);

struct Ctx<'a> {
    /// Where the manifests the scenario applies are read from.
    files: &'a dyn Files,
    src: &'a Source,
    diags: Vec<Diagnostic>,
    /// Problems inside manifest files, each with the scenario position of the
    /// `apply` that names the file (they are listed right after it).
    manifest_diags: Vec<(Option<Pos>, Diagnostic)>,
    targets: Vec<String>,
    /// The targets that are sets of nodes (`nodes:`): only a fault, or
    /// another target's `exclude`, can name one.
    sets: Vec<String>,
    /// The scenario namespace, which namespaced manifest objects go into.
    namespace: &'a str,
    /// Manifests already read (a file applied twice is read and reported once).
    manifests: HashMap<PathBuf, Vec<ManifestDoc>>,
    /// The `probe:` names (checked before the steps that name them).
    probes: Vec<String>,
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
        let name = self.any_target_ref(path, name)?;
        if self.sets.contains(&name) {
            self.err(
                path,
                format!("target `{name}` is a set of nodes (`nodes:`), and this names one node"),
                Some(
                    "a fault, a node expectation and pods' `on`/`notOn` can name a set; here \
                     name a target of one node (`name`, `role` or `mostPods`)"
                        .to_owned(),
                ),
            );
            return None;
        }
        Some(name)
    }

    /// Checks a reference to a target that may be a set of nodes (a fault's
    /// `node`, an `exclude`, a node expectation, pods' `on`/`notOn`);
    /// returns it if defined.
    fn any_target_ref(&mut self, path: &str, name: &str) -> Option<String> {
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

/// Refuses every window field and `since` of an expectation decided once
/// (`what`, decided `when`); true when none is written.
fn no_window(cx: &mut Ctx<'_>, p: &str, e: &model::Expect, what: &str, when: &str) -> bool {
    let written = [
        ("within", e.within.is_some()),
        ("after", e.after.is_some()),
        ("notBefore", e.not_before.is_some()),
        ("holdsFor", e.holds_for.is_some()),
        ("never", e.never.is_some()),
        ("since", e.since.is_some()),
    ];
    let mut ok = true;
    for (field, _) in written.iter().filter(|(_, set)| *set) {
        cx.err_key(
            &format!("{p}.{field}"),
            format!("`{field}` has no meaning with `{what}`: it is decided once, {when}"),
            Some(format!("remove `{field}`")),
        );
        ok = false;
    }
    ok
}

pub fn validate(loaded: Loaded, files: &dyn Files) -> Result<Checked> {
    let Loaded {
        source,
        scenario: s,
    } = loaded;
    let mut cx = Ctx {
        files,
        src: &source,
        diags: Vec::new(),
        manifest_diags: Vec::new(),
        targets: Vec::new(),
        sets: Vec::new(),
        namespace: &s.namespace,
        manifests: HashMap::new(),
        probes: Vec::new(),
    };

    cx.dns_label("name", "scenario name", &s.name);
    cx.scenario_namespace(&s.namespace);

    cluster_pins(&mut cx, &s.cluster.0);
    let timing = timing_overrides(&mut cx, &s.timing);
    let targets = targets::targets(&mut cx, &s);
    let setup = setup::setup(&mut cx, &s.setup);
    let probes = clients::probes(&mut cx, &s.probe.0);
    let steps = steps::steps(&mut cx, &s, &s.namespace);
    let guards = guard::guards(&mut cx, &s.abort_if);
    libvirt_machines(&mut cx, &s.libvirt);
    if let Some(c) = &s.command {
        // Its warnings are printed when the backend is used.
        let (errors, _) = crate::scenario::command::check(cx.src, "command", c);
        cx.diags.extend(errors);
    }

    let Ctx {
        diags,
        manifest_diags,
        ..
    } = cx;
    if !diags.is_empty() || !manifest_diags.is_empty() {
        // scenario problems in file order; a manifest's problems right after
        // the `apply` that names it (the sort is stable)
        let mut all: Vec<(Option<Pos>, bool, Diagnostic)> = diags
            .into_iter()
            .map(|d| (d.pos, false, d))
            .chain(manifest_diags.into_iter().map(|(at, d)| (at, true, d)))
            .collect();
        all.sort_by_key(|(at, late, _)| (*at, *late));
        let diags = all.into_iter().map(|(_, _, d)| d).collect();
        return Err(Error::Invalid(Diagnostics(diags)));
    }
    Ok(Checked {
        name: s.name,
        description: s.description,
        namespace: s.namespace,
        backend: s.backend.unwrap_or(BackendKind::Sim),
        pins: s.cluster.0,
        timing,
        setup,
        targets,
        steps,
        cleanup: s.cleanup,
        libvirt: s.libvirt,
        command: s.command,
        guards,
        probes,
        source,
    })
}

/// `cluster:`: each pin names something, a server is a URL, a UID a UUID.
fn cluster_pins(cx: &mut Ctx<'_>, pins: &[model::ClusterPin]) {
    for (i, pin) in pins.iter().enumerate() {
        // one mapping, or a list of them
        let p = match format!("cluster[{i}]") {
            item if cx.src.spans.has(&item) => item,
            _ => "cluster".to_owned(),
        };
        let given = [&pin.context, &pin.server, &pin.uid];
        if given
            .iter()
            .all(|v| v.as_deref().is_none_or(|t| t.trim().is_empty()))
        {
            cx.err(
                &p,
                "a cluster pin names no cluster",
                Some("give `context`, `server` (the API server URL) or `uid` (`kubectl get ns kube-system -o jsonpath='{.metadata.uid}'`)".into()),
            );
            continue;
        }
        if let Some(url) = &pin.server
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            cx.err(
                &format!("{p}.server"),
                format!("`{url}` is not an API server URL"),
                Some("write it as the kubeconfig does, e.g. https://127.0.0.1:6443".into()),
            );
        }
        if let Some(uid) = &pin.uid
            && !crate::scenario::names::is_uuid(uid)
        {
            cx.err(
                &format!("{p}.uid"),
                format!("`{uid}` is not a UID"),
                Some("the kube-system namespace's UID: `kubectl get ns kube-system -o jsonpath='{.metadata.uid}'`".into()),
            );
        }
    }
}

/// `libvirt:`: MACs are MACs, names are not empty.
fn libvirt_machines(cx: &mut Ctx<'_>, m: &model::LibvirtMachines) {
    if m.uri.as_deref().is_some_and(|u| !u.contains(':')) {
        cx.err(
            "libvirt.uri",
            format!("`{}` is not a libvirt URI", m.uri.as_deref().unwrap_or("")),
            Some("e.g. qemu:///system, qemu+ssh://host/system".into()),
        );
    }
    for (node, domain) in &m.domains {
        if domain.trim().is_empty() {
            cx.err(
                &format!("libvirt.domains.{node}"),
                format!("node `{node}` maps to an empty domain name"),
                Some("give the domain's name or UUID (`virsh list --all --uuid`)".into()),
            );
        }
    }
    for (node, mac) in &m.nics {
        if crate::scenario::names::normal_mac(mac).is_none() {
            cx.err(
                &format!("libvirt.nics.{node}"),
                format!("`{mac}` is not a MAC address"),
                Some("write it as 52:54:00:12:34:56 (`virsh domiflist DOMAIN`)".into()),
            );
        }
    }
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
        (Var::MaxWaitForUnmount, t.max_wait_for_unmount),
        (Var::NodeEvictionInterval, t.node_eviction_interval),
        (
            Var::SecondaryEvictionInterval,
            t.secondary_eviction_interval,
        ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::checked::{Anchor, StepKind};
    use crate::scenario::load::load_str;

    fn check(text: &str) -> std::result::Result<Checked, String> {
        load_str("s.yaml", std::path::Path::new("."), text)
            .and_then(|l| validate(l, &crate::files::Memory::default()))
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
