//! The `command` backend: any hypervisor, BMC or cloud CLI as a fault
//! injector. A backend file ([`spec`]) gives, per fault, the command that
//! injects it, the one that reverts it and an optional check; [`template`]
//! turns them into command lines for each node at preflight.
//!
//! Each fault's revert, fully substituted, is the fault's journal memo: the
//! runner journals it before the fault runs, so a cleanup or `nodefall
//! recover` runs exactly that line, without the file or the cluster.
//! Commands run without a shell unless asked, in their own process group,
//! stdin closed, bounded by a timeout; their output goes into the report.

mod action;
mod node;
mod plan;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;

pub use self::action::output;
pub use self::action::{Action, Invocation, Memo};
use self::action::{millis, record};
use self::node::{holds, node_addresses, node_value, words};
pub use self::plan::preview;
use super::ssh::{self, SshSettings, SshTarget};
use super::{CommandFailure, Error, NodeFaults};
use crate::exec::{self, Captured, Cmd, Exec, Job, System};
use crate::record::CommandRecord;
use crate::scenario::command::template::{self, Template, Var};
use crate::scenario::command::{self as spec, CommandFile, Role};
use crate::scenario::model::FaultKind;

/// How often a `check` is run again until it passes.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What a node resolved to at preflight.
#[derive(Debug, Clone, Default)]
struct Resolved {
    ssh: Option<SshTarget>,
    /// Breaking fault -> the command that injects it.
    inject: BTreeMap<FaultKind, Action>,
    /// Breaking fault -> the command that reverts it.
    revert: BTreeMap<FaultKind, Action>,
}

/// The backend; its commands run through `E` (the real [`System`], or a
/// fake in tests).
#[derive(Debug)]
pub struct CommandBackend<E: Exec = System> {
    exec: E,
    spec: CommandFile,
    /// Where the spec came from (a backend file, or `FILE (command:)`).
    source: String,
    nodes: BTreeMap<String, Resolved>,
    /// (node, revert fault) -> what reverts it: set when the fault is
    /// injected here, or given back from the journal.
    pending: BTreeMap<(String, FaultKind), Action>,
    transcript: Vec<CommandRecord>,
}

impl CommandBackend {
    pub fn new(spec: CommandFile, source: String) -> CommandBackend {
        CommandBackend::with_exec(spec, source, System)
    }
}

impl<E: Exec + Clone + 'static> CommandBackend<E> {
    /// The backend running its commands through `exec`.
    pub fn with_exec(spec: CommandFile, source: String, exec: E) -> CommandBackend<E> {
        CommandBackend {
            exec,
            spec,
            source,
            nodes: BTreeMap::new(),
            pending: BTreeMap::new(),
            transcript: Vec::new(),
        }
    }

    fn ssh_settings(&self) -> Option<SshSettings> {
        let s = self.spec.ssh.as_ref()?;
        Some(SshSettings {
            user: s.user.clone(),
            key: s.key.clone(),
            port: s.port,
            options: s.options.clone(),
            stop_kubelet: s
                .stop_kubelet
                .clone()
                .unwrap_or_else(|| ssh::STOP_KUBELET.into()),
            start_kubelet: s
                .start_kubelet
                .clone()
                .unwrap_or_else(|| ssh::START_KUBELET.into()),
        })
    }

    /// One command of `fault` for `node`: its template with the node's
    /// values, else the SSH built-in.
    fn command(
        &self,
        node: &Node,
        machine: &str,
        ssh: Option<&SshTarget>,
        fault: FaultKind,
        role: Role,
    ) -> Result<Option<Cmd>, String> {
        let value = |v: &Var| match v {
            Var::Machine => Some(machine.to_owned()),
            v => node_value(node, v),
        };
        match self.spec.template(fault, role) {
            Some(t) => {
                let t = t?;
                t.render(value)
                    .map(Some)
                    .map_err(|e| unfilled(&t, &e, &self.source, fault, role))
            }
            None => Ok(
                match (self.spec.ssh_builtin(fault, role), ssh, self.ssh_settings()) {
                    (Some(remote), Some(target), Some(settings)) => {
                        Some(ssh::command(&settings, target, &remote))
                    }
                    _ => None,
                },
            ),
        }
    }

    /// The machine must be the node where the node says who it is: the
    /// `identify` command's output holds the node's systemUUID (a node
    /// that reports none, or a file without `identify`, is not checked).
    async fn identify(&self, node: &Node, machine: &str) -> Result<String, Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let (Some(text), Some(uuid)) = (
            &self.spec.identify,
            crate::backend::libvirt::system_uuid(node),
        ) else {
            return Ok(String::new());
        };
        let bad = |message: String| Error::Template {
            node: name.clone(),
            message,
        };
        let t = Template::parse(text, self.spec.shell).map_err(|e| bad(e.to_string()))?;
        let cmd = t
            .render(|v| match v {
                Var::Machine => Some(machine.to_owned()),
                v => node_value(node, v),
            })
            .map_err(|e| bad(format!("{e} in `identify` ({})", self.source)))?;
        let job = Job::acting(cmd.clone(), self.spec.timeout(FaultKind::PauseVm));
        let c = exec::call_blocking(&self.exec, job)
            .await
            .map_err(Error::Exec)?;
        if !c.success() {
            return Err(bad(format!(
                "`identify` (`{}`) failed: {}: {}",
                cmd,
                c.status,
                c.stderr.trim()
            )));
        }
        let found: Vec<&str> = c
            .stdout
            .split(|ch: char| !(ch.is_ascii_hexdigit() || ch == '-'))
            .filter(|w| crate::scenario::names::is_uuid(w))
            .collect();
        if found
            .iter()
            .any(|w| crate::backend::libvirt::same_uuid(&uuid, w))
        {
            return Ok(", the node's systemUUID is the machine's".into());
        }
        Err(Error::WrongMachine {
            node: name,
            machine: format!("machine `{machine}`"),
            uuid: match found.as_slice() {
                [] => format!("not in the output of `{cmd}`"),
                several => several.join(", "),
            },
            system_uuid: uuid,
            hint: "map the node to its own machine (`machine`/`machines:` in the backend file)",
        })
    }

    fn action(
        &self,
        node: &Node,
        machine: &str,
        ssh: Option<&SshTarget>,
        fault: FaultKind,
        revert: bool,
    ) -> Result<Option<Action>, String> {
        let (run, check) = if revert {
            (Role::Revert, Role::RevertCheck)
        } else {
            (Role::Run, Role::Check)
        };
        let Some(cmd) = self.command(node, machine, ssh, fault, run)? else {
            return Ok(None);
        };
        let timeout = self.spec.timeout(fault);
        let check = self.command(node, machine, ssh, fault, check)?;
        Ok(Some(Action {
            run: Invocation::new(cmd, timeout),
            check: check.map(|c| Invocation::new(c, timeout)),
            check_timeout_ms: millis(self.spec.check_timeout(fault)),
        }))
    }

    /// Runs one command (at most `limit`) and keeps its record. Dropping
    /// the future kills the command's process group.
    async fn capture(
        &mut self,
        inv: &Invocation,
        role: Role,
        limit: Duration,
    ) -> Result<Captured, Error> {
        let timeout = Duration::from_millis(inv.timeout_ms).min(limit);
        let c = exec::call_blocking(&self.exec, Job::acting(inv.cmd(), timeout))
            .await
            .map_err(Error::Exec)?;
        self.transcript.push(record(role, inv, &c, 1));
        Ok(c)
    }

    /// Runs an action: its command, then its check until it passes.
    async fn perform(
        &mut self,
        node: &str,
        fault: FaultKind,
        action: &Action,
        revert: bool,
    ) -> Result<(), Error> {
        let (run, check) = if revert {
            (Role::Revert, Role::RevertCheck)
        } else {
            (Role::Run, Role::Check)
        };
        let c = self.capture(&action.run, run, Duration::MAX).await?;
        if !c.success() {
            return Err(Error::Command(Box::new(CommandFailure::new(
                node,
                fault,
                run.field(),
                &action.run.cmd(),
                &c,
            ))));
        }
        let Some(inv) = &action.check else {
            return Ok(());
        };
        let deadline = Instant::now() + Duration::from_millis(action.check_timeout_ms);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            // No attempt outlives the check's own time.
            let left = deadline.saturating_duration_since(Instant::now());
            let c = self
                .capture(inv, check, left.max(Duration::from_millis(100)))
                .await?;
            // One record per check, the last attempt's, with the count.
            if attempts > 1
                && let Some(last) = self.transcript.pop()
            {
                self.transcript.pop();
                self.transcript.push(last);
            }
            if let Some(last) = self.transcript.last_mut() {
                last.attempts = attempts;
            }
            if c.success() {
                return Ok(());
            }
            if Instant::now() + CHECK_EVERY > deadline {
                return Err(Error::Command(Box::new(CommandFailure {
                    check: Some((action.check_timeout_ms, attempts)),
                    ..CommandFailure::new(node, fault, check.field(), &inv.cmd(), &c)
                })));
            }
            tokio::time::sleep(CHECK_EVERY).await;
        }
    }

    /// What reverts `revert` on `node`: what the injection or the journal
    /// left, else the file's command for a fault it undoes.
    fn revert_action(&self, node: &str, revert: FaultKind) -> Option<Action> {
        if let Some(a) = self.pending.get(&(node.to_owned(), revert)) {
            return Some(a.clone());
        }
        let r = self.nodes.get(node)?;
        revert.undoes().find_map(|f| r.revert.get(&f).cloned())
    }
}

fn unfilled(
    t: &Template,
    e: &template::Unfilled,
    source: &str,
    fault: FaultKind,
    role: Role,
) -> String {
    format!(
        "{e} in faults.{}.{} `{}` ({source})",
        fault.name(),
        role.field(),
        t.text
    )
}

impl<E: Exec + Clone + 'static> NodeFaults for CommandBackend<E> {
    fn name(&self) -> &'static str {
        "command"
    }

    fn describe(&self, node: &str, fault: FaultKind) -> String {
        let line = match fault.revert() {
            Some(_) => self
                .nodes
                .get(node)
                .and_then(|r| r.inject.get(&fault))
                .map(|a| a.run.cmd().to_string()),
            None => self
                .revert_action(node, fault)
                .map(|a| a.run.cmd().to_string()),
        };
        match line {
            Some(l) => format!("{} {node} ({l})", fault.name()),
            None => format!("{} {node} (command from {})", fault.name(), self.source),
        }
    }

    async fn resolve(&mut self, node: &Node, faults: &[FaultKind]) -> Result<String, Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let bad = |message: String| Error::Template {
            node: name.clone(),
            message,
        };
        let machine = match self.spec.machines.get(&name) {
            Some(m) => m.clone(),
            None => {
                let t = self.spec.machine_template().map_err(&bad)?;
                let m = t.render(|v| node_value(node, v)).map_err(|e| {
                    bad(format!(
                        "{e} in the `machine` template `{}` ({}); map it in `machines:`",
                        t.text, self.source
                    ))
                })?;
                words(m)
            }
        };
        if machine.trim().is_empty() {
            return Err(bad(format!("its machine id is empty ({})", self.source)));
        }
        // SSH is resolved when a built-in needs it (an error if it cannot
        // be), or for the graceful-shutdown preflight's shell (best effort).
        let builtin = faults.iter().any(|&f| {
            let (fault, role) = match f.revert() {
                Some(_) => (f, Role::Run),
                None => (f.undoes().next().unwrap_or(f), Role::Revert),
            };
            self.spec.template(fault, role).is_none()
                && self.spec.ssh_builtin(fault, role).is_some()
        });
        let ssh = match &self.spec.ssh {
            Some(s) if builtin || faults.contains(&FaultKind::Shutdown) => {
                let t = Template::parse(s.host.as_deref().unwrap_or("{internalIP}"), false)
                    .map_err(|e| bad(e.to_string()))?;
                let host = t
                    .render(|v| match v {
                        Var::Machine => Some(machine.clone()),
                        v => node_value(node, v),
                    })
                    .map_err(|e| format!("{e} in ssh.host `{}`", t.text))
                    .and_then(|h| {
                        SshTarget::parse(&words(h)).map_err(|e| format!("ssh.host: {e}"))
                    });
                match host {
                    Ok(h) => Some(h),
                    Err(e) if builtin => return Err(bad(e)),
                    Err(_) => None,
                }
            }
            _ => None,
        };
        let same = self.identify(node, &machine).await?;
        let mut r = Resolved {
            ssh: ssh.clone(),
            ..Resolved::default()
        };
        let mut breaking: Vec<FaultKind> = faults.iter().copied().filter(|f| f.breaks()).collect();
        // A revert step on its own still needs the fault it undoes.
        for f in faults.iter().filter(|f| !f.breaks()) {
            if !f.undoes().any(|u| breaking.contains(&u))
                && let Some(u) = f
                    .undoes()
                    .find(|u| self.spec.defines(*u) || self.spec.faults.contains_key(u))
            {
                breaking.push(u);
            }
        }
        let mut warnings = Vec::new();
        let addresses = node_addresses(node, &machine);
        for &fault in &breaking {
            let nothing = || {
                bad(format!(
                    "the scenario injects {} but {} has no command for it; add `faults.{}` \
                     (see examples/backends/)",
                    fault.name(),
                    self.source,
                    fault.name()
                ))
            };
            if faults.contains(&fault) {
                let a = self
                    .action(node, &machine, ssh.as_ref(), fault, false)
                    .map_err(&bad)?;
                r.inject.insert(fault, a.ok_or_else(nothing)?);
            }
            let a = self
                .action(node, &machine, ssh.as_ref(), fault, true)
                .map_err(&bad)?;
            let a = a.ok_or_else(|| {
                bad(format!(
                    "{} has no revert for {}; nodefall injects nothing it cannot put back",
                    self.source,
                    fault.name()
                ))
            })?;
            let by_template = self
                .spec
                .template(fault, Role::Revert)
                .and_then(Result::ok)
                .is_some_and(|t| spec::reaches_the_node(fault, &t).is_some());
            if !fault.node_answers()
                && !by_template
                && let Some(addr) = addresses.iter().find(|addr| {
                    a.run
                        .argv
                        .iter()
                        .chain(a.check.iter().flat_map(|c| &c.argv))
                        .any(|w| holds(w, addr))
                })
            {
                warnings.push(format!(
                    "warning: the revert of {} (`{}`) names the node's own address {addr}: while \
                     the fault is in place the node does not answer; {}",
                    fault.name(),
                    a.run.cmd(),
                    spec::SAFE_REVERT
                ));
            }
            r.revert.insert(fault, a);
        }
        self.nodes.insert(name.clone(), r);
        let mut said = format!("node {name} = machine {machine}{same}");
        if let Some(t) = &ssh {
            said.push_str(&format!(" (ssh {t})"));
        }
        for w in warnings {
            said.push_str(&format!("\n  {w}"));
        }
        Ok(said)
    }

    async fn shell(&self, node: &str, command: &str) -> Option<(String, Result<String, String>)> {
        let settings = self.ssh_settings()?;
        let target = self.nodes.get(node)?.ssh.clone()?;
        let via = format!("ssh {target}");
        Some((
            via,
            exec::call_blocking(
                &self.exec,
                Job::acting(ssh::command(&settings, &target, command), ssh::TIMEOUT),
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|c| {
                if c.success() {
                    Ok(c.stdout)
                } else {
                    Err(format!("{}: {}", c.status, c.stderr.trim()))
                }
            }),
        ))
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), Error> {
        let not_ready = |why: String| Error::NotPrepared {
            node: node.to_owned(),
            fault: fault.name(),
            why,
        };
        match fault.revert() {
            Some(revert) => {
                let r = self
                    .nodes
                    .get(node)
                    .ok_or_else(|| not_ready("the node was not resolved at preflight".into()))?;
                let action =
                    r.inject.get(&fault).cloned().ok_or_else(|| {
                        not_ready(format!("{} has no command for it", self.source))
                    })?;
                if let Some(undo) = r.revert.get(&fault).cloned() {
                    self.pending.insert((node.to_owned(), revert), undo);
                }
                self.perform(node, fault, &action, false).await
            }
            None => {
                let action = self.revert_action(node, fault).ok_or_else(|| {
                    not_ready(format!(
                        "no revert was journaled for it and {} has none",
                        self.source
                    ))
                })?;
                self.perform(node, fault, &action, true).await?;
                self.pending.remove(&(node.to_owned(), fault));
                Ok(())
            }
        }
    }

    fn memo(&self, node: &str, fault: FaultKind) -> Option<String> {
        let revert = fault.revert()?;
        let action = self.nodes.get(node)?.revert.get(&fault)?.clone();
        serde_json::to_string(&Memo { revert, action }).ok()
    }

    fn remember(&mut self, node: &str, memo: &str) {
        if let Ok(m) = serde_json::from_str::<Memo>(memo) {
            self.pending.insert((node.to_owned(), m.revert), m.action);
        }
    }

    fn take_commands(&mut self) -> Vec<CommandRecord> {
        std::mem::take(&mut self.transcript)
    }

    /// Each node's commands are its own processes.
    fn fork(&self) -> Option<Self> {
        Some(CommandBackend {
            exec: self.exec.clone(),
            spec: self.spec.clone(),
            source: self.source.clone(),
            nodes: self.nodes.clone(),
            pending: self.pending.clone(),
            transcript: Vec::new(),
        })
    }

    fn join(&mut self, node: &str, fork: Self) {
        self.pending.retain(|(n, _), _| n != node);
        self.pending
            .extend(fork.pending.into_iter().filter(|((n, _), _)| n == node));
        self.transcript.extend(fork.transcript);
    }
}
