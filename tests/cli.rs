//! The binary as users run it: exit codes, messages on stderr, output on stdout.

use std::process::{Command, Output};

#[path = "support/skip.rs"]
mod skip;

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
    // The cause once, on its own line.
    assert!(
        err.starts_with("error: cannot read scenario scenarios/nope.yaml\n  caused by: "),
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

/// Without a cluster, `plan` resolves a sim scenario's targets against the
/// throwaway cluster `--nodes`/`--zones` describe and forecasts the zones
/// when the faults break more than one node; one node's fault, nothing.
#[test]
fn plan_forecasts_the_zones_of_the_throwaway_sim() {
    let large = text(
        &nodefall(&[
            "plan",
            "scenarios/zones/partial-large.yaml",
            "--nodes",
            "9",
            "--zones",
            "a,b",
        ])
        .stdout,
    );
    for want in [
        "target down = 3 nodes: worker-1, worker-3, worker-5",
        "zone a: 3 of 5 nodes fail (0 down before): PartialDisruption, NoExecute taints one node per 20s",
        "worker-1 (zone a, turn 1): NoExecute taint at once",
        "worker-3 (zone a, turn 2): NoExecute taint +20s",
        "worker-5 (zone a, turn 3): NoExecute taint +40s",
    ] {
        assert!(large.contains(want), "`{want}` not in:\n{large}");
    }
    // Upstream's threshold: the same zone is small, its tainting a race.
    let upstream = text(
        &nodefall(&[
            "plan",
            "scenarios/zones/partial-large.yaml",
            "--nodes",
            "9",
            "--zones",
            "a,b",
            "--profile",
            "default",
        ])
        .stdout,
    );
    assert!(
        upstream.contains("NoExecute taints stopped (a small zone)")
            && upstream.contains("no more than 50 nodes"),
        "{upstream}"
    );
    // No zones on three nodes: the set matches none, said, not an error.
    let out = nodefall(&["plan", "scenarios/zones/partial-large.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    let none = text(&out.stdout);
    assert!(
        none.contains("Zones      not forecast: target `down`") && none.contains("matches 0 nodes"),
        "{none}"
    );
    let one = text(&nodefall(&["plan", "scenarios/statefulset-nfs.yaml"]).stdout);
    assert!(!one.contains("Zones"), "{one}");
    let both = nodefall(&[
        "plan",
        "scenarios/zones/partial-large.yaml",
        "--nodes",
        "9",
        "--cluster",
        "x",
    ]);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
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

/// `--version` names the commit `git rev-parse --short=12 HEAD` gives here
/// (`-dirty` when the sources differ from it: a change under src/ or crates/
/// shows, a clean work tree shows none), its date, the features this build
/// has and its target; `-V` is its first line alone.
#[test]
fn version_names_the_commit_and_the_features() {
    let out = nodefall(&["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let long = text(&out.stdout);
    let short = text(&nodefall(&["-V"]).stdout);
    assert_eq!(short.lines().count(), 1, "-V is one line:\n{short}");
    assert_eq!(long.lines().next(), short.lines().next(), "{long}");
    assert!(
        short.starts_with(concat!("nodefall ", env!("CARGO_PKG_VERSION"), " (")),
        "{short}"
    );
    let field = |key: &str| -> String {
        long.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
            .unwrap_or_else(|| panic!("no `{key}: ` line in --version:\n{long}"))
            .to_owned()
    };
    let features = if cfg!(feature = "libvirt") {
        "libvirt"
    } else {
        "none"
    };
    assert_eq!(field("features"), features, "{long}");
    assert!(
        field("target").starts_with(std::env::consts::ARCH),
        "{long}"
    );
    let (commit, date) = (field("commit-hash"), field("commit-date"));
    let date_set = option_env!("NODEFALL_COMMIT_DATE").filter(|d| !d.trim().is_empty());
    if let Some(set) = date_set {
        assert!(
            set.trim().starts_with(&date),
            "NODEFALL_COMMIT_DATE={set}:\n{long}"
        );
    }

    // Built with NODEFALL_COMMIT (a build without .git): it wins over git.
    if let Some(set) = option_env!("NODEFALL_COMMIT").filter(|c| !c.trim().is_empty()) {
        let set = set.trim().to_ascii_lowercase();
        let hex = set.trim_end_matches("-dirty");
        assert!(
            commit.starts_with(&hex[..hex.len().min(12)]),
            "NODEFALL_COMMIT={set}:\n{long}"
        );
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| Command::new("git").arg("-C").arg(root).args(args).output();
    let head = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Err(e) => {
            skip::skip(
                "version_names_the_commit_and_the_features",
                &format!("git cannot run ({e}), so there is no commit to compare with"),
            );
            return;
        }
        Ok(out) if !out.status.success() => {
            // Not a checkout (a source tarball): nothing to name.
            assert_eq!(commit, "unknown", "{long}");
            assert!(short.contains("(commit unknown)"), "{short}");
            return;
        }
        Ok(out) => text(&out.stdout).trim().to_owned(),
    };
    assert!(
        commit == head || commit == format!("{head}-dirty"),
        "--version names {commit}, HEAD is {head}:\n{long}"
    );
    let changes = |paths: &[&str]| {
        let mut args = vec!["--no-optional-locks", "status", "--porcelain", "--"];
        args.extend(paths);
        let out = git(&args).expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        !out.stdout.is_empty()
    };
    if changes(&["src", "crates", "Cargo.toml", "Cargo.lock"]) {
        assert!(
            commit.ends_with("-dirty"),
            "the sources differ from HEAD:\n{long}"
        );
    }
    if !changes(&[]) {
        assert!(
            !commit.ends_with("-dirty"),
            "the work tree is clean:\n{long}"
        );
    }
    if date_set.is_none() {
        let out = git(&[
            "show",
            "-s",
            "--no-show-signature",
            "--date=short",
            "--format=%cd",
            "HEAD",
        ])
        .expect("git runs");
        assert_eq!(date, text(&out.stdout).trim(), "{long}");
        assert!(short.contains(&format!("{commit} {date})")), "{short}");
    }
}

#[test]
fn report_render_rewrites_the_reports_next_to_the_result_or_into_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let result = dir.path().join("result.json");
    std::fs::copy("tests/fixtures/results/statefulset-pass.json", &result).expect("copy fixture");
    let result = result.to_str().expect("utf-8 path");

    let out = nodefall(&["report", "render", result]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = dir.path().join("report.md");
    assert_eq!(text(&out.stdout).trim(), report.display().to_string());
    let md = std::fs::read_to_string(&report).expect("report.md written");
    assert!(
        md.starts_with("# nodefall report: statefulset-nfs\n"),
        "{md}"
    );
    assert!(md.contains("**PASS**"), "{md}");
    assert!(md.contains("![Timeline of the run](timeline.svg)"), "{md}");
    let svg =
        std::fs::read_to_string(dir.path().join("timeline.svg")).expect("timeline.svg written");
    assert!(svg.starts_with("<svg"), "{svg}");
    let xml = std::fs::read_to_string(dir.path().join("junit.xml")).expect("junit.xml written");
    assert!(
        xml.contains("<testsuite name=\"nodefall.statefulset-nfs\""),
        "{xml}"
    );

    let elsewhere = dir.path().join("elsewhere");
    let out = nodefall(&[
        "report",
        "render",
        result,
        "--out",
        elsewhere.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        elsewhere.join("report.md").display().to_string()
    );
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("report.md")).expect("report.md in --out"),
        md
    );
    assert!(elsewhere.join("junit.xml").is_file());
    assert!(!elsewhere.join("result.json").exists());
}

/// `dir/NAME/result.json`, the fixture with `nodeNotReady` scaled by `factor`.
fn result_in(dir: &std::path::Path, name: &str, factor: f64) {
    let mut r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/results/statefulset-pass.json").expect("fixture"),
    )
    .expect("json");
    let ms = r["metrics"]["nodeNotReady"].as_f64().expect("nodeNotReady");
    r["metrics"]["nodeNotReady"] = serde_json::json!((ms * factor).round() as i64);
    std::fs::create_dir_all(dir.join(name)).expect("mkdir");
    std::fs::write(dir.join(name).join("result.json"), r.to_string()).expect("write");
}

#[test]
fn report_summary_says_every_run_and_what_got_slower_than_the_baseline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (base, new) = (dir.path().join("base"), dir.path().join("new"));
    result_in(&base, "statefulset-nfs-1", 1.0);
    result_in(&new, "statefulset-nfs-2", 1.5);
    let path = |p: &std::path::Path| p.to_str().expect("utf-8").to_owned();

    let out = nodefall(&["report", "summary", &path(&base)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let md = text(&out.stdout);
    assert!(md.starts_with("## nodefall: PASS\n"), "{md}");
    assert!(md.contains("| statefulset-nfs | PASS "), "{md}");
    assert!(md.contains("`statefulset-nfs-1`"), "{md}");

    let gate = ["--baseline", &path(&base), "--fail-if-slower", "20%"];
    let out = nodefall(&[&["report", "summary", &path(&new)][..], &gate].concat());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let md = text(&out.stdout);
    assert!(
        md.starts_with("## nodefall: FAIL, 0 of 1 scenarios passed\n"),
        "{md}"
    );
    assert!(
        md.contains("- **statefulset-nfs** slower than the baseline: nodeNotReady got slower"),
        "{md}"
    );
    let out = nodefall(
        &[
            &["report", "summary", &path(&new), "--format", "json"][..],
            &gate,
        ]
        .concat(),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["outcome"], "fail");
    assert_eq!(
        json["entries"][0]["regressions"].as_array().map(Vec::len),
        Some(1),
        "{json}"
    );
    // Under a looser limit it passes.
    let out = nodefall(&[
        "report",
        "summary",
        &path(&new),
        "--baseline",
        &path(&base),
        "--fail-if-slower",
        "60%",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    // A --repeat series is one row, not one per run.
    let out = nodefall(&["report", "summary", "reports/examples/statefulset-nfs-x5"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let md = text(&out.stdout);
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| statefulset"))
        .collect();
    assert_eq!(rows.len(), 1, "{md}");
    assert!(rows[0].contains("PASS (5/5 runs passed)"), "{md}");

    // Bad input: a gate without a baseline, a directory with no run.
    let out = nodefall(&["report", "summary", &path(&new), "--fail-if-slower", "20%"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let out = nodefall(&["report", "summary", &path(&empty)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("holds no result.json or aggregate.json"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn report_render_refuses_another_schema_version_as_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let result = dir.path().join("result.json");
    let json = std::fs::read_to_string("tests/fixtures/results/deployment-fail.json")
        .expect("fixture")
        .replacen("\"schemaVersion\": 2", "\"schemaVersion\": 11", 1);
    std::fs::write(&result, json).expect("write result.json");
    let out = nodefall(&["report", "render", result.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "error: {} has result schema version 11, but this nodefall reads versions 1 to 10",
            result.display()
        )),
        "{err}"
    );
    assert!(!dir.path().join("report.md").exists());

    // a schema-1 result (an older run) still renders
    let old = dir.path().join("old.json");
    std::fs::copy("reports/examples/statefulset-nfs/result.json", &old).expect("copy example");
    let out = nodefall(&["report", "render", old.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(dir.path().join("report.md").exists());

    let out = nodefall(&["report", "render", "tests/fixtures/results/nope.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .starts_with("error: cannot read run result tests/fixtures/results/nope.json\n"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn plan_for_kind_shows_the_exact_commands() {
    let out = nodefall(&[
        "plan",
        "scenarios/kind-statefulset.yaml",
        "--backend",
        "kind",
    ]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    let commands = stdout
        .split("Commands on kind")
        .nth(1)
        .expect("a commands section");
    assert!(
        commands.contains("#1 (pause)   docker pause <target>"),
        "{commands}"
    );
    assert!(commands.contains("docker unpause <target>"), "{commands}");
}

/// The sim plays a kubelet's graceful node shutdown (`sim up
/// --shutdown-grace-period`), so seed 003 plans there like anywhere else.
#[test]
fn sim_plans_graceful_shutdown() {
    let out = nodefall(&[
        "plan",
        "scenarios/graceful-shutdown.yaml",
        "--backend",
        "sim",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("fault shutdown on target"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn plan_for_libvirt_shows_every_operation_and_its_virsh_line() {
    let out = nodefall(&[
        "plan",
        "scenarios/libvirt-graceful-shutdown.yaml",
        "--backend",
        "libvirt",
        "--libvirt-uri",
        "qemu+ssh://lab/system",
        "--domain-prefix",
        "kubespray",
        "--shutdown-timeout",
        "2m",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let ops = stdout
        .split("Operations on libvirt")
        .nth(1)
        .expect("an operations section");
    assert!(ops.contains("`kubespray<node>`"), "{ops}");
    assert!(
        ops.contains(
            "#2 (shutdown) virDomainShutdownFlags(ACPI_POWER_BTN) = virsh -c qemu+ssh://lab/system shutdown --mode acpi <target>"
        ),
        "{ops}"
    );
    assert!(ops.contains("wait until shut off (at most 120s)"), "{ops}");
    assert!(
        ops.contains("virDomainCreate = virsh -c qemu+ssh://lab/system start <target>"),
        "{ops}"
    );
}

#[test]
fn a_bad_machine_flag_is_bad_input_before_anything_runs() {
    let out = nodefall(&[
        "scenario",
        "scenarios/libvirt-pause-worker.yaml",
        "--ssh-host",
        "k8s-2=host:port",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .contains("--ssh-host k8s-2=host:port: `host:port` is not HOST or HOST:PORT"),
        "{}",
        text(&out.stderr)
    );
    let out = nodefall(&[
        "plan",
        "scenarios/libvirt-pause-worker.yaml",
        "--domain",
        "k8s-2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("`k8s-2` is not NODE=VALUE"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_closed_stdout_ends_the_output_not_the_command() {
    // `nodefall validate ... | head -0`: the reader is gone before the first line.
    let mut args = vec!["validate".to_owned()];
    for _ in 0..20 {
        args.extend(
            std::fs::read_dir("scenarios")
                .expect("scenarios/")
                .filter_map(|e| e.ok().map(|e| e.path().display().to_string()))
                .filter(|p| p.ends_with(".yaml")),
        );
    }
    for args in [
        args,
        vec!["plan".into(), "scenarios/statefulset-nfs.yaml".into()],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nodefall"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("nodefall runs");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("nodefall ends");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{} {err}", args[0]);
        assert!(!err.contains("panicked") && !err.contains("error"), "{err}");
    }
}

#[test]
fn an_unknown_sim_cluster_is_bad_input() {
    let state = tempfile::tempdir().expect("temp dir");
    for args in [
        &[
            "scenario",
            "scenarios/statefulset-nfs.yaml",
            "--cluster",
            "nosuch",
        ][..],
        &[
            "plan",
            "scenarios/statefulset-nfs.yaml",
            "--cluster",
            "nosuch",
        ],
        &["sim", "kubeconfig", "--name", "nosuch"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_nodefall"))
            .args(args)
            .env("NODEFALL_STATE_DIR", state.path())
            .output()
            .expect("nodefall runs");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("no simulated cluster named `nosuch`"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn completions_are_generated_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _nodefall"),
        ("zsh", "#compdef nodefall"),
        ("fish", "complete -c nodefall "),
    ] {
        let out = nodefall(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script:.200}");
        // Subcommands and their flags are in it.
        assert!(
            script.contains("scenario") && script.contains("repeat"),
            "{shell}"
        );
    }
    assert_eq!(nodefall(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn logs_follow_the_verbosity_and_format_flags() {
    let plan = ["plan", "scenarios/statefulset-nfs.yaml"];
    let debug_line = "scenario `statefulset-nfs`";
    let run = |flags: &[&str], rust_log: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_nodefall"));
        c.args(flags).args(plan).env_remove("RUST_LOG");
        if let Some(v) = rust_log {
            c.env("RUST_LOG", v);
        }
        c.output().expect("nodefall runs")
    };
    // Default: no debug lines; -v: nodefall's debug lines, as plain text.
    let quiet_by_default = run(&[], None);
    assert_eq!(quiet_by_default.status.code(), Some(0));
    assert!(!text(&quiet_by_default.stderr).contains(debug_line));
    let verbose = run(&["-v"], None);
    let err = text(&verbose.stderr);
    assert!(err.contains(debug_line) && !err.contains("DEBUG"), "{err}");
    // The same through RUST_LOG, and as JSON objects.
    assert!(text(&run(&[], Some("nodefall=debug")).stderr).contains(debug_line));
    let json = run(&["-v", "--log-format", "json"], None);
    let line = text(&json.stderr)
        .lines()
        .find(|l| l.contains(debug_line))
        .map(str::to_owned)
        .expect("the debug line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON object per line");
    assert_eq!(v["level"], "DEBUG", "{line}");
    assert!(
        v["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(debug_line))
    );
    // --quiet and -v contradict each other; a bad RUST_LOG is named.
    assert_eq!(run(&["-q", "-v"], None).status.code(), Some(2));
    let bad = run(&[], Some("nodefall=loud"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("RUST_LOG"),
        "{}",
        text(&bad.stderr)
    );
    // An error in JSON mode is one JSON object, printed once.
    let out = nodefall(&["--log-format", "json", "plan", "scenarios/nope.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    let errors: Vec<serde_json::Value> = err
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["level"] == "ERROR")
        .collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0]["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nope.yaml"))
    );
}

#[test]
fn a_flag_of_another_backend_is_bad_input_before_anything_runs() {
    let state = tempfile::tempdir().expect("temp dir");
    for (args, flag) in [
        (
            &[
                "scenario",
                "scenarios/statefulset-nfs.yaml",
                "--backend",
                "kind",
                "--cluster",
                "c",
            ][..],
            "--cluster is for the sim backend, and this run uses `kind` (from --backend)",
        ),
        (
            &[
                "scenario",
                "scenarios/statefulset-nfs.yaml",
                "--keep",
                "--domain",
                "w1=vm1",
            ],
            "--domain is for the libvirt or vagrant backends, and this run uses `sim`",
        ),
        (
            &[
                "scenario",
                "scenarios/statefulset-nfs.yaml",
                "--context",
                "prod",
            ],
            "--context is for the kind, libvirt, command or vagrant backends",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_nodefall"))
            .args(args)
            .env("NODEFALL_STATE_DIR", state.path())
            .env("NODEFALL_JOURNAL_DIR", state.path().join("runs"))
            .output()
            .expect("nodefall runs");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        // Refused before anything ran: no journal, no cluster.
        assert!(!state.path().join("runs").exists(), "{args:?}");
    }
}

#[test]
fn predict_write_scenario_wants_exactly_one_node_before_any_cluster_is_read() {
    for args in [
        vec![
            "predict",
            "--write-scenario",
            "x.yaml",
            "--cluster",
            "none-such",
        ],
        vec![
            "predict",
            "w1",
            "w2",
            "--write-scenario",
            "x.yaml",
            "--cluster",
            "none-such",
        ],
    ] {
        let out = nodefall(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("name exactly one node"), "{args:?}: {err}");
        assert!(
            !err.contains("none-such"),
            "the cluster was not looked up: {err}"
        );
    }
}

#[test]
fn predict_for_a_set_refuses_bad_input_before_any_cluster_is_read() {
    for (args, said) in [
        (
            vec!["predict", "--zone", "a", "--fault", "drain"],
            "predict a set going silent",
        ),
        (
            vec!["predict", "--nodes", "zone in (a", "--fault", "pause"],
            "--nodes: `zone in (a` is not a label selector",
        ),
        (
            vec!["predict", "--zone", "--write-scenario", "x.yaml"],
            "name the zone (`--zone ZONE`)",
        ),
    ] {
        let mut args = args;
        args.extend(["--cluster", "none-such"]);
        let out = nodefall(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(
            !err.contains("none-such"),
            "the cluster was not looked up: {err}"
        );
    }
    // a zone and named nodes at once: clap says so
    let out = nodefall(&["predict", "w1", "--zone", "a"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot be used with"),
        "{}",
        text(&out.stderr)
    );
}
