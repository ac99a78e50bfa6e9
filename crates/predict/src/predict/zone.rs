//! `predict --zone`: what losing a set of nodes together would do (a zone,
//! or the nodes a selector picks). The zone rules decide each node's
//! NoExecute taint (`disruption::forecast`: the zone's state, its pace, the
//! node's turn), each pod's own toleration its eviction, and a scheduler-like
//! fit (`fit`) where each replacement can run; from those: the workloads left
//! with no ready replica, the StatefulSets that lose a majority, the
//! Services that go dark and for how long, the budgets broken, the pods that
//! wait for a volume and those that cannot move at all.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::fate::{self, Course, Event, PodFate, Replacement, When};
use super::fit::{Placement, Placer};
use super::snapshot::{Claim, Owner, Pod, Snapshot, terms_match};
use super::{Fault, TAINT_TOKEN_MS, Timings, Value, values};
use crate::disruption::{self, Slot, ZONE_LABEL, ZoneNode, zone_of};
use crate::plan::time::Ms;
use crate::profile::TimingProfile;

mod effects;
pub mod scenario;
mod set;

pub use self::set::Set;

/// Said in every zone prediction: what the fit leaves out.
pub const NOT_MODELLED: &str = "The fit runs the scheduler's filters (node selector and required \
    node affinity, the volumes' node affinity, taints, CPU/memory/pod slots against allocatable, \
    hard topology spread, required pod anti-affinity both ways) pod by pod, each taking its room \
    before the next. It does not model scoring (a replacement is put on the least allocated node \
    that takes it, where the scheduler weighs more, so which node is a guess and whether it fits \
    is not), preemption, soft constraints, required pod affinity, minDomains, host ports, \
    extended resources, ephemeral storage, or volumes not yet bound; nor how long a replacement \
    takes to start (image pulls, probes).";

/// Errors of a set's forecast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    UnknownZone {
        name: String,
        known: Vec<String>,
    },
    NoNode(String),
    /// `--nodes` is not a label selector (why, in words).
    Selector(String),
    /// A fault a set forecast does not predict.
    Fault(Fault),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::UnknownZone { name, known } => write!(
                f,
                "zone `{name}` is not in the cluster (its zones, from {ZONE_LABEL}: {}); name one \
                 of them, or pass --zone alone to rank them all",
                known.join(", ")
            ),
            Error::NoNode(sel) => write!(
                f,
                "no node matches `{sel}`; give a selector of the nodes' labels (`kubectl get \
                 nodes --show-labels`)"
            ),
            Error::Selector(why) => write!(f, "--nodes: {why}"),
            Error::Fault(fault) => write!(
                f,
                "--zone and --nodes predict a set going silent (poweroff, pause, drop-nic, \
                 stop-kubelet), not `{}`; a set's forecast lists the budgets that would refuse \
                 its drain",
                fault.name()
            ),
        }
    }
}

impl std::error::Error for Error {}

/// What becomes of one pod of the set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Outcome {
    /// Evicted; its replacement runs there.
    Replaced { node: String, zone: String },
    /// Evicted; its replacement finds no node and stays Pending.
    Pending { why: String },
    /// Evicted; its replacement can only run where its volume is, and
    /// that is in the set.
    CannotMove { why: String },
    /// Evicted; its replacement is placed but waits for a volume still
    /// attached to the lost node.
    WaitsForDetach {
        node: String,
        claims: Vec<String>,
        release: String,
    },
    /// No replacement until remediation (a StatefulSet's pod).
    Stuck { release: String },
    /// Nothing recreates it.
    Never,
    /// Never evicted: its node is never tainted (the zone rules); Ready=False,
    /// out of its Services, until the node is back.
    Stranded { why: String },
    /// Stays with its node (a DaemonSet's, a static pod, a pod tolerating
    /// the taint for ever).
    Stays,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Moved {
    pub pod: String,
    pub owner: String,
    pub node: String,
    pub evicted: When,
    /// The node's taint is a race at the zone's tipping: evicted then, or
    /// stranded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub maybe: bool,
    pub why: String,
    pub outcome: Outcome,
}

/// One failed node's course.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub node: String,
    pub zone: String,
    pub unknown: When,
    pub taint: When,
    /// The zone rules' slot, in words (`+20s`, `never`).
    pub slot: String,
}

/// A workload with replicas in the set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadLoss {
    /// `Deployment shop/web`.
    pub workload: String,
    pub replicas: usize,
    /// Ready now, and Ready now in the set.
    pub ready: usize,
    pub lost: usize,
    /// Replacements that find a node (none waiting for a volume).
    pub replaced: usize,
    /// Replacements that stay Pending or cannot move.
    pub pending: usize,
    /// No Ready replica left once the set is out.
    pub at_zero: bool,
    /// A StatefulSet left with fewer Ready than a majority of its replicas.
    pub majority_lost: bool,
}

/// A Service whose every ready endpoint is in the set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceDark {
    pub service: String,
    pub endpoints: usize,
    pub from: When,
    /// When a replacement that runs is created (Never: not before the set
    /// is back, or remediation).
    pub until: When,
    pub why: String,
}

/// A budget the set's loss breaks, or whose drain it refuses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetLoss {
    pub budget: String,
    pub healthy: i32,
    pub desired: i32,
    pub lost: i32,
    /// Healthy pods below `desiredHealthy` once the set is out.
    pub below: bool,
    /// Evictions of a drain of the set the budget refuses (429) now.
    pub drain_refused: i32,
}

/// What losing the set costs; compared field by field, the first most.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetCost {
    pub services_dark: usize,
    pub workloads_at_zero: usize,
    pub majorities_lost: usize,
    /// Pods whose work does not run again elsewhere (Pending, cannot move,
    /// stuck, waiting for a volume, stranded, bare).
    pub not_running: usize,
    pub budgets_below: usize,
    pub disrupted: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetForecast {
    pub set: String,
    pub selector: String,
    pub rank: usize,
    pub nodes: Vec<String>,
    pub cost: SetCost,
    pub zones: disruption::Forecast,
    pub turns: Vec<Turn>,
    pub timeline: Vec<Event>,
    pub pods: Vec<Moved>,
    pub workloads: Vec<WorkloadLoss>,
    pub services: Vec<ServiceDark>,
    pub budgets: Vec<BudgetLoss>,
}

/// The forecast for one fault over sets of nodes, the costliest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneForecast {
    pub fault: Fault,
    pub values: Vec<Value>,
    pub sets: Vec<SetForecast>,
    pub not_modelled: String,
}

/// Forecasts `fault` on each set, ranked.
pub fn forecast(
    snap: &Snapshot,
    profile: &TimingProfile,
    fault: Fault,
    sets: &[Set],
) -> Result<ZoneForecast, Error> {
    if matches!(fault, Fault::Drain | Fault::Shutdown) {
        return Err(Error::Fault(fault));
    }
    let t = Timings::of(profile);
    let zone_nodes: Vec<ZoneNode> = snap
        .nodes
        .iter()
        .map(|n| ZoneNode::of(&n.name, &n.labels, n.ready == "True"))
        .collect();
    let mut out: Vec<SetForecast> = sets
        .iter()
        .map(|s| one(snap, profile, &t, &zone_nodes, s))
        .collect();
    out.sort_by(|a, b| b.cost.cmp(&a.cost).then_with(|| a.set.cmp(&b.set)));
    for (i, s) in out.iter_mut().enumerate() {
        s.rank = i + 1;
    }
    Ok(ZoneForecast {
        fault,
        values: values(profile),
        sets: out,
        not_modelled: NOT_MODELLED.into(),
    })
}

fn one(
    snap: &Snapshot,
    profile: &TimingProfile,
    t: &Timings,
    zone_nodes: &[ZoneNode],
    set: &Set,
) -> SetForecast {
    let rules = disruption::forecast(zone_nodes, &set.nodes, profile);
    let unknown = When::Between {
        from: t.grace - t.lease / 4,
        to: t.grace + t.monitor_period,
    };
    let turns: Vec<Turn> = rules
        .slots
        .iter()
        .map(|s| {
            let taint = match s.slot {
                Slot::At(d) | Slot::Maybe(d) => {
                    let d = Ms::try_from(d.as_millis()).unwrap_or(Ms::MAX);
                    unknown.plus(d).later_by(TAINT_TOKEN_MS)
                }
                Slot::Never(_) => When::Never,
            };
            Turn {
                node: s.node.clone(),
                zone: s.zone.clone(),
                unknown,
                taint,
                slot: s.slot.words(),
            }
        })
        .collect();
    let maybe: BTreeSet<&str> = rules
        .slots
        .iter()
        .filter(|s| matches!(s.slot, Slot::Maybe(_)))
        .map(|s| s.node.as_str())
        .collect();
    // the nodes never tainted, and the rule that stops their zone
    let stops: BTreeMap<&str, String> = rules
        .slots
        .iter()
        .filter_map(|s| match s.slot {
            Slot::Never(stop) => Some((s.node.as_str(), stop.rule(profile))),
            _ => None,
        })
        .collect();
    let taint_of = |node: &str| {
        turns
            .iter()
            .find(|x| x.node == node)
            .map_or(When::Never, |x| x.taint)
    };
    // each pod of the set, its fate as the single-node rules give it under
    // its node's taint
    let mut here: Vec<(&Pod, PodFate)> = snap
        .pods
        .iter()
        .filter(|p| p.live() && p.node.as_deref().is_some_and(|n| set.nodes.contains(n)))
        .map(|p| {
            let node = p.node.as_deref().unwrap_or_default();
            (p, fate::fate(snap, &Course::Silent, taint_of(node), p))
        })
        .collect();
    here.sort_by_key(|(p, f)| (f.evicted.from().unwrap_or(Ms::MAX), p.key()));
    let lost: BTreeSet<&str> = set.nodes.iter().map(String::as_str).collect();
    let gone: BTreeSet<String> = here
        .iter()
        .filter(|(_, f)| f.evicted != When::Never)
        .map(|(p, _)| p.key())
        .collect();
    let mut placer = Placer::new(snap, &lost, &gone);
    let pods: Vec<Moved> = here
        .iter()
        .map(|(p, f)| {
            let node = p.node.clone().unwrap_or_default();
            let outcome = outcome(
                snap,
                t,
                &mut placer,
                &lost,
                (p, f),
                stops.get(node.as_str()),
            );
            Moved {
                pod: f.pod.clone(),
                owner: f.owner.clone(),
                maybe: maybe.contains(node.as_str()) && f.evicted != When::Never,
                node,
                evicted: f.evicted,
                why: f.why.clone(),
                outcome,
            }
        })
        .collect();
    let workloads = effects::workloads(snap, &here, &pods);
    let services = effects::services(snap, &set.nodes, unknown, &pods);
    let budgets = effects::budgets(snap, &set.nodes);
    let timeline = effects::timeline(&rules, &turns, unknown, &pods, &services);
    let cost = SetCost {
        services_dark: services.len(),
        workloads_at_zero: workloads.iter().filter(|w| w.at_zero).count(),
        majorities_lost: workloads.iter().filter(|w| w.majority_lost).count(),
        not_running: pods
            .iter()
            .filter(|m| !matches!(m.outcome, Outcome::Replaced { .. } | Outcome::Stays))
            .count(),
        budgets_below: budgets.iter().filter(|b| b.below).count(),
        disrupted: pods
            .iter()
            .filter(|m| !matches!(m.outcome, Outcome::Stays))
            .count(),
    };
    SetForecast {
        set: set.name.clone(),
        selector: set.selector.clone(),
        rank: 0,
        nodes: set.nodes.iter().cloned().collect(),
        cost,
        zones: rules,
        turns,
        timeline,
        pods,
        workloads,
        services,
        budgets,
    }
}

/// A pod's outcome: stranded where its node is never tainted, else what
/// its owner does, its replacement placed by the fit.
fn outcome<'a>(
    snap: &'a Snapshot,
    t: &Timings,
    placer: &mut Placer<'a>,
    lost: &BTreeSet<&str>,
    (p, f): (&'a Pod, &PodFate),
    stop: Option<&String>,
) -> Outcome {
    let node = p.node.as_deref().unwrap_or_default();
    match &f.replacement {
        Replacement::Stays => match stop {
            Some(why)
                if p.unreachable != super::snapshot::Toleration::Forever
                    && !matches!(p.owner, Owner::DaemonSet(_) | Owner::Static) =>
            {
                Outcome::Stranded { why: why.clone() }
            }
            _ => Outcome::Stays,
        },
        Replacement::Stuck { release } => Outcome::Stuck {
            release: release.clone(),
        },
        Replacement::Never => Outcome::Never,
        Replacement::AtEviction | Replacement::WhenGone => match placer.place(p) {
            Placement::Pending { why } => {
                if pinned_to(snap, p, lost) {
                    Outcome::CannotMove {
                        why: format!(
                            "its volume's node affinity (a PersistentVolume bound to {}) matches only nodes of the set: {why}",
                            claims_of(snap, p).join(", ")
                        ),
                    }
                } else {
                    Outcome::Pending { why }
                }
            }
            Placement::On { node: to } => {
                let held: Vec<String> = snap
                    .claims
                    .iter()
                    .filter(|c| {
                        c.namespace == p.namespace
                            && p.claims.contains(&c.name)
                            && c.single_node
                            && c.attached_to.iter().any(|n| n == node)
                    })
                    .map(|c| c.name.clone())
                    .collect();
                if held.is_empty() {
                    let zone = snap
                        .nodes
                        .iter()
                        .find(|n| n.name == to)
                        .map(|n| zone_of(&n.labels))
                        .unwrap_or_default();
                    Outcome::Replaced { node: to, zone }
                } else {
                    Outcome::WaitsForDetach {
                        node: to,
                        claims: held,
                        release: fate::detach_release(t.force_detach),
                    }
                }
            }
        },
    }
}

/// The pod's bound volumes allow no node outside the set.
fn pinned_to(snap: &Snapshot, p: &Pod, lost: &BTreeSet<&str>) -> bool {
    let pinning = pinning(snap, p);
    !pinning.is_empty()
        && !snap
            .nodes
            .iter()
            .filter(|n| !lost.contains(n.name.as_str()))
            .any(|n| pinning.iter().all(|c| terms_match(&c.node_terms, n)))
}

/// The pod's claims whose volume has a required node affinity.
fn pinning<'a>(snap: &'a Snapshot, p: &Pod) -> Vec<&'a Claim> {
    snap.claims
        .iter()
        .filter(|c| c.namespace == p.namespace && p.claims.contains(&c.name))
        .filter(|c| !c.node_terms.is_empty())
        .collect()
}

fn claims_of(snap: &Snapshot, p: &Pod) -> Vec<String> {
    pinning(snap, p)
        .iter()
        .map(|c| format!("claim {}", c.name))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;
