//! `predict`: for each node (or the ones named), what losing it to a fault
//! would do, ranked by cost. The rules are upstream's (K8S-FACTS.md), the
//! numbers the cluster's own (a [`TimingProfile`] whose values say where
//! they came from) and each pod's own tolerations.

pub mod fate;
pub mod fit;
pub mod scenario;
pub mod snapshot;
pub mod zone;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::fate::{
    Cost, Course, Event, Mark, NodeForecast, PodFate, Replacement, ServiceLoss, When,
};
pub use self::snapshot::Snapshot;
use crate::plan::time::Ms;
use crate::profile::{TimingProfile, Var};

/// The taint queue's token: `--node-eviction-rate` 0.1 node/s, burst 1. A
/// NoExecute taint may come this much after Ready=Unknown
/// (docs/scenario-format.md §7.2).
pub const TAINT_TOKEN_MS: Ms = 10_000;
/// `maxWaitForUnmountDuration`: the attach-detach controller force-detaches
/// a deleted pod's volume from an unhealthy node this long after.
pub const FORCE_DETACH_MS: Ms = 360_000;

/// What happens to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// The machine loses power.
    Poweroff,
    /// The machine freezes (VM paused).
    Pause,
    /// The node's network goes.
    DropNic,
    /// An orderly shutdown: the kubelet's graceful node shutdown, if it runs one.
    Shutdown,
    /// The kubelet stops; the containers keep running.
    StopKubelet,
    /// `kubectl drain`: cordon, then evict every pod through the Eviction API.
    Drain,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Poweroff => "poweroff",
            Fault::Pause => "pause",
            Fault::DropNic => "drop-nic",
            Fault::Shutdown => "shutdown",
            Fault::StopKubelet => "stop-kubelet",
            Fault::Drain => "drain",
        }
    }
}

/// A node's graceful node shutdown as its kubelet runs it (read from its
/// `/configz` when asked to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Graceful {
    pub grace_ms: Ms,
    pub critical_ms: Ms,
}

impl Graceful {
    /// The part of the grace period for pods that are not critical (the
    /// kubelet gives critical pods the last `critical_ms`; never below 0).
    pub fn regular_ms(self) -> Ms {
        (self.grace_ms - self.critical_ms).max(0)
    }
}

/// One number a prediction used, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Value {
    pub name: String,
    pub ms: Ms,
    /// `discovered`, `assumed`, `set`, or `fixed` (no flag sets it).
    pub origin: String,
    pub detail: String,
}

/// The numbers the rules take, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    pub grace: Ms,
    pub monitor_period: Ms,
    pub lease: Ms,
    pub status_update: Ms,
    pub pod_gc: Ms,
    pub orphan_quarantine: Ms,
    /// The attach-detach controller force-detaches after
    /// [`FORCE_DETACH_MS`] (no `--disable-force-detach-on-timeout`).
    pub force_detach: bool,
}

fn ms(d: Duration) -> Ms {
    Ms::try_from(d.as_millis()).unwrap_or(Ms::MAX)
}

impl Timings {
    pub fn of(p: &TimingProfile) -> Timings {
        Timings {
            grace: ms(p.get(Var::NodeMonitorGracePeriod)),
            monitor_period: ms(p.get(Var::NodeMonitorPeriod)),
            lease: ms(p.get(Var::NodeLeaseDuration)),
            status_update: ms(p.get(Var::NodeStatusUpdateFrequency)),
            pod_gc: ms(p.get(Var::PodGcPeriod)),
            orphan_quarantine: ms(p.get(Var::OrphanQuarantine)),
            force_detach: p.force_detach_on_timeout,
        }
    }
}

/// The values a forecast rests on, each with its source.
pub fn values(p: &TimingProfile) -> Vec<Value> {
    let mut out: Vec<Value> = [
        Var::NodeMonitorGracePeriod,
        Var::NodeMonitorPeriod,
        Var::NodeLeaseDuration,
        Var::NodeStatusUpdateFrequency,
        Var::UnreachableTolerationSeconds,
        Var::NotReadyTolerationSeconds,
        Var::PodGcPeriod,
        Var::OrphanQuarantine,
    ]
    .into_iter()
    .map(|v| {
        let origin = p.origin(v);
        Value {
            name: v.alias().unwrap_or(v.name()).to_owned(),
            ms: ms(p.get(v)),
            origin: origin.word().to_owned(),
            detail: origin.detail().to_owned(),
        }
    })
    .collect();
    out.push(Value {
        name: "taint rate limit".into(),
        ms: TAINT_TOKEN_MS,
        origin: "assumed".into(),
        detail: "--node-eviction-rate 0.1 (kube-controller-manager's default; one NoExecute \
                 taint per 10 s)"
            .into(),
    });
    out.push(Value {
        name: "force detach".into(),
        ms: FORCE_DETACH_MS,
        origin: "fixed".into(),
        detail: "maxWaitForUnmountDuration inside kube-controller-manager (no flag sets it)".into(),
    });
    out
}

/// The forecast for one fault: each node's, the costliest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forecast {
    pub fault: Fault,
    pub values: Vec<Value>,
    pub nodes: Vec<NodeForecast>,
    /// Remarks that hold for every node.
    pub notes: Vec<String>,
}

#[cfg(any(test, feature = "examples"))]
impl Forecast {
    /// Upstream default timings; `w1` runs a one-replica StatefulSet's pod
    /// `shop/db-0`, `w2` nothing: a poweroff of each (for tests).
    pub fn example() -> Forecast {
        use snapshot::{Node, Owner, Pod};
        let snap = Snapshot {
            nodes: vec![Node::example("w1"), Node::example("w2")],
            pods: vec![Pod::example(
                "shop",
                "db-0",
                "w1",
                Owner::StatefulSet("db".into()),
                "db",
            )],
            ..Snapshot::default()
        };
        let profile = TimingProfile::upstream_default();
        forecast(&snap, &profile, Fault::Poweroff, &Ask::default())
            .unwrap_or_else(|e| unreachable!("the example's nodes are its own: {e}"))
    }
}

/// What to predict.
#[derive(Debug, Clone, Default)]
pub struct Ask<'a> {
    /// The nodes to forecast (empty: every node).
    pub nodes: &'a [String],
    /// Each node's graceful shutdown, where it was read (`shutdown`).
    pub graceful: &'a [(String, Graceful)],
    /// Where `graceful` was read (`each kubelet's /configz`).
    pub graceful_from: &'a str,
}

/// Errors of a forecast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A node named is not in the cluster.
    UnknownNode { name: String, known: Vec<String> },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::UnknownNode { name, known } => write!(
                f,
                "node `{name}` is not in the cluster (its nodes: {}); name a node it has, or \
                 none for all",
                known.join(", ")
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Forecasts `fault` on each node asked for, ranked: the one whose loss
/// costs most first (Services left with no ready endpoint, then pods that
/// stay stuck, then single-replica workloads, then pods disrupted).
pub fn forecast(
    snap: &Snapshot,
    profile: &TimingProfile,
    fault: Fault,
    ask: &Ask<'_>,
) -> Result<Forecast, Error> {
    let known: Vec<String> = snap.nodes.iter().map(|n| n.name.clone()).collect();
    for name in ask.nodes {
        if !known.contains(name) {
            return Err(Error::UnknownNode {
                name: name.clone(),
                known,
            });
        }
    }
    let t = Timings::of(profile);
    let mut nodes: Vec<NodeForecast> = snap
        .nodes
        .iter()
        .filter(|n| ask.nodes.is_empty() || ask.nodes.contains(&n.name))
        .map(|n| {
            let graceful = ask
                .graceful
                .iter()
                .find(|(name, _)| *name == n.name)
                .map(|(_, g)| *g);
            fate::node(snap, &t, fault, n, graceful.map(|g| (g, ask.graceful_from)))
        })
        .collect();
    nodes.sort_by(|a, b| b.cost.cmp(&a.cost).then_with(|| a.node.cmp(&b.node)));
    for (i, n) in nodes.iter_mut().enumerate() {
        n.rank = i + 1;
    }
    let mut notes = Vec::new();
    let unhealthy = snap.nodes.iter().filter(|n| n.ready != "True").count();
    if unhealthy > 0 {
        notes.push(format!(
            "{unhealthy} of {} nodes are not Ready now: where a zone has no Ready node left, the \
             node lifecycle controller stops NoExecute tainting (no evictions), and in a cluster \
             of 50 nodes or fewer with over 55 % of a zone down, evictions stop",
            snap.nodes.len()
        ));
    }
    Ok(Forecast {
        fault,
        values: values(profile),
        nodes,
        notes,
    })
}
