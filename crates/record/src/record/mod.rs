//! `result.json`: everything a run observed, versioned, enough to re-render
//! the Markdown report (`nodefall report render result.json`).

pub mod audit;
pub mod bounds;
pub mod graceful;
pub mod machines;
pub mod probe;
pub mod read;
pub mod remediation;
pub mod summary;

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::plan::time;
use crate::profile::TimingProfile;
use crate::scenario::expr::Window;
use crate::timeline::metrics::Metrics;
use crate::timeline::{Ms, Transition};

/// Bumped on any incompatible change of [`RunResult`].
///
/// 2: expectations record `windowFrom`/`windowTo`, the span their window
/// really covered, and `anchor` says what the window counted from (the step's
/// own start for `holdsFor`/`never` without `since`). Version 1 files are read
/// through [`RunResult::upgrade_from_v1`].
///
/// 3: `gracefulShutdown`, the graceful-shutdown preflight of each node a
/// `shutdown` fault hits (facts and verdict, see [`graceful::NodeReport`]),
/// and expectations may have the window kind `preflight` (`gracefulShutdown:`
/// expectations). Versions 1 and 2 are read as they are: neither has either.
///
/// 4: steps and cleanup records may list the external `commands` they ran
/// (command backend), with status and output. Versions 2 and 3 are read as
/// they are: they have none.
///
/// 5: what real clusters need: the profile's `origins` (where each timing
/// came from), expectation `notes` (assumed values, pods' own tolerations),
/// PVC objects and their bindings, pods' claims and NoExecute tolerations,
/// event counts, volume metrics, abort `guards` and `aborted`. Versions 2
/// to 4 are read as they are: they have none.
///
/// 8: `machines` (the failed nodes' machines sampled by the backend: power,
/// pods' running containers) and `duplicates` (each replaced pod's
/// duplicate window); `remediation.fencing` may come from the machines.
/// Versions 2 to 7 are read as they are: they have neither.
///
/// 9: each probe's `baseline` (its requests before the first step, while
/// the run waited for it to settle); its `requests`, `errors`, `latency` and
/// `windows` count from the first step on. Versions 2 to 8 are read as they
/// are: they have no baseline, and their figures cover every request.
///
/// 10: `zones` (a run whose faults broke more than one node: every node's
/// zone, the zone rules' forecast, the zone states inferred over time, the
/// failed nodes never tainted and the rule for each); each failed node's
/// `noScheduleTaint` and `noExecuteRemoved`; the profile's eviction
/// intervals and zone rules where not upstream's. Versions 2 to 9 are read
/// as they are: they have none of these.
pub const SCHEMA_VERSION: u32 = 10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub schema_version: u32,
    pub scenario: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The scenario file as given on the command line.
    pub file: String,
    pub backend: String,
    /// `kube-apiserver` gitVersion, when the cluster was reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_version: Option<String>,
    pub profile: TimingProfile,
    pub namespace: String,
    /// Target name -> node name, as resolved before the first fault.
    pub targets: BTreeMap<String, String>,
    /// Each target that is a set of nodes, with its nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sets: BTreeMap<String, Vec<String>>,
    /// The graceful-shutdown preflight of each node a `shutdown` fault hits,
    /// in scenario order (empty when there is none; absent before schema 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graceful_shutdown: Vec<graceful::NodeReport>,
    /// Wall-clock time of `at = 0`.
    pub started_at: Timestamp,
    /// T0: when the first fault (or first action) began, ms since start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0: Option<Ms>,
    /// When the run (cleanup included) ended, ms since start.
    pub finished: Ms,
    pub verdict: RunVerdict,
    /// Why the run stopped early, when it did (error text with causes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub steps: Vec<StepRecord>,
    pub expectations: Vec<ExpectationResult>,
    /// Fault reverts, taint removals, namespace deletion after the steps.
    pub cleanup: Vec<StepRecord>,
    pub metrics: Metrics,
    pub transitions: Vec<Transition>,
    /// The scenario's `abortIf` guards, each with when it fired (empty when
    /// the scenario has none; older results have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<GuardRecord>,
    /// The guard that stopped the steps, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<AbortRecord>,
    /// The scenario's HTTP probes: every request, the error windows and
    /// latency (empty without `probe:`; older results have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<probe::ProbeRecord>,
    /// When the watchers had listed every object once (ms since start): the
    /// observer's transitions from then on are live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_from: Option<Ms>,
    /// Watch errors the observer's watchers recovered from by relisting
    /// (each a moment where changes were seen late, never lost).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub watch_errors: u64,
    /// nodefall's own resource use over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The observer checked against the API server's audit log (sim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<audit::AuditReport>,
    /// How the failed nodes were remediated, where something did (absent
    /// before schema 7, and when nothing remediated them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<remediation::Remediation>,
    /// The failed nodes' machines by the backend's own account (power and
    /// running pod containers, sampled through the run; absent before
    /// schema 8, and where the backend cannot look).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<machines::MachineTrack>,
    /// Each replaced pod's duplicate window: its original still running on
    /// the failed node while the replacement ran (absent before schema 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<machines::DuplicateWindow>,
    /// What the zone rules did, when the faults broke more than one node
    /// (absent before schema 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<crate::timeline::zones::ZonesRecord>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The nodefall process's own peak memory and CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub peak_rss_bytes: u64,
    /// User + system CPU time.
    pub cpu_ms: u64,
}

impl RunResult {
    /// Every node a target names: the one-node targets' and the sets'.
    pub fn fault_nodes(&self) -> impl Iterator<Item = &str> {
        let sets = self.sets.values().flatten();
        self.targets.values().chain(sets).map(String::as_str)
    }

    /// The wall-clock time of `at` (ms since start), saturating at jiff's range.
    pub fn wall_clock(&self, at: Ms) -> Timestamp {
        self.started_at
            .checked_add(SignedDuration::from_millis(at))
            .unwrap_or(if at < 0 {
                Timestamp::MIN
            } else {
                Timestamp::MAX
            })
    }

    /// `at` (ms since start) relative to T0, when the run reached T0.
    pub fn since_t0(&self, at: Ms) -> Option<Ms> {
        self.t0.map(|t0| at - t0)
    }

    /// A time relative to T0 (as [`Metrics`] holds them) as ms since start.
    pub fn t0_plus(&self, rel: Ms) -> Option<Ms> {
        self.t0.map(|t0| t0 + rel)
    }

    /// Fills what schema 2 added to a schema-1 result, as far as the old
    /// file determines it. Schema 1 recorded the true anchor of `within`,
    /// `after` and `notBefore` windows, so their span is exact. For `holdsFor`
    /// and `never` it recorded the step's anchor even when the window counted
    /// from the step's own start, which it did not record (nor whether `since`
    /// was written): their span is left unknown (`None`).
    /// Nothing else differs up to the current version.
    pub fn upgrade_from_v1(&mut self) {
        for e in &mut self.expectations {
            if e.verdict == Verdict::NotRun || e.window_from.is_some() {
                continue;
            }
            let known = matches!(e.window, Window::Between { .. } | Window::NotBefore { .. });
            if known {
                let (from, to) = time::evaluated_span(e.window, e.anchor_at, e.anchor_at);
                e.window_from = Some(from);
                e.window_to = Some(to);
            }
        }
        self.schema_version = SCHEMA_VERSION;
    }

    /// How many expectations ended with `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.expectations
            .iter()
            .filter(|e| e.verdict == verdict)
            .count()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunVerdict {
    /// Every expectation held.
    Pass,
    /// The run completed and at least one expectation failed.
    Fail,
    /// The run stopped on an infrastructure error; the report is partial.
    Error,
    /// Ctrl-C; the report is partial.
    Interrupted,
}

impl RunVerdict {
    /// The verdict as a report headline: `PASS`, `ERROR (partial report)`.
    pub fn headline(self) -> &'static str {
        match self {
            RunVerdict::Pass => "PASS",
            RunVerdict::Fail => "FAIL",
            RunVerdict::Error => "ERROR (partial report)",
            RunVerdict::Interrupted => "INTERRUPTED (partial report)",
        }
    }

    /// True when the run stopped early and the report covers only part of it.
    pub fn is_partial(self) -> bool {
        matches!(self, RunVerdict::Error | RunVerdict::Interrupted)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StepKind {
    Setup,
    Fault,
    Action,
    Expect,
    Cleanup,
}

impl StepKind {
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Setup => "setup",
            StepKind::Fault => "fault",
            StepKind::Action => "action",
            StepKind::Expect => "expect",
            StepKind::Cleanup => "cleanup",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    /// Position in the scenario's `steps` (None for setup and cleanup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// `#3 (evicted)`, `setup`, `cleanup`.
    pub label: String,
    pub kind: StepKind,
    /// What it did, in words (`pause-vm worker-2`, `taint worker-2 ...`).
    pub description: String,
    pub started: Ms,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Ms>,
    pub outcome: StepOutcome,
    /// Notes recorded while it ran (retries, refusals, ...), with their time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<(Ms, String)>,
    /// The external commands it ran (command backend), with their output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRecord>,
    /// Each eviction a drain asked for, as the API server answered it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<EvictionRecord>,
    /// A fault step's fault and node (absent before schema 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultStep>,
}

/// What a fault step did to which node: the backend's own account of the
/// machine (off after a poweroff or shutdown, back on at a poweron).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultStep {
    pub fault: crate::scenario::model::FaultKind,
    /// The node; for a set of nodes, the set's target name.
    pub node: String,
    /// A set's nodes, each as its fault went, in the order they were hit
    /// (empty for one node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeFault>,
}

impl FaultStep {
    /// Whether the step hit `node` (itself, or as one of its set).
    pub fn hits(&self, node: &str) -> bool {
        if self.nodes.is_empty() {
            self.node == node
        } else {
            self.nodes.iter().any(|n| n.node == node)
        }
    }

    /// A set's spread: from the first node's inject starting to the last
    /// one's done (None for one node).
    pub fn spread(&self) -> Option<Ms> {
        let first = self.nodes.first()?;
        let last = self.nodes.last()?;
        Some(last.done.saturating_sub(first.at))
    }
}

/// One node of a set a fault hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFault {
    pub node: String,
    /// When its inject began and ended (ms since the run's start).
    pub at: Ms,
    pub done: Ms,
    /// Why it failed (the set's remaining nodes were then left alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One call of the Eviction API by a drain: the pod evicted, or refused
/// (HTTP 429: a PodDisruptionBudget allowed no more disruptions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionRecord {
    pub at: Ms,
    /// `namespace/name`.
    pub pod: String,
    pub refused: bool,
}

/// One external command a step ran, as it ran: the line, how it ended and
/// what it printed (each stream cut to its last [`CommandRecord::KEEP`]
/// bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandRecord {
    /// `run`, `revert`, `check` or `revertCheck`.
    pub role: String,
    pub line: String,
    /// `exit status: 0`, `timed out after 60s`, ...
    pub status: String,
    pub ok: bool,
    /// How long it took (for a check: the last attempt).
    pub ms: u64,
    /// How many times it ran (a check is polled until it passes).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}

impl CommandRecord {
    /// Bytes of each stream kept (the end, where errors are).
    pub const KEEP: usize = 4096;

    /// The end of an output stream, at most [`CommandRecord::KEEP`] bytes.
    pub fn tail(s: &str) -> String {
        if s.len() <= Self::KEEP {
            return s.to_owned();
        }
        let mut cut = s.len() - Self::KEEP;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        format!("[{cut} bytes cut]...{}", &s[cut..])
    }
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "message", rename_all = "camelCase")]
pub enum StepOutcome {
    Ok,
    Failed(String),
    /// Not run because the run stopped before it.
    Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    Pass,
    Fail,
    /// The run stopped before this expectation was decided.
    NotRun,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectationResult {
    pub index: usize,
    pub label: String,
    /// The condition in words (`pods app=nginx on target (worker-2): terminating`).
    pub description: String,
    /// The window as written in the scenario (`grace + toleration +- 15s`).
    pub window_written: String,
    /// The window evaluated under the profile, relative to the anchor.
    pub window: Window,
    /// What the window counted from: the anchor step (`#1 (pause)`, `setup`),
    /// or for `holdsFor`/`never` without `since` the step's own start
    /// (`start of #5 (after #4 (evicted) is decided)`).
    pub anchor: String,
    /// When that was, ms since start.
    pub anchor_at: Ms,
    /// When the window opened, ms since start (see [`time::evaluated_span`]);
    /// absent when it never opened (not run) or, in a schema-1 result, when
    /// the file did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_from: Option<Ms>,
    /// When the window closed (the decision deadline), ms since start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_to: Option<Ms>,
    /// When the condition was first seen to hold (or, for `never`/`notBefore`,
    /// to break; for `holdsFor`, to stop holding), relative to the anchor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Ms>,
    pub verdict: Verdict,
    /// Observed vs expected in words, with by how much it missed.
    pub detail: String,
    /// Signed distance outside the window (ms; negative = too early).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_by: Option<Ms>,
    /// What the window's numbers rest on beyond known values (`assumes
    /// grace = 50s`, `toleration = 40s, the pods' own tolerationSeconds`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One `abortIf` guard of the scenario, as it stood at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardRecord {
    /// Its `name`, else its place in the file (`abortIf[0]`).
    pub label: String,
    /// Subject and conditions in words (`pods app=web: < 2 ready`).
    pub description: String,
    /// `for` as written (`grace + 10s`).
    pub for_written: String,
    /// `for` under the run's profile, ms.
    pub for_ms: Ms,
    /// When it fired, ms since start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fired_at: Option<Ms>,
}

/// The guard that stopped the steps: the run then went through cleanup as
/// after any other stop, and its verdict is `fail`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbortRecord {
    /// The guard's label (see [`GuardRecord::label`]).
    pub guard: String,
    pub description: String,
    pub for_ms: Ms,
    /// When its conditions had held for `for_ms`, ms since start.
    pub at: Ms,
}
