//! The simulator against real kubelets (pure): the same scenario run on the
//! sim and on kind, each transition's time on both, the difference and a
//! verdict (`nodefall report fidelity`, docs/fidelity.md).
//!
//! A run's transitions become *points*: the target nodes' own transitions
//! (named by role, so `worker-1` on the sim meets `nfscen-worker` on kind),
//! and the pods' and endpoints' grouped by where they were (on a target,
//! elsewhere, a replacement) with the first and the last of each kind. Each
//! point is timed from the fault or action step it followed: both runs take
//! the same steps, but not at the same times (a step waits for the one
//! before). Two points match when their names and steps match.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::profile::TimingProfile;
use crate::record::{RunResult, RunVerdict, StepKind};
use crate::timeline::{Change, Ms, ObjectRef};

/// A pod or endpoint turning ready this soon after a step began is counted
/// with the step before (see `points`).
const READY_RACE_MS: Ms = 200;
/// When kind's kubelets, shutting down gracefully (20 s / 5 s), reported a
/// pod stopped, after the shutdown: the range over five runs of
/// `kind-graceful-shutdown.yaml` (2026-11-25/26: 0.47-2.55 s), and when the
/// sim does (`sim::kubelet`'s `SHUTDOWN_STOP_AFTER`, after its Ready=False).
const SHUTDOWN_STOP_SEEN: (Ms, Ms) = (470, 2_550);
const SHUTDOWN_STOP_SIM: Ms = 1_500;
/// How long a new pod's endpoint may be listed not ready before ready and
/// still be a race ([`not_ready_blips`]).
const BLIP_MS: Ms = 1_500;
/// One token of the node lifecycle controller's NoExecute taint queue:
/// `--node-eviction-rate`'s default, 0.1 node/s (neither kind nor the sim
/// sets it).
const EVICTION_TOKEN_MS: Ms = 10_000;

/// The goal: within 10 % of the kind figure, or within this.
pub const SLACK_MS: Ms = 1000;
/// ... or within this share of it.
pub const SLACK_SHARE: f64 = 0.10;

/// One timed transition of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// What happened (`target: Ready=Unknown (NodeStatusUnknown)`,
    /// `pods on target: Terminating (first of 4)`).
    pub what: String,
    /// The fault or action step it followed (its label), and that step's
    /// position among them.
    pub step: String,
    pub step_index: usize,
    /// Since that step started.
    pub after: Ms,
    /// How many transitions the point stands for (pods of a group).
    pub count: usize,
}

/// A point's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum RowVerdict {
    /// Within 10 % or 1 s (and the same count).
    Within,
    /// Further apart than that.
    Off,
    /// Both saw it, a different number of times.
    Count,
    /// Apart by more than the goal, both inside the window of the
    /// controller's timer that makes the transition (see [`timer`]).
    Timer {
        rule: String,
    },
    OnlyKind,
    OnlySim,
    /// The sim cannot show it: what the kubelet does that KWOK does not.
    Cannot {
        lacks: String,
    },
}

impl RowVerdict {
    pub fn meets_goal(&self) -> bool {
        matches!(self, RowVerdict::Within | RowVerdict::Timer { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub what: String,
    pub step: String,
    pub kind: Option<Ms>,
    pub sim: Option<Ms>,
    pub kind_count: usize,
    pub sim_count: usize,
    /// Since the row before it (or the step) on each side: what the
    /// verdict judges.
    pub kind_gap: Option<Ms>,
    pub sim_gap: Option<Ms>,
    pub verdict: RowVerdict,
}

/// Two points seen in one order on one side and the other on the other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inversion {
    /// First on kind.
    pub first: String,
    pub then: String,
    pub step: String,
}

/// One scenario on both.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioFidelity {
    pub scenario: String,
    pub kind_verdict: String,
    pub sim_verdict: String,
    pub rows: Vec<Row>,
    pub inversions: Vec<Inversion>,
}

impl ScenarioFidelity {
    /// Every row within the goal or a "cannot", and no inversion.
    pub fn meets_goal(&self) -> bool {
        self.inversions.is_empty()
            && self
                .rows
                .iter()
                .all(|r| r.verdict.meets_goal() || matches!(r.verdict, RowVerdict::Cannot { .. }))
    }
}

/// What a sim lacks whose probes never reached the workload (a run by a
/// build before the sim's service proxy, or a probe of no NodePort).
pub const PROBES_LACK: &str = "containers and kube-proxy: no request reaches a pod KWOK plays, \
                               so the clients' figures exist on kind only";

/// What the sim lacks when a kubelet's first sync of a pod was refused by
/// the node authorizer.
pub const AUTHORIZER_LACK: &str = "the node authorizer's race: a kubelet may read a new pod's \
    claim before the API server has linked the pod to its node (event FailedMount, \"no \
    relationship found between node ... and this object\") and syncs the pod again after its \
    pod worker's backoff, 10-15 s (`backOffPeriod` 10 s, jitter 0.5); KWOK plays nodes without \
    a node identity, so on the sim the pod starts on time";

/// When (step, time after it) a kubelet's read of a pod's volumes was
/// refused by the node authorizer, from the run's FailedMount events.
fn authorizer_races(run: &RunResult) -> Vec<(usize, Ms)> {
    let steps = anchors(run);
    run.transitions
        .iter()
        .filter(|t| {
            matches!(&t.change, Change::Event { reason, message, .. }
                if reason == "FailedMount" && message.contains("no relationship found between node"))
        })
        .filter_map(|t| {
            let step = steps.iter().rposition(|(s, _)| *s <= t.at)?;
            Some((step, t.at - steps[step].0))
        })
        .collect()
}

/// A row off on one side only after that side's kubelet retried a pod the
/// node authorizer had refused (in the same step, before the row), the
/// other side seeing no such refusal: what the sim lacks, not a difference
/// in what it plays.
fn excuse_authorizer_races(
    rows: &mut [(usize, Ms, Row)],
    kind: &[(usize, Ms)],
    sim: &[(usize, Ms)],
) {
    for (step, _, r) in rows.iter_mut() {
        if r.verdict != RowVerdict::Off {
            continue;
        }
        let refused = |races: &[(usize, Ms)], at: Option<Ms>| {
            at.is_some_and(|at| races.iter().any(|(s, t)| s == step && *t <= at))
        };
        let on_kind = refused(kind, r.kind);
        let on_sim = refused(sim, r.sim);
        if on_kind != on_sim {
            r.verdict = RowVerdict::Cannot {
                lacks: AUTHORIZER_LACK.into(),
            };
        }
    }
}

/// How many of a probe's requests after a fault may go to live endpoints
/// before one reaches the failed node's pods, and still be chance.
const ROUTING_DRAWS: Ms = 5;
/// kube-proxy's `minSyncPeriod` (1 s by default): how long after an
/// EndpointSlice change its rules may still route to the old endpoints.
const KUBE_PROXY_SYNC_MS: Ms = 1_000;

/// A probe's first error after a fault comes with the first request that
/// kube-proxy (or the sim's stand-in) sends to the failed node's pods, each
/// connection to an endpoint picked at random: a row off by where that
/// first unlucky request fell is within the goal when both sides had it
/// within the first [`ROUTING_DRAWS`] requests.
fn judge_random_routing(rows: &mut [(usize, Ms, Row)], kind: &RunResult) {
    // When each step's failed endpoints left the Service (kind, sim).
    let gone: HashMap<usize, (Ms, Ms)> = rows
        .iter()
        .filter(|(_, _, r)| {
            r.what.starts_with("endpoints on ")
                && (r.what.ends_with(": not ready") || r.what.ends_with(": not ready (first)"))
        })
        .filter_map(|(step, _, r)| Some((*step, (r.kind?, r.sim?))))
        .collect();
    for (step, _, r) in rows.iter_mut() {
        if let (Some(name), Some(&(gk, gs))) = (
            r.what
                .strip_prefix("clients ")
                .and_then(|w| w.strip_suffix(": errors end")),
            gone.get(step),
        ) {
            let Some(probe) = kind.probes.iter().find(|p| p.name == name) else {
                continue;
            };
            let (from, to) = (
                -ROUTING_DRAWS * probe.interval,
                KUBE_PROXY_SYNC_MS + probe.timeout + probe.interval,
            );
            let inside = |t: Option<Ms>, gone: Ms| {
                t.is_some_and(|t| (from - SLACK_MS..=to + SLACK_MS).contains(&(t - gone)))
            };
            if r.verdict == RowVerdict::Off && inside(r.kind, gk) && inside(r.sim, gs) {
                r.verdict = RowVerdict::Timer {
                    rule: format!(
                        "a probe's errors end with the last request sent to the failed node's \
                         pods: a random one of those sent before the endpoints left the Service, \
                         or one sent before kube-proxy rewrote its rules (within {} of the \
                         change; the sim's stand-in at once) and failing after its timeout: \
                         {} to {} after the endpoints' not ready",
                        secs(KUBE_PROXY_SYNC_MS),
                        secs(from),
                        secs(to)
                    ),
                };
            }
            continue;
        }
        let Some(name) = r
            .what
            .strip_prefix("clients ")
            .and_then(|w| w.strip_suffix(": errors begin"))
        else {
            continue;
        };
        let Some(probe) = kind.probes.iter().find(|p| p.name == name) else {
            continue;
        };
        let window = ROUTING_DRAWS * probe.interval;
        let inside = |t: Option<Ms>| t.is_some_and(|t| (0..=window + SLACK_MS).contains(&t));
        if r.verdict == RowVerdict::Off && inside(r.kind) && inside(r.sim) {
            r.verdict = RowVerdict::Timer {
                rule: format!(
                    "kube-proxy sends each connection to an endpoint picked at random (the sim's \
                     stand-in too): the first request to reach the failed node's pods is one of \
                     the first {ROUTING_DRAWS} sent after the fault, every {}: within {}",
                    secs(probe.interval),
                    secs(window)
                ),
            };
        }
    }
}

/// A run with probes none of whose requests succeeded.
fn never_reached(run: &RunResult) -> bool {
    !run.probes.is_empty() && run.probes.iter().all(|p| p.errors == p.requests)
}

/// Compares a kind run and a sim run of one scenario.
pub fn compare(kind: &RunResult, sim: &RunResult) -> ScenarioFidelity {
    // A sim run that never got past its setup has nothing to compare: what
    // the setup waited for is what the sim lacks.
    if sim.t0.is_none() && sim.verdict == RunVerdict::Error {
        let why = sim.error.as_deref().unwrap_or("no error recorded");
        let mut f = cannot_run(
            kind,
            &format!("what the scenario's setup needs (on the sim: {why})"),
        );
        f.sim_verdict = verdict(sim);
        return f;
    }
    let (k, s) = (points(kind), points(sim));
    let key = |p: &Point| (p.step_index, p.step.clone(), p.what.clone());
    let sim_by: HashMap<_, &Point> = s.iter().map(|p| (key(p), p)).collect();
    let kind_by: HashMap<_, &Point> = k.iter().map(|p| (key(p), p)).collect();
    let mut rows: Vec<(usize, Ms, Row)> = Vec::new();
    for p in &k {
        let other = sim_by.get(&key(p)).copied();
        rows.push((p.step_index, p.after, row(Some(p), other)));
    }
    for p in s.iter().filter(|p| !kind_by.contains_key(&key(p))) {
        rows.push((p.step_index, p.after, row(None, Some(p))));
    }
    join_boundary_races(&mut rows, &anchors(sim));
    rows.sort_by_key(|r| (r.0, r.1));
    judge_gaps(&mut rows, &kind.profile);
    excuse_authorizer_races(&mut rows, &authorizer_races(kind), &authorizer_races(sim));
    judge_random_routing(&mut rows, kind);
    let mut rows: Vec<Row> = rows.into_iter().map(|(_, _, r)| r).collect();
    if never_reached(sim) && !never_reached(kind) {
        rows.push(Row {
            what: "clients: the HTTP probes' requests and error windows".into(),
            step: "-".into(),
            kind: None,
            sim: None,
            kind_count: kind.probes.len(),
            sim_count: sim.probes.len(),
            kind_gap: None,
            sim_gap: None,
            verdict: RowVerdict::Cannot {
                lacks: PROBES_LACK.into(),
            },
        });
    }
    ScenarioFidelity {
        scenario: kind.scenario.clone(),
        kind_verdict: verdict(kind),
        sim_verdict: verdict(sim),
        inversions: inversions(&k, &s, &kind.profile),
        rows,
    }
}

/// A scenario the sim cannot run at all (its setup needs what the sim
/// lacks): one row saying so.
pub fn cannot_run(kind: &RunResult, lacks: &str) -> ScenarioFidelity {
    ScenarioFidelity {
        scenario: kind.scenario.clone(),
        kind_verdict: verdict(kind),
        sim_verdict: "CANNOT RUN".into(),
        rows: vec![Row {
            what: "the whole scenario".into(),
            step: "-".into(),
            kind: None,
            sim: None,
            kind_count: kind.transitions.len(),
            sim_count: 0,
            kind_gap: None,
            sim_gap: None,
            verdict: RowVerdict::Cannot {
                lacks: lacks.to_owned(),
            },
        }],
        inversions: Vec::new(),
    }
}

fn verdict(run: &RunResult) -> String {
    let held = run
        .expectations
        .iter()
        .filter(|e| e.verdict == crate::record::Verdict::Pass)
        .count();
    format!("{:?} {held}/{}", run.verdict, run.expectations.len()).to_uppercase()
}

fn row(kind: Option<&Point>, sim: Option<&Point>) -> Row {
    let either = kind.or(sim).expect("a point on one side at least");
    // Both: judged in `judge_gaps`.
    let verdict = match (kind, sim) {
        (Some(k), Some(s)) if k.count != s.count => RowVerdict::Count,
        (Some(_), Some(_)) => RowVerdict::Within,
        (Some(_), None) => RowVerdict::OnlyKind,
        _ => RowVerdict::OnlySim,
    };
    Row {
        what: either.what.clone(),
        step: either.step.clone(),
        kind: kind.map(|p| p.after),
        sim: sim.map(|p| p.after),
        kind_count: kind.map_or(0, |p| p.count),
        sim_count: sim.map_or(0, |p| p.count),
        kind_gap: None,
        sim_gap: None,
        verdict,
    }
}

/// A transition seen right at a step's start falls before the step on one
/// side and after it on the other (a race between the watch and a step that
/// began the moment an expectation held). A row seen on kind only and one of
/// the same name seen on the sim only, in the step before or after, are that
/// one transition: the sim's time is taken from kind's step.
fn join_boundary_races(rows: &mut Vec<(usize, Ms, Row)>, sim_steps: &[(Ms, String)]) {
    let mut i = 0;
    while i < rows.len() {
        let (step, _, r) = &rows[i];
        let found = (r.verdict == RowVerdict::OnlyKind)
            .then(|| {
                rows.iter().position(|(s, _, o)| {
                    o.verdict == RowVerdict::OnlySim && o.what == r.what && s.abs_diff(*step) == 1
                })
            })
            .flatten();
        let Some(j) = found else {
            i += 1;
            continue;
        };
        let (sim_step, sim_after, sim_row) = rows.remove(j);
        if j < i {
            i -= 1;
        }
        let (step, _, r) = &mut rows[i];
        let (Some(from), Some(to)) = (sim_steps.get(sim_step), sim_steps.get(*step)) else {
            i += 1;
            continue;
        };
        r.sim = Some(from.0 + sim_after - to.0);
        r.sim_count = sim_row.sim_count;
        r.verdict = if r.kind_count == r.sim_count {
            RowVerdict::Within
        } else {
            RowVerdict::Count
        };
        i += 1;
    }
}

/// Judges each row seen on both sides by its own latency: the time since
/// the row before it in the same step (in kind's order) that both sides saw,
/// or since the step. A transition driven by a timer of its own (a
/// controller's period) then differs on its row alone, instead of moving
/// every row after it.
fn judge_gaps(rows: &mut [(usize, Ms, Row)], profile: &TimingProfile) {
    let mut prev: Option<(usize, Ms, Ms)> = None;
    // A node's own last status in the step, on both sides: (step, node, kind, sim).
    let mut status: Option<(usize, String, Ms, Ms)> = None;
    // A node's last Ready change in the step, on both sides.
    let mut readiness: Option<(usize, String, Ms, Ms)> = None;
    for (step, _, r) in rows.iter_mut() {
        let (Some(k), Some(s)) = (r.kind, r.sim) else {
            continue;
        };
        let node = r.what.split_once(": ").map_or("", |(n, _)| n);
        let of_node = |seen: &Option<(usize, String, Ms, Ms)>| match seen {
            Some((st, n, sk, ss)) if st == step && n == node => Some((*sk, *ss)),
            _ => None,
        };
        let (mut posted, ready_change) = (of_node(&status), of_node(&readiness));
        if r.what.starts_with("pods on ") {
            // The pods on a node: its kubelet's status counts for them.
            posted = match &status {
                Some((st, _, sk, ss)) if st == step => Some((*sk, *ss)),
                _ => None,
            };
        }
        if r.what.ends_with(": Ready=False (KubeletNotReady)") {
            status = Some((*step, node.to_owned(), k, s));
        }
        if r.what.contains(": Ready=") {
            readiness = Some((*step, node.to_owned(), k, s));
        }
        let (pk, ps) = match prev {
            Some((p, pk, ps)) if p == *step => (pk, ps),
            _ => (0, 0),
        };
        r.kind_gap = Some(k - pk);
        r.sim_gap = Some(s - ps);
        if r.verdict != RowVerdict::Count {
            // Its own latency, or its time since the step (two transitions
            // of separate chains, e.g. the node's status and its pods', are
            // not each other's cause).
            r.verdict = if within(k - pk, s - ps) || within(k, s) {
                RowVerdict::Within
            } else {
                match timers(&r.what, profile, posted, ready_change)
                    .into_iter()
                    .find(|t| t.holds(k, s, k - pk, s - ps))
                {
                    Some(t) => RowVerdict::Timer { rule: t.rule },
                    None => RowVerdict::Off,
                }
            };
        }
        prev = Some((*step, k, s));
    }
}

/// A transition a controller makes on a timer of its own: when it comes
/// depends on where that timer's period stood at the fault (random, on
/// either cluster: they run the same kube-controller-manager), so two runs
/// differ by up to the period whatever plays the node. Both sides inside the
/// window the rule allows is what can be asked of them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Timer {
    rule: String,
    /// The window, since `since`.
    from: Ms,
    to: Ms,
    since: Since,
}

/// What a timer's window counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Since {
    Step,
    RowBefore,
    /// A row of the step at these times after it (kind, sim).
    Row(Ms, Ms),
}

impl Timer {
    fn holds(&self, kind: Ms, sim: Ms, kind_gap: Ms, sim_gap: Ms) -> bool {
        let (k, s) = match self.since {
            Since::Step => (kind, sim),
            Since::RowBefore => (kind_gap, sim_gap),
            Since::Row(at_kind, at_sim) => (kind - at_kind, sim - at_sim),
        };
        let inside = |t: Ms| t >= self.from - SLACK_MS && t <= self.to + SLACK_MS;
        inside(k) && inside(s)
    }
}

/// The timers that may be behind a transition (none known: empty).
/// `posted`: when the node itself last posted a status in the step (a
/// kubelet shutting down gracefully reports Ready=False at once), on each
/// side; `ready_change`: when its Ready condition last changed in the step.
fn timers(
    what: &str,
    p: &TimingProfile,
    posted: Option<(Ms, Ms)>,
    ready_change: Option<(Ms, Ms)>,
) -> Vec<Timer> {
    // The transition itself, without which of a group it is.
    let what = what
        .strip_suffix(" (first)")
        .or_else(|| what.strip_suffix(" (last)"))
        .or_else(|| what.rsplit_once(" (#").map(|(w, _)| w))
        .unwrap_or(what);
    let ms = |d: std::time::Duration| Ms::try_from(d.as_millis()).unwrap_or(Ms::MAX);
    let (grace, period, lease) = (
        ms(p.node_monitor_grace_period),
        ms(p.node_monitor_period),
        ms(p.node_lease_duration),
    );
    let (gc, quarantine) = (ms(p.pod_gc_period), ms(p.orphan_quarantine));
    if what.ends_with(": Ready=Unknown (NodeStatusUnknown)") {
        let mut found = vec![Timer {
            rule: format!(
                "the node lifecycle controller: `grace` ({}) after the last lease renewal (every \
                 `lease`/4, {}), seen at its next pass (every `monitorPeriod`, {}): {} after the \
                 step",
                secs(grace),
                secs(lease / 4),
                secs(period),
                span(grace - lease / 4, grace + period)
            ),
            from: grace - lease / 4,
            to: grace + period,
            since: Since::Step,
        }];
        if let Some((k, s)) = posted {
            found.push(Timer {
                rule: format!(
                    "the node lifecycle controller: `grace` ({}) after the node's last status \
                     (its Ready=False above, posted during the step), which it takes at its next \
                     pass and judges at a later one (every `monitorPeriod`, {}): {} after that \
                     status",
                    secs(grace),
                    secs(period),
                    span(grace, grace + 2 * period)
                ),
                from: grace,
                to: grace + 2 * period,
                since: Since::Row(k, s),
            });
        }
        return found;
    }
    let no_execute = ["not-ready", "unreachable"]
        .iter()
        .any(|k| what.ends_with(&format!(" node.kubernetes.io/{k}:NoExecute")));
    if no_execute && what.contains(": taint ") {
        // Counted from the node's Ready change when the step has one.
        let (since, from_what) = match ready_change {
            Some((k, s)) => (Since::Row(k, s), "the node's Ready change"),
            None => (Since::RowBefore, "the row before"),
        };
        let mut found = vec![Timer {
            rule: format!(
                "the node lifecycle controller puts on or takes off a NoExecute taint at its next \
                 pass after the Ready change (every `monitorPeriod`, {}): up to that after \
                 {from_what}",
                secs(period)
            ),
            from: 0,
            to: period,
            since,
        }];
        if what.contains(": taint + ") {
            found.push(Timer {
                rule: format!(
                    "the node lifecycle controller's taint queue, rate-limited to \
                     `--node-eviction-rate` (0.1 node/s, one token every {}): a pass that read \
                     the node from its cache before the Ready change got there spends the token \
                     and drops the node, which waits for the next token: up to {} after \
                     {from_what} (kube-controller-manager v1.35 `doNoExecuteTaintingPass`)",
                    secs(EVICTION_TOKEN_MS),
                    secs(EVICTION_TOKEN_MS)
                ),
                from: 0,
                to: EVICTION_TOKEN_MS,
                since,
            });
        }
        return found;
    }
    let stopped = ["DisruptionTarget", "Ready=False", "phase Succeeded"]
        .iter()
        .any(|c| what.ends_with(&format!(": {c}")));
    if stopped && what.starts_with("pods on ") && posted.is_some() {
        return vec![Timer {
            rule: format!(
                "a kubelet shutting down gracefully stops each pod on its own pod worker and \
                 reports it stopped when that worker next syncs: {} after the shutdown, as \
                 kind's kubelets did over five runs (the sim: {} after its Ready=False)",
                span(SHUTDOWN_STOP_SEEN.0, SHUTDOWN_STOP_SEEN.1),
                secs(SHUTDOWN_STOP_SIM)
            ),
            from: SHUTDOWN_STOP_SEEN.0,
            to: SHUTDOWN_STOP_SEEN.1,
            since: Since::Step,
        }];
    }
    if what.ends_with(": phase Failed") {
        return vec![
            Timer {
                rule: format!(
                    "pod garbage collection of the Terminating pods of an out-of-service node, at \
                     its next pass (every `podGc`, {}): {} after the step",
                    secs(gc),
                    span(0, gc)
                ),
                from: 0,
                to: gc,
                since: Since::Step,
            },
            Timer {
                rule: format!(
                    "pod garbage collection of a deleted node's pods: after `orphanQuarantine` \
                     ({}), at a pass (every `podGc`, {}): {} after the step",
                    secs(quarantine),
                    secs(gc),
                    span(quarantine, quarantine + 2 * gc)
                ),
                from: quarantine,
                to: quarantine + 2 * gc,
                since: Since::Step,
            },
        ];
    }
    Vec::new()
}

/// `48.3 s`.
fn secs(ms: Ms) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// `40.0-80.0 s`.
fn span(from: Ms, to: Ms) -> String {
    format!("{:.1}-{}", from as f64 / 1000.0, secs(to))
}

/// Whether `sim` is within 10 % of `kind`, or within 1 s.
pub fn within(kind: Ms, sim: Ms) -> bool {
    let slack = SLACK_MS.max((kind.abs() as f64 * SLACK_SHARE).round() as Ms);
    (sim - kind).abs() <= slack
}

/// Pairs of points of one step that one side saw more than 1 s apart and
/// the other in the opposite order (closer than that, two transitions of
/// one controller pass come in either order).
fn inversions(kind: &[Point], sim: &[Point], profile: &TimingProfile) -> Vec<Inversion> {
    let key = |p: &Point| (p.step_index, p.what.clone());
    let sim_at: HashMap<_, Ms> = sim.iter().map(|p| (key(p), p.after)).collect();
    // A transition made on a controller's own timer comes anywhere in its
    // window, before or after the others: its order is not the sim's doing.
    let both: Vec<(&Point, Ms)> = kind
        .iter()
        .filter(|p| timers(&p.what, profile, None, None).is_empty())
        .filter_map(|p| sim_at.get(&key(p)).map(|s| (p, *s)))
        .collect();
    let mut out = Vec::new();
    for (i, (a, a_sim)) in both.iter().enumerate() {
        for (b, b_sim) in &both[i + 1..] {
            // A group's first and its last may be different objects, each
            // on its own clock (a kubelet stops one pod half a second after
            // a shutdown and the other two seconds after it): which of two
            // such rows comes first is how those clocks fell in this run.
            if a.step_index != b.step_index || mixes_first_and_last(&a.what, &b.what) {
                continue;
            }
            let (kind_gap, sim_gap) = (b.after - a.after, b_sim - a_sim);
            let inverted = (kind_gap > SLACK_MS && sim_gap < 0)
                || (sim_gap > SLACK_MS && kind_gap < 0)
                || (kind_gap < -SLACK_MS && sim_gap > 0)
                || (sim_gap < -SLACK_MS && kind_gap > 0);
            if inverted {
                let (first, then) = if kind_gap >= 0 { (a, b) } else { (b, a) };
                out.push(Inversion {
                    first: first.what.clone(),
                    then: then.what.clone(),
                    step: a.step.clone(),
                });
            }
        }
    }
    out
}

/// One row a group's first, the other a group's last.
fn mixes_first_and_last(a: &str, b: &str) -> bool {
    let first = |w: &str| w.ends_with(" (first)");
    let last = |w: &str| w.ends_with(" (last)");
    (first(a) && last(b)) || (last(a) && first(b))
}

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
fn anchors(run: &RunResult) -> Vec<(Ms, String)> {
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
    let anchor = |at: Ms| steps.iter().rposition(|(s, _)| *s <= at);
    let role: HashMap<&str, &str> = run
        .targets
        .iter()
        .map(|(role, node)| (node.as_str(), role.as_str()))
        .collect();
    // Each pod's node and each endpoint address's node, as last seen.
    let mut pod_node: HashMap<&str, &str> = HashMap::new();
    let mut pod_group: HashMap<&str, Group> = HashMap::new();
    let mut address_node: HashMap<&str, &str> = HashMap::new();
    let mut address_group: HashMap<&str, Group> = HashMap::new();
    let group_of = |node: Option<&str>| match node.and_then(|n| role.get(n)) {
        Some(r) => Group::On((*r).to_owned()),
        None => Group::Elsewhere,
    };
    let mut node_points: Vec<Point> = Vec::new();
    let mut seen: HashMap<(usize, String), usize> = HashMap::new();
    // (step, group label, change) -> times
    let mut grouped: BTreeMap<(usize, String), Vec<Ms>> = BTreeMap::new();
    let blips = not_ready_blips(&run.transitions);
    let mut last_ready: HashMap<&str, bool> = HashMap::new();
    // Each node's last Ready change, and the controller's pass period.
    let mut ready_at: HashMap<&str, Ms> = HashMap::new();
    let monitor = Ms::try_from(run.profile.node_monitor_period.as_millis()).unwrap_or(Ms::MAX);
    for (i, t) in run.transitions.iter().enumerate() {
        let before = t.at < start;
        match (&t.object, &t.change) {
            (ObjectRef::Pod { uid, .. }, Change::PodScheduled { node }) => {
                pod_node.insert(uid, node);
            }
            (
                ObjectRef::EndpointSlice { .. },
                Change::Endpoint {
                    address,
                    node: Some(n),
                    ..
                },
            ) => {
                address_node.insert(address, n);
            }
            _ => {}
        }
        // An endpoint change that leaves it as ready as it was (its
        // `serving` or `terminating` changed) is not a readiness row.
        let same_ready = match &t.change {
            Change::Endpoint { address, ready, .. } => {
                last_ready.insert(address.as_str(), *ready) == Some(*ready)
            }
            Change::EndpointRemoved { address } => {
                last_ready.remove(address.as_str());
                false
            }
            _ => false,
        };
        if before || blips.not_ready.contains(&i) || same_ready {
            continue;
        }
        if t.at >= end {
            break;
        }
        // A node lifecycle controller's NoExecute taint follows the node's
        // Ready change by up to a pass (or a taint-queue token): it belongs
        // to the step of that change, wherever the next step began.
        let node_ready = match (&t.object, &t.change) {
            (ObjectRef::Node { name }, Change::NodeReady { .. }) => {
                ready_at.insert(name.as_str(), t.at);
                None
            }
            (
                ObjectRef::Node { name },
                Change::TaintAdded { key, effect, .. } | Change::TaintRemoved { key, effect },
            ) if effect == "NoExecute"
                && (key == "node.kubernetes.io/not-ready"
                    || key == "node.kubernetes.io/unreachable") =>
            {
                ready_at
                    .get(name.as_str())
                    .copied()
                    .filter(|&r| t.at - r <= monitor + EVICTION_TOKEN_MS + SLACK_MS)
            }
            _ => None,
        };
        let cause = blips.ready_since.get(&i).copied().or(node_ready);
        let Some(step) = anchor(cause.unwrap_or(t.at)) else {
            continue;
        };
        let what = match &t.object {
            ObjectRef::Node { name } => {
                let Some(role) = role.get(name.as_str()) else {
                    continue;
                };
                let Some(change) = node_change(&t.change) else {
                    continue;
                };
                let what = format!("{role}: {change}");
                let n = seen.entry((step, what.clone())).or_default();
                *n += 1;
                let what = if *n > 1 {
                    format!("{what} (#{n})")
                } else {
                    what
                };
                node_points.push(Point {
                    what,
                    step: steps[step].1.clone(),
                    step_index: step,
                    after: t.at - steps[step].0,
                    count: 1,
                });
                continue;
            }
            ObjectRef::Pod { uid, .. } => {
                let Some(change) = pod_change(&t.change) else {
                    continue;
                };
                let group = pod_group
                    .entry(uid)
                    .or_insert_with(|| match &t.change {
                        Change::PodAdded { .. } => Group::Replacement,
                        _ => group_of(pod_node.get(uid.as_str()).copied()),
                    })
                    .clone();
                format!("{}: {change}", group.name("pods"))
            }
            ObjectRef::EndpointSlice { .. } => {
                let (address, change) = match &t.change {
                    Change::Endpoint { address, ready, .. } => {
                        (address.as_str(), if *ready { "ready" } else { "not ready" })
                    }
                    Change::EndpointRemoved { address } => (address.as_str(), "removed"),
                    _ => continue,
                };
                let group = address_group
                    .entry(address)
                    .or_insert_with(|| group_of(address_node.get(address).copied()))
                    .clone();
                if change == "removed" {
                    // A later pod may get the address again.
                    address_group.remove(address);
                }
                format!("{}: {change}", group.name("endpoints"))
            }
            _ => continue,
        };
        // A pod or an endpoint turning ready right after a step began was
        // on its way before it (no step makes anything ready that fast):
        // the step began because an expectation saw the pods Ready.
        let readied = matches!(
            &t.change,
            Change::PodReady { ready: true } | Change::Endpoint { ready: true, .. }
        ) || matches!(&t.change, Change::PodPhase { phase, .. } if phase == "Running");
        let step = if readied && step > 0 && t.at - steps[step].0 < READY_RACE_MS {
            step - 1
        } else {
            step
        };
        grouped
            .entry((step, what))
            .or_default()
            .push(t.at - steps[step].0);
    }
    // What clients saw after each step: the first failed request of its
    // error windows and the first answered one after the last (how many
    // windows the errors split into is chance: kube-proxy routes each
    // request to a random endpoint, and a lucky run of live ones splits one).
    for p in &run.probes {
        let mut spans: BTreeMap<usize, (Ms, Ms)> = BTreeMap::new();
        for w in p
            .windows
            .iter()
            .filter(|w| w.start >= start && w.start < end)
        {
            let Some(step) = anchor(w.start) else {
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
    let mut out = node_points;
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
    out.sort_by_key(|p| (p.step_index, p.after));
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
    not_ready: std::collections::HashSet<usize>,
    /// Each ready transition that ended one -> when the blip began: the
    /// ready belongs to the step the blip began in.
    ready_since: HashMap<usize, Ms>,
}
fn not_ready_blips(transitions: &[crate::timeline::Transition]) -> Blips {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run of one scenario: a pause of `nfscen-worker` (the target) at
    /// 10 s and its resume at 100 s, with `transitions` ([at, node, change]
    /// for nodes, [at, pod uid, change] for pods).
    fn run(target: &str, transitions: serde_json::Value) -> RunResult {
        let step = |label: &str, kind: &str, started: i64| {
            json!({"label": label, "kind": kind, "description": label, "started": started,
                   "ended": started + 100, "outcome": {"status": "ok"}})
        };
        serde_json::from_value(json!({
            "schemaVersion": crate::record::SCHEMA_VERSION,
            "scenario": "pause", "file": "pause.yaml", "backend": "sim",
            "profile": crate::profile::TimingProfile::fast(),
            "namespace": "ns", "targets": {"target": target},
            "startedAt": "2026-11-25T15:01:56.691Z",
            "finished": 200_000, "verdict": "pass",
            "steps": [step("setup", "setup", 0), step("#1 (pause)", "fault", 10_000),
                      step("#4", "expect", 11_000), step("#5 (resume)", "fault", 100_000)],
            "expectations": [],
            "cleanup": [step("cleanup", "cleanup", 150_000)],
            "metrics": crate::timeline::metrics::Metrics::default(),
            "transitions": transitions,
        }))
        .unwrap()
    }

    fn node(at: i64, name: &str, change: serde_json::Value) -> serde_json::Value {
        json!({"at": at, "object": {"kind": "node", "name": name}, "change": change})
    }

    fn pod(at: i64, uid: &str, change: serde_json::Value) -> serde_json::Value {
        json!({"at": at, "object": {"kind": "pod", "name": uid, "uid": uid}, "change": change})
    }

    fn ready(status: &str) -> serde_json::Value {
        json!({"type": "nodeReady", "status": status})
    }

    /// What kind saw: Unknown 48 s after the pause, two pods Terminating,
    /// a replacement Ready, and on resume Ready=False then True 10 s later.
    fn kind_run() -> RunResult {
        let w = "nfscen-worker";
        run(
            w,
            json!([
                pod(1_000, "a", json!({"type": "podScheduled", "node": w})),
                pod(1_000, "b", json!({"type": "podScheduled", "node": w})),
                pod(
                    1_000,
                    "c",
                    json!({"type": "podScheduled", "node": "nfscen-worker2"})
                ),
                node(5_000, w, ready("True")),
                node(58_000, w, ready("Unknown")),
                node(
                    58_100,
                    w,
                    json!({"type": "taintAdded", "key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})
                ),
                pod(80_000, "a", json!({"type": "podTerminating"})),
                pod(80_500, "b", json!({"type": "podTerminating"})),
                pod(81_000, "d", json!({"type": "podAdded", "labels": {}})),
                pod(84_000, "d", json!({"type": "podReady", "ready": true})),
                node(100_300, w, ready("False")),
                node(110_300, w, ready("True")),
                node(160_000, w, ready("Unknown")),
            ]),
        )
    }

    fn names(points: &[Point]) -> Vec<(&str, &str, Ms, usize)> {
        points
            .iter()
            .map(|p| (p.what.as_str(), p.step.as_str(), p.after, p.count))
            .collect()
    }

    #[test]
    fn points_are_named_by_role_and_group_and_timed_from_their_step() {
        assert_eq!(
            names(&points(&kind_run())),
            [
                ("target: Ready=Unknown", "#1 (pause)", 48_000, 1),
                (
                    "target: taint + node.kubernetes.io/unreachable:NoExecute",
                    "#1 (pause)",
                    48_100,
                    1
                ),
                (
                    "pods on target: Terminating (first)",
                    "#1 (pause)",
                    70_000,
                    2
                ),
                (
                    "pods on target: Terminating (last)",
                    "#1 (pause)",
                    70_500,
                    2
                ),
                ("new pods: created", "#1 (pause)", 71_000, 1),
                ("new pods: Ready=True", "#1 (pause)", 74_000, 1),
                ("target: Ready=False", "#5 (resume)", 300, 1),
                ("target: Ready=True", "#5 (resume)", 10_300, 1),
            ],
            "nothing before the first fault, nothing from the clean-up on"
        );
    }

    #[test]
    fn a_sim_without_the_kubelets_not_ready_is_caught_and_one_within_the_goal_is_not() {
        let w = "worker-1";
        // The sim as it was: straight to Ready on resume; else within 10 %
        // or 1 s (Unknown 4.1 s later is within 10 % of 48 s).
        let sim = run(
            w,
            json!([
                pod(1_000, "x", json!({"type": "podScheduled", "node": w})),
                pod(1_000, "y", json!({"type": "podScheduled", "node": w})),
                node(62_100, w, ready("Unknown")),
                node(
                    62_200,
                    w,
                    json!({"type": "taintAdded", "key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})
                ),
                pod(80_100, "x", json!({"type": "podTerminating"})),
                pod(80_200, "y", json!({"type": "podTerminating"})),
                pod(81_000, "z", json!({"type": "podAdded", "labels": {}})),
                pod(83_200, "z", json!({"type": "podReady", "ready": true})),
                node(100_200, w, ready("True")),
            ]),
        );
        let f = compare(&kind_run(), &sim);
        assert!(!f.meets_goal());
        let off = |what: &str| {
            f.rows
                .iter()
                .find(|r| r.what == what)
                .unwrap()
                .verdict
                .clone()
        };
        assert_eq!(off("target: Ready=False"), RowVerdict::OnlyKind);
        assert_eq!(
            off("target: Ready=True"),
            RowVerdict::Off,
            "Ready 10.1 s early"
        );
        assert_eq!(off("target: Ready=Unknown"), RowVerdict::Within);
        assert_eq!(off("new pods: Ready=True"), RowVerdict::Within);
    }

    #[test]
    fn a_transition_late_on_its_own_timer_is_the_only_row_off() {
        let r = |what: &str, kind: Ms, sim: Ms| {
            let p = |after| Point {
                what: what.into(),
                step: "#1".into(),
                step_index: 0,
                after,
                count: 1,
            };
            (0, kind, row(Some(&p(kind)), Some(&p(sim))))
        };
        // Pod GC's pass came 30 s later on the sim; what followed it did not.
        let mut rows = [r("gc", 79_500, 49_900), r("created", 79_530, 49_960)];
        judge_gaps(&mut rows, &TimingProfile::upstream_default());
        assert_eq!(rows[0].2.verdict, RowVerdict::Off);
        assert_eq!(rows[1].2.verdict, RowVerdict::Within);
        assert_eq!(
            (rows[1].2.kind_gap, rows[1].2.sim_gap),
            (Some(30), Some(60))
        );
    }

    #[test]
    fn a_controller_timers_phase_is_judged_by_its_window() {
        let judge = |what: &str, kind: Ms, sim: Ms| {
            let p = |after| Point {
                what: what.into(),
                step: "#6".into(),
                step_index: 0,
                after,
                count: 2,
            };
            let mut rows = [(0, kind, row(Some(&p(kind)), Some(&p(sim))))];
            judge_gaps(&mut rows, &TimingProfile::upstream_default());
            rows[0].2.verdict.clone()
        };
        // Pod GC: 40-80 s after the Node's deletion (quarantine 40 s, a pass
        // every 20 s), whichever cluster.
        let gc = judge("pods on target: phase Failed", 79_484, 49_935);
        assert!(
            matches!(gc, RowVerdict::Timer { ref rule } if rule.contains("40.0-80.0 s")),
            "{gc:?}"
        );
        assert_eq!(
            judge("pods on target: phase Failed", 79_484, 95_000),
            RowVerdict::Off
        );
        // Unknown: grace 50 s after the last renewal (every 10 s), a pass every 5 s.
        let unknown = judge("target: Ready=Unknown (NodeStatusUnknown)", 42_000, 54_000);
        assert!(matches!(unknown, RowVerdict::Timer { .. }), "{unknown:?}");
        assert_eq!(judge("target: Ready=True", 42_000, 54_000), RowVerdict::Off);
        // Pods of an out-of-service node: at the next pass, up to 20 s on.
        let oos = judge("pods on target: phase Failed (first)", 8_913, 14_818);
        assert!(
            matches!(oos, RowVerdict::Timer { ref rule } if rule.contains("out-of-service")),
            "{oos:?}"
        );
    }

    #[test]
    fn an_endpoint_not_ready_for_a_blink_before_ready_is_not_a_transition() {
        let w = "nfscen-worker";
        let ep = |at: i64, address: &str, ready: bool| {
            json!({"at": at, "object": {"kind": "endpointSlice", "name": "web-x", "service": "web"},
                   "change": {"type": "endpoint", "address": address, "node": "other",
                              "ready": ready, "serving": ready, "terminating": false}})
        };
        // After the resume (100 s): one pod's endpoint not ready for 30 ms,
        // another's for 1.9 s.
        let r = run(
            w,
            json!([
                ep(101_000, "10.0.0.1", false),
                ep(101_030, "10.0.0.1", true),
                ep(101_100, "10.0.0.2", false),
                ep(103_000, "10.0.0.2", true),
            ]),
        );
        let got: Vec<(String, usize)> = points(&r).into_iter().map(|p| (p.what, p.count)).collect();
        assert_eq!(
            got,
            [
                ("endpoints elsewhere: ready (first)".to_owned(), 2),
                ("endpoints elsewhere: not ready".to_owned(), 1),
                ("endpoints elsewhere: ready (last)".to_owned(), 2),
            ]
        );
    }

    #[test]
    fn a_pod_late_after_the_node_authorizer_refused_its_kubelet_is_a_row_the_sim_cannot_show() {
        let w = "nfscen-worker";
        let refused = json!({"at": 115_000, "object": {"kind": "event", "name": "web-1.x"},
            "change": {"type": "event", "reason": "FailedMount", "involved": "Pod/web-1",
                "message": "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC ns/data-web-1: failed to fetch PVC from API server: persistentvolumeclaims \"data-web-1\" is forbidden: User \"system:node:w2\" cannot get resource \"persistentvolumeclaims\" in API group \"\" in the namespace \"ns\": no relationship found between node 'w2' and this object"}});
        let ready = |at: i64| pod(at, "r", json!({"type": "podReady", "ready": true}));
        let added = pod(114_900, "r", json!({"type": "podAdded", "labels": {}}));
        // The replacement Ready 16 s after its creation on kind, 1.6 s on the sim.
        let kind = run(w, json!([added.clone(), refused, ready(130_900)]));
        let sim = run(w, json!([added, ready(116_500)]));
        let verdict = |kind: &RunResult| {
            let f = compare(kind, &sim);
            named(&f, "new pods: Ready=True").verdict.clone()
        };
        let got = verdict(&kind);
        assert!(
            matches!(&got, RowVerdict::Cannot { lacks } if lacks.contains("node authorizer")),
            "{got:?}"
        );
        // Without the refusal it is simply off.
        let kind = run(
            w,
            json!([
                pod(114_900, "r", json!({"type": "podAdded", "labels": {}})),
                ready(130_900)
            ]),
        );
        assert_eq!(verdict(&kind), RowVerdict::Off);
    }

    #[test]
    fn pods_a_shutting_down_kubelet_stops_are_judged_by_the_range_kind_showed() {
        let p = |what: &str, after| Point {
            what: what.into(),
            step: "#2 (shutdown)".into(),
            step_index: 0,
            after,
            count: 2,
        };
        let judge = |with_status: bool, k: Ms, s: Ms| {
            let not_ready = "target: Ready=False (KubeletNotReady)";
            let stopped = "pods on target: DisruptionTarget (first)";
            let mut rows = vec![(0, k, row(Some(&p(stopped, k)), Some(&p(stopped, s))))];
            if with_status {
                rows.insert(
                    0,
                    (
                        0,
                        360,
                        row(Some(&p(not_ready, 360)), Some(&p(not_ready, 77))),
                    ),
                );
            }
            judge_gaps(&mut rows, &TimingProfile::upstream_default());
            rows.last().unwrap().2.verdict.clone()
        };
        // kind stopped the first pod 0.54 s after the shutdown, the sim 1.56 s.
        assert!(matches!(judge(true, 541, 1_557), RowVerdict::Timer { .. }));
        // Without the kubelet's Ready=False it is no shutdown: off.
        assert_eq!(judge(false, 541, 1_557), RowVerdict::Off);
        // Outside what kind showed: off.
        assert_eq!(judge(true, 541, 3_900), RowVerdict::Off);
    }

    #[test]
    fn a_groups_first_and_anothers_last_are_not_checked_for_order() {
        let p = |what: &str, after| Point {
            what: what.into(),
            step: "#2".into(),
            step_index: 0,
            after,
            count: 2,
        };
        let kind = [
            p("new pods: phase Running (first)", 1_437),
            p("new pods: created (last)", 2_280),
            p("new pods: phase Running (last)", 3_273),
        ];
        let sim = [
            p("new pods: created (last)", 1_602),
            p("new pods: phase Running (first)", 3_088),
            p("new pods: phase Running (last)", 3_137),
        ];
        assert!(inversions(&kind, &sim, &TimingProfile::upstream_default()).is_empty());
        assert!(mixes_first_and_last("a (first)", "b (last)"));
        assert!(!mixes_first_and_last("a (first)", "b (first)"));
        assert!(!mixes_first_and_last("a (last)", "b"));
    }

    #[test]
    fn a_blip_across_a_step_start_is_readiness_of_the_step_before_and_serving_alone_no_row() {
        let w = "nfscen-worker";
        let ep = |at: i64, address: &str, ready: bool, serving: bool| {
            json!({"at": at, "object": {"kind": "endpointSlice", "name": "web-x", "service": "web"},
                   "change": {"type": "endpoint", "address": address, "node": "other",
                              "ready": ready, "serving": serving, "terminating": !ready}})
        };
        let r = run(
            w,
            json!([
                // Not ready 10 ms before the resume (100 s), ready 1 s after it.
                ep(99_990, "10.0.0.3", false, false),
                ep(100_996, "10.0.0.3", true, true),
                // A terminating endpoint serving again: still not ready.
                ep(50_000, "10.0.0.4", false, false),
                ep(102_172, "10.0.0.4", false, true),
            ]),
        );
        let got: Vec<(String, String, Ms)> = points(&r)
            .into_iter()
            .map(|p| (p.what, p.step, p.after))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "endpoints elsewhere: not ready".to_owned(),
                    "#1 (pause)".to_owned(),
                    40_000
                ),
                (
                    "endpoints elsewhere: ready".to_owned(),
                    "#1 (pause)".to_owned(),
                    90_996
                ),
            ]
        );
    }

    #[test]
    fn a_noexecute_taint_belongs_to_the_step_of_the_ready_change_it_follows() {
        let w = "nfscen-worker";
        let r = run(
            w,
            json!([
                node(97_000, w, ready("True")),
                node(
                    100_300,
                    w,
                    json!({"type": "taintRemoved",
                    "key": "node.kubernetes.io/not-ready", "effect": "NoExecute"})
                ),
                // Not the controller's: where it came.
                node(
                    100_400,
                    w,
                    json!({"type": "taintRemoved",
                    "key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"})
                ),
            ]),
        );
        let got: Vec<(String, String)> = points(&r).into_iter().map(|p| (p.what, p.step)).collect();
        assert_eq!(
            got,
            [
                ("target: Ready=True".to_owned(), "#1 (pause)".to_owned()),
                (
                    "target: taint - node.kubernetes.io/not-ready:NoExecute".to_owned(),
                    "#1 (pause)".to_owned()
                ),
                (
                    "target: taint - node.kubernetes.io/out-of-service:NoExecute".to_owned(),
                    "#5 (resume)".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn a_noexecute_taint_a_token_late_is_the_taint_queues_rate_limit() {
        // Seed 001 on kind: the taint 9.9 s after Unknown (a token spent on
        // a stale read), on the sim in the same pass.
        let p = |what: &str, after| Point {
            what: what.into(),
            step: "#1 (stop)".into(),
            step_index: 0,
            after,
            count: 1,
        };
        let unknown = "target: Ready=Unknown (NodeStatusUnknown)";
        let taint = "target: taint + node.kubernetes.io/unreachable:NoExecute";
        let judge = |k: Ms, s: Ms| {
            let mut rows = [
                (
                    0,
                    42_099,
                    row(Some(&p(unknown, 42_099)), Some(&p(unknown, 44_637))),
                ),
                (0, k, row(Some(&p(taint, k)), Some(&p(taint, s)))),
            ];
            judge_gaps(&mut rows, &TimingProfile::upstream_default());
            rows[1].2.verdict.clone()
        };
        let late = judge(52_176, 44_703);
        assert!(
            matches!(late, RowVerdict::Timer { ref rule } if rule.contains("--node-eviction-rate")),
            "{late:?}"
        );
        // A token later still is off, and so is a taint removed that late.
        assert_eq!(judge(53_500, 44_703), RowVerdict::Off);
        let gone = "target: taint - node.kubernetes.io/unreachable:NoExecute";
        let both = |what: &str, k: Ms, s: Ms| (0, k, row(Some(&p(what, k)), Some(&p(what, s))));
        let mut rows = [both(unknown, 42_099, 44_637), both(gone, 52_176, 44_703)];
        judge_gaps(&mut rows, &TimingProfile::upstream_default());
        assert_eq!(rows[1].2.verdict, RowVerdict::Off);
        // The vm-halt power-on: the taint off 4.9 s after Ready=True on kind,
        // 0.4 s on the sim, other rows between: each within the controller's
        // next pass after the Ready change.
        let ready = "target: Ready=True (KubeletReady)";
        let deleted = "pods on target: deleted (last)";
        let mut rows = [
            both(ready, 8_262, 8_020),
            both(deleted, 10_209, 9_920),
            both(gone, 13_117, 8_378),
        ];
        judge_gaps(&mut rows, &TimingProfile::upstream_default());
        assert!(
            matches!(&rows[2].2.verdict, RowVerdict::Timer { rule } if rule.contains("after the node's Ready change")),
            "{:?}",
            rows[2].2.verdict
        );
    }

    #[test]
    fn unknown_after_a_status_posted_in_the_step_counts_from_that_status() {
        let p = |what: &str, after| Point {
            what: what.into(),
            step: "#2 (shutdown)".into(),
            step_index: 1,
            after,
            count: 1,
        };
        let unknown = "target: Ready=Unknown (NodeStatusUnknown)";
        let judge = |status: bool| {
            // kind-graceful-shutdown, default timings: the kubelet's
            // Ready=False at once, Unknown 51.5 s (kind) and 57.7 s (sim) on.
            let mut rows = Vec::new();
            if status {
                let not_ready = "target: Ready=False (KubeletNotReady)";
                rows.push((
                    1,
                    235,
                    row(Some(&p(not_ready, 235)), Some(&p(not_ready, 82))),
                ));
            }
            rows.push((
                1,
                51_523,
                row(Some(&p(unknown, 51_523)), Some(&p(unknown, 57_652))),
            ));
            judge_gaps(&mut rows, &TimingProfile::upstream_default());
            rows.last().unwrap().2.verdict.clone()
        };
        let v = judge(true);
        assert!(
            matches!(&v, RowVerdict::Timer { rule } if rule.contains("50.0-60.0 s after that status")),
            "{v:?}"
        );
        // No status of its own in the step: the last renewal came before it,
        // so 57.7 s is past the controller's window (40-55 s).
        assert_eq!(judge(false), RowVerdict::Off);
    }

    #[test]
    fn a_sim_run_stopped_in_its_setup_is_one_row_naming_what_the_setup_waited_for() {
        let mut sim = kind_run();
        sim.verdict = RunVerdict::Error;
        sim.t0 = None;
        sim.error = Some("setup failed: timed out after 300s waiting for statefulset web".into());
        let f = compare(&kind_run(), &sim);
        assert_eq!(f.rows.len(), 1);
        let RowVerdict::Cannot { lacks } = &f.rows[0].verdict else {
            panic!("{f:?}")
        };
        assert!(lacks.contains("waiting for statefulset web"), "{lacks}");
        assert_eq!(f.sim_verdict, "ERROR 0/0");
    }

    #[test]
    fn a_transition_on_either_side_of_a_step_start_is_one_row() {
        let p = |step_index, after| Point {
            what: "endpoints elsewhere: ready".into(),
            step: format!("#{step_index}"),
            step_index,
            after,
            count: 1,
        };
        // Kind saw it 27 ms into step 1, the sim 0.471 s before its step 1.
        let mut rows = vec![
            (1, 27, row(Some(&p(1, 27)), None)),
            (0, 51_529, row(None, Some(&p(0, 51_529)))),
        ];
        join_boundary_races(&mut rows, &[(0, "#0".into()), (52_000, "#1".into())]);
        assert_eq!(rows.len(), 1, "{rows:?}");
        let r = &rows[0].2;
        assert_eq!((r.kind, r.sim), (Some(27), Some(-471)));
        assert_eq!(r.verdict, RowVerdict::Within);
    }

    #[test]
    fn steps_taken_back_to_back_share_one_anchor() {
        let mut r = run("n", json!([node(100_030, "n", ready("True"))]));
        // A second action 20 ms after the resume: the transition is timed
        // from the resume either way.
        r.steps.push(
            serde_json::from_value(json!({"label": "#6", "kind": "action", "description": "x",
                "started": 100_020, "ended": 100_040, "outcome": {"status": "ok"}}))
            .unwrap(),
        );
        assert_eq!(
            names(&points(&r)),
            [("target: Ready=True", "#5 (resume) + #6", 30, 1)]
        );
    }

    #[test]
    fn the_goal_is_ten_percent_or_one_second() {
        assert!(within(48_000, 52_800));
        assert!(!within(48_000, 52_801));
        assert!(within(300, 1_300), "1 s on a small figure");
        assert!(!within(300, 1_301));
    }

    #[test]
    fn an_order_seen_more_than_a_second_apart_on_one_side_must_hold_on_the_other() {
        let p = |what: &str, after: Ms| Point {
            what: what.into(),
            step: "#1".into(),
            step_index: 0,
            after,
            count: 1,
        };
        let kind = [p("a", 0), p("b", 1_500), p("c", 1_600)];
        // b and c swapped: 0.1 s apart on kind, so either order is fine.
        let d = TimingProfile::upstream_default();
        assert!(inversions(&kind, &[p("a", 0), p("c", 1_500), p("b", 1_600)], &d).is_empty());
        let inv = inversions(&kind, &[p("b", 0), p("a", 300), p("c", 1_600)], &d);
        assert_eq!(
            inv,
            [Inversion {
                first: "a".into(),
                then: "b".into(),
                step: "#1".into()
            }]
        );
    }

    #[test]
    fn a_timer_rows_order_is_not_checked_and_readiness_at_a_step_start_counts_before_it() {
        let p = |what: &str, after: Ms| Point {
            what: what.into(),
            step: "#9".into(),
            step_index: 0,
            after,
            count: 1,
        };
        let taint = "target: taint + node.kubernetes.io/not-ready:NoExecute";
        let kind = [p(taint, 1_800), p("pods on target: deleted", 3_400)];
        let sim = [p(taint, 3_500), p("pods on target: deleted", 3_100)];
        let d = TimingProfile::upstream_default();
        assert!(inversions(&kind, &sim, &d).is_empty());
        // An endpoint ready 26 ms into the resume step: counted with the pause.
        let w = "nfscen-worker";
        let r = run(
            w,
            json!([
                {"at": 100_026, "object": {"kind": "endpointSlice", "name": "s", "service": "web"},
                 "change": {"type": "endpoint", "address": "10.0.0.9", "node": "other",
                            "ready": true, "serving": true, "terminating": false}},
            ]),
        );
        assert_eq!(
            names(&points(&r)),
            [("endpoints elsewhere: ready", "#1 (pause)", 90_026, 1)]
        );
    }

    /// The row of that name.
    fn named<'a>(f: &'a ScenarioFidelity, what: &str) -> &'a Row {
        f.rows.iter().find(|r| r.what == what).unwrap()
    }

    fn with_probe(mut run: RunResult, start: Ms, end: Ms) -> RunResult {
        let mut fixture: RunResult = serde_json::from_str(include_str!(
            "../../../../tests/fixtures/results/clients-probe.json"
        ))
        .unwrap();
        let w = &mut fixture.probes[0].windows[0];
        (w.start, w.end) = (start, Some(end));
        run.probes = fixture.probes;
        run
    }

    #[test]
    fn clients_error_windows_are_rows_judged_like_the_rest() {
        // The probe's errors from the pause (10 s) to 49 s on kind.
        let kind = with_probe(kind_run(), 10_500, 59_000);
        let f = compare(&kind, &with_probe(kind_run(), 10_400, 59_300));
        let rows: Vec<(&str, RowVerdict)> = f
            .rows
            .iter()
            .filter(|r| r.what.starts_with("clients"))
            .map(|r| (r.what.as_str(), r.verdict.clone()))
            .collect();
        assert_eq!(
            rows,
            [
                ("clients web: errors begin", RowVerdict::Within),
                ("clients web: errors end", RowVerdict::Within)
            ],
            "{f:?}"
        );
        assert!(f.meets_goal(), "{f:?}");
        // The first error a few requests later on one side: chance.
        let f = compare(&kind, &with_probe(kind_run(), 11_900, 59_300));
        let begin = named(&f, "clients web: errors begin");
        assert!(
            matches!(&begin.verdict, RowVerdict::Timer { rule } if rule.contains("at random")),
            "{begin:?}"
        );
        // Errors that end 5 s later on the sim are off (and so far from
        // any endpoint change in this run that no routing explains it).
        let f = compare(&kind, &with_probe(kind_run(), 10_400, 64_000));
        let end = named(&f, "clients web: errors end");
        assert!(!end.verdict.meets_goal(), "{end:?}");
    }

    #[test]
    fn a_probes_errors_end_is_judged_from_the_endpoints_leaving() {
        let gone = |run: &mut RunResult, at: Ms| {
            run.transitions.push(
                serde_json::from_value(json!({"at": at,
                    "object": {"kind": "endpointSlice", "name": "web-x", "service": "web"},
                    "change": {"type": "endpoint", "address": "10.0.0.1", "node": "nfscen-worker",
                               "ready": false, "serving": false, "terminating": false}}))
                .unwrap(),
            );
            run.transitions.sort_by_key(|t| t.at);
        };
        // kind: the last error's request just before the endpoints left
        // (errors end 0.1 s before); the sim: its request timed out after.
        let mut kind = with_probe(kind_run(), 10_500, 51_000);
        gone(&mut kind, 51_100);
        let mut sim = with_probe(kind_run(), 10_400, 57_500);
        gone(&mut sim, 56_500);
        let f = compare(&kind, &sim);
        let end = named(&f, "clients web: errors end");
        assert!(
            matches!(&end.verdict, RowVerdict::Timer { rule } if rule.contains("kube-proxy")),
            "{end:?}"
        );
        // Errors going on 10 s after the endpoints left: off.
        let mut sim = with_probe(kind_run(), 10_400, 66_500);
        gone(&mut sim, 56_500);
        let f = compare(&kind, &sim);
        let end = named(&f, "clients web: errors end");
        assert_eq!(end.verdict, RowVerdict::Off, "{end:?}");
    }

    #[test]
    fn a_steps_error_windows_are_one_span_however_many() {
        let mut sim = with_probe(kind_run(), 10_400, 40_000);
        let mut second = sim.probes[0].windows[0].clone();
        (second.start, second.end) = (44_000, Some(59_300));
        sim.probes[0].windows.push(second);
        let got: Vec<(String, Ms, usize)> = points(&sim)
            .into_iter()
            .filter(|p| p.what.starts_with("clients"))
            .map(|p| (p.what, p.after, p.count))
            .collect();
        assert_eq!(
            got,
            [
                ("clients web: errors begin".to_owned(), 400, 1),
                ("clients web: errors end".to_owned(), 49_300, 1)
            ]
        );
    }

    #[test]
    fn probes_that_never_reached_the_sims_pods_are_a_row_it_cannot_show() {
        let kind = with_probe(kind_run(), 10_500, 59_000);
        let mut sim = with_probe(kind_run(), 10_400, 59_300);
        for p in &mut sim.probes {
            p.errors = p.requests;
            p.windows.clear();
        }
        let f = compare(&kind, &sim);
        let last = f.rows.last().unwrap();
        assert!(
            matches!(last.verdict, RowVerdict::Cannot { .. }),
            "{last:?}"
        );
    }
}
