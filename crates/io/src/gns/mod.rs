//! The graceful node shutdown (GNS) preflight: before a `shutdown` fault,
//! will the kubelet's graceful node shutdown run on that node, and with how
//! much time for pods? It reads the kubelet's live configuration through the
//! API server ([`configz`]) and what logind says on the node through commands
//! the runner runs there over SSH ([`logind`]); the judge crate combines them
//! into the verdict (`verdict::graceful`).
//!
//! Each fact records where it came from, or why it is missing, so a report
//! can say what the verdict rests on. Nothing here fails a run: a fact that
//! cannot be read makes the verdict `unknown`, with the reason.

pub mod configz;
pub mod logind;

use std::time::Duration;

pub use crate::record::graceful::{
    Fact, Inhibitor, NodeReport, PriorityGrace, ShutdownConfig, ShutdownVerdict,
};
pub use crate::scenario::model::GracefulShutdown;

/// How long [`read_config`] waits for the kubelet by default: longer than
/// the API server's own `--kubelet-timeout` (5 s).
pub const CONFIGZ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "reading the kubelet configuration of node {node} is forbidden ({message}); \
         the user needs `get` on the `nodes/proxy` subresource \
         (RBAC rule: apiGroups [\"\"], resources [\"nodes/proxy\"], verbs [\"get\"])"
    )]
    Forbidden { node: String, message: String },
    #[error("node {node} does not exist")]
    NodeNotFound { node: String },
    #[error(
        "the API server refused to proxy to the kubelet of node {node} (HTTP 400: {message}); \
         it does not proxy to node addresses that are loopback, link-local or unspecified \
         (see the node's status.addresses)"
    )]
    ProxyRefused { node: String, message: String },
    #[error(
        "the kubelet of node {node} did not serve /configz through the API server \
         (HTTP {code}: {message})"
    )]
    NotServed {
        node: String,
        code: u16,
        message: String,
    },
    #[error("the API server could not reach the kubelet of node {node} (HTTP {code}: {message})")]
    KubeletUnreachable {
        node: String,
        code: u16,
        message: String,
    },
    #[error(
        "no answer from the kubelet of node {node} through the API server within {}s",
        .after.as_secs()
    )]
    Timeout { node: String, after: Duration },
    #[error("requesting /configz of node {node}: {message}")]
    Request { node: String, message: String },
    #[error("the /configz answer is not a kubelet configuration: {reason}")]
    BadConfigz { reason: String },
    #[error("`{0}` is not a node name")]
    BadNodeName(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reads a node's kubelet configuration through the API server's node
/// proxy, as a fact. Pass a client without automatic retries (the runner's
/// `strict` one) so that a refused connection is reported as such.
pub async fn read_config(
    client: &kube::Client,
    node: &str,
    timeout: Duration,
) -> Fact<ShutdownConfig> {
    let source = configz::path(node)
        .map(|p| format!("GET {p}"))
        .unwrap_or_else(|_| "GET /api/v1/nodes/?/proxy/configz".into());
    Fact::from_result(configz::fetch(client, node, timeout).await, source)
}
