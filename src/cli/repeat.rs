//! `nodefall scenario FILE --repeat N`: N runs of one scenario, each with
//! its own report in `<out>/<scenario>-x<N>-<UTC start>/run-K/`, then the
//! aggregate beside them (`aggregate.json`, `aggregate.md`,
//! `distribution.svg`).
//!
//! On sim each run gets a fresh throwaway cluster; on an existing cluster
//! (`--cluster`, kind, machines) the runs share it and every run but the
//! last cleans up fully, so the next one starts from a fresh namespace. A
//! failed expectation is data: the series goes on. An infrastructure error,
//! invalid input or a signal stops it; what finished is aggregated.

use super::error::Error;
use std::path::Path;
use std::process::ExitCode;

use super::error::Context as _;
use jiff::Timestamp;

use super::ScenarioArgs;
use crate::exit;
use crate::record;
use crate::record::RunResult;
use crate::report;
use crate::runner::journal;
use crate::runner::session::{self, Once, Written, write_or_fallback};
use crate::runner::session::{On, Resolved};
use crate::scenario::model::Cleanup;
use crate::shutdown::{self, Signals, Stop};
use crate::stats::aggregate::{self, Aggregate, Series};

/// Watches for SIGINT/SIGTERM/SIGHUP across the whole series: the runs
/// share these handlers, so a signal at any moment (also between two runs,
/// or while a run starts) stops the series the same way.
struct Watch {
    _rt: tokio::runtime::Runtime,
    signals: Signals,
}

impl Watch {
    fn install() -> Result<Watch, Error> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("starting the signal watcher")?;
        let signals = rt
            .block_on(async { shutdown::install() })
            .context("installing signal handlers")?;
        Ok(Watch { _rt: rt, signals })
    }

    fn stopped(&self) -> Option<Stop> {
        self.signals.first()
    }
}

pub(super) fn run(args: &ScenarioArgs, resolved: &Resolved) -> Result<ExitCode, Error> {
    let n = args.repeat;
    let (checked, backend) = (&resolved.checked, resolved.backend);
    let started_at = Timestamp::now();
    let name = format!("{}-x{n}", checked.name);
    let dir = args.out.join(report::run_dir_name(&name, started_at));
    let shared_cluster = !matches!(&resolved.on, On::Sim(sim) if sim.cluster.is_none());
    if shared_cluster && checked.cleanup != Cleanup::Always {
        tracing::info!(
            "repeat: runs 1 to {} clean up fully (the scenario says `cleanup: {}`), so each \
             starts from a fresh namespace; the last run follows the scenario",
            n - 1,
            checked.cleanup.name()
        );
    }
    let series = Series {
        scenario: checked.name.clone(),
        file: args.file.display().to_string(),
        backend: backend.name().to_owned(),
        profile: String::new(),
        requested: n,
        started_at,
    };
    let watch = Watch::install()?;
    let mut results: Vec<RunResult> = Vec::new();
    let mut entries = Vec::new();
    let mut code = exit::PASS;
    let mut stopped_early = None;
    let mut failure = None;
    let last = n as usize;
    for k in 1..=last {
        if let Some(stop) = watch.stopped() {
            stopped_early = Some(format!("{stop} before run {k}"));
            code = stop.exit_code();
            break;
        }
        tracing::info!("repeat: run {k} of {n}");
        let run_dir = format!("run-{k}");
        let once = Once {
            run: Some(k),
            dir: Some(dir.join(&run_dir)),
            cleanup: (shared_cluster && k < last).then_some(Cleanup::Always),
            signals: Some(watch.signals.clone()),
        };
        let done = match session::run(&super::run_scenario::request(args), resolved, &once) {
            Ok(done) => done,
            Err(e) => {
                stopped_early = Some(format!(
                    "run {k} could not run: {}",
                    crate::errors::chain(&e)
                ));
                failure = Some(e);
                break;
            }
        };
        super::run_scenario::print(&done);
        entries.push(aggregate::entry(k, &run_dir, &done.result));
        results.push(done.result);
        match done.code {
            exit::PASS => {}
            exit::EXPECTATION_FAILED => code = exit::EXPECTATION_FAILED,
            other => {
                let why = match watch.stopped() {
                    Some(stop) => format!("{stop} during run {k}"),
                    None => format!("run {k} ended with exit code {other}"),
                };
                stopped_early = Some(why);
                code = other;
                break;
            }
        }
    }
    if !entries.is_empty() {
        let series = Series {
            profile: results
                .first()
                .map(|r| r.profile.name.clone())
                .unwrap_or_default(),
            ..series
        };
        let refs: Vec<&RunResult> = results.iter().collect();
        let a = aggregate::build(&series, entries, &refs, stopped_early);
        // Like a run's report: elsewhere, named, if not where asked.
        let fallback = journal::fallback_reports_dir().join(dir.file_name().unwrap_or_default());
        let md = match write_or_fallback(&dir, &fallback, |d| {
            report::aggregate::write(&crate::disk::Disk, d, &a)
        })? {
            Written::Asked(md) => md,
            Written::Fallback { value, at, why } => {
                tracing::error!(
                    "error: the aggregate could not be written where asked: {why}; it was \
                     written to {} instead",
                    at.display()
                );
                if matches!(code, exit::PASS | exit::EXPECTATION_FAILED) {
                    code = exit::INFRASTRUCTURE;
                }
                value
            }
        };
        summarize(&a, &md);
    }
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(exit::code(code)),
    }
}

/// One line per headline figure, then where the aggregate is.
fn summarize(a: &Aggregate, md: &Path) {
    let counted = a.runs.iter().filter(|r| r.counted()).count();
    let passed = a
        .runs
        .iter()
        .filter(|r| r.verdict == record::RunVerdict::Pass)
        .count();
    outln!(
        "REPEAT: {passed}/{counted} runs passed{}; aggregate: {}",
        a.stopped_early
            .as_ref()
            .map(|w| format!(" (stopped early: {w})"))
            .unwrap_or_default(),
        md.display()
    );
    for m in &a.metrics {
        let s = &m.summary;
        outln!(
            "  {:<28} n={} p50 {} p95 {} max {}",
            m.name,
            s.n,
            m.unit.show(s.p50),
            m.unit.show(s.p95),
            m.unit.show(s.max)
        );
    }
    for e in a.expectations.iter().filter(|e| e.failed > 0) {
        outln!(
            "  expectation {} passed {}{}",
            e.label,
            e.rate(),
            if e.flaky() { " (flaky)" } else { "" }
        );
    }
}
