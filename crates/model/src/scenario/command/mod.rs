//! The command backend's file (`--backend-file FILE`, or a scenario's
//! `command:` section): per fault, the commands that inject it, revert it
//! and check it, and how a Kubernetes node names its machine. Read with
//! positions, so every problem names the file, line and what to do.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

mod cmd;
pub mod template;

use super::diagnostics::{self, Diagnostic, Diagnostics, Source};
use super::fault::FaultKind;
use super::spans::Spans;
use crate::duration::Dur;
use crate::files::Files;
pub use cmd::Cmd;
use template::{Template, Var};

/// How the kubelet is stopped and started over SSH unless a file says otherwise.
pub const STOP_KUBELET: &str = "systemctl stop kubelet";
pub const START_KUBELET: &str = "systemctl start kubelet";

/// Each command's limit unless the file says otherwise.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// How long a `check` may keep failing unless the file says otherwise.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// The built-in shutdown over SSH: queued, so ssh returns before the node
/// goes down.
pub const SSH_SHUTDOWN: &str = "systemctl poweroff --no-block";

/// The file as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Template: node -> machine id (default `{node}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Literal node -> machine id; wins over `machine`.
    #[serde(
        default,
        deserialize_with = "scalar_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub machines: BTreeMap<String, String>,
    /// Template: a command that prints the machine's UUID (the one its
    /// guest sees); at preflight its output must hold the node's
    /// `systemUUID`, or the run stops before any fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identify: Option<String>,
    /// Run every command through `sh -c`.
    #[serde(default)]
    pub shell: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_timeout: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshSpec>,
    #[serde(default)]
    pub faults: BTreeMap<FaultKind, FaultCommands>,
}

/// One fault's commands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultCommands {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_timeout: Option<Dur>,
}

/// `ssh:`: stop-kubelet, start-kubelet and shutdown without templates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SshSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Template: where to connect (default `{internalIP}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_kubelet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_kubelet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<String>,
}

fn scalar_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw = BTreeMap::<String, serde_yaml_ng::Value>::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| match v {
            serde_yaml_ng::Value::String(s) => Ok((k, s)),
            serde_yaml_ng::Value::Number(n) => Ok((k, n.to_string())),
            _ => Err(serde::de::Error::custom(format!(
                "machines.{k}: a machine id is a string or a number"
            ))),
        })
        .collect()
}

/// Which `ssh:` field overrides a built-in's remote command.
type SshField = fn(&SshSpec) -> &Option<String>;

/// The SSH built-in of one command of a breaking fault (with an `ssh:`
/// section): the `ssh:` field that overrides its remote command, and its
/// default. None: the file must give that command.
#[deny(clippy::wildcard_enum_match_arm)]
fn builtin(fault: FaultKind, role: Role) -> Option<(SshField, &'static str)> {
    fn stop_kubelet(s: &SshSpec) -> &Option<String> {
        &s.stop_kubelet
    }
    fn start_kubelet(s: &SshSpec) -> &Option<String> {
        &s.start_kubelet
    }
    fn shutdown(s: &SshSpec) -> &Option<String> {
        &s.shutdown
    }
    match fault {
        FaultKind::StopKubelet => match role {
            Role::Run => Some((stop_kubelet, STOP_KUBELET)),
            Role::Revert => Some((start_kubelet, START_KUBELET)),
            Role::Check | Role::RevertCheck => None,
        },
        FaultKind::Shutdown => match role {
            Role::Run => Some((shutdown, SSH_SHUTDOWN)),
            Role::Revert | Role::Check | Role::RevertCheck => None,
        },
        FaultKind::PauseVm
        | FaultKind::ResumeVm
        | FaultKind::Poweroff
        | FaultKind::Poweron
        | FaultKind::StartKubelet
        | FaultKind::DropNic
        | FaultKind::RestoreNic => None,
    }
}

/// Which command of a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Run,
    Revert,
    Check,
    RevertCheck,
}

impl Role {
    pub fn field(self) -> &'static str {
        match self {
            Role::Run => "run",
            Role::Revert => "revert",
            Role::Check => "check",
            Role::RevertCheck => "revertCheck",
        }
    }
}

impl CommandFile {
    /// Whether commands for `fault` exist: its own (a breaking fault) or
    /// those of a fault it undoes (resume-vm from pause-vm's `revert`), or
    /// the built-ins over SSH.
    pub fn defines(&self, fault: FaultKind) -> bool {
        match fault.revert() {
            Some(_) => {
                let own = self.faults.get(&fault);
                own.is_some_and(|f| f.run.is_some()) || self.ssh_builtin(fault, Role::Run).is_some()
            }
            None => fault.undoes().any(|f| {
                self.faults.get(&f).is_some_and(|c| c.revert.is_some())
                    || self.ssh_builtin(f, Role::Revert).is_some()
            }),
        }
    }

    /// The remote command of an SSH built-in for one command of a breaking
    /// fault (with an `ssh:` section: stop-kubelet's run and revert,
    /// shutdown's run), whether or not a template overrides it.
    pub fn ssh_builtin(&self, fault: FaultKind, role: Role) -> Option<String> {
        let s = self.ssh.as_ref()?;
        let (field, default) = builtin(fault, role)?;
        Some(field(s).clone().unwrap_or_else(|| default.into()))
    }

    /// The template of one command of a breaking fault, parsed (None: not
    /// written; the SSH built-in or nothing applies).
    pub fn template(&self, fault: FaultKind, role: Role) -> Option<Result<Template, String>> {
        let f = self.faults.get(&fault)?;
        let text = match role {
            Role::Run => f.run.as_deref(),
            Role::Revert => f.revert.as_deref(),
            Role::Check => f.check.as_deref(),
            Role::RevertCheck => f.revert_check.as_deref(),
        }?;
        Some(Template::parse(text, f.shell.unwrap_or(self.shell)).map_err(|e| e.to_string()))
    }

    pub fn timeout(&self, fault: FaultKind) -> Duration {
        self.faults
            .get(&fault)
            .and_then(|f| f.timeout)
            .or(self.timeout)
            .map_or(TIMEOUT, |d| d.0)
    }

    pub fn check_timeout(&self, fault: FaultKind) -> Duration {
        self.faults
            .get(&fault)
            .and_then(|f| f.check_timeout)
            .or(self.check_timeout)
            .map_or(CHECK_TIMEOUT, |d| d.0)
    }

    /// The `machine` template (default `{node}`).
    pub fn machine_template(&self) -> Result<Template, String> {
        Template::parse(self.machine.as_deref().unwrap_or("{node}"), false)
            .map_err(|e| e.to_string())
    }
}

/// A backend file read on its own, with what its checks warn about.
#[derive(Debug)]
pub struct Loaded {
    pub file: String,
    pub spec: CommandFile,
    pub warnings: Vec<Diagnostic>,
}

/// Reads and checks a backend file.
pub fn load(files: &dyn Files, path: &Path) -> Result<Loaded, diagnostics::Error> {
    let text = diagnostics::read_file(files, path)?;
    load_str(&path.display().to_string(), &text)
}

pub fn load_str(file: &str, text: &str) -> Result<Loaded, diagnostics::Error> {
    let text = diagnostics::strip_bom(text);
    let source = Source {
        file: file.to_owned(),
        dir: Path::new(file)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        spans: Spans::index(text),
    };
    let spec: CommandFile = serde_yaml_ng::from_str(text).map_err(|e| {
        diagnostics::Error::Invalid(Diagnostics(vec![diagnostics::from_serde(file, &e)]))
    })?;
    let (errors, warnings) = check(&source, "", &spec);
    if !errors.is_empty() {
        return Err(diagnostics::Error::Invalid(Diagnostics(errors)));
    }
    Ok(Loaded {
        file: file.to_owned(),
        spec,
        warnings,
    })
}

/// True when a YAML text looks like a backend file rather than a scenario
/// (for `nodefall validate`): a top-level `faults` and no `steps`.
pub fn looks_like_backend_file(text: &str) -> bool {
    let keys = top_level_keys(diagnostics::strip_bom(text));
    keys.contains("faults") && !keys.contains("steps")
}

/// The keys of a block mapping at the top of a YAML document, read from the
/// lines that start one (no parse: a sniff must cost no more than a look).
/// A document written as one flow mapping (`{faults: ...}`) is parsed.
fn top_level_keys(text: &str) -> std::collections::BTreeSet<String> {
    let first = text
        .lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#') && *l != "---");
    if first.is_some_and(|l| l.starts_with('{')) {
        return match serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text) {
            Ok(serde_yaml_ng::Value::Mapping(m)) => m
                .keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect(),
            _ => Default::default(),
        };
    }
    text.lines()
        .filter(|l| !l.starts_with([' ', '\t', '#', '-', '{', '[']) && *l != "---")
        .filter_map(|l| l.split_once(':'))
        .map(|(k, _)| k.trim().trim_matches(['"', '\'']).to_owned())
        .collect()
}

/// Checks a parsed file; `prefix` is where it sits in its YAML document
/// (`""` for a file of its own, `command` in a scenario). Returns the errors
/// and the warnings, each with its position.
pub fn check(src: &Source, prefix: &str, spec: &CommandFile) -> (Vec<Diagnostic>, Vec<Diagnostic>) {
    let at = |p: &str| {
        if prefix.is_empty() {
            p.to_owned()
        } else {
            format!("{prefix}.{p}")
        }
    };
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let template = |errors: &mut Vec<Diagnostic>,
                    path: &str,
                    text: &str,
                    shell: bool,
                    no_machine: bool| {
        match Template::parse(text, shell) {
            Ok(t) => {
                if no_machine && t.placeholders().any(|p| p.var == Var::Machine) {
                    errors.push(src.diag(
                        &at(path),
                        "the machine id cannot use {machine} (it is what this template makes)",
                        Some("use the node's fields: {node}, {systemUUID}, {providerID}, {label:KEY}, ...".into()),
                    ));
                }
                Some(t)
            }
            Err(e) => {
                errors.push(src.diag(&at(path), format!("{path}: {e}"), None));
                None
            }
        }
    };
    if let Some(m) = &spec.machine {
        template(&mut errors, "machine", m, false, true);
    }
    if let Some(i) = &spec.identify {
        template(&mut errors, "identify", i, spec.shell, false);
    }
    for (node, machine) in &spec.machines {
        if machine.trim().is_empty() {
            errors.push(src.diag(
                &at(&format!("machines.{node}")),
                format!("node `{node}` has an empty machine id"),
                None,
            ));
        }
    }
    if let Some(ssh) = &spec.ssh
        && let Some(h) = &ssh.host
    {
        template(&mut errors, "ssh.host", h, false, false);
    }
    let mut revert_templates = Vec::new();
    for (&fault, f) in &spec.faults {
        let key = at(&format!("faults.{}", fault.name()));
        if fault.revert().is_none() {
            let of = fault
                .undoes()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(" or ");
            errors.push(src.diag_key(
                &key,
                format!("`{}` is a revert, not a fault of its own", fault.name()),
                Some(format!("write its command as `revert:` under {of}")),
            ));
            continue;
        }
        let shell = f.shell.unwrap_or(spec.shell);
        let builtin_run = spec.ssh_builtin(fault, Role::Run).is_some();
        let builtin_revert = spec.ssh_builtin(fault, Role::Revert).is_some();
        if f.run.is_none() && !builtin_run {
            errors.push(src.diag_key(
                &key,
                format!("{} has no `run` command", fault.name()),
                Some(if builtin(fault, Role::Run).is_some() {
                    "add `run:`, or an `ssh:` section for the built-in over SSH".into()
                } else {
                    "add `run:` with the command that injects it".into()
                }),
            ));
        }
        if f.revert.is_none() && !builtin_revert {
            errors.push(src.diag_key(
                &key,
                format!("{} has no `revert` command", fault.name()),
                Some(
                    "nodefall puts back every fault it injects, on every exit path: add `revert:` \
                     with the command that undoes it"
                        .into(),
                ),
            ));
        }
        for (role, text) in [
            (Role::Run, &f.run),
            (Role::Revert, &f.revert),
            (Role::Check, &f.check),
            (Role::RevertCheck, &f.revert_check),
        ] {
            let Some(text) = text else { continue };
            let path = format!("faults.{}.{}", fault.name(), role.field());
            let t = template(&mut errors, &path, text, shell, false);
            if matches!(role, Role::Revert | Role::RevertCheck)
                && let Some(t) = t
            {
                revert_templates.push((fault, path, t));
            }
        }
        for (what, d) in [("timeout", f.timeout), ("checkTimeout", f.check_timeout)] {
            if d.is_some_and(|d| d.0.is_zero()) {
                errors.push(src.diag(
                    &at(&format!("faults.{}.{what}", fault.name())),
                    format!("{what} must be more than 0s"),
                    None,
                ));
            }
        }
    }
    for (what, d) in [
        ("timeout", spec.timeout),
        ("checkTimeout", spec.check_timeout),
    ] {
        if d.is_some_and(|d| d.0.is_zero()) {
            errors.push(src.diag(&at(what), format!("{what} must be more than 0s"), None));
        }
    }
    for (fault, path, t) in revert_templates {
        if let Some(why) = reaches_the_node(fault, &t) {
            warnings.push(src.diag(
                &at(&path),
                format!("warning: {path} {why}"),
                Some(SAFE_REVERT.into()),
            ));
        }
    }
    // In file order (the faults were visited in the order of their kinds).
    errors.sort_by_key(|d| d.pos);
    warnings.sort_by_key(|d| d.pos);
    (errors, warnings)
}

/// What to do about a revert that goes through the node.
pub const SAFE_REVERT: &str = "run reverts against what holds the machine (hypervisor, BMC, \
                               cloud API), not the node: see docs/command-backend.md#reverts";

/// Why a revert template of `fault` would need the broken node itself to
/// answer, if it does. stop-kubelet leaves the node reachable
/// ([`FaultKind::node_answers`]).
pub fn reaches_the_node(fault: FaultKind, t: &Template) -> Option<String> {
    if fault.node_answers() {
        return None;
    }
    let uses = |pred: &dyn Fn(&Var) -> bool| {
        t.placeholders()
            .find(|p| pred(&p.var))
            .map(ToString::to_string)
    };
    if let Some(p) = uses(&Var::is_node_address) {
        return Some(format!(
            "reaches the node at its own address ({p}): while {} is in place the node does not \
             answer, so this revert cannot work",
            fault.name()
        ));
    }
    let ssh = t
        .text
        .split_whitespace()
        .next()
        .is_some_and(|w| w == "ssh" || w.ends_with("/ssh"));
    if ssh && let Some(p) = uses(&|v| *v == Var::Node) {
        return Some(format!(
            "runs ssh to {p}, the node itself: while {} is in place the node does not answer, so \
             this revert cannot work",
            fault.name()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> String {
        match load_str("b.yaml", text) {
            Ok(l) => format!("<ok, {} warnings>", l.warnings.len()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_good_file_loads_with_defaults() {
        let l = load_str(
            "b.yaml",
            "machines: {worker-1: 101}\nfaults:\n  pause-vm: {run: \"qm suspend {machine}\", revert: \"qm resume {machine}\"}\n",
        )
        .unwrap();
        assert_eq!(l.spec.machines["worker-1"], "101");
        assert!(l.spec.defines(FaultKind::PauseVm) && l.spec.defines(FaultKind::ResumeVm));
        assert!(!l.spec.defines(FaultKind::Poweroff) && !l.spec.defines(FaultKind::Poweron));
        assert_eq!(l.spec.timeout(FaultKind::PauseVm), TIMEOUT);
        assert!(l.warnings.is_empty());
    }

    #[test]
    fn problems_name_the_line_and_what_to_do() {
        let e = errors(
            "faults:\n  pause-vm:\n    run: qm suspend {machin}\n    revert: qm resume {machine}\n",
        );
        assert!(
            e.starts_with("b.yaml:3:10: faults.pause-vm.run: `{machin}` is not a placeholder"),
            "{e}"
        );
        let e = errors("faults:\n  poweroff:\n    run: x\n");
        assert!(
            e.starts_with("b.yaml:2:3: poweroff has no `revert` command"),
            "{e}"
        );
        let e = errors("faults:\n  resume-vm: {run: x, revert: y}\n");
        assert!(
            e.contains("`resume-vm` is a revert") && e.contains("under pause-vm"),
            "{e}"
        );
        let e = errors("faults:\n  pause-vm: {run: x, revert: y, retries: 3}\n");
        assert!(e.contains("unknown field `retries`"), "{e}");
        let e = errors("machine: \"{machine}\"\nfaults: {}\n");
        assert!(e.contains("cannot use {machine}"), "{e}");
        let e = errors("timeout: 0s\nfaults: {}\n");
        assert!(e.contains("timeout must be more than 0s"), "{e}");
    }

    #[test]
    fn ssh_builds_in_kubelet_and_shutdown() {
        let l = load_str(
            "b.yaml",
            "ssh: {user: root}\nfaults:\n  shutdown:\n    revert: qm start {machine}\n",
        )
        .unwrap();
        for f in [
            FaultKind::StopKubelet,
            FaultKind::StartKubelet,
            FaultKind::Shutdown,
            FaultKind::Poweron,
        ] {
            assert!(l.spec.defines(f), "{f}");
        }
        let e = errors("faults:\n  stop-kubelet: {revert: x}\n");
        assert!(e.contains("an `ssh:` section"), "{e}");
    }

    #[test]
    fn a_revert_through_the_node_itself_is_warned_about() {
        let l = load_str(
            "b.yaml",
            "faults:\n  drop-nic:\n    run: virsh domif-setlink {machine} vnet0 down\n    revert: ssh root@{internalIP} ip link set eth0 up\n  stop-kubelet:\n    run: ssh {internalIP} systemctl stop kubelet\n    revert: ssh {internalIP} systemctl start kubelet\n  pause-vm: {run: x, revert: \"ssh {node} true\"}\n",
        )
        .unwrap();
        let w: Vec<String> = l.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with("b.yaml:4:13: warning: faults.drop-nic.revert reaches the node at its own address ({internalIP})"), "{w:?}");
        assert!(w[1].contains("runs ssh to {node}"), "{w:?}");
        assert!(looks_like_backend_file("faults: {}\n"));
        assert!(looks_like_backend_file(
            "# a file\n---\n\"faults\":\n  pause-vm: {}\n"
        ));
        assert!(looks_like_backend_file("{faults: {}}\n"));
        assert!(!looks_like_backend_file("name: x\nsteps: []\nfaults: {}\n"));
        // A key named faults further in is not a top-level one.
        assert!(!looks_like_backend_file("name: x\nsetup:\n  faults: 1\n"));
    }
}
