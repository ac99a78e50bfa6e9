//! `nodefall scenario FILE`: plan, bring up (or open) the cluster, run,
//! restore, write the reports, map the verdict to the exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use super::{Interrupted, NotYet, ScenarioArgs, default_profile, runtime};
use kube::config::KubeConfigOptions;

use crate::backend::kind::{self, KindBackend};
use crate::backend::sim::SimBackend;
use crate::exec::System;
use crate::exit;
use crate::plan;
use crate::profile::TimingProfile;
use crate::report::{self, RunResult, result::RunVerdict};
use crate::runner::{self, Progress};
use crate::scenario::{self, model::BackendKind};
use crate::sim::{self, SimCluster, UpOptions};

pub fn run(args: &ScenarioArgs) -> anyhow::Result<ExitCode> {
    // Everything about the input is checked before any cluster is touched.
    let checked = scenario::load(&args.file)?;
    let backend = args.backend.unwrap_or(checked.backend);
    match backend {
        BackendKind::Sim => {}
        BackendKind::Kind => return run_on_kind(args, checked),
        other => bail!(NotYet(other)),
    }
    let root = sim::default_root();
    let existing = args
        .cluster
        .as_deref()
        .map(|name| SimCluster::open(&root, name))
        .transpose()?;
    let profile = match (&existing, args.profile) {
        (Some(c), None) => c.state().profile.clone(),
        (Some(c), Some(p)) if c.state().profile.name != p.to_string() => bail!(
            "cluster `{}` runs the `{}` timing profile, not `{p}`; drop --profile or start a cluster with it",
            c.name(),
            c.state().profile.name
        ),
        (_, p) => TimingProfile::named(p.unwrap_or_else(|| default_profile(backend))),
    };
    let plan = plan::resolve(checked, &profile, Some(backend))?;
    let file = args.file.display().to_string();

    let rt = runtime()?;
    let (outcome, cluster) = rt.block_on(async {
        let progress = Progress::auto();
        let cluster = match existing {
            Some(c) => c,
            None => {
                let mut opts = UpOptions::new(format!("scenario-{}", std::process::id()), profile.clone());
                opts.root = root.clone();
                opts.nodes = usize::from(args.nodes);
                opts.reaper = Some(std::env::current_exe().context("locating the nodefall executable (the cluster's reaper runs it)")?);
                let mut log = |m: &str| progress.log(&format!("sim: {m}"));
                tokio::select! {
                    up = SimCluster::up(&opts, &mut log) => up.context("starting the simulated cluster")?,
                    _ = tokio::signal::ctrl_c() => return Err(Interrupted.into()),
                }
            }
        };
        let config = cluster.config().await?;
        let mut backend = SimBackend { cluster };
        let outcome = runner::run(&plan, &mut backend, config, &file, &progress).await;
        anyhow::Ok((outcome, backend.cluster))
    })?;
    drop(rt);

    let result = outcome.result;
    let dir = write_reports(&args.out, &result)?;
    finish_cluster(cluster, args.cluster.is_some(), args.keep)?;
    summarize(&result, &dir);
    Ok(exit_code(&result, outcome.invalid_input))
}

/// On an existing kind cluster: its containers are found by kind's labels,
/// the API reached through the `kind-<cluster>` kubeconfig context.
fn run_on_kind(args: &ScenarioArgs, checked: scenario::Checked) -> anyhow::Result<ExitCode> {
    let profile = TimingProfile::named(
        args.profile
            .unwrap_or_else(|| default_profile(BackendKind::Kind)),
    );
    let plan = plan::resolve(checked, &profile, Some(BackendKind::Kind))?;
    let file = args.file.display().to_string();
    let runtime_name = kind::pick_runtime(args.container_runtime.as_deref());
    let mut backend = KindBackend::discover(&args.kind_cluster, &runtime_name, System)?;
    let context = args
        .context
        .clone()
        .unwrap_or_else(|| format!("kind-{}", args.kind_cluster));
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let options = KubeConfigOptions {
            context: Some(context.clone()),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| {
                format!("reading kubeconfig context `{context}` (KUBECONFIG or ~/.kube/config)")
            })?;
        let progress = Progress::auto();
        anyhow::Ok(runner::run(&plan, &mut backend, config, &file, &progress).await)
    })?;
    let dir = write_reports(&args.out, &outcome.result)?;
    summarize(&outcome.result, &dir);
    Ok(exit_code(&outcome.result, outcome.invalid_input))
}

fn exit_code(result: &RunResult, invalid_input: bool) -> ExitCode {
    exit::code(match result.verdict {
        _ if invalid_input => exit::INVALID_INPUT,
        RunVerdict::Pass => exit::PASS,
        RunVerdict::Fail => exit::EXPECTATION_FAILED,
        RunVerdict::Error => exit::INFRASTRUCTURE,
        RunVerdict::Interrupted => exit::INTERRUPTED,
    })
}

fn write_reports(out: &std::path::Path, result: &RunResult) -> anyhow::Result<PathBuf> {
    let dir = out.join(report::run_dir_name(&result.scenario, result.started_at));
    report::write_all(&dir, result)
        .with_context(|| format!("writing the report to {}", dir.display()))?;
    Ok(dir)
}

fn finish_cluster(mut cluster: SimCluster, named: bool, keep: bool) -> anyhow::Result<()> {
    if named {
        cluster.detach();
    } else if keep {
        cluster.detach();
        eprintln!(
            "sim: kept cluster `{0}`: export KUBECONFIG={1}; stop it with `nodefall sim down --name {0}`",
            cluster.name(),
            cluster.kubeconfig_path().display()
        );
    } else {
        cluster
            .down()
            .context("removing the throwaway simulated cluster")?;
    }
    Ok(())
}

fn summarize(result: &RunResult, dir: &std::path::Path) {
    let passed = result
        .expectations
        .iter()
        .filter(|e| e.verdict == report::result::Verdict::Pass)
        .count();
    let verdict = match result.verdict {
        RunVerdict::Pass => "PASS",
        RunVerdict::Fail => "FAIL",
        RunVerdict::Error => "ERROR",
        RunVerdict::Interrupted => "INTERRUPTED",
    };
    println!(
        "{verdict}: {passed}/{} expectations held; report: {}",
        result.expectations.len(),
        dir.join("report.md").display()
    );
    if let Some(e) = &result.error {
        eprintln!("error: {e}");
    }
}
