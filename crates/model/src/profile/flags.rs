//! Control-plane flags as real clusters expose them (pure): kubeadm's
//! `kubeadm-config` ConfigMap (`ClusterConfiguration`, v1beta3 `extraArgs`
//! maps and v1beta4 `extraArgs` lists), kubeadm's `kubelet-config`
//! ConfigMap (`KubeletConfiguration`), and the command lines of the
//! control-plane mirror pods that kubeadm, kind and Kubespray run.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_yaml_ng::Value;

use super::Var;

/// A control-plane component whose flags set a timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Component {
    ControllerManager,
    ApiServer,
    Kubelet,
}

impl Component {
    pub fn name(self) -> &'static str {
        match self {
            Component::ControllerManager => "kube-controller-manager",
            Component::ApiServer => "kube-apiserver",
            Component::Kubelet => "kubelet",
        }
    }

    /// The `component` label kubeadm puts on its static pods.
    pub fn pod_label(self) -> Option<&'static str> {
        match self {
            Component::ControllerManager => Some("kube-controller-manager"),
            Component::ApiServer => Some("kube-apiserver"),
            Component::Kubelet => None,
        }
    }
}

/// How a setting is written.
#[derive(Debug, Clone, Copy)]
enum Unit {
    /// Go `time.Duration` (`40s`, `1m0s`).
    Go,
    /// Whole seconds (`300`).
    Seconds,
    /// Nodes per second (`0.1`), kept as its interval (0: never).
    Rate,
}

/// The settings nodefall reads, by component and name, and the timing each sets.
const SETTINGS: [(Component, &str, Var, Unit); 9] = [
    (
        Component::ControllerManager,
        "node-monitor-grace-period",
        Var::NodeMonitorGracePeriod,
        Unit::Go,
    ),
    (
        Component::ControllerManager,
        "node-monitor-period",
        Var::NodeMonitorPeriod,
        Unit::Go,
    ),
    (
        Component::ControllerManager,
        "node-startup-grace-period",
        Var::NodeStartupGracePeriod,
        Unit::Go,
    ),
    (
        Component::ControllerManager,
        "node-eviction-rate",
        Var::NodeEvictionInterval,
        Unit::Rate,
    ),
    (
        Component::ControllerManager,
        "secondary-node-eviction-rate",
        Var::SecondaryEvictionInterval,
        Unit::Rate,
    ),
    (
        Component::ApiServer,
        "default-unreachable-toleration-seconds",
        Var::UnreachableTolerationSeconds,
        Unit::Seconds,
    ),
    (
        Component::ApiServer,
        "default-not-ready-toleration-seconds",
        Var::NotReadyTolerationSeconds,
        Unit::Seconds,
    ),
    (
        Component::Kubelet,
        "nodeLeaseDurationSeconds",
        Var::NodeLeaseDuration,
        Unit::Seconds,
    ),
    (
        Component::Kubelet,
        "nodeStatusUpdateFrequency",
        Var::NodeStatusUpdateFrequency,
        Unit::Go,
    ),
];

/// One timing read from a component's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub var: Var,
    pub value: Duration,
    /// `--node-monitor-grace-period=40s`, as written.
    pub written: String,
}

/// A value that is there but not a duration: said, not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub written: String,
    pub why: String,
}

/// The timings among `flags` (flag name without dashes -> value) of `component`.
pub fn settings(
    component: Component,
    flags: &BTreeMap<String, String>,
) -> (Vec<Setting>, Vec<Unreadable>) {
    let mut found = Vec::new();
    let mut bad = Vec::new();
    for (c, name, var, unit) in SETTINGS {
        if c != component {
            continue;
        }
        let Some(text) = flags.get(name) else {
            continue;
        };
        let written = match component {
            Component::Kubelet => format!("{name}: {text}"),
            _ => format!("--{name}={text}"),
        };
        let value = match unit {
            Unit::Go => crate::duration::external::parse_go(text),
            Unit::Seconds => text
                .trim()
                .parse::<u64>()
                .map(Duration::from_secs)
                .map_err(|_| format!("`{text}` is not a whole number of seconds")),
            Unit::Rate => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(super::interval_of)
                .ok_or_else(|| format!("`{text}` is not a rate of 0 or more nodes per second")),
        };
        match value {
            // kubeadm's kubelet-config holds every field of the
            // KubeletConfiguration, 0 where it left one unset; the kubelet
            // reads 0 as "use my default" for these (lease 40 s, status 10 s).
            Ok(value) if component == Component::Kubelet && value.is_zero() => {
                bad.push(Unreadable {
                    written,
                    why: "0 is how kubeadm writes a field it leaves unset: the kubelet uses its \
                      default"
                        .into(),
                })
            }
            Ok(value) => found.push(Setting {
                var,
                value,
                written,
            }),
            Err(why) => bad.push(Unreadable { written, why }),
        }
    }
    (found, bad)
}

/// Flags of a command line (`kube-controller-manager --a=1 --b 2 --c`):
/// name without dashes -> value (`true` for a bare switch). The last one wins,
/// as with Go's flag parsing.
pub fn command_line<S: AsRef<str>>(words: &[S]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_ref();
        i += 1;
        let Some(flag) = w.strip_prefix("--").or_else(|| w.strip_prefix('-')) else {
            continue;
        };
        if flag.is_empty() {
            continue;
        }
        match flag.split_once('=') {
            Some((name, value)) => {
                out.insert(name.to_owned(), value.to_owned());
            }
            None => {
                // `--flag value` unless the next word is itself a flag
                let value = match words.get(i).map(AsRef::as_ref) {
                    Some(next) if !next.starts_with('-') => {
                        i += 1;
                        next.to_owned()
                    }
                    _ => "true".to_owned(),
                };
                out.insert(flag.to_owned(), value);
            }
        }
    }
    out
}

/// What a kubeadm `ClusterConfiguration` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterConfiguration {
    /// `kubernetesVersion`.
    pub version: Option<String>,
    pub controller_manager: BTreeMap<String, String>,
    pub api_server: BTreeMap<String, String>,
}

/// Reads the `ClusterConfiguration` document of `kubeadm-config` (any of
/// kubeadm's API versions: `extraArgs` as a map up to v1beta3, as a list of
/// `{name, value}` from v1beta4).
pub fn cluster_configuration(text: &str) -> Result<ClusterConfiguration, String> {
    let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    if !doc.is_mapping() {
        return Err("not a YAML mapping".into());
    }
    let version = doc
        .get("kubernetesVersion")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(ClusterConfiguration {
        version,
        controller_manager: extra_args(doc.get("controllerManager"))?,
        api_server: extra_args(doc.get("apiServer"))?,
    })
}

fn extra_args(section: Option<&Value>) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let Some(args) = section.and_then(|s| s.get("extraArgs")) else {
        return Ok(out);
    };
    match args {
        Value::Mapping(m) => {
            for (k, v) in m {
                if let (Some(k), Some(v)) = (k.as_str(), scalar(v)) {
                    out.insert(k.to_owned(), v);
                }
            }
        }
        Value::Sequence(items) => {
            for item in items {
                let name = item.get("name").and_then(Value::as_str);
                let value = item.get("value").and_then(scalar);
                match (name, value) {
                    (Some(n), Some(v)) => {
                        out.insert(n.to_owned(), v);
                    }
                    _ => return Err("an `extraArgs` entry is not `{name, value}`".into()),
                }
            }
        }
        Value::Null => {}
        _ => return Err("`extraArgs` is neither a map nor a list".into()),
    }
    Ok(out)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The settings of a `KubeletConfiguration` document (kubeadm's
/// `kubelet-config` ConfigMap), as field name -> value.
pub fn kubelet_configuration(text: &str) -> Result<BTreeMap<String, String>, String> {
    let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let Value::Mapping(m) = doc else {
        return Err("not a YAML mapping".into());
    };
    Ok(m.iter()
        .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), scalar(v)?)))
        .collect())
}

/// `v1.31.4`, `v1.32.0-rc.1`, `v1.29.3+k3s1` -> (1, 31).
pub fn minor_version(version: &str) -> Option<(u32, u32)> {
    let v = version.trim().trim_start_matches('v');
    let mut parts = v.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
#[path = "flags_tests.rs"]
mod tests;
