//! What the preflight found about graceful node shutdown on each node it
//! checked (facts, each with where it came from, and the verdict), as
//! `result.json` keeps it, and the facts read from what the node answered
//! ([`configz`], [`logind`]). Asking is `crate::gns`'s work (the io crate),
//! deciding the verdict the judge's (`verdict::graceful`).

pub mod configz;
pub mod logind;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::timeline::Ms;

/// One input of the verdict: read (and from where), failed, or not tried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum Fact<T> {
    Known {
        value: T,
        source: String,
    },
    Failed {
        error: String,
        source: String,
    },
    /// Not tried, e.g. the backend has no shell on the node.
    NotCollected {
        why: String,
    },
}

impl<T> Fact<T> {
    pub fn value(&self) -> Option<&T> {
        match self {
            Fact::Known { value, .. } => Some(value),
            _ => None,
        }
    }

    pub fn not_collected(why: impl Into<String>) -> Fact<T> {
        Fact::NotCollected { why: why.into() }
    }

    /// `Ok(value)` as known, an error as failed, both from `source`.
    pub fn from_result<E: std::fmt::Display>(r: Result<T, E>, source: impl Into<String>) -> Self {
        let source = source.into();
        match r {
            Ok(value) => Fact::Known { value, source },
            Err(e) => Fact::Failed {
                error: e.to_string(),
                source,
            },
        }
    }
}

/// Everything the preflight learned about one node, and the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    pub node: String,
    /// The scenario's targets that are this node.
    pub targets: Vec<String>,
    /// When the facts were read, ms since the run started.
    pub at: Ms,
    pub config: Fact<ShutdownConfig>,
    pub inhibitors: Fact<Vec<Inhibitor>>,
    /// logind's `InhibitDelayMaxUSec`, in ms (`u64::MAX`: infinity).
    pub inhibit_delay_max_ms: Fact<u64>,
    pub verdict: ShutdownVerdict,
}

/// `scheduling.SystemCriticalPriority`: pods at or above it are the
/// "critical pods" of graceful node shutdown.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// One `shutdownGracePeriodByPodPriority` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityGrace {
    pub priority: i32,
    pub shutdown_grace_period_seconds: i64,
}

/// What the kubelet's configuration says about graceful node shutdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShutdownConfig {
    /// `shutdownGracePeriod`, in ms (absent: 0).
    pub grace_period_ms: u64,
    /// `shutdownGracePeriodCriticalPods`, in ms (absent: 0).
    pub critical_pods_ms: u64,
    /// `shutdownGracePeriodByPodPriority`, as configured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_pod_priority: Vec<PriorityGrace>,
    /// `featureGates.GracefulNodeShutdown`, when the configuration sets it
    /// (on by default since Kubernetes 1.21).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_graceful_node_shutdown: Option<bool>,
    /// `featureGates.GracefulNodeShutdownBasedOnPodPriority`, when set (on
    /// by default since 1.24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_based_on_pod_priority: Option<bool>,
}

impl ShutdownConfig {
    pub fn grace_period(&self) -> Duration {
        Duration::from_millis(self.grace_period_ms)
    }

    pub fn critical_pods(&self) -> Duration {
        Duration::from_millis(self.critical_pods_ms)
    }
}

/// Whether graceful node shutdown will run, as far as the preflight can tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum ShutdownVerdict {
    /// The kubelet holds its delay lock and logind grants the full period.
    WillRun {
        /// Regular pods' share, ms.
        #[serde(rename = "podsMs")]
        pods_ms: u64,
        /// Critical pods' share (priority >= 2000000000), ms.
        #[serde(rename = "criticalMs")]
        critical_ms: u64,
        /// What could not be checked, and why the verdict stands anyway.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
    },
    /// It is off, or cannot work as configured.
    WillNotRun { reason: String },
    /// The facts needed to tell were not available.
    Unknown { reason: String },
}

impl ShutdownVerdict {
    /// One line for logs and reports.
    pub fn summary(&self) -> String {
        match self {
            ShutdownVerdict::WillRun {
                pods_ms,
                critical_ms,
                ..
            } => format!(
                "graceful shutdown will run: {} for pods, {} for critical pods",
                human(Duration::from_millis(*pods_ms)),
                human(Duration::from_millis(*critical_ms))
            ),
            ShutdownVerdict::WillNotRun { reason } => {
                format!("graceful shutdown will NOT run: {reason}")
            }
            ShutdownVerdict::Unknown { reason } => format!("graceful shutdown: unknown ({reason})"),
        }
    }

    /// `will-run`, `will-not-run`, `unknown`.
    pub fn name(&self) -> &'static str {
        match self {
            ShutdownVerdict::WillRun { .. } => "will-run",
            ShutdownVerdict::WillNotRun { .. } => "will-not-run",
            ShutdownVerdict::Unknown { .. } => "unknown",
        }
    }
}

/// One inhibitor lock as `systemd-inhibit --list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inhibitor {
    pub who: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// Colon-separated: `shutdown`, `sleep:shutdown`, `handle-lid-switch`.
    pub what: String,
    pub why: String,
    /// `delay` or `block`.
    pub mode: String,
}

impl Inhibitor {
    /// The lock the kubelet's shutdown manager takes:
    /// `Inhibit("shutdown", "kubelet", ..., "delay")`.
    pub fn is_kubelet_shutdown_delay(&self) -> bool {
        self.who == "kubelet"
            && self.mode == "delay"
            && self.what.split(':').any(|w| w == "shutdown")
    }
}

/// `30 s`, `1 min 30 s`, `1.5 s`, `0 s`: the form the reports use.
pub fn human(d: Duration) -> String {
    if d == Duration::MAX {
        return "infinity".into();
    }
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) || ms == 0 {
        let s = ms as f64 / 1000.0;
        return format!("{s} s");
    }
    let secs = ms / 1000;
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut parts = Vec::new();
    if h > 0 {
        parts.push(format!("{h} h"));
    }
    if m > 0 {
        parts.push(format!("{m} min"));
    }
    if s > 0 {
        parts.push(format!("{s} s"));
    }
    parts.join(" ")
}
