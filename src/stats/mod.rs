//! Statistics over runs (pure): the figures of a run, the aggregate of
//! repeated runs, and the comparison of two runs or aggregates.

pub mod aggregate;
pub mod compare;
pub mod figures;

use std::path::{Path, PathBuf};

pub use aggregate::{Aggregate, Stat};
pub use compare::{Comparison, Gate, Limit, Side};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read run result {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is neither a nodefall result.json nor an aggregate.json: {source}")]
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
    Result(#[from] crate::report::Error),
    #[error(
        "`{0}` is not a threshold: write NAME=PERCENT% (`nodeNotReady=20%`) or NAME=+AMOUNT \
         (`workloadReadyAgain=+5s`, `maxUnavailable=+1`)"
    )]
    Threshold(String),
    #[error("--threshold {given}: no figure of that name; the figures are: {known}")]
    UnknownFigure { given: String, known: String },
}

impl Error {
    /// True when the input is at fault (exit 2).
    pub fn is_bad_input(&self) -> bool {
        match self {
            Error::Result(e) => e.is_bad_input(),
            _ => true,
        }
    }
}

/// A `result.json` or an `aggregate.json`, as one side of a comparison
/// (an aggregate stands as its `stat`).
pub fn read_side(path: &Path, stat: Stat) -> Result<Side, Error> {
    let source = path.display().to_string();
    match read_aggregate(path)? {
        Some(a) => Ok(Side::of_aggregate(&source, &a, stat)),
        None => Ok(Side::of_run(&source, &crate::report::read_result(path)?)),
    }
}

/// The aggregate in `path`, or `None` when the file is something else (a
/// `result.json`, to be read as one).
pub fn read_aggregate(path: &Path) -> Result<Option<Aggregate>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let parse_error = |source| Error::Parse {
        path: path.to_owned(),
        source,
    };
    let head = crate::report::Head::of(&text).map_err(parse_error)?;
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

/// `NAME=20%`, `NAME=+5s`, `NAME=+1`: a figure's own limit.
pub fn parse_threshold(s: &str) -> Result<(String, Limit), Error> {
    let bad = || Error::Threshold(s.to_owned());
    let (name, limit) = s.split_once('=').ok_or_else(bad)?;
    let Some(def) = figures::find(name.trim()) else {
        return Err(Error::UnknownFigure {
            given: name.trim().to_owned(),
            known: figures::DEFS
                .iter()
                .map(|d| d.name)
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let limit = parse_limit(limit.trim(), def.unit).ok_or_else(bad)?;
    Ok((def.name.to_owned(), limit))
}

/// `20%` or `20` (percent), `+5s`/`5s` (ms figures), `+1` for counts.
fn parse_limit(s: &str, unit: figures::Unit) -> Option<Limit> {
    if let Some(p) = s.strip_suffix('%') {
        let p: f64 = p.trim().parse().ok()?;
        return (p >= 0.0 && p.is_finite()).then_some(Limit::Percent(p));
    }
    let abs = s.strip_prefix('+')?;
    let v = match unit {
        figures::Unit::Ms => crate::scenario::duration::parse_duration(abs)
            .ok()?
            .as_millis() as f64,
        figures::Unit::Count => abs.parse::<u64>().ok()? as f64,
    };
    Some(Limit::Absolute(v))
}

/// `20%` or `20`: `--fail-if-slower`'s percentage.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage (write 20% or 20)"))?;
    if p < 0.0 || !p.is_finite() {
        return Err(format!("`{s}`: the percentage must be 0 or more"));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_per_unit() {
        assert_eq!(
            parse_threshold("nodeNotReady=20%").unwrap(),
            ("nodeNotReady".into(), Limit::Percent(20.0))
        );
        assert_eq!(
            parse_threshold("workloadReadyAgain=+5s").unwrap(),
            ("workloadReadyAgain".into(), Limit::Absolute(5000.0))
        );
        assert_eq!(
            parse_threshold("maxUnavailable=+1").unwrap(),
            ("maxUnavailable".into(), Limit::Absolute(1.0))
        );
        assert!(matches!(
            parse_threshold("nodeNotReady=5s"),
            Err(Error::Threshold(_))
        ));
        let e = parse_threshold("nodeNotReadyy=5%").unwrap_err().to_string();
        assert!(e.contains("nodeNotReady, "), "{e}");
        assert_eq!(parse_percent("20%"), Ok(20.0));
        assert!(parse_percent("-1").is_err());
    }
}
