//! The libvirt backend on a real QEMU virtual machine: every fault goes
//! through the product (the `virt` crate on `qemu:///system`, SSH for the
//! kubelet) and the Node of a simulated control plane shows what each one
//! did. Then the CLI on the same VM: a scenario run, the preflight refusing
//! a missing domain and a domain of another machine (systemUUID), and a run
//! killed with SIGKILL whose paused domain `nodefall recover` resumes.
//!
//! The guest (tests/support/vm_rig.rs) runs kwok as its node agent, not a
//! kubelet, and has no logind: it proves the backend's mechanics, not a
//! kubelet's graceful shutdown: tests/libvirt_kubelet_vm.rs runs seed 003's
//! shutdown scenario on a real kubelet in a VM. Needs libvirt on qemu:///system
//! (`scripts/vm-rig/libvirt-daemons.sh start`); skipped without it, except
//! under `CI=true`, where it fails. Every domain is undefined at the end.
#![cfg(feature = "libvirt")]

use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use nodefall::backend::NodeFaults as _;
use nodefall::backend::libvirt::LibvirtBackend;
use nodefall::backend::libvirt::virt::Virt;
use nodefall::exec::System;
use nodefall::profile::TimingProfile;
use nodefall::scenario::model::FaultKind;
use nodefall::sim::SimCluster;

#[path = "support/vm_rig.rs"]
mod vm_rig;

use vm_rig::{Rig, nodefall, ok, virsh};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn every_fault_through_the_libvirt_backend_then_the_cli() {
    if !vm_rig::should_run("every_fault_through_the_libvirt_backend_then_the_cli") {
        return;
    }
    let _serial = serial();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run());
    let left = vm_rig::leftover_domains();
    assert!(left.is_empty(), "domains left defined: {left:?}");
}

async fn run() {
    let root = tempfile::tempdir().expect("tempdir");
    let cluster = vm_rig::bare_control_plane(root.path(), "libvirt-vm").await;
    let client = cluster.client().await.expect("client");
    let mut log = |m: &str| eprintln!("vm rig: {m}");
    let rig = ok(Rig::boot(&cluster, "vm-1", &mut log).await);
    eprintln!("boot: Ready {:.1?} after start", rig.booted_in);

    let hv = Virt::open(vm_rig::URI).expect("qemu:///system");
    let mut backend = LibvirtBackend::new(hv, System, rig.backend_settings());
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(&rig.node).await.expect("the rig's Node");
    let all = [
        FaultKind::PauseVm,
        FaultKind::DropNic,
        FaultKind::StopKubelet,
        FaultKind::Poweroff,
        FaultKind::Shutdown,
    ];
    // The rig's domain is named like its node's prefix, not like the node.
    let missing = backend
        .resolve(&node, &all)
        .await
        .expect_err("no domain vm-1");
    assert!(missing.invalid_input(), "{missing}");
    assert!(
        missing.to_string().contains(&rig.domain),
        "the error lists the domains there are: {missing}"
    );
    backend
        .settings
        .domains
        .insert(rig.node.clone(), rig.domain.clone());
    let what = backend.resolve(&node, &all).await.expect("resolves");
    assert!(
        what.contains(&rig.uuid) && what.contains(&rig.node_mac),
        "resolved to the domain by UUID and its node NIC: {what}"
    );
    eprintln!("{what}");

    let mut figures = Vec::new();
    let p = TimingProfile::fast();
    let unknown_within =
        p.node_monitor_grace_period + p.node_monitor_period + Duration::from_secs(30);
    let back_within = Duration::from_secs(90);
    let mut step = async |fault: FaultKind, want: Option<&str>, within: Duration| {
        let start = Instant::now();
        backend
            .inject(&rig.node, fault)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", fault.name(), rig.console_tail(30)));
        let took = start.elapsed();
        let seen = match want {
            Some(w) => Some(ok(rig.wait_ready(&client, w, within).await)),
            None => None,
        };
        let line = format!(
            "{:<13} call {:>6.1?}{}",
            fault.name(),
            took,
            seen.map(|s| format!(", then Ready={} {:.1?} later", want.unwrap_or(""), s))
                .unwrap_or_default()
        );
        eprintln!("{line}");
        figures.push(line);
    };

    step(FaultKind::PauseVm, Some("Unknown"), unknown_within).await;
    assert_eq!(ok(rig.domstate()), "paused");
    step(FaultKind::ResumeVm, Some("True"), back_within).await;
    // A second resume is a no-op (reverts are idempotent).
    step(FaultKind::ResumeVm, None, back_within).await;

    step(FaultKind::DropNic, Some("Unknown"), unknown_within).await;
    // The agent kept running: only the node's network was cut (SSH goes
    // over the management NIC).
    ok(rig.ssh_ok("/etc/rig/agent status"));
    assert!(ok(virsh(&["domif-getlink", &rig.domain, &rig.node_mac])).contains("down"));
    step(FaultKind::RestoreNic, Some("True"), back_within).await;

    step(FaultKind::StopKubelet, Some("Unknown"), unknown_within).await;
    step(FaultKind::StartKubelet, Some("True"), back_within).await;

    step(FaultKind::Poweroff, Some("Unknown"), unknown_within).await;
    assert_eq!(ok(rig.domstate()), "shut off");
    step(FaultKind::Poweron, Some("True"), Duration::from_secs(150)).await;

    // ACPI: the backend returns once the guest has powered itself off.
    step(FaultKind::Shutdown, Some("Unknown"), unknown_within).await;
    assert_eq!(ok(rig.domstate()), "shut off");
    step(FaultKind::Poweron, Some("True"), Duration::from_secs(150)).await;
    eprintln!("figures:\n  {}", figures.join("\n  "));

    cli(&cluster, &rig).await;
}

const SCENARIO: &str = "name: vm-pause
namespace: vm-pause
backend: libvirt
target: {name: vm-1}
steps:
  - id: pause
    fault: pause-vm
  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 30s}
  - action: {wait: {duration: 1h}}
  - fault: resume-vm
  - expect: {node: target, ready: \"True\", within: 90s}
";

/// The CLI on the VM: preflight refusals (exit 2, nothing touched), then a
/// run killed with SIGKILL while the domain is paused, and `recover`.
async fn cli(cluster: &SimCluster, rig: &Rig) {
    let dir = tempfile::tempdir().expect("tempdir");
    let journals = dir.path().join("journals");
    let scenario = dir.path().join("vm-pause.yaml");
    std::fs::write(&scenario, SCENARIO).expect("scenario");
    let kubeconfig = cluster.kubeconfig_path();
    let out = dir.path().join("reports");
    let base = |domain: &str| -> Vec<String> {
        vec![
            "scenario".into(),
            scenario.display().to_string(),
            "--profile".into(),
            "fast".into(),
            "--out".into(),
            out.display().to_string(),
            "--domain".into(),
            format!("{}={domain}", rig.node),
        ]
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        nodefall(&journals, &kubeconfig, &args)
            .output()
            .expect("nodefall runs")
    };

    // A domain that is not there: exit 2 before any fault.
    let missing = run(base("nodefall-rig-no-such-domain"));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{err}");
    assert!(err.contains("has no machine"), "{err}");

    // A domain that is there but is another machine: its UUID is not the
    // node's systemUUID. Exit 2, and the other domain is left as it was.
    let other = format!("{}{}-other", vm_rig::DOMAIN_PREFIX, std::process::id());
    let _guard = ok(define_idle_domain(&other));
    let wrong = run(base(&other));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(2), "{err}");
    assert!(err.contains("reports systemUUID"), "{err}");
    assert_eq!(ok(virsh(&["domstate", &other])).trim(), "shut off");
    assert_eq!(ok(rig.domstate()), "running");

    // Killed while the domain is paused: `recover` resumes it from the
    // journal (the domain's UUID is in the fault's memo).
    let args = base(&rig.domain);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = nodefall(&journals, &kubeconfig, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nodefall starts");
    let client = cluster.client().await.expect("client");
    ok(rig
        .wait_ready(&client, "True", Duration::from_secs(90))
        .await);
    let paused = ok(rig.wait_domstate("paused", Duration::from_secs(120)));
    eprintln!("cli: domain paused {paused:.1?} after the run began waiting");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert_eq!(ok(rig.domstate()), "paused", "SIGKILL leaves the fault");
    let recover = nodefall(&journals, &kubeconfig, &["recover"])
        .output()
        .expect("recover runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&recover.stdout),
        String::from_utf8_lossy(&recover.stderr)
    );
    assert_eq!(recover.status.code(), Some(0), "{text}");
    assert!(text.contains("resume-vm"), "{text}");
    assert_eq!(ok(rig.domstate()), "running", "{text}");
    ok(rig
        .wait_ready(&client, "True", Duration::from_secs(90))
        .await);
}

/// A defined, never started domain with a UUID of its own; undefined on drop.
struct Defined(String);

impl Drop for Defined {
    fn drop(&mut self) {
        let _ = virsh(&["undefine", &self.0]);
    }
}

fn define_idle_domain(name: &str) -> Result<Defined, String> {
    let xml = format!(
        "<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory>\
         <os><type arch='x86_64'>hvm</type></os></domain>"
    );
    let file = std::env::temp_dir().join(format!("{name}.xml"));
    std::fs::write(&file, xml).map_err(|e| e.to_string())?;
    let r = virsh(&["define", &file.display().to_string()]);
    let _ = std::fs::remove_file(&file);
    r.map(|_| Defined(name.to_owned()))
}
