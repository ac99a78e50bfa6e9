//! Reports of a run: `result.json` (the full record), `report.md` and `junit.xml`.

pub mod result;

pub use result::RunResult;

use std::path::Path;

/// Placeholder until the renderers land: writes `result.json` only.
#[derive(Debug, thiserror::Error)]
#[error("writing {}", .path.display())]
pub struct Error {
    path: std::path::PathBuf,
    #[source]
    source: std::io::Error,
}

pub fn run_dir_name(scenario: &str, started_at: jiff::Timestamp) -> String {
    format!("{scenario}-{}", started_at.strftime("%Y%m%dT%H%M%SZ"))
}

pub fn write_all(dir: &Path, result: &RunResult) -> Result<(), Error> {
    let err = |source| Error {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let json = serde_json::to_string_pretty(result).map_err(|e| err(std::io::Error::other(e)))?;
    std::fs::write(dir.join("result.json"), json).map_err(err)
}
