//! The real [`Hypervisor`]: libvirt through the `virt` crate (feature
//! `libvirt`). One connection, shared behind a mutex; every call blocks, so
//! the backend runs it on tokio's blocking pool.

use std::sync::Mutex;

use virt::connect::Connect;
use virt::domain::{Domain, DomainState};
use virt::enumutil::Enum;
use virt::sys;

use super::hypervisor::{DomState, DomainInfo, DomainKey, HvError, Hypervisor, Op, ShutdownMode};

#[derive(Debug)]
pub struct Virt {
    uri: String,
    conn: Mutex<Connect>,
}

fn hv(e: &virt::error::Error) -> HvError {
    HvError {
        code: match e.code() {
            Enum::Known(k) => format!("{k:?}"),
            Enum::Unknown(n) => format!("error {n}"),
        },
        message: e.message().to_owned(),
    }
}

impl Virt {
    /// Opens `uri` read-write. libvirt's own printing of every error to
    /// stderr is switched off: errors come back as values and are reported
    /// once, with the domain and operation.
    pub fn open(uri: &str) -> Result<Virt, HvError> {
        virt::error::clear_error_callback();
        let conn = Connect::open(Some(uri)).map_err(|e| hv(&e))?;
        Ok(Virt {
            uri: uri.to_owned(),
            conn: Mutex::new(conn),
        })
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&Connect) -> Result<T, virt::error::Error>,
    ) -> Result<T, HvError> {
        // A poisoned lock only means another call panicked; the connection
        // itself is still usable.
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&conn).map_err(|e| hv(&e))
    }

    fn domain(conn: &Connect, uuid: &str) -> Result<Domain, virt::error::Error> {
        conn.lookup_domain_by_uuid_string(uuid)
    }
}

fn state(d: &Domain) -> Result<DomState, virt::error::Error> {
    let (s, _) = d.state()?;
    Ok(match s {
        Enum::Known(DomainState::Running) => DomState::Running,
        Enum::Known(DomainState::Blocked) => DomState::Blocked,
        Enum::Known(DomainState::Paused) => DomState::Paused,
        Enum::Known(DomainState::Shutdown) => DomState::Shutdown,
        Enum::Known(DomainState::Shutoff) => DomState::Shutoff,
        Enum::Known(DomainState::Crashed) => DomState::Crashed,
        Enum::Known(DomainState::PMSuspended) => DomState::PmSuspended,
        Enum::Known(DomainState::NoState) | Enum::Unknown(_) => DomState::NoState,
    })
}

impl Hypervisor for Virt {
    fn uri(&self) -> &str {
        &self.uri
    }

    fn lookup(&self, key: &DomainKey) -> Result<DomainInfo, HvError> {
        self.with(|c| {
            let d = match key {
                DomainKey::Name(n) => c.lookup_domain_by_name(n)?,
                DomainKey::Uuid(u) => c.lookup_domain_by_uuid_string(u)?,
            };
            Ok(DomainInfo {
                name: d.name()?,
                uuid: d.uuid_string()?.to_ascii_lowercase(),
                state: state(&d)?,
                xml: d.xml_desc(0)?,
            })
        })
    }

    fn names(&self) -> Result<Vec<String>, HvError> {
        self.with(|c| {
            let mut names = Vec::new();
            for d in c.list_all_domains(0)? {
                names.push(d.name()?);
            }
            names.sort();
            Ok(names)
        })
    }

    fn act(&self, uuid: &str, op: &Op) -> Result<(), HvError> {
        self.with(|c| {
            let d = Virt::domain(c, uuid)?;
            match op {
                Op::Suspend => d.suspend(),
                Op::Resume => d.resume(),
                Op::Destroy => d.destroy(),
                Op::Create => d.create(),
                Op::Shutdown(ShutdownMode::Acpi) => {
                    d.shutdown_flags(sys::VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)
                }
                Op::Shutdown(ShutdownMode::Agent) => {
                    d.shutdown_flags(sys::VIR_DOMAIN_SHUTDOWN_GUEST_AGENT)
                }
                Op::UpdateDevice(xml) => d.update_device_flags(xml, sys::VIR_DOMAIN_AFFECT_LIVE),
            }
        })
    }

    fn addresses(&self, uuid: &str) -> Result<Vec<(String, Vec<String>)>, HvError> {
        self.with(|c| {
            let d = Virt::domain(c, uuid)?;
            let mut out = Vec::new();
            for source in [
                sys::VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE,
                sys::VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_ARP,
            ] {
                // Either source may be unsupported for this domain's network.
                let Ok(ifaces) = d.interface_addresses(source, 0) else {
                    continue;
                };
                for i in ifaces {
                    let Some(mac) = i.hwaddr else { continue };
                    out.push((
                        mac.to_ascii_lowercase(),
                        i.addrs.into_iter().map(|a| a.addr).collect(),
                    ));
                }
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    //! Against libvirt's in-process `test:///default` driver (no daemon):
    //! lookups, states and error paths. It cannot change link state; that
    //! runs on the QEMU rig (tests/libvirt_vm.rs).
    use super::*;

    const TEST_UUID: &str = "6695eb01-f6a4-8304-79aa-97f2502e193f";

    fn open() -> Virt {
        Virt::open("test:///default").expect("test:///default opens without a daemon")
    }

    #[test]
    fn finds_the_test_domain_by_name_and_uuid_and_reads_its_nic() {
        let v = open();
        let by_name = v
            .lookup(&DomainKey::Name("test".into()))
            .expect("test domain");
        assert_eq!(by_name.uuid, TEST_UUID);
        assert_eq!(by_name.state, DomState::Running);
        let by_uuid = v
            .lookup(&DomainKey::parse(&TEST_UUID.to_uppercase()))
            .expect("by uuid");
        assert_eq!(by_uuid.name, "test");
        let nics = super::super::domxml::interfaces(&by_name.xml).expect("xml");
        assert_eq!(nics[0].mac, "aa:bb:cc:dd:ee:ff");
        assert!(v.names().expect("names").contains(&"test".to_owned()));
        let missing = v
            .lookup(&DomainKey::Name("nosuch".into()))
            .expect_err("no such domain");
        assert!(missing.no_domain(), "{missing}");
    }

    #[test]
    fn states_follow_the_operations_and_errors_carry_libvirts_code() {
        // Its own connection: test:///default state is per process, shared
        // between connections, so this test uses a domain of its own.
        let v = open();
        let xml = "<domain type='test'><name>nf-states</name><memory>1024</memory>\
                   <os><type>hvm</type></os></domain>";
        let dom = v
            .with(|c| c.create_domain_xml(xml, 0))
            .expect("a transient test domain");
        let uuid = dom.uuid_string().expect("uuid");
        let st = |v: &Virt| v.lookup(&DomainKey::Uuid(uuid.clone())).map(|d| d.state);
        v.act(&uuid, &Op::Suspend).expect("suspend");
        assert_eq!(st(&v), Ok(DomState::Paused));
        let again = v
            .act(&uuid, &Op::Suspend)
            .expect_err("suspending a paused domain fails");
        assert_eq!(again.code, "InternalError", "{again}");
        v.act(&uuid, &Op::Resume).expect("resume");
        assert_eq!(st(&v), Ok(DomState::Running));
        let link = v
            .act(
                &uuid,
                &Op::UpdateDevice("<interface type='network'/>".into()),
            )
            .expect_err("the test driver cannot update devices");
        assert_eq!(link.code, "NoSupport", "{link}");
        let acpi = v
            .act(&uuid, &Op::Shutdown(ShutdownMode::Acpi))
            .expect_err("the test driver takes no shutdown flags");
        assert_eq!(acpi.code, "InvalidArg", "{acpi}");
        v.act(&uuid, &Op::Destroy).expect("destroy");
        // A transient domain is gone once destroyed.
        let gone = v.lookup(&DomainKey::Uuid(uuid.clone())).expect_err("gone");
        assert!(gone.no_domain(), "{gone}");
    }
}
