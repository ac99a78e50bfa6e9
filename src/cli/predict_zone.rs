//! `nodefall predict --zone [ZONE]` / `--nodes SELECTOR`: what losing a set
//! of nodes together would do, read-only, the costliest set first.

use std::process::ExitCode;

use super::error::Error;
use super::predict::PredictArgs;
use super::runtime;
use crate::exit;
use crate::predict::zone::{self, Set};
use crate::predict::{self, Fault};
use crate::scenario::selector::Selector;

fn zone_error(e: zone::Error) -> Error {
    Error::PredictZone(Box::new(e))
}

/// Reads the cluster (get and list only), forecasts each set, writes the
/// report and prints the ranking.
pub fn run(args: &PredictArgs) -> Result<ExitCode, Error> {
    // said before the cluster is read
    if matches!(args.fault, Fault::Drain | Fault::Shutdown) {
        return Err(zone_error(zone::Error::Fault(args.fault)));
    }
    let selector = args
        .node_selector
        .as_deref()
        .map(|text| Selector::parse(text).map_err(|why| zone_error(zone::Error::Selector(why))))
        .transpose()?;
    let every_zone = args.zone.as_deref() == Some("");
    if args.write_scenario.is_some() && every_zone {
        return Err(Error::PredictScenario(Box::new(
            predict::scenario::Error::NotOneSet(0),
        )));
    }
    if args.configz {
        tracing::warn!(
            "--configz reads graceful-shutdown settings, which a set's forecast does not use"
        );
    }
    let (forecast, about, snap) = runtime()?.block_on(async {
        let (config, context) =
            super::cluster_config(args.cluster.as_deref(), args.context.clone()).await?;
        let found = crate::discover::inspect::inspect(&config, context, &[], args.profile).await?;
        let client = kube::Client::try_from(config)?;
        let snap = crate::snapshot::read(&client).await?;
        let sets = match (&args.zone, &selector, &args.node_selector) {
            (Some(z), _, _) if z.is_empty() => Set::zones(&snap),
            (Some(z), _, _) => vec![Set::zone(&snap, z).map_err(zone_error)?],
            (None, Some(sel), Some(text)) => {
                vec![Set::selected(&snap, text, |l| sel.matches(l)).map_err(zone_error)?]
            }
            _ => Vec::new(),
        };
        let forecast =
            zone::forecast(&snap, &found.profile, args.fault, &sets).map_err(zone_error)?;
        let about = super::predict::about(found.identity.to_string(), &snap, found.notes);
        Ok::<_, Error>((forecast, about, snap))
    })?;
    let dir = args.out.join(format!(
        "predict-set-{}-{}",
        args.fault.name(),
        jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ")
    ));
    let md = crate::report::predict_zone::write(&crate::disk::Disk, &dir, &forecast, &about)?;
    outln!(
        "Prediction: {} of a set of nodes together ({})",
        args.fault.name(),
        about.cluster
    );
    for s in &forecast.sets {
        let c = s.cost;
        outln!(
            "  #{:<3} {:<24} {} node(s): {} Service(s) dark, {} workload(s) at zero, {} \
             StatefulSet majorit(ies) lost, {} pod(s) not running again, {} budget(s) broken, {} \
             pod(s) disrupted",
            s.rank,
            s.set,
            s.nodes.len(),
            c.services_dark,
            c.workloads_at_zero,
            c.majorities_lost,
            c.not_running,
            c.budgets_below,
            c.disrupted
        );
    }
    outln!("report: {}", md.display());
    if let Some(file) = &args.write_scenario {
        let ns = args
            .namespace
            .clone()
            .or_else(|| {
                forecast
                    .sets
                    .first()
                    .and_then(zone::scenario::busiest_namespace)
            })
            .unwrap_or_else(|| "default".to_owned());
        let text = zone::scenario::write(&forecast, &snap, &ns)
            .map_err(|e| Error::PredictScenario(Box::new(e)))?;
        super::predict::written(file, &text)?;
    }
    Ok(exit::code(exit::PASS))
}
