//! Flags that tell a backend where the nodes' machines are and how to reach
//! them: libvirt (URI, node -> domain, NIC, shutdown), Vagrant (project,
//! node -> machine, adapter), SSH (kubelet) and the command backend's file.

use super::error::Error;
use std::path::PathBuf;

use clap::Args;

use crate::backend::libvirt::{self, hypervisor::ShutdownMode};
use crate::backend::ssh::{SshSettings, SshTarget};
use crate::backend::vagrant::{self, project::Project};
use crate::scenario::Checked;
use crate::scenario::command::{self as spec, CommandFile};
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
    #[arg(long, value_name = "DURATION", default_value = "180s",
          value_parser = super::values::duration(super::values::SHUTDOWN_TIMEOUT))]
    pub shutdown_timeout: std::time::Duration,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub vagrant: VagrantArgs,
    #[command(flatten)]
    pub command: CommandArgs,
}

#[derive(Debug, Clone, Args)]
#[command(
    next_help_heading = "Vagrant backend (also: --libvirt-uri, --nic, --shutdown-timeout, SSH)"
)]
pub struct VagrantArgs {
    /// The Vagrant project: the directory of its Vagrantfile (default: the
    /// current directory or a parent, then the scenario's directory or a
    /// parent; the first holding .vagrant/machines).
    #[arg(long, value_name = "DIR")]
    pub vagrant_dir: Option<PathBuf>,
    /// A node's Vagrant machine when it is not named like the node; repeatable.
    #[arg(long = "machine", value_name = "NODE=MACHINE", value_parser = pair)]
    pub machines: Vec<(String, String)>,
    /// The network adapter drop-nic cuts: 2 is the first private network
    /// (where kubeadm/Kubespray labs put the node IP), 1 Vagrant's NAT and
    /// SSH path.
    #[arg(long, value_name = "N", default_value_t = vagrant::NIC,
          value_parser = super::values::whole(1u8, 36))]
    pub vagrant_nic: u8,
    /// VirtualBox's CLI.
    #[arg(long, value_name = "PROGRAM", default_value = vagrant::vbox::PROGRAM)]
    pub vboxmanage: String,
}

impl VagrantArgs {
    /// `--vagrant-dir`, else the first of the current directory (Vagrant's
    /// `VAGRANT_CWD` when set) and the scenario's (or a parent of either)
    /// with machines in it.
    pub fn project(&self, scenario: &std::path::Path) -> Result<Project, vagrant::project::Error> {
        let mut search = Vec::new();
        let cwd = std::env::var_os("VAGRANT_CWD")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .map_or_else(std::env::current_dir, Ok);
        if let Ok(cwd) = cwd {
            search.push(std::path::absolute(&cwd).unwrap_or(cwd));
        }
        if let Some(dir) = scenario.parent() {
            let dir = if dir.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                dir
            };
            search.push(std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned()));
        }
        let dir = self
            .vagrant_dir
            .as_deref()
            .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.to_owned()));
        Project::find(dir.as_deref(), &search)
    }
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
    pub fn load(&self, checked: &Checked, faults: &[FaultKind]) -> Result<Commands, Error> {
        let c = match (&self.backend_file, &checked.command) {
            (Some(path), _) => {
                let l = spec::load(&crate::disk::Disk, path)?;
                Commands {
                    source: l.file,
                    spec: l.spec,
                    warnings: l.warnings,
                }
            }
            (None, Some(spec)) => Commands {
                source: format!("{} (command:)", checked.source.file),
                warnings: spec::check(&checked.source, "command", spec).1,
                spec: spec.clone(),
            },
            (None, None) => {
                return Err(super::InvalidFlag(
                    "--backend command needs its commands: --backend-file FILE, or a `command:` \
                     section in the scenario (see docs/command-backend.md and examples/backends/)"
                        .into(),
                )
                .into());
            }
        };
        let mut missing: Vec<&str> = Vec::new();
        for f in faults.iter().filter(|f| !c.spec.defines(**f)) {
            if !missing.contains(&f.name()) {
                missing.push(f.name());
            }
        }
        if !missing.is_empty() {
            return Err(Error::from(super::InvalidFlag(format!(
                "{}: the scenario injects {} but the file has no command for it; add them under \
                 `faults:` (a revert such as resume-vm is the `revert:` of the fault it undoes); \
                 nothing was injected",
                c.source,
                missing.join(", ")
            ))));
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
    #[arg(long, value_name = "PORT", value_parser = super::values::whole(1u16, u16::MAX))]
    pub ssh_port: Option<u16>,
    /// Where a node's SSH server is, when not at the address the Node reports; repeatable.
    #[arg(long = "ssh-host", value_name = "NODE=HOST[:PORT]", value_parser = pair)]
    pub ssh_hosts: Vec<(String, String)>,
    /// An `ssh -o` option, e.g. UserKnownHostsFile=/dev/null; repeatable.
    #[arg(long = "ssh-option", value_name = "KEY=VALUE")]
    pub ssh_options: Vec<String>,
    /// The command that stops the kubelet on a node (default: `systemctl
    /// stop kubelet`; vagrant: `sudo -n systemctl stop kubelet`, as Vagrant
    /// logs in unprivileged).
    #[arg(long, value_name = "COMMAND")]
    pub kubelet_stop_command: Option<String>,
    /// The command that starts it again (default: `systemctl start
    /// kubelet`; vagrant: with `sudo -n`).
    #[arg(long, value_name = "COMMAND")]
    pub kubelet_start_command: Option<String>,
}

fn pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("`{s}` is not NODE=VALUE")),
    }
}

impl SshArgs {
    /// The SSH flags, with `(stop, start)` as the kubelet commands unless
    /// the flags name others.
    pub fn settings(&self, (stop, start): (&str, &str)) -> SshSettings {
        SshSettings {
            user: self.ssh_user.clone(),
            key: self.ssh_key.clone(),
            port: self.ssh_port,
            options: self.ssh_options.clone(),
            stop_kubelet: self
                .kubelet_stop_command
                .as_deref()
                .unwrap_or(stop)
                .to_owned(),
            start_kubelet: self
                .kubelet_start_command
                .as_deref()
                .unwrap_or(start)
                .to_owned(),
        }
    }

    /// `--ssh-host NODE=HOST[:PORT]` flags; a bad one is named.
    fn hosts(&self) -> Result<std::collections::BTreeMap<String, SshTarget>, String> {
        let mut hosts = std::collections::BTreeMap::new();
        for (node, host) in &self.ssh_hosts {
            let t = SshTarget::parse(host).map_err(|e| format!("--ssh-host {node}={host}: {e}"))?;
            hosts.insert(node.clone(), t);
        }
        Ok(hosts)
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
        let ssh_hosts = self.ssh.hosts()?;
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
            nic_index: None,
            ssh_hosts,
            ssh: self.ssh.settings((
                crate::backend::ssh::STOP_KUBELET,
                crate::backend::ssh::START_KUBELET,
            )),
            shutdown_mode: self.shutdown_mode,
            shutdown_timeout_secs: self.shutdown_timeout.as_secs().max(1),
        })
    }

    /// The vagrant backend's settings: its flags, and the libvirt, SSH and
    /// shutdown flags it shares; a bad `--ssh-host` is named.
    pub fn vagrant_settings(
        &self,
        scenario: &LibvirtMachines,
    ) -> Result<vagrant::Settings, String> {
        Ok(vagrant::Settings {
            machines: self.vagrant.machines.iter().cloned().collect(),
            nic: self.vagrant.vagrant_nic,
            vboxmanage: self.vagrant.vboxmanage.clone(),
            vagrant: "vagrant".into(),
            libvirt_uri: self.uri(scenario),
            libvirt_nics: self.nics.iter().cloned().collect(),
            shutdown_mode: self.shutdown_mode,
            shutdown_timeout_secs: self.shutdown_timeout.as_secs().max(1),
            ssh_hosts: self.ssh.hosts()?,
            ssh: self
                .ssh
                .settings((vagrant::STOP_KUBELET, vagrant::START_KUBELET)),
        })
    }
}
