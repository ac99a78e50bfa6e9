//! The vagrant backend's memo and mapping; VBoxManage and libvirt
//! themselves are exercised in tests/vagrant_*.rs.

use super::*;

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
