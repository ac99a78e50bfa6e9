//! Reading a `result.json` back: its size and numbers bounded (a damaged
//! or hostile file is refused, not trusted), its schema version checked,
//! older versions upgraded.

use std::path::{Path, PathBuf};

use super::bounds;
use super::{RunResult, SCHEMA_VERSION};
use crate::files::Files;

/// Why a `result.json` could not be read: always the input's fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read run result {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a nodefall run result")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path} has result schema version {found}, but this nodefall reads versions 1 to {expected}; \
         render it with the nodefall version that wrote it"
    )]
    SchemaVersion {
        path: PathBuf,
        found: u64,
        expected: u32,
    },
    #[error(
        "{path}: `{field}` is {value}, beyond any figure a run records (they stay within ±{}); \
         the file is damaged or was not written by nodefall",
        bounds::MAX_NUMBER
    )]
    OutOfRange {
        path: PathBuf,
        field: String,
        value: String,
    },
}

/// What a JSON file of nodefall's says it is (`kind`, `schemaVersion`),
/// read alone: a whole 10,000-pod result as a `Value` took about 120 MB.
#[derive(Debug, serde::Deserialize)]
pub struct Head {
    kind: Option<serde_json::Value>,
    #[serde(rename = "schemaVersion")]
    schema_version: Option<serde_json::Value>,
}

impl Head {
    pub fn of(text: &str) -> Result<Head, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// `kind`, when it is a string.
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_ref().and_then(serde_json::Value::as_str)
    }

    /// `schemaVersion`, when it is a whole number.
    pub fn schema_version(&self) -> Option<u64> {
        self.schema_version
            .as_ref()
            .and_then(serde_json::Value::as_u64)
    }
}

/// Reads a `result.json` of this schema version or an older one (version 1
/// upgraded with [`RunResult::upgrade_from_v1`]; version 2 needs nothing),
/// refusing others by name.
pub fn read_result(files: &dyn Files, path: &Path) -> Result<RunResult, Error> {
    let text = bounds::read_limited(files, path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let parse_error = |source| Error::Parse {
        path: path.to_path_buf(),
        source,
    };
    // The version first, so a newer layout is reported as such, not as a
    // field error.
    let head = Head::of(&text).map_err(parse_error)?;
    if let Some(found) = head.schema_version()
        && found != u64::from(SCHEMA_VERSION)
        && !(1..SCHEMA_VERSION).contains(&u32::try_from(found).unwrap_or(u32::MAX))
    {
        return Err(Error::SchemaVersion {
            path: path.to_path_buf(),
            found,
            expected: SCHEMA_VERSION,
        });
    }
    let mut result: RunResult = serde_json::from_str(&text).map_err(parse_error)?;
    if let Some((field, value)) = bounds::out_of_range(&text) {
        return Err(Error::OutOfRange {
            path: path.to_path_buf(),
            field,
            value,
        });
    }
    match result.schema_version {
        1 => result.upgrade_from_v1(),
        // schemas 3 to 7 only added what older files cannot hold
        2..=6 => result.schema_version = SCHEMA_VERSION,
        _ => {}
    }
    Ok(result)
}
