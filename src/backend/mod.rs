//! Fault injectors: how a scenario's node faults reach a cluster's machines.
//! The runner sees only the narrow [`NodeFaults`] trait.

pub mod kind;
pub mod sim;

use std::future::Future;

use crate::scenario::model::FaultKind;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("fault `{fault}` is not supported by the `{backend}` backend")]
    Unsupported {
        backend: &'static str,
        fault: &'static str,
    },
    #[error(transparent)]
    Exec(crate::exec::Error),
    #[error(
        "no kind cluster `{cluster}`: `{runtime} ps` shows no container labelled \
         io.x-k8s.kind.cluster={cluster}; create it with `kind create cluster --name {cluster}` \
         or pass --kind-cluster"
    )]
    NoKindCluster { cluster: String, runtime: String },
    #[error("node `{node}` is not a container of this cluster (nodes: {})", .known.join(", "))]
    UnknownNode { node: String, known: Vec<String> },
    #[error("{fault} on node `{node}` failed")]
    Sim {
        fault: &'static str,
        node: String,
        #[source]
        source: Box<crate::sim::Error>,
    },
}

/// Breaks and repairs nodes.
pub trait NodeFaults: Send {
    /// Backend name for reports (`sim`, `kind`, ...).
    fn name(&self) -> &'static str;
    /// What the fault does on this backend, in words (for plans and reports).
    fn describe(&self, node: &str, fault: FaultKind) -> String;
    /// Injects (or reverts) `fault` on `node`; returns once it is done.
    fn inject(
        &mut self,
        node: &str,
        fault: FaultKind,
    ) -> impl Future<Output = Result<(), Error>> + Send;
    /// What the backend must keep to revert a fault on `node` from another
    /// process (`nodefall recover` after the run was killed): the undo
    /// journal stores it. kind keeps the node's address.
    fn memo(&self, _node: &str) -> Option<String> {
        None
    }
    /// Gives back a memo read from the journal, before a revert.
    fn remember(&mut self, _node: &str, _memo: &str) {}
}
