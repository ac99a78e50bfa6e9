//! The bad-scenario corpus: every file under tests/fixtures/bad/ must fail
//! validation with exactly the error in its `.expected` twin, naming
//! `file:line:column`. Run with `BLESS=1` to rewrite the expectations after a
//! deliberate wording change (then review the diff).

use std::fs;
use std::path::{Path, PathBuf};

use nodefall::{plan, scenario};

fn validate(path: &Path) -> Result<(), String> {
    let checked = scenario::load(&nodefall::disk::Disk, path).map_err(|e| e.to_string())?;
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
        // the file is the scenario, or a manifest it applies (under the corpus directory)
        let first = actual.lines().next().unwrap_or_default();
        let prefix = format!("{}:", path.display());
        let position = first
            .strip_prefix(&prefix)
            .or_else(|| {
                first
                    .strip_prefix("tests/fixtures/bad/manifests/")
                    .and_then(|rest| rest.split_once(".yaml:"))
                    .map(|(_, rest)| rest)
            })
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
fn a_scenario_with_a_byte_order_mark_loads() {
    let path = Path::new("tests/fixtures/bom-scenario.yaml");
    let raw = fs::read(path).expect("fixture exists");
    assert!(
        raw.starts_with(b"\xef\xbb\xbf"),
        "the fixture must keep its BOM"
    );
    let checked = scenario::load(&nodefall::disk::Disk, path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(checked.name, "bom");
    assert_eq!(checked.namespace, "bom-test");
    // positions are counted as an editor shows them: the BOM takes no column
    assert_eq!(
        checked.source.spans.value("namespace"),
        Some(scenario::spans::Pos { line: 2, col: 12 })
    );
    // its manifest has a BOM too, and is read object by object
    let objects: Vec<(String, String, String, Option<&str>)> = checked.setup.apply[0]
        .docs
        .iter()
        .map(|d| {
            (
                d.api_version.clone(),
                d.kind.clone(),
                d.name.clone(),
                d.applied_namespace(&checked.namespace),
            )
        })
        .collect();
    assert_eq!(
        objects,
        vec![
            (
                "v1".into(),
                "ConfigMap".into(),
                "settings".into(),
                Some("bom-test")
            ),
            (
                "scheduling.k8s.io/v1".into(),
                "PriorityClass".into(),
                "bom-low".into(),
                None
            ),
        ]
    );
    assert_eq!(checked.setup.apply[0].docs[1].line, 7);
    plan::check_all_profiles(&checked).unwrap_or_else(|e| panic!("{e}"));
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
