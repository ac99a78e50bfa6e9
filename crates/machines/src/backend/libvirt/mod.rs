//! The `libvirt` backend: nodes that are libvirt domains (KVM/QEMU, and
//! vagrant-libvirt's machines). Faults are libvirt calls on the node's
//! domain; stop-kubelet and start-kubelet go over SSH. The mapping is in
//! `docs/libvirt-backend.md`.
//!
//! Units: [`hypervisor`] (the blocking libvirt calls, behind a trait),
//! [`domxml`] (interfaces in the domain XML), [`resolve`] (node -> domain at
//! preflight, checked by systemUUID), `virt` (the real hypervisor, feature
//! `libvirt`).

#![deny(clippy::wildcard_enum_match_arm)]

mod connect;
pub use connect::{Libvirt, connect_libvirt};
pub mod domxml;
pub mod hypervisor;
mod resolve;
pub use resolve::{Need, need, same_uuid, system_uuid};
#[cfg(feature = "libvirt")]
pub mod virt;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};

use super::ssh::{self, SshSettings, SshTarget};
use super::{Error, NodeFaults};
use crate::exec::Exec;
use crate::scenario::model::{Does, Effect, FaultKind};
use hypervisor::{DomState, DomainInfo, DomainKey, HvError, Hypervisor, Op, ShutdownMode};

/// The default connection when neither `--libvirt-uri` nor
/// `LIBVIRT_DEFAULT_URI` says otherwise.
pub const DEFAULT_URI: &str = "qemu:///system";

/// `--libvirt-uri`, else `LIBVIRT_DEFAULT_URI`, else `qemu:///system`.
pub fn uri(flag: Option<&str>) -> String {
    flag.map(str::to_owned)
        .or_else(|| {
            std::env::var("LIBVIRT_DEFAULT_URI")
                .ok()
                .filter(|u| !u.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_URI.to_owned())
}

/// How nodes map to domains and how faults are carried out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Node -> domain name or UUID (`--domain NODE=DOMAIN`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub domains: BTreeMap<String, String>,
    /// Put before a node's name to get its domain's (vagrant-libvirt:
    /// `<project dir>_`, Kubespray: `kubespray`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Node -> the MAC of the interface drop-nic cuts (`--nic NODE=MAC`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nics: BTreeMap<String, String>,
    /// The interface drop-nic cuts when no MAC names it and libvirt cannot
    /// tell which holds the node's InternalIP: the Nth of the domain's
    /// (1-based, in its XML's order; vagrant: 2, the first private network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_index: Option<u8>,
    /// Node -> where its SSH server is (`--ssh-host NODE=HOST[:PORT]`);
    /// default: the address the Node reports.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ssh_hosts: BTreeMap<String, SshTarget>,
    pub ssh: SshSettings,
    #[serde(default)]
    pub shutdown_mode: ShutdownMode,
    /// How long a guest may take to power off after the shutdown request.
    pub shutdown_timeout_secs: u64,
}

/// The default bound on a graceful shutdown: Kubespray's 60 s
/// shutdownGracePeriod, with room for the guest's own shutdown.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(180);

impl Settings {
    pub fn new() -> Settings {
        Settings {
            ssh: SshSettings::new(),
            shutdown_timeout_secs: SHUTDOWN_TIMEOUT.as_secs(),
            ..Settings::default()
        }
    }
}

/// A node's machine, resolved at preflight; journaled with each fault so
/// `nodefall recover` reaches the same domain without the cluster's help.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    pub domain: String,
    pub uuid: String,
    /// The interface drop-nic cuts, when one could be chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshTarget>,
}

#[derive(Debug)]
pub struct LibvirtBackend<H: Hypervisor, E: Exec + Clone + 'static> {
    hv: Arc<H>,
    exec: E,
    pub settings: Settings,
    machines: BTreeMap<String, Machine>,
}

/// How often a shutdown's progress is looked at.
const SHUTDOWN_POLL: Duration = Duration::from_millis(250);

impl<H: Hypervisor, E: Exec + Clone + 'static> LibvirtBackend<H, E> {
    pub fn new(hv: H, exec: E, settings: Settings) -> Self {
        LibvirtBackend {
            hv: Arc::new(hv),
            exec,
            settings,
            machines: BTreeMap::new(),
        }
    }

    pub fn machine(&self, node: &str) -> Option<&Machine> {
        self.machines.get(node)
    }

    /// Runs a blocking hypervisor call on the blocking pool.
    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&H) -> Result<T, HvError> + Send + 'static,
    ) -> Result<T, HvError> {
        let hv = Arc::clone(&self.hv);
        tokio::task::spawn_blocking(move || f(&hv))
            .await
            .unwrap_or_else(|e| {
                Err(HvError {
                    code: "Panic".into(),
                    message: format!("the libvirt call did not finish: {e}"),
                })
            })
    }

    fn err(&self, node: &str, m: &Machine, op: &str, e: HvError) -> Error {
        Error::Libvirt {
            op: op.to_owned(),
            node: node.to_owned(),
            domain: m.domain.clone(),
            uri: self.hv.uri().to_owned(),
            message: e.to_string(),
        }
    }

    fn resolved(&self, node: &str) -> Result<Machine, Error> {
        self.machines
            .get(node)
            .cloned()
            .ok_or_else(|| Error::UnknownNode {
                node: node.to_owned(),
                what: "nodes whose libvirt domain was resolved",
                known: self.machines.keys().cloned().collect(),
            })
    }

    async fn lookup(&self, node: &str, m: &Machine) -> Result<DomainInfo, Error> {
        let key = DomainKey::Uuid(m.uuid.clone());
        self.call(move |hv| hv.lookup(&key))
            .await
            .map_err(|e| self.err(node, m, "look up domain", e))
    }

    async fn act(&self, node: &str, m: &Machine, op: Op) -> Result<(), Error> {
        let uuid = m.uuid.clone();
        let what = op.call();
        self.call(move |hv| hv.act(&uuid, &op))
            .await
            .map_err(|e| self.err(node, m, what, e))
    }

    /// Sets the link of the node's NIC, from the domain as just looked up.
    async fn set_link(
        &self,
        node: &str,
        m: &Machine,
        info: &DomainInfo,
        up: bool,
    ) -> Result<(), Error> {
        let Some(mac) = &m.mac else {
            return Err(Error::NoNic {
                node: node.to_owned(),
                domain: m.domain.clone(),
            });
        };
        let nics = domxml::interfaces(&info.xml).map_err(|e| {
            self.err(
                node,
                m,
                "read domain XML",
                HvError {
                    code: "XML".into(),
                    message: e,
                },
            )
        })?;
        let Some(nic) = nics.iter().find(|n| &n.mac == mac) else {
            return Err(self.err(
                node,
                m,
                "find interface",
                HvError {
                    code: "NoInterface".into(),
                    message: format!("the domain has no interface with MAC {mac} any more"),
                },
            ));
        };
        if nic.link_up == up {
            // Already so (a revert after a failed cut, or a repeated one).
            return Ok(());
        }
        self.act(node, m, Op::UpdateDevice(domxml::with_link(nic, up)))
            .await
    }

    /// Requests a shutdown and waits, bounded, until the domain is off.
    async fn shutdown(&self, node: &str, m: &Machine) -> Result<(), Error> {
        let mode = self.settings.shutdown_mode;
        self.act(node, m, Op::Shutdown(mode)).await?;
        let limit = Duration::from_secs(self.settings.shutdown_timeout_secs);
        let start = Instant::now();
        loop {
            let info = self.lookup(node, m).await?;
            if !info.state.active() {
                return Ok(());
            }
            if start.elapsed() >= limit {
                return Err(Error::ShutdownTimeout {
                    node: node.to_owned(),
                    machine: format!("domain `{}`", m.domain),
                    mode: mode.name(),
                    after: limit.as_secs(),
                    state: info.state.to_string(),
                });
            }
            tokio::time::sleep(SHUTDOWN_POLL).await;
        }
    }

    async fn over_ssh(&self, node: &str, m: &Machine, remote: &str) -> Result<(), Error> {
        let Some(target) = &m.ssh else {
            return Err(Error::NoSsh {
                node: node.to_owned(),
            });
        };
        ssh::run(&self.exec, &self.settings.ssh, target, remote)
            .await
            .map(|_| ())
            .map_err(Error::Exec)
    }

    /// The libvirt calls (and their `virsh` equivalents) of a fault.
    pub fn operations(&self, node: &str, fault: FaultKind) -> Vec<String> {
        let m = self.machines.get(node);
        let domain = m.map_or_else(|| format!("<domain of {node}>"), |m| m.domain.clone());
        let mac = m
            .and_then(|m| m.mac.clone())
            .unwrap_or_else(|| "<MAC>".into());
        let ssh = m
            .and_then(|m| m.ssh.clone())
            .unwrap_or_else(|| SshTarget::at(format!("<address of {node}>"), None));
        operations(self.hv.uri(), &domain, &mac, &ssh, &self.settings, fault)
    }
}

/// What a fault does, as libvirt calls with the `virsh` line a user would
/// type for the same (for `nodefall plan` and the reports).
pub fn operations(
    uri: &str,
    domain: &str,
    mac: &str,
    ssh_target: &SshTarget,
    settings: &Settings,
    fault: FaultKind,
) -> Vec<String> {
    let virsh = |args: &str| format!("virsh -c {uri} {args}");
    let over_ssh = |remote: &str| ssh::command(&settings.ssh, ssh_target, remote).to_string();
    let mode = settings.shutdown_mode.name();
    match fault {
        FaultKind::PauseVm => vec![format!(
            "virDomainSuspend = {}",
            virsh(&format!("suspend {domain}"))
        )],
        FaultKind::ResumeVm => vec![format!(
            "virDomainResume = {}",
            virsh(&format!("resume {domain}"))
        )],
        FaultKind::Poweroff => vec![format!(
            "virDomainDestroy = {}",
            virsh(&format!("destroy {domain}"))
        )],
        FaultKind::Poweron => vec![format!(
            "virDomainCreate = {}",
            virsh(&format!("start {domain}"))
        )],
        FaultKind::Shutdown => vec![
            format!(
                "virDomainShutdownFlags({}) = {}",
                match settings.shutdown_mode {
                    ShutdownMode::Acpi => "ACPI_POWER_BTN",
                    ShutdownMode::Agent => "GUEST_AGENT",
                },
                virsh(&format!("shutdown --mode {mode} {domain}"))
            ),
            format!(
                "wait until shut off (at most {}s) = {}",
                settings.shutdown_timeout_secs,
                virsh(&format!("domstate {domain}"))
            ),
        ],
        FaultKind::DropNic => vec![format!(
            "virDomainUpdateDeviceFlags(<link state='down'/>, LIVE) = {}",
            virsh(&format!("domif-setlink {domain} {mac} down"))
        )],
        FaultKind::RestoreNic => vec![format!(
            "virDomainUpdateDeviceFlags(<link state='up'/>, LIVE) = {}",
            virsh(&format!("domif-setlink {domain} {mac} up"))
        )],
        FaultKind::StopKubelet => vec![over_ssh(&settings.ssh.stop_kubelet)],
        FaultKind::StartKubelet => vec![over_ssh(&settings.ssh.start_kubelet)],
    }
}

impl<H: Hypervisor, E: Exec + Clone + 'static> NodeFaults for LibvirtBackend<H, E> {
    fn name(&self) -> &'static str {
        "libvirt"
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
        let key = resolve::domain_key(&self.settings, &name);
        let lookup_key = key.clone();
        let found = self.call(move |hv| hv.lookup(&lookup_key)).await;
        let info = match found {
            Ok(info) => info,
            Err(e) if e.no_domain() => {
                let names = self.call(|hv| hv.names()).await.unwrap_or_default();
                return Err(Error::NoMachine {
                    node: name,
                    looked_for: format!("domain {key} on {}", self.hv.uri()),
                    found: names,
                    hint: "map it with --domain NODE=DOMAIN (name or UUID) or --domain-prefix",
                });
            }
            Err(e) => {
                return Err(Error::Libvirt {
                    op: "look up domain".into(),
                    node: name,
                    domain: key.to_string(),
                    uri: self.hv.uri().to_owned(),
                    message: e.to_string(),
                });
            }
        };
        // Where libvirt cannot tell (user-mode networking), no addresses.
        let addresses = self
            .call({
                let uuid = info.uuid.clone();
                move |hv| hv.addresses(&uuid)
            })
            .await
            .unwrap_or_default();
        let machine = resolve::machine(
            &self.settings,
            self.hv.uri(),
            node,
            &info,
            &addresses,
            faults,
        )?;
        let text = resolve::describe(&name, &machine, &info);
        self.machines.insert(name, machine);
        Ok(text)
    }

    fn memo(&self, node: &str, _: FaultKind) -> Option<String> {
        serde_json::to_string(self.machines.get(node)?).ok()
    }

    async fn shell(&self, node: &str, command: &str) -> Option<(String, Result<String, String>)> {
        let target = self.machines.get(node)?.ssh.clone()?;
        let via = format!("ssh {target}");
        let r = ssh::run(&self.exec, &self.settings.ssh, &target, command)
            .await
            .map_err(|e| crate::errors::chain(&e));
        Some((via, r))
    }

    /// Domains are acted on through one shared connection, each call on
    /// the blocking pool.
    fn fork(&self) -> Option<Self> {
        Some(LibvirtBackend {
            hv: self.hv.clone(),
            exec: self.exec.clone(),
            settings: self.settings.clone(),
            machines: self.machines.clone(),
        })
    }

    fn join(&mut self, node: &str, mut fork: Self) {
        if let Some(m) = fork.machines.remove(node) {
            self.machines.insert(node.to_owned(), m);
        }
    }

    fn remember(&mut self, node: &str, memo: &str) {
        if let Ok(m) = serde_json::from_str::<Machine>(memo) {
            self.machines.insert(node.to_owned(), m);
        }
    }

    async fn inject(&mut self, node: &str, fault: FaultKind) -> Result<(), Error> {
        let m = self.resolved(node)?;
        let info = self.lookup(node, &m).await?;
        let state = info.state;
        match fault {
            FaultKind::PauseVm => self.act(node, &m, Op::Suspend).await,
            // Reverts are idempotent: a domain already in the wanted state
            // is left alone.
            FaultKind::ResumeVm if state == DomState::Paused => {
                self.act(node, &m, Op::Resume).await
            }
            FaultKind::ResumeVm => Ok(()),
            FaultKind::Poweroff => self.act(node, &m, Op::Destroy).await,
            FaultKind::Shutdown => self.shutdown(node, &m).await,
            FaultKind::Poweron if state == DomState::Paused => self.act(node, &m, Op::Resume).await,
            FaultKind::Poweron if state.active() => Ok(()),
            FaultKind::Poweron => self.act(node, &m, Op::Create).await,
            FaultKind::DropNic => self.set_link(node, &m, &info, false).await,
            FaultKind::RestoreNic => self.set_link(node, &m, &info, true).await,
            FaultKind::StopKubelet => {
                let cmd = self.settings.ssh.stop_kubelet.clone();
                self.over_ssh(node, &m, &cmd).await
            }
            FaultKind::StartKubelet => {
                let cmd = self.settings.ssh.start_kubelet.clone();
                self.over_ssh(node, &m, &cmd).await
            }
        }
    }

    /// The domain is brought to running from whatever state a fault, or a
    /// run cut short in one, left it in (paused: resumed; in shutdown:
    /// forced off and started; off or crashed: started), then the revert's
    /// own part is done on a guest that did not boot afresh (its link set
    /// up, its kubelet started; a booted guest comes up with both).
    async fn restore(&mut self, node: &str, revert: FaultKind) -> Result<String, Error> {
        let m = self.resolved(node)?;
        let info = self.lookup(node, &m).await?;
        let found = info.state;
        let mut did = Vec::new();
        let booted = match found {
            DomState::Running | DomState::Blocked => false,
            DomState::Paused => {
                self.act(node, &m, Op::Resume).await?;
                did.push("resumed it");
                false
            }
            DomState::Shutdown => {
                self.act(node, &m, Op::Destroy).await?;
                self.act(node, &m, Op::Create).await?;
                did.push("forced it off and started it");
                true
            }
            DomState::Shutoff | DomState::Crashed | DomState::NoState => {
                self.act(node, &m, Op::Create).await?;
                did.push("started it");
                true
            }
            DomState::PmSuspended => {
                return Err(Error::NotRunning {
                    node: node.to_owned(),
                    machine: format!("domain `{}`", info.name),
                    state: found.to_string(),
                });
            }
        };
        if !booted {
            match revert.does() {
                Does::Restores(Effect::CutOff) => {
                    self.set_link(node, &m, &info, true).await?;
                    did.push("set its link up");
                }
                Does::Restores(Effect::KubeletStopped) => {
                    let cmd = self.settings.ssh.start_kubelet.clone();
                    self.over_ssh(node, &m, &cmd).await?;
                    did.push("started the kubelet");
                }
                // Running again is all the rest need.
                Does::Restores(Effect::Off | Effect::Paused) | Does::Breaks(_) => {}
            }
        }
        if did.is_empty() {
            did.push("nothing to do");
        }
        Ok(format!("found domain {found}; {}", did.join(", ")))
    }
}

#[cfg(test)]
mod tests;
