//! Statistics over runs (pure): the figures of a run, the aggregate of
//! repeated runs, and the comparison of two runs or aggregates.

pub mod aggregate;
pub mod compare;
pub mod figures;
pub mod summary;

use std::path::{Path, PathBuf};

use crate::files::Files;

pub use aggregate::{Aggregate, Stat};
pub use compare::{Comparison, Gate, Limit, Side};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read run result {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is neither a nodefall result.json nor an aggregate.json")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path} is an aggregate of schema version {found}; this nodefall reads version {expected}"
    )]
    SchemaVersion {
        path: PathBuf,
        found: u64,
        expected: u32,
    },
    #[error(transparent)]
    Result(#[from] crate::record::read::Error),
    #[error(
        "different scenarios (`{base}` and `{new}`): their figures may not be comparable; \
         compare runs of one scenario, or pass --allow-different-scenarios"
    )]
    NotComparable { base: String, new: String },
}

/// A `result.json` or an `aggregate.json`, as one side of a comparison
/// (an aggregate stands as its `stat`).
pub fn read_side(files: &dyn Files, path: &Path, stat: Stat) -> Result<Side, Error> {
    let source = path.display().to_string();
    match read_aggregate(files, path)? {
        Some(a) => Ok(Side::of_aggregate(&source, &a, stat)),
        None => Ok(Side::of_run(
            &source,
            &crate::record::read::read_result(files, path)?,
        )),
    }
}

/// The aggregate in `path`, or `None` when the file is something else (a
/// `result.json`, to be read as one).
pub fn read_aggregate(files: &dyn Files, path: &Path) -> Result<Option<Aggregate>, Error> {
    let text = crate::record::bounds::read_limited(files, path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let parse_error = |source| Error::Parse {
        path: path.to_owned(),
        source,
    };
    let head = crate::record::read::Head::of(&text).map_err(parse_error)?;
    if head.kind() != Some(aggregate::KIND) {
        return Ok(None);
    }
    let found = head.schema_version().unwrap_or(0);
    if found != u64::from(aggregate::SCHEMA_VERSION) {
        return Err(Error::SchemaVersion {
            path: path.to_owned(),
            found,
            expected: aggregate::SCHEMA_VERSION,
        });
    }
    let a: Aggregate = serde_json::from_str(&text).map_err(parse_error)?;
    Ok(Some(a))
}
