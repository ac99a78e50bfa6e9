//! `nodefall report summary`: every run under a directory in one line each,
//! for a CI job's summary page and its outputs (the GitHub Action's).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::error::Error;
use super::flags::InvalidFlag;
use super::values;
use super::values::Format;
use crate::exit;
use crate::report;
use crate::stats::summary::{self, Baseline, Input, Outcome};

#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// The runs: a directory searched at any depth for `result.json` and
    /// `aggregate.json` (a `--repeat` series counts as one; the newest of
    /// each scenario counts).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Earlier runs of the same scenarios, found likewise: each scenario is
    /// compared with its baseline run (a series by its median).
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: a recovery figure more than PCT percent slower than
    /// the baseline's fails its scenario (`20%`).
    #[arg(long, value_name = "PCT", value_parser = values::percent, requires = "baseline")]
    pub fail_if_slower: Option<f64>,
    /// Percentage limits ignore differences up to this (run-to-run noise on
    /// small figures): a duration (`500ms`, `2s`) or seconds, up to 24h.
    #[arg(long, value_name = "DURATION", default_value = "0s",
          value_parser = values::duration(values::COMPARE_DELTA))]
    pub min_delta: std::time::Duration,
    /// What to print: Markdown (fit for $GITHUB_STEP_SUMMARY) or JSON (the
    /// verdict, counts and every scenario's figures in ms).
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    pub format: Format,
}

/// Prints the summary; exit 0 when every scenario passed (and none got
/// slower than allowed), else 1.
pub fn run(args: &SummaryArgs) -> Result<ExitCode, Error> {
    let runs = newest(&args.dir)?;
    let baseline = match &args.baseline {
        Some(dir) => Some(Baseline {
            runs: newest(dir)?
                .into_iter()
                .map(|(source, input)| (input.scenario().to_owned(), (source, input)))
                .collect(),
            gate: crate::stats::Gate {
                fail_if_slower: args.fail_if_slower,
                min_delta: args.min_delta.as_secs_f64() * 1000.0,
                per_metric: BTreeMap::new(),
            },
        }),
        None => None,
    };
    let s = summary::summarize(runs, baseline.as_ref());
    let text = match args.format {
        Format::Markdown => report::summary::render(&s),
        Format::Json => {
            let mut t = serde_json::to_string(&s)
                .map_err(|e| InvalidFlag(format!("the summary cannot be written as JSON: {e}")))?;
            t.push('\n');
            t
        }
    };
    super::write_stdout(&text);
    Ok(exit::code(if s.outcome == Outcome::Pass {
        exit::PASS
    } else {
        exit::EXPECTATION_FAILED
    }))
}

/// The newest run (or series) of each scenario under `dir`, with its path.
fn newest(dir: &Path) -> Result<Vec<(String, Input)>, Error> {
    let files = files_named(dir, &["result.json", "aggregate.json"])?;
    // A series' runs are summarised by its aggregate, not one by one.
    let series: Vec<&Path> = files
        .iter()
        .filter(|p| p.ends_with("aggregate.json"))
        .filter_map(|p| p.parent())
        .collect();
    let mut by_scenario: BTreeMap<String, (jiff::Timestamp, String, Input)> = BTreeMap::new();
    for path in &files {
        let in_series = path.ends_with("result.json") && series.iter().any(|s| path.starts_with(s));
        if in_series {
            continue;
        }
        let (started, input) = match crate::stats::read_aggregate(&crate::disk::Disk, path)? {
            Some(a) => (a.series.started_at, Input::Series(Box::new(a))),
            None => {
                let r = report::read_result(&crate::disk::Disk, path)?;
                (r.started_at, Input::Run(Box::new(r)))
            }
        };
        let source = path.display().to_string();
        let newer = by_scenario
            .get(input.scenario())
            .is_none_or(|(t, _, _)| *t < started);
        if newer {
            by_scenario.insert(input.scenario().to_owned(), (started, source, input));
        }
    }
    Ok(by_scenario
        .into_values()
        .map(|(_, source, input)| (source, input))
        .collect())
}

/// Every file under `dir` (any depth) with one of these names; none is
/// `dir`'s fault, refused by name (exit 2).
pub(super) fn files_named(dir: &Path, names: &[&str]) -> Result<Vec<PathBuf>, InvalidFlag> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| InvalidFlag(format!("{}: cannot read the directory: {e}", d.display())))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path
                .file_name()
                .is_some_and(|n| names.iter().any(|want| n == *want))
            {
                found.push(path);
            }
        }
    }
    if found.is_empty() {
        return Err(InvalidFlag(format!(
            "{}: holds no {}",
            dir.display(),
            names.join(" or ")
        )));
    }
    found.sort();
    Ok(found)
}
