//! Flags that tell a backend where the nodes' machines are and how to reach
//! them: libvirt (URI, node -> domain, NIC, shutdown), SSH (kubelet) and the
//! command backend's file.

use std::path::PathBuf;

use clap::Args;

use crate::backend::command::{self, spec::CommandFile};
use crate::backend::libvirt::{self, hypervisor::ShutdownMode};
use crate::backend::ssh::{SshSettings, SshTarget};
use crate::scenario::Checked;
use crate::scenario::duration::parse_duration;
use crate::scenario::model::{FaultKind, LibvirtMachines};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Machines (libvirt backend)")]
pub struct MachineArgs {
    /// libvirt connection (default: LIBVIRT_DEFAULT_URI, else qemu:///system).
    #[arg(long, value_name = "URI")]
    pub libvirt_uri: Option<String>,
    /// A node's domain when it is not named like the node (name or UUID); repeatable.
    #[arg(long = "domain", value_name = "NODE=DOMAIN", value_parser = pair)]
    pub domains: Vec<(String, String)>,
    /// Prefix of the domain names before the node names (vagrant-libvirt:
    /// `<project dir>_`; Kubespray: `kubespray`).
    #[arg(long, value_name = "PREFIX")]
    pub domain_prefix: Option<String>,
    /// The interface drop-nic cuts, by MAC (default: the one holding the
    /// node's InternalIP when libvirt can tell, else the only one); repeatable.
    #[arg(long = "nic", value_name = "NODE=MAC", value_parser = pair)]
    pub nics: Vec<(String, String)>,
    /// How `shutdown` asks the guest: the ACPI power button or the QEMU guest agent.
    #[arg(long, value_enum, default_value_t = ShutdownMode::Acpi)]
    pub shutdown_mode: ShutdownMode,
    /// How long the guest may take to power off after the shutdown request.
    #[arg(long, value_name = "DURATION", default_value = "180s", value_parser = parse_duration)]
    pub shutdown_timeout: std::time::Duration,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub command: CommandArgs,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Command backend")]
pub struct CommandArgs {
    /// The command backend's file: per-fault command templates and how a
    /// node names its machine (docs/command-backend.md; examples in
    /// examples/backends/). Default: the scenario's `command:` section.
    #[arg(long, value_name = "FILE")]
    pub backend_file: Option<PathBuf>,
}

/// The command backend's commands, where they came from, and what their
/// checks warn about.
#[derive(Debug)]
pub struct Commands {
    pub source: String,
    pub spec: CommandFile,
    pub warnings: Vec<crate::scenario::Diagnostic>,
}

impl CommandArgs {
    /// The backend file, else the scenario's `command:` section; a fault the
    /// plan injects without a command in it is refused here (exit 2), before
    /// anything is touched.
    pub fn load(&self, checked: &Checked, faults: &[FaultKind]) -> anyhow::Result<Commands> {
        let c = match (&self.backend_file, &checked.command) {
            (Some(path), _) => {
                let l = command::spec::load(path)?;
                Commands {
                    source: l.file,
                    spec: l.spec,
                    warnings: l.warnings,
                }
            }
            (None, Some(spec)) => Commands {
                source: format!("{} (command:)", checked.source.file),
                warnings: command::spec::check(&checked.source, "command", spec).1,
                spec: spec.clone(),
            },
            (None, None) => anyhow::bail!(super::InvalidFlag(
                "--backend command needs its commands: --backend-file FILE, or a `command:` \
                 section in the scenario (see docs/command-backend.md and examples/backends/)"
                    .into()
            )),
        };
        let mut missing: Vec<&str> = Vec::new();
        for f in faults.iter().filter(|f| !c.spec.defines(**f)) {
            if !missing.contains(&f.name()) {
                missing.push(f.name());
            }
        }
        if !missing.is_empty() {
            anyhow::bail!(super::InvalidFlag(format!(
                "{}: the scenario injects {} but the file has no command for it; add them under \
                 `faults:` (a revert such as resume-vm is the `revert:` of the fault it undoes); \
                 nothing was injected",
                c.source,
                missing.join(", ")
            )));
        }
        Ok(c)
    }
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "SSH (stop-kubelet, start-kubelet, the graceful-shutdown preflight)")]
pub struct SshArgs {
    /// SSH login user (default: ssh's own: ~/.ssh/config or the local user).
    #[arg(long, value_name = "USER")]
    pub ssh_user: Option<String>,
    /// SSH private key.
    #[arg(long, value_name = "FILE")]
    pub ssh_key: Option<String>,
    /// SSH port (default 22).
    #[arg(long, value_name = "PORT")]
    pub ssh_port: Option<u16>,
    /// Where a node's SSH server is, when not at the address the Node reports; repeatable.
    #[arg(long = "ssh-host", value_name = "NODE=HOST[:PORT]", value_parser = pair)]
    pub ssh_hosts: Vec<(String, String)>,
    /// An `ssh -o` option, e.g. UserKnownHostsFile=/dev/null; repeatable.
    #[arg(long = "ssh-option", value_name = "KEY=VALUE")]
    pub ssh_options: Vec<String>,
    /// The command that stops the kubelet on a node.
    #[arg(long, value_name = "COMMAND", default_value = crate::backend::ssh::STOP_KUBELET)]
    pub kubelet_stop_command: String,
    /// The command that starts it again.
    #[arg(long, value_name = "COMMAND", default_value = crate::backend::ssh::START_KUBELET)]
    pub kubelet_start_command: String,
}

fn pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("`{s}` is not NODE=VALUE")),
    }
}

impl SshArgs {
    pub fn settings(&self) -> SshSettings {
        SshSettings {
            user: self.ssh_user.clone(),
            key: self.ssh_key.clone(),
            port: self.ssh_port,
            options: self.ssh_options.clone(),
            stop_kubelet: self.kubelet_stop_command.clone(),
            start_kubelet: self.kubelet_start_command.clone(),
        }
    }
}

impl MachineArgs {
    /// The connection URI: the flag, else the scenario's, else
    /// LIBVIRT_DEFAULT_URI, else qemu:///system.
    pub fn uri(&self, scenario: &LibvirtMachines) -> String {
        libvirt::uri(self.libvirt_uri.as_deref().or(scenario.uri.as_deref()))
    }

    /// The libvirt backend's settings: the scenario's `libvirt:` mapping,
    /// then the flags over it; a bad `--ssh-host` is named.
    pub fn libvirt_settings(
        &self,
        scenario: &LibvirtMachines,
    ) -> Result<libvirt::Settings, String> {
        let mut ssh_hosts = std::collections::BTreeMap::new();
        for (node, host) in &self.ssh.ssh_hosts {
            let t = SshTarget::parse(host).map_err(|e| format!("--ssh-host {node}={host}: {e}"))?;
            ssh_hosts.insert(node.clone(), t);
        }
        let mut domains = scenario.domains.clone();
        domains.extend(self.domains.iter().cloned());
        let mut nics = scenario.nics.clone();
        nics.extend(self.nics.iter().cloned());
        Ok(libvirt::Settings {
            domains,
            prefix: self
                .domain_prefix
                .clone()
                .or_else(|| scenario.domain_prefix.clone()),
            nics,
            ssh_hosts,
            ssh: self.ssh.settings(),
            shutdown_mode: self.shutdown_mode,
            shutdown_timeout_secs: self.shutdown_timeout.as_secs().max(1),
        })
    }
}
