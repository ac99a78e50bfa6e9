//! The vagrant backend's libvirt provider on a real QEMU virtual machine:
//! a Vagrant project whose `.vagrant/machines/<node>/libvirt/id` holds the
//! rig domain's UUID (as vagrant-libvirt writes it), SSH from `vagrant
//! ssh-config` (a stand-in printing what vagrant-libvirt would for this
//! VM: the forwarded management port, root, the rig's key), every fault
//! and its revert through `nodefall scenario --backend vagrant`, each seen
//! on the Node of a simulated control plane.
//!
//! Needs libvirt on qemu:///system (`scripts/vm-rig/libvirt-daemons.sh
//! start`) and the `libvirt` feature; skipped without them, except under
//! `CI=true`, where it fails. The domain is undefined at the end.

use std::path::Path;
use std::process::{Command, Stdio};

use nodefall::record::RunVerdict;

#[path = "support/vm_rig.rs"]
mod vm_rig;

use vm_rig::{Rig, ok};

#[test]
fn every_fault_through_a_vagrant_libvirt_project_on_a_real_vm() {
    const TEST: &str = "every_fault_through_a_vagrant_libvirt_project_on_a_real_vm";
    if !cfg!(feature = "libvirt") {
        // the vagrant backend reaches libvirt domains through the feature
        vm_rig::skip::skip(TEST, "built without the `libvirt` feature");
        return;
    }
    if !vm_rig::should_run(TEST) {
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run());
    let left = vm_rig::leftover_domains();
    assert!(left.is_empty(), "domains left defined: {left:?}");
}

/// Every fault and its revert, each confirmed on the Node.
const SCENARIO: &str = "name: vagrant-libvirt
namespace: vagrant-libvirt
target: {name: vm-1}
steps:
  - fault: pause-vm
  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 30s}
  - fault: resume-vm
  - expect: {node: target, ready: \"True\", within: 90s}
  - fault: drop-nic
  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 30s}
  - fault: restore-nic
  - expect: {node: target, ready: \"True\", within: 90s}
  - fault: stop-kubelet
  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 30s}
  - fault: start-kubelet
  - expect: {node: target, ready: \"True\", within: 90s}
  - fault: poweroff
  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 30s}
  - fault: poweron
  - expect: {node: target, ready: \"True\", within: 150s}
  - fault: shutdown
  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 30s}
  - fault: poweron
  - expect: {node: target, ready: \"True\", within: 150s}
cleanup: always
";

/// What `vagrant ssh-config` prints for this VM, in Vagrant's format.
fn ssh_config(rig: &Rig) -> String {
    format!(
        "Host {}\n  HostName 127.0.0.1\n  User root\n  Port {}\n  UserKnownHostsFile /dev/null\n  \
         StrictHostKeyChecking no\n  PasswordAuthentication no\n  IdentityFile {}\n  \
         IdentitiesOnly yes\n  LogLevel FATAL\n\n",
        rig.node,
        rig.ssh_port,
        rig.ssh_key().display()
    )
}

fn stand_ins() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vagrant/bin")
}

async fn run() {
    let root = tempfile::tempdir().expect("tempdir");
    let cluster = vm_rig::bare_control_plane(root.path(), "vagrant-libvirt").await;
    let mut log = |m: &str| eprintln!("vm rig: {m}");
    let rig = ok(Rig::boot(&cluster, "vm-1", &mut log).await);
    eprintln!("boot: Ready {:.1?} after start", rig.booted_in);

    // The Vagrant project, as vagrant-libvirt leaves it after `vagrant up`.
    let project = tempfile::tempdir().expect("tempdir");
    let id = project
        .path()
        .join(".vagrant/machines")
        .join(&rig.node)
        .join("libvirt");
    std::fs::create_dir_all(&id).expect("machine dir");
    std::fs::write(id.join("id"), &rig.uuid).expect("id");
    let files = tempfile::tempdir().expect("tempdir");
    let config = files.path().join("ssh-config");
    std::fs::write(&config, ssh_config(&rig)).expect("ssh-config");
    let calls = files.path().join("vagrant-calls");
    let scenario = files.path().join("vagrant-libvirt.yaml");
    std::fs::write(&scenario, SCENARIO).expect("scenario");
    let out = files.path().join("reports");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(stand_ins()).chain(std::env::split_paths(&path)))
            .expect("PATH");
    let run = Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .args([
            "scenario",
            &scenario.display().to_string(),
            "--backend",
            "vagrant",
            "--vagrant-dir",
            &project.path().display().to_string(),
            // The rig's only libvirt interface is the node network (its
            // management NIC is QEMU's own).
            "--vagrant-nic",
            "1",
            // The rig guest logs in as root and has no sudo.
            "--kubelet-stop-command",
            "systemctl stop kubelet",
            "--kubelet-start-command",
            "systemctl start kubelet",
            "--libvirt-uri",
            vm_rig::URI,
            "--profile",
            "fast",
            "--out",
            &out.display().to_string(),
        ])
        .env("PATH", path)
        .env("FAKE_VAGRANT_SSH_CONFIG", &config)
        .env("FAKE_VAGRANT_CALLS", &calls)
        .env("KUBECONFIG", cluster.kubeconfig_path())
        .env("NODEFALL_JOURNAL_DIR", files.path().join("journals"))
        .stdin(Stdio::null())
        .output()
        .expect("nodefall runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}{stderr}\n{}",
        rig.console_tail(30)
    );
    // The domain was found by the UUID in .vagrant, SSH came from one
    // `vagrant ssh-config`, run in the project.
    assert!(
        stderr.contains(&format!("machine {} (libvirt", rig.node)),
        "{stderr}"
    );
    assert!(stderr.contains(&rig.uuid), "{stderr}");
    let asked = std::fs::read_to_string(&calls).expect("vagrant was asked");
    assert_eq!(
        asked.trim(),
        format!("{}: ssh-config {}", project.path().display(), rig.node)
    );
    let report = std::fs::read_dir(&out)
        .expect("reports")
        .next()
        .expect("one report")
        .expect("entry")
        .path();
    let r = nodefall::report::read_result(&nodefall::disk::Disk, &report.join("result.json"))
        .expect("result.json");
    assert_eq!(r.verdict, RunVerdict::Pass);
    assert_eq!(r.backend, "vagrant");
    // The figures: each fault's step to the Node's change, from the report.
    vm_rig::print_figures(&r);
    assert_eq!(ok(rig.domstate()), "running");
}
