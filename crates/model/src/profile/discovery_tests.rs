//! The discovered profile built from constructed findings: what is read,
//! what stays assumed, and which place wins.

use std::time::Duration;

use super::*;

fn source(component: Component, from: &str, flags: &[(&str, &str)]) -> FlagSource {
    FlagSource {
        component,
        from: from.into(),
        flags: flags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// What a 1.35 controller manager's mirror pod with `flags` shows.
fn kcm(flags: &[(&str, &str)]) -> Findings {
    Findings {
        version: Some("v1.35.4".into()),
        sources: vec![source(
            Component::ControllerManager,
            "mirror pod kube-system/kube-controller-manager-cp",
            flags,
        )],
        problems: vec![],
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn nothing_readable_is_the_upstream_default_all_assumed() {
    let d = build(&Findings::default());
    assert_eq!(d.profile.node_monitor_grace_period, secs(50));
    for v in Var::ALL {
        assert_eq!(d.profile.origin(v).word(), "assumed", "{v}");
    }
}

#[test]
fn the_version_alone_gives_the_grace_default_but_it_stays_assumed() {
    let d = build(&Findings {
        version: Some("v1.31.0".into()),
        ..Findings::default()
    });
    assert_eq!(d.profile.node_monitor_grace_period, secs(40));
    let o = d.profile.origin(Var::NodeMonitorGracePeriod);
    assert_eq!(o.word(), "assumed");
    assert!(
        o.detail().contains("default of 1.31 (server v1.31.0)"),
        "{o:?}"
    );
    let d = build(&Findings {
        version: Some("v1.32.1".into()),
        ..Findings::default()
    });
    assert_eq!(d.profile.node_monitor_grace_period, secs(50));
}

#[test]
fn a_mirror_pod_flag_is_discovered_and_wins_over_the_config_map() {
    let f = Findings {
        version: Some("v1.30.2".into()),
        sources: vec![
            source(
                Component::ControllerManager,
                "mirror pod kube-system/kube-controller-manager-cp",
                &[("node-monitor-grace-period", "20s")],
            ),
            source(
                Component::ControllerManager,
                "ConfigMap kube-system/kubeadm-config",
                &[("node-monitor-grace-period", "40s")],
            ),
            source(
                Component::ApiServer,
                "ConfigMap kube-system/kubeadm-config",
                &[("default-unreachable-toleration-seconds", "60")],
            ),
        ],
        problems: vec![],
    };
    let d = build(&f);
    let p = &d.profile;
    assert_eq!(p.node_monitor_grace_period, secs(20));
    assert_eq!(
        p.origin(Var::NodeMonitorGracePeriod),
        Origin::Discovered {
            from:
                "mirror pod kube-system/kube-controller-manager-cp: --node-monitor-grace-period=20s"
                    .into()
        }
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("has `--node-monitor-grace-period=40s`"))
    );
    assert_eq!(p.unreachable_toleration, secs(60));
    assert_eq!(
        p.origin(Var::UnreachableTolerationSeconds).word(),
        "discovered"
    );
    // read but not set: the version's default, known rather than assumed
    assert_eq!(p.not_ready_toleration, secs(300));
    let o = p.origin(Var::NotReadyTolerationSeconds);
    assert_eq!(o.word(), "discovered");
    assert!(o.detail().contains("not set in ConfigMap"), "{o:?}");
    // only a value the cluster sets can contradict --profile
    assert!(set_on_the_cluster(&p.origin(Var::NodeMonitorGracePeriod)));
    assert!(set_on_the_cluster(
        &p.origin(Var::UnreachableTolerationSeconds)
    ));
    assert!(!set_on_the_cluster(&o));
    assert!(!set_on_the_cluster(&p.origin(Var::NodeLeaseDuration)));
    // no kubelet configuration was read: assumed
    assert_eq!(p.origin(Var::NodeLeaseDuration).word(), "assumed");
    assert_eq!(p.origin(Var::PodGcPeriod).word(), "assumed");
}

#[test]
fn an_unusable_value_is_a_note_and_the_default_stays() {
    let f = Findings {
        version: Some("v1.33.0".into()),
        sources: vec![source(
            Component::ControllerManager,
            "mirror pod kube-system/kcm",
            &[("node-monitor-grace-period", "soon")],
        )],
        problems: vec!["kubelet-config: forbidden (RBAC)".into()],
    };
    let d = build(&f);
    assert_eq!(d.profile.node_monitor_grace_period, secs(50));
    assert_eq!(d.notes.len(), 2, "{:?}", d.notes);
}

/// What kubeadm runs on a kind cluster with upstream defaults: the flag is
/// not on the controller manager's command line, so it runs the default;
/// `--profile fast` contradicts that as surely as a written flag would. The
/// kubelet's fields only left out of the ConfigMap are not binding.
#[test]
fn a_flag_left_out_of_a_running_pod_is_what_the_cluster_runs() {
    let f = Findings {
        version: Some("v1.35.4".into()),
        sources: vec![
            source(
                Component::ControllerManager,
                "mirror pod kube-system/kube-controller-manager-cp",
                &[("leader-elect", "true")],
            ),
            source(
                Component::Kubelet,
                "ConfigMap kube-system/kubelet-config",
                &[("cgroupDriver", "systemd")],
            ),
        ],
        problems: vec![],
    };
    let p = build(&f).profile;
    let grace = p.origin(Var::NodeMonitorGracePeriod);
    assert_eq!(p.node_monitor_grace_period, secs(50));
    assert!(
        grace
            .detail()
            .ends_with("not set in mirror pod kube-system/kube-controller-manager-cp"),
        "{grace:?}"
    );
    assert!(set_on_the_cluster(&grace));
    assert!(!set_on_the_cluster(&p.origin(Var::NodeLeaseDuration)));
}

/// `kind up --disable-force-detach-on-timeout`: the switch on the mirror
/// pod's command line (bare or with a value) is discovered and shown as a
/// row; without it the default (on) is read from the pod; nothing readable
/// leaves it on, assumed; a value that is no boolean is a note.
#[test]
fn the_force_detach_switch_is_discovered() {
    // `command_line` makes a bare switch `true`.
    let words = [
        "kube-controller-manager",
        "--disable-force-detach-on-timeout",
    ];
    let bare = flags::command_line(&words);
    for flags in [
        bare.iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<Vec<_>>(),
        vec![(DISABLE_FORCE_DETACH, "True")],
    ] {
        let p = build(&kcm(&flags)).profile;
        assert!(!p.force_detach_on_timeout, "{flags:?}");
        let row = p.rows().pop().unwrap();
        assert_eq!(row[0], crate::profile::FORCE_DETACH);
        assert_eq!(row[1], "off");
        assert_eq!(row[2], "discovered");
        assert!(
            row[3].ends_with("kube-controller-manager-cp: --disable-force-detach-on-timeout=true")
                || row[3].ends_with("=True"),
            "{row:?}"
        );
    }
    let p = build(&kcm(&[(DISABLE_FORCE_DETACH, "false")])).profile;
    assert!(p.force_detach_on_timeout);
    let p = build(&kcm(&[("leader-elect", "true")])).profile;
    assert!(p.force_detach_on_timeout);
    let row = p.rows().pop().unwrap();
    assert_eq!((row[1].as_str(), row[2].as_str()), ("on", "discovered"));
    assert!(row[3].ends_with("not set in mirror pod kube-system/kube-controller-manager-cp"));
    let nothing = build(&Findings::default()).profile;
    assert!(nothing.force_detach_on_timeout);
    assert_eq!(nothing.rows().pop().unwrap()[2], "assumed");
    let d = build(&kcm(&[(DISABLE_FORCE_DETACH, "maybe")]));
    assert!(d.profile.force_detach_on_timeout);
    assert!(
        d.notes.iter().any(|n| n.contains("not a boolean")),
        "{:?}",
        d.notes
    );
    // A built-in profile says nothing of it; off, it says so.
    let mut fast = TimingProfile::fast();
    assert_eq!(
        fast.rows().len(),
        Var::ALL.len() + crate::profile::ZoneRule::ALL.len()
    );
    fast.force_detach_on_timeout = false;
    assert_eq!(fast.rows().pop().unwrap()[1], "off");
    let json = serde_json::to_string(&fast).unwrap();
    assert!(json.contains("\"forceDetachOnTimeout\":false"), "{json}");
    let back: TimingProfile = serde_json::from_str(&json).unwrap();
    assert!(!back.force_detach_on_timeout);
    let on = serde_json::to_string(&TimingProfile::fast()).unwrap();
    assert!(!on.contains("forceDetach"), "{on}");
}

/// The eviction rates are read as intervals (0: never), the zone thresholds
/// as they are; a value of the wrong kind is a note and the default stays.
#[test]
fn the_zone_rules_are_discovered_from_the_controller_manager() {
    use crate::profile::{NEVER, ZoneRule};
    let d = build(&kcm(&[
        ("node-eviction-rate", "0.2"),
        ("secondary-node-eviction-rate", "0"),
        ("unhealthy-zone-threshold", "0.7"),
        ("large-cluster-size-threshold", "4"),
    ]));
    let p = &d.profile;
    assert_eq!(p.node_eviction_interval, secs(5));
    assert_eq!(p.secondary_eviction_interval, NEVER);
    assert!((p.zones.unhealthy_zone_threshold - 0.7).abs() < 1e-9);
    assert_eq!(p.zones.large_cluster_size_threshold, 4);
    let o = p.origin(Var::NodeEvictionInterval);
    assert!(o.detail().ends_with("--node-eviction-rate=0.2"), "{o:?}");
    let o = p.zone_origin(ZoneRule::LargeClusterSizeThreshold);
    assert_eq!(o.word(), "discovered");
    assert!(
        o.detail().ends_with("--large-cluster-size-threshold=4"),
        "{o:?}"
    );
    let rows = p.rows();
    let row = |name: &str| rows.iter().find(|r| r[0] == name).cloned().unwrap();
    assert_eq!(row("secondaryEvictionInterval")[1], "never");
    assert_eq!(row("unhealthyZoneThreshold")[1], "0.7");
    // Not set: the defaults, read from the pod.
    let d = build(&kcm(&[("leader-elect", "true")]));
    assert_eq!(d.profile.node_eviction_interval, secs(10));
    assert_eq!(d.profile.secondary_eviction_interval, secs(100));
    assert_eq!(d.profile.zones.large_cluster_size_threshold, 50);
    let o = d.profile.zone_origin(ZoneRule::UnhealthyZoneThreshold);
    assert!(o.detail().contains("not set in mirror pod"), "{o:?}");
    // Unusable: a note each, the defaults stay.
    let d = build(&kcm(&[
        ("node-eviction-rate", "-1"),
        ("unhealthy-zone-threshold", "1.5"),
        ("large-cluster-size-threshold", "many"),
    ]));
    assert_eq!(d.profile.node_eviction_interval, secs(10));
    assert_eq!(
        d.profile.zones,
        crate::profile::ZoneRules {
            origins: d.profile.zones.origins.clone(),
            ..crate::profile::ZoneRules::default()
        }
    );
    assert_eq!(d.notes.len(), 3, "{:?}", d.notes);
}
