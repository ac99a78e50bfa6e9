//! A set's forecast (`predict --zone`, `--nodes`) as `prediction.md` and
//! `prediction.json`: the sets ranked, the values used, then for each set
//! its zones' states and pace, each node's taint, the timeline, the
//! workloads, Services and budgets it takes down, and where each evicted
//! pod's replacement goes (or why it cannot).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::format::{cell, inline, table};
use super::output::{self, Error};
use super::predict::{About, PREDICTION_JSON, PREDICTION_MD, SCHEMA_VERSION, when};
use crate::disruption::zone_name;
use crate::files::Files;
use crate::predict::zone::{Outcome, SetForecast, ZoneForecast};

/// What `prediction.json` says it is, for a set's forecast.
pub const KIND: &str = "nodefall-zone-prediction";
/// Sets given a section of their own (every set is in `prediction.json`).
pub const DETAILED: usize = 10;
/// Pods listed per set (the rest counted; all in `prediction.json`).
pub const PODS_LISTED: usize = 200;

/// `prediction.json` of a set's forecast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZonePredictionFile {
    pub kind: String,
    pub schema_version: u32,
    pub about: About,
    pub forecast: ZoneForecast,
}

/// An outcome in a few words, for the pods' table.
pub fn outcome(o: &Outcome) -> String {
    match o {
        Outcome::Replaced { node, zone } => {
            format!("replaced on {node} (zone {})", zone_name(zone))
        }
        Outcome::Pending { why } => format!("replacement Pending: {why}"),
        Outcome::CannotMove { why } => format!("cannot move: {why}"),
        Outcome::WaitsForDetach {
            node,
            claims,
            release,
        } => format!(
            "replacement on {node} waits for {}: {release}",
            claims.join(", ")
        ),
        Outcome::Stuck { release } => format!("stuck Terminating until {release}"),
        Outcome::Never => "none: nothing recreates it".into(),
        Outcome::Stranded { why } => {
            format!("stranded: never evicted, Ready=False until its node is back ({why})")
        }
        Outcome::Stays => "stays on the node (back with it)".into(),
    }
}

/// The Markdown report.
pub fn render(f: &ZoneForecast, about: &About) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Prediction: {} of a set of nodes together\n",
        f.fault.name()
    );
    let _ = writeln!(
        out,
        "Cluster {}, read at {} ({} nodes, {} pods). Nothing was changed: every request was a get \
         or a list. T0 is the moment of the fault, on every node of the set at once.\n",
        inline(&about.cluster),
        about.read_at,
        about.nodes,
        about.pods
    );
    let _ = writeln!(out, "> {}\n", inline(&f.not_modelled));
    out.push_str("## Sets, the costliest loss first\n\n");
    let rows = f
        .sets
        .iter()
        .map(|s| {
            let c = s.cost;
            [
                s.rank.to_string(),
                cell(&s.set),
                s.nodes.len().to_string(),
                c.services_dark.to_string(),
                c.workloads_at_zero.to_string(),
                c.majorities_lost.to_string(),
                c.not_running.to_string(),
                c.budgets_below.to_string(),
                c.disrupted.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "#",
            "set",
            "nodes",
            "Services dark",
            "workloads at zero",
            "StatefulSet majorities lost",
            "pods not running again",
            "budgets broken",
            "pods disrupted",
        ],
        rows,
    ));
    super::predict::values(&mut out, &f.values, about);
    for s in f.sets.iter().take(DETAILED) {
        set(&mut out, s);
    }
    if f.sets.len() > DETAILED {
        let others: Vec<&str> = f.sets[DETAILED..].iter().map(|s| s.set.as_str()).collect();
        let _ = writeln!(
            out,
            "\n## The other {} sets\n\nIn `{PREDICTION_JSON}`: {}",
            others.len(),
            inline(&others.join(", "))
        );
    }
    out
}

fn set(out: &mut String, s: &SetForecast) {
    let _ = writeln!(
        out,
        "\n## #{} {} ({} nodes: `{}`)\n",
        s.rank,
        inline(&s.set),
        s.nodes.len(),
        inline(&s.selector)
    );
    out.push_str("### Zones\n\n");
    let rows = s
        .zones
        .zones
        .iter()
        .filter(|z| z.failing > 0 || s.zones.all_dark)
        .map(|z| {
            [
                cell(zone_name(&z.zone)),
                z.nodes.to_string(),
                z.down_before.to_string(),
                z.failing.to_string(),
                z.state.to_string(),
                cell(&z.pace.words()),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "zone",
            "nodes counted",
            "down before",
            "failing",
            "state",
            "NoExecute taints",
        ],
        rows,
    ));
    out.push_str("\n### Nodes\n\n");
    let rows = s
        .turns
        .iter()
        .map(|t| {
            [
                cell(&t.node),
                cell(zone_name(&t.zone)),
                when(t.unknown),
                when(t.taint),
                cell(&t.slot),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "node",
            "zone",
            "Ready=Unknown",
            "NoExecute taint",
            "its turn",
        ],
        rows,
    ));
    out.push_str("\n### Timeline\n\n");
    let rows = s
        .timeline
        .iter()
        .map(|e| [when(e.at), cell(&e.what)])
        .collect();
    out.push_str(&table(["when", "what"], rows));
    if !s.workloads.is_empty() {
        out.push_str("\n### Workloads\n\n");
        let rows = s
            .workloads
            .iter()
            .map(|w| {
                let mut flags = Vec::new();
                if w.at_zero {
                    flags.push("no Ready replica left");
                }
                if w.majority_lost {
                    flags.push("majority lost");
                }
                [
                    cell(&w.workload),
                    w.replicas.to_string(),
                    format!("{} of {}", w.lost, w.ready),
                    w.replaced.to_string(),
                    w.pending.to_string(),
                    cell(&flags.join(", ")),
                ]
            })
            .collect();
        out.push_str(&table(
            [
                "workload",
                "replicas",
                "Ready lost",
                "replaced",
                "Pending",
                "",
            ],
            rows,
        ));
    }
    if !s.services.is_empty() {
        out.push_str("\n### Services left with no ready endpoint\n\n");
        let rows = s
            .services
            .iter()
            .map(|d| {
                [
                    cell(&d.service),
                    d.endpoints.to_string(),
                    when(d.from),
                    when(d.until),
                    cell(&d.why),
                ]
            })
            .collect();
        out.push_str(&table(
            ["Service", "ready endpoints", "dark from", "until", "why"],
            rows,
        ));
    }
    if !s.budgets.is_empty() {
        out.push_str("\n### Disruption budgets\n\n");
        let rows = s
            .budgets
            .iter()
            .map(|b| {
                [
                    cell(&b.budget),
                    format!("{} of {}", b.lost, b.healthy),
                    b.desired.to_string(),
                    if b.below { "yes" } else { "no" }.to_owned(),
                    b.drain_refused.to_string(),
                ]
            })
            .collect();
        out.push_str(&table(
            [
                "budget",
                "healthy pods lost",
                "desired healthy",
                "below it",
                "evictions a drain of the set is refused (429)",
            ],
            rows,
        ));
    }
    let moved: Vec<_> = s
        .pods
        .iter()
        .filter(|m| !matches!(m.outcome, Outcome::Stays))
        .collect();
    if !moved.is_empty() {
        out.push_str("\n### Pods\n\n");
        let rows = moved
            .iter()
            .take(PODS_LISTED)
            .map(|m| {
                let evicted = if m.maybe {
                    format!("{} (a race: or never)", when(m.evicted))
                } else {
                    when(m.evicted)
                };
                [
                    cell(&m.pod),
                    cell(&m.owner),
                    cell(&m.node),
                    evicted,
                    cell(&outcome(&m.outcome)),
                ]
            })
            .collect();
        out.push_str(&table(
            ["pod", "owner", "node", "Terminating", "what becomes of it"],
            rows,
        ));
        if moved.len() > PODS_LISTED {
            let _ = writeln!(
                out,
                "\n... and {} more pods, in `{PREDICTION_JSON}`.",
                moved.len() - PODS_LISTED
            );
        }
    }
}

/// `prediction.json`'s text.
pub fn json(f: &ZoneForecast, about: &About) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&ZonePredictionFile {
        kind: KIND.into(),
        schema_version: SCHEMA_VERSION,
        about: about.clone(),
        forecast: f.clone(),
    })
}

/// Writes `prediction.md` and `prediction.json` into `dir`; returns the
/// Markdown's path.
pub fn write(
    files: &dyn Files,
    dir: &Path,
    f: &ZoneForecast,
    about: &About,
) -> Result<PathBuf, Error> {
    output::create_dir(files, dir)?;
    let path = dir.join(PREDICTION_JSON);
    let text = json(f, about).map_err(|source| Error::Serialize {
        path: path.clone(),
        source,
    })?;
    output::write(files, path, &text)?;
    let md = dir.join(PREDICTION_MD);
    output::write(files, md.clone(), &render(f, about))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::Fault;
    use crate::predict::snapshot::{Node, Owner, Pod, Snapshot};
    use crate::predict::zone::{Set, forecast};
    use crate::profile::TimingProfile;

    #[test]
    fn a_zone_forecast_reads_as_ranked_sets_then_each_sets_zones_nodes_and_pods() {
        let snap = Snapshot {
            nodes: vec![
                Node::in_zone("a0", "a", 1000),
                Node::in_zone("b0", "b", 1000),
            ],
            pods: vec![
                Pod::example(
                    "shop",
                    "web-1",
                    "a0",
                    Owner::Deployment("web".into()),
                    "web",
                ),
                Pod::example("shop", "db-0", "b0", Owner::StatefulSet("db".into()), "db"),
            ],
            ..Snapshot::default()
        };
        let f = forecast(
            &snap,
            &TimingProfile::upstream_default(),
            Fault::Poweroff,
            &Set::zones(&snap),
        )
        .unwrap();
        let about = About {
            cluster: "sim".into(),
            read_at: "now".into(),
            nodes: 2,
            pods: 2,
            discovery_notes: vec![],
        };
        let md = render(&f, &about);
        let md = md
            .split(' ')
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            md.starts_with("# Prediction: poweroff of a set of nodes together\n"),
            "{md}"
        );
        assert!(
            md.contains("> The fit runs the scheduler's filters"),
            "{md}"
        );
        // db-0 stuck ranks zone b first
        assert!(
            md.contains("| 1 | zone b | 1 | 0 | 1 | 1 | 1 | 0 | 1 |"),
            "{md}"
        );
        assert!(
            md.contains("## #1 zone b (1 nodes: `topology.kubernetes.io/zone=b`)"),
            "{md}"
        );
        assert!(
            md.contains("| b | 1 | 0 | 1 | FullDisruption | one node per 10s |"),
            "{md}"
        );
        assert!(md.contains("| shop/web-1 | Deployment/web | a0 | T0+5m40s .. T0+6m5s | replaced on b0 (zone b) |"), "{md}");
        let back: ZonePredictionFile = serde_json::from_str(&json(&f, &about).unwrap()).unwrap();
        assert_eq!((back.kind.as_str(), back.forecast), (KIND, f));
    }
}
