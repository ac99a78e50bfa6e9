//! Where a run's reports go: the file names inside a run directory, and
//! writing a file or a directory there, with the one error both can end in.
//!
//! A leaf beside `mod.rs`: the writers (`mod.rs` for a run, `aggregate.rs`,
//! `compare.rs`, `predict.rs`) and the sections that name a file (the
//! timeline's image) import it, and it imports none of them.

use std::path::{Path, PathBuf};

use crate::files::Files;

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

/// Writes `contents` to `path`.
pub(super) fn write(files: &dyn Files, path: PathBuf, contents: &str) -> Result<(), Error> {
    crate::files::write(files, &path, contents.as_bytes())
        .map_err(|source| Error::Write { path, source })
}

/// Creates `dir` and its parents.
pub(super) fn create_dir(files: &dyn Files, dir: &Path) -> Result<(), Error> {
    files
        .create_dir_all(dir)
        .map_err(|source| Error::CreateDir {
            path: dir.to_path_buf(),
            source,
        })
}
