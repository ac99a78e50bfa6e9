//! The kubelet's live configuration, read through the API server's node
//! proxy (`GET /api/v1/nodes/{name}/proxy/configz`), reduced to what graceful
//! node shutdown depends on.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::Error;
use super::duration::parse_go;
pub use crate::record::graceful::{PriorityGrace, SYSTEM_CRITICAL_PRIORITY, ShutdownConfig};

/// The JSON `/configz` answers: `{"kubeletconfig": {...}}`. Only the fields
/// that matter here are read; the rest is ignored.
#[derive(Deserialize)]
struct Configz {
    kubeletconfig: Option<KubeletConfig>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubeletConfig {
    shutdown_grace_period: Option<String>,
    shutdown_grace_period_critical_pods: Option<String>,
    #[serde(default)]
    shutdown_grace_period_by_pod_priority: Option<Vec<PriorityGrace>>,
    #[serde(default)]
    feature_gates: Option<BTreeMap<String, bool>>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Parses a `/configz` answer.
pub fn parse(json: &str) -> Result<ShutdownConfig, Error> {
    let bad = |reason: String| Error::BadConfigz { reason };
    let c: Configz = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    let k = c
        .kubeletconfig
        .ok_or_else(|| bad("it has no `kubeletconfig` key".into()))?;
    let duration = |field: &str, v: Option<String>| -> Result<u64, Error> {
        match v {
            None => Ok(0),
            Some(t) => parse_go(&t)
                .map(ms)
                .map_err(|e| bad(format!("{field}: {e}"))),
        }
    };
    let gates = k.feature_gates.unwrap_or_default();
    Ok(ShutdownConfig {
        grace_period_ms: duration("shutdownGracePeriod", k.shutdown_grace_period)?,
        critical_pods_ms: duration(
            "shutdownGracePeriodCriticalPods",
            k.shutdown_grace_period_critical_pods,
        )?,
        by_pod_priority: k.shutdown_grace_period_by_pod_priority.unwrap_or_default(),
        gate_graceful_node_shutdown: gates.get("GracefulNodeShutdown").copied(),
        gate_based_on_pod_priority: gates.get("GracefulNodeShutdownBasedOnPodPriority").copied(),
    })
}

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
    parse(&text)
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

    /// The kubernetes.io example (see tests/fixtures/gns/README.md).
    const DOCS_CONFIGZ: &str = include_str!("../../../../tests/fixtures/gns/configz-k8s-docs.json");
    const KUBESPRAY_CONFIGZ: &str =
        include_str!("../../../../tests/fixtures/gns/configz-kubespray-defaults.json");

    #[test]
    fn the_documented_configz_has_graceful_shutdown_off() {
        let c = parse(DOCS_CONFIGZ).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.grace_period_ms, 0);
        assert_eq!(c.critical_pods_ms, 0);
        assert!(c.by_pod_priority.is_empty());
        assert_eq!(c.gate_graceful_node_shutdown, None);
    }

    #[test]
    fn kubespray_defaults_read_as_60s_and_20s() {
        let c = parse(KUBESPRAY_CONFIGZ).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.grace_period(), Duration::from_secs(60));
        assert_eq!(c.critical_pods(), Duration::from_secs(20));
    }

    #[test]
    fn priority_list_and_gates_are_read() {
        let c = parse(
            r#"{"kubeletconfig":{"shutdownGracePeriodByPodPriority":[
                {"priority":100000,"shutdownGracePeriodSeconds":10},
                {"priority":2000000000,"shutdownGracePeriodSeconds":5}],
                "featureGates":{"GracefulNodeShutdown":true,"GracefulNodeShutdownBasedOnPodPriority":false}}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.grace_period_ms, 0, "absent means 0s");
        assert_eq!(c.by_pod_priority.len(), 2);
        assert_eq!(c.by_pod_priority[1].priority, SYSTEM_CRITICAL_PRIORITY);
        assert_eq!(c.gate_graceful_node_shutdown, Some(true));
        assert_eq!(c.gate_based_on_pod_priority, Some(false));
    }

    #[test]
    fn answers_that_are_not_a_kubelet_configuration_are_refused() {
        for (text, why) in [
            ("404 page not found", "expected"),
            ("{\"kind\":\"Status\"}", "no `kubeletconfig` key"),
            (
                "{\"kubeletconfig\":{\"shutdownGracePeriod\":\"30\"}}",
                "shutdownGracePeriod: `30`",
            ),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

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
