//! The binary against hostile input: numeric flags given NaN, infinity,
//! negatives, values too small or too large for a `Duration`, garbage and
//! unicode; path arguments that are directories, `/dev/null`, missing, or
//! under a file; result files whose free text is HTML. It must never panic
//! (exit 101), never take "nothing checked" for a pass, and refuse bad
//! input with exit 2 and a message naming the flag. Every command here
//! stops at argument parsing or a pre-flight check: no cluster is started.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;
use serde_json::{Value, json};

const FIXTURE: &str = "tests/fixtures/results/statefulset-pass.json";
const OTHER_SCENARIO: &str = "tests/fixtures/results/deployment-fail.json";
const SCENARIO: &str = "scenarios/statefulset-nfs.yaml";

fn nodefall<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("nodefall runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Never a panic, never a signal: an exit code nodefall documents.
fn no_panic(out: &Output, what: &str) -> i32 {
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{what}: panicked:\n{err}");
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("{what}: killed by a signal"));
    assert_ne!(code, 101, "{what}: exit 101:\n{err}");
    code
}

/// A kubeconfig whose server nothing listens on: reading it succeeds, any
/// request is refused at once.
fn dead_kubeconfig(dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n\
         clusters: [{name: dead, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n\
         users: [{name: dead, user: {token: x}}]\n\
         contexts: [{name: dead, context: {cluster: dead, user: dead}}]\n",
    )
    .unwrap();
    path
}

/// The fixture with an observer start (1 s after its start), as a run of
/// this nodefall records it, written into `dir`.
fn result_with_observer(dir: &Path) -> PathBuf {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    v["observedFrom"] = json!(1000);
    let path = dir.join("result.json");
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    path
}

/// One audit event (a Node created, as the API server logs it) at `at`.
fn node_created(at: &str) -> String {
    json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
        "stage": "ResponseComplete", "verb": "create",
        "objectRef": {"resource": "nodes", "name": "hostile-node", "apiVersion": "v1"},
        "responseStatus": {"code": 201},
        "responseObject": {
            "kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "hostile-node", "uid": "u1", "resourceVersion": "1"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        },
        "stageTimestamp": at
    })
    .to_string()
}

/// Inside the fixture's observed window (it starts 2026-11-21T11:04:25.118Z).
const IN_WINDOW: &str = "2026-11-21T11:04:40.000000Z";

// ----- regressions -----

/// `audit poll` (against a dead API server) refuses each of `values` for
/// `flag` with exit 2, naming the flag and its `range`.
fn audit_poll_refuses(flag: &str, values: &[&str], range: &str) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dead_kubeconfig(dir.path());
    for value in values {
        let out = nodefall(&[
            "audit",
            "poll",
            "--namespace",
            "x",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--out",
            dir.path().join("poll.jsonl").to_str().unwrap(),
            &format!("{flag}={value}"),
        ]);
        let code = no_panic(&out, value);
        let err = text(&out.stderr);
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert!(
            err.contains(flag) && err.contains(range),
            "{flag} {value}: {err}"
        );
    }
}

#[test]
fn audit_poll_refuses_intervals_that_panicked() {
    audit_poll_refuses(
        "--interval",
        &["1e-10", "1e20", "1e300", "0", "nan", "-1", "inf"],
        "from 1ms to 1h",
    );
}

#[test]
fn audit_poll_refuses_a_nan_duration() {
    audit_poll_refuses(
        "--duration",
        &["nan", "inf", "1e400", "-5", "0"],
        "from 1ms to 168h",
    );
}

#[test]
fn fail_if_slower_beyond_a_float_says_the_range() {
    for pct in ["1e400%", "inf", "nan%", "-1%", "10001"] {
        let out = nodefall(&[
            "report",
            "compare",
            FIXTURE,
            FIXTURE,
            &format!("--fail-if-slower={pct}"),
        ]);
        let err = text(&out.stderr);
        assert_eq!(no_panic(&out, pct), 2, "{pct}: {err}");
        assert!(
            err.contains("--fail-if-slower") && err.contains("from 0% to 10000%"),
            "{pct}: {err}"
        );
    }
}

#[test]
fn audit_check_of_an_empty_log_is_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let result = result_with_observer(dir.path());
    let out = nodefall(&[
        "audit",
        "check",
        result.to_str().unwrap(),
        "--audit-log",
        "/dev/null",
    ]);
    let err = text(&out.stderr);
    assert_eq!(no_panic(&out, "/dev/null"), 2, "{err}");
    assert!(
        err.contains("/dev/null holds no audit events: nothing was checked"),
        "{err}"
    );
}

#[test]
fn audit_check_without_a_write_in_the_run_window_is_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let result = result_with_observer(dir.path());
    let log = dir.path().join("audit.log");
    std::fs::write(&log, node_created("2020-01-01T00:00:00.000000Z") + "\n").unwrap();
    let out = nodefall(&[
        "audit",
        "check",
        result.to_str().unwrap(),
        "--audit-log",
        log.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(no_panic(&out, "old log"), 2, "{err}");
    assert!(
        err.contains("none of its 1 audit events") && err.contains("nothing was checked"),
        "{err}"
    );
    // A write in the window is checked: the observer never reported that
    // node, so it was missed (exit 1), not refused.
    std::fs::write(&log, node_created(IN_WINDOW) + "\n").unwrap();
    let out = nodefall(&[
        "audit",
        "check",
        result.to_str().unwrap(),
        "--audit-log",
        log.to_str().unwrap(),
    ]);
    assert_eq!(
        no_panic(&out, "log in window"),
        1,
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("missed"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn report_compare_of_different_scenarios_is_bad_input() {
    let out = nodefall(&["report", "compare", FIXTURE, OTHER_SCENARIO]);
    let err = text(&out.stderr);
    assert_eq!(no_panic(&out, "compare"), 2, "{err}");
    assert!(
        err.contains("different scenarios (`statefulset-nfs` and `vm-halt-deployment`)")
            && err.contains("may not be comparable")
            && err.contains("--allow-different-scenarios"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    // Asked for, they are compared (and the Markdown says so).
    let out = nodefall(&[
        "report",
        "compare",
        FIXTURE,
        OTHER_SCENARIO,
        "--allow-different-scenarios",
    ]);
    let code = no_panic(&out, "compare anyway");
    assert!(code == 0 || code == 1, "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("different scenarios"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn rendered_reports_escape_a_hostile_scenario_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    let name = "<img src=x onerror=alert(1)> & `tick` [l](javascript:x)\n# injected";
    v["scenario"] = json!(name);
    v["description"] = json!("<script>alert(2)</script>\u{1} & more");
    v["file"] = json!("a`b<i>.yaml");
    let result = dir.path().join("result.json");
    std::fs::write(&result, serde_json::to_string(&v).unwrap()).unwrap();
    let out = nodefall(&["report", "render", result.to_str().unwrap()]);
    assert_eq!(no_panic(&out, "render"), 0, "{}", text(&out.stderr));

    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    let heading = md.lines().next().unwrap();
    assert_eq!(
        heading,
        "# nodefall report: &lt;img src=x onerror=alert(1)&gt; &amp; \\`tick\\` \
         \\[l\\](javascript:x) \\# injected"
    );
    assert!(!md.lines().any(|l| l == "# injected"), "{md}");
    for raw in ["<img", "<script", "<i>"] {
        assert!(!md.contains(raw), "raw {raw} in report.md:\n{md}");
    }

    // The SVG and JUnit carry the name as text, escaped for XML.
    for file in ["timeline.svg", "junit.xml"] {
        let xml = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let doc = roxmltree::Document::parse(&xml)
            .unwrap_or_else(|e| panic!("{file} is not XML: {e}\n{xml}"));
        assert!(
            doc.descendants()
                .filter(|n| n.is_element())
                .all(|n| n.tag_name().name() != "img" && n.tag_name().name() != "script"),
            "{file}: markup from the name became elements"
        );
        assert!(xml.contains("&lt;img"), "{file}: {xml}");
    }
}

#[test]
fn bad_output_paths_are_refused_by_flag() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("sub");
    for out_dir in [Path::new("/dev/null"), under_file.as_path()] {
        let o = out_dir.to_str().unwrap();
        for args in [
            vec!["report", "render", FIXTURE, "--out", o],
            vec!["report", "compare", FIXTURE, FIXTURE, "--out", o],
            vec!["audit", "stamp", "--out", o],
        ] {
            if args.contains(&"stamp") && out_dir == Path::new("/dev/null") {
                continue; // a file may be /dev/null
            }
            let out = nodefall(&args);
            let err = text(&out.stderr);
            assert_eq!(no_panic(&out, o), 2, "{args:?}: {err}");
            assert!(err.contains(&format!("--out {o}")), "{args:?}: {err}");
        }
    }
    let out = nodefall(&[
        "audit",
        "poll",
        "--namespace",
        "x",
        "--kubeconfig",
        dir.path().to_str().unwrap(),
        "--out",
        dir.path().join("poll.jsonl").to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(no_panic(&out, "kubeconfig dir"), 2, "{err}");
    assert!(err.contains("--kubeconfig"), "{err}");
}

// ----- the wider net -----

/// Every numeric flag, in a command that stops before any cluster is
/// touched: (flag, arguments before it, what a valid value runs into).
fn numeric_flags(dir: &Path) -> Vec<(&'static str, Vec<String>, &'static str)> {
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let poll = s(&[
        "audit",
        "poll",
        "--namespace",
        "x",
        "--kubeconfig",
        dir.join("missing-kubeconfig").to_str().unwrap(),
        "--out",
        dir.join("poll.jsonl").to_str().unwrap(),
    ]);
    let compare = s(&["report", "compare", FIXTURE, FIXTURE]);
    // A scenario that does not exist: parsed flags, then exit 2 reading it.
    let missing = dir.join("missing.yaml");
    let scenario = s(&["scenario", missing.to_str().unwrap()]);
    let plan = s(&["plan", missing.to_str().unwrap()]);
    let up = s(&["sim", "up"]);
    vec![
        ("--interval", poll.clone(), "--kubeconfig"),
        ("--duration", poll, "--kubeconfig"),
        ("--fail-if-slower", compare.clone(), ""),
        ("--min-delta", compare.clone(), ""),
        ("--threshold", compare, ""),
        ("--repeat", scenario.clone(), "cannot read scenario"),
        ("--nodes", scenario.clone(), "cannot read scenario"),
        ("--shards", scenario.clone(), "cannot read scenario"),
        (
            "--shutdown-timeout",
            scenario.clone(),
            "cannot read scenario",
        ),
        ("--vagrant-nic", scenario.clone(), "cannot read scenario"),
        ("--ssh-port", scenario, "cannot read scenario"),
        ("--shutdown-timeout", plan.clone(), "cannot read scenario"),
        ("--ssh-port", plan.clone(), "cannot read scenario"),
        ("--vagrant-nic", plan, "cannot read scenario"),
        // `sim up` with a valid value would start a cluster: an unknown
        // profile after the flag stops clap there, after the flag's own
        // value was parsed.
        ("--timeout", up.clone(), "--profile"),
        ("--nodes", up.clone(), "--profile"),
        ("--shards", up, "--profile"),
    ]
}

fn hostile_value() -> impl Strategy<Value = String> {
    let fixed: Vec<&'static str> = vec![
        "nan",
        "NaN",
        "-nan",
        "inf",
        "-inf",
        "infinity",
        "-0",
        "+0",
        "0",
        "-0.0",
        "1e-400",
        "1e400",
        "1e-10",
        "1e20",
        "1e300",
        "-1e300",
        "18446744073709551616",
        "340282366920938463463374607431768211456",
        "-9223372036854775809",
        "",
        " ",
        "%",
        "20%%",
        "-1",
        "5",
        "0.5",
        "1e-3",
        "500ms",
        "1m30s",
        "99999999999999999999h",
        "9999999999999999h",
        "٣",
        "５",
        "1_000",
        "0x10",
        "1e3",
        "nodeNotReady=1e400%",
        "nodeNotReady=+nan",
        "maxUnavailable=+99999999999999999999",
        "workloadReadyAgain=+-0",
        "=",
        "é=1",
    ];
    prop_oneof![
        proptest::sample::select(fixed).prop_map(str::to_owned),
        any::<f64>().prop_map(|f| f.to_string()),
        any::<f64>().prop_map(|f| format!("{f:e}")),
        any::<i128>().prop_map(|n| n.to_string()),
        (
            any::<u64>(),
            proptest::sample::select(vec!["ms", "s", "m", "h", "%", ""])
        )
            .prop_map(|(n, unit)| format!("{n}{unit}")),
        "\\PC{0,12}",
    ]
    .prop_map(|s| s.replace('\0', ""))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Each value against every numeric flag: no panic; refused with exit 2
    /// and the flag's name, or accepted and stopped by the pre-flight.
    #[test]
    fn numeric_flags_never_panic_and_name_themselves(value in hostile_value()) {
        let dir = tempfile::tempdir().unwrap();
        for (flag, before, preflight) in numeric_flags(dir.path()) {
            let mut args = before.clone();
            args.push(format!("{flag}={value}"));
            if before[..2] == ["sim", "up"] {
                args.push("--profile=no-such-profile".into());
            }
            let out = nodefall(&args);
            let what = format!("{args:?}");
            let code = no_panic(&out, &what);
            let err = text(&out.stderr);
            prop_assert!(code <= 2, "{}: exit {}: {}", what, code, err);
            if err.contains("invalid value") && !err.contains("--profile") {
                prop_assert_eq!(code, 2);
                prop_assert!(err.contains(flag), "{}: {}", what, err);
                prop_assert!(err.contains(" give ") || err.contains("write NAME") || err.contains("no figure"),
                    "{}: no accepted range: {}", what, err);
            } else if code == 2 {
                prop_assert!(err.contains(preflight), "{}: {}", what, err);
            }
        }
    }
}

/// The kinds of path a user can get wrong, made in `dir`: `kind` picks
/// one, `tail` (arbitrary text) extends those that take a name.
fn hostile_path(dir: &Path, kind: usize, tail: &str) -> PathBuf {
    let tail = if tail.is_empty() { "x" } else { tail };
    match kind % 9 {
        0 => dir.to_owned(),
        1 => PathBuf::from("/dev/null"),
        2 => dir.join(format!("missing-{tail}")),
        3 => dir.join("a-file").join(tail),
        4 => dir.join("a-file"),
        5 => dir.join("garbage.json"),
        6 => PathBuf::new(),
        7 => dir.join(format!("dir-{tail}")).join(""),
        _ => dir.join("n".repeat(300)),
    }
}

/// Every command taking a path, with `p` in that place.
fn path_commands(dir: &Path, p: &Path) -> Vec<Vec<std::ffi::OsString>> {
    let result = dir.join("result.json");
    let log = dir.join("audit.log");
    let os = |v: &[&dyn AsRef<std::ffi::OsStr>]| -> Vec<std::ffi::OsString> {
        v.iter().map(|a| a.as_ref().to_owned()).collect()
    };
    let mut baseline = std::ffi::OsString::from("poll=");
    baseline.push(p);
    vec![
        os(&[&"validate", &p]),
        os(&[&"plan", &p]),
        os(&[&"scenario", &p]),
        os(&[&"report", &"render", &p]),
        os(&[&"report", &"render", &FIXTURE, &"--out", &p]),
        os(&[&"report", &"compare", &p, &FIXTURE]),
        os(&[&"report", &"compare", &FIXTURE, &p]),
        os(&[&"report", &"compare", &FIXTURE, &FIXTURE, &"--out", &p]),
        os(&[&"audit", &"check", &p, &"--audit-log", &log]),
        os(&[&"audit", &"check", &result, &"--audit-log", &p]),
        os(&[
            &"audit",
            &"check",
            &result,
            &"--audit-log",
            &log,
            &"--baseline",
            &baseline,
        ]),
        os(&[
            &"audit",
            &"check",
            &result,
            &"--audit-log",
            &log,
            &"--matches",
            &p,
        ]),
        os(&[&"audit", &"stamp", &"--out", &p]),
        os(&[
            &"audit",
            &"poll",
            &"--namespace",
            &"x",
            &"--kubeconfig",
            &p,
            &"--out",
            &dir.join("poll.jsonl"),
        ]),
        os(&[
            &"audit",
            &"poll",
            &"--namespace",
            &"x",
            &"--kubeconfig",
            &dir.join("missing"),
            &"--out",
            &p,
        ]),
        os(&[
            &"plan",
            &SCENARIO,
            &"--backend",
            &"command",
            &"--backend-file",
            &p,
        ]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every path argument, given a directory, /dev/null, a missing file, a
    /// path under a file, garbage, an empty path, a name too long: no panic, and a pass or
    /// exit 2 (the user's own path is never an infrastructure error).
    #[test]
    fn path_arguments_never_panic(kind in 0usize..9, tail in "\\PC{0,10}") {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a-file"), "not json, not yaml: [").unwrap();
        std::fs::write(dir.path().join("garbage.json"), "{\"schemaVersion\": \"x\", \"kind\": 7}").unwrap();
        result_with_observer(dir.path());
        std::fs::write(dir.path().join("audit.log"), node_created(IN_WINDOW) + "\n").unwrap();
        let tail = tail.replace(['\0', '/'], "");
        let p = hostile_path(dir.path(), kind, &tail);
        if kind % 9 == 7 {
            std::fs::create_dir_all(&p).unwrap();
        }
        for args in path_commands(dir.path(), &p) {
            let out = Command::new(env!("CARGO_BIN_EXE_nodefall"))
                .args(&args)
                .env_remove("KUBECONFIG")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let what = format!("{args:?}");
            let code = no_panic(&out, &what);
            prop_assert!(code <= 2, "{}: exit {}: {}", what, code, text(&out.stderr));
        }
    }
}

/// `report fidelity` over two directories of runs: a run against itself
/// meets the goal (exit 0); one that lacks a kind of transition does not
/// (exit 1, the rows say "kind only"); a directory with no run is bad input.
#[test]
fn report_fidelity_judges_runs_and_refuses_an_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run: Value = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    let put = |side: &str, run: &Value| {
        let d = dir.path().join(side).join("run-1");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("result.json"), serde_json::to_string(run).unwrap()).unwrap();
        dir.path().join(side)
    };
    let kind = put("kind", &run);
    let same = put("same", &run);
    let fidelity = |kind: &Path, sim: &Path| {
        let (kind, sim) = (kind.display().to_string(), sim.display().to_string());
        nodefall(&["report", "fidelity", "--kind", &kind, "--sim", &sim])
    };
    let out = fidelity(&kind, &same);
    let md = text(&out.stdout);
    assert_eq!(no_panic(&out, "fidelity"), 0, "{md}{}", text(&out.stderr));
    assert!(md.contains(", 0 not met;"), "{md}");

    let mut untainted = run.clone();
    untainted["transitions"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["change"]["type"] != "taintAdded");
    let sim = put("untainted", &untainted);
    let out = fidelity(&kind, &sim);
    let md = text(&out.stdout);
    assert_eq!(no_panic(&out, "fidelity"), 1, "{md}{}", text(&out.stderr));
    assert!(
        md.contains("target: taint + node.kubernetes.io/unreachable:NoExecute")
            && md.contains("**kind only**"),
        "{md}"
    );

    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = fidelity(&kind, &empty);
    let err = text(&out.stderr);
    assert_eq!(no_panic(&out, "fidelity"), 2, "{err}");
    assert!(err.contains("holds no result.json"), "{err}");
}
