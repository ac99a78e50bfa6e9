//! A checked condition, split into families by what it is about and by the
//! judge path that decides it, so that each path matches its own family
//! exhaustively: a new condition is a compile error in every path (and in
//! `describe`) until it is handled there, never a silent "does not hold".
//!
//! States on the timeline, decided by `expect::holds` at each instant:
//! [`NodeCond`] (subject: a node), [`PodsCond`] (pods), [`VolumeCond`] (a
//! claim), [`EventCond`] (a node or pods), [`ServiceCond`] (a Service).
//! Decided once: [`PreflightCond`] (from the facts read at preflight),
//! [`EndOfRunCond`] (from the machines' record at the end of the run),
//! [`ProbeCond`] (from a stopped probe's requests). The validator pairs each
//! family with its subject.

use serde::Serialize;

use crate::scenario::expr::Expr;
use crate::scenario::model::{GracefulShutdown, NodeReady, PodPhase, TaintEffect, Terminating};

/// One condition; an expectation holds when all of its conditions hold.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// A state of a node (subject: a target's Node).
    Node(NodeCond),
    /// A state of the selected pods (subject: pods).
    Pods(PodsCond),
    /// A state of a claim's volume (subject: a PVC).
    Volume(VolumeCond),
    /// Something having happened to a node or the selected pods.
    Event(EventCond),
    /// A state of a Service's endpoints (subject: a Service).
    Service(ServiceCond),
    /// Decided once, from the facts read at preflight (subject: a node).
    Preflight(PreflightCond),
    /// Decided once, at the end of the run.
    EndOfRun(EndOfRunCond),
    /// Decided once, from a stopped probe's requests (subject: a probe).
    Probe(ProbeCond),
}

/// A node's state on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeCond {
    /// Its Ready condition has this status (and the node exists).
    Ready(NodeReady),
    /// Taint present (`key`, optionally with this effect).
    Taint {
        key: String,
        effect: Option<TaintEffect>,
    },
    /// No such taint.
    NoTaint {
        key: String,
        effect: Option<TaintEffect>,
    },
    Unschedulable(bool),
    /// The node carries a remediation act's taint (NoExecute, not the node
    /// lifecycle controller's) written by this field manager.
    RemediatedBy(String),
    /// The Node object exists (false: it was deleted).
    Exists(bool),
    /// On a set of nodes: exactly this many of them meet the expectation's
    /// other node conditions (decided over the set, not on each node).
    Count(u32),
}

/// The selected pods' state on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum PodsCond {
    /// Exactly N selected pods are Ready (None: all of them, and at least one).
    Ready(Option<u32>),
    /// At least N selected pods are Ready (and not terminating).
    ReadyAtLeast(u32),
    /// Fewer than N selected pods are Ready (and not terminating).
    ReadyBelow(u32),
    Terminating(Terminating),
    /// Exactly N selected pods exist that are not terminating.
    Count(u32),
    /// Every selected pod is in this phase (and at least one is).
    Phase(PodPhase),
    /// Every selected pod's status reason is this.
    Reason(String),
}

/// A claim's volume on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeCond {
    /// The claim's volume is attached (`status.attached`) to the subject's
    /// node, or anywhere without one (false: not attached there).
    Attached(bool),
}

/// An event with this reason (and message part) about the subject (a node,
/// or a pod the selector matches) has been seen since the expectation's
/// series began.
#[derive(Debug, Clone, PartialEq)]
pub struct EventCond {
    pub reason: String,
    pub message: Option<String>,
}

/// A Service's endpoints on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceCond {
    /// Exactly N of the Service's endpoints are ready.
    ReadyEndpoints(u32),
}

/// Decided once, from facts read before the first fault (the expectation
/// has the [`crate::scenario::expr::WindowSpec::Preflight`] window).
#[derive(Debug, Clone, PartialEq)]
pub enum PreflightCond {
    /// The node's graceful-shutdown preflight verdict is this.
    GracefulShutdown(GracefulShutdown),
}

/// Decided once at the end of the run (the expectation has the
/// [`crate::scenario::expr::WindowSpec::EndOfRun`] window).
#[derive(Debug, Clone, PartialEq)]
pub enum EndOfRunCond {
    /// Every selected pod replaced during the run ran at most this long
    /// (ms) on its failed node after its replacement started (from the
    /// backend's looks at the machine). Subject: pods.
    DuplicateWindowAtMost(i64),
    /// The failed machine was off before any selected pod's replacement
    /// ran. Subject: pods.
    FencedBeforeReplacement,
    /// The node was remediated (by this field manager), each act only after
    /// the node had been NotReady this long (ms) without a break. Subject:
    /// a node.
    Remediation {
        by: Option<String>,
        not_ready_for: Option<i64>,
    },
}

/// Decided once, over a stopped probe's requests in the window.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeCond {
    /// At most N of the probe's requests failed in the window.
    Errors(u64),
    /// The probe's longest error window in the window compares so with a
    /// duration (evaluated under the profile).
    ErrorWindow { cmp: Cmp, limit: Expr },
}

/// A comparison in `errorWindow: "<= grace + 10s"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Cmp {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
}

impl Cmp {
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }

    pub fn holds(self, value: i64, limit: i64) -> bool {
        match self {
            Cmp::Lt => value < limit,
            Cmp::Le => value <= limit,
            Cmp::Gt => value > limit,
            Cmp::Ge => value >= limit,
        }
    }
}
