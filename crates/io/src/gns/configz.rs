//! The kubelet's live configuration, read through the API server's node
//! proxy (`GET /api/v1/nodes/{name}/proxy/configz`); the record crate's
//! `record::graceful::configz::parse` reduces the answer to what graceful
//! node shutdown depends on.

use std::time::Duration;

use super::Error;
use crate::record::graceful::configz::{self, parse};
pub use crate::record::graceful::{PriorityGrace, SYSTEM_CRITICAL_PRIORITY, ShutdownConfig};

/// The request path for a node's `/configz`.
pub fn path(node: &str) -> Result<String, Error> {
    // Node names are DNS subdomains: nothing to escape, but refuse anything
    // that would change the path.
    let ok = !node.is_empty()
        && node
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if !ok {
        return Err(Error::BadNodeName(node.to_owned()));
    }
    Ok(format!("/api/v1/nodes/{node}/proxy/configz"))
}

/// Fetches and parses a node's `/configz` through the API server, giving up
/// after `timeout`. A client without automatic retries reports a refused or
/// unreachable kubelet at once (the default client retries 503s until the
/// timeout, which then is all it can say).
pub async fn fetch(
    client: &kube::Client,
    node: &str,
    timeout: Duration,
) -> Result<ShutdownConfig, Error> {
    let path = path(node)?;
    let request = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| Error::Request {
            node: node.to_owned(),
            message: e.to_string(),
        })?;
    let answer = tokio::time::timeout(timeout, client.request_text(request))
        .await
        .map_err(|_| Error::Timeout {
            node: node.to_owned(),
            after: timeout,
        })?;
    let text = answer.map_err(|e| classify(node, e))?;
    parse(&text).map_err(|configz::Error::BadConfigz { reason }| Error::BadConfigz { reason })
}

/// Turns a failed proxy request into what it means for the user.
fn classify(node: &str, e: kube::Error) -> Error {
    let node = node.to_owned();
    match e {
        kube::Error::Api(s) => {
            let message = s.message.trim().to_owned();
            match s.code {
                401 | 403 => Error::Forbidden { node, message },
                400 => Error::ProxyRefused { node, message },
                404 if s.reason == "NotFound"
                    && s.details.as_ref().is_some_and(|d| d.kind == "nodes") =>
                {
                    Error::NodeNotFound { node }
                }
                404 => Error::NotServed {
                    node,
                    code: 404,
                    message,
                },
                code if code >= 500 => Error::KubeletUnreachable {
                    node,
                    code,
                    message,
                },
                code => Error::NotServed {
                    node,
                    code,
                    message,
                },
            }
        }
        other => Error::Request {
            node,
            message: crate::actions::api_text(&other),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_cannot_change_the_path() {
        assert_eq!(
            path("worker-1.lab").ok().as_deref(),
            Some("/api/v1/nodes/worker-1.lab/proxy/configz")
        );
        for bad in ["", "a/b", "../x", "a?b", "A"] {
            assert!(path(bad).is_err(), "{bad}");
        }
    }
}
