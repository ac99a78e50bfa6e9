//! `nodefall plan`: the resolved plan as text.

use std::fmt::Write as _;

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::time::{self, CountsFrom};
use super::{Plan, Span};
use crate::duration::{format_duration, format_millis};
use crate::profile::Var;
use crate::scenario::checked::{Anchor, StepKind};
use crate::scenario::expr::Window;

#[derive(Tabled)]
struct Row {
    #[tabled(rename = "#")]
    n: String,
    #[tabled(rename = "step")]
    what: String,
    #[tabled(rename = "window (as written)")]
    written: String,
    #[tabled(rename = "window")]
    window: String,
    #[tabled(rename = "counts from")]
    from: String,
    #[tabled(rename = "expected at (T0 = first fault or action)")]
    at: String,
}

fn span(s: Option<Span>) -> String {
    match s {
        None => String::new(),
        Some(Span { earliest, latest }) if earliest == latest => {
            format!("T0+{}", format_millis(earliest))
        }
        Some(Span { earliest, latest }) => format!(
            "T0+{} .. T0+{}",
            format_millis(earliest),
            format_millis(latest)
        ),
    }
}

pub fn render_text(plan: &Plan) -> String {
    let c = &plan.scenario;
    let p = &plan.profile;
    let mut out = String::new();
    let _ = writeln!(out, "Scenario   {} ({})", c.name, c.source.file);
    if let Some(d) = &c.description {
        for line in wrap(d, 90) {
            let _ = writeln!(out, "           {line}");
        }
    }
    let _ = writeln!(out, "Backend    {}", plan.backend);
    let _ = writeln!(out, "Namespace  {}", c.namespace);
    let vars: Vec<String> = Var::ALL
        .iter()
        .map(|v| {
            format!(
                "{}={}",
                v.alias().unwrap_or(v.name()),
                format_duration(p.get(*v))
            )
        })
        .collect();
    let off = if p.force_detach_on_timeout {
        ""
    } else {
        " forceDetachOnTimeout=off"
    };
    let _ = writeln!(out, "Profile    {}: {}{off}", p.name, vars.join(" "));
    if !p.origins.is_empty() {
        for [name, value, word, detail] in p.rows() {
            let _ = writeln!(out, "           {name:<26} {value:>6}  {word:<10} {detail}");
        }
    }
    let _ = writeln!(out, "\nSetup");
    let applies: Vec<_> = c
        .setup
        .apply
        .iter()
        .filter(|m| m.applies_to(plan.backend))
        .collect();
    if applies.is_empty() && c.setup.wait_ready.is_empty() {
        let _ = writeln!(out, "  (nothing)");
    }
    for m in applies {
        let _ = writeln!(out, "  apply {}", m.file);
    }
    for w in &c.setup.wait_ready {
        let replicas = w
            .replicas
            .map(|r| format!(", {r} ready"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  wait for {}/{}{replicas} (timeout {})",
            w.kind.name(),
            w.name,
            format_duration(w.timeout)
        );
    }
    let _ = writeln!(out, "\nTargets (resolved when the scenario runs)");
    for t in &c.targets {
        let _ = writeln!(out, "  {:<10} {}", t.name, t.describe());
    }
    if !c.probes.is_empty() {
        let _ = writeln!(
            out,
            "\nProbes (from the end of setup to the end of the steps; a new connection per request)"
        );
    }
    for p in &c.probes {
        let statuses: Vec<String> = p
            .status
            .iter()
            .map(|&(a, b)| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  {:<10} GET {} every {}, timeout {}, success {}; stops after {} requests or {}",
            p.name,
            p.urls.join(", "),
            format_duration(p.interval),
            format_duration(p.timeout),
            statuses.join(", "),
            p.max_requests,
            format_duration(p.max_duration)
        );
    }
    let rows: Vec<Row> = plan
        .steps
        .iter()
        .map(|ps| {
            let step = &c.steps.iter().find(|s| s.index == ps.index);
            let (written, from) = match step.map(|s| (s, &s.kind)) {
                Some((s, StepKind::Expect(e))) => (
                    e.window.source(),
                    match (
                        ps.window.map(|w| time::counts_from(w, e.explicit_anchor)),
                        e.anchor,
                    ) {
                        (Some(CountsFrom::StepStart), _) => {
                            time::step_start_text(&c.steps, s.index)
                        }
                        _ if ps.window == Some(Window::Preflight) => "preflight".to_string(),
                        _ if ps.window == Some(Window::EndOfRun) => "the whole run".to_string(),
                        (_, Anchor::Start) => "setup".to_string(),
                        (_, Anchor::Step(i)) => anchor_text(c, i),
                    },
                ),
                _ => (String::new(), String::new()),
            };
            let at = match (ps.expected, ps.window_span, ps.starts, ps.window) {
                (_, _, _, Some(Window::Preflight)) => "before T0 (read at preflight)".to_string(),
                (_, _, _, Some(Window::EndOfRun)) => {
                    "decided at the end of the run (after cleanup)".to_string()
                }
                (_, None, _, Some(Window::Requests { .. })) => {
                    "decided when the probe stops (end of the steps)".to_string()
                }
                (Some(e), _, _, _) => span(Some(e)),
                (None, Some((open, close)), _, Some(_)) => {
                    format!("opens {}, closes {}", span(Some(open)), span(Some(close)))
                }
                (None, None, Some(s), None) => format!("starts {}", span(Some(s))),
                (None, None, Some(s), Some(w)) => {
                    format!("from {} for {}", span(Some(s)), format_millis(w.horizon()))
                }
                (None, _, _, _) => String::new(),
            };
            Row {
                n: format!("{}", ps.index + 1),
                what: step.map(ToString::to_string).unwrap_or_default(),
                written,
                window: {
                    let mut w = ps.window.map(|w| w.to_string()).unwrap_or_default();
                    if let Some(StepKind::Expect(e)) = step.map(|s| &s.kind) {
                        for n in super::window_notes(p, e) {
                            w.push_str(&format!(" ({n})"));
                        }
                    }
                    w
                },
                from,
                at,
            }
        })
        .collect();
    let _ = writeln!(out, "\nSteps");
    let _ = writeln!(out, "{}", Table::new(rows).with(Style::sharp()));
    guards(&mut out, plan);
    let _ = writeln!(out, "\nCleanup ({})", cleanup_word(plan));
    if plan.restores.is_empty() {
        let _ = writeln!(out, "  every fault is reverted by the steps themselves");
    }
    for r in &plan.restores {
        let _ = writeln!(
            out,
            "  {} on {} (left broken by step #{})",
            r.fault,
            r.node,
            r.broken_by + 1
        );
    }
    let _ = writeln!(
        out,
        "  faults are reverted even on error, timeout, SIGINT (Ctrl-C), SIGTERM or SIGHUP; a partial report is written"
    );
    out
}

/// The `abortIf` guards: what each watches and how long it must hold.
fn guards(out: &mut String, plan: &Plan) {
    let c = &plan.scenario;
    if c.guards.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nAbort guards (armed from the first step to the last; one that fires stops the steps, then cleanup)"
    );
    for (g, ms) in c.guards.iter().zip(&plan.guard_holds) {
        let conditions: Vec<String> = g.conditions.iter().map(ToString::to_string).collect();
        let hold = if g.hold.text() == format_millis(*ms) {
            format_millis(*ms)
        } else {
            format!("{} = {}", g.hold, format_millis(*ms))
        };
        let _ = writeln!(
            out,
            "  {}: {}: {} for {hold}",
            g.label(),
            g.subject,
            conditions.join(", ")
        );
    }
}

fn cleanup_word(plan: &Plan) -> &'static str {
    use crate::scenario::model::Cleanup;
    match plan.cleanup() {
        Cleanup::Always => {
            "always: revert faults, put back the taints, cordons and replicas the run changed, \
             delete what it applied (the namespace only if the run created it)"
        }
        Cleanup::OnSuccess => {
            "on-success: revert faults; keep the workload when an expectation fails"
        }
        Cleanup::Never => "never: revert faults only",
    }
}

/// `#4`, with what the moment is for an expectation: `#4 (first held)`.
fn anchor_text(c: &crate::scenario::checked::Checked, i: usize) -> String {
    match c.steps.iter().find(|s| s.index == i).map(|s| &s.kind) {
        Some(StepKind::Expect(_)) => format!("#{} (when it first held)", i + 1),
        Some(StepKind::Action(
            crate::scenario::checked::Action::WaitFor { .. }
            | crate::scenario::checked::Action::WaitUntil { .. },
        )) => {
            format!("#{} (when it ended)", i + 1)
        }
        _ => format!("#{} (when it began)", i + 1),
    }
}

/// Greedy word wrap.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let cur = lines.last_mut().expect("lines is never empty");
        if !cur.is_empty() && cur.len() + 1 + word.len() > width {
            lines.push(word.to_string());
        } else {
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
    }
    lines
}
