//! The graceful-shutdown preflight's verdict: will the kubelet's graceful
//! node shutdown run when this node is shut down through logind, and with
//! how much time for pods? Pure: it only combines facts read elsewhere (the
//! io crate's `gns`: the kubelet's configuration, logind's locks and delay),
//! following the kubelet's own rules (`pkg/kubelet/nodeshutdown`:
//! `NewManager`, `migrateConfig`, `start`); and which targets the preflight
//! looks at. The facts and the verdict are `record::graceful`'s schema.

use std::time::Duration;

use crate::record::graceful::{
    Fact, Inhibitor, NodeReport, PriorityGrace, SYSTEM_CRITICAL_PRIORITY, ShutdownConfig,
    ShutdownVerdict, human,
};
use crate::scenario::checked::{Checked, Condition, Expectation, PreflightCond, StepKind};
use crate::scenario::model::{FaultKind, GracefulShutdown};
use crate::timeline::Ms;

/// The shutdown groups the kubelet would run, as `NewManager` builds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub groups: Vec<PriorityGrace>,
    pub notes: Vec<String>,
}

impl Plan {
    fn sum(&self, critical: bool) -> u64 {
        let secs: i64 = self
            .groups
            .iter()
            .filter(|g| (g.priority >= SYSTEM_CRITICAL_PRIORITY) == critical)
            .map(|g| g.shutdown_grace_period_seconds.max(0))
            .sum();
        u64::try_from(secs).unwrap_or(0).saturating_mul(1000)
    }
    pub fn pods_ms(&self) -> u64 {
        self.sum(false)
    }
    pub fn critical_ms(&self) -> u64 {
        self.sum(true)
    }
    /// `periodRequested`: the delay the kubelet asks logind for.
    pub fn total_ms(&self) -> u64 {
        self.pods_ms() + self.critical_ms()
    }
}

/// The groups the configuration yields, or why it yields none (then the
/// kubelet's shutdown manager is a stub and shutdown is immediate).
pub fn plan(c: &ShutdownConfig) -> Result<Plan, String> {
    if c.gate_graceful_node_shutdown == Some(false) {
        return Err("the feature gate GracefulNodeShutdown is off".into());
    }
    let mut notes = Vec::new();
    let by_priority = !c.by_pod_priority.is_empty();
    if by_priority && c.gate_based_on_pod_priority == Some(false) {
        notes.push(
            "shutdownGracePeriodByPodPriority is set, but the feature gate \
             GracefulNodeShutdownBasedOnPodPriority is off: the kubelet uses shutdownGracePeriod instead"
                .to_owned(),
        );
    }
    let groups = if by_priority && c.gate_based_on_pod_priority != Some(false) {
        if c.by_pod_priority
            .iter()
            .all(|g| g.shutdown_grace_period_seconds <= 0)
        {
            return Err(
                "every shutdownGracePeriodByPodPriority group has 0 s: pods get no time".into(),
            );
        }
        c.by_pod_priority.clone()
    } else {
        migrate(c)?
    };
    Ok(Plan { groups, notes })
}

/// `migrateConfig`: the legacy pair as two groups, truncated to whole seconds.
fn migrate(c: &ShutdownConfig) -> Result<Vec<PriorityGrace>, String> {
    let (total, critical) = (c.grace_period(), c.critical_pods());
    if total.is_zero() {
        return Err("shutdownGracePeriod is 0s (graceful node shutdown disabled)".into());
    }
    let Some(pods) = total.checked_sub(critical) else {
        return Err(format!(
            "shutdownGracePeriodCriticalPods {} exceeds shutdownGracePeriod {}: \
             the kubelet builds no shutdown groups from that (graceful node shutdown disabled)",
            human(critical),
            human(total)
        ));
    };
    let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    Ok(vec![
        PriorityGrace {
            priority: 0,
            shutdown_grace_period_seconds: secs(pods),
        },
        PriorityGrace {
            priority: SYSTEM_CRITICAL_PRIORITY,
            shutdown_grace_period_seconds: secs(total - pods),
        },
    ])
}

fn ms(d: u64) -> String {
    human(Duration::from_millis(d))
}

/// Why a fact is missing, for a verdict's reason.
fn missing<T>(f: &Fact<T>) -> String {
    match f {
        Fact::Known { .. } => String::new(),
        Fact::Failed { error, .. } => error.clone(),
        Fact::NotCollected { why } => format!("not checked: {why}"),
    }
}

const NO_LOCK: &str = "the kubelet holds no logind inhibitor lock, so logind does not wait for it";

/// Combines the facts into a verdict. `inhibit_delay_ms` is logind's
/// `InhibitDelayMaxUSec` in ms (`u64::MAX` for infinity).
pub fn evaluate(
    config: &Fact<ShutdownConfig>,
    inhibitors: &Fact<Vec<Inhibitor>>,
    inhibit_delay_ms: &Fact<u64>,
) -> ShutdownVerdict {
    // No logind on the node (its command failed saying so): no lock.
    let no_logind = match inhibitors {
        Fact::Failed { error, .. } => unavailable(error),
        _ => None,
    };
    let held = match inhibitors {
        Fact::Known { value, .. } => Some(value.iter().any(Inhibitor::is_kubelet_shutdown_delay)),
        _ if no_logind.is_some() => Some(false),
        _ => None,
    };
    let no_lock = match no_logind {
        Some(why) => format!("{NO_LOCK}: {why} on the node"),
        None => NO_LOCK.to_owned(),
    };
    let plan = match config {
        Fact::Known { value, .. } => match plan(value) {
            Ok(p) => p,
            Err(reason) => return ShutdownVerdict::WillNotRun { reason },
        },
        _ => {
            let why = missing(config);
            return match held {
                Some(false) => ShutdownVerdict::WillNotRun {
                    reason: format!("{no_lock} (its configuration could not be read: {why})"),
                },
                Some(true) => ShutdownVerdict::Unknown {
                    reason: format!(
                        "the kubelet holds its shutdown lock, so graceful shutdown is on, \
                         but its grace periods are unknown: {why}"
                    ),
                },
                None => ShutdownVerdict::Unknown {
                    reason: format!(
                        "kubelet configuration: {why}; inhibitor locks: {}",
                        missing(inhibitors)
                    ),
                },
            };
        }
    };
    let (pods, critical, total) = (plan.pods_ms(), plan.critical_ms(), plan.total_ms());
    let asked = format!(
        "configured for {} ({} for pods, {} for critical pods)",
        ms(total),
        ms(pods),
        ms(critical)
    );
    match held {
        None => {
            return ShutdownVerdict::Unknown {
                reason: format!(
                    "{asked}, but whether the kubelet holds its logind inhibitor lock is unknown: {}",
                    missing(inhibitors)
                ),
            };
        }
        Some(false) => {
            return ShutdownVerdict::WillNotRun {
                reason: format!(
                    "{no_lock} ({asked}; its shutdown manager did not start: look for \
                     \"Failed to start node shutdown manager\" in the kubelet's log)"
                ),
            };
        }
        Some(true) => {}
    }
    let mut notes = plan.notes;
    match inhibit_delay_ms {
        Fact::Known { value: d, .. } if *d < total => {
            // logind powers off after `d`; groups run lowest priority first
            let pods_get = pods.min(*d);
            let critical_get = critical.min(d.saturating_sub(pods));
            ShutdownVerdict::WillNotRun {
                reason: format!(
                    "logind InhibitDelayMaxSec {} is shorter than the requested {}: logind shuts down \
                     after {}, so pods get at most {} of {} and critical pods {} of {}",
                    ms(*d),
                    ms(total),
                    ms(*d),
                    ms(pods_get),
                    ms(pods),
                    ms(critical_get),
                    ms(critical)
                ),
            }
        }
        Fact::Known { .. } => ShutdownVerdict::WillRun {
            pods_ms: pods,
            critical_ms: critical,
            notes,
        },
        other => {
            notes.push(format!(
                "logind InhibitDelayMaxSec was not read ({}); the kubelet takes its lock only once \
                 logind allows the full {}, so it did when the kubelet started",
                missing(other),
                ms(total)
            ));
            ShutdownVerdict::WillRun {
                pods_ms: pods,
                critical_ms: critical,
                notes,
            }
        }
    }
}

/// Why logind cannot be on the node at all, when the error of a logind
/// command says so (masked, not installed, no system bus): then no process
/// can hold an inhibitor lock and a shutdown never waits for one. None for
/// any other failure (SSH, a timeout, ...): that proves nothing.
pub fn unavailable(error: &str) -> Option<&'static str> {
    if error.contains("systemd-logind.service is masked") {
        Some("systemd-logind is masked")
    } else if error.contains("org.freedesktop.login1")
        && (error.contains("not found") || error.contains("was not provided"))
    {
        Some("logind is not installed")
    } else if error.contains("Failed to connect to bus") {
        Some("there is no D-Bus system bus")
    } else {
        None
    }
}

/// Records the facts of a node and computes the verdict from them.
pub fn node_report(
    node: impl Into<String>,
    targets: Vec<String>,
    at: Ms,
    config: Fact<ShutdownConfig>,
    inhibitors: Fact<Vec<Inhibitor>>,
    inhibit_delay_max_ms: Fact<u64>,
) -> NodeReport {
    let verdict = evaluate(&config, &inhibitors, &inhibit_delay_max_ms);
    NodeReport {
        node: node.into(),
        targets,
        at,
        config,
        inhibitors,
        inhibit_delay_max_ms,
        verdict,
    }
}

/// The facts of a node whose kubelet the backend plays itself (sim), as it
/// plays them: the configuration it was given and, when graceful shutdown is
/// on, the kubelet's delay lock with logind holding a shutdown as long as the
/// grace period. `source` says where from.
pub fn played_report(
    node: impl Into<String>,
    target: String,
    at: Ms,
    grace: Duration,
    critical: Duration,
    source: &str,
) -> NodeReport {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let config = ShutdownConfig {
        grace_period_ms: ms(grace),
        critical_pods_ms: ms(critical),
        by_pod_priority: Vec::new(),
        gate_graceful_node_shutdown: None,
        gate_based_on_pod_priority: None,
    };
    let locks = if grace.is_zero() {
        Vec::new()
    } else {
        vec![Inhibitor {
            who: "kubelet".into(),
            uid: None,
            user: None,
            pid: None,
            comm: None,
            what: "shutdown".into(),
            why: "Kubelet needs time to handle node shutdown".into(),
            mode: "delay".into(),
        }]
    };
    node_report(
        node,
        vec![target],
        at,
        Fact::Known {
            value: config,
            source: source.to_owned(),
        },
        Fact::Known {
            value: locks,
            source: source.to_owned(),
        },
        Fact::Known {
            value: ms(grace),
            source: source.to_owned(),
        },
    )
}

/// The `gracefulShutdown:` requirement of an expectation, if it is one.
pub fn requirement(exp: &Expectation) -> Option<GracefulShutdown> {
    exp.conditions.iter().find_map(|c| {
        let Condition::Preflight(preflight) = c else {
            return None;
        };
        match preflight {
            PreflightCond::GracefulShutdown(r) => Some(*r),
        }
    })
}

/// The targets the preflight must look at, in scenario order: every target
/// a `shutdown` fault hits, and every target a `gracefulShutdown`
/// expectation names (validation makes the second a subset of the first).
pub fn targets_to_check(checked: &Checked) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for step in &checked.steps {
        let target = match &step.kind {
            StepKind::Fault {
                fault: FaultKind::Shutdown,
                node,
            } => Some(node),
            StepKind::Expect(e) if requirement(e).is_some() => match &e.subject {
                crate::scenario::checked::Subject::Node(t) => Some(t),
                crate::scenario::checked::Subject::Pods { .. }
                | crate::scenario::checked::Subject::Pvc { .. }
                | crate::scenario::checked::Subject::Service { .. }
                | crate::scenario::checked::Subject::Probe(_) => None,
            },
            _ => None,
        };
        if let Some(t) = target
            && !out.contains(t)
        {
            out.push(t.clone());
        }
    }
    out
}

#[cfg(test)]
#[path = "graceful_tests.rs"]
mod tests;
