//! A Node's fields as templates name them, and whether a command line
//! names the node's own address.

use k8s_openapi::api::core::v1::Node;

use crate::exec::Cmd;
use crate::scenario::command::template::Var;

/// A Node's fields, as templates name them.
pub(super) fn node_value(node: &Node, var: &Var) -> Option<String> {
    let status = node.status.as_ref();
    let address = |kind: &str| {
        status?
            .addresses
            .as_ref()?
            .iter()
            .find(|a| a.type_ == kind)
            .map(|a| a.address.clone())
    };
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    non_empty(match var {
        Var::Node => node.metadata.name.clone(),
        Var::Machine => None,
        Var::InternalIp => address("InternalIP"),
        Var::ExternalIp => address("ExternalIP"),
        Var::Hostname => address("Hostname"),
        Var::SystemUuid => status
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.system_uuid.clone()),
        Var::ProviderId => node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        Var::Label(k) => node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(k).cloned()),
        Var::Annotation(k) => node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k).cloned()),
    })
}

/// The node's own addresses (a revert that names one goes through the
/// node); a Hostname that is just the node's name or its machine's id is
/// not one (kubeadm clusters report the node name as Hostname).
pub(super) fn node_addresses(node: &Node, machine: &str) -> Vec<String> {
    let name = node.metadata.name.clone().unwrap_or_default();
    [Var::InternalIp, Var::ExternalIp, Var::Hostname]
        .iter()
        .filter_map(|v| node_value(node, v))
        .filter(|a| *a != name && a != machine)
        .collect()
}

/// Whether `word` holds `addr` as a whole token (`root@10.0.0.5` does,
/// `10.0.0.50` does not hold `10.0.0.5`).
pub(super) fn holds(word: &str, addr: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_');
    word.match_indices(addr).any(|(i, _)| {
        let before = word[..i].chars().next_back();
        let after = word[i + addr.len()..].chars().next();
        !before.is_some_and(part) && !after.is_some_and(part)
    })
}

/// A rendered one-line value (a machine id, an SSH host): its words as
/// written, not shell-quoted.
pub(super) fn words(cmd: Cmd) -> String {
    std::iter::once(cmd.program)
        .chain(cmd.args)
        .collect::<Vec<_>>()
        .join(" ")
}
