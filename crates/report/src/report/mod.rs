//! Reports of a run: `result.json` (the full record), `report.md` (with
//! `timeline.svg`) and `junit.xml`, written into one directory per run and
//! re-rendered from `result.json`; the aggregate of repeated runs
//! ([`aggregate`]) and the comparison of two ([`compare`]).

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
mod overview;
mod pods;
pub mod predict;
mod probes;
mod remediation;
mod steps;
pub mod summary;
pub mod svg;
mod timeline_section;
mod timing;
mod volumes;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::files::Files;
use crate::record::RunResult;

pub use audit::audit_line;

/// The file names inside a run directory.
pub const RESULT_JSON: &str = "result.json";
pub const REPORT_MD: &str = "report.md";
pub const JUNIT_XML: &str = "junit.xml";
/// The run's timeline, embedded in `report.md`.
pub const TIMELINE_SVG: &str = "timeline.svg";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create report directory {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serialise the run result for {path}")]
    Serialize {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// Reading a `result.json` failed.
    #[error(transparent)]
    Result(#[from] crate::record::read::Error),
}

impl Error {
    /// True when the input file is at fault (missing, not a result, wrong
    /// version), rather than the machine writing the reports.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Error::Result(_))
    }
}

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

fn write(files: &dyn Files, path: PathBuf, contents: &str) -> Result<(), Error> {
    crate::files::write(files, &path, contents.as_bytes())
        .map_err(|source| Error::Write { path, source })
}

fn create_dir(files: &dyn Files, dir: &Path) -> Result<(), Error> {
    files
        .create_dir_all(dir)
        .map_err(|source| Error::CreateDir {
            path: dir.to_path_buf(),
            source,
        })
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
