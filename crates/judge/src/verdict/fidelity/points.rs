//! A run's points: its transitions from the first fault or action to the
//! clean-up, named so the same transition meets its twin on the other side
//! (the target nodes' own by role, a set's nodes together under its name as
//! its pods are; pods and endpoints grouped by where they were, the first
//! and the last of each kind; the clients' error spans) and
//! timed from the fault or action step they followed. The step a point
//! counts for is itself an allowance where a race decides it: readiness
//! right at a step's start, an endpoint's not-ready blink, a NoExecute taint
//! a controller pass after its Ready change.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::gaps::EVICTION_TOKEN_MS;
use super::rows::{Point, SLACK_MS};
use crate::record::{RunResult, StepKind};
use crate::timeline::{Change, Ms, ObjectRef, Transition};

/// A pod or endpoint turning ready this soon after a step began is counted
/// with the step before (see `points`).
const READY_RACE_MS: Ms = 200;
/// How long a new pod's endpoint may be listed not ready before ready and
/// still be a race ([`not_ready_blips`]).
const BLIP_MS: Ms = 1_500;

/// Where a pod was when the run's first fault or action came.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Group {
    On(String),
    Elsewhere,
    Replacement,
}

impl Group {
    fn name(&self, things: &str) -> String {
        match self {
            Group::On(role) => format!("{things} on {role}"),
            Group::Elsewhere => format!("{things} elsewhere"),
            Group::Replacement => format!("new {things}"),
        }
    }
}

/// The steps transitions are timed from: each fault or action step's start
/// and label. Steps taken back to back (one within 1 s of the one before,
/// e.g. two uncordons) are one moment: which of them a transition follows is
/// a race between the watch and the next step, so they share one anchor.
pub(super) fn anchors(run: &RunResult) -> Vec<(Ms, String)> {
    let mut steps: Vec<(Ms, String)> = Vec::new();
    for s in run
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::Fault | StepKind::Action))
    {
        match steps.last_mut() {
            Some((at, label)) if s.started - *at < SLACK_MS => {
                label.push_str(" + ");
                label.push_str(&s.label);
            }
            _ => steps.push((s.started, s.label.clone())),
        }
    }
    steps
}

/// The steps' anchors (start, label), the index of the one `at` follows.
pub(super) fn anchor(steps: &[(Ms, String)], at: Ms) -> Option<usize> {
    steps.iter().rposition(|(s, _)| *s <= at)
}

/// Each target node's role, and each node of a set its set's name.
pub(super) fn roles(run: &RunResult) -> HashMap<&str, &str> {
    run.sets
        .iter()
        .flat_map(|(set, nodes)| nodes.iter().map(move |n| (n.as_str(), set.as_str())))
        .chain(
            run.targets
                .iter()
                .map(|(role, node)| (node.as_str(), role.as_str())),
        )
        .collect()
}

/// A run's points: from its first fault or action to its clean-up.
pub fn points(run: &RunResult) -> Vec<Point> {
    let steps = anchors(run);
    let Some(&(start, _)) = steps.first() else {
        return Vec::new();
    };
    let end = run
        .cleanup
        .iter()
        .map(|s| s.started)
        .min()
        .unwrap_or(Ms::MAX);
    let mut fold = Fold::new(run, steps, start, end);
    for (i, t) in run.transitions.iter().enumerate() {
        if !fold.take(i, t) {
            break;
        }
    }
    let Fold {
        steps,
        node_points,
        mut grouped,
        ..
    } = fold;
    clients(run, &steps, (start, end), &mut grouped);
    let mut out = node_points;
    out.extend(grouped_points(grouped, &steps));
    out.sort_by_key(|p| (p.step_index, p.after));
    out
}

/// The transitions folded into points, one at a time: what each pod and
/// endpoint address was on, the groups they fall in, the node points and
/// the grouped times.
struct Fold<'a> {
    steps: Vec<(Ms, String)>,
    start: Ms,
    end: Ms,
    /// Each target node's role, and each node of a set its set's name.
    role: HashMap<&'a str, &'a str>,
    /// The nodes that are in a set: which of its nodes did what first is
    /// chance (the other side's are others), so their changes are grouped.
    in_set: HashSet<&'a str>,
    // Each pod's node and each endpoint address's node, as last seen.
    pod_node: HashMap<&'a str, &'a str>,
    pod_group: HashMap<&'a str, Group>,
    address_node: HashMap<&'a str, &'a str>,
    address_group: HashMap<&'a str, Group>,
    /// Each VolumeAttachment's group, kept for its deletion (which names
    /// no node).
    attachment_group: HashMap<&'a str, Group>,
    /// The pods a Multi-Attach error was recorded for (the first one each
    /// is a point: the controller repeats it by chance).
    multi_attached: HashSet<&'a str>,
    node_points: Vec<Point>,
    seen: HashMap<(usize, String), usize>,
    /// (step, group label, change) -> times
    grouped: BTreeMap<(usize, String), Vec<Ms>>,
    blips: Blips,
    last_ready: HashMap<&'a str, bool>,
    /// Each node's last Ready change, and the controller's pass period.
    ready_at: HashMap<&'a str, Ms>,
    monitor: Ms,
}

impl<'a> Fold<'a> {
    fn new(run: &'a RunResult, steps: Vec<(Ms, String)>, start: Ms, end: Ms) -> Fold<'a> {
        Fold {
            steps,
            start,
            end,
            role: roles(run),
            in_set: run
                .sets
                .values()
                .flatten()
                .map(String::as_str)
                .filter(|n| !run.targets.values().any(|t| t == n))
                .collect(),
            pod_node: HashMap::new(),
            pod_group: HashMap::new(),
            address_node: HashMap::new(),
            address_group: HashMap::new(),
            attachment_group: HashMap::new(),
            multi_attached: HashSet::new(),
            node_points: Vec::new(),
            seen: HashMap::new(),
            grouped: BTreeMap::new(),
            blips: not_ready_blips(&run.transitions),
            last_ready: HashMap::new(),
            ready_at: HashMap::new(),
            monitor: Ms::try_from(run.profile.node_monitor_period.as_millis()).unwrap_or(Ms::MAX),
        }
    }

    /// Takes the `i`th transition; false once it is past the end.
    fn take(&mut self, i: usize, t: &'a Transition) -> bool {
        let before = t.at < self.start;
        match (&t.object, &t.change) {
            (ObjectRef::Pod { uid, .. }, Change::PodScheduled { node }) => {
                self.pod_node.insert(uid, node);
            }
            (
                ObjectRef::EndpointSlice { .. },
                Change::Endpoint {
                    address,
                    node: Some(n),
                    ..
                },
            ) => {
                self.address_node.insert(address, n);
            }
            // An attachment there before the first step is grouped by
            // where it was; one made after it is new.
            (ObjectRef::VolumeAttachment { name }, Change::VolumeAttachment { node, .. })
                if before && !self.attachment_group.contains_key(name.as_str()) =>
            {
                let group = group_of(&self.role, Some(node.as_str()));
                self.attachment_group.insert(name, group);
            }
            _ => {}
        }
        // An endpoint change that leaves it as ready as it was (its
        // `serving` or `terminating` changed) is not a readiness row.
        let same_ready = match &t.change {
            Change::Endpoint { address, ready, .. } => {
                self.last_ready.insert(address.as_str(), *ready) == Some(*ready)
            }
            Change::EndpointRemoved { address } => {
                self.last_ready.remove(address.as_str());
                false
            }
            _ => false,
        };
        if before || self.blips.not_ready.contains(&i) || same_ready {
            return true;
        }
        if t.at >= self.end {
            return false;
        }
        let node_ready = self.node_ready(t);
        let cause = self.blips.ready_since.get(&i).copied().or(node_ready);
        let Some(step) = anchor(&self.steps, cause.unwrap_or(t.at)) else {
            return true;
        };
        let what = match &t.object {
            ObjectRef::Node { name } => {
                self.node_point(name, t, step);
                return true;
            }
            ObjectRef::Pod { uid, .. } => self.pod(uid, t),
            ObjectRef::EndpointSlice { .. } => self.endpoint(t),
            ObjectRef::VolumeAttachment { name } => self.attachment(name, t),
            ObjectRef::Event { .. } => self.multi_attach(t),
            _ => None,
        };
        let Some(what) = what else {
            return true;
        };
        // A pod or an endpoint turning ready right after a step began was
        // on its way before it (no step makes anything ready that fast):
        // the step began because an expectation saw the pods Ready.
        let readied = matches!(
            &t.change,
            Change::PodReady { ready: true } | Change::Endpoint { ready: true, .. }
        ) || matches!(&t.change, Change::PodPhase { phase, .. } if phase == "Running");
        let step = if readied && step > 0 && t.at - self.steps[step].0 < READY_RACE_MS {
            step - 1
        } else {
            step
        };
        self.grouped
            .entry((step, what))
            .or_default()
            .push(t.at - self.steps[step].0);
        true
    }

    /// A node lifecycle controller's NoExecute taint follows the node's
    /// Ready change by up to a pass (or a taint-queue token): it belongs
    /// to the step of that change, wherever the next step began. When that
    /// change was, for such a taint; a Ready change is remembered.
    fn node_ready(&mut self, t: &'a Transition) -> Option<Ms> {
        match (&t.object, &t.change) {
            (ObjectRef::Node { name }, Change::NodeReady { .. }) => {
                self.ready_at.insert(name.as_str(), t.at);
                None
            }
            (
                ObjectRef::Node { name },
                Change::TaintAdded { key, effect, .. } | Change::TaintRemoved { key, effect },
            ) if effect == "NoExecute"
                && (key == "node.kubernetes.io/not-ready"
                    || key == "node.kubernetes.io/unreachable") =>
            {
                self.ready_at
                    .get(name.as_str())
                    .copied()
                    .filter(|&r| t.at - r <= self.monitor + EVICTION_TOKEN_MS + SLACK_MS)
            }
            _ => None,
        }
    }

    /// A target node's own transition: a point of its own, numbered when
    /// the step saw it before; a set's node's, its set's group.
    fn node_point(&mut self, name: &str, t: &Transition, step: usize) {
        let Some(role) = self.role.get(name) else {
            return;
        };
        let Some(change) = node_change(&t.change) else {
            return;
        };
        let what = format!("{role}: {change}");
        if self.in_set.contains(name) {
            self.grouped
                .entry((step, what))
                .or_default()
                .push(t.at - self.steps[step].0);
            return;
        }
        let n = self.seen.entry((step, what.clone())).or_default();
        *n += 1;
        let what = if *n > 1 {
            format!("{what} (#{n})")
        } else {
            what
        };
        self.node_points.push(Point {
            what,
            step: self.steps[step].1.clone(),
            step_index: step,
            after: t.at - self.steps[step].0,
            count: 1,
        });
    }

    /// A pod's transition, named by its group.
    fn pod(&mut self, uid: &'a str, t: &Transition) -> Option<String> {
        let change = pod_change(&t.change)?;
        let (role, pod_node) = (&self.role, &self.pod_node);
        let group = self
            .pod_group
            .entry(uid)
            .or_insert_with(|| match &t.change {
                Change::PodAdded { .. } => Group::Replacement,
                _ => group_of(role, pod_node.get(uid).copied()),
            })
            .clone();
        Some(format!("{}: {change}", group.name("pods")))
    }

    /// A VolumeAttachment's change, named by its group: the target's role
    /// or elsewhere for one there before the first step, new for one made
    /// after (their names are hashes of the node, never alike on two sides).
    fn attachment(&mut self, name: &'a str, t: &Transition) -> Option<String> {
        let change = match &t.change {
            Change::VolumeAttachment { attached: true, .. } => "attached",
            Change::VolumeAttachment {
                attached: false, ..
            } => "not attached",
            Change::VolumeAttachmentDeleted => "deleted",
            _ => return None,
        };
        let group = self
            .attachment_group
            .entry(name)
            .or_insert(Group::Replacement)
            .clone();
        Some(format!("{}: {change}", group.name("volume attachments")))
    }

    /// A Multi-Attach error of the attach-detach controller, the first one
    /// per pod (it repeats them, and how often is chance).
    fn multi_attach(&mut self, t: &'a Transition) -> Option<String> {
        let Change::Event {
            reason,
            message,
            involved,
            ..
        } = &t.change
        else {
            return None;
        };
        crate::timeline::multi_attach_volume(reason, message)?;
        self.multi_attached
            .insert(involved.as_str())
            .then(|| "pods: Multi-Attach error".to_owned())
    }

    /// An endpoint's readiness, named by its group.
    fn endpoint(&mut self, t: &'a Transition) -> Option<String> {
        let (address, change) = match &t.change {
            Change::Endpoint { address, ready, .. } => {
                (address.as_str(), if *ready { "ready" } else { "not ready" })
            }
            Change::EndpointRemoved { address } => (address.as_str(), "removed"),
            _ => return None,
        };
        let (role, address_node) = (&self.role, &self.address_node);
        let group = self
            .address_group
            .entry(address)
            .or_insert_with(|| group_of(role, address_node.get(address).copied()))
            .clone();
        if change == "removed" {
            // A later pod may get the address again.
            self.address_group.remove(address);
        }
        Some(format!("{}: {change}", group.name("endpoints")))
    }
}

/// The group of what was on `node`: a target's role, or elsewhere.
fn group_of(role: &HashMap<&str, &str>, node: Option<&str>) -> Group {
    match node.and_then(|n| role.get(n)) {
        Some(r) => Group::On((*r).to_owned()),
        None => Group::Elsewhere,
    }
}

/// What clients saw after each step: the first failed request of its
/// error windows and the first answered one after the last (how many
/// windows the errors split into is chance: kube-proxy routes each
/// request to a random endpoint, and a lucky run of live ones splits one).
fn clients(
    run: &RunResult,
    steps: &[(Ms, String)],
    (start, end): (Ms, Ms),
    grouped: &mut BTreeMap<(usize, String), Vec<Ms>>,
) {
    for p in &run.probes {
        let mut spans: BTreeMap<usize, (Ms, Ms)> = BTreeMap::new();
        for w in p
            .windows
            .iter()
            .filter(|w| w.start >= start && w.start < end)
        {
            let Some(step) = anchor(steps, w.start) else {
                continue;
            };
            let stop = w.end.unwrap_or(Ms::MAX);
            let span = spans.entry(step).or_insert((w.start, stop));
            *span = (span.0.min(w.start), span.1.max(stop));
        }
        for (step, (from, to)) in spans {
            let mut add = |what: &str, at: Ms| {
                grouped
                    .entry((step, format!("clients {}: {what}", p.name)))
                    .or_default()
                    .push(at - steps[step].0);
            };
            add("errors begin", from);
            if to < end {
                add("errors end", to);
            }
        }
    }
}

/// Each group's times as one point, or as its first and its last.
fn grouped_points(
    grouped: BTreeMap<(usize, String), Vec<Ms>>,
    steps: &[(Ms, String)],
) -> Vec<Point> {
    let mut out = Vec::new();
    for ((step, what), mut times) in grouped {
        times.sort_unstable();
        let (first, last) = (times[0], times[times.len() - 1]);
        let count = times.len();
        let point = |what: String, after: Ms| Point {
            what,
            step: steps[step].1.clone(),
            step_index: step,
            after,
            count,
        };
        if count == 1 {
            out.push(point(what, first));
        } else {
            out.push(point(format!("{what} (first)"), first));
            out.push(point(format!("{what} (last)"), last));
        }
    }
    out
}

/// Endpoints listed not ready for less than [`BLIP_MS`] before they turned
/// ready: the EndpointSlice controller caught a new pod between its
/// kubelet's `Running` and its `Ready` status updates, which it does for
/// some pods and not others on either cluster: a race, not a behaviour.
/// (kind's kubelets reported Ready 0.02-0.9 s after Running, the sim's
/// 0.01-0.03 s; the controller itself syncs again 1 s later when its cache
/// has not yet seen its own last write, `defaultSyncBackOff`.)
#[derive(Debug, Default)]
struct Blips {
    /// The not-ready transitions (indices into `transitions`): not rows.
    not_ready: HashSet<usize>,
    /// Each ready transition that ended one -> when the blip began: the
    /// ready belongs to the step the blip began in.
    ready_since: HashMap<usize, Ms>,
}
fn not_ready_blips(transitions: &[Transition]) -> Blips {
    let mut out = Blips::default();
    let mut pending: HashMap<&str, (usize, Ms)> = HashMap::new();
    for (i, t) in transitions.iter().enumerate() {
        match &t.change {
            Change::Endpoint {
                address,
                ready: false,
                ..
            } => {
                pending.entry(address).or_insert((i, t.at));
            }
            Change::Endpoint {
                address,
                ready: true,
                ..
            } => {
                if let Some((j, at)) = pending.remove(address.as_str())
                    && t.at - at < BLIP_MS
                {
                    out.not_ready.insert(j);
                    out.ready_since.insert(i, at);
                }
            }
            Change::EndpointRemoved { address } => {
                pending.remove(address.as_str());
            }
            _ => {}
        }
    }
    out
}

/// A node transition as a row names it; None for those not compared.
fn node_change(c: &Change) -> Option<String> {
    match c {
        Change::NodeAdded
        | Change::NodeDeleted
        | Change::NodeReady { .. }
        | Change::Unschedulable { .. } => Some(c.describe()),
        Change::TaintAdded { key, effect, .. } => Some(format!("taint + {key}:{effect}")),
        Change::TaintRemoved { .. } => Some(c.describe()),
        _ => None,
    }
}

/// A pod transition as a row names it (without the pod's own names).
fn pod_change(c: &Change) -> Option<String> {
    Some(match c {
        Change::PodAdded { .. } => "created".into(),
        Change::PodScheduled { .. } => "scheduled".into(),
        Change::PodReady { .. } | Change::PodTerminating | Change::PodDeleted => c.describe(),
        Change::PodPhase { phase, .. } => format!("phase {phase}"),
        Change::PodDisruptionTarget { .. } => "DisruptionTarget".into(),
        _ => return None,
    })
}
