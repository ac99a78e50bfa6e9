//! `nodefall predict`: what a node failure would do to a cluster, read-only.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::error::{Context as _, Error};
use super::runtime;
use crate::exit;
use crate::predict::{self, Ask, Fault, Graceful};
use crate::profile::ProfileName;
use crate::report::predict::About;

/// Nodes of the ranking printed (the report ranks them all).
const PRINTED: usize = 20;
/// How long one kubelet's `/configz` may take (`--configz`).
const CONFIGZ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// Nodes to predict for (default: every node), ranked by what losing
    /// each would cost.
    pub nodes: Vec<String>,
    /// Predict losing a whole zone (topology.kubernetes.io/zone) at once:
    /// the zone rules' taints, the evictions, where the replacements fit.
    /// Alone: every zone, ranked.
    #[arg(
        long,
        value_name = "ZONE",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with_all = ["nodes", "node_selector"]
    )]
    pub zone: Option<String>,
    /// Predict losing every node this label selector picks, at once
    /// (`app-tier=db`, `topology.kubernetes.io/zone in (a,b)`).
    #[arg(long = "nodes", value_name = "SELECTOR", conflicts_with = "nodes")]
    pub node_selector: Option<String>,
    /// The fault to predict.
    #[arg(long, value_enum, default_value = "poweroff")]
    pub fault: Fault,
    /// Read this kubeconfig context's cluster (default: the current context).
    #[arg(long, conflicts_with = "cluster")]
    pub context: Option<String>,
    /// Like `--context`, for a running sim cluster (`nodefall sim up --name NAME`).
    #[arg(long, value_name = "NAME", value_parser = crate::sim::state::parse_name)]
    pub cluster: Option<String>,
    /// Timing profile to predict with, instead of the cluster's own
    /// (refused where it contradicts what the cluster runs).
    #[arg(long, value_enum)]
    pub profile: Option<ProfileName>,
    /// With `--fault shutdown`: read each kubelet's graceful-shutdown
    /// settings from its `/configz` (through the API server's node proxy:
    /// needs `get` on `nodes/proxy`, docs/predict.md).
    #[arg(long)]
    pub configz: bool,
    /// Also write the prediction for the one node named (or the one zone,
    /// or `--nodes`) as a scenario that checks it (`nodefall scenario FILE`
    /// on the same cluster).
    #[arg(long, value_name = "FILE")]
    pub write_scenario: Option<PathBuf>,
    /// With `--write-scenario`: the namespace whose pods the scenario
    /// watches (default: the one with most of the disrupted pods).
    #[arg(long, requires = "write_scenario")]
    pub namespace: Option<String>,
    /// Directory for the prediction (`prediction.md`, `prediction.json`).
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
}

impl PredictArgs {
    /// `--zone` or `--nodes`: a set of nodes lost together.
    pub fn of_a_set(&self) -> bool {
        self.zone.is_some() || self.node_selector.is_some()
    }
}

/// Reads the cluster (get and list only), predicts, writes the report and
/// prints the ranking (a set's forecast: `predict_zone::run`).
pub fn run(args: &PredictArgs) -> Result<ExitCode, Error> {
    if args.write_scenario.is_some() && args.nodes.len() != 1 {
        // said before the cluster is read
        return Err(Error::PredictScenario(Box::new(
            predict::scenario::Error::NotOneNode(args.nodes.len()),
        )));
    }
    let (forecast, about, snap) = runtime()?.block_on(async {
        let (config, context) =
            super::cluster_config(args.cluster.as_deref(), args.context.clone()).await?;
        let found = crate::discover::inspect::inspect(&config, context, &[], args.profile).await?;
        let client = kube::Client::try_from(config)?;
        let snap = crate::snapshot::read(&client).await?;
        let (graceful, graceful_from) = graceful(args, &client, &snap).await?;
        let forecast = predict::forecast(
            &snap,
            &found.profile,
            args.fault,
            &Ask {
                nodes: &args.nodes,
                graceful: &graceful,
                graceful_from,
            },
        )
        .map_err(|e| Error::Predict(Box::new(e)))?;
        let about = about(found.identity.to_string(), &snap, found.notes);
        Ok::<_, Error>((forecast, about, snap))
    })?;
    let dir = args.out.join(format!(
        "predict-{}-{}",
        args.fault.name(),
        jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ")
    ));
    let md = crate::report::predict::write(&crate::disk::Disk, &dir, &forecast, &about)?;
    outln!("Prediction: {} ({})", args.fault.name(), about.cluster);
    for n in forecast.nodes.iter().take(PRINTED) {
        let c = n.cost;
        outln!(
            "  #{:<3} {:<24} {} Service(s) left with no ready endpoint, {} pod(s) stuck, {} \
             refused by a budget, {} single-replica, {} pod(s) disrupted",
            n.rank,
            n.node,
            c.services_down,
            c.stuck,
            c.refused,
            c.single_replica,
            c.disrupted
        );
    }
    if forecast.nodes.len() > PRINTED {
        outln!(
            "  ... and {} more nodes, ranked in the report",
            forecast.nodes.len() - PRINTED
        );
    }
    outln!("report: {}", md.display());
    if let Some(file) = &args.write_scenario {
        let ns = args
            .namespace
            .clone()
            .or_else(|| {
                forecast
                    .nodes
                    .first()
                    .and_then(predict::scenario::busiest_namespace)
            })
            .unwrap_or_else(|| "default".to_owned());
        let text = predict::scenario::write(&forecast, &snap, &ns)
            .map_err(|e| Error::PredictScenario(Box::new(e)))?;
        written(file, &text)?;
    }
    Ok(exit::code(exit::PASS))
}

/// Which cluster was read, and when.
pub(super) fn about(cluster: String, snap: &predict::Snapshot, notes: Vec<String>) -> About {
    About {
        cluster,
        read_at: jiff::Timestamp::now()
            .strftime("%Y-%m-%d %H:%M:%S UTC")
            .to_string(),
        nodes: snap.nodes.len(),
        pods: snap.pods.len(),
        discovery_notes: notes,
    }
}

/// Writes a prediction's scenario and says how to run it.
pub(super) fn written(file: &std::path::Path, text: &str) -> Result<(), Error> {
    crate::files::write(&crate::disk::Disk, file, text.as_bytes())
        .with_context(|| format!("writing {}", file.display()))?;
    outln!(
        "scenario: {} (run it: nodefall scenario {})",
        file.display(),
        file.display()
    );
    Ok(())
}

/// Each asked node's graceful node shutdown, and where it was read: on a
/// sim, the settings it plays (`sim up --shutdown-grace-period`; its nodes
/// have no kubelet to ask); elsewhere, with `--configz`, each kubelet's.
async fn graceful(
    args: &PredictArgs,
    client: &kube::Client,
    snap: &predict::Snapshot,
) -> Result<(Vec<(String, Graceful)>, &'static str), Error> {
    let mut graceful = Vec::new();
    if args.fault != Fault::Shutdown {
        if args.configz {
            tracing::warn!(
                "--configz reads graceful-shutdown settings, which only --fault shutdown uses; \
                 not read"
            );
        }
        return Ok((graceful, ""));
    }
    let asked = snap
        .nodes
        .iter()
        .filter(|n| args.nodes.is_empty() || args.nodes.contains(&n.name));
    if let Some(name) = &args.cluster {
        let played =
            crate::sim::SimCluster::open(&crate::sim::default_root(), name)?.shutdown_grace();
        if args.configz {
            tracing::warn!("a sim's nodes have no /configz: the settings the sim plays are used");
        }
        let g = Graceful {
            grace_ms: i64::try_from(played.all.as_millis()).unwrap_or(i64::MAX),
            critical_ms: i64::try_from(played.critical.as_millis()).unwrap_or(i64::MAX),
        };
        graceful.extend(asked.map(|n| (n.name.clone(), g)));
        return Ok((
            graceful,
            "the settings the sim plays (`nodefall sim up --shutdown-grace-period`)",
        ));
    }
    if !args.configz {
        return Ok((graceful, ""));
    }
    for n in asked {
        match crate::gns::configz::fetch(client, &n.name, CONFIGZ_TIMEOUT).await {
            Ok(c) => graceful.push((
                n.name.clone(),
                Graceful {
                    grace_ms: i64::try_from(c.grace_period_ms).unwrap_or(i64::MAX),
                    critical_ms: i64::try_from(c.critical_pods_ms).unwrap_or(i64::MAX),
                },
            )),
            Err(e) => tracing::warn!("node {}: graceful shutdown not read: {e}", n.name),
        }
    }
    Ok((graceful, "the kubelet's /configz"))
}
