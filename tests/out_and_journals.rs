//! What a user types or leaves on disk never costs a run's results or
//! blocks a recovery (issue 30, items 3 and 4), through the binary:
//!
//! - a report directory (`--out`) that cannot be written is refused as bad
//!   input before any cluster starts or any journal is opened;
//! - a report that cannot be written at the end of a run (its directory
//!   went away during it) goes to the state directory's fallback, named in
//!   the error, and the run's journal is closed all the same;
//! - a damaged file in the journal directory (not UTF-8, empty, a corrupt
//!   line, a directory) is named and skipped by `nodefall recover`, which
//!   recovers the rest, and by the warning about killed runs, which still
//!   warns.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use nix::sys::signal::Signal;
use nodefall::record::RunVerdict;
use nodefall::runner::journal::{BackendRef, Header, KubeRef, Record, Undo};
use nodefall::scenario::model::Cleanup;

#[path = "support/cli_run.rs"]
mod cli_run;

use cli_run::{DEPLOYMENT, Dirs, Running};

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Runs `nodefall ARGS` and expects it to end on its own within `within`;
/// a run still going then is interrupted (so it cleans up) and fails the
/// test: the refusal had to come before anything started.
fn refused_within(d: &Dirs, args: &[&str], within: Duration) -> (Option<i32>, String) {
    let mut run = Running::start(d.command(args));
    let began = Instant::now();
    while began.elapsed() < within {
        if run.child.try_wait().unwrap().is_some() {
            return run.finish(Duration::from_secs(10));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    run.signal(Signal::SIGINT);
    let (code, log) = run.finish(Duration::from_secs(240));
    panic!(
        "{args:?} was still running after {within:?} (exit {code:?} once interrupted): it \
         started instead of refusing\n{log}"
    );
}

#[test]
fn an_unwritable_out_is_bad_input_before_any_cluster_or_journal() {
    let d = Dirs::new();
    let file = d.write("not-a-dir", "a file where the reports would go\n");
    let file = file.to_str().unwrap();
    let under_file = format!("{file}/reports");
    let sim = repo("scenarios/statefulset-nfs.yaml");
    let kind = repo("scenarios/kind-pause-worker.yaml");
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (
            vec!["scenario", &sim, "--out", file],
            file,
            "is not a directory",
        ),
        (
            vec!["scenario", &sim, "--out", &under_file],
            &under_file,
            "cannot create the report directory: Not a directory",
        ),
        (
            vec!["scenario", &sim, "--out", "/proc/nodefall-reports"],
            "/proc/nodefall-reports",
            "cannot create the report directory",
        ),
        // A series writes its directory under --out too.
        (
            vec!["scenario", &sim, "--repeat", "2", "--out", file],
            file,
            "is not a directory",
        ),
        // A backend on machines: refused before the cluster is looked up.
        (
            vec!["scenario", &kind, "--out", file],
            file,
            "is not a directory",
        ),
    ];
    for (args, path, why) in cases {
        let began = Instant::now();
        let (code, log) = refused_within(&d, &args, Duration::from_secs(30));
        assert_eq!(code, Some(2), "{args:?}\n{log}");
        assert!(
            log.contains(&format!("--out {path}: {why}")),
            "{args:?}: the message names the path and why\n{log}"
        );
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{args:?} took {:?}",
            began.elapsed()
        );
        // Nothing started: no journal, no cluster, no process.
        assert_eq!(
            files_in(d.journals.path()),
            Vec::<PathBuf>::new(),
            "{args:?}\n{log}"
        );
        assert_eq!(
            files_in(d.state.path()),
            Vec::<PathBuf>::new(),
            "{args:?}\n{log}"
        );
        assert_eq!(d.orphans(), Vec::<String>::new(), "{args:?}\n{log}");
    }
    // The file is as it was.
    assert_eq!(
        std::fs::read_to_string(file).unwrap(),
        "a file where the reports would go\n"
    );
}

#[test]
fn a_report_that_cannot_be_written_at_the_end_goes_to_the_fallback_and_the_journal_closes() {
    let d = Dirs::new();
    let xdg = tempfile::tempdir().unwrap();
    d.write("web.yaml", DEPLOYMENT);
    let scenario = d.write(
        "late.yaml",
        "name: late\nnamespace: late\nsetup:\n  apply: web.yaml\n  waitReady: {deployment: web, replicas: 2, timeout: 1m}\n\
         target: {mostPods: app=web}\nsteps:\n  - action: {cordon: {node: target}}\n\
         \x20 - action: {wait: {duration: 4s}}\n  - expect: {node: target, exists: true, within: 5s}\ncleanup: always\n",
    );
    let out = d.files.path().join("reports");
    std::fs::create_dir(&out).unwrap();
    let mut cmd = d.command(&[
        "scenario",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    cmd.env("XDG_STATE_HOME", xdg.path());
    let mut run = Running::start(cmd);
    // While the steps run, the report directory is replaced by a file.
    run.wait_for("#2", Duration::from_secs(180));
    // (No panic before the run has ended: it cleans up after itself.)
    let swapped = std::fs::remove_dir_all(&out)
        .and_then(|()| std::fs::write(&out, "not a directory any more\n"));
    let (code, log) = run.finish(Duration::from_secs(240));
    swapped.unwrap();

    // An error that names both places; the reports are not where asked.
    assert_eq!(code, Some(3), "{log}");
    assert!(
        log.contains("the report could not be written where asked"),
        "{log}"
    );
    let fallback = xdg.path().join("nodefall").join("reports");
    let dirs = files_in(&fallback);
    assert_eq!(dirs.len(), 1, "one report in {}\n{log}", fallback.display());
    assert!(
        log.contains(&format!("written to {} instead", dirs[0].display())),
        "{log}"
    );
    // It is the whole report of the run, which passed.
    let r =
        nodefall::report::read_result(&nodefall::disk::Disk, &dirs[0].join("result.json")).unwrap();
    assert_eq!(r.verdict, RunVerdict::Pass, "{log}");
    for f in ["report.md", "junit.xml"] {
        assert!(dirs[0].join(f).is_file(), "{f}\n{log}");
    }
    // The run's undo work was done and its journal closed: nothing for a
    // later run to warn about.
    assert_eq!(d.unfinished(), Vec::<PathBuf>::new(), "{log}");
    assert_eq!(
        files_in(&d.journals.path().join("closed")).len(),
        1,
        "{log}"
    );
    let again = d
        .command(&[
            "scenario",
            scenario.to_str().unwrap(),
            "--cluster",
            "nope",
            "--out",
            d.out.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let again = String::from_utf8_lossy(&again.stderr).into_owned();
    assert!(!again.contains("were killed"), "{again}");
    // Its throwaway cluster went too.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.orphans().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(d.orphans(), Vec::<String>::new(), "{log}");
    assert_eq!(files_in(d.state.path()), Vec::<PathBuf>::new(), "{log}");
}

// ----- damaged journals -----

/// The journal of a killed run (its process is gone) that started a
/// throwaway sim cluster since removed: recovering it settles its entry.
fn healthy_journal(d: &Dirs, run: &str) -> PathBuf {
    let header = Header {
        run: run.to_owned(),
        // No such process.
        pid: i32::MAX,
        pid_start: 0,
        started_at: Timestamp::UNIX_EPOCH,
        scenario: "healthy".into(),
        file: "healthy.yaml".into(),
        namespace: "healthy".into(),
        cleanup: Cleanup::Always,
        backend: BackendRef::Sim {
            root: d.state.path().to_owned(),
            cluster: "gone".into(),
            throwaway: true,
        },
        kube: KubeRef::default(),
    };
    let lines = [
        Record::Begin(Box::new(header)),
        Record::Will {
            id: 1,
            undo: Undo::Cluster {
                root: d.state.path().to_owned(),
                name: "gone".into(),
            },
        },
    ];
    let text: String = lines
        .iter()
        .map(|r| format!("{}\n", serde_json::to_string(r).unwrap()))
        .collect();
    let path = d.journals.path().join(format!("{run}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Files under journals' names that are not readable journals, sorted
/// before the healthy one, each with what the message says is wrong.
fn damaged_journals(d: &Dirs) -> Vec<(PathBuf, &'static str)> {
    let dir = d.journals.path();
    let binary = dir.join("0-binary.jsonl");
    std::fs::write(&binary, b"\xff\xfe\x00\x01binary\n\x80\x81\n").unwrap();
    let empty = dir.join("1-empty.jsonl");
    std::fs::write(&empty, b"").unwrap();
    let torn = dir.join("2-torn.jsonl");
    let begin = std::fs::read_to_string(healthy_journal(d, "2-torn")).unwrap();
    let begin = begin.lines().next().unwrap().to_owned();
    std::fs::write(
        &torn,
        format!("{begin}\n{{\"op\":\"will\",\"id\":1,\"und\n{{\"op\":\"done\",\"id\":1,\"how\":\"reverted\"}}\n"),
    )
    .unwrap();
    let folder = dir.join("3-folder.jsonl");
    std::fs::create_dir(&folder).unwrap();
    vec![
        (binary, "line 1: not UTF-8 text"),
        (empty, "empty"),
        (torn, "line 2: "),
        (folder, "not a regular file"),
    ]
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn recover_names_and_skips_damaged_journals_and_recovers_the_rest() {
    let d = Dirs::new();
    let damaged = damaged_journals(&d);
    let healthy = healthy_journal(&d, "z-healthy");
    let out = d.command(&["recover"]).output().unwrap();
    let log = text(&out);
    // The healthy run was recovered and its journal closed.
    assert!(log.contains("recovering z-healthy"), "{log}");
    assert!(
        log.contains("tear down throwaway sim cluster gone: ok"),
        "{log}"
    );
    assert!(!healthy.exists(), "{log}");
    assert!(
        d.journals
            .path()
            .join("closed")
            .join("z-healthy.jsonl")
            .is_file(),
        "{log}"
    );
    // Each damaged one is named with what is wrong, and left where it is.
    for (path, why) in &damaged {
        let line = named(&log, path, why);
        assert!(line.contains("skipped"), "{line}\n{log}");
        assert!(path.exists(), "{}", path.display());
    }
    // Something is left that recover could not revert.
    assert_eq!(out.status.code(), Some(3), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn recover_of_a_healthy_run_works_whatever_else_is_in_the_directory() {
    let d = Dirs::new();
    let damaged = damaged_journals(&d);
    healthy_journal(&d, "z-healthy");
    let out = d.command(&["recover", "z-healthy"]).output().unwrap();
    let log = text(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("done; journal closed"), "{log}");
    assert!(!log.contains("0-binary"), "only the run asked for\n{log}");
    // A damaged one asked for by its path is named, not recovered.
    let (binary, why) = &damaged[0];
    let out = d
        .command(&["recover", binary.to_str().unwrap()])
        .output()
        .unwrap();
    let log = text(&out);
    assert_eq!(out.status.code(), Some(3), "{log}");
    assert!(log.contains(why), "{log}");
}

#[test]
fn the_killed_run_warning_still_warns_and_names_damaged_journals() {
    let sim = repo("scenarios/statefulset-nfs.yaml");
    // One damaged file alone, then beside a killed run's journal.
    let d = Dirs::new();
    std::fs::write(
        d.journals.path().join("0-binary.jsonl"),
        b"\xff\xfe\n\x80\n",
    )
    .unwrap();
    let scenario = |d: &Dirs| {
        d.command(&[
            "scenario",
            &sim,
            "--cluster",
            "nope",
            "--out",
            d.out.path().to_str().unwrap(),
        ])
        .output()
        .unwrap()
    };
    let out = scenario(&d);
    let log = text(&out);
    assert_eq!(out.status.code(), Some(2), "--cluster nope\n{log}");
    assert!(log.contains("1 earlier run(s) were killed"), "{log}");
    assert!(log.contains("0-binary.jsonl"), "{log}");

    let d = Dirs::new();
    let damaged = damaged_journals(&d);
    let healthy = healthy_journal(&d, "z-healthy");
    let out = scenario(&d);
    let log = text(&out);
    assert!(
        log.contains(&format!("{} earlier run(s) were killed", damaged.len() + 1)),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "{}: still to undo: tear down throwaway sim cluster gone",
            healthy.display()
        )),
        "{log}"
    );
    for (path, why) in &damaged {
        named(&log, path, why);
    }
    assert!(log.contains("run `nodefall recover`"), "{log}");
}

/// The line of `log` naming the damaged journal `path`, which says `why`.
fn named<'a>(log: &'a str, path: &std::path::Path, why: &str) -> &'a str {
    let line = log
        .lines()
        .find(|l| l.contains(&format!("journal {}", path.display())))
        .unwrap_or_else(|| panic!("{} not named\n{log}", path.display()));
    assert!(line.contains(why), "{why}: {line}\n{log}");
    line
}
