//! The `vagrant` backend: nodes that are a Vagrant project's machines.
//! Vagrant's own machine data ([`project`]) says which VM a node is: the
//! VirtualBox VM's UUID, driven through `VBoxManage` ([`vbox`]), or the
//! libvirt domain's UUID, driven by the libvirt backend. The kubelet is
//! stopped and started over SSH with what `vagrant ssh-config` prints
//! ([`ssh_config`]), fetched once per machine at preflight.
//!
//! Each fault's journal memo is the machine as resolved (provider, UUID,
//! NIC, SSH path), so `nodefall recover` reaches it without the project or
//! the cluster. The mapping is in docs/vagrant-backend.md.

#![deny(clippy::wildcard_enum_match_arm)]

pub mod project;
pub mod ssh_config;
pub mod vbox;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};

use self::project::{Project, Provider};
use self::vbox::{VBox, VmInfo};
use super::libvirt::{self, Libvirt, connect_libvirt, hypervisor::ShutdownMode};
use super::ssh::{self, SshSettings, SshTarget};
use super::{CommandFailure, Error, NodeFaults};
use crate::exec::{self, Exec, Job, System};
use crate::scenario::model::{Does, Effect, FaultKind};

/// How nodes map to machines and how faults reach them (the flags); the
/// journal keeps it for `nodefall recover`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Node -> machine, for nodes not named like their machine
    /// (`--machine NODE=MACHINE`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub machines: BTreeMap<String, String>,
    /// The network adapter drop-nic cuts (1-based): 2, the first private
    /// network; 1 is Vagrant's NAT and SSH path.
    pub nic: u8,
    /// VirtualBox's CLI.
    pub vboxmanage: String,
    /// Vagrant's CLI (for `vagrant ssh-config`).
    pub vagrant: String,
    /// The libvirt connection of vagrant-libvirt machines.
    pub libvirt_uri: String,
    /// Node -> MAC of the interface drop-nic cuts (libvirt machines).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub libvirt_nics: BTreeMap<String, String>,
    #[serde(default)]
    pub shutdown_mode: ShutdownMode,
    /// How long a guest may take to power off after the power button.
    pub shutdown_timeout_secs: u64,
    /// Node -> its SSH server, instead of `vagrant ssh-config`'s.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ssh_hosts: BTreeMap<String, SshTarget>,
    /// The SSH flags (they win over `vagrant ssh-config`) and the kubelet
    /// commands (default with `sudo -n`: Vagrant logs in unprivileged).
    pub ssh: SshSettings,
}

/// The kubelet commands run as Vagrant's unprivileged user.
pub const STOP_KUBELET: &str = "sudo -n systemctl stop kubelet";
pub const START_KUBELET: &str = "sudo -n systemctl start kubelet";
/// The adapter of the first private network (docs/vagrant-backend.md).
pub const NIC: u8 = 2;

impl Settings {
    pub fn new() -> Settings {
        Settings {
            machines: BTreeMap::new(),
            nic: NIC,
            vboxmanage: vbox::PROGRAM.into(),
            vagrant: "vagrant".into(),
            libvirt_uri: libvirt::uri(None),
            libvirt_nics: BTreeMap::new(),
            shutdown_mode: ShutdownMode::Acpi,
            shutdown_timeout_secs: libvirt::SHUTDOWN_TIMEOUT.as_secs(),
            ssh_hosts: BTreeMap::new(),
            ssh: SshSettings {
                stop_kubelet: STOP_KUBELET.into(),
                start_kubelet: START_KUBELET.into(),
                ..SshSettings::default()
            },
        }
    }

    /// The machine of a node: mapped, else named like it.
    pub fn machine<'a>(&'a self, node: &'a str) -> &'a str {
        self.machines.get(node).map_or(node, String::as_str)
    }

    /// The command a fault runs in the guest over SSH (the kubelet's
    /// faults); None for the faults done to the VM (VBoxManage, libvirt).
    pub fn remote(&self, fault: FaultKind) -> Option<&str> {
        match fault.does() {
            Does::Breaks(Effect::KubeletStopped) => Some(&self.ssh.stop_kubelet),
            Does::Restores(Effect::KubeletStopped) => Some(&self.ssh.start_kubelet),
            Does::Breaks(Effect::Off | Effect::Paused | Effect::CutOff)
            | Does::Restores(Effect::Off | Effect::Paused | Effect::CutOff) => None,
        }
    }

    /// The SSH line of a fault done in the guest (the kubelet's faults) on
    /// `machine`, a placeholder for the target until `vagrant ssh-config`
    /// has said; None for a fault done to the VM.
    pub fn kubelet_line(
        &self,
        machine: &str,
        target: Option<&SshTarget>,
        fault: FaultKind,
    ) -> Option<String> {
        let remote = self.remote(fault)?;
        Some(match target {
            Some(t) => ssh::command(&self.ssh, t, remote).to_string(),
            None => format!("ssh <as `vagrant ssh-config {machine}` says> '{remote}'"),
        })
    }

    /// The libvirt backend's settings for this project's libvirt machines
    /// (domains and SSH paths are added per node as they resolve).
    pub fn libvirt(&self) -> libvirt::Settings {
        libvirt::Settings {
            nics: self.libvirt_nics.clone(),
            nic_index: Some(self.nic),
            ssh: self.ssh.clone(),
            shutdown_mode: self.shutdown_mode,
            shutdown_timeout_secs: self.shutdown_timeout_secs,
            ..libvirt::Settings::new()
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::new()
    }
}

/// A node's machine as resolved at preflight: the fault's journal memo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "lowercase")]
pub enum Placed {
    Virtualbox {
        machine: String,
        uuid: String,
        /// The VM's name in VirtualBox.
        vm: String,
        nic: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ssh: Option<SshTarget>,
    },
    Libvirt {
        machine: String,
        domain: libvirt::Machine,
    },
}

/// The backend; `vagrant`, VBoxManage and SSH run through `E` (the real
/// [`System`], or a fake in tests).
#[derive(Debug)]
pub struct VagrantBackend<E: Exec = System> {
    /// Where `vagrant` runs and machines are looked up (a revert from the
    /// journal needs neither: its memo says where the machine is).
    project: Project,
    settings: Settings,
    placed: BTreeMap<String, Placed>,
    /// Runs `vagrant ssh-config` and the SSH commands.
    exec: E,
    vbox: VBox<E>,
    /// Connected on the first libvirt machine.
    libvirt: Option<Box<Libvirt>>,
}

impl VagrantBackend {
    pub fn new(project: Project, settings: Settings) -> VagrantBackend {
        VagrantBackend::with_exec(project, settings, System)
    }
}

impl<E: Exec + Clone + 'static> VagrantBackend<E> {
    /// The backend running its commands through `exec`.
    pub fn with_exec(project: Project, settings: Settings, exec: E) -> VagrantBackend<E> {
        VagrantBackend {
            vbox: VBox::with_exec(settings.vboxmanage.clone(), exec.clone()),
            exec,
            project,
            settings,
            placed: BTreeMap::new(),
            libvirt: None,
        }
    }

    pub fn placed(&self, node: &str) -> Option<&Placed> {
        self.placed.get(node)
    }

    /// Where a target node's machine was found (by `resolve`, or read back
    /// from the journal's memo).
    fn placed_or_err(&self, node: &str) -> Result<Placed, Error> {
        self.placed(node)
            .cloned()
            .ok_or_else(|| Error::UnknownNode {
                node: node.to_owned(),
                what: "nodes whose Vagrant machine was resolved",
                known: self.placed.keys().cloned().collect(),
            })
    }

    /// The libvirt backend, knowing `node`'s domain (given back from the
    /// journal's memo when this process did not resolve it: `recover`).
    async fn libvirt_for(
        &mut self,
        node: &str,
        domain: &libvirt::Machine,
    ) -> Result<&mut Libvirt, Error> {
        let lv = self.libvirt().await?;
        if lv.machine(node).is_none()
            && let Ok(memo) = serde_json::to_string(domain)
        {
            lv.remember(node, &memo);
        }
        Ok(lv)
    }

    async fn libvirt(&mut self) -> Result<&mut Libvirt, Error> {
        if self.libvirt.is_none() {
            let uri = self.settings.libvirt_uri.clone();
            let settings = self.settings.libvirt();
            let lv = tokio::task::spawn_blocking(move || connect_libvirt(&uri, settings))
                .await
                .map_err(|e| Error::Missing(format!("connecting to libvirt: {e}")))??;
            self.libvirt = Some(Box::new(lv));
        }
        self.libvirt
            .as_deref_mut()
            .ok_or_else(|| Error::Missing("libvirt is not connected".into()))
    }

    /// The SSH path of a machine: `--ssh-host`, else `vagrant ssh-config`.
    async fn ssh_target(
        &self,
        node: &str,
        machine: &str,
        fault: FaultKind,
    ) -> Result<SshTarget, Error> {
        if let Some(t) = self.settings.ssh_hosts.get(node) {
            return Ok(t.clone());
        }
        let cmd = ssh_config::command(&self.settings.vagrant, machine);
        let job = Job::acting(cmd.clone(), ssh_config::TIMEOUT).in_dir(&self.project.root);
        let c = match exec::call_blocking(&self.exec, job).await {
            Ok(c) => c,
            Err(crate::exec::Error::Spawn { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Err(Error::Missing(format!(
                    "`{}` is not on PATH: {} on node `{node}` goes over SSH as `{cmd}` says; \
                     install Vagrant or pass --ssh-host {node}=HOST[:PORT]",
                    self.settings.vagrant,
                    fault.name()
                )));
            }
            Err(e) => return Err(Error::Exec(e)),
        };
        let found = c
            .success()
            .then(|| ssh_config::parse(&c.stdout, machine))
            .flatten();
        found.ok_or_else(|| {
            Error::Command(Box::new(CommandFailure {
                status: if c.success() {
                    format!("no `Host {machine}` block with a HostName")
                } else {
                    c.status.clone()
                },
                output: format!(
                    " in {}{}",
                    self.project.root.display(),
                    crate::backend::command::output(&c)
                ),
                ..CommandFailure::new(node, fault, "preflight", &cmd, &c)
            }))
        })
    }

    async fn resolve_virtualbox(
        &mut self,
        node: &Node,
        name: &str,
        created: project::Created,
        faults: &[FaultKind],
    ) -> Result<String, Error> {
        let info = match self.vbox.info(&created.id).await? {
            Ok(info) => info,
            Err(c) => {
                return Err(Error::NoMachine {
                    node: name.to_owned(),
                    looked_for: format!(
                        "VirtualBox VM {} (the id in {}: `{}` said {})",
                        created.id,
                        created.id_file.display(),
                        vbox::showvminfo(&created.id).join(" "),
                        first_line(&c.stderr)
                    ),
                    found: self.vbox.names().await,
                    hint: "was the VM removed outside Vagrant, or created by another user? run \
                           nodefall as the user who ran `vagrant up`",
                });
            }
        };
        // Faults that break the machine need it running before them.
        if faults.iter().any(|f| f.breaks_machine()) && info.state != "running" {
            return Err(Error::NotRunning {
                node: name.to_owned(),
                machine: format!("VirtualBox VM `{}`", info.name),
                state: info.state,
            });
        }
        let nic = self.settings.nic;
        let cuts = faults
            .iter()
            .any(|f| libvirt::need(*f) == libvirt::Need::Nic);
        if cuts && info.adapter(nic).is_none() {
            return Err(Error::NoAdapter {
                node: name.to_owned(),
                machine: format!("VirtualBox VM `{}`", info.name),
                index: nic,
                found: info.adapter_list(),
            });
        }
        let same = identity(node, &info)?;
        let (ssh, ssh_note) = self.ssh_for(name, &created.machine, faults).await?;
        let text = describe_vm(name, &created, &info, nic, cuts, ssh.as_ref(), &ssh_note) + &same;
        self.placed.insert(
            name.to_owned(),
            Placed::Virtualbox {
                machine: created.machine,
                uuid: created.id,
                vm: info.name,
                nic,
                ssh,
            },
        );
        Ok(text)
    }

    /// The SSH path when a fault needs it (the kubelet faults: an error
    /// without it) or may use it (shutdown: the graceful-shutdown
    /// preflight reads logind over it; a note without it).
    async fn ssh_for(
        &self,
        node: &str,
        machine: &str,
        faults: &[FaultKind],
    ) -> Result<(Option<SshTarget>, String), Error> {
        let needed = faults
            .iter()
            .copied()
            .find(|f| self.settings.remote(*f).is_some());
        let wanted = needed.or_else(|| faults.iter().copied().find(|f| *f == FaultKind::Shutdown));
        let Some(fault) = wanted else {
            return Ok((None, String::new()));
        };
        match self.ssh_target(node, machine, fault).await {
            Ok(t) => Ok((Some(t), String::new())),
            Err(e) if needed.is_none() => Ok((None, format!(", no SSH ({e})"))),
            Err(e) => Err(e),
        }
    }

    async fn resolve_libvirt(
        &mut self,
        node: &Node,
        name: &str,
        created: project::Created,
        faults: &[FaultKind],
    ) -> Result<String, Error> {
        let (ssh, ssh_note) = self.ssh_for(name, &created.machine, faults).await?;
        let uri = self.settings.libvirt_uri.clone();
        let lv = self.libvirt().await?;
        lv.settings
            .domains
            .insert(name.to_owned(), created.id.clone());
        if let Some(t) = ssh {
            lv.settings.ssh_hosts.insert(name.to_owned(), t);
        }
        let text = match lv.resolve(node, faults).await {
            Ok(t) => t,
            Err(Error::NoMachine { found, .. }) => {
                return Err(Error::NoMachine {
                    node: name.to_owned(),
                    looked_for: format!(
                        "libvirt domain {} (the id in {}) on {uri}",
                        created.id,
                        created.id_file.display()
                    ),
                    found,
                    hint: "is this vagrant-libvirt's connection? pass --libvirt-uri (its \
                           `libvirt.uri`; qemu:///session with `qemu_use_session`)",
                });
            }
            Err(e) => return Err(e),
        };
        let domain = lv
            .machine(name)
            .cloned()
            .ok_or_else(|| Error::UnknownNode {
                node: name.to_owned(),
                what: "nodes whose libvirt domain was resolved",
                known: Vec::new(),
            })?;
        self.placed.insert(
            name.to_owned(),
            Placed::Libvirt {
                machine: created.machine.clone(),
                domain,
            },
        );
        Ok(format!(
            "machine {} (libvirt, {}): {text}{ssh_note}",
            created.machine,
            created.id_file.display()
        ))
    }

    async fn over_ssh(
        &mut self,
        node: &str,
        fault: FaultKind,
        remote: &str,
        target: Option<SshTarget>,
    ) -> Result<(), Error> {
        let Some(target) = target else {
            return Err(Error::NoSsh {
                node: node.to_owned(),
            });
        };
        let cmd = ssh::command(&self.settings.ssh, &target, remote);
        let c = exec::call_blocking(&self.exec, Job::acting(cmd.clone(), ssh::TIMEOUT))
            .await
            .map_err(Error::Exec)?;
        let role = vbox::For { node, fault }.role();
        self.vbox.push(role, &cmd, &c);
        if c.success() {
            return Ok(());
        }
        Err(Error::Command(Box::new(CommandFailure::new(
            node, fault, role, &cmd, &c,
        ))))
    }

    /// The commands of a fault on a node, as resolved (or placeholders).
    pub fn operations(&self, node: &str, fault: FaultKind) -> Vec<String> {
        match self.placed.get(node) {
            Some(Placed::Virtualbox { uuid, nic, ssh, .. }) => {
                match self
                    .settings
                    .kubelet_line(self.settings.machine(node), ssh.as_ref(), fault)
                {
                    Some(line) => vec![line],
                    None => vbox::lines(
                        &self.settings.vboxmanage,
                        uuid,
                        *nic,
                        fault,
                        self.settings.shutdown_timeout_secs,
                    ),
                }
            }
            Some(Placed::Libvirt { .. }) => self
                .libvirt
                .as_ref()
                .map(|lv| lv.operations(node, fault))
                .unwrap_or_default(),
            None => vec![format!("{} of node {node}'s machine", fault.name())],
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("nothing")
}

/// One line for the run's log: what the node resolved to.
fn describe_vm(
    node: &str,
    created: &project::Created,
    info: &VmInfo,
    nic: u8,
    cuts: bool,
    ssh: Option<&SshTarget>,
    ssh_note: &str,
) -> String {
    let mut s = format!(
        "node {node} = machine {} = VirtualBox VM {} (UUID {}, {}; {})",
        created.machine,
        info.name,
        info.uuid,
        info.state,
        created.id_file.display()
    );
    if let Some(a) = info.adapter(nic).filter(|_| cuts) {
        s.push_str(&format!(
            ", NIC {nic} {} (cable {})",
            a.attachment,
            if a.cable { "connected" } else { "disconnected" }
        ));
    }
    if let Some(t) = ssh {
        s.push_str(&format!(", SSH {t}"));
    }
    s + ssh_note
}

/// The node must be this VM where the node says who it is: its systemUUID
/// is the VM's hardware UUID (the VM's own UUID unless set apart with
/// `modifyvm --hardwareuuid`, which `showvminfo` reports).
fn identity(node: &Node, info: &vbox::VmInfo) -> Result<String, Error> {
    let hardware = info.hardware_uuid.as_deref().unwrap_or(&info.uuid);
    match libvirt::system_uuid(node) {
        Some(r) if libvirt::same_uuid(&r, hardware) => {
            Ok(", the node's systemUUID is the VM's".into())
        }
        Some(r) => Err(Error::WrongMachine {
            node: node.metadata.name.clone().unwrap_or_default(),
            machine: format!("VirtualBox VM `{}`", info.name),
            uuid: hardware.to_owned(),
            system_uuid: r,
            hint: "map the node to its own machine with --machine NODE=MACHINE",
        }),
        None => Ok(String::new()),
    }
}

impl<E: Exec + Clone + 'static> NodeFaults for VagrantBackend<E> {
    fn name(&self) -> &'static str {
        "vagrant"
    }

    fn describe(&self, node: &str, fault: FaultKind) -> String {
        format!(
            "{} {node} ({})",
            fault.name(),
            self.operations(node, fault).join("; ")
        )
    }

    async fn resolve(&mut self, node: &Node, faults: &[FaultKind]) -> Result<String, Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let machine = self.settings.machine(&name).to_owned();
        let created = self.project.machine(&name, &machine)?;
        match created.provider {
            Provider::Virtualbox => self.resolve_virtualbox(node, &name, created, faults).await,
            Provider::Libvirt => self.resolve_libvirt(node, &name, created, faults).await,
        }
    }

    async fn shell(&self, node: &str, command: &str) -> Option<(String, Result<String, String>)> {
        match self.placed.get(node)? {
            Placed::Virtualbox { ssh, .. } => {
                let target = ssh.clone()?;
                let cmd = ssh::command(&self.settings.ssh, &target, command);
                let job = Job::acting(cmd.clone(), ssh::TIMEOUT);
                let r = match exec::call_blocking(&self.exec, job).await {
                    Ok(c) if c.success() => Ok(c.stdout),
                    Ok(c) => Err(format!(
                        "`{cmd}` failed ({}){}",
                        c.status,
                        crate::backend::command::output(&c)
                    )),
                    Err(e) => Err(e.to_string()),
                };
                Some((format!("ssh {target}"), r))
            }
            Placed::Libvirt { .. } => self.libvirt.as_ref()?.shell(node, command).await,
        }
    }

    fn memo(&self, node: &str, _: FaultKind) -> Option<String> {
        serde_json::to_string(self.placed.get(node)?).ok()
    }

    fn remember(&mut self, node: &str, memo: &str) {
        if let Ok(p) = serde_json::from_str::<Placed>(memo) {
            self.placed.insert(node.to_owned(), p);
        }
    }

    /// A VirtualBox VM is first brought to running from any state (what
    /// poweron does: a paused VM resumed, a stopped one started, one still
    /// stopping waited for), then the revert's own part is done; a libvirt
    /// domain is restored as the libvirt backend does.
    async fn restore(&mut self, node: &str, revert: FaultKind) -> Result<String, Error> {
        if let Placed::Libvirt { domain, .. } = self.placed_or_err(node)? {
            return self
                .libvirt_for(node, &domain)
                .await?
                .restore(node, revert)
                .await;
        }
        self.inject(node, FaultKind::Poweron).await?;
        match revert.does() {
            Does::Restores(Effect::CutOff | Effect::KubeletStopped) => {
                self.inject(node, revert).await?;
            }
            // Running again is all the rest need.
            Does::Restores(Effect::Off | Effect::Paused) | Does::Breaks(_) => {}
        }
        Ok(String::new())
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), Error> {
        let remote = self.settings.remote(fault).map(str::to_owned);
        match (self.placed_or_err(node)?, remote) {
            (Placed::Virtualbox { ssh, .. }, Some(remote)) => {
                self.over_ssh(node, fault, &remote, ssh).await
            }
            (Placed::Virtualbox { uuid, vm, nic, .. }, None) => {
                let limit = Duration::from_secs(self.settings.shutdown_timeout_secs);
                let at = vbox::For { node, fault };
                self.vbox.inject(at, &uuid, &vm, nic, limit).await
            }
            (Placed::Libvirt { domain, .. }, _) => {
                self.libvirt_for(node, &domain)
                    .await?
                    .inject(node, fault)
                    .await
            }
        }
    }

    fn take_commands(&mut self) -> Vec<crate::record::CommandRecord> {
        self.vbox.take_records()
    }
}

#[cfg(test)]
mod tests;
