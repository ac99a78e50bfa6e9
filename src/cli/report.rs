//! `nodefall report ...`: work with the reports of past runs.

use super::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::flags::InvalidFlag;
use super::values::{self, Format};
use crate::exit;
use crate::record;
use crate::report;

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Re-render `report.md`, `timeline.svg` and `junit.xml` from a run's
    /// `result.json`, or `aggregate.md` and `distribution.svg` from a
    /// series' `aggregate.json`.
    Render(RenderArgs),
    /// Compare two runs or aggregates (`result.json` or `aggregate.json`):
    /// every figure side by side with its delta and ratio, the expectations
    /// whose verdict changed; exit 1 when something got slower than allowed.
    Compare(CompareArgs),
    /// The simulator against real kubelets: runs of the same scenarios on
    /// kind and on the sim, each transition's time on both, the difference
    /// and a verdict (docs/fidelity.md); exit 1 when a row misses the goal.
    Fidelity(FidelityArgs),
    /// Every run under a directory in one line each (fit for a CI job's
    /// summary): verdict, expectations held, key figures, every failure in
    /// one line, and with --baseline what got slower; exit 1 unless all
    /// passed.
    Summary(super::summary::SummaryArgs),
}

#[derive(Debug, Args)]
pub struct FidelityArgs {
    /// The kind runs: a directory searched for `result.json` files (the
    /// newest run of each scenario counts).
    #[arg(long, value_name = "DIR")]
    pub kind: PathBuf,
    /// The sim runs of the same scenarios, likewise.
    #[arg(long, value_name = "DIR")]
    pub sim: PathBuf,
    /// Write the Markdown here instead of to stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// A paragraph put under the title (how the runs were made).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub note: String,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a `result.json` or an `aggregate.json` (from `--repeat`).
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// What to check against it, likewise.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// Exit 1 when a recovery figure is more than PCT percent slower than the
    /// base (`20%`, from 0% to 10000%); nodefall's own detection lag is not
    /// included.
    #[arg(long, value_name = "PCT", value_parser = values::percent)]
    pub fail_if_slower: Option<f64>,
    /// A figure's own limit, over --fail-if-slower: `nodeNotReady=10%`,
    /// `workloadReadyAgain=+5s` (up to 24h), `maxUnavailable=+1`; repeatable.
    #[arg(long = "threshold", value_name = "NAME=LIMIT", value_parser = values::threshold)]
    pub thresholds: Vec<(String, crate::stats::Limit)>,
    /// Percentage limits ignore differences up to this (run-to-run noise on
    /// small figures): a duration (`500ms`, `2s`) or seconds, up to 24h.
    #[arg(long, value_name = "DURATION", default_value = "0s",
          value_parser = values::duration(values::COMPARE_DELTA))]
    pub min_delta: std::time::Duration,
    /// Compare runs of two differently named scenarios anyway (by default
    /// that is refused with exit 2: their figures may not be comparable).
    #[arg(long)]
    pub allow_different_scenarios: bool,
    /// Which statistic of an aggregate stands for it.
    #[arg(long, value_enum, default_value_t = crate::stats::Stat::P50)]
    pub stat: crate::stats::Stat,
    /// What to print: Markdown (fit for $GITHUB_STEP_SUMMARY) or JSON.
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    pub format: Format,
    /// Also write compare.md, compare.json and the chart compare.svg here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The run's `result.json` (or a series' `aggregate.json`).
    #[arg(value_name = "RESULT_JSON")]
    pub result: PathBuf,
    /// Write the reports here instead of next to the `result.json`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(cmd: ReportCommand) -> Result<ExitCode, Error> {
    match cmd {
        ReportCommand::Render(args) => {
            let dir = match &args.out {
                Some(dir) => dir.clone(),
                None => match args.result.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => Path::new(".").to_path_buf(),
                },
            };
            // The input is read before anything is written, and a bad --out
            // is refused by name (exit 2) before the reports are rendered.
            let input = match crate::stats::read_aggregate(&crate::disk::Disk, &args.result)? {
                Some(a) => Err(a),
                None => Ok(report::read_result(&crate::disk::Disk, &args.result)?),
            };
            if args.out.is_some() {
                out_dir(&dir)?;
            }
            let report = match input {
                Ok(run) => report::write_rendered(&crate::disk::Disk, &dir, &run)?,
                Err(aggregate) => report::aggregate::write(&crate::disk::Disk, &dir, &aggregate)?,
            };
            outln!("{}", report.display());
            Ok(exit::code(exit::PASS))
        }
        ReportCommand::Compare(args) => compare(&args),
        ReportCommand::Fidelity(args) => fidelity(&args),
        ReportCommand::Summary(args) => super::summary::run(&args),
    }
}

fn fidelity(args: &FidelityArgs) -> Result<ExitCode, Error> {
    use crate::verdict::fidelity;
    let kind = newest_runs(&args.kind)?;
    let sim = newest_runs(&args.sim)?;
    let mut scenarios = Vec::new();
    let mut unpaired = Vec::new();
    for (name, k) in &kind {
        match sim.get(name) {
            Some(s) => scenarios.push(fidelity::compare(k, s)),
            None => unpaired.push(report::fidelity::Unpaired {
                scenario: name.clone(),
                side: "kind",
            }),
        }
    }
    for name in sim.keys().filter(|n| !kind.contains_key(*n)) {
        unpaired.push(report::fidelity::Unpaired {
            scenario: name.clone(),
            side: "sim",
        });
    }
    let text = report::fidelity::render(
        &args.note,
        &kind.values().collect::<Vec<_>>(),
        &sim.values().collect::<Vec<_>>(),
        &scenarios,
        &unpaired,
    );
    match &args.out {
        Some(path) => {
            std::fs::write(path, &text).map_err(|e| {
                InvalidFlag(format!("--out {}: cannot write it: {e}", path.display()))
            })?;
            tracing::info!("wrote {}", path.display());
        }
        None => super::write_stdout(&text),
    }
    let met = unpaired.is_empty() && scenarios.iter().all(|s| s.meets_goal());
    Ok(exit::code(if met {
        exit::PASS
    } else {
        exit::EXPECTATION_FAILED
    }))
}

/// The newest run of each scenario found under `dir` (any depth).
fn newest_runs(dir: &Path) -> Result<std::collections::BTreeMap<String, record::RunResult>, Error> {
    let mut runs: std::collections::BTreeMap<String, record::RunResult> =
        std::collections::BTreeMap::new();
    for path in super::summary::files_named(dir, &["result.json"])? {
        let run = report::read_result(&crate::disk::Disk, &path)?;
        if runs
            .get(&run.scenario)
            .is_none_or(|r| r.started_at < run.started_at)
        {
            runs.insert(run.scenario.clone(), run);
        }
    }
    Ok(runs)
}

fn compare(args: &CompareArgs) -> Result<ExitCode, Error> {
    use crate::stats;
    let gate = stats::Gate {
        fail_if_slower: args.fail_if_slower,
        min_delta: args.min_delta.as_secs_f64() * 1000.0,
        per_metric: args.thresholds.iter().cloned().collect(),
    };
    let base = stats::read_side(&crate::disk::Disk, &args.base, args.stat)?;
    let new = stats::read_side(&crate::disk::Disk, &args.new, args.stat)?;
    if base.scenario != new.scenario && !args.allow_different_scenarios {
        return Err(stats::Error::NotComparable {
            base: base.scenario,
            new: new.scenario,
        }
        .into());
    }
    let c = stats::compare::compare(base, new, &gate);
    if let Some(dir) = &args.out {
        out_dir(dir)?;
        let md = report::compare::write(&crate::disk::Disk, dir, &c)?;
        tracing::info!("wrote {}", md.display());
    }
    let text = match args.format {
        Format::Markdown => report::compare::render(&c, None),
        Format::Json => report::compare::json(&c)?,
    };
    super::write_stdout(&text);
    for r in &c.regressions {
        eprintln!("regression: {r}");
    }
    Ok(exit::code(if c.regressions.is_empty() {
        exit::PASS
    } else {
        exit::EXPECTATION_FAILED
    }))
}

/// `--out DIR`, created now: a path that cannot be a directory (a file,
/// `/dev/null`, under a file) is the flag's fault, refused by name (exit 2).
fn out_dir(dir: &Path) -> Result<(), InvalidFlag> {
    std::fs::create_dir_all(dir).map_err(|e| {
        InvalidFlag(format!(
            "--out {}: cannot be the reports' directory: {e}",
            dir.display()
        ))
    })
}
