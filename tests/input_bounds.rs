//! Nothing a user types hangs nodefall or makes it grow without bound
//! (issue 30, item 5): absurd times in a `result.json`, huge or very long
//! scenarios, durations that overflow. Each is refused with an error naming
//! the file (exit 2, bad input) or handled, within seconds.
//!
//! The binary is run with a deadline: a hang fails the test (the child is
//! killed) instead of hanging the suite.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodefall::{plan, scenario};

/// Far above what any of these takes once fixed; far below what they took.
const DEADLINE: Duration = Duration::from_secs(10);

struct Ran {
    code: Option<i32>,
    stderr: String,
}

/// Runs the binary; fails the test if it has not exited by [`DEADLINE`].
fn nodefall(args: &[&str]) -> Ran {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodefall"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // stderr is small here; read it on a thread so a full pipe cannot block the child
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Ran {
                code: status.code(),
                stderr: reader.join().unwrap(),
            };
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nodefall {} did not finish in {DEADLINE:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const HEAD: &str = "name: big\nnamespace: big-test\ntarget: {mostPods: app=web}\nsteps:\n";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn render_of_a_result_finished_at_i64_max_is_refused_at_once_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("tests/fixtures/results/statefulset-pass.json").unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["finished"] = serde_json::json!(i64::MAX);
    let file = write(dir.path(), "result.json", &v.to_string());
    let ran = nodefall(&["report", "render", &file]);
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(ran.stderr.contains(&file), "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("`finished` is 9223372036854775807, beyond any figure a run records (they stay within ±9007199254740991)"),
        "{}",
        ran.stderr
    );
    assert!(!dir.path().join("timeline.svg").exists());
}

#[test]
fn render_of_a_run_spanning_285_thousand_years_draws_a_few_ticks() {
    // the largest times a result may hold: a chart, quickly, with a few ticks
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("tests/fixtures/results/statefulset-pass.json").unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["finished"] = serde_json::json!(9_007_199_254_740_991_i64);
    v["steps"][0]["started"] = serde_json::json!(-9_007_199_254_740_991_i64);
    let file = write(dir.path(), "result.json", &v.to_string());
    let ran = nodefall(&["report", "render", &file]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let svg = std::fs::read_to_string(dir.path().join("timeline.svg")).unwrap();
    let ticks = svg.matches("text-anchor=\"middle\"").count();
    assert!((1..=20).contains(&ticks), "{ticks} ticks");
}

#[test]
fn a_scenario_file_over_the_size_limit_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    // valid YAML all the way (comments), 5 MiB
    let mut text = String::from(HEAD);
    text.push_str("  - fault: pause-vm\n");
    let line = format!("# {}\n", "x".repeat(97));
    while text.len() < 5 << 20 {
        text.push_str(&line);
    }
    let file = write(dir.path(), "huge.yaml", &text);
    for cmd in ["validate", "plan"] {
        let ran = nodefall(&[cmd, &file]);
        assert_eq!(ran.code, Some(2), "{cmd}: {}", ran.stderr);
        assert!(
            ran.stderr.contains(&format!("{file}: 5.0 MiB (")),
            "{cmd}: {}",
            ran.stderr
        );
        assert!(
            ran.stderr.contains(
                "bytes), over the limit of 4.0 MiB (4,194,304 bytes) for a scenario file"
            ),
            "{cmd}: {}",
            ran.stderr
        );
    }
}

#[test]
fn a_scenario_with_too_many_steps_is_refused_at_its_steps() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(HEAD);
    // the 131,578 steps of the issue (which did not finish in 120 s)
    for _ in 0..131_578 / 2 {
        text.push_str("  - fault: pause-vm\n  - fault: resume-vm\n");
    }
    let file = write(dir.path(), "long.yaml", &text);
    let ran = nodefall(&["validate", &file]);
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    // read no further than step #50,001, on line 4 + 50,001
    assert!(
        ran.stderr.contains(&format!(
            "{file}:50005:5: the scenario has more than 50000 steps (step #50001 starts here), over the limit"
        )),
        "{}",
        ran.stderr
    );
}

#[test]
fn durations_that_would_overflow_are_refused_not_added_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(HEAD);
    text.push_str("  - fault: pause-vm\n");
    for _ in 0..5 {
        text.push_str("  - action: {wait: {duration: 2000000000000h}}\n");
    }
    text.push_str("  - expect: {pods: app=web, ready: all, within: grace * 1e300}\n");
    let file = write(dir.path(), "overflow.yaml", &text);
    for cmd in ["validate", "plan"] {
        let ran = nodefall(&[cmd, &file]);
        assert_eq!(ran.code, Some(2), "{cmd}: {}", ran.stderr);
        assert!(
            ran.stderr.contains(&format!(
                "{file}:6:31: `2000000000000h` is longer than the limit of 168h (7 days)"
            )),
            "{cmd}: {}",
            ran.stderr
        );
        assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    }
    // a product of a profile variable, too
    let file = write(
        dir.path(),
        "product.yaml",
        &format!(
            "{HEAD}  - fault: pause-vm\n  - expect: {{pods: app=web, ready: all, within: grace * 1e300}}\n"
        ),
    );
    let ran = nodefall(&["validate", &file]);
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("`grace * 1e300` is 2562047788015h12m55.807s under the `default` profile, longer than the limit of 168h (7 days)"),
        "{}",
        ran.stderr
    );
}

/// A scenario of `n` expectations and no fault: T0 was looked for again at
/// every step, so checking the plan took time quadratic in the steps (20,000
/// steps: 5 s in a debug build; 131,578 did not finish in 120 s).
fn expectations_only(n: usize) -> String {
    let mut text = String::from(HEAD);
    for i in 0..n {
        let _ = writeln!(
            text,
            "  - expect: {{pods: app=web, ready: all, within: {}s}}",
            i % 50 + 1
        );
    }
    text
}

#[test]
fn planning_is_linear_in_the_steps() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "many.yaml", &expectations_only(20_000));
    let checked =
        scenario::load(&nodefall::disk::Disk, Path::new(&file)).unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    plan::check_all_profiles(&checked).unwrap_or_else(|e| panic!("{e}"));
    let took = start.elapsed();
    eprintln!("20,000 steps planned in {took:?}");
    // linear: tens of ms in a debug build; quadratic: 3 s
    assert!(
        took < Duration::from_secs(1),
        "20,000 steps planned in {took:?}"
    );
}
