//! A discovered timing profile (pure): what a cluster says about itself,
//! the control-plane flags each place shows ([`FlagSource`], read by the io
//! crate's `discover`), made into a [`TimingProfile`] whose every value
//! keeps where it came from ([`Origin`]); what could not be read stays the
//! upstream default, marked assumed, so a window that depends on it can say
//! so.

use std::collections::BTreeMap;
use std::time::Duration;

use super::flags::{self, Component, minor_version, settings};
use super::{Origin, TimingProfile, Var, ZoneRule};

/// Flags of one component as one place shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagSource {
    pub component: Component,
    /// `mirror pod kube-system/kube-controller-manager-cp`, `ConfigMap kube-system/kubeadm-config`.
    pub from: String,
    pub flags: BTreeMap<String, String>,
}

/// What was read from a cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// `gitVersion` of the API server.
    pub version: Option<String>,
    /// Every place flags were read from, the most authoritative first
    /// (mirror pods: what runs; then the ConfigMaps: what was configured).
    pub sources: Vec<FlagSource>,
    /// What could not be read, in words.
    pub problems: Vec<String>,
}

/// A cluster's timing profile and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    pub profile: TimingProfile,
    /// Remarks for the user: disagreements, unreadable values, what was not readable.
    pub notes: Vec<String>,
}

/// The grace period's default for a server version: 40 s up to 1.31, 50 s from 1.32.
pub fn default_grace(version: (u32, u32)) -> Duration {
    if version < (1, 32) {
        Duration::from_secs(40)
    } else {
        Duration::from_secs(50)
    }
}

fn component_of(var: Var) -> Option<Component> {
    match var {
        Var::NodeMonitorGracePeriod
        | Var::NodeMonitorPeriod
        | Var::NodeStartupGracePeriod
        | Var::NodeEvictionInterval
        | Var::SecondaryEvictionInterval => Some(Component::ControllerManager),
        Var::UnreachableTolerationSeconds | Var::NotReadyTolerationSeconds => {
            Some(Component::ApiServer)
        }
        Var::NodeLeaseDuration | Var::NodeStatusUpdateFrequency => Some(Component::Kubelet),
        Var::PodGcPeriod | Var::OrphanQuarantine | Var::MaxWaitForUnmount => None,
    }
}

/// Whether a discovered value is what the cluster runs: read from a setting
/// it has (a flag, a configuration field), or the version's default of a
/// flag a running component's command line (its pod) leaves out, which that
/// component runs with as surely as with a flag written there. A default
/// only because a ConfigMap does not set the field is not: a node may be
/// configured otherwise.
pub fn set_on_the_cluster(origin: &Origin) -> bool {
    match origin {
        Origin::Discovered { from } => {
            let by_default =
                from.starts_with(VERSION_DEFAULT) || from.starts_with(UPSTREAM_DEFAULT);
            let left_out_of_a_pod = [MIRROR_POD, POD]
                .iter()
                .any(|p| from.contains(&format!("{NOT_SET_IN}{p} ")));
            !by_default || left_out_of_a_pod
        }
        _ => false,
    }
}

/// How the places a value is read from are named: `mirror pod
/// kube-system/NAME`, `pod kube-system/NAME`.
pub const MIRROR_POD: &str = "mirror pod";
pub const POD: &str = "pod";
/// How a value no place sets is said: `...: not set in PLACE`.
const NOT_SET_IN: &str = ": not set in ";

/// How a value taken from the server version's default is introduced.
const VERSION_DEFAULT: &str = "the default of ";
const UPSTREAM_DEFAULT: &str = "the upstream default ";

/// Builds the profile from what was found (pure).
pub fn build(f: &Findings) -> Discovery {
    let mut profile = TimingProfile::upstream_default();
    profile.name = "discovered".into();
    let mut notes = Vec::new();
    let version = f.version.as_deref().and_then(minor_version);
    if let Some((major, minor)) = version {
        profile.node_monitor_grace_period = default_grace((major, minor));
    }
    let vtext = match (&f.version, version) {
        (Some(v), Some((major, minor))) => format!("{VERSION_DEFAULT}{major}.{minor} (server {v})"),
        _ => format!("{UPSTREAM_DEFAULT}(1.32+; the server version was not readable)"),
    };
    // Each place's settings, parsed once; what is there but unusable is said.
    let mut unusable = Vec::new();
    let parsed: Vec<(&FlagSource, Vec<flags::Setting>)> = f
        .sources
        .iter()
        .map(|s| {
            let (found, bad) = settings(s.component, &s.flags);
            unusable.extend(bad.into_iter().map(|b| {
                format!(
                    "{}: `{}` is not usable ({}); the default is used",
                    s.from, b.written, b.why
                )
            }));
            (s, found)
        })
        .collect();
    for var in Var::ALL {
        let origin = match component_of(var) {
            None => Origin::Assumed {
                why: "fixed inside kube-controller-manager (no flag sets it)".into(),
            },
            Some(c) => {
                let read: Vec<&(&FlagSource, Vec<flags::Setting>)> =
                    parsed.iter().filter(|(s, _)| s.component == c).collect();
                let setting_in = |found: &'_ [flags::Setting]| -> Option<flags::Setting> {
                    found.iter().find(|x| x.var == var).cloned()
                };
                let found = read
                    .iter()
                    .find_map(|(s, found)| setting_in(found).map(|x| (s.from.as_str(), x)));
                match (found, read.first()) {
                    (Some((from, setting)), _) => {
                        // a less authoritative place that says otherwise is worth a note
                        for (other, theirs) in read.iter().filter(|(s, _)| s.from != from) {
                            if let Some(t) = setting_in(theirs)
                                && t.value != setting.value
                            {
                                notes.push(format!(
                                    "{var}: {from} has `{}` but {} has `{}`; using the first",
                                    setting.written, other.from, t.written
                                ));
                            }
                        }
                        profile.set(var, setting.value);
                        Origin::Discovered {
                            from: format!("{from}: {}", setting.written),
                        }
                    }
                    (None, Some((s, _))) => Origin::Discovered {
                        from: format!("{vtext}{NOT_SET_IN}{}", s.from),
                    },
                    (None, None) => Origin::Assumed {
                        why: format!("{vtext}; {}'s settings were not readable", c.name()),
                    },
                }
            }
        };
        profile.origins.insert(var, origin);
    }
    force_detach(&mut profile, &parsed, &vtext, &mut unusable);
    zone_rules(&mut profile, &parsed, &vtext, &mut unusable);
    notes.extend(unusable);
    notes.extend(f.problems.iter().cloned());
    Discovery { profile, notes }
}

/// A kube-controller-manager flag that is not a time, from the most
/// authoritative place that says: its value read by `read` (None: not
/// usable, said in `unusable`), and where it came from. `what` says what the
/// value must be.
fn controller_flag<T>(
    parsed: &[(&FlagSource, Vec<flags::Setting>)],
    flag: &str,
    what: &str,
    read: impl Fn(&str) -> Option<T>,
    vtext: &str,
    unusable: &mut Vec<String>,
) -> (Option<T>, Origin) {
    let places: Vec<&FlagSource> = parsed
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| s.component == Component::ControllerManager)
        .collect();
    let found = places
        .iter()
        .find_map(|s| s.flags.get(flag).map(|v| (s.from.as_str(), v.as_str())));
    match (found, places.first()) {
        (Some((from, value)), _) => {
            let written = format!("--{flag}={value}");
            match read(value) {
                Some(v) => (
                    Some(v),
                    Origin::Discovered {
                        from: format!("{from}: {written}"),
                    },
                ),
                None => {
                    unusable.push(format!(
                        "{from}: `{written}` is not usable (not {what}); the default is used"
                    ));
                    (
                        None,
                        Origin::Assumed {
                            why: format!("{vtext}: `{written}` is not {what}"),
                        },
                    )
                }
            }
        }
        (None, Some(s)) => (
            None,
            Origin::Discovered {
                from: format!("{vtext}{NOT_SET_IN}{}", s.from),
            },
        ),
        (None, None) => (
            None,
            Origin::Assumed {
                why: format!(
                    "{vtext}; {}'s settings were not readable",
                    Component::ControllerManager.name()
                ),
            },
        ),
    }
}

/// kube-controller-manager's `--disable-force-detach-on-timeout` (a
/// switch, off by default).
fn force_detach(
    profile: &mut TimingProfile,
    parsed: &[(&FlagSource, Vec<flags::Setting>)],
    vtext: &str,
    unusable: &mut Vec<String>,
) {
    let (disabled, origin) = controller_flag(
        parsed,
        DISABLE_FORCE_DETACH,
        "a boolean",
        go_bool,
        vtext,
        unusable,
    );
    if let Some(disabled) = disabled {
        profile.force_detach_on_timeout = !disabled;
    }
    profile.force_detach_origin = Some(origin);
}

/// `--unhealthy-zone-threshold` (a share, 0 to 1) and
/// `--large-cluster-size-threshold` (a node count).
fn zone_rules(
    profile: &mut TimingProfile,
    parsed: &[(&FlagSource, Vec<flags::Setting>)],
    vtext: &str,
    unusable: &mut Vec<String>,
) {
    let rule = ZoneRule::UnhealthyZoneThreshold;
    let (share, origin) = controller_flag(
        parsed,
        rule.flag(),
        "a share between 0 and 1",
        |v| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| (0.0..=1.0).contains(x))
        },
        vtext,
        unusable,
    );
    if let Some(share) = share {
        profile.zones.unhealthy_zone_threshold = share;
    }
    profile.zones.origins.insert(rule, origin);
    let rule = ZoneRule::LargeClusterSizeThreshold;
    let (size, origin) = controller_flag(
        parsed,
        rule.flag(),
        "a whole number of nodes",
        |v| v.trim().parse::<u32>().ok(),
        vtext,
        unusable,
    );
    if let Some(size) = size {
        profile.zones.large_cluster_size_threshold = size;
    }
    profile.zones.origins.insert(rule, origin);
}

/// The flag that turns the force detach off.
pub const DISABLE_FORCE_DETACH: &str = "disable-force-detach-on-timeout";

/// A Go boolean flag's value (`strconv.ParseBool`).
fn go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
