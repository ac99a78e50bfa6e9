//! Human wording of steps, subjects and conditions, shared by `plan` and reports.
//! Each condition family is worded by its own exhaustive match, so a new
//! condition cannot go unworded.

#![deny(clippy::wildcard_enum_match_arm)]

use std::fmt;

use super::checked::{
    Action, Condition, EndOfRunCond, EventCond, NodeCond, PodsCond, PreflightCond, ProbeCond,
    ServiceCond, Step, StepKind, Subject, VolumeCond,
};
use super::model::{GracefulShutdown, TaintEffect, Terminating};
use crate::duration::{format_duration, format_millis};

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Node(t) => write!(f, "node {t}"),
            Subject::Pods {
                selector,
                on,
                not_on,
            } => {
                write!(f, "pods {selector}")?;
                if let Some(t) = on {
                    write!(f, " on {t}")?;
                }
                if let Some(t) = not_on {
                    write!(f, " not on {t}")?;
                }
                Ok(())
            }
            Subject::Pvc { claim, on: None } => write!(f, "pvc {claim}"),
            Subject::Pvc { claim, on: Some(t) } => write!(f, "pvc {claim} on {t}"),
            Subject::Service { name, on, not_on } => {
                write!(f, "service {name}")?;
                if let Some(t) = on {
                    write!(f, " on {t}")?;
                }
                if let Some(t) = not_on {
                    write!(f, " not on {t}")?;
                }
                Ok(())
            }
            Subject::Probe(name) => write!(f, "probe {name}"),
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Node(c) => c.fmt(f),
            Condition::Pods(c) => c.fmt(f),
            Condition::Volume(c) => c.fmt(f),
            Condition::Event(c) => c.fmt(f),
            Condition::Service(c) => c.fmt(f),
            Condition::Preflight(c) => c.fmt(f),
            Condition::EndOfRun(c) => c.fmt(f),
            Condition::Probe(c) => c.fmt(f),
        }
    }
}

impl fmt::Display for NodeCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let effect = |e: &Option<TaintEffect>| e.map(|e| format!(":{e}")).unwrap_or_default();
        match self {
            NodeCond::Ready(s) => write!(f, "Ready={s}"),
            NodeCond::RemediatedBy(m) => write!(f, "remediated by {m}"),
            NodeCond::Taint { key, effect: e } => write!(f, "tainted {key}{}", effect(e)),
            NodeCond::NoTaint { key, effect: e } => write!(f, "not tainted {key}{}", effect(e)),
            NodeCond::Unschedulable(true) => f.write_str("unschedulable"),
            NodeCond::Unschedulable(false) => f.write_str("schedulable"),
            NodeCond::Exists(true) => f.write_str("exists"),
            NodeCond::Exists(false) => f.write_str("deleted"),
            NodeCond::Count(n) => write!(f, "on exactly {n} of its nodes"),
        }
    }
}

impl fmt::Display for PodsCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodsCond::Ready(Some(n)) => write!(f, "{n} ready"),
            PodsCond::Ready(None) => f.write_str("all ready"),
            PodsCond::ReadyAtLeast(n) => write!(f, ">= {n} ready"),
            PodsCond::ReadyBelow(n) => write!(f, "< {n} ready"),
            PodsCond::Terminating(Terminating::All(true)) => f.write_str("all Terminating"),
            PodsCond::Terminating(Terminating::All(false)) => f.write_str("none Terminating"),
            PodsCond::Terminating(Terminating::Count(n)) => write!(f, "{n} Terminating"),
            PodsCond::Count(n) => write!(f, "{n} exist"),
            PodsCond::Phase(p) => write!(f, "phase {p}"),
            PodsCond::Reason(r) => write!(f, "reason {r}"),
        }
    }
}

impl fmt::Display for VolumeCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VolumeCond::Attached(true) => f.write_str("volume attached"),
            VolumeCond::Attached(false) => f.write_str("volume not attached"),
        }
    }
}

impl fmt::Display for EventCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let EventCond { reason, message } = self;
        match message {
            None => write!(f, "event {reason}"),
            Some(m) => write!(f, "event {reason} with message containing \"{m}\""),
        }
    }
}

impl fmt::Display for ServiceCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceCond::ReadyEndpoints(n) => write!(f, "{n} ready endpoints"),
        }
    }
}

impl fmt::Display for PreflightCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreflightCond::GracefulShutdown(GracefulShutdown::WillRun) => {
                f.write_str("graceful shutdown will run")
            }
            PreflightCond::GracefulShutdown(GracefulShutdown::WillNotRun) => {
                f.write_str("graceful shutdown will not run")
            }
        }
    }
}

impl fmt::Display for EndOfRunCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndOfRunCond::DuplicateWindowAtMost(ms) => {
                write!(f, "duplicate window at most {}", format_millis(*ms))
            }
            EndOfRunCond::Remediation { by, not_ready_for } => {
                f.write_str("remediated")?;
                if let Some(by) = by {
                    write!(f, " by {by}")?;
                }
                if let Some(d) = not_ready_for {
                    write!(f, ", each act after {} NotReady", format_millis(*d))?;
                }
                Ok(())
            }
            EndOfRunCond::FencedBeforeReplacement => {
                f.write_str("the failed machine off before the replacements ran")
            }
        }
    }
}

impl fmt::Display for ProbeCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeCond::Errors(0) => f.write_str("no errors"),
            ProbeCond::Errors(n) => write!(f, "at most {n} errors"),
            ProbeCond::ErrorWindow { cmp, limit } => {
                write!(f, "longest error window {} {limit}", cmp.symbol())
            }
        }
    }
}

fn conditions(c: &[Condition]) -> String {
    c.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Apply(files) => {
                let names: Vec<&str> = files.iter().map(|m| m.file.as_str()).collect();
                write!(f, "apply {}", names.join(", "))
            }
            Action::Taint {
                node,
                key,
                value,
                effect,
            } => {
                let v = value.as_ref().map(|v| format!("={v}")).unwrap_or_default();
                write!(f, "taint {node} {key}{v}:{effect}")
            }
            Action::Untaint { node, key, effect } => {
                write!(
                    f,
                    "untaint {node} {key}{}",
                    effect.map(|e| format!(":{e}")).unwrap_or_default()
                )
            }
            Action::Cordon { node } => write!(f, "cordon {node}"),
            Action::Uncordon { node } => write!(f, "uncordon {node}"),
            Action::Drain(d) => {
                write!(f, "drain {}", d.nodes.join(" and "))?;
                if let Some(s) = &d.pod_selector {
                    write!(f, " (pods {s})")?;
                }
                write!(f, ", timeout {}", format_duration(d.timeout))
            }
            Action::DeleteNode { node } => write!(f, "delete node {node}"),
            Action::ForceDeletePods { selector, node } => {
                f.write_str("force-delete pods")?;
                if let Some(s) = selector {
                    write!(f, " {s}")?;
                }
                if let Some(n) = node {
                    write!(f, " on {n}")?;
                }
                Ok(())
            }
            Action::Scale {
                kind,
                name,
                replicas,
            } => write!(f, "scale {}/{name} to {replicas}", kind.name()),
            Action::WaitFor { duration } => write!(f, "wait {duration}"),
            Action::WaitUntil {
                subject,
                conditions: c,
                timeout,
            } => {
                write!(
                    f,
                    "wait until {subject} {} (timeout {timeout})",
                    conditions(c)
                )
            }
            Action::DeleteNamespace { name } => write!(f, "delete namespace {name}"),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            StepKind::Fault { fault, node } => write!(f, "fault {fault} on {node}"),
            StepKind::Action(a) => write!(f, "{a}"),
            StepKind::Expect(e) => write!(f, "expect {}: {}", e.subject, conditions(&e.conditions)),
        }
    }
}
