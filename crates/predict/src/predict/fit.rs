//! Where the pods a failure evicts could run again: a scheduler-like fit on
//! the nodes left, pod by pod, each placement taking its room before the
//! next is tried. It runs the filters of kube-scheduler's default profile
//! that decide whether a pod fits at all: NodeUnschedulable, NodeAffinity
//! (`nodeSelector` and required node affinity), the volumes' node affinity
//! (VolumeBinding, for bound volumes), TaintToleration, NodeResourcesFit
//! (CPU, memory, pod slots against allocatable), PodTopologySpread (hard
//! constraints) and InterPodAffinity (required anti-affinity, both ways).
//!
//! What it does not model, said in every report: scoring (a pod is put on
//! the least allocated node that fits, where the scheduler weighs more),
//! preemption, soft constraints, required pod affinity, `minDomains`, the
//! spread policies other than the defaults (`nodeAffinityPolicy: Honor`,
//! `nodeTaintsPolicy: Ignore`), host ports, extended resources and
//! ephemeral storage, and volumes not yet bound.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::snapshot::{
    AntiAffinity, LabelSelector, Node, NodeTerm, Pod, Resources, Snapshot, Spread, Taint,
    terms_match,
};

/// Where a pod lands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "placed")]
pub enum Placement {
    /// On this node (the least allocated of those it fits).
    On { node: String },
    /// Nowhere: it stays Pending, with the scheduler's kind of message.
    Pending { why: String },
}

/// Why a node does not take a pod, worded as the scheduler's
/// FailedScheduling message words it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Unfit {
    Lost,
    NotReady,
    Unschedulable,
    Affinity,
    VolumeAffinity,
    Taint(String),
    Insufficient(&'static str),
    TooManyPods,
    SpreadLabel,
    Spread,
    AntiAffinity,
    ExistingAntiAffinity,
}

impl Unfit {
    fn words(&self) -> String {
        match self {
            Unfit::Lost => "node(s) lost with the set (tainted unreachable)".into(),
            Unfit::NotReady => "node(s) not Ready".into(),
            Unfit::Unschedulable => "node(s) were unschedulable".into(),
            Unfit::Affinity => "node(s) didn't match Pod's node affinity/selector".into(),
            Unfit::VolumeAffinity => "node(s) had volume node affinity conflict".into(),
            Unfit::Taint(t) => format!("node(s) had untolerated taint {{{t}}}"),
            Unfit::Insufficient(r) => format!("Insufficient {r}"),
            Unfit::TooManyPods => "Too many pods".into(),
            Unfit::SpreadLabel => {
                "node(s) didn't match pod topology spread constraints (missing required label)"
                    .into()
            }
            Unfit::Spread => "node(s) didn't match pod topology spread constraints".into(),
            Unfit::AntiAffinity => "node(s) didn't match pod anti-affinity rules".into(),
            Unfit::ExistingAntiAffinity => {
                "node(s) didn't satisfy existing pods anti-affinity rules".into()
            }
        }
    }
}

/// A pod that counts where it runs, for spreading and anti-affinity.
#[derive(Debug, Clone, Copy)]
struct Present<'a> {
    node: usize,
    pod: &'a Pod,
}

/// The cluster as the failure leaves it, and what has been placed since.
#[derive(Debug)]
pub struct Placer<'a> {
    snap: &'a Snapshot,
    lost: Vec<bool>,
    free: Vec<Resources>,
    present: Vec<Present<'a>>,
    /// Per spread constraint (and the nodes it counts): pods per domain.
    spread: HashMap<String, SpreadCount>,
    /// Per anti-affinity term: the domains holding a pod it matches.
    anti: HashMap<String, AntiCount>,
}

#[derive(Debug)]
struct SpreadCount {
    /// The nodes whose pods count (they match the pod's node affinity).
    eligible: Vec<bool>,
    /// Every eligible domain, with its matching pods.
    counts: BTreeMap<String, i64>,
    topology_key: String,
    namespace: String,
    selector: LabelSelector,
}

#[derive(Debug)]
struct AntiCount {
    namespaces: Vec<String>,
    topology_key: String,
    selector: LabelSelector,
    domains: BTreeSet<String>,
}

fn unbounded() -> Resources {
    Resources {
        cpu_milli: i64::MAX / 4,
        memory: i64::MAX / 4,
        pods: i64::MAX / 4,
    }
}

impl<'a> Placer<'a> {
    /// `lost`: the nodes that fail (they take nothing); `gone`: the pods
    /// that leave their nodes (evicted: Terminating pods count for no
    /// spread, as the scheduler skips them; they keep their node's room).
    pub fn new(snap: &'a Snapshot, lost: &BTreeSet<&str>, gone: &BTreeSet<String>) -> Self {
        let index: HashMap<&str, usize> = snap
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut free: Vec<Resources> = snap
            .nodes
            .iter()
            .map(|n| n.allocatable.unwrap_or_else(unbounded))
            .collect();
        let mut present = Vec::new();
        for p in snap.pods.iter().filter(|p| p.live()) {
            let Some(&i) = p.node.as_deref().and_then(|n| index.get(n)) else {
                continue;
            };
            free[i] = free[i].minus(p.scheduling.requests);
            if !p.terminating && !gone.contains(&p.key()) {
                present.push(Present { node: i, pod: p });
            }
        }
        Placer {
            snap,
            lost: snap
                .nodes
                .iter()
                .map(|n| lost.contains(n.name.as_str()))
                .collect(),
            free,
            present,
            spread: HashMap::new(),
            anti: HashMap::new(),
        }
    }

    /// Places `pod` (a replacement with its spec) on the least allocated
    /// node that takes it, or says why none does.
    pub fn place(&mut self, pod: &'a Pod) -> Placement {
        let volume_terms: Vec<&[NodeTerm]> = pod
            .claims
            .iter()
            .filter_map(|c| {
                self.snap
                    .claims
                    .iter()
                    .find(|k| k.namespace == pod.namespace && k.name == *c)
            })
            .map(|k| k.node_terms.as_slice())
            .filter(|t| !t.is_empty())
            .collect();
        // each constraint's key, its smallest domain count and whether the
        // pod counts itself, once per pod (not per node)
        let spread_keys: Vec<(String, i64, i64)> = pod
            .scheduling
            .spread
            .iter()
            .map(|c| {
                let key = self.spread_key(pod, c);
                let min = self.spread[&key]
                    .counts
                    .values()
                    .copied()
                    .min()
                    .unwrap_or(0);
                (key, min, i64::from(c.selector.matches(&pod.labels)))
            })
            .collect();
        let anti_keys: Vec<String> = pod
            .scheduling
            .anti_affinity
            .iter()
            .map(|t| self.anti_key(pod, t))
            .collect();
        let forbidden = self.existing_anti(pod);
        let mut why: BTreeMap<Unfit, usize> = BTreeMap::new();
        let mut best: Option<((i64, i64), usize)> = None;
        for (i, node) in self.snap.nodes.iter().enumerate() {
            match self.unfit(
                pod,
                i,
                node,
                &volume_terms,
                &spread_keys,
                &anti_keys,
                &forbidden,
            ) {
                Some(u) => *why.entry(u).or_default() += 1,
                None => {
                    // then the fewest pods: the scheduler spreads a
                    // workload's pods where requests tie
                    let score = (self.allocated_permille(i, node), -self.free[i].pods);
                    if best.is_none_or(|(s, _)| score < s) {
                        best = Some((score, i));
                    }
                }
            }
        }
        let Some((_, i)) = best else {
            let parts: Vec<String> = why
                .iter()
                .map(|(u, n)| format!("{n} {}", u.words()))
                .collect();
            return Placement::Pending {
                why: format!(
                    "0/{} nodes are available: {}.",
                    self.snap.nodes.len(),
                    parts.join(", ")
                ),
            };
        };
        self.take(i, pod);
        Placement::On {
            node: self.snap.nodes[i].name.clone(),
        }
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the filters' inputs, computed once per pod"
    )]
    fn unfit(
        &self,
        pod: &Pod,
        i: usize,
        node: &Node,
        volume_terms: &[&[NodeTerm]],
        spread_keys: &[(String, i64, i64)],
        anti_keys: &[String],
        forbidden: &[(String, String)],
    ) -> Option<Unfit> {
        let s = &pod.scheduling;
        if self.lost[i] {
            return Some(Unfit::Lost);
        }
        if node.ready != "True" {
            return Some(Unfit::NotReady);
        }
        let tolerated = |key: &str, effect: &str| {
            s.tolerations.iter().any(|t| {
                t.tolerates(&Taint {
                    key: key.into(),
                    value: String::new(),
                    effect: effect.into(),
                })
            })
        };
        if node.unschedulable && !tolerated("node.kubernetes.io/unschedulable", "NoSchedule") {
            return Some(Unfit::Unschedulable);
        }
        if !affinity_ok(pod, node) {
            return Some(Unfit::Affinity);
        }
        if !volume_terms.iter().all(|t| terms_match(t, node)) {
            return Some(Unfit::VolumeAffinity);
        }
        if let Some(t) = node.taints.iter().find(|t| {
            matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
                && !s.tolerations.iter().any(|x| x.tolerates(t))
        }) {
            return Some(Unfit::Taint(format!("{}: {}", t.key, t.value)));
        }
        let free = self.free[i];
        let r = s.requests;
        if r.cpu_milli > free.cpu_milli {
            return Some(Unfit::Insufficient("cpu"));
        }
        if r.memory > free.memory {
            return Some(Unfit::Insufficient("memory"));
        }
        if free.pods < 1 {
            return Some(Unfit::TooManyPods);
        }
        for (c, (key, min, me)) in s.spread.iter().zip(spread_keys) {
            let Some(domain) = node.labels.get(&c.topology_key) else {
                return Some(Unfit::SpreadLabel);
            };
            let here = self.spread[key].counts.get(domain).copied().unwrap_or(0);
            if here + me - min > i64::from(c.max_skew) {
                return Some(Unfit::Spread);
            }
        }
        for (t, key) in s.anti_affinity.iter().zip(anti_keys) {
            if node
                .labels
                .get(&t.topology_key)
                .is_some_and(|d| self.anti[key].domains.contains(d))
            {
                return Some(Unfit::AntiAffinity);
            }
        }
        if forbidden
            .iter()
            .any(|(k, v)| node.labels.get(k).is_some_and(|d| d == v))
        {
            return Some(Unfit::ExistingAntiAffinity);
        }
        None
    }

    /// Requested share of the node's CPU and memory after the pod, in
    /// thousandths (LeastAllocated's measure; lower is emptier).
    fn allocated_permille(&self, i: usize, node: &Node) -> i64 {
        let Some(a) = node.allocatable else { return 0 };
        let used = |alloc: i64, free: i64| {
            if alloc <= 0 {
                0
            } else {
                (alloc - free).saturating_mul(1000) / alloc
            }
        };
        (used(a.cpu_milli, self.free[i].cpu_milli) + used(a.memory, self.free[i].memory)) / 2
    }

    fn take(&mut self, i: usize, pod: &'a Pod) {
        self.free[i] = self.free[i].minus(pod.scheduling.requests);
        let node = &self.snap.nodes[i];
        for sc in self.spread.values_mut() {
            if sc.eligible[i]
                && sc.namespace == pod.namespace
                && sc.selector.matches(&pod.labels)
                && let Some(d) = node.labels.get(&sc.topology_key)
            {
                *sc.counts.entry(d.clone()).or_default() += 1;
            }
        }
        for a in self.anti.values_mut() {
            if a.namespaces.contains(&pod.namespace)
                && a.selector.matches(&pod.labels)
                && let Some(d) = node.labels.get(&a.topology_key)
            {
                a.domains.insert(d.clone());
            }
        }
        self.present.push(Present { node: i, pod });
    }

    /// The pods of one spread constraint per domain, over the nodes the pod
    /// may go to by its node affinity (`nodeAffinityPolicy: Honor`; taints
    /// ignored), computed once per constraint and kept up to date.
    fn spread_key(&mut self, pod: &Pod, c: &Spread) -> String {
        let s = &pod.scheduling;
        let key = format!(
            "{}|{}|{:?}|{:?}|{:?}",
            pod.namespace, c.topology_key, c.selector, s.node_selector, s.node_terms
        );
        if !self.spread.contains_key(&key) {
            let eligible: Vec<bool> = self
                .snap
                .nodes
                .iter()
                .map(|n| affinity_ok(pod, n) && n.labels.contains_key(&c.topology_key))
                .collect();
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            for (i, n) in self.snap.nodes.iter().enumerate() {
                if eligible[i]
                    && let Some(d) = n.labels.get(&c.topology_key)
                {
                    counts.entry(d.clone()).or_default();
                }
            }
            for p in &self.present {
                if eligible[p.node]
                    && p.pod.namespace == pod.namespace
                    && c.selector.matches(&p.pod.labels)
                    && let Some(d) = self.snap.nodes[p.node].labels.get(&c.topology_key)
                {
                    *counts.entry(d.clone()).or_default() += 1;
                }
            }
            self.spread.insert(
                key.clone(),
                SpreadCount {
                    eligible,
                    counts,
                    topology_key: c.topology_key.clone(),
                    namespace: pod.namespace.clone(),
                    selector: c.selector.clone(),
                },
            );
        }
        key
    }

    /// The domains holding a pod one of `pod`'s anti-affinity terms
    /// matches, computed once per term and kept up to date.
    fn anti_key(&mut self, pod: &Pod, t: &AntiAffinity) -> String {
        let namespaces = if t.namespaces.is_empty() {
            vec![pod.namespace.clone()]
        } else {
            t.namespaces.clone()
        };
        let key = format!("{namespaces:?}|{}|{:?}", t.topology_key, t.selector);
        if !self.anti.contains_key(&key) {
            let domains = self
                .present
                .iter()
                .filter(|p| {
                    namespaces.contains(&p.pod.namespace) && t.selector.matches(&p.pod.labels)
                })
                .filter_map(|p| self.snap.nodes[p.node].labels.get(&t.topology_key).cloned())
                .collect();
            self.anti.insert(
                key.clone(),
                AntiCount {
                    namespaces,
                    topology_key: t.topology_key.clone(),
                    selector: t.selector.clone(),
                    domains,
                },
            );
        }
        key
    }

    /// The domains (`key`, `value`) where a pod already running has a
    /// required anti-affinity term that matches `pod`.
    fn existing_anti(&self, pod: &Pod) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for p in self
            .present
            .iter()
            .filter(|p| !p.pod.scheduling.anti_affinity.is_empty())
        {
            for t in &p.pod.scheduling.anti_affinity {
                let in_ns = if t.namespaces.is_empty() {
                    p.pod.namespace == pod.namespace
                } else {
                    t.namespaces.contains(&pod.namespace)
                };
                if in_ns
                    && t.selector.matches(&pod.labels)
                    && let Some(d) = self.snap.nodes[p.node].labels.get(&t.topology_key)
                {
                    out.push((t.topology_key.clone(), d.clone()));
                }
            }
        }
        out
    }
}

/// The pod's `nodeSelector` and required node affinity both hold.
fn affinity_ok(pod: &Pod, node: &Node) -> bool {
    let s = &pod.scheduling;
    s.node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        && terms_match(&s.node_terms, node)
}

#[cfg(test)]
mod tests;
