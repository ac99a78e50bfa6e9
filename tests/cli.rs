//! The binary as users run it: exit codes, messages on stderr, output on stdout.

use std::process::{Command, Output};

fn nodefall(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .args(args)
        .output()
        .expect("nodefall runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn validate_accepts_the_shipped_scenarios() {
    let files: Vec<String> = std::fs::read_dir("scenarios")
        .expect("scenarios/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.display().to_string())
        .collect();
    let mut args = vec!["validate"];
    args.extend(files.iter().map(String::as_str));
    let out = nodefall(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("ok "))
            .count(),
        files.len()
    );
}

#[test]
fn validate_rejects_bad_input_with_exit_code_2_and_a_position() {
    let out = nodefall(&[
        "validate",
        "scenarios/statefulset-nfs.yaml",
        "tests/fixtures/bad/unknown-fault.yaml",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "tests/fixtures/bad/unknown-fault.yaml:5:12: steps[0].fault: unknown fault `pause-mv`"
        ),
        "{err}"
    );
    assert!(err.contains("1 of 2 scenario files invalid"), "{err}");
}

#[test]
fn missing_file_is_bad_input() {
    let out = nodefall(&["plan", "scenarios/nope.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("error: cannot read scenario scenarios/nope.yaml:"),
        "{err}"
    );
}

#[test]
fn plan_prints_the_resolved_timeline_for_the_chosen_profile() {
    let fast = text(&nodefall(&["plan", "scenarios/statefulset-nfs.yaml"]).stdout);
    assert!(fast.contains("Profile    fast: grace=8s"), "{fast}");
    assert!(fast.contains("between 13s and 43s"), "{fast}");
    let default = text(
        &nodefall(&[
            "plan",
            "scenarios/statefulset-nfs.yaml",
            "--profile",
            "default",
        ])
        .stdout,
    );
    assert!(
        default.contains("Profile    default: grace=50s"),
        "{default}"
    );
    // grace + toleration +- 15s = 350s +- 15s
    assert!(default.contains("between 5m35s and 6m5s"), "{default}");
    assert!(default.contains("T0+5m35s .. T0+6m5s"), "{default}");
}

#[test]
fn help_documents_exit_codes_and_examples() {
    let help = text(&nodefall(&["--help"]).stdout);
    for needle in [
        "Exit codes:",
        "130",
        "nodefall scenario scenarios/statefulset-nfs.yaml",
        "validate",
        "plan",
    ] {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
}
