//! Reports of a run: `result.json` (the full record), `report.md` (with
//! `timeline.svg`) and `junit.xml`, written into one directory per run and
//! re-rendered from `result.json`; the aggregate of repeated runs
//! ([`aggregate`]) and the comparison of two ([`compare`]).
//!
//! The files import downwards only: [`markdown`] calls the sections of
//! `report.md` in order (one file each: `overview.rs`, `expectations.rs`,
//! `key_metrics.rs`, `pods.rs`, `node_transitions.rs`, `steps.rs`,
//! `timeline_section.rs`, `audit.rs`, `clients.rs`, ...), the sections
//! import the shared helpers of [`format`](mod@format), and what the
//! writers share (the file names, [`Error`]) is in `output.rs`; neither
//! helper file imports a section, and no child imports this file.

pub mod aggregate;
mod audit;
mod clients;
mod commands;
pub mod compare;
mod expectations;
pub mod fidelity;
pub mod format;
mod graceful;
mod guard;
pub mod junit;
mod key_metrics;
pub mod lanes;
pub mod markdown;
mod node_transitions;
mod output;
mod overview;
mod pods;
pub mod predict;
pub mod predict_zone;
mod probes;
mod remediation;
mod rows;
mod steps;
mod storage_lane;
pub mod summary;
pub mod svg;
mod timeline_section;
mod timing;
mod volumes;
mod zones;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::files::Files;
use crate::record::RunResult;
use output::{create_dir, write};

pub use audit::audit_line;
pub use output::{Error, JUNIT_XML, REPORT_MD, RESULT_JSON, TIMELINE_SVG};

/// `<scenario>-<UTC start like 20261121T110425Z>`: the directory of one run.
pub fn run_dir_name(scenario: &str, started_at: Timestamp) -> String {
    let name: String = scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{name}-{}", started_at.strftime("%Y%m%dT%H%M%SZ"))
}

/// Writes `report.md`, `timeline.svg` and `junit.xml` into `dir` (created if missing) and
/// returns the path of `report.md`.
pub fn write_rendered(files: &dyn Files, dir: &Path, result: &RunResult) -> Result<PathBuf, Error> {
    create_dir(files, dir)?;
    let report = dir.join(REPORT_MD);
    write(files, report.clone(), &markdown::render(result))?;
    write(
        files,
        dir.join(TIMELINE_SVG),
        &svg::timeline::render(&lanes::build(result)),
    )?;
    write(files, dir.join(JUNIT_XML), &junit::render(result))?;
    Ok(report)
}

/// Writes `result.json`, `report.md` and `junit.xml` into `dir` (created if missing).
pub fn write_all(files: &dyn Files, dir: &Path, result: &RunResult) -> Result<(), Error> {
    create_dir(files, dir)?;
    let path = dir.join(RESULT_JSON);
    // Streamed to the file: a 10,000-pod run's record is tens of MB as text.
    let write_error = |source| Error::Write {
        path: path.clone(),
        source,
    };
    let mut out = std::io::BufWriter::new(files.create(&path).map_err(write_error)?);
    serde_json::to_writer_pretty(&mut out, result).map_err(|source| Error::Serialize {
        path: path.clone(),
        source,
    })?;
    out.write_all(b"\n")
        .and_then(|()| out.flush())
        .map_err(write_error)?;
    write_rendered(files, dir, result)?;
    Ok(())
}

/// Reads a `result.json` (see [`crate::record::read::read_result`]).
pub fn read_result(files: &dyn Files, path: &Path) -> Result<RunResult, Error> {
    Ok(crate::record::read::read_result(files, path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_dirs_are_named_by_scenario_and_utc_start() {
        let ts: Timestamp = "2026-11-21T11:04:25.118Z".parse().unwrap();
        assert_eq!(
            run_dir_name("statefulset-nfs", ts),
            "statefulset-nfs-20261121T110425Z"
        );
        assert_eq!(run_dir_name("a/b c", ts), "a-b-c-20261121T110425Z");
    }
}
