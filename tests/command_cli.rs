//! The command backend through the CLI without a cluster: backend files
//! validated (the shipped examples, a bad one with positions), `plan`
//! printing the commands with their substitutions, a scenario's `command:`
//! section, and every refusal before anything is touched (exit 2).

use std::process::{Command, Output};

fn nodefall(args: &[&str], journals: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .args(args)
        .env("NODEFALL_JOURNAL_DIR", journals)
        .env("KUBECONFIG", journals.join("no-kubeconfig"))
        .output()
        .expect("nodefall runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const SCENARIO: &str = "name: cmd
namespace: cmd
target: {name: worker-1}
steps:
  - fault: pause-vm
  - expect: {node: target, ready: Unknown, within: grace + monitorPeriod + 20s}
  - fault: resume-vm
";

#[test]
fn the_shipped_examples_validate_and_a_bad_file_is_named_by_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files: Vec<String> = std::fs::read_dir("examples/backends")
        .expect("examples/backends/")
        .map(|e| e.expect("entry").path().display().to_string())
        .filter(|p| p.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 7, "{files:?}");
    let mut args = vec!["validate"];
    args.extend(files.iter().map(String::as_str));
    let out = nodefall(&args, dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        files.len(),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "ok       examples/backends/ssh.yaml (command backend: shutdown, stop-kubelet)"
        ),
        "{stdout}"
    );

    let out = nodefall(
        &["validate", "tests/fixtures/backends/bad-no-revert.yaml"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "tests/fixtures/backends/bad-no-revert.yaml:4:3: poweroff has no `revert` command"
        ),
        "{err}"
    );
    assert!(err.contains("tests/fixtures/backends/bad-no-revert.yaml:7:10: faults.pause-vm.run: `{machin}` is not a placeholder; did you mean `{machine}`?"), "{err}");
}

#[test]
fn plan_prints_each_command_with_its_substitutions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("cmd.yaml");
    std::fs::write(&scenario, SCENARIO).expect("scenario");
    let backend = dir.path().join("b.yaml");
    std::fs::write(
        &backend,
        "machines: {worker-1: 101}\nfaults:\n  pause-vm:\n    run: qm suspend {machine}\n    \
         check: sh -c 'qm status \"$1\" | grep -q paused' sh {machine}\n    revert: qm resume {machine}\n    \
         revertCheck: ssh {internalIP} true\n",
    )
    .expect("backend");
    let out = nodefall(
        &[
            "plan",
            scenario.to_str().unwrap(),
            "--backend",
            "command",
            "--backend-file",
            backend.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in [
        "#1           pause-vm      qm suspend 101",
        "#1           pause-vm      until it passes (every 1s, up to 120s): sh -c 'qm status \"$1\" | grep -q paused' sh 101",
        "#3           resume-vm     qm resume 101",
        "#3           resume-vm     until it passes (every 1s, up to 120s): ssh '<internalIP of worker-1>' true",
    ] {
        assert!(stdout.contains(line), "{line}\n{stdout}");
    }
    // The revert check goes through the node: said, not refused.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: faults.pause-vm.revertCheck reaches the node at its own address ({internalIP})"), "{err}");
}

#[test]
fn refusals_come_before_anything_is_touched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("cmd.yaml");
    std::fs::write(&scenario, SCENARIO).expect("scenario");
    let journals = dir.path().join("journals");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "scenario",
            scenario.to_str().unwrap(),
            "--backend",
            "command",
        ];
        args.extend_from_slice(extra);
        nodefall(&args, &journals)
    };
    // No commands at all.
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--backend command needs its commands"),
        "{}",
        text(&out)
    );
    // A file without the scenario's fault.
    let backend = dir.path().join("b.yaml");
    std::fs::write(
        &backend,
        "faults:\n  poweroff: {run: \"true\", revert: \"true\"}\n",
    )
    .expect("backend");
    let out = run(&["--backend-file", backend.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(
            "the scenario injects pause-vm, resume-vm but the file has no command for it"
        ),
        "{}",
        text(&out)
    );
    // A bad file: its position.
    let out = run(&[
        "--backend-file",
        "tests/fixtures/backends/bad-no-revert.yaml",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("bad-no-revert.yaml:4:3"),
        "{}",
        text(&out)
    );
    // No journal was even opened.
    assert!(!journals.exists() || std::fs::read_dir(&journals).expect("dir").next().is_none());
}

#[test]
fn a_scenario_can_carry_its_commands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("cmd.yaml");
    std::fs::write(
        &scenario,
        format!("{SCENARIO}command:\n  faults:\n    pause-vm:\n      run: virsh suspend {{node}}\n      revert: virsh resume {{nodee}}\n"),
    )
    .expect("scenario");
    let out = nodefall(&["validate", scenario.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out)
            .contains("cmd.yaml:12:15: faults.pause-vm.revert: `{nodee}` is not a placeholder"),
        "{}",
        text(&out)
    );
    std::fs::write(
        &scenario,
        format!("{SCENARIO}command:\n  faults:\n    pause-vm:\n      run: virsh suspend {{node}}\n      revert: virsh resume {{node}}\n"),
    )
    .expect("scenario");
    let out = nodefall(
        &["plan", scenario.to_str().unwrap(), "--backend", "command"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("virsh suspend worker-1"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("cmd.yaml (command:)"), "{}", text(&out));
}
