//! Timing profiles: the cluster timings a scenario's expectations scale with.
//!
//! Every bound in a scenario may name one of these variables instead of a
//! literal, so the same scenario is right on an upstream-default cluster and on
//! the compressed `fast` profile of the simulated cluster. A cluster's own
//! timings are read from its control-plane flags ([`flags`]) into a
//! discovered profile ([`discovery`]).

pub mod discovery;
pub mod flags;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One timing variable of a cluster. The order is the order of documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Var {
    /// kube-controller-manager `--node-monitor-grace-period`.
    NodeMonitorGracePeriod,
    /// kube-controller-manager `--node-monitor-period`.
    NodeMonitorPeriod,
    /// kube-controller-manager `--node-startup-grace-period`.
    NodeStartupGracePeriod,
    /// kube-apiserver `--default-unreachable-toleration-seconds`.
    UnreachableTolerationSeconds,
    /// kube-apiserver `--default-not-ready-toleration-seconds`.
    NotReadyTolerationSeconds,
    /// Node lease duration (kubelet `nodeLeaseDurationSeconds`, kwok `--node-lease-duration-seconds`).
    NodeLeaseDuration,
    /// kubelet `nodeStatusUpdateFrequency`.
    NodeStatusUpdateFrequency,
    /// Period of the pod garbage collector (force-deletes pods on out-of-service nodes).
    PodGcPeriod,
    /// How long pod GC quarantines pods of a deleted node before deleting them.
    OrphanQuarantine,
    /// How long the attach-detach controller waits for a volume still in use
    /// on an unhealthy node before it force-detaches it: 6 minutes, a
    /// constant (`ReconcilerMaxWaitForUnmountDuration`; no flag sets it).
    MaxWaitForUnmount,
    /// One over kube-controller-manager `--node-eviction-rate`: how far
    /// apart the node lifecycle controller taints a zone's nodes NoExecute
    /// while the zone is healthy (or wholly dark while another is not).
    NodeEvictionInterval,
    /// One over `--secondary-node-eviction-rate`: the same in a partially
    /// disrupted zone of more than `largeClusterSizeThreshold` nodes.
    SecondaryEvictionInterval,
}

impl Var {
    pub const ALL: [Var; 12] = [
        Var::NodeMonitorGracePeriod,
        Var::NodeMonitorPeriod,
        Var::NodeStartupGracePeriod,
        Var::UnreachableTolerationSeconds,
        Var::NotReadyTolerationSeconds,
        Var::NodeLeaseDuration,
        Var::NodeStatusUpdateFrequency,
        Var::PodGcPeriod,
        Var::OrphanQuarantine,
        Var::MaxWaitForUnmount,
        Var::NodeEvictionInterval,
        Var::SecondaryEvictionInterval,
    ];

    /// The canonical name used in scenarios and reports.
    pub fn name(self) -> &'static str {
        match self {
            Var::NodeMonitorGracePeriod => "nodeMonitorGracePeriod",
            Var::NodeMonitorPeriod => "nodeMonitorPeriod",
            Var::NodeStartupGracePeriod => "nodeStartupGracePeriod",
            Var::UnreachableTolerationSeconds => "unreachableTolerationSeconds",
            Var::NotReadyTolerationSeconds => "notReadyTolerationSeconds",
            Var::NodeLeaseDuration => "nodeLeaseDuration",
            Var::NodeStatusUpdateFrequency => "nodeStatusUpdateFrequency",
            Var::PodGcPeriod => "podGcPeriod",
            Var::OrphanQuarantine => "orphanQuarantine",
            Var::MaxWaitForUnmount => "maxWaitForUnmount",
            Var::NodeEvictionInterval => "nodeEvictionInterval",
            Var::SecondaryEvictionInterval => "secondaryNodeEvictionInterval",
        }
    }

    /// The short alias, where one exists (`grace`, `toleration`, ...).
    pub fn alias(self) -> Option<&'static str> {
        match self {
            Var::NodeMonitorGracePeriod => Some("grace"),
            Var::NodeMonitorPeriod => Some("monitorPeriod"),
            Var::UnreachableTolerationSeconds => Some("toleration"),
            Var::NotReadyTolerationSeconds => Some("notReadyToleration"),
            Var::NodeLeaseDuration => Some("lease"),
            Var::PodGcPeriod => Some("podGc"),
            Var::NodeEvictionInterval => Some("evictionInterval"),
            Var::SecondaryEvictionInterval => Some("secondaryEvictionInterval"),
            _ => None,
        }
    }

    /// Looks a variable up by canonical name or alias. `tolerationSeconds`
    /// (the name DESIGN.md's sketch uses) is accepted for the unreachable one.
    pub fn lookup(name: &str) -> Option<Var> {
        if name == "tolerationSeconds" {
            return Some(Var::UnreachableTolerationSeconds);
        }
        Var::ALL
            .into_iter()
            .find(|v| v.name() == name || v.alias() == Some(name))
    }

    /// The rate flag a variable is one over, where it is one.
    pub fn rate_flag(self) -> Option<&'static str> {
        match self {
            Var::NodeEvictionInterval => Some("node-eviction-rate"),
            Var::SecondaryEvictionInterval => Some("secondary-node-eviction-rate"),
            _ => None,
        }
    }

    /// The interval variable a rate's name (`nodeEvictionRate`) stands
    /// for: a window is a time, so a rate is refused with this to use.
    pub fn interval_of_rate(name: &str) -> Option<Var> {
        match name {
            "nodeEvictionRate" | "evictionRate" => Some(Var::NodeEvictionInterval),
            "secondaryNodeEvictionRate" | "secondaryEvictionRate" => {
                Some(Var::SecondaryEvictionInterval)
            }
            _ => None,
        }
    }

    /// Every accepted spelling, for "did you mean" and error messages.
    pub fn all_names() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Var::ALL
            .into_iter()
            .flat_map(|v| std::iter::once(v.name()).chain(v.alias()))
            .collect();
        names.push("tolerationSeconds");
        names
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The numbers of one cluster configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimingProfile {
    pub name: String,
    #[serde(with = "millis")]
    pub node_monitor_grace_period: Duration,
    #[serde(with = "millis")]
    pub node_monitor_period: Duration,
    #[serde(with = "millis")]
    pub node_startup_grace_period: Duration,
    #[serde(with = "millis")]
    pub unreachable_toleration: Duration,
    #[serde(with = "millis")]
    pub not_ready_toleration: Duration,
    #[serde(with = "millis")]
    pub node_lease_duration: Duration,
    #[serde(with = "millis")]
    pub node_status_update_frequency: Duration,
    #[serde(with = "millis")]
    pub pod_gc_period: Duration,
    #[serde(with = "millis")]
    pub orphan_quarantine: Duration,
    /// Written only when not the constant it is (results written before it
    /// was a variable read as that constant).
    #[serde(
        with = "millis",
        default = "max_wait_for_unmount",
        skip_serializing_if = "is_max_wait_for_unmount"
    )]
    pub max_wait_for_unmount: Duration,
    /// `nodeEvictionInterval` (written only when not upstream's 10 s).
    #[serde(
        with = "millis",
        default = "eviction_interval",
        skip_serializing_if = "is_eviction_interval"
    )]
    pub node_eviction_interval: Duration,
    /// `secondaryNodeEvictionInterval` (written only when not upstream's 100 s).
    #[serde(
        with = "millis",
        default = "secondary_eviction_interval",
        skip_serializing_if = "is_secondary_eviction_interval"
    )]
    pub secondary_eviction_interval: Duration,
    /// The zone rules that are not times (written only when not upstream's).
    #[serde(default, skip_serializing_if = "ZoneRules::is_upstream")]
    pub zones: ZoneRules,
    /// Whether the attach-detach controller force-detaches a volume still
    /// mounted on an unhealthy node once `maxWaitForUnmount` has passed
    /// (kube-controller-manager's `--disable-force-detach-on-timeout` turns
    /// it off: then only the out-of-service taint, or the node coming back,
    /// releases it). Written only when off.
    #[serde(default = "on", skip_serializing_if = "is_on")]
    pub force_detach_on_timeout: bool,
    /// Where `force_detach_on_timeout` came from (None: the built-in
    /// profile's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_detach_origin: Option<Origin>,
    /// Where each value came from (empty: a built-in profile as is).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub origins: BTreeMap<Var, Origin>,
}

/// The node lifecycle controller's zone rules that are not times
/// (kube-controller-manager flags; `disruption` applies them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneRules {
    /// `--unhealthy-zone-threshold`: the share of a zone's nodes not ready
    /// (more than 2 of them) that makes it partially disrupted.
    pub unhealthy_zone_threshold: f64,
    /// `--large-cluster-size-threshold`: a partially disrupted zone of more
    /// nodes than this goes on at the secondary pace, a smaller one stops.
    pub large_cluster_size_threshold: u32,
    /// Where each came from (empty: a built-in profile's own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub origins: BTreeMap<ZoneRule, Origin>,
}

/// One of [`ZoneRules`]' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ZoneRule {
    UnhealthyZoneThreshold,
    LargeClusterSizeThreshold,
}

impl ZoneRule {
    pub const ALL: [ZoneRule; 2] = [
        ZoneRule::UnhealthyZoneThreshold,
        ZoneRule::LargeClusterSizeThreshold,
    ];

    /// Its name in plans and reports.
    pub fn name(self) -> &'static str {
        match self {
            ZoneRule::UnhealthyZoneThreshold => "unhealthyZoneThreshold",
            ZoneRule::LargeClusterSizeThreshold => "largeClusterSizeThreshold",
        }
    }

    /// kube-controller-manager's flag that sets it.
    pub fn flag(self) -> &'static str {
        match self {
            ZoneRule::UnhealthyZoneThreshold => "unhealthy-zone-threshold",
            ZoneRule::LargeClusterSizeThreshold => "large-cluster-size-threshold",
        }
    }
}

impl Default for ZoneRules {
    fn default() -> Self {
        ZoneRules {
            unhealthy_zone_threshold: 0.55,
            large_cluster_size_threshold: 50,
            origins: BTreeMap::new(),
        }
    }
}

impl ZoneRules {
    fn is_upstream(&self) -> bool {
        *self == ZoneRules::default()
    }

    /// The value of `rule` as a flag writes it (`0.55`, `50`).
    pub fn value(&self, rule: ZoneRule) -> String {
        match rule {
            ZoneRule::UnhealthyZoneThreshold => self.unhealthy_zone_threshold.to_string(),
            ZoneRule::LargeClusterSizeThreshold => self.large_cluster_size_threshold.to_string(),
        }
    }
}

/// Where a timing value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Origin {
    /// nodefall started the cluster with it, or `--profile` said so.
    Set { by: String },
    /// Read from the cluster (a flag, a configuration, the version's default).
    Discovered { from: String },
    /// The scenario's `timing:`.
    Scenario,
    /// Not known: the upstream default, taken on trust.
    Assumed { why: String },
}

impl Origin {
    /// One word for tables: `set`, `discovered`, `scenario`, `assumed`.
    pub fn word(&self) -> &'static str {
        match self {
            Origin::Set { .. } => "set",
            Origin::Discovered { .. } => "discovered",
            Origin::Scenario => "scenario",
            Origin::Assumed { .. } => "assumed",
        }
    }

    /// Where, in words.
    pub fn detail(&self) -> &str {
        match self {
            Origin::Set { by } => by,
            Origin::Discovered { from } => from,
            Origin::Scenario => "the scenario's `timing:`",
            Origin::Assumed { why } => why,
        }
    }
}

/// The name the force detach after `maxWaitForUnmount` goes by in plans
/// and reports.
pub const FORCE_DETACH: &str = "forceDetachOnTimeout";

/// The profiles nodefall knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum ProfileName {
    /// Upstream defaults of Kubernetes 1.32 and newer.
    Default,
    /// Compressed timings for the simulated cluster: a 5-minute experiment in ~30s.
    Fast,
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProfileName::Default => "default",
            ProfileName::Fast => "fast",
        })
    }
}

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The attach-detach controller's `maxWaitForUnmountDuration` (6 minutes,
/// compiled in: `pkg/controller/volume/attachdetach`, v1.35.4).
const fn max_wait_for_unmount() -> Duration {
    secs(360)
}

fn is_max_wait_for_unmount(d: &Duration) -> bool {
    *d == max_wait_for_unmount()
}

/// One over `--node-eviction-rate`'s default (0.1 nodes/s).
const fn eviction_interval() -> Duration {
    secs(10)
}

fn is_eviction_interval(d: &Duration) -> bool {
    *d == eviction_interval()
}

/// One over `--secondary-node-eviction-rate`'s default (0.01 nodes/s).
const fn secondary_eviction_interval() -> Duration {
    secs(100)
}

fn is_secondary_eviction_interval(d: &Duration) -> bool {
    *d == secondary_eviction_interval()
}

/// What a rate of 0 makes an interval: no token ever comes.
pub const NEVER: Duration = Duration::from_millis(u64::MAX);

/// The interval of a rate in nodes per second (0: [`NEVER`]); None for a
/// negative or non-finite rate.
pub fn interval_of(rate: f64) -> Option<Duration> {
    if rate == 0.0 {
        return Some(NEVER);
    }
    (rate.is_finite() && rate > 0.0)
        .then(|| Duration::try_from_secs_f64(1.0 / rate).ok())
        .flatten()
        .map(|d| {
            if d.as_millis() >= u128::from(u64::MAX) {
                NEVER
            } else {
                d
            }
        })
}

/// The rate of an interval, as a flag writes it (`0.1`; `0` for [`NEVER`]).
pub fn rate_written(interval: Duration) -> String {
    if interval == NEVER || interval.is_zero() {
        return "0".into();
    }
    let rate = 1.0 / interval.as_secs_f64();
    // a few significant digits, no float noise (1/3 s -> 3, 1/7 s -> 0.142857)
    let text = format!("{rate:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

const fn on() -> bool {
    true
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_on(b: &bool) -> bool {
    *b
}

impl TimingProfile {
    /// Upstream defaults (kube-controller-manager, kube-apiserver, kubelet) of 1.32+.
    pub fn upstream_default() -> Self {
        TimingProfile {
            name: "default".into(),
            node_monitor_grace_period: secs(50),
            node_monitor_period: secs(5),
            node_startup_grace_period: secs(60),
            unreachable_toleration: secs(300),
            not_ready_toleration: secs(300),
            node_lease_duration: secs(40),
            node_status_update_frequency: secs(10),
            pod_gc_period: secs(20),
            orphan_quarantine: secs(40),
            max_wait_for_unmount: max_wait_for_unmount(),
            node_eviction_interval: eviction_interval(),
            secondary_eviction_interval: secondary_eviction_interval(),
            zones: ZoneRules::default(),
            force_detach_on_timeout: true,
            force_detach_origin: None,
            origins: BTreeMap::new(),
        }
    }

    /// Compressed timings the `sim` backend can run with. The lease must be
    /// renewed (every lease/4) well inside the grace period, or healthy nodes flap.
    pub fn fast() -> Self {
        TimingProfile {
            name: "fast".into(),
            node_monitor_grace_period: secs(8),
            node_monitor_period: secs(1),
            node_startup_grace_period: secs(10),
            unreachable_toleration: secs(20),
            not_ready_toleration: secs(20),
            node_lease_duration: secs(4),
            node_status_update_frequency: secs(1),
            // pod GC period, orphan quarantine and the force detach's wait
            // are compiled into kube-controller-manager
            pod_gc_period: secs(20),
            orphan_quarantine: secs(40),
            max_wait_for_unmount: max_wait_for_unmount(),
            // The normal pace is upstream's; a zone of more than 4 nodes is
            // large, and its secondary pace one node per 20 s, so each zone
            // rule shows on a handful of sim nodes within a minute.
            node_eviction_interval: eviction_interval(),
            secondary_eviction_interval: secs(20),
            zones: ZoneRules {
                large_cluster_size_threshold: 4,
                ..ZoneRules::default()
            },
            force_detach_on_timeout: true,
            force_detach_origin: None,
            origins: BTreeMap::new(),
        }
    }

    pub fn named(name: ProfileName) -> Self {
        match name {
            ProfileName::Default => Self::upstream_default(),
            ProfileName::Fast => Self::fast(),
        }
    }

    /// The same numbers, each marked as set by `by` (a cluster nodefall
    /// started, or `--profile`).
    pub fn set_by(mut self, by: &str) -> Self {
        self.origins = Var::ALL
            .into_iter()
            .map(|v| (v, Origin::Set { by: by.to_owned() }))
            .collect();
        self.zones.origins = ZoneRule::ALL
            .into_iter()
            .map(|r| (r, Origin::Set { by: by.to_owned() }))
            .collect();
        self
    }

    /// The kube-controller-manager flags that set the zone rules, as
    /// (name, value): what the sim and `kind up` start it with.
    pub fn zone_flags(&self) -> [(&'static str, String); 4] {
        [
            (
                "node-eviction-rate",
                rate_written(self.node_eviction_interval),
            ),
            (
                "secondary-node-eviction-rate",
                rate_written(self.secondary_eviction_interval),
            ),
            (
                ZoneRule::UnhealthyZoneThreshold.flag(),
                self.zones.value(ZoneRule::UnhealthyZoneThreshold),
            ),
            (
                ZoneRule::LargeClusterSizeThreshold.flag(),
                self.zones.value(ZoneRule::LargeClusterSizeThreshold),
            ),
        ]
    }

    /// Where a zone rule came from; a built-in profile's values are its own.
    pub fn zone_origin(&self, rule: ZoneRule) -> Origin {
        self.zones
            .origins
            .get(&rule)
            .cloned()
            .unwrap_or_else(|| Origin::Set {
                by: format!("the `{}` profile", self.name),
            })
    }

    /// Where `var` came from; a built-in profile's values are its own.
    pub fn origin(&self, var: Var) -> Origin {
        self.origins
            .get(&var)
            .cloned()
            .unwrap_or_else(|| Origin::Set {
                by: format!("the `{}` profile", self.name),
            })
    }

    /// Each variable with its value and where it came from, for the plan
    /// and the report: `(name, value, origin word, where)`.
    /// The force detach's row follows where it was read from the cluster
    /// or is off.
    /// A result written before the zone rules were variables (origins
    /// without them) lists the rows it had.
    pub fn rows(&self) -> Vec<[String; 4]> {
        let older =
            !self.origins.is_empty() && !self.origins.contains_key(&Var::NodeEvictionInterval);
        let mut rows: Vec<[String; 4]> = Var::ALL
            .into_iter()
            .filter(|v| !(older && v.rate_flag().is_some()))
            .map(|v| {
                let o = self.origin(v);
                [
                    v.alias().unwrap_or(v.name()).to_owned(),
                    interval_words(self.get(v)),
                    o.word().to_owned(),
                    o.detail().to_owned(),
                ]
            })
            .collect();
        if !older {
            rows.extend(ZoneRule::ALL.into_iter().map(|r| {
                let o = self.zone_origin(r);
                [
                    r.name().to_owned(),
                    self.zones.value(r),
                    o.word().to_owned(),
                    o.detail().to_owned(),
                ]
            }));
        }
        if self.force_detach_origin.is_some() || !self.force_detach_on_timeout {
            let o = self.force_detach_origin.clone().unwrap_or(Origin::Set {
                by: format!("the `{}` profile", self.name),
            });
            rows.push([
                FORCE_DETACH.to_owned(),
                self.force_detach_word().to_owned(),
                o.word().to_owned(),
                o.detail().to_owned(),
            ]);
        }
        rows
    }

    /// `on` or `off`, as the plan and the report say it.
    pub fn force_detach_word(&self) -> &'static str {
        if self.force_detach_on_timeout {
            "on"
        } else {
            "off"
        }
    }

    /// The variables whose values are assumed, not known.
    pub fn assumed(&self, vars: impl IntoIterator<Item = Var>) -> Vec<Var> {
        let mut out: Vec<Var> = vars
            .into_iter()
            .filter(|v| matches!(self.origins.get(v), Some(Origin::Assumed { .. })))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    pub fn get(&self, var: Var) -> Duration {
        match var {
            Var::NodeMonitorGracePeriod => self.node_monitor_grace_period,
            Var::NodeMonitorPeriod => self.node_monitor_period,
            Var::NodeStartupGracePeriod => self.node_startup_grace_period,
            Var::UnreachableTolerationSeconds => self.unreachable_toleration,
            Var::NotReadyTolerationSeconds => self.not_ready_toleration,
            Var::NodeLeaseDuration => self.node_lease_duration,
            Var::NodeStatusUpdateFrequency => self.node_status_update_frequency,
            Var::PodGcPeriod => self.pod_gc_period,
            Var::OrphanQuarantine => self.orphan_quarantine,
            Var::MaxWaitForUnmount => self.max_wait_for_unmount,
            Var::NodeEvictionInterval => self.node_eviction_interval,
            Var::SecondaryEvictionInterval => self.secondary_eviction_interval,
        }
    }

    pub fn set(&mut self, var: Var, value: Duration) {
        let slot = match var {
            Var::NodeMonitorGracePeriod => &mut self.node_monitor_grace_period,
            Var::NodeMonitorPeriod => &mut self.node_monitor_period,
            Var::NodeStartupGracePeriod => &mut self.node_startup_grace_period,
            Var::UnreachableTolerationSeconds => &mut self.unreachable_toleration,
            Var::NotReadyTolerationSeconds => &mut self.not_ready_toleration,
            Var::NodeLeaseDuration => &mut self.node_lease_duration,
            Var::NodeStatusUpdateFrequency => &mut self.node_status_update_frequency,
            Var::PodGcPeriod => &mut self.pod_gc_period,
            Var::OrphanQuarantine => &mut self.orphan_quarantine,
            Var::MaxWaitForUnmount => &mut self.max_wait_for_unmount,
            Var::NodeEvictionInterval => &mut self.node_eviction_interval,
            Var::SecondaryEvictionInterval => &mut self.secondary_eviction_interval,
        };
        *slot = value;
    }
}

/// A duration as plans and reports say it; [`NEVER`] as `never`.
pub fn interval_words(d: Duration) -> String {
    if d == NEVER {
        "never".into()
    } else {
        crate::duration::format_duration(d)
    }
}

/// A duration as whole milliseconds, in results (shared by the model's
/// serialized durations).
pub(crate) mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_resolve() {
        assert_eq!(Var::lookup("grace"), Some(Var::NodeMonitorGracePeriod));
        assert_eq!(
            Var::lookup("tolerationSeconds"),
            Some(Var::UnreachableTolerationSeconds)
        );
        assert_eq!(Var::lookup("podGcPeriod"), Some(Var::PodGcPeriod));
        assert_eq!(Var::lookup("graec"), None);
        for v in Var::ALL {
            assert_eq!(Var::lookup(v.name()), Some(v));
        }
    }

    #[test]
    fn an_interval_is_one_over_its_rate_and_a_rate_of_0_is_never() {
        assert_eq!(interval_of(0.1), Some(secs(10)));
        assert_eq!(interval_of(0.05), Some(secs(20)));
        assert_eq!(interval_of(0.0), Some(NEVER));
        assert_eq!(interval_of(-1.0), None);
        assert_eq!(interval_of(f64::NAN), None);
        assert_eq!(rate_written(secs(10)), "0.1");
        assert_eq!(rate_written(secs(100)), "0.01");
        assert_eq!(rate_written(NEVER), "0");
        assert_eq!(interval_words(NEVER), "never");
        assert_eq!(
            Var::lookup("evictionInterval"),
            Some(Var::NodeEvictionInterval)
        );
        assert_eq!(
            Var::interval_of_rate("nodeEvictionRate"),
            Some(Var::NodeEvictionInterval)
        );
    }

    #[test]
    fn upstream_zone_rules_and_intervals_are_not_written_and_read_back_as_upstream() {
        let up = TimingProfile::upstream_default();
        let json = serde_json::to_string(&up).unwrap();
        assert!(
            !json.contains("zones") && !json.contains("Eviction"),
            "{json}"
        );
        let back: TimingProfile = serde_json::from_str(&json).unwrap();
        assert_eq!(back, up);
        let fast = TimingProfile::fast().set_by("nodefall sim up");
        let json = serde_json::to_string(&fast).unwrap();
        assert!(json.contains("\"largeClusterSizeThreshold\":4"), "{json}");
        let back: TimingProfile = serde_json::from_str(&json).unwrap();
        assert_eq!(back, fast);
    }

    #[test]
    fn an_older_result_lists_the_rows_it_had() {
        let mut old = TimingProfile::fast().set_by("x");
        old.origins.remove(&Var::NodeEvictionInterval);
        old.origins.remove(&Var::SecondaryEvictionInterval);
        assert_eq!(old.rows().len(), Var::ALL.len() - 2);
        let new = TimingProfile::fast().set_by("x");
        assert_eq!(new.rows().len(), Var::ALL.len() + ZoneRule::ALL.len());
    }

    #[test]
    fn fast_profile_renews_leases_well_inside_the_grace_period() {
        for p in [TimingProfile::upstream_default(), TimingProfile::fast()] {
            assert!(
                p.node_lease_duration / 4 * 3 < p.node_monitor_grace_period,
                "{}",
                p.name
            );
        }
    }
}
