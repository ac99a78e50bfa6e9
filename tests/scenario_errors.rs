//! The bad-scenario corpus: every file under tests/fixtures/bad/ must fail
//! validation with exactly the error in its `.expected` twin, naming
//! `file:line:column`. Run with `BLESS=1` to rewrite the expectations after a
//! deliberate wording change (then review the diff).

use std::fs;
use std::path::{Path, PathBuf};

use nodefall::{plan, scenario};

fn validate(path: &Path) -> Result<(), String> {
    let checked = scenario::load(path).map_err(|e| e.to_string())?;
    plan::check_all_profiles(&checked).map_err(|e| e.to_string())
}

fn corpus() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir("tests/fixtures/bad")
        .expect("tests/fixtures/bad exists")
        .map(|e| e.expect("readable dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn corpus_is_large_enough() {
    assert!(corpus().len() >= 15, "keep at least 15 malformed scenarios");
}

#[test]
fn every_bad_scenario_fails_with_its_expected_error() {
    let bless = std::env::var_os("BLESS").is_some();
    let mut mismatches = Vec::new();
    for path in corpus() {
        let expected_path = path.with_extension("expected");
        let actual = match validate(&path) {
            Ok(()) => format!("<no error for {}>", path.display()),
            Err(e) => e,
        };
        if bless {
            fs::write(&expected_path, format!("{actual}\n")).expect("write .expected");
            continue;
        }
        let expected = fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| panic!("{} has no .expected file", path.display()));
        if expected.trim_end() != actual {
            mismatches.push(format!(
                "{}\n--- expected\n{}\n--- actual\n{actual}",
                path.display(),
                expected.trim_end()
            ));
        }
        let first = actual.lines().next().unwrap_or_default();
        let prefix = format!("{}:", path.display());
        let position = first
            .strip_prefix(&prefix)
            .map(|rest| rest.split(':').take(2).all(|n| n.parse::<u32>().is_ok()));
        assert_eq!(
            position,
            Some(true),
            "{}: error must start with file:line:column, got {first}",
            path.display()
        );
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}

#[test]
fn shipped_scenarios_are_valid() {
    let mut n = 0;
    for entry in fs::read_dir("scenarios").expect("scenarios/ exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            validate(&path).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 5, "the five seed scenarios are shipped");
}
