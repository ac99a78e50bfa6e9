//! One node's forecast: the node's transitions, each pod's fate, the
//! Services, budgets and volumes it takes with it.

use serde::{Deserialize, Serialize};

use super::snapshot::{Node, Owner, Pod, Snapshot, Toleration};
use super::{FORCE_DETACH_MS, Fault, Graceful, TAINT_TOKEN_MS, Timings};
use crate::plan::time::Ms;

/// When something happens, counted from the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "when")]
pub enum When {
    Between { from: Ms, to: Ms },
    Never,
}

impl When {
    fn at(ms: Ms) -> When {
        When::Between { from: ms, to: ms }
    }

    pub(super) fn plus(self, ms: Ms) -> When {
        match self {
            When::Between { from, to } => When::Between {
                from: from.saturating_add(ms),
                to: to.saturating_add(ms),
            },
            When::Never => When::Never,
        }
    }

    pub(super) fn later_by(self, up_to: Ms) -> When {
        match self {
            When::Between { from, to } => When::Between {
                from,
                to: to.saturating_add(up_to),
            },
            When::Never => When::Never,
        }
    }

    /// The earliest moment, if it happens.
    pub fn from(self) -> Option<Ms> {
        match self {
            When::Between { from, .. } => Some(from),
            When::Never => None,
        }
    }
}

/// What a transition of the predicted timeline is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mark {
    /// The node's own condition or taints.
    Node,
    /// A pod goes, and its owner replaces it.
    Replaced,
    /// A pod goes and nothing replaces it (until remediation, or ever).
    Stuck,
}

/// One transition of the predicted timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub at: When,
    pub mark: Mark,
    pub what: String,
}

/// What becomes of a pod's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "replaced")]
pub enum Replacement {
    /// Its owner creates another at once, while the old one is still
    /// Terminating (a ReplicaSet, a Job).
    AtEviction,
    /// Its owner creates one when the old one is gone (a StatefulSet after
    /// a drain's graceful termination, or after the kubelet stopped it).
    WhenGone,
    /// A StatefulSet's: no replacement while the old pod is Terminating on
    /// a node that cannot confirm it stopped, until someone remediates.
    Stuck { release: String },
    /// Nothing recreates it (a bare pod).
    Never,
    /// It stays (a DaemonSet's or a static pod, or a pod that tolerates the
    /// taint for ever): back when the node is.
    Stays,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodFate {
    pub pod: String,
    pub owner: String,
    /// When it turns Terminating (evicted, or stopped by the kubelet).
    pub evicted: When,
    /// Where the eviction time comes from (`tolerationSeconds: 300`).
    pub why: String,
    pub replacement: Replacement,
    /// A single-node (RWO) volume its replacement must wait to have detached.
    pub waits_for_detach: Vec<String>,
}

/// A Service losing ready endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceLoss {
    pub service: String,
    pub ready_here: usize,
    pub ready_total: usize,
    /// When the endpoints here turn not ready.
    pub from: When,
    /// Until when, in words, when all are lost.
    pub until: String,
}

/// A budget that refuses (part of) a drain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub budget: String,
    pub pods_here: usize,
    pub disruptions_allowed: i32,
    pub detail: String,
}

/// What losing a node costs; compared field by field, the first most.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Services left with no ready endpoint.
    pub services_down: usize,
    /// Pods no one replaces until remediation (or ever).
    pub stuck: usize,
    /// Evictions a budget refuses (drain).
    pub refused: usize,
    /// Workloads of one replica that run here.
    pub single_replica: usize,
    /// Pods that go.
    pub disrupted: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeForecast {
    pub node: String,
    pub rank: usize,
    /// How the API server learns of the fault on this node.
    pub course: Course,
    pub cost: Cost,
    pub timeline: Vec<Event>,
    pub pods: Vec<PodFate>,
    pub services: Vec<ServiceLoss>,
    pub refusals: Vec<Refusal>,
    /// `Deployment ns/name`, `StatefulSet ns/name` of one replica, here.
    pub single_replica: Vec<String>,
    pub notes: Vec<String>,
}

/// How the API server learns of the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Course {
    /// The node goes silent: Unknown after the grace period, then the
    /// unreachable taint and evictions after each pod's toleration.
    Silent,
    /// The kubelet shuts the pods down itself and reports NotReady.
    Graceful(Graceful),
    /// Cordoned, and each pod evicted through the Eviction API.
    Drain,
}

/// How long after a graceful shutdown starts its Node reads Ready=False:
/// the kubelet posts it at once (seen 0.35 s on kind's 1.35 kubelet), this
/// allows for the API and a watch.
pub const KUBELET_REPORTS_MS: Ms = 5_000;

/// The priority from which the kubelet counts a pod critical
/// (`system-cluster-critical` and above), stopped last in a graceful
/// shutdown.
pub const CRITICAL_PRIORITY: i32 = 2_000_000_000;

const STATEFUL_RELEASE: &str = "the out-of-service taint (pod GC force-deletes it within podGc), \
                                deleting the Node (orphaned pods go after orphanQuarantine), or \
                                a force delete of the pod";

pub fn node(
    snap: &Snapshot,
    t: &Timings,
    fault: Fault,
    node: &Node,
    graceful: Option<(Graceful, &str)>,
) -> NodeForecast {
    let course = match (fault, graceful) {
        (Fault::Drain, _) => Course::Drain,
        (Fault::Shutdown, Some((g, _))) if g.grace_ms > 0 => Course::Graceful(g),
        _ => Course::Silent,
    };
    let here: Vec<&Pod> = snap
        .pods
        .iter()
        .filter(|p| p.node.as_deref() == Some(node.name.as_str()) && p.live())
        .collect();
    let mut timeline = Vec::new();
    let mut notes = Vec::new();
    // When the node's pods stop counting as ready endpoints.
    let unready: When;
    // When the NoExecute taint that starts the pods' tolerations comes.
    let mut taint = When::Never;
    match &course {
        Course::Silent => {
            // the last lease renewal is up to lease/4 before the fault
            let unknown = When::Between {
                from: t.grace - t.lease / 4,
                to: t.grace + t.monitor_period,
            };
            timeline.push(Event {
                at: unknown,
                mark: Mark::Node,
                what:
                    "Ready=Unknown (no lease renewal for the grace period); its pods Ready=False, \
                       out of their Services' ready endpoints"
                        .into(),
            });
            taint = unknown.later_by(TAINT_TOKEN_MS);
            timeline.push(Event {
                at: taint,
                mark: Mark::Node,
                what: "tainted node.kubernetes.io/unreachable:NoExecute (NoSchedule at once; \
                       NoExecute up to 10 s later through the taint queue's rate limit)"
                    .into(),
            });
            unready = unknown;
            if fault == Fault::Shutdown {
                notes.push(
                    "graceful node shutdown not known for this node (pass --configz to read the \
                     kubelet's): predicted as a poweroff, which is what a kubelet without \
                     shutdownGracePeriod does"
                        .into(),
                );
            }
        }
        Course::Graceful(g) => {
            notes.push(format!(
                "graceful node shutdown: {} s, the last {} s of it for critical pods (read from {})",
                g.grace_ms as f64 / 1000.0,
                g.critical_ms as f64 / 1000.0,
                graceful.map_or("", |(_, from)| from)
            ));
            let ready_false = When::Between {
                from: 0,
                to: KUBELET_REPORTS_MS,
            };
            timeline.push(Event {
                at: ready_false,
                mark: Mark::Node,
                what: "Ready=False (\"node is shutting down\": the kubelet says so as the \
                       shutdown starts), tainted not-ready:NoSchedule"
                    .into(),
            });
            timeline.push(Event {
                at: When::Between {
                    from: 0,
                    to: g.regular_ms(),
                },
                mark: Mark::Node,
                what: "the kubelet stops the pods (phase Succeeded or Failed by their exit codes, \
                       DisruptionTarget TerminationByKubelet); critical pods last"
                    .into(),
            });
            // the machine goes off once the pods are stopped, at the latest
            // when the grace period ends; its lease was renewed until then
            timeline.push(Event {
                at: When::Between {
                    from: t.grace - t.lease / 4,
                    to: g.grace_ms + t.grace + t.monitor_period,
                },
                mark: Mark::Node,
                what: "Ready=Unknown once the machine is off".into(),
            });
            unready = ready_false;
        }
        Course::Drain => {
            timeline.push(Event {
                at: When::at(0),
                mark: Mark::Node,
                what: "cordoned (spec.unschedulable), then each pod evicted through the Eviction \
                       API"
                .into(),
            });
            unready = When::at(0);
        }
    }
    let pods: Vec<PodFate> = here.iter().map(|p| fate(snap, &course, taint, p)).collect();
    for f in &pods {
        if let (When::Between { .. }, Replacement::AtEviction | Replacement::WhenGone) =
            (f.evicted, &f.replacement)
        {
            let goes = match course {
                Course::Graceful(_) => "stopped by the kubelet",
                Course::Silent | Course::Drain => "Terminating",
            };
            timeline.push(Event {
                at: f.evicted,
                mark: Mark::Replaced,
                what: format!("{} {goes}; its {} creates a replacement", f.pod, f.owner),
            });
        }
    }
    // a silent node's pod holding a volume: its replacement waits for
    // remediation as a StatefulSet's does
    let held = |f: &PodFate| course == Course::Silent && !f.waits_for_detach.is_empty();
    let stuck: Vec<&PodFate> = pods
        .iter()
        .filter(|f| {
            matches!(
                f.replacement,
                Replacement::Stuck { .. } | Replacement::Never
            ) || held(f)
        })
        .collect();
    for f in &stuck {
        let at = f.evicted;
        timeline.push(Event {
            at,
            mark: Mark::Stuck,
            what: match &f.replacement {
                Replacement::Stuck { .. } => format!(
                    "{} Terminating, stuck: its {} makes no replacement until remediation",
                    f.pod, f.owner
                ),
                Replacement::AtEviction => format!(
                    "{} Terminating; its replacement waits for {}: {}",
                    f.pod,
                    f.waits_for_detach.join(", "),
                    detach_release(t.force_detach)
                ),
                _ => format!("{} Terminating; nothing recreates it (no owner)", f.pod),
            },
        });
    }
    timeline.sort_by_key(|e| e.at.from().unwrap_or(Ms::MAX));
    let services = services(snap, node, unready, &pods, course, t.force_detach);
    let refusals = match course {
        Course::Drain => refusals(snap, &here),
        _ => Vec::new(),
    };
    let single_replica = single_replica(snap, &here);
    let cost = Cost {
        services_down: services
            .iter()
            .filter(|s| s.ready_here == s.ready_total)
            .count(),
        stuck: stuck.len(),
        refused: refusals.iter().map(|r| r.pods_here).sum(),
        single_replica: single_replica.len(),
        disrupted: pods
            .iter()
            .filter(|f| !matches!(f.replacement, Replacement::Stays))
            .count(),
    };
    NodeForecast {
        node: node.name.clone(),
        rank: 0,
        course,
        cost,
        timeline,
        pods,
        services,
        refusals,
        single_replica,
        notes,
    }
}

pub(super) fn fate(snap: &Snapshot, course: &Course, taint: When, p: &Pod) -> PodFate {
    // single-node volumes attached (a VolumeAttachment) to the pod's node
    let rwo: Vec<String> = p
        .claims
        .iter()
        .filter(|c| {
            snap.claims.iter().any(|k| {
                k.namespace == p.namespace
                    && &k.name == *c
                    && k.single_node
                    && k.attached_to.iter().any(|n| Some(n) == p.node.as_ref())
            })
        })
        .cloned()
        .collect();
    let mut f = PodFate {
        pod: p.key(),
        owner: p.owner.label(),
        evicted: When::Never,
        why: String::new(),
        replacement: Replacement::Stays,
        waits_for_detach: Vec::new(),
    };
    match course {
        Course::Silent => {
            (f.evicted, f.why) = match p.unreachable {
                Toleration::None => (taint, "no toleration for unreachable".to_owned()),
                Toleration::Seconds(s) => (
                    taint.plus(s.saturating_mul(1000)),
                    format!("tolerationSeconds: {s}"),
                ),
                Toleration::Forever => (When::Never, "tolerates unreachable for ever".into()),
            };
            if f.evicted == When::Never || p.owner == Owner::Static {
                f.evicted = When::Never;
                f.replacement = Replacement::Stays;
                return f;
            }
            f.replacement = match &p.owner {
                Owner::Deployment(_) | Owner::ReplicaSet(_) | Owner::Job(_) => {
                    Replacement::AtEviction
                }
                Owner::StatefulSet(_) => Replacement::Stuck {
                    release: STATEFUL_RELEASE.into(),
                },
                Owner::None => Replacement::Never,
                Owner::DaemonSet(_) | Owner::Static | Owner::Other(_) => Replacement::Stays,
            };
            if matches!(f.replacement, Replacement::AtEviction) {
                f.waits_for_detach = rwo;
            }
        }
        Course::Graceful(g) => {
            let critical = p.priority >= CRITICAL_PRIORITY;
            f.evicted = if critical {
                When::Between {
                    from: g.regular_ms(),
                    to: g.grace_ms,
                }
            } else {
                When::Between {
                    from: 0,
                    to: g.regular_ms(),
                }
            };
            f.why = "stopped by the kubelet's graceful node shutdown".into();
            f.replacement = match &p.owner {
                Owner::DaemonSet(_) | Owner::Static => Replacement::Stays,
                Owner::None | Owner::Other(_) => Replacement::Never,
                // a Failed pod is deleted at once (no grace left), so a
                // StatefulSet recreates it too
                _ => Replacement::WhenGone,
            };
            if !matches!(f.replacement, Replacement::Stays | Replacement::Never) {
                f.waits_for_detach = rwo;
            }
        }
        Course::Drain => {
            f.why = "evicted by the drain".into();
            f.evicted = When::at(0);
            f.replacement = match &p.owner {
                Owner::DaemonSet(_) | Owner::Static => {
                    f.evicted = When::Never;
                    f.why = "skipped by a drain (DaemonSet pods with --ignore-daemonsets, mirror \
                             pods always)"
                        .into();
                    Replacement::Stays
                }
                Owner::None => {
                    f.why = "a bare pod: the drain refuses it without --force".into();
                    Replacement::Never
                }
                Owner::StatefulSet(_) => Replacement::WhenGone,
                _ => Replacement::AtEviction,
            };
        }
    }
    f
}

/// How a volume held by a pod Terminating on a silent node is released:
/// the attach-detach controller keeps a deleted pod's volumes until the pod
/// is terminated (`IsPodTerminated`: Failed, Succeeded, or every container
/// reported stopped), which a node that cannot report never says
/// (STORAGE-FACTS.md); the force detach's clock starts only once the pod
/// object is gone.
pub fn detach_release(force_detach: bool) -> String {
    if force_detach {
        format!(
            "the old pod stays Terminating on a node that cannot confirm it stopped, so the \
             attach-detach controller keeps its volume attached there: the out-of-service taint \
             releases it at once; a force delete of the pod or the Node's deletion starts the \
             {}-minute force detach (maxWaitForUnmountDuration)",
            FORCE_DETACH_MS / 60_000
        )
    } else {
        "the old pod stays Terminating on a node that cannot confirm it stopped, so the \
         attach-detach controller keeps its volume attached there: only the out-of-service taint \
         releases it (--disable-force-detach-on-timeout: no force detach, ever)"
            .into()
    }
}

fn services(
    snap: &Snapshot,
    node: &Node,
    unready: When,
    pods: &[PodFate],
    course: Course,
    force_detach: bool,
) -> Vec<ServiceLoss> {
    let mut out = Vec::new();
    for s in &snap.services {
        let ready: Vec<_> = s.endpoints.iter().filter(|e| e.ready).collect();
        let here: Vec<_> = ready
            .iter()
            .filter(|e| e.node.as_deref() == Some(node.name.as_str()))
            .collect();
        if here.is_empty() {
            continue;
        }
        let fates: Vec<&PodFate> = here
            .iter()
            .filter_map(|e| {
                let key = e.pod.as_ref().map(|p| format!("{}/{p}", s.namespace))?;
                pods.iter().find(|f| f.pod == key)
            })
            .collect();
        let until = if here.len() < ready.len() {
            String::new()
        } else if let Some(f) = fates
            .iter()
            .filter(|f| {
                matches!(
                    f.replacement,
                    Replacement::AtEviction | Replacement::WhenGone
                ) && (course != Course::Silent || f.waits_for_detach.is_empty())
            })
            .min_by_key(|f| f.evicted.from().unwrap_or(Ms::MAX))
        {
            let detach = if f.waits_for_detach.is_empty() {
                String::new()
            } else {
                ", once the stopped pod's volume is detached".to_owned()
            };
            format!(
                "a replacement of {} is Ready (created when it goes Terminating{detach})",
                f.pod
            )
        } else if let Some(f) = fates.iter().find(|f| !f.waits_for_detach.is_empty()) {
            format!(
                "remediation: the replacement of {} waits for {}; {}",
                f.pod,
                f.waits_for_detach.join(", "),
                detach_release(force_detach)
            )
        } else if fates
            .iter()
            .any(|f| matches!(f.replacement, Replacement::Stuck { .. }))
        {
            "remediation: nothing replaces its pods before".into()
        } else {
            "the node is back".into()
        };
        out.push(ServiceLoss {
            service: format!("{}/{}", s.namespace, s.name),
            ready_here: here.len(),
            ready_total: ready.len(),
            from: unready,
            until,
        });
    }
    out
}

fn refusals(snap: &Snapshot, here: &[&Pod]) -> Vec<Refusal> {
    let mut out = Vec::new();
    for b in &snap.budgets {
        let Some(sel) = &b.selector else { continue };
        let n = here
            .iter()
            .filter(|p| p.namespace == b.namespace && sel.matches(&p.labels))
            .filter(|p| !matches!(p.owner, Owner::DaemonSet(_) | Owner::Static))
            .count();
        let allowed = usize::try_from(b.disruptions_allowed.max(0)).unwrap_or(0);
        if n > allowed {
            let detail = if allowed == 0 && b.current_healthy <= b.desired_healthy {
                format!(
                    "every eviction answered 429 (TooManyRequests): {} healthy of {} desired, \
                     no disruption allowed; the drain waits until more pods are healthy elsewhere",
                    b.current_healthy, b.desired_healthy
                )
            } else {
                format!(
                    "{allowed} eviction(s) allowed now, {} refused (429) until replacements are \
                     healthy",
                    n - allowed
                )
            };
            out.push(Refusal {
                budget: format!("{}/{}", b.namespace, b.name),
                pods_here: n - allowed,
                disruptions_allowed: b.disruptions_allowed,
                detail,
            });
        }
    }
    out
}

fn single_replica(snap: &Snapshot, here: &[&Pod]) -> Vec<String> {
    snap.workloads
        .iter()
        .filter(|w| w.replicas == 1)
        .filter(|w| {
            here.iter().any(|p| {
                p.namespace == w.namespace
                    && match (&p.owner, w.kind.as_str()) {
                        (Owner::Deployment(n), "Deployment")
                        | (Owner::StatefulSet(n), "StatefulSet") => *n == w.name,
                        _ => false,
                    }
            })
        })
        .map(|w| format!("{} {}/{}", w.kind, w.namespace, w.name))
        .collect()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
pub mod tests_support {
    pub use super::tests::cluster;
}
