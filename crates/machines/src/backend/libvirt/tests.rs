//! The backend's logic against a scripted hypervisor and a recording
//! command runner (the real libvirt calls are tested in `virt` against
//! `test:///default`, and on real QEMU domains in tests/libvirt_vm.rs).

// The scripted hypervisor answers the calls a test makes, not every one.
#![allow(clippy::wildcard_enum_match_arm)]

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus, NodeSystemInfo};

use super::hypervisor::{DomState, DomainInfo, DomainKey, HvError, Hypervisor, Op};
use super::*;
use crate::exec;

const UUID: &str = "11111111-2222-3333-4444-555555555555";
const MAC: &str = "52:54:00:12:34:56";

/// One domain whose state follows the operations; a shutdown takes
/// `off_after` more lookups to finish (never, when None).
#[derive(Debug)]
struct Fake {
    state: Mutex<DomState>,
    link_up: Mutex<bool>,
    ops: Mutex<Vec<Op>>,
    off_after: Mutex<Option<u32>>,
}

impl Fake {
    fn new() -> Fake {
        Fake {
            state: Mutex::new(DomState::Running),
            link_up: Mutex::new(true),
            ops: Mutex::default(),
            off_after: Mutex::new(Some(2)),
        }
    }
    fn xml(&self) -> String {
        let link = if *self.link_up.lock().expect("lock") {
            ""
        } else {
            "<link state='down'/>"
        };
        format!(
            "<domain><devices><interface type='user'><mac address='{MAC}'/>{link}</interface></devices></domain>"
        )
    }
}

impl Hypervisor for Arc<Fake> {
    fn uri(&self) -> &str {
        "fake:///"
    }
    fn lookup(&self, key: &DomainKey) -> Result<DomainInfo, HvError> {
        let known = matches!(key, DomainKey::Name(n) if n == "node-a")
            || matches!(key, DomainKey::Uuid(u) if u == UUID);
        if !known {
            return Err(HvError {
                code: "NoDomain".into(),
                message: "Domain not found".into(),
            });
        }
        let mut st = self.state.lock().expect("lock");
        if *st == DomState::Shutdown {
            let mut left = self.off_after.lock().expect("lock");
            match left.as_mut() {
                Some(0) => *st = DomState::Shutoff,
                Some(n) => *n -= 1,
                None => {}
            }
        }
        Ok(DomainInfo {
            name: "node-a".into(),
            uuid: UUID.into(),
            state: *st,
            xml: self.xml(),
        })
    }
    fn names(&self) -> Result<Vec<String>, HvError> {
        Ok(vec!["node-a".into(), "other".into()])
    }
    fn act(&self, uuid: &str, op: &Op) -> Result<(), HvError> {
        assert_eq!(uuid, UUID, "every call addresses the domain by UUID");
        self.ops.lock().expect("lock").push(op.clone());
        let mut st = self.state.lock().expect("lock");
        let invalid = |m: &str| {
            Err(HvError {
                code: "OperationInvalid".into(),
                message: m.into(),
            })
        };
        match op {
            Op::Suspend if *st == DomState::Running => *st = DomState::Paused,
            Op::Resume if *st == DomState::Paused => *st = DomState::Running,
            Op::Destroy if st.active() => *st = DomState::Shutoff,
            Op::Create if !st.active() => *st = DomState::Running,
            Op::Shutdown(_) if *st == DomState::Running => *st = DomState::Shutdown,
            Op::UpdateDevice(xml) => *self.link_up.lock().expect("lock") = !xml.contains("'down'"),
            _ => return invalid("domain is not in the right state"),
        }
        Ok(())
    }
    fn addresses(&self, _: &str) -> Result<Vec<(String, Vec<String>)>, HvError> {
        Ok(Vec::new())
    }
}

#[derive(Debug, Clone, Default)]
struct Ran(Arc<Mutex<Vec<String>>>);

impl Exec for Ran {
    fn call(&self, job: &exec::Job) -> Result<exec::Captured, exec::Error> {
        self.0.lock().expect("lock").push(job.cmd.to_string());
        Ok(exec::fake::exited(0, "", ""))
    }
}

fn node(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.status = Some(NodeStatus {
        node_info: Some(NodeSystemInfo {
            system_uuid: UUID.to_uppercase(),
            ..NodeSystemInfo::default()
        }),
        addresses: Some(vec![NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.2.15".into(),
        }]),
        ..NodeStatus::default()
    });
    n
}

fn backend() -> (LibvirtBackend<Arc<Fake>, Ran>, Arc<Fake>, Ran) {
    let fake = Arc::new(Fake::new());
    let ran = Ran::default();
    let mut s = Settings::new();
    s.shutdown_timeout_secs = 1;
    (
        LibvirtBackend::new(Arc::clone(&fake), ran.clone(), s),
        fake,
        ran,
    )
}

#[tokio::test]
async fn every_fault_is_the_libvirt_call_on_the_resolved_domain() {
    let (mut b, fake, ran) = backend();
    let all = [
        FaultKind::PauseVm,
        FaultKind::DropNic,
        FaultKind::StopKubelet,
    ];
    let what = b.resolve(&node("node-a"), &all).await.expect("resolves");
    assert!(
        what.contains(UUID) && what.contains(MAC) && what.contains("SSH 10.0.2.15"),
        "{what}"
    );
    for f in [
        FaultKind::PauseVm,
        FaultKind::ResumeVm,
        FaultKind::ResumeVm, // a second resume is a no-op: already running
        FaultKind::DropNic,
        FaultKind::RestoreNic,
        FaultKind::Poweroff,
        FaultKind::Poweron,
        FaultKind::Poweron, // already running
        FaultKind::Shutdown,
        FaultKind::Poweron,
        FaultKind::StopKubelet,
    ] {
        b.inject("node-a", f)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", f.name()));
    }
    let ops: Vec<String> = fake
        .ops
        .lock()
        .expect("lock")
        .iter()
        .map(|o| o.call().to_owned())
        .collect();
    assert_eq!(
        ops,
        [
            "virDomainSuspend",
            "virDomainResume",
            "virDomainUpdateDeviceFlags",
            "virDomainUpdateDeviceFlags",
            "virDomainDestroy",
            "virDomainCreate",
            "virDomainShutdownFlags",
            "virDomainCreate",
        ]
    );
    let link: Vec<bool> = fake
        .ops
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|o| match o {
            Op::UpdateDevice(x) => Some(x.contains("<link state='up'/>")),
            _ => None,
        })
        .collect();
    assert_eq!(link, [false, true]);
    assert_eq!(
        ran.0.lock().expect("lock").as_slice(),
        ["ssh -o BatchMode=yes -o ConnectTimeout=10 -- 10.0.2.15 'systemctl stop kubelet'"]
    );
}

#[tokio::test]
async fn a_guest_that_ignores_the_power_button_is_reported_after_the_timeout() {
    let (mut b, fake, _) = backend();
    *fake.off_after.lock().expect("lock") = None;
    b.resolve(&node("node-a"), &[FaultKind::Shutdown])
        .await
        .expect("resolves");
    let e = b
        .inject("node-a", FaultKind::Shutdown)
        .await
        .expect_err("never powers off");
    assert!(matches!(e, Error::ShutdownTimeout { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("in shutdown 1s after the acpi shutdown request"),
        "{e}"
    );
}

#[tokio::test]
async fn a_missing_domain_is_bad_input_naming_what_exists() {
    let (mut b, _, _) = backend();
    let e = b
        .resolve(&node("node-b"), &[FaultKind::PauseVm])
        .await
        .expect_err("no domain node-b");
    assert!(e.invalid_input());
    let text = e.to_string();
    assert!(
        text.contains("domain node-b on fake:///") && text.contains("found: node-a, other"),
        "{text}"
    );
    // Mapped by --domain: found by UUID.
    b.settings.domains.insert("node-b".into(), UUID.into());
    let mut n = node("node-b");
    n.status = None;
    assert!(b.resolve(&n, &[FaultKind::PauseVm]).await.is_ok());
}

#[tokio::test]
async fn the_memo_carries_the_machine_to_another_process() {
    let (mut b, _, _) = backend();
    b.resolve(&node("node-a"), &[FaultKind::PauseVm])
        .await
        .expect("resolves");
    b.inject("node-a", FaultKind::PauseVm).await.expect("pause");
    let memo = b.memo("node-a", FaultKind::PauseVm).expect("a memo");
    // `nodefall recover`: a fresh backend that never resolved anything.
    let (mut other, fake, _) = backend();
    *fake.state.lock().expect("lock") = DomState::Paused;
    assert!(
        other.inject("node-a", FaultKind::ResumeVm).await.is_err(),
        "unknown before the memo"
    );
    other.remember("node-a", &memo);
    other
        .inject("node-a", FaultKind::ResumeVm)
        .await
        .expect("resume from the memo");
    assert_eq!(*fake.state.lock().expect("lock"), DomState::Running);
}

#[test]
fn plan_lines_name_the_call_and_its_virsh_equivalent() {
    let (b, _, _) = backend();
    let ops = b.operations("node-a", FaultKind::DropNic).join("\n");
    assert_eq!(
        ops,
        "virDomainUpdateDeviceFlags(<link state='down'/>, LIVE) = virsh -c fake:/// domif-setlink <domain of node-a> <MAC> down"
    );
    let shutdown = b.operations("node-a", FaultKind::Shutdown).join("\n");
    assert!(
        shutdown.contains("virsh -c fake:/// shutdown --mode acpi <domain of node-a>"),
        "{shutdown}"
    );
}

#[tokio::test]
async fn a_revert_brings_the_domain_back_from_whatever_state_it_is_in() {
    let (mut b, fake, ran) = backend();
    b.resolve(&node("node-a"), &[FaultKind::PauseVm])
        .await
        .expect("resolves");
    let set = |s| *fake.state.lock().expect("lock") = s;
    // A resume cut short by a poweroff in between: started, not resumed.
    set(DomState::Shutoff);
    let found = b
        .restore("node-a", FaultKind::ResumeVm)
        .await
        .expect("restore");
    assert_eq!(found, "found domain shut off; started it");
    // A shutdown cut short half-way: forced off, then started.
    set(DomState::Shutdown);
    let found = b
        .restore("node-a", FaultKind::Poweron)
        .await
        .expect("restore");
    assert_eq!(
        found,
        "found domain in shutdown; forced it off and started it"
    );
    // Running already (the revert had finished): nothing.
    let found = b
        .restore("node-a", FaultKind::ResumeVm)
        .await
        .expect("restore");
    assert_eq!(found, "found domain running; nothing to do");
    // A node whose kubelet was stopped, then paused: resumed, and its
    // kubelet started (a resumed guest does not boot).
    set(DomState::Paused);
    let found = b
        .restore("node-a", FaultKind::StartKubelet)
        .await
        .expect("restore");
    assert_eq!(
        found,
        "found domain paused; resumed it, started the kubelet"
    );
    assert_eq!(*fake.state.lock().expect("lock"), DomState::Running);
    let ops: Vec<&str> = fake
        .ops
        .lock()
        .expect("lock")
        .iter()
        .map(Op::call)
        .collect();
    assert_eq!(
        ops,
        [
            "virDomainCreate",
            "virDomainDestroy",
            "virDomainCreate",
            "virDomainResume"
        ]
    );
    assert_eq!(
        ran.0.lock().expect("lock").as_slice(),
        ["ssh -o BatchMode=yes -o ConnectTimeout=10 -- 10.0.2.15 'systemctl start kubelet'"]
    );
}
