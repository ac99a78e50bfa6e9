//! The vagrant backend's memo and mapping; VBoxManage and libvirt
//! themselves are exercised in tests/vagrant_*.rs.

use super::*;
use crate::exec::fake::Fake;

#[test]
fn the_memo_carries_the_machine_to_recover() {
    let p = Placed::Virtualbox {
        machine: "k8s-2".into(),
        uuid: "0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57".into(),
        vm: "lab_k8s-2_1".into(),
        nic: 2,
        ssh: Some(SshTarget::at("127.0.0.1", Some(2200))),
    };
    let json = serde_json::to_string(&p).expect("json");
    assert!(
        json.starts_with(r#"{"provider":"virtualbox","machine":"k8s-2""#),
        "{json}"
    );
    let nowhere = Project {
        root: "/nowhere".into(),
        data: "/nowhere/.vagrant".into(),
    };
    let mut b = VagrantBackend::new(nowhere, Settings::new());
    b.remember("k8s-2", &json);
    assert_eq!(b.placed("k8s-2"), Some(&p));
    assert_eq!(
        b.operations("k8s-2", FaultKind::DropNic),
        ["VBoxManage controlvm 0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57 setlinkstate2 off"]
    );
    assert!(
        b.operations("k8s-2", FaultKind::StartKubelet)[0]
            .ends_with("-p 2200 -- 127.0.0.1 'sudo -n systemctl start kubelet'")
    );
    // Not a memo of this backend: ignored.
    b.remember("k8s-3", r#"{"domain":"x","uuid":"y"}"#);
    assert_eq!(b.placed("k8s-3"), None);
}

#[test]
fn nodes_map_to_machines_named_like_them_unless_mapped() {
    let mut s = Settings::new();
    assert_eq!(s.machine("k8s-2"), "k8s-2");
    s.machines.insert("node-b".into(), "k8s-2".into());
    assert_eq!(s.machine("node-b"), "k8s-2");
    let lv = s.libvirt();
    assert_eq!(lv.nic_index, Some(2));
    assert_eq!(lv.ssh.stop_kubelet, STOP_KUBELET);
}

fn node_with_uuid(uuid: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some("k8s-2".into());
    n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
        node_info: Some(k8s_openapi::api::core::v1::NodeSystemInfo {
            system_uuid: uuid.into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    n
}

#[test]
fn a_virtualbox_vm_that_is_not_the_node_is_refused() {
    let info = vbox::VmInfo::parse(
        "name=\"lab_k8s-2_1\"\nUUID=\"0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57\"\nVMState=\"running\"\n",
    );
    // the same UUID, in SMBIOS's byte order as a guest may report it
    let same = identity(
        &node_with_uuid("4E3F8A0B-1D5C-7A4E-9F0B-2A6C8D1E3F57"),
        &info,
    );
    assert_eq!(same.unwrap(), ", the node's systemUUID is the VM's");
    let e = identity(
        &node_with_uuid("11111111-2222-3333-4444-555555555555"),
        &info,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "VirtualBox VM `lab_k8s-2_1` is not node `k8s-2`: its UUID is \
         0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57 but the node reports systemUUID \
         11111111-2222-3333-4444-555555555555; map the node to its own machine with --machine NODE=MACHINE"
    );
    assert!(e.invalid_input());
    // a hardware UUID set apart (`modifyvm --hardwareuuid`) is what the guest sees
    let apart = vbox::VmInfo::parse(
        "name=\"lab_k8s-2_1\"\nUUID=\"0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57\"\n\
         hardwareuuid=\"11111111-2222-3333-4444-555555555555\"\n",
    );
    assert!(
        identity(
            &node_with_uuid("11111111-2222-3333-4444-555555555555"),
            &apart
        )
        .is_ok()
    );
    // a node that says nothing is not checked
    assert_eq!(identity(&Node::default(), &info).unwrap(), "");
}

const UUID: &str = "0b8a3f4e-5c1d-4e7a-9f0b-2a6c8d1e3f57";

fn showvminfo(state: &str) -> String {
    format!(
        "name=\"lab_k8s-2_1\"\nUUID=\"{UUID}\"\nVMState=\"{state}\"\nnic1=\"nat\"\nnic2=\"hostonly\"\n"
    )
}

/// A project with machine k8s-2 created by VirtualBox, and the backend on
/// it with a recording fake for `vagrant`, VBoxManage and ssh.
fn faked() -> (tempfile::TempDir, VagrantBackend<Fake>, Fake) {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path().join(".vagrant/machines/k8s-2/virtualbox");
    std::fs::create_dir_all(&d).expect("dir");
    std::fs::write(d.join("id"), UUID).expect("id");
    let project = Project {
        root: t.path().to_owned(),
        data: t.path().join(".vagrant"),
    };
    let fake = Fake::default();
    let b = VagrantBackend::with_exec(project, Settings::new(), fake.clone());
    (t, b, fake)
}

#[tokio::test(flavor = "multi_thread")]
async fn vagrant_vboxmanage_and_ssh_run_through_the_exec_seam() {
    let (t, mut b, fake) = faked();
    fake.answer("VBoxManage showvminfo", 0, &showvminfo("running"), "")
        .answer(
            "vagrant ssh-config",
            0,
            "Host k8s-2\n  HostName 127.0.0.1\n  User vagrant\n  Port 2200\n",
            "",
        );
    let said = b
        .resolve(
            &node_with_uuid(UUID),
            &[FaultKind::PauseVm, FaultKind::StopKubelet],
        )
        .await
        .unwrap();
    assert!(said.contains("SSH vagrant@127.0.0.1:2200"), "{said}");
    b.inject("k8s-2", FaultKind::PauseVm).await.unwrap();
    b.inject("k8s-2", FaultKind::StopKubelet).await.unwrap();
    assert_eq!(
        fake.lines(),
        [
            format!("VBoxManage showvminfo {UUID} --machinereadable"),
            "vagrant ssh-config k8s-2".to_owned(),
            format!("VBoxManage controlvm {UUID} pause"),
            "ssh -o BatchMode=yes -o ConnectTimeout=10 -p 2200 -l vagrant -- 127.0.0.1 'sudo -n \
             systemctl stop kubelet'"
                .to_owned(),
        ]
    );
    // vagrant runs in the project; every command is a backend's own.
    let jobs = fake.jobs();
    assert_eq!(jobs[1].dir.as_deref(), Some(t.path()));
    assert!(jobs.iter().all(|j| j.kill_leftovers), "{jobs:?}");
    let roles: Vec<String> = b.take_commands().into_iter().map(|r| r.role).collect();
    assert_eq!(roles, ["run", "run"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revert_looks_at_the_vm_first_and_a_failure_says_vboxmanages_words() {
    let (_t, mut b, fake) = faked();
    b.remember(
        "k8s-2",
        &serde_json::to_string(&Placed::Virtualbox {
            machine: "k8s-2".into(),
            uuid: UUID.into(),
            vm: "lab_k8s-2_1".into(),
            nic: 2,
            ssh: None,
        })
        .expect("json"),
    );
    fake.answer("VBoxManage showvminfo", 0, &showvminfo("paused"), "")
        .answer(
            "VBoxManage controlvm",
            1,
            "",
            "VBoxManage: error: Machine in invalid state\n",
        );
    let e = b.inject("k8s-2", FaultKind::ResumeVm).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "revert of resume-vm on node `k8s-2`: `VBoxManage controlvm {UUID} resume` failed \
             (exit status: 1); stderr: VBoxManage: error: Machine in invalid state"
        )
    );
    let roles: Vec<String> = b.take_commands().into_iter().map(|r| r.role).collect();
    assert_eq!(roles, ["check", "revert"]);
    // No SSH path kept: the kubelet cannot be reached.
    let e = b
        .inject("k8s-2", FaultKind::StartKubelet)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NoSsh { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_vboxmanage_is_named() {
    let (_t, mut b, fake) = faked();
    fake.answer_with("VBoxManage", |job| {
        Err(crate::exec::Error::Spawn {
            cmd: job.cmd.clone(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
    });
    let e = b
        .resolve(&node_with_uuid(UUID), &[FaultKind::PauseVm])
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("`VBoxManage` (VirtualBox's CLI) could not be started"),
        "{e}"
    );
}
