//! `report render` over arbitrary numbers (issue 30, item 5): a valid
//! `result.json` whose times and other figures are replaced by any numbers
//! (i64's ends, 2^53, negatives, fractions) is either rendered or refused
//! with an error naming the file, never a panic, never a hang.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking"
)]

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::Value;

use nodefall::report;

const FIXTURES: [&str; 3] = [
    "tests/fixtures/results/statefulset-pass.json",
    "tests/fixtures/results/deployment-aborted.json",
    "tests/fixtures/results/clients-probe.json",
];

/// Far above a render of these files (well under a second in a debug build).
const DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// The path of every number in `v`.
fn numbers(v: &Value, at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match v {
        Value::Number(_) => out.push(at.clone()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(Seg::Index(i));
                numbers(item, at, out);
                at.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                at.push(Seg::Key(k.clone()));
                numbers(item, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn at_mut<'a>(v: &'a mut Value, path: &[Seg]) -> &'a mut Value {
    path.iter().fold(v, |v, seg| match seg {
        Seg::Key(k) => &mut v[k.as_str()],
        Seg::Index(i) => &mut v[*i],
    })
}

/// Whole numbers, weighted towards the edges: run-sized times, the largest
/// a result may hold (2^53), i64's ends, anything.
fn number() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -1_000_000_i64..10_000_000,
        3 => -(1_i64 << 53)..=(1_i64 << 53),
        2 => prop::sample::select(vec![
            i64::MIN,
            i64::MAX,
            -(1 << 53),
            (1 << 53) - 1,
            1 << 53,
            -1,
            0
        ]),
        1 => any::<i64>(),
    ]
}

/// `n` in the shape of the number it replaces, so most files still parse:
/// a fraction stays a fraction, a count or a size stays unsigned.
fn like(old: &Value, n: i64) -> Value {
    if old.is_f64() {
        Value::from(n as f64 / 7.0)
    } else if old.is_u64() {
        Value::from(n.unsigned_abs())
    } else {
        Value::from(n)
    }
}

/// Reads and renders `file` into `out` on another thread, with a deadline.
fn render(file: PathBuf, out: PathBuf) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let result = report::read_result(&nodefall::disk::Disk, &file)
            .and_then(|r| report::write_rendered(&nodefall::disk::Disk, &out, &r).map(|_| ()))
            .map_err(|e| e.to_string());
        let _ = tx.send(result);
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(result) => {
            worker.join().unwrap();
            result
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            // no shrinking from here: each try would leave another thread
            // spinning (and growing: 1.5 GB in 2 minutes before the fix)
            eprintln!("render did not finish in {DEADLINE:?}; stopping the test process");
            std::process::exit(1);
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it ends"),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_numbers_render_or_are_refused_naming_the_file(
        fixture in 0..FIXTURES.len(),
        finished in number(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), number()), 1..12),
    ) {
        let text = std::fs::read_to_string(FIXTURES[fixture]).unwrap();
        let mut v: Value = serde_json::from_str(&text).unwrap();
        let mut paths = Vec::new();
        numbers(&v, &mut Vec::new(), &mut paths);
        v["finished"] = Value::from(finished);
        for (which, n) in edits {
            let path: &Vec<Seg> = which.get(&paths);
            let leaf = at_mut(&mut v, path);
            *leaf = like(leaf, n);
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("result.json");
        std::fs::write(&file, v.to_string()).unwrap();
        match render(file.clone(), dir.path().join("out")) {
            Ok(()) => {
                let svg = std::fs::read_to_string(dir.path().join("out/timeline.svg")).unwrap();
                prop_assert!(svg.ends_with("</svg>\n") || svg.ends_with("</svg>"));
                prop_assert!(Path::new(&dir.path().join("out/report.md")).exists());
            }
            Err(e) => prop_assert!(
                e.contains(&file.display().to_string()),
                "the error names the file: {e}"
            ),
        }
    }
}
