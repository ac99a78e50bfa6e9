//! The narrow, blocking view of libvirt the backend needs. The real one
//! goes through the `virt` crate (feature `libvirt`); tests use fakes and
//! libvirt's `test:///default` driver. Every call blocks: the backend runs
//! them with `spawn_blocking`, never on a runtime worker.

use std::fmt;

/// A domain's run state (`virDomainState`), as `virsh domstate` words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomState {
    Running,
    Blocked,
    Paused,
    /// Shutting down.
    Shutdown,
    Shutoff,
    Crashed,
    PmSuspended,
    NoState,
}

impl DomState {
    /// Whether the domain has a running (or frozen) QEMU process.
    pub fn active(self) -> bool {
        !matches!(
            self,
            DomState::Shutoff | DomState::Crashed | DomState::NoState
        )
    }
}

impl fmt::Display for DomState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DomState::Running => "running",
            DomState::Blocked => "idle",
            DomState::Paused => "paused",
            DomState::Shutdown => "in shutdown",
            DomState::Shutoff => "shut off",
            DomState::Crashed => "crashed",
            DomState::PmSuspended => "pmsuspended",
            DomState::NoState => "no state",
        })
    }
}

/// A domain as found: enough to check it and to address it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainInfo {
    pub name: String,
    /// Lower-case, dashed.
    pub uuid: String,
    pub state: DomState,
    /// Its live XML description (`virsh dumpxml`).
    pub xml: String,
}

/// How to ask a guest to shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum ShutdownMode {
    /// The ACPI power button (what a power button press does).
    #[default]
    Acpi,
    /// The QEMU guest agent (`guest-shutdown`).
    Agent,
}

impl ShutdownMode {
    pub fn name(self) -> &'static str {
        match self {
            ShutdownMode::Acpi => "acpi",
            ShutdownMode::Agent => "agent",
        }
    }
}

/// One state change of a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Suspend,
    Resume,
    Destroy,
    Create,
    Shutdown(ShutdownMode),
    /// `virDomainUpdateDeviceFlags` on the live domain with this device XML.
    UpdateDevice(String),
}

impl Op {
    /// The libvirt call, for messages.
    pub fn call(&self) -> &'static str {
        match self {
            Op::Suspend => "virDomainSuspend",
            Op::Resume => "virDomainResume",
            Op::Destroy => "virDomainDestroy",
            Op::Create => "virDomainCreate",
            Op::Shutdown(_) => "virDomainShutdownFlags",
            Op::UpdateDevice(_) => "virDomainUpdateDeviceFlags",
        }
    }
}

/// What libvirt said when a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HvError {
    /// libvirt's error number name (`NoDomain`, `OperationInvalid`, ...).
    pub code: String,
    pub message: String,
}

impl HvError {
    pub fn no_domain(&self) -> bool {
        self.code == "NoDomain"
    }
}

impl fmt::Display for HvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// A domain by name or by UUID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainKey {
    Name(String),
    Uuid(String),
}

impl DomainKey {
    /// A UUID string is looked up as one; anything else is a name.
    pub fn parse(s: &str) -> DomainKey {
        if is_uuid(s) {
            DomainKey::Uuid(s.to_ascii_lowercase())
        } else {
            DomainKey::Name(s.to_owned())
        }
    }
}

impl fmt::Display for DomainKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DomainKey::Name(n) => f.write_str(n),
            DomainKey::Uuid(u) => write!(f, "UUID {u}"),
        }
    }
}

pub use crate::scenario::names::is_uuid;

/// libvirt, as the backend uses it. Blocking.
pub trait Hypervisor: Send + Sync + 'static {
    /// The connection URI (for messages and `virsh -c`).
    fn uri(&self) -> &str;
    /// Finds a domain; `Err` with code `NoDomain` when there is none.
    fn lookup(&self, key: &DomainKey) -> Result<DomainInfo, HvError>;
    /// The names of every domain on the connection (for "did you mean").
    fn names(&self) -> Result<Vec<String>, HvError>;
    /// Runs `op` on the domain with this UUID.
    fn act(&self, uuid: &str, op: &Op) -> Result<(), HvError>;
    /// Addresses the hypervisor knows per MAC (DHCP leases, then ARP);
    /// empty where it cannot tell (user-mode networking).
    fn addresses(&self, uuid: &str) -> Result<Vec<(String, Vec<String>)>, HvError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_told_from_names() {
        assert_eq!(
            DomainKey::parse("6695EB01-F6A4-8304-79AA-97F2502E193F"),
            DomainKey::Uuid("6695eb01-f6a4-8304-79aa-97f2502e193f".into())
        );
        assert_eq!(
            DomainKey::parse("kubespray_k8s-2"),
            DomainKey::Name("kubespray_k8s-2".into())
        );
        assert!(!is_uuid("6695eb01-f6a4-8304-79aa-97f2502e193"));
        assert!(!DomState::Shutoff.active());
        assert!(DomState::Paused.active());
    }
}
