//! The command backend with real processes (`sh`, `true`, `false`) writing
//! into a scratch directory: what ran, in which order, with which values.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, NodeSystemInfo};

use super::*;
use crate::exec::fake::Fake;
use crate::scenario::command::load_str;

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("nodefall-cmd-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.0.join("log")).unwrap_or_default()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn node(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.metadata.labels = Some(BTreeMap::from([("lab/vmid".to_owned(), "101".to_owned())]));
    n.spec = Some(NodeSpec {
        provider_id: Some("aws:///eu-west-1a/i-0abc".into()),
        ..NodeSpec::default()
    });
    n.status = Some(NodeStatus {
        node_info: Some(NodeSystemInfo {
            system_uuid: "5A3F0C1E-0000-4000-8000-000000000001".into(),
            ..NodeSystemInfo::default()
        }),
        addresses: Some(vec![NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.5".into(),
        }]),
        ..NodeStatus::default()
    });
    n
}

fn backend(yaml: &str, dir: &Scratch) -> CommandBackend {
    let yaml = yaml.replace("LOG", &dir.0.join("log").display().to_string());
    let l = load_str("b.yaml", &yaml).unwrap_or_else(|e| panic!("{e}"));
    CommandBackend::new(l.spec, "b.yaml".into())
}

const PAUSE: &str = "machine: \"{label:lab/vmid}\"\nshell: true\nfaults:\n  pause-vm:\n    run: echo suspend {machine} {providerID|last} >> LOG\n    revert: echo resume {machine} >> LOG\n";

#[tokio::test(flavor = "multi_thread")]
async fn faults_run_their_templates_and_a_recover_runs_the_journaled_revert() {
    let dir = Scratch::new("journal");
    let mut b = backend(PAUSE, &dir);
    let said = b
        .resolve(&node("w1"), &[FaultKind::PauseVm, FaultKind::ResumeVm])
        .await
        .unwrap();
    assert_eq!(said, "node w1 = machine 101");
    assert!(
        b.describe("w1", FaultKind::PauseVm)
            .ends_with("sh 101 i-0abc)")
    );
    // The runner journals the memo before it injects.
    let memo = b.memo("w1", FaultKind::PauseVm).expect("a memo");
    b.inject("w1", FaultKind::PauseVm).await.unwrap();
    assert_eq!(dir.log(), "suspend 101 i-0abc\n");
    let ran = b.take_commands();
    assert_eq!(ran.len(), 1);
    assert!(ran[0].ok && ran[0].role == "run", "{ran:?}");
    assert!(b.take_commands().is_empty());

    // Another process, with a file that no longer says how to resume:
    // the journal's line runs, no node or file needed.
    let mut other = backend("faults: {}\n", &dir);
    other.remember("w1", &memo);
    other.inject("w1", FaultKind::ResumeVm).await.unwrap();
    assert_eq!(dir.log(), "suspend 101 i-0abc\nresume 101\n");
    // Reverted: nothing left to run again.
    let e = other.inject("w1", FaultKind::ResumeVm).await.unwrap_err();
    assert!(e.to_string().contains("no revert was journaled"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_revert_names_its_command_line_and_output() {
    let dir = Scratch::new("fail");
    let mut b = backend(
        "faults:\n  poweroff:\n    run: \"true\"\n    revert: sh -c 'echo out; echo BMC says no >&2; exit 1' {machine}\n",
        &dir,
    );
    b.resolve(&node("w1"), &[FaultKind::Poweroff, FaultKind::Poweron])
        .await
        .unwrap();
    b.inject("w1", FaultKind::Poweroff).await.unwrap();
    let e = b.inject("w1", FaultKind::Poweron).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "revert of poweron on node `w1`: `sh -c 'echo out; echo BMC says no >&2; exit 1' w1` failed \
         (exit status: 1); stderr: BMC says no; stdout: out"
    );
    assert!(!e.invalid_input());
    let ran = b.take_commands();
    assert_eq!(ran.len(), 2);
    assert!(!ran[1].ok && ran[1].stderr == "BMC says no\n", "{ran:?}");
    // Still pending: a later cleanup or recover tries again.
    assert!(b.describe("w1", FaultKind::Poweron).contains("BMC says no"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_is_polled_until_it_passes_or_its_time_is_up() {
    let dir = Scratch::new("check");
    // Passes at the third attempt.
    let mut b = backend(
        "shell: true\nfaults:\n  shutdown:\n    run: echo off >> LOG\n    check: echo x >> LOG.n; test $(wc -l < LOG.n) -ge 3\n    revert: echo on >> LOG\n    revertCheck: \"false\"\n    checkTimeout: 4s\n",
        &dir,
    );
    b.resolve(&node("w1"), &[FaultKind::Shutdown])
        .await
        .unwrap();
    b.inject("w1", FaultKind::Shutdown).await.unwrap();
    let ran = b.take_commands();
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert_eq!(
        (ran[1].role.as_str(), ran[1].attempts, ran[1].ok),
        ("check", 3, true)
    );
    // A check that never passes fails the revert once its time is up.
    let e = b.inject("w1", FaultKind::Poweron).await.unwrap_err();
    assert!(
        e.to_string().starts_with(
            "revertCheck of poweron on node `w1`: `sh -c false sh` did not pass within 4s"
        ),
        "{e}"
    );
    assert_eq!(dir.log(), "off\non\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_command_is_cut_at_its_timeout() {
    let dir = Scratch::new("timeout");
    let mut b = backend(
        "faults:\n  pause-vm: {run: sleep 30, revert: \"true\", timeout: 1s}\n",
        &dir,
    );
    b.resolve(&node("w1"), &[FaultKind::PauseVm]).await.unwrap();
    let started = std::time::Instant::now();
    let e = b.inject("w1", FaultKind::PauseVm).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        e.to_string()
            .contains("`sleep 30` failed (timed out after 1s)"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_node_lacks_is_bad_input_before_anything_runs() {
    let dir = Scratch::new("lacks");
    let mut b = backend(
        "machine: \"{label:lab/missing}\"\nfaults:\n  pause-vm: {run: \"true\", revert: \"true\"}\n",
        &dir,
    );
    let e = b
        .resolve(&node("w1"), &[FaultKind::PauseVm])
        .await
        .unwrap_err();
    assert!(e.invalid_input());
    assert!(
        e.to_string()
            .contains("no value for {label:lab/missing} in the `machine` template"),
        "{e}"
    );
    let mut b = backend(
        "machines: {w1: vm-a}\nfaults:\n  pause-vm: {run: \"true\", revert: \"virsh resume {externalIP}\"}\n",
        &dir,
    );
    let e = b
        .resolve(&node("w1"), &[FaultKind::PauseVm])
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("no value for {externalIP} in faults.pause-vm.revert"),
        "{e}"
    );
    // A revert with no breaking fault of its own in the file.
    let mut b = backend("faults: {}\n", &dir);
    let e = b
        .resolve(&node("w1"), &[FaultKind::PauseVm])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("has no command for it"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ssh_built_ins_and_a_revert_through_the_node_are_said() {
    let dir = Scratch::new("ssh");
    let mut b = backend(
        "ssh: {user: root, port: 2222}\nfaults:\n  drop-nic: {run: \"true\", revert: ipmi-tool -H 10.0.0.5 reset}\n",
        &dir,
    );
    let said = b
        .resolve(&node("w1"), &[FaultKind::StopKubelet, FaultKind::DropNic])
        .await
        .unwrap();
    assert!(
        said.starts_with("node w1 = machine w1 (ssh 10.0.0.5)"),
        "{said}"
    );
    assert!(
        said.contains("warning: the revert of drop-nic (`ipmi-tool -H 10.0.0.5 reset`) names the node's own address 10.0.0.5"),
        "{said}"
    );
    assert_eq!(
        b.describe("w1", FaultKind::StopKubelet),
        "stop-kubelet w1 (ssh -o BatchMode=yes -o ConnectTimeout=10 -p 2222 -l root -- 10.0.0.5 \
         'systemctl stop kubelet')"
    );
    let memo: Memo = serde_json::from_str(&b.memo("w1", FaultKind::StopKubelet).unwrap()).unwrap();
    assert_eq!(memo.revert, FaultKind::StartKubelet);
    assert_eq!(
        memo.action.run.argv.last().map(String::as_str),
        Some("systemctl start kubelet")
    );
}

#[test]
fn plans_show_substitutions_for_literal_nodes() {
    let l = load_str("b.yaml", PAUSE).unwrap();
    assert_eq!(
        preview(&l.spec, Some("w1"), "target", FaultKind::PauseVm, None),
        ["sh -c 'echo suspend \"${1}\" \"${2}\" >> LOG' sh '<machine of w1>' '<providerID of w1>'"]
    );
    let l = load_str("b.yaml", "machines: {w1: \"101\"}\nfaults:\n  pause-vm: {run: \"qm suspend {machine}\", revert: \"qm resume {machine}\"}\n").unwrap();
    assert_eq!(
        preview(&l.spec, Some("w1"), "target", FaultKind::PauseVm, None),
        ["qm suspend 101"]
    );
    assert_eq!(
        preview(&l.spec, Some("w1"), "target", FaultKind::ResumeVm, None),
        ["qm resume 101"]
    );
    assert_eq!(
        preview(&l.spec, None, "target", FaultKind::PauseVm, None),
        ["qm suspend '<machine of target>'"]
    );
    // poweron undoes whichever of poweroff and shutdown came before it.
    let l = load_str(
        "b.yaml",
        "faults:\n  poweroff: {run: \"x\", revert: \"on-after-poweroff {node}\"}\n  shutdown: {run: \"y\", revert: \"on-after-shutdown {node}\"}\n",
    )
    .unwrap();
    let on = |undoing| preview(&l.spec, Some("w1"), "t", FaultKind::Poweron, undoing);
    assert_eq!(on(Some(FaultKind::Shutdown)), ["on-after-shutdown w1"]);
    assert_eq!(on(Some(FaultKind::Poweroff)), ["on-after-poweroff w1"]);
    assert_eq!(on(None), ["on-after-poweroff w1"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn identify_must_print_the_nodes_system_uuid_before_anything_runs() {
    let dir = Scratch::new("identify");
    // the platform prints the UUID in SMBIOS byte order, among other text
    let same = format!(
        "{PAUSE}identify: \"echo uuid: 1e0c3f5a-0000-0040-8000-000000000001, vm {{machine}}\"\n"
    );
    let mut b = backend(&same, &dir);
    let said = b.resolve(&node("w1"), &[FaultKind::PauseVm]).await.unwrap();
    assert_eq!(
        said,
        "node w1 = machine 101, the node's systemUUID is the machine's"
    );
    let other = format!("{PAUSE}identify: \"echo 11111111-2222-3333-4444-555555555555\"\n");
    let mut b = backend(&other, &dir);
    let e = b
        .resolve(&node("w1"), &[FaultKind::PauseVm])
        .await
        .unwrap_err();
    assert!(e.invalid_input(), "{e}");
    assert_eq!(
        e.to_string(),
        "machine `101` is not node `w1`: its UUID is 11111111-2222-3333-4444-555555555555 but \
         the node reports systemUUID 5a3f0c1e-0000-4000-8000-000000000001; map the node to its \
         own machine (`machine`/`machines:` in the backend file)"
    );
    let failing = format!("{PAUSE}identify: \"echo nope >&2; exit 3\"\n");
    let e = backend(&failing, &dir)
        .resolve(&node("w1"), &[FaultKind::PauseVm])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("`identify`"), "{e}");
    assert!(e.to_string().contains("nope"), "{e}");
    assert_eq!(dir.log(), "", "nothing was injected");
}

/// The backend with its commands answered by a recording fake.
fn faked(yaml: &str) -> (CommandBackend<Fake>, Fake) {
    let l = load_str("b.yaml", yaml).unwrap_or_else(|e| panic!("{e}"));
    let fake = Fake::default();
    (
        CommandBackend::with_exec(l.spec, "b.yaml".into(), fake.clone()),
        fake,
    )
}

const VIRSH: &str = "machine: \"{label:lab/vmid}\"\nidentify: virsh domuuid {machine}\nfaults:\n  pause-vm:\n    run: virsh suspend {machine}\n    check: virsh domstate {machine}\n    revert: virsh resume {machine}\n    timeout: 7s\n";

#[tokio::test(flavor = "multi_thread")]
async fn every_command_goes_through_the_exec_seam_as_an_acting_job() {
    let (mut b, fake) = faked(VIRSH);
    fake.answer(
        "virsh domuuid",
        0,
        "5a3f0c1e-0000-4000-8000-000000000001\n",
        "",
    );
    let said = b
        .resolve(&node("w1"), &[FaultKind::PauseVm, FaultKind::ResumeVm])
        .await
        .unwrap();
    assert_eq!(
        said,
        "node w1 = machine 101, the node's systemUUID is the machine's"
    );
    b.inject("w1", FaultKind::PauseVm).await.unwrap();
    b.inject("w1", FaultKind::ResumeVm).await.unwrap();
    assert_eq!(
        fake.lines(),
        [
            "virsh domuuid 101",
            "virsh suspend 101",
            "virsh domstate 101",
            "virsh resume 101"
        ]
    );
    // Each with its timeout, its group's leftovers killed, its output's end kept.
    let jobs = fake.jobs();
    assert!(
        jobs.iter()
            .all(|j| j.kill_leftovers && j.keep == Some(crate::exec::KEEP) && j.dir.is_none()),
        "{jobs:?}"
    );
    assert_eq!(jobs[1].timeout, Duration::from_secs(7));
    let ran = b.take_commands();
    let roles: Vec<&str> = ran.iter().map(|r| r.role.as_str()).collect();
    assert_eq!(roles, ["run", "check", "revert"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failure_the_fake_answers_is_told_with_its_output() {
    let (mut b, fake) = faked(
        VIRSH
            .replace("identify: virsh domuuid {machine}\n", "")
            .as_str(),
    );
    fake.answer("virsh suspend", 1, "", "error: domain is not running\n");
    b.resolve(&node("w1"), &[FaultKind::PauseVm]).await.unwrap();
    let e = b.inject("w1", FaultKind::PauseVm).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "run of pause-vm on node `w1`: `virsh suspend 101` failed (exit status: 1); stderr: \
         error: domain is not running"
    );
    // The check does not run after a failed command.
    assert_eq!(fake.lines(), ["virsh suspend 101"]);
    let ran = b.take_commands();
    assert!(
        !ran[0].ok && ran[0].stderr == "error: domain is not running\n",
        "{ran:?}"
    );
}
