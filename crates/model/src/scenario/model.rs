//! The scenario file as written: serde types, one per YAML mapping.
//!
//! Everything here is syntax. Meaning (exactly-one-of rules, references to
//! targets, windows) is checked by `validate`, which turns this into a
//! [`crate::plan::Plan`].

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, StrDeserializer};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::duration::Dur;

/// A fault's meaning lives in `fault.rs`; scenarios name it here.
pub use super::fault::{Does, Effect, FaultKind};

/// Reads any scalar (string, number, bool) as its text.
pub fn scalar_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
            Ok(v.to_string())
        }
    }
    d.deserialize_any(V)
}

fn opt_scalar_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    scalar_string(d).map(Some)
}

/// A field that takes one value or a list of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct OneOrMany<T>(pub Vec<T>);

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("one value or a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element()? {
                    out.push(item);
                }
                Ok(OneOrMany(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(|t| OneOrMany(vec![t]))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                T::deserialize(StrDeserializer::<E>::new(v)).map(|t| OneOrMany(vec![t]))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Fault injectors. `sim` is the embedded local cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Local simulated cluster: real control plane, nodes played by KWOK.
    Sim,
    /// kind node containers (docker or podman).
    Kind,
    /// Vagrant machines (VirtualBox or libvirt provider).
    Vagrant,
    /// libvirt domains.
    Libvirt,
    /// Any CLI (hypervisor, BMC, cloud, SSH) through a backend file of
    /// command templates.
    Command,
}

impl BackendKind {
    pub const ALL: [BackendKind; 5] = [
        BackendKind::Sim,
        BackendKind::Kind,
        BackendKind::Vagrant,
        BackendKind::Libvirt,
        BackendKind::Command,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::Kind => "kind",
            BackendKind::Vagrant => "vagrant",
            BackendKind::Libvirt => "libvirt",
            BackendKind::Command => "command",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Backend used when `--backend` is not given (default `sim`).
    #[serde(default)]
    pub backend: Option<BackendKind>,
    pub namespace: String,
    /// The clusters the scenario may touch; any other is refused before
    /// anything changes (empty: any).
    #[serde(default)]
    pub cluster: OneOrMany<ClusterPin>,
    /// Overrides of the cluster's timing profile, for clusters tuned away from it.
    #[serde(default)]
    pub timing: TimingOverrides,
    #[serde(default)]
    pub setup: Setup,
    /// Shorthand for `targets: {target: ...}`.
    #[serde(default)]
    pub target: Option<TargetSpec>,
    #[serde(default)]
    pub targets: BTreeMap<String, TargetSpec>,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub cleanup: Cleanup,
    /// Where the nodes' libvirt domains are, for `--backend libvirt`
    /// (flags given on the command line win).
    #[serde(default)]
    pub libvirt: LibvirtMachines,
    /// The command backend's templates, for `--backend command` (a
    /// `--backend-file` given on the command line replaces them).
    #[serde(default)]
    pub command: Option<crate::scenario::command::CommandFile>,
    /// Abort guards: conditions that stop the steps (then restore as usual)
    /// once they have held for their `for`.
    #[serde(default)]
    pub abort_if: Vec<Guard>,
    /// HTTP probes: what a client of the workload sees while the steps run.
    #[serde(default)]
    pub probe: OneOrMany<Probe>,
}

/// One `probe:`: URLs requested at a fixed interval from the end of setup to
/// the end of the steps.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Probe {
    /// What expectations call it (`probe: NAME`); default `probe`.
    pub name: Option<String>,
    /// One URL or a list (http only).
    #[serde(default)]
    pub url: OneOrMany<String>,
    /// Between two requests to one URL (default 1s, at least 100ms).
    pub interval: Option<Dur>,
    /// Per request: connect, response and body (default 1s).
    pub timeout: Option<Dur>,
    /// Statuses counted as success: codes, `2xx` classes or `200-299`
    /// ranges (default 200-399).
    #[serde(default)]
    pub status: OneOrMany<serde_yaml_ng::Value>,
    /// The probe stops after this many requests (all URLs together).
    pub max_requests: Option<u64>,
    /// The probe stops after this long whatever happens.
    pub max_duration: Option<Dur>,
    /// Errors closer than this belong to one error window (default 5s).
    pub gap: Option<Dur>,
}

/// One cluster a scenario may run against: every field given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterPin {
    /// kubeconfig context name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// API server URL, as the kubeconfig has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The cluster's UID: the `kube-system` namespace's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// `libvirt:`: the connection and node -> domain mapping of a lab.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LibvirtMachines {
    /// Connection URI (else LIBVIRT_DEFAULT_URI, else qemu:///system).
    #[serde(default)]
    pub uri: Option<String>,
    /// Node name -> domain name or UUID.
    #[serde(default)]
    pub domains: BTreeMap<String, String>,
    /// Before each node's name to get its domain's.
    #[serde(default)]
    pub domain_prefix: Option<String>,
    /// Node name -> MAC of the interface drop-nic cuts.
    #[serde(default)]
    pub nics: BTreeMap<String, String>,
}

/// `timing:` overrides, one per profile variable (canonical names only).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TimingOverrides {
    pub node_monitor_grace_period: Option<Dur>,
    pub node_monitor_period: Option<Dur>,
    pub node_startup_grace_period: Option<Dur>,
    pub unreachable_toleration_seconds: Option<Dur>,
    pub not_ready_toleration_seconds: Option<Dur>,
    pub node_lease_duration: Option<Dur>,
    pub node_status_update_frequency: Option<Dur>,
    pub pod_gc_period: Option<Dur>,
    pub orphan_quarantine: Option<Dur>,
    pub max_wait_for_unmount: Option<Dur>,
    #[serde(alias = "evictionInterval")]
    pub node_eviction_interval: Option<Dur>,
    #[serde(
        rename = "secondaryNodeEvictionInterval",
        alias = "secondaryEvictionInterval"
    )]
    pub secondary_eviction_interval: Option<Dur>,
}

/// What to create before the fault, and what must be ready.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Setup {
    #[serde(default)]
    pub apply: OneOrMany<ApplyItem>,
    #[serde(default)]
    pub wait_ready: OneOrMany<WaitReady>,
}

/// A manifest file, relative to the scenario file, optionally for some backends only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplyItem {
    pub file: String,
    pub only: Vec<BackendKind>,
}

impl<'de> Deserialize<'de> for ApplyItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            file: String,
            #[serde(default)]
            only: OneOrMany<BackendKind>,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ApplyItem;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a manifest path or {file: PATH, only: [BACKEND...]}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ApplyItem, E> {
                Ok(ApplyItem {
                    file: v.to_string(),
                    only: Vec::new(),
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ApplyItem, A::Error> {
                let f = Full::deserialize(MapAccessDeserializer::new(map))?;
                Ok(ApplyItem {
                    file: f.file,
                    only: f.only.0,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A workload that must be ready: exactly one kind key names it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WaitReady {
    pub deployment: Option<String>,
    pub statefulset: Option<String>,
    pub daemonset: Option<String>,
    pub pvc: Option<String>,
    pub pdb: Option<String>,
    /// Ready replicas required (default: the workload's spec.replicas).
    pub replicas: Option<u32>,
    pub timeout: Option<Dur>,
}

/// How the fault's node is chosen: exactly one of `name`, `role`, `mostPods`,
/// or a set of nodes: `nodes`, optionally narrowed by `count` or `percent`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetSpec {
    pub name: Option<String>,
    /// `worker` (no control-plane role) or any `node-role.kubernetes.io/<role>`.
    pub role: Option<String>,
    /// Label selector: the node running most pods that match (ties: by name).
    pub most_pods: Option<String>,
    /// Label selector: every node that matches (a set of nodes).
    pub nodes: Option<String>,
    /// With `nodes`: only this many of them, the first by name.
    pub count: Option<u32>,
    /// With `nodes`: only this share of them (rounded up), the first by name.
    pub percent: Option<f64>,
    /// Other targets this one must not be.
    #[serde(default)]
    pub exclude: OneOrMany<String>,
}

/// One step: exactly one of `fault`, `action`, `expect`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    /// Name other steps can anchor to (`since: ID`).
    pub id: Option<String>,
    /// Human label for reports.
    pub name: Option<String>,
    pub fault: Option<FaultKind>,
    /// Target of a fault (default `target`).
    pub node: Option<String>,
    pub action: Option<ActionSpec>,
    pub expect: Option<Expect>,
}

/// `action:` holds exactly one of these keys.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ActionSpec {
    pub apply: Option<OneOrMany<ApplyItem>>,
    pub taint: Option<TaintAction>,
    pub untaint: Option<UntaintAction>,
    pub cordon: Option<NodeAction>,
    pub uncordon: Option<NodeAction>,
    pub drain: Option<DrainAction>,
    pub delete_node: Option<NodeAction>,
    pub force_delete_pods: Option<ForceDeletePods>,
    pub scale: Option<ScaleAction>,
    pub wait: Option<WaitAction>,
    pub delete_namespace: Option<DeleteNamespace>,
}

pub const ACTION_NAMES: [&str; 11] = [
    "apply",
    "taint",
    "untaint",
    "cordon",
    "uncordon",
    "drain",
    "delete-node",
    "force-delete-pods",
    "scale",
    "wait",
    "delete-namespace",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        })
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TaintAction {
    pub node: String,
    pub key: String,
    #[serde(default, deserialize_with = "opt_scalar_string")]
    pub value: Option<String>,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UntaintAction {
    pub node: String,
    pub key: String,
    /// Only this effect (default: every taint with the key).
    pub effect: Option<TaintEffect>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeAction {
    pub node: String,
}

/// Like `kubectl drain`: cordon, then evict pod by pod through the Eviction API.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DrainAction {
    /// One target, or several drained concurrently.
    #[serde(alias = "node")]
    pub nodes: OneOrMany<String>,
    #[serde(default = "yes")]
    pub ignore_daemonsets: bool,
    #[serde(default)]
    pub delete_emptydir_data: bool,
    /// Also delete pods without a controller.
    #[serde(default)]
    pub force: bool,
    /// Pod termination grace period (default: each pod's own).
    pub grace_period: Option<Dur>,
    /// Give up after this long (default 5m).
    pub timeout: Option<Dur>,
    /// Only evict pods matching this label selector.
    pub pod_selector: Option<String>,
    /// Pause between retries of an eviction refused with 429 (default 5s).
    pub retry_interval: Option<Dur>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForceDeletePods {
    /// Label selector in the scenario namespace.
    pub selector: Option<String>,
    /// Only pods on this target.
    pub node: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScaleAction {
    pub deployment: Option<String>,
    pub statefulset: Option<String>,
    pub replicas: u32,
}

/// Wait a duration, or until a condition holds (with a timeout).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WaitAction {
    #[serde(default, deserialize_with = "opt_scalar_string")]
    pub duration: Option<String>,
    pub until: Option<Box<Expect>>,
    #[serde(default, deserialize_with = "opt_scalar_string")]
    pub timeout: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteNamespace {
    /// Default: the scenario's namespace.
    pub name: Option<String>,
}

/// A node's Ready condition status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeReady {
    True,
    False,
    Unknown,
}

impl fmt::Display for NodeReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeReady::True => "True",
            NodeReady::False => "False",
            NodeReady::Unknown => "Unknown",
        })
    }
}

/// `ready:` is a status for a node and a count (or `all`) for pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ReadyValue {
    Status(NodeReady),
    Count(u32),
    All,
}

impl<'de> Deserialize<'de> for ReadyValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ReadyValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`True`, `False` or `Unknown` for a node; a count or `all` for pods")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ReadyValue, E> {
                Ok(ReadyValue::Status(if v {
                    NodeReady::True
                } else {
                    NodeReady::False
                }))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ReadyValue, E> {
                u32::try_from(v)
                    .map(ReadyValue::Count)
                    .map_err(|_| E::custom(format!("{v} pods is too many")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ReadyValue, E> {
                Err(E::custom(format!("`{v}`: a pod count cannot be negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ReadyValue, E> {
                match v.to_ascii_lowercase().as_str() {
                    "true" => Ok(ReadyValue::Status(NodeReady::True)),
                    "false" => Ok(ReadyValue::Status(NodeReady::False)),
                    "unknown" => Ok(ReadyValue::Status(NodeReady::Unknown)),
                    "all" => Ok(ReadyValue::All),
                    _ => v.parse::<u32>().map(ReadyValue::Count).map_err(|_| {
                        E::custom(format!(
                            "`{v}` is not a ready value: use `True`, `False` or `Unknown` for a node, a count or `all` for pods"
                        ))
                    }),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `terminating: true|false` (all / none of the selected pods) or a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Terminating {
    All(bool),
    Count(u32),
}

impl<'de> Deserialize<'de> for Terminating {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Terminating;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`true`, `false` or a pod count")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Terminating, E> {
                Ok(Terminating::All(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Terminating, E> {
                u32::try_from(v)
                    .map(Terminating::Count)
                    .map_err(|_| E::custom("count too large"))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl fmt::Display for PodPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// `gracefulShutdown:` what the preflight must find on a node before it is
/// shut down (see `docs/graceful-shutdown.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GracefulShutdown {
    /// The kubelet's graceful node shutdown will run, with its full period.
    WillRun,
    /// It will not run (off, no inhibitor lock, or cut short by logind).
    WillNotRun,
}

impl GracefulShutdown {
    pub fn name(self) -> &'static str {
        match self {
            GracefulShutdown::WillRun => "will-run",
            GracefulShutdown::WillNotRun => "will-not-run",
        }
    }
}

impl fmt::Display for GracefulShutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What happens to the workload and the scenario's own changes afterwards.
/// Faults are reverted whatever this says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cleanup {
    /// Delete the namespace, remove taints/cordons the scenario added.
    #[default]
    Always,
    /// Like `always`, but keep everything when an expectation failed (for debugging).
    OnSuccess,
    /// Leave the workload and the scenario's changes in place.
    Never,
}

impl Cleanup {
    /// As written in a scenario (`on-success`).
    pub fn name(self) -> &'static str {
        match self {
            Cleanup::Always => "always",
            Cleanup::OnSuccess => "on-success",
            Cleanup::Never => "never",
        }
    }
}

/// Declares [`Expect`] and [`Guard`] from one list of fields, so that a
/// condition is written once and serves `expect:`, `abortIf:` and
/// validation (which reads a guard through [`Guard::as_expect`]).
///
/// Expect's fields come in groups, in their order in the file format (the
/// order serde lists them in an "unknown field" error, and serializes them):
/// `condition { .. }` groups are a subject or a condition, and are a guard's
/// too; `expect { .. }` groups are an expectation's own (windows, anchor,
/// preflight, probes). Guard takes its own leading fields, then every
/// `condition` field in order (`..condition`), then the `refused` ones: read
/// as any YAML value, under the name given, only so that validation can
/// refuse them by name with a reason rather than as unknown fields.
///
/// A macro rather than `#[serde(flatten)]`: serde does not support `flatten`
/// with `deny_unknown_fields`, and the loader's "did you mean" and "allowed:"
/// help come from the field list serde prints for an unknown field.
macro_rules! expect_and_guard {
    // Guard's fields: keep the `condition` groups, skip the `expect` ones.
    (@guard [$($acc:tt)*] [$($guard:tt)*] condition { $($fields:tt)* } $($rest:tt)*) => {
        expect_and_guard!(@guard [$($acc)* $($fields)*] [$($guard)*] $($rest)*);
    };
    (@guard [$($acc:tt)*] [$($guard:tt)*] expect { $($fields:tt)* } $($rest:tt)*) => {
        expect_and_guard!(@guard [$($acc)*] [$($guard)*] $($rest)*);
    };
    (@guard
        [$( $(#[$cmeta:meta])* pub $cond:ident : $cty:ty, )*]
        [
            $(#[$gmeta:meta])*
            pub struct Guard {
                $( $(#[$hmeta:meta])* pub $head:ident : $hty:ty, )*
                ..condition,
                refused { $( $refused:ident = $rname:literal ),* $(,)? }
            }
        ]
    ) => {
        $(#[$gmeta])*
        pub struct Guard {
            $( $(#[$hmeta])* pub $head: $hty, )*
            $( $(#[$cmeta])* pub $cond: $cty, )*
            $( #[serde(rename = $rname)] pub $refused: Option<serde_yaml_ng::Value>, )*
        }

        impl Guard {
            /// The subject and conditions as an expectation, so they are checked by
            /// the same code (`validate::expect::condition`).
            pub fn as_expect(&self) -> Expect {
                Expect {
                    $( $cond: ::std::clone::Clone::clone(&self.$cond), )*
                    ..Expect::default()
                }
            }

            /// Fields read only to be refused (not offered as allowed ones).
            pub const REFUSED: [&'static str; [$($rname),*].len()] = [$($rname),*];

            /// The fields a guard refuses, with whether each is written.
            pub fn refused(&self) -> [(&'static str, bool); Guard::REFUSED.len()] {
                [$( ($rname, self.$refused.is_some()) ),*]
            }
        }
    };
    (
        $(#[$emeta:meta])*
        pub struct Expect {
            $( $group:ident { $( $(#[$fmeta:meta])* pub $field:ident : $fty:ty ),* $(,)? } )*
        }
        $($guard:tt)*
    ) => {
        $(#[$emeta])*
        pub struct Expect {
            $( $( $(#[$fmeta])* pub $field: $fty, )* )*
        }

        expect_and_guard!(
            @guard []
            [$($guard)*]
            $( $group { $( $(#[$fmeta])* pub $field: $fty, )* } )*
        );
    };
}

/// `duplicateWindow: {pods: SELECTOR}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DuplicateSubject {
    pub pods: String,
}

/// `remediation: {by: MANAGER, notReadyFor: 8s}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemediationSpec {
    /// The field manager of the acts (any, when absent).
    pub by: Option<String>,
    /// The least unbroken NotReady before each act.
    #[serde(default, deserialize_with = "opt_scalar_string")]
    pub not_ready_for: Option<String>,
}

/// What the machine must have been off before (`fencedBefore:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FencedBefore {
    /// Before any selected pod's replacement ran.
    Replacement,
}

expect_and_guard! {
    /// A condition on a node or on pods, and when it must (or must not) hold.
    #[derive(Debug, Clone, Default, Deserialize, Serialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Expect {
        condition {
            // subject: exactly one
            pub node: Option<String>,
            pub pods: Option<String>,
            // pod filters
            pub on: Option<String>,
            pub not_on: Option<String>,
            // conditions: all given must hold together
            pub ready: Option<ReadyValue>,
            pub taint: Option<String>,
            pub no_taint: Option<String>,
            pub unschedulable: Option<bool>,
            pub exists: Option<bool>,
            /// A remediation act on the node by this field manager: a
            /// NoExecute taint other than the node lifecycle controller's.
            pub remediated_by: Option<String>,
            pub terminating: Option<Terminating>,
            pub count: Option<u32>,
            pub ready_at_least: Option<u32>,
            /// Fewer than N selected pods Ready (and not terminating).
            pub ready_below: Option<u32>,
            pub phase: Option<PodPhase>,
            pub reason: Option<String>,
        }
        expect {
            /// Decided at preflight, before any fault: no window, no other condition.
            pub graceful_shutdown: Option<GracefulShutdown>,
            /// Subject: the selected pods replaced during the run; the
            /// longest time an original still ran on its failed node while
            /// its replacement ran, decided at the end of the run.
            pub duplicate_window: Option<DuplicateSubject>,
            /// With `duplicateWindow`: the longest allowed (`0s`).
            #[serde(default, deserialize_with = "opt_scalar_string")]
            pub max: Option<String>,
            /// `replacement`: the failed node's machine was off before any of
            /// the selected pods' replacements ran (with `pods`); decided at
            /// the end of the run.
            pub fenced_before: Option<FencedBefore>,
            /// With `node`: the node was remediated (by this field manager),
            /// each act only after the node had been NotReady this long
            /// without a break; decided at the end of the run.
            pub remediation: Option<RemediationSpec>,
            // window: exactly one (none inside `wait.until` or with `gracefulShutdown`)
            #[serde(default, deserialize_with = "opt_scalar_string")]
            pub within: Option<String>,
            #[serde(default, deserialize_with = "opt_scalar_string")]
            pub after: Option<String>,
            #[serde(default, deserialize_with = "opt_scalar_string")]
            pub not_before: Option<String>,
            #[serde(default, deserialize_with = "opt_scalar_string")]
            pub holds_for: Option<String>,
            #[serde(default, deserialize_with = "opt_scalar_string")]
            pub never: Option<String>,
            /// Anchor: a step `id`, or `fault` for the latest fault (default: the latest fault or action).
            pub since: Option<String>,
        }
        condition {
            // volumes (subject `pvc`, see `validate::volumes`)
            /// Subject: a PersistentVolumeClaim of the scenario namespace.
            pub pvc: Option<String>,
            /// Its volume is attached to this target's node.
            pub attached_to: Option<String>,
            /// Its volume is not attached to this target's node.
            pub detached_from: Option<String>,
            /// Its volume is attached to some node (true) or to none (false).
            pub attached: Option<bool>,
            // events (on a `pods` or `node` subject)
            /// An event with this reason about the subject has been seen.
            pub event: Option<String>,
            /// ... whose message contains this text.
            pub message: Option<String>,
            // clients (see `validate::clients`)
            /// Subject: a Service of the scenario namespace (its EndpointSlices).
            pub service: Option<String>,
            /// Exactly N ready endpoints (with `on`/`notOn`: on that target's node).
            pub ready_endpoints: Option<u32>,
        }
        expect {
            /// Subject: a `probe:` by name; decided when the probe stops.
            pub probe: Option<String>,
            /// At most N failed requests.
            pub errors: Option<u64>,
            /// The longest error window compared with a duration (`<= grace + 10s`).
            #[serde(default, deserialize_with = "opt_scalar_string")]
            pub error_window: Option<String>,
        }
    }

    /// One `abortIf:` guard: an expectation's subject and conditions, and how
    /// long they must hold before the run is stopped.
    ///
    /// The window fields, `since` and `gracefulShutdown` are read only so that
    /// validation can refuse them by name with a reason (a guard has no window:
    /// it is watched for the whole of the steps), rather than as unknown fields.
    /// A probe's fields (`probe`, `errors`, `errorWindow`) are unknown here.
    #[derive(Debug, Clone, Default, Deserialize, Serialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Guard {
        /// Shown in the report and in the error when it fires.
        pub name: Option<String>,
        /// How long the conditions must hold without a break (default `0s`).
        #[serde(default, rename = "for", deserialize_with = "opt_scalar_string")]
        pub for_: Option<String>,
        ..condition,
        refused {
            graceful_shutdown = "gracefulShutdown",
            within = "within",
            after = "after",
            not_before = "notBefore",
            holds_for = "holdsFor",
            never = "never",
            since = "since",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields serde knows for `T`, in order, from its unknown-field error
    /// (the list the loader offers as "allowed").
    fn fields<T: serde::de::DeserializeOwned + fmt::Debug>() -> Vec<String> {
        let e = serde_yaml_ng::from_str::<T>("{zzz: 1}")
            .unwrap_err()
            .to_string();
        let Some((_, expected)) = e.split_once("expected one of") else {
            panic!("{e}");
        };
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    /// An expectation's fields a guard does not take as they are: its
    /// windows, anchor and preflight condition (refused with a reason), and a
    /// probe's subject and conditions and the verdicts of the whole run
    /// (not watched by guards).
    fn expect_only() -> Vec<&'static str> {
        let mut only = Guard::REFUSED.to_vec();
        only.extend([
            "probe",
            "errors",
            "errorWindow",
            "duplicateWindow",
            "max",
            "fencedBefore",
            "remediation",
        ]);
        only
    }

    #[test]
    fn every_condition_of_an_expectation_is_a_guards_too() {
        let expect = fields::<Expect>();
        let conditions: Vec<&str> = expect
            .iter()
            .map(String::as_str)
            .filter(|f| !expect_only().contains(f))
            .collect();
        for only in expect_only() {
            assert!(expect.iter().any(|f| f == only), "`{only}` in {expect:?}");
        }
        let mut guard = vec!["name", "for"];
        guard.extend(&conditions);
        guard.extend(Guard::REFUSED);
        assert_eq!(fields::<Guard>(), guard);

        // Each condition, written in a guard, reaches validation as the same
        // expectation field with the same value.
        for field in conditions {
            let written = ["x", "1", "true", "Running"]
                .iter()
                .map(|v| format!("{{{field}: {v}}}"))
                .find(|y| serde_yaml_ng::from_str::<Guard>(y).is_ok())
                .unwrap_or_else(|| panic!("no value for `{field}` reads as a guard"));
            let g: Guard = serde_yaml_ng::from_str(&written).unwrap();
            let e: Expect = serde_yaml_ng::from_str(&written).unwrap();
            let seen = serde_yaml_ng::to_value(g.as_expect()).unwrap();
            assert_eq!(seen, serde_yaml_ng::to_value(&e).unwrap(), "{written}");
            assert!(!seen[field].is_null(), "{written}: {seen:?}");
            assert!(g.refused().iter().all(|(_, set)| !set), "{written}");
        }
    }

    #[test]
    fn a_refused_field_is_read_under_its_name_and_named_when_written() {
        for name in Guard::REFUSED {
            let g: Guard = serde_yaml_ng::from_str(&format!("{{{name}: 1m}}"))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let set: Vec<&str> = g.refused().iter().filter(|r| r.1).map(|r| r.0).collect();
            assert_eq!(set, vec![name]);
        }
    }
}
