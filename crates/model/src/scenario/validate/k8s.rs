//! Values the API server would refuse once the run is under way (taint keys
//! and values, namespaces, node names and roles), refused here instead, each
//! with the rule it breaks and an example that passes.

use super::Ctx;
use crate::scenario::names::{self, SYSTEM_NAMESPACES};

/// What nodefall does to its namespace, for messages refusing system ones.
const OWNS_NAMESPACE: &str = "nodefall creates, changes and force-deletes objects in the scenario namespace, and deletes the namespace on cleanup when the run created it";

impl Ctx<'_> {
    /// A name that must be a DNS-1123 label (the scenario's name, its
    /// namespace, a step id, a probe name): the rule it breaks, its length
    /// when it is too long. `what` names it (`scenario name`).
    pub(super) fn dns_label(&mut self, path: &str, what: &str, value: &str) -> bool {
        match names::dns1123_label(value) {
            Ok(()) => true,
            Err(e) => {
                self.err(
                    path,
                    format!("{what} `{value}` is not valid: {e}"),
                    Some("e.g. `nodefall-test`".into()),
                );
                false
            }
        }
    }

    /// A system namespace, as the scenario's own or one `delete-namespace`
    /// names: one rule ([`names::is_system_namespace`]), one message.
    /// Returns whether `ns` was refused.
    fn system_namespace(&mut self, path: &str, ns: &str, help: String) -> bool {
        if !names::is_system_namespace(ns) {
            return false;
        }
        self.err(
            path,
            format!(
                "`{ns}` is a system namespace ({}); nodefall neither runs in one nor deletes one",
                SYSTEM_NAMESPACES.join(", ")
            ),
            Some(help),
        );
        true
    }

    /// The scenario namespace: a valid name, and not a system one.
    pub(super) fn scenario_namespace(&mut self, ns: &str) {
        if self.dns_label("namespace", "namespace", ns) {
            self.system_namespace(
                "namespace",
                ns,
                format!("{OWNS_NAMESPACE}; use a dedicated one, e.g. `nodefall-test`"),
            );
        }
    }

    /// `delete-namespace: {name}`: a valid name, and not one the cluster needs.
    pub(super) fn deleted_namespace(&mut self, path: &str, ns: &str) {
        if self.dns_label(path, "namespace", ns) {
            self.system_namespace(
                path,
                ns,
                "delete only namespaces the scenario itself uses".into(),
            );
        }
    }

    /// A taint key: a qualified name, like a label key.
    pub(super) fn taint_key(&mut self, path: &str, key: &str) {
        if let Err(e) = names::qualified_name(key) {
            self.err(
                path,
                format!("taint key `{key}` is not valid: {e}"),
                Some(
                    "a taint key is an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters, e.g. `dedicated` or `example.com/maintenance`"
                        .into(),
                ),
            );
        }
    }

    /// A taint value: the label value rules (it may be left out).
    pub(super) fn taint_value(&mut self, path: &str, value: &str) {
        if let Err(e) = names::label_value(value) {
            self.err(
                path,
                format!("taint value `{value}` is not valid: {e}"),
                Some("e.g. `gpu` or `team-a`, or leave `value` out".into()),
            );
        }
    }

    /// A node named by a target: node names are DNS-1123 subdomains.
    pub(super) fn node_name(&mut self, path: &str, name: &str) {
        if let Err(e) = names::dns1123_subdomain(name) {
            self.err(
                path,
                format!("`{name}` cannot be a node name: {e}"),
                Some("as `kubectl get nodes` shows them, e.g. `worker-1`".into()),
            );
        }
    }

    /// A role is the tail of the `node-role.kubernetes.io/ROLE` label key.
    pub(super) fn node_role(&mut self, path: &str, role: &str) {
        if let Err(e) = names::qualified_name(&format!("node-role.kubernetes.io/{role}")) {
            self.err(
                path,
                format!("role `{role}` cannot be part of a `node-role.kubernetes.io/` label: {e}"),
                Some("e.g. `worker` or `control-plane`".into()),
            );
        }
    }
}
