//! The `report.md` section on the graceful-shutdown preflight: per node,
//! the verdict and every fact it rests on, with where each was read.

use std::fmt::Write as _;
use std::time::Duration;

use super::format::{cell, rel, table};
use crate::record::RunResult;
use crate::record::graceful::human;
use crate::record::graceful::{Fact, Inhibitor, NodeReport, ShutdownConfig, ShutdownVerdict};

fn ms(v: u64) -> String {
    if v == u64::MAX {
        "infinity".into()
    } else {
        human(Duration::from_millis(v))
    }
}

fn verdict(v: &ShutdownVerdict) -> String {
    match v {
        ShutdownVerdict::WillRun {
            pods_ms,
            critical_ms,
            ..
        } => format!(
            "**will run**: {} for pods, {} for critical pods",
            ms(*pods_ms),
            ms(*critical_ms)
        ),
        ShutdownVerdict::WillNotRun { .. } => "**will NOT run**".into(),
        ShutdownVerdict::Unknown { .. } => "**unknown**".into(),
    }
}

fn short<T>(f: &Fact<T>, known: impl Fn(&T) -> String) -> String {
    match f {
        Fact::Known { value, .. } => known(value),
        Fact::Failed { .. } => "could not be read".into(),
        Fact::NotCollected { .. } => "not checked".into(),
    }
}

fn config_text(c: &ShutdownConfig) -> String {
    let mut text = format!(
        "shutdownGracePeriod {}, critical pods {}",
        ms(c.grace_period_ms),
        ms(c.critical_pods_ms)
    );
    if !c.by_pod_priority.is_empty() {
        let groups: Vec<String> = c
            .by_pod_priority
            .iter()
            .map(|g| format!("{}: {} s", g.priority, g.shutdown_grace_period_seconds))
            .collect();
        let _ = write!(text, "; by pod priority {}", groups.join(", "));
    }
    for (gate, value) in [
        ("GracefulNodeShutdown", c.gate_graceful_node_shutdown),
        (
            "GracefulNodeShutdownBasedOnPodPriority",
            c.gate_based_on_pod_priority,
        ),
    ] {
        if let Some(on) = value {
            let _ = write!(text, "; feature gate {gate}={on}");
        }
    }
    text
}

fn lock_text(list: &[Inhibitor]) -> String {
    match list.iter().find(|i| i.is_kubelet_shutdown_delay()) {
        Some(k) => match k.pid {
            Some(pid) => format!("held (kubelet, PID {pid}, delay on {})", k.what),
            None => format!("held (kubelet, delay on {})", k.what),
        },
        None => format!("none held by the kubelet ({} locks listed)", list.len()),
    }
}

/// `- **kubelet configuration**: value (source)` or the error.
fn fact_line<T>(out: &mut String, name: &str, f: &Fact<T>, known: impl Fn(&T) -> String) {
    let line = match f {
        Fact::Known { value, source } => format!("{} (read by `{source}`)", known(value)),
        Fact::Failed { error, source } => format!("could not be read by `{source}`: {error}"),
        Fact::NotCollected { why } => format!("not checked: {why}"),
    };
    let _ = writeln!(out, "  - {name}: {line}");
}

fn node(out: &mut String, r: &RunResult, n: &NodeReport) {
    let targets = if n.targets.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = n.targets.iter().map(|t| format!("`{t}`")).collect();
        format!(" (target {})", names.join(", "))
    };
    let _ = writeln!(
        out,
        "- **{}**{targets}, read at {}: {}",
        n.node,
        rel(r, n.at),
        n.verdict.summary()
    );
    fact_line(out, "kubelet configuration", &n.config, config_text);
    fact_line(out, "inhibitor locks", &n.inhibitors, |l| lock_text(l));
    fact_line(
        out,
        "logind InhibitDelayMaxSec",
        &n.inhibit_delay_max_ms,
        |v| ms(*v),
    );
    if let ShutdownVerdict::WillRun { notes, .. } = &n.verdict {
        for note in notes {
            let _ = writeln!(out, "  - note: {note}");
        }
    }
}

/// The section, or nothing when no node was checked.
pub(super) fn section(out: &mut String, r: &RunResult) {
    if r.graceful_shutdown.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Graceful node shutdown (preflight)\n");
    let _ = writeln!(
        out,
        "Read before the first fault. The kubelet's graceful node shutdown runs only when the \
         node is shut down through systemd-logind (`systemctl poweroff`, the ACPI power button); \
         a hard power-off or `poweroff -f` skips it whatever this says.\n"
    );
    let rows = r
        .graceful_shutdown
        .iter()
        .map(|n| {
            [
                cell(&n.node),
                verdict(&n.verdict),
                cell(&short(&n.config, config_text)),
                cell(&short(&n.inhibitors, |l| lock_text(l))),
                cell(&short(&n.inhibit_delay_max_ms, |v| ms(*v))),
            ]
        })
        .collect();
    out.push_str(&table(
        [
            "node",
            "verdict",
            "kubelet configuration",
            "kubelet inhibitor lock",
            "logind InhibitDelayMaxSec",
        ],
        rows,
    ));
    out.push('\n');
    for n in &r.graceful_shutdown {
        let mut text = String::new();
        node(&mut text, r, n);
        out.push_str(&text);
    }
    out.push('\n');
}
