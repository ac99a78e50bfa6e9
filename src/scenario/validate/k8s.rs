//! Values the API server would refuse once the run is under way (taint keys
//! and values, namespaces, node names and roles), refused here instead, each
//! with the rule it breaks and an example that passes.

use super::Ctx;
use crate::scenario::names::{self, RESERVED_NAMESPACES};

/// What nodefall does to its namespace, for messages refusing system ones.
const OWNS_NAMESPACE: &str = "nodefall creates, changes and force-deletes objects in the scenario namespace and deletes the namespace itself on cleanup";

impl Ctx<'_> {
    /// The scenario namespace (already known to be a DNS-1123 label) must not be a system one.
    pub(super) fn scenario_namespace(&mut self, ns: &str) {
        if RESERVED_NAMESPACES.contains(&ns) {
            self.err(
                "namespace",
                format!("`{ns}` is a system namespace and cannot be the scenario namespace"),
                Some(format!(
                    "{OWNS_NAMESPACE}; use a dedicated one, e.g. `nodefall-test`"
                )),
            );
        }
    }

    /// `delete-namespace: {name}`: a valid name, and not one the cluster needs.
    pub(super) fn deleted_namespace(&mut self, path: &str, ns: &str) {
        if let Err(e) = names::dns1123_label(ns) {
            self.err(
                path,
                format!("`{ns}` is not a valid namespace name: {e}"),
                Some("e.g. `nodefall-test`".into()),
            );
        } else if ns == "default" || RESERVED_NAMESPACES.contains(&ns) {
            self.err(
                path,
                format!("`{ns}` is a system namespace; nodefall will not delete it"),
                Some("delete only namespaces the scenario itself uses".into()),
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
