//! The `report.md` section on external commands (command backend): each
//! command a step or cleanup ran, how it ended, and what it printed.

use std::fmt::Write as _;

use super::format::{cell, fence_for, secs, table};
use crate::record::{CommandRecord, RunResult, StepRecord};

/// Nothing when no step ran a command.
pub fn section(out: &mut String, r: &RunResult) {
    let ran: Vec<(&StepRecord, &CommandRecord)> = r
        .steps
        .iter()
        .chain(&r.cleanup)
        .flat_map(|s| s.commands.iter().map(move |c| (s, c)))
        .collect();
    if ran.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Commands\n");
    let _ = writeln!(
        out,
        "What the command backend ran, in order. A check runs again every second until it \
         passes; its last attempt is shown.\n"
    );
    let rows = ran
        .iter()
        .enumerate()
        .map(|(i, (s, c))| {
            [
                format!("{}", i + 1),
                cell(&s.label),
                c.role.clone(),
                format!("`{}`", cell(&c.line).replace('`', "'")),
                if c.ok {
                    cell(&c.status)
                } else {
                    format!("**{}**", cell(&c.status))
                },
                secs(i64::try_from(c.ms).unwrap_or(i64::MAX)),
                c.attempts.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        ["#", "step", "role", "command", "status", "took", "attempts"],
        rows,
    ));
    out.push('\n');
    for (i, (_, c)) in ran.iter().enumerate() {
        for (stream, text) in [("stdout", &c.stdout), ("stderr", &c.stderr)] {
            if text.trim().is_empty() {
                continue;
            }
            let fence = fence_for(text);
            let _ = writeln!(
                out,
                "{} of #{}:\n\n{fence}text\n{}\n{fence}\n",
                stream,
                i + 1,
                text.trim_end()
            );
        }
    }
}
