//! The kubelet's live configuration as its `/configz` answers it (read
//! through the API server by the io crate's `gns::configz`), reduced to what
//! graceful node shutdown depends on.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{PriorityGrace, ShutdownConfig};
use crate::duration::external::parse_go;

/// An answer that is not a kubelet configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the /configz answer is not a kubelet configuration: {reason}")]
    BadConfigz { reason: String },
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::graceful::SYSTEM_CRITICAL_PRIORITY;

    /// The kubernetes.io example (see tests/fixtures/gns/README.md).
    const DOCS_CONFIGZ: &str =
        include_str!("../../../../../tests/fixtures/gns/configz-k8s-docs.json");
    const KUBESPRAY_CONFIGZ: &str =
        include_str!("../../../../../tests/fixtures/gns/configz-kubespray-defaults.json");

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
}
