//! `nodefall plan --backend command`: each fault's commands with what is
//! known before the run substituted (nothing is run).

use super::CHECK_EVERY;
use crate::scenario::command::template::{self, Var};
use crate::scenario::command::{CommandFile, Role};
use crate::scenario::model::FaultKind;

/// Every command of `fault` on `node` for `nodefall plan`: substituted where
/// the node's name is all a value needs, `<placeholder of node>` elsewhere.
/// A revert shows the revert of `undoing` (the fault it undoes), else of
/// the first fault it can undo that the file has.
pub fn preview(
    spec: &CommandFile,
    node: Option<&str>,
    target: &str,
    fault: FaultKind,
    undoing: Option<FaultKind>,
) -> Vec<String> {
    let who = node.unwrap_or(target);
    let machine = node
        .and_then(|n| spec.machines.get(n).cloned())
        .or_else(|| {
            let t = spec.machine_template().ok()?;
            let n = node?;
            t.render(|v| (*v == Var::Node).then(|| n.to_owned()))
                .ok()
                .map(|c| c.to_string())
        });
    let value = |v: &Var| match v {
        Var::Node => node.map(str::to_owned),
        Var::Machine => machine.clone(),
        _ => None,
    };
    let (breaking, revert) = match fault.revert() {
        Some(_) => (Some(fault), false),
        None => (
            undoing
                .filter(|u| fault.undoes().any(|f| f == *u))
                .or_else(|| {
                    fault
                        .undoes()
                        .find(|f| spec.defines(*f) || spec.faults.contains_key(f))
                }),
            true,
        ),
    };
    let Some(f) = breaking else {
        return vec![format!(
            "(no command for {} in the backend file)",
            fault.name()
        )];
    };
    let roles = if revert {
        [Role::Revert, Role::RevertCheck]
    } else {
        [Role::Run, Role::Check]
    };
    let mut out = Vec::new();
    for role in roles {
        match spec.template(f, role) {
            Some(Ok(t)) => {
                let line = t.preview(who, value);
                out.push(if matches!(role, Role::Check | Role::RevertCheck) {
                    format!(
                        "until it passes (every {}s, up to {}s): {line}",
                        CHECK_EVERY.as_secs(),
                        spec.check_timeout(f).as_secs()
                    )
                } else {
                    line
                });
            }
            Some(Err(e)) => out.push(format!("(invalid template: {e})")),
            None if matches!(role, Role::Run | Role::Revert) => {
                let builtin = spec.ssh_builtin(f, role);
                out.push(match builtin {
                    Some(remote) => format!(
                        "ssh <{}> {}",
                        spec.ssh
                            .as_ref()
                            .and_then(|s| s.host.clone())
                            .unwrap_or_else(|| format!("internalIP of {who}")),
                        template::sh_quote(&remote)
                    ),
                    None => format!("(no {} command for {})", role.field(), f.name()),
                });
            }
            None => {}
        }
    }
    out
}
