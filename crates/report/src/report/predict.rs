//! A forecast as `prediction.md` and `prediction.json`: the ranked nodes,
//! the values the rules took (with where each came from), and each node's
//! predicted timeline, pods, Services, drain refusals and volumes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::format::{cell, inline, table};
use super::output::{self, Error};
use crate::duration::format_millis;
use crate::files::Files;
use crate::predict::{Forecast, NodeForecast, Replacement, Value, When};

pub const PREDICTION_MD: &str = "prediction.md";
pub const PREDICTION_JSON: &str = "prediction.json";
/// The chart of the costliest node's predicted timeline.
pub const PREDICTION_SVG: &str = "prediction.svg";
/// What `prediction.json` says it is.
pub const KIND: &str = "nodefall-prediction";
pub const SCHEMA_VERSION: u32 = 1;
/// Nodes given a section of their own (the costliest); every node's is in
/// `prediction.json` (a 1,000-node cluster's sections are megabytes).
pub const DETAILED: usize = 25;

/// Which cluster, when it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct About {
    /// `context kind-x, server https://..., uid ...`.
    pub cluster: String,
    /// UTC, as `2026-11-26 21:04:05 UTC`.
    pub read_at: String,
    pub nodes: usize,
    pub pods: usize,
    /// Remarks of the timing discovery.
    pub discovery_notes: Vec<String>,
}

/// `prediction.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PredictionFile {
    pub kind: String,
    pub schema_version: u32,
    pub about: About,
    pub forecast: Forecast,
}

/// `T0+40s .. T0+55s`, `T0+0s`, `never`.
pub fn when(w: When) -> String {
    match w {
        When::Between { from, to } if from == to => format!("T0+{}", format_millis(from)),
        When::Between { from, to } => {
            format!("T0+{} .. T0+{}", format_millis(from), format_millis(to))
        }
        When::Never => "never".into(),
    }
}

fn replacement(r: &Replacement) -> String {
    match r {
        Replacement::AtEviction => "at once, while it is still Terminating".into(),
        Replacement::WhenGone => "when it is gone (same name)".into(),
        Replacement::Stuck { release } => format!("none, stuck until {release}"),
        Replacement::Never => "none: nothing recreates it".into(),
        Replacement::Stays => "stays on the node (back with it)".into(),
    }
}

/// The Markdown report; `chart`, the file name of the costliest node's
/// chart beside it.
pub fn render(f: &Forecast, about: &About, chart: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Prediction: {} of a node\n", f.fault.name());
    let _ = writeln!(
        out,
        "Cluster {}, read at {} ({} nodes, {} pods). Nothing was changed: every request was a get \
         or a list. T0 is the moment of the fault.\n",
        inline(&about.cluster),
        about.read_at,
        about.nodes,
        about.pods
    );
    for n in &f.notes {
        let _ = writeln!(out, "> {}\n", inline(n));
    }
    out.push_str("## Nodes, the costliest loss first\n\n");
    let rows = f
        .nodes
        .iter()
        .map(|n| {
            [
                n.rank.to_string(),
                cell(&n.node),
                n.cost.services_down.to_string(),
                n.cost.stuck.to_string(),
                n.cost.refused.to_string(),
                n.cost.single_replica.to_string(),
                n.cost.disrupted.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "#",
            "node",
            "Services left with no ready endpoint",
            "pods stuck (no replacement)",
            "evictions a budget refuses",
            "single-replica workloads",
            "pods disrupted",
        ],
        rows,
    ));
    if let (Some(chart), Some(first)) = (chart, f.nodes.first()) {
        let _ = writeln!(
            out,
            "\n![the predicted timeline of {}]({chart})",
            inline(&first.node)
        );
    }
    values(&mut out, &f.values, about);
    let busy: Vec<&NodeForecast> = f
        .nodes
        .iter()
        .filter(|n| n.cost.disrupted > 0 || !n.notes.is_empty())
        .collect();
    for n in busy.iter().take(DETAILED) {
        node(&mut out, n);
    }
    if busy.len() > DETAILED {
        let others: Vec<&str> = busy[DETAILED..].iter().map(|n| n.node.as_str()).collect();
        let _ = writeln!(
            out,
            "\n## The other {} nodes whose loss disrupts pods\n\nTheir timelines, pods and \
             Services are in `{PREDICTION_JSON}`: {}",
            others.len(),
            inline(&others.join(", "))
        );
    }
    let quiet: Vec<&str> = f
        .nodes
        .iter()
        .filter(|n| n.cost.disrupted == 0 && n.notes.is_empty())
        .map(|n| n.node.as_str())
        .collect();
    if !quiet.is_empty() {
        let _ = writeln!(
            out,
            "\n## Nodes whose loss disrupts no pod\n\n{}",
            inline(&quiet.join(", "))
        );
    }
    out
}

/// The section of the values a prediction used, each with its origin, and
/// the timing discovery's remarks.
pub fn values(out: &mut String, values: &[Value], about: &About) {
    out.push_str("\n## The values the prediction used\n\n");
    let rows = values
        .iter()
        .map(|v| {
            [
                cell(&v.name),
                format_millis(v.ms),
                cell(&v.origin),
                cell(&v.detail),
            ]
        })
        .collect();
    out.push_str(&table(["value", "", "origin", "from"], rows));
    for n in &about.discovery_notes {
        let _ = writeln!(out, "\n- {}", inline(n));
    }
}

fn node(out: &mut String, n: &NodeForecast) {
    let _ = writeln!(out, "\n## #{} {}\n", n.rank, inline(&n.node));
    for note in &n.notes {
        let _ = writeln!(out, "> {}\n", inline(note));
    }
    let rows = n
        .timeline
        .iter()
        .map(|e| [when(e.at), cell(&e.what)])
        .collect();
    out.push_str(&table(["when", "what"], rows));
    out.push_str("\n### Pods\n\n");
    let rows = n
        .pods
        .iter()
        .map(|p| {
            [
                cell(&p.pod),
                cell(&p.owner),
                when(p.evicted),
                cell(&p.why),
                cell(&replacement(&p.replacement)),
                cell(&p.waits_for_detach.join(", ")),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "pod",
            "owner",
            "Terminating",
            "why then",
            "replacement",
            "waits for a detach of",
        ],
        rows,
    ));
    if !n.services.is_empty() {
        out.push_str("\n### Services\n\n");
        let rows = n
            .services
            .iter()
            .map(|s| {
                let lost = if s.ready_here == s.ready_total {
                    format!("all {}", s.ready_total)
                } else {
                    format!("{} of {}", s.ready_here, s.ready_total)
                };
                [cell(&s.service), lost, when(s.from), cell(&s.until)]
            })
            .collect();
        out.push_str(&table(
            ["Service", "ready endpoints lost", "from", "until"],
            rows,
        ));
    }
    if !n.refusals.is_empty() {
        out.push_str("\n### Disruption budgets\n\n");
        let rows = n
            .refusals
            .iter()
            .map(|r| [cell(&r.budget), r.pods_here.to_string(), cell(&r.detail)])
            .collect();
        out.push_str(&table(["budget", "evictions refused", "why"], rows));
    }
    if !n.single_replica.is_empty() {
        let _ = writeln!(
            out,
            "\nSingle-replica workloads here: {}.",
            inline(&n.single_replica.join(", "))
        );
    }
}

/// `prediction.json`'s text.
pub fn json(f: &Forecast, about: &About) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&PredictionFile {
        kind: KIND.into(),
        schema_version: SCHEMA_VERSION,
        about: about.clone(),
        forecast: f.clone(),
    })
}

/// Writes `prediction.md` and `prediction.json` into `dir`; returns the
/// Markdown's path.
pub fn write(files: &dyn Files, dir: &Path, f: &Forecast, about: &About) -> Result<PathBuf, Error> {
    output::create_dir(files, dir)?;
    let path = dir.join(PREDICTION_JSON);
    let text = json(f, about).map_err(|source| Error::Serialize {
        path: path.clone(),
        source,
    })?;
    output::write(files, path, &text)?;
    let chart = match f.nodes.first() {
        Some(first) => {
            let svg = super::svg::forecast::render(first, f.fault.name());
            output::write(files, dir.join(PREDICTION_SVG), &svg)?;
            Some(PREDICTION_SVG)
        }
        None => None,
    };
    let md = dir.join(PREDICTION_MD);
    output::write(files, md.clone(), &render(f, about, chart))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::snapshot::{Node, Owner, Pod, Snapshot};
    use crate::predict::{Ask, Fault, forecast};
    use crate::profile::TimingProfile;

    #[test]
    fn a_forecast_reads_as_ranked_nodes_values_and_each_node_s_timeline() {
        let f = Forecast::example();
        let about = About {
            cluster: "context kind-a".into(),
            read_at: "2026-11-26 21:00:00 UTC".into(),
            nodes: 2,
            pods: 1,
            discovery_notes: vec![],
        };
        let md = render(&f, &about, Some(PREDICTION_SVG));
        // the tables' cells are padded to their column's width
        let squeezed = md
            .split(' ')
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let md = squeezed.as_str();
        assert!(md.starts_with("# Prediction: poweroff of a node\n"), "{md}");
        assert!(md.contains("| 1 | w1 | 0 | 1 | 0 | 0 | 1 |"), "{md}");
        assert!(md.contains("| T0+40s .. T0+55s | Ready=Unknown"), "{md}");
        assert!(md.contains("| shop/db-0 | StatefulSet/db | T0+5m40s .. T0+6m5s | tolerationSeconds: 300 | none, stuck until"), "{md}");
        assert!(
            md.contains("## Nodes whose loss disrupts no pod\n\nw2"),
            "{md}"
        );
        assert!(md.contains("Cluster context kind-a, read at"), "{md}");
        assert!(
            md.contains("![the predicted timeline of w1](prediction.svg)"),
            "{md}"
        );
        let back: PredictionFile = serde_json::from_str(&json(&f, &about).unwrap()).unwrap();
        assert_eq!((back.kind.as_str(), back.forecast), (KIND, f));
    }

    #[test]
    fn past_the_costliest_nodes_the_rest_are_named_not_detailed() {
        let names: Vec<String> = (1..=DETAILED + 5).map(|i| format!("w{i:02}")).collect();
        let snap = Snapshot {
            nodes: names.iter().map(|n| Node::example(n)).collect(),
            pods: names
                .iter()
                .map(|n| {
                    Pod::example(
                        "shop",
                        &format!("web-{n}"),
                        n,
                        Owner::Deployment("web".into()),
                        "web",
                    )
                })
                .collect(),
            ..Snapshot::default()
        };
        let f = forecast(&snap, &TimingProfile::fast(), Fault::Pause, &Ask::default()).unwrap();
        let about = About {
            cluster: "sim".into(),
            read_at: "now".into(),
            nodes: names.len(),
            pods: names.len(),
            discovery_notes: vec![],
        };
        let md = render(&f, &about, None);
        assert_eq!(md.matches("\n## #").count(), DETAILED, "{md}");
        assert!(
            md.contains("## The other 5 nodes whose loss disrupts pods"),
            "{md}"
        );
        assert!(md.contains("w26, w27, w28, w29, w30"), "{md}");
    }
}
