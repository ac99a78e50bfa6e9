//! The vagrant backend's VirtualBox provider, against the VBoxManage
//! stand-in in tests/fixtures/vagrant/bin (VirtualBox cannot run here; it
//! keeps a VM state machine and answers with VirtualBox's own texts):
//! `nodefall plan` with a synthetic `.vagrant`, then one simulated cluster
//! whose node follows its "VM" through the stand-in's hook (pause freezes
//! the node's agent, poweroff kills it, ...): preflight refusals, a guest
//! that ignores the power button, every VM fault and its revert seen on the
//! Node, and `nodefall recover` after SIGKILL without the project.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

#[path = "support/cli_run.rs"]
mod cli_run;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cli_run::{Dirs, Running, cluster};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use nix::sys::signal::Signal;
use nodefall::record::RunVerdict;

const UUID: &str = "0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57";
const VM: &str = "lab_k8s-2_1665804309774_65270";
/// The sim node that plays machine k8s-2.
const NODE: &str = "worker-2";

fn stand_ins() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vagrant/bin")
}

/// A Vagrant project whose k8s-2 is VirtualBox VM [`UUID`], and the
/// stand-in's state with that VM running (NIC 1 NAT, NIC 2 host-only).
struct Lab {
    project: tempfile::TempDir,
    vbox: tempfile::TempDir,
}

impl Lab {
    fn new() -> Lab {
        let project = tempfile::tempdir().unwrap();
        let id = project.path().join(".vagrant/machines/k8s-2/virtualbox");
        std::fs::create_dir_all(&id).unwrap();
        std::fs::write(id.join("id"), UUID).unwrap();
        std::fs::create_dir_all(project.path().join(".vagrant/machines/k8s-1/virtualbox")).unwrap();
        std::fs::write(project.path().join("Vagrantfile"), "# a lab\n").unwrap();
        let lab = Lab {
            project,
            vbox: tempfile::tempdir().unwrap(),
        };
        for (f, v) in [
            ("name", VM),
            ("state", "running"),
            ("nic1", "nat"),
            ("nic2", "hostonly"),
            // Whole seconds: 2 leaves the guest at least 1 s of shutdown,
            // so the first check always finds it stopping (with 1, a button
            // pressed just before a second's end was already off by then).
            ("acpi_delay", "2"),
        ] {
            lab.set(f, v);
        }
        lab
    }

    fn vm(&self) -> PathBuf {
        self.vbox.path().join("vms").join(UUID)
    }

    fn set(&self, file: &str, value: &str) {
        std::fs::create_dir_all(self.vm()).unwrap();
        std::fs::write(self.vm().join(file), value).unwrap();
    }

    fn get(&self, file: &str) -> String {
        std::fs::read_to_string(self.vm().join(file))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// What VBoxManage was asked, in order, since the last call.
    fn calls(&self) -> Vec<String> {
        let p = self.vbox.path().join("calls");
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        std::fs::write(&p, "").unwrap();
        text.lines().map(str::to_owned).collect()
    }

    /// nodefall with the stand-in first on PATH.
    fn env(&self, cmd: &mut Command, hook: Option<&Path>) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![stand_ins()];
        dirs.extend(std::env::split_paths(&path));
        // `vagrant ssh-config` knows k8s-1 only.
        let config = self.vbox.path().join("ssh-config");
        std::fs::write(&config, "Host k8s-1\n  HostName 127.0.0.1\n  Port 2222\n").unwrap();
        cmd.env("PATH", std::env::join_paths(dirs).unwrap())
            .env("FAKE_VBOX_HOME", self.vbox.path())
            .env("FAKE_VAGRANT_SSH_CONFIG", config)
            .current_dir(self.project.path());
        if let Some(h) = hook {
            cmd.env("FAKE_VBOX_HOOK", h);
        }
    }
}

#[test]
fn plan_prints_each_fault_with_the_machines_uuid() {
    let lab = Lab::new();
    let d = Dirs::new();
    let file = d.write(
        "s.yaml",
        "name: vb\nnamespace: vb\ntarget: {name: k8s-2}\nsteps:\n  - fault: pause-vm\n  - fault: resume-vm\n\
         \x20 - fault: drop-nic\n  - fault: restore-nic\n  - fault: poweroff\n  - fault: poweron\n  - fault: stop-kubelet\n",
    );
    let mut cmd = d.command(&["plan", file.to_str().unwrap(), "--backend", "vagrant"]);
    lab.env(&mut cmd, None);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        format!("pause-vm      VBoxManage controlvm {UUID} pause"),
        format!("resume-vm     VBoxManage controlvm {UUID} resume"),
        format!("drop-nic      VBoxManage controlvm {UUID} setlinkstate2 off"),
        format!("restore-nic   VBoxManage controlvm {UUID} setlinkstate2 on"),
        format!("poweroff      VBoxManage controlvm {UUID} poweroff"),
        format!("poweron       VBoxManage startvm {UUID} --type headless"),
        "stop-kubelet  ssh <as `vagrant ssh-config k8s-2` says> 'sudo -n systemctl stop kubelet'"
            .to_owned(),
    ] {
        assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
    }
    // Nothing ran.
    assert_eq!(lab.calls(), Vec::<String>::new());
    // Another adapter, a machine that is not created.
    let file = d.write(
        "k1.yaml",
        "name: vb\nnamespace: vb\ntarget: {name: k8s-1}\nsteps:\n  - fault: drop-nic\n",
    );
    let mut cmd = d.command(&[
        "plan",
        file.to_str().unwrap(),
        "--backend",
        "vagrant",
        "--vagrant-nic",
        "3",
        "--machine",
        "k8s-1=k8s-2",
    ]);
    lab.env(&mut cmd, None);
    let stdout = String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned();
    assert!(
        stdout.contains(&format!("controlvm {UUID} setlinkstate3 off")),
        "{stdout}"
    );
    let mut cmd = d.command(&["plan", file.to_str().unwrap(), "--backend", "vagrant"]);
    lab.env(&mut cmd, None);
    let stdout = String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned();
    assert!(stdout.contains("run `vagrant up k8s-1`"), "{stdout}");
}

/// The stand-in's hook: the sim node follows its VM.
fn hook(d: &Dirs, cluster: &str) -> PathBuf {
    let node = |op: &str| {
        format!(
            "exec '{}' sim node {op} --name {cluster} {NODE}",
            env!("CARGO_BIN_EXE_nodefall")
        )
    };
    let script = format!(
        "#!/bin/sh\n# VM {VM} is sim node {NODE}.\ncase \"$1\" in\n  pause|cable2-off) {};;\n  \
         resume|cable2-on) {};;\n  poweroff|savestate) {};;\n  acpi) {};;\n  start) {};;\n  \
         *) exit 0;;\nesac\n",
        node("freeze"),
        node("thaw"),
        node("kill"),
        node("stop"),
        node("start"),
    );
    let p = d.write("hook.sh", &script);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// `nodefall scenario` with the vagrant backend on the test's cluster.
fn start(
    d: &Dirs,
    lab: &Lab,
    hook: &Path,
    kubeconfig: &Path,
    file: &Path,
    extra: &[&str],
) -> Running {
    let mut args = vec![
        "scenario",
        file.to_str().unwrap(),
        "--out",
        d.out.path().to_str().unwrap(),
        "--backend",
        "vagrant",
        "--machine",
        "worker-2=k8s-2",
        "--profile",
        "fast",
    ];
    args.extend_from_slice(extra);
    let mut cmd = d.command(&args);
    lab.env(&mut cmd, Some(hook));
    cmd.env("KUBECONFIG", kubeconfig);
    Running::start(cmd)
}

fn scenario(d: &Dirs, name: &str, target: &str, steps: &str) -> PathBuf {
    d.write(
        &format!("{name}.yaml"),
        &format!(
            "name: {name}\nnamespace: {name}\ntarget: {{name: {target}}}\nsteps:\n{steps}cleanup: always\n"
        ),
    )
}

const UNKNOWN: &str =
    "  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 20s}\n";
const READY: &str = "  - expect: {node: target, ready: \"True\", within: 60s}\n";

fn wait_ready(rt: &tokio::runtime::Runtime, client: &kube::Client) {
    rt.block_on(async {
        let nodes = Api::<Node>::all(client.clone());
        tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(nodes, NODE, |n: Option<&Node>| {
                n.is_some_and(nodefall::sim::is_ready)
            }),
        )
        .await
        .unwrap()
        .unwrap();
    });
}

#[test]
fn a_virtualbox_project_drives_a_node_through_every_vm_fault() {
    let d = Dirs::new();
    let (rt, sim, client) = cluster(d.state.path(), "vbox");
    let lab = Lab::new();
    let hook = hook(&d, "vbox");
    let kc = sim.kubeconfig_path();
    let run = |file: &Path, extra: &[&str]| start(&d, &lab, &hook, &kc, file, extra);

    // Refused at preflight (exit 2), nothing asked of the VM but its state.
    let no_machine = scenario(&d, "nomachine", "worker-1", "  - fault: pause-vm\n");
    let (code, log) = run(&no_machine, &[]).finish(Duration::from_secs(60));
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("no machine `worker-1`"), "{log}");
    assert!(
        log.contains("k8s-1 (not created), k8s-2 (virtualbox)"),
        "{log}"
    );
    let no_nic = scenario(&d, "nonic", NODE, "  - fault: drop-nic\n");
    let (code, log) = run(&no_nic, &["--vagrant-nic", "3"]).finish(Duration::from_secs(60));
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains(&format!("VirtualBox VM `{VM}` (node `{NODE}`) has no network adapter 3 (it has: 1 nat, 2 hostonly)")), "{log}");
    lab.set("state", "poweroff");
    let (code, log) = run(&no_nic, &[]).finish(Duration::from_secs(60));
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("is poweroff, not running"), "{log}");
    lab.set("state", "running");
    // The kubelet faults need SSH: Vagrant's refusal stops the run first.
    let no_ssh = scenario(&d, "nossh", NODE, "  - fault: stop-kubelet\n");
    let (code, log) = run(&no_ssh, &[]).finish(Duration::from_secs(60));
    assert_eq!(code, Some(3), "{log}");
    assert!(
        log.contains("preflight of stop-kubelet on node `worker-2`: `vagrant ssh-config k8s-2`"),
        "{log}"
    );
    assert!(
        log.contains("The machine with the name 'k8s-2' was not found configured"),
        "{log}"
    );
    let calls = lab.calls();
    assert!(
        calls
            .iter()
            .all(|c| c.starts_with("showvminfo") || c.starts_with("list")),
        "{calls:?}"
    );

    // A guest that ignores the power button: said, exit 3, and the cleanup's
    // poweron finds the VM running and leaves it so.
    lab.set("acpi", "ignore");
    let ignored = scenario(&d, "ignored", NODE, "  - fault: shutdown\n");
    let (code, log) = run(&ignored, &["--shutdown-timeout", "3s"]).finish(Duration::from_secs(90));
    assert_eq!(code, Some(3), "{log}");
    assert!(
        log.contains(&format!(
            "VirtualBox VM `{VM}` (node `{NODE}`) was still running 3s after the acpi shutdown request"
        )),
        "{log}"
    );
    assert_eq!(lab.get("state"), "running");
    assert!(d.unfinished().is_empty(), "{log}");
    std::fs::remove_file(lab.vm().join("acpi")).unwrap();
    let calls = lab.calls();
    assert!(
        calls.contains(&format!("controlvm {UUID} acpipowerbutton")),
        "{calls:?}"
    );
    assert!(!calls.iter().any(|c| c.starts_with("startvm")), "{calls:?}");

    // Every VM fault, each seen on the Node, each revert too.
    let every = scenario(
        &d,
        "every",
        NODE,
        &[
            "  - fault: pause-vm\n",
            UNKNOWN,
            "  - fault: resume-vm\n",
            READY,
            "  - fault: drop-nic\n",
            UNKNOWN,
            "  - fault: restore-nic\n",
            READY,
            "  - fault: shutdown\n",
            UNKNOWN,
            "  - fault: poweron\n",
            READY,
            "  - fault: poweroff\n",
            UNKNOWN,
            "  - fault: poweron\n",
            READY,
        ]
        .concat(),
    );
    let (code, log) = run(&every, &[]).finish(Duration::from_secs(400));
    assert_eq!(code, Some(0), "{log}");
    let calls: Vec<String> = lab
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("controlvm") || c.starts_with("startvm"))
        .collect();
    let want: Vec<String> = [
        "controlvm {} pause",
        "controlvm {} resume",
        "controlvm {} setlinkstate2 off",
        "controlvm {} setlinkstate2 on",
        "controlvm {} acpipowerbutton",
        "startvm {} --type headless",
        "controlvm {} poweroff",
        "startvm {} --type headless",
    ]
    .iter()
    .map(|l| l.replace("{}", UUID))
    .collect();
    assert_eq!(calls, want);
    assert_eq!(
        (lab.get("state"), lab.get("cable2")),
        ("running".into(), "on".into())
    );
    let r = d
        .results()
        .into_iter()
        .find(|r| r.scenario == "every")
        .unwrap();
    assert_eq!(r.verdict, RunVerdict::Pass);
    assert_eq!(r.backend, "vagrant");
    let shutdown = r
        .steps
        .iter()
        .find(|s| s.description.starts_with("shutdown"))
        .unwrap();
    let lines: Vec<(&str, &str)> = shutdown
        .commands
        .iter()
        .map(|c| (c.role.as_str(), c.line.as_str()))
        .collect();
    assert_eq!(
        lines,
        [
            (
                "run",
                format!("VBoxManage controlvm {UUID} acpipowerbutton").as_str()
            ),
            (
                "check",
                format!("VBoxManage showvminfo {UUID} --machinereadable").as_str()
            ),
        ]
    );
    assert!(
        shutdown.commands[1].attempts >= 2,
        "{:?}",
        shutdown.commands
    );

    // Killed while the VM is paused: `nodefall recover` resumes it from the
    // journal alone (the project is gone by then).
    std::fs::remove_dir_all(d.out.path()).unwrap();
    std::fs::create_dir(d.out.path()).unwrap();
    let held = scenario(
        &d,
        "held",
        NODE,
        "  - fault: pause-vm\n  - expect: {node: target, ready: \"True\", within: 10m}\n",
    );
    let mut running = run(&held, &[]);
    running.wait_for("#2", Duration::from_secs(60));
    running.signal(Signal::SIGKILL);
    let _ = running.finish(Duration::from_secs(30));
    assert_eq!(lab.get("state"), "paused");
    std::fs::remove_dir_all(lab.project.path().join(".vagrant")).unwrap();
    lab.calls();
    let mut recover = d.command(&["recover"]);
    lab.env(&mut recover, Some(&hook));
    recover.env("KUBECONFIG", &kc);
    let out = recover.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(lab.get("state"), "running", "{text}");
    assert!(
        lab.calls().contains(&format!("controlvm {UUID} resume")),
        "{text}"
    );
    assert!(d.unfinished().is_empty(), "{text}");
    wait_ready(&rt, &client);
    drop(sim);
}
