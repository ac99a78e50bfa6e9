//! What runs for a fault: a command line with its time limit, the check
//! that confirms it, and the journal memo that carries a revert to another
//! process; how a run is recorded for the report and told in an error.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::exec::{Captured, Cmd};
use crate::record::CommandRecord;
use crate::scenario::command::Role;
use crate::scenario::model::FaultKind;

/// One command, ready to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    pub argv: Vec<String>,
    pub timeout_ms: u64,
}

impl Invocation {
    pub(super) fn new(cmd: Cmd, timeout: Duration) -> Invocation {
        let mut argv = vec![cmd.program];
        argv.extend(cmd.args);
        Invocation {
            argv,
            timeout_ms: millis(timeout),
        }
    }

    pub fn cmd(&self) -> Cmd {
        Cmd {
            program: self.argv.first().cloned().unwrap_or_default(),
            args: self.argv.iter().skip(1).cloned().collect(),
        }
    }
}

/// A command and the check that confirms what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub run: Invocation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Invocation>,
    pub check_timeout_ms: u64,
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A fault's journal memo: what reverts it, as it will run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Memo {
    pub revert: FaultKind,
    pub action: Action,
}

pub(super) fn record(role: Role, inv: &Invocation, c: &Captured, attempts: u32) -> CommandRecord {
    c.record(role.field(), &inv.cmd(), attempts)
}

/// A failed command's output for its error message: the end of each stream.
pub fn output(c: &Captured) -> String {
    let end = |s: &str| {
        let s = s.trim();
        let mut cut = s.len().saturating_sub(600);
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        if cut > 0 {
            format!("...{}", &s[cut..])
        } else {
            s.to_owned()
        }
    };
    let mut out = String::new();
    if !c.stderr.trim().is_empty() {
        out.push_str(&format!("; stderr: {}", end(&c.stderr)));
    }
    if !c.stdout.trim().is_empty() {
        out.push_str(&format!("; stdout: {}", end(&c.stdout)));
    }
    out
}
